//! Storage for sless: the SQL registry (functions, versions, triggers, jobs) with the invocation
//! log on SQLite or PostgreSQL, and the blob store of code archives in a folder or an S3
//! bucket. The stores implement the traits of `sless_core::traits`.

mod blob;
mod sql;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use blob::ObjectBlobStore;
pub use sql::SqlRegistry;

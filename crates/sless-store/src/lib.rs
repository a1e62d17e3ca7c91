//! Storage for sless: the SQL registry (functions, versions, triggers, jobs) with the invocation
//! log on SQLite or PostgreSQL, the blob store of code archives in a folder or an S3 bucket,
//! and the collector of unused versions and archives. The stores implement the traits of
//! `sless_core::traits`.

mod blob;
pub mod gc;
mod last_known;
mod sql;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use blob::ObjectBlobStore;
pub use gc::{GcPolicy, GcReport};
pub use last_known::LastKnown;
pub use sql::SqlRegistry;

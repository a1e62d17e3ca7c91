//! Storage for sless: the SQL registry (functions, versions, triggers, jobs) with the invocation
//! log, and the blob store of code archives. Both implement the traits of `sless_core::traits`.

mod blob;
mod sqlite;

pub use blob::LocalBlobStore;
pub use sqlite::SqliteRegistry;

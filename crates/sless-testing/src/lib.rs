//! Test support for sless: in-memory fakes of every backend trait of
//! `sless_core::traits` and chainable builders of the records they store.
//!
//! - [`FakeRegistry`]: functions, versions, triggers and jobs with the SQL registry's
//!   semantics (`crates/sless-store/src/sql/tests.rs` is the suite both follow), a
//!   [`ChangeFeed`](sless_core::traits::ChangeFeed) announcing every write, and hooks to lose
//!   notifications ([`FakeRegistry::silence`]) or fail calls ([`FakeRegistry::failures`]);
//! - [`FakeInvocationLog`]: invocation records, listed, fetched and pruned as the SQL log does;
//! - [`FakeTenants`]: namespaces and tokens, as the SQL store keeps them;
//! - [`FakeBlobStore`]: blobs in memory, listed by folder;
//! - [`FakeExecutor`]: records every call, answers with scripted build outcomes and invoke
//!   results per function, can hold calls open, and counts prewarms and removes;
//! - [`fixtures`]: [`FunctionBuilder`], [`TriggerBuilder`], [`JobBuilder`],
//!   [`InvocationBuilder`].
//!
//! A dev-dependency only: nothing here is meant for production code.

mod blobs;
mod executor;
mod failures;
pub mod fixtures;
mod invocations;
mod registry;
mod table;
mod tenants;

pub use blobs::FakeBlobStore;
pub use executor::{FakeExecutor, InvokeCall};
pub use failures::Failures;
pub use fixtures::{FunctionBuilder, InvocationBuilder, JobBuilder, TriggerBuilder};
pub use invocations::FakeInvocationLog;
pub use registry::FakeRegistry;
pub use tenants::FakeTenants;

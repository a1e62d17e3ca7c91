//! The sless local executor: builds versions into folders, runs them as supervised runtime
//! processes (one Unix socket pair per instance, see `runtimes/PROTOCOL.md`), and carries out
//! the decisions of `sless_core::decide` against the registry.

mod builder;
mod cgroup;
mod controller;
mod dispatcher;
mod error;
mod executor;
mod instance;
mod logs;
mod metrics;
mod protocol;
mod recorder;
mod routes;
mod shims;

pub use builder::BuildOutput;
pub use controller::spawn_controllers;
pub use dispatcher::{CallSource, Dispatcher, Rejection};
pub use error::{Error, Result};
pub use executor::{LocalConfig, LocalExecutor};
pub use logs::{LogHub, LogLine};
pub use metrics::Metrics;
pub use recorder::{Recorder, RecorderConfig};
pub use routes::{MAX_AGE as ROUTE_CACHE_MAX_AGE, RouteCache};
pub use shims::Interpreters;

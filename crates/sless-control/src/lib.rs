//! The backend-neutral control plane of sless: everything between the HTTP API and a
//! backend that is the same whether functions run as local processes or on Kubernetes
//! (docs/architecture.md, "The control plane"). It works only through the traits of
//! `sless_core::traits` (`Registry`, `Executor`, `BlobStore`, `InvocationLog`):
//!
//! - [`Dispatcher`]: every call — finds the target, calls the executor, answers, counts, records;
//! - [`RouteCache`]: what a call needs from the registry, in memory;
//! - [`Recorder`]: invocation records written off the request path, in batches;
//! - [`Rollouts`]: builds and the statuses around them, resumed after a restart;
//! - [`spawn_controllers`]: the trigger (cron) and job controllers;
//! - [`LogHub`]: recent output lines per function, and live followers;
//! - [`Metrics`]: the Prometheus metrics;
//! - [`gc`]: the collector of unused versions and archives;
//! - [`LastKnown`]: the invoke path's registry while the database is unreachable.

mod controller;
mod dispatcher;
mod error;
pub mod gc;
mod last_known;
mod logs;
pub mod metrics;
mod recorder;
mod rollout;
mod routes;

pub use controller::spawn_controllers;
pub use dispatcher::{CallSource, Dispatcher, Rejection};
pub use error::{Error, Result};
pub use gc::{GcPolicy, GcReport};
pub use last_known::LastKnown;
pub use logs::{Follow, LogHub, LogLine};
pub use metrics::Metrics;
pub use recorder::{Recorder, RecorderConfig};
pub use rollout::Rollouts;
pub use routes::{MAX_AGE as ROUTE_CACHE_MAX_AGE, RouteCache};

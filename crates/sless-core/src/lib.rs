//! Domain types, validation, code-archive checks and the pure decision logic of sless.
//!
//! Everything here is backend-neutral: the local executor and the Kubernetes operator both
//! carry out the decisions made by [`decide`], and the HTTP layer and the CLI share the
//! validation in [`spec`] and [`archive`]. The seams between the API and the backends are the
//! traits in [`traits`].

pub mod archive;
pub mod decide;
pub mod error;
pub mod event;
mod flat;
pub mod invocation;
pub mod job;
pub mod names;
pub mod report;
pub mod resource_version;
pub mod runtime;
pub mod schedule;
pub mod spec;
pub mod status;
pub mod tenant;
pub mod time;
pub mod traits;
pub mod trigger;

pub use error::{Error, Result};

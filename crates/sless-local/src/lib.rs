//! The local backend of sless: builds versions into folders and runs them as supervised
//! runtime processes on this machine (one Unix socket pair per instance, see
//! `runtimes/PROTOCOL.md`), with instance pools, a warm pool of generic processes, memory
//! cgroups, the sandbox each function process runs in (docs/security.md, "Local backend:
//! function isolation") and the embedded runtime shims. It implements `sless_core::traits::Executor`;
//! the control plane (`sless-control`) drives it (docs/architecture.md, "The local backend").

mod builder;
mod cgroup;
mod error;
mod executor;
mod instance;
mod protocol;
mod sandbox;
mod shims;
mod uids;

pub use error::{Error, Result};
pub use executor::{LocalConfig, LocalExecutor};
pub use sandbox::close_inherited_descriptors;
pub use shims::{Interpreters, shim_source};

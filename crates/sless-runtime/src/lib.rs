//! The sless local executor: builds versions into folders, runs them as supervised runtime
//! processes (one Unix socket pair per instance, see `runtimes/PROTOCOL.md`), and carries out
//! the decisions of `sless_core::decide` against the registry.

mod builder;
mod error;
mod executor;
mod instance;
mod protocol;
mod shims;

pub use builder::BuildOutput;
pub use error::{Error, Result};
pub use executor::{LocalConfig, LocalExecutor};
pub use shims::Interpreters;

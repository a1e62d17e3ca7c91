//! Test support for the Kubernetes backend: a real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and KWOK on 127.0.0.1, run by `scripts/kube-testenv`),
//! a namespace of its own for each test, scripted pod outcomes for what KWOK cannot do, and pods
//! whose container is a real local process ([`local_pod`]).
//!
//! What is real and what is simulated is written down in `docs/kubernetes-testing.md`.
//!
//! ```no_run
//! # async fn demo() -> sless_kube_testenv::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! let ns = sless_kube_testenv::TestNamespace::create("demo").await?;
//! let config_maps = ns.api::<ConfigMap>();
//! # let _ = config_maps;
//! # Ok(()) }
//! ```
//!
//! Tests that need the control plane carry
//! `#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]`; the
//! build script sets that cfg only where Go and `SLESS_TEST_KUBECONFIG` are both absent.

mod env;
pub mod local_pod;
mod namespace;
pub mod scripted;

use std::path::PathBuf;
use std::time::Duration;

pub use env::{ControlPlane, control_plane};
pub use namespace::TestNamespace;

/// What can go wrong while starting the control plane or preparing a test's objects.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `scripts/kube-testenv` could not be run at all.
    #[error("could not run {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// `scripts/kube-testenv` ran and failed; `output` is the end of what it printed.
    #[error("{command} failed ({status}):\n{output}")]
    Script {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The last lines of its standard error.
        output: String,
    },
    /// The control plane could not be started earlier in this test binary (the first
    /// attempt's error, as text: every later test gets it too).
    #[error("the control plane did not start: {0}")]
    Unavailable(String),
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A request to the API server failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Something did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// A pod cannot be given the outcome asked for (see [`scripted::set_outcome`]).
    #[error("pod {pod}: {message}")]
    Pod {
        /// The pod's name.
        pod: String,
        /// What is wrong.
        message: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Calls `probe` every 200 ms until it returns `Ok(Some(value))`, and returns that value.
///
/// # Errors
/// The first error `probe` returns; [`Error::Timeout`] (naming `what`) after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Timeout { what: what.into(), after: timeout });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

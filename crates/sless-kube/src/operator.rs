//! The operator (docs/kubernetes.md, "The operator"): the context its controllers share and
//! [`run`], which runs them all until one shutdown signal.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use kube::Client;

use crate::build::BuildSettings;
use crate::trigger::TriggerSettings;
use crate::workload::Settings;

/// What the controllers need: the client and the operator's settings. Separate from any
/// state an HTTP server sees.
pub struct Context {
    /// The cluster.
    pub client: Client,
    /// Names and bounds of the workloads.
    pub settings: Settings,
    /// How images are built.
    pub build: BuildSettings,
    /// How triggers reach the sless API.
    pub triggers: TriggerSettings,
    /// Reconcile only the resources of this namespace (all when `None`).
    pub watch_namespace: Option<String>,
}

/// Runs the Function and Trigger controllers until `shutdown` completes, then lets their
/// reconciles in flight finish.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let shutdown = shutdown.shared();
    tokio::join!(crate::function::run(ctx.clone(), shutdown.clone()), crate::trigger::run(ctx, shutdown),);
}

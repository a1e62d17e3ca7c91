//! The operator (docs/kubernetes.md, "The operator"): the context its controllers share and
//! [`run`], which runs them all until one shutdown signal.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;

use crate::build::BuildSettings;
use crate::trigger::TriggerSettings;
use crate::workload::Settings;
use crate::{Error, Result};

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
    /// Which tenants' workload namespaces this process made sure of, and when.
    pub tenants: TenantsEnsured,
}

/// When this process last applied each tenant's workload namespace and its policies
/// (`Context::tenants`): a reconcile re-applies them at most every [`TenantsEnsured::EVERY`],
/// so a Function's rollout does not wait for five requests that change nothing.
#[derive(Debug, Default)]
pub struct TenantsEnsured(std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>);

impl TenantsEnsured {
    /// How long an applied tenant counts as ensured (a deleted namespace or a policy changed by
    /// hand is put back within this): 5 min, the controllers' resync.
    pub const EVERY: std::time::Duration = std::time::Duration::from_secs(300);

    /// Whether `tenant` was ensured less than [`TenantsEnsured::EVERY`] ago.
    pub fn fresh(&self, tenant: &str) -> bool {
        let map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(tenant).is_some_and(|at| at.elapsed() < Self::EVERY)
    }

    /// Records that `tenant` was ensured now.
    pub fn done(&self, tenant: &str) {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(tenant.to_string(), std::time::Instant::now());
    }

    /// Forgets `tenant` (after an error, so the next reconcile applies again).
    pub fn forget(&self, tenant: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(tenant);
    }
}

/// Runs the Function and Trigger controllers until `shutdown` completes, then lets their
/// reconciles in flight finish.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let shutdown = shutdown.shared();
    tokio::join!(crate::function::run(ctx.clone(), shutdown.clone()), crate::trigger::run(ctx, shutdown),);
}

/// Leader election: which Lease the operator's replicas share, and how long a holder's lock
/// lasts (docs/kubernetes.md, "Leader election").
#[derive(Debug, Clone, PartialEq)]
pub struct Election {
    /// The Lease's namespace (the sless namespace).
    pub namespace: String,
    /// The Lease's name.
    pub lease: String,
    /// This replica's identity (its pod's name, unique among the replicas).
    pub identity: String,
    /// A holder that has not renewed its lock for this many seconds loses it.
    pub duration_sec: u64,
    /// The holder renews this many seconds before its lock would expire (the clock skew
    /// tolerated between replicas).
    pub grace_sec: u64,
}

/// Runs the controllers ([`run`]) only while this replica holds the Lease of `election`
/// (kube-lease-manager: server-side apply on a `coordination.k8s.io/v1` Lease, so two
/// replicas never hold it at once): a standby waits; a leader that loses the Lease stops its
/// controllers and waits again; at `shutdown` the controllers stop and the Lease is released,
/// so a standby takes over at once rather than after the lock expires.
///
/// Errors: [`Error::Lease`] when the Lease cannot be read or created.
pub async fn run_elected(
    ctx: Arc<Context>,
    election: Election,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let manager = LeaseManagerBuilder::new(ctx.client.clone(), &election.lease)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(election.duration_sec)
        .with_grace(election.grace_sec)
        .with_field_manager(format!("sless-operator-lease-{}", election.identity))
        .build()
        .await
        .map_err(Error::Lease)?;
    let (mut leading, task) = manager.watch().await;
    let shutdown = shutdown.shared();
    loop {
        tokio::select! {
            biased;
            () = shutdown.clone() => break,
            held = leading.wait_for(|l| *l) => if held.is_err() { break },
        }
        tracing::info!(identity = %election.identity, lease = %election.lease, "leading: the controllers run");
        let mut watch = leading.clone();
        let stop = shutdown.clone();
        run(ctx.clone(), async move {
            tokio::select! {
                () = stop => {}
                _ = watch.wait_for(|l| !*l) => {}
            }
        })
        .await;
        if shutdown.peek().is_some() {
            break;
        }
        tracing::warn!(identity = %election.identity, "lost the lease: the controllers stopped until it is held again");
    }
    // Closing the channel makes the lease task release the Lease and end.
    drop(leading);
    match task.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Lease(e)),
        Err(e) => {
            tracing::warn!(error = %e, "the lease task ended abnormally");
            Ok(())
        }
    }
}

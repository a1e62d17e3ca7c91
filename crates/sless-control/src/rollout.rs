//! Rollouts: a new version (or a new spec at the active version) is built by the executor
//! and made active when the build succeeds; a failed build leaves the previous version
//! serving. The statuses on the way follow `sless_core::decide`, so both backends show the
//! same phases and messages (docs/architecture.md, "Rollouts").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sless_core::archive::{blob_key, build_log_key};
use sless_core::decide;
use sless_core::status::VersionPhase;
use sless_core::traits::{BlobStore, BuildOutcome, Executor, InvokeTarget, Registry};
use tracing::Instrument;

use crate::metrics::{BuildLabels, Metrics};

type Key = (String, String);

/// Starts builds in the background, one at a time per function, and writes their outcome
/// to the registry. Clones share the same state.
#[derive(Clone)]
pub struct Rollouts {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Arc<dyn Registry>,
    blobs: Arc<dyn BlobStore>,
    executor: Arc<dyn Executor>,
    metrics: Arc<Metrics>,
    locks: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Rollouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rollouts")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Rollouts {
    /// Rollouts reading archives from `blobs` and building them with `executor`.
    pub fn new(
        registry: Arc<dyn Registry>,
        blobs: Arc<dyn BlobStore>,
        executor: Arc<dyn Executor>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Rollouts {
            inner: Arc::new(Inner {
                registry,
                blobs,
                executor,
                metrics,
                locks: Mutex::default(),
                tasks: Mutex::default(),
            }),
        }
    }

    /// Builds version `version` of the function in the background and, when it succeeds,
    /// makes it active. Returns at once; the outcome is in the function's and the version's
    /// status.
    pub fn start(&self, namespace: &str, name: &str, version: u32) {
        let inner = self.inner.clone();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        let span = tracing::info_span!("rollout", %namespace, function = %name, version);
        let handle = tokio::spawn(
            async move {
                if let Err(e) = inner.rollout(&namespace, &name, version).await {
                    tracing::error!(error = %e, "rollout failed");
                }
            }
            .instrument(span),
        );
        let mut tasks = lock(&self.inner.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    /// Restarts the builds a previous run left unfinished (versions still `Building`), and
    /// builds the active version of functions whose build the executor does not have (a new
    /// server on a shared database and archive store). Errors: the registry's.
    pub async fn resume(&self) -> sless_core::Result<()> {
        let registry = &self.inner.registry;
        for f in registry.all_functions().await? {
            for v in registry.list_versions(&f.namespace, &f.name).await? {
                let resume = v.phase == VersionPhase::Building
                    || (f.active_version == Some(v.version)
                        && !self.inner.executor.is_built(&InvokeTarget::new(&f, &v)).await?);
                if resume {
                    tracing::info!(namespace = %f.namespace, function = %f.name, version = v.version, "building (resumed or not built here)");
                    self.start(&f.namespace, &f.name, v.version);
                }
            }
        }
        Ok(())
    }

    /// Stops the builds still running (at shutdown); their versions stay `Building`, so
    /// [`Rollouts::resume`] starts them again at the next start.
    pub fn shutdown(&self) {
        for t in lock(&self.inner.tasks).drain(..) {
            t.abort();
        }
    }
}

impl Inner {
    async fn rollout(&self, ns: &str, name: &str, version: u32) -> sless_core::Result<()> {
        let guard = lock(&self.locks).entry((ns.to_string(), name.to_string())).or_default().clone();
        let _serialised = guard.lock().await;
        let f = self.registry.get_function(ns, name).await?;
        let v = self.registry.get_version(ns, name, version).await?;
        let status = decide::status_building(&f.status, f.active_version, version, sless_core::time::now());
        self.registry.update_status(ns, name, &status, f.active_version).await?;
        let started = std::time::Instant::now();
        let out = match self.blobs.get(&blob_key(&v.sha256)).await {
            // A platform failure of the build fails this version too (it must not stay
            // `Building` until the next start); the previous version keeps serving.
            Ok(archive) => match self.executor.build(&InvokeTarget::new(&f, &v), archive).await {
                Ok(out) => out,
                Err(e) => BuildOutcome {
                    ok: false,
                    log: format!("error: the build could not run: {e}\n"),
                    message: format!("the build could not run: {e}"),
                },
            },
            Err(e) => BuildOutcome {
                ok: false,
                log: format!("error: cannot read the archive: {e}\n"),
                message: format!("cannot read the archive: {e}"),
            },
        };
        tracing::info!(ok = out.ok, elapsed_ms = started.elapsed().as_millis() as u64, "build finished");
        let outcome = if out.ok { "succeeded" } else { "failed" };
        self.metrics.builds.get_or_create(&BuildLabels { outcome: outcome.into() }).inc();
        self.metrics.build_duration.observe(started.elapsed().as_secs_f64());
        // The function's status first, the version's second: whoever sees the version
        // finished also sees the function's status that follows from it.
        match self.registry.get_function(ns, name).await {
            Ok(f) => {
                let (status, active) = decide::status_after_build(
                    &f.status,
                    f.active_version,
                    version,
                    out.ok,
                    &out.message,
                    sless_core::time::now(),
                );
                self.registry.update_status(ns, name, &status, active).await?;
            }
            Err(sless_core::Error::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
        // The log before the phase: whoever sees the version finished can read its log.
        if let Err(e) = self.blobs.put(&build_log_key(ns, name, version, &v.sha256), out.log.into()).await {
            // The outcome still counts; only the log is lost.
            tracing::warn!(error = %e, "cannot store the build log");
        }
        let phase = if out.ok { VersionPhase::Ready } else { VersionPhase::Failed };
        self.registry.set_version_build(ns, name, version, phase, &out.message).await?;
        Ok(())
    }
}

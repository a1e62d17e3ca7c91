//! The local executor: builds versions and keeps a pool of instances per function.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use sless_core::archive::{ArchiveLimits, blob_key};
use sless_core::decide;
use sless_core::status::VersionPhase;
use sless_core::traits::{BlobStore, Executor, Invocation, InvokeOutcome, InvokeTarget, Registry};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::builder::{BuildOutput, Builder, build_dir, launch_spec};
use crate::instance::{Instance, LaunchSpec};
use crate::logs::LogHub;
use crate::metrics::{BuildLabels, InstanceLabels, Metrics};
use crate::shims::{Interpreters, Shims, install};
use crate::{Error, Result};

/// Settings of the local executor.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The data folder; builds go to `builds/`, shims to `runtimes/`, instance temp folders
    /// to `tmp/`.
    pub data_dir: PathBuf,
    /// The interpreters that run functions.
    pub interpreters: Interpreters,
    /// Longest build (unpack, dependency install, entrypoint load).
    pub build_timeout: Duration,
    /// Most instances of one function at once; calls beyond wait for a free one.
    pub max_instances_per_function: usize,
    /// Limits applied when unpacking archives.
    pub archive_limits: ArchiveLimits,
}

type Key = (String, String);

/// Runs functions as child processes on this machine (DESIGN §6).
#[derive(Clone)]
pub struct LocalExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    config: LocalConfig,
    shims: Shims,
    builds: PathBuf,
    cache: PathBuf,
    tmp: PathBuf,
    registry: Arc<dyn Registry>,
    blobs: Arc<dyn BlobStore>,
    metrics: Arc<Metrics>,
    logs: Arc<LogHub>,
    pools: Mutex<HashMap<Key, Arc<Pool>>>,
    rollout_locks: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The instances of one function at one (spec, version).
struct Pool {
    target: InvokeTarget,
    launch: LaunchSpec,
    idle: Mutex<Vec<Instance>>,
    permits: Semaphore,
    busy: std::sync::atomic::AtomicI64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl LocalExecutor {
    /// Prepares the data folder (shims, build and temp folders). Errors: `Io` when the folder
    /// cannot be written.
    pub fn new(
        config: LocalConfig,
        registry: Arc<dyn Registry>,
        blobs: Arc<dyn BlobStore>,
        metrics: Arc<Metrics>,
        logs: Arc<LogHub>,
    ) -> Result<Self> {
        let shims = install(&config.data_dir.join("runtimes"))?;
        let (builds, cache, tmp) =
            (config.data_dir.join("builds"), config.data_dir.join("cache"), config.data_dir.join("tmp"));
        for dir in [&builds, &cache, &tmp] {
            std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        }
        Ok(LocalExecutor {
            inner: Arc::new(Inner {
                config,
                shims,
                builds,
                cache,
                tmp,
                registry,
                blobs,
                metrics,
                logs,
                pools: Mutex::new(HashMap::new()),
                rollout_locks: Mutex::new(HashMap::new()),
                tasks: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Restarts the builds a previous run left unfinished (versions still `Building`).
    pub async fn resume(&self) -> Result<()> {
        for f in self.inner.registry.all_functions().await? {
            for v in self.inner.registry.list_versions(&f.namespace, &f.name).await? {
                if v.phase == VersionPhase::Building {
                    tracing::info!(namespace = %f.namespace, function = %f.name, version = v.version, "resuming an interrupted build");
                    self.spawn_rollout(f.namespace.clone(), f.name.clone(), v.version);
                }
            }
        }
        Ok(())
    }

    fn spawn_rollout(&self, namespace: String, name: String, version: u32) {
        let inner = self.inner.clone();
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
}

impl Inner {
    async fn rollout(&self, ns: &str, name: &str, version: u32) -> Result<()> {
        let guard = {
            let mut locks = lock(&self.rollout_locks);
            locks.entry((ns.to_string(), name.to_string())).or_default().clone()
        };
        let _serialised = guard.lock().await;
        let f = self.registry.get_function(ns, name).await?;
        let v = self.registry.get_version(ns, name, version).await?;
        let status = decide::status_building(&f.status, f.active_version, version, Utc::now());
        self.registry.update_status(ns, name, &status, f.active_version).await?;
        let target = InvokeTarget {
            namespace: ns.into(),
            name: name.into(),
            spec: f.spec.clone(),
            version,
            sha256: v.sha256.clone(),
        };
        let started = std::time::Instant::now();
        let out = match self.blobs.get(&blob_key(&v.sha256)).await {
            Ok(archive) => self.builder().build(&target, archive).await?,
            Err(e) => BuildOutput {
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
                let (status, active) =
                    decide::status_after_build(&f.status, f.active_version, version, out.ok, &out.message, Utc::now());
                self.registry.update_status(ns, name, &status, active).await?;
            }
            Err(sless_core::Error::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let phase = if out.ok { VersionPhase::Ready } else { VersionPhase::Failed };
        self.registry.set_version_build(ns, name, version, phase, &out.message, &out.log).await?;
        Ok(())
    }

    fn builder(&self) -> Builder<'_> {
        Builder {
            builds: &self.builds,
            cache_home: &self.cache,
            interpreters: &self.config.interpreters,
            shims: &self.shims,
            limits: &self.config.archive_limits,
            timeout: self.config.build_timeout,
        }
    }

    /// The pool for `target`, replacing one made for another spec or version (its busy
    /// instances finish their calls and are then stopped: a rollout drops no call).
    fn pool(&self, target: &InvokeTarget) -> Arc<Pool> {
        let key = (target.namespace.clone(), target.name.clone());
        let mut pools = lock(&self.pools);
        if let Some(p) = pools.get(&key).filter(|p| p.target == *target) {
            return p.clone();
        }
        let dir = build_dir(&self.builds, target.spec.runtime, &target.sha256);
        let pool = Arc::new(Pool {
            target: target.clone(),
            launch: launch_spec(&self.config.interpreters, &self.shims, &dir, target),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(self.config.max_instances_per_function.max(1)),
            busy: std::sync::atomic::AtomicI64::new(0),
        });
        pools.insert(key, pool.clone());
        pool
    }

    /// Publishes a pool's idle and busy instance counts.
    fn count_instances(&self, pool: &Pool) {
        let idle = lock(&pool.idle).len() as i64;
        let busy = pool.busy.load(std::sync::atomic::Ordering::Relaxed);
        for (state, n) in [("idle", idle), ("busy", busy)] {
            let labels = InstanceLabels {
                namespace: pool.target.namespace.clone(),
                function: pool.target.name.clone(),
                state: state.into(),
            };
            self.metrics.instances.get_or_create(&labels).set(n);
        }
    }

    fn is_current(&self, pool: &Arc<Pool>) -> bool {
        let key = (pool.target.namespace.clone(), pool.target.name.clone());
        lock(&self.pools).get(&key).is_some_and(|p| Arc::ptr_eq(p, pool))
    }
}

#[async_trait::async_trait]
impl Executor for LocalExecutor {
    async fn rollout(&self, namespace: &str, name: &str, version: u32) -> sless_core::Result<()> {
        self.spawn_rollout(namespace.to_string(), name.to_string(), version);
        Ok(())
    }

    async fn invoke(&self, target: &InvokeTarget, invocation: Invocation) -> sless_core::Result<InvokeOutcome> {
        let pool = self.inner.pool(target);
        let _permit = pool
            .permits
            .acquire()
            .await
            .map_err(|_| sless_core::Error::Internal("executor is shutting down".into()))?;
        let reused = {
            let mut idle = lock(&pool.idle);
            let mut found = None;
            while let Some(mut inst) = idle.pop() {
                if inst.is_running() {
                    found = Some(inst);
                    break;
                }
            }
            found
        };
        let (mut instance, cold_start) = match reused {
            Some(inst) => (inst, false),
            None => (Instance::spawn(&pool.launch, &self.inner.tmp)?, true),
        };
        let timeout = Duration::from_secs(u64::from(target.spec.timeout_sec));
        pool.busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.count_instances(&pool);
        let out = instance.call(invocation, timeout, &self.inner.logs).await;
        pool.busy.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        if instance.healthy && self.inner.is_current(&pool) {
            lock(&pool.idle).push(instance);
        } else {
            instance.kill().await;
        }
        self.inner.count_instances(&pool);
        Ok(InvokeOutcome { result: out.result, cold_start, logs: out.logs })
    }

    async fn prewarm(&self, target: &InvokeTarget) -> sless_core::Result<()> {
        let pool = self.inner.pool(target);
        let has_idle = lock(&pool.idle).iter_mut().any(Instance::is_running);
        if !has_idle && pool.permits.available_permits() > 0 {
            let instance = Instance::spawn(&pool.launch, &self.inner.tmp)?;
            lock(&pool.idle).push(instance);
            self.inner.count_instances(&pool);
        }
        Ok(())
    }

    async fn remove(&self, namespace: &str, name: &str) {
        let pool = lock(&self.inner.pools).remove(&(namespace.to_string(), name.to_string()));
        if let Some(pool) = pool {
            let instances: Vec<Instance> = lock(&pool.idle).drain(..).collect();
            for mut inst in instances {
                inst.kill().await;
            }
            self.inner.count_instances(&pool);
        }
    }

    async fn shutdown(&self) {
        for task in lock(&self.inner.tasks).drain(..) {
            task.abort();
        }
        let pools: Vec<Arc<Pool>> = lock(&self.inner.pools).drain().map(|(_, p)| p).collect();
        for pool in pools {
            pool.permits.close();
            let instances: Vec<Instance> = lock(&pool.idle).drain(..).collect();
            for mut inst in instances {
                inst.kill().await;
            }
        }
    }
}

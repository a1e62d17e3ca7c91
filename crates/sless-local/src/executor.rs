//! The local executor: builds versions and keeps a pool of instances per function.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use sless_core::archive::ArchiveLimits;
use sless_core::invocation::ColdStart;
use sless_core::traits::{BuildOutcome, Executor, Invocation, InvokeOutcome, InvokeResult, InvokeTarget, Registry};
use tokio::sync::Semaphore;

use crate::builder::{Builder, build_dir, launch_spec};
use crate::cgroup::Memory;
use crate::instance::{GenericSpec, Instance, LaunchSpec, node_heap_mb};
use crate::sandbox::{Creds, Isolation};
use crate::shims::{Interpreters, Shims, install};
use crate::uids::UidStore;
use crate::{Error, Result};
use sless_control::metrics::InstanceLabels;
use sless_control::{LogHub, Metrics};

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
    /// Most calls of one function waiting for a free instance; more get 429.
    pub max_queue_per_function: usize,
    /// Most instances of all functions together; at the cap an idle instance of another
    /// function is stopped to make room, or the call gets 429.
    pub max_instances_total: usize,
    /// An instance idle this long stops (scale to zero), unless its function says otherwise.
    pub idle_timeout: Duration,
    /// Instances beyond a function's first stop after this long idle (scale down).
    pub scale_down_delay: Duration,
    /// Generic runtime processes kept started per runtime, specialised on a cold start so
    /// it pays only the function's import (0 disables the warm pool).
    pub warm_pool_size: usize,
    /// Limits applied when unpacking archives.
    pub archive_limits: ArchiveLimits,
}

type Key = (String, String);

/// Runs functions as child processes on this machine (docs/architecture.md, "The local
/// backend").
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
    memory: Memory,
    /// The sandbox every function process runs in (docs/security.md).
    isolation: Isolation,
    /// The uid of each function.
    uids: Mutex<UidStore>,
    /// Instances alive (counted by `Instance` itself).
    live: Arc<std::sync::atomic::AtomicUsize>,
    /// The warm pool: generic processes by runtime, and their count.
    warm: Mutex<HashMap<sless_core::runtime::Runtime, Vec<Arc<Instance>>>>,
    warm_live: Arc<std::sync::atomic::AtomicUsize>,
    /// Held by the refill running (see `Inner::refill_warm`).
    refilling: tokio::sync::Mutex<()>,
    /// Told when an instance may have become free or stopped: calls waiting for room under
    /// the server-wide cap look again.
    room: tokio::sync::Notify,
    registry: Arc<dyn Registry>,
    metrics: Arc<Metrics>,
    logs: Arc<LogHub>,
    pools: Mutex<HashMap<Key, Arc<Pool>>>,
    /// Pools a disable retired (out of `pools`), while their last calls may still run: a
    /// `remove` that finds no pool must not kill those calls' processes by uid.
    retired: Mutex<HashMap<Key, std::sync::Weak<Pool>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The instances of one function at one (spec, version).
struct Pool {
    target: InvokeTarget,
    launch: LaunchSpec,
    /// Running instances; each serves up to `concurrency` calls.
    instances: Mutex<Vec<Arc<Instance>>>,
    /// `max_instances × concurrency` call slots.
    permits: Semaphore,
    concurrency: usize,
    max_instances: usize,
    idle_timeout: Duration,
    waiting: std::sync::atomic::AtomicUsize,
    crashes: Mutex<CrashLoop>,
    /// Set when the function was disabled or deleted: calls still waiting are refused, none
    /// starts an instance, calls running finish.
    removed: std::sync::atomic::AtomicBool,
}

impl Pool {
    /// Takes the instances with no call in flight out of the pool (under its lock, where
    /// calls pick instances, so none of them gets a call afterwards).
    fn take_idle(&self) -> Vec<Arc<Instance>> {
        let mut instances = lock(&self.instances);
        let (idle, busy) =
            instances.drain(..).partition(|i| i.inflight.load(std::sync::atomic::Ordering::Relaxed) == 0);
        *instances = busy;
        idle
    }
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
        metrics: Arc<Metrics>,
        logs: Arc<LogHub>,
    ) -> Result<Self> {
        let shims = install(&config.data_dir.join("runtimes"))?;
        let (builds, cache, tmp) =
            (config.data_dir.join("builds"), config.data_dir.join("cache"), config.data_dir.join("tmp"));
        for dir in [&builds, &cache, &tmp] {
            std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        }
        let reaped = crate::builder::reap_orphan_builds(&builds);
        if reaped > 0 {
            tracing::warn!(steps = reaped, "killed build steps a previous server left running");
        }
        let memory = Memory::detect();
        tracing::info!(mechanism = %memory.describe(), "instance memory limits");
        let uids = UidStore::open(&config.data_dir)?;
        let interpreters = [config.interpreters.python.as_path(), config.interpreters.node.as_path()];
        let isolation = Isolation::detect(
            &config.data_dir,
            &interpreters,
            !matches!(memory, Memory::Unavailable(_)),
            &config.interpreters.python,
            Some(crate::uids::PROBE_UID),
        );
        let protections = &isolation.protections;
        // One line, with the names docs/security.md uses.
        tracing::info!(
            active = %protections.active_names(),
            inactive = %protections.missing_names(),
            warm_pool = isolation.pool_caveats(),
            "function isolation"
        );
        if isolation.uids() {
            let mounts = isolation.protections.has(crate::sandbox::Protection::MountNamespace);
            secure_data_dir(&config.data_dir, mounts, &builds, &tmp)?;
            // Processes of functions a killed server left behind.
            let left = Isolation::kill_uids(&uids.all());
            if left > 0 {
                tracing::warn!(processes = left, "killed function processes a previous server left running");
            }
        }
        let executor = LocalExecutor {
            inner: Arc::new(Inner {
                config,
                shims,
                builds,
                cache,
                tmp,
                memory,
                isolation,
                uids: Mutex::new(uids),
                live: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
                warm: Mutex::new(HashMap::new()),
                warm_live: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
                refilling: tokio::sync::Mutex::new(()),
                room: tokio::sync::Notify::new(),
                registry,
                metrics,
                logs,
                pools: Mutex::new(HashMap::new()),
                retired: Mutex::new(HashMap::new()),
                tasks: Mutex::new(Vec::new()),
            }),
        };
        let reaper = Arc::downgrade(&executor.inner);
        let tick = (executor.inner.config.scale_down_delay.min(executor.inner.config.idle_timeout) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let handle = tokio::spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let Some(inner) = reaper.upgrade() else { return };
                inner.reap_idle().await;
                // A generic process that died (killed, out of memory) is replaced.
                inner.refill_warm().await;
            }
        });
        lock(&executor.inner.tasks).push(handle);
        // A spec change or a new active version retires the function's instances at once
        // (idle ones stop now, busy ones after their calls), not at its next call.
        let watcher = Arc::downgrade(&executor.inner);
        let mut changes = executor.inner.registry.subscribe();
        let handle = tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let changed = changes.recv().await;
                let Some(inner) = watcher.upgrade() else { return };
                let keys: Vec<Key> = match changed {
                    Ok(c) if c.kind == sless_core::traits::Kind::Function => vec![(c.namespace, c.name)],
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => lock(&inner.pools).keys().cloned().collect(),
                    Err(RecvError::Closed) => return,
                };
                for (namespace, name) in keys {
                    inner.retire_if_stale(&namespace, &name).await;
                }
            }
        });
        lock(&executor.inner.tasks).push(handle);
        executor.inner.refill_warm_later(Duration::ZERO);
        Ok(executor)
    }
}

impl Inner {
    fn builder(&self) -> Builder<'_> {
        Builder {
            builds: &self.builds,
            cache_home: &self.cache,
            interpreters: &self.config.interpreters,
            shims: &self.shims,
            limits: &self.config.archive_limits,
            timeout: self.config.build_timeout,
            isolation: &self.isolation,
            uids: &self.uids,
        }
    }

    /// The uid and gid `namespace/name` runs as (allocated on first use), when functions run
    /// as uids of their own. Errors: the uid table cannot be written, or it is full.
    fn creds(&self, namespace: &str, name: &str) -> Result<Option<Creds>> {
        creds_for(&self.isolation, &self.uids, namespace, name)
    }

    /// Kills every process left of `pool`'s function once it was removed and its last
    /// instance stopped (processes that escaped their instance's cgroup: started before it
    /// was joined).
    async fn sweep_if_gone(&self, pool: &Pool) {
        let gone = pool.removed.load(std::sync::atomic::Ordering::SeqCst) && lock(&pool.instances).is_empty();
        if let (true, Some(c)) = (gone, pool.launch.creds) {
            let _ = tokio::task::spawn_blocking(move || Isolation::kill_uids(&[c.uid])).await;
        }
    }

    /// The pool for `target`, replacing one made for another spec or version (its busy
    /// instances finish their calls and are then stopped: a rollout drops no call).
    fn pool(&self, target: &InvokeTarget) -> Result<Arc<Pool>> {
        let key = (target.namespace.clone(), target.name.clone());
        if let Some(p) = lock(&self.pools).get(&key).filter(|p| p.target == *target) {
            return Ok(p.clone());
        }
        let creds = self.creds(&target.namespace, &target.name)?;
        let mut pools = lock(&self.pools);
        if let Some(p) = pools.get(&key).filter(|p| p.target == *target) {
            return Ok(p.clone());
        }
        let dir = build_dir(&self.builds, target.spec.runtime, &target.sha256);
        let max_instances =
            target.spec.max_instances.map_or(self.config.max_instances_per_function, |m| m as usize).max(1);
        let pool = Arc::new(Pool {
            target: target.clone(),
            launch: launch_spec(&self.config.interpreters, &self.shims, &dir, target, creds, self.isolation.view()),
            instances: Mutex::new(Vec::new()),
            permits: Semaphore::new(max_instances * target.spec.concurrency.max(1) as usize),
            concurrency: target.spec.concurrency.max(1) as usize,
            max_instances,
            idle_timeout: target
                .spec
                .idle_timeout_sec
                .map_or(self.config.idle_timeout, |s| Duration::from_secs(u64::from(s))),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            crashes: Mutex::new(CrashLoop::default()),
            removed: std::sync::atomic::AtomicBool::new(false),
        });
        pools.insert(key, pool.clone());
        Ok(pool)
    }

    /// Counts instances that die before serving their first call: back-off between starts, and
    /// after `CRASH_LOOP_LIMIT` in a row the function is shown `Failed` with the reason.
    async fn track_starts(&self, pool: &Pool, failed_start: bool, result: &InvokeResult) {
        let change = {
            let mut crashes = lock(&pool.crashes);
            if failed_start {
                crashes.failed(describe(result), Instant::now())
            } else if matches!(result, InvokeResult::Returned(_) | InvokeResult::Failed { .. }) {
                crashes.served()
            } else {
                None
            }
        };
        let Some(looping) = change else { return };
        let (ns, name) = (&pool.target.namespace, &pool.target.name);
        let Ok(f) = self.registry.get_function(ns, name).await else { return };
        if f.active_version != Some(pool.target.version) {
            return;
        }
        let mut status = f.status.clone();
        let now = Utc::now();
        match looping {
            Some(why) => {
                status.phase = sless_core::status::FunctionPhase::Failed;
                status.message = format!("instances crash at start: {why}; a new one is tried at most once a minute");
                status.set_condition("Ready", false, "CrashLoop", &status.message.clone(), now);
            }
            None => {
                status.phase = sless_core::status::FunctionPhase::Ready;
                status.message = format!("version {} is serving", pool.target.version);
                status.set_condition("Ready", true, "VersionActive", &status.message.clone(), now);
            }
        }
        if let Err(e) = self.registry.update_status(ns, name, &status, f.active_version).await {
            tracing::warn!(namespace = %ns, function = %name, error = %e, "cannot record the crash loop");
        }
    }

    /// Makes sure one more instance fits under the server-wide cap, stopping the
    /// least recently used idle instance of any function if needed. False when none is idle.
    async fn make_room(&self) -> bool {
        let pools: Vec<Arc<Pool>> = lock(&self.pools).values().cloned().collect();
        if self.total_instances() < self.config.max_instances_total {
            return true;
        }
        let now = Instant::now();
        let victim = pools
            .iter()
            .flat_map(|p| lock(&p.instances).iter().map(|i| (p.clone(), i.clone())).collect::<Vec<_>>())
            .filter(|(_, i)| i.inflight.load(std::sync::atomic::Ordering::Relaxed) == 0)
            .max_by_key(|(_, i)| i.idle_for(now));
        let Some((pool, instance)) = victim else { return false };
        {
            // Taken out under the pool's lock, where calls pick instances, and only if it is
            // still idle: a call that picked it meanwhile keeps it.
            let mut instances = lock(&pool.instances);
            if instance.inflight.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                return true;
            }
            instances.retain(|i| !Arc::ptr_eq(i, &instance));
        }
        instance.kill().await;
        self.count_instances(&pool);
        true
    }

    /// A warm-pool process able to become an instance of `launch`, if one is ready. The
    /// pool is refilled in the background.
    fn take_warm(self: &Arc<Self>, launch: &LaunchSpec) -> Option<Arc<Instance>> {
        if self.config.warm_pool_size == 0 {
            return None;
        }
        // A Node process's heap limit is fixed at its start.
        if launch.runtime == sless_core::runtime::Runtime::Nodejs20
            && node_heap_mb(launch.target.spec.memory_mb) != node_heap_mb(sless_core::spec::DEFAULT_MEMORY_MB)
        {
            return None;
        }
        // So are the settings the interpreter reads from its environment while it starts.
        if launch.target.spec.env.keys().any(|k| launch.runtime.reads_at_start(k)) {
            return None;
        }
        let taken = {
            let mut warm = lock(&self.warm);
            let list = warm.entry(launch.runtime).or_default();
            list.retain(|i| i.healthy());
            list.pop()
        };
        // The replacement starts once the taken process has answered its first call (see
        // `invoke`), or after `WARM_REFILL_DELAY` if that call runs long: an interpreter
        // starting at once competes for the CPU with the cold start it is meant to speed up
        // (on 2 cores that doubled the pool's cold start).
        if taken.is_some() {
            self.refill_warm_later(WARM_REFILL_DELAY);
        }
        taken
    }

    /// Refills the warm pool after `delay`, in the background.
    fn refill_warm_later(self: &Arc<Self>, delay: Duration) {
        let inner = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(inner) = inner.upgrade() {
                inner.refill_warm().await;
            }
        });
    }

    /// Starts generic processes until each runtime has `warm_pool_size`. Each joins the pool
    /// once it is in a memory group of the default size (moving a process into a group is
    /// the slow part of a memory limit, so it is paid here, not by a cold start). One refill
    /// at a time.
    async fn refill_warm(&self) {
        if self.config.warm_pool_size == 0 {
            return;
        }
        let _one_at_a_time = self.refilling.lock().await;
        for runtime in sless_core::runtime::Runtime::ALL {
            let spec = GenericSpec {
                runtime,
                interpreter: self.config.interpreters.for_runtime(runtime).to_path_buf(),
                shim: self.shims.for_runtime(runtime).to_path_buf(),
                node_heap_mb: (runtime == sless_core::runtime::Runtime::Nodejs20)
                    .then(|| node_heap_mb(sless_core::spec::DEFAULT_MEMORY_MB)),
            };
            loop {
                let missing = {
                    let mut warm = lock(&self.warm);
                    let list = warm.entry(runtime).or_default();
                    list.retain(|i| i.healthy());
                    list.len() < self.config.warm_pool_size
                };
                if !missing {
                    break;
                }
                match Instance::spawn_generic(&spec, &self.tmp, &self.isolation, self.logs.clone(), &self.warm_live) {
                    Ok(i) => {
                        i.limit_memory(&self.memory, sless_core::spec::DEFAULT_MEMORY_MB).await;
                        lock(&self.warm).entry(runtime).or_default().push(i);
                    }
                    Err(e) => {
                        tracing::warn!(runtime = %runtime, error = %e, "cannot start a warm-pool process");
                        break;
                    }
                }
            }
        }
    }

    /// Instances of every function that have not ended.
    fn total_instances(&self) -> usize {
        self.live.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Claims room for one more instance under the server-wide cap, atomically (parallel
    /// calls of different functions cannot both take the last place). The instance counts
    /// itself once started; the claim ends when the returned guard is dropped.
    fn reserve_slot(&self) -> Option<Slot<'_>> {
        use std::sync::atomic::Ordering::SeqCst;
        let cap = self.config.max_instances_total;
        self.live.fetch_update(SeqCst, SeqCst, |n| (n < cap).then_some(n + 1)).ok().map(|_| Slot(&self.live))
    }

    /// Stops idle instances: the first of a function after its idle timeout (scale to zero),
    /// the others after the scale-down delay. A call in flight is never cut.
    /// Retires the function's pool if the registry has moved on from it (another spec or
    /// active version): it leaves the map, so the next call starts the new one; its idle
    /// instances stop now, its busy ones after their last call (see `invoke`).
    async fn retire_if_stale(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        let Some(pool) = lock(&self.pools).get(&key).cloned() else { return };
        let Ok(f) = self.registry.get_function(namespace, name).await else { return };
        if f.spec == pool.target.spec && f.active_version == Some(pool.target.version) {
            return;
        }
        {
            let mut pools = lock(&self.pools);
            if !pools.get(&key).is_some_and(|p| Arc::ptr_eq(p, &pool)) {
                return;
            }
            pools.remove(&key);
        }
        if !f.spec.enabled {
            // Disabled: its waiting calls are refused, as `remove` does. This may run before
            // the API's own `remove`, which then finds no pool (docs/errors-log.md).
            let _instances = lock(&pool.instances);
            pool.removed.store(true, std::sync::atomic::Ordering::SeqCst);
            pool.permits.close();
            lock(&self.retired).insert(key, Arc::downgrade(&pool));
        }
        self.stop_idle(&pool, pool.take_idle()).await;
    }

    /// Stops instances taken out of `pool` (see [`Pool::take_idle`]) and tells the calls
    /// waiting for room.
    async fn stop_idle(&self, pool: &Pool, idle: Vec<Arc<Instance>>) {
        for i in idle {
            i.kill().await;
        }
        self.count_instances(pool);
        self.room.notify_waiters();
    }

    async fn reap_idle(&self) {
        let now = Instant::now();
        let pools: Vec<Arc<Pool>> = lock(&self.pools).values().cloned().collect();
        for pool in pools {
            let stopped: Vec<Arc<Instance>> = {
                let mut instances = lock(&pool.instances);
                let mut stopped = Vec::new();
                let mut kept = Vec::new();
                for (n, i) in instances.drain(..).enumerate() {
                    let limit =
                        if n == 0 { pool.idle_timeout } else { pool.idle_timeout.min(self.config.scale_down_delay) };
                    // inflight is checked under the pool lock, where calls take instances.
                    if i.idle_for(now) > limit && i.inflight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                        stopped.push(i);
                    } else {
                        kept.push(i);
                    }
                }
                *instances = kept;
                stopped
            };
            if !stopped.is_empty() {
                tracing::debug!(namespace = %pool.target.namespace, function = %pool.target.name, stopped = stopped.len(), "idle instances stopped");
                for i in stopped {
                    i.kill().await;
                }
                self.count_instances(&pool);
                self.room.notify_waiters();
            }
        }
    }

    /// Publishes a pool's idle and busy instance counts.
    fn count_instances(&self, pool: &Pool) {
        let (idle, busy) = lock(&pool.instances).iter().fold((0, 0), |(idle, busy), i| {
            if i.inflight.load(std::sync::atomic::Ordering::Relaxed) == 0 { (idle + 1, busy) } else { (idle, busy + 1) }
        });
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
    async fn build(&self, target: &InvokeTarget, archive: bytes::Bytes) -> sless_core::Result<BuildOutcome> {
        Ok(self.inner.builder().build(target, archive).await?)
    }

    async fn is_built(&self, target: &InvokeTarget) -> sless_core::Result<bool> {
        let dir = build_dir(&self.inner.builds, target.spec.runtime, &target.sha256);
        Ok(dir.join(crate::builder::DONE_MARKER).exists())
    }

    async fn invoke(&self, target: &InvokeTarget, invocation: Invocation) -> sless_core::Result<InvokeOutcome> {
        use std::sync::atomic::Ordering::Relaxed;
        let refused = |result| {
            Ok(InvokeOutcome {
                result,
                cold_start: None,
                logs: Vec::new(),
                max_memory_bytes: None,
                init_duration: None,
            })
        };
        let gone = || {
            let message = "the function was disabled or deleted while this call waited".to_string();
            refused(InvokeResult::Withdrawn { message })
        };
        let pool = self.inner.pool(target)?;
        if let Some((message, retry_after_sec)) = lock(&pool.crashes).holding_off(Instant::now()) {
            return refused(InvokeResult::Unavailable { message, retry_after_sec });
        }
        let timeout = Duration::from_secs(u64::from(target.spec.timeout_sec));
        // A bounded wait for a free instance: never more than `max_queue` callers, never
        // longer than the function's own timeout.
        let queue = self.inner.config.max_queue_per_function;
        if pool.permits.available_permits() == 0 && pool.waiting.load(Relaxed) >= queue {
            let message = format!("all instances are busy and {queue} calls are already waiting");
            return refused(InvokeResult::Throttled { message });
        }
        // One budget for both waits (a free slot of the function, room under the server-wide
        // cap): the call never waits longer than its own timeout in all.
        let deadline = tokio::time::Instant::now() + timeout;
        pool.waiting.fetch_add(1, Relaxed);
        let permit = tokio::time::timeout_at(deadline, pool.permits.acquire()).await;
        pool.waiting.fetch_sub(1, Relaxed);
        let _permit = match permit {
            Ok(Ok(p)) => p,
            // `remove` closes the semaphore: the waiting calls are refused at once.
            Ok(Err(_)) if pool.removed.load(Relaxed) => return gone(),
            Ok(Err(_)) => return Err(sless_core::Error::Internal("executor is shutting down".into())),
            Err(_) => {
                let message = format!("no instance became free within timeout_sec = {} s", target.spec.timeout_sec);
                return refused(InvokeResult::Throttled { message });
            }
        };
        if pool.removed.load(Relaxed) {
            return gone();
        }
        let (instance, start_kind) = loop {
            // Registered before looking, so room made meanwhile is not missed.
            let room = self.inner.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let needs_room = {
                let mut instances = lock(&pool.instances);
                if pool.removed.load(Relaxed) {
                    drop(instances);
                    return gone();
                }
                instances.retain(|i| i.healthy());
                if let Some(i) = instances.iter().find(|i| i.inflight.load(Relaxed) < pool.concurrency) {
                    i.inflight.fetch_add(1, Relaxed);
                    break (i.clone(), None);
                }
                if let Some(slot) = self.inner.reserve_slot() {
                    // Taken or started under the pool's lock, so parallel calls never start
                    // more instances than they need; counted against the cap from the start.
                    let (i, kind) = match self.inner.take_warm(&pool.launch) {
                        Some(i) => {
                            i.join_live(&self.inner.live);
                            (i, ColdStart::Pool)
                        }
                        None => {
                            let i = Instance::spawn(
                                &pool.launch,
                                &self.inner.tmp,
                                &self.inner.isolation,
                                self.inner.logs.clone(),
                                &self.inner.live,
                            )?;
                            (i, ColdStart::Process)
                        }
                    };
                    drop(slot);
                    i.inflight.fetch_add(1, Relaxed);
                    instances.push(i.clone());
                    break (i, Some(kind));
                }
                true
            };
            if needs_room && !self.inner.make_room().await && tokio::time::timeout_at(deadline, room).await.is_err() {
                let cap = self.inner.config.max_instances_total;
                let message = format!(
                    "the server runs its cap of {cap} instances and none became free within timeout_sec = {} s",
                    target.spec.timeout_sec
                );
                return refused(InvokeResult::Throttled { message });
            }
        };
        let cold_start = start_kind.is_some();
        let loading = std::time::Instant::now();
        if !instance.ensure_loaded(&pool.launch, &self.inner.memory, &self.inner.isolation, &self.inner.live).await {
            instance.inflight.fetch_sub(1, Relaxed);
            lock(&pool.instances).retain(|i| !Arc::ptr_eq(i, &instance));
            instance.kill().await;
            return Err(sless_core::Error::Internal("a warm-pool process could not be specialised".into()));
        }
        let init_duration = cold_start.then(|| loading.elapsed());
        self.inner.count_instances(&pool);
        let out = instance.call(invocation, timeout).await;
        let max_memory_bytes = instance.peak_memory_bytes();
        if start_kind == Some(ColdStart::Pool) {
            self.inner.refill_warm_later(Duration::ZERO);
        }
        let left = instance.inflight.fetch_sub(1, Relaxed) - 1;
        let failed_start = cold_start && instance.failed_start(&out.result);
        if !instance.healthy() || (!self.inner.is_current(&pool) && left == 0) {
            lock(&pool.instances).retain(|i| !Arc::ptr_eq(i, &instance));
            instance.kill().await;
            self.inner.sweep_if_gone(&pool).await;
        }
        if left == 0 {
            // An idle instance (or a place under the cap) for a call waiting for room.
            self.inner.room.notify_waiters();
        }
        self.inner.count_instances(&pool);
        self.inner.track_starts(&pool, failed_start, &out.result).await;
        Ok(InvokeOutcome {
            result: out.result,
            cold_start: start_kind,
            logs: out.logs,
            max_memory_bytes,
            init_duration,
        })
    }

    async fn prewarm(&self, target: &InvokeTarget) -> sless_core::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let pool = self.inner.pool(target)?;
        let started = {
            let mut instances = lock(&pool.instances);
            instances.retain(|i| i.healthy());
            let has_room = instances.iter().any(|i| i.inflight.load(Relaxed) < pool.concurrency);
            let wanted = !has_room && instances.len() < pool.max_instances && !pool.removed.load(Relaxed);
            match wanted.then(|| self.inner.reserve_slot()).flatten() {
                Some(_slot) => {
                    let instance = Instance::spawn(
                        &pool.launch,
                        &self.inner.tmp,
                        &self.inner.isolation,
                        self.inner.logs.clone(),
                        &self.inner.live,
                    )?;
                    instances.push(instance.clone());
                    Some(instance)
                }
                None => None,
            }
        };
        if let Some(instance) = started {
            // Under its memory limit now, not at its first call.
            instance.ensure_loaded(&pool.launch, &self.inner.memory, &self.inner.isolation, &self.inner.live).await;
        }
        self.inner.count_instances(&pool);
        Ok(())
    }

    async fn remove(&self, namespace: &str, name: &str) -> sless_core::Result<()> {
        let pool = lock(&self.inner.pools).remove(&(namespace.to_string(), name.to_string()));
        if let Some(pool) = pool {
            // Calls running finish (their instance stops after its last call, as in a
            // rollout); calls still waiting are refused; idle instances stop now. Marked
            // under the pool's lock, where calls pick or start instances.
            {
                let _instances = lock(&pool.instances);
                pool.removed.store(true, std::sync::atomic::Ordering::SeqCst);
                pool.permits.close();
            }
            self.inner.stop_idle(&pool, pool.take_idle()).await;
            self.inner.sweep_if_gone(&pool).await;
        } else if self.inner.isolation.uids() {
            // No pool (a disable retired it first, or the function never ran here): processes
            // that escaped an instance's cgroup may still run as the function's uid. While a
            // pool a disable retired still has instances, their calls finish first: its last
            // instance's end sweeps the uid (`sweep_if_gone`).
            let key = (namespace.to_string(), name.to_string());
            let retired = lock(&self.inner.retired).remove(&key).and_then(|w| w.upgrade());
            let busy = retired.as_ref().is_some_and(|p| !lock(&p.instances).is_empty());
            let uid = lock(&self.inner.uids).existing(namespace, name);
            if let (false, Some(uid)) = (busy, uid) {
                let _ = tokio::task::spawn_blocking(move || Isolation::kill_uids(&[uid])).await;
            }
        }
        Ok(())
    }

    async fn shutdown(&self) {
        for task in lock(&self.inner.tasks).drain(..) {
            task.abort();
        }
        let pools: Vec<Arc<Pool>> = lock(&self.inner.pools).drain().map(|(_, p)| p).collect();
        for pool in pools {
            pool.permits.close();
            let instances: Vec<Arc<Instance>> = lock(&pool.instances).drain(..).collect();
            for inst in instances {
                inst.kill().await;
            }
        }
        let warm: Vec<Arc<Instance>> = lock(&self.inner.warm).drain().flat_map(|(_, l)| l).collect();
        for inst in warm {
            inst.kill().await;
        }
        if self.inner.isolation.uids() {
            let uids = lock(&self.inner.uids).all();
            let _ = tokio::task::spawn_blocking(move || Isolation::kill_uids(&uids)).await;
        }
        self.inner.memory.cleanup();
    }
}

/// The uid and gid `namespace/name` runs as (allocated on first use) when `isolation` gives
/// functions uids of their own. Errors: the uid table cannot be written, or it is full.
pub(crate) fn creds_for(
    isolation: &Isolation,
    uids: &Mutex<UidStore>,
    namespace: &str,
    name: &str,
) -> Result<Option<Creds>> {
    if !isolation.uids() {
        return Ok(None);
    }
    let uid = lock(uids).uid_for(namespace, name)?;
    Ok(Some(Creds { uid, gid: uid }))
}

/// The data folder's modes when functions run as uids of their own: the folder itself 0700
/// when sandboxes have mount namespaces (nothing in it is any other user's business;
/// sandboxes see their parts through their mount namespace), `builds/` and each runtime's folder in it 0711 (no listing), each
/// finished build 0755 (its function's uid reads it), `tmp/` 0711.
fn secure_data_dir(
    data: &std::path::Path,
    mounts: bool,
    builds: &std::path::Path,
    tmp: &std::path::Path,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &std::path::Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
            .map_err(Error::io(format!("setting the mode of {}", p.display())))
    };
    if mounts {
        set(data, 0o700)?;
    }
    set(builds, 0o711)?;
    set(tmp, 0o711)?;
    for runtime in sless_core::runtime::Runtime::ALL {
        let dir = builds.join(runtime.name());
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        set(&dir, 0o711)?;
        for build in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if build.file_type().is_ok_and(|t| t.is_dir()) {
                set(&build.path(), 0o755)?;
            }
        }
    }
    Ok(())
}

/// A claimed place under the server-wide instance cap (see `Inner::reserve_slot`).
struct Slot<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Consecutive start failures after which the function is shown `Failed`.
const CRASH_LOOP_LIMIT: u32 = 5;
/// The longest a warm pool waits to start the replacement of a process it gave away (100 ms).
const WARM_REFILL_DELAY: Duration = Duration::from_millis(100);
/// The longest wait between two starts of a crashing function.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Start failures of one pool: exponential back-off between starts (100 ms, 200 ms, … 60 s).
#[derive(Debug, Default)]
struct CrashLoop {
    consecutive: u32,
    hold_until: Option<Instant>,
    last: String,
}

impl CrashLoop {
    /// While backing off: the last crash and the seconds left.
    fn holding_off(&self, now: Instant) -> Option<(String, u64)> {
        let until = self.hold_until.filter(|u| *u > now)?;
        let left = (until - now).as_secs_f64().ceil() as u64;
        Some((format!("the function's instances keep crashing at start ({}); next try in {left} s", self.last), left))
    }

    /// Records a start failure. `Some(Some(why))` when this makes a crash loop.
    fn failed(&mut self, why: String, now: Instant) -> Option<Option<String>> {
        self.consecutive += 1;
        let shift = self.consecutive.saturating_sub(1).min(16);
        let backoff = (Duration::from_millis(100) * 2u32.pow(shift)).min(MAX_BACKOFF);
        let backoff = if self.consecutive >= CRASH_LOOP_LIMIT { MAX_BACKOFF } else { backoff };
        self.hold_until = Some(now + backoff);
        self.last = why.clone();
        (self.consecutive == CRASH_LOOP_LIMIT).then_some(Some(why))
    }

    /// Records a served call. `Some(None)` when this ends a crash loop.
    fn served(&mut self) -> Option<Option<String>> {
        let was_looping = self.consecutive >= CRASH_LOOP_LIMIT;
        *self = CrashLoop::default();
        was_looping.then_some(None)
    }
}

fn describe(result: &InvokeResult) -> String {
    match result {
        InvokeResult::Failed { error_type, error_message } => format!("{error_type}: {error_message}"),
        InvokeResult::Crashed { message } | InvokeResult::OutOfMemory { message } => message.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_loop_backs_off_exponentially_then_reports_once() {
        let t0 = Instant::now();
        let mut c = CrashLoop::default();
        assert_eq!(c.failed("exit 1".into(), t0), None);
        assert!(c.holding_off(t0).is_some() && c.holding_off(t0 + Duration::from_millis(150)).is_none());
        for _ in 0..3 {
            assert_eq!(c.failed("exit 1".into(), t0), None);
        }
        assert!(c.holding_off(t0 + Duration::from_millis(700)).is_some(), "the 4th failure holds 800 ms");
        assert_eq!(c.failed("exit 1".into(), t0), Some(Some("exit 1".into())), "the 5th makes a loop");
        assert_eq!(c.holding_off(t0).map(|(_, s)| s), Some(60));
        assert_eq!(c.failed("exit 1".into(), t0), None, "reported once");
        assert_eq!(c.served(), Some(None), "a served call ends the loop");
        assert!(c.holding_off(t0).is_none());
        assert_eq!(c.served(), None);
    }
}

//! A registry for the invoke path that keeps answering while the database is unreachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{
    Change, FunctionRecord, Listed, NewFunction, NewJob, NewTrigger, Page, Registry, VersionRecord,
};
use sless_core::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};
use sless_core::{Error, Result};
use tokio::sync::broadcast;

type FunctionKey = (String, String);
type VersionKey = (String, String, u32);
/// (namespace, continue token, limit) of a page of triggers.
type TriggerPageKey = (String, Option<String>, u32);

/// How long a call waits for the registry when it has a last-known answer (ms). A read that
/// takes longer goes on in the background (its answer refreshes what is remembered) and the
/// call is answered from memory: a database that hangs costs a call at most this much.
pub const READ_BUDGET: Duration = Duration::from_millis(250);

/// How long after a failed or slow read the registry is not asked on the call path (the
/// breaker stays open); the first read after it tries again, within [`READ_BUDGET`].
pub const OPEN_FOR: Duration = Duration::from_secs(2);

/// Wraps a registry for the invoke path: `get_function`, `get_version` and
/// `list_triggers` (the `/fn/` routes) remember what they last read and, when the registry
/// fails with `Storage` or does not answer within [`READ_BUDGET`], answer with that
/// instead. After such a failure a breaker opens for [`OPEN_FOR`]: reads are answered from
/// memory without asking the registry (and fail at once with `Storage` when nothing is
/// remembered), so calls never wait on a database known to be down. Every other method
/// (and every write) passes straight through.
pub struct LastKnown {
    inner: Arc<dyn Registry>,
    memory: Arc<Memory>,
}

/// What has been read, and the breaker.
#[derive(Default)]
struct Memory {
    functions: Mutex<HashMap<FunctionKey, FunctionRecord>>,
    versions: Mutex<HashMap<VersionKey, VersionRecord>>,
    triggers: Mutex<HashMap<TriggerPageKey, Listed<TriggerRecord>>>,
    /// While `Some` and in the future, the registry is not asked.
    open_until: Mutex<Option<Instant>>,
}

impl Memory {
    fn is_open(&self) -> bool {
        lock(&self.open_until).is_some_and(|t| Instant::now() < t)
    }

    fn open(&self) {
        let mut until = lock(&self.open_until);
        if until.is_none_or(|t| Instant::now() >= t) {
            tracing::warn!(
                for_ms = OPEN_FOR.as_millis() as u64,
                "registry unavailable: calls are answered from the last values read"
            );
        }
        *until = Some(Instant::now() + OPEN_FOR);
    }

    fn close(&self) {
        if lock(&self.open_until).take().is_some() {
            tracing::info!("registry answers again");
        }
    }
}

impl std::fmt::Debug for LastKnown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastKnown")
    }
}

impl LastKnown {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Registry>) -> Self {
        LastKnown { inner, memory: Arc::default() }
    }

    /// Whether the breaker is open: the registry failed or hung within the last [`OPEN_FOR`].
    pub fn is_open(&self) -> bool {
        self.memory.is_open()
    }

    /// Reads through `read` (a future of the inner registry), remembering the answer in the
    /// map `pick` chooses, within the budget and the breaker's rules above.
    async fn read<K, V>(
        &self,
        pick: fn(&Memory) -> &Mutex<HashMap<K, V>>,
        key: K,
        read: std::pin::Pin<Box<dyn std::future::Future<Output = Result<V>> + Send>>,
    ) -> Result<V>
    where
        K: std::hash::Hash + Eq + Clone + Send + 'static,
        V: Clone + Send + 'static,
    {
        let memory = self.memory.clone();
        let cached = lock(pick(&memory)).get(&key).cloned();
        let Some(cached) = cached else {
            if memory.is_open() {
                return Err(unavailable());
            }
            // Nothing to answer with but the registry's own answer.
            let answer = read.await;
            return settle(&memory, pick, key, answer);
        };
        if memory.is_open() {
            return Ok(cached);
        }
        let task = tokio::spawn({
            let memory = memory.clone();
            async move {
                let answer = read.await;
                settle(&memory, pick, key, answer)
            }
        });
        match tokio::time::timeout(READ_BUDGET, task).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_panicked)) => Ok(cached),
            Err(_slow) => {
                memory.open();
                Ok(cached)
            }
        }
    }
}

/// A storage error for a read the breaker refused.
fn unavailable() -> Error {
    Error::storage(std::io::Error::other("the registry is unavailable (the last reads failed)"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remembers a successful read (and closes the breaker), forgets a missing resource, and
/// answers a storage failure (opening the breaker) with what was remembered.
fn settle<K: std::hash::Hash + Eq, V: Clone>(
    memory: &Memory,
    pick: fn(&Memory) -> &Mutex<HashMap<K, V>>,
    key: K,
    read: Result<V>,
) -> Result<V> {
    let cache = pick(memory);
    match read {
        Ok(v) => {
            lock(cache).insert(key, v.clone());
            memory.close();
            Ok(v)
        }
        Err(Error::Storage(e)) => {
            memory.open();
            match lock(cache).get(&key) {
                Some(v) => Ok(v.clone()),
                None => Err(Error::Storage(e)),
            }
        }
        Err(e) => {
            if matches!(e, Error::NotFound { .. }) {
                lock(cache).remove(&key);
            }
            Err(e)
        }
    }
}

#[async_trait::async_trait]
impl Registry for LastKnown {
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.subscribe()
    }

    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    async fn create_function(&self, new: &NewFunction) -> Result<FunctionRecord> {
        self.inner.create_function(new).await
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<FunctionRecord> {
        let (inner, ns, n) = (self.inner.clone(), namespace.to_string(), name.to_string());
        let key = (ns.clone(), n.clone());
        self.read(|m| &m.functions, key, Box::pin(async move { inner.get_function(&ns, &n).await })).await
    }

    async fn list_functions(&self, namespace: &str, page: &Page) -> Result<Listed<FunctionRecord>> {
        self.inner.list_functions(namespace, page).await
    }

    async fn all_functions(&self) -> Result<Vec<FunctionRecord>> {
        self.inner.all_functions().await
    }

    async fn replace_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &FunctionSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<FunctionRecord> {
        self.inner.replace_spec(namespace, name, spec, expected_resource_version).await
    }

    async fn update_status(
        &self,
        namespace: &str,
        name: &str,
        status: &FunctionStatus,
        active_version: Option<u32>,
    ) -> Result<()> {
        self.inner.update_status(namespace, name, status, active_version).await
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        self.inner.delete_function(namespace, name).await
    }

    async fn add_version(
        &self,
        namespace: &str,
        function: &str,
        sha256: &str,
        size_bytes: u64,
        runtime: Runtime,
    ) -> Result<(VersionRecord, bool)> {
        self.inner.add_version(namespace, function, sha256, size_bytes, runtime).await
    }

    async fn get_version(&self, namespace: &str, function: &str, version: u32) -> Result<VersionRecord> {
        let (inner, ns, f) = (self.inner.clone(), namespace.to_string(), function.to_string());
        let key = (ns.clone(), f.clone(), version);
        self.read(|m| &m.versions, key, Box::pin(async move { inner.get_version(&ns, &f, version).await })).await
    }

    async fn list_versions(&self, namespace: &str, function: &str) -> Result<Vec<VersionRecord>> {
        self.inner.list_versions(namespace, function).await
    }

    async fn delete_version(&self, namespace: &str, function: &str, version: u32) -> Result<bool> {
        self.inner.delete_version(namespace, function, version).await
    }

    async fn set_version_build(
        &self,
        namespace: &str,
        function: &str,
        version: u32,
        phase: VersionPhase,
        message: &str,
    ) -> Result<()> {
        self.inner.set_version_build(namespace, function, version, phase, message).await
    }

    async fn create_trigger(&self, new: &NewTrigger) -> Result<TriggerRecord> {
        self.inner.create_trigger(new).await
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<TriggerRecord> {
        self.inner.get_trigger(namespace, name).await
    }

    async fn list_triggers(&self, namespace: &str, page: &Page) -> Result<Listed<TriggerRecord>> {
        let (inner, ns, p) = (self.inner.clone(), namespace.to_string(), page.clone());
        let key = (ns.clone(), page.continue_token.clone(), page.limit);
        self.read(|m| &m.triggers, key, Box::pin(async move { inner.list_triggers(&ns, &p).await })).await
    }

    async fn all_triggers(&self) -> Result<Vec<TriggerRecord>> {
        self.inner.all_triggers().await
    }

    async fn replace_trigger_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &TriggerSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<TriggerRecord> {
        self.inner.replace_trigger_spec(namespace, name, spec, expected_resource_version).await
    }

    async fn update_trigger_status(&self, namespace: &str, name: &str, status: &TriggerStatus) -> Result<()> {
        self.inner.update_trigger_status(namespace, name, status).await
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.inner.delete_trigger(namespace, name).await
    }

    async fn create_job(&self, new: &NewJob) -> Result<JobRecord> {
        self.inner.create_job(new).await
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<JobRecord> {
        self.inner.get_job(namespace, name).await
    }

    async fn list_jobs(&self, namespace: &str, page: &Page) -> Result<Listed<JobRecord>> {
        self.inner.list_jobs(namespace, page).await
    }

    async fn all_jobs(&self) -> Result<Vec<JobRecord>> {
        self.inner.all_jobs().await
    }

    async fn replace_job_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &JobSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<JobRecord> {
        self.inner.replace_job_spec(namespace, name, spec, expected_resource_version).await
    }

    async fn update_job_status(&self, namespace: &str, name: &str, status: &JobStatus) -> Result<()> {
        self.inner.update_job_status(namespace, name, status).await
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.inner.delete_job(namespace, name).await
    }
}

#[cfg(test)]
mod tests {
    use sless_core::runtime::Runtime;
    use sless_store::SqlRegistry;
    use sless_store::testing::function_record as record;

    use super::*;

    #[tokio::test]
    async fn answers_while_the_database_is_unreachable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("open");
        let page = |limit, continue_token| Page { limit, continue_token };
        let cached = LastKnown::new(Arc::new(reg.clone()));
        reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
        reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("add");
        let f = cached.get_function("default", "f").await.expect("get");
        let v = cached.get_version("default", "f", 1).await.expect("get version");
        assert!(matches!(cached.get_function("default", "nope").await, Err(Error::NotFound { .. })));
        reg.close().await;
        assert!(matches!(reg.get_function("default", "f").await, Err(Error::Storage(_))));
        assert_eq!(cached.get_function("default", "f").await.expect("last known"), f);
        assert_eq!(cached.get_version("default", "f", 1).await.expect("last known"), v);
        assert!(matches!(cached.get_function("default", "other").await, Err(Error::Storage(_))));
        assert!(matches!(cached.list_functions("default", &page(10, None)).await, Err(Error::Storage(_))));
    }

    #[tokio::test]
    async fn a_hanging_registry_costs_a_call_at_most_the_read_budget_then_nothing() {
        let fake = Arc::new(sless_testing::FakeRegistry::new());
        fake.seed_function(&sless_testing::FunctionBuilder::new("f").ready_at(1).build()).await.expect("seed");
        let cached = LastKnown::new(fake.clone());
        let f = cached.get_function("default", "f").await.expect("first read");
        assert!(!cached.is_open());

        fake.stall(true);
        let started = Instant::now();
        assert_eq!(cached.get_function("default", "f").await.expect("last known"), f);
        let first = started.elapsed();
        assert!(first >= READ_BUDGET && first < READ_BUDGET * 8, "{first:?}");
        assert!(cached.is_open(), "a read past the budget opens the breaker");
        // While open: answered from memory without asking; an unknown function fails at once.
        let started = Instant::now();
        for _ in 0..20 {
            assert_eq!(cached.get_function("default", "f").await.expect("last known"), f);
        }
        assert!(matches!(cached.get_function("default", "other").await, Err(Error::Storage(_))));
        assert!(started.elapsed() < READ_BUDGET, "{:?}", started.elapsed());

        // The database answers again: the hung read finishes, refreshes and closes the breaker.
        fake.stall(false);
        let deadline = Instant::now() + Duration::from_secs(5);
        while cached.is_open() {
            assert!(Instant::now() < deadline, "the breaker never closed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(cached.get_function("default", "f").await.expect("fresh"), f);
    }
}

//! A registry for the invoke path that keeps answering while the database is unreachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

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

/// Wraps a registry: `get_function` and `get_version` remember what they last read and,
/// when the registry fails with `Storage`, answer with that instead. Given to the
/// dispatcher, it lets calls keep reaching the versions already known while the database
/// is down; every other method (and every write) passes straight through.
pub struct LastKnown {
    inner: Arc<dyn Registry>,
    functions: Mutex<HashMap<FunctionKey, FunctionRecord>>,
    versions: Mutex<HashMap<VersionKey, VersionRecord>>,
}

impl std::fmt::Debug for LastKnown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastKnown")
    }
}

impl LastKnown {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Registry>) -> Self {
        LastKnown { inner, functions: Mutex::default(), versions: Mutex::default() }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remembers a successful read, forgets a missing resource, and answers a storage failure
/// with what was remembered.
fn remembered<K: std::hash::Hash + Eq, V: Clone>(cache: &Mutex<HashMap<K, V>>, key: K, read: Result<V>) -> Result<V> {
    match read {
        Ok(v) => {
            lock(cache).insert(key, v.clone());
            Ok(v)
        }
        Err(Error::Storage(e)) => match lock(cache).get(&key) {
            Some(v) => {
                tracing::warn!(error = %e, "registry unavailable: answering from the last value read");
                Ok(v.clone())
            }
            None => Err(Error::Storage(e)),
        },
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
        let read = self.inner.get_function(namespace, name).await;
        remembered(&self.functions, (namespace.to_string(), name.to_string()), read)
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
        let read = self.inner.get_version(namespace, function, version).await;
        remembered(&self.versions, (namespace.to_string(), function.to_string(), version), read)
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
        self.inner.list_triggers(namespace, page).await
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
}

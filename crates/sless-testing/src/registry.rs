//! [`FakeRegistry`]: the registry in memory, with the SQL registry's semantics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use chrono::Utc;
use sless_core::decide;
use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{
    Change, ChangeFeed, FunctionRecord, Kind, Listed, NewFunction, NewJob, NewTrigger, Page, Registry, VersionRecord,
};
use sless_core::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};
use sless_core::{Error, Result};
use tokio::sync::broadcast;

use crate::failures::Failures;
use crate::table::{Resource, Table};

/// How many changes a subscriber may fall behind before it lags (as the SQL registry).
const CHANGE_CAPACITY: usize = 1024;

/// A stored version.
#[derive(Debug, Clone)]
struct StoredVersion {
    record: VersionRecord,
}

#[derive(Debug, Default)]
struct State {
    functions: Table<FunctionRecord>,
    /// (namespace, function) → its versions, oldest first.
    versions: BTreeMap<(String, String), Vec<StoredVersion>>,
    triggers: Table<TriggerRecord>,
    jobs: Table<JobRecord>,
}

impl State {
    fn versions(&self, namespace: &str, function: &str) -> &[StoredVersion] {
        self.versions.get(&(namespace.to_string(), function.to_string())).map_or(&[], Vec::as_slice)
    }

    fn versions_mut(&mut self, namespace: &str, function: &str) -> &mut Vec<StoredVersion> {
        self.versions.entry((namespace.to_string(), function.to_string())).or_default()
    }

    fn function_exists(&self, namespace: &str, name: &str) -> Result<()> {
        match self.functions.contains(namespace, name) {
            true => Ok(()),
            false => Err(Error::NotFound { kind: "function", name: name.into() }),
        }
    }
}

fn version_not_found(function: &str, version: u32) -> Error {
    Error::NotFound { kind: "version", name: format!("{function}/{version}") }
}

/// The registry in memory: functions, versions, triggers and jobs with the SQL registry's
/// semantics (`AlreadyExists`, `NotFound`, `Stale`; resource versions moving on with each
/// spec replace; versions numbered after the newest and deduplicated by SHA-256;
/// `delete_version` sparing the active one; pages sorted bytewise by name), and a
/// [`ChangeFeed`] announcing every successful write once, as the SQL registry does.
///
/// Test hooks: [`FakeRegistry::silence`] loses notifications (as another server's lost
/// `NOTIFY` would: neither the subscribers nor the generation hear of the write);
/// [`FakeRegistry::failures`] makes calls fail with `Error::Storage`; [`FakeRegistry::stall`]
/// makes the call path's reads hang;
/// [`FakeRegistry::seed_function`], [`FakeRegistry::deploy`] and
/// [`FakeRegistry::deploy_failing`] set up functions in one call.
#[derive(Debug)]
pub struct FakeRegistry {
    state: Mutex<State>,
    feed: ChangeFeed,
    silenced: AtomicBool,
    lost: AtomicU64,
    failures: Failures,
    stalled: AtomicBool,
}

impl Default for FakeRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        FakeRegistry {
            state: Mutex::default(),
            feed: ChangeFeed::new(CHANGE_CAPACITY),
            silenced: AtomicBool::new(false),
            lost: AtomicU64::new(0),
            failures: Failures::default(),
            stalled: AtomicBool::new(false),
        }
    }

    /// From now on writes are stored but not announced (no [`Change`], no generation bump),
    /// until [`FakeRegistry::unsilence`]: a lost notification, which the controllers'
    /// periodic resync must repair.
    pub fn silence(&self) {
        self.silenced.store(true, Ordering::SeqCst);
    }

    /// Announces writes again (the ones made while silenced stay unannounced).
    pub fn unsilence(&self) {
        self.silenced.store(false, Ordering::SeqCst);
    }

    /// Announces `change` without a write (even while silenced), as another server's
    /// announcement arriving would: wakes the subscribers and moves the generation on.
    pub fn announce_only(&self, change: Change) {
        self.feed.send(change);
    }

    /// How many announcements were dropped while silenced.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::SeqCst)
    }

    /// From now on (`true`) the call path's reads (`get_function`, `get_version`,
    /// `list_triggers`) wait without answering, as a database that stopped answering would,
    /// until `stall(false)`.
    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }

    /// Waits while stalled.
    async fn gate(&self) {
        while self.stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// The switch that makes this registry's calls (reads and writes, not `subscribe` or
    /// `generation`) fail with `Error::Storage`.
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    /// Stores `record` and, when it names an active version the registry does not have, a
    /// `Ready` version of that number (SHA-256 [`FakeRegistry::sha_for`]), so that the call
    /// path finds what to run. Announced as one change.
    pub async fn seed_function(&self, record: &FunctionRecord) -> Result<()> {
        self.write("seed_function", Kind::Function, &record.namespace, &record.name, |s| {
            s.functions.insert(record)?;
            if let Some(version) = record.active_version {
                let versions = s.versions_mut(&record.namespace, &record.name);
                if !versions.iter().any(|v| v.record.version == version) {
                    versions.push(StoredVersion {
                        record: VersionRecord {
                            namespace: record.namespace.clone(),
                            function: record.name.clone(),
                            version,
                            sha256: Self::sha_for(version),
                            size_bytes: 0,
                            runtime: record.spec.runtime,
                            phase: VersionPhase::Ready,
                            message: String::new(),
                            created_at: record.created_at,
                        },
                    });
                    versions.sort_by_key(|v| v.record.version);
                }
            }
            Ok(((), true))
        })
    }

    /// The SHA-256 [`FakeRegistry::seed_function`] gives a seeded version (64 hex digits).
    pub fn sha_for(version: u32) -> String {
        format!("{version:064x}")
    }

    /// Adds version `sha256` and records a successful build of it, as
    /// `sless_control::Rollouts` does (`crates/sless-control/src/rollout.rs`): the function
    /// becomes `Ready` with it active. Each step is announced. Returns the version number.
    pub async fn deploy(&self, namespace: &str, name: &str, sha256: &str) -> Result<u32> {
        self.record_build(namespace, name, sha256, true, "").await
    }

    /// Adds version `sha256` and records a failed build of it (message `why`), as
    /// `sless_control::Rollouts` does: without another active version the function becomes
    /// `Failed`. Returns the version number.
    pub async fn deploy_failing(&self, namespace: &str, name: &str, sha256: &str, why: &str) -> Result<u32> {
        self.record_build(namespace, name, sha256, false, why).await
    }

    async fn record_build(&self, namespace: &str, name: &str, sha256: &str, ok: bool, why: &str) -> Result<u32> {
        let f = self.get_function(namespace, name).await?;
        let (v, _) = self.add_version(namespace, name, sha256, 0, f.spec.runtime).await?;
        let (status, active) = decide::status_after_build(&f.status, f.active_version, v.version, ok, why, Utc::now());
        self.update_status(namespace, name, &status, active).await?;
        let phase = if ok { VersionPhase::Ready } else { VersionPhase::Failed };
        self.set_version_build(namespace, name, v.version, phase, why).await?;
        Ok(v.version)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs a read (after the failure switch).
    fn read<T>(&self, call: &str, read: impl FnOnce(&State) -> Result<T>) -> Result<T> {
        self.failures.check(call)?;
        read(&self.lock())
    }

    /// Runs a write (after the failure switch); announces `(kind, namespace, name)` when it
    /// returns `true` with its value, once the state is unlocked.
    fn write<T>(
        &self,
        call: &str,
        kind: Kind,
        namespace: &str,
        name: &str,
        write: impl FnOnce(&mut State) -> Result<(T, bool)>,
    ) -> Result<T> {
        self.failures.check(call)?;
        let (value, changed) = write(&mut self.lock())?;
        if changed {
            self.announce(Change { kind, namespace: namespace.into(), name: name.into() });
        }
        Ok(value)
    }

    fn announce(&self, change: Change) {
        if self.silenced.load(Ordering::SeqCst) {
            self.lost.fetch_add(1, Ordering::SeqCst);
        } else {
            self.feed.send(change);
        }
    }

    /// Stores `record` (made from what the creator decided, with the store-owned fields
    /// filled as the SQL store fills them) and returns it.
    fn create<R: Resource>(&self, table: impl FnOnce(&mut State) -> &mut Table<R>, record: R) -> Result<R> {
        let (namespace, name) = record.key();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        self.write("create", R::CHANGE, &namespace, &name, |s| {
            table(s).insert(&record).map(|()| (record.clone(), true))
        })
    }

    fn replace<R: Resource>(
        &self,
        table: impl FnOnce(&mut State) -> &mut Table<R>,
        namespace: &str,
        name: &str,
        spec: &R::Spec,
        expected: Option<&ResourceVersion>,
    ) -> Result<R> {
        self.write("replace", R::CHANGE, namespace, name, |s| {
            table(s).replace(namespace, name, spec, expected).map(|r| (r, true))
        })
    }

    fn update<R: Resource>(
        &self,
        table: impl FnOnce(&mut State) -> &mut Table<R>,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut R),
    ) -> Result<()> {
        self.write("update_status", R::CHANGE, namespace, name, |s| {
            table(s).update(namespace, name, change).map(|()| ((), true))
        })
    }

    fn delete<R: Resource>(
        &self,
        table: impl FnOnce(&mut State) -> &mut Table<R>,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        self.write("delete", R::CHANGE, namespace, name, |s| table(s).remove(namespace, name).map(|_| ((), true)))
    }
}

#[async_trait::async_trait]
impl Registry for FakeRegistry {
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.feed.subscribe()
    }

    fn generation(&self) -> u64 {
        self.feed.generation()
    }

    async fn create_function(&self, new: &NewFunction) -> Result<FunctionRecord> {
        let record = FunctionRecord::created(new.clone(), ResourceVersion::from_count(1), Utc::now());
        self.create(|s| &mut s.functions, record)
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<FunctionRecord> {
        self.gate().await;
        self.read("get_function", |s| s.functions.get(namespace, name))
    }

    async fn list_functions(&self, namespace: &str, page: &Page) -> Result<Listed<FunctionRecord>> {
        self.read("list_functions", |s| s.functions.page(namespace, page))
    }

    async fn all_functions(&self) -> Result<Vec<FunctionRecord>> {
        self.read("all_functions", |s| Ok(s.functions.all()))
    }

    async fn replace_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &FunctionSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<FunctionRecord> {
        self.replace(|s| &mut s.functions, namespace, name, spec, expected_resource_version)
    }

    async fn update_status(
        &self,
        namespace: &str,
        name: &str,
        status: &FunctionStatus,
        active_version: Option<u32>,
    ) -> Result<()> {
        self.update(
            |s| &mut s.functions,
            namespace,
            name,
            |f| {
                f.status = status.clone();
                f.active_version = active_version;
            },
        )
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        self.write("delete_function", Kind::Function, namespace, name, |s| {
            s.functions.remove(namespace, name)?;
            s.versions.remove(&(namespace.to_string(), name.to_string()));
            Ok(((), true))
        })
    }

    async fn add_version(
        &self,
        namespace: &str,
        function: &str,
        sha256: &str,
        size_bytes: u64,
        runtime: Runtime,
    ) -> Result<(VersionRecord, bool)> {
        self.write("add_version", Kind::Function, namespace, function, |s| {
            s.function_exists(namespace, function)?;
            let versions = s.versions_mut(namespace, function);
            if let Some(same) = versions.iter().find(|v| v.record.sha256 == sha256) {
                return Ok(((same.record.clone(), false), false));
            }
            // Numbered after the newest left, as the SQL `MAX(version) + 1`.
            let version = versions.iter().map(|v| v.record.version).max().unwrap_or(0) + 1;
            let record = VersionRecord {
                namespace: namespace.into(),
                function: function.into(),
                version,
                sha256: sha256.into(),
                size_bytes,
                runtime,
                phase: VersionPhase::Building,
                message: String::new(),
                created_at: Utc::now(),
            };
            versions.push(StoredVersion { record: record.clone() });
            Ok(((record, true), true))
        })
    }

    async fn get_version(&self, namespace: &str, function: &str, version: u32) -> Result<VersionRecord> {
        self.gate().await;
        self.read("get_version", |s| {
            s.versions(namespace, function)
                .iter()
                .find(|v| v.record.version == version)
                .map(|v| v.record.clone())
                .ok_or_else(|| version_not_found(function, version))
        })
    }

    async fn list_versions(&self, namespace: &str, function: &str) -> Result<Vec<VersionRecord>> {
        self.read("list_versions", |s| {
            s.function_exists(namespace, function)?;
            Ok(s.versions(namespace, function).iter().map(|v| v.record.clone()).collect())
        })
    }

    async fn delete_version(&self, namespace: &str, function: &str, version: u32) -> Result<bool> {
        self.write("delete_version", Kind::Function, namespace, function, |s| {
            let active = s.functions.get(namespace, function).ok().and_then(|f| f.active_version);
            if active == Some(version) {
                return Ok((false, false));
            }
            let Some(versions) = s.versions.get_mut(&(namespace.to_string(), function.to_string())) else {
                return Ok((false, false));
            };
            let before = versions.len();
            versions.retain(|v| v.record.version != version);
            let deleted = versions.len() < before;
            Ok((deleted, deleted))
        })
    }

    async fn set_version_build(
        &self,
        namespace: &str,
        function: &str,
        version: u32,
        phase: VersionPhase,
        message: &str,
    ) -> Result<()> {
        // A missing version is not an error (the SQL `UPDATE` matches nothing and says nothing).
        self.write("set_version_build", Kind::Function, namespace, function, |s| {
            let key = (namespace.to_string(), function.to_string());
            let found = s.versions.get_mut(&key).and_then(|vs| vs.iter_mut().find(|v| v.record.version == version));
            let Some(v) = found else { return Ok(((), false)) };
            v.record.phase = phase;
            v.record.message = message.into();
            Ok(((), true))
        })
    }

    async fn create_trigger(&self, new: &NewTrigger) -> Result<TriggerRecord> {
        let record = TriggerRecord::created(new.clone(), ResourceVersion::from_count(1), Utc::now());
        self.create(|s| &mut s.triggers, record)
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<TriggerRecord> {
        self.read("get_trigger", |s| s.triggers.get(namespace, name))
    }

    async fn list_triggers(&self, namespace: &str, page: &Page) -> Result<Listed<TriggerRecord>> {
        self.gate().await;
        self.read("list_triggers", |s| s.triggers.page(namespace, page))
    }

    async fn all_triggers(&self) -> Result<Vec<TriggerRecord>> {
        self.read("all_triggers", |s| Ok(s.triggers.all()))
    }

    async fn replace_trigger_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &TriggerSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<TriggerRecord> {
        self.replace(|s| &mut s.triggers, namespace, name, spec, expected_resource_version)
    }

    async fn update_trigger_status(&self, namespace: &str, name: &str, status: &TriggerStatus) -> Result<()> {
        self.update(|s| &mut s.triggers, namespace, name, |t| t.status = status.clone())
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete(|s| &mut s.triggers, namespace, name)
    }

    async fn create_job(&self, new: &NewJob) -> Result<JobRecord> {
        let record = JobRecord::created(new.clone(), ResourceVersion::from_count(1), Utc::now());
        self.create(|s| &mut s.jobs, record)
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<JobRecord> {
        self.read("get_job", |s| s.jobs.get(namespace, name))
    }

    async fn list_jobs(&self, namespace: &str, page: &Page) -> Result<Listed<JobRecord>> {
        self.read("list_jobs", |s| s.jobs.page(namespace, page))
    }

    async fn all_jobs(&self) -> Result<Vec<JobRecord>> {
        self.read("all_jobs", |s| Ok(s.jobs.all()))
    }

    async fn replace_job_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &JobSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<JobRecord> {
        self.replace(|s| &mut s.jobs, namespace, name, spec, expected_resource_version)
    }

    async fn update_job_status(&self, namespace: &str, name: &str, status: &JobStatus) -> Result<()> {
        self.update(|s| &mut s.jobs, namespace, name, |j| j.status = status.clone())
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete(|s| &mut s.jobs, namespace, name)
    }
}

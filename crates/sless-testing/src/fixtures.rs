//! Chainable builders of the records the fakes store: a valid record from a name (and the
//! function it refers to), with only what a test cares about changed.
//!
//! ```
//! use sless_testing::{FunctionBuilder, JobBuilder, TriggerBuilder};
//!
//! let f = FunctionBuilder::new("f").ready_at(2).disabled().build();
//! assert_eq!((f.active_version, f.spec.enabled), (Some(2), false));
//! let t = TriggerBuilder::cron("t", "f").schedule("@every 1s").build();
//! assert_eq!(t.spec.schedule.as_deref(), Some("@every 1s"));
//! let j = JobBuilder::new("j", "f").run_id(3).build();
//! assert_eq!(j.spec.run_id, 3);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde_json::Value;
use sless_core::decide;
use sless_core::invocation::{InvocationRecord, Outcome, Source};
use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::spec::{DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_SEC, FunctionSpec};
use sless_core::status::FunctionStatus;
use sless_core::traits::FunctionRecord;
use sless_core::trigger::{HttpAuth, TriggerRecord, TriggerSpec, TriggerStatus, TriggerType};

/// The namespace builders use unless told otherwise.
pub const NAMESPACE: &str = "default";

/// The entrypoint a builder gives a function of `runtime`.
pub fn default_entrypoint(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Python311 => "main.handler",
        Runtime::Nodejs20 => "index.handler",
    }
}

/// What a [`FunctionBuilder`] sets the status to.
#[derive(Debug, Clone)]
enum Phase {
    Pending,
    Building(u32),
    Ready(u32),
    Failed(String),
}

/// A [`FunctionRecord`]: by default in namespace `default`, Python 3.11 `main.handler` with
/// the API's defaults, `Pending` (no code), resource version 1.
#[derive(Debug, Clone)]
pub struct FunctionBuilder {
    namespace: String,
    name: String,
    spec: FunctionSpec,
    phase: Phase,
    resource_version: ResourceVersion,
    at: DateTime<Utc>,
}

impl FunctionBuilder {
    /// A pending function called `name`.
    pub fn new(name: &str) -> Self {
        FunctionBuilder {
            namespace: NAMESPACE.into(),
            name: name.into(),
            spec: FunctionSpec {
                runtime: Runtime::Python311,
                entrypoint: default_entrypoint(Runtime::Python311).into(),
                memory_mb: DEFAULT_MEMORY_MB,
                timeout_sec: DEFAULT_TIMEOUT_SEC,
                env: Default::default(),
                enabled: true,
                concurrency: 1,
                max_instances: None,
                idle_timeout_sec: None,
                payload_format: Default::default(),
            },
            phase: Phase::Pending,
            resource_version: ResourceVersion::from_count(1),
            at: Utc::now(),
        }
    }

    /// In `namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Of `runtime`, with that runtime's default entrypoint.
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        self.spec.runtime = runtime;
        self.spec.entrypoint = default_entrypoint(runtime).into();
        self
    }

    /// With entrypoint `entrypoint` (`folder/module.function`).
    pub fn entrypoint(mut self, entrypoint: &str) -> Self {
        self.spec.entrypoint = entrypoint.into();
        self
    }

    /// With `memory_mb`.
    pub fn memory_mb(mut self, memory_mb: u32) -> Self {
        self.spec.memory_mb = memory_mb;
        self
    }

    /// With `timeout_sec`.
    pub fn timeout_sec(mut self, timeout_sec: u32) -> Self {
        self.spec.timeout_sec = timeout_sec;
        self
    }

    /// With the environment variable `key=value`.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.spec.env.insert(key.into(), value.into());
        self
    }

    /// Disabled (`enabled: false`).
    pub fn disabled(mut self) -> Self {
        self.spec.enabled = false;
        self
    }

    /// Building version `version` (nothing active).
    pub fn building(mut self, version: u32) -> Self {
        self.phase = Phase::Building(version);
        self
    }

    /// `Ready` with `version` active, the status a successful build leaves
    /// (`sless_core::decide::status_after_build`).
    pub fn ready_at(mut self, version: u32) -> Self {
        self.phase = Phase::Ready(version);
        self
    }

    /// `Failed` (its first build failed with `why`), nothing active.
    pub fn failed(mut self, why: &str) -> Self {
        self.phase = Phase::Failed(why.into());
        self
    }

    /// With `resource_version` (a count, as the SQL store gives).
    pub fn resource_version(mut self, resource_version: u64) -> Self {
        self.resource_version = ResourceVersion::from_count(resource_version);
        self
    }

    /// Created (and last changed) at `at`.
    pub fn created_at(mut self, at: DateTime<Utc>) -> Self {
        self.at = at;
        self
    }

    /// The record.
    pub fn build(self) -> FunctionRecord {
        let pending = FunctionStatus::pending(self.at);
        let (status, active_version) = match self.phase {
            Phase::Pending => (pending, None),
            Phase::Building(v) => (decide::status_building(&pending, None, v, self.at), None),
            Phase::Ready(v) => decide::status_after_build(&pending, None, v, true, "", self.at),
            Phase::Failed(why) => decide::status_after_build(&pending, None, 1, false, &why, self.at),
        };
        FunctionRecord {
            namespace: self.namespace,
            name: self.name,
            spec: self.spec,
            resource_version: self.resource_version,
            active_version,
            status,
            created_at: self.at,
            updated_at: self.at,
        }
    }
}

/// A [`TriggerRecord`] in namespace `default`, enabled, not reconciled yet, resource version 1:
/// a cron trigger (`@hourly` in UTC) or an http trigger (public).
#[derive(Debug, Clone)]
pub struct TriggerBuilder {
    namespace: String,
    name: String,
    spec: TriggerSpec,
    status: TriggerStatus,
    resource_version: ResourceVersion,
    at: DateTime<Utc>,
}

impl TriggerBuilder {
    fn new(name: &str, function: &str, kind: TriggerType) -> Self {
        let cron = kind == TriggerType::Cron;
        TriggerBuilder {
            namespace: NAMESPACE.into(),
            name: name.into(),
            spec: TriggerSpec {
                function: function.into(),
                kind,
                schedule: cron.then(|| "@hourly".to_string()),
                timezone: "UTC".into(),
                payload: Value::Null,
                auth: HttpAuth::None,
                enabled: true,
                prewarm_sec: 0,
                payload_format: None,
            },
            status: TriggerStatus::new(),
            resource_version: ResourceVersion::from_count(1),
            at: Utc::now(),
        }
    }

    /// A cron trigger `name` calling `function` every hour.
    pub fn cron(name: &str, function: &str) -> Self {
        Self::new(name, function, TriggerType::Cron)
    }

    /// A public http trigger `name` for `function`.
    pub fn http(name: &str, function: &str) -> Self {
        Self::new(name, function, TriggerType::Http)
    }

    /// In `namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// On `schedule` (5-field cron, a macro, or `@every <duration>`).
    pub fn schedule(mut self, schedule: &str) -> Self {
        self.spec.schedule = Some(schedule.into());
        self
    }

    /// In time zone `timezone`.
    pub fn timezone(mut self, timezone: &str) -> Self {
        self.spec.timezone = timezone.into();
        self
    }

    /// Delivering `payload` as the cron event's `detail`.
    pub fn payload(mut self, payload: Value) -> Self {
        self.spec.payload = payload;
        self
    }

    /// Prewarming `prewarm_sec` seconds before each tick.
    pub fn prewarm_sec(mut self, prewarm_sec: u32) -> Self {
        self.spec.prewarm_sec = prewarm_sec;
        self
    }

    /// With `auth` (http triggers).
    pub fn auth(mut self, auth: HttpAuth) -> Self {
        self.spec.auth = auth;
        self
    }

    /// Disabled.
    pub fn disabled(mut self) -> Self {
        self.spec.enabled = false;
        self
    }

    /// With `status`.
    pub fn status(mut self, status: TriggerStatus) -> Self {
        self.status = status;
        self
    }

    /// With `resource_version` (a count, as the SQL store gives).
    pub fn resource_version(mut self, resource_version: u64) -> Self {
        self.resource_version = ResourceVersion::from_count(resource_version);
        self
    }

    /// Created (and last changed: `@every` counts from here) at `at`.
    pub fn created_at(mut self, at: DateTime<Utc>) -> Self {
        self.at = at;
        self
    }

    /// The record.
    pub fn build(self) -> TriggerRecord {
        TriggerRecord {
            namespace: self.namespace,
            name: self.name,
            spec: self.spec,
            resource_version: self.resource_version,
            status: self.status,
            created_at: self.at,
            updated_at: self.at,
        }
    }
}

/// A [`JobRecord`] in namespace `default`, enabled, with `run_id` 1 (so it runs once; the
/// API's default is 0, which never runs) and no payload, not reconciled yet.
#[derive(Debug, Clone)]
pub struct JobBuilder {
    namespace: String,
    name: String,
    spec: JobSpec,
    status: JobStatus,
    resource_version: ResourceVersion,
    at: DateTime<Utc>,
}

impl JobBuilder {
    /// A job `name` running `function`.
    pub fn new(name: &str, function: &str) -> Self {
        JobBuilder {
            namespace: NAMESPACE.into(),
            name: name.into(),
            spec: JobSpec { function: function.into(), run_id: 1, payload: Value::Null, enabled: true },
            status: JobStatus::new(),
            resource_version: ResourceVersion::from_count(1),
            at: Utc::now(),
        }
    }

    /// In `namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// With `run_id` (0: never runs).
    pub fn run_id(mut self, run_id: u64) -> Self {
        self.spec.run_id = run_id;
        self
    }

    /// Delivering `payload` as the job event's `payload`.
    pub fn payload(mut self, payload: Value) -> Self {
        self.spec.payload = payload;
        self
    }

    /// Disabled.
    pub fn disabled(mut self) -> Self {
        self.spec.enabled = false;
        self
    }

    /// With `status`.
    pub fn status(mut self, status: JobStatus) -> Self {
        self.status = status;
        self
    }

    /// With `resource_version` (a count, as the SQL store gives).
    pub fn resource_version(mut self, resource_version: u64) -> Self {
        self.resource_version = ResourceVersion::from_count(resource_version);
        self
    }

    /// Created (and last changed) at `at`.
    pub fn created_at(mut self, at: DateTime<Utc>) -> Self {
        self.at = at;
        self
    }

    /// The record.
    pub fn build(self) -> JobRecord {
        JobRecord {
            namespace: self.namespace,
            name: self.name,
            spec: self.spec,
            resource_version: self.resource_version,
            status: self.status,
            created_at: self.at,
            updated_at: self.at,
        }
    }
}

/// Makes ids that sort in creation order, shaped like UUIDv7.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// An [`InvocationRecord`] of `function` in namespace `default`: an invoke-API call of
/// version 1 that answered 200 `ok`, started now, with a fresh id that sorts after every id
/// made before it in this process.
#[derive(Debug, Clone)]
pub struct InvocationBuilder {
    record: InvocationRecord,
}

impl InvocationBuilder {
    /// A successful call of `function`.
    pub fn new(function: &str) -> Self {
        let started_at = Utc::now();
        let seq = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        InvocationBuilder {
            record: InvocationRecord {
                id: format!("00000000-0000-7000-8000-{seq:012x}"),
                namespace: NAMESPACE.into(),
                function: function.into(),
                version: Some(1),
                source: Source::Invoke,
                source_name: None,
                started_at,
                duration_ms: 1,
                status: 200,
                outcome: Outcome::Ok,
                error_type: None,
                error_message: None,
                request_bytes: 0,
                response_bytes: 2,
                cold_start: false,
                cold_start_kind: None,
                logs: Vec::new(),
            },
        }
    }

    /// With id `id`.
    pub fn id(mut self, id: &str) -> Self {
        self.record.id = id.into();
        self
    }

    /// In `namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.record.namespace = namespace.into();
        self
    }

    /// Made by `source` (a trigger's or job's name for `http`, `cron`, `job`).
    pub fn source(mut self, source: Source, name: Option<&str>) -> Self {
        self.record.source = source;
        self.record.source_name = name.map(String::from);
        self
    }

    /// Started at `at`.
    pub fn started_at(mut self, at: DateTime<Utc>) -> Self {
        self.record.started_at = at;
        self
    }

    /// Ended with `outcome` and HTTP `status`.
    pub fn outcome(mut self, outcome: Outcome, status: u16) -> Self {
        self.record.outcome = outcome;
        self.record.status = status;
        self
    }

    /// The record.
    pub fn build(self) -> InvocationRecord {
        self.record
    }
}

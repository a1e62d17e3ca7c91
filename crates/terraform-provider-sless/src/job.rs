//! `sless_function_job`: a one-off run of a function, again whenever `run_id` changes.
//! Create and update wait until the run with the configured `run_id` has finished (the job
//! waits on the server for its function to be Ready, so a job and its function can be
//! created in one plan in any order); a failed run fails the apply.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};
use sless_client::{Client, etag};
use sless_core::job::{JobPhase, JobRecord};
use tf_provider::schema::{AttributeConstraint as C, AttributeType as T, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::error::{Context, Error, Result, diagnostic};
use crate::provider::{Shared, attr, conn, schema};
use crate::util::{Bool, Num, Str, keep_null, payload_json, payload_state, s, split_id};

/// The attributes (an API `field` names one of these).
pub const ATTRIBUTES: [&str; 14] = [
    "id",
    "namespace",
    "name",
    "function",
    "run_id",
    "payload",
    "enabled",
    "wait",
    "wait_timeout_sec",
    "phase",
    "last_run_id",
    "last_status_code",
    "last_invocation_id",
    "resource_version",
];

/// How long create and update wait for the run by default, seconds.
pub const DEFAULT_WAIT_TIMEOUT_SEC: i64 = 300;

/// The state of a `sless_function_job`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// `namespace/name`.
    pub id: Str,
    /// The namespace.
    pub namespace: Str,
    /// The name.
    pub name: Str,
    /// The function it calls.
    pub function: Str,
    /// The run; a new value runs the job again, 0 never runs it.
    pub run_id: Num,
    /// JSON text, the event's `payload`.
    pub payload: Str,
    /// Whether it runs.
    pub enabled: Bool,
    /// Whether apply waits for the run (default true).
    pub wait: Bool,
    /// Seconds apply waits for the run.
    pub wait_timeout_sec: Num,
    /// `Skipped`, `Waiting`, `Running`, `Succeeded` or `Failed`.
    pub phase: Str,
    /// The last run's `run_id`.
    pub last_run_id: Num,
    /// The last run's HTTP status.
    pub last_status_code: Num,
    /// The last run's invocation record id.
    pub last_invocation_id: Str,
    /// The server's resource version.
    pub resource_version: Str,
}

/// The `sless_function_job` resource.
#[derive(Debug, Clone)]
pub struct JobResource(pub Shared);

/// Polls `get` until it answers 404, at most two minutes.
pub(crate) async fn wait_gone<F, Fut>(get: F, name: &str) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = sless_client::Result<()>> + Send,
{
    let started = Instant::now();
    loop {
        match get().await {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(()) if started.elapsed() > Duration::from_secs(120) => {
                return Err(Error::Timeout { what: format!("deleting {name}"), secs: 120 });
            }
            Ok(()) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

impl JobState {
    fn ns_name(&self) -> (String, String) {
        (s(&self.namespace).unwrap_or_default().to_string(), s(&self.name).unwrap_or_default().to_string())
    }

    fn spec(&self) -> (Str, Num, Str, Bool) {
        (self.function.clone(), self.run_id, self.payload.clone(), self.enabled)
    }

    fn spec_json(&self) -> Result<Json> {
        let mut m = Map::new();
        for (k, v) in [("name", &self.name), ("function", &self.function)] {
            if let Some(v) = s(v) {
                m.insert(k.into(), json!(v));
            }
        }
        if let Some(n) = self.run_id.as_ref_option() {
            m.insert("run_id".into(), json!(n));
        }
        let payload =
            payload_json(&self.payload).map_err(|message| Error::Invalid { attribute: "payload", message })?;
        if !payload.is_null() {
            m.insert("payload".into(), payload);
        }
        if let Some(e) = self.enabled.as_ref_option() {
            m.insert("enabled".into(), json!(e));
        }
        Ok(Json::Object(m))
    }

    fn from_record(r: &JobRecord, prior: &JobState) -> JobState {
        let run = r.status.last_run.as_ref();
        JobState {
            id: Value::Value(format!("{}/{}", r.namespace, r.name)),
            namespace: Value::Value(r.namespace.clone()),
            name: Value::Value(r.name.clone()),
            function: Value::Value(r.spec.function.clone()),
            run_id: keep_null(&prior.run_id, i64::try_from(r.spec.run_id).unwrap_or(i64::MAX), 0),
            payload: payload_state(&prior.payload, &r.spec.payload),
            enabled: keep_null(&prior.enabled, r.spec.enabled, true),
            wait: prior.wait,
            wait_timeout_sec: prior.wait_timeout_sec,
            phase: Value::Value(format!("{:?}", r.status.phase)),
            last_run_id: r.status.last_run_id.and_then(|n| i64::try_from(n).ok()).into(),
            last_status_code: run.map(|r| i64::from(r.status_code)).into(),
            last_invocation_id: run.map(|r| r.invocation_id.clone()).into(),
            resource_version: Value::Value(r.resource_version.to_string()),
        }
    }

    /// Whether apply waits for this run.
    fn waits(&self) -> bool {
        let runs = self.enabled.as_ref_option().copied().unwrap_or(true);
        let run_id = self.run_id.as_ref_option().copied().unwrap_or(0);
        runs && run_id > 0 && self.wait.as_ref_option().copied().unwrap_or(true)
    }
}

/// Waits until the job's run `run_id` has finished. Errors: [`Error::JobFailed`],
/// [`Error::Timeout`].
async fn wait_run(client: &Client, name: &str, run_id: u64, timeout: Duration) -> Result<JobRecord> {
    let started = Instant::now();
    loop {
        let r = client.get_job(name).await?;
        if r.status.last_run_id == Some(run_id) {
            match r.status.phase {
                JobPhase::Succeeded => return Ok(r),
                JobPhase::Failed => {
                    let run = r.status.last_run.as_ref();
                    return Err(Error::JobFailed {
                        job: name.to_string(),
                        run_id,
                        status_code: run.map(|r| r.status_code).unwrap_or(0),
                        excerpt: run.map(|r| r.output_excerpt.clone()).unwrap_or_else(|| r.status.message.clone()),
                    });
                }
                _ => {}
            }
        }
        if started.elapsed() >= timeout {
            return Err(Error::Timeout {
                what: format!("job {name} run {run_id} ({:?}: {})", r.status.phase, r.status.message),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl JobResource {
    fn report(&self, diags: &mut Diagnostics, err: &Error, action: &str, state: &JobState) {
        let (ns, name) = state.ns_name();
        let id = format!("{ns}/{name}");
        let ctx = Context {
            resource: "sless_function_job",
            action,
            id: &id,
            attributes: &ATTRIBUTES,
            code_attribute: "function",
        };
        diags.add_error(diagnostic(err, &ctx));
    }

    async fn fetch(&self, client: &Client, name: &str, prior: &JobState) -> Result<Option<JobState>> {
        match client.get_job(name).await {
            Ok(r) => Ok(Some(JobState::from_record(&r, prior))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn plan(&self, diags: &mut Diagnostics, prior: Option<&JobState>, mut p: JobState) -> Option<JobState> {
        let c = conn(&self.0, diags)?;
        if p.namespace.is_null() {
            p.namespace = Value::Value(c.namespace.clone());
        }
        if let Err(message) = payload_json(&p.payload) {
            crate::error::add(diags, "invalid payload", message, AttributePath::new("payload"));
            return None;
        }
        let (ns, name) = p.ns_name();
        p.id = if p.name.is_value() && p.namespace.is_value() {
            Value::Value(format!("{ns}/{name}"))
        } else {
            Value::Unknown
        };
        match prior {
            Some(q) if q.spec() == p.spec() => {
                p.phase = q.phase.clone();
                p.last_run_id = q.last_run_id;
                p.last_status_code = q.last_status_code;
                p.last_invocation_id = q.last_invocation_id.clone();
                p.resource_version = q.resource_version.clone();
            }
            _ => {
                p.phase = Value::Unknown;
                p.last_run_id = Value::Unknown;
                p.last_status_code = Value::Unknown;
                p.last_invocation_id = Value::Unknown;
                p.resource_version = Value::Unknown;
            }
        }
        Some(p)
    }

    /// After a create or update: waits for the run when it should, reads back.
    async fn settle(&self, client: &Client, r: JobRecord, planned: &JobState) -> Result<JobState> {
        let r = if planned.waits() {
            let run_id = u64::try_from(planned.run_id.as_ref_option().copied().unwrap_or(0)).unwrap_or(0);
            let secs = planned.wait_timeout_sec.as_ref_option().copied().unwrap_or(DEFAULT_WAIT_TIMEOUT_SEC);
            wait_run(client, &r.name, run_id, Duration::from_secs(u64::try_from(secs).unwrap_or(0))).await?
        } else {
            r
        };
        Ok(JobState::from_record(&r, planned))
    }
}

fn job_schema() -> Schema {
    schema(
        "A one-off run of a sless function, run again whenever `run_id` changes.",
        vec![
            ("id", attr(T::String, C::Computed, "`namespace/name`.")),
            (
                "namespace",
                attr(
                    T::String,
                    C::OptionalComputed,
                    "The namespace; the provider's by default. Changing it replaces the job.",
                ),
            ),
            ("name", attr(T::String, C::Required, "The job's name. Changing it replaces the job.")),
            (
                "function",
                attr(T::String, C::Required, "The function it calls (same namespace; it need not be Ready yet)."),
            ),
            (
                "run_id",
                attr(T::Number, C::Optional, "The run: a new value runs the job again; 0 (default) never runs it."),
            ),
            ("payload", attr(T::String, C::Optional, "The event's `payload`, as JSON text (`jsonencode({...})`).")),
            ("enabled", attr(T::Bool, C::Optional, "Whether it runs (default true).")),
            (
                "wait",
                attr(
                    T::Bool,
                    C::Optional,
                    "Whether apply waits for the run to finish, and fails when it fails (default true).",
                ),
            ),
            ("wait_timeout_sec", attr(T::Number, C::Optional, "Seconds apply waits for the run (default 300).")),
            ("phase", attr(T::String, C::Computed, "`Skipped`, `Waiting`, `Running`, `Succeeded` or `Failed`.")),
            ("last_run_id", attr(T::Number, C::Computed, "The `run_id` of the last run.")),
            ("last_status_code", attr(T::Number, C::Computed, "The last run's HTTP status.")),
            ("last_invocation_id", attr(T::String, C::Computed, "The last run's invocation record id.")),
            ("resource_version", attr(T::String, C::Computed, "The server's version of the spec; sent as `If-Match`.")),
        ],
    )
}

#[async_trait]
impl Resource for JobResource {
    type State<'a> = JobState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(job_schema())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: JobState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(JobState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = state.ns_name();
        match self.fetch(&c.client.in_namespace(&ns), &name, &state).await {
            Ok(found) => found.map(|s| (s, private)),
            Err(e) => {
                self.report(diags, &e, "read", &state);
                None
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed: JobState,
        _c: JobState,
        _m: ValueEmpty,
    ) -> Option<(JobState, ValueEmpty)> {
        Some((self.plan(diags, None, proposed)?, ValueEmpty::default()))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: JobState,
        proposed: JobState,
        _c: JobState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(JobState, ValueEmpty, Vec<AttributePath>)> {
        let planned = self.plan(diags, Some(&prior), proposed)?;
        let mut replace = Vec::new();
        for (k, a, b) in [("namespace", &prior.namespace, &planned.namespace), ("name", &prior.name, &planned.name)] {
            if a != b {
                replace.push(AttributePath::new(k));
            }
        }
        Some((planned, private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _d: &mut Diagnostics,
        _p: JobState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<ValueEmpty> {
        Some(private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: JobState,
        _c: JobState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(JobState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        let created = match planned.spec_json() {
            Ok(body) => client.create_job(&body).await.map_err(Error::from),
            Err(e) => Err(e),
        };
        let result = match created {
            Ok(r) => self.settle(&client, r, &planned).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(s) => Some((s, private)),
            Err(e) => {
                self.report(diags, &e, "create", &planned);
                self.fetch(&client, &name, &planned).await.ok().flatten().map(|s| (s, private))
            }
        }
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: JobState,
        planned: JobState,
        _c: JobState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(JobState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        let tag = prior.resource_version.as_ref_option().map(etag);
        let result = if prior.spec() == planned.spec() {
            self.fetch(&client, &name, &planned).await.and_then(|s| {
                s.ok_or_else(|| {
                    Error::Api(sless_client::Error::Unexpected { what: name.clone(), message: "deleted".into() })
                })
            })
        } else {
            match planned.spec_json() {
                Ok(body) => match client.replace_job(&name, &body, tag.as_deref()).await {
                    Ok(r) => self.settle(&client, r, &planned).await,
                    Err(e) => Err(e.into()),
                },
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(s) => Some((s, private)),
            Err(e) => {
                self.report(diags, &e, "update", &planned);
                self.fetch(&client, &name, &planned).await.ok().flatten().map(|s| (s, private))
            }
        }
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: JobState,
        _p: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<()> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = prior.ns_name();
        let client = c.client.in_namespace(&ns);
        let result = match client.delete_job(&name).await {
            Ok(_) => {
                let get = || {
                    let (client, name) = (client.clone(), name.clone());
                    async move { client.get_job(&name).await.map(drop) }
                };
                wait_gone(get, &name).await
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(()) => Some(()),
            Err(e) => {
                self.report(diags, &e, "delete", &prior);
                None
            }
        }
    }

    async fn import<'a>(&self, diags: &mut Diagnostics, id: String) -> Option<(JobState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let Some((ns, name)) = split_id(&id, &c.namespace) else {
            crate::error::add_root(
                diags,
                format!("cannot import sless_function_job {id:?}"),
                "The import id is namespace/name.",
            );
            return None;
        };
        let prior =
            JobState { namespace: Value::Value(ns.into()), name: Value::Value(name.into()), ..Default::default() };
        match self.fetch(&c.client.in_namespace(ns), name, &prior).await {
            Ok(Some(s)) => Some((s, ValueEmpty::default())),
            Ok(None) => {
                crate::error::add_root(
                    diags,
                    format!("cannot import sless_function_job {id:?}: not found"),
                    "Check the namespace and name.",
                );
                None
            }
            Err(e) => {
                self.report(diags, &e, "import", &prior);
                None
            }
        }
    }
}

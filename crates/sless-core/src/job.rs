//! Jobs (docs/architecture.md, "Triggers and jobs"): a one-off run of a function with a payload, keyed by `run_id`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::names::validate_name;
use crate::resource_version::ResourceVersion;
use crate::spec::check_same_name;
use crate::status::Condition;
use crate::trigger::{object, optional_bool, optional_name, required_str};
use crate::{Error, Result};

/// What a user declares about a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSpec {
    /// The function it runs (in the same namespace). It need not exist yet.
    pub function: String,
    /// `0` never runs (`Skipped`); any other value runs once, and again whenever it changes.
    pub run_id: u64,
    /// JSON delivered as the job event's `payload`.
    pub payload: Value,
    /// A disabled job does not run.
    pub enabled: bool,
}

const JOB_FIELDS: [&str; 5] = ["name", "function", "run_id", "payload", "enabled"];

impl JobSpec {
    /// Validates a create or full-replace body; errors name the field.
    pub fn from_json(body: &Value) -> Result<(Option<String>, JobSpec)> {
        let obj = object(body, &JOB_FIELDS)?;
        let name = optional_name(obj)?;
        let function = required_str(obj, "function")?;
        validate_name("function", function)?;
        let run_id = match obj.get("run_id") {
            None | Some(Value::Null) => 0,
            Some(v) => {
                v.as_u64().ok_or_else(|| Error::field("run_id", format!("must be a non-negative integer, got {v}")))?
            }
        };
        let payload = obj.get("payload").cloned().unwrap_or(Value::Null);
        let enabled = optional_bool(obj, "enabled", true)?;
        Ok((name, JobSpec { function: function.to_string(), run_id, payload, enabled }))
    }

    /// Applies an RFC 7396 merge patch and validates the result; `name` must not change.
    pub fn merge_patch(&self, name: &str, patch: &Value) -> Result<JobSpec> {
        if !patch.is_object() {
            return Err(Error::field("body", "a merge patch must be a JSON object"));
        }
        let mut doc = serde_json::to_value(self).map_err(|e| Error::Internal(e.to_string()))?;
        json_patch::merge(&mut doc, patch);
        let (patched_name, spec) = JobSpec::from_json(&doc)?;
        check_same_name(name, patched_name.as_deref())?;
        Ok(spec)
    }
}

/// Phase of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JobPhase {
    /// `run_id` is 0: nothing to run.
    Skipped,
    /// Its function is missing or not ready, or the job is disabled; `message` says why.
    Waiting,
    /// Running now.
    Running,
    /// The last run returned a 2xx/3xx response.
    Succeeded,
    /// The last run failed (error, timeout, crash, 4xx/5xx), or its function failed.
    Failed,
}

/// The result of one run of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobRun {
    /// The `run_id` this run was for.
    pub run_id: u64,
    /// The invocation's id (see the invocations API).
    pub invocation_id: String,
    /// The HTTP status of the function's response (502/504 for failures).
    pub status_code: u16,
    /// `ok`, `error`, `timeout`, `oom`, `crash`, `rejected`.
    pub outcome: String,
    /// How long the call took, in ms.
    pub duration_ms: u64,
    /// The first 1,024 bytes of the response body (or the error message).
    pub output_excerpt: String,
    /// When the run started.
    pub started_at: DateTime<Utc>,
}

/// The status of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobStatus {
    /// The phase.
    pub phase: JobPhase,
    /// Why.
    pub message: String,
    /// `Complete` (the current `run_id` ran).
    pub conditions: Vec<Condition>,
    /// The `run_id` of the last run started (a run is started at most once per `run_id`).
    pub last_run_id: Option<u64>,
    /// The last run's result.
    pub last_run: Option<JobRun>,
}

impl JobStatus {
    /// A new job's status before its first reconcile.
    pub fn new() -> Self {
        JobStatus {
            phase: JobPhase::Waiting,
            message: "not reconciled yet".into(),
            conditions: vec![],
            last_run_id: None,
            last_run: None,
        }
    }
}

impl Default for JobStatus {
    fn default() -> Self {
        Self::new()
    }
}

/// A stored job. Serialised as the API's job object (the spec's fields flat); `Deserialize`
/// reads that object back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobRecord {
    /// The namespace.
    pub namespace: String,
    /// The job's name.
    pub name: String,
    /// What the user declared.
    #[serde(flatten)]
    pub spec: JobSpec,
    /// Changes whenever the spec changes.
    pub resource_version: ResourceVersion,
    /// Phase, message, conditions, last run.
    pub status: JobStatus,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last spec change.
    pub updated_at: DateTime<Utc>,
}

/// The server-owned fields of a [`JobRecord`], read next to its flat spec.
#[derive(Deserialize)]
struct JobMeta {
    namespace: String,
    name: String,
    resource_version: ResourceVersion,
    status: JobStatus,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl<'de> Deserialize<'de> for JobRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let (m, spec): (JobMeta, JobSpec) = crate::flat::split(deserializer)?;
        Ok(JobRecord {
            namespace: m.namespace,
            name: m.name,
            spec,
            resource_version: m.resource_version,
            status: m.status,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_named_errors() {
        let (_, j) = JobSpec::from_json(&json!({"function": "f"})).expect("valid");
        assert_eq!((j.run_id, j.enabled, j.payload.clone()), (0, true, Value::Null));
        for (body, field) in [
            (json!({}), "function"),
            (json!({"function": "f", "run_id": -1}), "run_id"),
            (json!({"function": "f", "run_id": "1"}), "run_id"),
            (json!({"function": "f", "enabled": 1}), "enabled"),
            (json!({"function": "f", "runid": 1}), "runid"),
        ] {
            let err = JobSpec::from_json(&body).expect_err(field);
            assert!(err.to_string().starts_with(&format!("{field}: ")), "{body}: {err}");
        }
    }

    #[test]
    fn bumping_run_id_by_patch() {
        let (_, j) = JobSpec::from_json(&json!({"function": "f", "run_id": 1, "payload": {"a": 1}})).expect("valid");
        let p = j.merge_patch("j", &json!({"run_id": 2})).expect("patched");
        assert_eq!((p.run_id, p.payload), (2, json!({"a": 1})));
    }
}

//! Invocation records (docs/architecture.md, "Observability"): one per call of a function, whatever its source.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What made the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Source {
    /// The invoke API (`/v1/…/invoke`).
    Invoke,
    /// An http trigger (`/fn/…`).
    Http,
    /// A cron trigger's tick.
    Cron,
    /// A job run.
    Job,
}

impl Source {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Invoke => "invoke",
            Source::Http => "http",
            Source::Cron => "cron",
            Source::Job => "job",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [Source::Invoke, Source::Http, Source::Cron, Source::Job].into_iter().find(|x| x.as_str() == s)
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Outcome {
    /// The function answered (any status it chose).
    Ok,
    /// The function raised, or returned a malformed response.
    Error,
    /// It ran past `timeout_sec`.
    Timeout,
    /// It was killed for using more than `memory_mb`.
    Oom,
    /// Its process exited during the call.
    Crash,
    /// The platform refused the call (not ready, disabled, too large, too many calls).
    Rejected,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 6] =
        [Outcome::Ok, Outcome::Error, Outcome::Timeout, Outcome::Oom, Outcome::Crash, Outcome::Rejected];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Oom => "oom",
            Outcome::Crash => "crash",
            Outcome::Rejected => "rejected",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Outcome::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// How a cold start began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ColdStart {
    /// A new runtime process (interpreter start plus the function's import).
    Process,
    /// A generic warm-pool process that loaded the function for this call.
    Pool,
}

impl ColdStart {
    /// The name stored and shown: `process` or `pool`.
    pub fn as_str(self) -> &'static str {
        match self {
            ColdStart::Process => "process",
            ColdStart::Pool => "pool",
        }
    }

    /// The kind named `s` (as [`ColdStart::as_str`] writes it).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "process" => Some(ColdStart::Process),
            "pool" => Some(ColdStart::Pool),
            _ => None,
        }
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InvocationRecord {
    /// UUIDv7 (time-ordered); also the request id the handler saw.
    pub id: String,
    /// The namespace.
    pub namespace: String,
    /// The function's name.
    pub function: String,
    /// The version that served it (none when rejected before one was chosen).
    pub version: Option<u32>,
    /// What made the call.
    pub source: Source,
    /// The trigger's or job's name, for `http`, `cron` and `job` sources.
    pub source_name: Option<String>,
    /// When the call started.
    pub started_at: DateTime<Utc>,
    /// How long it took, in ms.
    pub duration_ms: u64,
    /// The HTTP status answered.
    pub status: u16,
    /// How it ended.
    pub outcome: Outcome,
    /// The error's type (e.g. `ValueError`, `Function.Timeout`), if any.
    pub error_type: Option<String>,
    /// The error's message, if any.
    pub error_message: Option<String>,
    /// Request body size in bytes.
    pub request_bytes: u64,
    /// Response body size in bytes.
    pub response_bytes: u64,
    /// Whether an instance was started for this call.
    pub cold_start: bool,
    /// For a cold start, how the instance began: `process` (a new interpreter) or `pool` (a
    /// warm-pool process that loaded the function for this call).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub cold_start_kind: Option<ColdStart>,
    /// The lines the call printed (capped; the last line says so when cut). Lists leave them
    /// out (read as empty).
    #[serde(default)]
    pub logs: Vec<String>,
}

/// Filters for listing invocations, newest first.
#[derive(Debug, Clone, Default)]
pub struct InvocationQuery {
    /// Only this function (all of the namespace when `None`).
    pub function: Option<String>,
    /// Only these outcomes (all when empty).
    pub outcomes: Vec<Outcome>,
    /// Only calls started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only calls started before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only ids older than this one (the cursor of the previous page).
    pub before_id: Option<String>,
    /// Most records to return.
    pub limit: u32,
}

/// How long invocation records are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Records older than this are deleted, in seconds (default 7 days).
    pub max_age_sec: u64,
    /// At most this many records per function are kept (default 10,000).
    pub max_per_function: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_age_sec: 7 * 24 * 3600, max_per_function: 10_000 }
    }
}

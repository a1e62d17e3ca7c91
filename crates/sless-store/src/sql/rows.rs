//! Rows as the tables hold them (integers as `i64`, times and JSON as text) and their
//! conversion to and from the domain records. `FromRow` is derived, so one struct reads a
//! row of either database.

use chrono::{DateTime, Utc};
use sless_core::invocation::{ColdStart, InvocationRecord, Outcome, Source};
use sless_core::job::JobRecord;
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{FunctionRecord, VersionRecord};
use sless_core::trigger::TriggerRecord;
use sless_core::{Error, Result};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

/// A row type both databases can produce.
pub(super) trait AnyRow:
    for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> AnyRow for T where T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin {}

pub(super) fn json_err(e: serde_json::Error) -> Error {
    Error::Internal(format!("stored JSON is unreadable: {e}"))
}

pub(super) fn to_json(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(json_err)
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(json_err)
}

pub(super) fn parse_time(s: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| Error::Internal(format!("stored time {s:?} is unreadable: {e}")))
}

/// A time as stored: RFC 3339 UTC with milliseconds, so text order is time order.
/// Now, at the precision times are stored with (ms), so a record returned by a write equals
/// the one a read returns.
pub(super) fn stored_now() -> DateTime<Utc> {
    use chrono::SubsecRound;
    Utc::now().trunc_subsecs(3)
}

pub(super) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A `u64` as a stored integer (saturating; the values stored never come close).
pub(super) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored integer as `u64` (negative values, which are never written, read as 0).
fn uint(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A stored version number.
fn version_number(v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Internal(format!("stored version {v} is invalid")))
}

/// The count a resource version of this store stands for. Errors: `Internal` for one that
/// this store did not give (it counts 1, 2, …).
pub(super) fn stored_count(v: &ResourceVersion) -> Result<i64> {
    v.as_count().map(int).ok_or_else(|| Error::Internal(format!("resource_version {v} was not given by this store")))
}

/// A row of `functions`.
#[derive(sqlx::FromRow)]
pub(super) struct FunctionRow {
    namespace: String,
    name: String,
    spec: String,
    resource_version: i64,
    active_version: Option<i64>,
    status: String,
    created_at: String,
    updated_at: String,
}

impl FunctionRow {
    pub(super) fn into_record(self) -> Result<FunctionRecord> {
        Ok(FunctionRecord {
            spec: from_json(&self.spec)?,
            status: from_json(&self.status)?,
            namespace: self.namespace,
            name: self.name,
            resource_version: ResourceVersion::from_count(uint(self.resource_version)),
            active_version: self.active_version.map(version_number).transpose()?,
            created_at: parse_time(&self.created_at)?,
            updated_at: parse_time(&self.updated_at)?,
        })
    }
}

/// A function as [`functions_from_json`] reads it: a [`FunctionRow`] with the spec and the
/// status as JSON values rather than text.
#[derive(serde::Deserialize)]
struct FunctionDoc {
    namespace: String,
    name: String,
    spec: FunctionSpec,
    resource_version: i64,
    active_version: Option<i64>,
    status: FunctionStatus,
    created_at: String,
    updated_at: String,
}

/// The records of JSON objects of functions' columns separated by whitespace (SQLite's list
/// query renders a page so), sorted by name.
pub(super) fn functions_from_json(text: &str) -> Result<Vec<FunctionRecord>> {
    let mut docs = serde_json::Deserializer::from_str(text)
        .into_iter::<FunctionDoc>()
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(json_err)?;
    // Already in order as a rule; a sorted run costs one pass.
    docs.sort_by(|a, b| a.name.cmp(&b.name));
    docs.into_iter()
        .map(|d| {
            Ok(FunctionRecord {
                namespace: d.namespace,
                name: d.name,
                spec: d.spec,
                resource_version: ResourceVersion::from_count(uint(d.resource_version)),
                active_version: d.active_version.map(version_number).transpose()?,
                status: d.status,
                created_at: parse_time(&d.created_at)?,
                updated_at: parse_time(&d.updated_at)?,
            })
        })
        .collect()
}

/// A row of `triggers` or `jobs`: a namespaced resource with a JSON spec and status.
#[derive(sqlx::FromRow)]
pub(super) struct ResourceRow {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) spec: String,
    pub(super) resource_version: i64,
    pub(super) status: String,
    pub(super) created_at: String,
    pub(super) updated_at: String,
}

/// Fills a trigger or job record from a [`ResourceRow`] (the two have the same fields).
macro_rules! resource_record {
    ($row:expr, $record:ident) => {{
        let row = $row;
        Ok($record {
            spec: from_json(&row.spec)?,
            status: from_json(&row.status)?,
            namespace: row.namespace,
            name: row.name,
            resource_version: ResourceVersion::from_count(uint(row.resource_version)),
            created_at: parse_time(&row.created_at)?,
            updated_at: parse_time(&row.updated_at)?,
        })
    }};
}

/// Builds the [`ResourceRow`] of a function, trigger or job record.
macro_rules! resource_row {
    ($r:expr) => {{
        let r = $r;
        Ok(ResourceRow {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            spec: to_json(&r.spec)?,
            resource_version: stored_count(&r.resource_version)?,
            status: to_json(&r.status)?,
            created_at: ts(r.created_at),
            updated_at: ts(r.updated_at),
        })
    }};
}

impl ResourceRow {
    /// A function's row but for `active_version`.
    pub(super) fn from_function(r: &FunctionRecord) -> Result<Self> {
        resource_row!(r)
    }

    pub(super) fn from_trigger(r: &TriggerRecord) -> Result<Self> {
        resource_row!(r)
    }

    pub(super) fn from_job(r: &JobRecord) -> Result<Self> {
        resource_row!(r)
    }

    pub(super) fn into_trigger(self) -> Result<TriggerRecord> {
        resource_record!(self, TriggerRecord)
    }

    pub(super) fn into_job(self) -> Result<JobRecord> {
        resource_record!(self, JobRecord)
    }
}

/// A row of `versions` (without the build log).
#[derive(sqlx::FromRow)]
pub(super) struct VersionRow {
    namespace: String,
    function: String,
    version: i64,
    sha256: String,
    size_bytes: i64,
    runtime: String,
    phase: String,
    message: String,
    created_at: String,
}

impl VersionRow {
    pub(super) fn into_record(self) -> Result<VersionRecord> {
        Ok(VersionRecord {
            version: version_number(self.version)?,
            size_bytes: uint(self.size_bytes),
            runtime: Runtime::parse("runtime", &self.runtime)?,
            phase: VersionPhase::parse(&self.phase)
                .ok_or_else(|| Error::Internal(format!("stored phase {:?} is unknown", self.phase)))?,
            created_at: parse_time(&self.created_at)?,
            namespace: self.namespace,
            function: self.function,
            sha256: self.sha256,
            message: self.message,
        })
    }
}

/// A row of `invocations`.
#[derive(sqlx::FromRow)]
pub(super) struct InvocationRow {
    id: String,
    namespace: String,
    function: String,
    version: Option<i64>,
    source: String,
    source_name: Option<String>,
    started_at: String,
    duration_ms: i64,
    status: i64,
    outcome: String,
    error_type: Option<String>,
    error_message: Option<String>,
    request_bytes: i64,
    response_bytes: i64,
    cold_start: bool,
    cold_start_kind: Option<String>,
    logs: String,
}

impl InvocationRow {
    pub(super) fn into_record(self) -> Result<InvocationRecord> {
        Ok(InvocationRecord {
            version: self.version.map(version_number).transpose()?,
            source: Source::parse(&self.source)
                .ok_or_else(|| Error::Internal(format!("stored source {:?} is unknown", self.source)))?,
            started_at: parse_time(&self.started_at)?,
            duration_ms: uint(self.duration_ms),
            status: u16::try_from(self.status)
                .map_err(|_| Error::Internal(format!("stored status {} is invalid", self.status)))?,
            outcome: Outcome::parse(&self.outcome)
                .ok_or_else(|| Error::Internal(format!("stored outcome {:?} is unknown", self.outcome)))?,
            request_bytes: uint(self.request_bytes),
            response_bytes: uint(self.response_bytes),
            logs: from_json(&self.logs)?,
            id: self.id,
            namespace: self.namespace,
            function: self.function,
            source_name: self.source_name,
            error_type: self.error_type,
            error_message: self.error_message,
            cold_start: self.cold_start,
            cold_start_kind: match self.cold_start_kind.as_deref() {
                None => None,
                Some(kind) => Some(
                    ColdStart::parse(kind)
                        .ok_or_else(|| Error::Internal(format!("stored cold start kind {kind:?} is unknown")))?,
                ),
            },
        })
    }
}

//! What the API answers with, where it adds fields to the `sless-core` records or has shapes
//! of its own.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sless_core::status::VersionPhase;
use sless_core::traits::{FunctionRecord, VersionRecord};

/// Reads a record and the fields the API adds to it from one JSON object (no derived
/// `flatten`: see `sless_core`'s records, whose numbers it would break).
fn with_extra<'de, D, R, X>(deserializer: D) -> Result<(R, X), D::Error>
where
    D: Deserializer<'de>,
    R: DeserializeOwned,
    X: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    let record = R::deserialize(&value).map_err(D::Error::custom)?;
    let extra = X::deserialize(&value).map_err(D::Error::custom)?;
    Ok((record, extra))
}

/// A function as the API shows it: the record, then `url`. Serialises to the same JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Function {
    /// Spec, status, versions and times.
    #[serde(flatten)]
    pub record: FunctionRecord,
    /// Its invoke URL: `{base}/v1/namespaces/{ns}/functions/{name}/invoke`.
    pub url: String,
}

#[derive(Deserialize)]
struct FunctionExtra {
    url: String,
}

impl<'de> Deserialize<'de> for Function {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (record, extra): (FunctionRecord, FunctionExtra) = with_extra(deserializer)?;
        Ok(Function { record, url: extra.url })
    }
}

/// One version as `GET …/versions/{n}` shows it: the record, then whether it is the active
/// one. Serialises to the same JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    /// Archive, phase and message.
    #[serde(flatten)]
    pub record: VersionRecord,
    /// Whether it serves the function's calls.
    pub active: bool,
}

#[derive(Deserialize)]
struct VersionExtra {
    active: bool,
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (record, extra): (VersionRecord, VersionExtra) = with_extra(deserializer)?;
        Ok(Version { record, active: extra.active })
    }
}

impl Version {
    /// Built and serving, or failed: nothing more will happen to it by itself.
    pub fn is_settled(&self) -> bool {
        self.record.phase == VersionPhase::Failed || (self.record.phase == VersionPhase::Ready && self.active)
    }
}

/// The answer to a code upload (`PUT …/code`, 202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// The version the archive is (new, or the existing one with the same SHA-256).
    pub version: u32,
    /// Lowercase hex SHA-256 of the archive.
    pub sha256: String,
    /// Archive size in bytes.
    pub size_bytes: u64,
    /// Whether a new version was made.
    pub created: bool,
    /// Its phase now (`Building` when a build started).
    pub phase: VersionPhase,
}

/// The answer to `POST /v1/tokens` (201): the token's record and its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewToken {
    /// Id, role, namespaces, description, times.
    #[serde(flatten)]
    pub record: sless_core::tenant::TokenRecord,
    /// The secret (`slt_…`), shown this once.
    pub token: String,
}

/// The answer to a rollback (`POST …/rollback`, 202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The version being made active.
    pub version: u32,
    /// Its archive's SHA-256.
    pub sha256: String,
}

/// One page of a list: `{"items": [...], "next_cursor": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The items, in the list's order.
    pub items: Vec<T>,
    /// The cursor of the next page; `None` on the last one.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Which page of a list to fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// Items per page, 1–1000 (`None`: the server's default, 100).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor` (`None`: the first page).
    pub cursor: Option<String>,
}

impl PageRequest {
    /// The first page of at most `limit` items.
    pub fn first(limit: u32) -> Self {
        PageRequest { limit: Some(limit), cursor: None }
    }

    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(l) = self.limit {
            q.push(("limit", l.to_string()));
        }
        if let Some(c) = self.cursor.as_deref().filter(|c| !c.is_empty()) {
            q.push(("cursor", c.to_string()));
        }
        q
    }
}

/// Filters of `GET …/functions/{name}/invocations` (newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvocationFilter {
    /// Only these outcomes (`ok`, `error`, `timeout`, `oom`, `crash`, `rejected`).
    pub outcomes: Vec<String>,
    /// Only calls started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only calls started before this time.
    pub until: Option<DateTime<Utc>>,
}

impl InvocationFilter {
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if !self.outcomes.is_empty() {
            q.push(("status", self.outcomes.join(",")));
        }
        let rfc3339 = |t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        if let Some(t) = &self.since {
            q.push(("since", rfc3339(t)));
        }
        if let Some(t) = &self.until {
            q.push(("until", rfc3339(t)));
        }
        q
    }
}

pub use sless_core::report::{CollectedArchive, CollectedVersion, GcReport, LogLine};

/// Overrides of the server's collector policy for one `POST /v1/gc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Versions to keep per function besides the active one (`None`: the server's setting).
    pub keep_versions: Option<u32>,
    /// Keep unreferenced archives younger than this, in seconds (`None`: the server's).
    pub grace_sec: Option<u64>,
    /// Only report what would be deleted.
    pub dry_run: bool,
}

/// A call of a function through the invoke API (`…/functions/{name}/invoke{path}`).
#[derive(Debug, Clone)]
pub struct InvokeRequest {
    /// The HTTP method the function sees.
    pub method: Method,
    /// The path after `/invoke` (`/notes/1`); empty or starting with `/`.
    pub path: String,
    /// Query parameters, in order.
    pub query: Vec<(String, String)>,
    /// Request headers, in order (a `content-type` here wins over the default).
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Bytes>,
}

impl InvokeRequest {
    /// A call with `method` at `/`, no query, headers or body.
    pub fn new(method: Method) -> Self {
        InvokeRequest { method, path: String::new(), query: Vec::new(), headers: Vec::new(), body: None }
    }

    /// `GET /`.
    pub fn get() -> Self {
        Self::new(Method::GET)
    }

    /// `POST /` with a JSON body (`content-type: application/json`).
    pub fn post_json(body: &Value) -> Self {
        Self::new(Method::POST).header("content-type", "application/json").body(body.to_string())
    }

    /// Sets the path after `/invoke` (a missing leading `/` is added).
    pub fn path(mut self, path: &str) -> Self {
        self.path = if path.is_empty() || path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        self
    }

    /// Adds a query parameter.
    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.query.push((name.to_string(), value.to_string()));
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }
}

/// An answer as it came: status, headers and body bytes, whatever the status.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl RawResponse {
    /// The body as JSON, or `Value::String` of its (lossy UTF-8) text when it is not JSON.
    pub fn json_or_text(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| Value::String(self.text()))
    }

    /// The body as (lossy UTF-8) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value as text, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// [`crate::Error::Api`] with the body's problem when the status is 4xx/5xx, else the
    /// response itself.
    pub fn error_for_status(self) -> crate::Result<RawResponse> {
        if self.status.is_client_error() || self.status.is_server_error() {
            return Err(crate::Error::Api(Box::new(crate::Problem::from_response(self.status, &self.body))));
        }
        Ok(self)
    }
}

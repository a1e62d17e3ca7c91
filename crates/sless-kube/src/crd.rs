//! The custom resources of group `sless.kube5s.ru`, version `v1alpha1`: [`Function`],
//! [`Trigger`] and [`FunctionJob`], generated from these types (kube derive + schemars), with
//! validation (ranges, patterns, enums, CEL rules across fields), status subresources,
//! conditions as a map-type list keyed by `type`, printer columns and short names
//! (docs/kubernetes.md). Field names follow the Kubernetes API conventions (camelCase); the
//! fields and their ranges are those of the REST API (docs/api.md).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "sless.kube5s.ru";
/// The API version of the group.
pub const VERSION: &str = "v1alpha1";

/// The language runtime of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Runtime {
    /// CPython 3.11.
    #[serde(rename = "python3.11")]
    Python311,
    /// Node.js 20.
    #[serde(rename = "nodejs20")]
    Nodejs20,
}

/// Where a function's code is: an archive in the blob store, by its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Code {
    /// Lowercase hex SHA-256 of the zip archive (`archives/<sha256>.zip`).
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub sha256: String,
}

fn default_memory_mb() -> u32 {
    128
}
fn default_timeout_sec() -> u32 {
    30
}
fn default_true() -> bool {
    true
}
fn default_concurrency() -> u32 {
    1
}
fn default_timezone() -> String {
    "UTC".into()
}

/// Keeps the conditions a map keyed by `type` (server-side apply merges them one by one).
fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert("x-kubernetes-list-map-keys".into(), serde_json::json!(["type"]));
    schema
}

/// Any JSON value, kept as given (an event payload).
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A function: its code and how it runs (docs/api.md, "Functions").
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "Function",
    doc = "A sless function: its code (an archive by SHA-256) and how it runs; the operator builds an image of it and serves it from a Deployment.",
    namespaced,
    status = "FunctionStatus",
    shortname = "fn",
    category = "sless",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Version","type":"integer","jsonPath":".status.activeVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FunctionSpec {
    /// The language runtime.
    pub runtime: Runtime,
    /// `[folder/]module.function`, e.g. `main.handler`.
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^([A-Za-z0-9_.-]+/)*[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_$][A-Za-z0-9_$]*$")
    )]
    pub entrypoint: String,
    /// Memory limit of one instance in MiB (64–4096, default 128).
    #[serde(default = "default_memory_mb")]
    #[schemars(range(min = 64, max = 4096))]
    pub memory_mb: u32,
    /// Longest call in seconds (1–900, default 30).
    #[serde(default = "default_timeout_sec")]
    #[schemars(range(min = 1, max = 900))]
    pub timeout_sec: u32,
    /// Environment variables (names `[A-Za-z_][A-Za-z0-9_]*`; `SLESS_*`, `AWS_LAMBDA_*`,
    /// `_HANDLER`, `AWS_EXECUTION_ENV`, `LAMBDA_TASK_ROOT` and `LAMBDA_RUNTIME_DIR` are reserved).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_]*$') && !k.startsWith('SLESS_') && !k.startsWith('AWS_LAMBDA_'))",
        "message": "env names are [A-Za-z_][A-Za-z0-9_]*, and SLESS_* and AWS_LAMBDA_* are reserved"
    }, {
        // Map lookups, not a test per key: the API server bounds a rule's estimated cost.
        "rule": "!('_HANDLER' in self) && !('AWS_EXECUTION_ENV' in self) && !('LAMBDA_TASK_ROOT' in self) && !('LAMBDA_RUNTIME_DIR' in self)",
        "message": "_HANDLER, AWS_EXECUTION_ENV, LAMBDA_TASK_ROOT and LAMBDA_RUNTIME_DIR are reserved"
    }]))]
    pub env: BTreeMap<String, String>,
    /// A disabled function keeps its code but answers 503 (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Calls one instance serves at once (1–100, default 1).
    #[serde(default = "default_concurrency")]
    #[schemars(range(min = 1, max = 100))]
    pub concurrency: u32,
    /// Most instances at once (1–1000); unset: the platform's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_instances: Option<u32>,
    /// Seconds an idle instance is kept (1–86400); unset: the platform's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub idle_timeout_sec: Option<u32>,
    /// The HTTP event and response rules: `"1.0"` (API Gateway REST; unset means this) or
    /// `"2.0"` (HTTP API / function URLs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_format: Option<PayloadFormat>,
    /// The code to run; unset until an archive is uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Code>,
}

/// What the operator observed of a [`Function`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionStatus {
    /// `Pending`, `Building`, `Ready` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why, for a user (the root cause of a failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The version serving calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_version: Option<u32>,
    /// The image of the active version (tagged by its archive's SHA-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The archive (SHA-256) `image` was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_sha256: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Built` and `Ready`, with reasons, messages and observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// How a trigger calls its function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TriggerType {
    /// A public URL `/fn/{namespace}/{function}` through the sless API.
    Http,
    /// A schedule.
    Cron,
}

/// An HTTP event format: API Gateway's payload format versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PayloadFormat {
    /// API Gateway REST proxy events (payload format 1.0).
    #[serde(rename = "1.0")]
    V1,
    /// HTTP API / Lambda function URL events (payload format 2.0).
    #[serde(rename = "2.0")]
    V2,
}

/// Who may call an http trigger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpAuth {
    /// Anyone.
    #[default]
    None,
    /// A token of the namespace that may call (docs/api.md, "Tenants").
    Token,
}

/// A trigger: calls a function over http or on a schedule (docs/api.md, "Triggers").
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "Trigger",
    doc = "A sless trigger: calls a function of its namespace over http (through the sless API) or on a schedule.",
    namespaced,
    status = "TriggerStatus",
    shortname = "trg",
    category = "sless",
    printcolumn = r#"{"name":"Function","type":"string","jsonPath":".spec.function"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.type != 'cron' || has(self.schedule)", "message": "a cron trigger needs a schedule", "fieldPath": ".schedule"},
    {"rule": "self.type != 'http' || !has(self.schedule)", "message": "an http trigger takes no schedule", "fieldPath": ".schedule"},
    {"rule": "self.type == 'http' || self.auth == 'none'", "message": "auth is for http triggers", "fieldPath": ".auth"},
    {"rule": "self.type == 'http' || !has(self.payloadFormat)", "message": "payloadFormat is for http triggers", "fieldPath": ".payloadFormat"}
]))]
pub struct TriggerSpec {
    /// The function it calls, in the same namespace (a DNS-1123 label).
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub function: String,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    pub kind: TriggerType,
    /// Cron: 5 fields, a macro (`@hourly`) or `@every 30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub schedule: Option<String>,
    /// Cron: the IANA time zone of the schedule (default `UTC`).
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// Cron: the event each call receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub payload: Option<serde_json::Value>,
    /// Http: `none` (public) or `token`.
    #[serde(default)]
    pub auth: HttpAuth,
    /// A disabled trigger does not call (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Cron: start an instance this many seconds before each tick (0–3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub prewarm_sec: Option<u32>,
    /// Http: the payload format of calls through this trigger (`"1.0"` or `"2.0"`); unset:
    /// the function's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_format: Option<PayloadFormat>,
}

/// What the operator observed of a [`Trigger`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerStatus {
    /// `Waiting`, `Active` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why, for a user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, with reason, message and observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// A one-off run of a function, again whenever `runId` grows (docs/api.md, "Jobs").
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "FunctionJob",
    doc = "A one-off run of a sless function, again whenever runId grows.",
    namespaced,
    status = "FunctionJobStatus",
    shortname = "fnjob",
    category = "sless",
    printcolumn = r#"{"name":"Function","type":"string","jsonPath":".spec.function"}"#,
    printcolumn = r#"{"name":"Run","type":"integer","jsonPath":".spec.runId"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FunctionJobSpec {
    /// The function it runs, in the same namespace (a DNS-1123 label).
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub function: String,
    /// The run: `0` never runs; any other value runs once, and again whenever it changes.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub run_id: i64,
    /// The event the run receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub payload: Option<serde_json::Value>,
    /// A disabled job does not run (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
}

/// What the operator observed of a [`FunctionJob`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionJobStatus {
    /// `Skipped`, `Waiting`, `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why, for a user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last `runId` that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<i64>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Complete` and `Failed`, with reasons, messages and observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

//! The OpenAPI 3.1 document of the API, served at `GET /openapi.json` (docs/api.md).
//!
//! Paths come from the `#[utoipa::path]` attribute on each handler, schemas from the types the
//! handlers serialise (the sless-core records derive `ToSchema` under its `openapi` feature).
//! Request bodies are parsed by hand in sless-core (`FunctionSpec::from_json`,
//! `TriggerSpec::from_json`, `JobSpec::from_json`: unknown fields are refused, read-only fields
//! ignored), so their schemas are the input types below, one per parser.

use std::collections::BTreeMap;

use serde_json::Value;
use sless_core::event::PayloadFormat;
use sless_core::invocation::InvocationRecord;
use sless_core::job::JobRecord;
use sless_core::runtime::Runtime;
use sless_core::traits::VersionRecord;
use sless_core::trigger::{HttpAuth, TriggerRecord, TriggerType};
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use crate::error::Problem;
use crate::functions::FunctionView;

/// The document, built once per request (it is small, and `/openapi.json` is not on a hot path).
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "sless",
        description = "The sless API (v1): functions, code, versions, triggers, jobs, invocations, \
                       logs, the invoke gateway and the public `/fn/` routes. See docs/api.md."
    ),
    paths(
        health,
        ready,
        metrics_doc,
        openapi_json,
        crate::functions::list,
        crate::functions::create,
        crate::functions::get,
        crate::functions::replace,
        crate::functions::patch,
        crate::functions::delete,
        crate::functions::upload,
        crate::functions::versions,
        crate::functions::version,
        crate::functions::build_log,
        crate::functions::rollback,
        crate::invoke::invoke,
        crate::invocations::list,
        crate::invocations::get,
        crate::invocations::logs,
        crate::triggers::list,
        crate::triggers::create,
        crate::triggers::get,
        crate::triggers::replace,
        crate::triggers::patch,
        crate::triggers::delete,
        crate::triggers::fire,
        crate::jobs::list,
        crate::jobs::create,
        crate::jobs::get,
        crate::jobs::replace,
        crate::jobs::patch,
        crate::jobs::delete,
        crate::gc::run,
        crate::tenants::create_namespace,
        crate::tenants::list_namespaces,
        crate::tenants::get_namespace,
        crate::tenants::patch_namespace,
        crate::tenants::delete_namespace,
        crate::tenants::create_token,
        crate::tenants::list_tokens,
        crate::tenants::revoke_token,
        crate::invoke::public,
    ),
    components(
        schemas(Problem, FunctionError, InvocationSummary),
        responses(
            BadRequest,
            Unauthorized,
            Forbidden,
            TooManyRequests,
            NotFound,
            Conflict,
            PreconditionFailed,
            RequestTimeout,
            PayloadTooLarge,
            UnsupportedMediaType,
            InvalidArchive,
            Unavailable
        )
    ),
    modifiers(&Security, &SubPaths)
)]
struct ApiDoc;

/// The name of the bearer security scheme.
const BEARER: &str = "bearer";

/// Bearer auth on every `/v1` operation (the router's `route_layer`, `auth::require_access`);
/// `/fn/` takes a bearer only when its http trigger says `auth: token`; the rest is open.
struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "the platform's admin token, or a token of `POST /v1/tokens` (docs/api.md, \"Tenants\")",
                    ))
                    .build(),
            ),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            let requirement = if path.starts_with("/v1/") {
                Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())])
            } else if path.starts_with("/fn/") {
                Some(vec![SecurityRequirement::default(), SecurityRequirement::new(BEARER, Vec::<String>::new())])
            } else {
                None
            };
            if let Some(requirement) = requirement {
                for op in operations(item) {
                    op.security = Some(requirement.clone());
                }
            }
        }
    }
}

/// `…/invoke/{path}` and `/fn/{ns}/{name}/{path}`: the same operations as the bare path with
/// the rest of the URL as one more parameter (the router's `{*path}` routes).
struct SubPaths;

impl Modify for SubPaths {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let bare = ["/v1/namespaces/{ns}/functions/{name}/invoke", "/fn/{ns}/{name}"];
        for path in bare {
            let Some(item) = doc.paths.paths.get(path) else { continue };
            let mut item = item.clone();
            for op in operations(&mut item) {
                if let Some(id) = op.operation_id.as_mut() {
                    id.push_str("Path");
                }
                op.parameters.get_or_insert_with(Vec::new).push(rest_parameter());
            }
            doc.paths.paths.insert(format!("{path}/{{path}}"), item);
        }
    }
}

fn rest_parameter() -> Parameter {
    ParameterBuilder::new()
        .name("path")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some("the rest of the URL, given to the function as the event's `path`"))
        .schema(Some(String::schema()))
        .build()
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// The error responses, each an RFC 9457 problem (`Problem`).
macro_rules! problem_responses {
    ($($name:ident: $description:literal),* $(,)?) => {$(
        #[doc = $description]
        pub(crate) struct $name;

        impl<'s> utoipa::ToResponse<'s> for $name {
            fn response() -> (&'s str, RefOr<utoipa::openapi::Response>) {
                let content = Content::new(Some(Ref::from_schema_name("Problem")));
                let response = ResponseBuilder::new()
                    .description($description)
                    .content("application/problem+json", content)
                    .build();
                (stringify!($name), RefOr::T(response))
            }
        }
    )*};
}

problem_responses! {
    BadRequest: "A field is missing or invalid; `field` names it (a path or query parameter, a body field, or `body` for a body that is not JSON).",
    Unauthorized: "No bearer token, or a wrong, expired or revoked one (`WWW-Authenticate: Bearer`).",
    Forbidden: "The token is not scoped to this namespace, its role may not do this, or a write would exceed a quota (`quota` names it).",
    TooManyRequests: "The token's `requests_per_minute` in this namespace is used up (`Retry-After`, `quota`).",
    NotFound: "No such resource, or no such route.",
    Conflict: "The resource already exists (or, for an http trigger, its function already has one); or it cannot be deleted now (`default`, or a namespace that still holds functions, triggers or jobs).",
    PreconditionFailed: "`If-Match` names another `resource_version`.",
    RequestTimeout: "The body came too slowly: a part of it later than the server's body read timeout, or the whole of it later than its total timeout (`Connection: close`).",
    PayloadTooLarge: "The body is over its limit.",
    UnsupportedMediaType: "Wrong `Content-Type`.",
    InvalidArchive: "The archive is invalid; `entry` names the zip entry at fault.",
    Unavailable: "Storage is unavailable, or the function cannot be called now (`Retry-After`).",
}

/// The body of a failed call or of the platform's refusal of one (the Lambda shape), e.g.
/// `{"errorType": "TooManyRequestsException", "errorMessage": "…"}`.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only: sless-core's event module builds this body.
pub(crate) struct FunctionError {
    /// e.g. `ValueError`, `Function.Timeout`, `TooManyRequestsException`, `Function.CrashLoop`.
    #[schema(rename = "errorType")]
    #[serde(rename = "errorType")]
    error_type: String,
    /// What went wrong.
    #[serde(rename = "errorMessage")]
    error_message: String,
}

/// A record as listed: the record without `logs` (docs/api.md, "Invocations and logs").
pub(crate) struct InvocationSummary;

impl PartialSchema for InvocationSummary {
    fn schema() -> RefOr<Schema> {
        let mut schema = InvocationRecord::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.properties.shift_remove("logs");
            object.required.retain(|r| r != "logs");
            object.description = Some("An invocation record without its logs.".into());
        }
        schema
    }
}

impl ToSchema for InvocationSummary {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        InvocationRecord::schemas(schemas);
    }
}

/// A function's create (`POST`) or full replace (`PUT`) body, as `FunctionSpec::from_json`
/// reads it: `runtime` and `entrypoint` required, the rest take their defaults when omitted
/// or null. Read-only fields of a function as read back may be sent and are ignored.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // A schema only.
pub(crate) struct FunctionInput {
    /// Required on create; on PUT it may be omitted and must match the path if given.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: Option<String>,
    /// The language runtime.
    runtime: Runtime,
    /// `[folder/]module.function`, e.g. `main.handler`.
    entrypoint: String,
    /// MiB, 64–4096 (default 128).
    #[schema(minimum = 64, maximum = 4096)]
    memory_mb: Option<u32>,
    /// Seconds, 1–900 (default 30).
    #[schema(minimum = 1, maximum = 900)]
    timeout_sec: Option<u32>,
    /// Environment variables: names `[A-Za-z_][A-Za-z0-9_]*`, `SLESS_*`/`AWS_LAMBDA_*`,
    /// `_HANDLER`, `AWS_EXECUTION_ENV`, `LAMBDA_TASK_ROOT`, `LAMBDA_RUNTIME_DIR` reserved,
    /// 32 KiB in all.
    env: Option<BTreeMap<String, String>>,
    /// Default true.
    enabled: Option<bool>,
    /// Calls one instance takes at once, 1–100 (default 1).
    #[schema(minimum = 1, maximum = 100)]
    concurrency: Option<u32>,
    /// 1–1000; null: the server's default.
    #[schema(minimum = 1, maximum = 1000)]
    max_instances: Option<u32>,
    /// 1–86400; null: the server's default.
    #[schema(minimum = 1, maximum = 86400)]
    idle_timeout_sec: Option<u32>,
    /// The HTTP event and response rules: `"1.0"` (API Gateway REST, default) or `"2.0"`
    /// (HTTP API / function URLs).
    payload_format: Option<PayloadFormat>,
    /// Read-only; if given, it must be the path's namespace.
    namespace: Option<String>,
    /// Read-only, ignored.
    resource_version: Option<Value>,
    /// Read-only, ignored (use `…/rollback`).
    active_version: Option<Value>,
    /// Read-only, ignored.
    url: Option<Value>,
    /// Read-only, ignored.
    created_at: Option<Value>,
    /// Read-only, ignored.
    updated_at: Option<Value>,
    /// Read-only, ignored.
    status: Option<Value>,
    /// Read-only, ignored.
    versions: Option<Value>,
}

/// A JSON merge patch (RFC 7396) of a function: the fields of [`FunctionInput`], each
/// optional; `null` removes a field (it takes its default). Validated after merging.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct FunctionPatch {
    /// Must be the path's name if given.
    name: Option<String>,
    /// The language runtime.
    runtime: Option<Runtime>,
    /// `[folder/]module.function`.
    entrypoint: Option<String>,
    /// MiB, 64–4096.
    memory_mb: Option<u32>,
    /// Seconds, 1–900.
    timeout_sec: Option<u32>,
    /// Merged key by key; a null value removes the variable.
    env: Option<BTreeMap<String, Option<String>>>,
    /// Whether calls are served.
    enabled: Option<bool>,
    /// 1–100.
    concurrency: Option<u32>,
    /// 1–1000.
    max_instances: Option<u32>,
    /// 1–86400.
    idle_timeout_sec: Option<u32>,
    /// `"1.0"` or `"2.0"`.
    payload_format: Option<PayloadFormat>,
}

/// A trigger's create or full replace body, as `TriggerSpec::from_json` reads it. Read-only
/// fields (`namespace`, `resource_version`, `created_at`, `updated_at`, `status`) are ignored.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // A schema only.
pub(crate) struct TriggerInput {
    /// Required on create; must match the path on PUT if given.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: Option<String>,
    /// The function it calls (same namespace).
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    function: String,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    kind: TriggerType,
    /// cron: the schedule (required for cron, refused for http).
    schedule: Option<String>,
    /// cron: IANA zone (default `UTC`).
    timezone: Option<String>,
    /// cron: any JSON, delivered as the event's `detail`.
    payload: Option<Value>,
    /// http: `none` (default) or `token`.
    auth: Option<HttpAuth>,
    /// Default true.
    enabled: Option<bool>,
    /// cron: 0–3600 (default 0).
    #[schema(minimum = 0, maximum = 3600)]
    prewarm_sec: Option<u32>,
    /// http: `"1.0"` or `"2.0"`, the event format of calls through the URL; null (default):
    /// the function's.
    payload_format: Option<PayloadFormat>,
    /// Read-only; if given, it must be the path's namespace.
    namespace: Option<String>,
    /// Read-only, ignored.
    resource_version: Option<Value>,
    /// Read-only, ignored.
    created_at: Option<Value>,
    /// Read-only, ignored.
    updated_at: Option<Value>,
    /// Read-only, ignored.
    status: Option<Value>,
}

/// A JSON merge patch (RFC 7396) of a trigger; validated after merging.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct TriggerPatch {
    /// Must be the path's name if given.
    name: Option<String>,
    /// The function it calls.
    function: Option<String>,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    kind: Option<TriggerType>,
    /// cron: the schedule.
    schedule: Option<String>,
    /// cron: IANA zone.
    timezone: Option<String>,
    /// cron: any JSON.
    payload: Option<Value>,
    /// http: `none` or `token`.
    auth: Option<HttpAuth>,
    /// Whether it fires.
    enabled: Option<bool>,
    /// cron: 0–3600.
    prewarm_sec: Option<u32>,
    /// http: `"1.0"` or `"2.0"`; null: the function's.
    payload_format: Option<PayloadFormat>,
}

/// A job's create or full replace body, as `JobSpec::from_json` reads it. Read-only fields
/// (`namespace`, `resource_version`, `created_at`, `updated_at`, `status`) are ignored.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // A schema only.
pub(crate) struct JobInput {
    /// Required on create; must match the path on PUT if given.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: Option<String>,
    /// The function it calls (same namespace).
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    function: String,
    /// 0 (default): do not run; a new value runs the job again.
    #[schema(minimum = 0)]
    run_id: Option<u64>,
    /// Any JSON, delivered in the job event.
    payload: Option<Value>,
    /// Default true.
    enabled: Option<bool>,
    /// Read-only; if given, it must be the path's namespace.
    namespace: Option<String>,
    /// Read-only, ignored.
    resource_version: Option<Value>,
    /// Read-only, ignored.
    created_at: Option<Value>,
    /// Read-only, ignored.
    updated_at: Option<Value>,
    /// Read-only, ignored.
    status: Option<Value>,
}

/// A JSON merge patch (RFC 7396) of a job, e.g. `{"run_id": 2}`; validated after merging.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct JobPatch {
    /// Must be the path's name if given.
    name: Option<String>,
    /// The function it calls.
    function: Option<String>,
    /// A new value runs the job again.
    run_id: Option<u64>,
    /// Any JSON.
    payload: Option<Value>,
    /// Whether it runs.
    enabled: Option<bool>,
}

/// `POST …/rollback`'s body.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only: `functions::rollback` reads it.
pub(crate) struct RollbackRequest {
    /// The version to make active again (a `Ready` one).
    #[schema(minimum = 1)]
    version: u32,
}

/// A page of functions.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only: `resource::ListQuery` builds lists.
pub(crate) struct FunctionList {
    /// At most `limit` functions, sorted by name.
    items: Vec<FunctionView<'static>>,
    /// The `cursor` of the next page, null on the last.
    next_cursor: Option<String>,
}

/// A page of namespaces.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct NamespaceList {
    /// At most `limit` namespaces, sorted by name (a token: its own, on one page).
    items: Vec<sless_core::tenant::NamespaceRecord>,
    /// The `cursor` of the next page, null on the last.
    next_cursor: Option<String>,
}

/// The tokens the caller may manage (one page: all of them).
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct TokenList {
    /// Sorted by id; never the secrets.
    items: Vec<sless_core::tenant::TokenRecord>,
    /// Always null.
    next_cursor: Option<String>,
}

/// A namespace's create body (`POST /v1/namespaces`) or merge patch (`PATCH`, where `name`
/// may only repeat the path's).
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // A schema only: `tenants::create_namespace` reads the body.
pub(crate) struct NamespaceInput {
    /// A DNS-1123 label; required on create.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: Option<String>,
    /// Limits; a missing or null one is no limit.
    quotas: Option<sless_core::tenant::Quotas>,
}

/// A token's create body (`POST /v1/tokens`).
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // A schema only: `tenants::create_token` reads the body.
pub(crate) struct TokenInput {
    /// The namespaces it reaches (at least one; each must exist; a token with role `admin`
    /// may only name its own).
    namespaces: Vec<String>,
    /// `admin`, `developer`, `invoker` or `viewer`.
    role: sless_core::tenant::Role,
    /// What it is for, at most 256 characters.
    description: Option<String>,
    /// RFC 3339; when it stops working (in the future); null: never.
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A page of triggers.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct TriggerList {
    /// At most `limit` triggers, sorted by name.
    items: Vec<TriggerRecord>,
    /// The `cursor` of the next page, null on the last.
    next_cursor: Option<String>,
}

/// A page of jobs.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct JobList {
    /// At most `limit` jobs, sorted by name.
    items: Vec<JobRecord>,
    /// The `cursor` of the next page, null on the last.
    next_cursor: Option<String>,
}

/// A function's versions (one page: all of them).
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct VersionList {
    /// Every version, oldest first.
    items: Vec<VersionRecord>,
    /// Always null.
    next_cursor: Option<String>,
}

/// A page of invocation records, newest first.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct InvocationList {
    /// At most `limit` records, without their logs.
    items: Vec<InvocationSummary>,
    /// The `cursor` of the next page, null on the last.
    next_cursor: Option<String>,
}

/// A function's recent output lines.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema only.
pub(crate) struct LogList {
    /// Oldest first.
    items: Vec<sless_control::LogLine>,
}

/// `GET /healthz`: the process is alive.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    summary = "Liveness: the process is alive",
    tag = "health",
    responses((status = 200, description = "Alive.", body = String, content_type = "text/plain"))
)]
#[allow(dead_code)] // A document only: the router answers `/healthz` with a closure.
fn health() {}

/// `GET /readyz`: the database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    summary = "Readiness: the database answers",
    tag = "health",
    responses(
        (status = 200, description = "Ready.", body = String, content_type = "text/plain"),
        (status = 503, response = Unavailable),
    )
)]
#[allow(dead_code)] // A document only: `crate::health_ready` answers.
fn ready() {}

/// `GET /metrics`: the Prometheus series of docs/api.md.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    summary = "Prometheus metrics",
    tag = "health",
    responses((status = 200, description = "Prometheus text format 0.0.4.", body = String, content_type = "text/plain"))
)]
#[allow(dead_code)] // A document only: `crate::metrics` answers.
fn metrics_doc() {}

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    summary = "This OpenAPI document",
    tag = "health",
    responses((status = 200, description = "The OpenAPI 3.1 document of the API.", body = Object, content_type = "application/json"))
)]
#[allow(dead_code)] // A document only: `crate::openapi_json` answers.
fn openapi_json() {}

//! Functions, versions and code upload (docs/api.md; docs/architecture.md, "Archives and builds").

use std::borrow::Cow;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sless_core::archive::{blob_key, build_log_key, check};
use sless_core::decide::{UploadAction, upload_action};
use sless_core::names::validate_name;
use sless_core::resource_version::ResourceVersion;
use sless_core::spec::{FunctionSpec, check_same_name};
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{FunctionRecord, New, VersionRecord};

use crate::body::{content_length, discard, media_type, read_json, read_limited};
use crate::extract::{Path, Query};
use crate::resource::{ListQuery, NamePath, NsPath, check_namespace, if_match, with_etag};
use crate::{ApiResult, AppError, AppState};

/// Media types accepted for a code archive.
const ZIP_TYPES: [&str; 3] = ["application/zip", "application/x-zip-compressed", "application/octet-stream"];

/// The function as the API shows it: the record plus its `url`, with `ETag`.
fn function_response(state: &AppState, status: StatusCode, f: &FunctionRecord) -> Response {
    with_etag(status, function_json(state, f), &f.resource_version)
}

fn function_json(state: &AppState, f: &FunctionRecord) -> Value {
    serde_json::to_value(FunctionView::new(state, Cow::Borrowed(f))).unwrap_or(Value::Null)
}

/// A function's object in a response: the record's fields in their order, then `url`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Function)]
pub(crate) struct FunctionView<'a> {
    #[serde(flatten)]
    #[schema(value_type = FunctionRecord)]
    record: Cow<'a, FunctionRecord>,
    /// The function's invoke URL.
    url: String,
}

impl<'a> FunctionView<'a> {
    fn new(state: &AppState, record: Cow<'a, FunctionRecord>) -> Self {
        let url = format!("{}/v1/namespaces/{}/functions/{}/invoke", state.base_url, record.namespace, record.name);
        FunctionView { record, url }
    }
}

/// What `PUT …/code` answers (202).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct UploadResult {
    /// The version this archive is (a new one, or the existing version with the same SHA-256).
    version: u32,
    /// Lowercase hex SHA-256 of the archive.
    sha256: String,
    /// The archive's size in bytes.
    size_bytes: u64,
    /// Whether a new version was created.
    created: bool,
    /// The version's build phase.
    phase: VersionPhase,
}

/// What `POST …/rollback` answers (202).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RollbackResult {
    /// The version being made active.
    version: u32,
    /// Its archive's SHA-256.
    sha256: String,
}

/// A version as `GET …/versions/{n}` shows it: the record, then `active`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Version)]
pub(crate) struct VersionView {
    #[serde(flatten)]
    record: VersionRecord,
    /// Whether it serves calls.
    active: bool,
}

#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/functions",
    operation_id = "createFunction",
    summary = "Create a function",
    tag = "functions",
    params(crate::resource::NsPath),
    request_body(content = crate::openapi::FunctionInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created.", body = FunctionView, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 409, response = crate::openapi::Conflict),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(NsPath { ns }): Path<NsPath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let body = read_json(&headers, body, &["application/json"]).await?;
    check_namespace(&body, &ns)?;
    let (name, spec) = FunctionSpec::from_json(&body)?;
    let name = name.ok_or_else(|| AppError::field("name", "is required"))?;
    let _admitted = crate::tenants::admit_spec(&state, &ns, &name, &spec).await?;
    let new = New { namespace: ns, name, spec, status: FunctionStatus::pending(sless_core::time::now()) };
    let record = state.registry.create_function(&new).await?;
    Ok(function_response(&state, StatusCode::CREATED, &record))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions",
    operation_id = "listFunctions",
    summary = "List functions",
    tag = "functions",
    params(crate::resource::NsPath, crate::resource::ListQuery),
    responses(
        (status = 200, description = "A page, sorted by name.", body = crate::openapi::FunctionList),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(NsPath { ns }): Path<NsPath>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let page = q.page()?;
    let listed = state.registry.list_functions(&ns, &page).await?;
    ListQuery::respond_serialized(listed, |f| FunctionView::new(&state, Cow::Owned(f)))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}",
    operation_id = "getFunction",
    summary = "Read a function",
    tag = "functions",
    params(crate::resource::NamePath),
    responses(
        (status = 200, description = "The function.", body = FunctionView, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let f = state.registry.get_function(ns, name).await?;
    Ok(function_response(&state, StatusCode::OK, &f))
}

#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/functions/{name}",
    operation_id = "replaceFunction",
    summary = "Replace a function's spec",
    tag = "functions",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::FunctionInput, content_type = "application/json"),
    responses(
        (status = 200, description = "Replaced (or unchanged).", body = FunctionView, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 412, response = crate::openapi::PreconditionFailed),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn replace(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let expected = if_match(&headers)?;
    let body = read_json(&headers, body, &["application/json"]).await?;
    let (body_name, spec) = FunctionSpec::from_json(&body)?;
    check_same_name(name, body_name.as_deref())?;
    apply_spec(&state, ns, name, spec, expected).await
}

#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/functions/{name}",
    operation_id = "patchFunction",
    summary = "Merge-patch a function's spec",
    tag = "functions",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::FunctionPatch, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Patched (or unchanged).", body = FunctionView, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 412, response = crate::openapi::PreconditionFailed),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn patch(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let expected = if_match(&headers)?;
    let patch = read_json(&headers, body, &["application/merge-patch+json", "application/json"]).await?;
    let current = state.registry.get_function(ns, name).await?;
    if let Some(e) = expected.filter(|e| *e != current.resource_version) {
        return Err(sless_core::Error::Stale {
            expected: e.to_string(),
            current: current.resource_version.to_string(),
        }
        .into());
    }
    let spec = current.spec.merge_patch(name, &patch)?;
    apply_spec(&state, ns, name, spec, Some(current.resource_version.clone())).await
}

/// Stores a new spec; when what the code is loaded with changed (runtime, entrypoint), the
/// active version is rolled out again so the change is checked before it serves.
async fn apply_spec(
    state: &AppState,
    ns: &str,
    name: &str,
    spec: FunctionSpec,
    expected: Option<ResourceVersion>,
) -> ApiResult<Response> {
    let before = state.registry.get_function(ns, name).await?;
    if before.spec == spec && expected.as_ref().is_none_or(|e| *e == before.resource_version) {
        // Nothing changes: no new resource_version, no rollout.
        return Ok(function_response(state, StatusCode::OK, &before));
    }
    let admitted = crate::tenants::admit_spec(state, ns, name, &spec).await?;
    let updated = state.registry.replace_spec(ns, name, &spec, expected.as_ref()).await?;
    drop(admitted);
    let reload = before.spec.runtime != spec.runtime || before.spec.entrypoint != spec.entrypoint;
    if let (true, Some(active)) = (reload, updated.active_version) {
        state.rollouts.start(ns, name, active);
    }
    if !spec.enabled {
        state.executor.remove(ns, name).await?;
    }
    Ok(function_response(state, StatusCode::OK, &updated))
}

#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/functions/{name}",
    operation_id = "deleteFunction",
    summary = "Delete a function with its versions",
    tag = "functions",
    params(crate::resource::NamePath),
    responses(
        (status = 202, description = "Deleted; the body is the function as it was.", body = FunctionView, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn delete(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let f = remove(&state, ns, name).await?;
    Ok(function_response(&state, StatusCode::ACCEPTED, &f))
}

/// Deletes a function with its versions, stops its instances and forgets its output.
/// Errors: 404, the registry's and the executor's.
pub(crate) async fn remove(state: &AppState, ns: &str, name: &str) -> ApiResult<FunctionRecord> {
    let f = state.registry.get_function(ns, name).await?;
    state.registry.delete_function(ns, name).await?;
    state.executor.remove(ns, name).await?;
    // A function created again under this name starts with no output of the old one.
    state.logs.remove(ns, name);
    Ok(f)
}

#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/functions/{name}/code",
    operation_id = "uploadCode",
    summary = "Upload a code archive (a new version)",
    tag = "functions",
    params(crate::resource::NamePath),
    request_body(description = "A zip archive of the function's folder (at most 50 MiB).", content(
        (Vec<u8> = "application/zip"),
        (Vec<u8> = "application/x-zip-compressed"),
        (Vec<u8> = "application/octet-stream"),
    )),
    responses(
        (status = 202, description = "Stored; the version builds and rolls out in the background.", body = UploadResult),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 422, response = crate::openapi::InvalidArchive),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn upload(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    // Checked before the body is read: the function, the content type, and the declared
    // `Content-Length` (over the limit → 413 at once). A refused body is drained in the
    // background (see `discard`) so that a client still sending gets the response rather than
    // a reset connection.
    let limits = state.limits.archive;
    let before_body = async {
        let (ns, name) = p.validated()?;
        let f = state.registry.get_function(ns, name).await?;
        let media = media_type(&headers);
        if !media.as_deref().is_some_and(|m| ZIP_TYPES.contains(&m)) {
            return Err(AppError::UnsupportedMediaType(format!(
                "Content-Type must be application/zip, got {}",
                media.as_deref().unwrap_or("nothing")
            )));
        }
        if let Some(size) = content_length(&headers).filter(|n| *n > limits.max_compressed_bytes) {
            return Err(sless_core::Error::ArchiveTooLarge { size, limit: limits.max_compressed_bytes }.into());
        }
        Ok((ns, name, f))
    };
    let (ns, name, f) = match before_body.await {
        Ok(found) => found,
        Err(e) => {
            discard(body);
            return Err(e);
        }
    };
    let max = usize::try_from(limits.max_compressed_bytes).unwrap_or(usize::MAX);
    // A chunked body over the limit → 413 as soon as it passes it.
    let too_large = sless_core::Error::ArchiveTooLarge {
        size: limits.max_compressed_bytes + 1,
        limit: limits.max_compressed_bytes,
    };
    let bytes = read_limited(body, max).await.map_err(|e| match e {
        AppError::PayloadTooLarge { .. } => too_large.into(),
        other => other, // 408: it came too slowly
    })?;
    let entrypoint = f.spec.parsed_entrypoint()?;
    let runtime = f.spec.runtime;
    let checked_bytes = bytes.clone();
    let checked = tokio::task::spawn_blocking(move || check(&checked_bytes, &limits, runtime, &entrypoint))
        .await
        .map_err(|e| sless_core::Error::Internal(format!("archive check failed: {e}")))??;
    // The archive is stored before the version exists: a version never names a missing blob.
    state.blobs.put(&blob_key(&checked.sha256), bytes).await?;
    let (version, created) = state.registry.add_version(ns, name, &checked.sha256, checked.size_bytes, runtime).await?;
    let action = upload_action(created, version.phase);
    match action {
        UploadAction::Build => {
            if !created {
                state.registry.set_version_build(ns, name, version.version, VersionPhase::Building, "").await?;
            }
            state.rollouts.start(ns, name, version.version);
        }
        UploadAction::Activate if f.active_version != Some(version.version) => {
            state.rollouts.start(ns, name, version.version);
        }
        UploadAction::Activate | UploadAction::AlreadyBuilding => {}
    }
    let phase = if action == UploadAction::Build { VersionPhase::Building } else { version.phase };
    let result = UploadResult {
        version: version.version,
        sha256: checked.sha256,
        size_bytes: checked.size_bytes,
        created,
        phase,
    };
    Ok((StatusCode::ACCEPTED, Json(result)).into_response())
}

/// `POST …/rollback {"version": n}`: makes a built earlier version active again.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/functions/{name}/rollback",
    operation_id = "rollback",
    summary = "Make an earlier version active again",
    tag = "functions",
    params(crate::resource::NamePath),
    request_body(content = crate::openapi::RollbackRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "The version rolls out in the background.", body = RollbackResult),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn rollback(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let body = read_json(&headers, body, &["application/json"]).await?;
    let version = body
        .get("version")
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| AppError::field("version", "is required: a version number"))?;
    let f = state.registry.get_function(ns, name).await?;
    let v = match state.registry.get_version(ns, name, version).await {
        Ok(v) => v,
        Err(sless_core::Error::NotFound { .. }) => {
            return Err(AppError::field("version", format!("{name} has no version {version}")));
        }
        Err(e) => return Err(e.into()),
    };
    if v.phase != VersionPhase::Ready {
        return Err(AppError::field("version", format!("version {version} is {}, not Ready", v.phase.as_str())));
    }
    if f.active_version != Some(version) {
        state.rollouts.start(ns, name, version);
    }
    Ok((StatusCode::ACCEPTED, Json(RollbackResult { version, sha256: v.sha256 })).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/versions",
    operation_id = "listVersions",
    summary = "List a function's versions",
    tag = "functions",
    params(crate::resource::NamePath),
    responses(
        (status = 200, description = "Every version.", body = crate::openapi::VersionList),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn versions(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Json<Value>> {
    let (ns, name) = p.validated()?;
    let items = state.registry.list_versions(ns, name).await?;
    Ok(Json(json!({ "items": items, "next_cursor": null })))
}

/// `…/functions/{name}/versions/{version}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct VersionPath {
    /// The namespace (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    ns: String,
    /// The function (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: String,
    /// The version number.
    #[param(value_type = u32, minimum = 1)]
    version: String,
}

impl VersionPath {
    fn validated(&self) -> ApiResult<(&str, &str, u32)> {
        validate_name("namespace", &self.ns)?;
        validate_name("name", &self.name)?;
        let v = self.version.parse().map_err(|_| AppError::field("version", "must be a version number"))?;
        Ok((&self.ns, &self.name, v))
    }
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/versions/{version}",
    operation_id = "getVersion",
    summary = "Read a version",
    tag = "functions",
    params(VersionPath),
    responses(
        (status = 200, description = "The version.", body = VersionView),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn version(State(state): State<AppState>, Path(p): Path<VersionPath>) -> ApiResult<Json<VersionView>> {
    let (ns, name, v) = p.validated()?;
    let f = state.registry.get_function(ns, name).await?;
    let record = state.registry.get_version(ns, name, v).await?;
    Ok(Json(VersionView { active: f.active_version == Some(v), record }))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/versions/{version}/build-log",
    operation_id = "getBuildLog",
    summary = "A version's build log",
    tag = "functions",
    params(VersionPath),
    responses(
        (status = 200, description = "The build's output.", body = String, content_type = "text/plain"),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn build_log(State(state): State<AppState>, Path(p): Path<VersionPath>) -> ApiResult<Response> {
    let (ns, name, v) = p.validated()?;
    let version = state.registry.get_version(ns, name, v).await?;
    // Empty until the build has written its log.
    let log = match state.blobs.get(&build_log_key(ns, name, v, &version.sha256)).await {
        Ok(bytes) => bytes,
        Err(sless_core::Error::NotFound { .. }) => bytes::Bytes::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], log).into_response())
}

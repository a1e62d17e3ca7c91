//! Functions, versions and code upload (docs/api.md; docs/architecture.md, "Archives and builds").

use std::borrow::Borrow;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sless_core::archive::{blob_key, build_log_key, check};
use sless_core::decide::{UploadAction, upload_action};
use sless_core::names::validate_name;
use sless_core::resource_version::ResourceVersion;
use sless_core::spec::{FunctionSpec, check_same_name};
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::FunctionRecord;
use sless_core::traits::New;

use crate::body::{content_length, discard, media_type, read_json, read_limited};
use crate::resource::{ListQuery, NamePath, check_namespace, if_match, with_etag};
use crate::{ApiResult, AppError, AppState};

/// Media types accepted for a code archive.
const ZIP_TYPES: [&str; 3] = ["application/zip", "application/x-zip-compressed", "application/octet-stream"];

/// The function as the API shows it: the record plus its `url`, with `ETag`.
fn function_response(state: &AppState, status: StatusCode, f: &FunctionRecord) -> Response {
    with_etag(status, function_json(state, f), &f.resource_version)
}

fn function_json(state: &AppState, f: &FunctionRecord) -> Value {
    serde_json::to_value(FunctionView::new(state, f)).unwrap_or(Value::Null)
}

/// A function's object in a response: the record's fields in their order, then `url`.
/// `F` is the record or a reference to it.
#[derive(Serialize)]
struct FunctionView<F> {
    #[serde(flatten)]
    record: F,
    url: String,
}

impl<F: Borrow<FunctionRecord>> FunctionView<F> {
    fn new(state: &AppState, record: F) -> Self {
        let f = record.borrow();
        let url = format!("{}/v1/namespaces/{}/functions/{}/invoke", state.base_url, f.namespace, f.name);
        FunctionView { record, url }
    }
}

pub(crate) async fn create(
    State(state): State<AppState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let body = read_json(&headers, body, &["application/json"]).await?;
    check_namespace(&body, &ns)?;
    let (name, spec) = FunctionSpec::from_json(&body)?;
    let name = name.ok_or_else(|| AppError::field("name", "is required"))?;
    let new = New { namespace: ns, name, spec, status: FunctionStatus::pending(Utc::now()) };
    let record = state.registry.create_function(&new).await?;
    Ok(function_response(&state, StatusCode::CREATED, &record))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Path(ns): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let page = q.page()?;
    let listed = state.registry.list_functions(&ns, &page).await?;
    ListQuery::respond_serialized(listed, |f| FunctionView::new(&state, f))
}

pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let f = state.registry.get_function(ns, name).await?;
    Ok(function_response(&state, StatusCode::OK, &f))
}

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
    let updated = state.registry.replace_spec(ns, name, &spec, expected.as_ref()).await?;
    let reload = before.spec.runtime != spec.runtime || before.spec.entrypoint != spec.entrypoint;
    if let (true, Some(active)) = (reload, updated.active_version) {
        state.rollouts.start(ns, name, active);
    }
    if !spec.enabled {
        state.executor.remove(ns, name).await?;
    }
    Ok(function_response(state, StatusCode::OK, &updated))
}

pub(crate) async fn delete(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let f = state.registry.get_function(ns, name).await?;
    state.registry.delete_function(ns, name).await?;
    state.executor.remove(ns, name).await?;
    Ok(function_response(&state, StatusCode::ACCEPTED, &f))
}

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
    let bytes = read_limited(body, max).await.map_err(|_| too_large)?;
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
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "version": version.version,
            "sha256": checked.sha256,
            "size_bytes": checked.size_bytes,
            "created": created,
            "phase": phase,
        })),
    )
        .into_response())
}

/// `POST …/rollback {"version": n}`: makes a built earlier version active again.
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
    Ok((StatusCode::ACCEPTED, Json(json!({ "version": version, "sha256": v.sha256 }))).into_response())
}

pub(crate) async fn versions(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Json<Value>> {
    let (ns, name) = p.validated()?;
    let items = state.registry.list_versions(ns, name).await?;
    Ok(Json(json!({ "items": items, "next_cursor": null })))
}

#[derive(Deserialize)]
pub(crate) struct VersionPath {
    ns: String,
    name: String,
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

pub(crate) async fn version(State(state): State<AppState>, Path(p): Path<VersionPath>) -> ApiResult<Json<Value>> {
    let (ns, name, v) = p.validated()?;
    let f = state.registry.get_function(ns, name).await?;
    let version = state.registry.get_version(ns, name, v).await?;
    let mut body = serde_json::to_value(&version).unwrap_or(Value::Null);
    body["active"] = json!(f.active_version == Some(v));
    Ok(Json(body))
}

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

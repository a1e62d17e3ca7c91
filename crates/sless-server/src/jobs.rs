//! Jobs (docs/api.md; docs/architecture.md, "Triggers and jobs"): `/v1/namespaces/{ns}/jobs`.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::names::validate_name;
use sless_core::spec::check_same_name;
use sless_core::traits::New;

use crate::body::read_json;
use crate::extract::{Path, Query};
use crate::resource::{ListQuery, NamePath, NsPath, check_namespace, if_match, with_etag};
use crate::{ApiResult, AppError, AppState};

fn render(j: &JobRecord) -> Value {
    serde_json::to_value(j).unwrap_or(Value::Null)
}

#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/jobs",
    operation_id = "createJob",
    summary = "Create a job",
    tag = "jobs",
    params(crate::resource::NsPath),
    request_body(content = crate::openapi::JobInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created.", body = JobRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
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
    let (name, spec) = JobSpec::from_json(&body)?;
    let name = name.ok_or_else(|| AppError::field("name", "is required"))?;
    let new = New { namespace: ns, name, spec, status: JobStatus::new() };
    let record = state.registry.create_job(&new).await?;
    Ok(with_etag(StatusCode::CREATED, render(&record), &record.resource_version))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/jobs",
    operation_id = "listJobs",
    summary = "List jobs",
    tag = "jobs",
    params(crate::resource::NsPath, crate::resource::ListQuery),
    responses(
        (status = 200, description = "A page, sorted by name.", body = crate::openapi::JobList),
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
) -> ApiResult<Json<Value>> {
    validate_name("namespace", &ns)?;
    let listed = state.registry.list_jobs(&ns, &q.page()?).await?;
    Ok(ListQuery::respond(listed, render))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    operation_id = "getJob",
    summary = "Read a job",
    tag = "jobs",
    params(crate::resource::NamePath),
    responses(
        (status = 200, description = "The job.", body = JobRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let j = state.registry.get_job(ns, name).await?;
    Ok(with_etag(StatusCode::OK, render(&j), &j.resource_version))
}

#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    operation_id = "replaceJob",
    summary = "Replace a job's spec",
    tag = "jobs",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::JobInput, content_type = "application/json"),
    responses(
        (status = 200, description = "Replaced (or unchanged).", body = JobRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
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
    let (body_name, spec) = JobSpec::from_json(&body)?;
    check_same_name(name, body_name.as_deref())?;
    let current = state.registry.get_job(ns, name).await?;
    if current.spec == spec && expected.as_ref().is_none_or(|e| *e == current.resource_version) {
        // Nothing changes: no new resource_version (an `@every` schedule keeps its phase).
        return Ok(with_etag(StatusCode::OK, render(&current), &current.resource_version));
    }
    let j = state.registry.replace_job_spec(ns, name, &spec, expected.as_ref()).await?;
    Ok(with_etag(StatusCode::OK, render(&j), &j.resource_version))
}

#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    operation_id = "patchJob",
    summary = "Merge-patch a job's spec",
    tag = "jobs",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::JobPatch, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Patched (or unchanged).", body = JobRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
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
    let current = state.registry.get_job(ns, name).await?;
    let spec = current.spec.merge_patch(name, &patch)?;
    if current.spec == spec && expected.as_ref().is_none_or(|e| *e == current.resource_version) {
        return Ok(with_etag(StatusCode::OK, render(&current), &current.resource_version));
    }
    let expected = Some(expected.unwrap_or_else(|| current.resource_version.clone()));
    let j = state.registry.replace_job_spec(ns, name, &spec, expected.as_ref()).await?;
    Ok(with_etag(StatusCode::OK, render(&j), &j.resource_version))
}

#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    operation_id = "deleteJob",
    summary = "Delete a job",
    tag = "jobs",
    params(crate::resource::NamePath),
    responses(
        (status = 202, description = "Deleted; the body is the job as it was.", body = JobRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn delete(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let j = state.registry.get_job(ns, name).await?;
    state.registry.delete_job(ns, name).await?;
    Ok(with_etag(StatusCode::ACCEPTED, render(&j), &j.resource_version))
}

//! Triggers (docs/api.md; docs/architecture.md, "Triggers and jobs"): `/v1/namespaces/{ns}/triggers`.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use sless_core::names::validate_name;
use sless_core::schedule::check as check_schedule;
use sless_core::spec::check_same_name;
use sless_core::traits::New;
use sless_core::traits::Page;
use sless_core::trigger::{TriggerRecord, TriggerSpec, TriggerStatus, TriggerType};

use crate::body::read_json;
use crate::extract::{Path, Query};
use crate::resource::{ListQuery, NamePath, NsPath, check_namespace, if_match, with_etag};
use crate::{ApiResult, AppError, AppState};

fn render(t: &TriggerRecord) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

async fn http_triggers(state: &AppState, ns: &str, function: &str) -> ApiResult<Vec<TriggerRecord>> {
    let mut found = Vec::new();
    let mut page = Page::first(1000);
    loop {
        let batch = state.registry.list_triggers(ns, &page).await?;
        found.extend(
            batch.items.into_iter().filter(|t| t.spec.kind == TriggerType::Http && t.spec.function == function),
        );
        match batch.next {
            Some(next) => page.continue_token = Some(next),
            None => return Ok(found),
        }
    }
}

/// One http trigger per function (409 otherwise): two would make the public URL ambiguous.
/// The store enforces it (a unique index, safe with several servers on one database); this
/// look ahead only names the other trigger in the error.
async fn check_unique_http(state: &AppState, ns: &str, name: &str, spec: &TriggerSpec) -> ApiResult<()> {
    if spec.kind != TriggerType::Http {
        return Ok(());
    }
    if let Some(other) = http_triggers(state, ns, &spec.function).await?.into_iter().find(|t| t.name != name) {
        return Err(AppError::Core(sless_core::Error::AlreadyExists {
            kind: "http trigger for this function",
            name: format!("{} (trigger {})", spec.function, other.name),
        }));
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/triggers",
    operation_id = "createTrigger",
    summary = "Create a trigger",
    tag = "triggers",
    params(crate::resource::NsPath),
    request_body(content = crate::openapi::TriggerInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created.", body = TriggerRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
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
    let (name, spec) = TriggerSpec::from_json(&body, check_schedule)?;
    let name = name.ok_or_else(|| AppError::field("name", "is required"))?;
    check_unique_http(&state, &ns, &name, &spec).await?;
    let new = New { namespace: ns, name, spec, status: TriggerStatus::new() };
    let record = state.registry.create_trigger(&new).await?;
    Ok(with_etag(StatusCode::CREATED, render(&record), &record.resource_version))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/triggers",
    operation_id = "listTriggers",
    summary = "List triggers",
    tag = "triggers",
    params(crate::resource::NsPath, crate::resource::ListQuery),
    responses(
        (status = 200, description = "A page, sorted by name.", body = crate::openapi::TriggerList),
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
    let listed = state.registry.list_triggers(&ns, &q.page()?).await?;
    Ok(ListQuery::respond(listed, render))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    operation_id = "getTrigger",
    summary = "Read a trigger",
    tag = "triggers",
    params(crate::resource::NamePath),
    responses(
        (status = 200, description = "The trigger.", body = TriggerRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let t = state.registry.get_trigger(ns, name).await?;
    Ok(with_etag(StatusCode::OK, render(&t), &t.resource_version))
}

#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    operation_id = "replaceTrigger",
    summary = "Replace a trigger's spec",
    tag = "triggers",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::TriggerInput, content_type = "application/json"),
    responses(
        (status = 200, description = "Replaced (or unchanged).", body = TriggerRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 409, response = crate::openapi::Conflict),
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
    let (body_name, spec) = TriggerSpec::from_json(&body, check_schedule)?;
    check_same_name(name, body_name.as_deref())?;
    check_unique_http(&state, ns, name, &spec).await?;
    let current = state.registry.get_trigger(ns, name).await?;
    if current.spec == spec && expected.as_ref().is_none_or(|e| *e == current.resource_version) {
        // Nothing changes: no new resource_version (an `@every` schedule keeps its phase).
        return Ok(with_etag(StatusCode::OK, render(&current), &current.resource_version));
    }
    let t = state.registry.replace_trigger_spec(ns, name, &spec, expected.as_ref()).await?;
    Ok(with_etag(StatusCode::OK, render(&t), &t.resource_version))
}

#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    operation_id = "patchTrigger",
    summary = "Merge-patch a trigger's spec",
    tag = "triggers",
    params(crate::resource::NamePath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::TriggerPatch, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Patched (or unchanged).", body = TriggerRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 409, response = crate::openapi::Conflict),
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
    let current = state.registry.get_trigger(ns, name).await?;
    let spec = current.spec.merge_patch(name, &patch, check_schedule)?;
    check_unique_http(&state, ns, name, &spec).await?;
    if current.spec == spec && expected.as_ref().is_none_or(|e| *e == current.resource_version) {
        return Ok(with_etag(StatusCode::OK, render(&current), &current.resource_version));
    }
    let expected = Some(expected.unwrap_or_else(|| current.resource_version.clone()));
    let t = state.registry.replace_trigger_spec(ns, name, &spec, expected.as_ref()).await?;
    Ok(with_etag(StatusCode::OK, render(&t), &t.resource_version))
}

#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    operation_id = "deleteTrigger",
    summary = "Delete a trigger",
    tag = "triggers",
    params(crate::resource::NamePath),
    responses(
        (status = 202, description = "Deleted; the body is the trigger as it was.", body = TriggerRecord, headers(("ETag" = String, description = "`\"<resource_version>\"`"))),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn delete(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    let t = state.registry.get_trigger(ns, name).await?;
    state.registry.delete_trigger(ns, name).await?;
    Ok(with_etag(StatusCode::ACCEPTED, render(&t), &t.resource_version))
}

/// `POST /v1/namespaces/{ns}/triggers/{name}/fire`: calls a cron trigger's function once, now,
/// with the event its schedule sends (`sless_core::event::cron_event`, recorded with source
/// `cron` and the trigger's name), and answers with the function's result as invoke does.
/// What a schedule outside the server fires (a Kubernetes CronJob, docs/kubernetes.md) and how
/// a user tries a schedule without waiting for it. 409 for an http or disabled trigger; 503
/// while the function has no ready version.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/triggers/{name}/fire",
    operation_id = "fireTrigger",
    summary = "Fire a cron trigger now",
    tag = "triggers",
    params(crate::resource::NamePath),
    responses(
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 409, response = crate::openapi::Conflict),
        (status = 429, description = "No instance can take the call (`TooManyRequestsException`, `Retry-After: 1`).", body = crate::openapi::FunctionError),
        (status = 502, description = "The function failed (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = 503, response = crate::openapi::Unavailable),
        (status = 504, description = "The function ran past `timeout_sec` (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = "default", description = "The function's answer: its status, headers and body (`X-Request-Id`, `X-Sless-Version`)."),
    )
)]
pub(crate) async fn fire(State(state): State<AppState>, Path(p): Path<NamePath>) -> ApiResult<Response> {
    use sless_control::CallSource;
    use sless_core::invocation::Source;
    let (ns, name) = p.validated()?;
    let t = state.registry.get_trigger(ns, name).await?;
    if t.spec.kind != TriggerType::Cron {
        return Err(AppError::Core(sless_core::Error::Conflict(format!(
            "trigger {name:?} is an http trigger: call it at its URL (/fn/{ns}/{})",
            t.spec.function
        ))));
    }
    if !t.spec.enabled {
        return Err(AppError::Core(sless_core::Error::Conflict(format!("trigger {name:?} is disabled"))));
    }
    let from = CallSource { source: Source::Cron, name: Some(t.name.clone()) };
    let target = crate::invoke::target_or_reject(&state, ns, &t.spec.function, &from).await?;
    let id = uuid::Uuid::now_v7().to_string();
    let tick = sless_core::time::now();
    let event = sless_core::event::raw(&sless_core::event::cron_event(&id, ns, name, tick, &t.spec.payload));
    // A cron call's answer follows payload 1.0's rules, as the controller's ticks do.
    let reply = sless_core::event::Reply::Http(sless_core::event::PayloadFormat::V1);
    let answer = state
        .dispatcher
        .call(&target, id.clone(), event, &from, 0, reply)
        .await
        .map_err(|e| AppError::Core(e.into()))?;
    Ok(crate::invoke::respond(answer, &id, target.version))
}

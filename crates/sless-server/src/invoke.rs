//! The invoke gateway: an HTTP request becomes an API Gateway 1.0 event, the function's
//! result becomes the HTTP response (DESIGN §5).

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use sless_core::decide::callable;
use sless_core::event::{HttpRequest, http_event, http_response};
use sless_core::names::validate_name;
use sless_core::traits::{Invocation, InvokeResult, InvokeTarget};

use crate::body::read_limited;
use crate::{ApiResult, AppError, AppState};

#[derive(Deserialize)]
pub(crate) struct InvokePath {
    ns: String,
    name: String,
    path: Option<String>,
}

pub(crate) async fn invoke_root(
    state: State<AppState>,
    peer: ConnectInfo<SocketAddr>,
    Path(p): Path<InvokePath>,
    request: Request,
) -> ApiResult<Response> {
    call(state, peer, p, request).await
}

pub(crate) async fn invoke_path(
    state: State<AppState>,
    peer: ConnectInfo<SocketAddr>,
    Path(p): Path<InvokePath>,
    request: Request,
) -> ApiResult<Response> {
    call(state, peer, p, request).await
}

async fn call(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    p: InvokePath,
    request: Request,
) -> ApiResult<Response> {
    validate_name("namespace", &p.ns)?;
    validate_name("name", &p.name)?;
    let f = state.registry.get_function(&p.ns, &p.name).await?;
    let version = callable(f.spec.enabled, f.active_version, &f.status).map_err(AppError::NotReady)?;
    let v = state.registry.get_version(&p.ns, &p.name, version).await?;
    let (parts, body) = request.into_parts();
    let body = read_limited(body, state.limits.max_request_bytes).await?;
    let request_id = uuid::Uuid::now_v7().to_string();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != axum::http::header::AUTHORIZATION)
        .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let path = format!("/{}", p.path.as_deref().unwrap_or_default());
    let event = http_event(&HttpRequest {
        method: parts.method.as_str(),
        path: &path,
        query: parts.uri.query(),
        headers: &headers,
        body: &body,
        source_ip: &peer.ip().to_string(),
        request_id: &request_id,
        request_time_epoch_ms: chrono::Utc::now().timestamp_millis(),
    });
    let target = InvokeTarget {
        namespace: f.namespace.clone(),
        name: f.name.clone(),
        spec: f.spec.clone(),
        version,
        sha256: v.sha256,
    };
    let started = Instant::now();
    let outcome = state.executor.invoke(&target, Invocation { request_id: request_id.clone(), event }).await?;
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    for line in &outcome.logs {
        tracing::info!(target: "function", namespace = %f.namespace, function = %f.name, request_id = %request_id, "{line}");
    }
    let mut response = match outcome.result {
        InvokeResult::Returned(value) => match http_response(&value) {
            Ok(r) if r.body.len() > state.limits.max_response_bytes => function_error(
                StatusCode::BAD_GATEWAY,
                "Function.ResponseSizeTooLarge",
                &format!(
                    "the response is {} bytes, more than the limit of {}",
                    r.body.len(),
                    state.limits.max_response_bytes
                ),
            ),
            Ok(r) => {
                let mut response = Response::new(axum::body::Body::from(r.body));
                *response.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
                let h = response.headers_mut();
                for (name, value) in r.headers {
                    if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(&value)) {
                        h.append(n, v);
                    }
                }
                response
            }
            Err(why) => function_error(StatusCode::BAD_GATEWAY, "Runtime.MalformedResponse", &why),
        },
        InvokeResult::Failed { error_type, error_message } => {
            function_error(StatusCode::BAD_GATEWAY, &error_type, &error_message)
        }
        InvokeResult::TimedOut => function_error(
            StatusCode::GATEWAY_TIMEOUT,
            "Function.Timeout",
            &format!("the function did not finish within timeout_sec = {} s", f.spec.timeout_sec),
        ),
        InvokeResult::Crashed { message } => function_error(StatusCode::BAD_GATEWAY, "RuntimeExited", &message),
    };
    tracing::info!(namespace = %f.namespace, function = %f.name, request_id = %request_id, version, status = response.status().as_u16(), duration_ms, cold_start = outcome.cold_start, "invocation");
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        h.insert("x-request-id", v);
    }
    h.insert("x-sless-version", HeaderValue::from(version));
    Ok(response)
}

/// A response for the function's own failure: `{"errorType", "errorMessage"}` with
/// `X-Function-Error: true` (as Yandex Cloud Functions marks them).
fn function_error(status: StatusCode, error_type: &str, message: &str) -> Response {
    let body = json!({ "errorType": error_type, "errorMessage": message });
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert("x-function-error", HeaderValue::from_static("true"));
    response
}

//! The invoke gateway (docs/writing-functions.md): the invoke API and the public `/fn/` route. An HTTP
//! request becomes an API Gateway 1.0 event; the function's result becomes the response.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use sless_control::{CallSource, Rejection};
use sless_core::event::{HttpRequest, PayloadFormat, Reply, add_forwarded, http_event_for};
use sless_core::invocation::Source;
use sless_core::names::validate_name;
use sless_core::trigger::HttpAuth;

use crate::body::read_limited;
use crate::edge::{LocalPort, RawHead};
use crate::extract::Path;
use crate::{ApiResult, AppError, AppState, auth};

#[derive(Deserialize)]
pub(crate) struct InvokePath {
    ns: String,
    name: String,
    path: Option<String>,
}

/// `ANY /v1/namespaces/{ns}/functions/{name}/invoke[/{path}]` (behind the admin token).
#[utoipa::path(
    method(get, post, put, delete, options, head, patch, trace),
    path = "/v1/namespaces/{ns}/functions/{name}/invoke",
    operation_id = "invoke",
    summary = "Call a function",
    tag = "invoke",
    params(
        ("ns" = String, Path, description = "The namespace (a DNS-1123 label)."),
        ("name" = String, Path, description = "The function (a DNS-1123 label)."),
        ("integration" = Option<String>, Query, description = "`raw`: raw invocation, the JSON body is the event itself and the return value is the JSON response body (400 when the body is not JSON)."),
    ),
    request_body(content = Vec<u8>, description = "Any body (at most `--max-body-mb`, 6 MiB); it becomes the event's `body` (with `integration=raw`: the event).", content_type = "*/*"),
    responses(
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 429, description = "No instance can take the call (`TooManyRequestsException`, `Retry-After: 1`).", body = crate::openapi::FunctionError),
        (status = 502, description = "The function failed (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = 503, description = "No ready version, disabled (problem+json, `Retry-After`), or crash-looping (`Function.CrashLoop`, `Retry-After`).", content(
            (crate::error::Problem = "application/problem+json"),
            (crate::openapi::FunctionError = "application/json"),
        )),
        (status = 504, description = "The function ran past `timeout_sec` (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = "default", description = "The function's answer: its status, headers and body (`X-Request-Id`, `X-Sless-Version`)."),
    )
)]
pub(crate) async fn invoke(
    state: State<AppState>,
    peer: ConnectInfo<SocketAddr>,
    Path(p): Path<InvokePath>,
    request: Request,
) -> ApiResult<Response> {
    call(state, peer, p, request, CallSource::invoke(), true, None).await
}

/// `ANY /fn/{ns}/{name}[/{path}]`: public unless the function's http trigger says
/// `auth: token`; 404 without an enabled http trigger (docs/architecture.md, "Security").
#[utoipa::path(
    method(get, post, put, delete, options, head, patch, trace),
    path = "/fn/{ns}/{name}",
    operation_id = "callPublic",
    summary = "Call a function through its http trigger",
    tag = "invoke",
    params(
        ("ns" = String, Path, description = "The namespace (a DNS-1123 label)."),
        ("name" = String, Path, description = "The function (a DNS-1123 label)."),
        ("integration" = Option<String>, Query, description = "`raw`: raw invocation, the JSON body is the event itself and the return value is the JSON response body (400 when the body is not JSON)."),
    ),
    request_body(content = Vec<u8>, description = "Any body (at most `--max-body-mb`, 6 MiB); it becomes the event's `body` (with `integration=raw`: the event).", content_type = "*/*"),
    responses(
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 408, response = crate::openapi::RequestTimeout),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 429, description = "No instance can take the call (`TooManyRequestsException`, `Retry-After: 1`).", body = crate::openapi::FunctionError),
        (status = 502, description = "The function failed (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = 503, description = "No ready version, disabled (problem+json, `Retry-After`), or crash-looping (`Function.CrashLoop`, `Retry-After`).", content(
            (crate::error::Problem = "application/problem+json"),
            (crate::openapi::FunctionError = "application/json"),
        )),
        (status = 504, description = "The function ran past `timeout_sec` (`X-Function-Error: true`).", body = crate::openapi::FunctionError),
        (status = "default", description = "The function's answer: its status, headers and body (`X-Request-Id`, `X-Sless-Version`)."),
    )
)]
pub(crate) async fn public(
    state: State<AppState>,
    peer: ConnectInfo<SocketAddr>,
    Path(p): Path<InvokePath>,
    request: Request,
) -> ApiResult<Response> {
    validate_name("namespace", &p.ns)?;
    validate_name("name", &p.name)?;
    let found = state.dispatcher.http_trigger(&p.ns, &p.name).await.map_err(|e| AppError::Core(e.into()))?;
    let Some(trigger) = found else {
        return Err(AppError::Core(sless_core::Error::NotFound {
            kind: "http trigger for function",
            name: p.name.clone(),
        }));
    };
    let ours = trigger.spec.auth == HttpAuth::Token;
    if ours {
        auth::check_invoke(&state, request.headers(), &p.ns).await?;
    }
    // A public route's `Authorization` header is the caller's own (a function may check its
    // own tokens); the platform's tokens are never passed on, even sent to a public route.
    let strip = ours || auth::is_platform_credential(&state, request.headers());
    let format = trigger.spec.payload_format;
    call(state, peer, p, request, CallSource { source: Source::Http, name: Some(trigger.name) }, strip, format).await
}

/// Whether the query asks for raw invocation: `integration=raw`, as Yandex's function URLs
/// take it.
fn is_raw(query: Option<&str>) -> bool {
    query.is_some_and(|q| form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "integration" && v == "raw"))
}

/// A raw invocation's event: the body as JSON (`{}` when empty, as Lambda's `Invoke` sends
/// without a payload). Errors: a body that is not JSON (400 naming `body`).
fn raw_event(body: &[u8]) -> ApiResult<Box<serde_json::value::RawValue>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(sless_core::event::raw(&serde_json::json!({})));
    }
    Ok(serde_json::from_slice::<Box<serde_json::value::RawValue>>(body)
        .map_err(|e| sless_core::Error::field("body", format!("raw invocation needs a JSON body: {e}")))?)
}

/// The request's headers for the event, in arrival order, names as the client spelled them
/// (from the edge's [`RawHead`]; lowercase when it is not known): without `Proxy-Authorization`
/// (the hop's), and without `Authorization` when it is the platform's token.
fn event_headers(parts: &axum::http::request::Parts, strip_authorization: bool) -> Vec<(String, String)> {
    let keep = |name: &HeaderName| {
        !(strip_authorization && *name == header::AUTHORIZATION) && *name != header::PROXY_AUTHORIZATION
    };
    let value = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let raw = parts.extensions.get::<RawHead>();
    if let Some(names) = raw.and_then(|r| r.spellings(&parts.headers)) {
        // The i-th field of a name in the head is the i-th value hyper keeps for it.
        let mut seen: Vec<(HeaderName, usize)> = Vec::new();
        let mut out = Vec::with_capacity(names.len());
        for spelled in names {
            let Ok(name) = HeaderName::from_bytes(spelled.as_bytes()) else { continue };
            let n = match seen.iter_mut().find(|(k, _)| *k == name) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    seen.push((name.clone(), 0));
                    0
                }
            };
            if let Some(v) = parts.headers.get_all(&name).iter().nth(n)
                && keep(&name)
            {
                out.push((spelled.to_string(), value(v)));
            }
        }
        return out;
    }
    parts.headers.iter().filter(|(name, _)| keep(name)).map(|(n, v)| (n.as_str().to_string(), value(v))).collect()
}

async fn call(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    p: InvokePath,
    request: Request,
    from: CallSource,
    strip_authorization: bool,
    trigger_format: Option<PayloadFormat>,
) -> ApiResult<Response> {
    validate_name("namespace", &p.ns)?;
    validate_name("name", &p.name)?;
    let target = target_or_reject(&state, &p.ns, &p.name, &from).await?;
    let (parts, body) = request.into_parts();
    let body = match read_limited(body, state.limits.max_request_bytes).await {
        Ok(b) => b,
        Err(e) => {
            let rejection = match &e {
                AppError::RequestTimeout(message) => Rejection {
                    status: 408,
                    error_type: "Function.RequestTimeout",
                    message: message.clone(),
                    request_bytes: 0,
                },
                _ => Rejection {
                    status: 413,
                    error_type: "Function.RequestTooLarge",
                    message: format!("the request body is larger than {} bytes", state.limits.max_request_bytes),
                    request_bytes: 0,
                },
            };
            state.dispatcher.rejected(&p.ns, &p.name, &from, rejection);
            return Err(e);
        }
    };
    let request_id = uuid::Uuid::now_v7().to_string();
    let source_ip = peer.ip().to_canonical().to_string();
    let mut headers = event_headers(&parts, strip_authorization);
    let port = parts.extensions.get::<LocalPort>().map_or(0, |p| p.0);
    add_forwarded(&mut headers, &source_ip, "http", port);
    let path = format!("/{}", p.path.as_deref().unwrap_or_default());
    // The http trigger's format, else the function's (docs/writing-functions.md, "The HTTP event").
    let format = trigger_format.unwrap_or(target.spec.payload_format);
    let (event, reply) = if is_raw(parts.uri.query()) {
        // Raw invocation: the body is the event (docs/writing-functions.md, "Raw invocation").
        (raw_event(&body)?, Reply::Raw)
    } else {
        let event = http_event_for(
            format,
            &HttpRequest {
                method: parts.method.as_str(),
                path: &path,
                query: parts.uri.query(),
                headers: &headers,
                body: &body,
                source_ip: &source_ip,
                request_id: &request_id,
                request_time_epoch_ms: chrono::Utc::now().timestamp_millis(),
                api_id: &p.ns,
            },
        );
        (event, Reply::Http(format))
    };
    let answer = state
        .dispatcher
        .call(&target, request_id.clone(), event, &from, body.len() as u64, reply)
        .await
        .map_err(|e| AppError::Core(e.into()))?;
    Ok(respond(answer, &request_id, target.version))
}

/// What to run for a call of `namespace/name` from `from`; a function with no ready version
/// is answered 503 (`AppError::NotReady`) and recorded as a rejected call.
pub(crate) async fn target_or_reject(
    state: &AppState,
    namespace: &str,
    name: &str,
    from: &CallSource,
) -> ApiResult<sless_core::traits::InvokeTarget> {
    match state.dispatcher.target(namespace, name).await {
        Ok(t) => Ok(t),
        Err(sless_control::Error::NotReady(why)) => {
            state.dispatcher.rejected(namespace, name, from, Rejection::not_ready(why.clone()));
            Err(AppError::NotReady(why))
        }
        Err(e) => Err(AppError::Core(e.into())),
    }
}

/// The HTTP response of a call: the function's status, headers and body, with
/// `X-Request-Id` and `X-Sless-Version`.
pub(crate) fn respond(answer: sless_core::event::Answer, request_id: &str, version: u32) -> Response {
    let r = answer.response;
    let mut response = Response::new(Body::from(r.body));
    *response.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
    let h = response.headers_mut();
    for (name, value) in r.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(&value)) {
            h.append(n, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    h.insert("x-sless-version", HeaderValue::from(version));
    response
}

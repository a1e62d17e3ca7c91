//! Invocation records and function output (docs/api.md; docs/architecture.md, "Observability").

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use sless_core::invocation::{InvocationQuery, InvocationRecord, Outcome};
use sless_core::names::validate_name;
use tokio::sync::broadcast;

use crate::extract::{Path, Query};
use crate::resource::NamePath;
use crate::{ApiResult, AppError, AppState};

/// `/v1/namespaces/{ns}/invocations/{id}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct IdPath {
    /// The namespace (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    ns: String,
    /// The record's id (a UUIDv7, the call's request id).
    id: String,
}

/// `?status=ok,error&since=&until=&limit=&cursor=`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// A comma-separated list of outcomes (`ok`, `error`, `timeout`, `oom`, `crash`, `rejected`).
    status: Option<String>,
    /// Only calls started at or after this RFC 3339 time.
    #[param(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    since: Option<String>,
    /// Only calls started before this RFC 3339 time.
    #[param(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    until: Option<String>,
    /// Records per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

fn time(field: &str, value: Option<&str>) -> ApiResult<Option<DateTime<Utc>>> {
    value
        .filter(|v| !v.is_empty())
        .map(|v| {
            DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&Utc)).map_err(|e| {
                AppError::field(field, format!("must be an RFC 3339 time such as 2026-01-02T03:04:05Z: {e}"))
            })
        })
        .transpose()
}

/// The list shape: everything but the logs (they are in the single-record view).
fn summary(r: &InvocationRecord) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.remove("logs");
    }
    v
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/invocations",
    operation_id = "listInvocations",
    summary = "List a function's invocation records",
    tag = "invocations",
    params(crate::resource::NamePath, ListParams),
    responses(
        (status = 200, description = "A page of records, newest first.", body = crate::openapi::InvocationList),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    Query(q): Query<ListParams>,
) -> ApiResult<Json<Value>> {
    let (ns, name) = p.validated()?;
    // Records outlive their function: no existence check.
    let limit: u32 = match q.limit.as_deref() {
        None | Some("") => 100,
        Some(t) => t
            .parse()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| AppError::field("limit", "must be a number from 1 to 1000"))?,
    };
    let mut outcomes = Vec::new();
    for s in q.status.as_deref().unwrap_or_default().split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let known: Vec<_> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        outcomes.push(
            Outcome::parse(s).ok_or_else(|| {
                AppError::field("status", format!("unknown outcome {s:?}; known: {}", known.join(", ")))
            })?,
        );
    }
    let query = InvocationQuery {
        function: Some(name.to_string()),
        outcomes,
        since: time("since", q.since.as_deref())?,
        until: time("until", q.until.as_deref())?,
        // A cursor is the id (a UUID) of the last record of the page before: anything else
        // would silently list from the start or read as an empty page.
        before_id: match q.cursor.filter(|c| !c.is_empty()) {
            Some(c) if uuid::Uuid::try_parse(&c).is_ok() => Some(c),
            Some(_) => return Err(AppError::field("cursor", "is not a next_cursor this API gave")),
            None => None,
        },
        limit: limit + 1,
    };
    let mut items = state.invocations.list(ns, &query).await?;
    let next = if items.len() > limit as usize {
        items.truncate(limit as usize);
        items.last().map(|r| r.id.clone())
    } else {
        None
    };
    let items: Vec<Value> = items.iter().map(summary).collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/invocations/{id}",
    operation_id = "getInvocation",
    summary = "Read an invocation record with its logs",
    tag = "invocations",
    params(IdPath),
    responses(
        (status = 200, description = "The record with its logs.", body = InvocationRecord),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<IdPath>) -> ApiResult<Json<InvocationRecord>> {
    validate_name("namespace", &p.ns)?;
    Ok(Json(state.invocations.get(&p.ns, &p.id).await?))
}

/// How often a log stream checks that its token still may read it.
const RECHECK_EVERY: Duration = Duration::from_secs(5);

/// `?tail=N&follow=true`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogParams {
    /// How many recent lines, 0–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 0, maximum = 1000)]
    tail: Option<String>,
    /// `true`: stream the lines as server-sent events as they are printed.
    #[param(value_type = Option<bool>)]
    follow: Option<String>,
}

/// The function's recent output; with `follow=true` a server-sent event stream of it
/// (HTML Living Standard §9.2), one `data:` JSON line per output line.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/logs",
    operation_id = "getLogs",
    summary = "A function's recent output, or a live stream of it",
    tag = "invocations",
    params(crate::resource::NamePath, LogParams),
    responses(
        (status = 200, description = "The recent lines; with `follow=true` a server-sent event stream, one `data:` JSON `LogLine` per line.", content(
            (crate::openapi::LogList = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn logs(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    Query(q): Query<LogParams>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let (ns, name) = p.validated()?;
    state.registry.get_function(ns, name).await?;
    let tail: usize = match q.tail.as_deref() {
        None | Some("") => 100,
        Some(t) => t
            .parse()
            .ok()
            .filter(|n| *n <= 1000)
            .ok_or_else(|| AppError::field("tail", "must be a number from 0 to 1000"))?,
    };
    let follow = match q.follow.as_deref() {
        None | Some("") | Some("false") => false,
        Some("true") | Some("1") => true,
        Some(_) => return Err(AppError::field("follow", "must be true or false")),
    };
    let mut follower = state.logs.follow(ns, name, tail);
    if follower.recent.len() < tail {
        let missing = tail - follower.recent.len();
        let older = earlier_lines(&state, ns, name, &follower.recent, missing).await;
        follower.recent.splice(0..0, older);
    }
    if !follow {
        return Ok(Json(json!({ "items": follower.recent })).into_response());
    }
    let recheck = crate::auth::Recheck { state: state.clone(), headers, namespace: ns.to_string() };
    Ok(Sse::new(sse_stream(follower, recheck))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("keepalive"))
        .into_response())
}

/// Up to `n` lines printed before `recent` (the lines this server holds in memory), read
/// from the function's invocation records: what a restart, another server or the memory's
/// limit left out. Calls already in `recent` are skipped. A failing store gives none (the
/// lines in memory are still worth showing).
async fn earlier_lines(
    state: &AppState,
    ns: &str,
    name: &str,
    recent: &[sless_control::LogLine],
    n: usize,
) -> Vec<sless_control::LogLine> {
    let shown: std::collections::HashSet<&str> = recent.iter().filter_map(|l| l.request_id.as_deref()).collect();
    let query = InvocationQuery {
        function: Some(name.to_string()),
        until: recent.first().map(|l| l.time),
        limit: n.clamp(1, 100) as u32,
        ..InvocationQuery::default()
    };
    let records = match state.invocations.list(ns, &query).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "older log lines unavailable");
            return Vec::new();
        }
    };
    // Newest call first: take lines from the end until `n`, then put them in order.
    let mut lines = Vec::new();
    for r in records.iter().filter(|r| !shown.contains(r.id.as_str())) {
        for line in r.logs.iter().rev() {
            if lines.len() == n {
                break;
            }
            lines.push(sless_control::LogLine {
                time: r.started_at,
                request_id: Some(r.id.clone()),
                line: line.clone(),
            });
        }
    }
    lines.reverse();
    lines
}

/// The recent lines, then each new one, until the server stops (the stream then ends
/// cleanly: the chunked body's last chunk, not a broken connection).
fn sse_stream(
    follower: sless_control::Follow,
    recheck: crate::auth::Recheck,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let event = |line: &sless_control::LogLine| Event::default().data(serde_json::to_string(line).unwrap_or_default());
    let head = stream::iter(follower.recent.iter().map(event).collect::<Vec<_>>());
    let mut every = tokio::time::interval(RECHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = (follower.lines, follower.closed, every, recheck);
    let live = stream::unfold(start, move |(mut rx, mut closed, mut every, recheck)| async move {
        let received = loop {
            if *closed.borrow() {
                return None;
            }
            let due = tokio::select! {
                r = rx.recv() => break r,
                _ = closed.changed() => false,
                _ = every.tick() => true,
            };
            // A token revoked, expired or narrowed meanwhile ends the stream.
            if due && !recheck.still_allowed().await {
                return None;
            }
        };
        let next = match received {
            Ok(line) => event(&line),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Event::default().comment(format!("{n} lines skipped: the reader was too slow"))
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((next, (rx, closed, every, recheck)))
    });
    head.chain(live).map(Ok)
}

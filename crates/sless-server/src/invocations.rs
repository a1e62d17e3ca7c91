//! Invocation records and function output (docs/api.md; docs/architecture.md, "Observability").

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use sless_core::invocation::{InvocationQuery, InvocationRecord, Outcome};
use sless_core::names::validate_name;
use tokio::sync::broadcast;

use crate::resource::NamePath;
use crate::{ApiResult, AppError, AppState};

#[derive(Deserialize)]
pub(crate) struct IdPath {
    ns: String,
    id: String,
}

/// `?status=ok,error&since=&until=&limit=&cursor=`.
#[derive(Deserialize)]
pub(crate) struct ListParams {
    status: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<String>,
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
        before_id: q.cursor.filter(|c| !c.is_empty()),
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

pub(crate) async fn get(State(state): State<AppState>, Path(p): Path<IdPath>) -> ApiResult<Json<InvocationRecord>> {
    validate_name("namespace", &p.ns)?;
    Ok(Json(state.invocations.get(&p.ns, &p.id).await?))
}

/// `?tail=N&follow=true`.
#[derive(Deserialize)]
pub(crate) struct LogParams {
    tail: Option<String>,
    follow: Option<String>,
}

/// The function's recent output; with `follow=true` a server-sent event stream of it
/// (HTML Living Standard §9.2), one `data:` JSON line per output line.
pub(crate) async fn logs(
    State(state): State<AppState>,
    Path(p): Path<NamePath>,
    Query(q): Query<LogParams>,
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
    let (recent, rx) = state.logs.follow(ns, name, tail);
    if !follow {
        return Ok(Json(json!({ "items": recent })).into_response());
    }
    Ok(Sse::new(sse_stream(recent, rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("keepalive"))
        .into_response())
}

fn sse_stream(
    recent: Vec<sless_control::LogLine>,
    rx: broadcast::Receiver<sless_control::LogLine>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let event = |line: &sless_control::LogLine| Event::default().data(serde_json::to_string(line).unwrap_or_default());
    let head = stream::iter(recent.iter().map(event).collect::<Vec<_>>());
    let live = stream::unfold(rx, move |mut rx| async move {
        let next = match rx.recv().await {
            Ok(line) => event(&line),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Event::default().comment(format!("{n} lines skipped: the reader was too slow"))
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((next, rx))
    });
    head.chain(live).map(Ok)
}

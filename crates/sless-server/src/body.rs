//! Reading request bodies with a limit and a content type, with errors as problem+json.

use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use axum::http::{HeaderMap, header};
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use serde_json::Value;

use crate::AppError;

/// The media type of a request (`Content-Type` without parameters, lowercase).
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
}

/// The length a request declares in `Content-Length`, if it declares a valid one.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

/// How long a refused body is still read, and thrown away, after the 413 went out.
const DRAIN_FOR: Duration = Duration::from_secs(10);
/// At most this much of a refused body is read and thrown away.
const DRAIN_BYTES: u64 = 256 * 1024 * 1024;

/// Reads and throws away what is left of a body that was refused, in the background, for at
/// most [`DRAIN_FOR`] and [`DRAIN_BYTES`]. The response is sent at once all the same; this only
/// keeps the connection from being reset under a client that is still sending (closing a
/// socket with unread data makes the kernel send a reset, and many clients then report the
/// reset instead of the response). A client that stalls or sends more is cut off after that.
pub(crate) fn discard(body: Body) {
    drain(body.into_data_stream());
}

fn drain(mut stream: BodyDataStream) {
    tokio::spawn(async move {
        let mut left = DRAIN_BYTES;
        let _ = tokio::time::timeout(DRAIN_FOR, async {
            while let Some(Ok(chunk)) = stream.next().await {
                left = left.saturating_sub(chunk.len() as u64);
                if left == 0 {
                    break;
                }
            }
        })
        .await;
    });
}

/// Reads at most `limit` bytes. Errors: 413 when the body is larger: at once, before reading
/// anything, when its declared length (`Content-Length`) is over the limit, and otherwise (a
/// chunked body) as soon as more than `limit` bytes have arrived. A body that cannot be read
/// (broken chunked framing, the client went away) is a 413 too, as it always was, unless the
/// edge ended it for coming too slowly: 408 ([`AppError::RequestTimeout`]).
pub(crate) async fn read_limited(body: Body, limit: usize) -> Result<Bytes, AppError> {
    use axum::body::HttpBody as _;
    if body.size_hint().lower() > limit as u64 {
        discard(body);
        return Err(AppError::PayloadTooLarge { limit });
    }
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| crate::edge::timed_out(e).unwrap_or(AppError::PayloadTooLarge { limit }))?;
        if buf.len().saturating_add(chunk.len()) > limit {
            drain(stream);
            return Err(AppError::PayloadTooLarge { limit });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Reads a JSON object body whose media type is one of `accepted`. Errors: 415 for another
/// type, 413 over 1 MiB, 408 for a body that came too slowly, 400 (field `body`) for invalid
/// JSON.
pub(crate) async fn read_json(headers: &HeaderMap, body: Body, accepted: &[&str]) -> Result<Value, AppError> {
    let media = media_type(headers);
    if !media.as_deref().is_some_and(|m| accepted.contains(&m)) {
        return Err(AppError::UnsupportedMediaType(format!(
            "Content-Type must be {}, got {}",
            accepted.join(" or "),
            media.as_deref().unwrap_or("nothing")
        )));
    }
    let bytes = read_limited(body, 1024 * 1024).await?;
    serde_json::from_slice(&bytes).map_err(|e| AppError::field("body", format!("invalid JSON: {e}")))
}

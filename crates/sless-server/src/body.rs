//! Reading request bodies with a limit and a content type, with errors as problem+json.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::Value;

use crate::AppError;

/// The media type of a request (`Content-Type` without parameters, lowercase).
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
}

/// Reads at most `limit` bytes. Errors: 413 when the body is larger.
pub(crate) async fn read_limited(body: Body, limit: usize) -> Result<Bytes, AppError> {
    axum::body::to_bytes(body, limit).await.map_err(|_| AppError::PayloadTooLarge { limit })
}

/// Reads a JSON object body whose media type is one of `accepted`. Errors: 415 for another
/// type, 413 over 1 MiB, 400 (field `body`) for invalid JSON.
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

//! The one error type of the API, rendered as RFC 9457 `application/problem+json`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An API error. Messages are for users; internal causes are logged once, here, and never
/// sent (they may hold paths or driver details).
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// From validation, the registry, the blob store or the executor.
    #[error(transparent)]
    Core(#[from] sless_core::Error),
    /// Missing or wrong bearer token (401).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The token may not do this here (403); says nothing of what the namespace holds.
    #[error(transparent)]
    Forbidden(sless_core::tenant::Denied),
    /// The token's request rate in this namespace is used up (429 with `Retry-After`).
    #[error(
        "quota requests_per_minute of namespace {namespace:?} exceeded: limit {limit} per token; retry in {retry_after_secs} s"
    )]
    RateLimited {
        /// The namespace whose quota it is.
        namespace: String,
        /// Its `requests_per_minute`.
        limit: u32,
        /// Seconds until the next request is allowed.
        retry_after_secs: u64,
    },
    /// Wrong `Content-Type` (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A request body over its limit (413).
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The route exists but not for this method (405).
    #[error("method {0} is not allowed here")]
    MethodNotAllowed(String),
    /// The function cannot be called now (503 with `Retry-After`).
    #[error("{0}")]
    NotReady(String),
    /// The request body came too slowly (408 with `Connection: close`): a part of it was
    /// later than the edge's body read timeout, or the whole of it later than its total
    /// timeout (`Edge`).
    #[error("{0}")]
    RequestTimeout(String),
}

impl AppError {
    /// A 400 naming `field`.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        AppError::Core(sless_core::Error::field(field, message))
    }

    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use sless_core::Error as E;
        match self {
            AppError::Core(E::InvalidField { .. }) => (StatusCode::BAD_REQUEST, "invalid-field", "Invalid field"),
            AppError::Core(E::ArchiveTooLarge { .. }) => {
                (StatusCode::PAYLOAD_TOO_LARGE, "archive-too-large", "Archive too large")
            }
            AppError::Core(E::InvalidArchive { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid-archive", "Invalid archive")
            }
            AppError::Core(E::NotFound { .. }) => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            AppError::Core(E::AlreadyExists { .. }) => (StatusCode::CONFLICT, "already-exists", "Already exists"),
            AppError::Core(E::Stale { .. }) => {
                (StatusCode::PRECONDITION_FAILED, "stale-resource-version", "Precondition failed")
            }
            AppError::Core(E::QuotaExceeded(_)) => (StatusCode::FORBIDDEN, "quota-exceeded", "Quota exceeded"),
            AppError::Core(E::Conflict(_)) => (StatusCode::CONFLICT, "conflict", "Conflict"),
            AppError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", "Forbidden"),
            AppError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate-limited", "Too many requests"),
            AppError::Core(E::Storage(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, "storage-unavailable", "Storage unavailable")
            }
            AppError::Core(E::Internal(_)) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error"),
            AppError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized"),
            AppError::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", "Unsupported media type")
            }
            AppError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", "Payload too large")
            }
            AppError::NotReady(_) => (StatusCode::SERVICE_UNAVAILABLE, "function-not-ready", "Function not ready"),
            AppError::MethodNotAllowed(_) => {
                (StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed")
            }
            AppError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request-timeout", "Request timeout"),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, slug, title) = self.parts();
        let detail = match &self {
            AppError::Core(sless_core::Error::Storage(_) | sless_core::Error::Internal(_)) => {
                tracing::error!(error = %self, "request failed");
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    "storage is unavailable; try again later".to_string()
                } else {
                    "internal error; see the server log".to_string()
                }
            }
            other => other.to_string(),
        };
        let (field, entry) = match &self {
            AppError::Core(sless_core::Error::InvalidField { field, .. }) => (Some(field.clone()), None),
            AppError::Core(sless_core::Error::InvalidArchive { entry: Some(entry), .. }) => (None, Some(entry.clone())),
            _ => (None, None),
        };
        let quota = match &self {
            AppError::Core(sless_core::Error::QuotaExceeded(q)) => Some(q.quota.to_string()),
            AppError::RateLimited { .. } => Some("requests_per_minute".to_string()),
            _ => None,
        };
        let body = Problem {
            type_: format!("https://sless.dev/problems/{slug}"),
            title: title.to_string(),
            status: status.as_u16(),
            detail,
            field,
            entry,
            quota,
        };
        let body = serde_json::to_string(&body).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        match self {
            AppError::Unauthorized(_) => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            AppError::NotReady(_) | AppError::Core(sless_core::Error::Storage(_)) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            AppError::RateLimited { retry_after_secs, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs.max(1)));
            }
            AppError::RequestTimeout(_) => {
                // The rest of the body may still come: this connection cannot carry another
                // request.
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

/// An RFC 9457 problem: the body of every error of the API (`application/problem+json`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem, `https://sless.dev/problems/<slug>`, e.g.
    /// `…/invalid-field`, `…/not-found`, `…/unauthorized`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A short summary of the kind, e.g. `Invalid field`.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, for a user.
    pub detail: String,
    /// The request field at fault (a body field such as `memory_mb` or `env.A`, a parameter
    /// such as `limit`, or `body`), for a 400.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub field: Option<String>,
    /// The zip entry at fault, for a 422.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub entry: Option<String>,
    /// The quota exceeded (e.g. `max_functions`, `requests_per_minute`), for a 403 or 429.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub quota: Option<String>,
}

/// `Result` with [`AppError`].
pub type ApiResult<T> = Result<T, AppError>;

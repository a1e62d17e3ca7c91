//! What every resource endpoint shares: pagination, `If-Match`, `ETag`.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sless_core::resource_version::ResourceVersion;
use sless_core::traits::{Listed, Page};

use crate::{ApiResult, AppError};

/// `/v1/namespaces/{ns}/<kind>`: a DNS-1123 label, checked by the handler.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct NsPath {
    /// The namespace (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub(crate) ns: String,
}

/// `/v1/namespaces/{ns}/<kind>/{name}`: both DNS-1123 labels, checked by [`NamePath::validated`].
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct NamePath {
    /// The namespace (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    ns: String,
    /// The resource's name (a DNS-1123 label).
    #[param(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    name: String,
}

impl NamePath {
    /// The namespace and name. Errors: 400 naming `namespace` or `name`.
    pub(crate) fn validated(&self) -> ApiResult<(&str, &str)> {
        sless_core::names::validate_name("namespace", &self.ns)?;
        sless_core::names::validate_name("name", &self.name)?;
        Ok((&self.ns, &self.name))
    }
}

/// `?limit=&cursor=` of a list. `limit` is 1–1000 (default 100); `cursor` is the
/// `next_cursor` of the previous page.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Items per page, 1–1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

impl ListQuery {
    /// The page to ask the registry for. Errors: 400 naming `limit`.
    pub(crate) fn page(&self) -> ApiResult<Page> {
        let limit: u32 = match self.limit.as_deref() {
            None | Some("") => 100,
            Some(text) => text.parse().map_err(|_| AppError::field("limit", "must be a number from 1 to 1000"))?,
        };
        if !(1..=1000).contains(&limit) {
            return Err(AppError::field("limit", "must be from 1 to 1000"));
        }
        // The token is the store's to check (`InvalidField` naming `cursor`).
        Ok(Page { limit, continue_token: self.cursor.clone().filter(|c| !c.is_empty()) })
    }

    /// `{"items": [...], "next_cursor": …}` from a page fetched with [`ListQuery::page`].
    pub(crate) fn respond<T>(listed: Listed<T>, render: impl Fn(&T) -> Value) -> Json<Value> {
        let items: Vec<Value> = listed.items.iter().map(render).collect();
        Json(json!({ "items": items, "next_cursor": listed.next }))
    }

    /// The same body as [`ListQuery::respond`], but the items are serialised straight into
    /// the response bytes (no `Value` tree per item): for long lists of large items.
    pub(crate) fn respond_serialized<T, R: Serialize>(
        listed: Listed<T>,
        render: impl Fn(T) -> R,
    ) -> ApiResult<Response> {
        let next_cursor = listed.next;
        let items: Vec<R> = listed.items.into_iter().map(render).collect();
        // Items of a page are alike in size; 1 KiB each spares most of the buffer's regrowth.
        let mut bytes = Vec::with_capacity(64 + items.len() * 1024);
        serde_json::to_writer(&mut bytes, &ListBody { items, next_cursor })
            .map_err(|e| sless_core::Error::Internal(format!("the list could not be serialised: {e}")))?;
        Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response())
    }
}

/// A list body as [`ListQuery::respond`] builds it: `items` first, then `next_cursor`.
#[derive(Serialize)]
struct ListBody<R> {
    items: Vec<R>,
    next_cursor: Option<String>,
}

/// Parses `If-Match` (RFC 9110 §13.1.1): `*` (any version), `"7"`, `W/"7"` or `7`; the
/// version is opaque. Errors: 412 when it names no version.
pub(crate) fn if_match(headers: &HeaderMap) -> ApiResult<Option<ResourceVersion>> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    if text == "*" {
        return Ok(None);
    }
    let bare = text.trim_start_matches("W/").trim_matches('"');
    ResourceVersion::new(bare).map(Some).ok_or_else(|| {
        AppError::Core(sless_core::Error::Stale { expected: text.to_string(), current: "a resource_version".into() })
    })
}

/// A JSON response with `ETag: "<resource_version>"`.
pub(crate) fn with_etag(status: StatusCode, body: Value, resource_version: &ResourceVersion) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{resource_version}\"")) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}

/// A body's `namespace` (read-only) must be the path's when present. Errors: 400 naming it.
pub(crate) fn check_namespace(body: &Value, ns: &str) -> ApiResult<()> {
    match body.get("namespace") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s == ns => Ok(()),
        Some(other) => Err(AppError::field("namespace", format!("is {other} but the path names {ns:?}"))),
    }
}

//! `Path` and `Query` extractors whose rejections are problem+json 400s naming the field
//! (`path` or `query`), like every other error of the API (docs/api.md). axum's own
//! rejections are `text/plain`, which the OpenAPI document does not allow (docs/errors-log.md).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::AppError;

/// The URL's path parameters, as `axum::extract::Path`. Errors: 400 naming `path` (e.g. a
/// percent-encoding that is not UTF-8).
pub(crate) struct Path<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(e) => Err(AppError::field("path", e.body_text())),
        }
    }
}

/// The query string, as `axum::extract::Query`. Errors: 400 naming `query` (e.g. a parameter
/// given twice).
pub(crate) struct Query<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(e) => Err(AppError::field("query", e.body_text())),
        }
    }
}

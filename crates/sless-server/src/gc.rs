//! `POST /v1/gc`: runs the collector now and answers what it deleted.

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::Deserialize;
use sless_control::gc::{GcPolicy, GcReport, collect};

use crate::extract::Query;
use crate::{ApiResult, AppError, AppState};

/// `?keep_versions=&grace_sec=&dry_run=`; each defaults to the server's policy.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct GcParams {
    /// Newest versions kept per function (besides the active one).
    #[param(value_type = Option<u32>, minimum = 0)]
    keep_versions: Option<String>,
    /// Archives younger than this many seconds are kept.
    #[param(value_type = Option<u64>, minimum = 0)]
    grace_sec: Option<String>,
    /// `true`: report what would be deleted, delete nothing.
    #[param(value_type = Option<bool>)]
    dry_run: Option<String>,
}

fn number<T: std::str::FromStr>(field: &str, value: Option<&str>, default: T) -> ApiResult<T> {
    match value {
        None | Some("") => Ok(default),
        Some(v) => v.parse().map_err(|_| AppError::field(field, "must be a whole number of 0 or more")),
    }
}

/// The policy of one run: the server's, with the request's overrides.
fn policy(defaults: &GcPolicy, q: &GcParams) -> ApiResult<GcPolicy> {
    Ok(GcPolicy {
        keep_versions: number("keep_versions", q.keep_versions.as_deref(), defaults.keep_versions)?,
        grace_sec: number("grace_sec", q.grace_sec.as_deref(), defaults.grace_sec)?,
        dry_run: match q.dry_run.as_deref() {
            None | Some("") | Some("false") => false,
            Some("true") | Some("1") => true,
            Some(_) => return Err(AppError::field("dry_run", "must be true or false")),
        },
    })
}

#[utoipa::path(
    post,
    path = "/v1/gc",
    operation_id = "runGc",
    summary = "Collect unused versions and archives now",
    tag = "gc",
    params(GcParams),
    responses(
        (status = 200, description = "What was deleted (or, on a dry run, would be).", body = GcReport),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn run(State(state): State<AppState>, Query(q): Query<GcParams>) -> ApiResult<Json<GcReport>> {
    let policy = policy(&state.gc, &q)?;
    let report = collect(state.registry.as_ref(), state.blobs.as_ref(), &policy, Utc::now()).await?;
    tracing::info!(
        versions = report.versions.len(),
        archives = report.archives.len(),
        bytes_freed = report.bytes_freed,
        dry_run = report.dry_run,
        "collected on request"
    );
    Ok(Json(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(keep: Option<&str>, grace: Option<&str>, dry: Option<&str>) -> GcParams {
        GcParams {
            keep_versions: keep.map(String::from),
            grace_sec: grace.map(String::from),
            dry_run: dry.map(String::from),
        }
    }

    #[test]
    fn request_overrides_the_servers_policy() {
        let defaults = GcPolicy { keep_versions: 10, grace_sec: 3600, dry_run: false };
        assert_eq!(policy(&defaults, &params(None, None, None)).expect("defaults"), defaults);
        assert_eq!(
            policy(&defaults, &params(Some("2"), Some("0"), Some("true"))).expect("overrides"),
            GcPolicy { keep_versions: 2, grace_sec: 0, dry_run: true }
        );
        for bad in [params(Some("-1"), None, None), params(None, Some("soon"), None), params(None, None, Some("y"))] {
            assert!(policy(&defaults, &bad).is_err());
        }
    }
}

//! The sless HTTP API (docs/api.md): functions, code upload, versions, the invoke gateway and
//! health, with bearer-token auth and RFC 9457 problem+json errors. It knows nothing about
//! processes or pods: it talks to the [`Registry`], [`BlobStore`] and [`Executor`] traits.
//! [`serve`] puts it behind the HTTP edge ([`Edge`]: read timeouts, connection and header caps).

mod auth;
mod body;
mod edge;
mod error;
mod extract;
mod functions;
mod gc;
mod invocations;
mod invoke;
mod jobs;
mod openapi;
mod resource;
mod tenants;
mod triggers;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::routing::{any, get, put};
use sless_control::{Dispatcher, LogHub, Metrics, Rollouts};
use sless_core::archive::ArchiveLimits;
use sless_core::traits::{BlobStore, Executor, InvocationLog, Registry, Tenants};
use tokio::net::TcpListener;

pub use auth::{AdminToken, TokenKey};
pub use edge::Edge;
pub use error::{ApiResult, AppError, Problem};
pub use openapi::document as openapi_document;

/// Limits the API enforces on requests.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Code archive limits (docs/architecture.md, "Archives and builds").
    pub archive: ArchiveLimits,
    /// Largest invoke request body, in bytes (default 6 MiB, as Lambda).
    pub max_request_bytes: usize,
    /// Largest function response body, in bytes (default 6 MiB, as Lambda).
    pub max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            archive: ArchiveLimits::default(),
            max_request_bytes: 6 * 1024 * 1024,
            max_response_bytes: 6 * 1024 * 1024,
        }
    }
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Functions and versions.
    pub registry: Arc<dyn Registry>,
    /// Code archives.
    pub blobs: Arc<dyn BlobStore>,
    /// Runs functions (stops a deleted or disabled function's instances).
    pub executor: Arc<dyn Executor>,
    /// Starts builds and the rollouts that follow them.
    pub rollouts: Rollouts,
    /// Every call goes through it (it records and counts them).
    pub dispatcher: Arc<Dispatcher>,
    /// Invocation records.
    pub invocations: Arc<dyn InvocationLog>,
    /// Function output, for `…/logs`.
    pub logs: Arc<LogHub>,
    /// The series of `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Namespaces and tokens.
    pub tenants: Arc<dyn Tenants>,
    /// The platform's admin token.
    pub admin_token: AdminToken,
    /// The key token secrets are hashed under.
    pub token_key: TokenKey,
    /// What the API keeps between requests in this process.
    pub guards: Guards,
    /// Request limits.
    pub limits: Limits,
    /// The server's base URL, e.g. `http://127.0.0.1:8080`, used in the `url` field.
    pub base_url: String,
    /// What the collector keeps when `POST /v1/gc` names nothing else.
    pub gc: sless_control::GcPolicy,
}

/// What the API keeps between requests in this process: each token's remaining request rate
/// and the lock that serialises quota checks with the writes they admit.
#[derive(Clone, Default)]
pub struct Guards {
    rate_limits: auth::RateLimits,
    admission: Arc<tokio::sync::Mutex<()>>,
}

/// The API's router.
pub fn router(state: AppState) -> Router {
    let fn_path = "/v1/namespaces/{ns}/functions/{name}";
    let v1 = Router::new()
        .route("/v1/namespaces/{ns}/functions", get(functions::list).post(functions::create))
        .route(fn_path, get(functions::get).put(functions::replace).patch(functions::patch).delete(functions::delete))
        .route(&format!("{fn_path}/code"), put(functions::upload))
        .route(&format!("{fn_path}/versions"), get(functions::versions))
        .route(&format!("{fn_path}/rollback"), axum::routing::post(functions::rollback))
        .route(&format!("{fn_path}/versions/{{version}}"), get(functions::version))
        .route(&format!("{fn_path}/versions/{{version}}/build-log"), get(functions::build_log))
        .route(&format!("{fn_path}/invoke"), any(invoke::invoke))
        .route(&format!("{fn_path}/invoke/"), any(invoke::invoke))
        .route(&format!("{fn_path}/invoke/{{*path}}"), any(invoke::invoke))
        .route(&format!("{fn_path}/invocations"), get(invocations::list))
        .route(&format!("{fn_path}/logs"), get(invocations::logs))
        .route("/v1/namespaces/{ns}/invocations/{id}", get(invocations::get))
        .route("/v1/namespaces/{ns}/triggers", get(triggers::list).post(triggers::create))
        .route(
            "/v1/namespaces/{ns}/triggers/{name}",
            get(triggers::get).put(triggers::replace).patch(triggers::patch).delete(triggers::delete),
        )
        .route("/v1/namespaces/{ns}/triggers/{name}/fire", axum::routing::post(triggers::fire))
        .route("/v1/gc", axum::routing::post(gc::run))
        .route("/v1/tokens", get(tenants::list_tokens).post(tenants::create_token))
        .route("/v1/tokens/{id}", axum::routing::delete(tenants::revoke_token))
        .route("/v1/namespaces", get(tenants::list_namespaces).post(tenants::create_namespace))
        .route(
            "/v1/namespaces/{ns}",
            get(tenants::get_namespace).patch(tenants::patch_namespace).delete(tenants::delete_namespace),
        )
        .route("/v1/namespaces/{ns}/jobs", get(jobs::list).post(jobs::create))
        .route(
            "/v1/namespaces/{ns}/jobs/{name}",
            get(jobs::get).put(jobs::replace).patch(jobs::patch).delete(jobs::delete),
        )
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_access));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(health_ready))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .route("/fn/{ns}/{name}", any(invoke::public))
        .route("/fn/{ns}/{name}/", any(invoke::public))
        .route("/fn/{ns}/{name}/{*path}", any(invoke::public))
        .merge(v1)
        .fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            AppError::Core(sless_core::Error::NotFound { kind: "route", name: format!("{method} {}", uri.path()) })
        })
        .method_not_allowed_fallback(|method: axum::http::Method| async move {
            AppError::MethodNotAllowed(method.to_string())
        })
        .with_state(state)
}

async fn health_ready(axum::extract::State(state): axum::extract::State<AppState>) -> ApiResult<&'static str> {
    state.registry.list_functions("default", &sless_core::traits::Page::first(1)).await?;
    Ok("ready")
}

async fn metrics(axum::extract::State(state): axum::extract::State<AppState>) -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics.encode())
}

async fn openapi_json() -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match openapi::document().to_json() {
        Ok(json) => ([(axum::http::header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => AppError::Core(sless_core::Error::Internal(format!("the OpenAPI document: {e}"))).into_response(),
    }
}

/// Serves the API on `listener` behind the HTTP edge's timeouts and caps ([`Edge`]) until
/// `shutdown` completes; then stops accepting, closes idle connections and lets the calls in
/// flight finish. Errors: none so far (accept errors are logged and retried).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics = state.metrics.clone();
    edge::serve(listener, router(state), metrics, edge, shutdown).await
}

//! The router in-process (`tower::ServiceExt::oneshot` on `sless_server::router`): auth, errors
//! and routing, on a real `SqlRegistry` (a temp SQLite), an `ObjectBlobStore` on a temp folder
//! and `sless_testing`'s fake `Executor` (builds succeed, calls answer 200).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use bytes::Bytes;
use serde_json::{Value, json};
use sless_control::{Dispatcher, GcPolicy, LastKnown, LogHub, Metrics, Recorder, RecorderConfig, Rollouts};
use sless_core::traits::{BlobStore, Executor, InvocationLog, Registry};
use sless_server::{AdminToken, AppState, Guards, Limits, TokenKey};
use sless_store::{ObjectBlobStore, SqlRegistry};
use sless_testing::FakeExecutor;
use tower::ServiceExt as _;

const TOKEN: &str = "router-test-token-0123456789";

/// The router on fresh state, and the temp folder that holds it.
async fn app() -> (Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let sql = Arc::new(SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("sqlite"));
    let registry: Arc<dyn Registry> = sql.clone();
    let invocations: Arc<dyn InvocationLog> = sql.clone();
    let blobs: Arc<dyn BlobStore> = Arc::new(ObjectBlobStore::local(&dir.path().join("archives")).expect("blob store"));
    let executor: Arc<dyn Executor> = Arc::new(FakeExecutor::new());
    let metrics = Arc::new(Metrics::new());
    let rollouts = Rollouts::new(registry.clone(), blobs.clone(), executor.clone(), metrics.clone());
    let (recorder, _task) = Recorder::start(invocations.clone(), metrics.clone(), RecorderConfig::default());
    let dispatcher = Arc::new(Dispatcher::new(
        Arc::new(LastKnown::new(registry.clone())),
        executor.clone(),
        recorder,
        metrics.clone(),
        6 * 1024 * 1024,
    ));
    let state = AppState {
        registry,
        blobs,
        executor,
        rollouts,
        dispatcher,
        invocations,
        logs: Arc::new(LogHub::default()),
        metrics,
        tenants: sql,
        admin_token: AdminToken::new(TOKEN),
        token_key: TokenKey::new(&[7; 32]),
        guards: Guards::default(),
        limits: Limits::default(),
        base_url: "http://sless.test".into(),
        gc: GcPolicy::default(),
    };
    let peer = MockConnectInfo(SocketAddr::from(([127, 0, 0, 1], 9)));
    (sless_server::router(state).layer(peer), dir)
}

fn request(method: Method, uri: &str) -> axum::http::request::Builder {
    Request::builder().method(method).uri(uri)
}

fn authed(method: Method, uri: &str) -> axum::http::request::Builder {
    request(method, uri).header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
}

fn json_body(builder: axum::http::request::Builder, body: &Value) -> Request<Body> {
    builder.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())).expect("request")
}

/// Sends one request; answers the status, the content type and the body.
async fn send(app: &Router, request: Request<Body>) -> (StatusCode, String, Bytes) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let content_type =
        response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
    (status, content_type, body)
}

/// A problem+json answer with `status`; answers its body.
async fn problem(app: &Router, request: Request<Body>, status: StatusCode) -> Value {
    let (got, content_type, body) = send(app, request).await;
    let text = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(got, status, "{text}");
    assert_eq!(content_type, "application/problem+json", "{text}");
    let problem: Value = serde_json::from_slice(&body).expect("problem JSON");
    assert_eq!(problem["status"], json!(status.as_u16()));
    for key in ["type", "title", "detail"] {
        assert!(problem[key].is_string(), "{key} in {problem}");
    }
    problem
}

fn empty(builder: axum::http::request::Builder) -> Request<Body> {
    builder.body(Body::empty()).expect("request")
}

#[tokio::test]
async fn v1_needs_the_token() {
    let (app, _dir) = app().await;
    let uri = "/v1/namespaces/default/functions";
    let response = app.clone().oneshot(empty(request(Method::GET, uri))).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers().get(header::WWW_AUTHENTICATE).map(|v| v.as_bytes()), Some(&b"Bearer"[..]));
    problem(&app, empty(request(Method::GET, uri)), StatusCode::UNAUTHORIZED).await;
    let wrong = request(Method::GET, uri).header(header::AUTHORIZATION, "Bearer not-the-token-at-all");
    problem(&app, empty(wrong), StatusCode::UNAUTHORIZED).await;
    let basic = request(Method::GET, uri).header(header::AUTHORIZATION, format!("Basic {TOKEN}"));
    problem(&app, empty(basic), StatusCode::UNAUTHORIZED).await;
    let (status, _, _) = send(&app, empty(authed(Method::GET, uri))).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn public_routes_need_no_token() {
    let (app, _dir) = app().await;
    for uri in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        let (status, _, body) = send(&app, empty(request(Method::GET, uri))).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {}", String::from_utf8_lossy(&body));
    }
    // `/fn/` is public: without an http trigger it is a 404, not a 401.
    problem(&app, empty(request(Method::GET, "/fn/default/hello")), StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_are_problems() {
    let (app, _dir) = app().await;
    problem(&app, empty(authed(Method::GET, "/v1/nothing-here")), StatusCode::NOT_FOUND).await;
    problem(&app, empty(request(Method::GET, "/nothing")), StatusCode::NOT_FOUND).await;
    problem(&app, empty(authed(Method::DELETE, "/v1/namespaces/default/functions")), StatusCode::METHOD_NOT_ALLOWED)
        .await;
    problem(&app, empty(request(Method::POST, "/healthz")), StatusCode::METHOD_NOT_ALLOWED).await;
}

#[tokio::test]
async fn bad_bodies_are_named() {
    let (app, _dir) = app().await;
    let uri = "/v1/namespaces/default/functions";
    let bad_json = authed(Method::POST, uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"name\": "))
        .expect("request");
    let p = problem(&app, bad_json, StatusCode::BAD_REQUEST).await;
    assert_eq!(p["field"], "body");
    let p = problem(
        &app,
        json_body(authed(Method::POST, uri), &json!({"name": "f", "runtime": "cobol"})),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert_eq!(p["field"], "runtime");
    let text =
        authed(Method::POST, uri).header(header::CONTENT_TYPE, "text/plain").body(Body::from("{}")).expect("request");
    problem(&app, text, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    let p =
        problem(&app, empty(authed(Method::GET, "/v1/namespaces/Default/functions")), StatusCode::BAD_REQUEST).await;
    assert_eq!(p["field"], "namespace");
}

/// schemathesis found it: a query parameter given twice made axum's `Query` answer a
/// `text/plain` 400 (docs/errors-log.md).
#[tokio::test]
async fn regression_duplicate_query_parameter_is_a_problem_not_text() {
    let (app, _dir) = app().await;
    for uri in [
        "/v1/namespaces/default/functions?limit=1&limit=2",
        "/v1/namespaces/default/functions/f/invocations?until=x&until=y",
        "/v1/gc?keep_versions=1&keep_versions=1",
    ] {
        let builder = if uri.starts_with("/v1/gc") { authed(Method::POST, uri) } else { authed(Method::GET, uri) };
        let p = problem(&app, empty(builder), StatusCode::BAD_REQUEST).await;
        assert_eq!(p["field"], "query", "{uri}");
    }
}

#[tokio::test]
async fn create_then_get_a_function() {
    let (app, _dir) = app().await;
    let body = json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler", "env": {"A": "1"}});
    let created = app
        .clone()
        .oneshot(json_body(authed(Method::POST, "/v1/namespaces/default/functions"), &body))
        .await
        .expect("infallible");
    assert_eq!(created.status(), StatusCode::CREATED);
    let etag = created.headers().get(header::ETAG).and_then(|v| v.to_str().ok()).map(String::from);
    assert_eq!(etag.as_deref(), Some("\"1\""));
    let created: Value =
        serde_json::from_slice(&axum::body::to_bytes(created.into_body(), usize::MAX).await.expect("body"))
            .expect("json");
    let (status, content_type, got) =
        send(&app, empty(authed(Method::GET, "/v1/namespaces/default/functions/hello"))).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/json"));
    let mut got: Value = serde_json::from_slice(&got).expect("json");
    // The create answer carries the handler's own times; the store keeps milliseconds.
    let mut created = created;
    for key in ["created_at", "updated_at"] {
        assert!(got[key].is_string() && created[key].is_string(), "{key}");
        got[key] = Value::Null;
        created[key] = Value::Null;
    }
    assert_eq!(got, created);
    assert_eq!(got["url"], "http://sless.test/v1/namespaces/default/functions/hello/invoke");
    assert_eq!((got["memory_mb"].clone(), got["env"].clone()), (json!(128), json!({"A": "1"})));
    assert_eq!(got["status"]["phase"], "Pending");
    let (status, _, list) = send(&app, empty(authed(Method::GET, "/v1/namespaces/default/functions"))).await;
    assert_eq!(status, StatusCode::OK);
    let mut list: Value = serde_json::from_slice(&list).expect("json");
    for key in ["created_at", "updated_at"] {
        list["items"][0][key] = Value::Null;
    }
    assert_eq!((list["items"][0].clone(), list["next_cursor"].clone()), (created, Value::Null));
    problem(&app, json_body(authed(Method::POST, "/v1/namespaces/default/functions"), &body), StatusCode::CONFLICT)
        .await;
}

#[tokio::test]
async fn openapi_json_is_an_openapi_3_1_document() {
    let (app, _dir) = app().await;
    let (status, content_type, body) = send(&app, empty(request(Method::GET, "/openapi.json"))).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/json"));
    let doc: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert!(doc["paths"]["/v1/namespaces/{ns}/functions"]["post"].is_object());
    assert!(doc["components"]["schemas"]["Problem"]["properties"]["field"].is_object());
}

/// Every operation of the document reaches a handler: never the router's "no such route" 404
/// nor a 405.
#[tokio::test]
async fn every_documented_operation_is_routed() {
    let (app, _dir) = app().await;
    let doc = serde_json::to_value(sless_server::openapi_document()).expect("document");
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let uri = path
            .replace("{ns}", "default")
            .replace("{name}", "nothing")
            .replace("{version}", "1")
            .replace("{id}", "0190a0a0-0000-7000-8000-000000000000")
            .replace("{path}", "a/b");
        for (method, _) in item.as_object().expect("item") {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let (status, _, body) = send(&app, empty(authed(method.clone(), &uri))).await;
            let text = String::from_utf8_lossy(&body);
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}: {text}");
            assert!(!text.contains("route \\\""), "{method} {uri} is not routed: {text}");
            seen += 1;
        }
    }
    assert!(seen > 30, "{seen} operations");
}

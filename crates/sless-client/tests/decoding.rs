//! The client against a tiny in-process server on 127.0.0.1 port 0: how error answers
//! become `Error::Api`, and that the API's shapes decode.

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, patch, post, put};
use serde_json::{Value, json};
use sless_client::{Client, Error, GcOptions, InvokeRequest, PageRequest};

async fn serve(app: Router) -> Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Client::new(&format!("http://{addr}/"), "tok", "default")
}

fn problem(status: StatusCode, body: Value) -> axum::response::Response {
    (status, [(header::CONTENT_TYPE, "application/problem+json")], body.to_string()).into_response()
}

fn function_json(name: &str) -> Value {
    json!({
        "namespace": "default", "name": name, "runtime": "python3.11", "entrypoint": "main.handler",
        "memory_mb": 128, "timeout_sec": 30, "env": {"A": "b"}, "enabled": true, "concurrency": 1,
        "max_instances": null, "idle_timeout_sec": 600, "payload_format": "1.0", "resource_version": 3, "active_version": 2,
        "status": {"phase": "Ready", "message": "version 2 is serving", "conditions": [{
            "type": "Ready", "status": "True", "reason": "Built", "message": "",
            "lastTransitionTime": "2026-01-02T03:04:05.678Z"}]},
        "created_at": "2026-01-02T03:04:05.678Z", "updated_at": "2026-01-02T03:04:05.678901Z",
        "url": format!("http://h/v1/namespaces/default/functions/{name}/invoke"),
    })
}

#[tokio::test]
async fn problems_keep_type_title_status_detail_and_field() {
    let app = Router::new()
        .route(
            "/v1/namespaces/default/functions",
            post(|| async {
                problem(
                    StatusCode::BAD_REQUEST,
                    json!({"type": "https://sless.dev/problems/invalid-field", "title": "Invalid field",
                           "status": 400, "detail": "memory_mb: must be from 64 to 4096", "field": "memory_mb"}),
                )
            }),
        )
        .route(
            "/v1/namespaces/default/functions/gone",
            get(|| async {
                problem(
                    StatusCode::NOT_FOUND,
                    json!({"type": "https://sless.dev/problems/not-found", "title": "Not found", "status": 404,
                           "detail": "function \"gone\" not found"}),
                )
            }),
        );
    let client = serve(app).await;
    let err = client.create_function(&json!({"name": "f"})).await.expect_err("400");
    let Error::Api(p) = &err else { panic!("not an API error: {err:?}") };
    assert_eq!(p.kind, "https://sless.dev/problems/invalid-field");
    assert_eq!(p.slug(), "invalid-field");
    assert_eq!(p.title, "Invalid field");
    assert_eq!(p.status, 400);
    assert_eq!(p.detail, "memory_mb: must be from 64 to 4096");
    assert_eq!(p.field.as_deref(), Some("memory_mb"));
    assert_eq!(err.to_string(), "400 Bad Request: memory_mb: must be from 64 to 4096");

    let err = client.get_function("gone").await.expect_err("404");
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(err.problem().and_then(|p| p.field.clone()), None);
}

#[tokio::test]
async fn non_json_error_bodies_become_about_blank_problems() {
    let app = Router::new()
        .route(
            "/v1/namespaces/default/functions/f",
            get(|| async { (StatusCode::BAD_GATEWAY, "upstream <b>down</b>\n") }),
        )
        .route("/v1/namespaces/default/functions/g", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route(
            "/v1/namespaces/default/functions/h",
            get(|| async {
                (StatusCode::INTERNAL_SERVER_ERROR, [(header::CONTENT_TYPE, "application/json")], "[1, 2]")
            }),
        );
    let client = serve(app).await;
    let err = client.get_function("f").await.expect_err("502");
    let p = err.problem().expect("problem");
    assert_eq!((p.kind.as_str(), p.title.as_str(), p.status), ("about:blank", "Bad Gateway", 502));
    assert_eq!(p.detail, "upstream <b>down</b>");
    assert_eq!(err.to_string(), "502 Bad Gateway: upstream <b>down</b>");

    let p = client.get_function("g").await.expect_err("503").problem().cloned().expect("problem");
    assert_eq!((p.status, p.detail.as_str()), (503, ""));
    // JSON that is not a problem document is kept as text.
    let p = client.get_function("h").await.expect_err("500").problem().cloned().expect("problem");
    assert_eq!((p.kind.as_str(), p.status, p.detail.as_str()), ("about:blank", 500, "[1, 2]"));
}

#[tokio::test]
async fn transport_and_decode_errors_keep_their_cause() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let client = Client::new(&format!("http://{addr}"), "tok", "default");
    let err = client.get_function("f").await.expect_err("refused");
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());

    let app = Router::new().route("/v1/namespaces/default/functions/f", get(|| async { "not json" }));
    let client = serve(app).await;
    let err = client.get_function("f").await.expect_err("decode");
    assert!(matches!(err, Error::Decode { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn records_decode_with_their_numbers_and_if_match_is_sent() {
    let app = Router::new()
        .route(
            "/v1/namespaces/default/functions",
            get(|| async { axum::Json(json!({"items": [function_json("a"), function_json("b")], "next_cursor": null})) }),
        )
        .route(
            "/v1/namespaces/default/functions/a",
            patch(|headers: HeaderMap, body: String| async move {
                assert_eq!(headers[header::CONTENT_TYPE], "application/merge-patch+json");
                assert_eq!(headers[header::IF_MATCH], "\"3\"");
                assert_eq!(headers[header::AUTHORIZATION], "Bearer tok");
                assert_eq!(body, r#"{"memory_mb":256}"#);
                axum::Json(function_json("a"))
            }),
        )
        .route(
            "/v1/namespaces/default/functions/a/code",
            put(|| async {
                (
                    StatusCode::ACCEPTED,
                    axum::Json(json!({"version": 2, "sha256": "ab", "size_bytes": 10, "created": true, "phase": "Building"})),
                )
            }),
        )
        .route(
            "/v1/gc",
            post(|q: axum::extract::RawQuery| async move {
                assert_eq!(q.0.as_deref(), Some("keep_versions=2&dry_run=true"));
                axum::Json(json!({"dry_run": true, "versions": [{"namespace": "default", "function": "a", "version": 1, "sha256": "ab"}],
                                  "archives": [{"key": "archives/ab.zip", "size_bytes": 12345678901_u64}], "bytes_freed": 12345678901_u64}))
            }),
        );
    let client = serve(app).await;
    let page = client.list_functions(&PageRequest::first(10)).await.expect("list");
    assert_eq!(page.items.len(), 2);
    let a = &page.items[0];
    assert_eq!(
        (a.record.spec.memory_mb, a.record.resource_version.clone(), a.record.active_version),
        (128, sless_core::resource_version::ResourceVersion::from_count(3), Some(2))
    );
    assert_eq!(a.record.spec.idle_timeout_sec, Some(600));
    assert_eq!(a.url, "http://h/v1/namespaces/default/functions/a/invoke");
    // It serialises back to the JSON it came from.
    assert_eq!(serde_json::to_value(a).expect("json"), function_json("a"));

    let etag = sless_client::etag(&a.record.resource_version);
    let patched = client.patch_function("a", &json!({"memory_mb": 256}), Some(&etag)).await.expect("patch");
    assert_eq!(patched.record.name, "a");
    let up = client.upload_code("a", b"PK".to_vec()).await.expect("upload");
    assert_eq!((up.version, up.created), (2, true));
    let report = client.gc(&GcOptions { keep_versions: Some(2), grace_sec: None, dry_run: true }).await.expect("gc");
    assert_eq!(report.bytes_freed, 12_345_678_901);
    assert_eq!(report.versions[0].version, 1);
}

#[tokio::test]
async fn invoke_is_raw() {
    let app = Router::new().route(
        "/v1/namespaces/default/functions/f/invoke/{*rest}",
        axum::routing::any(|headers: HeaderMap, uri: axum::http::Uri, body: String| async move {
            let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
            (StatusCode::IM_A_TEAPOT, [("x-seen", format!("{ct}|{}", uri.query().unwrap_or("")))], body)
        }),
    );
    let client = serve(app).await;
    let r = client
        .invoke("f", &InvokeRequest::new(sless_client::Method::PUT).path("a/b").query("x", "1 2").body("{}"))
        .await
        .expect("call");
    assert_eq!(r.status.as_u16(), 418);
    assert_eq!(r.header("x-seen"), Some("application/json|x=1+2"));
    assert_eq!(&r.body[..], b"{}");
    let r = client
        .invoke("f", &InvokeRequest::get().path("/p").header("content-type", "text/plain").body("hi"))
        .await
        .expect("call");
    assert_eq!(r.header("x-seen"), Some("text/plain|"));
    assert!(matches!(r.error_for_status(), Err(Error::Api(_))));
}

#[tokio::test]
async fn wait_ready_times_out() {
    let app = Router::new().route(
        "/v1/namespaces/default/functions/f/versions/1",
        get(|| async {
            axum::Json(json!({"namespace": "default", "function": "f", "version": 1, "sha256": "ab", "size_bytes": 1,
                              "runtime": "nodejs20", "phase": "Building", "message": "", "created_at": "2026-01-02T03:04:05Z",
                              "active": false}))
        }),
    );
    let client = serve(app).await;
    let err =
        client.wait_ready("f", 1, Duration::from_millis(100), Duration::from_millis(20)).await.expect_err("timeout");
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
}

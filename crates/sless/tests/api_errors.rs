//! Bad input gets a clear error and loses nothing (docs/api.md; docs/architecture.md, "Archives and builds"): auth, names, specs,
//! PUT/PATCH with `If-Match`, code archives, invoke, pagination and delete, all against the
//! real `sless server` binary.

mod common;

use std::io::Write;

use common::{Server, TOKEN, files_under, zip, zip_bytes};
use reqwest::RequestBuilder;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// A request sent as is (no token added).
async fn raw(req: RequestBuilder) -> (u16, HeaderMap, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, body)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Asserts an RFC 9457 problem with `status`; returns the body.
fn problem(status: u16, headers: &HeaderMap, body: &Value, expected: u16) -> Value {
    assert_eq!(status, expected, "status: {body}");
    let ct = header(headers, "content-type").unwrap_or_default();
    assert!(ct.starts_with("application/problem+json"), "content-type {ct:?} for {body}");
    assert_eq!(body["status"], json!(expected), "{body}");
    let type_ = body["type"].as_str().unwrap_or_default();
    assert!(type_.starts_with("https://"), "type {type_:?} in {body}");
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()), "title in {body}");
    assert!(body["detail"].as_str().is_some_and(|t| !t.is_empty()), "detail in {body}");
    body.clone()
}

/// Asserts a 400 naming `field`; returns the body.
fn bad_field(status: u16, headers: &HeaderMap, body: &Value, field: &str) -> Value {
    let b = problem(status, headers, body, 400);
    assert_eq!(b["field"], json!(field), "{b}");
    b
}

/// The names of the functions in `default`.
async fn names(server: &Server) -> Vec<String> {
    let (s, _, b) = server.send(server.http.get(server.api(""))).await;
    assert_eq!(s, 200, "{b}");
    b["items"].as_array().expect("items").iter().map(|f| f["name"].as_str().expect("name").to_string()).collect()
}

async fn post_json(server: &Server, body: Value) -> (u16, HeaderMap, Value) {
    server.send(server.http.post(server.api("")).json(&body)).await
}

fn spec(name: &str) -> Value {
    json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler"})
}

/// The spec fields of a function object (what PUT/PATCH may change).
fn spec_of(f: &Value) -> Value {
    json!({
        "runtime": f["runtime"],
        "entrypoint": f["entrypoint"],
        "memory_mb": f["memory_mb"],
        "timeout_sec": f["timeout_sec"],
        "env": f["env"],
        "enabled": f["enabled"],
    })
}

#[tokio::test]
async fn auth_is_required_on_v1_but_not_on_healthz() {
    let server = Server::start();

    let (s, h, b) = raw(server.http.get(server.api(""))).await;
    problem(s, &h, &b, 401);
    assert_eq!(header(&h, "www-authenticate"), Some("Bearer"), "{h:?}");

    let (s, h, b) = raw(server.http.get(server.api("")).bearer_auth("not-the-token")).await;
    problem(s, &h, &b, 401);
    assert_eq!(header(&h, "www-authenticate"), Some("Bearer"), "{h:?}");

    // Another scheme with the right secret is still not a bearer token.
    let (s, h, b) = raw(server.http.get(server.api("")).header("authorization", format!("Basic {TOKEN}"))).await;
    let b = problem(s, &h, &b, 401);
    // Regression: it was answered "invalid bearer token", as if the token were wrong.
    assert!(b["detail"].as_str().unwrap_or_default().contains("unsupported authorization scheme"), "{b}");

    // A create without a token creates nothing.
    let (s, h, b) = raw(server.http.post(server.api("")).json(&spec("sneaky"))).await;
    problem(s, &h, &b, 401);
    assert!(names(&server).await.is_empty());

    // Invoke needs the token too.
    let (s, h, b) = raw(server.http.get(server.api("/sneaky/invoke"))).await;
    problem(s, &h, &b, 401);

    let (s, _, b) = raw(server.http.get(format!("{}/healthz", server.url))).await;
    assert_eq!(s, 200, "{b}");

    let (s, _, b) = raw(server.http.get(server.api("")).bearer_auth(TOKEN)).await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test]
async fn invalid_creates_are_rejected_naming_the_field_and_create_nothing() {
    let server = Server::start();
    let long = "a".repeat(64);
    let cases: Vec<(Value, &str)> = vec![
        (spec("Bad_Name"), "name"),
        (spec("-x"), "name"),
        (spec("x-"), "name"),
        (spec(&long), "name"),
        (json!({"runtime": "python3.11", "entrypoint": "main.handler"}), "name"),
        (json!({"name": 7, "runtime": "python3.11", "entrypoint": "main.handler"}), "name"),
        (json!({"name": "f", "entrypoint": "main.handler"}), "runtime"),
        (json!({"name": "f", "runtime": "cobol85", "entrypoint": "main.handler"}), "runtime"),
        (json!({"name": "f", "runtime": "python3.11"}), "entrypoint"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main"}), "entrypoint"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "/abs/main.handler"}), "entrypoint"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "../up/main.handler"}), "entrypoint"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": 32}), "memory_mb"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": 5000}), "memory_mb"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": "128"}), "memory_mb"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "timeout_sec": 0}), "timeout_sec"),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "timeout_sec": 901}),
            "timeout_sec",
        ),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "timeout_sec": -1}), "timeout_sec"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "memroy_mb": 256}), "memroy_mb"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "enabled": "yes"}), "enabled"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "env": "A=1"}), "env"),
        (json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "env": {"1A": "x"}}), "env.1A"),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "env": {"SLESS_X": "x"}}),
            "env.SLESS_X",
        ),
        (json!([1, 2, 3]), "body"),
    ];
    for (body, field) in &cases {
        let (s, h, b) = post_json(&server, body.clone()).await;
        bad_field(s, &h, &b, field);
        assert!(names(&server).await.is_empty(), "{body} created a function");
    }

    // The runtime error lists the known runtimes.
    let (s, h, b) = post_json(&server, json!({"name": "f", "runtime": "cobol85", "entrypoint": "main.handler"})).await;
    let b = bad_field(s, &h, &b, "runtime");
    let detail = b["detail"].as_str().expect("detail");
    assert!(detail.contains("python3.11") && detail.contains("nodejs20"), "{detail}");
    assert!(detail.contains("cobol85"), "{detail}");

    // The typo is named in the detail too.
    let (s, h, b) = post_json(
        &server,
        json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "memroy_mb": 256}),
    )
    .await;
    let b = bad_field(s, &h, &b, "memroy_mb");
    assert!(b["detail"].as_str().expect("detail").contains("memroy_mb"), "{b}");

    // Env values are secrets: an error never echoes them.
    let (s, h, b) = post_json(
        &server,
        json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler", "env": {"K": {"hunter2": 1}}}),
    )
    .await;
    let b = bad_field(s, &h, &b, "env.K");
    assert!(!b.to_string().contains("hunter2"), "{b}");

    // Not JSON at all.
    let req = server.http.post(server.api("")).header("content-type", "application/json").body("{not json");
    let (s, h, b) = server.send(req).await;
    bad_field(s, &h, &b, "body");
    let req = server.http.post(server.api("")).header("content-type", "application/json").body("");
    let (s, h, b) = server.send(req).await;
    bad_field(s, &h, &b, "body");

    // A JSON body over 1 MiB is too large.
    let mut huge = spec("f");
    huge["env"] = json!({"BIG": "x".repeat(1024 * 1024 + 10)});
    let (s, h, b) = post_json(&server, huge).await;
    problem(s, &h, &b, 413);

    // Wrong or missing content type.
    let req = server.http.post(server.api("")).header("content-type", "text/plain").body(spec("f").to_string());
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 415);
    let req = server.http.post(server.api("")).body(spec("f").to_string());
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 415);

    // A bad namespace in the path.
    let url = format!("{}/v1/namespaces/Bad_NS/functions", server.url);
    let (s, h, b) = server.send(server.http.post(&url).json(&spec("f"))).await;
    bad_field(s, &h, &b, "namespace");
    let (s, h, b) = server.send(server.http.get(&url)).await;
    bad_field(s, &h, &b, "namespace");
    let (s, h, b) = server.send(server.http.get(format!("{url}/f"))).await;
    bad_field(s, &h, &b, "namespace");

    // A bad name in the path.
    let (s, h, b) = server.send(server.http.get(server.api("/Bad_Name"))).await;
    bad_field(s, &h, &b, "name");

    assert!(names(&server).await.is_empty());

    // A good create works (media type parameters are fine); the same again is a conflict and
    // changes nothing.
    let req = server
        .http
        .post(server.api(""))
        .header("content-type", "application/json; charset=utf-8")
        .body(spec("f").to_string());
    let (s, _, b) = server.send(req).await;
    assert_eq!(s, 201, "{b}");
    let (s, h, b) = post_json(
        &server,
        json!({"name": "f", "runtime": "nodejs20", "entrypoint": "index.handler", "memory_mb": 512}),
    )
    .await;
    problem(s, &h, &b, 409);
    assert_eq!(names(&server).await, vec!["f".to_string()]);
    let (s, f) = server.get("f").await;
    assert_eq!(s, 200, "{f}");
    assert_eq!((f["runtime"].as_str(), f["memory_mb"].as_u64()), (Some("python3.11"), Some(128)), "{f}");
    assert_eq!(f["resource_version"], json!(1), "{f}");
}

#[tokio::test]
async fn put_and_patch_validate_and_change_only_what_they_should() {
    let server = Server::start();
    let (s, b) = server
        .create(json!({
            "name": "f", "runtime": "python3.11", "entrypoint": "main.handler",
            "memory_mb": 256, "timeout_sec": 10, "env": {"KEEP": "yes"}
        }))
        .await;
    assert_eq!(s, 201, "{b}");

    let (s, h, original) = server.send(server.http.get(server.api("/f"))).await;
    assert_eq!(s, 200, "{original}");
    assert_eq!(header(&h, "etag"), Some("\"1\""), "{h:?}");
    assert_eq!(original["resource_version"], json!(1));

    // PUT without runtime: 400, nothing changes.
    let req = server.http.put(server.api("/f")).json(&json!({"entrypoint": "main.handler", "memory_mb": 512}));
    let (s, h, b) = server.send(req).await;
    bad_field(s, &h, &b, "runtime");
    let (_, now) = server.get("f").await;
    assert_eq!(spec_of(&now), spec_of(&original), "a failed PUT changed the function");
    assert_eq!(now["resource_version"], json!(1));

    // PUT with an invalid value, a typo, a rename, or a wrong content type: nothing changes.
    for (body, field) in [
        (json!({"runtime": "python3.11", "entrypoint": "main.handler", "timeout_sec": 0}), "timeout_sec"),
        (json!({"runtime": "python3.11", "entrypoint": "main.handler", "memroy_mb": 512}), "memroy_mb"),
        (json!({"name": "g", "runtime": "python3.11", "entrypoint": "main.handler"}), "name"),
    ] {
        let (s, h, b) = server.send(server.http.put(server.api("/f")).json(&body)).await;
        bad_field(s, &h, &b, field);
    }
    let req = server
        .http
        .put(server.api("/f"))
        .header("content-type", "text/plain")
        .body(json!({"runtime": "nodejs20", "entrypoint": "index.handler"}).to_string());
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 415);
    let (_, now) = server.get("f").await;
    assert_eq!(spec_of(&now), spec_of(&original));
    assert_eq!(now["resource_version"], json!(1));

    // PUT with every field replaces and bumps resource_version; what a GET returned may be
    // sent back (read-only fields are ignored).
    let mut full = original.clone();
    full["memory_mb"] = json!(512);
    full["timeout_sec"] = json!(60);
    full["env"] = json!({"KEEP": "yes", "B": "2"});
    let (s, h, put) = server.send(server.http.put(server.api("/f")).json(&full)).await;
    assert_eq!(s, 200, "{put}");
    assert_eq!(put["resource_version"], json!(2), "{put}");
    assert_eq!(header(&h, "etag"), Some("\"2\""), "{h:?}");
    let (_, now) = server.get("f").await;
    assert_eq!(
        spec_of(&now),
        json!({"runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": 512, "timeout_sec": 60,
               "env": {"KEEP": "yes", "B": "2"}, "enabled": true})
    );

    // PATCH env only: the rest stays, existing env keys are kept.
    let before = now.clone();
    let req = server
        .http
        .patch(server.api("/f"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"env": {"A": "1"}}).to_string());
    let (s, _, patched) = server.send(req).await;
    assert_eq!(s, 200, "{patched}");
    assert_eq!(patched["resource_version"], json!(3), "{patched}");
    let (_, now) = server.get("f").await;
    for field in ["runtime", "entrypoint", "memory_mb", "timeout_sec", "enabled"] {
        assert_eq!(now[field], before[field], "PATCH env changed {field}");
    }
    assert_eq!(now["env"], json!({"KEEP": "yes", "B": "2", "A": "1"}));

    // Invalid PATCHes: 400 naming the field, nothing changes.
    let merge = |body: Value| {
        server
            .http
            .patch(server.api("/f"))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string())
    };
    let before = now.clone();
    for (body, field) in [
        (json!({"memory_mb": 1}), "memory_mb"),
        (json!({"memory_mb": "lots"}), "memory_mb"),
        (json!({"timeout_sec": 100000}), "timeout_sec"),
        (json!({"runtime": null}), "runtime"),
        (json!({"runtime": "ruby"}), "runtime"),
        (json!({"entrypoint": "nodot"}), "entrypoint"),
        (json!({"env": "A=1"}), "env"),
        (json!({"env": {"SLESS_TOKEN": "x"}}), "env.SLESS_TOKEN"),
        (json!({"enabled": 1}), "enabled"),
        (json!({"name": "other"}), "name"),
        (json!({"memroy_mb": 512}), "memroy_mb"),
        (json!([{"op": "replace", "path": "/memory_mb", "value": 512}]), "body"),
        (json!("memory_mb"), "body"),
    ] {
        let (s, h, b) = server.send(merge(body.clone())).await;
        bad_field(s, &h, &b, field);
        let (_, now) = server.get("f").await;
        assert_eq!(spec_of(&now), spec_of(&before), "{body} changed the function");
        assert_eq!(now["resource_version"], before["resource_version"], "{body} bumped resource_version");
    }
    let req = server.http.patch(server.api("/f")).header("content-type", "application/merge-patch+json").body("{");
    let (s, h, b) = server.send(req).await;
    bad_field(s, &h, &b, "body");
    let req = server.http.patch(server.api("/f")).header("content-type", "text/plain").body("{\"memory_mb\":512}");
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 415);
    let (_, now) = server.get("f").await;
    assert_eq!(now["resource_version"], json!(3));
    assert_eq!(now["memory_mb"], json!(512));

    // A stale If-Match: 412 for PUT and PATCH, nothing changes.
    let req = server.http.put(server.api("/f")).header("if-match", "\"1\"").json(&spec("f"));
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 412);
    let (s, h, b) = server.send(merge(json!({"memory_mb": 1024})).header("if-match", "\"1\"")).await;
    problem(s, &h, &b, 412);
    let (s, h, b) = server.send(merge(json!({"memory_mb": 1024})).header("if-match", "\"not-a-version\"")).await;
    problem(s, &h, &b, 412);
    let (_, now) = server.get("f").await;
    assert_eq!(now["resource_version"], json!(3));
    assert_eq!(now["memory_mb"], json!(512));

    // If-Match with the current ETag works, for PATCH then PUT.
    let (_, h, _) = server.send(server.http.get(server.api("/f"))).await;
    let etag = header(&h, "etag").expect("etag").to_string();
    let (s, h, b) = server.send(merge(json!({"memory_mb": 1024})).header("if-match", &etag)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["memory_mb"], json!(1024));
    assert_eq!(b["resource_version"], json!(4));
    let etag = header(&h, "etag").expect("etag").to_string();
    assert_eq!(etag, "\"4\"");
    let req = server.http.put(server.api("/f")).header("if-match", &etag).json(&spec("f"));
    let (s, _, b) = server.send(req).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["resource_version"], json!(5));
    // A full replace without optional fields resets them to their defaults.
    assert_eq!((b["memory_mb"].as_u64(), b["timeout_sec"].as_u64()), (Some(128), Some(30)), "{b}");
    assert_eq!(b["env"], json!({}));

    // `If-Match: *` matches any version.
    let (s, _, b) = server.send(merge(json!({"timeout_sec": 5})).header("if-match", "*")).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["resource_version"], json!(6));

    // PUT/PATCH on a missing function: 404.
    let (s, h, b) = server.send(server.http.put(server.api("/missing")).json(&spec("missing"))).await;
    problem(s, &h, &b, 404);
    let req = server
        .http
        .patch(server.api("/missing"))
        .header("content-type", "application/merge-patch+json")
        .body("{\"memory_mb\":512}");
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 404);
    assert_eq!(names(&server).await, vec!["f".to_string()]);
}

/// A zip with one symlink entry.
fn zip_with_symlink(link: &str, target: &str) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    w.start_file("main.py", options).expect("start");
    w.write_all(b"def handler(e, c):\n    return 'hi'\n").expect("write");
    w.add_symlink(link, target, options).expect("symlink");
    w.finish().expect("finish").into_inner()
}

async fn upload_as(server: &Server, name: &str, content_type: &str, body: Vec<u8>) -> (u16, HeaderMap, Value) {
    let req = server.http.put(server.api(&format!("/{name}/code"))).header("content-type", content_type).body(body);
    server.send(req).await
}

/// Asserts a 422 archive error; returns the body.
fn bad_archive(status: u16, headers: &HeaderMap, body: &Value, entry: Option<&str>) -> Value {
    let b = problem(status, headers, body, 422);
    if let Some(entry) = entry {
        assert_eq!(b["entry"], json!(entry), "{b}");
    }
    b
}

#[tokio::test]
async fn bad_archives_are_rejected_and_nothing_is_stored() {
    let server = Server::start_with(&["--max-archive-mb", "1"]);
    let (s, b) = server.create(spec("f")).await;
    assert_eq!(s, 201, "{b}");
    let good_main: &[u8] = b"def handler(event, context):\n    return {'statusCode': 200, 'body': 'hi'}\n";

    // Not a zip.
    let (s, h, b) = upload_as(&server, "f", "application/zip", b"hello, this is not a zip".to_vec()).await;
    bad_archive(s, &h, &b, None);
    // Empty.
    let (s, h, b) = upload_as(&server, "f", "application/zip", Vec::new()).await;
    bad_archive(s, &h, &b, None);
    // A truncated zip.
    let mut truncated = zip_bytes(&[("main.py", good_main)]);
    truncated.truncate(truncated.len() / 2);
    let (s, h, b) = upload_as(&server, "f", "application/zip", truncated).await;
    bad_archive(s, &h, &b, None);

    // Over 1 MiB (random bytes do not compress).
    let mut big = Vec::with_capacity(1024 * 1024 + 4096);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while big.len() < 1024 * 1024 + 4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big.extend_from_slice(&x.to_le_bytes());
    }
    let big_zip = zip_bytes(&[("main.py", good_main), ("noise.bin", &big)]);
    assert!(big_zip.len() > 1024 * 1024);
    let (s, h, b) = upload_as(&server, "f", "application/zip", big_zip).await;
    problem(s, &h, &b, 413);

    // Wrong content type, even for a good archive.
    let (s, h, b) = upload_as(&server, "f", "text/plain", zip_bytes(&[("main.py", good_main)])).await;
    problem(s, &h, &b, 415);
    let req = server.http.put(server.api("/f/code")).body(zip_bytes(&[("main.py", good_main)]));
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 415);

    // The entrypoint's file is missing.
    let (s, h, b) = upload_as(&server, "f", "application/zip", zip(&[("other.py", "x = 1\n")])).await;
    let b = bad_archive(s, &h, &b, Some("main.py"));
    assert!(b["detail"].as_str().expect("detail").contains("main.py"), "{b}");
    // In a sub-folder is not at the root.
    let (s, h, b) = upload_as(&server, "f", "application/zip", zip(&[("src/main.py", "x = 1\n")])).await;
    bad_archive(s, &h, &b, Some("main.py"));

    // Paths that leave the root.
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", good_main), ("../evil.py", b"x")])).await;
    bad_archive(s, &h, &b, Some("../evil.py"));
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", good_main), ("lib/../../evil.py", b"x")]))
            .await;
    bad_archive(s, &h, &b, Some("lib/../../evil.py"));
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", good_main), ("/etc/x", b"x")])).await;
    bad_archive(s, &h, &b, Some("/etc/x"));
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", good_main), ("..\\evil.py", b"x")])).await;
    bad_archive(s, &h, &b, Some("..\\evil.py"));
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", good_main), ("C:\\evil.py", b"x")])).await;
    bad_archive(s, &h, &b, Some("C:\\evil.py"));

    // Duplicates after normalisation (the zip crate refuses literal duplicates).
    let (s, h, b) = upload_as(
        &server,
        "f",
        "application/zip",
        zip_bytes(&[("main.py", good_main), ("a/x.py", b"1"), ("a\\x.py", b"2")]),
    )
    .await;
    let b = bad_archive(s, &h, &b, Some("a\\x.py"));
    assert!(b["detail"].as_str().expect("detail").contains("duplicate"), "{b}");

    // A zip bomb: 5 MiB of zeros compresses far beyond 200:1.
    let zeros = vec![0u8; 5 * 1024 * 1024];
    let bomb = zip_bytes(&[("main.py", good_main), ("zeros.bin", &zeros)]);
    assert!(bomb.len() < 1024 * 1024, "the bomb is small: {}", bomb.len());
    let (s, h, b) = upload_as(&server, "f", "application/zip", bomb).await;
    let b = bad_archive(s, &h, &b, Some("zeros.bin"));
    assert!(b["detail"].as_str().expect("detail").contains("ratio"), "{b}");

    // Links that leave the root.
    let (s, h, b) = upload_as(&server, "f", "application/zip", zip_with_symlink("link", "../../etc/passwd")).await;
    bad_archive(s, &h, &b, Some("link"));
    let (s, h, b) = upload_as(&server, "f", "application/zip", zip_with_symlink("link", "/etc/passwd")).await;
    bad_archive(s, &h, &b, Some("link"));
    let (s, h, b) = upload_as(&server, "f", "application/zip", zip_with_symlink("a/b/link", "../../../x")).await;
    bad_archive(s, &h, &b, Some("a/b/link"));

    // Nothing of it was kept.
    let (s, _, v) = server.send(server.http.get(server.api("/f/versions"))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["items"], json!([]), "{v}");
    assert_eq!(files_under(&server.data.join("archives")), Vec::<String>::new());
    assert_eq!(files_under(&server.data.join("builds")), Vec::<String>::new());
    let (s, f) = server.get("f").await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["status"]["phase"], "Pending", "{f}");
    assert_eq!(f["active_version"], Value::Null, "{f}");
    assert_eq!(f["resource_version"], json!(1), "{f}");
    let (s, h, b) = server.invoke("f", "GET", "/", None).await;
    problem(s, &h, &b, 503);
}

#[tokio::test]
async fn a_bad_archive_leaves_the_serving_version_alone() {
    let server = Server::start_with(&["--max-archive-mb", "1"]);
    let main = "def handler(event, context):\n    return {'statusCode': 200, 'body': 'v1'}\n";
    server.deploy("f", "python3.11", "main.handler", &[("main.py", main)], json!({})).await;
    let (s, _, b) = server.invoke("f", "GET", "/", None).await;
    assert_eq!((s, b.clone()), (200, json!("v1")), "{b}");
    let (_, before) = server.get("f").await;
    // The blob folder holds the archive and the build log.
    let blobs = files_under(&server.data.join("archives"));
    assert_eq!(blobs.iter().filter(|p| p.starts_with("archives/")).count(), 1, "{blobs:?}");

    for bad in [
        zip(&[("other.py", "x = 1\n")]),
        zip_bytes(&[("main.py", main.as_bytes()), ("../evil.py", b"x")]),
        b"not a zip".to_vec(),
    ] {
        let (s, h, b) = upload_as(&server, "f", "application/zip", bad).await;
        problem(s, &h, &b, 422);
    }
    let (s, _, v) = server.send(server.http.get(server.api("/f/versions"))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(files_under(&server.data.join("archives")), blobs, "nothing stored");
    let (_, after) = server.get("f").await;
    assert_eq!(after["active_version"], before["active_version"], "{after}");
    assert_eq!(after["status"]["phase"], before["status"]["phase"], "{after}");
    assert_eq!(after["resource_version"], before["resource_version"], "{after}");
    let (s, _, b) = server.invoke("f", "GET", "/", None).await;
    assert_eq!((s, b.clone()), (200, json!("v1")), "{b}");
}

#[tokio::test]
async fn upload_and_invoke_of_missing_or_codeless_functions() {
    let server = Server::start();
    let good = zip(&[("main.py", "def handler(e, c):\n    return 1\n")]);

    let (s, h, b) = upload_as(&server, "nope", "application/zip", good.clone()).await;
    problem(s, &h, &b, 404);
    assert!(names(&server).await.is_empty(), "an upload created a function");
    assert_eq!(files_under(&server.data.join("archives")), Vec::<String>::new());

    let (s, h, b) = server.invoke("nope", "GET", "/", None).await;
    problem(s, &h, &b, 404);
    let (s, h, b) = server.invoke("nope", "POST", "/some/path", Some("{}")).await;
    problem(s, &h, &b, 404);

    let (s, b) = server.create(spec("f")).await;
    assert_eq!(s, 201, "{b}");
    for (method, path) in [("GET", ""), ("POST", "/x"), ("DELETE", "/a/b")] {
        let (s, h, b) = server.invoke("f", method, path, None).await;
        problem(s, &h, &b, 503);
        assert!(header(&h, "retry-after").is_some(), "{h:?}");
    }

    // Versions of a missing function, and a missing or malformed version number.
    let (s, h, b) = server.send(server.http.get(server.api("/nope/versions"))).await;
    problem(s, &h, &b, 404);
    let (s, h, b) = server.send(server.http.get(server.api("/f/versions/1"))).await;
    problem(s, &h, &b, 404);
    let (s, h, b) = server.send(server.http.get(server.api("/f/versions/latest"))).await;
    bad_field(s, &h, &b, "version");

    // A disabled function is not callable either (503 with Retry-After).
    let req = server
        .http
        .patch(server.api("/f"))
        .header("content-type", "application/merge-patch+json")
        .body("{\"enabled\": false}");
    let (s, _, b) = server.send(req).await;
    assert_eq!((s, b["enabled"].clone()), (200, json!(false)), "{b}");
    let (s, h, b) = server.invoke("f", "GET", "", None).await;
    problem(s, &h, &b, 503);
    assert!(header(&h, "retry-after").is_some(), "{h:?}");

    // An unknown route is a problem too.
    let (s, h, b) = server.send(server.http.get(format!("{}/v1/nothing-here", server.url))).await;
    problem(s, &h, &b, 404);
}

#[tokio::test]
async fn list_is_paginated_and_checks_limit() {
    let server = Server::start();
    for name in ["c-fn", "a-fn", "b-fn"] {
        let (s, b) = server.create(spec(name)).await;
        assert_eq!(s, 201, "{b}");
    }
    let (s, _, page) = server.send(server.http.get(server.api("?limit=2"))).await;
    assert_eq!(s, 200, "{page}");
    let first: Vec<&str> = page["items"].as_array().expect("items").iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(first, ["a-fn", "b-fn"], "{page}");
    let cursor = page["next_cursor"].as_str().expect("next_cursor").to_string();

    let (s, _, page) = server.send(server.http.get(server.api("")).query(&[("limit", "2"), ("cursor", &cursor)])).await;
    assert_eq!(s, 200, "{page}");
    let second: Vec<&str> =
        page["items"].as_array().expect("items").iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(second, ["c-fn"], "{page}");
    assert_eq!(page["next_cursor"], Value::Null, "{page}");

    // Exactly a page: no next cursor.
    let (s, _, page) = server.send(server.http.get(server.api("?limit=3"))).await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(page["next_cursor"], Value::Null, "{page}");

    for bad in ["0", "1001"] {
        let (s, h, b) = server.send(server.http.get(server.api("")).query(&[("limit", bad)])).await;
        bad_field(s, &h, &b, "limit");
    }
}

#[tokio::test]
async fn list_limit_that_is_not_a_number_is_a_problem_naming_limit() {
    let server = Server::start();
    for bad in ["abc", "-1", "2.5"] {
        let (s, h, b) = server.send(server.http.get(server.api("")).query(&[("limit", bad)])).await;
        bad_field(s, &h, &b, "limit");
    }
}

#[tokio::test]
async fn delete_then_get_and_delete_again_are_404() {
    let server = Server::start();
    let (s, b) = server.create(spec("f")).await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = server.create(spec("g")).await;
    assert_eq!(s, 201, "{b}");

    let (s, _, b) = server.send(server.http.delete(server.api("/f"))).await;
    assert_eq!(s, 202, "{b}");
    let (s, h, b) = server.send(server.http.get(server.api("/f"))).await;
    problem(s, &h, &b, 404);
    let (s, h, b) = server.send(server.http.delete(server.api("/f"))).await;
    problem(s, &h, &b, 404);
    let (s, h, b) = server.send(server.http.delete(server.api("/Bad_Name"))).await;
    bad_field(s, &h, &b, "name");
    assert_eq!(names(&server).await, vec!["g".to_string()]);

    // The name can be used again, from scratch.
    let (s, b) = server.create(json!({"name": "f", "runtime": "nodejs20", "entrypoint": "index.handler"})).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["resource_version"], json!(1), "{b}");
    assert_eq!(b["runtime"], "nodejs20", "{b}");
}

#[tokio::test]
async fn a_wrong_method_is_a_problem() {
    let server = Server::start();
    let (s, b) = server.create(spec("f")).await;
    assert_eq!(s, 201, "{b}");
    let (s, h, b) = server.send(server.http.post(server.api("/f"))).await;
    problem(s, &h, &b, 405);
    let (s, h, b) = server.send(server.http.delete(server.api(""))).await;
    problem(s, &h, &b, 405);
    assert_eq!(names(&server).await, vec!["f".to_string()]);
}

/// A cursor the API did not give is a 400 naming `cursor` (it was taken silently: the full
/// list, or an empty page that read as "no records").
#[tokio::test]
async fn regression_a_garbage_cursor_is_a_400_naming_cursor() {
    let server = Server::start();
    let (s, _) = server.create(spec("f")).await;
    assert_eq!(s, 201);
    for cursor in ["%00%ff", "zzz%20z", "Not-A-Name"] {
        for list in ["", "/f/invocations"] {
            let url = format!("{}?cursor={cursor}", server.api(list));
            let (s, h, b) = server.send(server.http.get(url)).await;
            bad_field(s, &h, &b, "cursor");
        }
        for kind in ["triggers", "jobs"] {
            let url = server.api("").replace("/functions", &format!("/{kind}?cursor={cursor}"));
            let (s, h, b) = server.send(server.http.get(url)).await;
            bad_field(s, &h, &b, "cursor");
        }
    }
    // The cursors the API gives still page.
    let (s, _) = server.create(spec("g")).await;
    assert_eq!(s, 201);
    let (_, _, first) = server.send(server.http.get(format!("{}?limit=1", server.api("")))).await;
    let next = first["next_cursor"].as_str().expect("a next page").to_string();
    let (s, _, second) = server.send(server.http.get(format!("{}?limit=1&cursor={next}", server.api("")))).await;
    assert_eq!((s, second["items"][0]["name"].as_str()), (200, Some("g")), "{second}");
}

/// An entrypoint with a NUL (or another control character) is refused: it was accepted and
/// the version stayed `Building` for good.
#[tokio::test]
async fn regression_an_entrypoint_with_a_nul_byte_is_a_400() {
    let server = Server::start();
    let (s, h, b) =
        post_json(&server, json!({"name": "f", "runtime": "python3.11", "entrypoint": "main\u{0}.handler"})).await;
    bad_field(s, &h, &b, "entrypoint");
    let (s, _) = server.create(spec("f")).await;
    assert_eq!(s, 201);
    let patch = server
        .http
        .patch(server.api("/f"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"entrypoint": "main.hand\u{0}ler"}).to_string());
    let (s, h, b) = server.send(patch).await;
    bad_field(s, &h, &b, "entrypoint");
    assert_eq!(names(&server).await, ["f"]);
}

/// A zip entry whose file name is over 255 bytes is a 422 naming it (it was accepted and
/// failed the build with "File name too long").
#[tokio::test]
async fn regression_a_zip_entry_name_over_255_bytes_is_a_422_naming_it() {
    let server = Server::start();
    let (s, _) = server.create(spec("f")).await;
    assert_eq!(s, 201);
    let long = format!("{}.py", "x".repeat(260));
    let main = b"def handler(event, context):\n    return 1\n";
    let (s, h, b) =
        upload_as(&server, "f", "application/zip", zip_bytes(&[("main.py", main), (long.as_str(), b"")])).await;
    let b = problem(s, &h, &b, 422);
    assert_eq!(b["entry"], json!(long), "{b}");
    assert_eq!(files_under(&server.data.join("archives")), Vec::<String>::new(), "nothing stored");
}

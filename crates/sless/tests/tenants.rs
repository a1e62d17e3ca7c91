//! Tenants through the real server: tokens scoped to namespaces with a role, checked on every
//! `/v1` route (the routes are read from the server's own OpenAPI document, so a new route
//! cannot go unchecked), quotas, and namespaces as resources (docs/api.md, "Tenants").

mod common;

use std::time::Duration;

use chrono::SubsecRound;

use common::Server;
use reqwest::Method;
use serde_json::{Value, json};
use sless_client::Client;
use sless_core::tenant::Role;

const HELLO: &str =
    "def handler(event, context):\n    return {'statusCode': 200, 'body': 'hi from ' + context.function_name}\n";

/// A token's secret made by the admin client.
async fn token(server: &Server, namespaces: &[&str], role: Role) -> String {
    let names: Vec<String> = namespaces.iter().map(|s| s.to_string()).collect();
    server.client.create_token(&names, role, "test", None).await.expect("create token").token
}

/// Creates a function in `ns` and waits until it is Ready.
async fn deploy_in(client: &Client, name: &str, extra: Value) {
    let mut spec = json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler"});
    spec.as_object_mut().expect("object").extend(extra.as_object().cloned().unwrap_or_default());
    client.create_function(&spec).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
    let up = client.upload_code(name, common::zip(&[("main.py", HELLO)])).await.expect("upload");
    let v =
        client.wait_ready(name, up.version, Duration::from_secs(120), Duration::from_millis(50)).await.expect("ready");
    assert_eq!(serde_json::to_value(v.record.phase).expect("phase"), "Ready");
}

/// Everything the admin sees, to compare before and after refused writes.
async fn snapshot(server: &Server, namespaces: &[&str]) -> Value {
    let mut out = json!({
        "namespaces": server.client.list_namespaces().await.expect("namespaces"),
        "tokens": server.client.list_tokens().await.expect("tokens"),
    });
    for ns in namespaces {
        let c = server.client.in_namespace(ns);
        out[*ns] = json!({
            "functions": c.list_all_functions().await.expect("functions"),
            "triggers": c.list_all_triggers().await.expect("triggers"),
            "jobs": c.list_all_jobs().await.expect("jobs"),
        });
    }
    out
}

/// What a route does, as docs/api.md's "Tenants" table says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Needs {
    Read,
    Invoke,
    Write,
    Tokens,
    Platform,
    /// `GET /v1/namespaces`: any valid token (it sees its own).
    AnyToken,
}

fn needs(method: &Method, path: &str) -> Needs {
    let read = method == Method::GET;
    match path {
        "/v1/gc" => Needs::Platform,
        p if p.starts_with("/v1/tokens") => Needs::Tokens,
        "/v1/namespaces" if read => Needs::AnyToken,
        "/v1/namespaces/{ns}" if read => Needs::Read,
        "/v1/namespaces" | "/v1/namespaces/{ns}" => Needs::Platform,
        // Calling a function: through invoke, or by firing its cron trigger now.
        p if p.contains("/invoke") || p.ends_with("/fire") => Needs::Invoke,
        _ if read => Needs::Read,
        _ => Needs::Write,
    }
}

fn role_may(role: Role, needs: Needs) -> bool {
    match needs {
        Needs::Read => role != Role::Invoker,
        Needs::Invoke => role != Role::Viewer,
        Needs::Write => role >= Role::Developer,
        Needs::Tokens => role == Role::Admin,
        Needs::Platform => false,
        Needs::AnyToken => true,
    }
}

/// One request of the matrix: a concrete URL and a body that the handler refuses or that
/// names nothing that exists, so even an allowed request changes nothing.
fn concrete(server: &Server, method: &Method, path: &str) -> reqwest::RequestBuilder {
    let url = path
        .replace("{ns}", "team-a")
        .replace("{name}", "ghost")
        .replace("{version}", "1")
        .replace("{path}", "x")
        .replace("{id}", if path.starts_with("/v1/tokens") { "tok_0000000000000000" } else { "0000" });
    let mut req = server.http.request(method.clone(), format!("{}{url}", server.url));
    // Refused by validation before anything is written, for those an admin may send.
    req = match (method.as_str(), path) {
        ("DELETE", "/v1/namespaces/{ns}") => req.query(&[("force", "maybe")]),
        ("POST", "/v1/gc") => req.query(&[("dry_run", "maybe")]),
        ("PATCH", "/v1/namespaces/{ns}") => req.json(&json!({"bogus": 1})),
        ("PUT", p) if p.ends_with("/code") => req.header("content-type", "application/zip").body(Vec::<u8>::new()),
        ("POST" | "PUT" | "PATCH", _) => req.json(&json!({"bogus": 1})),
        _ => req,
    };
    req
}

#[tokio::test]
async fn every_v1_route_checks_the_token_its_role_and_namespace() {
    let server = Server::start();
    let a = server.client.in_namespace("team-a");
    server.client.create_namespace("team-a", &Value::Null).await.expect("team-a");
    server.client.create_namespace("team-b", &Value::Null).await.expect("team-b");
    deploy_in(&a, "hello", json!({})).await;

    let mut creds: Vec<(&str, Option<String>, Option<Role>)> = vec![
        ("no token", None, None),
        ("malformed", Some("Basic dXNlcjpwYXNz".into()), None),
        ("empty bearer", Some("Bearer ".into()), None),
    ];
    let real = token(&server, &["team-a"], Role::Developer).await;
    // The id of a real token with another secret.
    let wrong = format!("{}_{}", &real[..real.rfind('_').expect("shape")], "0".repeat(64));
    creds.push(("wrong secret", Some(format!("Bearer {wrong}")), None));
    let names = vec!["team-a".to_string()];
    let soon = chrono::Utc::now() + chrono::TimeDelta::milliseconds(1500);
    let expired = server.client.create_token(&names, Role::Admin, "expiring", Some(soon)).await.expect("expiring");
    let revoked = server.client.create_token(&names, Role::Admin, "revoked", None).await.expect("revoked");
    server.client.revoke_token(&revoked.record.id).await.expect("revoke");
    creds.push(("expired", Some(format!("Bearer {}", expired.token)), None));
    creds.push(("revoked", Some(format!("Bearer {}", revoked.token)), None));
    let other = token(&server, &["team-b"], Role::Admin).await;
    creds.push(("other namespace (admin of team-b)", Some(format!("Bearer {other}")), Some(Role::Admin)));
    for role in Role::ALL {
        let t = token(&server, &["team-a"], role).await;
        creds.push((role.as_str(), Some(format!("Bearer {t}")), Some(role)));
    }
    creds.push(("platform admin", Some(format!("Bearer {}", common::TOKEN)), None));
    tokio::time::sleep(Duration::from_millis(1600)).await;

    let doc: Value =
        server.http.get(format!("{}/openapi.json", server.url)).send().await.expect("doc").json().await.expect("json");
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if !path.starts_with("/v1/") {
            continue;
        }
        for method in ["get", "put", "post", "delete", "patch"] {
            if item.get(method).is_some() {
                routes.push((Method::from_bytes(method.to_uppercase().as_bytes()).expect("method"), path.clone()));
            }
        }
    }
    assert!(routes.len() >= 40, "only {} /v1 operations in the document", routes.len());

    let before = snapshot(&server, &["team-a", "team-b"]).await;
    let mut failures = Vec::new();
    for (method, path) in &routes {
        // What the platform admin gets: the handler's own answer (auth passed).
        let admin = concrete(&server, method, path).bearer_auth(common::TOKEN).send().await.expect("admin request");
        let admin_status = admin.status().as_u16();
        if matches!(admin_status, 401 | 403) || admin_status < 400 && *method != Method::GET {
            failures.push(format!(
                "{method} {path}: the admin's request got {admin_status}; the matrix needs a harmless request"
            ));
            continue;
        }
        for (label, header, role) in &creds {
            let mut req = concrete(&server, method, path);
            if let Some(h) = header {
                req = req.header("authorization", h);
            }
            let status = req.send().await.expect("request").status().as_u16();
            let need = needs(method, path);
            let expected = match (*label, role) {
                ("platform admin", _) => admin_status,
                (l, Some(_)) if l.starts_with("other namespace") && path.contains("{ns}") => {
                    if need == Needs::AnyToken { 200 } else { 403 }
                }
                (_, Some(role)) => {
                    if role_may(*role, need) {
                        admin_status
                    } else {
                        403
                    }
                }
                (_, None) => 401,
            };
            if status != expected {
                failures.push(format!("{method} {path} as {label}: {status}, expected {expected}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} wrong answers:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(
        snapshot(&server, &["team-a", "team-b"]).await,
        before,
        "a refused or harmless request changed something"
    );

    // A 403 for another tenant's namespace reads the same whether the resource exists or not.
    let probe = |name: &str| {
        server.http.get(format!("{}/v1/namespaces/team-a/functions/{name}", server.url)).bearer_auth(&other).send()
    };
    let (exists, absent) = (probe("hello").await.expect("probe"), probe("nothing-here").await.expect("probe"));
    assert_eq!((exists.status().as_u16(), absent.status().as_u16()), (403, 403));
    assert_eq!(exists.text().await.expect("body"), absent.text().await.expect("body"));
}

#[tokio::test]
async fn roles_work_end_to_end_and_token_triggers_take_tenant_invokers() {
    let server = Server::start();
    server.client.create_namespace("team-a", &Value::Null).await.expect("team-a");
    server.client.create_namespace("team-b", &Value::Null).await.expect("team-b");
    let dev = Client::new(&server.url, &token(&server, &["team-a"], Role::Developer).await, "team-a");
    let invoker = Client::new(&server.url, &token(&server, &["team-a"], Role::Invoker).await, "team-a");
    let viewer = Client::new(&server.url, &token(&server, &["team-a"], Role::Viewer).await, "team-a");
    let stranger = token(&server, &["team-b"], Role::Developer).await;

    // A developer deploys, and the function runs.
    deploy_in(&dev, "hello", json!({})).await;
    let call = sless_client::InvokeRequest::get();
    let answer = invoker.invoke("hello", &call).await.expect("invoke");
    assert_eq!((answer.status.as_u16(), answer.text()), (200, "hi from hello".to_string()));
    // A viewer reads but does not call; an invoker calls but does not read.
    viewer.get_function("hello").await.expect("viewer reads");
    assert_eq!(viewer.invoke("hello", &call).await.expect("answer").status.as_u16(), 403);
    let refused = invoker.get_function("hello").await.expect_err("invoker may not read");
    assert!(refused.to_string().contains("role invoker may not read"), "{refused}");
    let refused = viewer.delete_function("hello").await.expect_err("viewer may not write");
    assert!(refused.to_string().contains("403"), "{refused}");
    // The developer's token does not reach another namespace, even to create in it.
    let elsewhere = dev
        .in_namespace("team-b")
        .create_function(&json!({"name": "x", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert!(elsewhere.expect_err("other namespace").to_string().contains("not scoped to namespace \"team-b\""));

    // An `auth: token` http trigger takes a token of its namespace that may invoke.
    dev.create_trigger(&json!({"name": "web", "function": "hello", "type": "http", "auth": "token"}))
        .await
        .expect("trigger");
    let url = format!("{}/fn/team-a/hello", server.url);
    let status = |t: Option<String>| {
        let mut req = server.http.get(&url);
        if let Some(t) = t {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.expect("call").status().as_u16() }
    };
    let invoker_secret = token(&server, &["team-a"], Role::Invoker).await;
    let viewer_secret = token(&server, &["team-a"], Role::Viewer).await;
    assert_eq!(status(Some(invoker_secret)).await, 200);
    assert_eq!(status(Some(common::TOKEN.to_string())).await, 200);
    assert_eq!(status(Some(viewer_secret)).await, 403);
    assert_eq!(status(Some(stranger)).await, 403);
    assert_eq!(status(None).await, 401);

    // The CLI: create prints the secret once, list shows the id, revoke ends it.
    let out = server.cli(&[
        "token",
        "create",
        "-n",
        "team-a",
        "--role",
        "invoker",
        "--description",
        "ci",
        "--expires",
        "30d",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let secret = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(secret.starts_with("slt_"), "{secret}");
    let cli_client = Client::new(&server.url, &secret, "team-a");
    assert_eq!(cli_client.invoke("hello", &call).await.expect("call").status.as_u16(), 200);
    let id = format!("tok_{}", &secret[4..20]);
    let list = server.cli(&["token", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(listed.contains(&id) && listed.contains("invoker") && !listed.contains(&secret[21..]), "{listed}");
    let out = server.cli(&["token", "revoke", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = cli_client.invoke("hello", &call).await.expect("call");
    assert_eq!(after.status.as_u16(), 401);

    // The secret is stored only hashed: it appears nowhere in the data folder.
    for file in common::files_under(&server.data) {
        let bytes = std::fs::read(server.data.join(&file)).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains(&secret[21..]), "the secret is in {file}");
    }
}

#[tokio::test]
async fn quotas_hold_their_numbers_exactly() {
    let server = Server::start();
    let quotas = json!({"max_functions": 2, "requests_per_minute": 3});
    server.client.create_namespace("small", &quotas).await.expect("small");
    let admin = server.client.in_namespace("small");
    let spec = |name: &str| json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler"});
    admin.create_function(&spec("one")).await.expect("one");
    admin.create_function(&spec("two")).await.expect("two");
    let err = admin.create_function(&spec("three")).await.expect_err("over max_functions");
    let problem = err.problem().expect("problem");
    assert_eq!((problem.status, problem.quota.as_deref()), (403, Some("max_functions")), "{problem:?}");
    assert!(problem.detail.contains("limit 2"), "{}", problem.detail);
    assert_eq!(admin.list_all_functions().await.expect("list").len(), 2, "nothing half-created");

    // Instances and memory: every function sets max_instances, and the sums hold.
    server
        .client
        .patch_namespace("small", &json!({"quotas": {"max_functions": null, "max_instances": 3, "max_memory_mb": 512}}))
        .await
        .expect("patch");
    let err = admin.patch_function("one", &json!({"memory_mb": 256}), None).await.expect_err("max_instances unset");
    assert_eq!(err.problem().and_then(|p| p.quota.clone()).as_deref(), Some("max_instances"));
    // `two` (unset) counts as 1 instance of 128 MiB; `one` may take 2 more of 128.
    admin.patch_function("one", &json!({"max_instances": 2}), None).await.expect("3 instances, 384 MiB");
    let err = admin.patch_function("one", &json!({"max_instances": 3}), None).await.expect_err("4 > 3");
    assert_eq!(err.problem().and_then(|p| p.quota.clone()).as_deref(), Some("max_instances"));
    let err = admin.patch_function("one", &json!({"memory_mb": 256}), None).await.expect_err("640 > 512");
    assert_eq!(err.problem().and_then(|p| p.quota.clone()).as_deref(), Some("max_memory_mb"));
    assert_eq!(
        admin.get_function("one").await.expect("one").record.spec.memory_mb,
        128,
        "the refused patch changed nothing"
    );
    let usage = server.client.get_namespace("small").await.expect("get");
    assert_eq!(usage["usage"], json!({"functions": 2, "instances": 3, "memory_mb": 384}));

    // Requests per minute, per token: 3 go through, the 4th waits; another token has its own.
    let t1 = Client::new(&server.url, &token(&server, &["small"], Role::Viewer).await, "small");
    let t2 = Client::new(&server.url, &token(&server, &["small"], Role::Viewer).await, "small");
    for _ in 0..3 {
        t1.get_function("one").await.expect("within the rate");
    }
    let raw = t1.send(t1.http().get(t1.functions_url("/one"))).await.expect("answer");
    assert_eq!(raw.status.as_u16(), 429);
    let retry: u64 = raw.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(raw.json_or_text()["quota"], "requests_per_minute");
    t2.get_function("one").await.expect("another token");
    server.client.in_namespace("small").get_function("one").await.expect("the platform admin is not limited");
    // Routes outside a namespace take from the token's allowance too.
    t2.list_namespaces().await.expect("2 of 3");
    t2.list_namespaces().await.expect("3 of 3");
    assert_eq!(t2.list_namespaces().await.expect_err("4 of 3").status(), Some(429));
}

#[tokio::test]
async fn namespaces_are_resources_with_a_lifecycle() {
    let server = Server::start();
    // An admin's first write into an unknown namespace creates it: single-user use as before.
    deploy_in(&server.client.in_namespace("fresh"), "hello", json!({})).await;
    let names: Vec<String> = server.client.list_namespaces().await.expect("list").into_iter().map(|n| n.name).collect();
    assert_eq!(names, vec!["default".to_string(), "fresh".to_string()]);
    // A failed write creates nothing.
    let bad = server.client.in_namespace("never").create_function(&json!({"name": "x"})).await;
    assert!(bad.is_err());
    assert!(server.client.get_namespace("never").await.expect_err("not created").is_not_found());

    let only_fresh = token(&server, &["fresh"], Role::Developer).await;
    let both = token(&server, &["default", "fresh"], Role::Viewer).await;
    // A token lists the namespaces it reaches.
    let seen: Vec<String> = Client::new(&server.url, &only_fresh, "fresh")
        .list_namespaces()
        .await
        .expect("list")
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(seen, vec!["fresh".to_string()]);
    // Only the platform admin creates namespaces.
    let err =
        Client::new(&server.url, &only_fresh, "fresh").create_namespace("mine", &Value::Null).await.expect_err("403");
    assert_eq!(err.problem().map(|p| p.status), Some(403));

    let out = server.cli(&["namespace", "delete", "default"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the default namespace always exists"));
    let out = server.cli(&["namespace", "delete", "fresh"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(stderr.contains("409") && stderr.contains("holds 1 functions"), "{stderr}");
    server
        .client
        .in_namespace("fresh")
        .invoke("hello", &sless_client::InvokeRequest::get())
        .await
        .expect("still there");

    let out = server.cli(&["namespace", "delete", "fresh", "--force"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(server.client.in_namespace("fresh").get_function("hello").await.expect_err("gone").is_not_found());
    // The token that reached only it is revoked; the other keeps its other namespace.
    let gone = Client::new(&server.url, &only_fresh, "fresh").list_namespaces().await.expect_err("revoked");
    assert_eq!(gone.problem().map(|p| p.status), Some(401));
    let kept = server.client.list_tokens().await.expect("tokens");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].namespaces, vec!["default".to_string()]);
    Client::new(&server.url, &both, "default").list_all_functions().await.expect("still reaches default");

    // Quotas from the CLI.
    let out = server.cli(&["namespace", "create", "q", "--max-functions", "5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = server.cli(&["namespace", "set-quota", "q", "--max-functions", "none", "--requests-per-minute", "60"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let q = server.client.get_namespace("q").await.expect("q");
    assert_eq!(
        (q["quotas"]["max_functions"].clone(), q["quotas"]["requests_per_minute"].clone()),
        (Value::Null, json!(60))
    );
}

#[tokio::test]
async fn tokens_survive_a_restart_and_their_key_is_private() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &[]);
    let secret = token(&server, &["default"], Role::Viewer).await;
    server.stop();
    let key = dir.path().join("token-key");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).expect("token-key").permissions());
    assert_eq!(mode & 0o777, 0o600);
    let server = Server::start_in(dir.path(), &[]);
    Client::new(&server.url, &secret, "default").list_all_functions().await.expect("the token works after a restart");
}

#[tokio::test]
async fn a_tenant_admin_manages_only_its_own_tokens_and_cannot_outlive_itself() {
    let server = Server::start();
    for ns in ["a", "b"] {
        server.client.create_namespace(ns, &Value::Null).await.expect("namespace");
    }
    let a = vec!["a".to_string()];
    let limit = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).trunc_subsecs(3);
    let boss = server.client.create_token(&a, Role::Admin, "tenant admin", Some(limit)).await.expect("boss");
    let b_token = server.client.create_token(&["b".to_string()], Role::Viewer, "", None).await.expect("b");
    let boss = Client::new(&server.url, &boss.token, "a");

    // A token it makes takes its expiry, and may not ask for a later one.
    let child = boss.create_token(&a, Role::Developer, "ci", None).await.expect("child");
    assert_eq!(child.record.expires_at, Some(limit));
    let later = boss.create_token(&a, Role::Developer, "", Some(limit + chrono::TimeDelta::hours(1))).await;
    assert_eq!(later.expect_err("later").problem().and_then(|p| p.field.clone()).as_deref(), Some("expires_at"));
    // Nor reach further than it does.
    let wider = boss.create_token(&["a".to_string(), "b".to_string()], Role::Viewer, "", None).await;
    assert_eq!(wider.expect_err("wider").problem().map(|p| p.status), Some(403));

    // It sees and revokes only tokens within its namespaces; others are as good as absent.
    let seen: Vec<String> = boss.list_tokens().await.expect("list").into_iter().map(|t| t.id).collect();
    assert!(seen.contains(&child.record.id) && !seen.contains(&b_token.record.id), "{seen:?}");
    assert!(boss.revoke_token(&b_token.record.id).await.expect_err("outside").is_not_found());
    boss.revoke_token(&child.record.id).await.expect("revoke its own");
    Client::new(&server.url, &b_token.token, "b").list_all_functions().await.expect("b's token untouched");
}

/// Found by an attack on the first version: tokens and resources made while a namespace was
/// being deleted survived it, and a namespace made again under its name inherited them (and
/// the old tenant's invocation records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_being_deleted_takes_no_writes_and_its_successor_inherits_nothing() {
    let server = Server::start();
    server.client.create_namespace("x", &Value::Null).await.expect("x");
    let boss_secret = token(&server, &["x"], Role::Admin).await;
    let boss = Client::new(&server.url, &boss_secret, "x");
    deploy_in(&boss, "old", json!({})).await;
    boss.create_trigger(&json!({"name": "tick", "function": "old", "type": "cron", "schedule": "@every 1s"}))
        .await
        .expect("trigger");
    let answer = boss.invoke("old", &sless_client::InvokeRequest::get()).await.expect("call");
    let old_call = answer.header("x-request-id").expect("id").to_string();

    // The old tenant keeps writing while the platform admin deletes the namespace.
    let writer = {
        let boss = boss.clone();
        tokio::spawn(async move {
            let mut made = Vec::new();
            for i in 0..400 {
                let spec = json!({"name": format!("w{i}"), "runtime": "python3.11", "entrypoint": "main.handler"});
                let _ = boss.create_function(&spec).await;
                if let Ok(t) = boss.create_token(&["x".to_string()], Role::Developer, "", None).await {
                    made.push(t.token);
                }
            }
            made
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.client.delete_namespace("x", true).await.expect("force delete");
    let minted = writer.await.expect("writer");
    assert!(!minted.is_empty(), "the writer made no token before the delete");

    // Every token of the old namespace reaches nothing, before and after a namespace of the
    // same name is made again.
    for round in ["deleted", "made again"] {
        for secret in minted.iter().chain([&boss_secret]) {
            let c = Client::new(&server.url, secret, "x");
            let status = c.list_all_functions().await.expect_err("refused").status();
            assert!(matches!(status, Some(401 | 403)), "{round}: a token of the old x got {status:?}");
            let created = c
                .create_function(&json!({"name": "ghost", "runtime": "python3.11", "entrypoint": "main.handler"}))
                .await;
            assert!(created.is_err(), "{round}: a token of the old x created a function");
        }
        if round == "deleted" {
            assert!(server.client.get_namespace("x").await.expect_err("gone").is_not_found());
            server.client.create_namespace("x", &json!({"max_functions": 1})).await.expect("made again");
        }
    }
    let fresh = server.client.in_namespace("x");
    assert!(fresh.list_all_functions().await.expect("functions").is_empty());
    assert!(fresh.list_all_triggers().await.expect("triggers").is_empty());
    assert!(fresh.list_all_jobs().await.expect("jobs").is_empty());
    assert!(fresh.get_invocation(&old_call).await.expect_err("old record").is_not_found());
    assert_eq!(server.client.get_namespace("x").await.expect("x")["usage"]["functions"], 0);
    assert!(
        server.client.list_tokens().await.expect("tokens").iter().all(|t| !t.namespaces.contains(&"x".to_string()))
    );
}

/// A followed log stream used to outlive its token's revocation.
#[tokio::test]
async fn a_log_stream_ends_when_its_token_is_revoked() {
    let server = Server::start();
    deploy_in(&server.client, "f", json!({})).await;
    let viewer = server.client.create_token(&["default".to_string()], Role::Viewer, "", None).await.expect("viewer");
    let client = Client::new(&server.url, &viewer.token, "default");
    let mut stream = client.follow_logs("f", 0).await.expect("follow");
    server.client.revoke_token(&viewer.record.id).await.expect("revoke");
    // The stream checks its token every 5 s; it must end, not go on.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.next().await {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived its revoked token");
}

#[tokio::test]
async fn headers_hold_no_surprises() {
    let server = Server::start();
    let code = "def handler(event, context):\n    h = event['headers'] or {}\n    return {'auth': h.get('authorization'), 'proxy': h.get('proxy-authorization')}\n";
    server.deploy("echo", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let trigger = json!({"name": "web", "function": "echo", "type": "http"});
    server.client.create_trigger(&trigger).await.expect("trigger");
    let list = format!("{}/v1/namespaces/default/functions", server.url);
    // Two Authorization headers are refused, whatever they hold; the scheme's case does not matter.
    let two = server
        .http
        .get(&list)
        .header("authorization", format!("Bearer {}", common::TOKEN))
        .header("authorization", "Bearer x");
    assert_eq!(two.send().await.expect("two").status().as_u16(), 401);
    let upper = server.http.get(&list).header("authorization", format!("BEARER {}", common::TOKEN));
    assert_eq!(upper.send().await.expect("upper").status().as_u16(), 200);

    // A public route passes the caller's own credentials on, never the platform's.
    let public = format!("{}/fn/default/echo", server.url);
    let tenant = token(&server, &["default"], Role::Invoker).await;
    for (sent, seen) in [
        (format!("Bearer {}", common::TOKEN), Value::Null),
        (format!("Bearer {tenant}"), Value::Null),
        ("Bearer callers-own-jwt".to_string(), json!("Bearer callers-own-jwt")),
    ] {
        let answer: Value = server
            .http
            .get(&public)
            .header("authorization", &sent)
            .header("proxy-authorization", "Basic cHJveHk6cHc=")
            .send()
            .await
            .expect("call")
            .json()
            .await
            .expect("json");
        assert_eq!(answer, json!({"auth": seen, "proxy": null}), "sent {sent}");
    }
}

/// Lowering a quota below what is used used to lock the tenant out of editing, even of
/// disabling a function, with a wrong count in the message.
#[tokio::test]
async fn a_quota_lowered_below_use_still_lets_functions_be_edited() {
    let server = Server::start();
    server.client.create_namespace("q", &Value::Null).await.expect("q");
    let c = server.client.in_namespace("q");
    for name in ["a", "b"] {
        c.create_function(
            &json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler", "max_instances": 2}),
        )
        .await
        .expect("create");
    }
    server
        .client
        .patch_namespace("q", &json!({"quotas": {"max_functions": 1, "max_instances": 2}}))
        .await
        .expect("lower");
    c.patch_function("a", &json!({"enabled": false}), None).await.expect("an edit that adds nothing");
    c.patch_function("a", &json!({"max_instances": 1}), None).await.expect("shrinking");
    let grow = c.patch_function("a", &json!({"max_instances": 3}), None).await.expect_err("growing");
    assert_eq!(grow.problem().and_then(|p| p.quota.clone()).as_deref(), Some("max_instances"));
    let new = c
        .create_function(
            &json!({"name": "c", "runtime": "python3.11", "entrypoint": "main.handler", "max_instances": 1}),
        )
        .await;
    let problem = new.expect_err("over max_functions").problem().cloned().expect("problem");
    assert!(problem.detail.contains("limit 1, 2 functions exist"), "{}", problem.detail);
}

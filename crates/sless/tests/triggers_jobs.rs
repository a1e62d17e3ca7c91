//! Triggers and jobs through the real server: http triggers publish functions, cron triggers
//! fire on time, jobs run once per run_id, and everything waits for its function.

mod common;

use std::time::{Duration, Instant};

use common::{Server, zip};
use serde_json::{Value, json};

async fn post(server: &Server, what: &str, body: Value) -> (u16, Value) {
    let (s, _, b) =
        server.send(server.http.post(format!("{}/v1/namespaces/default/{what}", server.url)).json(&body)).await;
    (s, b)
}

async fn get(server: &Server, what: &str) -> Value {
    let (s, _, b) = server.send(server.http.get(format!("{}/v1/namespaces/default/{what}", server.url))).await;
    assert_eq!(s, 200, "{what}: {b}");
    b
}

async fn patch(server: &Server, what: &str, body: Value) -> (u16, Value) {
    let req = server
        .http
        .patch(format!("{}/v1/namespaces/default/{what}", server.url))
        .header("content-type", "application/merge-patch+json")
        .body(body.to_string());
    let (s, _, b) = server.send(req).await;
    (s, b)
}

/// Polls `what` until `done` holds (or fails after 60 s).
async fn wait_for(server: &Server, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = get(server, what).await;
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} never reached the expected state: {v}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn invocations(server: &Server, function: &str, query: &str) -> Vec<Value> {
    let v = get(server, &format!("functions/{function}/invocations?limit=1000{query}")).await;
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Polls the invocations of `function` until there are at least `n` (they are written in the
/// background, in batches).
async fn wait_invocations(server: &Server, function: &str, query: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let items = invocations(server, function, query).await;
        if items.len() >= n {
            return items;
        }
        assert!(Instant::now() < deadline, "only {} of {n} invocations recorded", items.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const ECHO_PY: &str = "import json\ndef handler(event, context):\n    print('EVENT ' + json.dumps(event))\n    return {'path': event.get('path'), 'source': event.get('source')}\n";

#[tokio::test]
async fn an_http_trigger_publishes_the_function_at_fn() {
    let server = Server::start();
    server.deploy("pub", "python3.11", "main.handler", &[("main.py", ECHO_PY)], json!({})).await;
    let public = |path: &str| server.http.get(format!("{}/fn/default/pub{path}", server.url));
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(public("/").send().await.expect("call")), 404, "no trigger, no public URL");

    let (s, b) = post(&server, "triggers", json!({"name": "pub-http", "function": "pub", "type": "http"})).await;
    assert_eq!(s, 201, "{b}");
    let r = public("/a/b?x=1").send().await.expect("call");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["path"], "/a/b");
    let t = wait_for(&server, "triggers/pub-http", |t| t["status"]["phase"] == "Active").await;
    assert_eq!(t["status"]["url"], "/fn/default/pub");

    // One http trigger per function.
    let (s, b) = post(&server, "triggers", json!({"name": "pub-http2", "function": "pub", "type": "http"})).await;
    assert_eq!(s, 409, "{b}");

    // auth: token needs the token; disabled answers 404.
    assert_eq!(patch(&server, "triggers/pub-http", json!({"auth": "token"})).await.0, 200);
    assert_eq!(status(public("/").send().await.expect("call")), 401);
    assert_eq!(status(public("/").bearer_auth(common::TOKEN).send().await.expect("call")), 200);
    assert_eq!(patch(&server, "triggers/pub-http", json!({"enabled": false})).await.0, 200);
    assert_eq!(status(public("/").bearer_auth(common::TOKEN).send().await.expect("call")), 404);

    let records = wait_invocations(&server, "pub", "&status=ok", 2).await;
    assert!(records.iter().all(|r| r["source"] == "http" && r["source_name"] == "pub-http"), "{records:?}");
}

#[tokio::test]
async fn a_cron_trigger_created_before_its_function_fires_once_it_is_ready() {
    let server = Server::start();
    let (s, b) = post(
        &server,
        "triggers",
        json!({"name": "tick", "function": "late", "type": "cron", "schedule": "@every 1s", "payload": {"k": "v"}}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let t = wait_for(&server, "triggers/tick", |t| {
        t["status"]["phase"] == "Waiting" && t["status"]["message"] != "not reconciled yet"
    })
    .await;
    assert!(t["status"]["message"].as_str().unwrap_or_default().contains("does not exist"), "{t}");

    server.deploy("late", "python3.11", "main.handler", &[("main.py", ECHO_PY)], json!({})).await;
    wait_for(&server, "triggers/tick", |t| t["status"]["phase"] == "Active").await;
    let records = wait_invocations(&server, "late", "", 3).await;
    assert!(
        records.iter().all(|r| r["source"] == "cron" && r["source_name"] == "tick" && r["outcome"] == "ok"),
        "{records:?}"
    );

    // Each tick fired once: the events' times are distinct.
    let mut ticks = Vec::new();
    for r in &records {
        let full = get(&server, &format!("invocations/{}", r["id"].as_str().expect("id"))).await;
        let line = full["logs"]
            .as_array()
            .and_then(|l| l.iter().find_map(|x| x.as_str()?.strip_prefix("EVENT ").map(str::to_string)));
        let event: Value = serde_json::from_str(&line.expect("the event was printed")).expect("json");
        assert_eq!((event["source"].clone(), event["detail"].clone()), (json!("sless.cron"), json!({"k": "v"})));
        assert_eq!(event["resources"], json!(["default/tick"]));
        ticks.push(event["time"].as_str().expect("time").to_string());
    }
    let n = ticks.len();
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), n, "a tick fired twice: {ticks:?}");

    // Deleting the trigger stops it.
    let (s, _, _) =
        server.send(server.http.delete(format!("{}/v1/namespaces/default/triggers/tick", server.url))).await;
    assert_eq!(s, 202);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = invocations(&server, "late", "").await.len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(invocations(&server, "late", "").await.len(), before, "a deleted trigger fired");
}

#[tokio::test]
async fn trigger_validation_names_the_field() {
    let server = Server::start();
    for (body, field) in [
        (json!({"name": "t", "function": "f", "type": "cron", "schedule": "61 * * * *"}), "schedule"),
        (json!({"name": "t", "function": "f", "type": "cron", "schedule": "@every 0s"}), "schedule"),
        (
            json!({"name": "t", "function": "f", "type": "cron", "schedule": "0 1 * * *", "timezone": "Mars/Olympus"}),
            "timezone",
        ),
        (json!({"name": "t", "function": "f", "type": "webhook"}), "type"),
        (json!({"name": "t", "function": "Bad", "type": "http"}), "function"),
    ] {
        let (s, b) = post(&server, "triggers", body.clone()).await;
        assert_eq!((s, b["field"].clone()), (400, json!(field)), "{body}: {b}");
    }
    assert_eq!(get(&server, "triggers").await["items"], json!([]));
}

#[tokio::test]
async fn a_job_runs_once_per_run_id_and_waits_for_its_function() {
    let server = Server::start();
    let (s, b) = post(&server, "jobs", json!({"name": "skip", "function": "worker", "run_id": 0})).await;
    assert_eq!(s, 201, "{b}");
    wait_for(&server, "jobs/skip", |j| j["status"]["phase"] == "Skipped").await;

    let (s, b) =
        post(&server, "jobs", json!({"name": "once", "function": "worker", "run_id": 1, "payload": {"n": 7}})).await;
    assert_eq!(s, 201, "{b}");
    let j = wait_for(&server, "jobs/once", |j| {
        j["status"]["phase"] == "Waiting" && j["status"]["message"] != "not reconciled yet"
    })
    .await;
    assert!(j["status"]["message"].as_str().unwrap_or_default().contains("does not exist"), "{j}");

    let code = "def handler(event, context):\n    return {'job': event['job'], 'run_id': event['run_id'], 'n': event['payload']['n']}\n";
    server.deploy("worker", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let j = wait_for(&server, "jobs/once", |j| j["status"]["phase"] == "Succeeded").await;
    let run = &j["status"]["last_run"];
    assert_eq!(
        (run["run_id"].clone(), run["status_code"].clone(), run["outcome"].clone()),
        (json!(1), json!(200), json!("ok"))
    );
    let out: Value = serde_json::from_str(run["output_excerpt"].as_str().expect("excerpt")).expect("json");
    assert_eq!(out, json!({"job": "once", "run_id": 1, "n": 7}));
    assert_eq!(get(&server, "jobs/skip").await["status"]["phase"], "Skipped", "run_id 0 never runs");

    // It ran once; bumping run_id runs it once more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(wait_invocations(&server, "worker", "", 1).await.len(), 1);
    assert_eq!(patch(&server, "jobs/once", json!({"run_id": 2})).await.0, 200);
    wait_for(&server, "jobs/once", |j| j["status"]["last_run"]["run_id"] == 2 && j["status"]["phase"] == "Succeeded")
        .await;
    let records = wait_invocations(&server, "worker", "", 2).await;
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r["source"] == "job" && r["source_name"] == "once"));
}

#[tokio::test]
async fn a_failing_function_fails_the_job_and_a_failed_function_is_reported() {
    let server = Server::start();
    server
        .deploy(
            "boom",
            "python3.11",
            "main.handler",
            &[("main.py", "def handler(e, c):\n    raise RuntimeError('nope')\n")],
            json!({}),
        )
        .await;
    post(&server, "jobs", json!({"name": "j", "function": "boom", "run_id": 1})).await;
    let j = wait_for(&server, "jobs/j", |j| j["status"]["phase"] == "Failed").await;
    assert_eq!(j["status"]["last_run"]["status_code"], 502);
    assert_eq!(j["status"]["last_run"]["outcome"], "error");

    // A function whose only build failed moves its trigger to Failed.
    let (s, _) = server.create(json!({"name": "broken", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 201);
    post(&server, "triggers", json!({"name": "bt", "function": "broken", "type": "http"})).await;
    server.upload("broken", zip(&[("main.py", "import nothing_here\n")])).await;
    let t = wait_for(&server, "triggers/bt", |t| t["status"]["phase"] == "Failed").await;
    assert!(t["status"]["message"].as_str().unwrap_or_default().contains("failed"), "{t}");
}

#[tokio::test]
async fn prewarm_makes_the_tick_a_warm_call_and_schedule_changes_apply_at_once() {
    let server = Server::start();
    server.deploy("warm", "python3.11", "main.handler", &[("main.py", ECHO_PY)], json!({})).await;
    server.deploy("other", "python3.11", "main.handler", &[("main.py", ECHO_PY)], json!({})).await;
    // Ticks 4 s apart, an instance started 3 s before each: no tick pays a cold start.
    let (s, b) = post(
        &server,
        "triggers",
        json!({"name": "pw", "function": "warm", "type": "cron", "schedule": "@every 4s", "prewarm_sec": 3}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let records = wait_invocations(&server, "warm", "", 1).await;
    assert_eq!(
        (records[0]["source"].clone(), records[0]["cold_start"].clone()),
        (json!("cron"), json!(false)),
        "{records:?}"
    );

    // Pointing the trigger at another function takes effect without a restart.
    assert_eq!(
        patch(&server, "triggers/pw", json!({"function": "other", "schedule": "@every 1s", "prewarm_sec": 0})).await.0,
        200
    );
    let moved = wait_invocations(&server, "other", "", 1).await;
    assert_eq!(moved[0]["source_name"], "pw");
}

#[tokio::test]
async fn a_public_route_passes_the_callers_authorization_and_an_unchanged_put_keeps_the_version() {
    let server = Server::start();
    let code = "def handler(event, context):\n    return {'auth': (event['headers'] or {}).get('authorization')}\n";
    server.deploy("own-auth", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let body = json!({"name": "oa", "function": "own-auth", "type": "http"});
    assert_eq!(post(&server, "triggers", body.clone()).await.0, 201);
    let r = server
        .http
        .get(format!("{}/fn/default/own-auth", server.url))
        .bearer_auth("callers-own-jwt")
        .send()
        .await
        .expect("call");
    assert_eq!(r.json::<Value>().await.expect("json"), json!({"auth": "Bearer callers-own-jwt"}));
    // The invoke API never passes the platform's token on.
    assert_eq!(server.invoke("own-auth", "GET", "", None).await.2, json!({"auth": null}));

    let put = |b: &Value| server.http.put(format!("{}/v1/namespaces/default/triggers/oa", server.url)).json(b);
    let (s, _, t) = server.send(put(&body)).await;
    assert_eq!((s, t["resource_version"].clone()), (200, json!(1)), "nothing changed: {t}");
    let (s, _, t) =
        server.send(put(&json!({"name": "oa", "function": "own-auth", "type": "http", "auth": "token"}))).await;
    assert_eq!((s, t["resource_version"].clone()), (200, json!(2)));
}

/// `payload_format` (docs/writing-functions.md, "The HTTP event"): the function's applies to
/// the invoke API and its URL; an http trigger's own wins on the URL. 2.0's event and 2.0's
/// response inference go together; a cron trigger refuses the field, and the CLI sets both.
#[tokio::test]
async fn an_http_triggers_payload_format_wins_over_the_functions_on_its_url() {
    let server = Server::start();
    let code = "def handler(event, context):\n    return {'version': event.get('version', '1.0'), 'path': event.get('rawPath') or event.get('path')}\n";
    server.deploy("fmt", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let body = json!({"name": "fmt-url", "function": "fmt", "type": "http", "payload_format": "2.0"});
    let (s, t) = post(&server, "triggers", body).await;
    assert_eq!((s, &t["payload_format"]), (201, &json!("2.0")), "{t}");
    let url = |rest: &str| format!("{}/fn/default/fmt{rest}", server.url);
    let r = server.http.get(url("/a")).send().await.expect("call");
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.json::<Value>().await.expect("json"), json!({"version": "2.0", "path": "/a"}));
    // The invoke API takes the function's format (1.0 by default).
    assert_eq!(server.invoke("fmt", "GET", "/a", None).await.2, json!({"version": "1.0", "path": "/a"}));
    // Without the trigger's choice, the function's 2.0 applies to both routes.
    assert_eq!(patch(&server, "triggers/fmt-url", json!({"payload_format": null})).await.0, 200);
    let out = server.cli(&["fn", "update", "fmt", "--payload-format", "2.0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, f) = server.get("fmt").await;
    assert_eq!(f["payload_format"], "2.0", "{f}");
    let r = server.http.get(url("/b")).send().await.expect("call");
    assert_eq!(r.json::<Value>().await.expect("json"), json!({"version": "2.0", "path": "/b"}));
    assert_eq!(server.invoke("fmt", "GET", "/b", None).await.2, json!({"version": "2.0", "path": "/b"}));
    let cron = json!({"name": "c", "function": "fmt", "type": "cron", "schedule": "@hourly", "payload_format": "2.0"});
    let (s, p) = post(&server, "triggers", cron).await;
    assert_eq!((s, &p["field"]), (400, &json!("payload_format")), "{p}");
}

#[tokio::test]
async fn firing_a_cron_trigger_calls_its_function_now_with_the_schedules_event() {
    let server = Server::start();
    server.deploy("tick", "python3.11", "main.handler", &[("main.py", ECHO_PY)], json!({})).await;
    // A schedule far away (once a year): only the fire call can run it during the test.
    let (s, b) = post(
        &server,
        "triggers",
        json!({"name": "yearly", "function": "tick", "type": "cron", "schedule": "0 0 1 1 *", "payload": {"n": 7}}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    wait_for(&server, "triggers/yearly", |t| t["status"]["phase"] == "Active").await;

    let fire = |name: &str| server.http.post(format!("{}/v1/namespaces/default/triggers/{name}/fire", server.url));
    let (s, headers, body) = server.send(fire("yearly")).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["source"], "sless.cron", "the schedule's own event reached the handler: {body}");
    let id = headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let records = wait_invocations(&server, "tick", "", 1).await;
    let record = records.iter().find(|r| r["id"] == id.as_str()).expect("the call is recorded under its id");
    assert_eq!((record["source"].as_str(), record["source_name"].as_str()), (Some("cron"), Some("yearly")));

    // The CLI: the answer printed, also with the token read from a file.
    let token_file = server.data.join("token");
    std::fs::write(&token_file, format!("{}\n", common::TOKEN)).expect("token file");
    let out = std::process::Command::new(common::bin())
        .args(["trigger", "fire", "yearly", "--token-file"])
        .arg(&token_file)
        .env("SLESS_URL", &server.url)
        .env("SLESS_CONFIG_DIR", server.data.join("cli-config"))
        .env_remove("SLESS_TOKEN")
        .output()
        .expect("run sless");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sless.cron"));

    // Only an enabled cron trigger can be fired; nothing is called otherwise.
    post(&server, "triggers", json!({"name": "web", "function": "tick", "type": "http"})).await;
    let (s, _, b) = server.send(fire("web")).await;
    assert_eq!((s, b["type"].as_str()), (409, Some("https://sless.dev/problems/conflict")), "{b}");
    assert!(b["detail"].as_str().is_some_and(|d| d.contains("/fn/default/tick")), "{b}");
    let (s, b) = patch(&server, "triggers/yearly", json!({"enabled": false})).await;
    assert_eq!(s, 200, "{b}");
    let (s, _, b) = server.send(fire("yearly")).await;
    assert_eq!(s, 409, "{b}");
    let (s, _, _) = server.send(fire("nope")).await;
    assert_eq!(s, 404);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(invocations(&server, "tick", "").await.len(), 2, "only the two fires called the function");
}

#[tokio::test]
async fn regression_a_malformed_authorization_never_carries_a_platform_token_to_a_public_function() {
    // Found by an attacker's review: `Bearer<TAB>token` and `Bearer token, Basic …` reached
    // the function with the platform's token in them.
    let server = Server::start();
    let code = "def handler(event, context):\n    h = event['headers'] or {}\n    return {'auth': h.get('Authorization') or h.get('authorization')}\n";
    server.deploy("echo-auth", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    assert_eq!(post(&server, "triggers", json!({"name": "ea", "function": "echo-auth", "type": "http"})).await.0, 201);
    let tenant = server
        .client
        .create_token(&["default".to_string()], sless_core::tenant::Role::Invoker, "t", None)
        .await
        .expect("token")
        .token;
    for value in [
        format!("Bearer\t{}", common::TOKEN),
        format!("Bearer {}, Basic eA==", common::TOKEN),
        format!("Basic eA==, Bearer {}", common::TOKEN),
        format!("Token {}", common::TOKEN),
        format!("Bearer\t{tenant}"),
        format!("Bearer {tenant};x"),
    ] {
        let r = server
            .http
            .get(format!("{}/fn/default/echo-auth", server.url))
            .header("authorization", value.as_str())
            .send()
            .await
            .expect("call");
        assert_eq!(r.json::<Value>().await.expect("json"), json!({"auth": null}), "{value:?} reached the function");
    }
    // The caller's own credentials still pass.
    let r = server
        .http
        .get(format!("{}/fn/default/echo-auth", server.url))
        .header("authorization", "Bearer\tcallers-own, Basic eA==")
        .send()
        .await
        .expect("call");
    assert_eq!(r.json::<Value>().await.expect("json"), json!({"auth": "Bearer\tcallers-own, Basic eA=="}));
}

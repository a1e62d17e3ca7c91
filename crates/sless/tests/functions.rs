//! Running functions through the real server: handler styles, errors, timeouts, crashes,
//! failed builds and restarts.

mod common;

use common::{Server, zip};
use serde_json::json;

#[tokio::test]
async fn python_sync_and_async_handlers_and_the_event() {
    let server = Server::start();
    let code = r#"
import asyncio
def handler(event, context):
    return {"statusCode": 201, "headers": {"X-Kind": "sync"}, "body": event["path"] + "|" + (event["queryStringParameters"] or {}).get("a", "") + "|" + context.function_name + "|" + context.aws_request_id}
async def ahandler(event, context):
    await asyncio.sleep(0.01)
    return {"async": True, "remaining_ok": 0 < context.get_remaining_time_in_millis() <= 5000}
"#;
    server.deploy("py", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 5})).await;
    let (s, h, b) = server.invoke("py", "GET", "/x/y?a=1&a=2", None).await;
    assert_eq!(s, 201);
    assert_eq!(h["x-kind"], "sync");
    let text = b.as_str().expect("text body").to_string();
    let parts: Vec<&str> = text.split('|').collect();
    assert_eq!(&parts[..3], ["/x/y", "2", "py"]);
    assert_eq!(parts[3], h["x-request-id"].to_str().expect("id"), "request id reaches the handler");

    server.deploy("apy", "python3.11", "main.ahandler", &[("main.py", code)], json!({"timeout_sec": 5})).await;
    let (s, _, b) = server.invoke("apy", "POST", "", Some("{}")).await;
    assert_eq!((s, b), (200, json!({"async": true, "remaining_ok": true})));
}

#[tokio::test]
async fn node_commonjs_esm_and_callback_handlers() {
    let server = Server::start();
    server
        .deploy(
            "cjs",
            "nodejs20",
            "index.handler",
            &[(
                "index.js",
                "exports.handler = async (e, c) => ({ fn: c.functionName, v: c.functionVersion, body: e.body });",
            )],
            json!({}),
        )
        .await;
    let (s, _, b) = server.invoke("cjs", "POST", "", Some(r#"{"k":1}"#)).await;
    assert_eq!((s, b), (200, json!({"fn": "cjs", "v": "1", "body": "{\"k\":1}"})));

    server
        .deploy(
            "esm",
            "nodejs20",
            "app.handler",
            &[("app.mjs", "export const handler = async () => 'plain text';")],
            json!({}),
        )
        .await;
    let (s, h, b) = server.invoke("esm", "GET", "", None).await;
    assert_eq!((s, b), (200, json!("plain text")));
    assert!(h["content-type"].to_str().expect("ct").starts_with("text/plain"));

    let cb = "exports.handler = (event, context, callback) => { setTimeout(() => callback(null, { statusCode: 202, body: 'cb' }), 5); };";
    server.deploy("cb", "nodejs20", "index.handler", &[("index.js", cb)], json!({})).await;
    let (s, _, b) = server.invoke("cb", "GET", "", None).await;
    assert_eq!((s, b), (202, json!("cb")));
}

#[tokio::test]
async fn an_exception_is_a_502_with_its_error_type_and_the_next_call_works() {
    let server = Server::start();
    let code = r#"
def handler(event, context):
    if event["path"] == "/boom":
        raise ValueError("bad input here")
    return "fine"
"#;
    server.deploy("err", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, h, b) = server.invoke("err", "GET", "/boom", None).await;
    assert_eq!(s, 502);
    assert_eq!(h["x-function-error"], "true");
    assert_eq!(
        b,
        json!({"errorType": "ValueError", "errorMessage": "bad input here"}),
        "no stack trace in the response"
    );
    let id = h["x-request-id"].to_str().expect("request id").to_string();
    let (s, _, b) = server.invoke("err", "GET", "/", None).await;
    assert_eq!((s, b), (200, json!("fine")));
    // The stack trace is in the invocation's logs (written in the background).
    let url = format!("{}/v1/namespaces/default/invocations/{id}", server.url);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let logs = loop {
        let (s, _, record) = server.send(server.http.get(&url)).await;
        if s == 200 {
            break record["logs"].to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no record for {id}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(logs.contains("Traceback") && logs.contains("bad input here"), "{logs}");

    let node = "exports.handler = async () => { undefinedThing(); };";
    server.deploy("nerr", "nodejs20", "index.handler", &[("index.js", node)], json!({})).await;
    let (s, h, b) = server.invoke("nerr", "GET", "/", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("ReferenceError")));
    assert_eq!(h["x-function-error"], "true");
}

#[tokio::test]
async fn a_call_past_timeout_sec_gets_504_and_the_next_call_succeeds() {
    let server = Server::start();
    let code = r#"
import time
def handler(event, context):
    if event["path"] == "/slow":
        time.sleep(30)
    return "quick"
"#;
    server.deploy("slow", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 1})).await;
    let started = std::time::Instant::now();
    let (s, h, b) = server.invoke("slow", "GET", "/slow", None).await;
    assert_eq!(s, 504, "{b}");
    assert_eq!(b["errorType"], "Function.Timeout");
    assert_eq!(h["x-function-error"], "true");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the stuck call was cut");
    // Regression: the record's logs said nothing of the timeout; Lambda prints this line.
    let id = h["x-request-id"].to_str().expect("a request id").to_string();
    let url = server.api("").replace("/functions", &format!("/invocations/{id}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let record = loop {
        let (s, _, r) = server.send(server.http.get(&url)).await;
        if s == 200 {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no record {id}: {r}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let logs = record["logs"].to_string();
    assert!(logs.contains(&format!("{id} Task timed out after 1.00 seconds")), "{record}");
    // Regression: `sless logs` showed the function's lines but not the platform's.
    let lines = server.client.logs("slow", 100).await.expect("logs");
    let line = format!("{id} Task timed out after 1.00 seconds");
    assert!(lines.iter().any(|l| l.line == line && l.request_id.as_deref() == Some(id.as_str())), "{lines:?}");
    let (s, _, b) = server.invoke("slow", "GET", "/", None).await;
    assert_eq!((s, b), (200, json!("quick")));
}

#[tokio::test]
async fn a_crashed_instance_is_replaced() {
    let server = Server::start();
    let code = r#"
import os
def handler(event, context):
    if event["path"] == "/die":
        os._exit(3)
    return os.environ["TMPDIR"]  # its instance (each is pid 1 of a pid namespace of its own)
"#;
    server.deploy("crash", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (_, _, first) = server.invoke("crash", "GET", "/", None).await;
    let (s, h, b) = server.invoke("crash", "GET", "/die", None).await;
    assert_eq!(s, 502, "{b}");
    assert_eq!(b["errorType"], "RuntimeExited");
    assert!(b["errorMessage"].as_str().unwrap_or_default().contains("code 3"), "{b}");
    assert_eq!(h["x-function-error"], "true");
    let (s, _, next) = server.invoke("crash", "GET", "/", None).await;
    assert_eq!(s, 200);
    assert_ne!(next, first, "a new instance serves");
}

#[tokio::test]
async fn an_entrypoint_that_cannot_be_imported_fails_the_version_at_deploy() {
    let server = Server::start();
    let (s, _) = server.create(json!({"name": "imp", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 201);
    let (s, b) =
        server.upload("imp", zip(&[("main.py", "import no_such_module\ndef handler(e, c):\n    return 1\n")])).await;
    assert_eq!(s, 202, "{b}");
    let v = server.wait_version("imp", 1).await;
    assert_eq!(v["phase"], "Failed");
    let (_, f) = server.get("imp").await;
    assert_eq!(f["status"]["phase"], "Failed");
    let msg = f["status"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("no_such_module"), "{msg}");
    let (s, h, _) = server.invoke("imp", "GET", "", None).await;
    assert_eq!(s, 503);
    assert!(h.contains_key("retry-after"));

    // A missing handler function in an importable Node module fails the same way.
    let (s, _) =
        server.create(json!({"name": "nohandler", "runtime": "nodejs20", "entrypoint": "index.handler"})).await;
    assert_eq!(s, 201);
    server.upload("nohandler", zip(&[("index.js", "exports.other = () => 1;")])).await;
    assert_eq!(server.wait_version("nohandler", 1).await["phase"], "Failed");
    let (_, f) = server.get("nohandler").await;
    assert!(f["status"]["message"].as_str().unwrap_or_default().contains("Runtime.HandlerNotFound"), "{f}");
}

#[tokio::test]
async fn a_failed_build_leaves_the_previous_version_serving() {
    let server = Server::start();
    server
        .deploy(
            "keep",
            "python3.11",
            "main.handler",
            &[("main.py", "def handler(e, c):\n    return 'v1'\n")],
            json!({}),
        )
        .await;
    let bad = zip(&[
        ("main.py", "def handler(e, c):\n    return 'v2'\n"),
        ("requirements.txt", "this-package-does-not-exist-sless==0.0.1\n"),
    ]);
    let (s, b) = server.upload("keep", bad).await;
    assert_eq!((s, b["version"].clone()), (202, json!(2)));
    let v = server.wait_version("keep", 2).await;
    assert_eq!(v["phase"], "Failed", "{v}");
    let (_, f) = server.get("keep").await;
    assert_eq!(f["active_version"], 1);
    assert_eq!(f["status"]["phase"], "Ready");
    let msg = f["status"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("version 2 failed") && msg.contains("this-package-does-not-exist"), "{msg}");
    let conds = f["status"]["conditions"].as_array().expect("conditions");
    assert!(conds.iter().any(|c| c["type"] == "BuildSucceeded" && c["status"] == "False"), "{conds:?}");
    let (s, _, b) = server.invoke("keep", "GET", "", None).await;
    assert_eq!((s, b), (200, json!("v1")));
    let (s, _, log) = server.send(server.http.get(server.api("/keep/versions/2/build-log"))).await;
    assert_eq!(s, 200);
    assert!(log.as_str().unwrap_or_default().contains("pip install"), "{log}");

    // A good version 3, then a rollback to version 1; a failed version cannot be rolled back to.
    server.upload("keep", zip(&[("main.py", "def handler(e, c):\n    return 'v3'\n")])).await;
    assert_eq!(server.wait_version("keep", 3).await["phase"], "Ready");
    assert_eq!(server.invoke("keep", "GET", "", None).await.2, json!("v3"));
    let rollback = |v: u64| server.http.post(server.api("/keep/rollback")).json(&json!({ "version": v }));
    let (s, _, b) = server.send(rollback(2)).await;
    assert_eq!((s, b["field"].clone()), (400, json!("version")), "{b}");
    let (s, _, b) = server.send(rollback(1)).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(server.wait_version("keep", 1).await["phase"], "Ready");
    assert_eq!(server.invoke("keep", "GET", "", None).await.2, json!("v1"));
}

#[tokio::test]
async fn cli_deploy_of_a_broken_function_exits_non_zero_with_the_build_log_tail() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.py"), "def handler(e, c):\n    return 1\n").expect("write");
    std::fs::write(dir.path().join("requirements.txt"), "no-such-package-for-sless-tests==9.9.9\n").expect("write");
    let out = server.cli(&["deploy", dir.path().to_str().expect("utf8"), "--name", "broken"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken version 1 failed to build") && err.contains("no-such-package-for-sless-tests"),
        "{err}"
    );
}

#[tokio::test]
async fn the_same_bytes_are_not_a_new_version() {
    let server = Server::start();
    let code = zip(&[("index.js", "exports.handler = async () => 1;")]);
    server
        .deploy("same", "nodejs20", "index.handler", &[("index.js", "exports.handler = async () => 1;")], json!({}))
        .await;
    let (s, b) = server.upload("same", code.clone()).await;
    assert_eq!(s, 202);
    assert_eq!(
        (b["version"].clone(), b["created"].clone(), b["phase"].clone()),
        (json!(1), json!(false), json!("Ready"))
    );
    let (_, _, versions) = server.send(server.http.get(server.api("/same/versions"))).await;
    assert_eq!(versions["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn env_changes_reach_new_instances_and_the_server_environment_does_not_leak() {
    let server = Server::start();
    let code = "import os\ndef handler(e, c):\n    return {k: os.environ.get(k) for k in ['GREETING', 'SLESS_ADMIN_TOKEN', 'SLESS_FUNCTION_NAME', 'CARGO']}\n";
    server.deploy("envy", "python3.11", "main.handler", &[("main.py", code)], json!({"env": {"GREETING": "a"}})).await;
    let (_, _, b) = server.invoke("envy", "GET", "", None).await;
    assert_eq!(b, json!({"GREETING": "a", "SLESS_ADMIN_TOKEN": null, "SLESS_FUNCTION_NAME": "envy", "CARGO": null}));
    let patch = server
        .http
        .patch(server.api("/envy"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"env":{"GREETING":"b"}}"#);
    assert_eq!(server.send(patch).await.0, 200);
    let (_, _, b) = server.invoke("envy", "GET", "", None).await;
    assert_eq!(b["GREETING"], "b");
}

#[tokio::test]
async fn a_restarted_server_keeps_functions_and_versions_and_serves_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &[]);
    server
        .deploy("p", "python3.11", "main.handler", &[("main.py", "def handler(e, c):\n    return 'py'\n")], json!({}))
        .await;
    server
        .deploy("n", "nodejs20", "index.handler", &[("index.js", "exports.handler = async () => 'js';")], json!({}))
        .await;
    server.upload("n", zip(&[("index.js", "exports.handler = async () => 'js2';")])).await;
    assert_eq!(server.wait_version("n", 2).await["phase"], "Ready");
    assert_eq!(server.invoke("p", "GET", "", None).await.2, json!("py"));
    assert!(server.stop().success());

    let server = Server::start_in(dir.path(), &[]);
    let (_, _, list) = server.send(server.http.get(server.api(""))).await;
    let names: Vec<_> = list["items"].as_array().expect("items").iter().map(|f| f["name"].clone()).collect();
    assert_eq!(names, [json!("n"), json!("p")]);
    let (_, _, versions) = server.send(server.http.get(server.api("/n/versions"))).await;
    assert_eq!(versions["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(server.invoke("p", "GET", "", None).await.2, json!("py"));
    assert_eq!(server.invoke("n", "GET", "", None).await.2, json!("js2"));
}

#[tokio::test]
async fn a_bad_entrypoint_patch_fails_calls_until_it_is_patched_back() {
    let server = Server::start();
    server
        .deploy("ep", "python3.11", "main.handler", &[("main.py", "def handler(e, c):\n    return 'ok'\n")], json!({}))
        .await;
    let patch = |ep: &str| {
        server
            .http
            .patch(server.api("/ep"))
            .header("content-type", "application/merge-patch+json")
            .body(json!({"entrypoint": ep}).to_string())
    };
    assert_eq!(server.send(patch("mian.handler")).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, f) = server.get("ep").await;
        if f["status"]["phase"] == "Failed" {
            assert_eq!(f["active_version"], 1, "the version stays active: {f}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{f}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (s, h, b) = server.invoke("ep", "GET", "", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("Runtime.ImportModuleError")), "{b}");
    assert_eq!(h["x-function-error"], "true");

    assert_eq!(server.send(patch("main.handler")).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.get("ep").await.1["status"]["phase"] != "Ready" {
        assert!(std::time::Instant::now() < deadline, "never Ready again");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(server.invoke("ep", "GET", "", None).await.2, json!("ok"));
}

/// After a clean stop the database file alone holds everything (its write-ahead log is
/// checkpointed), and a missing or empty database next to stored code is a start error, not
/// a silently empty platform.
#[tokio::test]
async fn regression_a_clean_stop_checkpoints_and_an_empty_database_beside_code_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &[]);
    let main = "def handler(event, context):\n    return 'kept'\n";
    server.deploy("keep", "python3.11", "main.handler", &[("main.py", main)], json!({})).await;
    assert!(server.stop().success(), "{}", server.log());
    let wal = dir.path().join("sless.db-wal");
    assert!(std::fs::metadata(&wal).map_or(true, |m| m.len() == 0), "the WAL is checkpointed");

    // The database file alone, copied elsewhere with the rest of the folder but no WAL.
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in walkdir::WalkDir::new(dir.path()).into_iter().filter_map(Result::ok) {
        let rel = entry.path().strip_prefix(dir.path()).expect("inside");
        let name = rel.to_string_lossy();
        if name.starts_with("sless.db-") || name == "lock" || name.starts_with("tmp") {
            continue;
        }
        let to = copy.path().join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&to).expect("mkdir");
        } else if entry.file_type().is_file() {
            std::fs::copy(entry.path(), &to).expect("copy");
        }
    }
    let again = Server::start_in(copy.path(), &[]);
    let (s, f) = again.get("keep").await;
    assert_eq!((s, f["status"]["phase"].as_str()), (200, Some("Ready")), "{f}");
    drop(again);

    // An empty database file beside the archives and builds: refused, naming both.
    std::fs::write(copy.path().join("sless.db"), b"").expect("truncate");
    let _ = std::fs::remove_file(copy.path().join("sless.db-wal"));
    let _ = std::fs::remove_file(copy.path().join("sless.db-shm"));
    let out = std::process::Command::new(common::bin())
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(copy.path())
        .env("SLESS_ADMIN_TOKEN", common::TOKEN)
        .env("SLESS_CONFIG_DIR", copy.path().join("config"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("missing or empty") && err.contains("holds code"), "{err}");
}

/// A server killed (SIGKILL) mid-build left the build's npm/pip running, re-parented to init,
/// beside the restarted server's own build of the same version, and its `.tmp-*` folder behind.
/// The next start kills the left-over build step's process group and removes the folder.
#[tokio::test]
async fn regression_a_build_left_by_a_killed_server_is_killed_at_the_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), &[]);
    let (s, b) = server.create(json!({"name": "slow", "runtime": "nodejs20", "entrypoint": "index.handler"})).await;
    assert_eq!(s, 201, "{b}");
    // npm runs the package's own preinstall script: a build step that takes its time.
    let package = r#"{"name": "slow", "version": "1.0.0", "scripts": {"preinstall": "sleep 30"}}"#;
    let code = "exports.handler = async () => 'built';\n";
    let (s, b) = server.upload("slow", zip(&[("index.js", code), ("package.json", package)])).await;
    assert_eq!(s, 202, "{b}");
    let running = dir.path().join("builds").join(".running");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let pid: i32 = loop {
        let found = std::fs::read_dir(&running)
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()));
        if let Some(pid) = found {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "no build step registered");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let tmp_folders = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir.path().join("builds").join("nodejs20"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".tmp-")))
            .collect()
    };
    let left = tmp_folders();
    assert_eq!(left.len(), 1, "{left:?}");
    // Running, not a zombie waiting to be reaped by whoever adopted it.
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
            .unwrap_or(false)
    };
    drop(server); // SIGKILL: nothing of the server runs its clean-up
    assert!(alive(pid), "the build step outlives a killed server (re-parented)");

    let again = Server::start_in(dir.path(), &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) {
        assert!(std::time::Instant::now() < deadline, "the left-over build step {pid} still runs");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!left[0].exists(), "its unfinished folder is removed");
    drop(again);
}

/// A Lambda-style handler under another name used to fail with the missing attribute only;
/// the build's message now names the entrypoint to set.
#[tokio::test]
async fn regression_a_missing_handler_names_the_entrypoint_to_set() {
    let server = Server::start();
    let (s, b) = server.create(json!({"name": "lam", "runtime": "python3.11", "entrypoint": "handler.handler"})).await;
    assert_eq!(s, 201, "{b}");
    let (s, up) =
        server.upload("lam", zip(&[("handler.py", "def lambda_handler(event, context):\n    return 1\n")])).await;
    assert_eq!(s, 202, "{up}");
    let v = server.wait_version("lam", 1).await;
    assert_eq!(v["phase"], "Failed", "{v}");
    let (_, f) = server.get("lam").await;
    let message = f["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sless deploy --entrypoint handler.lambda_handler"), "{message}");
}

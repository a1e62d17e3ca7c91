//! The CLI commands for triggers, jobs, invocations and logs, and deploy corner cases,
//! run against the real server.

mod common;

use common::Server;
use serde_json::{Value, json};

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status,
        out(o),
        String::from_utf8_lossy(&o.stderr)
    );
    out(o)
}

#[tokio::test]
async fn triggers_jobs_invocations_and_logs_through_the_cli() {
    let server = Server::start();
    ok(&server.cli(&["deploy", "examples/hello-python", "--name", "hello"]));

    let url = ok(&server.cli(&["trigger", "create", "hello-web", "--function", "hello", "--http"]));
    assert_eq!(url.trim(), format!("{}/fn/default/hello", server.url));
    let r = server.http.get(format!("{}?name=Cli", url.trim())).send().await.expect("public call");
    assert_eq!(r.json::<Value>().await.expect("json"), json!({"message": "Hello, Cli!"}));
    let table = ok(&server.cli(&["trigger", "list"]));
    assert!(table.starts_with("NAME") && table.contains("hello-web") && table.contains("http"), "{table}");
    ok(&server.cli(&["trigger", "disable", "hello-web"]));
    let t: Value =
        serde_json::from_str(&ok(&server.cli(&["trigger", "get", "hello-web", "-o", "json"]))).expect("json");
    assert_eq!(t["enabled"], false);
    let dup = server.cli(&["trigger", "create", "again", "--function", "hello", "--http"]);
    assert!(!dup.status.success(), "a second http trigger is refused");

    ok(&server.cli(&["job", "create", "greet", "--function", "hello", "--run-id", "0"]));
    let run = ok(&server.cli(&["job", "run", "greet", "--wait"]));
    assert!(run.contains("Succeeded") || run.contains("succeeded"), "{run}");
    let j: Value = serde_json::from_str(&ok(&server.cli(&["job", "get", "greet", "-o", "json"]))).expect("json");
    assert_eq!((j["run_id"].clone(), j["status"]["last_run"]["run_id"].clone()), (json!(1), json!(1)));
    // Regression: a run without --wait printed the previous run's phase as if it were this one's.
    let again = server.cli(&["job", "run", "greet"]);
    ok(&again);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("run_id 2 requested") && !said.contains("Succeeded"), "{said}");

    // Records are written in the background: poll until the job's call is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let table = loop {
        let table = ok(&server.cli(&["invocations", "hello"]));
        if table.contains("job") {
            break table;
        }
        assert!(std::time::Instant::now() < deadline, "{table}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(table.starts_with("ID") && table.contains("http"), "{table}");
    let records: Value = serde_json::from_str(&ok(&server.cli(&["invocations", "hello", "-o", "json"]))).expect("json");
    let id = records["items"][0]["id"].as_str().expect("id").to_string();
    let one = ok(&server.cli(&["invocation", "get", &id]));
    assert!(one.contains(&id), "{one}");

    ok(&server.cli(&["deploy", "examples/quickstart"]));
    // hello-py prints nothing on a plain call; the command works on an empty log.
    ok(&server.cli(&["logs", "hello-py", "--tail", "10"]));
    ok(&server.cli(&["trigger", "delete", "hello-web"]));
    ok(&server.cli(&["job", "delete", "greet"]));
    assert!(!ok(&server.cli(&["job", "list", "-o", "json"])).contains("greet"));
}

#[tokio::test]
async fn parallel_first_deploys_of_one_function_all_succeed() {
    let server = Server::start();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(common::bin())
                .args(["deploy", "examples/hello-node", "--name", "racer"])
                .current_dir(common::repo())
                .env("SLESS_URL", &server.url)
                .env("SLESS_TOKEN", common::TOKEN)
                .env("SLESS_CONFIG_DIR", server.data.join("cli-config"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("deploy")
        })
        .collect();
    for run in runs {
        ok(&run.wait_with_output().expect("wait"));
    }
    assert_eq!(server.invoke("racer", "GET", "", None).await.0, 200);
}

#[tokio::test]
async fn a_deploy_whose_upload_is_rejected_leaves_no_function() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.py"), "def handler(e, c):\n    return 1\n").expect("write");
    let o = server.cli(&[
        "deploy",
        dir.path().to_str().expect("utf8"),
        "--name",
        "orphan",
        "--runtime",
        "python3.11",
        "--entrypoint",
        "missing.handler",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.py"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.get("orphan").await.0, 404);
}

#[tokio::test]
async fn a_saved_token_is_not_sent_to_another_server() {
    let a = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".sless")).expect("mkdir");
    std::fs::write(
        dir.path().join(".sless/client.json"),
        json!({"url": "http://127.0.0.1:1", "token": "not-the-token"}).to_string(),
    )
    .expect("write");
    let o = std::process::Command::new(common::bin())
        .args(["fn", "list"])
        .current_dir(dir.path())
        .env("SLESS_URL", &a.url)
        .env_remove("SLESS_TOKEN")
        .env("SLESS_CONFIG_DIR", dir.path().join("none"))
        .output()
        .expect("run");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no token"), "the saved token of another server was not used: {err}");
}

#[tokio::test]
async fn logs_follow_prints_a_line_while_the_call_still_runs() {
    use std::io::BufRead;
    let server = Server::start();
    let code = "import time\ndef handler(event, context):\n    print('hello from the function')\n    time.sleep(5)\n    return 'done'\n";
    server.deploy("tail", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 10})).await;
    let mut follow = std::process::Command::new(common::bin())
        .args(["logs", "tail", "-f", "--tail", "0"])
        .env("SLESS_URL", &server.url)
        .env("SLESS_TOKEN", common::TOKEN)
        .env("SLESS_CONFIG_DIR", server.data.join("cli-config"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("logs -f");
    let stdout = follow.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await; // let it connect
    let call = tokio::spawn({
        let (http, url) = (server.http.clone(), server.api("/tail/invoke"));
        async move { http.get(url).bearer_auth(common::TOKEN).send().await.map(|r| r.status().as_u16()) }
    });
    let line =
        tokio::task::spawn_blocking(move || rx.recv_timeout(std::time::Duration::from_secs(20))).await.expect("join");
    let line = line.expect("logs -f printed a line");
    assert!(line.contains("hello from the function"), "{line}");
    assert!(!call.is_finished(), "the line came while the call was still running");
    assert_eq!(call.await.expect("join").expect("call"), 200);
    let _ = follow.kill();
    let _ = follow.wait();
}

/// `sless job run` at the largest `run_id` says so instead of wrapping to 0 (which would
/// skip the job).
#[tokio::test]
async fn regression_job_run_at_u64_max_does_not_wrap() {
    let server = Server::start();
    let (s, b) = server.create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 201, "{b}");
    let max = u64::MAX.to_string();
    ok(&server.cli(&["job", "create", "top", "--function", "f", "--run-id", &max]));
    let run = server.cli(&["job", "run", "top"]);
    assert!(!run.status.success(), "{}", out(&run));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("largest run_id"), "{err}");
    let j: Value = serde_json::from_str(&ok(&server.cli(&["job", "get", "top", "-o", "json"]))).expect("json");
    assert_eq!(j["run_id"].to_string(), max, "unchanged");
}

/// `sless server --help` lists the server's own options and the variables it reads; client
/// options are refused there instead of being ignored (`server --token X` used to start a
/// server whose token was not X).
#[test]
fn regression_server_help_lists_only_its_own_options() {
    let help = std::process::Command::new(common::bin()).args(["server", "--help"]).output().expect("help");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{text}");
    for own in ["--listen", "--data-dir", "SLESS_DATABASE_URL", "SLESS_ADMIN_TOKEN"] {
        assert!(text.contains(own), "{own} missing from:\n{text}");
    }
    for client in ["--url", "--token", "--namespace"] {
        assert!(!text.contains(client), "{client} in server help:\n{text}");
    }
    let refused = std::process::Command::new(common::bin())
        .args(["server", "--token", "0123456789abcdef", "--listen", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("unexpected argument '--token'"));
    // Client commands still take them, before or after a subcommand.
    let list = std::process::Command::new(common::bin())
        .args(["fn", "--url", "http://127.0.0.1:1", "list", "--token", "x"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&list.stderr);
    assert!(!err.contains("unexpected argument"), "{err}");
}

/// A too-short `SLESS_ADMIN_TOKEN` is a start error before anything is set up (no data folder
/// is created).
#[test]
fn regression_a_short_admin_token_fails_the_start_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = std::process::Command::new(common::bin())
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("SLESS_ADMIN_TOKEN", "short")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16 characters"));
    assert!(!data.exists(), "nothing set up");
}

/// A server on another address than the default leaves the CLI's saved connection alone (every
/// server used to overwrite it, so the CLI then talked to one that was gone), and a start that
/// fails to bind creates no data folder.
#[tokio::test]
async fn regression_a_throwaway_server_does_not_overwrite_the_saved_connection() {
    let server = Server::start();
    // `Server::start` runs on port 0 with SLESS_CONFIG_DIR set to data/config.
    assert!(!server.data.join("config").join("client.json").exists(), "port 0 is not the default address");
    assert!(server.data.join("client.json").exists(), "the data folder's own copy is written");
    let taken = server.url.trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = std::process::Command::new(common::bin())
        .args(["server", "--listen", &taken, "--data-dir"])
        .arg(&data)
        .env("SLESS_ADMIN_TOKEN", common::TOKEN)
        .env("SLESS_CONFIG_DIR", dir.path().join("config"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!data.exists(), "a failed start sets nothing up");
    assert!(!dir.path().join("config").exists(), "nor saves a connection");
}

/// The CLI rolls back, changes settings and env, and sets every spec field at deploy (users
/// fell back to curl, and a PUT without `env` wiped env).
#[tokio::test]
async fn regression_the_cli_rolls_back_updates_settings_and_env() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let code = |text: &str| {
        let body = format!("def handler(event, context):\n    return {{'statusCode': 200, 'body': '{text}'}}\n");
        std::fs::write(dir.path().join("main.py"), body).expect("write");
    };
    let path = dir.path().to_str().expect("path");
    code("one");
    ok(&server.cli(&[
        "deploy",
        path,
        "--name",
        "f",
        "--concurrency",
        "4",
        "--max-instances",
        "2",
        "--idle-timeout",
        "60",
        "--memory",
        "256",
        "-e",
        "A=1",
    ]));
    code("two");
    ok(&server.cli(&["deploy", path, "--name", "f"]));
    let f: Value = serde_json::from_str(&ok(&server.cli(&["fn", "get", "f", "-o", "json"]))).expect("json");
    assert_eq!(
        (
            &f["concurrency"],
            &f["max_instances"],
            &f["idle_timeout_sec"],
            &f["memory_mb"],
            &f["env"],
            &f["active_version"]
        ),
        (&json!(4), &json!(2), &json!(60), &json!(256), &json!({"A": "1"}), &json!(2)),
        "a second deploy without flags keeps the settings"
    );
    assert_eq!(ok(&server.cli(&["invoke", "f"])).trim(), "two");

    ok(&server.cli(&["rollback", "f", "1"]));
    assert_eq!(ok(&server.cli(&["invoke", "f"])).trim(), "one");

    ok(&server.cli(&["fn", "update", "f", "--max-instances", "default", "--timeout", "5", "--disable"]));
    let f: Value = serde_json::from_str(&ok(&server.cli(&["fn", "get", "f", "-o", "json"]))).expect("json");
    assert_eq!(
        (&f["max_instances"], &f["timeout_sec"], &f["enabled"], &f["concurrency"]),
        (&Value::Null, &json!(5), &json!(false), &json!(4))
    );
    assert!(!server.cli(&["invoke", "f"]).status.success(), "disabled");
    ok(&server.cli(&["fn", "update", "f", "--enable"]));
    let bad = server.cli(&["fn", "update", "f"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("name a setting to change"));
    let bad = server.cli(&["fn", "update", "f", "--memory", "1"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("memory_mb"), "the server's field error is shown");

    ok(&server.cli(&["env", "set", "f", "B=2", "C=x=y"]));
    assert_eq!(ok(&server.cli(&["env", "list", "f"])), "A=1\nB=2\nC=x=y\n");
    ok(&server.cli(&["env", "unset", "f", "A", "C"]));
    assert_eq!(ok(&server.cli(&["env", "list", "f"])), "B=2\n");
    let bad = server.cli(&["env", "unset", "f", "NOPE"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no environment variable \"NOPE\""));
    let bad = server.cli(&["env", "set", "ghost", "A=1"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("function \"ghost\" not found"));
    assert_eq!(ok(&server.cli(&["invoke", "f"])).trim(), "one", "env changes keep the active version");
}

/// `sless invocation ID` is `sless invocation get ID` (it had to be spelled out), and the
/// connection flags work before either form.
#[tokio::test]
async fn regression_invocation_id_is_shorthand_for_invocation_get() {
    let server = Server::start();
    let code = "def handler(event, context):\n    print('seen')\n    return {'statusCode': 200, 'body': 'ok'}\n";
    server.deploy("f", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (status, headers, _) = server.invoke("f", "GET", "/", None).await;
    assert_eq!(status, 200);
    let id = headers["x-request-id"].to_str().expect("id").to_string();
    // Records are written in batches: wait until this one is readable.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.client.get_invocation(&id).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "record {id} never written");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let short = ok(&server.cli(&["invocation", &id]));
    assert!(short.contains(&id) && short.contains("seen"), "{short}");
    let long = ok(&server.cli(&["invocation", "--url", &server.url, "get", &id]));
    assert_eq!(short, long);
    let json_out: Value = serde_json::from_str(&ok(&server.cli(&["invocation", &id, "-o", "json"]))).expect("json");
    assert_eq!(json_out["id"], json!(id));
    let none = server.cli(&["invocation"]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("name the invocation"));
}

/// A stop with `sless logs -f` connected took ≈ 42 s (the follower's stream held the drain
/// to its 30 s timeout, then the recorder waited 10 s more) and the follower died with a
/// chunked-encoding error. Now the stream ends cleanly at the stop signal.
#[tokio::test]
async fn regression_a_log_follower_neither_holds_the_stop_nor_breaks() {
    use std::io::BufRead;
    let mut server = Server::start();
    let code = "def handler(event, context):\n    print('hello from the function')\n    return 'ok'\n";
    server.deploy("f", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let mut follower = std::process::Command::new(common::bin())
        .args(["logs", "f", "-f"])
        .env("SLESS_URL", &server.url)
        .env("SLESS_TOKEN", common::TOKEN)
        .env("SLESS_CONFIG_DIR", server.data.join("cli-config"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sless logs -f");
    let mut lines = std::io::BufReader::new(follower.stdout.take().expect("stdout")).lines();
    // The follower is connected once it prints a line of a call made after it started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    'seen: loop {
        assert!(std::time::Instant::now() < deadline, "the follower printed nothing");
        assert_eq!(server.invoke("f", "GET", "/", None).await.0, 200);
        for line in lines.by_ref() {
            if line.expect("line").contains("hello from the function") {
                break 'seen;
            }
        }
    }
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    let log = server.log();
    assert!(!log.contains("still in flight") && !log.contains("still unwritten"), "{log}");
    let out = follower.wait_with_output().expect("follower");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the follower failed: {stderr}");
    assert!(stderr.contains("the server closed the log stream"), "{stderr}");
}

/// `sless invoke --payload` is raw invocation (docs/writing-functions.md, "Raw invocation"):
/// the JSON is the event, the return value comes back as JSON; a body that is not JSON is
/// refused by the CLI, and by the API with 400 naming `body`.
#[tokio::test]
async fn invoke_payload_sends_the_json_as_the_event_itself() {
    let server = Server::start();
    let code = "def handler(event, context):\n    return {'sum': event['a'] + event['b'], 'keys': sorted(event)}\n";
    server.deploy("adder", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let printed = ok(&server.cli(&["invoke", "adder", "--payload", r#"{"a": 2, "b": 3}"#]));
    assert_eq!(serde_json::from_str::<Value>(printed.trim()).expect("json"), json!({"sum": 5, "keys": ["a", "b"]}));
    let refused = server.cli(&["invoke", "adder", "--payload", "{not json"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("--payload is not JSON"), "{stderr}");
    let url = server.api("/adder/invoke?integration=raw");
    let (s, _, problem) = server.send(server.http.post(url).body("{not json")).await;
    assert_eq!((s, &problem["field"]), (400, &json!("body")), "{problem}");
}

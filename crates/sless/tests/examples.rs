//! Every example deployed through the CLI and through the API, called over HTTP; `sless up`
//! with the quickstart and its graceful shutdown.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Server, TOKEN, processes_mentioning, repo, zip_dir};
use serde_json::{Value, json};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[tokio::test]
async fn hello_examples_deploy_and_answer_through_the_cli() {
    let server = Server::start();
    for (example, name) in [("hello-python", "hello-python"), ("hello-node", "hello-node")] {
        let out = server.cli(&["deploy", &format!("examples/{example}"), "--env", "GREETING=Hi"]);
        assert_ok(&out);
        assert!(stdout(&out).contains(&format!("/functions/{name}/invoke")), "{}", stdout(&out));
        let out = server.cli(&["invoke", name, "--path", "/?name=Ada"]);
        assert_ok(&out);
        assert_eq!(json_of(&out), json!({"message": "Hi, Ada!"}), "{example}");
        let (status, headers, body) = server.invoke(name, "GET", "", None).await;
        assert_eq!((status, body), (200, json!({"message": "Hi, world!"})));
        assert_eq!(headers["content-type"], "application/json");
    }
    let out = server.cli(&["fn", "list"]);
    assert_ok(&out);
    let table = stdout(&out);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("hello-node") && table.contains("hello-python") && table.contains("Ready"), "{table}");
    let out = server.cli(&["versions", "hello-python", "-o", "json"]);
    assert_ok(&out);
    assert_eq!(json_of(&out)["items"][0]["phase"], "Ready");
    // Deploying the same folder again builds nothing: still version 1.
    let out = server.cli(&["deploy", "examples/hello-python", "--env", "GREETING=Hi"]);
    assert_ok(&out);
    let (_, f) = server.get("hello-python").await;
    assert_eq!(f["active_version"], 1, "{f}");
    // A folder with a sless.toml deploys every function it declares.
    let out = server.cli(&["deploy", "examples/quickstart"]);
    assert_ok(&out);
    assert!(stdout(&out).contains("hello-py") && stdout(&out).contains("hello-js"), "{}", stdout(&out));
    let (status, _, body) = server.invoke("hello-js", "GET", "?name=Ada", None).await;
    assert_eq!((status, body), (200, json!({"message": "Hi, Ada!", "runtime": "node"})));
    let out = server.cli(&["fn", "delete", "hello-node"]);
    assert_ok(&out);
    assert_eq!(server.get("hello-node").await.0, 404);
}

#[tokio::test]
async fn examples_with_dependencies_are_built_and_answer() {
    let server = Server::start();
    let out = server.cli(&["deploy", "examples/simple-python"]);
    assert_ok(&out);
    let out = server.cli(&["invoke", "simple-python", "-d", r#"{"n": 1234567}"#]);
    assert_ok(&out);
    let body = json_of(&out);
    assert_eq!(body["intcomma"], "1,234,567", "{body}");
    assert_eq!(body["intword"], "1.2 million", "{body}");

    let out = server.cli(&["deploy", "examples/simple-node"]);
    assert_ok(&out);
    let (status, _, body) = server.invoke("simple-node", "GET", "?value=2%20days", None).await;
    assert_eq!((status, body["ms"].clone(), body["long"].clone()), (200, json!(172800000), json!("2 days")));
    let log = server.send(server.http.get(server.api("/simple-node/versions/1/build-log"))).await.2;
    assert!(log.as_str().unwrap_or_default().contains("npm ci"), "{log}");
}

#[tokio::test]
async fn notes_example_routes_by_method_and_path_through_the_api() {
    let server = Server::start();
    let (s, b) = server.create(json!({"name": "notes", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = server.upload("notes", zip_dir(&repo().join("examples/notes-python"))).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(server.wait_version("notes", 1).await["phase"], "Ready");
    let (s, _, b) = server.invoke("notes", "GET", "/notes", None).await;
    assert_eq!((s, b), (200, json!({"items": []})));
    let (s, h, b) = server.invoke("notes", "POST", "/notes", Some(r#"{"text": "buy milk"}"#)).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["text"], "buy milk");
    assert_eq!(h["location"], "/notes/1");
    let (s, _, b) = server.invoke("notes", "GET", "/notes/1", None).await;
    assert_eq!((s, b["id"].clone()), (200, json!(1)));
    let (s, _, b) = server.invoke("notes", "POST", "/notes", Some("not json")).await;
    assert_eq!(s, 400, "{b}");
    let (s, _, _) = server.invoke("notes", "DELETE", "/notes/1", None).await;
    assert_eq!(s, 204);
    let (s, _, b) = server.invoke("notes", "GET", "/notes/1", None).await;
    assert_eq!((s, b), (404, json!({"error": "note not found"})));
}

#[tokio::test]
async fn up_deploys_the_quickstart_and_stops_cleanly_without_leftover_processes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(common::bin())
        .args(["up"])
        .arg(repo().join("examples/quickstart"))
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("SLESS_ADMIN_TOKEN")
        .env("SLESS_CONFIG_DIR", dir.path().join("config"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sless up");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut urls = Vec::new();
    let mut token = None;
    for line in lines.by_ref() {
        let line = line.expect("line");
        if let Some(t) = line.strip_prefix("token: ") {
            token = Some(t.to_string());
            break;
        }
        if let Some(url) = line.split_whitespace().find(|w| w.ends_with("/invoke")) {
            urls.push(url.to_string());
        }
    }
    let token = token.expect("up printed the token");
    assert_eq!(urls.len(), 2, "{urls:?}");
    // The token is kept in ./.sless (mode 0600) where the CLI finds it.
    let saved = std::fs::read_to_string(dir.path().join(".sless/admin-token")).expect("admin-token");
    assert_eq!(saved.trim(), token);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join(".sless/admin-token")).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let http = reqwest::Client::new();
    let py = http.get(format!("{}?name=Ada", urls[0])).bearer_auth(&token).send().await.expect("call");
    assert_eq!(py.status(), 200);
    let body: Value = py.json().await.expect("json");
    assert_eq!(body, json!({"message": "Hello, Ada!", "runtime": "python"}));
    let js = http.get(&urls[1]).bearer_auth(&token).send().await.expect("call");
    let body: Value = js.json().await.expect("json");
    assert_eq!(body["runtime"], "node");
    // The CLI run in the same folder finds the server without flags.
    let out = Command::new(common::bin())
        .args(["invoke", "hello-js", "--path", "/?name=Bo"])
        .current_dir(dir.path())
        .env_remove("SLESS_URL")
        .env_remove("SLESS_TOKEN")
        .env("SLESS_CONFIG_DIR", dir.path().join("elsewhere"))
        .output()
        .expect("cli");
    assert_ok(&out);
    assert_eq!(json_of(&out), json!({"message": "Hi, Bo!", "runtime": "node"}));

    let data = dir.path().join(".sless").canonicalize().expect("data dir");
    assert!(!processes_mentioning(&data.display().to_string()).is_empty(), "instances are running");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left = processes_mentioning(&data.display().to_string());
    assert!(left.is_empty(), "processes left behind: {left:?}");
    let _ = TOKEN;
}

#[tokio::test]
async fn every_example_deploys_through_the_api() {
    let server = Server::start();
    let cases = [
        ("hello-python", "python3.11", "main.handler", "?name=Ada", json!({"message": "Hello, Ada!"})),
        ("hello-node", "nodejs20", "index.handler", "?name=Ada", json!({"message": "Hello, Ada!"})),
        ("simple-python", "python3.11", "main.handler", "?n=1000", json!("1,000")),
        ("simple-node", "nodejs20", "index.handler", "?value=1h", json!(3600000)),
        (
            "quickstart/hello-py",
            "python3.11",
            "main.handler",
            "",
            json!({"message": "Hello, world!", "runtime": "python"}),
        ),
        (
            "quickstart/hello-js",
            "nodejs20",
            "index.handler",
            "",
            json!({"message": "Hello, world!", "runtime": "node"}),
        ),
    ];
    for (i, (example, runtime, entrypoint, query, expected)) in cases.iter().enumerate() {
        let name = format!("ex{i}");
        let (s, b) = server.create(json!({"name": name, "runtime": runtime, "entrypoint": entrypoint})).await;
        assert_eq!(s, 201, "{b}");
        let (s, b) = server.upload(&name, zip_dir(&repo().join("examples").join(example))).await;
        assert_eq!(s, 202, "{b}");
        assert_eq!(server.wait_version(&name, 1).await["phase"], "Ready", "{example}: {}", server.log());
        let (s, _, body) = server.invoke(&name, "GET", query, None).await;
        assert_eq!(s, 200, "{example}: {body}");
        let got = match *example {
            "simple-python" => body["intcomma"].clone(),
            "simple-node" => body["ms"].clone(),
            _ => body,
        };
        assert_eq!(&got, expected, "{example}");
    }
}

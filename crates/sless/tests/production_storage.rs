//! `sless server` on the production storage: PostgreSQL (a database of its own per test on
//! the local server) and S3 (a moto server started by the test), configured by flags and
//! the usual AWS_* variables.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, TOKEN, bin, zip};
use serde_json::{Value, json};
use sless_store::testing::{S3Server, TestDatabase};

const HANDLER: &str = "def handler(event, context):\n    return {\"v\": VERSION, \"path\": event[\"path\"]}\n";

fn code(version: u32) -> String {
    HANDLER.replace("VERSION", &version.to_string())
}

/// Calls `name` until it answers 200 (a restarted server may still be starting it).
async fn call_until_ok(server: &Server, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, _, b) = server.invoke(name, "GET", "/hi", None).await;
        if s == 200 {
            return b;
        }
        assert!(Instant::now() < deadline, "{name} never answered: {s} {b}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The function's invocation records (written in batches, so polled).
async fn invocations(server: &Server, name: &str, at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, _, b) = server.send(server.http.get(server.api(&format!("/{name}/invocations")))).await;
        assert_eq!(s, 200, "{b}");
        let items = b["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= at_least {
            return items;
        }
        assert!(Instant::now() < deadline, "only {} records of {name}: {b}", items.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn server_on_postgres_and_s3_keeps_functions_across_restarts() {
    let db = TestDatabase::create().await;
    let s3 = S3Server::start();
    let blob_url = s3.url("prod");
    let args = ["--database-url", db.url.as_str(), "--blob-url", blob_url.as_str(), "--gc-interval-sec", "0"];
    let data = tempfile::tempdir().expect("tempdir");

    let mut server = Server::start_in_env(data.path(), &args, &s3.env());
    let v1 = server.deploy("hello", "python3.11", "main.handler", &[("main.py", &code(1))], json!({})).await;
    assert_eq!(call_until_ok(&server, "hello").await, json!({"v": 1, "path": "/hi"}));
    let sha1 = v1["sha256"].as_str().expect("sha").to_string();
    // The archive and its build log; nothing else.
    assert_eq!(s3.keys(), [format!("prod/archives/{sha1}.zip"), format!("prod/build-logs/default/hello/1-{sha1}.log")]);
    invocations(&server, "hello", 1).await;
    // Nothing of the registry or the archives is in the data folder.
    assert!(!data.path().join("sless.db").exists());
    assert!(!data.path().join("archives").exists());
    assert!(server.stop().success(), "{}", server.log());

    let server = Server::start_in_env(data.path(), &args, &s3.env());
    assert_eq!(call_until_ok(&server, "hello").await, json!({"v": 1, "path": "/hi"}));
    assert_eq!(invocations(&server, "hello", 2).await.len(), 2, "the first server's record is kept");
    let (s, b) = server.get("hello").await;
    assert_eq!((s, b["active_version"].as_u64()), (200, Some(1)), "{b}");

    // A second version, then the collector: with nothing kept beyond the active version,
    // version 1 and its archive go.
    let (s, b) = server.upload("hello", zip(&[("main.py", &code(2))])).await;
    assert_eq!(s, 202, "{b}");
    let v2 = server.wait_version("hello", 2).await;
    assert_eq!(v2["phase"], "Ready", "{v2}");
    assert_eq!(call_until_ok(&server, "hello").await["v"], 2);
    let dry = server.cli(&["gc", "--keep-versions", "0", "--grace-sec", "0", "--dry-run", "-o", "json"]);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    let dry: Value = serde_json::from_slice(&dry.stdout).expect("json");
    assert_eq!((dry["dry_run"].as_bool(), dry["versions"][0]["version"].as_u64()), (Some(true), Some(1)));
    assert_eq!(s3.keys().len(), 4, "two archives, two build logs");
    let out = server.cli(&["gc", "--keep-versions", "0", "--grace-sec", "0"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains(&format!("archives/{sha1}.zip")) && stdout.contains("default/hello 1"), "{stdout}");
    assert!(stderr.contains("deleted 1 versions and 1 archives"), "{stderr}");
    let sha2 = v2["sha256"].as_str().expect("sha");
    assert_eq!(s3.keys(), [format!("prod/archives/{sha2}.zip"), format!("prod/build-logs/default/hello/2-{sha2}.log")]);
    let (s, _, b) = server.send(server.http.get(server.api("/hello/versions"))).await;
    assert_eq!((s, b["items"].as_array().map(Vec::len)), (200, Some(1)), "{b}");
    assert_eq!(call_until_ok(&server, "hello").await["v"], 2);

    // A second server with a data folder of its own, on the same database and archive store,
    // builds what it has not built and serves it.
    let other = tempfile::tempdir().expect("tempdir");
    let second = Server::start_in_env(other.path(), &args, &s3.env());
    assert_eq!(call_until_ok(&second, "hello").await["v"], 2, "{}", second.log());
}

#[tokio::test]
async fn database_lost_later_answers_503_while_calls_go_on() {
    let db = TestDatabase::create().await;
    let s3 = S3Server::start();
    let blob_url = s3.url("p");
    let server = Server::start_with_env(&["--database-url", &db.url, "--blob-url", &blob_url], &s3.env());
    server.deploy("hello", "python3.11", "main.handler", &[("main.py", &code(1))], json!({})).await;
    call_until_ok(&server, "hello").await;

    db.drop_now().await;
    let (s, h, b) = server.send(server.http.get(server.api("/hello"))).await;
    assert_eq!(s, 503, "{b}");
    assert_eq!(b["type"], "https://sless.dev/problems/storage-unavailable");
    assert!(h.contains_key("retry-after"));
    assert!(!b.to_string().contains(&db.url), "{b}");
    let (s, b) = server.upload("hello", zip(&[("main.py", &code(2))])).await;
    assert_eq!(s, 503, "{b}");
    let (s, _) = server.create(json!({"name": "other", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 503);
    let (s, _, _) = server.send(server.http.get(format!("{}/readyz", server.url))).await;
    assert_eq!(s, 503);
    // The instance already running keeps serving (its record cannot be written: counted).
    for _ in 0..3 {
        let (s, _, b) = server.invoke("hello", "GET", "/hi", None).await;
        assert_eq!((s, b), (200, json!({"v": 1, "path": "/hi"})));
    }
}

/// Runs `sless server` expecting it to fail at start; returns its stderr.
fn failed_start(args: &[&str], env: &[(&str, &str)]) -> String {
    let data = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(bin())
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .args(args)
        .envs(env.iter().copied())
        .env("SLESS_ADMIN_TOKEN", TOKEN)
        .env("SLESS_CONFIG_DIR", data.path().join("config"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sless server");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sless server {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert!(!out.status.success(), "sless server {args:?} exited 0");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unreachable_storage_at_start_is_named_and_fails() {
    let err = failed_start(&["--database-url", "postgres://sless:hunter2@127.0.0.1:1/sless"], &[]);
    assert!(err.contains("cannot open the database postgres://sless:***@127.0.0.1:1/sless"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");

    let env = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
        ("AWS_REGION", "us-east-1"),
    ];
    let err = failed_start(&["--blob-url", "s3://archives/sless"], &env);
    assert!(err.contains("cannot reach the archive store s3://archives/sless"), "{err}");

    let err = failed_start(&["--database-url", "mysql://db/sless"], &[]);
    assert!(err.contains("expected sqlite://PATH or postgres://"), "{err}");
    let err = failed_start(&["--blob-url", "ftp://x"], &[]);
    assert!(err.contains("expected file:///ABSOLUTE/PATH or s3://BUCKET/PREFIX"), "{err}");
}

/// A TCP relay to PostgreSQL that can be made to stop answering, as a database host that
/// vanished from the network would: `cut` closes the relayed connections and holds new ones
/// open without a byte (no refusal, no reset: every attempt waits for its timeout).
struct Blackhole {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Blackhole {
    async fn start(upstream: std::net::SocketAddr) -> Blackhole {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let port = listener.local_addr().expect("addr").port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, list) = (cut.clone(), conns.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut down, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    held.push(down);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                list.lock().expect("lock").push(task.abort_handle());
            }
        });
        Blackhole { port, cut, conns }
    }

    fn cut(&self, on: bool) {
        self.cut.store(on, std::sync::atomic::Ordering::SeqCst);
        if on {
            for c in self.conns.lock().expect("lock").drain(..) {
                c.abort();
            }
        }
    }
}

/// With PostgreSQL gone silent, calls used to stall for 10 s about every 11 s (each refresh
/// of a function's route waited out the pool's 5 s acquire timeout twice). Now a call waits
/// for the database at most `LastKnown`'s read budget (250 ms), and not at all while its
/// breaker is open; the bound checked here is far below the 5 s a waiting call would take.
// Multi-threaded: the relay must run while the harness blocks on the server's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_database_that_stops_answering_costs_calls_no_wait() {
    let db = TestDatabase::create().await;
    let upstream = {
        let url = reqwest::Url::parse(&db.url).expect("url");
        let host = url.host_str().expect("host").to_string();
        let port = url.port().unwrap_or(5432);
        tokio::net::lookup_host((host.as_str(), port)).await.expect("resolve").next().expect("address")
    };
    let relay = Blackhole::start(upstream).await;
    let mut relayed = reqwest::Url::parse(&db.url).expect("url");
    relayed.set_host(Some("127.0.0.1")).expect("host");
    relayed.set_port(Some(relay.port)).expect("port");
    let server = Server::start_with(&["--database-url", relayed.as_str()]);
    server.deploy("hello", "python3.11", "main.handler", &[("main.py", &code(1))], json!({})).await;
    let trigger = json!({"name": "web", "function": "hello", "type": "http"});
    let (s, _, b) =
        server.send(server.http.post(format!("{}/v1/namespaces/default/triggers", server.url)).json(&trigger)).await;
    assert_eq!(s, 201, "{b}");
    call_until_ok(&server, "hello").await;
    let public = format!("{}/fn/default/hello/hi", server.url);
    assert_eq!(server.http.get(&public).send().await.expect("call").status().as_u16(), 200);

    relay.cut(true);
    // 8 s: past the pool's acquire timeout (5 s) and several of the breaker's periods (2 s).
    let until = Instant::now() + Duration::from_secs(8);
    let mut slowest = Duration::ZERO;
    let mut calls = 0;
    while Instant::now() < until {
        for url in [None, Some(&public)] {
            let started = Instant::now();
            let status = match url {
                None => server.invoke("hello", "GET", "/hi", None).await.0,
                Some(u) => server.http.get(u).send().await.expect("call").status().as_u16(),
            };
            slowest = slowest.max(started.elapsed());
            calls += 1;
            assert_eq!(status, 200, "call {calls} failed while the database was silent");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(slowest < Duration::from_secs(2), "a call waited {slowest:?} on the silent database ({calls} calls)");
    // What needs the database says so.
    let (s, _, _) = server.send(server.http.get(server.api("/hello"))).await;
    assert_eq!(s, 503);

    relay.cut(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, _, _) = server.send(server.http.get(server.api("/hello"))).await;
        if s == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the database never came back: {s}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    call_until_ok(&server, "hello").await;
}

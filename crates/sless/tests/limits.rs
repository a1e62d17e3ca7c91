//! Limits through the real server: the wait queue and 429, crash back-off and crash loops,
//! memory.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{Value, json};

const SLEEPY: &str = "import time\ndef handler(event, context):\n    time.sleep(1.5)\n    return 'slept'\n";

#[tokio::test]
async fn a_busy_function_with_no_queue_answers_429_and_never_crashes() {
    let server = Server::start_with(&["--max-instances-per-function", "1", "--max-queue-per-function", "0"]);
    server.deploy("busy", "python3.11", "main.handler", &[("main.py", SLEEPY)], json!({})).await;
    let (a, b) = tokio::join!(server.invoke("busy", "GET", "", None), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.invoke("busy", "GET", "", None).await
    });
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 429], "{a:?} {b:?}");
    let throttled = if a.0 == 429 { &a } else { &b };
    assert_eq!(throttled.1["retry-after"], "1");
    assert_eq!(throttled.2["errorType"], "TooManyRequestsException");
    assert!(!throttled.1.contains_key("x-function-error"), "a platform refusal, not a function error");
    assert_eq!(server.invoke("busy", "GET", "", None).await.0, 200);
}

#[tokio::test]
async fn with_a_queue_parallel_calls_to_one_instance_all_complete() {
    let server = Server::start_with(&["--max-instances-per-function", "1"]);
    server.deploy("queued", "python3.11", "main.handler", &[("main.py", SLEEPY)], json!({"timeout_sec": 10})).await;
    let (a, b) = tokio::join!(server.invoke("queued", "GET", "", None), server.invoke("queued", "GET", "", None));
    assert_eq!((a.0, b.0), (200, 200));
}

#[tokio::test]
async fn a_function_that_crashes_at_every_start_is_failed_and_not_restarted_in_a_loop() {
    let server = Server::start();
    // Loads fine for the build's check, dies in every real instance.
    let code =
        "import os\nif os.environ.get('SLESS_CONTROL_FD'):\n    os._exit(7)\ndef handler(e, c):\n    return 'never'\n";
    server.deploy("crashy", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, h, b) = server.invoke("crashy", "GET", "", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("RuntimeExited")), "{b}");
    assert_eq!(h["x-function-error"], "true");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut crashes = 1;
    loop {
        let (_, f) = server.get("crashy").await;
        if f["status"]["phase"] == "Failed" {
            assert!(f["status"]["message"].as_str().unwrap_or_default().contains("crash at start"), "{f}");
            break;
        }
        assert!(Instant::now() < deadline, "never reported: {f}");
        let (s, _, _) = server.invoke("crashy", "GET", "", None).await;
        if s == 502 {
            crashes += 1;
        } else {
            assert_eq!(s, 503, "between crashes the platform holds off");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(crashes, 5, "five starts, then it stops");
    // Now it holds off for a minute: no new instance, a clear 503.
    for _ in 0..5 {
        let (s, h, b) = server.invoke("crashy", "GET", "", None).await;
        assert_eq!((s, b["errorType"].clone()), (503, json!("Function.CrashLoop")), "{b}");
        assert!(h["retry-after"].to_str().expect("retry-after").parse::<u64>().expect("seconds") > 10);
    }
    // A fixed upload starts over.
    server.upload("crashy", common::zip(&[("main.py", "def handler(e, c):\n    return 'fixed'\n")])).await;
    assert_eq!(server.wait_version("crashy", 2).await["phase"], "Ready");
    assert_eq!(server.invoke("crashy", "GET", "", None).await.2, json!("fixed"));
}

/// Fails unless the server limits memory with a cgroup (`build.rs` found one at build time;
/// the server must agree).
fn assert_memory_cgroup(server: &Server) {
    assert!(
        !server.log().contains("mechanism=none"),
        "build.rs found a writable memory cgroup but the server found none:\n{}",
        server.log()
    );
}

#[tokio::test]
#[cfg_attr(no_memory_cgroup, ignore = "no writable memory cgroup here (see crates/sless/build.rs)")]
async fn a_python_instance_over_memory_mb_is_killed_with_out_of_memory_and_others_are_untouched() {
    let server = Server::start();
    assert_memory_cgroup(&server);
    let hog = "import os\nblocks = []\ndef handler(event, context):\n    if event['path'] == '/hog':\n        for _ in range(64):\n            blocks.append(bytearray(16 * 1024 * 1024))\n    return os.environ['TMPDIR']\n";
    server.deploy("hog", "python3.11", "main.handler", &[("main.py", hog)], json!({"memory_mb": 128})).await;
    server.deploy("bystander", "python3.11", "main.handler", &[("main.py", hog)], json!({"memory_mb": 128})).await;
    // An instance answers its temp folder: its name (its pid is 1, of a namespace of its own).
    let (_, _, bystander) = server.invoke("bystander", "GET", "/", None).await;

    let (s, h, b) = server.invoke("hog", "GET", "/hog", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("OutOfMemory")), "{b}");
    assert_eq!(h["x-function-error"], "true");
    assert!(b["errorMessage"].as_str().unwrap_or_default().contains("128 MiB"), "{b}");
    let (s, _, _) = server.invoke("hog", "GET", "/", None).await;
    assert_eq!(s, 200, "the next call runs on a fresh instance");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, _, page) = server.send(server.http.get(server.api("/hog/invocations?status=oom"))).await;
        if page["items"].as_array().is_some_and(|i| i.len() == 1) {
            break;
        }
        assert!(Instant::now() < deadline, "no oom record: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, _, again) = server.invoke("bystander", "GET", "/", None).await;
    assert_eq!(again, bystander, "another function's instance was not touched");
}

/// Node's heap limit (`--max-old-space-size`) applies with or without a memory cgroup.
#[tokio::test]
async fn a_node_instance_over_memory_mb_is_killed_with_out_of_memory() {
    let server = Server::start();
    let node = "const keep = [];\nexports.handler = async (event) => {\n  if (event.path === '/hog') { for (;;) keep.push(new Array(1e6).fill(1)); }\n  return process.pid;\n};\n";
    server.deploy("nodehog", "nodejs20", "index.handler", &[("index.js", node)], json!({"memory_mb": 128})).await;
    let (s, _, b) = server.invoke("nodehog", "GET", "/hog", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("OutOfMemory")), "{b}");
    assert_eq!(server.invoke("nodehog", "GET", "/", None).await.0, 200);
}

/// The `cold_start_kind` of the first call of `function` (waits for its record).
async fn first_cold_start_kind(server: &Server, function: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, _, page) = server.send(server.http.get(server.api(&format!("/{function}/invocations")))).await;
        if let Some(first) = page["items"].as_array().and_then(|items| items.last()) {
            return first["cold_start_kind"].clone();
        }
        assert!(Instant::now() < deadline, "no record for {function}: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[cfg_attr(no_memory_cgroup, ignore = "no writable memory cgroup here (see crates/sless/build.rs)")]
async fn a_warm_pool_process_takes_the_functions_memory_limit_above_and_below_the_default() {
    let server = Server::start();
    assert_memory_cgroup(&server);
    // Allocates (and touches) MiB as asked in the path: /200 → 200 MiB.
    let code = "def handler(event, context):\n    mib = int(event['path'].strip('/') or 0)\n    block = bytearray(mib * 1024 * 1024)\n    return len(block) // (1024 * 1024)\n";
    server.deploy("big", "python3.11", "main.handler", &[("main.py", code)], json!({"memory_mb": 512})).await;
    let (s, _, b) = server.invoke("big", "GET", "/300", None).await;
    assert_eq!((s, b.clone()), (200, json!(300)), "a 512 MiB function may use 300 MiB: {b}");
    assert_eq!(first_cold_start_kind(&server, "big").await, "pool");

    server.deploy("small", "python3.11", "main.handler", &[("main.py", code)], json!({"memory_mb": 64})).await;
    // The pool refills once its process has answered: wait for the replacement.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (s, _, b) = server.invoke("small", "GET", "/100", None).await;
    assert_eq!((s, b["errorType"].clone()), (502, json!("OutOfMemory")), "a 64 MiB function may not use 100: {b}");
    assert!(b["errorMessage"].as_str().unwrap_or_default().contains("64 MiB"), "{b}");
    assert_eq!(first_cold_start_kind(&server, "small").await, "pool");
}

/// The server's resident memory in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A function writing 256 MiB to its stdout descriptor without a newline keeps the server
/// small: lines are cut at 64 KiB as the bytes arrive (the server reached 1.3 GB for 1 GiB).
#[tokio::test]
async fn regression_an_output_flood_without_newlines_keeps_the_server_small() {
    let server = Server::start();
    let code = "import os\ndef handler(event, context):\n    chunk = b'A' * (1024 * 1024)\n    for _ in range(256):\n        os.write(1, chunk)\n    os.write(1, b'\\nafter the flood\\n')\n    return 'flooded'\n";
    server.deploy("flood", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 120})).await;
    let pid = server.child.as_ref().expect("running").id();
    let before = rss_kib(pid);
    let (s, _, b) = server.invoke("flood", "GET", "", None).await;
    assert_eq!((s, b), (200, json!("flooded")));
    let after = rss_kib(pid);
    // 256 MiB went through; the server may grow by buffers, never by the flood.
    assert!(after < before + 64 * 1024, "RSS {before} KiB -> {after} KiB");
    let (s, _, logs) = server.send(server.http.get(server.api("/flood/logs?tail=5"))).await;
    assert_eq!(s, 200);
    let text = logs.to_string();
    assert!(
        text.contains("line cut at 65536 bytes") && text.contains("after the flood"),
        "{}",
        &text[..text.len().min(400)]
    );
    assert!(text.len() < 1024 * 1024, "the logs answer holds cut lines only: {} bytes", text.len());
}

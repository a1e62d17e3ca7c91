//! Scaling through the real server: scale to zero, scale out and down, the server-wide cap,
//! rollouts under load.

mod common;

use std::time::{Duration, Instant};

use common::{Server, zip};
use serde_json::{Value, json};

const PID_AFTER: &str = "import os, time\ndef handler(event, context):\n    time.sleep(float((event['queryStringParameters'] or {}).get('s', '0')))\n    return os.getpid()\n";

fn alive(pid: &Value) -> bool {
    std::path::Path::new(&format!("/proc/{}", pid.as_u64().expect("pid"))).exists()
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_idle_instance_stops_and_the_next_call_starts_one() {
    let server = Server::start_with(&["--idle-timeout-sec", "1"]);
    server.deploy("nap", "python3.11", "main.handler", &[("main.py", PID_AFTER)], json!({})).await;
    let (s, _, first) = server.invoke("nap", "GET", "", None).await;
    assert_eq!(s, 200);
    assert!(alive(&first));
    // A call longer than the idle timeout is never cut.
    let (s, _, same) = server.invoke("nap", "GET", "?s=2", None).await;
    assert_eq!((s, &same), (200, &first));
    wait_until("the idle instance stops", async || !alive(&first)).await;
    let (s, _, second) = server.invoke("nap", "GET", "", None).await;
    assert_eq!(s, 200);
    assert_ne!(second, first);
    let mut kinds = Vec::new();
    wait_until("both calls' records", async || {
        let (_, _, page) = server.send(server.http.get(server.api("/nap/invocations?limit=10"))).await;
        kinds = page["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| r["cold_start_kind"].clone())
            .collect();
        kinds.len() == 3
    })
    .await;
    // Newest first: a cold start after scale to zero, a warm call, the first cold start.
    assert!(!kinds[0].is_null() && kinds[1].is_null() && !kinds[2].is_null(), "{kinds:?}");
}

#[tokio::test]
async fn parallel_slow_calls_scale_out_and_surplus_instances_scale_down() {
    let server = Server::start_with(&["--scale-down-delay-sec", "1"]);
    server.deploy("wide", "python3.11", "main.handler", &[("main.py", PID_AFTER)], json!({"max_instances": 3})).await;
    let calls = (0..3).map(|_| server.invoke("wide", "GET", "?s=1", None));
    let pids: Vec<Value> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|(s, _, b)| {
            assert_eq!(s, 200);
            b
        })
        .collect();
    let distinct: std::collections::BTreeSet<String> = pids.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), 3, "three calls, three instances: {pids:?}");
    // Load falls: two drain and stop, one stays (its idle timeout is 300 s).
    wait_until("surplus instances stop", async || pids.iter().filter(|p| alive(p)).count() == 1).await;
    let (_, _, again) = server.invoke("wide", "GET", "", None).await;
    assert!(pids.contains(&again), "the remaining instance serves");
}

#[tokio::test]
async fn at_the_server_wide_cap_an_idle_instance_of_another_function_makes_room() {
    let server = Server::start_with(&["--max-instances", "1"]);
    server.deploy("one", "python3.11", "main.handler", &[("main.py", PID_AFTER)], json!({})).await;
    server.deploy("two", "python3.11", "main.handler", &[("main.py", PID_AFTER)], json!({})).await;
    let (_, _, one) = server.invoke("one", "GET", "", None).await;
    let (s, _, two) = server.invoke("two", "GET", "", None).await;
    assert_eq!(s, 200);
    assert_ne!(one, two);
    wait_until("the idle instance of `one` was stopped", async || !alive(&one)).await;
    // Both busy at once is more than the cap: the second waits for nothing and gets 429.
    let (a, b) = tokio::join!(server.invoke("one", "GET", "?s=1", None), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.invoke("two", "GET", "", None).await
    });
    assert_eq!(a.0, 200);
    assert_eq!(b.0, 429, "{:?}", b.2);
}

#[tokio::test]
async fn a_rollout_under_continuous_calls_fails_none() {
    let server = Server::start();
    let v = |n: u32| format!("import time\ndef handler(e, c):\n    time.sleep(0.05)\n    return 'v{n}'\n");
    server.deploy("roll", "python3.11", "main.handler", &[("main.py", &v(1))], json!({})).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (http, url, stop) = (server.http.clone(), server.api("/roll/invoke"), stop.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let r = http.get(&url).bearer_auth(common::TOKEN).send().await.expect("call");
                    let status = r.status().as_u16();
                    seen.push((status, r.text().await.unwrap_or_default()));
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, b) = server.upload("roll", zip(&[("main.py", &v(2))])).await;
    assert_eq!(s, 202, "{b}");
    assert_eq!(server.wait_version("roll", 2).await["phase"], "Ready");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut all = Vec::new();
    for c in callers {
        all.extend(c.await.expect("caller"));
    }
    assert!(
        all.iter().all(|(s, _)| *s == 200),
        "a call failed during the rollout: {:?}",
        all.iter().filter(|(s, _)| *s != 200).collect::<Vec<_>>()
    );
    assert!(all.iter().any(|(_, b)| b == "v1") && all.iter().any(|(_, b)| b == "v2"), "both versions served");
    assert_eq!(all.last().map(|(_, b)| b.as_str()), Some("v2"));
}

#[tokio::test]
async fn one_instance_serves_concurrency_calls_at_once() {
    // No queue: a call that found no free slot would get 429.
    let server = Server::start_with(&["--max-queue-per-function", "0"]);
    let spec = json!({"concurrency": 3, "max_instances": 1});
    server.deploy("multi", "python3.11", "main.handler", &[("main.py", PID_AFTER)], spec.clone()).await;
    let node =
        "exports.handler = async (event) => { await new Promise(r => setTimeout(r, 1000)); return process.pid; };";
    server.deploy("multi-js", "nodejs20", "index.handler", &[("index.js", node)], spec).await;
    for name in ["multi", "multi-js"] {
        let calls = (0..3).map(|_| server.invoke(name, "GET", "?s=1", None));
        let answers = futures::future::join_all(calls).await;
        assert!(
            answers.iter().all(|(s, _, _)| *s == 200),
            "{name}: {:?}",
            answers.iter().map(|a| (a.0, a.2.clone())).collect::<Vec<_>>()
        );
        let pids: std::collections::BTreeSet<String> = answers.iter().map(|a| a.2.to_string()).collect();
        assert_eq!(pids.len(), 1, "{name}: one instance served all three: {pids:?}");
    }
}

/// Pids of the processes whose command line mentions `needle`.
fn pids_mentioning(needle: &str) -> std::collections::BTreeSet<u64> {
    common::processes_mentioning(needle).iter().filter_map(|l| l.split(':').next()?.parse().ok()).collect()
}

#[tokio::test]
async fn a_cold_start_specialises_a_warm_pool_process_and_the_pool_refills() {
    let server = Server::start_with(&["--warm-pool-size", "1"]);
    let shims = server.data.join("runtimes").display().to_string();
    server.deploy("pooled", "python3.11", "main.handler", &[("main.py", PID_AFTER)], json!({})).await;
    server
        .deploy(
            "pooled-js",
            "nodejs20",
            "index.handler",
            &[("index.js", "exports.handler = async () => process.pid;")],
            json!({}),
        )
        .await;
    // One generic process per runtime, started with the server.
    let mut warm = std::collections::BTreeSet::new();
    wait_until("the warm pool is up", async || {
        warm = pids_mentioning(&shims);
        warm.len() == 2
    })
    .await;
    let (s, _, pid) = server.invoke("pooled", "GET", "", None).await;
    assert_eq!(s, 200);
    assert!(warm.contains(&pid.as_u64().expect("pid")), "served by a warm-pool process: {pid} not in {warm:?}");
    let (s, _, js_pid) = server.invoke("pooled-js", "GET", "", None).await;
    assert_eq!(s, 200);
    assert!(warm.contains(&js_pid.as_u64().expect("pid")), "{js_pid} not in {warm:?}");
    // Both were taken; the pool starts new generic processes.
    wait_until("the pool refills", async || pids_mentioning(&shims).difference(&warm).count() == 2).await;
    // The record says which kind of cold start it was.
    let mut kind = Value::Null;
    wait_until("the call is recorded", async || {
        let (_, _, page) = server.send(server.http.get(server.api("/pooled/invocations"))).await;
        kind = page["items"][0]["cold_start_kind"].clone();
        !kind.is_null()
    })
    .await;
    assert_eq!(kind, "pool");
}

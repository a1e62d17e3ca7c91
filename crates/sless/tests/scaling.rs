//! Scaling through the real server: scale to zero, scale out and down, the server-wide cap,
//! rollouts under load.

mod common;

use std::time::{Duration, Instant};

use common::{Server, zip};
use serde_json::{Value, json};

/// Sleeps `?s=` seconds and answers its instance (its temp folder: the pid of an instance, pid 1
/// of a namespace of its own, names none; see `common::pids_with_tmpdir`).
const INSTANCE_AFTER: &str = "import os, time\ndef handler(event, context):\n    time.sleep(float((event['queryStringParameters'] or {}).get('s', '0')))\n    return os.environ['TMPDIR']\n";

/// Whether the instance named `instance` (see `INSTANCE_AFTER`) still runs.
fn alive(instance: &Value) -> bool {
    !common::pids_with_tmpdir(instance.as_str().expect("an instance's TMPDIR")).is_empty()
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
    server.deploy("nap", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({})).await;
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
    server
        .deploy("wide", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({"max_instances": 3}))
        .await;
    let calls = (0..3).map(|_| server.invoke("wide", "GET", "?s=1", None));
    let instances: Vec<Value> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|(s, _, b)| {
            assert_eq!(s, 200);
            b
        })
        .collect();
    let distinct: std::collections::BTreeSet<String> = instances.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), 3, "three calls, three instances: {instances:?}");
    // Load falls: two drain and stop, one stays (its idle timeout is 300 s).
    wait_until("surplus instances stop", async || instances.iter().filter(|p| alive(p)).count() == 1).await;
    let (_, _, again) = server.invoke("wide", "GET", "", None).await;
    assert!(instances.contains(&again), "the remaining instance serves");
}

#[tokio::test]
async fn at_the_server_wide_cap_an_idle_instance_of_another_function_makes_room() {
    let server = Server::start_with(&["--max-instances", "1"]);
    server.deploy("one", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({})).await;
    server.deploy("two", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({})).await;
    let (_, _, one) = server.invoke("one", "GET", "", None).await;
    let (s, _, two) = server.invoke("two", "GET", "", None).await;
    assert_eq!(s, 200);
    assert_ne!(one, two);
    wait_until("the idle instance of `one` was stopped", async || !alive(&one)).await;
    // Both busy at once is more than the cap: the second waits for room (the first call's
    // instance, idle once it answers, is stopped for it), as long as its own timeout allows.
    let (a, b) = tokio::join!(server.invoke("one", "GET", "?s=1", None), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let asked = Instant::now();
        (server.invoke("two", "GET", "", None).await, asked.elapsed())
    });
    assert_eq!(a.0, 200);
    assert_eq!(b.0.0, 200, "{:?}", b.0.2);
    assert!(b.1 >= Duration::from_millis(400), "it waited for room: {:?}", b.1);
    // A call whose timeout passes first gets 429.
    server
        .deploy("short", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({"timeout_sec": 1}))
        .await;
    let (a, b) = tokio::join!(server.invoke("one", "GET", "?s=3", None), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.invoke("short", "GET", "", None).await
    });
    assert_eq!(a.0, 200);
    assert_eq!(b.0, 429, "{:?}", b.2);
    assert!(b.2["errorMessage"].as_str().unwrap_or_default().contains("cap of 1"), "{:?}", b.2);
}

#[tokio::test]
async fn parallel_calls_of_several_functions_never_run_more_instances_than_the_cap() {
    let server = Server::start_with(&["--max-instances", "2", "--warm-pool-size", "0"]);
    // Each call returns its instance (its temp folder) and when it ran (Unix ms).
    let code = "import os, time\ndef handler(event, context):\n    start = time.time()\n    time.sleep(0.3)\n    return [os.environ['TMPDIR'], start, time.time()]\n";
    for name in ["a", "b", "c"] {
        server.deploy(name, "python3.11", "main.handler", &[("main.py", code)], json!({"max_instances": 4})).await;
    }
    let calls = (0..9).map(|i| server.invoke(["a", "b", "c"][i % 3], "GET", "", None));
    let answers = futures::future::join_all(calls).await;
    let mut spans = Vec::new();
    for (s, _, b) in &answers {
        assert_eq!(*s, 200, "{b}");
        spans.push((b[0].to_string(), b[1].as_f64().expect("start"), b[2].as_f64().expect("end")));
    }
    // At no call's start were more than 2 distinct processes running calls.
    for (_, start, _) in &spans {
        let running: std::collections::BTreeSet<&str> = spans
            .iter()
            .filter(|(_, s, e)| s <= start && start < e)
            .map(|(instance, _, _)| instance.as_str())
            .collect();
        assert!(running.len() <= 2, "{} processes at once: {spans:?}", running.len());
    }
}

#[tokio::test]
async fn a_spec_change_stops_the_previous_specs_idle_instance() {
    let server = Server::start_with(&["--warm-pool-size", "0"]);
    server
        .deploy(
            "respec",
            "python3.11",
            "main.handler",
            &[("main.py", INSTANCE_AFTER)],
            json!({"idle_timeout_sec": 600}),
        )
        .await;
    let (_, _, old) = server.invoke("respec", "GET", "", None).await;
    let (s, _, b) = server.send(server.http.patch(server.api("/respec")).json(&json!({"env": {"A": "1"}}))).await;
    assert_eq!(s, 200, "{b}");
    // Without waiting for another call.
    wait_until("the previous spec's idle instance stops", async || !alive(&old)).await;
    let (s, _, new) = server.invoke("respec", "GET", "", None).await;
    assert_eq!(s, 200);
    assert_ne!(new, old, "the new spec runs on a new instance");
}

#[tokio::test]
async fn disabling_a_function_lets_running_calls_finish_and_refuses_waiting_ones() {
    let server = Server::start_with(&["--warm-pool-size", "0"]);
    server
        .deploy("stop", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({"max_instances": 1}))
        .await;
    let (_, _, pid) = server.invoke("stop", "GET", "", None).await;
    let started = Instant::now();
    let calls = (0..3).map(|_| async {
        let answer = server.invoke("stop", "GET", "?s=1.5", None).await;
        (answer.0, answer.1, answer.2, started.elapsed())
    });
    let (answers, disabled) = tokio::join!(futures::future::join_all(calls), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.send(server.http.patch(server.api("/stop")).json(&json!({"enabled": false}))).await.0
    });
    assert_eq!(disabled, 200);
    let mut statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 503, 503], "{answers:?}");
    let finished = answers.iter().find(|a| a.0 == 200).expect("the running call");
    assert_eq!(finished.2, pid, "it finished on its instance");
    for refused in answers.iter().filter(|a| a.0 == 503) {
        assert_eq!(refused.2["errorType"], "Function.NotReady", "{:?}", refused.2);
        assert!(refused.3 < finished.3, "refused when disabled, not when the running call ended: {answers:?}");
    }
    wait_until("the instance stops after its last call", async || !alive(&pid)).await;
}

#[tokio::test]
async fn a_dead_warm_pool_process_is_replaced_and_start_time_settings_skip_the_pool() {
    let server = Server::start_with(&["--warm-pool-size", "1"]);
    let shims = server.data.join("runtimes").display().to_string();
    let mut warm = std::collections::BTreeSet::new();
    wait_until("the warm pool is up", async || {
        warm = pids_mentioning(&shims);
        warm.len() == 2
    })
    .await;
    for pid in &warm {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(*pid).expect("pid")),
            nix::sys::signal::SIGKILL,
        )
        .expect("kill");
    }
    wait_until("both are replaced", async || {
        let now = pids_mentioning(&shims);
        now.len() == 2 && now.is_disjoint(&warm)
    })
    .await;
    // PYTHONHASHSEED is read when Python starts: a pool process could not honour it.
    let code = "import os, sys\ndef handler(event, context):\n    return [os.getpid(), sys.flags.hash_randomization]\n";
    let env = json!({"env": {"PYTHONHASHSEED": "0"}});
    server.deploy("seeded", "python3.11", "main.handler", &[("main.py", code)], env).await;
    let (s, _, b) = server.invoke("seeded", "GET", "", None).await;
    assert_eq!(s, 200);
    assert_eq!(b[1], 0, "the seed applies: {b}");
    let mut kind = Value::Null;
    wait_until("the call is recorded", async || {
        let (_, _, page) = server.send(server.http.get(server.api("/seeded/invocations"))).await;
        kind = page["items"][0]["cold_start_kind"].clone();
        !kind.is_null()
    })
    .await;
    assert_eq!(kind, "process");
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
    server.deploy("multi", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], spec.clone()).await;
    let node = "exports.handler = async (event) => { await new Promise(r => setTimeout(r, 1000)); return process.env.TMPDIR; };";
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
    server.deploy("pooled", "python3.11", "main.handler", &[("main.py", INSTANCE_AFTER)], json!({})).await;
    server
        .deploy(
            "pooled-js",
            "nodejs20",
            "index.handler",
            &[("index.js", "exports.handler = async () => process.env.TMPDIR;")],
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
    let host_pid = |instance: &Value| {
        let found = common::pids_with_tmpdir(instance.as_str().expect("an instance's TMPDIR"));
        let [pid] = found[..] else { panic!("one process of {instance}: {found:?}") };
        u64::from(pid)
    };
    let (s, _, instance) = server.invoke("pooled", "GET", "", None).await;
    assert_eq!(s, 200);
    let pid = host_pid(&instance);
    assert!(warm.contains(&pid), "served by a warm-pool process: {pid} not in {warm:?}");
    let (s, _, js_instance) = server.invoke("pooled-js", "GET", "", None).await;
    assert_eq!(s, 200);
    let js_pid = host_pid(&js_instance);
    assert!(warm.contains(&js_pid), "{js_pid} not in {warm:?}");
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

/// Lambda's runtime variables (docs/writing-functions.md, "Environment") are the same whether
/// an instance is a specialised warm-pool process or a new one: the pool process's own
/// environment is replaced at `load`.
#[tokio::test]
async fn lambda_variables_are_set_in_a_specialised_pool_process_as_in_a_new_one() {
    const NAMES: &str = "['AWS_LAMBDA_INITIALIZATION_TYPE', 'AWS_EXECUTION_ENV', 'AWS_REGION', 'TZ', \
                         'LAMBDA_TASK_ROOT', '_HANDLER', 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE', 'GREETING']";
    let server = Server::start_with(&["--warm-pool-size", "1"]);
    let shims = server.data.join("runtimes").display().to_string();
    let py = format!("import os\ndef handler(event, context):\n    return {{n: os.environ.get(n) for n in {NAMES}}}\n");
    let js =
        format!("exports.handler = async () => Object.fromEntries({NAMES}.map((n) => [n, process.env[n] ?? null]));");
    let env = json!({"env": {"GREETING": "hi"}});
    server.deploy("env-pool-py", "python3.11", "main.handler", &[("main.py", &py)], env.clone()).await;
    server.deploy("env-pool-js", "nodejs20", "index.handler", &[("index.js", &js)], env.clone()).await;
    let mut bigger = env.clone();
    bigger["memory_mb"] = json!(256); // the Node pool serves 128 MiB only: a new process
    server.deploy("env-new-js", "nodejs20", "index.handler", &[("index.js", &js)], bigger).await;
    wait_until("the warm pool is up", async || pids_mentioning(&shims).len() == 2).await;
    for (name, kind, exec_env, handler, memory) in [
        ("env-pool-py", "pool", "AWS_Lambda_python3.11", "main.handler", "128"),
        ("env-pool-js", "pool", "AWS_Lambda_nodejs20.x", "index.handler", "128"),
        ("env-new-js", "process", "AWS_Lambda_nodejs20.x", "index.handler", "256"),
    ] {
        let (s, _, body) = server.invoke(name, "GET", "", None).await;
        assert_eq!(s, 200, "{name}: {body}");
        let task_root = body["LAMBDA_TASK_ROOT"].as_str().unwrap_or_default().to_string();
        assert!(task_root.ends_with("/code"), "{name}: {body}");
        assert_eq!(
            body,
            json!({
                "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand", "AWS_EXECUTION_ENV": exec_env,
                "AWS_REGION": "us-east-1", "TZ": ":UTC", "LAMBDA_TASK_ROOT": task_root, "_HANDLER": handler,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory, "GREETING": "hi",
            }),
            "{name}"
        );
        let mut got = Value::Null;
        wait_until("the call is recorded", async || {
            let (_, _, page) = server.send(server.http.get(server.api(&format!("/{name}/invocations")))).await;
            got = page["items"][0]["cold_start_kind"].clone();
            !got.is_null()
        })
        .await;
        assert_eq!(got, kind, "{name}");
    }
}

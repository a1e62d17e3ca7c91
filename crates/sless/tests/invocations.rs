//! Invocation records, logs and metrics through the real server.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use futures::StreamExt;
use serde_json::{Value, json};

async fn list(server: &Server, function: &str, query: &str) -> Value {
    let (s, _, b) = server.send(server.http.get(server.api(&format!("/{function}/invocations?{query}")))).await;
    assert_eq!(s, 200, "{b}");
    b
}

#[tokio::test]
async fn two_hundred_concurrent_calls_make_two_hundred_records() {
    let server = Server::start_with(&["--max-instances-per-function", "4", "--max-queue-per-function", "200"]);
    let code = "def handler(event, context):\n    if event['path'] == '/bad':\n        raise ValueError('bad')\n    print('served', event['path'])\n    return 'ok'\n";
    server.deploy("many", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let calls = (0..200).map(|i| {
        let path = if i % 4 == 0 { "/bad".to_string() } else { format!("/ok{i}") };
        let server = &server;
        async move { server.invoke("many", "GET", &path, None).await.0 }
    });
    let statuses = futures::future::join_all(calls).await;
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 150);
    assert_eq!(statuses.iter().filter(|s| **s == 502).count(), 50);

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut all = Vec::new();
    while all.len() < 200 {
        all.clear();
        let mut cursor: Option<String> = None;
        loop {
            let q = match &cursor {
                Some(c) => format!("limit=70&cursor={c}"),
                None => "limit=70".into(),
            };
            let page = list(&server, "many", &q).await;
            all.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert!(Instant::now() < deadline, "{} records", all.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(all.len(), 200);
    let ids: std::collections::BTreeSet<_> =
        all.iter().map(|r| r["id"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(ids.len(), 200, "unique ids");
    let mut sorted: Vec<_> = all.iter().map(|r| r["id"].as_str().unwrap_or_default().to_string()).collect();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(
        sorted,
        all.iter().map(|r| r["id"].as_str().unwrap_or_default().to_string()).collect::<Vec<_>>(),
        "newest first"
    );
    assert_eq!(
        all.iter().filter(|r| r["outcome"] == "error" && r["error_type"] == "ValueError" && r["status"] == 502).count(),
        50
    );
    assert_eq!(all.iter().filter(|r| r["outcome"] == "ok" && r["status"] == 200).count(), 150);
    assert!(all.iter().all(|r| r["source"] == "invoke" && r["version"] == 1 && r["function"] == "many"));
    assert!(all.iter().any(|r| r["cold_start"] == true) && all.iter().any(|r| r["cold_start"] == false));

    let errors = list(&server, "many", "status=error&limit=1000").await;
    assert_eq!(errors["items"].as_array().map(Vec::len), Some(50));
    let ok = all.iter().find(|r| r["outcome"] == "ok").expect("an ok call");
    let (s, _, one) = server
        .send(server.http.get(format!(
            "{}/v1/namespaces/default/invocations/{}",
            server.url,
            ok["id"].as_str().expect("id")
        )))
        .await;
    assert_eq!(s, 200);
    assert!(
        one["logs"].as_array().expect("logs").iter().any(|l| l.as_str().unwrap_or_default().starts_with("served /ok")),
        "{one}"
    );
    let (s, _, b) = server.send(server.http.get(server.api("/many/invocations?status=fine"))).await;
    assert_eq!((s, b["field"].clone()), (400, json!("status")));

    let metrics =
        server.http.get(format!("{}/metrics", server.url)).send().await.expect("metrics").text().await.expect("text");
    for series in [
        "sless_invocations_total{namespace=\"default\",function=\"many\",trigger=\"invoke\",outcome=\"ok\"} 150",
        "sless_invocations_total{namespace=\"default\",function=\"many\",trigger=\"invoke\",outcome=\"error\"} 50",
        "sless_invocation_duration_seconds_count{namespace=\"default\",function=\"many\"} 200",
        "sless_cold_starts_total{namespace=\"default\",function=\"many\"}",
        "sless_instances{namespace=\"default\",function=\"many\",state=\"idle\"}",
        "sless_builds_total{outcome=\"succeeded\"} 1",
        "sless_build_duration_seconds_count 1",
        "sless_invocation_records_dropped_total 0",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
}

#[tokio::test]
async fn a_line_printed_by_a_function_streams_to_followers_while_it_runs() {
    let server = Server::start();
    let code = "import time\ndef handler(event, context):\n    print('first line', flush=False)\n    time.sleep(4)\n    return 'done'\n";
    server.deploy("chatty", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 10})).await;
    let resp = server
        .http
        .get(server.api("/chatty/logs?follow=true&tail=0"))
        .bearer_auth(common::TOKEN)
        .send()
        .await
        .expect("follow");
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = resp.bytes_stream();
    let call = tokio::spawn({
        let (http, url) = (server.http.clone(), server.api("/chatty/invoke"));
        async move { http.get(url).bearer_auth(common::TOKEN).send().await.map(|r| r.status().as_u16()) }
    });
    let mut seen = String::new();
    while !seen.contains("first line") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("a line arrives")
            .expect("chunk")
            .expect("bytes");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!call.is_finished(), "the line arrived while the call was still running");
    assert!(seen.contains("\"request_id\""), "{seen}");
    assert_eq!(call.await.expect("join").expect("call"), 200);

    let (s, _, recent) = server.send(server.http.get(server.api("/chatty/logs?tail=5"))).await;
    assert_eq!(s, 200);
    assert!(recent["items"].as_array().expect("items").iter().any(|l| l["line"] == "first line"), "{recent}");
}

#[tokio::test]
async fn calls_succeed_while_the_database_is_locked_and_lost_records_are_counted() {
    let server = Server::start();
    server
        .deploy(
            "steady",
            "nodejs20",
            "index.handler",
            &[("index.js", "exports.handler = async () => 'fine';")],
            json!({}),
        )
        .await;
    // Another process holds SQLite's write lock: reads go on (WAL), record writes time out.
    let db = server.data.join("sless.db");
    let mut locker = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time\nc=sqlite3.connect(sys.argv[1],isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\nprint('locked',flush=True)\ntime.sleep(float(sys.argv[2]))\nc.execute('ROLLBACK')\n",
        ])
        .arg(&db)
        .arg("13")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = std::io::BufReader::new(locker.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("locked");
    for _ in 0..5 {
        let (s, _, b) = server.invoke("steady", "GET", "", None).await;
        assert_eq!((s, b), (200, json!("fine")));
    }
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let metrics = server
            .http
            .get(format!("{}/metrics", server.url))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        let dropped = metrics
            .lines()
            .find_map(|l| l.strip_prefix("sless_invocation_records_dropped_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if dropped >= 5 {
            break;
        }
        assert!(Instant::now() < deadline, "drops not counted:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = locker.wait();
    let (s, _, b) = server.invoke("steady", "GET", "", None).await;
    assert_eq!((s, b), (200, json!("fine")));
}

#[tokio::test]
async fn with_no_record_calls_are_counted_but_not_recorded() {
    let server = Server::start_with(&["--no-record"]);
    server
        .deploy(
            "quiet",
            "python3.11",
            "main.handler",
            &[("main.py", "def handler(e, c):\n    return 'ok'\n")],
            json!({}),
        )
        .await;
    for _ in 0..3 {
        assert_eq!(server.invoke("quiet", "GET", "/", None).await.0, 200);
    }
    // Longer than the recorder's flush interval (100 ms): anything queued would be written.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(list(&server, "quiet", "").await["items"], json!([]));
    let metrics =
        server.http.get(format!("{}/metrics", server.url)).send().await.expect("metrics").text().await.expect("text");
    let counted = metrics.lines().find(|l| {
        l.starts_with("sless_invocations_total{") && l.contains("function=\"quiet\"") && l.contains("outcome=\"ok\"")
    });
    assert!(counted.is_some_and(|l| l.ends_with(" 3")), "{metrics}");
}

/// `sless logs` forgot everything at a restart although the invocation records keep the
/// lines: `…/logs` now fills up from the records what the server's memory lacks, without
/// showing a call twice.
#[tokio::test]
async fn regression_logs_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &[]);
    let code = "def handler(event, context):\n    print('line of', event['path'])\n    return 'ok'\n";
    server.deploy("f", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, h, _) = server.invoke("f", "GET", "/before", None).await;
    assert_eq!(s, 200);
    let before_id = h["x-request-id"].to_str().expect("id").to_string();
    server.stop();

    let server = Server::start_in(dir.path(), &[]);
    let lines = server.client.logs("f", 10).await.expect("logs");
    let texts: Vec<(&str, Option<&str>)> = lines.iter().map(|l| (l.line.as_str(), l.request_id.as_deref())).collect();
    assert_eq!(texts.len(), 2, "{lines:?}");
    assert_eq!(texts[0], ("line of /before", Some(before_id.as_str())), "{lines:?}");
    // Lambda's REPORT line closes every call's log.
    let (report, id) = texts[1];
    assert_eq!(id, Some(before_id.as_str()));
    assert!(report.starts_with(&format!("REPORT RequestId: {before_id}\tDuration: ")), "{report}");
    assert!(report.contains(" ms\tBilled Duration: ") && report.contains("\tMemory Size: 128 MB"), "{report}");
    assert!(report.contains("\tInit Duration: "), "the first call was a cold start: {report}");
    if std::fs::read_to_string("/proc/self/status").unwrap_or_default().lines().any(|l| l.starts_with("Uid:\t0\t")) {
        assert!(report.contains("\tMax Memory Used: "), "a root server has memory cgroups: {report}");
    }

    let (s, h, _) = server.invoke("f", "GET", "/after", None).await;
    assert_eq!(s, 200);
    let after_id = h["x-request-id"].to_str().expect("id").to_string();
    // Wait until the new call's record is written too: it must still be shown once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.client.get_invocation(&after_id).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "record never written");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let lines = server.client.logs("f", 10).await.expect("logs");
    let texts: Vec<&str> = lines.iter().map(|l| l.line.as_str()).filter(|l| !l.starts_with("REPORT ")).collect();
    assert_eq!(texts, vec!["line of /before", "line of /after"], "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.line.starts_with("REPORT ")).count(), 2, "one REPORT per call: {lines:?}");
    assert_eq!(server.client.logs("f", 1).await.expect("logs").len(), 1, "tail still holds");
}

/// Every time in an answer (RFC 3339) has the stores' precision, milliseconds: they used to
/// mix nanoseconds (conditions, job runs, log lines) and milliseconds (records).
#[tokio::test]
async fn regression_every_time_has_millisecond_precision() {
    let server = Server::start();
    let code = "def handler(event, context):\n    print('a line')\n    return 'ok'\n";
    server.deploy("f", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, h, _) = server.invoke("f", "GET", "/", None).await;
    assert_eq!(s, 200);
    let id = h["x-request-id"].to_str().expect("id").to_string();
    let ns = format!("{}/v1/namespaces/default", server.url);
    let cron = json!({"name": "c", "function": "f", "type": "cron", "schedule": "@every 1h"});
    assert_eq!(server.send(server.http.post(format!("{ns}/triggers")).json(&cron)).await.0, 201);
    let job = json!({"name": "j", "function": "f", "run_id": 1});
    assert_eq!(server.send(server.http.post(format!("{ns}/jobs")).json(&job)).await.0, 201);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut bodies = Vec::new();
    loop {
        bodies.clear();
        for url in [
            server.api("/f"),
            server.api("/f/versions"),
            server.api("/f/invocations"),
            server.api("/f/logs"),
            format!("{ns}/invocations/{id}"),
            format!("{ns}/triggers/c"),
            format!("{ns}/jobs/j"),
            format!("{}/v1/namespaces", server.url),
        ] {
            let (s, _, b) = server.send(server.http.get(url.clone())).await;
            bodies.push((url, s, b));
        }
        let ran = bodies.iter().any(|(u, _, b)| u.ends_with("/jobs/j") && b["status"]["last_run"].is_object());
        if bodies.iter().all(|(_, s, _)| *s == 200) && ran {
            break;
        }
        assert!(Instant::now() < deadline, "not all there yet: {bodies:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fn times(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| times(x, out)),
            Value::Object(o) => o.values().for_each(|x| times(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    for (_, _, b) in &bodies {
        times(b, &mut all);
    }
    assert!(all.len() >= 15, "only {} times found: {all:?}", all.len());
    let fine: Vec<&String> =
        all.iter().filter(|t| t.split('.').nth(1).is_some_and(|f| f.trim_end_matches('Z').len() > 3)).collect();
    assert!(fine.is_empty(), "times finer than milliseconds: {fine:?}");
}

/// A call whose fence is lost (runtimes/PROTOCOL.md, "Fences") still answers with what the
/// function returned: one cut inside a line over 64 KiB, and one whose descriptor the
/// function closed. The instance keeps serving.
#[tokio::test]
async fn a_call_whose_output_fence_is_lost_still_gets_its_answer() {
    let server = Server::start();
    let code = "import os\ndef handler(event, context):\n    if event['path'] == '/long':\n        os.write(1, b'x' * 70000)\n    elif event['path'] == '/close':\n        os.close(2)\n    return event['path']\n";
    server.deploy("lost-fence", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    for path in ["/long", "/close", "/after"] {
        let (s, h, body) = server.invoke("lost-fence", "GET", path, None).await;
        assert_eq!((s, body.as_str()), (200, Some(path)), "{path}");
        if path == "/long" {
            let id = h["x-request-id"].to_str().expect("id").to_string();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let url = format!("{}/v1/namespaces/default/invocations/{id}", server.url);
                let (s, _, record) = server.send(server.http.get(url)).await;
                if s == 200 {
                    let logs = record["logs"].as_array().cloned().unwrap_or_default();
                    assert!(logs.iter().any(|l| l.as_str().unwrap_or_default().contains("line cut at")), "{record}");
                    break;
                }
                assert!(Instant::now() < deadline, "no record for {id}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

//! The HTTP edge against the real `sless server` (docs/security.md, "HTTP edge"): slow heads,
//! slow bodies and idle keep-alive connections are cut at their configured timeouts, the
//! connection cap answers 503, oversized heads get 431, and none of it limits how long an
//! answer takes. The timeouts are small here; the bounds are generous ("within 5× the
//! timeout"): these tests check behaviour, the benchmark measures speed.

mod common;

use std::time::{Duration, Instant};

use common::{Server, TOKEN};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The server's `host:port`.
fn addr(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_string()
}

async fn connect(server: &Server) -> TcpStream {
    TcpStream::connect(addr(server)).await.expect("connect")
}

/// Reads until the peer closes (or resets) the connection, for at most `limit`; returns what
/// came and whether it closed.
async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin), limit: Duration) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let closed = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (got, closed)
}

/// Reads one response (head and a `content-length` body): the status, the head and the body.
async fn read_response(stream: &mut (impl AsyncRead + Unpin)) -> (u16, String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_string();
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                    return (status, head, got[end + 4..end + 4 + length].to_vec());
                }
            }
            let n = stream.read(&mut buf).await.expect("read a response");
            assert!(n > 0, "closed before a whole response: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("a response within 30 s")
}

fn healthz(host: &str) -> Vec<u8> {
    format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n").into_bytes()
}

/// The value of one series of `/metrics` (0 when absent).
async fn metric(server: &Server, series: &str) -> f64 {
    let text =
        server.http.get(format!("{}/metrics", server.url)).send().await.expect("/metrics").text().await.expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Asserts a problem+json response with `status` and `slug`; returns its body.
fn problem(response: &(u16, String, Vec<u8>), status: u16, slug: &str) -> Value {
    let (s, head, body) = response;
    let body: Value = serde_json::from_slice(body).unwrap_or_else(|_| json!(String::from_utf8_lossy(body)));
    assert_eq!(*s, status, "{head}\n{body}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/problem+json"), "{head}");
    assert_eq!(body["type"], format!("https://sless.dev/problems/{slug}"), "{body}");
    assert_eq!(body["status"], status, "{body}");
    body
}

#[tokio::test]
async fn slow_request_heads_are_cut_at_the_header_timeout_while_healthz_answers() {
    const TIMEOUT: Duration = Duration::from_millis(1000);
    const SLOW: usize = 50;
    let server = Server::start_with(&["--header-read-timeout-ms", "1000", "--max-connections", "64"]);
    let host = addr(&server);
    let slow = (0..SLOW).map(|_| {
        let host = host.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut stream = TcpStream::connect(&host).await.expect("connect");
            stream
                .write_all(format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\nx-slow: ").as_bytes())
                .await
                .expect("write");
            // One more byte of the header every 200 ms, far longer than the timeout if let.
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            for _ in 0..100 {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => return (started.elapsed(), got),
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    },
                    () = tokio::time::sleep(Duration::from_millis(200)) => {
                        if stream.write_all(b"a").await.is_err() {
                            return (started.elapsed(), got);
                        }
                    }
                }
            }
            panic!("a slow head was held for 20 s: {:?}", String::from_utf8_lossy(&got));
        })
    });
    let slow: Vec<_> = slow.collect();
    // Meanwhile /healthz answers, every time.
    let mut answered = 0;
    let until = Instant::now() + TIMEOUT * 2;
    while Instant::now() < until {
        let r = server.http.get(format!("{}/healthz", server.url)).send().await.expect("/healthz under slowloris");
        assert_eq!(r.status(), 200);
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered >= 5, "{answered}");
    for task in slow {
        let (after, got) = task.await.expect("slow client");
        assert!(got.is_empty(), "a cut head gets no answer: {:?}", String::from_utf8_lossy(&got));
        assert!(after >= TIMEOUT, "cut after {after:?}, before the timeout: the trickle must not matter");
        assert!(after < TIMEOUT * 5, "cut after {after:?}");
    }
    assert_eq!(metric(&server, "sless_http_read_timeouts_total{part=\"head\"}").await, SLOW as f64);
}

#[tokio::test]
async fn a_body_that_stops_coming_is_answered_408_and_the_connection_closed() {
    let server = Server::start_with(&["--body-read-timeout-ms", "1000"]);
    let mut stream = connect(&server).await;
    let started = Instant::now();
    let head = format!(
        "POST /v1/namespaces/default/functions HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"name\":",
        addr(&server)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let response = read_response(&mut stream).await;
    let after = started.elapsed();
    let body = problem(&response, 408, "request-timeout");
    assert!(body["detail"].as_str().unwrap_or_default().contains("1000 ms"), "{body}");
    assert!(response.1.to_ascii_lowercase().contains("connection: close"), "{}", response.1);
    assert!(after >= Duration::from_millis(1000) && after < Duration::from_secs(5), "answered after {after:?}");
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "the connection stays open after a 408");
    assert_eq!(metric(&server, "sless_http_read_timeouts_total{part=\"body\"}").await, 1.0);
    // Nothing was created from the half body.
    assert_eq!(server.client.list_all_functions().await.expect("list").len(), 0);
}

#[tokio::test]
async fn an_upload_trickled_past_the_total_body_timeout_is_answered_408() {
    let server = Server::start_with(&["--body-read-timeout-ms", "1000", "--body-total-timeout-ms", "1500"]);
    let (s, b) = server.create(json!({"name": "slow", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    assert_eq!(s, 201, "{b}");
    let mut stream = connect(&server).await;
    let started = Instant::now();
    let head = format!(
        "PUT /v1/namespaces/default/functions/slow/code HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/zip\r\ncontent-length: 100000\r\n\r\n",
        addr(&server)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    // A byte every 200 ms: never a gap of the read timeout, but never done either.
    let (mut reader, mut writer) = stream.split();
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if writer.write_all(b"P").await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let response = tokio::select! {
        response = read_response(&mut reader) => response,
        () = trickle => unreachable!(),
    };
    let after = started.elapsed();
    let body = problem(&response, 408, "request-timeout");
    assert!(body["detail"].as_str().unwrap_or_default().contains("within 1500 ms"), "{body}");
    assert!(after >= Duration::from_millis(1500) && after < Duration::from_millis(7500), "answered after {after:?}");
    // No version was made of it, and the function still takes a whole upload.
    let (s, b) = server.upload("slow", common::zip(&[("main.py", "def handler(e, c):\n    return 'ok'\n")])).await;
    assert_eq!((s, b["version"].clone()), (202, json!(1)), "{b}");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout_not_the_header_timeout() {
    const IDLE: Duration = Duration::from_millis(3000);
    let server = Server::start_with(&["--header-read-timeout-ms", "300", "--keep-alive-timeout-ms", "3000"]);
    let host = addr(&server);
    let mut stream = connect(&server).await;
    stream.write_all(&healthz(&host)).await.expect("write");
    assert_eq!(read_response(&mut stream).await.0, 200);
    // Idle for three times the header timeout: still open, and it serves the next request.
    tokio::time::sleep(Duration::from_millis(900)).await;
    stream.write_all(&healthz(&host)).await.expect("write");
    let second = read_response(&mut stream).await;
    assert_eq!((second.0, second.2.as_slice()), (200, b"ok".as_slice()), "{}", second.1);
    let idle_from = Instant::now();
    let (got, closed) = read_until_closed(&mut stream, IDLE * 5).await;
    let after = idle_from.elapsed();
    assert!(closed, "an idle connection is held past 5× the idle timeout");
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert!(after >= IDLE - Duration::from_millis(100), "closed after {after:?}, before the idle timeout");
}

#[tokio::test]
async fn beyond_the_connection_cap_a_new_connection_gets_503_while_held_ones_work() {
    let server = Server::start_with(&["--max-connections", "3", "--header-read-timeout-ms", "30000"]);
    let host = addr(&server);
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(&server).await;
        // A whole request: the server has taken this connection.
        stream.write_all(&healthz(&host)).await.expect("write");
        assert_eq!(read_response(&mut stream).await.0, 200);
        held.push(stream);
    }
    let mut extra = connect(&server).await;
    let _ = extra.write_all(&healthz(&host)).await;
    let refused = read_response(&mut extra).await;
    let body = problem(&refused, 503, "too-many-connections");
    assert!(body["detail"].as_str().unwrap_or_default().contains('3'), "{body}");
    let head = refused.1.to_ascii_lowercase();
    assert!(head.contains("retry-after: 1") && head.contains("connection: close"), "{head}");
    assert!(read_until_closed(&mut extra, Duration::from_secs(5)).await.1, "a refused connection is closed");
    assert!(server.log().contains("at the connection cap"), "{}", server.log());
    // The held connections keep working.
    for stream in &mut held {
        stream.write_all(&healthz(&host)).await.expect("write");
        assert_eq!(read_response(stream).await.0, 200);
    }
    // /metrics itself takes a place: ask it on a held connection.
    let stream = &mut held[0];
    stream.write_all(format!("GET /metrics HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes()).await.expect("write");
    let (_, _, text) = read_response(stream).await;
    let text = String::from_utf8_lossy(&text);
    assert!(text.lines().any(|l| l == "sless_http_connections 3"), "{text}");
    assert!(text.lines().any(|l| l == "sless_http_connections_refused_total 1"), "{text}");
    // One closes: its place is free again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = connect(&server).await;
        let _ = stream.write_all(&healthz(&host)).await;
        let (status, head, _) = read_response(&mut stream).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{head}");
        assert!(Instant::now() < deadline, "a freed place is never taken again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connection to the server from the loopback address `from` (127.0.0.2 is another client
/// than 127.0.0.1 to the server: Linux routes all of 127/8 to loopback).
async fn connect_from(server: &Server, from: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{from}:0").parse().expect("address")).expect("bind");
    socket.connect(addr(server).parse().expect("server address")).await.expect("connect")
}

#[tokio::test]
async fn one_client_reconnecting_slowloris_style_holds_only_its_share_of_connections() {
    let server = Server::start_with(&[
        "--max-connections",
        "8",
        "--max-connections-per-client",
        "3",
        "--header-read-timeout-ms",
        "30000",
    ]);
    let host = addr(&server);
    // Three connections of one client that never finish their heads: held, not answered.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(&server).await;
        stream.write_all(b"GET /healthz HTTP/1.1\r\n").await.expect("write");
        held.push(stream);
    }
    // Its fourth is refused, though the server holds 3 of its 8.
    let mut extra = connect(&server).await;
    let _ = extra.write_all(&healthz(&host)).await;
    let refused = read_response(&mut extra).await;
    let body = problem(&refused, 503, "too-many-connections");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("client address") && detail.contains('3'), "{body}");
    assert!(refused.1.to_ascii_lowercase().contains("retry-after: 1"), "{}", refused.1);
    assert!(read_until_closed(&mut extra, Duration::from_secs(5)).await.1, "a refused connection is closed");
    assert!(server.log().contains("a client is at its connection cap"), "{}", server.log());
    // Another client address is not held to it.
    let mut other = connect_from(&server, "127.0.0.2").await;
    other.write_all(format!("GET /metrics HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes()).await.expect("write");
    let (status, _, text) = read_response(&mut other).await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&text);
    assert!(text.lines().any(|l| l == "sless_http_connections 4"), "{text}");
    assert!(text.lines().any(|l| l == "sless_http_connections_refused_total 1"), "{text}");
    // One of the first client's closes: its place is free for it again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = connect(&server).await;
        let _ = stream.write_all(&healthz(&host)).await;
        let (status, head, _) = read_response(&mut stream).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{head}");
        assert!(Instant::now() < deadline, "a freed place is never taken again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn too_many_or_too_large_header_fields_get_431() {
    // Set by the flags' variables, as a container would.
    let env = [("SLESS_MAX_HEADERS".to_string(), "20".to_string()), ("SLESS_MAX_HEADER_BYTES".into(), "4096".into())];
    let server = Server::start_with_env(&[], &env);
    let host = addr(&server);
    let request = |fields: usize, value: usize| {
        let mut r = format!("GET /healthz HTTP/1.1\r\nhost: {host}\r\n");
        for i in 1..fields {
            r.push_str(&format!("x-field-{i}: {}\r\n", "v".repeat(value)));
        }
        r.push_str("\r\n");
        r.into_bytes()
    };
    let send = |bytes: Vec<u8>| {
        let server = &server;
        async move {
            let mut stream = connect(server).await;
            stream.write_all(&bytes).await.expect("write");
            read_response(&mut stream).await
        }
    };
    // Within both limits: answered.
    assert_eq!(send(request(20, 150)).await.0, 200);
    // 21 fields.
    let too_many = send(request(21, 1)).await;
    assert_eq!(too_many.0, 431, "{}", too_many.1);
    // One field of 5,000 bytes.
    let too_large = send(request(2, 5000)).await;
    assert_eq!(too_large.0, 431, "{}", too_large.1);
    // The server is fine.
    assert_eq!(send(request(1, 1)).await.0, 200);
}

#[tokio::test]
async fn a_call_longer_than_every_read_timeout_still_gets_its_answer() {
    let server = Server::start_with(&[
        "--header-read-timeout-ms",
        "500",
        "--body-read-timeout-ms",
        "500",
        "--body-total-timeout-ms",
        "1000",
        "--keep-alive-timeout-ms",
        "1000",
    ]);
    let code = "import time\ndef handler(event, context):\n    time.sleep(3)\n    return {'statusCode': 200, 'body': event['body']}\n";
    server.deploy("long", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 30})).await;
    let started = Instant::now();
    let (s, _, b) = server.invoke("long", "POST", "/", Some("{\"n\": 1}")).await;
    assert_eq!((s, b), (200, json!({"n": 1})));
    assert!(started.elapsed() >= Duration::from_secs(3), "the call did sleep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_lets_the_call_in_flight_answer_and_does_not_wait_for_idle_connections() {
    let mut server = Server::start_with(&["--keep-alive-timeout-ms", "600000"]);
    let code = "import time\ndef handler(event, context):\n    time.sleep(2)\n    return 'finished'\n";
    server.deploy("drain", "python3.11", "main.handler", &[("main.py", code)], json!({"timeout_sec": 30})).await;
    // An idle keep-alive connection, which would be held for 10 minutes.
    let host = addr(&server);
    let mut idle = connect(&server).await;
    idle.write_all(&healthz(&host)).await.expect("write");
    assert_eq!(read_response(&mut idle).await.0, 200);
    let call = tokio::spawn(server.http.post(server.api("/drain/invoke")).bearer_auth(TOKEN).body("{}").send());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopping = Instant::now();
    let status = tokio::task::block_in_place(|| server.stop());
    assert!(status.success(), "{}", server.log());
    let response = call.await.expect("call task").expect("the call in flight is answered");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "finished");
    // Neither the idle connection nor the 30 s drain bound held the stop.
    assert!(stopping.elapsed() < Duration::from_secs(20), "stopped after {:?}", stopping.elapsed());
    assert!(!server.log().contains("still in flight"), "{}", server.log());
    assert!(read_until_closed(&mut idle, Duration::from_secs(5)).await.1, "the idle connection was closed");
}

#[tokio::test]
async fn a_call_whose_body_stops_coming_is_408_and_recorded_as_rejected() {
    let server = Server::start_with(&["--body-read-timeout-ms", "500"]);
    let code = "def handler(event, context):\n    return 'never'\n";
    server.deploy("stalled", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let mut stream = connect(&server).await;
    let head = format!(
        "POST /v1/namespaces/default/functions/stalled/invoke HTTP/1.1\r\nhost: {}\r\n\
         authorization: Bearer {TOKEN}\r\ncontent-length: 1000\r\n\r\nhalf a bo",
        addr(&server)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let response = read_response(&mut stream).await;
    problem(&response, 408, "request-timeout");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, _, b) = server.send(server.http.get(server.api("/stalled/invocations"))).await;
        assert_eq!(s, 200, "{b}");
        if let Some(record) = b["items"].as_array().and_then(|items| items.first()) {
            assert_eq!(
                (&record["status"], &record["outcome"], &record["error_type"]),
                (&json!(408), &json!("rejected"), &json!("Function.RequestTimeout")),
                "{record}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the rejected call is never recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn server_and_up_help_list_the_edge_flags_with_their_variables() {
    for command in ["server", "up"] {
        let help = std::process::Command::new(common::bin()).args([command, "--help"]).output().expect("help");
        let text = String::from_utf8_lossy(&help.stdout);
        for (flag, variable, default) in [
            ("--header-read-timeout-ms", "SLESS_HEADER_READ_TIMEOUT_MS", "10000"),
            ("--body-read-timeout-ms", "SLESS_BODY_READ_TIMEOUT_MS", "30000"),
            ("--body-total-timeout-ms", "SLESS_BODY_TOTAL_TIMEOUT_MS", "600000"),
            ("--keep-alive-timeout-ms", "SLESS_KEEP_ALIVE_TIMEOUT_MS", "75000"),
            ("--max-connections", "SLESS_MAX_CONNECTIONS", "512"),
            ("--max-connections-per-client", "SLESS_MAX_CONNECTIONS_PER_CLIENT", "256"),
            ("--max-header-bytes", "SLESS_MAX_HEADER_BYTES", "65536"),
            ("--max-headers", "SLESS_MAX_HEADERS", "100"),
        ] {
            let at = text
                .find(&format!("{flag} "))
                .unwrap_or_else(|| panic!("{flag} missing from {command} --help:\n{text}"));
            let entry = &text[at..text[at + 2..].find("\n      -").map_or(text.len(), |i| at + 2 + i)];
            assert!(entry.contains(&format!("[env: {variable}=")), "{entry}");
            assert!(entry.contains(&format!("[default: {default}]")), "{entry}");
        }
    }
}

/// Payload 1.0 events carry header names as the client spelled them (docs/writing-functions.md,
/// "The HTTP event"), which hyper does not keep: the edge reads them from the head's bytes.
/// Spellings no client library produces (`X-GitHub-Event`, `x-hub-signature`, one name in two
/// spellings) are sent over a raw connection, twice on one keep-alive connection; a request
/// pipelined behind another in one write still gets its headers (lowercase then).
#[tokio::test]
async fn header_names_reach_the_event_as_the_client_spelled_them() {
    let server = Server::start();
    let code =
        "def handler(event, context):\n    return {\"h\": event[\"headers\"], \"mh\": event[\"multiValueHeaders\"]}\n";
    server.deploy("spelled", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let host = addr(&server);
    let request = |tag: &str| {
        format!(
            "POST /v1/namespaces/default/functions/spelled/invoke/hook HTTP/1.1\r\nHost: {host}\r\n\
             Authorization: Bearer {TOKEN}\r\nX-GitHub-Event: push\r\nx-hub-signature: sha1={tag}\r\n\
             X-Tag: a\r\nx-tag: b\r\nContent-Length: 2\r\n\r\n{{}}"
        )
    };
    let mut stream = connect(&server).await;
    for tag in ["first", "second"] {
        stream.write_all(request(tag).as_bytes()).await.expect("write");
        let (status, head, body) = read_response(&mut stream).await;
        let body: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(status, 200, "{head}\n{body}");
        let h = &body["h"];
        assert_eq!(h["X-GitHub-Event"], "push", "{body}");
        assert_eq!(h["x-hub-signature"], format!("sha1={tag}"), "{body}");
        assert_eq!(h["Host"], host, "{body}");
        // One name in two spellings is one header, under the first; the last value wins.
        assert_eq!((&h["X-Tag"], &body["mh"]["X-Tag"]), (&json!("b"), &json!(["a", "b"])), "{body}");
        assert!(h.get("x-tag").is_none() && h.get("x-github-event").is_none(), "{body}");
        assert!(h.get("Authorization").is_none(), "{body}");
        assert_eq!(h["X-Forwarded-For"], "127.0.0.1", "{body}");
    }
    // Two requests in one write: the second one's head was never read on its own.
    stream.write_all(format!("{}{}", request("p1"), request("p2")).as_bytes()).await.expect("write");
    for tag in ["p1", "p2"] {
        let (status, head, body) = read_response(&mut stream).await;
        let body: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(status, 200, "{head}\n{body}");
        let signature = body["h"].get("x-hub-signature").cloned().unwrap_or(Value::Null);
        assert_eq!(signature, format!("sha1={tag}"), "{body}");
    }
}

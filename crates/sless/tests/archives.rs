//! Archive corner cases (docs/architecture.md, "Archives and builds") against the real `sless server` binary:
//! archives made by other tools deploy and run (backslash separators, no folder entries,
//! `__MACOSX/` litter, links inside the root, restrictive file modes), and archives that are
//! too large are refused early, with nothing stored. Rejections covered by `api_errors.rs`
//! (paths leaving the root, links leaving it, duplicates, declared zip bombs) are not repeated.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Server, TOKEN, files_under};
use futures::StreamExt as _;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: usize = 1024 * 1024;

/// One entry of a test zip.
enum Item<'a> {
    /// A file, with the unix mode the zip records (`None`: the writer's default).
    File(&'a str, &'a [u8], Option<u32>),
    /// A symbolic link and its target.
    Link(&'a str, &'a str),
}

fn zip_items(items: &[Item<'_>]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for item in items {
        match item {
            Item::File(name, data, mode) => {
                let mut options = zip::write::SimpleFileOptions::default();
                if let Some(mode) = mode {
                    options = options.unix_permissions(*mode);
                }
                w.start_file(*name, options).expect("start");
                w.write_all(data).expect("write");
            }
            Item::Link(name, target) => {
                w.add_symlink(*name, *target, zip::write::SimpleFileOptions::default()).expect("link")
            }
        }
    }
    w.finish().expect("finish").into_inner()
}

fn file<'a>(name: &'a str, data: &'a str) -> Item<'a> {
    Item::File(name, data.as_bytes(), None)
}

/// The names the zip lists, as stored.
fn entry_names(bytes: &[u8]) -> Vec<String> {
    let zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("zip");
    zip.file_names().map(str::to_string).collect()
}

/// Sets the uncompressed size the central directory declares for `name`; the data and the
/// local header stay true, so only decompressing the entry shows the real size.
fn lie_about_size(bytes: &mut [u8], name: &str, size: u32) {
    let at = (0..bytes.len() - 46)
        .find(|&i| bytes[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] && bytes[i + 46..].starts_with(name.as_bytes()))
        .expect("central directory header");
    bytes[at + 24..at + 28].copy_from_slice(&size.to_le_bytes());
}

/// Data that compresses about 4:1, far from a zip bomb's ratio.
fn compressible(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut x: u32 = 0x1234_5678;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push(b"acgt"[(x % 4) as usize]);
    }
    out
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Asserts an RFC 9457 problem with `expected` status (and the entry, if given).
fn problem(status: u16, headers: &HeaderMap, body: &Value, expected: u16, entry: Option<&str>) -> Value {
    assert_eq!(status, expected, "status: {body}");
    let ct = header(headers, "content-type").unwrap_or_default();
    assert!(ct.starts_with("application/problem+json"), "content-type {ct:?} for {body}");
    assert_eq!(body["status"], json!(expected), "{body}");
    if let Some(entry) = entry {
        assert_eq!(body["entry"], json!(entry), "{body}");
    }
    body.clone()
}

fn detail(body: &Value) -> &str {
    body["detail"].as_str().unwrap_or_default()
}

async fn create(server: &Server, name: &str, entrypoint: &str) {
    let (s, b) = server.create(json!({"name": name, "runtime": "python3.11", "entrypoint": entrypoint})).await;
    assert_eq!(s, 201, "{b}");
}

async fn upload(server: &Server, name: &str, zip: Vec<u8>) -> (u16, HeaderMap, Value) {
    let req = server.http.put(server.api(&format!("/{name}/code"))).header("content-type", "application/zip").body(zip);
    server.send(req).await
}

/// Creates a Python function from a zip and waits until it is Ready; returns the unpacked
/// code folder.
async fn deploy_zip(server: &Server, name: &str, entrypoint: &str, zip: Vec<u8>) -> std::path::PathBuf {
    create(server, name, entrypoint).await;
    let (s, _, b) = upload(server, name, zip).await;
    assert_eq!(s, 202, "{b}");
    let v = server.wait_version(name, b["version"].as_u64().expect("version")).await;
    assert_eq!(v["phase"], "Ready", "{v}\n{}", server.log());
    let sha = b["sha256"].as_str().expect("sha256");
    let code = server.data.join("builds/python3.11").join(sha).join("code");
    assert!(code.is_dir(), "no code folder at {}", code.display());
    code
}

/// Calls the function; asserts a 200 and returns the body.
async fn call(server: &Server, name: &str) -> Value {
    let (s, _, b) = server.invoke(name, "GET", "/", None).await;
    assert_eq!(s, 200, "{b}\n{}", server.log());
    b
}

/// Asserts that `name` has no version and nothing was stored or built.
async fn nothing_stored(server: &Server, name: &str) {
    let (s, _, v) = server.send(server.http.get(server.api(&format!("/{name}/versions")))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["items"], json!([]), "{v}");
    assert_eq!(files_under(&server.data.join("archives")), Vec::<String>::new());
    assert_eq!(files_under(&server.data.join("builds")), Vec::<String>::new());
    let (s, f) = server.get(name).await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["status"]["phase"], "Pending", "{f}");
    assert_eq!(f["active_version"], Value::Null, "{f}");
}

#[tokio::test]
async fn backslash_separators_deploy_and_run() {
    let server = Server::start();
    let bytes = zip_items(&[
        file("src\\app.py", "from lib.util import VALUE\n\ndef handler(event, context):\n    return VALUE\n"),
        file("src\\lib\\util.py", "VALUE = 'from a backslash path'\n"),
    ]);
    assert!(entry_names(&bytes).iter().all(|n| !n.contains('/')), "{:?}", entry_names(&bytes));
    let code = deploy_zip(&server, "f", "src/app.handler", bytes).await;
    assert_eq!(call(&server, "f").await, json!("from a backslash path"));
    let mut files = files_under(&code);
    files.sort();
    assert_eq!(files, ["src/app.py", "src/lib/util.py"], "{}", code.display());
}

#[tokio::test]
async fn zips_without_folder_entries_deploy_and_run() {
    let server = Server::start();
    let bytes = zip_items(&[
        file("src/app.py", "from helpers.deep.util import VALUE\n\ndef handler(event, context):\n    return VALUE\n"),
        file("src/helpers/deep/util.py", "VALUE = 'nested without folder entries'\n"),
    ]);
    assert!(entry_names(&bytes).iter().all(|n| !n.ends_with('/')), "{:?}", entry_names(&bytes));
    let code = deploy_zip(&server, "f", "src/app.handler", bytes).await;
    assert_eq!(call(&server, "f").await, json!("nested without folder entries"));
    assert!(code.join("src/helpers/deep").is_dir());
}

#[tokio::test]
async fn macosx_litter_is_skipped() {
    let server = Server::start();
    let main = "import json, os\n\ndef handler(event, context):\n    root = os.path.dirname(os.path.abspath(__file__))\n    found = sorted(os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs)\n    return {'statusCode': 200, 'body': json.dumps(found)}\n";
    let bytes = zip_items(&[
        file("main.py", main),
        file("lib/util.py", "X = 1\n"),
        Item::File("__MACOSX/._main.py", b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X", None),
        Item::File("__MACOSX/lib/._util.py", b"\x00\x05\x16\x07", None),
        Item::File(".DS_Store", b"\x00\x00\x00\x01Bud1", None),
        Item::File("lib/.DS_Store", b"\x00\x00\x00\x01Bud1", None),
    ]);
    let code = deploy_zip(&server, "f", "main.handler", bytes).await;
    assert_eq!(call(&server, "f").await, json!(["lib", "lib/util.py", "main.py"]));
    assert!(!code.join("__MACOSX").exists());
    assert!(!code.join(".DS_Store").exists());
}

#[tokio::test]
async fn links_inside_the_root_are_kept_and_work() {
    let server = Server::start();
    let main = "import json\nimport lib\nfrom shared import lib as via_folder_link\n\ndef handler(event, context):\n    with open('config.json') as f:\n        config = json.load(f)\n    return {'statusCode': 200, 'body': json.dumps([lib.VALUE, via_folder_link.VALUE, config['name']])}\n";
    let bytes = zip_items(&[
        file("main.py", main),
        file("real/lib.py", "VALUE = 'imported through a link'\n"),
        file("real/config.json", "{\"name\": \"read through a link\"}"),
        Item::Link("lib.py", "real/lib.py"),
        Item::Link("shared", "real"),
        Item::Link("config.json", "./real/config.json"),
    ]);
    let code = deploy_zip(&server, "f", "main.handler", bytes).await;
    assert_eq!(
        call(&server, "f").await,
        json!(["imported through a link", "imported through a link", "read through a link"])
    );
    for (link, target) in [("lib.py", "real/lib.py"), ("shared", "real")] {
        let meta = std::fs::symlink_metadata(code.join(link)).expect("lstat");
        assert!(meta.file_type().is_symlink(), "{link} is not a link");
        assert_eq!(std::fs::read_link(code.join(link)).expect("readlink").to_str(), Some(target));
    }
}

#[tokio::test]
async fn restrictive_file_modes_are_normalised() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start();
    let main = "import json, os, subprocess\nimport helper\n\ndef handler(event, context):\n    root = os.path.dirname(os.path.abspath(__file__))\n    run = lambda p: subprocess.run([os.path.join(root, p)], capture_output=True, text=True).stdout.strip()\n    return {'statusCode': 200, 'body': json.dumps([helper.VALUE, run('bin/run.sh'), run('bin/exec_only.sh')])}\n";
    let bytes = zip_items(&[
        Item::File("main.py", main.as_bytes(), Some(0o000)),
        Item::File("helper.py", b"VALUE = 'write-only helper imported'\n", Some(0o200)),
        Item::File("bin/run.sh", b"#!/bin/sh\necho ran\n", Some(0o700)),
        Item::File("bin/exec_only.sh", b"#!/bin/sh\necho exec-only ran\n", Some(0o100)),
    ]);
    let code = deploy_zip(&server, "f", "main.handler", bytes).await;
    assert_eq!(call(&server, "f").await, json!(["write-only helper imported", "ran", "exec-only ran"]));
    for (path, mode) in
        [("main.py", 0o644), ("helper.py", 0o644), ("bin/run.sh", 0o755), ("bin/exec_only.sh", 0o755), ("bin", 0o755)]
    {
        let got = std::fs::metadata(code.join(path)).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(got, mode, "{path}: {got:o}");
    }
}

/// Sends `PUT …/f/code` over a plain socket: the headers (with `Content-Length: declared`
/// unless `None`, then the body is chunked), then `sent` bytes of body, then nothing more
/// while keeping the connection open. Returns the response as text, or panics if none
/// arrives within `patience`; also returns how many body bytes had been written by then.
async fn stalled_upload(server: &Server, declared: Option<usize>, sent: usize, patience: Duration) -> (String, u64) {
    let addr = server.url.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let framing = match declared {
        Some(n) => format!("Content-Length: {n}"),
        None => "Transfer-Encoding: chunked".to_string(),
    };
    let head = format!(
        "PUT /v1/namespaces/default/functions/f/code HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/zip\r\n{framing}\r\n\r\n"
    );
    let written = Arc::new(AtomicU64::new(0));
    let counter = written.clone();
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b'z'; 64 * 1024];
        let mut done = 0;
        while done < sent {
            if declared.is_none() {
                write.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
            }
            write.write_all(&chunk).await?;
            if declared.is_none() {
                write.write_all(b"\r\n").await?;
            }
            done += chunk.len();
            counter.store(done as u64, Ordering::SeqCst);
        }
        // Stall: the rest of the body never comes, and the connection stays open.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, std::io::Error>(write)
    });
    let started = Instant::now();
    let mut response = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let outcome = tokio::time::timeout(patience, async {
        loop {
            match read.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => response.extend_from_slice(&buf[..n]),
                // The server may close with part of our body unread (a reset): keep what came.
                Err(_) if !response.is_empty() => break,
                Err(e) => panic!("no response: {e}"),
            }
            if complete(&response) {
                break;
            }
        }
    })
    .await;
    let at = written.load(Ordering::SeqCst);
    writer.abort();
    assert!(outcome.is_ok(), "no complete response within {patience:?} (got {:?})", String::from_utf8_lossy(&response));
    eprintln!("response after {:?} with {at} body bytes sent", started.elapsed());
    (String::from_utf8_lossy(&response).into_owned(), at)
}

/// Whether `raw` holds a whole HTTP response (head and a `Content-Length` body).
fn complete(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
        .and_then(|v| v.parse::<usize>().ok());
    length.is_some_and(|n| body.len() >= n)
}

fn status_and_body(response: &str) -> (u16, Value) {
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::String(body.to_string())))
}

#[tokio::test]
async fn an_oversized_archive_is_refused_before_its_body_is_read() {
    // The default limit: 50 MiB zipped.
    let server = Server::start();
    create(&server, "f", "main.handler").await;

    // 60 MiB announced, 1 MiB sent, then the client stalls: the 413 comes anyway.
    let (response, sent) = stalled_upload(&server, Some(60 * MIB), MIB, Duration::from_secs(20)).await;
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 413, "{response}");
    assert!(response.to_ascii_lowercase().contains("content-type: application/problem+json"), "{response}");
    assert!(detail(&body).contains(&(60 * MIB).to_string()), "{body}");
    assert!(sent <= MIB as u64, "the body was incomplete: {sent} bytes");

    // The same through an ordinary HTTP client whose body stream stalls after 1 MiB.
    let stalled = futures::stream::iter([Ok::<_, std::io::Error>(vec![0u8; MIB])]).chain(futures::stream::pending());
    let req = server
        .http
        .put(server.api("/f/code"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/zip")
        .header("content-length", (60 * MIB).to_string())
        .body(reqwest::Body::wrap_stream(stalled));
    let resp = tokio::time::timeout(Duration::from_secs(20), req.send())
        .await
        .expect("a response while the body is still incomplete")
        .expect("response");
    assert_eq!(resp.status().as_u16(), 413);

    // A client that sends the whole body before it reads gets the 413 too, not a reset.
    let (s, h, b) = upload(&server, "f", vec![0u8; 60 * MIB]).await;
    problem(s, &h, &b, 413, None);

    nothing_stored(&server, "f").await;
    // The server is fine afterwards.
    let (s, _, b) = upload(&server, "f", common::zip(&[("main.py", "def handler(e, c):\n    return 1\n")])).await;
    assert_eq!(s, 202, "{b}");
}

#[tokio::test]
async fn a_chunked_archive_is_refused_once_it_passes_the_limit() {
    let server = Server::start_with(&["--max-archive-mb", "1"]);
    create(&server, "f", "main.handler").await;
    // No length announced: 2 MiB arrive, then the client stalls.
    let (response, sent) = stalled_upload(&server, None, 2 * MIB, Duration::from_secs(20)).await;
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 413, "{response}");
    assert_eq!(body["status"], json!(413), "{body}");
    assert!(sent <= 2 * MIB as u64, "{sent}");

    // A client that sends the whole chunked body before it reads gets the 413 too.
    let chunks = futures::stream::iter((0..48).map(|_| Ok::<_, std::io::Error>(vec![0u8; 64 * 1024])));
    let req = server
        .http
        .put(server.api("/f/code"))
        .header("content-type", "application/zip")
        .body(reqwest::Body::wrap_stream(chunks));
    let (s, h, b) = server.send(req).await;
    problem(s, &h, &b, 413, None);
    nothing_stored(&server, "f").await;
}

#[tokio::test]
async fn archives_expanding_past_the_unpacked_limit_are_rejected_at_upload() {
    let server = Server::start_with(&["--max-unpacked-mb", "1"]);
    create(&server, "f", "main.handler").await;
    let main: &[u8] = b"def handler(event, context):\n    return 'hi'\n";
    let data = compressible(2 * MIB);

    // Honest sizes: 2 MiB of text in a zip well under 1 MiB, at a ratio far below 200:1.
    let honest = zip_items(&[Item::File("main.py", main, None), Item::File("data.txt", &data, None)]);
    assert!(honest.len() < MIB, "the zip is small: {}", honest.len());
    let (s, h, b) = upload(&server, "f", honest.clone()).await;
    let b = problem(s, &h, &b, 422, Some("data.txt"));
    assert!(detail(&b).contains("unpacked size"), "{b}");

    // The central directory claims 1,000 bytes: only decompressing shows the truth, and that
    // happens at upload (a 422), not later in the build.
    let mut lying = honest;
    lie_about_size(&mut lying, "data.txt", 1000);
    let (s, h, b) = upload(&server, "f", lying).await;
    let b = problem(s, &h, &b, 422, Some("data.txt"));
    assert!(detail(&b).contains("unpacked size"), "{b}");

    // Spread over several files that each fit.
    let part = compressible(600 * 1024);
    let spread = zip_items(&[
        Item::File("main.py", main, None),
        Item::File("a.txt", &part, None),
        Item::File("b.txt", &part, None),
    ]);
    let (s, h, b) = upload(&server, "f", spread).await;
    problem(s, &h, &b, 422, Some("b.txt"));

    // A zip bomb whose declared size hides its ratio.
    let zeros = vec![0u8; 5 * MIB];
    let mut bomb = zip_items(&[Item::File("main.py", main, None), Item::File("zeros.bin", &zeros, None)]);
    lie_about_size(&mut bomb, "zeros.bin", 100);
    let (s, h, b) = upload(&server, "f", bomb).await;
    let b = problem(s, &h, &b, 422, Some("zeros.bin"));
    assert!(detail(&b).contains("ratio") || detail(&b).contains("unpacked size"), "{b}");

    // Corrupt data (a wrong CRC) is found at upload too.
    let mut corrupt = zip_items(&[Item::File("main.py", main, None), Item::File("lib.py", b"X = 1\n", None)]);
    let at = corrupt.windows(4).rposition(|w| w == [0x50, 0x4b, 0x01, 0x02]).expect("header");
    corrupt[at + 16] ^= 0xff;
    let (s, h, b) = upload(&server, "f", corrupt).await;
    let b = problem(s, &h, &b, 422, Some("lib.py"));
    assert!(detail(&b).contains("corrupt"), "{b}");

    nothing_stored(&server, "f").await;
}

#[tokio::test]
async fn nothing_is_unpacked_through_a_link_or_inside_a_file() {
    let server = Server::start();
    create(&server, "f", "main.handler").await;
    let main: &[u8] = b"def handler(event, context):\n    return 'hi'\n";
    let cases: [(Vec<u8>, &str); 3] = [
        // A link to a folder, and an entry that would be written through it.
        (zip_items(&[Item::File("main.py", main, None), Item::Link("d", "real"), file("d/x.py", "")]), "d/x.py"),
        // `d1/d2` leads one level up, so a link below it that looks like it stays inside
        // the root would point above it once unpacked.
        (
            zip_items(&[
                Item::File("main.py", main, None),
                Item::Link("d1/d2", "../x"),
                Item::Link("d1/d2/d3/l", "../../../x"),
            ]),
            "d1/d2/d3/l",
        ),
        // A file used as a folder.
        (zip_items(&[Item::File("main.py", main, None), file("a", ""), file("a/b.py", "")]), "a/b.py"),
    ];
    for (bytes, entry) in cases {
        let (s, h, b) = upload(&server, "f", bytes).await;
        problem(s, &h, &b, 422, Some(entry));
    }
    nothing_stored(&server, "f").await;
}

//! The runtime conformance suite (docs/writing-functions.md): every folder under `tests/conformance/`
//! at the repository root is a case: a function written once for Python 3.11 (`python/`) and
//! once for Node.js 20 (`node/`), the request to send and the response to expect, in
//! `case.toml`. One server runs every case on every runtime it names, through the real HTTP
//! API, and the single test reports every case that differs, not just the first.
//! `tests/conformance/README.md` describes the format.
//!
//! Run: `cargo test -p sless --test conformance`. `SLESS_CONFORMANCE_FILTER=query` runs only
//! the cases whose folder name contains `query`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Server, TOKEN};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest;

/// Cases that fail because of a bug in sless (not in the case), by function name
/// (`<case>-py` / `<case>-js`), with the reason. They are expected to fail; one that passes is
/// reported so that it is removed from this list.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

/// How many case × runtime pairs are deployed and called at the same time.
const CONCURRENCY: usize = 8;

/// How long a build may take before the case fails.
const BUILD_DEADLINE: Duration = Duration::from_secs(180);

/// How long one call may take (a broken response must not hang the suite).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long to wait for a call's invocation record (written in the background).
const RECORD_DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rt {
    Python,
    Node,
}

impl Rt {
    const ALL: [Rt; 2] = [Rt::Python, Rt::Node];

    /// The folder and `case.toml` section name.
    fn label(self) -> &'static str {
        match self {
            Rt::Python => "python",
            Rt::Node => "node",
        }
    }

    /// The function name suffix.
    fn suffix(self) -> &'static str {
        match self {
            Rt::Python => "py",
            Rt::Node => "js",
        }
    }

    fn runtime(self) -> &'static str {
        match self {
            Rt::Python => "python3.11",
            Rt::Node => "nodejs20",
        }
    }

    fn default_entrypoint(self) -> &'static str {
        match self {
            Rt::Python => "main.handler",
            Rt::Node => "index.handler",
        }
    }
}

/// `case.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    description: String,
    /// `["python"]`, `["node"]` or both (the default).
    runtimes: Option<Vec<String>>,
    #[serde(default)]
    function: FunctionSettings,
    #[serde(default)]
    python: RuntimeSection,
    #[serde(default)]
    node: RuntimeSection,
    #[serde(default)]
    request: RequestSpec,
    /// Checks for every runtime; `[python.expect]` / `[node.expect]` replace keys of it.
    #[serde(default)]
    expect: toml::Table,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionSettings {
    timeout_sec: Option<u32>,
    memory_mb: Option<u32>,
    /// `"1.0"` (the default) or `"2.0"`.
    payload_format: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeSection {
    entrypoint: Option<String>,
    #[serde(default)]
    expect: toml::Table,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestSpec {
    /// Default `GET`.
    method: Option<String>,
    /// What follows `/invoke`: `""`, `"/a/b?x=1"`, `"?a=1"`.
    #[serde(default)]
    path: String,
    /// `[name, value]` pairs, sent in order (a name may repeat).
    #[serde(default)]
    headers: Vec<(String, String)>,
    body: Option<String>,
    body_base64: Option<String>,
    body_repeat: Option<BodyRepeat>,
    /// Send the request this many times (default 1); the last response is checked.
    repeat: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct BodyRepeat {
    text: String,
    times: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogCount {
    contains: String,
    count: usize,
}

/// The merged `[expect]` of one runtime. Strings may hold `{request_id}` (the response's
/// `x-request-id`) and `{function}` (the function's name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// The response's status (required unless `deploy_error` is given).
    status: Option<u16>,
    /// The deploy must fail (the entrypoint cannot be loaded) with all these substrings in
    /// the version's status or build log; no request is sent.
    #[serde(default)]
    deploy_error: Vec<String>,
    /// Headers that must be present exactly once with exactly this value.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Headers whose values must be exactly these, in order (`set-cookie`).
    #[serde(default)]
    header_values: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    absent_headers: Vec<String>,
    /// `X-Function-Error: true` present (true) or absent (false). Unset: absent below 500.
    function_error: Option<bool>,
    /// The response is JSON with this `errorType`.
    error_type: Option<String>,
    body: Option<String>,
    body_base64: Option<String>,
    body_json: Option<String>,
    body_json_subset: Option<String>,
    #[serde(default)]
    body_contains: Vec<String>,
    body_len: Option<usize>,
    body_sha256: Option<String>,
    /// Substrings of the invocation record's logs (lines joined with `\n`).
    #[serde(default)]
    logs_contain: Vec<String>,
    #[serde(default)]
    logs_absent: Vec<String>,
    /// Exactly `count` log lines contain `contains`.
    #[serde(default)]
    log_count: Vec<LogCount>,
    /// In the function's log stream (`GET .../logs`), the lines containing each of these
    /// carry the call's request id (and there is at least one).
    #[serde(default)]
    logs_tagged: Vec<String>,
}

impl Expect {
    fn wants_logs(&self) -> bool {
        !self.logs_contain.is_empty()
            || !self.logs_absent.is_empty()
            || !self.log_count.is_empty()
            || !self.logs_tagged.is_empty()
    }
}

/// One case on one runtime.
struct Job {
    case: String,
    rt: Rt,
    name: String,
    code_dir: PathBuf,
    entrypoint: String,
    function: FunctionSettings,
    request: RequestSpec,
    expect: Expect,
}

/// The response as received.
struct Received {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

fn conformance_dir() -> PathBuf {
    common::repo().join("tests/conformance")
}

/// Reads every case folder; a case that cannot be read is an error message for that case.
fn load_jobs(filter: Option<&str>) -> (Vec<Job>, Vec<(String, String)>, usize) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut jobs = Vec::new();
    let mut broken = Vec::new();
    let mut cases = 0;
    for dir in dirs {
        let case = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if filter.is_some_and(|f| !case.contains(f)) {
            continue;
        }
        cases += 1;
        match load_case(&case, &dir) {
            Ok(mut js) => jobs.append(&mut js),
            Err(e) => broken.push((case, e)),
        }
    }
    (jobs, broken, cases)
}

fn load_case(case: &str, dir: &Path) -> Result<Vec<Job>, String> {
    let valid_name = !case.is_empty()
        && case.len() <= 60
        && case.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !case.starts_with('-')
        && !case.ends_with('-');
    if !valid_name {
        return Err("the folder name must be 1-60 lowercase letters, digits and '-' (a DNS-1123 label)".into());
    }
    let text = std::fs::read_to_string(dir.join("case.toml")).map_err(|e| format!("case.toml: {e}"))?;
    let file: CaseFile = toml::from_str(&text).map_err(|e| format!("case.toml: {e}"))?;
    if file.description.trim().is_empty() {
        return Err("case.toml: description is empty".into());
    }
    let runtimes: Vec<Rt> = match &file.runtimes {
        None => Rt::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|n| {
                Rt::ALL.into_iter().find(|r| r.label() == n).ok_or_else(|| format!("case.toml: unknown runtime {n:?}"))
            })
            .collect::<Result<_, _>>()?,
    };
    if runtimes.is_empty() {
        return Err("case.toml: runtimes is empty".into());
    }
    let bodies = [file.request.body.is_some(), file.request.body_base64.is_some(), file.request.body_repeat.is_some()];
    if bodies.iter().filter(|b| **b).count() > 1 {
        return Err("case.toml: give at most one of request.body, body_base64, body_repeat".into());
    }
    let mut jobs = Vec::new();
    for rt in Rt::ALL {
        let code_dir = dir.join(rt.label());
        let listed = runtimes.contains(&rt);
        match (listed, code_dir.is_dir()) {
            (true, false) => return Err(format!("{}/ is missing", rt.label())),
            (false, true) => {
                return Err(format!("{}/ exists but runtimes does not list {:?}", rt.label(), rt.label()));
            }
            (false, false) => continue,
            (true, true) => {}
        }
        let section = match rt {
            Rt::Python => &file.python,
            Rt::Node => &file.node,
        };
        let mut merged = file.expect.clone();
        merged.extend(section.expect.clone());
        let expect: Expect = toml::Value::Table(merged)
            .try_into()
            .map_err(|e| format!("case.toml: [expect] for {}: {e}", rt.label()))?;
        if expect.status.is_some() != expect.deploy_error.is_empty() {
            return Err(format!("case.toml: [expect] for {} needs either status or deploy_error", rt.label()));
        }
        jobs.push(Job {
            case: case.to_string(),
            rt,
            name: format!("{case}-{}", rt.suffix()),
            code_dir,
            entrypoint: section.entrypoint.clone().unwrap_or_else(|| rt.default_entrypoint().to_string()),
            function: file.function.clone(),
            request: file.request.clone(),
            expect,
        });
    }
    Ok(jobs)
}

/// Sends `req` with the admin token; Err on a transport error.
async fn send(req: reqwest::RequestBuilder) -> Result<Received, String> {
    let resp = req.bearer_auth(TOKEN).send().await.map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.bytes().await.map_err(|e| format!("reading the body failed: {e}"))?.to_vec();
    Ok(Received { status, headers, body })
}

fn as_json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(400).collect();
    if text.chars().count() > 400 {
        s.push_str(&format!("… ({} bytes)", body.len()));
    }
    s
}

/// Creates the function, uploads the runtime's folder and waits until the version serves:
/// `Ok(Ok(()))`; `Ok(Err(why))` when the build failed (the version's JSON and build log).
async fn deploy(server: &Server, http: &reqwest::Client, job: &Job) -> Result<Result<(), String>, String> {
    let mut spec = json!({"name": job.name, "runtime": job.rt.runtime(), "entrypoint": job.entrypoint});
    if let Some(t) = job.function.timeout_sec {
        spec["timeout_sec"] = json!(t);
    }
    if let Some(m) = job.function.memory_mb {
        spec["memory_mb"] = json!(m);
    }
    if let Some(f) = &job.function.payload_format {
        spec["payload_format"] = json!(f);
    }
    if !job.function.env.is_empty() {
        spec["env"] = json!(job.function.env);
    }
    let r = send(http.post(server.api("")).json(&spec)).await?;
    if r.status != 201 {
        return Err(format!("create: {} {}", r.status, snippet(&r.body)));
    }
    let zip = common::zip_dir(&job.code_dir);
    let r =
        send(http.put(server.api(&format!("/{}/code", job.name))).header("content-type", "application/zip").body(zip))
            .await?;
    if r.status != 202 {
        return Err(format!("upload: {} {}", r.status, snippet(&r.body)));
    }
    let version =
        as_json(&r.body)["version"].as_u64().ok_or_else(|| format!("upload: no version in {}", snippet(&r.body)))?;
    let deadline = Instant::now() + BUILD_DEADLINE;
    loop {
        let r = send(http.get(server.api(&format!("/{}/versions/{version}", job.name)))).await?;
        let v = as_json(&r.body);
        match v["phase"].as_str() {
            Some("Ready") if v["active"] == true => return Ok(Ok(())),
            Some("Failed") => {
                let log = send(http.get(server.api(&format!("/{}/versions/{version}/build-log", job.name)))).await?;
                return Ok(Err(format!("{v}\nbuild log:\n{}", last_lines(&String::from_utf8_lossy(&log.body), 30))));
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!("version {version} not ready after {BUILD_DEADLINE:?}: {v}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends the case's request (`repeat` times, one after the other) and returns the responses.
async fn call(server: &Server, http: &reqwest::Client, job: &Job) -> Result<Vec<Received>, String> {
    let req = &job.request;
    let method = req.method.as_deref().unwrap_or("GET");
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| format!("method {method:?}: {e}"))?;
    let body: Option<Vec<u8>> = if let Some(b) = &req.body {
        Some(b.clone().into_bytes())
    } else if let Some(b) = &req.body_base64 {
        Some(base64_decode(b).ok_or("request.body_base64 is not valid base64")?)
    } else {
        req.body_repeat.as_ref().map(|r| r.text.repeat(r.times).into_bytes())
    };
    let url = server.api(&format!("/{}/invoke{}", job.name, req.path));
    let mut all = Vec::new();
    for _ in 0..req.repeat.unwrap_or(1).max(1) {
        let mut builder = http.request(method.clone(), &url);
        for (name, value) in &req.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(b) = &body {
            builder = builder.body(b.clone());
        }
        all.push(send(builder.timeout(CALL_TIMEOUT)).await?);
    }
    Ok(all)
}

/// The invocation record's log lines; waits for the record (written in the background) and,
/// while `ok` says the logs are not complete yet, a little longer.
async fn record_logs(
    server: &Server,
    http: &reqwest::Client,
    request_id: &str,
    ok: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>, String> {
    let url = format!("{}/v1/namespaces/default/invocations/{request_id}", server.url);
    let deadline = Instant::now() + RECORD_DEADLINE;
    let mut last = String::from("never fetched");
    let mut found: Option<Instant> = None;
    loop {
        let r = send(http.get(&url)).await?;
        if r.status == 200 {
            let first_seen = *found.get_or_insert_with(Instant::now);
            let record = as_json(&r.body);
            let lines: Vec<String> = record["logs"]
                .as_array()
                .map(|a| a.iter().map(|l| l.as_str().map(str::to_string).unwrap_or_else(|| l.to_string())).collect())
                .unwrap_or_default();
            if ok(&lines) || first_seen.elapsed() > Duration::from_secs(1) {
                return Ok(lines);
            }
        } else {
            last = format!("{} {}", r.status, snippet(&r.body));
        }
        if Instant::now() > deadline {
            return Err(format!("no invocation record {request_id} after {RECORD_DEADLINE:?}: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every difference between `got` and the expectation, as lines.
fn check_response(job: &Job, got: &Received, subst: &dyn Fn(&str) -> String) -> Vec<String> {
    let e = &job.expect;
    let mut diffs = Vec::new();
    let values = |name: &str| -> Vec<String> {
        got.headers.get_all(name).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect()
    };
    let status = e.status.unwrap_or_default();
    if got.status != status {
        diffs.push(format!("status: expected {status}, got {} (body: {})", got.status, snippet(&got.body)));
    }
    for (name, want) in &e.headers {
        let want = subst(want);
        let have = values(name);
        if have != [want.clone()] {
            diffs.push(format!("header {name}: expected exactly {want:?}, got {have:?}"));
        }
    }
    for (name, want) in &e.header_values {
        let want: Vec<String> = want.iter().map(|w| subst(w)).collect();
        let have = values(name);
        if have != want {
            diffs.push(format!("header {name}: expected the values {want:?}, got {have:?}"));
        }
    }
    for name in &e.absent_headers {
        let have = values(name);
        if !have.is_empty() {
            diffs.push(format!("header {name}: expected absent, got {have:?}"));
        }
    }
    let function_error = values("x-function-error");
    match e.function_error {
        Some(true) if function_error != ["true"] => {
            diffs.push(format!("header x-function-error: expected \"true\", got {function_error:?}"));
        }
        Some(false) | None if !function_error.is_empty() && (e.function_error.is_some() || status < 500) => {
            diffs.push(format!("header x-function-error: expected absent, got {function_error:?}"));
        }
        _ => {}
    }
    if let Some(len) = got.headers.get("content-length") {
        let len = String::from_utf8_lossy(len.as_bytes()).into_owned();
        if len.parse::<usize>().ok() != Some(got.body.len()) {
            diffs.push(format!("content-length {len} but the body has {} bytes", got.body.len()));
        }
    }
    if got.headers.get("x-request-id").is_none() {
        diffs.push("header x-request-id: missing".into());
    }
    if let Some(want) = &e.body {
        let want = subst(want);
        if got.body != want.as_bytes() {
            diffs.push(format!("body: expected {want:?}, got {:?}", snippet(&got.body)));
        }
    }
    if let Some(want) = &e.body_base64 {
        match base64_decode(want) {
            None => diffs.push("case.toml: expect.body_base64 is not valid base64".into()),
            Some(want) if want != got.body => diffs.push(format!(
                "body: expected {} bytes {}, got {} bytes {}",
                want.len(),
                hex_prefix(&want),
                got.body.len(),
                hex_prefix(&got.body)
            )),
            Some(_) => {}
        }
    }
    let json_of = |text: &str, field: &str| -> Result<Value, String> {
        serde_json::from_str(&subst(text)).map_err(|err| format!("case.toml: expect.{field} is not JSON: {err}"))
    };
    let have_json: Result<Value, _> = serde_json::from_slice(&got.body);
    for (field, text, subset) in [("body_json", &e.body_json, false), ("body_json_subset", &e.body_json_subset, true)] {
        let Some(text) = text else { continue };
        match (json_of(text, field), &have_json) {
            (Err(why), _) => diffs.push(why),
            (Ok(_), Err(_)) => diffs.push(format!("body: expected JSON, got {:?}", snippet(&got.body))),
            (Ok(want), Ok(have)) => {
                let same = if subset { json_subset(&want, have) } else { want == *have };
                if !same {
                    let how = if subset { "JSON containing" } else { "the JSON" };
                    diffs.push(format!("body: expected {how} {want}, got {have}"));
                }
            }
        }
    }
    if let Some(want) = &e.error_type {
        let have = have_json.as_ref().ok().and_then(|v| v["errorType"].as_str().map(str::to_string));
        if have.as_deref() != Some(want.as_str()) {
            diffs.push(format!("errorType: expected {want:?}, got body {}", snippet(&got.body)));
        }
    }
    let text = String::from_utf8_lossy(&got.body);
    for want in &e.body_contains {
        let want = subst(want);
        if !text.contains(&want) {
            diffs.push(format!("body: expected to contain {want:?}, got {:?}", snippet(&got.body)));
        }
    }
    if let Some(want) = e.body_len
        && got.body.len() != want
    {
        diffs.push(format!("body: expected {want} bytes, got {}", got.body.len()));
    }
    if let Some(want) = &e.body_sha256 {
        let have = hex::encode(sha2::Sha256::digest(&got.body));
        if have != want.to_ascii_lowercase() {
            diffs.push(format!("body: expected sha256 {want}, got {have} ({} bytes)", got.body.len()));
        }
    }
    diffs
}

/// Differences between the record's logs and the expectation.
fn check_logs(e: &Expect, lines: &[String], subst: &dyn Fn(&str) -> String) -> Vec<String> {
    let joined = lines.join("\n");
    let mut diffs = Vec::new();
    for want in &e.logs_contain {
        let want = subst(want);
        if !joined.contains(&want) {
            diffs.push(format!("logs: expected to contain {want:?}"));
        }
    }
    for bad in &e.logs_absent {
        let bad = subst(bad);
        if joined.contains(&bad) {
            diffs.push(format!("logs: expected not to contain {bad:?}"));
        }
    }
    for c in &e.log_count {
        let want = subst(&c.contains);
        let n = lines.iter().filter(|l| l.contains(&want)).count();
        if n != c.count {
            diffs.push(format!("logs: expected {} lines containing {want:?}, got {n}", c.count));
        }
    }
    if !diffs.is_empty() {
        let shown: Vec<&String> = lines.iter().take(15).collect();
        diffs.push(format!("logs ({} lines) begin: {shown:?}", lines.len()));
    }
    diffs
}

/// Checks `logs_tagged`: the function's log stream tags the call's lines with its request id.
async fn check_stream(server: &Server, http: &reqwest::Client, job: &Job, request_id: &str) -> Vec<String> {
    let r = match send(http.get(server.api(&format!("/{}/logs?tail=1000", job.name)))).await {
        Ok(r) if r.status == 200 => r,
        Ok(r) => return vec![format!("log stream: {} {}", r.status, snippet(&r.body))],
        Err(why) => return vec![format!("log stream: {why}")],
    };
    let stream = as_json(&r.body);
    let items = stream["items"].as_array().cloned().unwrap_or_default();
    let mut diffs = Vec::new();
    for want in &job.expect.logs_tagged {
        let matching: Vec<&Value> =
            items.iter().filter(|i| i["line"].as_str().is_some_and(|l| l.contains(want.as_str()))).collect();
        let untagged: Vec<&Value> = matching.iter().copied().filter(|i| i["request_id"] != request_id).collect();
        if matching.is_empty() {
            diffs.push(format!("log stream: no line contains {want:?} (of {} lines)", items.len()));
        } else if !untagged.is_empty() {
            diffs.push(format!(
                "log stream: {} of {} lines containing {want:?} are not tagged {request_id}, e.g. {}",
                untagged.len(),
                matching.len(),
                untagged[0]
            ));
        }
    }
    diffs
}

/// Deploys, calls and checks one case on one runtime; Err holds every difference.
async fn run_job(server: &Server, http: &reqwest::Client, job: &Job) -> Result<(), String> {
    let built = deploy(server, http, job).await?;
    if !job.expect.deploy_error.is_empty() {
        let Err(why) = built else {
            return Err(format!(
                "deploy: expected the build to fail with {:?}, but it is Ready",
                job.expect.deploy_error
            ));
        };
        let missing: Vec<&String> = job.expect.deploy_error.iter().filter(|w| !why.contains(w.as_str())).collect();
        return if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("deploy: the failure does not mention {missing:?}:\n{why}"))
        };
    }
    built.map_err(|why| format!("the build failed: {why}"))?;
    let responses = call(server, http, job).await?;
    let request_id = |r: &Received| {
        r.headers.get("x-request-id").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default()
    };
    let subst_for = |rid: String| {
        let name = job.name.clone();
        move |s: &str| s.replace("{request_id}", &rid).replace("{function}", &name)
    };
    let Some(last) = responses.last() else { return Err("no request was sent".into()) };
    let mut diffs = check_response(job, last, &subst_for(request_id(last)));
    if job.expect.wants_logs() {
        // With `repeat`, every call's record must hold its own logs.
        let (n, mut bad_calls) = (responses.len(), 0);
        for (k, response) in responses.iter().enumerate() {
            let rid = request_id(response);
            let subst = subst_for(rid.clone());
            let mut call_diffs = Vec::new();
            if rid.is_empty() {
                call_diffs.push("logs: no x-request-id to fetch the invocation record with".into());
            } else {
                match record_logs(server, http, &rid, |lines| check_logs(&job.expect, lines, &subst).is_empty()).await {
                    Ok(lines) => call_diffs.extend(check_logs(&job.expect, &lines, &subst)),
                    Err(why) => call_diffs.push(why),
                }
                if k + 1 == n && !job.expect.logs_tagged.is_empty() {
                    call_diffs.extend(check_stream(server, http, job, &rid).await);
                }
            }
            if !call_diffs.is_empty() {
                bad_calls += 1;
                if bad_calls <= 3 {
                    let prefix = if n > 1 { format!("call {} of {n} ({rid}): ", k + 1) } else { String::new() };
                    diffs.extend(call_diffs.into_iter().map(|d| format!("{prefix}{d}")));
                }
            }
        }
        if bad_calls > 3 {
            diffs.push(format!("… the logs of {bad_calls} of {n} calls differ"));
        }
    }
    if diffs.is_empty() { Ok(()) } else { Err(diffs.join("\n")) }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn json_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| h.get(k).is_some_and(|hv| json_subset(v, hv))),
        _ => want == have,
    }
}

fn hex_prefix(bytes: &[u8]) -> String {
    let shown = hex::encode(&bytes[..bytes.len().min(32)]);
    if bytes.len() > 32 { format!("{shown}…") } else { shown }
}

/// Standard base64 (with or without padding); None if invalid.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let trimmed = text.trim_end_matches('=');
    if text.len() - trimmed.len() > 2 || trimmed.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in trimmed.bytes() {
        acc = (acc << 6) | digit(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_case_conforms_on_every_runtime() {
    let filter = std::env::var("SLESS_CONFORMANCE_FILTER").ok().filter(|f| !f.is_empty());
    let (jobs, broken, cases) = load_jobs(filter.as_deref());
    assert!(cases > 0, "no case matches SLESS_CONFORMANCE_FILTER={filter:?}");
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let mut failures: Vec<String> =
        broken.iter().map(|(case, why)| format!("{case}: the case is broken: {why}")).collect();
    if filter.is_none() {
        for (name, _) in KNOWN_FAILURES {
            if !names.contains(name) {
                failures.push(format!("KNOWN_FAILURES names {name:?}, which is not a case × runtime"));
            }
        }
    }

    let server = Server::start();
    // Title-Case header names on the wire, so the lowercase names in the event are sless's doing.
    let http = reqwest::Client::builder()
        .http1_title_case_headers()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("http client");
    let started = Instant::now();
    let mut results: Vec<(usize, Result<(), String>, Duration)> = futures::stream::iter(jobs.iter().enumerate())
        .map(|(i, job)| {
            let (server, http) = (&server, &http);
            async move {
                let t = Instant::now();
                (i, run_job(server, http, job).await, t.elapsed())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.sort_by_key(|(i, _, _)| *i);

    let (mut passed, mut known) = (0, 0);
    for (i, result, took) in &results {
        let job = &jobs[*i];
        let known_reason = KNOWN_FAILURES.iter().find(|(n, _)| *n == job.name).map(|(_, r)| *r);
        let verdict = match (result, known_reason) {
            (Ok(()), None) => {
                passed += 1;
                "pass"
            }
            (Ok(()), Some(reason)) => {
                failures.push(format!(
                    "{} ({}): passes but is listed in KNOWN_FAILURES ({reason}); remove it from the list",
                    job.case,
                    job.rt.label()
                ));
                "UNEXPECTED PASS"
            }
            (Err(_), Some(_)) => {
                known += 1;
                "known failure"
            }
            (Err(why), None) => {
                let why = why.replace('\n', "\n    ");
                failures.push(format!("{} ({}, function {}):\n    {why}", job.case, job.rt.label(), job.name));
                "FAIL"
            }
        };
        println!("{verdict:>15}  {:<45} {:>6} ms", job.name, took.as_millis());
        if let (Err(why), Some(reason)) = (result, known_reason) {
            println!(
                "                 known: {reason}\n                 got: {}",
                why.lines().next().unwrap_or_default()
            );
        }
    }
    let per_runtime = |rt: Rt| jobs.iter().filter(|j| j.rt == rt).count();
    println!(
        "\n{cases} cases ({} python, {} node): {passed} passed, {known} known failures, {} failed, in {:.1} s",
        per_runtime(Rt::Python),
        per_runtime(Rt::Node),
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} conformance failure(s):\n\n{}\n\nserver log tail:\n{}",
        failures.len(),
        failures.join("\n\n"),
        server.log().lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

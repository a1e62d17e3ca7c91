//! The client commands: they talk to a server over its HTTP API.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::{Connection, DeployArgs, FnCommand, GcArgs, InvokeArgs, Output, VersionsArgs};
use crate::manifest::{FunctionDecl, folder_name, resolve};
use crate::pack::zip_dir;

/// The connection file written by `sless up` and `sless server`.
pub const CLIENT_FILE: &str = "client.json";

/// The user's config folder for sless: `$SLESS_CONFIG_DIR`, else `$XDG_CONFIG_HOME/sless`,
/// else `~/.config/sless`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SLESS_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(d).join("sless"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("sless"))
}

/// An API client for one namespace.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    namespace: String,
}

impl Client {
    /// Resolves the server and token: flags/env first, then `./.sless/client.json`, then the
    /// user's config folder.
    pub fn connect(conn: &Connection) -> anyhow::Result<Self> {
        let saved = || -> Option<Value> {
            let candidates = [Some(PathBuf::from(".sless")), config_dir()];
            candidates.into_iter().flatten().find_map(|d| {
                let text = std::fs::read_to_string(d.join(CLIENT_FILE)).ok()?;
                serde_json::from_str(&text).ok()
            })
        };
        let file = if conn.url.is_none() || conn.token.is_none() { saved() } else { None };
        // A saved token belongs to the saved server: never send it to another one.
        let file = file.filter(|f| conn.url.is_none() || f.get("url").and_then(Value::as_str) == conn.url.as_deref());
        let from_file = |k: &str| file.as_ref().and_then(|f| f.get(k)).and_then(Value::as_str).map(str::to_string);
        let base = conn
            .url
            .clone()
            .or_else(|| from_file("url"))
            .context("no server: pass --url or set SLESS_URL (or start one with `sless up` or `sless server`)")?;
        let token =
            conn.token.clone().or_else(|| from_file("token")).context("no token: pass --token or set SLESS_TOKEN")?;
        Ok(Client::new(&base, &token, &conn.namespace))
    }

    /// A client for `base` with `token`.
    pub fn new(base: &str, token: &str, namespace: &str) -> Self {
        Client {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            namespace: namespace.to_string(),
        }
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/v1/namespaces/{}/functions{rest}", self.base, self.namespace)
    }

    /// `{base}/v1/namespaces/{ns}{rest}`.
    pub(crate) fn ns_url(&self, rest: &str) -> String {
        format!("{}/v1/namespaces/{}{rest}", self.base, self.namespace)
    }

    /// The server's base URL, without a trailing slash.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The namespace this client works in.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The underlying HTTP client (requests still need [`Client::send`] or
    /// [`Client::authed`] for the token).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Adds the bearer token.
    pub(crate) fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.bearer_auth(&self.token)
    }

    /// The public URL of a function's http trigger: `{base}/fn/{ns}/{function}`.
    pub(crate) fn public_url(&self, function: &str) -> String {
        format!("{}/fn/{}/{function}", self.base, self.namespace)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let (status, _, body) = self.send_full(req).await?;
        Ok((status, body))
    }

    /// Sends with the token; returns the status, headers and body (JSON, else a string).
    pub(crate) async fn send_full(
        &self,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<(reqwest::StatusCode, reqwest::header::HeaderMap, Value)> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.context("cannot read the server's answer")?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, headers, body))
    }

    /// Sends and fails on an error status, showing the problem's detail.
    pub(crate) async fn expect(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let (status, body) = self.send(req).await?;
        if !status.is_success() {
            bail!("{}", problem_text(status, &body));
        }
        Ok(body)
    }

    /// Every item of a paginated list at `url` (following `next_cursor`).
    pub(crate) async fn list_all(&self, url: &str) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = self.http.get(url).query(&[("limit", "1000")]);
            if let Some(c) = &cursor {
                req = req.query(&[("cursor", c)]);
            }
            let page = self.expect(req).await?;
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            cursor = page["next_cursor"].as_str().filter(|c| !c.is_empty()).map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(items)
    }

    async fn get_function(&self, name: &str) -> anyhow::Result<Option<Value>> {
        let (status, body) = self.send(self.http.get(self.url(&format!("/{name}")))).await?;
        match status {
            reqwest::StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(body)),
            s => bail!("{}", problem_text(s, &body)),
        }
    }
}

pub(crate) fn problem_text(status: reqwest::StatusCode, body: &Value) -> String {
    let detail = body.get("detail").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| body.to_string());
    format!("{} {}: {detail}", status.as_u16(), status.canonical_reason().unwrap_or_default())
}

/// What to deploy: a folder and the spec fields given for it.
pub struct DeployPlan {
    pub name: String,
    pub dir: PathBuf,
    pub runtime: String,
    pub entrypoint: String,
    pub memory_mb: Option<u32>,
    pub timeout_sec: Option<u32>,
    pub env: BTreeMap<String, String>,
    /// Replace the whole spec (a manifest is the truth) rather than patch the given fields.
    pub replace: bool,
}

impl DeployPlan {
    /// The plan for a manifest entry.
    pub fn from_decl(decl: &FunctionDecl) -> anyhow::Result<Self> {
        let dir = decl.path.clone().context("function has no path")?;
        let (runtime, entrypoint) = resolve(&dir, decl.runtime.as_deref(), decl.entrypoint.as_deref())?;
        Ok(DeployPlan {
            name: decl.name.clone(),
            dir,
            runtime,
            entrypoint,
            memory_mb: decl.memory_mb,
            timeout_sec: decl.timeout_sec,
            env: decl.env.clone(),
            replace: true,
        })
    }

    fn spec(&self) -> Value {
        let mut spec = json!({ "name": self.name, "runtime": self.runtime, "entrypoint": self.entrypoint });
        if let Some(m) = self.memory_mb {
            spec["memory_mb"] = json!(m);
        }
        if let Some(t) = self.timeout_sec {
            spec["timeout_sec"] = json!(t);
        }
        if self.replace || !self.env.is_empty() {
            spec["env"] = json!(self.env);
        }
        spec
    }
}

/// Creates or updates the function, uploads the folder and (with `wait`) waits until the
/// new version serves. Returns the function as the server shows it.
pub async fn deploy_plan(client: &Client, plan: &DeployPlan, wait: bool) -> anyhow::Result<Value> {
    let started = Instant::now();
    let spec = plan.spec();
    let existing = client.get_function(&plan.name).await?;
    let mut created = false;
    if existing.is_none() {
        let (status, body) = client.send(client.http.post(client.url("")).json(&spec)).await?;
        match status {
            s if s.is_success() => created = true,
            // Someone else created it meanwhile (parallel deploys): update it instead.
            reqwest::StatusCode::CONFLICT => {}
            s => bail!("creating {}: {}", plan.name, problem_text(s, &body)),
        }
    }
    if !created {
        let req = if plan.replace {
            client.http.put(client.url(&format!("/{}", plan.name))).json(&spec)
        } else {
            client
                .http
                .patch(client.url(&format!("/{}", plan.name)))
                .header("content-type", "application/merge-patch+json")
                .body(spec.to_string())
        };
        client.expect(req).await.with_context(|| format!("updating {}", plan.name))?;
    }
    let dir = plan.dir.clone();
    let archive = tokio::task::spawn_blocking(move || zip_dir(&dir)).await??;
    let upload = client
        .http
        .put(client.url(&format!("/{}/code", plan.name)))
        .header("content-type", "application/zip")
        .body(archive);
    let uploaded = match client.expect(upload).await {
        Ok(v) => v,
        Err(e) => {
            // A function this deploy created is not left behind without code.
            if created {
                let _ = client.send(client.http.delete(client.url(&format!("/{}", plan.name)))).await;
            }
            return Err(e.context(format!("uploading {}", plan.dir.display())));
        }
    };
    let version = uploaded.get("version").and_then(Value::as_u64).context("the server did not return a version")?;
    if !wait {
        return client.get_function(&plan.name).await?.context("the function disappeared");
    }
    let tty = std::io::stderr().is_terminal();
    let mut shown = false;
    loop {
        let v = client.expect(client.http.get(client.url(&format!("/{}/versions/{version}", plan.name)))).await?;
        let phase = v.get("phase").and_then(Value::as_str).unwrap_or_default();
        match phase {
            "Failed" => {
                if tty && shown {
                    eprintln!();
                }
                let log = client
                    .http
                    .get(client.url(&format!("/{}/versions/{version}/build-log", plan.name)))
                    .bearer_auth(&client.token)
                    .send()
                    .await?
                    .text()
                    .await?;
                let tail: Vec<&str> = log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
                bail!("{} version {version} failed to build:\n{}", plan.name, tail.join("\n"));
            }
            "Ready" if v.get("active").and_then(Value::as_bool) == Some(true) => break,
            _ => {}
        }
        if tty {
            if !shown {
                eprint!("building {} version {version} ", plan.name);
                shown = true;
            }
            eprint!(".");
            let _ = std::io::stderr().flush();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if tty && shown {
        eprintln!(" done");
    }
    let f = client.get_function(&plan.name).await?.context("the function disappeared")?;
    eprintln!("deployed {} version {version} in {} ms", plan.name, started.elapsed().as_millis());
    Ok(f)
}

pub async fn deploy(conn: &Connection, args: DeployArgs) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    let dir = args.dir.canonicalize().with_context(|| format!("cannot open {}", args.dir.display()))?;
    if dir.join(crate::manifest::MANIFEST).exists() {
        return deploy_manifest(conn, &dir, &args).await;
    }
    let name = match &args.name {
        Some(n) => n.clone(),
        None => folder_name(&dir)?,
    };
    let (runtime, entrypoint) = resolve(&dir, args.runtime.as_deref(), args.entrypoint.as_deref())?;
    let mut env = BTreeMap::new();
    for kv in &args.env {
        let (k, v) = kv.split_once('=').with_context(|| format!("--env {kv:?}: expected KEY=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let plan = DeployPlan {
        name,
        dir,
        runtime,
        entrypoint,
        memory_mb: args.memory,
        timeout_sec: args.timeout,
        env,
        replace: false,
    };
    let f = deploy_plan(&client, &plan, !args.no_wait).await?;
    println!("{}", f.get("url").and_then(Value::as_str).unwrap_or_default());
    Ok(())
}

/// Deploys every function of a `sless.toml` (flags that name one function are refused).
async fn deploy_manifest(conn: &Connection, dir: &Path, args: &DeployArgs) -> anyhow::Result<()> {
    if args.name.is_some()
        || args.runtime.is_some()
        || args.entrypoint.is_some()
        || args.memory.is_some()
        || args.timeout.is_some()
        || !args.env.is_empty()
    {
        bail!("{} has a {}: set function fields there, not with flags", dir.display(), crate::manifest::MANIFEST);
    }
    let manifest = crate::manifest::load(dir)?;
    let mut conn = conn.clone();
    conn.namespace = manifest.namespace.clone();
    let client = Client::connect(&conn)?;
    match apply_manifest(&client, &manifest, !args.no_wait).await {
        Ok(lines) => {
            print_lines(&lines);
            Ok(())
        }
        Err(e) => {
            if let Some(partial) = e.downcast_ref::<ApplyFailed>() {
                print_lines(&partial.lines);
            }
            Err(e)
        }
    }
}

fn print_lines(lines: &[(String, String)]) {
    for (label, url) in lines {
        println!("{label:<20} {url}");
    }
}

/// Some entries of a manifest failed to apply; the others were applied. Returned (inside the
/// `anyhow::Error`) by [`apply_manifest`]; `downcast_ref::<ApplyFailed>()` gives the lines of
/// what did deploy, to print them anyway.
#[derive(Debug)]
pub struct ApplyFailed {
    /// (label, url) of what was applied, as [`apply_manifest`] returns them on success.
    pub lines: Vec<(String, String)>,
    /// `function NAME`, `trigger NAME` or `job NAME` of each failure (each was printed to
    /// stderr when it happened).
    pub failed: Vec<String>,
}

impl std::fmt::Display for ApplyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of the manifest's entries failed to apply: {}", self.failed.len(), self.failed.join(", "))
    }
}

impl std::error::Error for ApplyFailed {}

/// Applies a manifest: deploys each function (waiting for its build with `wait`), then
/// creates or replaces (PUT) each trigger and job — a trigger or job whose function is not
/// Ready waits for it on the server. A failing entry does not stop the others: it is printed
/// to stderr (`error: function NAME: …`) and, if any failed, the result is an error wrapping
/// [`ApplyFailed`] (which still carries the lines). Returns (label, url) lines to print: each
/// function's invoke URL (label: its name) and each http trigger's public URL
/// `{base}/fn/{ns}/{function}` (label: `NAME (http)`). Progress goes to stderr.
pub async fn apply_manifest(
    client: &Client,
    manifest: &crate::manifest::Manifest,
    wait: bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for decl in &manifest.functions {
        match async { deploy_plan(client, &DeployPlan::from_decl(decl)?, wait).await }.await {
            Ok(f) => lines.push((decl.name.clone(), f["url"].as_str().unwrap_or_default().to_string())),
            Err(e) => {
                eprintln!("error: function {}: {e:#}", decl.name);
                failed.push(format!("function {}", decl.name));
            }
        }
    }
    for t in &manifest.triggers {
        match crate::triggers_cli::put_or_create(client, "triggers", &t.name, &t.body()).await {
            Ok(rec) => {
                let what = match t.kind {
                    sless_core::trigger::TriggerType::Http => {
                        let url = crate::triggers_cli::trigger_public_url(client, &rec);
                        lines.push((format!("{} (http)", t.name), url));
                        format!("http → {}", t.function)
                    }
                    sless_core::trigger::TriggerType::Cron => {
                        format!("cron {:?} → {}", t.schedule.as_deref().unwrap_or_default(), t.function)
                    }
                };
                eprintln!("applied trigger {} ({what}): {}", t.name, s(&rec, &["status", "phase"]));
            }
            Err(e) => {
                eprintln!("error: trigger {}: {e:#}", t.name);
                failed.push(format!("trigger {}", t.name));
            }
        }
    }
    for j in &manifest.jobs {
        match crate::triggers_cli::put_or_create(client, "jobs", &j.name, &j.body()).await {
            Ok(rec) => eprintln!(
                "applied job {} (run_id {} → {}): {}",
                j.name,
                j.run_id,
                j.function,
                s(&rec, &["status", "phase"])
            ),
            Err(e) => {
                eprintln!("error: job {}: {e:#}", j.name);
                failed.push(format!("job {}", j.name));
            }
        }
    }
    if !failed.is_empty() {
        return Err(ApplyFailed { lines, failed }.into());
    }
    Ok(lines)
}

pub async fn invoke(conn: &Connection, args: InvokeArgs) -> anyhow::Result<std::process::ExitCode> {
    let client = Client::connect(conn)?;
    let body = match args.data.as_deref() {
        None => None,
        Some("@-") => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
            Some(buf)
        }
        Some(d) if d.starts_with('@') => {
            Some(std::fs::read(Path::new(&d[1..])).with_context(|| format!("cannot read {}", &d[1..]))?)
        }
        Some(d) => Some(d.as_bytes().to_vec()),
    };
    let method = args.method.clone().unwrap_or_else(|| if body.is_some() { "POST".into() } else { "GET".into() });
    let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).context("invalid --method")?;
    let path = if args.path.starts_with('/') { args.path.clone() } else { format!("/{}", args.path) };
    let mut req =
        client.http.request(method, client.url(&format!("/{}/invoke{path}", args.name))).bearer_auth(&client.token);
    let mut has_type = false;
    for h in &args.headers {
        let (k, v) = h.split_once(':').with_context(|| format!("-H {h:?}: expected \"Name: value\""))?;
        has_type |= k.trim().eq_ignore_ascii_case("content-type");
        req = req.header(k.trim(), v.trim());
    }
    if let Some(body) = body {
        if !has_type {
            let json = serde_json::from_slice::<Value>(&body).is_ok();
            req = req.header("content-type", if json { "application/json" } else { "application/octet-stream" });
        }
        req = req.body(body);
    }
    let resp = req.send().await.with_context(|| format!("cannot reach the server at {}", client.base))?;
    let status = resp.status();
    if args.include {
        println!("HTTP {} {}", status.as_u16(), status.canonical_reason().unwrap_or_default());
        for (k, v) in resp.headers() {
            println!("{k}: {}", v.to_str().unwrap_or("<binary>"));
        }
        println!();
    }
    let bytes = resp.bytes().await?;
    let mut out = std::io::stdout();
    out.write_all(&bytes)?;
    if !bytes.ends_with(b"\n") && out.is_terminal() {
        out.write_all(b"\n")?;
    }
    if status.is_client_error() || status.is_server_error() {
        if !args.include {
            eprintln!("HTTP {} {}", status.as_u16(), status.canonical_reason().unwrap_or_default());
        }
        return Ok(std::process::ExitCode::FAILURE);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

pub(crate) fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

pub(crate) fn s(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    match cur {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub async fn functions(conn: &Connection, cmd: FnCommand) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    match cmd {
        FnCommand::List(out) => {
            let items = client.list_all(&client.url("")).await?;
            if out.output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&json!({ "items": items }))?);
            } else {
                let rows: Vec<Vec<String>> = items
                    .iter()
                    .map(|f| {
                        vec![
                            s(f, &["name"]),
                            s(f, &["runtime"]),
                            s(f, &["status", "phase"]),
                            s(f, &["active_version"]),
                            s(f, &["memory_mb"]),
                            s(f, &["timeout_sec"]),
                            s(f, &["url"]),
                        ]
                    })
                    .collect();
                print_table(&["NAME", "RUNTIME", "PHASE", "VERSION", "MEMORY_MB", "TIMEOUT_SEC", "URL"], &rows);
            }
        }
        FnCommand::Get { name, out } => {
            let f = client.get_function(&name).await?.with_context(|| format!("function {name:?} not found"))?;
            if out.output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&f)?);
            } else {
                for (k, path) in [
                    ("name", &["name"][..]),
                    ("namespace", &["namespace"]),
                    ("runtime", &["runtime"]),
                    ("entrypoint", &["entrypoint"]),
                    ("memory_mb", &["memory_mb"]),
                    ("timeout_sec", &["timeout_sec"]),
                    ("enabled", &["enabled"]),
                    ("phase", &["status", "phase"]),
                    ("message", &["status", "message"]),
                    ("active_version", &["active_version"]),
                    ("url", &["url"]),
                ] {
                    println!("{k:<15} {}", s(&f, path));
                }
                let env_names: Vec<&String> = f["env"].as_object().map(|m| m.keys().collect()).unwrap_or_default();
                println!(
                    "{:<15} {}",
                    "env",
                    if env_names.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{env_names:?} (values hidden; -o json shows them)")
                    }
                );
            }
        }
        FnCommand::Delete { name } => {
            client.expect(client.http.delete(client.url(&format!("/{name}")))).await?;
            eprintln!("deleted {name}");
        }
    }
    Ok(())
}

pub async fn versions(conn: &Connection, args: VersionsArgs) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    let f = client.get_function(&args.name).await?.with_context(|| format!("function {:?} not found", args.name))?;
    let page = client.expect(client.http.get(client.url(&format!("/{}/versions", args.name)))).await?;
    if args.out.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    let active = f["active_version"].as_u64();
    let rows: Vec<Vec<String>> = page["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|v| {
                    vec![
                        s(v, &["version"]),
                        s(v, &["phase"]),
                        if v["version"].as_u64() == active { "*".into() } else { String::new() },
                        s(v, &["sha256"]).chars().take(12).collect(),
                        s(v, &["size_bytes"]),
                        s(v, &["created_at"]),
                        s(v, &["message"]).lines().last().unwrap_or_default().chars().take(60).collect(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    print_table(&["VERSION", "PHASE", "ACTIVE", "SHA256", "SIZE_BYTES", "CREATED", "MESSAGE"], &rows);
    Ok(())
}

/// `sless gc`: asks the server to collect now and prints what it deleted.
pub async fn gc(conn: &Connection, args: GcArgs) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    let mut query = Vec::new();
    if let Some(n) = args.keep_versions {
        query.push(("keep_versions", n.to_string()));
    }
    if let Some(sec) = args.grace_sec {
        query.push(("grace_sec", sec.to_string()));
    }
    if args.dry_run {
        query.push(("dry_run", "true".to_string()));
    }
    let report = client.expect(client.http.post(format!("{}/v1/gc", client.base)).query(&query)).await?;
    if args.out.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for v in report["versions"].as_array().into_iter().flatten() {
        let function = format!("{}/{}", s(v, &["namespace"]), s(v, &["function"]));
        rows.push(vec!["version".into(), format!("{function} {}", s(v, &["version"])), String::new()]);
    }
    for a in report["archives"].as_array().into_iter().flatten() {
        rows.push(vec!["archive".into(), s(a, &["key"]), s(a, &["size_bytes"])]);
    }
    if !rows.is_empty() {
        print_table(&["KIND", "WHAT", "SIZE_BYTES"], &rows);
    }
    let count = |k: &str| report[k].as_array().map_or(0, Vec::len);
    eprintln!(
        "{} {} versions and {} archives ({} bytes)",
        if report["dry_run"] == true { "would delete" } else { "deleted" },
        count("versions"),
        count("archives"),
        report["bytes_freed"].as_u64().unwrap_or(0)
    );
    Ok(())
}

//! The test harness: starts the real `sless` binary on 127.0.0.1 port 0 with a temp data
//! folder, and talks to it over HTTP or through the CLI.

#![allow(dead_code)] // Each test file uses a different part of the harness.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sless_client::{Client, InvokeRequest, Method};

/// The admin token every test server uses.
pub const TOKEN: &str = "test-admin-token-0123456789";

/// The `sless` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sless")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// A running `sless server`.
pub struct Server {
    pub url: String,
    pub data: PathBuf,
    pub child: Option<Child>,
    pub stderr: PathBuf,
    _dir: Option<tempfile::TempDir>,
    /// For requests a test builds itself (no token: [`Server::send`] adds it).
    pub http: reqwest::Client,
    /// The typed client, with the admin token, in namespace `default`.
    pub client: Client,
}

impl Server {
    /// Starts a server in a new temp data folder.
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Starts a server in a new temp data folder with extra flags.
    pub fn start_with(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().to_path_buf();
        let mut s = Self::start_in(&data, args);
        s._dir = Some(dir);
        s
    }

    /// Starts a server in a new temp data folder with extra flags and environment variables.
    pub fn start_with_env(args: &[&str], env: &[(String, String)]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = Self::start_in_env(dir.path(), args, env);
        s._dir = Some(dir);
        s
    }

    /// Starts a server on an existing data folder (for restart tests).
    pub fn start_in(data: &Path, args: &[&str]) -> Server {
        Self::start_in_env(data, args, &[])
    }

    /// Starts a server on an existing data folder with extra flags and environment variables.
    pub fn start_in_env(data: &Path, args: &[&str], env: &[(String, String)]) -> Server {
        Self::start_through(&[], data, args, env)
    }

    /// Starts a server on an existing data folder through `wrapper` (a command that runs the
    /// binary, e.g. `setpriv` with another user), with extra flags and environment variables.
    pub fn start_through(wrapper: &[&str], data: &Path, args: &[&str], env: &[(String, String)]) -> Server {
        let stderr =
            data.join(format!("server-{}.log", std::process::id() as u128 + Instant::now().elapsed().as_nanos()));
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&stderr).expect("log file");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let mut child = command
            .arg("server")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(args)
            .env("SLESS_ADMIN_TOKEN", TOKEN)
            .env("SLESS_CONFIG_DIR", data.join("config"))
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start sless server");
        let url = read_url(&mut child, &stderr);
        let http = reqwest::Client::new();
        let client = Client::with_http(http.clone(), &url, TOKEN, "default");
        Server { url, data: data.to_path_buf(), child: Some(child), stderr, _dir: None, http, client }
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn api(&self, rest: &str) -> String {
        format!("{}/v1/namespaces/default/functions{rest}", self.url)
    }

    /// Any request with the admin token: the status, headers and body (JSON, else a string).
    pub async fn send(&self, req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
        let r = self.client.send(req).await.expect("request");
        (r.status.as_u16(), r.headers.clone(), r.json_or_text())
    }

    pub async fn create(&self, spec: Value) -> (u16, Value) {
        let (s, _, b) = self.send(self.http.post(self.api("")).json(&spec)).await;
        (s, b)
    }

    pub async fn upload(&self, name: &str, zip: Vec<u8>) -> (u16, Value) {
        let req = self.http.put(self.api(&format!("/{name}/code"))).header("content-type", "application/zip").body(zip);
        let (s, _, b) = self.send(req).await;
        (s, b)
    }

    pub async fn get(&self, name: &str) -> (u16, Value) {
        let (s, _, b) = self.send(self.http.get(self.api(&format!("/{name}")))).await;
        (s, b)
    }

    /// Waits until `version` is built and active (or failed); returns the version object.
    pub async fn wait_version(&self, name: &str, version: u64) -> Value {
        let version = u32::try_from(version).expect("version number");
        let v = self
            .client
            .wait_ready(name, version, Duration::from_secs(180), Duration::from_millis(50))
            .await
            .unwrap_or_else(|e| panic!("version {version} of {name}: {e:#?}\n{}", self.log()));
        serde_json::to_value(&v).expect("version json")
    }

    /// Creates a function from files and waits until it is Ready; panics otherwise.
    pub async fn deploy(
        &self,
        name: &str,
        runtime: &str,
        entrypoint: &str,
        files: &[(&str, &str)],
        extra: Value,
    ) -> Value {
        let mut spec = json!({"name": name, "runtime": runtime, "entrypoint": entrypoint});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        self.client.create_function(&spec).await.unwrap_or_else(|e| panic!("creating {name}: {e:#?}"));
        let up = self.client.upload_code(name, zip(files)).await.unwrap_or_else(|e| panic!("uploading {name}: {e:#?}"));
        let v = self.wait_version(name, u64::from(up.version)).await;
        assert_eq!(v["phase"], "Ready", "{v}\n{}", self.log());
        v
    }

    /// Calls `/invoke{path}` with a method and optional body (sent as JSON); the answer as
    /// it came: status, headers, body (JSON, else a string).
    pub async fn invoke(
        &self,
        name: &str,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut call = InvokeRequest::new(Method::from_bytes(method.as_bytes()).expect("method"));
        // The path may carry a query: it is passed on as written.
        call.path = path.to_string();
        if let Some(b) = body {
            call = call.header("content-type", "application/json").body(b.to_string());
        }
        let r = self.client.invoke(name, &call).await.expect("invoke");
        (r.status.as_u16(), r.headers.clone(), r.json_or_text())
    }

    /// Runs the CLI against this server.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        self.cli_in(&repo(), args)
    }

    /// Runs the CLI against this server from `cwd`.
    pub fn cli_in(&self, cwd: &Path, args: &[&str]) -> std::process::Output {
        Command::new(bin())
            .args(args)
            .current_dir(cwd)
            .env("SLESS_URL", &self.url)
            .env("SLESS_TOKEN", TOKEN)
            .env("SLESS_CONFIG_DIR", self.data.join("cli-config"))
            .output()
            .expect("run sless")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads the child's stdout until the "listening on" line; the rest of stdout is drained in
/// the background.
pub fn read_url(child: &mut Child, log: &Path) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let (false, Some(url)) = (sent, line.strip_prefix("sless listening on ")) {
                let _ = tx.send(url.to_string());
                sent = true;
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(url) => url,
        Err(_) => panic!("server did not start:\n{}", std::fs::read_to_string(log).unwrap_or_default()),
    }
}

/// A zip of (path, content) entries.
pub fn zip(files: &[(&str, &str)]) -> Vec<u8> {
    zip_bytes(&files.iter().map(|(n, c)| (*n, c.as_bytes())).collect::<Vec<_>>())
}

/// A zip of (path, bytes) entries.
pub fn zip_bytes(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, content) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default()).expect("start");
        w.write_all(content).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

/// Zips a folder of the repository the way `sless deploy` does (all files, relative paths).
pub fn zip_dir(dir: &Path) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.expect("walk");
        let rel = entry.path().strip_prefix(dir).expect("rel");
        let name = rel.to_str().expect("utf8");
        if name.is_empty() || name.contains("node_modules") || name.contains("__pycache__") {
            continue;
        }
        if entry.file_type().is_file() {
            w.start_file(name, zip::write::SimpleFileOptions::default()).expect("start");
            w.write_all(&std::fs::read(entry.path()).expect("read")).expect("write");
        }
    }
    w.finish().expect("finish").into_inner()
}

/// Host pids of the processes started with `TMPDIR=tmp` in their environment. Each instance has
/// a temp folder of its own (a warm-pool process is started with the one it keeps), so a
/// function returning its `TMPDIR` names its instance; its own pid does not, since each
/// instance is pid 1 of a pid namespace of its own where the server is root (docs/security.md,
/// "PID namespaces"). Children the instance started inherit the variable and are listed too.
pub fn pids_with_tmpdir(tmp: &str) -> Vec<u32> {
    let needle = format!("TMPDIR={tmp}\0");
    let mut found: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| String::from_utf8_lossy(&env).contains(needle.as_str()))
        })
        .collect();
    found.sort_unstable();
    found
}

/// Processes whose command line mentions `needle` (to check nothing was left behind).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if !entry.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// Files under `dir`, recursively, relative.
pub fn files_under(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).expect("rel").display().to_string())
        .collect()
}

//! A real `sless server` child process on 127.0.0.1 port 0 with a temp data folder, and the
//! API calls the benchmark makes, through `sless-client` (the load itself is `crate::load`'s).

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use sless_client::{Client, Function, InvocationFilter, PageRequest};
use sless_core::status::VersionPhase;

/// The admin token of every benchmark server.
pub const TOKEN: &str = "sless-bench-admin-token-0123456789";

/// A running server; stopped with SIGTERM when dropped.
pub struct Sless {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The listening address.
    pub addr: SocketAddr,
    /// The data folder (every instance's command line mentions it).
    pub data: PathBuf,
    /// The server's process id.
    pub pid: u32,
    /// The server's log file.
    pub log: PathBuf,
    child: Option<Child>,
    client: Client,
    _dir: tempfile::TempDir,
}

impl Sless {
    /// Starts `bin server` with `args` in a new temp data folder and waits for its address.
    pub fn start(bin: &Path, args: &[String]) -> Result<Sless> {
        let dir = tempfile::Builder::new().prefix("sless-bench-").tempdir()?;
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        let log = dir.path().join("server.log");
        let log_file = std::fs::File::create(&log)?;
        let mut child = Command::new(bin)
            .arg("server")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .args(args)
            .env("SLESS_ADMIN_TOKEN", TOKEN)
            .env("SLESS_CONFIG_DIR", dir.path().join("config"))
            // The server's own defaults (log level included), whatever this shell sets.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id();
        let url = match read_url(&mut child) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{e:#}\n{}", std::fs::read_to_string(&log).unwrap_or_default());
            }
        };
        let addr: SocketAddr = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("unexpected server URL {url}"))?
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("server URL {url}"))?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
        let client = Client::with_http(http, &url, TOKEN, "default");
        Ok(Sless { url, addr, data, pid, log, child: Some(child), client, _dir: dir })
    }

    /// The `Authorization` header value.
    pub fn auth() -> String {
        format!("Bearer {TOKEN}")
    }

    /// `POST …/functions`.
    pub async fn create(&self, spec: &Value) -> Result<()> {
        self.client.create_function(spec).await.with_context(|| format!("creating {}", spec["name"]))?;
        Ok(())
    }

    /// `PUT …/functions/{name}/code`; returns the version number.
    pub async fn upload(&self, name: &str, zip: Vec<u8>) -> Result<u32> {
        Ok(self.client.upload_code(name, zip).await.with_context(|| format!("uploading {name}"))?.version)
    }

    /// Polls `GET …/versions/{n}` every `every` until it is Ready and active; fails on Failed.
    pub async fn wait_version(&self, name: &str, version: u32, every: Duration) -> Result<()> {
        let v = self
            .client
            .wait_ready(name, version, Duration::from_secs(300), every)
            .await
            .with_context(|| format!("version {version} of {name}"))?;
        if v.record.phase == VersionPhase::Failed {
            bail!("version {version} of {name} failed: {}", v.record.message);
        }
        Ok(())
    }

    /// Creates a function from files and waits until it serves.
    pub async fn deploy(&self, name: &str, runtime: &str, entrypoint: &str, files: &[(&str, &str)]) -> Result<()> {
        self.deploy_with(name, runtime, entrypoint, files, serde_json::Map::new()).await
    }

    /// [`Sless::deploy`] with more spec fields (e.g. `concurrency`).
    pub async fn deploy_with(
        &self,
        name: &str,
        runtime: &str,
        entrypoint: &str,
        files: &[(&str, &str)],
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let mut spec = serde_json::Map::new();
        spec.insert("name".into(), json!(name));
        spec.insert("runtime".into(), json!(runtime));
        spec.insert("entrypoint".into(), json!(entrypoint));
        spec.extend(extra);
        self.create(&serde_json::Value::Object(spec)).await?;
        let v = self.upload(name, zip(files)?).await?;
        self.wait_version(name, v, Duration::from_millis(20)).await
    }

    /// `POST …/triggers` of type http: publishes the function at `/fn/default/{function}`.
    pub async fn http_trigger(&self, function: &str) -> Result<()> {
        let body = json!({"name": format!("{function}-http"), "function": function, "type": "http"});
        self.client.create_trigger(&body).await.with_context(|| format!("creating the http trigger of {function}"))?;
        Ok(())
    }

    /// `GET …/functions?limit=1000` (every page): the functions.
    pub async fn list_functions(&self) -> Result<Vec<Function>> {
        self.client.list_all_functions().await.context("listing functions")
    }

    /// One timed `GET …/functions?limit=1000` (the body fully read).
    pub async fn time_list(&self) -> Result<Duration> {
        let t0 = Instant::now();
        let req = self.client.http().get(self.client.functions_url("")).query(&[("limit", "1000")]);
        let r = self.client.send(req).await?;
        if r.status.as_u16() != 200 {
            bail!("listing functions: HTTP {}", r.status);
        }
        Ok(t0.elapsed())
    }

    /// Counts a function's invocation records (every page of `…/invocations?limit=1000`).
    pub async fn count_invocations(&self, name: &str) -> Result<usize> {
        let mut n = 0;
        let mut page = PageRequest::first(1000);
        loop {
            let got = self
                .client
                .list_invocations(name, &InvocationFilter::default(), &page)
                .await
                .with_context(|| format!("listing invocations of {name}"))?;
            n += got.items.len();
            match got.next_cursor {
                Some(c) if !got.items.is_empty() => page.cursor = Some(c),
                _ => return Ok(n),
            }
        }
    }

    /// The sum of a metric's samples whose label set contains every `labels` pair.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
        let text = self.client.http().get(format!("{}/metrics", self.url)).send().await?.text().await?;
        Ok(sum_metric(&text, name, labels))
    }

    /// The server's resident memory (VmRSS), in MiB.
    pub fn rss_mib(&self) -> Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .ok_or_else(|| anyhow!("no VmRSS in /proc/{}/status", self.pid))?
            .parse()?;
        Ok(kb / 1024.0)
    }

    /// Processes other than the server whose command line mentions its data folder (its
    /// instances and builds).
    pub fn instance_processes(&self) -> usize {
        let needle = self.data.to_string_lossy().into_owned();
        processes().into_iter().filter(|(pid, cmd)| *pid != self.pid && cmd.contains(&needle)).count()
    }

    /// Adds the end of the server's log to an error (the log goes with the temp folder).
    pub fn explain<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            e.context(format!("server log ({}), last lines:\n{tail}", self.url))
        })
    }

    /// Stops the server (SIGTERM, then SIGKILL after 20 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Sless {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the child's stdout until "sless listening on URL"; drains the rest in the background.
fn read_url(child: &mut Child) -> Result<String> {
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let (false, Some(url)) = (sent, line.strip_prefix("sless listening on ")) {
                let _ = tx.send(url.trim().to_string());
                sent = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).map_err(|_| anyhow!("the server did not start within 60 s"))
}

/// A zip of (path, content) entries.
pub fn zip(files: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, content) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())?;
        w.write_all(content.as_bytes())?;
    }
    Ok(w.finish()?.into_inner())
}

/// Every process's id and command line (NULs as spaces).
pub fn processes() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// Whether a process started with `TMPDIR=tmp` runs (an instance's temp folder names it).
pub fn instance_runs(tmp: &str) -> bool {
    let needle = format!("TMPDIR={tmp}\0");
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).any(|e| {
        std::fs::read(e.path().join("environ")).is_ok_and(|env| String::from_utf8_lossy(&env).contains(needle.as_str()))
    })
}

/// Sums the Prometheus text samples of `name` whose labels include every pair of `labels`.
fn sum_metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            if metric != name {
                return None;
            }
            let ok = labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            ok.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_matching_series() {
        let text = "# TYPE sless_cold_starts counter\n\
                    sless_cold_starts_total{namespace=\"default\",function=\"a\"} 3\n\
                    sless_cold_starts_total{namespace=\"default\",function=\"b\"} 4\n\
                    sless_invocations_total{function=\"a\",outcome=\"ok\"} 7\n";
        assert_eq!(sum_metric(text, "sless_cold_starts_total", &[("function", "a")]), 3.0);
        assert_eq!(sum_metric(text, "sless_cold_starts_total", &[]), 7.0);
        assert_eq!(sum_metric(text, "sless_invocations_total", &[("outcome", "ok")]), 7.0);
    }
}

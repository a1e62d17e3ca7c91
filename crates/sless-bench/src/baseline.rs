//! The runtimes without sless: a minimal hello HTTP server per runtime, used as the "direct"
//! baseline of warm calls and, spawned anew per sample, as the interpreter start-up floor of
//! cold starts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Python's standard-library server: one thread per connection, keep-alive, TCP_NODELAY,
/// status line, headers and body in one write (two writes would meet Nagle + delayed ACK).
pub const PYTHON_SERVER: &str = r#"import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        body = json.dumps({"message": "Hello, world!"}).encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.wfile.write(head + body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// Node's `http` server (TCP_NODELAY; `end(body)` after `writeHead` is one write).
pub const NODE_SERVER: &str = r#"const http = require("http");
const server = http.createServer({ noDelay: true, keepAliveTimeout: 60000 }, (req, res) => {
  const body = JSON.stringify({ message: "Hello, world!" });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
});
server.listen(0, "127.0.0.1", () => console.log(String(server.address().port)));
"#;

/// The handler sless runs for the Python rows (the same answer as the direct server).
pub const PYTHON_HELLO: &str = "def handler(event, context):\n    return {\"message\": \"Hello, world!\"}\n";
/// The handler sless runs for the Node rows.
pub const NODE_HELLO: &str = "exports.handler = async () => ({ message: \"Hello, world!\" });\n";

/// A runtime under test.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// `python` or `node` (row labels).
    pub label: &'static str,
    /// The sless runtime name.
    pub sless_runtime: &'static str,
    /// The function's file and entrypoint in sless.
    pub file: &'static str,
    /// `main.handler` / `index.handler`.
    pub entrypoint: &'static str,
    /// The hello handler's source.
    pub hello: &'static str,
    /// The real interpreter binary (no shell shims).
    pub interpreter: PathBuf,
    /// The bare server script (written to a temp folder).
    pub server_script: PathBuf,
    /// `--version` of the interpreter.
    pub version: String,
}

impl Runtime {
    /// Extra environment the interpreter gets (the same as sless gives its instances).
    fn env(&self) -> Vec<(&'static str, &'static str)> {
        if self.label == "python" { vec![("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONNOUSERSITE", "1")] } else { vec![] }
    }

    /// Starts the bare server; returns it with its port once it listens.
    pub async fn spawn_server(&self) -> Result<(Child, SocketAddr)> {
        let mut child = Command::new(&self.interpreter)
            .arg(&self.server_script)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.interpreter.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let read = reader.read_line(&mut line);
        tokio::time::timeout(Duration::from_secs(30), read).await.context("the bare server did not start")??;
        let port: u16 = line.trim().parse().with_context(|| format!("bare server printed {line:?}"))?;
        Ok((child, SocketAddr::from(([127, 0, 0, 1], port))))
    }

    /// The start-up floor: spawn the interpreter running the bare server, until its first
    /// 200 response (connection and request included).
    pub async fn floor_sample(&self) -> Result<Duration> {
        let t0 = Instant::now();
        let (mut child, addr) = self.spawn_server().await?;
        let (status, _, _) = crate::load::timed_get(addr, "/", None).await?;
        let elapsed = t0.elapsed();
        let _ = child.kill().await;
        if status != 200 {
            bail!("the bare {} server answered {status}", self.label);
        }
        Ok(elapsed)
    }
}

impl Runtime {
    /// The interpreter alone: spawn → exit of `python -c pass` / `node -e 0`.
    pub async fn bare_start_sample(&self) -> Result<Duration> {
        let arg = if self.label == "python" { ["-c", "pass"] } else { ["-e", "0"] };
        let t0 = Instant::now();
        let status = Command::new(&self.interpreter)
            .args(arg)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .await?;
        if !status.success() {
            bail!("{} {arg:?} failed", self.interpreter.display());
        }
        Ok(t0.elapsed())
    }
}

/// Finds both runtimes: Python's real binary (`sys.executable`, as the server resolves it: a
/// pyenv shell shim would add ~50 ms to every start) and Node on PATH.
pub fn runtimes(python: &str, node: &str, scripts: &Path) -> Result<Vec<Runtime>> {
    let out = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.executable); print(sys.version.split()[0])"])
        .output()
        .with_context(|| format!("running {python}"))?;
    if !out.status.success() {
        bail!("{python} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let py = PathBuf::from(lines.next().ok_or_else(|| anyhow!("{python}: no sys.executable"))?);
    let py_version = lines.next().unwrap_or("?").to_string();
    let node_bin = which(node).ok_or_else(|| anyhow!("{node} not found on PATH"))?;
    let out = std::process::Command::new(&node_bin).arg("--version").output()?;
    let node_version = String::from_utf8_lossy(&out.stdout).trim().trim_start_matches('v').to_string();
    let py_script = scripts.join("hello_server.py");
    let node_script = scripts.join("hello_server.js");
    std::fs::write(&py_script, PYTHON_SERVER)?;
    std::fs::write(&node_script, NODE_SERVER)?;
    Ok(vec![
        Runtime {
            label: "python",
            sless_runtime: "python3.11",
            file: "main.py",
            entrypoint: "main.handler",
            hello: PYTHON_HELLO,
            interpreter: py,
            server_script: py_script,
            version: py_version,
        },
        Runtime {
            label: "node",
            sless_runtime: "nodejs20",
            file: "index.js",
            entrypoint: "index.handler",
            hello: NODE_HELLO,
            interpreter: node_bin,
            server_script: node_script,
            version: node_version,
        },
    ])
}

/// A program name resolved on PATH (a path is returned as is).
fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

//! One runtime process (an instance) and the calls made to it.
//!
//! The supervisor makes a Unix socket pair and hands one end to the child as descriptor 3;
//! a call written before the interpreter is up waits in the socket buffer, so readiness needs
//! no polling. The child runs in its own process group, so killing it also kills whatever it
//! started.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use command_fds::{CommandFdExt, FdMapping};
use serde_json::{Value, json};
use sless_core::runtime::Runtime;
use sless_core::traits::{Invocation, InvokeResult, InvokeTarget};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::cgroup::{InstanceGroup, Memory};
use crate::logs::{LogHub, LogLine};
use crate::protocol::{read_frame, write_frame};
use crate::{Error, Result};

/// Most log lines kept per call; more are cut with a marker.
const MAX_LOG_LINES: usize = 10_000;
/// Most log bytes kept per call.
const MAX_LOG_BYTES: usize = 1024 * 1024;

/// Everything needed to start a runtime process for one function version.
#[derive(Debug, Clone)]
pub(crate) struct LaunchSpec {
    pub runtime: Runtime,
    pub interpreter: PathBuf,
    pub shim: PathBuf,
    pub code_dir: PathBuf,
    pub deps_dir: Option<PathBuf>,
    pub target: InvokeTarget,
}

impl LaunchSpec {
    /// The process's whole environment (DESIGN §9: a clean environment; the function's own
    /// `env`, what the runtime needs, and sless's documented variables — nothing of the
    /// server's).
    pub(crate) fn env(&self, tmp_dir: &Path) -> Vec<(String, String)> {
        let t = &self.target;
        let interp_dir = self.interpreter.parent().map(|p| p.display().to_string()).unwrap_or_default();
        let mut env = vec![
            ("PATH".to_string(), format!("{interp_dir}:/usr/local/bin:/usr/bin:/bin")),
            ("LANG".into(), "C.UTF-8".into()),
            ("HOME".into(), tmp_dir.display().to_string()),
            ("TMPDIR".into(), tmp_dir.display().to_string()),
        ];
        env.extend(t.spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let fixed = [
            ("SLESS_CODE_DIR", self.code_dir.display().to_string()),
            ("SLESS_HANDLER", t.spec.entrypoint.clone()),
            ("SLESS_NAMESPACE", t.namespace.clone()),
            ("SLESS_FUNCTION_NAME", t.name.clone()),
            ("SLESS_FUNCTION_VERSION", t.version.to_string()),
            ("SLESS_MEMORY_MB", t.spec.memory_mb.to_string()),
            ("SLESS_TIMEOUT_SEC", t.spec.timeout_sec.to_string()),
            ("AWS_LAMBDA_FUNCTION_NAME", t.name.clone()),
            ("AWS_LAMBDA_FUNCTION_VERSION", t.version.to_string()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", t.spec.memory_mb.to_string()),
        ];
        env.extend(fixed.into_iter().map(|(k, v)| (k.to_string(), v)));
        if let Some(deps) = &self.deps_dir {
            env.push(("SLESS_DEPS_DIR".into(), deps.display().to_string()));
        }
        if self.runtime == Runtime::Python311 {
            env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
            env.push(("PYTHONNOUSERSITE".into(), "1".into()));
        }
        env
    }

    /// The interpreter's command line: the shim, plus a V8 heap limit for Node.
    pub(crate) fn command(&self, tmp_dir: &Path) -> Command {
        let mut cmd = Command::new(&self.interpreter);
        if self.runtime == Runtime::Nodejs20 {
            // Leave room for code and buffers outside the V8 heap.
            let heap = (u64::from(self.target.spec.memory_mb) * 3 / 4).max(32);
            cmd.arg(format!("--max-old-space-size={heap}"));
        }
        cmd.arg(&self.shim)
            .current_dir(&self.code_dir)
            .env_clear()
            .envs(self.env(tmp_dir))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd
    }
}

/// A running runtime process.
pub(crate) struct Instance {
    target: InvokeTarget,
    child: Child,
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    output: mpsc::Receiver<String>,
    _tmp: tempfile::TempDir,
    /// False once the process failed in a way that makes it unfit for more calls.
    pub healthy: bool,
    /// The runtime reported that the handler could not be loaded.
    init_failed: bool,
    /// The runtime reported `ready` (its handler is loaded).
    ready: bool,
    /// The memory group limiting this process, if memory is limited here.
    memory: Option<InstanceGroup>,
}

/// What one call to an instance produced.
pub(crate) struct CallOutput {
    pub result: InvokeResult,
    pub logs: Vec<String>,
}

impl Instance {
    /// Starts the process. Returns at once: the first call waits in the socket buffer.
    pub(crate) fn spawn(spec: &LaunchSpec, tmp_root: &Path, memory: &Memory) -> Result<Self> {
        let tmp = tempfile::Builder::new()
            .prefix("instance-")
            .tempdir_in(tmp_root)
            .map_err(Error::io(format!("creating a temp folder in {}", tmp_root.display())))?;
        let (parent, child_end) =
            std::os::unix::net::UnixStream::pair().map_err(Error::io("creating a socket pair"))?;
        let mut cmd = spec.command(tmp.path());
        cmd.env("SLESS_CONTROL_FD", "3");
        cmd.fd_mappings(vec![FdMapping { parent_fd: child_end.into(), child_fd: 3 }])
            .map_err(|e| Error::Protocol(format!("cannot map the control socket: {e}")))?;
        let mut child = cmd.spawn().map_err(Error::io(format!("starting {}", spec.interpreter.display())))?;
        drop(cmd);
        // The interpreter is still starting (tens of ms) when its group gets the limit.
        let group_name = tmp.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let memory = child.id().and_then(|pid| memory.limit(&group_name, pid, spec.target.spec.memory_mb));
        parent.set_nonblocking(true).map_err(Error::io("configuring the control socket"))?;
        let (reader, writer) =
            UnixStream::from_std(parent).map_err(Error::io("registering the control socket"))?.into_split();
        let (tx, output) = mpsc::channel(MAX_LOG_LINES);
        if let Some(out) = child.stdout.take() {
            tokio::spawn(forward_lines(out, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(forward_lines(err, tx));
        }
        Ok(Instance {
            target: spec.target.clone(),
            child,
            reader,
            writer,
            output,
            _tmp: tmp,
            healthy: true,
            init_failed: false,
            ready: false,
            memory,
        })
    }

    /// Makes one call, waiting at most `timeout`. A timeout or a crash kills the process and
    /// marks the instance unhealthy. Each output line is also published to `hub` as it is read.
    pub(crate) async fn call(&mut self, invocation: Invocation, timeout: Duration, hub: &LogHub) -> CallOutput {
        let (namespace, function) = (self.target.namespace.clone(), self.target.name.clone());
        let request_id = invocation.request_id.clone();
        let mut logs = LogCollector {
            publish: Some(Publisher { hub, namespace: &namespace, function: &function, request_id: &request_id }),
            ..LogCollector::default()
        };
        let deadline_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0) + timeout.as_millis();
        let frame = json!({"type": "invoke", "id": invocation.request_id, "deadline_ms": deadline_ms as u64, "event": invocation.event});
        let result = match tokio::time::timeout(timeout, self.exchange(&frame, &invocation.request_id, &mut logs)).await
        {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                self.healthy = false;
                let status = self.reap().await;
                InvokeResult::Crashed { message: format!("{e}; {status}") }
            }
            Err(_) => {
                self.healthy = false;
                self.kill().await;
                InvokeResult::TimedOut
            }
        };
        while let Ok(line) = self.output.try_recv() {
            logs.push_line(line);
        }
        let logs = logs.finish();
        let result = match result {
            InvokeResult::Crashed { message } if self.out_of_memory(&logs) => {
                let mb = self.target.spec.memory_mb;
                InvokeResult::OutOfMemory {
                    message: format!("the instance used more than memory_mb = {mb} MiB and was killed ({message})"),
                }
            }
            other => other,
        };
        CallOutput { result, logs }
    }

    async fn exchange(&mut self, frame: &Value, id: &str, logs: &mut LogCollector<'_>) -> Result<InvokeResult> {
        write_frame(&mut self.writer, frame).await?;
        loop {
            let frame = tokio::select! {
                frame = read_frame(&mut self.reader) => frame?,
                Some(line) = self.output.recv() => { logs.push_line(line); continue; }
            };
            let Some(frame) = frame else {
                return Err(Error::Protocol("the runtime closed the connection".into()));
            };
            let text = |k: &str| frame.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            match frame.get("type").and_then(Value::as_str) {
                Some("ready") => self.ready = true,
                Some("log") => logs.push_data(&text("stream"), &text("data")),
                Some("result") if text("id") == id => {
                    return Ok(InvokeResult::Returned(frame.get("result").cloned().unwrap_or(Value::Null)));
                }
                Some(kind @ ("error" | "init_error")) => {
                    if kind == "init_error" || frame.get("fatal").and_then(Value::as_bool) == Some(true) {
                        self.healthy = false;
                    }
                    self.init_failed |= kind == "init_error";
                    return Ok(InvokeResult::Failed {
                        error_type: text("errorType"),
                        error_message: text("errorMessage"),
                    });
                }
                _ => {}
            }
        }
    }

    /// Waits briefly for the process to exit and describes how it did.
    async fn reap(&mut self) -> String {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => describe_exit(status),
            _ => {
                self.kill().await;
                "the runtime stopped answering and was killed".into()
            }
        }
    }

    /// Kills the process group and waits for the process to exit.
    pub(crate) async fn kill(&mut self) {
        self.signal_group();
        let _ = self.child.wait().await;
    }

    fn signal_group(&self) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// Whether `result` shows the process failing before it could serve: it exited before
    /// reporting `ready`, or the handler could not be loaded (`init_error`).
    pub(crate) fn failed_start(&self, result: &InvokeResult) -> bool {
        match result {
            InvokeResult::Crashed { .. } | InvokeResult::OutOfMemory { .. } => !self.ready,
            InvokeResult::Failed { .. } => self.init_failed,
            _ => false,
        }
    }

    /// Whether the process died of its memory limit: the cgroup says so, or V8 reported its
    /// heap limit (`--max-old-space-size`).
    fn out_of_memory(&self, logs: &[String]) -> bool {
        self.memory.as_ref().is_some_and(InstanceGroup::oom_killed)
            || logs.iter().any(|l| l.contains("JavaScript heap out of memory"))
    }

    /// Whether the process is still running.
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // The child is reaped by tokio's orphan queue; what it started dies with its group.
        self.signal_group();
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("the runtime exited with code {code}"),
        (None, Some(sig)) => format!("the runtime was killed by signal {sig}"),
        _ => "the runtime exited".into(),
    }
}

async fn forward_lines(stream: impl tokio::io::AsyncRead + Unpin, tx: mpsc::Sender<String>) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // A full buffer drops the line rather than stalling the function.
        let _ = tx.try_send(line);
    }
}

/// Where a call's lines are published as they arrive.
struct Publisher<'a> {
    hub: &'a LogHub,
    namespace: &'a str,
    function: &'a str,
    request_id: &'a str,
}

/// Collects a call's log lines, joining partial writes and capping the total.
#[derive(Default)]
struct LogCollector<'a> {
    publish: Option<Publisher<'a>>,
    lines: Vec<String>,
    bytes: usize,
    partial_out: String,
    partial_err: String,
    cut: bool,
}

impl LogCollector<'_> {
    fn push_data(&mut self, stream: &str, data: &str) {
        let mut buf = std::mem::take(if stream == "stderr" { &mut self.partial_err } else { &mut self.partial_out });
        buf.push_str(data);
        while let Some(i) = buf.find('\n') {
            let line: String = buf.drain(..=i).collect();
            self.push_line(line.trim_end_matches(['\n', '\r']).to_string());
        }
        *(if stream == "stderr" { &mut self.partial_err } else { &mut self.partial_out }) = buf;
    }

    fn push_line(&mut self, line: String) {
        if let Some(p) = &self.publish {
            let entry =
                LogLine { time: chrono::Utc::now(), request_id: Some(p.request_id.to_string()), line: line.clone() };
            p.hub.publish(p.namespace, p.function, entry);
        }
        if self.lines.len() >= MAX_LOG_LINES || self.bytes + line.len() > MAX_LOG_BYTES {
            self.cut = true;
            return;
        }
        self.bytes += line.len();
        self.lines.push(line);
    }

    fn finish(mut self) -> Vec<String> {
        for rest in [std::mem::take(&mut self.partial_out), std::mem::take(&mut self.partial_err)] {
            if !rest.is_empty() {
                self.push_line(rest);
            }
        }
        if self.cut {
            self.lines.push(format!("[sless] log cut: more than {MAX_LOG_LINES} lines or {MAX_LOG_BYTES} bytes"));
        }
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_collector_joins_partial_writes_per_stream() {
        let mut c = LogCollector::default();
        c.push_data("stdout", "a");
        c.push_data("stderr", "x\n");
        c.push_data("stdout", "b\nc");
        assert_eq!(c.finish(), ["x", "ab", "c"]);
    }

    #[test]
    fn log_collector_caps_with_a_marker() {
        let mut c = LogCollector::default();
        for i in 0..MAX_LOG_LINES + 5 {
            c.push_line(i.to_string());
        }
        let lines = c.finish();
        assert_eq!(lines.len(), MAX_LOG_LINES + 1);
        assert!(lines[MAX_LOG_LINES].contains("log cut"));
    }
}

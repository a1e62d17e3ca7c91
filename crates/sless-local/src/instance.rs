//! One runtime process (an instance) and the calls made to it.
//!
//! The supervisor makes a Unix socket pair and hands one end to the child as descriptor 3;
//! a call written before the interpreter is up waits in the socket buffer, so readiness needs
//! no polling. The child runs in its own process group, so killing it also kills whatever it
//! started. Up to `concurrency` calls share an instance: one reader task routes the frames
//! it sends back to the calls by request id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use command_fds::{CommandFdExt, FdMapping};
use serde_json::{Value, json};
use sless_core::runtime::Runtime;
use sless_core::traits::{Invocation, InvokeResult, InvokeTarget};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::Command;
use tokio::sync::{Mutex as AsyncMutex, oneshot, watch};

use crate::cgroup::{InstanceGroup, Memory};
use crate::protocol::{read_frame, write_frame};
use crate::sandbox::{Creds, Isolation, Role, View};
use crate::{Error, Result};
use sless_control::{LogHub, LogLine};

/// How often an instance's memory peak is read from its cgroup (for the REPORT line).
const PEAK_EVERY: Duration = Duration::from_millis(200);

/// Most log lines kept per call; more are cut with a marker.
const MAX_LOG_LINES: usize = 10_000;
/// Most log bytes kept per call.
const MAX_LOG_BYTES: usize = 1024 * 1024;
/// Longest log line kept, in bytes; a longer one is cut (a write without a newline counts
/// as one line).
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Everything needed to start a runtime process for one function version.
#[derive(Debug, Clone)]
pub(crate) struct LaunchSpec {
    pub runtime: Runtime,
    pub interpreter: PathBuf,
    pub shim: PathBuf,
    /// Host paths (the sandbox sees them where `view` puts them).
    pub code_dir: PathBuf,
    pub deps_dir: Option<PathBuf>,
    /// Where the process sees the data folder's paths.
    pub view: View,
    /// The version's build folder (`code` and `deps` are in it).
    pub build_dir: PathBuf,
    /// The function's uid and gid, when functions run as uids of their own.
    pub creds: Option<Creds>,
    pub target: InvokeTarget,
}

impl LaunchSpec {
    /// The process's whole environment (docs/architecture.md, "Security": a clean environment; the function's own
    /// `env`, what the runtime needs, and sless's documented variables — nothing of the
    /// server's).
    pub(crate) fn env(&self, tmp_dir: &Path) -> Vec<(String, String)> {
        let t = &self.target;
        let interp_dir = self.interpreter.parent().map(|p| p.display().to_string()).unwrap_or_default();
        let mut env = vec![
            ("PATH".to_string(), format!("{interp_dir}:/usr/local/bin:/usr/bin:/bin")),
            ("LANG".into(), "C.UTF-8".into()),
            ("HOME".into(), self.view.of(tmp_dir).display().to_string()),
            ("TMPDIR".into(), self.view.of(tmp_dir).display().to_string()),
        ];
        // Lambda's variables that a function may set itself (its `env` comes after them and wins).
        env.extend(LAMBDA_DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env.extend(t.spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let code_dir = self.view.of(&self.code_dir).display().to_string();
        let runtime_dir = self.view.of(&self.shim).parent().map(|d| d.display().to_string()).unwrap_or_default();
        let fixed = [
            ("SLESS_CODE_DIR", self.view.of(&self.code_dir).display().to_string()),
            ("SLESS_HANDLER", t.spec.entrypoint.clone()),
            ("SLESS_NAMESPACE", t.namespace.clone()),
            ("SLESS_FUNCTION_NAME", t.name.clone()),
            ("SLESS_FUNCTION_VERSION", t.version.to_string()),
            ("SLESS_MEMORY_MB", t.spec.memory_mb.to_string()),
            ("SLESS_TIMEOUT_SEC", t.spec.timeout_sec.to_string()),
            ("SLESS_CONCURRENCY", t.spec.concurrency.to_string()),
            ("AWS_LAMBDA_FUNCTION_NAME", t.name.clone()),
            ("AWS_LAMBDA_FUNCTION_VERSION", t.version.to_string()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", t.spec.memory_mb.to_string()),
            ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_string()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{}", t.name)),
            ("AWS_EXECUTION_ENV", self.runtime.lambda_execution_env().to_string()),
            ("LAMBDA_TASK_ROOT", code_dir),
            ("LAMBDA_RUNTIME_DIR", runtime_dir),
            ("_HANDLER", t.spec.entrypoint.clone()),
        ];
        env.extend(fixed.into_iter().map(|(k, v)| (k.to_string(), v)));
        if let Some(deps) = &self.deps_dir {
            env.push(("SLESS_DEPS_DIR".into(), self.view.of(deps).display().to_string()));
        }
        if self.runtime == Runtime::Python311 {
            env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
            env.push(("PYTHONNOUSERSITE".into(), "1".into()));
        }
        env
    }

    /// The interpreter's command line: the shim, plus a V8 heap limit for Node.
    pub(crate) fn command(&self, tmp_dir: &Path) -> Command {
        let heap = (self.runtime == Runtime::Nodejs20).then(|| node_heap_mb(self.target.spec.memory_mb));
        let mut cmd = base_command(&self.interpreter, &self.view.of(&self.shim), heap);
        // The host path: the working folder is entered before the sandbox is (and again in it).
        cmd.current_dir(&self.code_dir).envs(self.env(tmp_dir));
        cmd
    }
}

impl LaunchSpec {
    /// Puts `cmd` (a process of this function with the temp folder `tmp`) in its sandbox: the
    /// temp folder becomes the function uid's, the jail is applied before `execve`.
    pub(crate) fn sandbox(&self, cmd: &mut Command, isolation: &Isolation, tmp: &Path) -> Result<()> {
        let creds = self.creds.filter(|_| isolation.uids());
        if let Some(c) = creds {
            std::os::unix::fs::chown(tmp, Some(c.uid), Some(c.gid)).map_err(Error::io(format!(
                "giving {} to uid {}",
                tmp.display(),
                c.uid
            )))?;
        }
        let role = Role::Function { build: &self.build_dir, creds };
        let jail = isolation.jail(&role, tmp, &self.code_dir).map_err(Error::io("preparing the sandbox"))?;
        Isolation::install(cmd.as_std_mut(), jail);
        Ok(())
    }
}

/// Lambda's runtime variables that have no sless meaning, with the values every instance gets
/// unless the function's `env` sets them (docs/writing-functions.md, "Environment"): a region
/// placeholder (SDKs and Powertools read one) and Lambda's time zone.
const LAMBDA_DEFAULTS: [(&str, &str); 3] =
    [("AWS_REGION", "us-east-1"), ("AWS_DEFAULT_REGION", "us-east-1"), ("TZ", ":UTC")];

/// V8's heap limit for a Node instance of `memory_mb`: ¾ of it, leaving room for code and
/// buffers outside the heap.
pub(crate) fn node_heap_mb(memory_mb: u32) -> u32 {
    (memory_mb * 3 / 4).max(32)
}

/// The interpreter running the shim, with a clean environment and piped output.
fn base_command(interpreter: &Path, shim: &Path, node_heap_mb: Option<u32>) -> Command {
    let mut cmd = Command::new(interpreter);
    if let Some(heap) = node_heap_mb {
        cmd.arg(format!("--max-old-space-size={heap}"));
    }
    cmd.arg(shim)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// A generic runtime process for the warm pool: the interpreter is up and waits for a
/// `load` frame (runtimes/PROTOCOL.md, "Warm pool").
#[derive(Debug, Clone)]
pub(crate) struct GenericSpec {
    pub runtime: Runtime,
    pub interpreter: PathBuf,
    pub shim: PathBuf,
    /// Node only: the heap limit the process starts with (it cannot change after start).
    pub node_heap_mb: Option<u32>,
}

/// The `invoke` frame (runtimes/PROTOCOL.md), written without copying the event.
#[derive(serde::Serialize)]
struct InvokeFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    /// Unix epoch milliseconds.
    deadline_ms: u64,
    event: &'a serde_json::value::RawValue,
}

/// A running runtime process, shared by the calls it serves.
pub(crate) struct Instance {
    /// The executor's count of live instances (decremented on drop).
    live: Mutex<Arc<AtomicUsize>>,
    shared: Arc<Shared>,
    /// Becomes `Some(how it exited)` when the process has ended.
    exited: watch::Receiver<Option<String>>,
    pid: Option<u32>,
    writer: AsyncMutex<OwnedWriteHalf>,
    /// Calls in flight (the pool's bookkeeping).
    pub inflight: AtomicUsize,
    /// When the instance last finished a call (or started).
    last_used: Mutex<std::time::Instant>,
    /// Set by the first call once the process is ready for it (see `ensure_loaded`); the
    /// calls that come meanwhile wait.
    loaded: tokio::sync::OnceCell<bool>,
    /// A warm-pool process: it learns its function from a `load` frame.
    generic: bool,
    _tmp: tempfile::TempDir,
}

/// What the reader task and the calls share.
struct Shared {
    identity: Mutex<Identity>,
    hub: Arc<LogHub>,
    pending: Mutex<HashMap<String, Pending>>,
    /// The process is gone or unfit for more calls.
    broken: AtomicBool,
    /// The runtime said `ready` (its handler is loaded).
    ready: AtomicBool,
    /// The runtime said `init_error`.
    init_failed: AtomicBool,
    /// The `init_error` it sent (type, message), answered to every call of this process.
    init_error: Mutex<Option<(String, String)>>,
    /// Set when the connection ended: how the process exited. Calls that start later fail at
    /// once with it.
    ended: Mutex<Option<String>>,
    memory: Mutex<Option<InstanceGroup>>,
    /// The pipes ([`STDOUT`], [`STDERR`] bits) that reached their end: no fence will come.
    closed: std::sync::atomic::AtomicU8,
    /// The memory peak last read from the group, and when (see [`PEAK_EVERY`]).
    peak: Mutex<Option<(std::time::Instant, Option<u64>)>>,
}

/// Whose instance this is (set at start, or when a warm-pool process is specialised).
#[derive(Debug, Clone, Default)]
struct Identity {
    namespace: String,
    function: String,
    memory_mb: u32,
}

/// A call waiting for its answer.
struct Pending {
    logs: LogCollector,
    done: oneshot::Sender<(InvokeResult, Vec<String>)>,
    /// The answer the runtime sent, kept until the call's fences are read.
    answer: Option<InvokeResult>,
    /// The streams ([`STDOUT`], [`STDERR`] bits) whose fence for this call has been read.
    fences: u8,
    /// Told when the answer is in but the fences are not (the caller then times the wait).
    answered: Option<oneshot::Sender<()>>,
}

/// The stdout pipe's bit in [`Pending::fences`] and [`Shared::closed`].
const STDOUT: u8 = 1;
/// The stderr pipe's bit.
const STDERR: u8 = 2;
/// Both pipes.
const BOTH: u8 = STDOUT | STDERR;
/// What starts a fence line on a function's stdout/stderr (runtimes/PROTOCOL.md, "Fences"):
/// `\x1esless-fence:<request id>\x1e`.
const FENCE: &str = "\u{1e}sless-fence:";
/// Longest wait for a call's fences once its answer is in. They are written before the
/// answer, so they are normally read within microseconds; this bounds a fence that was lost
/// (cut with a line over `MAX_LINE_BYTES`, a pipe closed by the function).
const FENCE_WAIT: Duration = Duration::from_secs(1);

/// What one call to an instance produced.
pub(crate) struct CallOutput {
    pub result: InvokeResult,
    pub logs: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Instance {
    /// Starts the process. Returns at once: the first call waits in the socket buffer. Its
    /// memory limit is applied by [`Instance::ensure_loaded`], before its first call.
    pub(crate) fn spawn(
        spec: &LaunchSpec,
        tmp_root: &Path,
        isolation: &Isolation,
        hub: Arc<LogHub>,
        live: &Arc<AtomicUsize>,
    ) -> Result<Arc<Self>> {
        let tmp = temp_dir(tmp_root)?;
        let mut cmd = spec.command(tmp.path());
        spec.sandbox(&mut cmd, isolation, tmp.path())?;
        let identity = Identity {
            namespace: spec.target.namespace.clone(),
            function: spec.target.name.clone(),
            memory_mb: spec.target.spec.memory_mb,
        };
        Self::start(cmd, isolation, &spec.interpreter, tmp, identity, hub, live)
    }

    /// Starts a generic warm-pool process, counted in `live` until it is specialised.
    pub(crate) fn spawn_generic(
        spec: &GenericSpec,
        tmp_root: &Path,
        isolation: &Isolation,
        hub: Arc<LogHub>,
        live: &Arc<AtomicUsize>,
    ) -> Result<Arc<Self>> {
        let tmp = temp_dir(tmp_root)?;
        let view = isolation.view();
        let mut cmd = base_command(&spec.interpreter, &view.of(&spec.shim), spec.node_heap_mb);
        let interp_dir = spec.interpreter.parent().map(|p| p.display().to_string()).unwrap_or_default();
        cmd.current_dir(tmp.path())
            .env("PATH", format!("{interp_dir}:/usr/local/bin:/usr/bin:/bin"))
            .env("LANG", "C.UTF-8")
            .env("HOME", view.of(tmp.path()))
            .env("TMPDIR", view.of(tmp.path()));
        if spec.runtime == Runtime::Python311 {
            cmd.env("PYTHONDONTWRITEBYTECODE", "1").env("PYTHONNOUSERSITE", "1");
        }
        let jail = isolation.jail(&Role::Pool, tmp.path(), tmp.path()).map_err(Error::io("preparing the sandbox"))?;
        Isolation::install(cmd.as_std_mut(), jail);
        Self::start(cmd, isolation, &spec.interpreter, tmp, Identity::default(), hub, live)
    }

    /// Makes sure the process is ready for its function's calls, once (by whichever call comes
    /// first; the others wait): a new instance is put under its memory limit, a warm-pool
    /// process is specialised. False when that failed (the process is then broken).
    pub(crate) async fn ensure_loaded(
        &self,
        spec: &LaunchSpec,
        memory: &Memory,
        isolation: &Isolation,
        live: &Arc<AtomicUsize>,
    ) -> bool {
        *self
            .loaded
            .get_or_init(|| async {
                if !self.generic {
                    self.limit_memory(memory, spec.target.spec.memory_mb).await;
                    return true;
                }
                match self.specialise(spec, memory, isolation, live).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot specialise a warm-pool process");
                        self.shared.broken.store(true, Ordering::SeqCst);
                        false
                    }
                }
            })
            .await
    }

    /// Turns a generic process into an instance of `spec` (its env, code and limits) and moves
    /// it from the warm pool's count to `live`. The first call waits until it has loaded.
    async fn specialise(
        &self,
        spec: &LaunchSpec,
        memory: &Memory,
        isolation: &Isolation,
        live: &Arc<AtomicUsize>,
    ) -> Result<()> {
        *lock(&self.shared.identity) = Identity {
            namespace: spec.target.namespace.clone(),
            function: spec.target.name.clone(),
            memory_mb: spec.target.spec.memory_mb,
        };
        let env: serde_json::Map<String, Value> =
            spec.env(self._tmp.path()).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        let mut frame = json!({
            "type": "load",
            "handler": spec.target.spec.entrypoint,
            "code_dir": spec.view.of(&spec.code_dir),
            "deps_dir": spec.deps_dir.as_deref().map(|d| spec.view.of(d)),
            "env": env,
            "concurrency": spec.target.spec.concurrency,
        });
        // The process drops to the function's uid before it reads anything of the function
        // (runtimes/PROTOCOL.md, "Warm pool"); its temp folder becomes that uid's first.
        if let Some(c) = spec.creds {
            std::os::unix::fs::chown(self._tmp.path(), Some(c.uid), Some(c.gid)).map_err(Error::io(format!(
                "giving {} to uid {}",
                self._tmp.path().display(),
                c.uid
            )))?;
            frame["uid"] = json!(c.uid);
            frame["gid"] = json!(c.gid);
        }
        if let Some(layer) = isolation.narrowing_layer(&spec.build_dir, self._tmp.path()) {
            frame["landlock"] = layer;
        }
        write_frame(&mut *self.writer.lock().await, &frame).await?;
        self.limit_memory(memory, spec.target.spec.memory_mb).await;
        self.join_live(live);
        Ok(())
    }

    /// Counts a warm-pool process in `live` (the function instances) instead of the pool's
    /// count, from now until it ends. Does nothing if it is counted there already.
    pub(crate) fn join_live(&self, live: &Arc<AtomicUsize>) {
        let mut counted = lock(&self.live);
        if Arc::ptr_eq(&counted, live) {
            return;
        }
        live.fetch_add(1, Ordering::SeqCst);
        counted.fetch_sub(1, Ordering::SeqCst);
        *counted = live.clone();
    }

    /// The most memory the instance has used, in bytes, when it has a memory group: read from
    /// the group at most every [`PEAK_EVERY`] (reading a cgroup file costs tens of µs, too much
    /// for every call of a busy instance), so it may be that much behind.
    pub(crate) fn peak_memory_bytes(&self) -> Option<u64> {
        let mut peak = lock(&self.shared.peak);
        if let Some((at, value)) = *peak
            && at.elapsed() < PEAK_EVERY
        {
            return value;
        }
        let value = lock(&self.shared.memory).as_ref().and_then(InstanceGroup::peak_bytes);
        *peak = Some((std::time::Instant::now(), value));
        value
    }

    /// Puts the process under a limit of `memory_mb` MiB: in a group of its own, or, if it has
    /// one already (a warm-pool process), by changing that group's limit.
    pub(crate) async fn limit_memory(&self, memory: &Memory, memory_mb: u32) {
        if let Some(group) = lock(&self.shared.memory).as_mut() {
            if let Err(e) = group.set_limit(memory_mb) {
                tracing::warn!(error = %e, memory_mb, "cannot change the instance's memory limit");
            }
            return;
        }
        let Some(pid) = self.pid else { return };
        let name = self._tmp.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let memory = memory.clone();
        // Moving a process into a group waits for the kernel (≈ 10 ms on cgroup v1): not on
        // the threads that serve calls.
        let group = tokio::task::spawn_blocking(move || memory.limit(&name, pid, memory_mb)).await.ok().flatten();
        *lock(&self.shared.memory) = group;
    }

    fn start(
        mut cmd: Command,
        isolation: &Isolation,
        interpreter: &Path,
        tmp: tempfile::TempDir,
        identity: Identity,
        hub: Arc<LogHub>,
        live: &Arc<AtomicUsize>,
    ) -> Result<Arc<Self>> {
        let identity_known = !identity.function.is_empty();
        let (parent, child_end) =
            std::os::unix::net::UnixStream::pair().map_err(Error::io("creating a socket pair"))?;
        cmd.env("SLESS_CONTROL_FD", "3");
        cmd.fd_mappings(vec![FdMapping { parent_fd: child_end.into(), child_fd: 3 }])
            .map_err(|e| Error::Protocol(format!("cannot map the control socket: {e}")))?;
        let mut child = isolation.spawn(&mut cmd).map_err(Error::io(format!("starting {}", interpreter.display())))?;
        drop(cmd);
        let pid = child.id();
        parent.set_nonblocking(true).map_err(Error::io("configuring the control socket"))?;
        let (reader, writer) =
            UnixStream::from_std(parent).map_err(Error::io("registering the control socket"))?.into_split();
        let shared = Arc::new(Shared {
            identity: Mutex::new(identity),
            hub,
            pending: Mutex::new(HashMap::new()),
            broken: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            init_failed: AtomicBool::new(false),
            init_error: Mutex::new(None),
            ended: Mutex::new(None),
            memory: Mutex::new(None),
            closed: std::sync::atomic::AtomicU8::new(0),
            peak: Mutex::new(None),
        });
        if let Some(out) = child.stdout.take() {
            tokio::spawn(forward_lines(out, STDOUT, shared.clone()));
        } else {
            shared.closed.fetch_or(STDOUT, Ordering::SeqCst);
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(forward_lines(err, STDERR, shared.clone()));
        } else {
            shared.closed.fetch_or(STDERR, Ordering::SeqCst);
        }
        let (exit_tx, exited) = watch::channel(None);
        tokio::spawn(async move {
            let how = match child.wait().await {
                Ok(status) => describe_exit(status),
                Err(e) => format!("the runtime's exit status is unknown: {e}"),
            };
            let _ = exit_tx.send(Some(how));
        });
        tokio::spawn(read_loop(reader, shared.clone(), exited.clone()));
        live.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Instance {
            live: Mutex::new(live.clone()),
            shared,
            exited,
            pid,
            writer: AsyncMutex::new(writer),
            inflight: AtomicUsize::new(0),
            last_used: Mutex::new(std::time::Instant::now()),
            loaded: tokio::sync::OnceCell::new(),
            generic: !identity_known,
            _tmp: tmp,
        }))
    }

    /// Makes one call, waiting at most `timeout`. A timeout kills the process (the other
    /// calls it was serving end as crashed); each output line is published as it is read.
    pub(crate) async fn call(&self, invocation: Invocation, timeout: Duration) -> CallOutput {
        let id = invocation.request_id.clone();
        let (done, answer) = oneshot::channel();
        let who = lock(&self.shared.identity).clone();
        let logs = LogCollector::new(Publisher {
            hub: self.shared.hub.clone(),
            namespace: who.namespace,
            function: who.function,
            request_id: id.clone(),
        });
        let (answered_tx, answered_rx) = oneshot::channel();
        lock(&self.shared.pending)
            .insert(id.clone(), Pending { logs, done, answer: None, fences: 0, answered: Some(answered_tx) });
        let deadline_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0) + timeout.as_millis();
        let frame = InvokeFrame { kind: "invoke", id: &id, deadline_ms: deadline_ms as u64, event: &invocation.event };
        let written = write_frame(&mut *self.writer.lock().await, &frame).await;
        if let Err(e) = written {
            // The reader task fails the call once it sees the process gone.
            self.shared.broken.store(true, Ordering::SeqCst);
            tracing::debug!(error = %e, "cannot write to the runtime");
        }
        // The process may have ended before this call was registered: nobody else will fail it.
        let ended = lock(&self.shared.ended).clone();
        if let Some(exit) = ended {
            self.shared.finish(&id, self.shared.death(exit));
        }
        let answered = self.answer_within(&id, answer, answered_rx, timeout).await;
        *lock(&self.last_used) = std::time::Instant::now();
        match answered {
            Ok(Ok((result, logs))) => CallOutput { result, logs },
            Ok(Err(_)) => CallOutput {
                result: InvokeResult::Crashed { message: "the runtime went away".into() },
                logs: Vec::new(),
            },
            Err(_) => {
                let logs = lock(&self.shared.pending).remove(&id).map(|p| p.logs.finish()).unwrap_or_default();
                self.kill().await;
                CallOutput { result: InvokeResult::TimedOut, logs }
            }
        }
    }

    /// The call's end, within `timeout`: Err when the call ran past it. Once the runtime has
    /// answered (`answered` fires) the call waits at most [`FENCE_WAIT`] more for its fences
    /// and then ends with the answer. The wait is timed here, on the caller's task, so a call
    /// whose fences come in time leaves no timer behind.
    async fn answer_within(
        &self,
        id: &str,
        mut answer: oneshot::Receiver<(InvokeResult, Vec<String>)>,
        answered: oneshot::Receiver<()>,
        timeout: Duration,
    ) -> std::result::Result<std::result::Result<(InvokeResult, Vec<String>), oneshot::error::RecvError>, ()> {
        let deadline = tokio::time::Instant::now() + timeout;
        tokio::select! {
            biased;
            done = &mut answer => return Ok(done),
            Ok(()) = answered => {}
            () = tokio::time::sleep_until(deadline) => return Err(()),
        }
        if let Ok(done) = tokio::time::timeout(FENCE_WAIT, &mut answer).await {
            return Ok(done);
        }
        // A fence was lost: the call ends with the answer the runtime sent.
        self.shared.finish(id, InvokeResult::Crashed { message: "the runtime went away".into() });
        Ok(answer.await)
    }

    /// Kills the process group and waits for the process to exit.
    pub(crate) async fn kill(&self) {
        self.shared.broken.store(true, Ordering::SeqCst);
        self.signal_group();
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), exited.wait_for(Option::is_some)).await;
    }

    /// Kills the process group and every process in the instance's cgroup (what a function
    /// started in a session of its own, or left behind by a double fork, is there too).
    fn signal_group(&self) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        if let Some(group) = lock(&self.shared.memory).as_ref() {
            group.kill_all();
        }
    }

    /// Whether `result` shows the process failing before it could serve: it exited before
    /// reporting `ready`, or the handler could not be loaded (`init_error`).
    pub(crate) fn failed_start(&self, result: &InvokeResult) -> bool {
        match result {
            InvokeResult::Crashed { .. } | InvokeResult::OutOfMemory { .. } => {
                !self.shared.ready.load(Ordering::SeqCst)
            }
            InvokeResult::Failed { .. } => self.shared.init_failed.load(Ordering::SeqCst),
            _ => false,
        }
    }

    /// How long the instance has had no call in flight (zero while it has one).
    pub(crate) fn idle_for(&self, now: std::time::Instant) -> Duration {
        if self.inflight.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        now.saturating_duration_since(*lock(&self.last_used))
    }

    /// Whether the instance can take more calls.
    pub(crate) fn healthy(&self) -> bool {
        !self.shared.broken.load(Ordering::SeqCst)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // The child is reaped by tokio's orphan queue; what it started dies with its group.
        self.signal_group();
        lock(&self.live).fetch_sub(1, Ordering::SeqCst);
    }
}

/// Routes the runtime's frames to the calls; when the connection ends, fails what is left.
async fn read_loop(mut reader: OwnedReadHalf, shared: Arc<Shared>, mut exited: watch::Receiver<Option<String>>) {
    let ended = loop {
        let frame = match read_frame(&mut reader).await {
            Ok(Some(f)) => f,
            Ok(None) => break "the runtime closed the connection".to_string(),
            Err(e) => break e.to_string(),
        };
        let text = |k: &str| frame.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        match frame.get("type").and_then(Value::as_str) {
            // A warm-pool process says `ready` twice: generic at start, then loaded.
            Some("ready") if frame.get("generic").and_then(Value::as_bool) == Some(true) => {}
            Some("ready") => shared.ready.store(true, Ordering::SeqCst),
            Some("log") => {
                let mut pending = lock(&shared.pending);
                match frame.get("id").and_then(Value::as_str).and_then(|id| pending.get_mut(id)) {
                    Some(p) => p.logs.push_data(&text("stream"), &text("data")),
                    None => {
                        drop(pending);
                        for line in text("data").lines() {
                            shared.publish_untagged(line);
                        }
                    }
                }
            }
            Some("result") => {
                let value = frame.get("result").cloned().unwrap_or(Value::Null);
                answered(&shared, &text("id"), InvokeResult::Returned(value));
            }
            Some(kind @ ("error" | "init_error")) => {
                let fatal = kind == "init_error" || frame.get("fatal").and_then(Value::as_bool) == Some(true);
                if fatal {
                    shared.broken.store(true, Ordering::SeqCst);
                }
                let failure =
                    InvokeResult::Failed { error_type: text("errorType"), error_message: text("errorMessage") };
                if kind == "init_error" {
                    shared.init_failed.store(true, Ordering::SeqCst);
                    *lock(&shared.init_error) = Some((text("errorType"), text("errorMessage")));
                    let ids: Vec<String> = lock(&shared.pending).keys().cloned().collect();
                    for id in ids {
                        shared.finish(&id, failure.clone());
                    }
                } else {
                    answered(&shared, &text("id"), failure);
                }
            }
            _ => {}
        }
    };
    shared.broken.store(true, Ordering::SeqCst);
    // The connection ends with the process: describe how it exited (or, if it still runs
    // after a protocol error, what went wrong).
    let exit = match tokio::time::timeout(Duration::from_secs(2), exited.wait_for(Option::is_some)).await {
        Ok(Ok(how)) => how.clone().unwrap_or(ended),
        _ => ended,
    };
    *lock(&shared.ended) = Some(exit.clone());
    let ids: Vec<String> = lock(&shared.pending).keys().cloned().collect();
    for id in ids {
        shared.finish(&id, shared.death(exit.clone()));
    }
}

/// The runtime answered call `id`: it ends once both of its fences are read (every byte it
/// wrote to fd 1/2 is then in its record), or after [`FENCE_WAIT`] (timed by the caller,
/// [`Instance::answer_within`]).
fn answered(shared: &Arc<Shared>, id: &str, result: InvokeResult) {
    let mut pending = lock(&shared.pending);
    let Some(p) = pending.get_mut(id) else { return };
    if (p.fences | shared.closed.load(Ordering::SeqCst)) == BOTH {
        drop(pending);
        shared.finish(id, result);
        return;
    }
    p.answer = Some(result);
    if let Some(tx) = p.answered.take() {
        let _ = tx.send(());
    }
}

impl Shared {
    /// The fence of call `id` was read on `stream`: the call ends if its answer is in and the
    /// other stream's fence was read too.
    fn fence(&self, id: &str, stream: u8) {
        let mut pending = lock(&self.pending);
        let Some(p) = pending.get_mut(id) else { return };
        p.fences |= stream;
        if (p.fences | self.closed.load(Ordering::SeqCst)) != BOTH {
            return;
        }
        let Some(answer) = p.answer.take() else { return };
        drop(pending);
        self.finish(id, answer);
    }

    /// `stream` reached its end: calls answered and waiting for its fence end now.
    fn stream_closed(&self, stream: u8) {
        self.closed.fetch_or(stream, Ordering::SeqCst);
        let waiting: Vec<(String, InvokeResult)> =
            lock(&self.pending).iter_mut().filter_map(|(id, p)| p.answer.take().map(|a| (id.clone(), a))).collect();
        for (id, answer) in waiting {
            self.finish(&id, answer);
        }
    }

    /// What a call gets from a process that is gone: its `init_error` if it sent one (the
    /// handler could not be loaded), else how it exited.
    fn death(&self, exit: String) -> InvokeResult {
        match lock(&self.init_error).clone() {
            Some((error_type, error_message)) => InvokeResult::Failed { error_type, error_message },
            None => InvokeResult::Crashed { message: exit },
        }
    }

    /// Ends a call: its result (the answer the runtime sent, if it sent one, else `result`; an
    /// out-of-memory death is told apart from other crashes) and its collected lines.
    fn finish(&self, id: &str, result: InvokeResult) {
        let Some(mut p) = lock(&self.pending).remove(id) else { return };
        let result = p.answer.take().unwrap_or(result);
        let logs = p.logs.finish();
        let result = match result {
            InvokeResult::Crashed { message } if self.out_of_memory(&logs) => InvokeResult::OutOfMemory {
                message: format!(
                    "the instance used more than memory_mb = {} MiB and was killed ({message})",
                    lock(&self.identity).memory_mb
                ),
            },
            other => other,
        };
        let _ = p.done.send((result, logs));
    }

    /// Whether the process died of its memory limit: the cgroup says so, or V8 reported its
    /// heap limit (`--max-old-space-size`).
    fn out_of_memory(&self, logs: &[String]) -> bool {
        lock(&self.memory).as_ref().is_some_and(InstanceGroup::oom_killed)
            || logs.iter().any(|l| l.contains("JavaScript heap out of memory"))
    }

    fn publish_untagged(&self, line: &str) {
        let who = lock(&self.identity).clone();
        if who.function.is_empty() {
            tracing::debug!(target: "function", "warm-pool process: {line}");
            return;
        }
        let entry = LogLine { time: sless_core::time::now(), request_id: None, line: line.to_string() };
        self.hub.publish(&who.namespace, &who.function, entry);
    }
}

/// A new temp folder for an instance, mode 0700 (given to the function's uid at its start).
fn temp_dir(root: &Path) -> Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("instance-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(root)
        .map_err(Error::io(format!("creating a temp folder in {}", root.display())))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("the runtime exited with code {code}"),
        (None, Some(sig)) => format!("the runtime was killed by signal {sig}"),
        _ => "the runtime exited".into(),
    }
}

/// Output written at the descriptor level (child processes, native code) on `stream`
/// ([`STDOUT`] or [`STDERR`]): it belongs to the call in flight when there is exactly one and
/// its fence on this stream has not been read yet (runtimes/PROTOCOL.md, "Fences"), else it
/// is published untagged. Fence lines end that call's output here and are not logged. Lines
/// are cut at `MAX_LINE_BYTES` as the bytes arrive (the rest up to the next newline is
/// dropped), so a function writing without newlines holds at most one capped line in memory.
async fn forward_lines(stream: impl tokio::io::AsyncRead + Unpin, bit: u8, shared: Arc<Shared>) {
    let deliver = |line: String| {
        let mut pending = lock(&shared.pending);
        if pending.len() == 1
            && let Some(p) = pending.values_mut().next()
            && p.fences & bit == 0
        {
            p.logs.push_line(line);
        } else {
            drop(pending);
            shared.publish_untagged(&line);
        }
    };
    let mut lines = CappedLines::new(BufReader::new(stream), MAX_LINE_BYTES);
    while let Some(line) = lines.next().await {
        match split_fence(&line) {
            Some((before, id)) => {
                if !before.is_empty() {
                    deliver(before.to_string());
                }
                shared.fence(id, bit);
            }
            None => deliver(line),
        }
    }
    shared.stream_closed(bit);
}

/// A fence line (`[<partial line>]\x1esless-fence:<id>\x1e`): the partial line the function
/// left before it and the request id.
fn split_fence(line: &str) -> Option<(&str, &str)> {
    let at = line.rfind(FENCE)?;
    let id = line[at + FENCE.len()..].strip_suffix('\u{1e}')?;
    Some((&line[..at], id))
}

/// Reads lines of at most `cap` bytes from a stream: a longer line is delivered cut (marked)
/// as soon as it reaches the cap, and its rest up to the newline is skipped without being
/// kept.
struct CappedLines<R> {
    reader: R,
    cap: usize,
    line: Vec<u8>,
    /// Skipping the rest of a line already delivered cut.
    skipping: bool,
}

impl<R: tokio::io::AsyncBufRead + Unpin> CappedLines<R> {
    fn new(reader: R, cap: usize) -> Self {
        CappedLines { reader, cap, line: Vec::new(), skipping: false }
    }

    /// The next line (without its newline), or `None` at the end of the stream or on a read
    /// error.
    async fn next(&mut self) -> Option<String> {
        loop {
            let buf = match self.reader.fill_buf().await {
                Ok(buf) if !buf.is_empty() => buf,
                _ => {
                    // The end: a last line without a newline.
                    if self.line.is_empty() {
                        return None;
                    }
                    return Some(self.take(false));
                }
            };
            let (chunk, newline) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let used = chunk.len() + usize::from(newline);
            let mut full = false;
            if !self.skipping {
                let room = self.cap - self.line.len();
                self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                full = chunk.len() >= room && (chunk.len() > room || !newline);
            }
            self.reader.consume(used);
            if full {
                // Cut now; skip the rest of this line (unless it just ended).
                self.skipping = !newline;
                return Some(self.take(true));
            }
            if newline {
                let was_skipping = std::mem::replace(&mut self.skipping, false);
                if !was_skipping {
                    return Some(self.take(false));
                }
            }
        }
    }

    fn take(&mut self, cut: bool) -> String {
        let bytes = std::mem::take(&mut self.line);
        let mut line = String::from_utf8_lossy(&bytes).trim_end_matches('\r').to_string();
        if cut {
            line.push_str(&format!(" [sless] line cut at {} bytes", self.cap));
        }
        line
    }
}

/// Where a call's lines are published as they arrive.
struct Publisher {
    hub: Arc<LogHub>,
    namespace: String,
    function: String,
    request_id: String,
}

/// Collects a call's log lines, joining partial writes and capping the total.
struct LogCollector {
    publish: Option<Publisher>,
    lines: Vec<String>,
    bytes: usize,
    partial_out: String,
    partial_err: String,
    cut: bool,
}

impl LogCollector {
    fn new(publish: Publisher) -> Self {
        LogCollector { publish: Some(publish), ..Self::detached() }
    }

    fn detached() -> Self {
        LogCollector {
            publish: None,
            lines: Vec::new(),
            bytes: 0,
            partial_out: String::new(),
            partial_err: String::new(),
            cut: false,
        }
    }

    fn push_data(&mut self, stream: &str, data: &str) {
        let mut buf = std::mem::take(if stream == "stderr" { &mut self.partial_err } else { &mut self.partial_out });
        buf.push_str(data);
        while let Some(i) = buf.find('\n') {
            let line: String = buf.drain(..=i).collect();
            self.push_line(line.trim_end_matches(['\n', '\r']).to_string());
        }
        if buf.len() > MAX_LINE_BYTES {
            self.push_line(std::mem::take(&mut buf));
        }
        *(if stream == "stderr" { &mut self.partial_err } else { &mut self.partial_out }) = buf;
    }

    fn push_line(&mut self, mut line: String) {
        if line.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push_str(&format!(" [sless] line cut at {MAX_LINE_BYTES} bytes"));
        }
        if let Some(p) = &self.publish {
            let entry =
                LogLine { time: sless_core::time::now(), request_id: Some(p.request_id.clone()), line: line.clone() };
            p.hub.publish(&p.namespace, &p.function, entry);
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

    #[tokio::test]
    async fn regression_output_without_newlines_is_cut_as_it_arrives() {
        let flood = "A".repeat(10 * 1024);
        let input = format!("short\n{flood}\nafter\r\nexactly\nlast");
        let mut lines = CappedLines::new(input.as_bytes(), 1024);
        let mut got = Vec::new();
        while let Some(line) = lines.next().await {
            assert!(lines.line.capacity() <= 64 * 1024, "the buffer never holds the flood");
            got.push(line);
        }
        assert_eq!(got[0], "short");
        assert_eq!(got[1], format!("{} [sless] line cut at 1024 bytes", "A".repeat(1024)));
        assert_eq!(&got[2..], ["after", "exactly", "last"], "the flood's rest is skipped, not delivered");
        // A line of exactly the cap is not cut.
        let exact = format!("{}\nnext\n", "B".repeat(1024));
        let mut lines = CappedLines::new(exact.as_bytes(), 1024);
        assert_eq!(lines.next().await.map(|l| l.len()), Some(1024));
        assert_eq!(lines.next().await.as_deref(), Some("next"));
        assert_eq!(lines.next().await, None);
    }

    #[test]
    fn fence_lines_end_a_call_and_keep_the_partial_line_before_them() {
        assert_eq!(split_fence("\u{1e}sless-fence:r1\u{1e}"), Some(("", "r1")));
        assert_eq!(split_fence("half a line\u{1e}sless-fence:r-2\u{1e}"), Some(("half a line", "r-2")));
        assert_eq!(split_fence("an ordinary line"), None);
        assert_eq!(split_fence("\u{1e}sless-fence:cut"), None, "a fence cut short is an ordinary line");
    }

    #[test]
    fn log_collector_joins_partial_writes_per_stream() {
        let mut c = LogCollector::detached();
        c.push_data("stdout", "a");
        c.push_data("stderr", "x\n");
        c.push_data("stdout", "b\nc");
        assert_eq!(c.finish(), ["x", "ab", "c"]);
    }

    #[test]
    fn huge_lines_are_cut_not_dropped() {
        let mut c = LogCollector::detached();
        c.push_data("stdout", &"A".repeat(3 * MAX_LINE_BYTES));
        let lines = c.finish();
        assert!(!lines.is_empty() && lines.iter().all(|l| l.len() < MAX_LINE_BYTES + 64), "{}", lines.len());
        assert!(lines[0].ends_with("line cut at 65536 bytes"));
    }

    #[test]
    fn log_collector_caps_with_a_marker() {
        let mut c = LogCollector::detached();
        for i in 0..MAX_LOG_LINES + 5 {
            c.push_line(i.to_string());
        }
        let lines = c.finish();
        assert_eq!(lines.len(), MAX_LOG_LINES + 1);
        assert!(lines[MAX_LOG_LINES].contains("log cut"));
    }
}

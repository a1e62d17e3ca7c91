//! Pods whose container is a real local process (docs/kubernetes-testing.md, "Local process
//! pods"): what a test needs when a request must cross Service → EndpointSlice → pod and reach
//! the function's real program.
//!
//! A pod (template) marked with [`mark_local_process`] carries [`LOCAL_PROCESS_LABEL`]` =
//! "true"` and the scripted label ([`crate::scripted::SCRIPTED_LABEL`]), so KWOK leaves it
//! `Pending` once the real scheduler has bound it. [`LocalPods::start`] then watches a
//! namespace's pods: for each marked, scheduled pod it runs the first container's `command` +
//! `args` as a child process of the test binary on the host, waits until its port accepts TCP
//! connections, and writes the status a kubelet would write through the `pods/status`
//! subresource. When the process exits, the container is `terminated` with its exit code and the
//! pod `Succeeded` (0) or `Failed`; when the pod is deleted, the process is killed.
//!
//! The pods run on 127.0.0.1 (tests send traffic to loopback only). The API server refuses an
//! EndpointSlice (and an Endpoints object) with an address in 127.0.0.0/8 ("may not be in the
//! loopback range"), so such a pod cannot be listed behind a Service: a request crossing
//! Service → pod needs a test host of its own (a network namespace the test makes, with a veth
//! pair), which this helper does not make yet. Tests reach a pod at its pod IP and port.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams};
use kube::core::ObjectMeta;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::Result;
use crate::scripted::{self, termination_message};

/// The label that hands a pod to [`LocalPods`] (value `"true"`).
pub const LOCAL_PROCESS_LABEL: &str = "kube-testenv.sless.invalid/local-process";

/// How often [`LocalPods`] lists the namespace's pods, checks a process for its exit and its
/// pod for deletion, and retries a port that refused: 100 ms.
const POLL: Duration = Duration::from_millis(100);

/// How much of a process's output (standard output and error together) is kept: its last
/// 64 KiB, enough for a termination message ([`scripted::LOG_TAIL_BYTES`]).
const LOG_KEEP_BYTES: usize = 64 * 1024;

/// Adds [`LOCAL_PROCESS_LABEL`] and the scripted label to `meta`'s labels (a pod's or a pod
/// template's metadata).
pub fn mark_local_process(meta: &mut ObjectMeta) {
    scripted::mark_scripted(meta);
    meta.labels.get_or_insert_with(Default::default).insert(LOCAL_PROCESS_LABEL.into(), "true".into());
}

/// A TCP port that is free on `ip` at the moment of the call (bound to port 0 and released:
/// another process may take it before the test uses it).
///
/// # Errors
/// The error of binding to `ip`.
pub fn free_port(ip: Ipv4Addr) -> std::io::Result<u16> {
    Ok(TcpListener::bind((ip, 0))?.local_addr()?.port())
}

/// Expands `$(NAME)` in a container's `command` or `args` from `env`, as the kubelet does: an
/// unknown name stays as written, `$$` is a literal `$`.
pub fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|a| a.split_once(')'))
            && let Some(value) = env.get(name)
        {
            out.push_str(value);
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A process just started: see [`spawn`].
struct Started {
    child: Child,
    address: SocketAddr,
    /// Whether the port is the container's first `containerPort` (else a free one).
    from_spec: bool,
    log: Arc<Mutex<Vec<u8>>>,
}

/// One pod's process.
struct Process {
    pod: String,
    child: Child,
    address: SocketAddr,
    log: Arc<Mutex<Vec<u8>>>,
}

#[derive(Default)]
struct State {
    /// By pod uid.
    running: HashMap<String, Process>,
    /// Every pod uid taken over, running or not.
    taken: HashSet<String>,
    tasks: Vec<JoinHandle<()>>,
    /// What went wrong in the background, for [`LocalPods::problems`].
    problems: Vec<String>,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the marked pods of one namespace as local processes until dropped; dropping it kills
/// every process it still runs (SIGKILL to the process's group).
pub struct LocalPods {
    shared: Shared,
    watcher: JoinHandle<()>,
    ip: Ipv4Addr,
}

impl std::fmt::Debug for LocalPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPods").field("ip", &self.ip).finish_non_exhaustive()
    }
}

impl LocalPods {
    /// Starts taking over the pods of `pods`' namespace that carry [`LOCAL_PROCESS_LABEL`],
    /// on 127.0.0.1 (their pod IP and bind address). Needs a Tokio runtime (the test's); the
    /// work runs in background tasks on it.
    pub fn start(pods: Api<Pod>) -> Self {
        Self::start_on(pods, Ipv4Addr::LOCALHOST)
    }

    /// As [`LocalPods::start`], with `ip` as the pods' IP and bind address (an address of a
    /// test host the test made; with a loopback address no Service can list the pods: the
    /// EndpointSlice controller's writes are refused).
    pub fn start_on(pods: Api<Pod>, ip: Ipv4Addr) -> Self {
        let shared = Shared::default();
        let watcher = tokio::spawn(watch(pods, ip, shared.clone()));
        Self { shared, watcher, ip }
    }

    /// The pods' IP.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The address the process of pod `name` listens on, while it runs.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        lock(&self.shared).running.values().find(|p| p.pod == name).map(|p| p.address)
    }

    /// The names of the pods whose process runs now.
    pub fn running(&self) -> Vec<String> {
        lock(&self.shared).running.values().map(|p| p.pod.clone()).collect()
    }

    /// What went wrong in the background so far (failed API requests, processes that could not
    /// start), one line each.
    pub fn problems(&self) -> Vec<String> {
        lock(&self.shared).problems.clone()
    }
}

impl Drop for LocalPods {
    fn drop(&mut self) {
        self.watcher.abort();
        let mut state = lock(&self.shared);
        for task in state.tasks.drain(..) {
            task.abort();
        }
        for (_, mut process) in state.running.drain() {
            kill(&mut process.child);
        }
    }
}

/// SIGKILL to the child's process group (it leads one of its own), then to the child (its
/// `Child` is `kill_on_drop` as well).
fn kill(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // The group may be gone already; the child itself is killed below either way.
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.start_kill();
}

/// Lists the namespace's marked pods every [`POLL`] and starts a task for each new one that is
/// scheduled.
async fn watch(pods: Api<Pod>, ip: Ipv4Addr, shared: Shared) {
    let selector = format!("{LOCAL_PROCESS_LABEL}=true");
    loop {
        match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => {
                for pod in list.items {
                    let scheduled = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
                    let uid = pod.uid().unwrap_or_default();
                    if !scheduled || pod.metadata.deletion_timestamp.is_some() || uid.is_empty() {
                        continue;
                    }
                    let mut state = lock(&shared);
                    if state.taken.insert(uid) {
                        let task = tokio::spawn(run(pods.clone(), pod, ip, shared.clone()));
                        state.tasks.push(task);
                    }
                }
            }
            Err(err) => lock(&shared).problems.push(format!("listing pods: {err}")),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How the process of a pod ended.
enum End {
    /// It exited (or was killed by a signal).
    Exited(ExitStatus),
    /// It could not be started.
    NotStarted(String),
    /// The pod was deleted (or replaced by one of the same name): the process was killed.
    PodGone,
}

/// Runs `pod`'s first container and reports on it until it ends.
async fn run(pods: Api<Pod>, pod: Pod, ip: Ipv4Addr, shared: Shared) {
    let name = pod.name_any();
    let uid = pod.uid().unwrap_or_default();
    let container = pod.spec.as_ref().and_then(|s| s.containers.first()).cloned().unwrap_or_default();
    let started = now();
    let end = match spawn(&name, &container, ip) {
        Err(message) => End::NotStarted(message),
        Ok(Started { child, address, from_spec, log }) => {
            lock(&shared).running.insert(uid.clone(), Process { pod: name.clone(), child, address, log });
            let run = Supervised { pods: &pods, name: &name, uid: &uid, container: &container, started: &started };
            supervise(&run, address, from_spec, &shared).await
        }
    };
    let process = lock(&shared).running.remove(&uid);
    let log = process.map(|p| String::from_utf8_lossy(&lock_log(&p.log)).into_owned()).unwrap_or_default();
    let terminated = match end {
        End::PodGone => return,
        End::NotStarted(message) => {
            json!({"exitCode": 128, "reason": "StartError", "message": message, "startedAt": started, "finishedAt": now()})
        }
        End::Exited(status) => {
            let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(128);
            let mut terminated = json!({
                "exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" },
                "startedAt": started,
                "finishedAt": now(),
            });
            if code != 0 && container.termination_message_policy.as_deref() == Some("FallbackToLogsOnError") {
                terminated["message"] = json!(termination_message(&log));
            }
            terminated
        }
    };
    let phase = if terminated["exitCode"] == 0 { "Succeeded" } else { "Failed" };
    let status = pod_status(&container, ip, phase, json!({"terminated": terminated}), &started, None);
    if let Err(err) = write_status(&pods, &name, &uid, status).await {
        lock(&shared).problems.push(format!("pod {name}: writing its end: {err}"));
    }
}

/// The pod whose process [`supervise`] watches.
struct Supervised<'a> {
    pods: &'a Api<Pod>,
    name: &'a str,
    uid: &'a str,
    container: &'a Container,
    /// When the process started (a `metav1.Time`).
    started: &'a Value,
}

/// Waits for the port, reports the pod running, then waits for the process to exit or the pod
/// to go.
async fn supervise(run: &Supervised<'_>, address: SocketAddr, from_spec: bool, shared: &Shared) -> End {
    let Supervised { pods, name, uid, container, started } = *run;
    let mut reported = false;
    loop {
        let exited = match lock(shared).running.get_mut(uid).map(|p| p.child.try_wait()) {
            Some(Ok(exited)) => exited,
            Some(Err(err)) => return End::NotStarted(format!("waiting for the process: {err}")),
            None => return End::PodGone,
        };
        if let Some(status) = exited {
            return End::Exited(status);
        }
        match pods.get_opt(name).await {
            Ok(Some(pod)) if pod.uid().as_deref() == Some(uid) && pod.metadata.deletion_timestamp.is_none() => {}
            Ok(_) => {
                if let Some(mut process) = lock(shared).running.remove(uid) {
                    kill(&mut process.child);
                }
                return End::PodGone;
            }
            Err(err) => lock(shared).problems.push(format!("pod {name}: {err}")),
        }
        if !reported && accepts(address).await {
            let source = if from_spec { "its containerPort" } else { "a free port (no containerPort)" };
            let message = format!("kube-testenv local process on {address}, port from {source}");
            let running = json!({"running": {"startedAt": started}});
            let status = pod_status(container, address_ip(address), "Running", running, started, Some(message));
            match write_status(pods, name, uid, status).await {
                Ok(()) => reported = true,
                Err(err) => lock(shared).problems.push(format!("pod {name}: writing Running: {err}")),
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

fn address_ip(address: SocketAddr) -> Ipv4Addr {
    match address.ip() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

async fn accepts(address: SocketAddr) -> bool {
    matches!(tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(address)).await, Ok(Ok(_)))
}

/// Starts `container`'s process (of pod `pod`) on `ip`; the error says why it could not.
fn spawn(pod: &str, container: &Container, ip: Ipv4Addr) -> std::result::Result<Started, String> {
    let declared = container.ports.iter().flatten().next().and_then(|p| u16::try_from(p.container_port).ok());
    let port = match declared {
        Some(port) => port,
        None => free_port(ip).map_err(|err| format!("no free port on {ip}: {err}"))?,
    };
    // What a container runtime gives before the spec's env: PATH (here the host's, as the
    // program comes from the host), HOME and HOSTNAME (the pod's name, as the kubelet sets it).
    let mut env: BTreeMap<String, String> =
        ["PATH", "HOME"].into_iter().filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?))).collect();
    env.insert("HOSTNAME".into(), pod.into());
    for var in container.env.iter().flatten() {
        if let Some(value) = &var.value {
            // Later entries may refer to earlier ones, as in Kubernetes.
            let value = expand(value, &env);
            env.insert(var.name.clone(), value);
        }
    }
    env.insert("PORT".into(), port.to_string());
    let words: Vec<String> =
        container.command.iter().flatten().chain(container.args.iter().flatten()).map(|w| expand(w, &env)).collect();
    let Some((program, args)) = words.split_first() else {
        return Err("the container has no command (no image to take an entrypoint from)".into());
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &container.working_dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|err| format!("cannot run {program}: {err}"))?;
    let log = Arc::new(Mutex::new(Vec::new()));
    if let Some(out) = child.stdout.take() {
        tokio::spawn(collect(out, log.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(collect(err, log.clone()));
    }
    Ok(Started { child, address: SocketAddr::from((ip, port)), from_spec: declared.is_some(), log })
}

fn lock_log(log: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Appends what `from` gives to `log`, keeping the last [`LOG_KEEP_BYTES`].
async fn collect(mut from: impl AsyncRead + Unpin, log: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        let mut log = lock_log(&log);
        log.extend_from_slice(&buf[..n]);
        let excess = log.len().saturating_sub(LOG_KEEP_BYTES);
        log.drain(..excess);
    }
}

/// Now, in whole seconds, as the API server stores `metav1.Time`.
fn now() -> Value {
    serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or_default()
}

/// The `status` of a pod whose first container is in `state` (a `ContainerState` object).
fn pod_status(
    container: &Container,
    ip: Ipv4Addr,
    phase: &str,
    state: Value,
    started: &Value,
    message: Option<String>,
) -> Value {
    let running = phase == "Running";
    let ready = if running { "True" } else { "False" };
    let condition = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastTransitionTime": now()});
    let mut status = json!({
        "phase": phase,
        "hostIP": ip.to_string(),
        "hostIPs": [{"ip": ip.to_string()}],
        "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}],
        "startTime": started,
        "conditions": [
            condition("PodScheduled", "True"),
            condition("Initialized", "True"),
            condition("ContainersReady", ready),
            condition("Ready", ready),
        ],
        "containerStatuses": [{
            "name": container.name,
            "image": container.image.clone().unwrap_or_default(),
            "imageID": "",
            "ready": running,
            "started": running,
            "restartCount": 0,
            "state": state,
        }],
    });
    if let Some(message) = message {
        status["message"] = json!(message);
    }
    json!({ "status": status })
}

/// Writes `status` to pod `name` if it is still the pod `uid` (a merge patch with the uid as
/// precondition: lists are replaced whole).
async fn write_status(pods: &Api<Pod>, name: &str, uid: &str, mut status: Value) -> Result<()> {
    status["metadata"] = json!({"uid": uid});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn expand_replaces_known_names_and_keeps_the_rest() {
        let env = env(&[("PORT", "8080"), ("HOST", "10.0.0.1")]);
        assert_eq!(expand("--listen=$(HOST):$(PORT)", &env), "--listen=10.0.0.1:8080");
        assert_eq!(expand("$(MISSING) $PORT $(PORT", &env), "$(MISSING) $PORT $(PORT");
        assert_eq!(expand("$$(PORT) costs $$5", &env), "$(PORT) costs $5");
        assert_eq!(expand("trailing $", &env), "trailing $");
    }
}

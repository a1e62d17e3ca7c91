//! Function isolation on the local backend (docs/security.md, "Local backend: function
//! isolation"): a spy function deployed through the real server tries each escape the
//! sandbox must stop, and every attempt must fail. Which protections are in force is read
//! from the server's start-up line ("function isolation active=…"); each attempt is asserted
//! against the protections that stop it, and the test prints the line, so a machine that
//! offers less shows what was checked instead of passing silently.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use std::process::Command;

use common::{Server, processes_mentioning};
use serde_json::{Value, json};

/// A function that returns its pid (in its own pid namespace: 1), its temp folder (one per
/// instance: the test finds its host pid by it), code folder and credentials, and holds a
/// secret in its environment.
const VICTIM: &str = r#"
import os
def handler(event, context):
    return {"pid": os.getpid(), "tmp": os.environ["TMPDIR"], "code_dir": os.environ["SLESS_CODE_DIR"],
            "uid": os.getuid()}
"#;

/// The spy: each escape, reported as "denied: <exception>" or "ALLOWED: <what it got>"; the
/// positive controls ("ok: …") show the spy itself works.
const SPY: &str = r#"
import ctypes, errno, json, os, signal, subprocess, sys, time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def read(path, n=200):
    with open(path, "rb") as f:
        return f.read(n)

def write(path):
    with open(path, "w") as f:
        f.write("spy was here")
    return path

def orphan(tag):
    # A grandchild in a session of its own (double fork + setsid), sleeping with `tag` in its
    # command line: it must die with the function.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", tag],
                             start_new_session=True, close_fds=True)
        os.write(w, str(p.pid).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return int(os.read(r, 32) or b"0")

def handler(event, context):
    a = json.loads(event["body"])
    data, server, victim, vcode = a["data"], a["server_pid"], a["victim_pid"], a["victim_code"]
    code = os.environ["SLESS_CODE_DIR"]
    # The data folder as this process sees it: <data>/builds/<runtime>/<sha256>/code.
    seen = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(code))))
    out = {"seen data folder": seen}
    def t(name, f):
        try:
            out[name] = "ALLOWED: %r" % (f(),)
        except Exception as e:
            out[name] = "denied: %s: %s" % (type(e).__name__, e)
    t("read admin-token", lambda: read(data + "/admin-token"))
    t("read sless.db", lambda: read(data + "/sless.db"))
    t("list archives", lambda: os.listdir(data + "/archives"))
    t("list builds", lambda: os.listdir(data + "/builds/python3.11"))
    t("read admin-token where it sees the data folder", lambda: read(seen + "/admin-token"))
    t("read sless.db where it sees the data folder", lambda: read(seen + "/sless.db"))
    t("list the data folder it sees", lambda: os.listdir(seen))
    t("list the builds it sees", lambda: os.listdir(seen + "/builds/python3.11"))
    t("read another function's code", lambda: read(vcode + "/main.py"))
    t("read the server's environ", lambda: read("/proc/%d/environ" % server))
    t("read the server's cmdline", lambda: read("/proc/%d/cmdline" % server))
    t("read another function's environ", lambda: read("/proc/%d/environ" % victim))
    t("open another function's mem", lambda: os.close(os.open("/proc/%d/mem" % victim, os.O_RDONLY)))
    t("pidfd_getfd another instance's socket", lambda: sys_call(438, os.pidfd_open(victim), 3, 0))
    t("pidfd_getfd through a raw pidfd_open", lambda: sys_call(438, sys_call(434, victim, 0), 3, 0))
    t("kill another function's process", lambda: os.kill(victim, signal.SIGKILL))
    t("signal another function's process", lambda: os.kill(victim, 0))
    t("see another function's process", lambda: os.stat("/proc/%d" % victim))
    t("signal the server", lambda: os.kill(server, 0))
    t("ptrace another function", lambda: sys_call(101 if os.uname().machine == "x86_64" else 117, 16, victim, 0, 0))
    t("process_vm_readv another function",
      lambda: sys_call(310 if os.uname().machine == "x86_64" else 270, victim, 0, 0, 0, 0, 0))
    t("write into its code folder", lambda: write(code + "/spy.txt"))
    t("write into the data folder", lambda: write(data + "/spy.txt"))
    t("mount a tmpfs", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0 or
      (_ for _ in ()).throw(OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))))
    t("unshare a user namespace", lambda: sys_call(272 if os.uname().machine == "x86_64" else 97, 0x10000000))
    t("become root", lambda: os.setuid(0))
    t("keyctl", lambda: sys_call(250 if os.uname().machine == "x86_64" else 219, 0, 0, 0, 0, 0))
    t("bpf", lambda: sys_call(321 if os.uname().machine == "x86_64" else 280, 0, 0, 0))
    out["dumpable"] = libc.prctl(3, 0, 0, 0, 0)
    out["uid"] = os.getuid()
    out["groups"] = os.getgroups()
    out["sees the server"] = os.path.exists("/proc/%d" % server)
    out["pid"] = os.getpid()
    out["proc pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    # positive controls
    out["ok: read own code"] = read(code + "/main.py", 20).decode()
    out["ok: write TMPDIR"] = write(os.environ["TMPDIR"] + "/ok.txt")
    t("write /tmp", lambda: write("/tmp/ok.txt"))
    out["ok: a thread and a child process"] = subprocess.run([sys.executable, "-c", "print(7*6)"],
                                                             capture_output=True, text=True).stdout.strip()
    out["orphan"] = orphan(a["tag"])
    return out
"#;

/// The spy in Node (what Node can try without native code): files, other processes' `/proc`
/// entries, signals, writes, and a detached child left behind.
const NODE_SPY: &str = r#"
const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
exports.handler = async (event) => {
  const a = JSON.parse(event.body);
  const code = process.env.SLESS_CODE_DIR;
  const seen = path.dirname(path.dirname(path.dirname(path.dirname(code))));
  const out = { 'seen data folder': seen };
  const t = (name, f) => {
    try {
      out[name] = 'ALLOWED: ' + String(JSON.stringify(f())).slice(0, 200);
    } catch (e) {
      out[name] = `denied: ${e.code || e.name}: ${e.message}`;
    }
  };
  const read = (p) => fs.readFileSync(p, 'latin1').slice(0, 200);
  t('read admin-token', () => read(a.data + '/admin-token'));
  t('read sless.db', () => read(a.data + '/sless.db'));
  t('read admin-token where it sees the data folder', () => read(seen + '/admin-token'));
  t('read sless.db where it sees the data folder', () => read(seen + '/sless.db'));
  t('list the builds it sees', () => fs.readdirSync(seen + '/builds/python3.11'));
  t("read the server's environ", () => read(`/proc/${a.server_pid}/environ`));
  t("read the server's cmdline", () => read(`/proc/${a.server_pid}/cmdline`));
  t("read another function's environ", () => read(`/proc/${a.victim_pid}/environ`));
  t("open another function's mem", () => fs.closeSync(fs.openSync(`/proc/${a.victim_pid}/mem`, 'r')));
  t("kill another function's process", () => process.kill(a.victim_pid, 'SIGKILL'));
  t("signal another function's process", () => process.kill(a.victim_pid, 0));
  t("see another function's process", () => fs.statSync(`/proc/${a.victim_pid}`));
  t('signal the server', () => process.kill(a.server_pid, 0));
  t('write into its code folder', () => fs.writeFileSync(code + '/spy.txt', 'x'));
  t('write into the data folder', () => fs.writeFileSync(a.data + '/spy.txt', 'x'));
  t('become root', () => process.setuid(0));
  out.uid = process.getuid();
  out.groups = process.getgroups();
  out['sees the server'] = fs.existsSync(`/proc/${a.server_pid}`);
  out.pid = process.pid;
  out['proc pids'] = fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).map(Number).sort((x, y) => x - y);
  out['ok: read own code'] = read(code + '/index.js').slice(0, 20);
  fs.writeFileSync(process.env.TMPDIR + '/ok.txt', 'ok');
  out['ok: write TMPDIR'] = process.env.TMPDIR + '/ok.txt';
  t('write /tmp', () => fs.writeFileSync('/tmp/ok.txt', 'ok'));
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)', a.tag], { detached: true, stdio: 'ignore' });
  child.unref();
  out.orphan = child.pid;
  return out;
};
"#;

/// The protections the server's start-up line says are in force.
fn active_protections(server: &Server) -> (String, BTreeSet<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log();
        if let Some(line) = log.lines().find(|l| l.contains("function isolation")) {
            let active = line
                .split(" active=")
                .nth(1)
                .and_then(|rest| rest.split(" inactive=").next())
                .unwrap_or_default()
                .split(", ")
                .map(|p| p.split('(').next().unwrap_or_default().trim().to_string())
                .filter(|p| !p.is_empty() && p != "none")
                .collect();
            return (line.to_string(), active);
        }
        assert!(Instant::now() < deadline, "no 'function isolation' line in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn cold_start_kind(server: &Server, function: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, _, page) = server.send(server.http.get(server.api(&format!("/{function}/invocations")))).await;
        if let Some(first) = page["items"].as_array().and_then(|items| items.last()) {
            return first["cold_start_kind"].clone();
        }
        assert!(Instant::now() < deadline, "no record for {function}: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kills the processes whose command line holds `tag` (what a test leaves behind on purpose).
fn kill_tagged(tag: &str) {
    for line in processes_mentioning(tag) {
        if let Some(pid) = line.split(':').next().and_then(|p| p.parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Whether this test runs as root (the server it starts then does too).
fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|v| v.split_whitespace().nth(1)) == Some("0")
}

/// The attempts that are system calls the sandbox refuses with EPERM.
const EPERM_ATTEMPTS: [&str; 9] = [
    "pidfd_getfd another instance's socket",
    "pidfd_getfd through a raw pidfd_open",
    "ptrace another function",
    "process_vm_readv another function",
    "mount a tmpfs",
    "unshare a user namespace",
    "keyctl",
    "bpf",
    "become root",
];

/// Which protections stop each attempt: it must fail if any of them is in force.
fn stopped_by(attempt: &str) -> &'static [&'static str] {
    match attempt {
        "read admin-token"
        | "read sless.db"
        | "list archives"
        | "list builds"
        | "write into the data folder"
        | "read admin-token where it sees the data folder"
        | "read sless.db where it sees the data folder"
        | "list the builds it sees" => &["mount-namespace", "landlock", "uid-per-function"],
        "read another function's code" => &["mount-namespace", "landlock"],
        "list the data folder it sees" => &["landlock"],
        "read the server's environ" | "read another function's environ" | "open another function's mem" => {
            &["uid-per-function", "landlock"]
        }
        "read the server's cmdline" => &["private-proc", "pid-namespace"],
        "see another function's process" => &["private-proc", "pid-namespace"],
        "pidfd_getfd another instance's socket" | "pidfd_getfd through a raw pidfd_open" => {
            &["seccomp", "uid-per-function", "landlock"]
        }
        "kill another function's process" | "signal another function's process" | "signal the server" => {
            &["uid-per-function", "landlock-scopes", "pid-namespace"]
        }
        "ptrace another function" | "process_vm_readv another function" => &["seccomp", "uid-per-function", "landlock"],
        "write into its code folder" => &["mount-namespace", "landlock"],
        "mount a tmpfs" => &["seccomp", "uid-per-function"],
        "unshare a user namespace" | "keyctl" | "bpf" => &["seccomp"],
        "become root" => &["uid-per-function"],
        other => panic!("no protection listed for {other:?}"),
    }
}

/// The victim's pid on the host (in a pid namespace of its own it says 1).
fn victim_host_pid(victim: &Value, active: &BTreeSet<String>) -> u32 {
    let tmp = victim["tmp"].as_str().expect("tmp");
    let found = common::pids_with_tmpdir(tmp);
    let [host] = found[..] else { panic!("one process runs with TMPDIR={tmp}: {found:?}") };
    let own = victim["pid"].as_u64().expect("pid");
    if active.contains("pid-namespace") {
        assert_eq!(own, 1, "the victim is pid 1 of its own pid namespace: {victim}");
    } else {
        assert_eq!(u64::from(host), own, "without a pid namespace it sees its host pid");
    }
    host
}

async fn spy_on(server: &Server, spy: &str, victim: &Value, active: &BTreeSet<String>) -> Value {
    // Unique per server: the tests of this file run in parallel, each with its own server.
    let port = server.url.rsplit(':').next().unwrap_or_default();
    let tag = format!("sless-spy-orphan-{spy}-{}-{port}", std::process::id());
    let server_pid = server.child.as_ref().map(|c| c.id()).expect("server pid");
    let body = json!({
        "data": server.data,
        "server_pid": server_pid,
        "victim_pid": victim_host_pid(victim, active),
        "victim_code": victim["code_dir"],
        "tag": tag,
    });
    let (status, _, out) = server.invoke(spy, "POST", "", Some(&body.to_string())).await;
    if status != 200 {
        let logs = server.cli(&["logs", spy]);
        panic!("{spy} answered {status}: {out}\n{}\n{}", String::from_utf8_lossy(&logs.stdout), server.log());
    }
    println!("{spy}: {}", serde_json::to_string_pretty(&out).unwrap_or_default());
    let Some(report) = out.as_object() else { panic!("{out}") };
    for (attempt, result) in report {
        let Some(text) = result.as_str() else { continue };
        if attempt.starts_with("ok: ") || attempt == "orphan" || attempt == "seen data folder" {
            continue;
        }
        if attempt == "write /tmp" {
            // A private /tmp with a mount namespace; without one the host's /tmp is out of
            // Landlock's reach (docs/security.md, "Root and not root").
            if active.contains("mount-namespace") {
                assert!(text.starts_with("ALLOWED"), "{spy}: its own /tmp is writable: {text}");
            } else if active.contains("landlock") {
                assert!(text.starts_with("denied: "), "{spy}: the host's /tmp is not writable: {text}");
            }
            continue;
        }
        let by: Vec<&str> = stopped_by(attempt).iter().copied().filter(|p| active.contains(*p)).collect();
        if by.is_empty() {
            println!("{spy}: {attempt:?} is not checked here (none of {:?} is active): {text}", stopped_by(attempt));
            continue;
        }
        assert!(text.starts_with("denied: "), "{spy}: {attempt} must fail ({} active): {text}", by.join(", "));
        // A system call refused by the sandbox answers EPERM (not, say, EFAULT for bad arguments).
        if EPERM_ATTEMPTS.contains(&attempt.as_str()) {
            assert!(
                text.contains("[Errno 1]") || text.contains("EPERM"),
                "{spy}: {attempt} must be refused with EPERM: {text}"
            );
        }
    }
    assert!(
        out["ok: read own code"]
            .as_str()
            .is_some_and(|c| c.starts_with("\nimport ctypes") || c.starts_with("\nconst fs")),
        "reads its own code: {}",
        out["ok: read own code"]
    );
    if !out["ok: a thread and a child process"].is_null() {
        assert_eq!(out["ok: a thread and a child process"], "42");
    }
    assert!(out["ok: write TMPDIR"].is_string());
    if active.contains("uid-per-function") {
        let uid = out["uid"].as_u64().expect("uid");
        assert!(uid >= 200_000, "a uid of sless's range: {uid}");
        assert_ne!(Some(uid), victim["uid"].as_u64(), "functions have uids of their own");
        // Node's getgroups() always includes the effective gid (the function's, equal to its uid).
        let groups = out["groups"].as_array().cloned().unwrap_or_default();
        assert!(groups.iter().all(|g| g.as_u64() == Some(uid)), "no supplementary groups: {groups:?}");
    }
    if active.contains("not-dumpable") && !out["dumpable"].is_null() {
        assert_eq!(out["dumpable"], 0, "not dumpable after execve");
    }
    if active.contains("private-proc") {
        assert_eq!(out["sees the server"], false);
    }
    if active.contains("pid-namespace") {
        // Its own pid namespace: it is pid 1 and /proc lists nothing else (the orphan below is
        // not started yet); other processes are not there at all (ESRCH, not EPERM).
        assert_eq!((&out["pid"], &out["proc pids"]), (&json!(1), &json!([1])), "{spy}: {out}");
        for attempt in ["kill another function's process", "signal another function's process", "signal the server"] {
            let text = out[attempt].as_str().unwrap_or_default();
            assert!(
                text.contains("ProcessLookupError") || text.contains("ESRCH"),
                "{spy}: {attempt}: no such process in its namespace: {text}"
            );
        }
    } else {
        println!("{spy}: its pid namespace is not checked here (pid-namespace is not active)");
    }
    let orphan = out["orphan"].as_u64().expect("orphan pid");
    assert!(orphan > 0);
    let seen = Instant::now() + Duration::from_secs(3);
    while processes_mentioning(&tag).is_empty() {
        let status = std::fs::read_to_string(format!("/proc/{orphan}/status")).unwrap_or_else(|e| e.to_string());
        let cmdline = std::fs::read(format!("/proc/{orphan}/cmdline")).unwrap_or_default();
        assert!(
            Instant::now() < seen,
            "{spy}: the orphan {orphan} does not run while the function exists: {status}\n{:?}\n{}",
            String::from_utf8_lossy(&cmdline),
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Deleting the function ends every process it started, the orphan too.
    server.client.delete_function(spy).await.expect("delete");
    if !active.contains("cgroup-kill") && !active.contains("uid-per-function") {
        println!("{spy}: the orphan outlives its function here (neither cgroup-kill nor uid-per-function)");
        kill_tagged(&tag);
        return out;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while !processes_mentioning(&tag).is_empty() {
        assert!(Instant::now() < deadline, "{spy}: left running after deletion: {:?}", processes_mentioning(&tag));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    out
}

#[tokio::test]
async fn a_spy_function_cannot_escape_its_sandbox_on_either_start_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A token file in the data folder (the server takes SLESS_ADMIN_TOKEN, so it is only bait).
    std::fs::write(dir.path().join("admin-token"), "sless_canary_admin_token").expect("token");
    let server = Server::start_in_env(
        dir.path(),
        &["--warm-pool-size", "1"],
        &[("AWS_SECRET_ACCESS_KEY".into(), "server-secret-canary".into())],
    );
    let (line, active) = active_protections(&server);
    println!("start-up line: {line}");
    assert!(active.contains("no-new-privileges"), "always in force: {line}");
    assert!(!active.iter().any(|p| p.contains(' ') || p.contains('=')), "parsed: {active:?}");
    // Root gets the protections that need privileges (docs/security.md).
    if running_as_root() {
        for p in ["uid-per-function", "mount-namespace", "private-proc", "pid-namespace"] {
            assert!(active.contains(p), "as root, {p} is in force: {line}\n{}", server.log());
        }
    }
    server
        .deploy("victim", "python3.11", "main.handler", &[("main.py", VICTIM)], json!({"env": {"VICTIM_SECRET": "s3"}}))
        .await;
    let (s, _, victim) = server.invoke("victim", "GET", "", None).await;
    assert_eq!(s, 200, "{victim}");
    // Through the warm pool (the pool process is specialised, then drops to the spy's uid) …
    let wait = Instant::now() + Duration::from_secs(30);
    // This server's runtime processes (the tests of this file run in parallel).
    let shim = server.data.join("runtimes/python3.11/bootstrap.py").display().to_string();
    while processes_mentioning(&shim).len() < 2 {
        assert!(Instant::now() < wait, "the warm pool did not refill: {:?}", processes_mentioning(&shim));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.deploy("spy", "python3.11", "main.handler", &[("main.py", SPY)], json!({})).await;
    let pooled = spy_on(&server, "spy", &victim, &active).await;
    assert_eq!(cold_start_kind(&server, "spy").await, "pool", "the first spy ran in a warm-pool process");
    // … and as a process started for the function (a start-time setting skips the pool).
    server
        .deploy("spy-proc", "python3.11", "main.handler", &[("main.py", SPY)], json!({"env": {"PYTHONHASHSEED": "0"}}))
        .await;
    let started = spy_on(&server, "spy-proc", &victim, &active).await;
    assert_eq!(cold_start_kind(&server, "spy-proc").await, "process");
    assert_ne!(pooled["uid"], started["uid"], "two functions, two uids");
    // The victim survived every attempt: same process, still answering.
    let (s, _, again) = server.invoke("victim", "GET", "", None).await;
    assert_eq!((s, &again["tmp"]), (200, &victim["tmp"]), "the same instance: {again}");
    let log = server.log();
    for secret in ["sless_canary_admin_token", "server-secret-canary"] {
        assert!(!pooled.to_string().contains(secret) && !started.to_string().contains(secret), "{secret} leaked");
    }
    assert!(!log.contains("server-secret-canary"));
}

#[tokio::test]
async fn function_uids_stay_the_same_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &[]);
    let (line, active) = active_protections(&server);
    println!("start-up line: {line}");
    server.deploy("a", "python3.11", "main.handler", &[("main.py", VICTIM)], json!({})).await;
    server.deploy("b", "python3.11", "main.handler", &[("main.py", VICTIM)], json!({})).await;
    let uid = async |server: &Server, name: &str| {
        let (s, _, out) = server.invoke(name, "GET", "", None).await;
        assert_eq!(s, 200, "{out}");
        out["uid"].as_u64().expect("uid")
    };
    let (a, b) = (uid(&server, "a").await, uid(&server, "b").await);
    if !active.contains("uid-per-function") {
        // Without it (a server that is not root) functions run as the server's own user.
        let own = std::fs::metadata(dir.path()).map(|m| std::os::unix::fs::MetadataExt::uid(&m)).expect("meta");
        assert_eq!((a, b), (u64::from(own), u64::from(own)), "{line}");
        return;
    }
    assert_ne!(a, b);
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("function-uids.json")).expect("table"))
            .expect("json");
    assert_eq!(table["functions"]["default/a"], a, "{table}");
    assert!(server.stop().success());
    let server = Server::start_in(dir.path(), &[]);
    assert_eq!((uid(&server, "b").await, uid(&server, "a").await), (b, a), "the same uids after a restart");
}

#[tokio::test]
async fn a_node_spy_cannot_escape_either() {
    let server = Server::start_with(&["--warm-pool-size", "1"]);
    let (line, active) = active_protections(&server);
    println!("start-up line: {line}");
    server.deploy("victim", "python3.11", "main.handler", &[("main.py", VICTIM)], json!({})).await;
    let (s, _, victim) = server.invoke("victim", "GET", "", None).await;
    assert_eq!(s, 200, "{victim}");
    let wait = Instant::now() + Duration::from_secs(30);
    let shim = server.data.join("runtimes/nodejs20/bootstrap.cjs").display().to_string();
    while processes_mentioning(&shim).is_empty() {
        assert!(Instant::now() < wait, "no Node warm-pool process");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A warm-pool process (it drops to the function's uid at `load`; no second Landlock layer in
    // Node, see docs/security.md) …
    server.deploy("spy-js", "nodejs20", "index.handler", &[("index.js", NODE_SPY)], json!({})).await;
    let pooled = spy_on(&server, "spy-js", &victim, &active).await;
    assert_eq!(cold_start_kind(&server, "spy-js").await, "pool");
    // … and a process started for the function (NODE_OPTIONS skips the pool).
    server
        .deploy(
            "spy-js-proc",
            "nodejs20",
            "index.handler",
            &[("index.js", NODE_SPY)],
            json!({"env": {"NODE_OPTIONS": "--no-warnings"}}),
        )
        .await;
    let started = spy_on(&server, "spy-js-proc", &victim, &active).await;
    assert_eq!(cold_start_kind(&server, "spy-js-proc").await, "process");
    if active.contains("uid-per-function") {
        assert_ne!(pooled["uid"], started["uid"]);
    }
    let (s, _, again) = server.invoke("victim", "GET", "", None).await;
    assert_eq!((s, &again["tmp"]), (200, &victim["tmp"]), "the same instance: {again}");
}

#[tokio::test]
async fn a_server_that_is_not_root_still_sandboxes_with_landlock_and_seccomp() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("admin-token"), "sless_canary_admin_token").expect("token");
    // As root the server is started as nobody; as a user it is that user already.
    let root = running_as_root();
    let wrapper: &[&str] = if root { &["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] } else { &[] };
    if root {
        let status = Command::new("chown").args(["-R", "nobody"]).arg(dir.path()).status().expect("chown");
        assert!(status.success());
    }
    // As nobody the pyenv interpreter under /root (mode 0700) is out of reach: the system's.
    let args: &[&str] = if root {
        &["--warm-pool-size", "1", "--python", "/usr/bin/python3.11", "--node", "/usr/bin/node"]
    } else {
        &["--warm-pool-size", "1"]
    };
    let server = Server::start_through(wrapper, dir.path(), args, &[]);
    let (line, active) = active_protections(&server);
    println!("start-up line: {line}");
    for p in ["uid-per-function", "mount-namespace", "private-proc", "pid-namespace", "not-dumpable"] {
        assert!(!active.contains(p), "{p} needs root: {line}");
    }
    assert!(active.contains("no-new-privileges"), "{line}");
    server.deploy("victim", "python3.11", "main.handler", &[("main.py", VICTIM)], json!({})).await;
    let (s, _, victim) = server.invoke("victim", "GET", "", None).await;
    assert_eq!(s, 200, "{victim}");
    server.deploy("spy", "python3.11", "main.handler", &[("main.py", SPY)], json!({})).await;
    let out = spy_on(&server, "spy", &victim, &active).await;
    if root {
        assert_eq!(out["uid"], 65534, "the server's own user");
    }
    // A process start (NODE_OPTIONS skips the pool): a Node pool process of a server that is
    // not root can list and read every build (docs/security.md, "The warm pool").
    let env = json!({"env": {"NODE_OPTIONS": "--no-warnings"}});
    server.deploy("spy-js", "nodejs20", "index.handler", &[("index.js", NODE_SPY)], env).await;
    spy_on(&server, "spy-js", &victim, &active).await;
    let (s, _, again) = server.invoke("victim", "GET", "", None).await;
    assert_eq!((s, &again["tmp"]), (200, &victim["tmp"]), "the same instance: {again}");
}

/// Found by an attack on the first sandbox: the dependency install of a build ran as root
/// outside the sandbox, and an upload's `requirements.txt` (`-r /proc/<server>/environ`), its
/// `setup.py` or its npm scripts read the admin token and the token key into the build log.
/// Installs now run as the function's uid in its sandbox, with the work folder writable.
#[tokio::test]
async fn a_builds_install_steps_run_in_the_functions_sandbox() {
    let server = Server::start();
    let (line, active) = active_protections(&server);
    println!("{line}");
    let pid = server.child.as_ref().map(|c| c.id()).expect("server pid");
    let data = server.data.display().to_string();
    // pip: a requirements file naming the server's environment and the token key, and a
    // local package whose setup.py tries to read them and write outside the build.
    let setup = format!(
        "import os\nfor p in ['/proc/{pid}/environ', '{data}/token-key', '{data}/admin-token', '{data}/sless.db']:\n    try:\n        open(p, 'rb').read(); print('LEAK', p)\n    except Exception as e:\n        print('denied', p, type(e).__name__)\ntry:\n    open('{data}/pwned', 'w').write('x'); print('LEAK write')\nexcept Exception as e:\n    print('denied write', type(e).__name__)\nprint('uid', os.getuid())\nfrom setuptools import setup\nsetup(name='evilpkg', version='1.0', py_modules=[])\n"
    );
    let reqs = format!("-r /proc/{pid}/environ\n");
    server.create(json!({"name": "evil-py", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    let (s, up) = server
        .upload(
            "evil-py",
            common::zip(&[
                ("main.py", "def handler(e, c):\n    return 1\n"),
                ("requirements.txt", &reqs),
                ("evilpkg/setup.py", &setup),
            ]),
        )
        .await;
    assert_eq!(s, 202, "{up}");
    let v = server.wait_version("evil-py", up["version"].as_u64().expect("version")).await;
    let log = server.client.build_log("evil-py", 1).await.expect("build log");
    assert_eq!(v["phase"], "Failed", "the environ cannot be read, so the install fails: {log}");
    for secret in
        [common::TOKEN.to_string(), std::fs::read_to_string(server.data.join("token-key")).unwrap_or_default()]
    {
        assert!(!secret.trim().is_empty() && !log.contains(secret.trim()), "a secret is in the build log:\n{log}");
    }
    // The package's setup.py, installed on its own, runs sandboxed as the function's uid.
    let reqs = "./evilpkg\n";
    server.create(json!({"name": "evil-pkg", "runtime": "python3.11", "entrypoint": "main.handler"})).await;
    let (s, up) = server
        .upload(
            "evil-pkg",
            common::zip(&[
                ("main.py", "def handler(e, c):\n    return 1\n"),
                ("requirements.txt", reqs),
                ("evilpkg/setup.py", &setup),
            ]),
        )
        .await;
    assert_eq!(s, 202, "{up}");
    server.wait_version("evil-pkg", up["version"].as_u64().expect("version")).await;
    let log = server.client.build_log("evil-pkg", 1).await.expect("build log");
    assert!(!log.contains("LEAK"), "the install reached the server's files:\n{log}");
    assert!(!server.data.join("pwned").exists());
    if active.contains("uid-per-function") {
        assert!(!log.contains("uid 0"), "the install ran as root:\n{log}");
    }
    // npm: a preinstall script of the function's own package.json.
    let pkg = format!(
        r#"{{"name": "evil", "version": "1.0.0", "scripts": {{"preinstall": "cat /proc/{pid}/environ {data}/token-key; id -u; touch {data}/pwned-npm"}}}}"#
    );
    server.create(json!({"name": "evil-js", "runtime": "nodejs20", "entrypoint": "index.handler"})).await;
    let (s, up) = server
        .upload("evil-js", common::zip(&[("index.js", "exports.handler = async () => 1;\n"), ("package.json", &pkg)]))
        .await;
    assert_eq!(s, 202, "{up}");
    server.wait_version("evil-js", up["version"].as_u64().expect("version")).await;
    let log = server.client.build_log("evil-js", 1).await.expect("build log");
    assert!(!log.contains(common::TOKEN), "the admin token is in the npm log:\n{log}");
    assert!(!server.data.join("pwned-npm").exists(), "{log}");
}

/// Found by an attack on the first sandbox: descriptors the server inherited (a file it was
/// started with, a pipe of its parent) reached every function process.
#[tokio::test]
#[allow(unsafe_code)] // fcntl on a descriptor of this test process.
async fn descriptors_the_server_inherited_never_reach_a_function() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "inherited-secret-8c1f").expect("write");
    let file = std::fs::File::open(&secret).expect("open");
    let fd = file.as_raw_fd();
    // SAFETY: clears FD_CLOEXEC on a descriptor this test owns, so the server inherits it.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        assert!(flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) == 0);
    }
    let server = Server::start();
    drop(file);
    let code = "import os\ndef handler(e, c):\n    got = []\n    for fd in range(3, 1024):\n        try:\n            os.lseek(fd, 0, 0)\n            got.append(os.read(fd, 100).decode(errors='replace'))\n        except OSError:\n            pass\n    return {'read': got, 'fds': sorted(os.listdir('/proc/self/fd'))}\n";
    server.deploy("fds", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, _, body) = server.invoke("fds", "GET", "/", None).await;
    assert_eq!(s, 200, "{body}");
    assert!(
        !body.to_string().contains("inherited-secret-8c1f"),
        "an inherited descriptor reached the function: {body}"
    );
}

/// Found by an attack on the first sandbox: System V shared memory was the machine's — a
/// function's segments outlived it (and its memory limit), and functions could attach to
/// each other's. Each instance now has an IPC namespace of its own.
#[tokio::test]
async fn system_v_shared_memory_is_per_instance() {
    let server = Server::start();
    let (line, active) = active_protections(&server);
    println!("{line}");
    let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x5e55
def handler(event, context):
    if event["path"] == "/make":
        shm = libc.shmget(KEY, 1 << 20, 0o1666)  # IPC_CREAT | 0666
        return {"made": shm >= 0, "errno": ctypes.get_errno()}
    shm = libc.shmget(KEY, 0, 0o666)
    return {"found": shm >= 0, "errno": ctypes.get_errno()}
"#;
    server.deploy("maker", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    server.deploy("finder", "python3.11", "main.handler", &[("main.py", code)], json!({})).await;
    let (s, _, made) = server.invoke("maker", "GET", "/make", None).await;
    assert_eq!((s, made["made"].clone()), (200, json!(true)), "{made}");
    let (_, _, found) = server.invoke("finder", "GET", "/find", None).await;
    let host_has = || {
        std::fs::read_to_string("/proc/sysvipc/shm")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().next() == Some("24149"))
    };
    if active.contains("mount-namespace") {
        assert_eq!(found["found"], json!(false), "another function found the segment: {found}");
        assert!(!host_has(), "the segment is the machine's");
    }
}

/// Found by an attack on the first sandbox: nothing bounded a function's processes and
/// threads (one instance held 6,000 threads; the machine has 32,768 pids). Each function's uid
/// may run at most 4,096 (`RLIMIT_NPROC`), and other functions keep answering.
#[tokio::test]
async fn a_thread_bomb_stops_at_the_functions_task_limit() {
    let server = Server::start();
    let (line, active) = active_protections(&server);
    println!("{line}");
    let bomb = r#"
import threading, time
def handler(event, context):
    stop = threading.Event()
    n = 0
    try:
        while n < 6000:
            threading.Thread(target=stop.wait, daemon=True).start()
            n += 1
    except RuntimeError:
        pass
    stop.set()
    return {"threads": n}
"#;
    server
        .deploy(
            "bomb",
            "python3.11",
            "main.handler",
            &[("main.py", bomb)],
            json!({"memory_mb": 512, "timeout_sec": 60}),
        )
        .await;
    server
        .deploy(
            "calm",
            "python3.11",
            "main.handler",
            &[("main.py", "def handler(e, c):\n    return 'ok'\n")],
            json!({}),
        )
        .await;
    let (s, _, b) = server.invoke("bomb", "GET", "/", None).await;
    assert_eq!(s, 200, "{b}");
    if active.contains("uid-per-function") {
        let n = b["threads"].as_u64().expect("threads");
        assert!(n < 4096, "a function started {n} threads");
    }
    let (s, _, b) = server.invoke("calm", "GET", "/", None).await;
    assert_eq!((s, b), (200, json!("ok")));
}

/// A function that leaves a process behind: a grandchild in a session of its own (double
/// fork + `setsid`), sleeping with the event's body in its command line.
const ORPHANER: &str = r#"
import os, subprocess, sys
def handler(event, context):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", event["body"]],
                             start_new_session=True, close_fds=True)
        os.write(w, str(p.pid).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return {"orphan": int(os.read(r, 32) or b"0"), "pid": os.getpid()}
"#;

/// With a pid namespace per process, what a function leaves running dies with its runtime
/// (pid 1 of the namespace) even when nothing of the server cleans up: the server is killed
/// (SIGKILL, so no cgroup is killed and no uid swept), each runtime sees its control socket
/// close and exits, and the kernel kills the rest of its namespace. Without it the orphan runs
/// on until the next start's clean-up (docs/security.md, "PID namespaces").
#[tokio::test]
async fn a_functions_orphan_dies_with_its_runtime_even_when_the_server_is_killed() {
    let server = Server::start();
    let (line, active) = active_protections(&server);
    println!("start-up line: {line}");
    let port = server.url.rsplit(':').next().unwrap_or_default().to_string();
    let tag = format!("sless-orphan-of-killed-server-{}-{port}", std::process::id());
    server.deploy("parent", "python3.11", "main.handler", &[("main.py", ORPHANER)], json!({})).await;
    let (s, _, out) = server.invoke("parent", "POST", "", Some(&tag)).await;
    assert_eq!(s, 200, "{out}");
    let seen = Instant::now() + Duration::from_secs(5);
    while processes_mentioning(&tag).is_empty() {
        assert!(Instant::now() < seen, "the orphan does not run: {out}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !active.contains("pid-namespace") {
        println!("the orphan outlives a killed server here (pid-namespace is not active): {line}");
        drop(server);
        kill_tagged(&tag);
        return;
    }
    assert_eq!(out["pid"], 1, "the runtime is pid 1 of its namespace: {out}");
    drop(server); // SIGKILL: nothing of the server runs its clean-up
    let deadline = Instant::now() + Duration::from_secs(15);
    while !processes_mentioning(&tag).is_empty() {
        if Instant::now() > deadline {
            let left = processes_mentioning(&tag);
            kill_tagged(&tag);
            panic!("the orphan outlived its runtime: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

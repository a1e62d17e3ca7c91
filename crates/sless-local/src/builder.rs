//! The local build (docs/architecture.md, "Archives and builds"): unpack the archive into a folder per runtime and SHA-256,
//! install dependencies (`pip install --target` for `requirements.txt`, `npm ci` /
//! `npm install --omit=dev` for `package.json`), then load the entrypoint once. Everything is
//! bounded by the build time limit and its output is the build log.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use sless_core::archive::{ArchiveLimits, unpack};
use sless_core::runtime::Runtime;
use sless_core::traits::{BuildOutcome, InvokeTarget};
use tokio::process::Command;

use crate::instance::LaunchSpec;
use crate::sandbox::{Creds, Isolation, Role};
use crate::shims::{Interpreters, Shims};
use crate::{Error, Result};

/// Marker file written last into a finished build folder.
pub(crate) const DONE_MARKER: &str = ".sless-built";

/// Where a version's build lives: `<builds>/<runtime>/<sha256>/{code,deps}`.
pub(crate) fn build_dir(builds: &Path, runtime: Runtime, sha256: &str) -> PathBuf {
    builds.join(runtime.name()).join(sha256)
}

pub(crate) struct Builder<'a> {
    pub builds: &'a Path,
    pub cache_home: &'a Path,
    pub interpreters: &'a Interpreters,
    pub shims: &'a Shims,
    pub limits: &'a ArchiveLimits,
    pub timeout: Duration,
    /// The sandbox the entrypoint check runs in (the function's own code runs there).
    pub isolation: &'a Isolation,
    /// The uid of each function.
    pub uids: &'a std::sync::Mutex<crate::uids::UidStore>,
}

impl Builder<'_> {
    /// Builds `archive` for `target` (whose `sha256` names the archive). Reuses a finished
    /// build of the same bytes; always ends by loading the entrypoint.
    pub(crate) async fn build(&self, target: &InvokeTarget, archive: bytes::Bytes) -> Result<BuildOutcome> {
        let started = Instant::now();
        let runtime = target.spec.runtime;
        let dir = build_dir(self.builds, runtime, &target.sha256);
        let mut log = String::new();
        if dir.join(DONE_MARKER).exists() {
            log.push_str(&format!("reusing the build of {} for {runtime}\n", &target.sha256));
        } else {
            let creds = crate::executor::creds_for(self.isolation, self.uids, &target.namespace, &target.name)?;
            match self.fresh_build(runtime, &dir, archive, creds, started, &mut log).await {
                Ok(true) => {}
                Ok(false) => return Ok(failed(log)),
                Err(e) => {
                    log.push_str(&format!("error: {e}\n"));
                    return Ok(failed(log));
                }
            }
        }
        let creds = crate::executor::creds_for(self.isolation, self.uids, &target.namespace, &target.name)?;
        let spec = launch_spec(self.interpreters, self.shims, &dir, target, creds, self.isolation.view());
        let remaining = self.timeout.saturating_sub(started.elapsed()).max(Duration::from_secs(5));
        log.push_str(&format!("loading entrypoint {}\n", target.spec.entrypoint));
        let check = check_entrypoint(&spec, self.cache_home, self.isolation, remaining).await?;
        log.push_str(&check.output);
        if let Some(error) = check.error {
            log.push_str(&format!("error: {error}\n"));
            return Ok(BuildOutcome { ok: false, log, message: error });
        }
        log.push_str(&format!("built in {} ms\n", started.elapsed().as_millis()));
        Ok(BuildOutcome { ok: true, log, message: String::new() })
    }

    async fn fresh_build(
        &self,
        runtime: Runtime,
        dir: &Path,
        archive: bytes::Bytes,
        creds: Option<Creds>,
        started: Instant,
        log: &mut String,
    ) -> Result<bool> {
        let parent = dir.parent().unwrap_or(self.builds);
        std::fs::create_dir_all(parent).map_err(Error::io(format!("creating {}", parent.display())))?;
        let work = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(parent)
            .map_err(Error::io("creating a build folder"))?;
        let code = work.path().join("code");
        std::fs::create_dir_all(&code).map_err(Error::io("creating the code folder"))?;
        let limits = *self.limits;
        let code_for_unpack = code.clone();
        tokio::task::spawn_blocking(move || unpack(&archive, &code_for_unpack, &limits))
            .await
            .map_err(|e| Error::Protocol(format!("unpack task failed: {e}")))??;
        log.push_str(&format!("unpacked into {}\n", dir.join("code").display()));
        let remaining = || self.timeout.saturating_sub(started.elapsed());
        // The installs run code of the upload (`setup.py`, npm scripts): as the function's uid,
        // in its sandbox, with the work folder the only writable place besides a private home.
        let view = self.isolation.view();
        let sandboxed = Sandboxed { work: work.path(), creds, view: &view };
        sandboxed.own(true)?;
        match runtime {
            Runtime::Python311 if code.join("requirements.txt").exists() => {
                let deps = work.path().join("deps");
                let mut cmd = Command::new(&self.interpreters.python);
                cmd.args([
                    "-m",
                    "pip",
                    "install",
                    "--no-input",
                    "--disable-pip-version-check",
                    "--no-warn-script-location",
                    "--target",
                ])
                .arg(view.of(&deps))
                .args(["-r", "requirements.txt"])
                .current_dir(&code);
                if !self.run_step("pip install -r requirements.txt", cmd, &sandboxed, remaining(), log).await? {
                    return Ok(false);
                }
            }
            Runtime::Nodejs20 if code.join("package.json").exists() => {
                let npm = self.interpreters.node.with_file_name("npm");
                let npm = if npm.exists() { npm } else { PathBuf::from("npm") };
                let mut cmd = Command::new(npm);
                let (step, args): (&str, &[&str]) = if code.join("package-lock.json").exists() {
                    ("npm ci --omit=dev", &["ci", "--omit=dev", "--no-audit", "--no-fund"])
                } else {
                    ("npm install --omit=dev", &["install", "--omit=dev", "--no-audit", "--no-fund"])
                };
                cmd.args(args).current_dir(&code);
                if !self.run_step(step, cmd, &sandboxed, remaining(), log).await? {
                    return Ok(false);
                }
            }
            _ => {}
        }
        // Back to root: no function may change a build (builds are shared by SHA-256).
        sandboxed.own(false)?;
        std::fs::write(work.path().join(DONE_MARKER), b"").map_err(Error::io("marking the build done"))?;
        // Readable by the function's uid (a temp folder is made 0700).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(Error::io("opening the build folder to its function"))?;
        }
        let work = work.keep();
        if let Err(e) = std::fs::rename(&work, dir) {
            // Another build of the same bytes finished first: use it.
            let _ = std::fs::remove_dir_all(&work);
            if !dir.join(DONE_MARKER).exists() {
                return Err(Error::io(format!("moving the build to {}", dir.display()))(e));
            }
        }
        Ok(true)
    }

    /// Runs one build step with a clean environment and a time limit, in the sandbox of
    /// `sandboxed`, appending its output.
    async fn run_step(
        &self,
        name: &str,
        mut cmd: Command,
        sandboxed: &Sandboxed<'_>,
        limit: Duration,
        log: &mut String,
    ) -> Result<bool> {
        log.push_str(&format!("$ {name}\n"));
        let path = format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            self.interpreters.python.parent().map(|p| p.display().to_string()).unwrap_or_default(),
            self.interpreters.node.parent().map(|p| p.display().to_string()).unwrap_or_default()
        );
        std::fs::create_dir_all(self.cache_home).map_err(Error::io("creating the build cache"))?;
        // A home of its own per step (pip's and npm's caches): a cache shared between
        // functions would let one upload poison another's install.
        let home = tempfile::Builder::new()
            .prefix("home-")
            .tempdir_in(self.cache_home)
            .map_err(Error::io("creating a home for the build step"))?;
        if let Some(c) = sandboxed.creds.filter(|_| self.isolation.uids()) {
            std::os::unix::fs::chown(home.path(), Some(c.uid), Some(c.gid))
                .map_err(Error::io("giving the build step its home"))?;
        }
        let role = Role::Build { work: sandboxed.work, creds: sandboxed.creds };
        let cwd = cmd.as_std().get_current_dir().map(Path::to_path_buf).unwrap_or_else(|| sandboxed.work.to_path_buf());
        let jail = self.isolation.jail(&role, home.path(), &cwd).map_err(Error::io("preparing the build's sandbox"))?;
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", sandboxed.view.of(home.path()))
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        Isolation::install(cmd.as_std_mut(), jail);
        let child = self.isolation.spawn(&mut cmd).map_err(Error::io(format!("starting {name}")))?;
        // Known by its process group, so a server that dies mid-build leaves nothing running:
        // the next start kills what is registered here (`reap_orphan_builds`).
        let registered = child.id().map(|pid| RunningStep::register(self.builds, pid));
        let finished = tokio::time::timeout(limit, child.wait_with_output()).await;
        drop(registered);
        match finished {
            Ok(Ok(out)) => {
                log.push_str(&String::from_utf8_lossy(&out.stdout));
                log.push_str(&String::from_utf8_lossy(&out.stderr));
                if !out.status.success() {
                    log.push_str(&format!("error: {name} failed ({})\n", out.status));
                }
                Ok(out.status.success())
            }
            Ok(Err(e)) => Err(Error::io(format!("running {name}"))(e)),
            Err(_) => {
                log.push_str(&format!(
                    "error: {name} did not finish within the build time limit of {} s\n",
                    self.timeout.as_secs()
                ));
                Ok(false)
            }
        }
    }
}

/// A build's work folder and who its install steps run as.
struct Sandboxed<'a> {
    work: &'a Path,
    creds: Option<Creds>,
    view: &'a crate::sandbox::View,
}

impl Sandboxed<'_> {
    /// Gives the work folder, recursively, to the function's uid (`to_function`) or back to
    /// root; nothing to do when functions do not run as uids of their own.
    fn own(&self, to_function: bool) -> Result<()> {
        let Some(c) = self.creds else { return Ok(()) };
        let (uid, gid) = if to_function { (c.uid, c.gid) } else { (0, 0) };
        for entry in walkdir::WalkDir::new(self.work) {
            let entry = entry.map_err(|e| Error::Protocol(format!("walking the build folder: {e}")))?;
            std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid))
                .map_err(Error::io(format!("giving {} to uid {uid}", entry.path().display())))?;
        }
        Ok(())
    }
}

/// Where running build steps are registered: `<builds>/.running/<pid>` (the pid is also the
/// process group's id).
fn running_dir(builds: &Path) -> PathBuf {
    builds.join(".running")
}

/// A build step's registration, removed when it ends.
struct RunningStep(Option<PathBuf>);

impl RunningStep {
    fn register(builds: &Path, pid: u32) -> Self {
        let dir = running_dir(builds);
        let file = dir.join(pid.to_string());
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, b""));
        RunningStep(written.ok().map(|()| file))
    }
}

impl Drop for RunningStep {
    fn drop(&mut self) {
        if let Some(file) = self.0.take() {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// At start (the data folder's lock held, so no build of this folder runs): kills the process
/// groups of build steps a dead server left running — those whose working folder is still
/// under `builds` (a pid reused by another process is left alone) — and removes unfinished
/// build folders (`.tmp-*`). Returns how many groups were killed.
pub(crate) fn reap_orphan_builds(builds: &Path) -> usize {
    let mut killed = 0;
    let root = builds.canonicalize().unwrap_or_else(|_| builds.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(running_dir(builds)) {
        for entry in entries.flatten() {
            let pid = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok());
            let ours = pid.is_some_and(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&root))
            });
            if let (Some(pid), true) = (pid, ours)
                && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).is_ok()
            {
                killed += 1;
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }
    // `<builds>/<runtime>/.tmp-*`: a build that never finished.
    for runtime in std::fs::read_dir(builds).into_iter().flatten().flatten() {
        for dir in std::fs::read_dir(runtime.path()).into_iter().flatten().flatten() {
            if dir.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = std::fs::remove_dir_all(dir.path());
            }
        }
    }
    killed
}

fn failed(log: String) -> BuildOutcome {
    let message = tail(&log, 8, 1500);
    BuildOutcome { ok: false, log, message }
}

/// The last `lines` lines of `text`, at most `max_bytes` bytes.
pub(crate) fn tail(text: &str, lines: usize, max_bytes: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = all[all.len().saturating_sub(lines)..].join("\n");
    if out.len() > max_bytes {
        let mut cut = out.len() - max_bytes;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = format!("…{}", &out[cut..]);
    }
    out
}

/// The launch spec of a built version.
pub(crate) fn launch_spec(
    interpreters: &Interpreters,
    shims: &Shims,
    dir: &Path,
    target: &InvokeTarget,
    creds: Option<Creds>,
    view: crate::sandbox::View,
) -> LaunchSpec {
    let runtime = target.spec.runtime;
    let deps = dir.join("deps");
    LaunchSpec {
        runtime,
        interpreter: interpreters.for_runtime(runtime).to_path_buf(),
        shim: shims.for_runtime(runtime).to_path_buf(),
        code_dir: dir.join("code"),
        deps_dir: (runtime == Runtime::Python311 && deps.exists()).then_some(deps),
        build_dir: dir.to_path_buf(),
        creds,
        view,
        target: target.clone(),
    }
}

struct CheckOutput {
    output: String,
    error: Option<String>,
}

/// Loads the entrypoint once with `--check` (runtimes/PROTOCOL.md).
async fn check_entrypoint(
    spec: &LaunchSpec,
    tmp_root: &Path,
    isolation: &Isolation,
    limit: Duration,
) -> Result<CheckOutput> {
    std::fs::create_dir_all(tmp_root).map_err(Error::io("creating the build cache"))?;
    let tmp =
        tempfile::Builder::new().prefix("check-").tempdir_in(tmp_root).map_err(Error::io("creating a temp folder"))?;
    let mut cmd = spec.command(tmp.path());
    cmd.arg("--check");
    spec.sandbox(&mut cmd, isolation, tmp.path())?;
    let child = isolation.spawn(&mut cmd).map_err(Error::io(format!("starting {}", spec.interpreter.display())))?;
    let out = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(out) => out.map_err(Error::io("loading the entrypoint"))?,
        Err(_) => {
            return Ok(CheckOutput {
                output: String::new(),
                error: Some(format!("loading the entrypoint took longer than {} s", limit.as_secs())),
            });
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let output = format!("{stdout}{stderr}");
    if out.status.success() {
        return Ok(CheckOutput { output, error: None });
    }
    let parsed = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    let error = match parsed {
        Some(v) => format!(
            "{}: {}",
            v.get("errorType").and_then(|t| t.as_str()).unwrap_or("Runtime.Error"),
            v.get("errorMessage").and_then(|t| t.as_str()).unwrap_or_default()
        ),
        None => format!("the entrypoint could not be loaded: {}", tail(&output, 5, 1000)),
    };
    Ok(CheckOutput { output, error: Some(error) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines_within_bytes() {
        assert_eq!(tail("a\n\nb\nc\n", 2, 100), "b\nc");
        let long = "x".repeat(50);
        assert!(tail(&long, 1, 10).ends_with("xxxxxxxxxx"));
    }
}

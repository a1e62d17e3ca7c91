//! Memory limits for instances through Linux control groups.
//!
//! At start the supervisor looks for a memory controller it may write to:
//! - cgroup v2 (`/sys/fs/cgroup/cgroup.controllers` lists `memory`): a child group
//!   `sless-<pid>` of the server's own group with `memory.max`, `memory.swap.max` = 0, and
//!   `memory.events`' `oom_kill` telling that the limit killed a process;
//! - cgroup v1 (`/sys/fs/cgroup/memory`): a child group of the server's memory group with
//!   `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where swap accounting
//!   exists), and `memory.oom_control`'s `oom_kill` / `memory.failcnt` telling the same.
//!
//! Each instance gets its own group, made when it starts and removed when it ends. When
//! neither is writable (no root, no delegation) the server logs so once and only Node's heap
//! limit (`--max-old-space-size`) applies (see docs/writing-functions.md).

use std::path::{Path, PathBuf};

/// The memory controller found at start.
#[derive(Debug, Clone)]
pub(crate) enum Memory {
    /// cgroup v2, instances' groups under this folder.
    V2(PathBuf),
    /// cgroup v1, instances' groups under this folder.
    V1(PathBuf),
    /// None usable; why.
    Unavailable(String),
}

impl Memory {
    /// Finds a writable memory controller and makes the server's parent group for instances.
    pub(crate) fn detect() -> Memory {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let pid = std::process::id();
        let v2_root = Path::new("/sys/fs/cgroup");
        let v2 = std::fs::read_to_string(v2_root.join("cgroup.controllers")).unwrap_or_default();
        if v2.split_whitespace().any(|c| c == "memory") {
            let path = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/");
            let own_dir = v2_root.join(path.trim_start_matches('/'));
            let parent = own_dir.join(format!("sless-{pid}"));
            return match prepare_v2(&own_dir, &parent) {
                Ok(()) => {
                    Memory::remove_stale(&parent);
                    Memory::V2(parent)
                }
                Err(e) => Memory::Unavailable(format!("cgroup v2 at {} is not writable: {e}", own_dir.display())),
            };
        }
        let Some(path) = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "memory").then(|| path.to_string())
        }) else {
            return Memory::Unavailable("no memory cgroup controller is mounted".into());
        };
        let parent = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')).join(format!("sless-{pid}"));
        match std::fs::create_dir_all(&parent) {
            Ok(()) if parent.join("memory.limit_in_bytes").exists() => {
                Memory::remove_stale(&parent);
                Memory::V1(parent)
            }
            Ok(()) => Memory::Unavailable(format!("{} has no memory.limit_in_bytes", parent.display())),
            Err(e) => Memory::Unavailable(format!("cgroup v1 at {} is not writable: {e}", parent.display())),
        }
    }

    /// Removes groups left by servers that were killed (their pid no longer runs).
    fn remove_stale(parent: &Path) {
        let Some(siblings) = parent.parent() else { return };
        for entry in std::fs::read_dir(siblings).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix("sless-").and_then(|p| p.parse::<u32>().ok()) else { continue };
            if Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            for group in std::fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                if group.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(group.path());
                }
            }
            let _ = std::fs::remove_dir(entry.path());
        }
    }

    /// One line for the log: which mechanism limits memory.
    pub(crate) fn describe(&self) -> String {
        match self {
            Memory::V2(p) => format!("cgroup v2 ({})", p.display()),
            Memory::V1(p) => format!("cgroup v1 ({})", p.display()),
            Memory::Unavailable(why) => format!("none ({why}); only Node's heap limit applies"),
        }
    }

    /// Puts process `pid` in a new group limited to `limit_mb` MiB. `None` when memory is not
    /// limited here, or the group could not be made (logged).
    pub(crate) fn limit(&self, name: &str, pid: u32, limit_mb: u32) -> Option<InstanceGroup> {
        let bytes = (u64::from(limit_mb) * 1024 * 1024).to_string();
        let (dir, v2) = match self {
            Memory::V2(parent) => (parent.join(name), true),
            Memory::V1(parent) => (parent.join(name), false),
            Memory::Unavailable(_) => return None,
        };
        let made = (|| -> std::io::Result<()> {
            std::fs::create_dir(&dir)?;
            if v2 {
                std::fs::write(dir.join("memory.max"), &bytes)?;
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            } else {
                std::fs::write(dir.join("memory.limit_in_bytes"), &bytes)?;
                let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &bytes);
            }
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        })();
        match made {
            Ok(()) => Some(InstanceGroup { dir, v2, limit_mb }),
            Err(e) => {
                tracing::warn!(group = %dir.display(), error = %e, "cannot limit the instance's memory");
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Removes the server's groups (at shutdown, when every instance has ended; a group whose
    /// instance was dropped without waiting is removed here too).
    pub(crate) fn cleanup(&self) {
        if let Memory::V2(p) | Memory::V1(p) = self {
            for entry in std::fs::read_dir(p).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
            let _ = std::fs::remove_dir(p);
        }
    }
}

fn prepare_v2(own: &Path, parent: &Path) -> std::io::Result<()> {
    let enabled = std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
    if !enabled.split_whitespace().any(|c| c == "memory") {
        std::fs::write(own.join("cgroup.subtree_control"), "+memory")?;
    }
    std::fs::create_dir_all(parent)?;
    let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    if !enabled.split_whitespace().any(|c| c == "memory") {
        std::fs::write(parent.join("cgroup.subtree_control"), "+memory")?;
    }
    Ok(())
}

/// One instance's group; removed when dropped (after the process ended).
#[derive(Debug)]
pub(crate) struct InstanceGroup {
    dir: PathBuf,
    v2: bool,
    /// The limit set, in MiB.
    limit_mb: u32,
}

impl InstanceGroup {
    /// Changes the group's limit to `limit_mb` MiB (a warm-pool process, put in a group when it
    /// started, becomes a function's instance). Writing a limit is quick; moving a process
    /// into a group is what can take milliseconds. Errors: the controller refused the value
    /// (e.g. below what the process already uses).
    pub(crate) fn set_limit(&mut self, limit_mb: u32) -> std::io::Result<()> {
        if limit_mb == self.limit_mb {
            return Ok(());
        }
        let bytes = (u64::from(limit_mb) * 1024 * 1024).to_string();
        if self.v2 {
            std::fs::write(self.dir.join("memory.max"), &bytes)?;
        } else {
            // v1 keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every step.
            let (limit, memsw) = (self.dir.join("memory.limit_in_bytes"), self.dir.join("memory.memsw.limit_in_bytes"));
            if limit_mb > self.limit_mb {
                let _ = std::fs::write(&memsw, &bytes);
                std::fs::write(&limit, &bytes)?;
            } else {
                std::fs::write(&limit, &bytes)?;
                let _ = std::fs::write(&memsw, &bytes);
            }
        }
        self.limit_mb = limit_mb;
        Ok(())
    }

    /// Kills every process in the group: `cgroup.kill` on v2, then (both versions) SIGKILL to
    /// each pid of `cgroup.procs`, again until none is left or 20 rounds passed (a process
    /// forking meanwhile is caught by the next round). A function's
    /// processes cannot leave the group: its `cgroup.procs` files belong to root.
    pub(crate) fn kill_all(&self) {
        if self.v2 {
            // cgroup v2 (Linux 5.14+) kills the whole group at once.
            let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        }
        for _ in 0..20 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The most memory the group has used, in bytes: `memory.peak` (v2, Linux 5.19+) or
    /// `memory.max_usage_in_bytes` (v1).
    pub(crate) fn peak_bytes(&self) -> Option<u64> {
        let file = if self.v2 { "memory.peak" } else { "memory.max_usage_in_bytes" };
        std::fs::read_to_string(self.dir.join(file)).ok()?.trim().parse().ok()
    }

    /// Whether the memory limit killed a process of this group.
    pub(crate) fn oom_killed(&self) -> bool {
        let field = |file: &str, key: &str| -> u64 {
            std::fs::read_to_string(self.dir.join(file))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
                .unwrap_or(0)
        };
        if self.v2 {
            field("memory.events", "oom_kill ") > 0
        } else {
            field("memory.oom_control", "oom_kill ") > 0
                || std::fs::read_to_string(self.dir.join("memory.failcnt"))
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
                    > 0
        }
    }
}

impl Drop for InstanceGroup {
    fn drop(&mut self) {
        // Fails while a process is still inside; the parent is removed at shutdown anyway.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

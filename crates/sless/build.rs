//! Probes the build machine for a memory cgroup that `sless` could write to (the same
//! search as `crates/sless-local/src/cgroup.rs` `Memory::detect`, without leaving anything
//! behind) and, without one, sets `cfg(no_memory_cgroup)`: the integration tests that need
//! enforced memory limits are then `#[ignore]`d with the reason, shown as skipped in the test
//! output instead of passing without checking anything. `SLESS_TEST_NO_MEMORY_CGROUP=1`
//! sets the cfg regardless (to see the skips on a machine that has the cgroup).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=SLESS_TEST_NO_MEMORY_CGROUP");
    println!("cargo::rustc-check-cfg=cfg(no_memory_cgroup)");
    let forced = std::env::var_os("SLESS_TEST_NO_MEMORY_CGROUP").is_some_and(|v| v == "1");
    if let Err(why) = if forced { Err("SLESS_TEST_NO_MEMORY_CGROUP=1".to_string()) } else { probe() } {
        println!("cargo::rustc-cfg=no_memory_cgroup");
        println!("cargo::warning=no writable memory cgroup ({why}): the memory-limit tests are ignored");
    }
}

/// Whether a child group with a memory limit can be made here (v2 or v1).
fn probe() -> Result<(), String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let root = Path::new("/sys/fs/cgroup");
    let v2 = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if v2.split_whitespace().any(|c| c == "memory") {
        let path = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/");
        return try_child(&root.join(path.trim_start_matches('/')), "cgroup.procs");
    }
    let path = own
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "memory").then(|| path.to_string())
        })
        .ok_or("no memory cgroup controller is mounted")?;
    try_child(&root.join("memory").join(path.trim_start_matches('/')), "memory.limit_in_bytes")
}

/// Makes and removes a child group of `dir`, which must then have the file `expect`.
fn try_child(dir: &Path, expect: &str) -> Result<(), String> {
    let child: PathBuf = dir.join(format!("sless-build-probe-{}", std::process::id()));
    std::fs::create_dir(&child).map_err(|e| format!("{} is not writable: {e}", dir.display()))?;
    let usable = child.join(expect).exists();
    let _ = std::fs::remove_dir(&child);
    if usable { Ok(()) } else { Err(format!("{} has no {expect}", child.display())) }
}

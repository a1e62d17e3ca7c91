//! Function isolation on the local backend (docs/security.md, "Local backend: function
//! isolation"): what a runtime process may see and do, set up between `fork` and `execve`
//! the way bubblewrap and nsjail do it, with raw system calls (no helper program).
//!
//! For each process the supervisor prepares a [`Jail`] (everything computed and allocated
//! before the fork; what every process shares is planned once, at start) and spawns it with
//! [`Isolation::spawn`], which makes the child pid 1 of a pid namespace of its own
//! (docs/security.md, "PID namespaces"). [`Jail::apply`] then only makes system calls, as the
//! child of a multi-threaded program must:
//!
//! 1. a mount namespace of its own whose root is a fresh tmpfs holding only the system
//!    folders (read-only), the interpreter's installation, the runtime shims, the function's
//!    own build (read-only) and its temp folder (read-write), a private `/tmp`, a minimal
//!    `/dev` and a `/proc`, mounted from inside its pid namespace, that shows only the
//!    processes of that namespace and of its own uid (`hidepid=invisible`);
//! 2. `no_new_privs`;
//! 3. a Landlock domain of its own allowing reads (and execution) of those folders and writes
//!    to its temp folders only, and (ABI ≥ 6) no signals or abstract Unix sockets beyond it;
//! 4. the function's own uid and gid, supplementary groups cleared, and not dumpable: the
//!    kernel marks a process non-dumpable at `execve` when it cannot read the program or its
//!    ELF interpreter, and inside the mount namespace the dynamic loader (`ld.so`) is a copy
//!    only root can read (mode 0711), so every dynamically linked program a function runs,
//!    the interpreter first, is not dumpable (`execve` would otherwise make it dumpable again
//!    whatever `prctl(PR_SET_DUMPABLE)` said before);
//! 5. a seccomp filter that answers `EPERM` to the system calls a function never needs.
//!
//! What is available is found at start ([`Isolation::detect`]): each protection is tried on a
//! probe process and used only if it held there.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// A protection, by the name the start-up log and docs/security.md use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Protection {
    /// Each function's instances run as a uid and gid of their own (never root).
    UidPerFunction,
    /// Function processes are not dumpable (no `/proc/<pid>/mem`, no core dumps).
    NotDumpable,
    /// A mount namespace whose root holds only what the function needs.
    MountNamespace,
    /// `/proc` shows only the processes of the function's own uid.
    PrivateProc,
    /// Each process is the first (pid 1) of a pid namespace of its own: `/proc` and every
    /// system call taking a pid see only its own processes, and when it exits the kernel
    /// kills whatever it left in the namespace.
    PidNamespace,
    /// Landlock limits the files a function reads, writes and executes.
    Landlock,
    /// Landlock (ABI ≥ 6) stops signals and abstract Unix sockets leaving the function's domain.
    LandlockScopes,
    /// seccomp answers `EPERM` to the system calls of [`denied_syscalls`].
    Seccomp,
    /// `no_new_privs`: no set-uid program or file capability grants privileges.
    NoNewPrivileges,
    /// Stopping an instance kills every process in its cgroup.
    CgroupKill,
}

impl Protection {
    /// Every protection, in the order they are listed.
    pub(crate) const ALL: [Protection; 10] = [
        Protection::UidPerFunction,
        Protection::NotDumpable,
        Protection::MountNamespace,
        Protection::PrivateProc,
        Protection::PidNamespace,
        Protection::Landlock,
        Protection::LandlockScopes,
        Protection::Seccomp,
        Protection::NoNewPrivileges,
        Protection::CgroupKill,
    ];

    /// The protection's name in the start-up log and docs/security.md.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protection::UidPerFunction => "uid-per-function",
            Protection::NotDumpable => "not-dumpable",
            Protection::MountNamespace => "mount-namespace",
            Protection::PrivateProc => "private-proc",
            Protection::PidNamespace => "pid-namespace",
            Protection::Landlock => "landlock",
            Protection::LandlockScopes => "landlock-scopes",
            Protection::Seccomp => "seccomp",
            Protection::NoNewPrivileges => "no-new-privileges",
            Protection::CgroupKill => "cgroup-kill",
        }
    }
}

/// What the machine offers, as found at start (the inputs of [`Protections::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The server runs as root (effective uid 0).
    pub root: bool,
    /// The Landlock ABI version the kernel reports, if Landlock is enabled.
    pub landlock_abi: Option<u32>,
    /// seccomp filters can be installed, and this architecture's filter is known.
    pub seccomp: bool,
    /// Instances get a cgroup of their own (a writable memory controller).
    pub cgroups: bool,
}

/// The protections in force (or planned, before the probe confirms them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Protections {
    active: std::collections::BTreeSet<Protection>,
    /// The Landlock ABI used (0 when Landlock is off).
    pub landlock_abi: u32,
}

impl Protections {
    /// What to try on a machine with `facts`: uids, mount and pid namespaces and a private
    /// `/proc` need root; Landlock and seccomp (with `no_new_privs`) work for any user.
    pub(crate) fn plan(facts: Facts) -> Protections {
        let mut p = Protections::default();
        if facts.root {
            p.active.extend([
                Protection::UidPerFunction,
                Protection::NotDumpable,
                Protection::MountNamespace,
                Protection::PrivateProc,
                Protection::PidNamespace,
            ]);
        }
        if let Some(abi) = facts.landlock_abi.filter(|a| *a >= 1) {
            p.active.insert(Protection::Landlock);
            p.landlock_abi = abi;
            if abi >= 6 {
                p.active.insert(Protection::LandlockScopes);
            }
        }
        if facts.seccomp {
            p.active.insert(Protection::Seccomp);
        }
        p.active.insert(Protection::NoNewPrivileges);
        if facts.cgroups {
            p.active.insert(Protection::CgroupKill);
        }
        p
    }

    /// Whether `p` is in force.
    pub(crate) fn has(&self, p: Protection) -> bool {
        self.active.contains(&p)
    }

    /// Adds `p` and what comes with it (`not-dumpable` with uids, `private-proc` with the
    /// mount namespace, `landlock-scopes` with Landlock) as far as `planned` has them.
    pub(crate) fn add_from(&mut self, planned: &Protections, p: Protection) {
        let with: &[Protection] = match p {
            Protection::UidPerFunction => &[Protection::UidPerFunction, Protection::NotDumpable],
            Protection::MountNamespace => &[Protection::MountNamespace, Protection::PrivateProc],
            Protection::Landlock => &[Protection::Landlock, Protection::LandlockScopes],
            _ => std::slice::from_ref(&p),
        };
        for q in with {
            if planned.has(*q) {
                self.active.insert(*q);
            }
        }
        if p == Protection::Landlock {
            self.landlock_abi = planned.landlock_abi;
        }
    }

    /// Turns `p` off (the probe found it does not hold).
    pub(crate) fn remove(&mut self, p: Protection) {
        self.active.remove(&p);
        if p == Protection::Landlock {
            self.active.remove(&Protection::LandlockScopes);
            self.landlock_abi = 0;
        }
        if p == Protection::MountNamespace {
            // A pid namespace is seen through the `/proc` the mount namespace mounts.
            self.active.remove(&Protection::PrivateProc);
            self.active.remove(&Protection::PidNamespace);
        }
    }

    /// The names in force, comma-separated (`landlock` with its ABI).
    pub(crate) fn active_names(&self) -> String {
        let names: Vec<String> = Protection::ALL
            .iter()
            .filter(|p| self.has(**p))
            .map(|p| match p {
                Protection::Landlock => format!("landlock(abi {})", self.landlock_abi),
                other => other.name().to_string(),
            })
            .collect();
        if names.is_empty() { "none".into() } else { names.join(", ") }
    }

    /// The names not in force, comma-separated.
    pub(crate) fn missing_names(&self) -> String {
        let names: Vec<&str> = Protection::ALL.iter().filter(|p| !self.has(**p)).map(|p| p.name()).collect();
        if names.is_empty() { "none".into() } else { names.join(", ") }
    }
}

// ---------------------------------------------------------------------------------------------
// seccomp

/// The system calls a function never needs, answered `EPERM`: debugging and reading other
/// processes (`ptrace`, `process_vm_*`, `pidfd_getfd`, `pidfd_open`, `kcmp`), mounts and
/// namespaces, kernel keys, modules, `kexec`, `bpf`, `perf_event_open`, `userfaultfd`,
/// `io_uring` (whose operations seccomp cannot see), the clock, swap, reboot, quotas and file
/// handles. `clone` with a namespace flag is refused too, and `clone3` (whose flags seccomp
/// cannot read) is answered `ENOSYS`, which makes the C library fall back to `clone`.
pub(crate) fn denied_syscalls() -> Vec<(&'static str, libc::c_long)> {
    let mut list = vec![
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        ("pidfd_open", libc::SYS_pidfd_open),
        ("kcmp", libc::SYS_kcmp),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("chroot", libc::SYS_chroot),
        ("open_tree", libc::SYS_open_tree),
        ("move_mount", libc::SYS_move_mount),
        ("fsopen", libc::SYS_fsopen),
        ("fsconfig", libc::SYS_fsconfig),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("bpf", libc::SYS_bpf),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("reboot", libc::SYS_reboot),
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("acct", libc::SYS_acct),
        ("quotactl", libc::SYS_quotactl),
        ("quotactl_fd", libc::SYS_quotactl_fd),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("name_to_handle_at", libc::SYS_name_to_handle_at),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("clock_adjtime", libc::SYS_clock_adjtime),
        ("adjtimex", libc::SYS_adjtimex),
        ("syslog", libc::SYS_syslog),
        ("vhangup", libc::SYS_vhangup),
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([("iopl", libc::SYS_iopl), ("ioperm", libc::SYS_ioperm), ("uselib", libc::SYS_uselib)]);
    list
}

/// The `clone` flags that make namespaces (refused with `EPERM`).
const CLONE_NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The seccomp program (classic BPF over `struct seccomp_data`): another architecture's
/// calls (and x32's) are refused, the calls of [`denied_syscalls`] get `EPERM`, `clone3`
/// `ENOSYS`, `clone` with a namespace flag `EPERM`; everything else is allowed. `None` on an
/// architecture whose filter is not written here.
pub(crate) fn seccomp_program() -> Option<Vec<libc::sock_filter>> {
    let arch = AUDIT_ARCH?;
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let mut p = vec![
        // seccomp_data.arch (offset 4)
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, eperm),
        // seccomp_data.nr (offset 0)
        stmt(BPF_LD_W_ABS, 0),
    ];
    if cfg!(target_arch = "x86_64") {
        // x32 system calls have bit 30 set.
        p.extend([jump(BPF_JGE_K, 0x4000_0000, 0, 1), stmt(BPF_RET_K, eperm)]);
    }
    for (_, nr) in denied_syscalls() {
        p.extend([jump(BPF_JEQ_K, nr as u32, 0, 1), stmt(BPF_RET_K, eperm)]);
    }
    p.extend([jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1), stmt(BPF_RET_K, enosys)]);
    // clone: the flags are the first argument on both architectures (seccomp_data.args[0],
    // offset 16; its low 32 bits hold every namespace flag on little-endian machines).
    p.extend([
        jump(BPF_JEQ_K, libc::SYS_clone as u32, 0, 3),
        stmt(BPF_LD_W_ABS, 16),
        jump(BPF_JSET_K, CLONE_NAMESPACE_FLAGS, 0, 1),
        stmt(BPF_RET_K, eperm),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ]);
    Some(p)
}

/// Whether the kernel accepts seccomp filters (asked without installing one).
#[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
fn seccomp_available() -> bool {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL only reads the u32 it is given a pointer to.
    let r = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) };
    r == 0
}

// ---------------------------------------------------------------------------------------------
// Landlock (the kernel's ABI, include/uapi/linux/landlock.h)

const LL_EXECUTE: u64 = 1 << 0;
const LL_WRITE_FILE: u64 = 1 << 1;
const LL_READ_FILE: u64 = 1 << 2;
const LL_READ_DIR: u64 = 1 << 3;
const LL_REMOVE_DIR: u64 = 1 << 4;
const LL_REMOVE_FILE: u64 = 1 << 5;
const LL_MAKE_CHAR: u64 = 1 << 6;
const LL_MAKE_DIR: u64 = 1 << 7;
const LL_MAKE_REG: u64 = 1 << 8;
const LL_MAKE_SOCK: u64 = 1 << 9;
const LL_MAKE_FIFO: u64 = 1 << 10;
const LL_MAKE_BLOCK: u64 = 1 << 11;
const LL_MAKE_SYM: u64 = 1 << 12;
const LL_REFER: u64 = 1 << 13;
const LL_TRUNCATE: u64 = 1 << 14;
const LL_IOCTL_DEV: u64 = 1 << 15;
const LL_SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const LL_SCOPE_SIGNAL: u64 = 1 << 1;
const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1 << 0;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version of the running kernel, if Landlock is enabled.
#[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
fn landlock_abi() -> Option<u32> {
    // SAFETY: with a null attribute and size 0 and the VERSION flag the call reads nothing.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v >= 1)
}

/// The file-system accesses Landlock handles at `abi` (everything it knows: what a rule does
/// not grant is denied).
fn handled_fs(abi: u32) -> u64 {
    let mut all = LL_EXECUTE
        | LL_WRITE_FILE
        | LL_READ_FILE
        | LL_READ_DIR
        | LL_REMOVE_DIR
        | LL_REMOVE_FILE
        | LL_MAKE_CHAR
        | LL_MAKE_DIR
        | LL_MAKE_REG
        | LL_MAKE_SOCK
        | LL_MAKE_FIFO
        | LL_MAKE_BLOCK
        | LL_MAKE_SYM;
    if abi >= 2 {
        all |= LL_REFER;
    }
    if abi >= 3 {
        all |= LL_TRUNCATE;
    }
    if abi >= 5 {
        all |= LL_IOCTL_DEV;
    }
    all
}

/// What a rule grants beneath a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read files and list folders.
    Read,
    /// Read and execute.
    ReadExec,
    /// Everything but device nodes: a temp folder.
    ReadWrite,
    /// Read and write existing files, their ioctls: `/dev`.
    Devices,
}

impl Access {
    fn bits(self, abi: u32) -> u64 {
        let bits = match self {
            Access::Read => LL_READ_FILE | LL_READ_DIR,
            Access::ReadExec => LL_READ_FILE | LL_READ_DIR | LL_EXECUTE,
            Access::ReadWrite => {
                LL_EXECUTE
                    | LL_WRITE_FILE
                    | LL_READ_FILE
                    | LL_READ_DIR
                    | LL_REMOVE_DIR
                    | LL_REMOVE_FILE
                    | LL_MAKE_DIR
                    | LL_MAKE_REG
                    | LL_MAKE_SOCK
                    | LL_MAKE_FIFO
                    | LL_MAKE_SYM
                    | LL_REFER
                    | LL_TRUNCATE
            }
            Access::Devices => LL_READ_FILE | LL_WRITE_FILE | LL_READ_DIR | LL_TRUNCATE | LL_IOCTL_DEV,
        };
        bits & handled_fs(abi)
    }
}

// ---------------------------------------------------------------------------------------------
// The plan of a process's file system

/// One entry of a sandbox's file system, at `dst` (an absolute path inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `src` of the host, bound at `dst`.
    Bind { src: PathBuf, dst: PathBuf, writable: bool, device: bool },
    /// A fresh tmpfs (`mode`, `size` in MiB).
    Tmpfs { dst: PathBuf, mode: u32, size_mb: u32 },
    /// A new `proc` showing only the processes of the caller's uid.
    Proc { dst: PathBuf },
    /// A symbolic link at `dst` to `target`.
    Symlink { dst: PathBuf, target: PathBuf },
}

impl Entry {
    fn dst(&self) -> &Path {
        match self {
            Entry::Bind { dst, .. } | Entry::Tmpfs { dst, .. } | Entry::Proc { dst } | Entry::Symlink { dst, .. } => {
                dst
            }
        }
    }
}

/// One system call of [`Jail::apply`].
#[derive(Debug)]
enum Op {
    Mkdir(CString),
    Touch(CString),
    Mount { src: Option<CString>, dst: CString, fstype: Option<CString>, flags: libc::c_ulong, data: Option<CString> },
    Symlink { target: CString, link: CString },
}

fn cstr(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::other(format!("a NUL byte in {}", p.display())))
}

/// `dst` (absolute, inside the sandbox) under the host folder `root`.
fn under(root: &Path, dst: &Path) -> PathBuf {
    let mut p = root.to_path_buf();
    for c in dst.components() {
        if let Component::Normal(n) = c {
            p.push(n);
        }
    }
    p
}

/// The system calls that build `entries` under `root` (the new root's mount point on the
/// host): parents before children, each missing folder made on the way.
#[cfg(test)]
fn mount_ops(root: &Path, entries: &[Entry]) -> std::io::Result<Vec<Op>> {
    let none = std::collections::HashSet::new();
    mount_ops_after(root, entries, &mut Made { before: &none, now: Default::default() })
}

/// The sandbox paths made so far: by the entries planned earlier (`before`), and `now`.
struct Made<'a> {
    before: &'a std::collections::HashSet<PathBuf>,
    now: std::collections::HashSet<PathBuf>,
}

impl Made<'_> {
    /// Records `p`; false if it was made already.
    fn insert(&mut self, p: PathBuf) -> bool {
        !self.before.contains(&p) && self.now.insert(p)
    }
}

/// [`mount_ops`] for entries made after others, whose paths are in `made` (which it extends).
/// None of `entries` may be a parent of an earlier entry.
fn mount_ops_after(root: &Path, entries: &[Entry], made: &mut Made<'_>) -> std::io::Result<Vec<Op>> {
    let mut entries: Vec<&Entry> = entries.iter().collect();
    // Parents first: comparing paths component by component puts `/tmp` before `/tmp/x`.
    entries.sort_by(|a, b| a.dst().cmp(b.dst()));
    let mut ops = Vec::new();
    let nosuid = libc::MS_NOSUID;
    for e in entries {
        let dst = e.dst();
        let mut at = PathBuf::from("/");
        for c in dst.parent().map(|p| p.components().collect::<Vec<_>>()).unwrap_or_default() {
            if let Component::Normal(n) = c {
                at.push(n);
                if made.insert(at.clone()) {
                    ops.push(Op::Mkdir(cstr(&under(root, &at))?));
                }
            }
        }
        let target = cstr(&under(root, dst))?;
        match e {
            Entry::Bind { src, writable, device, .. } => {
                let is_dir = src.is_dir();
                if made.insert(dst.to_path_buf()) {
                    ops.push(if is_dir { Op::Mkdir(target.clone()) } else { Op::Touch(target.clone()) });
                }
                ops.push(Op::Mount {
                    src: Some(cstr(src)?),
                    dst: target.clone(),
                    fstype: None,
                    flags: libc::MS_BIND | libc::MS_REC,
                    data: None,
                });
                let mut flags = libc::MS_BIND | libc::MS_REMOUNT | nosuid;
                if !writable {
                    flags |= libc::MS_RDONLY;
                }
                if !device {
                    flags |= libc::MS_NODEV;
                }
                ops.push(Op::Mount { src: None, dst: target, fstype: None, flags, data: None });
            }
            Entry::Tmpfs { mode, size_mb, .. } => {
                if made.insert(dst.to_path_buf()) {
                    ops.push(Op::Mkdir(target.clone()));
                }
                ops.push(Op::Mount {
                    src: Some(c"tmpfs".to_owned()),
                    dst: target,
                    fstype: Some(c"tmpfs".to_owned()),
                    flags: nosuid | libc::MS_NODEV,
                    data: Some(CString::new(format!("mode={mode:o},size={size_mb}m")).map_err(std::io::Error::other)?),
                });
            }
            Entry::Proc { .. } => {
                if made.insert(dst.to_path_buf()) {
                    ops.push(Op::Mkdir(target.clone()));
                }
                ops.push(Op::Mount {
                    src: Some(c"proc".to_owned()),
                    dst: target,
                    fstype: Some(c"proc".to_owned()),
                    flags: nosuid | libc::MS_NODEV | libc::MS_NOEXEC,
                    data: Some(c"hidepid=invisible".to_owned()),
                });
            }
            Entry::Symlink { target: to, .. } => {
                made.insert(dst.to_path_buf());
                ops.push(Op::Symlink { target: cstr(to)?, link: target });
            }
        }
    }
    Ok(ops)
}

/// Credentials a process takes before `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Creds {
    /// The function's uid (real, effective and saved).
    pub uid: u32,
    /// The function's gid (real, effective and saved).
    pub gid: u32,
}

/// The new root's mount point on the host and the mounts under it: those every sandbox has
/// (planned once, at start), then this process's own (its build, its temp folder, the loader).
#[derive(Debug)]
struct Mounts {
    root: std::sync::Arc<CString>,
    shared: std::sync::Arc<[Op]>,
    own: Vec<Op>,
}

impl Mounts {
    /// Every mount operation, in order.
    fn ops(&self) -> impl Iterator<Item = &Op> {
        self.shared.iter().chain(self.own.iter())
    }
}

/// (path, access) Landlock rules: those every sandbox has (made once, at start), then this
/// process's own, with the ABI.
#[derive(Debug)]
struct LandlockRules {
    abi: u32,
    shared: std::sync::Arc<[(CString, u64)]>,
    own: Vec<(CString, u64)>,
}

/// Everything a child does between `fork` and `execve`, prepared before the fork.
#[derive(Debug)]
pub(crate) struct Jail {
    mounts: Option<Mounts>,
    /// The working folder (inside the new root).
    cwd: CString,
    landlock: Option<LandlockRules>,
    creds: Option<Creds>,
    seccomp: Option<std::sync::Arc<[libc::sock_filter]>>,
}

/// The result of a raw call: `Err` with `errno` when it returned -1.
fn check(r: libc::c_long) -> std::io::Result<libc::c_long> {
    if r == -1 { Err(std::io::Error::last_os_error()) } else { Ok(r) }
}

fn ptr(c: &Option<CString>) -> *const libc::c_char {
    c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// Most processes and threads one function's uid may run at once, over all its instances
/// (`RLIMIT_NPROC`).
pub(crate) const MAX_TASKS_PER_UID: libc::rlim_t = 4096;

impl Jail {
    /// Applies the jail to the calling process. Meant for the child between `fork` and
    /// `execve`: it only makes system calls (no allocation, no lock). Errors: the first call
    /// that failed (the spawn then fails with it).
    #[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        // SAFETY (every block below): raw system calls given pointers to NUL-terminated
        // strings and structures owned by `self`, alive for the whole call.
        if let Some(mounts) = &self.mounts {
            let root = &mounts.root;
            // An IPC namespace too: System V shared memory and message queues are per instance
            // (and freed with it), not the machine's.
            check(unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC) }.into())?;
            check(
                unsafe {
                    libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    )
                }
                .into(),
            )?;
            check(
                unsafe {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        root.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        c"mode=0755,size=4m".as_ptr().cast(),
                    )
                }
                .into(),
            )?;
            for op in mounts.ops() {
                match op {
                    Op::Mkdir(p) => {
                        if unsafe { libc::mkdir(p.as_ptr(), 0o755) } == -1 {
                            let e = std::io::Error::last_os_error();
                            if e.raw_os_error() != Some(libc::EEXIST) {
                                return Err(e);
                            }
                        }
                    }
                    Op::Touch(p) => {
                        let fd = check(
                            unsafe { libc::open(p.as_ptr(), libc::O_CREAT | libc::O_RDONLY | libc::O_CLOEXEC, 0o644) }
                                .into(),
                        )?;
                        unsafe { libc::close(fd as libc::c_int) };
                    }
                    Op::Mount { src, dst, fstype, flags, data } => {
                        check(
                            unsafe { libc::mount(ptr(src), dst.as_ptr(), ptr(fstype), *flags, ptr(data).cast()) }
                                .into(),
                        )?;
                    }
                    Op::Symlink { target, link } => {
                        check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) }.into())?;
                    }
                }
            }
            // pivot_root(".", ".") stacks the old root under the new one; detaching it
            // leaves only the new root.
            check(unsafe { libc::chdir(root.as_ptr()) }.into())?;
            check(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) })?;
            check(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) }.into())?;
            check(
                unsafe {
                    libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                        std::ptr::null(),
                    )
                }
                .into(),
            )?;
        }
        check(unsafe { libc::chdir(self.cwd.as_ptr()) }.into())?;
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        if let Some(LandlockRules { abi, shared, own }) = &self.landlock {
            let attr = RulesetAttr {
                handled_access_fs: handled_fs(*abi),
                handled_access_net: 0,
                scoped: if *abi >= 6 { LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL } else { 0 },
            };
            let size: usize = if *abi >= 6 { 24 } else { 8 };
            let ruleset = check(unsafe {
                libc::syscall(libc::SYS_landlock_create_ruleset, &attr as *const RulesetAttr, size, 0u32)
            })? as libc::c_int;
            for (path, access) in shared.iter().chain(own.iter()) {
                let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
                if fd == -1 {
                    continue; // absent here: nothing to allow
                }
                let rule = PathBeneathAttr { allowed_access: *access, parent_fd: fd };
                let added = unsafe {
                    libc::syscall(
                        libc::SYS_landlock_add_rule,
                        ruleset,
                        LANDLOCK_RULE_PATH_BENEATH,
                        &rule as *const PathBeneathAttr,
                        0u32,
                    )
                };
                let err = std::io::Error::last_os_error();
                unsafe { libc::close(fd) };
                // A file (not a folder) takes only file rights: EINVAL is a rule not needed.
                if added == -1 && err.raw_os_error() != Some(libc::EINVAL) {
                    return Err(err);
                }
            }
            check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) })?;
            unsafe { libc::close(ruleset) };
        }
        // At most MAX_TASKS_PER_UID processes and threads per function uid (counted by the
        // kernel per real uid, at each fork and thread start; root, before a pool process
        // drops to its function's uid, is not held to it): a fork or thread bomb cannot take
        // every pid of the machine.
        let tasks = libc::rlimit { rlim_cur: MAX_TASKS_PER_UID, rlim_max: MAX_TASKS_PER_UID };
        check(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &tasks) }.into())?;
        if let Some(c) = self.creds {
            check(unsafe { libc::setgroups(0, std::ptr::null()) }.into())?;
            check(unsafe { libc::setresgid(c.gid, c.gid, c.gid) }.into())?;
            check(unsafe { libc::setresuid(c.uid, c.uid, c.uid) }.into())?;
        }
        if let Some(filter) = &self.seccomp {
            let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
            check(unsafe {
                libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0u32, &prog as *const libc::sock_fprog)
            })?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The executor's isolation settings

/// Where the data folder appears inside a mount namespace: `/sless`, apart from every other
/// folder of the sandbox. (At its host path, a data folder under `/tmp` would sit inside the
/// sandbox's `/tmp`, and a Landlock rule for that `/tmp` would cover it.)
pub(crate) const SANDBOX_DATA_DIR: &str = "/sless";

/// Maps host paths in the data folder to where a sandboxed process sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// The data folder on the host.
    data: PathBuf,
    /// Where it is seen (`None`: at the same path, no mount namespace).
    seen_at: Option<PathBuf>,
}

impl View {
    /// Where the process sees `host`: unchanged outside the data folder and for the shims
    /// (`<data>/runtimes`, read-only and nobody's secret, at their host path so that a process
    /// list shows which data folder a function process belongs to).
    pub(crate) fn of(&self, host: &Path) -> PathBuf {
        match (&self.seen_at, host.strip_prefix(&self.data)) {
            (_, Ok(rel)) if rel.starts_with("runtimes") => host.to_path_buf(),
            (Some(at), Ok(rel)) => at.join(rel),
            _ => host.to_path_buf(),
        }
    }
}

/// What a process is sandboxed for.
#[derive(Debug, Clone)]
pub(crate) enum Role<'a> {
    /// An instance (or the build's entrypoint check) of a function: its own build folder.
    Function { build: &'a Path, creds: Option<Creds> },
    /// A warm-pool process: every build, read-only (it learns its function later and drops
    /// to its uid then, see `runtimes/PROTOCOL.md`, "Warm pool").
    Pool,
    /// A dependency install (`pip`, `npm`) of a build: the build's work folder, writable,
    /// as the function's uid. The install runs code of the upload (`setup.py`, npm scripts),
    /// so it is held like the function itself.
    Build { work: &'a Path, creds: Option<Creds> },
}

/// The protections in force and the paths every sandbox is made of.
#[derive(Debug, Clone)]
pub(crate) struct Isolation {
    /// What is in force.
    pub protections: Protections,
    /// The data folder on the host.
    data_dir: PathBuf,
    /// The empty host folder each mount namespace mounts its new root on.
    new_root: PathBuf,
    /// System folders and links (`/usr`, `/etc`, `/bin` → `usr/bin`, …) and the interpreters'
    /// installations outside them.
    system: Vec<Entry>,
    /// Read-and-execute paths outside the mount namespace (Landlock rules).
    readable: Vec<PathBuf>,
    /// The shims' folder.
    runtimes: PathBuf,
    /// Every build.
    builds: PathBuf,
    /// The dynamic loader (its real path) and the copy only root can read that is bound over
    /// it in each mount namespace (see the module's documentation, 4.).
    loader: Option<(PathBuf, PathBuf)>,
    /// The seccomp program, made once (docs/security.md, "The protections").
    seccomp: Option<std::sync::Arc<[libc::sock_filter]>>,
    /// What every sandbox's jail shares, planned once at start; why not, if it could not be.
    shared: std::sync::Arc<std::result::Result<SharedPlan, String>>,
    /// The server's own pid namespace (`/proc/self/ns/pid`), when each sandboxed process gets a
    /// pid namespace of its own: a thread that made one for its next child comes back to it.
    own_pid_namespace: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

/// The new root, the mounts every sandbox has, and the sandbox paths they make.
#[derive(Debug)]
struct SharedMounts {
    root: std::sync::Arc<CString>,
    ops: std::sync::Arc<[Op]>,
    made: std::collections::HashSet<PathBuf>,
}

/// The parts of a jail that are the same for every process, planned once at start rather
/// than at each spawn (the system folders' mounts, with the `stat` of each source, and most
/// Landlock rules).
#[derive(Debug)]
struct SharedPlan {
    mounts: Option<SharedMounts>,
    /// The Landlock rules every sandbox has.
    landlock: Option<std::sync::Arc<[(CString, u64)]>>,
}

/// While it lives, the calling thread's next child is the first process (pid 1) of a new pid
/// namespace; dropped, the thread's children are made in the server's own pid namespace again
/// (docs/security.md, "PID namespaces").
struct NewPidNamespaceForNextChild<'a> {
    own: &'a std::os::fd::OwnedFd,
}

impl Drop for NewPidNamespaceForNextChild<'_> {
    #[allow(unsafe_code)] // A raw system call on a descriptor this guard borrows.
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: setns takes a descriptor (of the server's own pid namespace, open while the
        // guard lives) and a flag; it only changes the calling thread's namespace for children.
        if unsafe { libc::setns(self.own.as_raw_fd(), libc::CLONE_NEWPID) } == -1 {
            // The thread's next sandboxed spawn then fails (unshare answers EINVAL): it never
            // shares a namespace with this child.
            tracing::error!(error = %std::io::Error::last_os_error(), "cannot return to the server's pid namespace");
        }
    }
}

/// The dynamic loader of this architecture's programs, as their ELF headers name it.
#[cfg(target_arch = "x86_64")]
const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
#[cfg(target_arch = "aarch64")]
const LOADER: &str = "/lib/ld-linux-aarch64.so.1";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const LOADER: &str = "";

/// Whether `copy` is the 0711 copy of the loader at `real` (same size and modification time).
fn loader_copy_is_fresh(real: &Path, copy: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(real), std::fs::metadata(copy)) {
        (Ok(r), Ok(c)) => c.len() == r.len() && c.mtime() == r.mtime() && c.mode() & 0o777 == 0o711,
        _ => false,
    }
}

/// Copies the dynamic loader to `copy` with mode 0711 (executable, readable by root only), if
/// the copy is missing or differs in size or modification time. Returns the loader's real
/// path (the one to bind over).
fn unreadable_loader(copy: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let real = std::fs::canonicalize(LOADER)?;
    let meta = std::fs::metadata(&real)?;
    let current = std::fs::metadata(copy).ok();
    let fresh =
        current.is_some_and(|c| c.len() == meta.len() && c.mtime() == meta.mtime() && c.mode() & 0o777 == 0o711);
    if !fresh {
        // A name of this copy's own: two spawns may refresh it at once.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let tmp = copy.with_extension(format!("tmp-{}-{nanos}", std::process::id()));
        std::fs::copy(&real, &tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o711))?;
        let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(meta.mtime().max(0) as u64);
        std::fs::File::options().write(true).open(&tmp)?.set_modified(mtime)?;
        std::fs::rename(&tmp, copy)?;
    }
    Ok(real)
}

/// Size of a sandbox's private `/tmp`, in MiB (a tmpfs: what is written there counts against
/// the instance's memory cgroup).
const TMP_SIZE_MB: u32 = 512;

impl Isolation {
    /// Finds what this machine offers (`facts`), prepares the shared parts and checks each
    /// protection on a probe process run with `python` (see [`Isolation::probe`]); a
    /// protection that does not hold there is turned off and logged.
    #[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
    pub(crate) fn detect(
        data_dir: &Path,
        interpreters: &[&Path],
        cgroups: bool,
        python: &Path,
        probe_uid: Option<u32>,
    ) -> Isolation {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let facts =
            Facts { root, landlock_abi: landlock_abi(), seccomp: AUDIT_ARCH.is_some() && seccomp_available(), cgroups };
        let planned = Protections::plan(facts);
        // Each layer is checked on its own, in this order (a uid can reach an interpreter
        // under /root only inside the mount namespace): one that fails on the probe is off.
        let layers = [
            Protection::MountNamespace,
            Protection::PidNamespace,
            Protection::UidPerFunction,
            Protection::Landlock,
            Protection::Seccomp,
        ];
        let mut current = planned.clone();
        for p in layers {
            current.remove(p);
        }
        current.remove(Protection::NotDumpable);
        let mut iso = Isolation::new(data_dir, interpreters, current.clone());
        if let Err(why) = std::fs::create_dir_all(&iso.new_root) {
            tracing::warn!(error = %why, "cannot make the sandboxes' mount point");
        }
        for p in layers {
            // A pid namespace is only seen through the `/proc` a mount namespace mounts.
            if !planned.has(p) || (p == Protection::PidNamespace && !current.has(Protection::MountNamespace)) {
                continue;
            }
            let mut trial = current.clone();
            trial.add_from(&planned, p);
            let candidate = Isolation::new(data_dir, interpreters, trial.clone());
            match candidate.probe(python, probe_uid) {
                Ok(()) => {
                    current = trial;
                    iso = candidate;
                }
                Err(why) => {
                    let unreachable: Vec<String> = interpreters
                        .iter()
                        .filter(|i| {
                            p == Protection::UidPerFunction
                                && !current.has(Protection::MountNamespace)
                                && !reachable_by_others(i, mode_of)
                        })
                        .map(|i| i.display().to_string())
                        .collect();
                    if unreachable.is_empty() {
                        tracing::warn!(protection = p.name(), error = %why, "a protection failed on the probe process; it is off");
                    } else {
                        tracing::warn!(
                            protection = p.name(),
                            error = %why,
                            interpreters = %unreachable.join(", "),
                            "a function's uid cannot reach these interpreters (a folder above them is private, e.g. \
                             /root); functions run as the server's user. Install the interpreter outside such a \
                             folder or pass --python/--node"
                        );
                    }
                }
            }
        }
        iso
    }

    /// The settings for `protections` (no probe).
    pub(crate) fn new(data_dir: &Path, interpreters: &[&Path], protections: Protections) -> Isolation {
        let mut system = Vec::new();
        let mut readable = Vec::new();
        for dir in ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"] {
            let path = Path::new(dir);
            match std::fs::read_link(path) {
                Ok(target) => system.push(Entry::Symlink { dst: path.into(), target }),
                Err(_) if path.is_dir() => {
                    system.push(Entry::Bind { src: path.into(), dst: path.into(), writable: false, device: false })
                }
                Err(_) => continue,
            }
            readable.push(path.to_path_buf());
        }
        // An interpreter installed elsewhere (pyenv under /root, nvm under a home): its
        // installation (the folder above its `bin`), read-only, at the same path.
        for interp in interpreters {
            let Some(prefix) = interp.parent().and_then(Path::parent) else { continue };
            if prefix == Path::new("/") || readable.iter().any(|r| prefix.starts_with(r)) {
                continue;
            }
            system.push(Entry::Bind { src: prefix.into(), dst: prefix.into(), writable: false, device: false });
            readable.push(prefix.to_path_buf());
        }
        let runtimes = data_dir.join("runtimes");
        let loader = if protections.has(Protection::MountNamespace) && protections.has(Protection::NotDumpable) {
            let copy = runtimes.join("ld.so");
            match std::fs::create_dir_all(&runtimes).and_then(|()| unreadable_loader(&copy)) {
                Ok(real) => Some((real, copy)),
                Err(e) => {
                    tracing::warn!(loader = LOADER, error = %e, "cannot copy the dynamic loader; functions stay dumpable");
                    None
                }
            }
        } else {
            None
        };
        let own_pid_namespace = if protections.has(Protection::PidNamespace) {
            match std::fs::File::open("/proc/self/ns/pid") {
                Ok(f) => Some(std::sync::Arc::new(std::os::fd::OwnedFd::from(f))),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open the server's pid namespace; no pid namespaces");
                    None
                }
            }
        } else {
            None
        };
        let mut protections = protections;
        if own_pid_namespace.is_none() {
            protections.remove(Protection::PidNamespace);
        }
        let mut iso = Isolation {
            data_dir: data_dir.to_path_buf(),
            own_pid_namespace,
            loader,
            seccomp: protections.has(Protection::Seccomp).then(seccomp_program).flatten().map(Into::into),
            shared: std::sync::Arc::new(Err(String::new())),
            protections,
            new_root: data_dir.join("tmp").join(".sandbox-root"),
            system,
            readable,
            runtimes,
            builds: data_dir.join("builds"),
        };
        iso.shared = std::sync::Arc::new(iso.plan_shared().map_err(|e| e.to_string()));
        iso
    }

    /// What every jail shares (see [`SharedPlan`]). Errors: a path holds a NUL byte.
    fn plan_shared(&self) -> std::io::Result<SharedPlan> {
        let mounts = if self.protections.has(Protection::MountNamespace) {
            let view = self.view();
            let mut entries = self.system.clone();
            entries.push(Entry::Bind {
                src: self.runtimes.clone(),
                dst: view.of(&self.runtimes),
                writable: false,
                device: false,
            });
            entries.push(Entry::Tmpfs { dst: "/tmp".into(), mode: 0o1777, size_mb: TMP_SIZE_MB });
            entries.push(Entry::Tmpfs { dst: "/dev".into(), mode: 0o755, size_mb: 1 });
            for dev in ["null", "zero", "full", "random", "urandom"] {
                let path = Path::new("/dev").join(dev);
                entries.push(Entry::Bind { src: path.clone(), dst: path, writable: true, device: true });
            }
            entries.push(Entry::Tmpfs { dst: "/dev/shm".into(), mode: 0o1777, size_mb: 64 });
            for (name, target) in [
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
            ] {
                entries.push(Entry::Symlink { dst: Path::new("/dev").join(name), target: target.into() });
            }
            entries.push(Entry::Proc { dst: "/proc".into() });
            let none = std::collections::HashSet::new();
            let mut made = Made { before: &none, now: Default::default() };
            let ops = mount_ops_after(&self.new_root, &entries, &mut made)?;
            Some(SharedMounts { root: std::sync::Arc::new(cstr(&self.new_root)?), ops: ops.into(), made: made.now })
        } else {
            None
        };
        let landlock = match self.landlock_shared_rules() {
            Some(rules) => Some(
                rules.iter().map(|(path, bits)| Ok((cstr(path)?, *bits))).collect::<std::io::Result<Vec<_>>>()?.into(),
            ),
            None => None,
        };
        Ok(SharedPlan { mounts, landlock })
    }

    /// Where sandboxed processes see the data folder's paths.
    pub(crate) fn view(&self) -> View {
        let seen_at = self.protections.has(Protection::MountNamespace).then(|| PathBuf::from(SANDBOX_DATA_DIR));
        View { data: self.data_dir.clone(), seen_at }
    }

    /// What differs for warm-pool processes (the start-up line's `warm_pool` field, in the
    /// words of docs/security.md, "The warm pool").
    pub(crate) fn pool_caveats(&self) -> String {
        let p = &self.protections;
        let mut said = Vec::new();
        if p.has(Protection::MountNamespace) {
            said.push("every build is mounted read-only until specialised");
        }
        if p.has(Protection::UidPerFunction) {
            said.push("root in the sandbox until specialised, then the function's uid");
        }
        if p.has(Protection::Landlock) {
            said.push("python narrows Landlock to its own build at load, node does not");
        }
        if said.is_empty() { "the same sandbox as instances".into() } else { said.join("; ") }
    }

    /// Whether instances run as their function's uid.
    pub(crate) fn uids(&self) -> bool {
        self.protections.has(Protection::UidPerFunction)
    }

    /// The jail of a process of `role` with the temp folder `tmp` (its `TMPDIR`) working in
    /// `cwd`. Errors: a path holds a NUL byte.
    pub(crate) fn jail(&self, role: &Role<'_>, tmp: &Path, cwd: &Path) -> std::io::Result<Jail> {
        let p = &self.protections;
        let (code, creds, writable) = match role {
            Role::Function { build, creds } => (build.to_path_buf(), creds.filter(|_| self.uids()), false),
            Role::Pool => (self.builds.clone(), None, false),
            Role::Build { work, creds } => (work.to_path_buf(), creds.filter(|_| self.uids()), true),
        };
        let shared = self.shared.as_ref().as_ref().map_err(|e| std::io::Error::other(e.clone()))?;
        let view = self.view();
        // This process's own mounts after the shared ones (none of them is above a shared one:
        // they are under /sless, and the loader is a file).
        let mounts = match &shared.mounts {
            Some(SharedMounts { root, ops, made }) => {
                let mut entries = vec![
                    Entry::Bind { src: code.clone(), dst: view.of(&code), writable, device: false },
                    Entry::Bind { src: tmp.into(), dst: view.of(tmp), writable: true, device: false },
                ];
                if let Some((real, copy)) = &self.loader {
                    // Copied again if the loader changed since (a C library upgrade).
                    let real = if loader_copy_is_fresh(real, copy) {
                        real.clone()
                    } else {
                        unreadable_loader(copy).unwrap_or_else(|_| real.clone())
                    };
                    entries.push(Entry::Bind { src: copy.clone(), dst: real, writable: false, device: false });
                }
                let own =
                    mount_ops_after(&self.new_root, &entries, &mut Made { before: made, now: Default::default() })?;
                Some(Mounts { root: root.clone(), shared: ops.clone(), own })
            }
            None => None,
        };
        let landlock = match &shared.landlock {
            Some(rules) => {
                let own = self
                    .landlock_own_rules(&view.of(&code), &view.of(tmp), writable)
                    .iter()
                    .map(|(path, bits)| Ok((cstr(path)?, *bits)))
                    .collect::<std::io::Result<_>>()?;
                Some(LandlockRules { abi: p.landlock_abi, shared: rules.clone(), own })
            }
            None => None,
        };
        Ok(Jail { mounts, cwd: cstr(&view.of(cwd))?, landlock, creds, seccomp: self.seccomp.clone() })
    }

    /// The Landlock rules (path, access bits) of a process reading `code` with the temp folder
    /// `tmp` (both as the process sees them); `None` when Landlock is off.
    fn landlock_rules(&self, code: &Path, tmp: &Path, code_writable: bool) -> Option<Vec<(PathBuf, u64)>> {
        let mut rules = self.landlock_shared_rules()?;
        rules.extend(self.landlock_own_rules(code, tmp, code_writable));
        Some(rules)
    }

    /// The Landlock rules of a process reading `code` with the temp folder `tmp` that are its
    /// own (the others are [`Isolation::landlock_shared_rules`]).
    fn landlock_own_rules(&self, code: &Path, tmp: &Path, code_writable: bool) -> Vec<(PathBuf, u64)> {
        let abi = self.protections.landlock_abi;
        let code_access = if code_writable { Access::ReadWrite } else { Access::ReadExec };
        vec![(code.to_path_buf(), code_access.bits(abi)), (tmp.to_path_buf(), Access::ReadWrite.bits(abi))]
    }

    /// The Landlock rules every process has; `None` when Landlock is off.
    fn landlock_shared_rules(&self) -> Option<Vec<(PathBuf, u64)>> {
        let p = &self.protections;
        if !p.has(Protection::Landlock) {
            return None;
        }
        let abi = p.landlock_abi;
        let mut rules: Vec<(PathBuf, u64)> =
            self.readable.iter().map(|r| (r.clone(), Access::ReadExec.bits(abi))).collect();
        rules.push((self.view().of(&self.runtimes), Access::Read.bits(abi)));
        rules.push(("/proc".into(), Access::Read.bits(abi)));
        if p.has(Protection::MountNamespace) {
            // The sandbox's own: its /tmp, /dev and /dev/shm (the host's stay out of reach).
            rules.push(("/tmp".into(), Access::ReadWrite.bits(abi)));
            rules.push(("/dev".into(), Access::Devices.bits(abi)));
            rules.push(("/dev/shm".into(), Access::ReadWrite.bits(abi)));
        } else {
            for dev in ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"] {
                rules.push((dev.into(), Access::Devices.bits(abi) & !LL_READ_DIR));
            }
        }
        Some(rules)
    }

    /// The Landlock layer a warm-pool process adds when it becomes an instance of the function
    /// built in `build`, with the temp folder `tmp` (the `landlock` field of a `load` frame,
    /// runtimes/PROTOCOL.md): the rules of an instance of that function, so its reads are
    /// narrowed from every build to its own. `None` when Landlock is off.
    pub(crate) fn narrowing_layer(&self, build: &Path, tmp: &Path) -> Option<serde_json::Value> {
        let abi = self.protections.landlock_abi;
        let view = self.view();
        let rules = self.landlock_rules(&view.of(build), &view.of(tmp), false)?;
        let scoped = if abi >= 6 { LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL } else { 0 };
        Some(serde_json::json!({
            "handled": handled_fs(abi),
            "scoped": scoped,
            "rules": rules.iter().map(|(p, bits)| serde_json::json!([p, bits])).collect::<Vec<_>>(),
        }))
    }

    /// Installs `jail` on `cmd`, applied in the child before `execve`.
    #[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
    pub(crate) fn install(cmd: &mut std::process::Command, jail: Jail) {
        use std::os::unix::process::CommandExt;
        // SAFETY: `Jail::apply` only makes system calls on memory it owns (prepared before the
        // fork): it allocates nothing and takes no lock, as a pre-exec hook must.
        unsafe {
            cmd.pre_exec(move || jail.apply());
        }
    }

    /// Spawns `cmd` (its jail installed by [`Isolation::install`]): with `pid-namespace` in
    /// force, as the first process (pid 1) of a pid namespace of its own. The namespace is made
    /// for the calling thread's next child only (`unshare(CLONE_NEWPID)` changes no running
    /// process), the child forked by `spawn` is its pid 1 — the process the executor knows,
    /// signals, puts in its cgroup and waits for — and the `/proc` its jail mounts shows that
    /// namespace (docs/security.md, "PID namespaces"). Errors: the namespace could not be
    /// made, or the spawn's own.
    pub(crate) fn spawn(&self, cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
        let _ns = self.new_pid_namespace_for_next_child()?;
        cmd.spawn()
    }

    /// A guard making the calling thread's next child pid 1 of a new pid namespace, when
    /// `pid-namespace` is in force (`None` otherwise). Hold it only around one spawn, with no
    /// `.await` in between (the thread must not change).
    #[allow(unsafe_code)] // A raw system call; the `unsafe` block says why it is sound.
    fn new_pid_namespace_for_next_child(&self) -> std::io::Result<Option<NewPidNamespaceForNextChild<'_>>> {
        let Some(own) = self.own_pid_namespace.as_deref() else { return Ok(None) };
        // SAFETY: unshare takes no pointer; CLONE_NEWPID only sets the namespace the calling
        // thread's next children are made in (allowed in a multi-threaded process).
        check(unsafe { libc::unshare(libc::CLONE_NEWPID) }.into())?;
        Ok(Some(NewPidNamespaceForNextChild { own }))
    }

    /// Runs `python` under a pool sandbox (and, with uids, as `probe_uid`) and checks what it
    /// reports: its uid, `no_new_privs`, seccomp mode 2, that it is not dumpable, and, with a
    /// mount namespace, that it cannot see the server's process. Errors: what did not hold.
    pub(crate) fn probe(&self, python: &Path, probe_uid: Option<u32>) -> std::result::Result<(), String> {
        let tmp = tempfile::Builder::new()
            .prefix("probe-")
            .tempdir_in(self.new_root.parent().unwrap_or(Path::new("/tmp")))
            .map_err(|e| format!("cannot make the probe's temp folder: {e}"))?;
        let creds = probe_uid.filter(|_| self.uids()).map(|uid| Creds { uid, gid: uid });
        if let Some(c) = creds {
            std::os::unix::fs::chown(tmp.path(), Some(c.uid), Some(c.gid)).map_err(|e| format!("chown: {e}"))?;
        }
        let jail = self
            .jail(&Role::Function { build: tmp.path(), creds }, tmp.path(), tmp.path())
            .map_err(|e| e.to_string())?;
        let script = format!(
            "import os, ctypes\n\
             r, e, s = os.getresgid()\n\
             if s != e:\n    os.setegid(s); os.setegid(e)\n\
             d = ctypes.CDLL(None, use_errno=True).prctl(3, 0, 0, 0, 0)\n\
             st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)\n\
             print(os.getuid(), os.geteuid(), d, st['NoNewPrivs'].strip(), st['Seccomp'].strip(), os.path.exists('/proc/{}'), os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == [os.getpid()])\n",
            std::process::id()
        );
        let mut cmd = std::process::Command::new(python);
        cmd.args(["-S", "-c", &script]).env_clear().current_dir(tmp.path());
        Isolation::install(&mut cmd, jail);
        let out = {
            let _ns =
                self.new_pid_namespace_for_next_child().map_err(|e| format!("cannot make a pid namespace: {e}"))?;
            cmd.output().map_err(|e| format!("the probe did not start: {e}"))?
        };
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            return Err(format!("the probe failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
        }
        judge_probe(&self.protections, creds.map(|c| c.uid), &text)
    }

    /// Kills every process whose real uid is one of `uids`, until none is left (at most 20
    /// rounds). Returns how many were killed.
    pub(crate) fn kill_uids(uids: &[u32]) -> usize {
        if uids.is_empty() {
            return 0;
        }
        let mut killed = 0;
        for _ in 0..20 {
            let found: Vec<i32> = processes_of(uids);
            if found.is_empty() {
                break;
            }
            for pid in found {
                if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).is_ok() {
                    killed += 1;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        killed
    }
}

/// Pids of the processes whose real uid is in `uids` (zombies included: they are gone once
/// their parent reaps them).
fn processes_of(uids: &[u32]) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|v| v.split_whitespace().next());
        let zombie = status.lines().any(|l| l.starts_with("State:") && l.contains('Z'));
        if !zombie && uid.and_then(|u| u.parse::<u32>().ok()).is_some_and(|u| uids.contains(&u)) {
            found.push(pid);
        }
    }
    found
}

/// Checks a probe's report (`uid euid dumpable no_new_privs seccomp_mode sees_server pid
/// sees_only_itself`) against what `planned` promises.
fn judge_probe(planned: &Protections, uid: Option<u32>, report: &str) -> std::result::Result<(), String> {
    let f: Vec<&str> = report.split_whitespace().collect();
    let [ruid, euid, dumpable, nnp, seccomp, sees_server, pid, alone] = f[..] else {
        return Err(format!("the probe reported {report:?}"));
    };
    if let Some(uid) = uid {
        if ruid != uid.to_string() || euid != uid.to_string() {
            return Err(format!("the probe runs as uid {ruid}/{euid}, not {uid}"));
        }
        if planned.has(Protection::NotDumpable) && dumpable != "0" {
            return Err(format!("the probe is dumpable ({dumpable})"));
        }
    }
    if nnp != "1" {
        return Err(format!("no_new_privs is {nnp}"));
    }
    if planned.has(Protection::Seccomp) && seccomp != "2" {
        return Err(format!("the seccomp mode is {seccomp}, not 2 (filter)"));
    }
    if planned.has(Protection::PrivateProc) && uid.is_some() && sees_server != "False" {
        return Err("the probe sees the server's process in /proc".into());
    }
    if planned.has(Protection::PidNamespace) && (pid != "1" || alone != "True") {
        return Err(format!("the probe is pid {pid} in its namespace, and sees only itself in /proc: {alone}"));
    }
    Ok(())
}

/// A path's mode bits, following links.
fn mode_of(p: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).ok().map(|m| m.permissions().mode())
}

/// Whether every folder above `path` and `path` itself can be searched (and `path` executed)
/// by a user who is neither its owner nor in its group (`mode_of` gives a path's mode).
pub(crate) fn reachable_by_others(path: &Path, mode_of: impl Fn(&Path) -> Option<u32>) -> bool {
    path.ancestors().all(|p| mode_of(p).is_some_and(|m| m & 0o001 != 0))
}

/// Marks every descriptor this process inherited beyond stdin, stdout and stderr
/// close-on-exec, so that none reaches a function (a server started with an open file, or
/// a pipe of whatever started it, would hand it to every function process). Call it at
/// start, before anything opens descriptors meant to be passed on (those are mapped
/// explicitly). `close_range(2)` with `CLOSE_RANGE_CLOEXEC` (Linux 5.11+); on older kernels
/// each descriptor of `/proc/self/fd` is marked.
#[allow(unsafe_code)] // Raw system calls; each `unsafe` block says why it is sound.
pub fn close_inherited_descriptors() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range only changes descriptor flags; no memory is passed.
    let done =
        unsafe { libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) } == 0;
    if done {
        return;
    }
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return };
    for fd in entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<libc::c_int>().ok())) {
        if fd > 2 {
            // SAFETY: fcntl on a descriptor number; an already closed one only fails.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(root: bool, landlock_abi: Option<u32>, seccomp: bool) -> Facts {
        Facts { root, landlock_abi, seccomp, cgroups: root }
    }

    #[test]
    fn root_gets_every_protection_and_a_user_what_needs_no_privilege() {
        let all = Protections::plan(facts(true, Some(7), true));
        assert_eq!(
            all.active_names(),
            "uid-per-function, not-dumpable, mount-namespace, private-proc, pid-namespace, landlock(abi 7), \
             landlock-scopes, seccomp, no-new-privileges, cgroup-kill"
        );
        assert_eq!(all.missing_names(), "none");
        let user = Protections::plan(facts(false, Some(4), true));
        assert_eq!(user.active_names(), "landlock(abi 4), seccomp, no-new-privileges");
        assert!(user.missing_names().contains("uid-per-function") && user.missing_names().contains("landlock-scopes"));
        let bare = Protections::plan(facts(false, None, false));
        assert_eq!(bare.active_names(), "no-new-privileges");
        let mut p = all.clone();
        p.remove(Protection::Landlock);
        p.remove(Protection::MountNamespace);
        assert!(!p.has(Protection::LandlockScopes) && !p.has(Protection::PrivateProc), "dependents go too");
        assert!(!p.has(Protection::PidNamespace), "a pid namespace is seen through the mount namespace's /proc");
    }

    #[test]
    fn the_seccomp_program_denies_the_listed_calls_and_ends_allowing() {
        let names: Vec<&str> = denied_syscalls().iter().map(|(n, _)| *n).collect();
        for must in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "pidfd_getfd",
            "pidfd_open",
            "mount",
            "umount2",
            "bpf",
            "keyctl",
            "add_key",
            "request_key",
            "kexec_load",
            "init_module",
            "finit_module",
            "perf_event_open",
            "userfaultfd",
            "unshare",
            "setns",
            "reboot",
            "swapon",
        ] {
            assert!(names.contains(&must), "{must} is denied");
        }
        for keep in ["setuid", "setresuid", "setgroups", "landlock_restrict_self", "seccomp", "clone", "execve"] {
            assert!(!names.contains(&keep), "{keep} stays allowed");
        }
        let Some(p) = seccomp_program() else { return };
        assert!(p.len() < 4096, "within the kernel's limit (BPF_MAXINSNS)");
        assert_eq!((p[0].code, p[0].k), (BPF_LD_W_ABS, 4), "the architecture is checked first");
        let last = p.last().map(|s| (s.code, s.k));
        assert_eq!(last, Some((BPF_RET_K, libc::SECCOMP_RET_ALLOW)));
        let denies = p
            .windows(2)
            .filter(|w| w[0].code == BPF_JEQ_K && w[1].k == libc::SECCOMP_RET_ERRNO | libc::EPERM as u32)
            .count();
        assert_eq!(denies, denied_syscalls().len() + 1, "one jump per denied call, plus the arch check");
    }

    #[test]
    fn mounts_are_made_parents_first_with_their_folders() {
        let entries = vec![
            Entry::Bind { src: "/".into(), dst: "/tmp/data/builds/x".into(), writable: false, device: false },
            Entry::Tmpfs { dst: "/tmp".into(), mode: 0o1777, size_mb: 8 },
            Entry::Symlink { dst: "/bin".into(), target: "usr/bin".into() },
        ];
        let ops = mount_ops(Path::new("/r"), &entries).expect("ops");
        let text: Vec<String> = ops
            .iter()
            .map(|o| match o {
                Op::Mkdir(p) => format!("mkdir {}", p.to_string_lossy()),
                Op::Touch(p) => format!("touch {}", p.to_string_lossy()),
                Op::Mount { dst, fstype, flags, .. } => format!(
                    "mount {} {} ro={}",
                    fstype.as_ref().map_or("bind".into(), |f| f.to_string_lossy().into_owned()),
                    dst.to_string_lossy(),
                    flags & libc::MS_RDONLY != 0
                ),
                Op::Symlink { target, link } => format!("ln {} {}", target.to_string_lossy(), link.to_string_lossy()),
            })
            .collect();
        assert_eq!(
            text,
            [
                "ln usr/bin /r/bin",
                "mkdir /r/tmp",
                "mount tmpfs /r/tmp ro=false",
                "mkdir /r/tmp/data",
                "mkdir /r/tmp/data/builds",
                "mkdir /r/tmp/data/builds/x",
                "mount bind /r/tmp/data/builds/x ro=false",
                "mount bind /r/tmp/data/builds/x ro=true",
            ]
        );
    }

    #[test]
    fn landlock_handles_everything_its_abi_knows_and_grants_no_device_creation() {
        assert_eq!(handled_fs(1), (1 << 13) - 1);
        assert_eq!(handled_fs(7), (1 << 16) - 1, "refer (2), truncate (3), ioctl on devices (5)");
        for abi in [1, 3, 7] {
            let rw = Access::ReadWrite.bits(abi);
            assert_eq!(rw & (LL_MAKE_CHAR | LL_MAKE_BLOCK), 0, "no device nodes");
            assert_eq!(rw & !handled_fs(abi), 0, "only what the ABI knows");
            assert_eq!(Access::Read.bits(abi) & (LL_WRITE_FILE | LL_EXECUTE | LL_MAKE_REG), 0);
            assert_eq!(Access::ReadExec.bits(abi) & LL_WRITE_FILE, 0);
        }
        assert_eq!(Access::Devices.bits(1) & LL_IOCTL_DEV, 0, "ABI 1 has no ioctl right");
    }

    /// The host → sandbox binds of a jail, as (source, destination, writable).
    fn binds(jail: &Jail) -> Vec<(String, String, bool)> {
        let Some(mounts) = &jail.mounts else { return Vec::new() };
        let root = mounts.root.to_string_lossy().into_owned();
        let ops: Vec<&Op> = mounts.ops().collect();
        ops.iter()
            .filter_map(|o| match o {
                Op::Mount { src: Some(src), dst, fstype: None, .. } => Some((src, dst)),
                _ => None,
            })
            .map(|(src, dst)| {
                let dst = dst.to_string_lossy().trim_start_matches(root.as_str()).to_string();
                let writable = ops.iter().any(|o| {
                    matches!(o, Op::Mount { src: None, dst: d, flags, .. }
                        if d.to_string_lossy().ends_with(dst.as_str()) && flags & libc::MS_RDONLY == 0)
                });
                (src.to_string_lossy().into_owned(), dst, writable)
            })
            .collect()
    }

    #[test]
    fn a_function_jail_holds_its_own_build_and_a_pool_jail_every_build() {
        // (Isolation::new copies the dynamic loader into <data>/runtimes.)
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path();
        let d = data.display().to_string();
        let at = |rel: &str| format!("{d}/{rel}");
        let all = Protections::plan(facts(true, Some(7), true));
        let iso = Isolation::new(data, &[Path::new("/opt/py/3.11/bin/python3")], all);
        let build = data.join("builds/python3.11/abc");
        let tmp = data.join("tmp/instance-1");
        let creds = Some(Creds { uid: 200_000, gid: 200_000 });
        let jail = iso.jail(&Role::Function { build: &build, creds }, &tmp, &build.join("code")).expect("jail");
        let b = binds(&jail);
        assert!(b.contains(&(at("builds/python3.11/abc"), "/sless/builds/python3.11/abc".into(), false)), "{b:?}");
        assert!(b.contains(&(at("tmp/instance-1"), "/sless/tmp/instance-1".into(), true)), "{b:?}");
        assert!(b.contains(&(at("runtimes"), at("runtimes"), false)), "{b:?}");
        assert!(!b.iter().any(|(src, ..)| *src == d || *src == at("builds")), "nothing else of the data folder: {b:?}");
        assert!(b.iter().all(|(src, _, w)| !w || src.starts_with(&at("tmp/")) || src.starts_with("/dev/")), "{b:?}");
        assert_eq!(jail.creds, creds);
        assert_eq!(jail.cwd.to_string_lossy(), "/sless/builds/python3.11/abc/code");
        let rules = jail.landlock.as_ref().expect("landlock");
        let allowed = |p: &str| rules.shared.iter().chain(rules.own.iter()).any(|(r, _)| r.to_string_lossy() == p);
        assert!(allowed("/sless/builds/python3.11/abc") && allowed("/sless/tmp/instance-1"));
        assert!(!allowed("/sless") && !allowed("/sless/builds") && !allowed("/"), "{rules:?}");
        let pool = iso.jail(&Role::Pool, &tmp, &tmp).expect("pool jail");
        assert!(binds(&pool).contains(&(at("builds"), "/sless/builds".into(), false)));
        assert_eq!(pool.creds, None, "a pool process drops to its function's uid at load");
        let layer = iso.narrowing_layer(&build, &tmp).expect("layer");
        let paths: Vec<&str> = layer["rules"].as_array().into_iter().flatten().filter_map(|r| r[0].as_str()).collect();
        assert!(paths.contains(&"/sless/builds/python3.11/abc") && !paths.contains(&"/sless/builds"), "{paths:?}");
        let user = Isolation::new(data, &[], Protections::plan(facts(false, Some(7), true)));
        let jail = user.jail(&Role::Function { build: &build, creds }, &tmp, &build).expect("jail");
        assert!(jail.mounts.is_none() && jail.creds.is_none(), "no mounts or uids without root");
        assert_eq!(jail.cwd.to_string_lossy(), at("builds/python3.11/abc"), "host paths without a mount namespace");
    }

    #[test]
    fn a_jail_planned_from_the_shared_part_makes_what_one_plan_of_everything_makes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path();
        let iso = Isolation::new(data, &[], Protections::plan(facts(true, Some(7), true)));
        let build = data.join("builds/python3.11/abc");
        let tmp = data.join("tmp/instance-1");
        let jail = iso.jail(&Role::Function { build: &build, creds: None }, &tmp, &build).expect("jail");
        let mounts = jail.mounts.as_ref().expect("mounts");
        let mut split: Vec<String> = mounts.ops().map(|o| format!("{o:?}")).collect();
        // The same entries planned in one go, as before the shared part was planned once.
        let view = iso.view();
        let mut entries = iso.system.clone();
        entries.push(Entry::Bind {
            src: iso.runtimes.clone(),
            dst: view.of(&iso.runtimes),
            writable: false,
            device: false,
        });
        entries.push(Entry::Bind { src: build.clone(), dst: view.of(&build), writable: false, device: false });
        entries.push(Entry::Bind { src: tmp.clone(), dst: view.of(&tmp), writable: true, device: false });
        entries.push(Entry::Tmpfs { dst: "/tmp".into(), mode: 0o1777, size_mb: TMP_SIZE_MB });
        entries.push(Entry::Tmpfs { dst: "/dev".into(), mode: 0o755, size_mb: 1 });
        for dev in ["null", "zero", "full", "random", "urandom"] {
            let path = Path::new("/dev").join(dev);
            entries.push(Entry::Bind { src: path.clone(), dst: path, writable: true, device: true });
        }
        entries.push(Entry::Tmpfs { dst: "/dev/shm".into(), mode: 0o1777, size_mb: 64 });
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            entries.push(Entry::Symlink { dst: Path::new("/dev").join(name), target: target.into() });
        }
        entries.push(Entry::Proc { dst: "/proc".into() });
        if let Some((real, copy)) = &iso.loader {
            entries.push(Entry::Bind { src: copy.clone(), dst: real.clone(), writable: false, device: false });
        }
        let mut whole: Vec<String> =
            mount_ops(&iso.new_root, &entries).expect("ops").iter().map(|o| format!("{o:?}")).collect();
        split.sort();
        whole.sort();
        assert_eq!(split, whole);
        let rules = jail.landlock.as_ref().expect("landlock");
        let mut split: Vec<_> = rules.shared.iter().chain(rules.own.iter()).cloned().collect();
        let mut whole: Vec<_> = iso
            .landlock_rules(&view.of(&build), &view.of(&tmp), false)
            .expect("rules")
            .iter()
            .map(|(p, b)| (cstr(p).expect("cstr"), *b))
            .collect();
        split.sort();
        whole.sort();
        assert_eq!(split, whole);
        assert_eq!(rules.own.len(), 2, "a process's own rules: its build and its temp folder");
    }

    #[test]
    fn an_interpreter_outside_the_system_folders_is_bound_at_its_own_path() {
        let all = Protections::plan(facts(true, Some(7), true));
        let dir = tempfile::tempdir().expect("tempdir");
        let iso = Isolation::new(
            dir.path(),
            &[Path::new("/root/.pyenv/versions/3.11.7/bin/python3"), Path::new("/usr/bin/node")],
            all,
        );
        let bound: Vec<&Path> = iso
            .system
            .iter()
            .filter_map(|e| match e {
                Entry::Bind { src, dst, writable: false, .. } if src == dst => Some(src.as_path()),
                _ => None,
            })
            .collect();
        assert!(bound.contains(&Path::new("/root/.pyenv/versions/3.11.7")), "{bound:?}");
        assert!(!bound.contains(&Path::new("/usr/bin")) && !bound.contains(&Path::new("/root")), "{bound:?}");
    }

    #[test]
    fn the_data_folder_is_seen_at_sless_but_the_shims_where_they_are() {
        let view = View { data: "/tmp/d".into(), seen_at: Some(SANDBOX_DATA_DIR.into()) };
        assert_eq!(view.of(Path::new("/tmp/d/builds/python3.11/x/code")), Path::new("/sless/builds/python3.11/x/code"));
        assert_eq!(view.of(Path::new("/tmp/d/tmp/instance-1")), Path::new("/sless/tmp/instance-1"));
        assert_eq!(
            view.of(Path::new("/tmp/d/runtimes/python3.11/bootstrap.py")),
            Path::new("/tmp/d/runtimes/python3.11/bootstrap.py")
        );
        assert_eq!(view.of(Path::new("/usr/bin/python3.11")), Path::new("/usr/bin/python3.11"));
        let same = View { data: "/tmp/d".into(), seen_at: None };
        assert_eq!(same.of(Path::new("/tmp/d/builds/x")), Path::new("/tmp/d/builds/x"));
    }

    #[test]
    fn a_probe_report_is_judged_against_the_plan() {
        let all = Protections::plan(facts(true, Some(7), true));
        assert_eq!(judge_probe(&all, Some(200_000), "200000 200000 0 1 2 False 1 True"), Ok(()));
        assert!(judge_probe(&all, Some(200_000), "0 0 0 1 2 False 1 True").is_err(), "still root");
        assert!(judge_probe(&all, Some(200_000), "200000 200000 1 1 2 False 1 True").is_err(), "dumpable");
        assert!(judge_probe(&all, Some(200_000), "200000 200000 0 1 0 False 1 True").is_err(), "no filter");
        assert!(judge_probe(&all, Some(200_000), "200000 200000 0 1 2 True 1 True").is_err(), "sees the server");
        assert!(judge_probe(&all, Some(200_000), "200000 200000 0 1 2 False 4711 False").is_err(), "no pid namespace");
        assert!(judge_probe(&all, Some(200_000), "200000 200000 0 1 2 False 1 False").is_err(), "sees others");
        assert!(judge_probe(&all, Some(200_000), "garbage").is_err());
        let user = Protections::plan(facts(false, Some(7), false));
        assert_eq!(judge_probe(&user, None, "1000 1000 1 1 0 True 4711 False"), Ok(()), "nothing more is promised");
    }

    #[test]
    fn an_interpreter_under_a_private_home_is_not_reachable() {
        let modes = |p: &Path| -> Option<u32> {
            Some(match p.to_str()? {
                "/root" => 0o700,
                _ => 0o755,
            })
        };
        assert!(reachable_by_others(Path::new("/usr/bin/python3.11"), modes));
        assert!(!reachable_by_others(Path::new("/root/.pyenv/versions/3.11.7/bin/python3.11"), modes));
    }
}

//! The uid (and gid) each function's instances run as (docs/security.md, "Local backend:
//! function isolation").
//!
//! Uids come from a range of sless's own, far above the machine's users (`/etc/passwd` is
//! never read or changed): from [`FIRST_UID`] up, in blocks of [`BLOCK`]. Each data folder
//! takes one block, picked at random at its first start (so two servers on one machine, each
//! with its own data folder, do not share uids and do not kill each other's leftovers), and
//! gives one uid of it to each function (namespace and name), the group id equal to the uid.
//! The block and the allocations are kept in `<data dir>/function-uids.json`, written
//! atomically (a temp file renamed over it), so a function keeps its uid across restarts. A
//! deleted function's uid stays recorded: a function created again under the same name gets
//! it back, and no other function ever does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The first uid given to a function (200,000: above the 65,536 ids of classic systems and
/// the subordinate ranges `useradd` hands out from 100,000 by default).
pub(crate) const FIRST_UID: u32 = 200_000;
/// Uids per data folder (65,536).
pub(crate) const BLOCK: u32 = 1 << 16;
/// How many blocks there are (32,000: the last ends below 2³¹, so every uid is positive also
/// for programs that take a uid for a signed 32-bit number).
pub(crate) const BLOCKS: u32 = 32_000;
/// The uid (and gid) of the process that checks the sandbox at start (199,999; never a
/// function's).
pub(crate) const PROBE_UID: u32 = FIRST_UID - 1;
const _: () = assert!(PROBE_UID < FIRST_UID, "the probe's uid is never a function's");

/// The name of the state file in the data folder.
pub(crate) const STATE_FILE: &str = "function-uids.json";

/// What the state file holds: the data folder's block and `"<namespace>/<name>"` → uid.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct UidTable {
    /// The first uid of this data folder's block.
    pub first: u32,
    /// Allocated uids by function key.
    #[serde(default)]
    pub functions: BTreeMap<String, u32>,
}

impl UidTable {
    /// An empty table on block `block` (0 ≤ block < BLOCKS; larger values wrap).
    pub(crate) fn new(block: u32) -> UidTable {
        UidTable { first: FIRST_UID + (block % BLOCKS) * BLOCK, functions: BTreeMap::new() }
    }

    fn range(&self) -> std::ops::Range<u32> {
        self.first..self.first + BLOCK
    }

    /// The uid of `key`, allocating the lowest free one of the range if it has none. `None`
    /// when the range is exhausted. The second value says whether the table changed.
    pub(crate) fn uid_for(&mut self, key: &str) -> Option<(u32, bool)> {
        if let Some(uid) = self.functions.get(key) {
            return Some((*uid, false));
        }
        let used: std::collections::BTreeSet<u32> = self.functions.values().copied().collect();
        let uid = self.range().find(|u| !used.contains(u))?;
        self.functions.insert(key.to_string(), uid);
        Some((uid, true))
    }

    /// Every uid recorded (to find processes left behind by any function).
    pub(crate) fn all(&self) -> Vec<u32> {
        self.functions.values().copied().collect()
    }

    /// Reads a table. A block outside sless's range is refused; entries outside the block are
    /// dropped (a hand-edited file cannot make a function run as root or as a machine user).
    pub(crate) fn parse(text: &str) -> std::result::Result<UidTable, String> {
        let mut table: UidTable = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let offset = table.first.checked_sub(FIRST_UID).ok_or("the block starts below sless's range")?;
        if offset % BLOCK != 0 || offset / BLOCK >= BLOCKS {
            return Err(format!("{} does not start a block of sless's range", table.first));
        }
        let range = table.range();
        table.functions.retain(|_, uid| range.contains(uid));
        Ok(table)
    }
}

/// The key of a function in the table.
pub(crate) fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The table and the file it is kept in.
#[derive(Debug)]
pub(crate) struct UidStore {
    path: PathBuf,
    table: UidTable,
}

impl UidStore {
    /// Loads `<dir>/function-uids.json` (an absent file is an empty table). Errors: `Io` when
    /// it cannot be read, `Protocol` when it is not a table.
    pub(crate) fn open(dir: &Path) -> Result<UidStore> {
        let path = dir.join(STATE_FILE);
        let table = match std::fs::read_to_string(&path) {
            Ok(text) => UidTable::parse(&text)
                .map_err(|e| Error::Protocol(format!("{} is not a uid table: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let table = UidTable::new(random_u32()?);
                UidStore { path: path.clone(), table: table.clone() }.save()?;
                table
            }
            Err(e) => return Err(Error::io(format!("reading {}", path.display()))(e)),
        };
        Ok(UidStore { path, table })
    }

    /// The uid of a function, allocated and saved on first use. Errors: the range is
    /// exhausted, or the file cannot be written.
    pub(crate) fn uid_for(&mut self, namespace: &str, name: &str) -> Result<u32> {
        let (uid, changed) = self
            .table
            .uid_for(&key(namespace, name))
            .ok_or_else(|| Error::Protocol(format!("no free function uid left in {:?}", self.table.range())))?;
        if changed {
            self.save()?;
        }
        Ok(uid)
    }

    /// Every uid recorded.
    pub(crate) fn all(&self) -> Vec<u32> {
        self.table.all()
    }

    /// The uid of a function, if it was ever given one (nothing is allocated).
    pub(crate) fn existing(&self, namespace: &str, name: &str) -> Option<u32> {
        self.table.functions.get(&key(namespace, name)).copied()
    }

    fn save(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.table)
            .map_err(|e| Error::Protocol(format!("cannot encode the uid table: {e}")))?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(Error::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &self.path).map_err(Error::io(format!("writing {}", self.path.display())))
    }
}

/// Four random bytes from the kernel.
fn random_u32() -> Result<u32> {
    let mut buf = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .map_err(Error::io("reading /dev/urandom"))?;
    Ok(u32::from_ne_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_allocated_once_per_function_from_the_block() {
        let mut t = UidTable::new(3);
        let first = FIRST_UID + 3 * BLOCK;
        assert_eq!(t.uid_for("default/a"), Some((first, true)));
        assert_eq!(t.uid_for("default/b"), Some((first + 1, true)));
        assert_eq!(t.uid_for("default/a"), Some((first, false)), "stable");
        assert_eq!(t.uid_for("other/a"), Some((first + 2, true)), "namespaces are apart");
        assert_eq!(UidTable::new(BLOCKS).first, FIRST_UID, "blocks wrap");
        let last = UidTable::new(BLOCKS - 1);
        assert!(u64::from(last.first) + u64::from(BLOCK) <= 1 << 31, "below 2^31");
        let mut full = UidTable::new(0);
        full.functions = (0..BLOCK).map(|i| (i.to_string(), FIRST_UID + i)).collect();
        assert_eq!(full.uid_for("one-more"), None, "a full block is an error, not another block's uid");
    }

    #[test]
    fn a_gap_is_reused_and_out_of_block_entries_are_dropped() {
        let first = FIRST_UID + BLOCK;
        let text = format!(
            r#"{{"first": {first}, "functions": {{"default/root": 0, "default/user": 1000, "default/other": {FIRST_UID}, "default/a": {first}, "default/c": {}}}}}"#,
            first + 2
        );
        let mut t = UidTable::parse(&text).expect("parses");
        assert_eq!(t.functions.len(), 2, "uid 0, a machine user's and another block's uid are refused: {t:?}");
        assert_eq!(t.uid_for("default/root"), Some((first + 1, true)), "a new uid of the block");
        assert_eq!(t.uid_for("default/d"), Some((first + 3, true)));
        for bad in [r#"{"first": 0}"#, r#"{"first": 200001}"#, r#"{"functions": {}}"#] {
            assert!(UidTable::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_store_keeps_uids_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = UidStore::open(dir.path()).expect("open");
        let a = s.uid_for("default", "a").expect("a");
        let b = s.uid_for("default", "b").expect("b");
        assert_ne!(a, b);
        let mut again = UidStore::open(dir.path()).expect("reopen");
        assert_eq!(again.table.first, s.table.first, "the block is kept");
        assert_eq!(again.uid_for("default", "b").expect("b"), b);
        assert_eq!(again.uid_for("default", "a").expect("a"), a);
        assert!(!dir.path().join("function-uids.json.tmp").exists(), "written atomically");
        std::fs::write(dir.path().join(STATE_FILE), "not json").expect("write");
        assert!(UidStore::open(dir.path()).is_err(), "a broken table is an error, not a fresh start");
    }
}

//! The uid (and gid) each function's instances run as (docs/security.md, "Local backend:
//! function isolation").
//!
//! Uids come from a range of sless's own, far above the machine's users (`/etc/passwd` is
//! never read or changed): [`FIRST_UID`] and up, one per function (namespace and name), the
//! group id equal to the uid. Allocations are kept in `<data dir>/function-uids.json`,
//! written atomically (a temp file renamed over it), so a function keeps its uid across
//! restarts and files it left in its temp folder keep a meaning. A deleted function's uid
//! stays recorded: a function created again under the same name gets it back, and no other
//! function ever does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The first uid given to a function (200,000: above the 65,536 ids of classic systems and
/// the subordinate ranges `useradd` hands out from 100,000 by default).
pub(crate) const FIRST_UID: u32 = 200_000;
/// One past the last uid given to a function (FIRST_UID + 1,000,000).
pub(crate) const END_UID: u32 = FIRST_UID + 1_000_000;
/// The uid (and gid) of the process that checks the sandbox at start (199,999; never a
/// function's).
pub(crate) const PROBE_UID: u32 = FIRST_UID - 1;

/// The name of the state file in the data folder.
pub(crate) const STATE_FILE: &str = "function-uids.json";

/// What the state file holds: `"<namespace>/<name>"` → uid.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct UidTable {
    /// Allocated uids by function key.
    pub functions: BTreeMap<String, u32>,
}

impl UidTable {
    /// The uid of `key`, allocating the lowest free one of the range if it has none. `None`
    /// when the range is exhausted. The second value says whether the table changed.
    pub(crate) fn uid_for(&mut self, key: &str) -> Option<(u32, bool)> {
        if let Some(uid) = self.functions.get(key) {
            return Some((*uid, false));
        }
        let used: std::collections::BTreeSet<u32> = self.functions.values().copied().collect();
        let uid = (FIRST_UID..END_UID).find(|u| !used.contains(u))?;
        self.functions.insert(key.to_string(), uid);
        Some((uid, true))
    }

    /// Every uid recorded (to find processes left behind by any function).
    pub(crate) fn all(&self) -> Vec<u32> {
        self.functions.values().copied().collect()
    }

    /// Reads a table, dropping entries outside the range (a hand-edited file cannot make a
    /// function run as root or as a machine user).
    pub(crate) fn parse(text: &str) -> std::result::Result<UidTable, serde_json::Error> {
        let mut table: UidTable = serde_json::from_str(text)?;
        table.functions.retain(|_, uid| (FIRST_UID..END_UID).contains(uid));
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
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => UidTable::default(),
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
            .ok_or_else(|| Error::Protocol(format!("no free function uid left in {FIRST_UID}..{END_UID}")))?;
        if changed {
            self.save()?;
        }
        Ok(uid)
    }

    /// Every uid recorded.
    pub(crate) fn all(&self) -> Vec<u32> {
        self.table.all()
    }

    fn save(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.table)
            .map_err(|e| Error::Protocol(format!("cannot encode the uid table: {e}")))?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(Error::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &self.path).map_err(Error::io(format!("writing {}", self.path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_allocated_once_per_function_from_the_range() {
        let mut t = UidTable::default();
        assert_eq!(t.uid_for("default/a"), Some((FIRST_UID, true)));
        assert_eq!(t.uid_for("default/b"), Some((FIRST_UID + 1, true)));
        assert_eq!(t.uid_for("default/a"), Some((FIRST_UID, false)), "stable");
        assert_eq!(t.uid_for("other/a"), Some((FIRST_UID + 2, true)), "namespaces are apart");
        assert!(PROBE_UID < FIRST_UID, "the probe's uid is never a function's");
    }

    #[test]
    fn a_gap_is_reused_and_out_of_range_entries_are_dropped() {
        let text = format!(
            r#"{{"functions": {{"default/root": 0, "default/user": 1000, "default/a": {}, "default/c": {}}}}}"#,
            FIRST_UID,
            FIRST_UID + 2
        );
        let mut t = UidTable::parse(&text).expect("parses");
        assert_eq!(t.functions.len(), 2, "uid 0 and a machine user's uid are refused: {t:?}");
        assert_eq!(t.uid_for("default/root"), Some((FIRST_UID + 1, true)), "a new, in-range uid");
        assert_eq!(t.uid_for("default/d"), Some((FIRST_UID + 3, true)));
    }

    #[test]
    fn the_store_keeps_uids_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = UidStore::open(dir.path()).expect("open");
        let a = s.uid_for("default", "a").expect("a");
        let b = s.uid_for("default", "b").expect("b");
        assert_ne!(a, b);
        let mut again = UidStore::open(dir.path()).expect("reopen");
        assert_eq!(again.uid_for("default", "b").expect("b"), b);
        assert_eq!(again.uid_for("default", "a").expect("a"), a);
        assert!(!dir.path().join("function-uids.json.tmp").exists(), "written atomically");
        std::fs::write(dir.path().join(STATE_FILE), "not json").expect("write");
        assert!(UidStore::open(dir.path()).is_err(), "a broken table is an error, not a fresh start");
    }
}

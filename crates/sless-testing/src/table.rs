//! The storage logic the fake registry shares between functions, triggers and jobs: one
//! sorted table per kind, and the few rules that a change of the traits (opaque resource
//! versions, continue tokens) would touch — [`check_expected`], [`next_resource_version`],
//! [`page_of`] — each in one place.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sless_core::job::{JobRecord, JobSpec};
use sless_core::resource_version::ResourceVersion;
use sless_core::spec::FunctionSpec;
use sless_core::traits::{FunctionRecord, Kind, Listed, Page};
use sless_core::trigger::{TriggerRecord, TriggerSpec};
use sless_core::{Error, Result};

/// A stored resource with a spec the user replaces and a `resource_version` that follows it.
pub(crate) trait Resource: Clone {
    /// What `replace` swaps in.
    type Spec: Clone;
    /// The resource's name in errors (`function`, `trigger`, `job`).
    const KIND: &'static str;
    /// The kind sent to subscribers.
    const CHANGE: Kind;
    /// Its namespace and name.
    fn key(&self) -> (&str, &str);
    /// The current resource version.
    fn resource_version(&self) -> &ResourceVersion;
    /// Replaces the spec, moves the resource version on and stamps `updated_at`.
    fn replace(&mut self, spec: &Self::Spec, now: DateTime<Utc>);
}

/// `Stale` unless `expected` is `None` or equals `current` (the SQL store's conditional
/// `UPDATE`, `crates/sless-store/src/sql/mod.rs` `replace_row`).
pub(crate) fn check_expected(expected: Option<&ResourceVersion>, current: &ResourceVersion) -> Result<()> {
    match expected {
        Some(e) if e != current => Err(Error::Stale { expected: e.to_string(), current: current.to_string() }),
        _ => Ok(()),
    }
}

/// The resource version after a spec change (the SQL store counts: 1, 2, …).
pub(crate) fn next_resource_version(current: &ResourceVersion) -> ResourceVersion {
    ResourceVersion::from_count(current.as_count().unwrap_or(0) + 1)
}

/// One page of `items` (sorted by name): at most `page.limit` after the continue token
/// (the last name of the page before, as the SQL store's).
/// Errors: `InvalidField` naming `cursor` for a token that is not a name (as the SQL store).
pub(crate) fn page_of<'a, R: Resource + 'a>(items: impl Iterator<Item = &'a R>, page: &Page) -> Result<Listed<R>> {
    let after = page.continue_token.as_deref().unwrap_or("");
    if !after.is_empty() && sless_core::names::validate_name("cursor", after).is_err() {
        return Err(Error::field("cursor", "is not a next_cursor this API gave"));
    }
    let items: Vec<R> = items.filter(|r| r.key().1 > after).take(page.limit as usize + 1).cloned().collect();
    Ok(Listed::from_overfetch(items, page.limit, |r| r.key().1.to_string()))
}

macro_rules! resource {
    ($record:ty, $spec:ty, $kind:literal, $change:expr) => {
        impl Resource for $record {
            type Spec = $spec;
            const KIND: &'static str = $kind;
            const CHANGE: Kind = $change;
            fn key(&self) -> (&str, &str) {
                (&self.namespace, &self.name)
            }
            fn resource_version(&self) -> &ResourceVersion {
                &self.resource_version
            }
            fn replace(&mut self, spec: &$spec, now: DateTime<Utc>) {
                self.spec = spec.clone();
                self.resource_version = next_resource_version(&self.resource_version);
                self.updated_at = now;
            }
        }
    };
}

resource!(FunctionRecord, FunctionSpec, "function", Kind::Function);
resource!(TriggerRecord, TriggerSpec, "trigger", Kind::Trigger);
resource!(JobRecord, JobSpec, "job", Kind::Job);

/// The resources of one kind, sorted by (namespace, name) bytewise as the SQL tables are.
#[derive(Debug)]
pub(crate) struct Table<R> {
    rows: BTreeMap<(String, String), R>,
}

impl<R> Default for Table<R> {
    fn default() -> Self {
        Table { rows: BTreeMap::new() }
    }
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_string(), name.to_string())
}

impl<R: Resource> Table<R> {
    fn not_found(name: &str) -> Error {
        Error::NotFound { kind: R::KIND, name: name.into() }
    }

    /// Stores a new resource. Errors: `AlreadyExists`.
    pub(crate) fn insert(&mut self, record: &R) -> Result<()> {
        let (namespace, name) = record.key();
        let k = key(namespace, name);
        if self.rows.contains_key(&k) {
            return Err(Error::AlreadyExists { kind: R::KIND, name: name.into() });
        }
        self.rows.insert(k, record.clone());
        Ok(())
    }

    /// One resource. Errors: `NotFound`.
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Result<R> {
        self.rows.get(&key(namespace, name)).cloned().ok_or_else(|| Self::not_found(name))
    }

    /// Whether the resource exists.
    pub(crate) fn contains(&self, namespace: &str, name: &str) -> bool {
        self.rows.contains_key(&key(namespace, name))
    }

    /// A page of a namespace, sorted by name.
    pub(crate) fn page(&self, namespace: &str, page: &Page) -> Result<Listed<R>> {
        page_of(self.rows.values().filter(|r| r.key().0 == namespace), page)
    }

    /// Every resource, sorted by namespace and name.
    pub(crate) fn all(&self) -> Vec<R> {
        self.rows.values().cloned().collect()
    }

    /// Replaces the spec when `expected` is `None` or current. Errors: `NotFound`, `Stale`.
    pub(crate) fn replace(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &R::Spec,
        expected: Option<&ResourceVersion>,
    ) -> Result<R> {
        let row = self.rows.get_mut(&key(namespace, name)).ok_or_else(|| Self::not_found(name))?;
        check_expected(expected, row.resource_version())?;
        row.replace(spec, Utc::now());
        Ok(row.clone())
    }

    /// Changes a resource in place (status writes). Errors: `NotFound`.
    pub(crate) fn update(&mut self, namespace: &str, name: &str, change: impl FnOnce(&mut R)) -> Result<()> {
        let row = self.rows.get_mut(&key(namespace, name)).ok_or_else(|| Self::not_found(name))?;
        change(row);
        Ok(())
    }

    /// Deletes a resource. Errors: `NotFound`.
    pub(crate) fn remove(&mut self, namespace: &str, name: &str) -> Result<R> {
        self.rows.remove(&key(namespace, name)).ok_or_else(|| Self::not_found(name))
    }
}

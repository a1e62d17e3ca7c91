//! [`FakeInvocationLog`]: invocation records in memory.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, TimeDelta, Utc};
use sless_core::invocation::{InvocationQuery, InvocationRecord, Retention};
use sless_core::traits::InvocationLog;
use sless_core::{Error, Result};

use crate::failures::Failures;

/// Invocation records in memory, with the SQL log's semantics
/// (`crates/sless-store/src/sql/mod.rs`): a record is stored once per id (a batch inserted
/// again changes nothing), lists are newest first by id with the query's filters
/// (`since` inclusive, `until` and `before_id` exclusive), and pruning deletes by age and by
/// count per function.
#[derive(Debug, Default)]
pub struct FakeInvocationLog {
    /// id → record (UUIDv7 ids sort by time).
    records: Mutex<BTreeMap<String, InvocationRecord>>,
    failures: Failures,
}

impl FakeInvocationLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every stored record, oldest id first.
    pub fn records(&self) -> Vec<InvocationRecord> {
        self.lock().values().cloned().collect()
    }

    /// The switch that makes this log's calls fail with `Error::Storage`.
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, InvocationRecord>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether `r` passes `query`'s filters (all but the limit).
fn matches(r: &InvocationRecord, namespace: &str, query: &InvocationQuery) -> bool {
    r.namespace == namespace
        && query.function.as_ref().is_none_or(|f| &r.function == f)
        && (query.outcomes.is_empty() || query.outcomes.contains(&r.outcome))
        && query.since.is_none_or(|since| r.started_at >= since)
        && query.until.is_none_or(|until| r.started_at < until)
        && query.before_id.as_ref().is_none_or(|before| &r.id < before)
}

/// The oldest start kept by `retention` at `now` (`None`: the age keeps everything).
fn cutoff(retention: &Retention, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let age = TimeDelta::try_seconds(i64::try_from(retention.max_age_sec).ok()?)?;
    now.checked_sub_signed(age)
}

#[async_trait::async_trait]
impl InvocationLog for FakeInvocationLog {
    async fn insert(&self, records: &[InvocationRecord]) -> Result<()> {
        self.failures.check("insert")?;
        let mut stored = self.lock();
        for r in records {
            stored.entry(r.id.clone()).or_insert_with(|| r.clone());
        }
        Ok(())
    }

    async fn list(&self, namespace: &str, query: &InvocationQuery) -> Result<Vec<InvocationRecord>> {
        self.failures.check("list")?;
        Ok(self
            .lock()
            .values()
            .rev()
            .filter(|r| matches(r, namespace, query))
            .take(query.limit as usize)
            .cloned()
            .collect())
    }

    async fn get(&self, namespace: &str, id: &str) -> Result<InvocationRecord> {
        self.failures.check("get")?;
        self.lock()
            .get(id)
            .filter(|r| r.namespace == namespace)
            .cloned()
            .ok_or_else(|| Error::NotFound { kind: "invocation", name: id.into() })
    }

    async fn delete_namespace_records(&self, namespace: &str) -> Result<u64> {
        self.failures.check("delete_namespace_records")?;
        let mut stored = self.lock();
        let before = stored.len();
        stored.retain(|_, r| r.namespace != namespace);
        Ok((before - stored.len()) as u64)
    }

    async fn prune(&self, retention: &Retention, now: DateTime<Utc>) -> Result<u64> {
        self.failures.check("prune")?;
        let cutoff = cutoff(retention, now);
        let mut stored = self.lock();
        let mut kept_per_function: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut doomed = Vec::new();
        for (id, r) in stored.iter().rev() {
            let rank = kept_per_function.entry((r.namespace.clone(), r.function.clone())).or_default();
            *rank += 1;
            let too_old = cutoff.is_some_and(|c| r.started_at < c);
            if too_old || *rank > retention.max_per_function {
                doomed.push(id.clone());
            }
        }
        for id in &doomed {
            stored.remove(id);
        }
        Ok(doomed.len() as u64)
    }
}

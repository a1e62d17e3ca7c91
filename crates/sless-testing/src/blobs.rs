//! [`FakeBlobStore`]: blobs in memory.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sless_core::traits::{BlobMeta, BlobStore};
use sless_core::{Error, Result};

use crate::failures::Failures;

/// Blobs in memory with the object store's semantics (`crates/sless-store/src/blob.rs`):
/// `get` of a missing key is `NotFound` (kind `blob`), deleting one is not an error, and
/// `list` takes a folder (`archives` and `archives/` alike; `arch` is not a folder of
/// `archives/a.zip`; empty lists everything).
#[derive(Debug, Default)]
pub struct FakeBlobStore {
    blobs: Mutex<BTreeMap<String, (Bytes, DateTime<Utc>)>>,
    failures: Failures,
}

impl FakeBlobStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every key stored, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// The switch that makes this store's calls fail with `Error::Storage`.
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, (Bytes, DateTime<Utc>)>> {
        self.blobs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait::async_trait]
impl BlobStore for FakeBlobStore {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        self.failures.check("put")?;
        self.lock().insert(key.to_string(), (bytes, Utc::now()));
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Bytes> {
        self.failures.check("get")?;
        self.lock().get(key).map(|(b, _)| b.clone()).ok_or_else(|| Error::NotFound { kind: "blob", name: key.into() })
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.failures.check("delete")?;
        self.lock().remove(key);
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobMeta>> {
        self.failures.check("list")?;
        let folder = match prefix.trim_matches('/') {
            "" => String::new(),
            p => format!("{p}/"),
        };
        Ok(self
            .lock()
            .iter()
            .filter(|(key, _)| key.starts_with(&folder))
            .map(|(key, (bytes, at))| BlobMeta { key: key.clone(), size_bytes: bytes.len() as u64, last_modified: *at })
            .collect())
    }
}

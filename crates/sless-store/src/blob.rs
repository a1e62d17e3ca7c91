//! Code archives in a local folder, through the `object_store` crate.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use sless_core::traits::BlobStore;
use sless_core::{Error, Result};

/// A blob store in a folder: one file per key. Writes are atomic (written to a temporary
/// file, then renamed), so a reader never sees half an archive.
#[derive(Debug, Clone)]
pub struct LocalBlobStore {
    store: Arc<LocalFileSystem>,
}

impl LocalBlobStore {
    /// Opens (and creates) the folder `root`. Errors: `Storage` if it cannot be created.
    pub fn open(root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(Error::storage)?;
        let store = LocalFileSystem::new_with_prefix(root).map_err(Error::storage)?;
        Ok(LocalBlobStore { store: Arc::new(store) })
    }
}

fn key_path(key: &str) -> Result<ObjectPath> {
    ObjectPath::parse(key).map_err(|e| Error::Internal(format!("bad blob key {key:?}: {e}")))
}

#[async_trait::async_trait]
impl BlobStore for LocalBlobStore {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        self.store.put(&key_path(key)?, bytes.into()).await.map_err(Error::storage)?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Bytes> {
        match self.store.get(&key_path(key)?).await {
            Ok(r) => r.bytes().await.map_err(Error::storage),
            Err(object_store::Error::NotFound { .. }) => Err(Error::NotFound { kind: "blob", name: key.into() }),
            Err(e) => Err(Error::storage(e)),
        }
    }

    async fn delete(&self, key: &str) -> Result<()> {
        match self.store.delete(&key_path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::storage(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_delete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalBlobStore::open(&dir.path().join("blobs")).expect("open");
        store.put("archives/abc", Bytes::from_static(b"zip")).await.expect("put");
        assert_eq!(store.get("archives/abc").await.expect("get"), Bytes::from_static(b"zip"));
        store.delete("archives/abc").await.expect("delete");
        assert!(matches!(store.get("archives/abc").await, Err(Error::NotFound { .. })));
        store.delete("archives/abc").await.expect("delete twice is fine");
    }
}

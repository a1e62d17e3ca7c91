//! Code archives through the `object_store` crate: in a local folder or in an S3 bucket.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreExt, RetryConfig};
use sless_core::traits::{BlobMeta, BlobStore};
use sless_core::{Error, Result};

/// How long an S3 request may be retried before it fails (and the API answers 503).
const S3_RETRY_TIMEOUT: Duration = Duration::from_secs(15);

/// A blob store over any `object_store` backend. Writes are atomic: on a folder a blob is
/// written to a temporary file and renamed; an S3 object appears whole or not at all.
#[derive(Debug, Clone)]
pub struct ObjectBlobStore {
    store: Arc<dyn ObjectStore>,
}

impl ObjectBlobStore {
    /// Blobs in the folder `root` (created if missing), one file per key. Errors: `Storage`
    /// if it cannot be created.
    pub fn local(root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(Error::storage)?;
        let store = LocalFileSystem::new_with_prefix(root).map_err(Error::storage)?;
        Ok(ObjectBlobStore { store: Arc::new(store) })
    }

    /// Blobs in an S3 bucket: `url` is `s3://BUCKET` or `s3://BUCKET/PREFIX`. Configured the
    /// usual way, from the `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`,
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`, …), then `config`: pairs of the same keys
    /// (`aws_endpoint_url`, …) that take precedence. Nothing is sent until the first request
    /// ([`ObjectBlobStore::check`]). Errors: `InvalidField` for a malformed URL or an unknown
    /// key, `Storage` for a configuration the S3 client refuses.
    pub fn s3(url: &str, config: &[(&str, &str)]) -> Result<Self> {
        let (bucket, prefix) = url
            .strip_prefix("s3://")
            .map(|rest| rest.split_once('/').unwrap_or((rest, "")))
            .filter(|(bucket, _)| !bucket.is_empty())
            .ok_or_else(|| Error::field("blob_url", format!("{url:?} is not s3://BUCKET/PREFIX")))?;
        let retry = RetryConfig { max_retries: 3, retry_timeout: S3_RETRY_TIMEOUT, ..RetryConfig::default() };
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(retry)
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "5s");
        for (key, value) in config {
            let key = key
                .to_ascii_lowercase()
                .parse()
                .map_err(|_| Error::field("blob_url", format!("unknown S3 setting {key:?}")))?;
            builder = builder.with_config(key, *value);
        }
        let s3 = builder.build().map_err(Error::storage)?;
        let store: Arc<dyn ObjectStore> = match prefix.trim_matches('/') {
            "" => Arc::new(s3),
            prefix => Arc::new(PrefixStore::new(s3, prefix)),
        };
        Ok(ObjectBlobStore { store })
    }

    /// Checks that the store answers (a bucket that exists, credentials it accepts) with
    /// one listing request. Errors: `Storage`.
    pub async fn check(&self) -> Result<()> {
        self.store.list_with_delimiter(Some(&ObjectPath::from("archives"))).await.map_err(Error::storage)?;
        Ok(())
    }
}

fn key_path(key: &str) -> Result<ObjectPath> {
    ObjectPath::parse(key).map_err(|e| Error::Internal(format!("bad blob key {key:?}: {e}")))
}

#[async_trait::async_trait]
impl BlobStore for ObjectBlobStore {
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

    async fn list(&self, prefix: &str) -> Result<Vec<BlobMeta>> {
        let prefix = match prefix.trim_matches('/') {
            "" => None,
            p => Some(key_path(p)?),
        };
        self.store
            .list(prefix.as_ref())
            .map_ok(|meta| BlobMeta {
                key: meta.location.to_string(),
                size_bytes: meta.size,
                last_modified: meta.last_modified,
            })
            .try_collect()
            .await
            .map_err(Error::storage)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::{TimeDelta, Utc};

    use super::*;
    use crate::testing::S3Server;

    /// A blob store under test with what keeps it alive.
    pub(crate) struct Fixture {
        pub(crate) store: ObjectBlobStore,
        _dir: Option<tempfile::TempDir>,
        _s3: Option<S3Server>,
    }

    pub(crate) fn local() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ObjectBlobStore::local(&dir.path().join("blobs")).expect("open");
        Fixture { store, _dir: Some(dir), _s3: None }
    }

    fn s3_store(server: &S3Server, prefix: &str) -> ObjectBlobStore {
        let config = server.config();
        let config: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ObjectBlobStore::s3(&server.url(prefix), &config).expect("s3")
    }

    pub(crate) fn s3() -> Fixture {
        let server = S3Server::start();
        Fixture { store: s3_store(&server, "sless/blobs"), _dir: None, _s3: Some(server) }
    }

    /// One `#[tokio::test]` per body and store: `on_local::NAME` and `on_s3::NAME`.
    macro_rules! on_both {
        ($($name:ident),* $(,)?) => {
            mod on_local {
                $(
                    #[tokio::test]
                    async fn $name() {
                        super::$name(&super::local().store).await;
                    }
                )*
            }
            mod on_s3 {
                $(
                    #[tokio::test]
                    async fn $name() {
                        super::$name(&super::s3().store).await;
                    }
                )*
            }
        };
    }

    on_both!(put_get_delete, put_replaces, list_shows_keys_sizes_and_times, check_passes);

    async fn put_get_delete(store: &ObjectBlobStore) {
        store.put("archives/abc", Bytes::from_static(b"zip")).await.expect("put");
        assert_eq!(store.get("archives/abc").await.expect("get"), Bytes::from_static(b"zip"));
        store.delete("archives/abc").await.expect("delete");
        assert!(matches!(store.get("archives/abc").await, Err(Error::NotFound { .. })));
        store.delete("archives/abc").await.expect("delete twice is fine");
        assert!(matches!(store.get("archives/never").await, Err(Error::NotFound { kind: "blob", .. })));
    }

    async fn put_replaces(store: &ObjectBlobStore) {
        store.put("archives/k.zip", Bytes::from_static(b"one")).await.expect("put");
        store.put("archives/k.zip", Bytes::from_static(b"second")).await.expect("put again");
        assert_eq!(store.get("archives/k.zip").await.expect("get"), Bytes::from_static(b"second"));
        let big = Bytes::from(vec![7u8; 3 * 1024 * 1024]);
        store.put("archives/big.zip", big.clone()).await.expect("put big");
        assert_eq!(store.get("archives/big.zip").await.expect("get big"), big);
    }

    async fn list_shows_keys_sizes_and_times(store: &ObjectBlobStore) {
        let before = Utc::now() - TimeDelta::seconds(60);
        for (key, body) in [("archives/a.zip", "a"), ("archives/b.zip", "bbb"), ("other/c", "cc")] {
            store.put(key, Bytes::from(body)).await.expect("put");
        }
        let mut archives = store.list("archives/").await.expect("list");
        archives.sort_by(|a, b| a.key.cmp(&b.key));
        let keys: Vec<_> = archives.iter().map(|b| (b.key.as_str(), b.size_bytes)).collect();
        assert_eq!(keys, [("archives/a.zip", 1), ("archives/b.zip", 3)]);
        let after = Utc::now() + TimeDelta::seconds(60);
        assert!(archives.iter().all(|b| b.last_modified > before && b.last_modified < after), "{archives:?}");
        assert_eq!(store.list("").await.expect("list all").len(), 3);
        assert_eq!(store.list("archives").await.expect("list without slash").len(), 2);
        assert!(store.list("nothing/").await.expect("list nothing").is_empty());
        // A prefix is a folder, not the start of a name.
        assert!(store.list("arch").await.expect("list part").is_empty());
    }

    async fn check_passes(store: &ObjectBlobStore) {
        store.check().await.expect("check");
    }

    #[tokio::test]
    async fn s3_prefixes_keep_stores_apart() {
        let server = S3Server::start();
        let (one, two) = (s3_store(&server, "one"), s3_store(&server, "two/deeper/"));
        one.put("archives/x.zip", Bytes::from_static(b"1")).await.expect("put");
        two.put("archives/x.zip", Bytes::from_static(b"2")).await.expect("put");
        assert_eq!(one.get("archives/x.zip").await.expect("get"), Bytes::from_static(b"1"));
        assert_eq!(two.list("archives/").await.expect("list")[0].key, "archives/x.zip");
        let mut keys = server.keys();
        keys.sort();
        assert_eq!(keys, ["one/archives/x.zip", "two/deeper/archives/x.zip"]);
        let bare = s3_store(&server, "");
        assert_eq!(bare.list("").await.expect("list").len(), 2);
    }

    #[tokio::test]
    async fn s3_missing_bucket_or_endpoint_fails_the_check() {
        let server = S3Server::start();
        let config = server.config();
        let mut config: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let missing = ObjectBlobStore::s3("s3://no-such-bucket/x", &config).expect("s3");
        assert!(matches!(missing.check().await, Err(Error::Storage(_))));
        config.retain(|(k, _)| *k != "aws_endpoint_url");
        config.push(("aws_endpoint_url", "http://127.0.0.1:1"));
        let unreachable = ObjectBlobStore::s3(&server.url("x"), &config).expect("s3");
        let started = std::time::Instant::now();
        assert!(matches!(unreachable.check().await, Err(Error::Storage(_))));
        assert!(matches!(unreachable.get("archives/x.zip").await, Err(Error::Storage(_))));
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn s3_urls_and_settings_are_checked() {
        for url in ["s3://", "s3:///x", "file:///tmp", "bucket"] {
            assert!(matches!(ObjectBlobStore::s3(url, &[]), Err(Error::InvalidField { .. })), "{url}");
        }
        assert!(matches!(
            ObjectBlobStore::s3("s3://b", &[("aws_no_such_setting", "1")]),
            Err(Error::InvalidField { .. })
        ));
    }
}

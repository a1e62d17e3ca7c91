//! The collector: deletes the versions beyond a retention count that nothing uses, then the
//! code archives that no version references.

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, Utc};
use sless_core::archive::{BUILD_LOGS, blob_key, build_log_key};
use sless_core::status::VersionPhase;
use sless_core::traits::{BlobStore, Registry, VersionRecord};
use sless_core::{Error, Result};

/// Where the archives are in the blob store.
const ARCHIVES: &str = "archives/";

/// What the collector keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// Versions kept per function besides the active one and those building: the newest
    /// ones (the newest version is always kept, so version numbers are never reused).
    pub keep_versions: u32,
    /// Unreferenced archives written more recently than this many seconds are kept: an
    /// upload stores its archive before it adds the version that names it.
    pub grace_sec: u64,
    /// Only report what would be deleted.
    pub dry_run: bool,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy { keep_versions: 10, grace_sec: 3600, dry_run: false }
    }
}

pub use sless_core::report::{CollectedArchive, CollectedVersion, GcReport};

/// The versions of one function to delete (numbers): all but the active one, those still
/// building and the newest `keep` (at least the newest one). `versions` in any order.
pub fn versions_to_delete(versions: &[VersionRecord], active: Option<u32>, keep: u32) -> Vec<u32> {
    let mut numbers: Vec<u32> = versions.iter().map(|v| v.version).collect();
    numbers.sort_unstable_by(|a, b| b.cmp(a));
    let newest: HashSet<u32> = numbers.iter().copied().take(keep.max(1) as usize).collect();
    let mut drop: Vec<u32> = versions
        .iter()
        .filter(|v| Some(v.version) != active && v.phase != VersionPhase::Building && !newest.contains(&v.version))
        .map(|v| v.version)
        .collect();
    drop.sort_unstable();
    drop
}

/// One collection: old versions first, then the archives that no version references and
/// that are older than the grace period. Errors: `Storage` (what was deleted until then
/// stays deleted; every step can be repeated).
pub async fn collect(
    registry: &dyn Registry,
    blobs: &dyn BlobStore,
    policy: &GcPolicy,
    now: DateTime<Utc>,
) -> Result<GcReport> {
    // Listed before the references are read: an archive uploaded after this is not a
    // candidate, one uploaded just before is protected by the grace period.
    let stored = blobs.list(ARCHIVES).await?;
    let logs = blobs.list(BUILD_LOGS).await?;
    let mut kept_logs = HashSet::new();
    let mut report = GcReport { dry_run: policy.dry_run, ..GcReport::default() };
    let mut referenced = HashSet::new();
    for f in registry.all_functions().await? {
        let versions = match registry.list_versions(&f.namespace, &f.name).await {
            Ok(v) => v,
            // Deleted meanwhile: its versions are gone too.
            Err(Error::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        let drop = versions_to_delete(&versions, f.active_version, policy.keep_versions);
        for v in versions {
            let deleted = drop.contains(&v.version)
                && (policy.dry_run || registry.delete_version(&f.namespace, &f.name, v.version).await?);
            if deleted {
                report.versions.push(CollectedVersion {
                    namespace: f.namespace.clone(),
                    function: f.name.clone(),
                    version: v.version,
                    sha256: v.sha256,
                });
            } else {
                kept_logs.insert(build_log_key(&f.namespace, &f.name, v.version, &v.sha256));
                referenced.insert(blob_key(&v.sha256));
            }
        }
    }
    let cutoff = TimeDelta::try_seconds(i64::try_from(policy.grace_sec).unwrap_or(i64::MAX))
        .and_then(|grace| now.checked_sub_signed(grace))
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    for blob in stored {
        let is_archive = blob.key.strip_prefix(ARCHIVES).is_some_and(|name| name.ends_with(".zip"));
        if !is_archive || referenced.contains(&blob.key) || blob.last_modified > cutoff {
            continue;
        }
        if !policy.dry_run {
            blobs.delete(&blob.key).await?;
        }
        report.bytes_freed += blob.size_bytes;
        report.archives.push(CollectedArchive { key: blob.key, size_bytes: blob.size_bytes });
    }
    // A log is written after its version exists: one older than the grace period whose
    // version is gone (collected above, deleted with its function) is nobody's.
    for blob in logs {
        if kept_logs.contains(&blob.key) || blob.last_modified > cutoff {
            continue;
        }
        if !policy.dry_run {
            blobs.delete(&blob.key).await?;
        }
        report.bytes_freed += blob.size_bytes;
        report.build_logs.push(blob.key);
    }
    report.archives.sort_by(|a, b| a.key.cmp(&b.key));
    report.build_logs.sort();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use sless_core::runtime::Runtime;
    use sless_core::status::FunctionStatus;

    use super::*;
    use sless_store::testing::{S3Server, TestDatabase, function_record};
    use sless_store::{ObjectBlobStore, SqlRegistry};

    fn version(n: u32, phase: VersionPhase) -> VersionRecord {
        VersionRecord {
            namespace: "default".into(),
            function: "f".into(),
            version: n,
            sha256: format!("{n:064x}"),
            size_bytes: 1,
            runtime: Runtime::Python311,
            phase,
            message: String::new(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn keeps_active_building_and_newest() {
        let versions: Vec<_> =
            (1..=6).map(|n| version(n, if n == 2 { VersionPhase::Building } else { VersionPhase::Ready })).collect();
        assert_eq!(versions_to_delete(&versions, Some(1), 2), [3, 4]);
        assert_eq!(versions_to_delete(&versions, None, 2), [1, 3, 4]);
        assert_eq!(versions_to_delete(&versions, Some(6), 10), Vec::<u32>::new());
        // The newest is kept even with keep 0 (numbers are never reused).
        assert_eq!(versions_to_delete(&versions, Some(3), 0), [1, 4, 5]);
        assert!(versions_to_delete(&[], None, 0).is_empty());
    }

    /// Uploads `n` versions of `name` the way the API does (archive first), all built.
    async fn upload(reg: &dyn Registry, blobs: &dyn BlobStore, name: &str, n: u32) -> Vec<String> {
        reg.create_function(&sless_core::traits::New::from(&function_record(name))).await.expect("create");
        let mut shas = Vec::new();
        for i in 1..=n {
            let sha = format!("{name}{i:063}");
            blobs.put(&blob_key(&sha), Bytes::from(vec![1u8; i as usize])).await.expect("put");
            let (v, _) = reg.add_version("default", name, &sha, u64::from(i), Runtime::Python311).await.expect("add");
            blobs
                .put(&build_log_key("default", name, v.version, &sha), Bytes::from_static(b"ok\n"))
                .await
                .expect("log");
            reg.set_version_build("default", name, v.version, VersionPhase::Ready, "").await.expect("build");
            shas.push(sha);
        }
        shas
    }

    async fn archive_keys(blobs: &dyn BlobStore) -> Vec<String> {
        let mut keys: Vec<_> = blobs.list("archives/").await.expect("list").into_iter().map(|b| b.key).collect();
        keys.sort();
        keys
    }

    async fn collects_old_versions_and_unreferenced_archives(reg: &dyn Registry, blobs: &dyn BlobStore) {
        let f = upload(reg, blobs, "f", 5).await;
        reg.update_status("default", "f", &FunctionStatus::pending(Utc::now()), Some(2)).await.expect("activate");
        let g = upload(reg, blobs, "g", 1).await;
        reg.delete_function("default", "g").await.expect("delete g");
        blobs.put("archives/notes.txt", Bytes::from_static(b"not an archive")).await.expect("put");
        let keep_two = GcPolicy { keep_versions: 2, grace_sec: 3600, dry_run: false };

        // A dry run deletes nothing and says what a run would delete.
        let dry = collect(reg, blobs, &GcPolicy { dry_run: true, grace_sec: 0, ..keep_two }, Utc::now())
            .await
            .expect("dry run");
        assert!(dry.dry_run);
        assert_eq!(dry.versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(dry.archives.len(), 3);
        assert_eq!(dry.build_logs.len(), 3, "f's versions 1 and 3, g's only one");
        assert_eq!(reg.list_versions("default", "f").await.expect("list").len(), 5);
        assert_eq!(archive_keys(blobs).await.len(), 7);

        // Within the grace period unreferenced archives stay; old versions go.
        let report = collect(reg, blobs, &keep_two, Utc::now()).await.expect("collect");
        let gone: Vec<_> =
            report.versions.iter().map(|v| (v.function.as_str(), v.version, v.sha256.as_str())).collect();
        assert_eq!(gone, [("f", 1, f[0].as_str()), ("f", 3, f[2].as_str())]);
        assert!(report.archives.is_empty());
        assert!(report.build_logs.is_empty(), "logs within the grace period stay");
        let left: Vec<u32> =
            reg.list_versions("default", "f").await.expect("list").into_iter().map(|v| v.version).collect();
        assert_eq!(left, [2, 4, 5]);

        // After it, the archives of deleted versions and functions go too; others stay.
        let later = Utc::now() + TimeDelta::seconds(3601);
        let report = collect(reg, blobs, &keep_two, later).await.expect("collect");
        assert!(report.versions.is_empty());
        let mut want = vec![blob_key(&f[0]), blob_key(&f[2]), blob_key(&g[0])];
        want.sort();
        assert_eq!(report.archives.iter().map(|a| a.key.clone()).collect::<Vec<_>>(), want);
        let mut logs = vec![
            build_log_key("default", "f", 1, &f[0]),
            build_log_key("default", "f", 3, &f[2]),
            build_log_key("default", "g", 1, &g[0]),
        ];
        logs.sort();
        assert_eq!(report.build_logs, logs);
        assert_eq!(report.bytes_freed, 1 + 3 + 1 + 3 * 3);
        assert_eq!(blobs.list(BUILD_LOGS).await.expect("logs").len(), 3, "the kept versions' logs stay");
        let mut kept = vec![blob_key(&f[1]), blob_key(&f[3]), blob_key(&f[4]), "archives/notes.txt".to_string()];
        kept.sort();
        assert_eq!(archive_keys(blobs).await, kept);
        assert_eq!(collect(reg, blobs, &keep_two, later).await.expect("again"), GcReport::default());
    }

    #[tokio::test]
    async fn collects_on_sqlite_and_a_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("open");
        let blobs = ObjectBlobStore::local(&dir.path().join("blobs")).expect("blobs");
        collects_old_versions_and_unreferenced_archives(&reg, &blobs).await;
    }

    #[tokio::test]
    async fn collects_on_postgres_and_s3() {
        let db = TestDatabase::create().await;
        let reg = SqlRegistry::open_postgres(&db.url).await.expect("open");
        let s3 = S3Server::start();
        let config = s3.config();
        let config: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let blobs = ObjectBlobStore::s3(&s3.url("sless/blobs"), &config).expect("s3");
        collects_old_versions_and_unreferenced_archives(&reg, &blobs).await;
        reg.close().await;
    }
}

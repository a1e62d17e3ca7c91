//! The registry on SQLite (sqlx, migrations embedded in the binary).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{FunctionRecord, Page, Registry, VersionRecord};
use sless_core::{Error, Result};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow};
use sqlx::{Row, SqlitePool};

/// The registry in one SQLite file (WAL mode).
#[derive(Debug, Clone)]
pub struct SqliteRegistry {
    pool: SqlitePool,
}

fn db_err(e: sqlx::Error) -> Error {
    Error::storage(e)
}

fn json_err(e: serde_json::Error) -> Error {
    Error::Internal(format!("stored JSON is unreadable: {e}"))
}

fn parse_time(s: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| Error::Internal(format!("stored time {s:?} is unreadable: {e}")))
}

fn now() -> DateTime<Utc> {
    Utc::now()
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl SqliteRegistry {
    /// Opens (creating if missing) the database file at `path` and applies the embedded
    /// migrations. Errors: `Storage` when the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> Result<Self> {
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(db_err)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await.map_err(db_err)?;
        sqlx::migrate!("migrations/sqlite").run(&pool).await.map_err(Error::storage)?;
        Ok(SqliteRegistry { pool })
    }

    fn function_from_row(row: &SqliteRow) -> Result<FunctionRecord> {
        let spec: FunctionSpec =
            serde_json::from_str(row.try_get::<&str, _>("spec").map_err(db_err)?).map_err(json_err)?;
        let status: FunctionStatus =
            serde_json::from_str(row.try_get::<&str, _>("status").map_err(db_err)?).map_err(json_err)?;
        let active: Option<i64> = row.try_get("active_version").map_err(db_err)?;
        Ok(FunctionRecord {
            namespace: row.try_get("namespace").map_err(db_err)?,
            name: row.try_get("name").map_err(db_err)?,
            spec,
            resource_version: row.try_get::<i64, _>("resource_version").map_err(db_err)? as u64,
            active_version: active.map(|v| v as u32),
            status,
            created_at: parse_time(row.try_get("created_at").map_err(db_err)?)?,
            updated_at: parse_time(row.try_get("updated_at").map_err(db_err)?)?,
        })
    }

    fn version_from_row(row: &SqliteRow) -> Result<VersionRecord> {
        let runtime: String = row.try_get("runtime").map_err(db_err)?;
        let phase: String = row.try_get("phase").map_err(db_err)?;
        Ok(VersionRecord {
            namespace: row.try_get("namespace").map_err(db_err)?,
            function: row.try_get("function").map_err(db_err)?,
            version: row.try_get::<i64, _>("version").map_err(db_err)? as u32,
            sha256: row.try_get("sha256").map_err(db_err)?,
            size_bytes: row.try_get::<i64, _>("size_bytes").map_err(db_err)? as u64,
            runtime: Runtime::parse("runtime", &runtime)?,
            phase: VersionPhase::parse(&phase)
                .ok_or_else(|| Error::Internal(format!("stored phase {phase:?} is unknown")))?,
            message: row.try_get("message").map_err(db_err)?,
            created_at: parse_time(row.try_get("created_at").map_err(db_err)?)?,
        })
    }

    async fn exists(&self, namespace: &str, name: &str) -> Result<()> {
        let found = sqlx::query("SELECT 1 FROM functions WHERE namespace = ? AND name = ?")
            .bind(namespace)
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        match found {
            Some(_) => Ok(()),
            None => Err(Error::NotFound { kind: "function", name: name.into() }),
        }
    }
}

/// A `SELECT` of the version columns (all but the build log), followed by `$tail`.
macro_rules! select_versions {
    ($tail:literal) => {
        concat!("SELECT namespace, function, version, sha256, size_bytes, runtime, phase, message, created_at FROM versions ", $tail)
    };
}

#[async_trait::async_trait]
impl Registry for SqliteRegistry {
    async fn create_function(&self, r: &FunctionRecord) -> Result<()> {
        let spec = serde_json::to_string(&r.spec).map_err(json_err)?;
        let status = serde_json::to_string(&r.status).map_err(json_err)?;
        let res = sqlx::query(
            "INSERT INTO functions (namespace, name, spec, resource_version, active_version, status, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.namespace)
        .bind(&r.name)
        .bind(spec)
        .bind(r.resource_version as i64)
        .bind(r.active_version.map(i64::from))
        .bind(status)
        .bind(ts(r.created_at))
        .bind(ts(r.updated_at))
        .execute(&self.pool)
        .await;
        match res {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(Error::AlreadyExists { kind: "function", name: r.name.clone() })
            }
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<FunctionRecord> {
        let row = sqlx::query("SELECT * FROM functions WHERE namespace = ? AND name = ?")
            .bind(namespace)
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: "function", name: name.into() })?;
        Self::function_from_row(&row)
    }

    async fn list_functions(&self, namespace: &str, page: &Page) -> Result<Vec<FunctionRecord>> {
        let rows = sqlx::query("SELECT * FROM functions WHERE namespace = ? AND name > ? ORDER BY name LIMIT ?")
            .bind(namespace)
            .bind(page.after.as_deref().unwrap_or(""))
            .bind(i64::from(page.limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(Self::function_from_row).collect()
    }

    async fn all_functions(&self) -> Result<Vec<FunctionRecord>> {
        let rows = sqlx::query("SELECT * FROM functions ORDER BY namespace, name")
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(Self::function_from_row).collect()
    }

    async fn replace_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &FunctionSpec,
        expected: Option<u64>,
    ) -> Result<FunctionRecord> {
        let spec_json = serde_json::to_string(spec).map_err(json_err)?;
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        let row = sqlx::query("SELECT resource_version FROM functions WHERE namespace = ? AND name = ?")
            .bind(namespace)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: "function", name: name.into() })?;
        let current = row.try_get::<i64, _>(0).map_err(db_err)? as u64;
        if let Some(expected) = expected.filter(|e| *e != current) {
            return Err(Error::Stale { expected: expected.to_string(), current: current.to_string() });
        }
        sqlx::query("UPDATE functions SET spec = ?, resource_version = ?, updated_at = ? WHERE namespace = ? AND name = ? AND resource_version = ?")
            .bind(spec_json)
            .bind((current + 1) as i64)
            .bind(ts(now()))
            .bind(namespace)
            .bind(name)
            .bind(current as i64)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        self.get_function(namespace, name).await
    }

    async fn update_status(
        &self,
        namespace: &str,
        name: &str,
        status: &FunctionStatus,
        active: Option<u32>,
    ) -> Result<()> {
        let status = serde_json::to_string(status).map_err(json_err)?;
        let res = sqlx::query("UPDATE functions SET status = ?, active_version = ? WHERE namespace = ? AND name = ?")
            .bind(status)
            .bind(active.map(i64::from))
            .bind(namespace)
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        if res.rows_affected() == 0 {
            return Err(Error::NotFound { kind: "function", name: name.into() });
        }
        Ok(())
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        let res = sqlx::query("DELETE FROM functions WHERE namespace = ? AND name = ?")
            .bind(namespace)
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        if res.rows_affected() == 0 {
            return Err(Error::NotFound { kind: "function", name: name.into() });
        }
        sqlx::query("DELETE FROM versions WHERE namespace = ? AND function = ?")
            .bind(namespace)
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)
    }

    async fn add_version(
        &self,
        namespace: &str,
        function: &str,
        sha256: &str,
        size_bytes: u64,
        runtime: Runtime,
    ) -> Result<(VersionRecord, bool)> {
        self.exists(namespace, function).await?;
        // One statement, so numbering is atomic; the unique (namespace, function, sha256)
        // makes the same bytes map to the same version.
        let res = sqlx::query(
            "INSERT INTO versions (namespace, function, version, sha256, size_bytes, runtime, phase, created_at) \
             SELECT ?1, ?2, COALESCE(MAX(version), 0) + 1, ?3, ?4, ?5, 'Building', ?6 FROM versions WHERE namespace = ?1 AND function = ?2 \
             ON CONFLICT (namespace, function, sha256) DO NOTHING",
        )
        .bind(namespace)
        .bind(function)
        .bind(sha256)
        .bind(size_bytes as i64)
        .bind(runtime.name())
        .bind(ts(now()))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        let row = sqlx::query(select_versions!("WHERE namespace = ? AND function = ? AND sha256 = ?"))
            .bind(namespace)
            .bind(function)
            .bind(sha256)
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok((Self::version_from_row(&row)?, res.rows_affected() == 1))
    }

    async fn get_version(&self, namespace: &str, function: &str, version: u32) -> Result<VersionRecord> {
        let row = sqlx::query(select_versions!("WHERE namespace = ? AND function = ? AND version = ?"))
            .bind(namespace)
            .bind(function)
            .bind(i64::from(version))
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: "version", name: format!("{function}/{version}") })?;
        Self::version_from_row(&row)
    }

    async fn list_versions(&self, namespace: &str, function: &str) -> Result<Vec<VersionRecord>> {
        self.exists(namespace, function).await?;
        let rows = sqlx::query(select_versions!("WHERE namespace = ? AND function = ? ORDER BY version"))
            .bind(namespace)
            .bind(function)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(Self::version_from_row).collect()
    }

    async fn set_version_build(
        &self,
        namespace: &str,
        function: &str,
        version: u32,
        phase: VersionPhase,
        message: &str,
        log: &str,
    ) -> Result<()> {
        sqlx::query("UPDATE versions SET phase = ?, message = ?, build_log = ? WHERE namespace = ? AND function = ? AND version = ?")
            .bind(phase.as_str())
            .bind(message)
            .bind(log)
            .bind(namespace)
            .bind(function)
            .bind(i64::from(version))
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn build_log(&self, namespace: &str, function: &str, version: u32) -> Result<String> {
        let row = sqlx::query("SELECT build_log FROM versions WHERE namespace = ? AND function = ? AND version = ?")
            .bind(namespace)
            .bind(function)
            .bind(i64::from(version))
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: "version", name: format!("{function}/{version}") })?;
        row.try_get(0).map_err(db_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn registry() -> (tempfile::TempDir, SqliteRegistry) {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = SqliteRegistry::open(&dir.path().join("sless.db")).await.expect("open");
        (dir, reg)
    }

    fn record(name: &str) -> FunctionRecord {
        let (_, spec) =
            FunctionSpec::from_json(&json!({"runtime": "python3.11", "entrypoint": "main.handler"})).expect("spec");
        FunctionRecord {
            namespace: "default".into(),
            name: name.into(),
            spec,
            resource_version: 1,
            active_version: None,
            status: FunctionStatus::pending(now()),
            created_at: now(),
            updated_at: now(),
        }
    }

    #[tokio::test]
    async fn create_get_list_conflict() {
        let (_d, reg) = registry().await;
        reg.create_function(&record("b")).await.expect("create");
        reg.create_function(&record("a")).await.expect("create");
        assert!(matches!(reg.create_function(&record("a")).await, Err(Error::AlreadyExists { .. })));
        let got = reg.get_function("default", "a").await.expect("get");
        assert_eq!(got.spec, record("a").spec);
        let names: Vec<_> = reg
            .list_functions("default", &Page { limit: 10, after: None })
            .await
            .expect("list")
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        let after: Vec<_> = reg
            .list_functions("default", &Page { limit: 10, after: Some("a".into()) })
            .await
            .expect("list")
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(after, ["b"]);
        assert!(reg.list_functions("other", &Page { limit: 10, after: None }).await.expect("list").is_empty());
    }

    #[tokio::test]
    async fn replace_checks_resource_version() {
        let (_d, reg) = registry().await;
        reg.create_function(&record("f")).await.expect("create");
        let mut spec = record("f").spec;
        spec.memory_mb = 256;
        let updated = reg.replace_spec("default", "f", &spec, Some(1)).await.expect("replace");
        assert_eq!((updated.resource_version, updated.spec.memory_mb), (2, 256));
        assert!(matches!(reg.replace_spec("default", "f", &spec, Some(1)).await, Err(Error::Stale { .. })));
        assert!(matches!(reg.replace_spec("default", "nope", &spec, None).await, Err(Error::NotFound { .. })));
    }

    #[tokio::test]
    async fn versions_are_numbered_and_deduplicated_by_sha() {
        let (_d, reg) = registry().await;
        reg.create_function(&record("f")).await.expect("create");
        let (v1, created) = reg.add_version("default", "f", "aa", 10, Runtime::Python311).await.expect("v1");
        assert_eq!((v1.version, created), (1, true));
        let (v2, created) = reg.add_version("default", "f", "bb", 10, Runtime::Python311).await.expect("v2");
        assert_eq!((v2.version, created), (2, true));
        let (again, created) = reg.add_version("default", "f", "aa", 10, Runtime::Python311).await.expect("same");
        assert_eq!((again.version, created), (1, false));
        reg.set_version_build("default", "f", 2, VersionPhase::Failed, "boom", "log\nboom").await.expect("build");
        assert_eq!(reg.build_log("default", "f", 2).await.expect("log"), "log\nboom");
        assert_eq!(reg.get_version("default", "f", 2).await.expect("get").phase, VersionPhase::Failed);
        assert!(matches!(
            reg.add_version("default", "nope", "aa", 1, Runtime::Python311).await,
            Err(Error::NotFound { .. })
        ));
        reg.delete_function("default", "f").await.expect("delete");
        assert!(matches!(reg.get_version("default", "f", 1).await, Err(Error::NotFound { .. })));
    }
}

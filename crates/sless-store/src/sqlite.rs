//! The registry and the invocation log on SQLite (sqlx, migrations embedded in the binary).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sless_core::invocation::{InvocationQuery, InvocationRecord, Outcome, Retention, Source};
use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{Change, FunctionRecord, InvocationLog, Kind, Page, Registry, VersionRecord};
use sless_core::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};
use sless_core::{Error, Result};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};
use tokio::sync::broadcast;

/// How many change notifications a subscriber may fall behind before it lags.
const CHANGE_CAPACITY: usize = 1024;

/// Rows per multi-row `INSERT` of invocations (16 columns each: 800 variables, far below
/// SQLite's limit).
const INVOCATION_CHUNK: usize = 50;

/// The registry and the invocation log in one SQLite file (WAL mode).
#[derive(Debug, Clone)]
pub struct SqliteRegistry {
    pool: SqlitePool,
    changes: broadcast::Sender<Change>,
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

/// A `u64` as SQLite's integer (saturating; the values stored never come close).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored integer as `u64` (negative values, which are never written, read as 0).
fn uint(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The SQL of one table of namespaced resources with a JSON spec and status (triggers, jobs).
struct ResourceSql {
    /// The resource's name in errors.
    kind: &'static str,
    /// The kind sent to subscribers.
    change: Kind,
    insert: &'static str,
    get: &'static str,
    list: &'static str,
    all: &'static str,
    /// Binds: spec, updated_at, namespace, name, expected resource_version (or NULL).
    replace: &'static str,
    resource_version: &'static str,
    status: &'static str,
    delete: &'static str,
}

/// The SQL of a resource table; static strings only (sqlx refuses built ones).
macro_rules! resource_sql {
    ($table:literal, $kind:literal, $change:expr) => {
        ResourceSql {
            kind: $kind,
            change: $change,
            insert: concat!(
                "INSERT INTO ",
                $table,
                " (namespace, name, spec, resource_version, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            get: concat!("SELECT * FROM ", $table, " WHERE namespace = ? AND name = ?"),
            list: concat!("SELECT * FROM ", $table, " WHERE namespace = ? AND name > ? ORDER BY name LIMIT ?"),
            all: concat!("SELECT * FROM ", $table, " ORDER BY namespace, name"),
            replace: concat!(
                "UPDATE ",
                $table,
                " SET spec = ?1, resource_version = resource_version + 1, updated_at = ?2 \
                 WHERE namespace = ?3 AND name = ?4 AND (?5 IS NULL OR resource_version = ?5) RETURNING *"
            ),
            resource_version: concat!("SELECT resource_version FROM ", $table, " WHERE namespace = ? AND name = ?"),
            status: concat!("UPDATE ", $table, " SET status = ? WHERE namespace = ? AND name = ?"),
            delete: concat!("DELETE FROM ", $table, " WHERE namespace = ? AND name = ?"),
        }
    };
}

const TRIGGERS: ResourceSql = resource_sql!("triggers", "trigger", Kind::Trigger);
const JOBS: ResourceSql = resource_sql!("jobs", "job", Kind::Job);

/// A row of a resource table with the spec and status still JSON text.
struct Stored {
    namespace: String,
    name: String,
    spec: String,
    resource_version: u64,
    status: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl Stored {
    fn from_row(row: &SqliteRow) -> Result<Stored> {
        Ok(Stored {
            namespace: row.try_get("namespace").map_err(db_err)?,
            name: row.try_get("name").map_err(db_err)?,
            spec: row.try_get("spec").map_err(db_err)?,
            resource_version: uint(row.try_get("resource_version").map_err(db_err)?),
            status: row.try_get("status").map_err(db_err)?,
            created_at: parse_time(row.try_get("created_at").map_err(db_err)?)?,
            updated_at: parse_time(row.try_get("updated_at").map_err(db_err)?)?,
        })
    }

    fn into_trigger(self) -> Result<TriggerRecord> {
        Ok(TriggerRecord {
            spec: serde_json::from_str(&self.spec).map_err(json_err)?,
            status: serde_json::from_str(&self.status).map_err(json_err)?,
            namespace: self.namespace,
            name: self.name,
            resource_version: self.resource_version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }

    fn into_job(self) -> Result<JobRecord> {
        Ok(JobRecord {
            spec: serde_json::from_str(&self.spec).map_err(json_err)?,
            status: serde_json::from_str(&self.status).map_err(json_err)?,
            namespace: self.namespace,
            name: self.name,
            resource_version: self.resource_version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
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
        let (changes, _) = broadcast::channel(CHANGE_CAPACITY);
        Ok(SqliteRegistry { pool, changes })
    }

    /// Tells subscribers that a resource was written; nobody listening is fine.
    fn notify(&self, kind: Kind, namespace: &str, name: &str) {
        let _ = self.changes.send(Change { kind, namespace: namespace.to_string(), name: name.to_string() });
    }

    async fn insert_resource(&self, sql: &ResourceSql, s: &Stored) -> Result<()> {
        let res = sqlx::query(sql.insert)
            .bind(&s.namespace)
            .bind(&s.name)
            .bind(&s.spec)
            .bind(int(s.resource_version))
            .bind(&s.status)
            .bind(ts(s.created_at))
            .bind(ts(s.updated_at))
            .execute(&self.pool)
            .await;
        match res {
            Ok(_) => {
                self.notify(sql.change, &s.namespace, &s.name);
                Ok(())
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(Error::AlreadyExists { kind: sql.kind, name: s.name.clone() })
            }
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_resource(&self, sql: &ResourceSql, namespace: &str, name: &str) -> Result<Stored> {
        let row = sqlx::query(sql.get)
            .bind(namespace)
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: sql.kind, name: name.into() })?;
        Stored::from_row(&row)
    }

    async fn list_resources(&self, sql: &ResourceSql, namespace: &str, page: &Page) -> Result<Vec<Stored>> {
        let rows = sqlx::query(sql.list)
            .bind(namespace)
            .bind(page.after.as_deref().unwrap_or(""))
            .bind(i64::from(page.limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(Stored::from_row).collect()
    }

    async fn all_resources(&self, sql: &ResourceSql) -> Result<Vec<Stored>> {
        let rows = sqlx::query(sql.all).fetch_all(&self.pool).await.map_err(db_err)?;
        rows.iter().map(Stored::from_row).collect()
    }

    /// One conditional `UPDATE … RETURNING`; when it matches nothing, a second look tells
    /// `NotFound` from `Stale`.
    async fn replace_resource(
        &self,
        sql: &ResourceSql,
        namespace: &str,
        name: &str,
        spec: String,
        expected: Option<u64>,
    ) -> Result<Stored> {
        let row = sqlx::query(sql.replace)
            .bind(spec)
            .bind(ts(now()))
            .bind(namespace)
            .bind(name)
            .bind(expected.map(int))
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        if let Some(row) = row {
            let stored = Stored::from_row(&row)?;
            self.notify(sql.change, namespace, name);
            return Ok(stored);
        }
        let current = sqlx::query(sql.resource_version)
            .bind(namespace)
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: sql.kind, name: name.into() })?;
        let current = uint(current.try_get(0).map_err(db_err)?);
        Err(Error::Stale {
            expected: expected.map(|e| e.to_string()).unwrap_or_default(),
            current: current.to_string(),
        })
    }

    async fn update_resource_status(
        &self,
        sql: &ResourceSql,
        namespace: &str,
        name: &str,
        status: String,
    ) -> Result<()> {
        let res = sqlx::query(sql.status)
            .bind(status)
            .bind(namespace)
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        if res.rows_affected() == 0 {
            return Err(Error::NotFound { kind: sql.kind, name: name.into() });
        }
        self.notify(sql.change, namespace, name);
        Ok(())
    }

    async fn delete_resource(&self, sql: &ResourceSql, namespace: &str, name: &str) -> Result<()> {
        let res = sqlx::query(sql.delete).bind(namespace).bind(name).execute(&self.pool).await.map_err(db_err)?;
        if res.rows_affected() == 0 {
            return Err(Error::NotFound { kind: sql.kind, name: name.into() });
        }
        self.notify(sql.change, namespace, name);
        Ok(())
    }

    fn invocation_from_row(row: &SqliteRow) -> Result<InvocationRecord> {
        let source: String = row.try_get("source").map_err(db_err)?;
        let outcome: String = row.try_get("outcome").map_err(db_err)?;
        let version: Option<i64> = row.try_get("version").map_err(db_err)?;
        let status: i64 = row.try_get("status").map_err(db_err)?;
        Ok(InvocationRecord {
            id: row.try_get("id").map_err(db_err)?,
            namespace: row.try_get("namespace").map_err(db_err)?,
            function: row.try_get("function").map_err(db_err)?,
            version: version.map(|v| u32::try_from(v).unwrap_or(0)),
            source: Source::parse(&source)
                .ok_or_else(|| Error::Internal(format!("stored source {source:?} is unknown")))?,
            source_name: row.try_get("source_name").map_err(db_err)?,
            started_at: parse_time(row.try_get("started_at").map_err(db_err)?)?,
            duration_ms: uint(row.try_get("duration_ms").map_err(db_err)?),
            status: u16::try_from(status).map_err(|_| Error::Internal(format!("stored status {status} is invalid")))?,
            outcome: Outcome::parse(&outcome)
                .ok_or_else(|| Error::Internal(format!("stored outcome {outcome:?} is unknown")))?,
            error_type: row.try_get("error_type").map_err(db_err)?,
            error_message: row.try_get("error_message").map_err(db_err)?,
            request_bytes: uint(row.try_get("request_bytes").map_err(db_err)?),
            response_bytes: uint(row.try_get("response_bytes").map_err(db_err)?),
            cold_start: row.try_get("cold_start").map_err(db_err)?,
            logs: serde_json::from_str(row.try_get("logs").map_err(db_err)?).map_err(json_err)?,
        })
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
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

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
            Ok(_) => {
                self.notify(Kind::Function, &r.namespace, &r.name);
                Ok(())
            }
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
        self.notify(Kind::Function, namespace, name);
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
        self.notify(Kind::Function, namespace, name);
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
        tx.commit().await.map_err(db_err)?;
        self.notify(Kind::Function, namespace, name);
        Ok(())
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
        let created = res.rows_affected() == 1;
        if created {
            self.notify(Kind::Function, namespace, function);
        }
        Ok((Self::version_from_row(&row)?, created))
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
        let res = sqlx::query("UPDATE versions SET phase = ?, message = ?, build_log = ? WHERE namespace = ? AND function = ? AND version = ?")
            .bind(phase.as_str())
            .bind(message)
            .bind(log)
            .bind(namespace)
            .bind(function)
            .bind(i64::from(version))
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        if res.rows_affected() > 0 {
            self.notify(Kind::Function, namespace, function);
        }
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

    async fn create_trigger(&self, r: &TriggerRecord) -> Result<()> {
        let stored = Stored {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            spec: serde_json::to_string(&r.spec).map_err(json_err)?,
            resource_version: r.resource_version,
            status: serde_json::to_string(&r.status).map_err(json_err)?,
            created_at: r.created_at,
            updated_at: r.updated_at,
        };
        self.insert_resource(&TRIGGERS, &stored).await
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<TriggerRecord> {
        self.get_resource(&TRIGGERS, namespace, name).await?.into_trigger()
    }

    async fn list_triggers(&self, namespace: &str, page: &Page) -> Result<Vec<TriggerRecord>> {
        self.list_resources(&TRIGGERS, namespace, page).await?.into_iter().map(Stored::into_trigger).collect()
    }

    async fn all_triggers(&self) -> Result<Vec<TriggerRecord>> {
        self.all_resources(&TRIGGERS).await?.into_iter().map(Stored::into_trigger).collect()
    }

    async fn replace_trigger_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &TriggerSpec,
        expected: Option<u64>,
    ) -> Result<TriggerRecord> {
        let spec = serde_json::to_string(spec).map_err(json_err)?;
        self.replace_resource(&TRIGGERS, namespace, name, spec, expected).await?.into_trigger()
    }

    async fn update_trigger_status(&self, namespace: &str, name: &str, status: &TriggerStatus) -> Result<()> {
        let status = serde_json::to_string(status).map_err(json_err)?;
        self.update_resource_status(&TRIGGERS, namespace, name, status).await
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_resource(&TRIGGERS, namespace, name).await
    }

    async fn create_job(&self, r: &JobRecord) -> Result<()> {
        let stored = Stored {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            spec: serde_json::to_string(&r.spec).map_err(json_err)?,
            resource_version: r.resource_version,
            status: serde_json::to_string(&r.status).map_err(json_err)?,
            created_at: r.created_at,
            updated_at: r.updated_at,
        };
        self.insert_resource(&JOBS, &stored).await
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<JobRecord> {
        self.get_resource(&JOBS, namespace, name).await?.into_job()
    }

    async fn list_jobs(&self, namespace: &str, page: &Page) -> Result<Vec<JobRecord>> {
        self.list_resources(&JOBS, namespace, page).await?.into_iter().map(Stored::into_job).collect()
    }

    async fn all_jobs(&self) -> Result<Vec<JobRecord>> {
        self.all_resources(&JOBS).await?.into_iter().map(Stored::into_job).collect()
    }

    async fn replace_job_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &JobSpec,
        expected: Option<u64>,
    ) -> Result<JobRecord> {
        let spec = serde_json::to_string(spec).map_err(json_err)?;
        self.replace_resource(&JOBS, namespace, name, spec, expected).await?.into_job()
    }

    async fn update_job_status(&self, namespace: &str, name: &str, status: &JobStatus) -> Result<()> {
        let status = serde_json::to_string(status).map_err(json_err)?;
        self.update_resource_status(&JOBS, namespace, name, status).await
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_resource(&JOBS, namespace, name).await
    }
}

#[async_trait::async_trait]
impl InvocationLog for SqliteRegistry {
    async fn insert(&self, records: &[InvocationRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        for chunk in records.chunks(INVOCATION_CHUNK) {
            let logs = chunk
                .iter()
                .map(|r| serde_json::to_string(&r.logs))
                .collect::<Result<Vec<_>, _>>()
                .map_err(json_err)?;
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO invocations (id, namespace, function, version, source, source_name, started_at, \
                 duration_ms, status, outcome, error_type, error_message, request_bytes, response_bytes, cold_start, logs) ",
            );
            qb.push_values(chunk.iter().zip(logs), |mut b, (r, logs)| {
                b.push_bind(r.id.as_str())
                    .push_bind(r.namespace.as_str())
                    .push_bind(r.function.as_str())
                    .push_bind(r.version.map(i64::from))
                    .push_bind(r.source.as_str())
                    .push_bind(r.source_name.as_deref())
                    .push_bind(ts(r.started_at))
                    .push_bind(int(r.duration_ms))
                    .push_bind(i64::from(r.status))
                    .push_bind(r.outcome.as_str())
                    .push_bind(r.error_type.as_deref())
                    .push_bind(r.error_message.as_deref())
                    .push_bind(int(r.request_bytes))
                    .push_bind(int(r.response_bytes))
                    .push_bind(r.cold_start)
                    .push_bind(logs);
            });
            // A batch retried after a partial failure stores each record once.
            qb.push(" ON CONFLICT (id) DO NOTHING");
            qb.build().execute(&mut *tx).await.map_err(db_err)?;
        }
        tx.commit().await.map_err(db_err)
    }

    async fn list(&self, namespace: &str, query: &InvocationQuery) -> Result<Vec<InvocationRecord>> {
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT * FROM invocations WHERE namespace = ");
        qb.push_bind(namespace);
        if let Some(function) = &query.function {
            qb.push(" AND function = ").push_bind(function.as_str());
        }
        if !query.outcomes.is_empty() {
            qb.push(" AND outcome IN (");
            let mut list = qb.separated(", ");
            for outcome in &query.outcomes {
                list.push_bind(outcome.as_str());
            }
            qb.push(")");
        }
        if let Some(since) = query.since {
            qb.push(" AND started_at >= ").push_bind(ts(since));
        }
        if let Some(until) = query.until {
            qb.push(" AND started_at < ").push_bind(ts(until));
        }
        if let Some(before) = &query.before_id {
            qb.push(" AND id < ").push_bind(before.as_str());
        }
        qb.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(query.limit));
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db_err)?;
        rows.iter().map(Self::invocation_from_row).collect()
    }

    async fn get(&self, namespace: &str, id: &str) -> Result<InvocationRecord> {
        let row = sqlx::query("SELECT * FROM invocations WHERE namespace = ? AND id = ?")
            .bind(namespace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: "invocation", name: id.into() })?;
        Self::invocation_from_row(&row)
    }

    async fn prune(&self, retention: &Retention, now: DateTime<Utc>) -> Result<u64> {
        // An age too large to subtract keeps everything ("" sorts before every timestamp).
        let cutoff = TimeDelta::try_seconds(int(retention.max_age_sec))
            .and_then(|age| now.checked_sub_signed(age))
            .map(ts)
            .unwrap_or_default();
        let res = sqlx::query(
            "DELETE FROM invocations WHERE started_at < ?1 OR id IN (\
                SELECT id FROM (\
                    SELECT id, ROW_NUMBER() OVER (PARTITION BY namespace, function ORDER BY id DESC) AS n FROM invocations\
                ) WHERE n > ?2)",
        )
        .bind(cutoff)
        .bind(int(retention.max_per_function))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(res.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sless_core::job::JobPhase;
    use sless_core::trigger::TriggerPhase;

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

    /// A fixed time with whole milliseconds (what the database keeps), plus `secs` seconds.
    fn at(secs: i64) -> DateTime<Utc> {
        parse_time("2024-05-01T12:00:00.123Z").expect("time") + TimeDelta::seconds(secs)
    }

    fn any_schedule(_: &str, _: &str) -> Result<()> {
        Ok(())
    }

    fn trigger(name: &str) -> TriggerRecord {
        let (_, spec) =
            TriggerSpec::from_json(&json!({"function": "f", "type": "cron", "schedule": "@hourly"}), any_schedule)
                .expect("spec");
        TriggerRecord {
            namespace: "default".into(),
            name: name.into(),
            spec,
            resource_version: 1,
            status: TriggerStatus::new(),
            created_at: at(0),
            updated_at: at(0),
        }
    }

    fn job(name: &str) -> JobRecord {
        let (_, spec) = JobSpec::from_json(&json!({"function": "f", "run_id": 1, "payload": {"a": 1}})).expect("spec");
        JobRecord {
            namespace: "default".into(),
            name: name.into(),
            spec,
            resource_version: 1,
            status: JobStatus::new(),
            created_at: at(0),
            updated_at: at(0),
        }
    }

    fn page(limit: u32, after: Option<&str>) -> Page {
        Page { limit, after: after.map(String::from) }
    }

    #[tokio::test]
    async fn triggers_crud() {
        let (_d, reg) = registry().await;
        for name in ["c", "a", "b"] {
            reg.create_trigger(&trigger(name)).await.expect("create");
        }
        let mut other = trigger("z");
        other.namespace = "other".into();
        reg.create_trigger(&other).await.expect("create other");
        assert!(matches!(reg.create_trigger(&trigger("a")).await, Err(Error::AlreadyExists { kind: "trigger", .. })));
        assert_eq!(reg.get_trigger("default", "a").await.expect("get"), trigger("a"));
        assert!(matches!(reg.get_trigger("default", "nope").await, Err(Error::NotFound { kind: "trigger", .. })));

        let names = |v: Vec<TriggerRecord>| v.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(reg.list_triggers("default", &page(10, None)).await.expect("list")), ["a", "b", "c"]);
        assert_eq!(names(reg.list_triggers("default", &page(1, None)).await.expect("list")), ["a"]);
        assert_eq!(names(reg.list_triggers("default", &page(1, Some("a"))).await.expect("list")), ["b"]);
        assert_eq!(
            names(reg.list_triggers("default", &page(10, Some("c"))).await.expect("list")),
            Vec::<String>::new()
        );
        assert_eq!(names(reg.list_triggers("other", &page(10, None)).await.expect("list")), ["z"]);
        let all: Vec<_> = reg.all_triggers().await.expect("all").into_iter().map(|t| (t.namespace, t.name)).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(all[3], ("other".to_string(), "z".to_string()));

        // Replacing the spec bumps resource_version and updated_at.
        let mut spec = trigger("a").spec;
        spec.enabled = false;
        let replaced = reg.replace_trigger_spec("default", "a", &spec, Some(1)).await.expect("replace");
        assert_eq!((replaced.resource_version, replaced.spec.enabled), (2, false));
        assert!(replaced.updated_at > at(0));
        assert_eq!(replaced.created_at, at(0));
        assert_eq!(reg.get_trigger("default", "a").await.expect("get"), replaced);
        assert!(matches!(
            reg.replace_trigger_spec("default", "a", &spec, Some(1)).await,
            Err(Error::Stale { expected, current }) if expected == "1" && current == "2"
        ));
        assert_eq!(reg.replace_trigger_spec("default", "a", &spec, None).await.expect("replace").resource_version, 3);
        assert!(matches!(
            reg.replace_trigger_spec("default", "nope", &spec, None).await,
            Err(Error::NotFound { kind: "trigger", .. })
        ));
        assert!(matches!(
            reg.replace_trigger_spec("default", "nope", &spec, Some(1)).await,
            Err(Error::NotFound { kind: "trigger", .. })
        ));

        // A status update keeps resource_version.
        let status = TriggerStatus {
            phase: TriggerPhase::Active,
            message: "firing".into(),
            last_fired: Some(at(60)),
            next_fire: Some(at(3600)),
            ..TriggerStatus::new()
        };
        reg.update_trigger_status("default", "a", &status).await.expect("status");
        let got = reg.get_trigger("default", "a").await.expect("get");
        assert_eq!((got.status, got.resource_version), (status.clone(), 3));
        assert!(matches!(
            reg.update_trigger_status("default", "nope", &status).await,
            Err(Error::NotFound { kind: "trigger", .. })
        ));

        reg.delete_trigger("default", "a").await.expect("delete");
        assert!(matches!(reg.get_trigger("default", "a").await, Err(Error::NotFound { .. })));
        assert!(matches!(reg.delete_trigger("default", "a").await, Err(Error::NotFound { kind: "trigger", .. })));
        assert_eq!(names(reg.list_triggers("default", &page(10, None)).await.expect("list")), ["b", "c"]);
    }

    #[tokio::test]
    async fn jobs_crud() {
        let (_d, reg) = registry().await;
        for name in ["b", "a"] {
            reg.create_job(&job(name)).await.expect("create");
        }
        assert!(matches!(reg.create_job(&job("b")).await, Err(Error::AlreadyExists { kind: "job", .. })));
        assert_eq!(reg.get_job("default", "b").await.expect("get"), job("b"));
        assert!(matches!(reg.get_job("default", "nope").await, Err(Error::NotFound { kind: "job", .. })));

        let names = |v: Vec<JobRecord>| v.into_iter().map(|j| j.name).collect::<Vec<_>>();
        assert_eq!(names(reg.list_jobs("default", &page(10, None)).await.expect("list")), ["a", "b"]);
        assert_eq!(names(reg.list_jobs("default", &page(1, Some("a"))).await.expect("list")), ["b"]);
        assert!(reg.list_jobs("other", &page(10, None)).await.expect("list").is_empty());
        assert_eq!(names(reg.all_jobs().await.expect("all")), ["a", "b"]);

        let mut spec = job("a").spec;
        spec.run_id = 2;
        let replaced = reg.replace_job_spec("default", "a", &spec, Some(1)).await.expect("replace");
        assert_eq!((replaced.resource_version, replaced.spec.run_id), (2, 2));
        assert!(replaced.updated_at > at(0));
        assert!(matches!(reg.replace_job_spec("default", "a", &spec, Some(1)).await, Err(Error::Stale { .. })));
        assert!(matches!(
            reg.replace_job_spec("default", "nope", &spec, None).await,
            Err(Error::NotFound { kind: "job", .. })
        ));

        let status = JobStatus { phase: JobPhase::Running, last_run_id: Some(2), ..JobStatus::new() };
        reg.update_job_status("default", "a", &status).await.expect("status");
        let got = reg.get_job("default", "a").await.expect("get");
        assert_eq!((got.status, got.resource_version), (status.clone(), 2));
        assert!(matches!(reg.update_job_status("default", "nope", &status).await, Err(Error::NotFound { .. })));

        reg.delete_job("default", "a").await.expect("delete");
        assert!(matches!(reg.get_job("default", "a").await, Err(Error::NotFound { .. })));
        assert!(matches!(reg.delete_job("default", "a").await, Err(Error::NotFound { kind: "job", .. })));
        assert_eq!(names(reg.all_jobs().await.expect("all")), ["b"]);
    }

    #[tokio::test]
    async fn every_write_is_announced() {
        let (_d, reg) = registry().await;
        let mut rx = reg.subscribe();
        let change = |kind, name: &str| Change { kind, namespace: "default".into(), name: name.into() };

        reg.create_function(&record("f")).await.expect("create");
        assert!(reg.create_function(&record("f")).await.is_err()); // failed writes say nothing
        reg.replace_spec("default", "f", &record("f").spec, None).await.expect("replace");
        reg.update_status("default", "f", &FunctionStatus::pending(now()), None).await.expect("status");
        reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("version");
        reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("same version");
        reg.set_version_build("default", "f", 1, VersionPhase::Ready, "", "ok").await.expect("build");
        reg.delete_function("default", "f").await.expect("delete");

        reg.create_trigger(&trigger("t")).await.expect("create");
        reg.replace_trigger_spec("default", "t", &trigger("t").spec, None).await.expect("replace");
        reg.update_trigger_status("default", "t", &TriggerStatus::new()).await.expect("status");
        assert!(reg.update_trigger_status("default", "nope", &TriggerStatus::new()).await.is_err());
        reg.delete_trigger("default", "t").await.expect("delete");

        reg.create_job(&job("j")).await.expect("create");
        reg.replace_job_spec("default", "j", &job("j").spec, None).await.expect("replace");
        reg.update_job_status("default", "j", &JobStatus::new()).await.expect("status");
        reg.delete_job("default", "j").await.expect("delete");

        let mut got = vec![];
        while let Ok(c) = rx.try_recv() {
            got.push(c);
        }
        let mut want = vec![change(Kind::Function, "f"); 6];
        want.extend(vec![change(Kind::Trigger, "t"); 4]);
        want.extend(vec![change(Kind::Job, "j"); 4]);
        assert_eq!(got, want);
    }

    /// Invocation `i`: started `i` seconds after `at(0)`, with an id that sorts by `i`.
    fn invocation(i: u64, function: &str) -> InvocationRecord {
        let failed = i.is_multiple_of(3);
        InvocationRecord {
            id: format!("{:012x}-7000-8000-{:012x}", 0x0190_0000_0000 + i * 1000, i),
            namespace: "default".into(),
            function: function.into(),
            version: (!i.is_multiple_of(5)).then_some(3),
            source: if i.is_multiple_of(2) { Source::Invoke } else { Source::Cron },
            source_name: (!i.is_multiple_of(2)).then(|| "tick".to_string()),
            started_at: at(i64::try_from(i).expect("i")),
            duration_ms: i * 7,
            status: if failed { 502 } else { 200 },
            outcome: if failed { Outcome::Error } else { Outcome::Ok },
            error_type: failed.then(|| "ValueError".to_string()),
            error_message: failed.then(|| format!("bad {i}")),
            request_bytes: i,
            response_bytes: 2 * i,
            cold_start: i.is_multiple_of(4),
            logs: vec![format!("line {i}"), "second \"quoted\" line".into()],
        }
    }

    /// 120 records, `a` for even `i` and `b` for odd, in one call.
    async fn with_invocations() -> (tempfile::TempDir, SqliteRegistry, Vec<InvocationRecord>) {
        let (d, reg) = registry().await;
        let records: Vec<_> = (0..120).map(|i| invocation(i, if i.is_multiple_of(2) { "a" } else { "b" })).collect();
        reg.insert(&records).await.expect("insert");
        let mut elsewhere = invocation(1000, "a");
        elsewhere.namespace = "other".into();
        reg.insert(&[elsewhere]).await.expect("insert other");
        reg.insert(&[]).await.expect("insert nothing");
        (d, reg, records)
    }

    fn query(function: Option<&str>, limit: u32) -> InvocationQuery {
        InvocationQuery { function: function.map(String::from), limit, ..InvocationQuery::default() }
    }

    fn ids(v: &[InvocationRecord]) -> Vec<String> {
        v.iter().map(|r| r.id.clone()).collect()
    }

    #[tokio::test]
    async fn invocations_list_newest_first_with_cursor() {
        let (_d, reg, records) = with_invocations().await;
        let all = reg.list("default", &query(None, 1000)).await.expect("list");
        let mut want = ids(&records);
        want.reverse();
        assert_eq!(ids(&all), want);
        assert_eq!(all[0], records[119]);

        // Paging through one function collects each of its records exactly once, newest first.
        let mut seen = vec![];
        let mut q = query(Some("a"), 7);
        loop {
            let page = reg.list("default", &q).await.expect("page");
            assert!(page.len() <= 7);
            let Some(last) = page.last() else { break };
            q.before_id = Some(last.id.clone());
            seen.extend(page);
        }
        let mut want: Vec<_> = records.iter().filter(|r| r.function == "a").map(|r| r.id.clone()).collect();
        want.reverse();
        assert_eq!(ids(&seen), want);
        assert_eq!(seen.len(), 60);

        assert!(reg.list("default", &query(Some("nope"), 10)).await.expect("list").is_empty());
        assert_eq!(ids(&reg.list("other", &query(None, 10)).await.expect("list")).len(), 1);
    }

    #[tokio::test]
    async fn invocations_filters() {
        let (_d, reg, _) = with_invocations().await;
        let errors = InvocationQuery { outcomes: vec![Outcome::Error], ..query(None, 1000) };
        let got = reg.list("default", &errors).await.expect("list");
        assert_eq!(got.len(), 40);
        assert!(got.iter().all(|r| r.outcome == Outcome::Error));
        let two = InvocationQuery { outcomes: vec![Outcome::Timeout, Outcome::Error], ..query(Some("a"), 1000) };
        let got = reg.list("default", &two).await.expect("list");
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|r| r.outcome == Outcome::Error && r.function == "a"));
        let none = InvocationQuery { outcomes: vec![Outcome::Oom], ..query(None, 1000) };
        assert!(reg.list("default", &none).await.expect("list").is_empty());

        let window = InvocationQuery { since: Some(at(10)), until: Some(at(20)), ..query(None, 1000) };
        let got = reg.list("default", &window).await.expect("list");
        let starts: Vec<_> = got.iter().map(|r| r.started_at).collect();
        assert_eq!(starts, (10..20).rev().map(at).collect::<Vec<_>>());
        let since = InvocationQuery { since: Some(at(115)), ..query(Some("b"), 1000) };
        let got = reg.list("default", &since).await.expect("list");
        assert_eq!(got.iter().map(|r| r.started_at).collect::<Vec<_>>(), [at(119), at(117), at(115)]);
    }

    #[tokio::test]
    async fn invocation_get_round_trips() {
        let (_d, reg, records) = with_invocations().await;
        for i in [0, 5, 7] {
            assert_eq!(reg.get("default", &records[i].id).await.expect("get"), records[i]);
        }
        assert!(matches!(reg.get("default", "nope").await, Err(Error::NotFound { kind: "invocation", .. })));
        assert!(matches!(reg.get("other", &records[0].id).await, Err(Error::NotFound { .. })));
        // Inserting the same records again changes nothing.
        reg.insert(&records[..3]).await.expect("again");
        assert_eq!(reg.list("default", &query(None, 1000)).await.expect("list").len(), 120);
    }

    #[tokio::test]
    async fn invocations_prune_by_age_and_count() {
        let (_d, reg, records) = with_invocations().await;
        let keep_all = Retention { max_age_sec: 1_000_000, max_per_function: 10_000 };
        assert_eq!(reg.prune(&keep_all, at(200)).await.expect("prune"), 0);
        let forever = Retention { max_age_sec: u64::MAX, max_per_function: u64::MAX };
        assert_eq!(reg.prune(&forever, at(200)).await.expect("prune"), 0);

        // By age: older than 100 s before at(130), i.e. started before at(30).
        let by_age = Retention { max_age_sec: 100, max_per_function: 10_000 };
        assert_eq!(reg.prune(&by_age, at(130)).await.expect("prune"), 30);
        let left = reg.list("default", &query(None, 1000)).await.expect("list");
        assert_eq!(left.len(), 90);
        assert!(left.iter().all(|r| r.started_at >= at(30)));

        // By count: the newest 10 of each function (and the other namespace's one) stay.
        let by_count = Retention { max_age_sec: 1_000_000, max_per_function: 10 };
        assert_eq!(reg.prune(&by_count, at(130)).await.expect("prune"), 70);
        for function in ["a", "b"] {
            let got = reg.list("default", &query(Some(function), 1000)).await.expect("list");
            let mut want: Vec<_> = records.iter().filter(|r| r.function == function).map(|r| r.id.clone()).collect();
            want.reverse();
            want.truncate(10);
            assert_eq!(ids(&got), want);
        }
        assert_eq!(reg.list("other", &query(None, 10)).await.expect("list").len(), 1);
        assert_eq!(reg.prune(&by_count, at(130)).await.expect("prune"), 0);
    }
}

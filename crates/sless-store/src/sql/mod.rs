//! The registry and the invocation log on SQL: SQLite (one file; the default) or PostgreSQL
//! (production), with migrations embedded in the binary.
//!
//! One implementation serves both databases. The SQL is written once with `$n` placeholders
//! (sqlx's SQLite driver reads them as positions too), rows are read through `FromRow`
//! structs that either driver can fill (`rows`), and `with_pool!` runs one block of code
//! on whichever pool is open. One exception: on SQLite a page of functions is read as one
//! value (`SQLITE_LIST_FUNCTIONS`), which is much faster for long pages.
//!
//! Change notifications go to subscribers in this process at once. On PostgreSQL they also go
//! to the other servers on the same database, through `NOTIFY` on the channel
//! `sless_changes`; one lost while a connection was down is repaired, as any lost
//! notification, by the controllers' periodic resync.

mod listen;
mod rows;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sless_core::invocation::{ColdStart, InvocationQuery, InvocationRecord, Retention};
use sless_core::job::{JobRecord, JobSpec, JobStatus};
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::spec::FunctionSpec;
use sless_core::status::{FunctionStatus, VersionPhase};
use sless_core::traits::{
    Change, ChangeFeed, FunctionRecord, InvocationLog, Kind, Listed, NewFunction, NewJob, NewTrigger, Page, Registry,
    VersionRecord,
};
use sless_core::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};
use sless_core::{Error, Result};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{Connection, QueryBuilder, Row};
use tokio::sync::broadcast;

use rows::{AnyRow, FunctionRow, InvocationRow, ResourceRow, VersionRow, int, to_json, ts};

/// How many change notifications a subscriber may fall behind before it lags.
const CHANGE_CAPACITY: usize = 1024;

/// Rows per multi-row `INSERT` of invocations (16 columns each: 800 parameters, far below
/// either database's limit).
const INVOCATION_CHUNK: usize = 50;

/// How long a query waits for a PostgreSQL connection before it fails (and the API answers
/// 503) while the database is unreachable.
const PG_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the first connection to PostgreSQL may take at start.
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often `add_version` numbers again after another upload took the same number
/// (PostgreSQL runs concurrent uploads side by side; SQLite serialises them).
const NUMBERING_ATTEMPTS: usize = 8;

/// The open connection pool.
#[derive(Debug, Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$p` bound to the open pool (`&SqlitePool` or `&PgPool`): the block is
/// written once and compiled for each driver. Its value must not depend on the driver.
macro_rules! with_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

mod tenants;

/// The registry and the invocation log in SQLite (one file, WAL mode) or PostgreSQL.
#[derive(Debug, Clone)]
pub struct SqlRegistry {
    pool: Pool,
    changes: ChangeFeed,
    /// PostgreSQL: what tells the other servers of this one's changes, and this one of theirs.
    peers: Option<Arc<listen::Peers>>,
}

fn db_err(e: sqlx::Error) -> Error {
    Error::storage(e)
}

/// SQLite: a page of functions (binds: namespace, after, limit) as one text value, a JSON
/// object per function separated by spaces: [`FunctionRow`]'s columns with the stored spec
/// and status embedded as they are; NULL when the page is empty. With a row per function the
/// driver copies every column value out of SQLite and hands each row to the async side, under
/// SQLite's allocator lock; for a page of 1,000 that took longer than everything else the list
/// does. Text is spliced rather than built with `json_object` and `json(spec)`, which parse
/// the stored documents again and took twice as long. The inner query walks the
/// `(namespace, name)` primary key; `group_concat` keeps its order in practice, but SQLite
/// does not promise it, so `functions_from_json` sorts by name.
const SQLITE_LIST_FUNCTIONS: &str = r#"SELECT group_concat(concat(
    '{"namespace":', json_quote(namespace), ',"name":', json_quote(name), ',"spec":', spec,
    ',"resource_version":', resource_version, ',"active_version":', ifnull(active_version, 'null'),
    ',"status":', status, ',"created_at":', json_quote(created_at), ',"updated_at":', json_quote(updated_at), '}'
    ), ' ')
    FROM (SELECT * FROM functions WHERE namespace = $1 AND name > $2 ORDER BY name LIMIT $3)"#;

/// The SQL of one table of namespaced resources with a JSON spec and status.
struct ResourceSql {
    /// The resource's name in errors.
    kind: &'static str,
    /// The kind sent to subscribers.
    change: Kind,
    /// Binds: namespace, name, spec, resource_version, status, created_at, updated_at
    /// (functions: and active_version).
    insert: &'static str,
    get: &'static str,
    list: &'static str,
    all: &'static str,
    /// Binds: spec, updated_at, namespace, name, expected resource_version (or NULL).
    replace: &'static str,
    resource_version: &'static str,
    /// Binds: namespace, name, status (functions: and active_version).
    status: &'static str,
    delete: &'static str,
}

/// The SQL of a resource table; static strings only (sqlx refuses built ones). `$insert` is
/// the column list and values of the `INSERT`, `$set` what a status update sets.
macro_rules! resource_sql {
    ($table:literal, $kind:literal, $change:expr, $insert:literal, $set:literal) => {
        ResourceSql {
            kind: $kind,
            change: $change,
            insert: concat!("INSERT INTO ", $table, " ", $insert),
            get: concat!("SELECT * FROM ", $table, " WHERE namespace = $1 AND name = $2"),
            list: concat!("SELECT * FROM ", $table, " WHERE namespace = $1 AND name > $2 ORDER BY name LIMIT $3"),
            all: concat!("SELECT * FROM ", $table, " ORDER BY namespace, name"),
            replace: concat!(
                "UPDATE ",
                $table,
                " SET spec = $1, resource_version = resource_version + 1, updated_at = $2 \
                 WHERE namespace = $3 AND name = $4 AND ($5 IS NULL OR resource_version = $5) RETURNING *"
            ),
            resource_version: concat!("SELECT resource_version FROM ", $table, " WHERE namespace = $1 AND name = $2"),
            status: concat!("UPDATE ", $table, " SET ", $set, " WHERE namespace = $1 AND name = $2"),
            delete: concat!("DELETE FROM ", $table, " WHERE namespace = $1 AND name = $2"),
        }
    };
}

const FUNCTIONS: ResourceSql = resource_sql!(
    "functions",
    "function",
    Kind::Function,
    "(namespace, name, spec, resource_version, status, created_at, updated_at, active_version) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    "status = $3, active_version = $4"
);
const TRIGGERS: ResourceSql = resource_sql!(
    "triggers",
    "trigger",
    Kind::Trigger,
    "(namespace, name, spec, resource_version, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    "status = $3"
);
const JOBS: ResourceSql = resource_sql!(
    "jobs",
    "job",
    Kind::Job,
    "(namespace, name, spec, resource_version, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    "status = $3"
);

/// Where a page starts: after the name its continue token holds ("" for the first page).
/// Errors: `InvalidField` naming `cursor` for a token this store did not give (not a name):
/// taken as it is, it would list from the start or read as an empty page.
fn after_token(page: &Page) -> Result<&str> {
    match page.continue_token.as_deref() {
        None => Ok(""),
        Some(token) => sless_core::names::validate_name("cursor", token)
            .map(|()| token)
            .map_err(|_| Error::field("cursor", "is not a next_cursor this API gave")),
    }
}

/// The index that allows one http trigger per function (migrations `*_http_trigger_unique.sql`).
const HTTP_TRIGGER_INDEX: &str = "triggers_http_function";

/// The error for a unique violation writing `name`: another http trigger of the same
/// function, or a resource of that name.
fn unique_violation(sql: &ResourceSql, e: &dyn sqlx::error::DatabaseError, name: &str) -> Error {
    // PostgreSQL names the index as the constraint; SQLite names it in the message.
    if e.constraint() == Some(HTTP_TRIGGER_INDEX) || e.message().contains(HTTP_TRIGGER_INDEX) {
        return Error::AlreadyExists {
            kind: "http trigger for this function",
            name: format!("the function of trigger {name} (a function has at most one)"),
        };
    }
    Error::AlreadyExists { kind: sql.kind, name: name.into() }
}

/// A `SELECT` of the version columns (all but the build log), followed by `$tail`.
macro_rules! select_versions {
    ($tail:literal) => {
        concat!(
            "SELECT namespace, function, version, sha256, size_bytes, runtime, phase, message, created_at FROM versions ",
            $tail
        )
    };
}

/// Numbers the new version in the same statement that inserts it; the unique
/// (namespace, function, sha256) makes the same bytes map to the same version.
const ADD_VERSION: &str = "INSERT INTO versions (namespace, function, version, sha256, size_bytes, runtime, phase, created_at) \
     SELECT $1, $2, COALESCE(MAX(version), 0) + 1, $3, $4, $5, 'Building', $6 FROM versions \
     WHERE namespace = $1 AND function = $2 \
     ON CONFLICT (namespace, function, sha256) DO NOTHING";

/// Deletes a version unless it is its function's active one (checked in the same statement).
const DELETE_VERSION: &str = "DELETE FROM versions WHERE namespace = $1 AND function = $2 AND version = $3 \
     AND NOT EXISTS (SELECT 1 FROM functions WHERE namespace = $1 AND name = $2 AND active_version = $3)";

const INSERT_INVOCATIONS: &str = "INSERT INTO invocations (id, namespace, function, version, source, source_name, \
     started_at, duration_ms, status, outcome, error_type, error_message, request_bytes, response_bytes, cold_start, cold_start_kind, logs) ";

/// Deletes records started before `$1` and, per function, all but the newest `$2`.
const PRUNE_INVOCATIONS: &str = "DELETE FROM invocations WHERE started_at < $1 OR id IN (\
     SELECT id FROM (\
         SELECT id, ROW_NUMBER() OVER (PARTITION BY namespace, function ORDER BY id DESC) AS n FROM invocations\
     ) AS ranked WHERE n > $2)";

impl SqlRegistry {
    /// Opens (creating if missing) the SQLite database file at `path` and applies the
    /// embedded migrations. Errors: `Storage` when the file cannot be opened or migrated.
    pub async fn open_sqlite(path: &Path) -> Result<Self> {
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(db_err)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await.map_err(db_err)?;
        sqlx::migrate!("migrations/sqlite").run(&pool).await.map_err(Error::storage)?;
        Ok(SqlRegistry { pool: Pool::Sqlite(pool), changes: ChangeFeed::new(CHANGE_CAPACITY), peers: None })
    }

    /// Connects to PostgreSQL at `url` (`postgres://user:password@host:port/database`) and
    /// applies the embedded migrations. Servers starting at once on one database are safe:
    /// the migrator holds an advisory lock while it works. Errors: `Storage` when the
    /// database cannot be reached or migrated.
    pub async fn open_postgres(url: &str) -> Result<Self> {
        let options = PgConnectOptions::from_str(url).map_err(db_err)?;
        // One connection first: its error says why (refused, unknown host, authentication,
        // no such database) where the pool would only say that it timed out.
        let first = tokio::time::timeout(PG_CONNECT_TIMEOUT, PgConnection::connect_with(&options))
            .await
            .map_err(|_| {
                Error::storage(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", PG_CONNECT_TIMEOUT.as_secs()),
                ))
            })?
            .map_err(db_err)?;
        let _ = first.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(PG_ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(db_err)?;
        sqlx::migrate!("migrations/postgres").run(&pool).await.map_err(Error::storage)?;
        let changes = ChangeFeed::new(CHANGE_CAPACITY);
        let peers = listen::Peers::start(&pool, changes.clone()).await.map_err(db_err)?;
        Ok(SqlRegistry { pool: Pool::Postgres(pool), changes, peers: Some(Arc::new(peers)) })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// Closes every connection (waiting for those in use to be returned); on SQLite, first
    /// checkpoints the write-ahead log into the database file.
    pub async fn close(&self) {
        if let Pool::Sqlite(p) = &self.pool {
            // Everything into the database file: a copy of it alone is then complete.
            if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(p).await {
                tracing::warn!(error = %e, "cannot checkpoint the database");
            }
        }
        with_pool!(&self.pool, |p| p.close().await)
    }

    /// Tells subscribers (and, on PostgreSQL, the other servers) that a resource was
    /// written; nobody listening is fine.
    fn notify(&self, kind: Kind, namespace: &str, name: &str) {
        let change = Change { kind, namespace: namespace.to_string(), name: name.to_string() };
        if let (Some(peers), Pool::Postgres(pool)) = (&self.peers, &self.pool) {
            peers.tell(pool, &change);
        }
        self.changes.send(change);
    }

    /// Inserts a resource row (functions: with `active_version`); a taken name is
    /// `AlreadyExists`.
    async fn insert_row(&self, sql: &ResourceSql, row: &ResourceRow, active: Option<Option<i64>>) -> Result<()> {
        let res = with_pool!(&self.pool, |p| {
            let q = sqlx::query(sql.insert)
                .bind(&row.namespace)
                .bind(&row.name)
                .bind(&row.spec)
                .bind(row.resource_version)
                .bind(&row.status)
                .bind(&row.created_at)
                .bind(&row.updated_at);
            match active {
                Some(active) => q.bind(active),
                None => q,
            }
            .execute(p)
            .await
            .map(drop)
        });
        match res {
            Ok(_) => {
                self.notify(sql.change, &row.namespace, &row.name);
                Ok(())
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(unique_violation(sql, &*e, &row.name)),
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_row<T: AnyRow>(&self, sql: &ResourceSql, namespace: &str, name: &str) -> Result<T> {
        with_pool!(&self.pool, |p| sqlx::query_as(sql.get).bind(namespace).bind(name).fetch_optional(p).await)
            .map_err(db_err)?
            .ok_or_else(|| Error::NotFound { kind: sql.kind, name: name.into() })
    }

    /// A page's rows and one more (see [`Listed::from_overfetch`]); the continue token is
    /// the last name of the page before.
    async fn list_rows<T: AnyRow>(&self, sql: &ResourceSql, namespace: &str, page: &Page) -> Result<Vec<T>> {
        let after = after_token(page)?;
        let limit = i64::from(page.limit) + 1;
        with_pool!(&self.pool, |p| sqlx::query_as(sql.list).bind(namespace).bind(after).bind(limit).fetch_all(p).await)
            .map_err(db_err)
    }

    async fn all_rows<T: AnyRow>(&self, sql: &ResourceSql) -> Result<Vec<T>> {
        with_pool!(&self.pool, |p| sqlx::query_as(sql.all).fetch_all(p).await).map_err(db_err)
    }

    /// One conditional `UPDATE … RETURNING`; when it matches nothing, a second look tells
    /// `NotFound` from `Stale`.
    async fn replace_row<T: AnyRow>(
        &self,
        sql: &ResourceSql,
        namespace: &str,
        name: &str,
        spec: String,
        expected: Option<&ResourceVersion>,
    ) -> Result<T> {
        let now = ts(Utc::now());
        // A version this store did not give matches no row (no stored count is negative).
        let expected_int = expected.map(|e| e.as_count().map_or(-1, int));
        let row: Option<T> = with_pool!(&self.pool, |p| {
            sqlx::query_as(sql.replace)
                .bind(&spec)
                .bind(&now)
                .bind(namespace)
                .bind(name)
                .bind(expected_int)
                .fetch_optional(p)
                .await
        })
        .map_err(|e| match e {
            sqlx::Error::Database(e) if e.is_unique_violation() => unique_violation(sql, &*e, name),
            e => db_err(e),
        })?;
        if let Some(row) = row {
            self.notify(sql.change, namespace, name);
            return Ok(row);
        }
        let current: i64 = with_pool!(&self.pool, |p| {
            sqlx::query_scalar(sql.resource_version).bind(namespace).bind(name).fetch_optional(p).await
        })
        .map_err(db_err)?
        .ok_or_else(|| Error::NotFound { kind: sql.kind, name: name.into() })?;
        Err(Error::Stale {
            expected: expected.map(|e| e.to_string()).unwrap_or_default(),
            current: current.to_string(),
        })
    }

    /// Writes a resource's status (functions: and `active_version`).
    async fn update_status_row(
        &self,
        sql: &ResourceSql,
        namespace: &str,
        name: &str,
        status: String,
        active: Option<Option<i64>>,
    ) -> Result<()> {
        let affected = with_pool!(&self.pool, |p| {
            let q = sqlx::query(sql.status).bind(namespace).bind(name).bind(&status);
            match active {
                Some(active) => q.bind(active),
                None => q,
            }
            .execute(p)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected == 0 {
            return Err(Error::NotFound { kind: sql.kind, name: name.into() });
        }
        self.notify(sql.change, namespace, name);
        Ok(())
    }

    async fn delete_row(&self, sql: &ResourceSql, namespace: &str, name: &str) -> Result<()> {
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query(sql.delete).bind(namespace).bind(name).execute(p).await.map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected == 0 {
            return Err(Error::NotFound { kind: sql.kind, name: name.into() });
        }
        self.notify(sql.change, namespace, name);
        Ok(())
    }

    async fn exists(&self, namespace: &str, name: &str) -> Result<()> {
        let found = with_pool!(&self.pool, |p| {
            sqlx::query("SELECT 1 FROM functions WHERE namespace = $1 AND name = $2")
                .bind(namespace)
                .bind(name)
                .fetch_optional(p)
                .await
                .map(|row| row.is_some())
        })
        .map_err(db_err)?;
        match found {
            true => Ok(()),
            false => Err(Error::NotFound { kind: "function", name: name.into() }),
        }
    }

    /// Inserts the version row, numbering it again when a concurrent upload took the number;
    /// returns whether a row was inserted.
    async fn insert_version(
        &self,
        namespace: &str,
        function: &str,
        sha256: &str,
        size_bytes: u64,
        runtime: Runtime,
    ) -> Result<bool> {
        let now = ts(Utc::now());
        let mut attempt = 1;
        loop {
            let res = with_pool!(&self.pool, |p| {
                sqlx::query(ADD_VERSION)
                    .bind(namespace)
                    .bind(function)
                    .bind(sha256)
                    .bind(int(size_bytes))
                    .bind(runtime.name())
                    .bind(&now)
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected())
            });
            match res {
                Ok(affected) => return Ok(affected == 1),
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() && attempt < NUMBERING_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => return Err(db_err(e)),
            }
        }
    }
}

#[async_trait::async_trait]
impl Registry for SqlRegistry {
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn generation(&self) -> u64 {
        self.changes.generation()
    }

    async fn create_function(&self, new: &NewFunction) -> Result<FunctionRecord> {
        let r = FunctionRecord::created(new.clone(), ResourceVersion::from_count(1), rows::stored_now());
        self.insert_row(&FUNCTIONS, &ResourceRow::from_function(&r)?, Some(None)).await?;
        Ok(r)
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<FunctionRecord> {
        self.get_row::<FunctionRow>(&FUNCTIONS, namespace, name).await?.into_record()
    }

    async fn list_functions(&self, namespace: &str, page: &Page) -> Result<Listed<FunctionRecord>> {
        let items = match &self.pool {
            // One value for the whole page (see `SQLITE_LIST_FUNCTIONS`).
            Pool::Sqlite(p) => {
                let after = after_token(page)?;
                let row = sqlx::query(SQLITE_LIST_FUNCTIONS)
                    .bind(namespace)
                    .bind(after)
                    .bind(i64::from(page.limit) + 1)
                    .fetch_one(p)
                    .await
                    .map_err(db_err)?;
                // Read in place: the page's text is not copied once more.
                let text: Option<&str> = row.try_get(0).map_err(db_err)?;
                rows::functions_from_json(text.unwrap_or_default())?
            }
            Pool::Postgres(_) => self
                .list_rows(&FUNCTIONS, namespace, page)
                .await?
                .into_iter()
                .map(FunctionRow::into_record)
                .collect::<Result<_>>()?,
        };
        Ok(Listed::from_overfetch(items, page.limit, |f: &FunctionRecord| f.name.clone()))
    }

    async fn all_functions(&self) -> Result<Vec<FunctionRecord>> {
        self.all_rows(&FUNCTIONS).await?.into_iter().map(FunctionRow::into_record).collect()
    }

    async fn replace_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &FunctionSpec,
        expected: Option<&ResourceVersion>,
    ) -> Result<FunctionRecord> {
        self.replace_row::<FunctionRow>(&FUNCTIONS, namespace, name, to_json(spec)?, expected).await?.into_record()
    }

    async fn update_status(
        &self,
        namespace: &str,
        name: &str,
        status: &FunctionStatus,
        active: Option<u32>,
    ) -> Result<()> {
        self.update_status_row(&FUNCTIONS, namespace, name, to_json(status)?, Some(active.map(i64::from))).await
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        let deleted = with_pool!(&self.pool, |p| {
            let mut tx = p.begin().await.map_err(db_err)?;
            let res =
                sqlx::query(FUNCTIONS.delete).bind(namespace).bind(name).execute(&mut *tx).await.map_err(db_err)?;
            sqlx::query("DELETE FROM versions WHERE namespace = $1 AND function = $2")
                .bind(namespace)
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            tx.commit().await.map_err(db_err)?;
            res.rows_affected() > 0
        });
        if !deleted {
            return Err(Error::NotFound { kind: "function", name: name.into() });
        }
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
        let created = self.insert_version(namespace, function, sha256, size_bytes, runtime).await?;
        let row: VersionRow = with_pool!(&self.pool, |p| {
            sqlx::query_as(select_versions!("WHERE namespace = $1 AND function = $2 AND sha256 = $3"))
                .bind(namespace)
                .bind(function)
                .bind(sha256)
                .fetch_one(p)
                .await
        })
        .map_err(db_err)?;
        if created {
            self.notify(Kind::Function, namespace, function);
        }
        Ok((row.into_record()?, created))
    }

    async fn get_version(&self, namespace: &str, function: &str, version: u32) -> Result<VersionRecord> {
        let row: Option<VersionRow> = with_pool!(&self.pool, |p| {
            sqlx::query_as(select_versions!("WHERE namespace = $1 AND function = $2 AND version = $3"))
                .bind(namespace)
                .bind(function)
                .bind(i64::from(version))
                .fetch_optional(p)
                .await
        })
        .map_err(db_err)?;
        row.ok_or_else(|| Error::NotFound { kind: "version", name: format!("{function}/{version}") })?.into_record()
    }

    async fn list_versions(&self, namespace: &str, function: &str) -> Result<Vec<VersionRecord>> {
        self.exists(namespace, function).await?;
        let rows: Vec<VersionRow> = with_pool!(&self.pool, |p| {
            sqlx::query_as(select_versions!("WHERE namespace = $1 AND function = $2 ORDER BY version"))
                .bind(namespace)
                .bind(function)
                .fetch_all(p)
                .await
        })
        .map_err(db_err)?;
        rows.into_iter().map(VersionRow::into_record).collect()
    }

    async fn delete_version(&self, namespace: &str, function: &str, version: u32) -> Result<bool> {
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query(DELETE_VERSION)
                .bind(namespace)
                .bind(function)
                .bind(i64::from(version))
                .execute(p)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected > 0 {
            self.notify(Kind::Function, namespace, function);
        }
        Ok(affected > 0)
    }

    async fn set_version_build(
        &self,
        namespace: &str,
        function: &str,
        version: u32,
        phase: VersionPhase,
        message: &str,
    ) -> Result<()> {
        // The `build_log` column is no longer written: logs are blobs (`build_log_key`).
        let affected = with_pool!(&self.pool, |p| {
            sqlx::query(
                "UPDATE versions SET phase = $1, message = $2 \
                 WHERE namespace = $3 AND function = $4 AND version = $5",
            )
            .bind(phase.as_str())
            .bind(message)
            .bind(namespace)
            .bind(function)
            .bind(i64::from(version))
            .execute(p)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(db_err)?;
        if affected > 0 {
            self.notify(Kind::Function, namespace, function);
        }
        Ok(())
    }

    async fn create_trigger(&self, new: &NewTrigger) -> Result<TriggerRecord> {
        let r = TriggerRecord::created(new.clone(), ResourceVersion::from_count(1), rows::stored_now());
        self.insert_row(&TRIGGERS, &ResourceRow::from_trigger(&r)?, None).await?;
        Ok(r)
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<TriggerRecord> {
        self.get_row::<ResourceRow>(&TRIGGERS, namespace, name).await?.into_trigger()
    }

    async fn list_triggers(&self, namespace: &str, page: &Page) -> Result<Listed<TriggerRecord>> {
        let items = self.list_rows(&TRIGGERS, namespace, page).await?.into_iter().map(ResourceRow::into_trigger);
        Ok(Listed::from_overfetch(items.collect::<Result<_>>()?, page.limit, |t: &TriggerRecord| t.name.clone()))
    }

    async fn all_triggers(&self) -> Result<Vec<TriggerRecord>> {
        self.all_rows(&TRIGGERS).await?.into_iter().map(ResourceRow::into_trigger).collect()
    }

    async fn replace_trigger_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &TriggerSpec,
        expected: Option<&ResourceVersion>,
    ) -> Result<TriggerRecord> {
        self.replace_row::<ResourceRow>(&TRIGGERS, namespace, name, to_json(spec)?, expected).await?.into_trigger()
    }

    async fn update_trigger_status(&self, namespace: &str, name: &str, status: &TriggerStatus) -> Result<()> {
        self.update_status_row(&TRIGGERS, namespace, name, to_json(status)?, None).await
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_row(&TRIGGERS, namespace, name).await
    }

    async fn create_job(&self, new: &NewJob) -> Result<JobRecord> {
        let r = JobRecord::created(new.clone(), ResourceVersion::from_count(1), rows::stored_now());
        self.insert_row(&JOBS, &ResourceRow::from_job(&r)?, None).await?;
        Ok(r)
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<JobRecord> {
        self.get_row::<ResourceRow>(&JOBS, namespace, name).await?.into_job()
    }

    async fn list_jobs(&self, namespace: &str, page: &Page) -> Result<Listed<JobRecord>> {
        let items = self.list_rows(&JOBS, namespace, page).await?.into_iter().map(ResourceRow::into_job);
        Ok(Listed::from_overfetch(items.collect::<Result<_>>()?, page.limit, |j: &JobRecord| j.name.clone()))
    }

    async fn all_jobs(&self) -> Result<Vec<JobRecord>> {
        self.all_rows(&JOBS).await?.into_iter().map(ResourceRow::into_job).collect()
    }

    async fn replace_job_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &JobSpec,
        expected: Option<&ResourceVersion>,
    ) -> Result<JobRecord> {
        self.replace_row::<ResourceRow>(&JOBS, namespace, name, to_json(spec)?, expected).await?.into_job()
    }

    async fn update_job_status(&self, namespace: &str, name: &str, status: &JobStatus) -> Result<()> {
        self.update_status_row(&JOBS, namespace, name, to_json(status)?, None).await
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_row(&JOBS, namespace, name).await
    }
}

#[async_trait::async_trait]
impl InvocationLog for SqlRegistry {
    async fn insert(&self, records: &[InvocationRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let logs = records.iter().map(|r| to_json(&r.logs)).collect::<Result<Vec<_>>>()?;
        with_pool!(&self.pool, |p| {
            let mut tx = p.begin().await.map_err(db_err)?;
            for (chunk, logs) in records.chunks(INVOCATION_CHUNK).zip(logs.chunks(INVOCATION_CHUNK)) {
                let mut qb = QueryBuilder::new(INSERT_INVOCATIONS);
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
                        .push_bind(r.cold_start_kind.map(ColdStart::as_str))
                        .push_bind(logs.as_str());
                });
                // A batch retried after a partial failure stores each record once.
                qb.push(" ON CONFLICT (id) DO NOTHING");
                qb.build().execute(&mut *tx).await.map_err(db_err)?;
            }
            tx.commit().await.map_err(db_err)
        })
    }

    async fn list(&self, namespace: &str, query: &InvocationQuery) -> Result<Vec<InvocationRecord>> {
        let rows: Vec<InvocationRow> = with_pool!(&self.pool, |p| {
            let mut qb = QueryBuilder::new("SELECT * FROM invocations WHERE namespace = ");
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
            qb.build_query_as().fetch_all(p).await
        })
        .map_err(db_err)?;
        rows.into_iter().map(InvocationRow::into_record).collect()
    }

    async fn get(&self, namespace: &str, id: &str) -> Result<InvocationRecord> {
        let row: Option<InvocationRow> = with_pool!(&self.pool, |p| {
            sqlx::query_as("SELECT * FROM invocations WHERE namespace = $1 AND id = $2")
                .bind(namespace)
                .bind(id)
                .fetch_optional(p)
                .await
        })
        .map_err(db_err)?;
        row.ok_or_else(|| Error::NotFound { kind: "invocation", name: id.into() })?.into_record()
    }

    async fn delete_namespace_records(&self, namespace: &str) -> Result<u64> {
        with_pool!(&self.pool, |p| {
            sqlx::query("DELETE FROM invocations WHERE namespace = $1")
                .bind(namespace)
                .execute(p)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(db_err)
    }

    async fn prune(&self, retention: &Retention, now: DateTime<Utc>) -> Result<u64> {
        // An age too large to subtract keeps everything ("" sorts before every timestamp).
        let cutoff = TimeDelta::try_seconds(int(retention.max_age_sec))
            .and_then(|age| now.checked_sub_signed(age))
            .map(ts)
            .unwrap_or_default();
        let keep = int(retention.max_per_function);
        with_pool!(&self.pool, |p| {
            sqlx::query(PRUNE_INVOCATIONS).bind(&cutoff).bind(keep).execute(p).await.map(|r| r.rows_affected())
        })
        .map_err(db_err)
    }
}

#[cfg(test)]
mod tests;

/// SQLite reads a page of functions as one value (`SQLITE_LIST_FUNCTIONS`); it must read back
/// exactly what a row read does.
#[cfg(test)]
mod sqlite_page_tests {
    use super::*;
    use crate::testing::function_record;

    fn page(limit: u32, after: Option<&str>) -> Page {
        Page { limit, continue_token: after.map(String::from) }
    }

    #[tokio::test]
    async fn a_page_reads_what_get_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("open");
        for (i, name) in ["b", "a-1", "a"].into_iter().enumerate() {
            let mut r = function_record(name);
            r.spec.env.insert("TEXT".into(), format!("\"{i}\" \\ é 😀 \n\t $1 ?"));
            r.spec.max_instances = Some(3);
            r.active_version = (i > 0).then_some(7);
            r.status.message = "a \"quoted\" message".into();
            reg.create_function(&sless_core::traits::New::from(&r)).await.expect("create");
        }
        let mut other = function_record("c");
        other.namespace = "other".into();
        reg.create_function(&sless_core::traits::New::from(&other)).await.expect("create");

        let mut want = Vec::new();
        for name in ["a", "a-1", "b"] {
            want.push(reg.get_function("default", name).await.expect("get"));
        }
        assert_eq!(reg.list_functions("default", &page(10, None)).await.expect("list").items, want);
        let first = reg.list_functions("default", &page(1, None)).await.expect("list");
        assert_eq!((first.items.as_slice(), first.next.as_deref()), (&want[..1], Some("a")));
        let second = reg.list_functions("default", &page(1, first.next.as_deref())).await.expect("list");
        assert_eq!((second.items.as_slice(), second.next.as_deref()), (&want[1..2], Some("a-1")));
        let last = reg.list_functions("default", &page(2, second.next.as_deref())).await.expect("list");
        assert_eq!((last.items.as_slice(), last.next), (&want[2..], None), "a full last page has no next");
        assert!(reg.list_functions("default", &page(10, Some("b"))).await.expect("list").items.is_empty());
        assert!(reg.list_functions("none", &page(10, None)).await.expect("list").items.is_empty());
        assert_eq!(reg.list_functions("other", &page(10, None)).await.expect("list").items.len(), 1);
    }
}

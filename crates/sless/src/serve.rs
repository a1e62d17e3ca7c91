//! `sless server` and `sless up`: wiring the store, the executor and the API, and one
//! shutdown signal for all of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use sless_control::gc::{GcPolicy, collect};
use sless_control::{Dispatcher, LastKnown, LogHub, Metrics, Recorder, RecorderConfig, Rollouts};
use sless_core::archive::ArchiveLimits;
use sless_core::invocation::Retention;
use sless_core::traits::InvocationLog;
use sless_core::traits::{BlobStore, Executor, Registry};
use sless_local::{Interpreters, LocalConfig, LocalExecutor};
use sless_server::{AdminToken, AppState, Edge, Guards, Limits, TokenKey};
use sless_store::{ObjectBlobStore, SqlRegistry};
use tokio::net::TcpListener;

use crate::apply::{ApplyFailed, apply_manifest};
use crate::cli::{ServerArgs, UpArgs};
use crate::connect::{CLIENT_FILE, config_dir};
use crate::manifest;
use sless_client::Client;

/// How long calls in flight may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A started platform.
struct Platform {
    base_url: String,
    token: String,
    data_dir: PathBuf,
    executor: LocalExecutor,
    rollouts: Rollouts,
    /// Closed last (SQLite: its write-ahead log checkpointed into the database file).
    database: Arc<SqlRegistry>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    controllers: tokio::task::JoinHandle<()>,
    collector: tokio::task::JoinHandle<()>,
    recorder: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
    /// Held while the platform runs (see `start`).
    _lock: std::fs::File,
}

fn default_server_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(d).join("sless");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local").join("share").join("sless"),
        None => PathBuf::from(".sless"),
    }
}

/// The admin token: `SLESS_ADMIN_TOKEN`, else the one kept in `<data>/admin-token`
/// (generated at first start, mode 0600).
fn admin_token(data_dir: &Path) -> anyhow::Result<String> {
    if let Some(t) = check_admin_token_variable()? {
        return Ok(t);
    }
    let file = data_dir.join("admin-token");
    if let Ok(t) = std::fs::read_to_string(&file) {
        return Ok(t.trim().to_string());
    }
    let token = format!("sless_{}", hex::encode(rand::random::<[u8; 24]>()));
    write_private(&file, &token)?;
    Ok(token)
}

/// `SLESS_ADMIN_TOKEN`, trimmed, if set. Errors: shorter than 16 characters.
fn check_admin_token_variable() -> anyhow::Result<Option<String>> {
    match std::env::var("SLESS_ADMIN_TOKEN") {
        Ok(t) if t.trim().len() < 16 => bail!("SLESS_ADMIN_TOKEN must be at least 16 characters"),
        Ok(t) => Ok(Some(t.trim().to_string())),
        Err(_) => Ok(None),
    }
}

/// The key token secrets are hashed under: `SLESS_TOKEN_KEY`, else the one kept in
/// `<data>/token-key` (generated at first start, mode 0600). Errors: a variable shorter than
/// 32 characters; an unreadable or unwritable file.
fn token_key(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    if let Ok(key) = std::env::var("SLESS_TOKEN_KEY") {
        if key.trim().len() < 32 {
            bail!("SLESS_TOKEN_KEY must be at least 32 characters");
        }
        return Ok(key.trim().as_bytes().to_vec());
    }
    let file = data_dir.join("token-key");
    match std::fs::read_to_string(&file) {
        Ok(key) if key.trim().len() >= 32 => return Ok(key.trim().as_bytes().to_vec()),
        Ok(_) => bail!(
            "{} is shorter than 32 characters: restore it, or delete it to make a new one (every token made so far then stops working)",
            file.display()
        ),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(anyhow!("cannot read {}: {e}", file.display()));
        }
        Err(_) => {}
    }
    let key = hex::encode(rand::random::<[u8; 32]>());
    write_private(&file, &key)?;
    Ok(key.into_bytes())
}

/// Writes a file readable only by its owner (0600).
fn write_private(path: &Path, content: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::io::Write::write_all(&mut f, content.as_bytes())?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `url` with its password (in the user part or a `password=` parameter) replaced by `***`,
/// for messages.
fn redact(url: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let authority = match authority.rsplit_once('@') {
                Some((user, host)) => match user.split_once(':') {
                    Some((name, _)) => format!("{name}:***@{host}"),
                    None => authority.to_string(),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => base.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{out}?{}", params.join("&"));
    }
    out
}

/// A storage error in one line: what failed and, when it adds something, its root cause.
fn storage_error(e: &sless_core::Error) -> String {
    let top = match e {
        sless_core::Error::Storage(inner) => inner.to_string(),
        other => other.to_string(),
    };
    let mut root: &dyn std::error::Error = e;
    while let Some(source) = root.source() {
        root = source;
    }
    let root = root.to_string();
    if top.contains(&root) { top } else { format!("{top}: {root}") }
}

/// The registry and invocation log that `--database-url` names (SQLite in the data folder
/// by default). Errors name the database (without its password).
async fn open_database(args: &ServerArgs, data_dir: &Path) -> anyhow::Result<SqlRegistry> {
    let url = args.database_url.as_deref().unwrap_or_default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return SqlRegistry::open_postgres(url)
            .await
            .map_err(|e| anyhow!("cannot open the database {}: {}", redact(url), storage_error(&e)));
    }
    let path = match url.strip_prefix("sqlite://") {
        _ if url.is_empty() => data_dir.join("sless.db"),
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => bail!("--database-url {:?}: expected sqlite://PATH or postgres://…", redact(url)),
    };
    // A missing or empty database next to code already built or stored is a lost database,
    // not a new platform: starting empty would hide every function those files belong to.
    let empty = std::fs::metadata(&path).map_or(true, |m| m.len() == 0);
    if empty {
        for held in ["archives", "builds"] {
            let dir = data_dir.join(held);
            if std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some()) {
                bail!(
                    "the database {} is missing or empty, but {} holds code: restore the database \
                     (with its -wal file, if any) or start with another --data-dir",
                    path.display(),
                    dir.display()
                );
            }
        }
    }
    SqlRegistry::open_sqlite(&path)
        .await
        .map_err(|e| anyhow!("cannot open the database {}: {}", path.display(), storage_error(&e)))
}

/// The archive store that `--blob-url` names (archives/ in the data folder by default),
/// checked to answer. Errors name the store.
async fn open_blobs(args: &ServerArgs, data_dir: &Path) -> anyhow::Result<ObjectBlobStore> {
    match args.blob_url.as_deref().unwrap_or_default() {
        "" => {
            let dir = data_dir.join("archives");
            let store = ObjectBlobStore::local(&dir)
                .map_err(|e| anyhow!("cannot open the archive folder {}: {}", dir.display(), storage_error(&e)))?;
            store
                .check()
                .await
                .map_err(|e| anyhow!("cannot reach the archive store {}: {}", dir.display(), storage_error(&e)))?;
            Ok(store)
        }
        url => open_blob_url(url).await,
    }
}

/// The archive store at `url` (`file:///ABSOLUTE/PATH` or `s3://BUCKET/PREFIX`, the syntax of
/// `--blob-url`), checked to answer. Errors name the store.
pub(crate) async fn open_blob_url(url: &str) -> anyhow::Result<ObjectBlobStore> {
    let store = if url.starts_with("s3://") {
        ObjectBlobStore::s3(url, &[]).with_context(|| format!("--blob-url {url}"))?
    } else {
        let dir = match url.strip_prefix("file://") {
            Some(path) if path.starts_with('/') => PathBuf::from(path),
            _ => bail!("--blob-url {url:?}: expected file:///ABSOLUTE/PATH or s3://BUCKET/PREFIX"),
        };
        ObjectBlobStore::local(&dir)
            .map_err(|e| anyhow!("cannot open the archive folder {}: {}", dir.display(), storage_error(&e)))?
    };
    store.check().await.map_err(|e| anyhow!("cannot reach the archive store {url}: {}", storage_error(&e)))?;
    Ok(store)
}

/// Collects every `interval` until `stop` (never when `interval` is zero).
fn spawn_collector(
    registry: Arc<dyn Registry>,
    blobs: Arc<dyn BlobStore>,
    policy: GcPolicy,
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if interval.is_zero() {
            return;
        }
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = ticks.tick() => {}
            }
            match collect(registry.as_ref(), blobs.as_ref(), &policy, chrono::Utc::now()).await {
                Ok(r) => tracing::info!(
                    versions = r.versions.len(),
                    archives = r.archives.len(),
                    bytes_freed = r.bytes_freed,
                    "collected"
                ),
                Err(e) => tracing::warn!(error = %e, "collection failed; trying again at the next interval"),
            }
        }
    })
}

/// The HTTP edge's timeouts and caps from the flags.
fn edge(args: &ServerArgs) -> Edge {
    let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    Edge {
        header_read_timeout: Duration::from_millis(args.header_read_timeout_ms),
        body_read_timeout: Duration::from_millis(args.body_read_timeout_ms),
        body_total_timeout: Duration::from_millis(args.body_total_timeout_ms),
        keep_alive_timeout: Duration::from_millis(args.keep_alive_timeout_ms),
        max_connections: count(args.max_connections),
        max_header_bytes: count(args.max_header_bytes),
        max_headers: count(args.max_headers),
    }
}

/// The address `sless server` listens on unless told otherwise (`--listen`'s default): the
/// one server whose connection is saved for the CLI in the user's config folder.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Where the CLI's saved connection goes besides the data folder's own `client.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SaveConnection {
    /// Also into the user's config folder (`up`, and `server` on the default address).
    UserConfig,
    /// Only into the data folder (a `server` on another address, e.g. a throwaway one).
    DataDirOnly,
}

async fn start(args: &ServerArgs, default_data_dir: PathBuf, save: SaveConnection) -> anyhow::Result<Platform> {
    // Nothing this process inherited (an open file, a pipe of whatever started it) may reach
    // a function process.
    sless_local::close_inherited_descriptors();
    // Before anything is set up (no data folder is made for a start that fails here): a bad
    // token or a taken address is a start error, not a late one.
    check_admin_token_variable()?;
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
    let data_dir = args.data_dir.clone().unwrap_or(default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create the data folder {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize()?;
    // One platform per data folder: two would build into and run from the same folders.
    let lock_path = data_dir.join("lock");
    let lock = std::fs::File::create(&lock_path).with_context(|| format!("cannot create {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        bail!("another sless is already using the data folder {} (pass another --data-dir)", data_dir.display());
    }
    let sql = Arc::new(open_database(args, &data_dir).await?);
    tracing::info!(backend = sql.backend(), "database open");
    let registry: Arc<dyn Registry> = sql.clone();
    let invocations: Arc<dyn InvocationLog> = sql.clone();
    let metrics = Arc::new(Metrics::new());
    let logs = Arc::new(LogHub::default());
    let blobs: Arc<dyn BlobStore> = Arc::new(open_blobs(args, &data_dir).await?);
    let interpreters = tokio::task::spawn_blocking({
        let (python, node) = (args.python.clone(), args.node.clone());
        move || Interpreters::resolve(&python, &node)
    })
    .await??;
    tracing::info!(python = %interpreters.python.display(), node = %interpreters.node.display(), "interpreters");
    let archive = ArchiveLimits {
        max_compressed_bytes: args.max_archive_mb * 1024 * 1024,
        max_uncompressed_bytes: args.max_unpacked_mb * 1024 * 1024,
        ..ArchiveLimits::default()
    };
    let executor = LocalExecutor::new(
        LocalConfig {
            data_dir: data_dir.clone(),
            interpreters,
            build_timeout: Duration::from_secs(args.build_timeout_sec),
            max_instances_per_function: args.max_instances_per_function,
            max_queue_per_function: args.max_queue_per_function,
            max_instances_total: args.max_instances.max(1),
            idle_timeout: Duration::from_secs(args.idle_timeout_sec.max(1)),
            scale_down_delay: Duration::from_secs(args.scale_down_delay_sec.max(1)),
            warm_pool_size: args.warm_pool_size,
            archive_limits: archive,
        },
        registry.clone(),
        metrics.clone(),
        logs.clone(),
    )?;
    let executor_dyn: Arc<dyn Executor> = Arc::new(executor.clone());
    let rollouts = Rollouts::new(registry.clone(), blobs.clone(), executor_dyn.clone(), metrics.clone());
    rollouts.resume().await?;
    let retention = Retention {
        max_age_sec: args.invocations_max_age_hours * 3600,
        max_per_function: args.invocations_per_function,
    };
    let (recorder, recorder_task) = Recorder::start(
        invocations.clone(),
        metrics.clone(),
        RecorderConfig { retention, keep: !args.no_record, ..RecorderConfig::default() },
    );
    // Calls keep reaching the versions already known while the database is unreachable.
    let dispatcher = Arc::new(
        Dispatcher::new(
            Arc::new(LastKnown::new(registry.clone())),
            executor_dyn.clone(),
            recorder,
            metrics.clone(),
            args.max_body_mb * 1024 * 1024,
        )
        .with_logs(logs.clone()),
    );
    let addr = listener.local_addr()?;
    let base_url = format!("http://{addr}");
    let token = admin_token(&data_dir)?;
    let token_key = TokenKey::new(&token_key(&data_dir)?);
    let gc_policy = GcPolicy { keep_versions: args.gc_keep_versions, grace_sec: args.gc_grace_sec, dry_run: false };
    let state = AppState {
        registry: registry.clone(),
        blobs: blobs.clone(),
        executor: executor_dyn.clone(),
        rollouts: rollouts.clone(),
        dispatcher: dispatcher.clone(),
        invocations,
        logs,
        metrics,
        tenants: sql.clone(),
        admin_token: AdminToken::new(&token),
        token_key,
        guards: Guards::default(),
        limits: Limits {
            archive,
            max_request_bytes: args.max_body_mb * 1024 * 1024,
            max_response_bytes: args.max_body_mb * 1024 * 1024,
        },
        base_url: base_url.clone(),
        gc: gc_policy,
    };
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let shutdown = {
        let logs = state.logs.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
            // Log followers end their streams, so they do not hold the drain.
            logs.close();
        }
    };
    let collector = spawn_collector(
        registry.clone(),
        blobs.clone(),
        gc_policy,
        Duration::from_secs(args.gc_interval_sec),
        stop.subscribe(),
    );
    let server = tokio::spawn(sless_server::serve(listener, state, edge(args), shutdown));
    let controllers = sless_control::spawn_controllers(
        registry,
        executor_dyn,
        dispatcher,
        Duration::from_secs(args.resync_sec.max(1)),
        stop.subscribe(),
    );
    // Where the CLI finds this server by default.
    let conn = serde_json::json!({ "url": base_url, "token": token }).to_string();
    write_private(&data_dir.join(CLIENT_FILE), &conn)?;
    if save == SaveConnection::UserConfig
        && let Some(dir) = config_dir()
        && let Err(e) = write_private(&dir.join(CLIENT_FILE), &conn)
    {
        tracing::warn!(error = %e, "cannot save the connection for the CLI");
    }
    tracing::info!(url = %base_url, data_dir = %data_dir.display(), "sless is listening");
    println!("sless listening on {base_url}");
    Ok(Platform {
        base_url,
        token,
        data_dir,
        executor,
        rollouts,
        database: sql,
        server,
        controllers,
        collector,
        recorder: recorder_task,
        stop,
        _lock: lock,
    })
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
}

impl Platform {
    /// Serves until Ctrl-C or SIGTERM, drains calls in flight (bounded), then stops every
    /// instance.
    async fn run_until_signal(mut self) -> anyhow::Result<()> {
        tokio::select! {
            _ = shutdown_signal() => {}
            res = &mut self.server => {
                res??;
                bail!("the server stopped unexpectedly");
            }
        }
        tracing::info!("shutting down: draining calls in flight");
        let _ = self.stop.send(true);
        match tokio::time::timeout(DRAIN_TIMEOUT, &mut self.server).await {
            Ok(res) => res??,
            Err(_) => {
                tracing::warn!("calls still in flight after {} s; stopping them", DRAIN_TIMEOUT.as_secs());
                // Its connections hold the API's state (and so the recorder): let them go.
                self.server.abort();
            }
        }
        let _ = self.controllers.await;
        let _ = self.collector.await;
        // Builds still running start again at the next start (their versions are `Building`).
        self.rollouts.shutdown();
        self.executor.shutdown().await;
        // The last holders of the recorder are gone: it writes what is queued and ends.
        if tokio::time::timeout(Duration::from_secs(10), self.recorder).await.is_err() {
            tracing::warn!("invocation records still unwritten at shutdown");
        }
        self.database.close().await;
        tracing::info!(data_dir = %self.data_dir.display(), "stopped");
        Ok(())
    }
}

pub async fn server(args: ServerArgs) -> anyhow::Result<()> {
    let save = if args.listen.to_string() == DEFAULT_LISTEN {
        SaveConnection::UserConfig
    } else {
        SaveConnection::DataDirOnly
    };
    let platform = start(&args, default_server_data_dir(), save).await?;
    platform.run_until_signal().await
}

pub async fn up(args: UpArgs) -> anyhow::Result<()> {
    let manifest = manifest::load(&args.dir)?;
    let platform = start(&args.server, PathBuf::from(".sless"), SaveConnection::UserConfig).await?;
    let client = Client::new(&platform.base_url, &platform.token, &manifest.namespace);
    let (lines, failed) = match apply_manifest(&client, &manifest, true).await {
        Ok(lines) => (lines, Vec::new()),
        Err(e) => match e.downcast::<ApplyFailed>() {
            Ok(partial) => (partial.lines, partial.failed),
            Err(e) => return Err(e),
        },
    };
    for (label, url) in &lines {
        println!("  {label:<24} {url}");
    }
    println!("token: {}", platform.token);
    println!(
        "try:   curl -H \"Authorization: Bearer $(cat {}/admin-token)\" {}/v1/namespaces/{}/functions",
        platform.data_dir.display(),
        platform.base_url,
        manifest.namespace
    );
    if !failed.is_empty() {
        eprintln!("{} failed to deploy ({}); serving the rest. Press Ctrl-C to stop.", failed.len(), failed.join(", "));
    } else {
        eprintln!("ready. Press Ctrl-C to stop.");
    }
    platform.run_until_signal().await
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn the_edge_flags_default_to_the_documented_edge() {
        use clap::Parser as _;
        let cli = crate::cli::Cli::try_parse_from(["sless", "server"]).expect("parse");
        let crate::cli::Command::Server(args) = cli.command else { panic!("not server") };
        assert_eq!(super::edge(&args), sless_server::Edge::default());
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(redact("postgres://sless:s3cret@db:5432/sless"), "postgres://sless:***@db:5432/sless");
        assert_eq!(redact("postgres://sless@db/sless"), "postgres://sless@db/sless");
        assert_eq!(
            redact("postgres://db/sless?user=a&password=x&sslmode=require"),
            "postgres://db/sless?user=a&password=***&sslmode=require"
        );
        assert_eq!(redact("postgres://u:p:q@db"), "postgres://u:***@db");
        assert_eq!(redact("sqlite:///var/lib/sless.db"), "sqlite:///var/lib/sless.db");
    }
}

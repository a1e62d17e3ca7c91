//! The seams between the API and the backends (docs/architecture.md, "Seams"), used as
//! `Arc<dyn Trait>`.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::Result;
use crate::invocation::{ColdStart, InvocationQuery, InvocationRecord, Retention};
use crate::job::{JobRecord, JobSpec, JobStatus};
use crate::resource_version::ResourceVersion;
use crate::runtime::Runtime;
use crate::spec::FunctionSpec;
use crate::status::{FunctionStatus, VersionPhase};
use crate::tenant::{NamespaceRecord, Quotas, StoredToken, TokenRecord};
use crate::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};

/// A stored function: spec plus server-owned fields. Serialised as the API's function object
/// (the spec's fields flat); `Deserialize` reads that object back (unknown fields, such as the
/// API's `url`, are ignored).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionRecord {
    /// The namespace (tenant).
    pub namespace: String,
    /// The function's name, unique in its namespace.
    pub name: String,
    /// What the user declared.
    #[serde(flatten)]
    pub spec: FunctionSpec,
    /// Changes whenever the spec changes; compared with `If-Match`.
    pub resource_version: ResourceVersion,
    /// The version that serves calls, if any.
    pub active_version: Option<u32>,
    /// Phase, message, conditions.
    pub status: FunctionStatus,
    /// Creation time (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
    /// Last spec change (RFC 3339 UTC).
    pub updated_at: DateTime<Utc>,
}

/// A resource to create, as its creator decides it. The store fills the rest —
/// `resource_version`, `created_at`, `updated_at` (and a function's `active_version` starts
/// empty) — and returns the stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct New<Spec, Status> {
    /// The namespace.
    pub namespace: String,
    /// The name, unique in its namespace among resources of its kind.
    pub name: String,
    /// What the user declared.
    pub spec: Spec,
    /// The first status.
    pub status: Status,
}

/// A function to create.
pub type NewFunction = New<FunctionSpec, FunctionStatus>;
/// A trigger to create.
pub type NewTrigger = New<TriggerSpec, TriggerStatus>;
/// A job to create.
pub type NewJob = New<JobSpec, JobStatus>;

/// The stored record of a created resource, and the resource to create from a record (its
/// store-owned fields dropped).
macro_rules! stored_record {
    ($record:ident, $new:ident $(, $extra:ident: $value:expr)?) => {
        impl $record {
            /// The record a store keeps for `new`, created at `at` with `resource_version`.
            pub fn created(new: $new, resource_version: ResourceVersion, at: DateTime<Utc>) -> Self {
                $record {
                    namespace: new.namespace,
                    name: new.name,
                    spec: new.spec,
                    resource_version,
                    $($extra: $value,)?
                    status: new.status,
                    created_at: at,
                    updated_at: at,
                }
            }
        }

        impl From<$record> for $new {
            fn from(r: $record) -> Self {
                New { namespace: r.namespace, name: r.name, spec: r.spec, status: r.status }
            }
        }

        impl From<&$record> for $new {
            fn from(r: &$record) -> Self {
                r.clone().into()
            }
        }
    };
}

stored_record!(FunctionRecord, NewFunction, active_version: None);
stored_record!(TriggerRecord, NewTrigger);
stored_record!(JobRecord, NewJob);

/// One uploaded code archive of a function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionRecord {
    /// The function's namespace.
    pub namespace: String,
    /// The function's name.
    pub function: String,
    /// 1, 2, … per function.
    pub version: u32,
    /// Lowercase hex SHA-256 of the archive (its blob key is `archive::blob_key(sha256)`).
    pub sha256: String,
    /// Archive size in bytes.
    pub size_bytes: u64,
    /// The runtime the version was built for.
    pub runtime: Runtime,
    /// Build phase.
    pub phase: VersionPhase,
    /// Why the build failed (the log's tail), or empty.
    pub message: String,
    /// Upload time.
    pub created_at: DateTime<Utc>,
}

/// The server-owned fields of a [`FunctionRecord`], read next to its flat spec.
#[derive(Deserialize)]
struct FunctionMeta {
    namespace: String,
    name: String,
    resource_version: ResourceVersion,
    active_version: Option<u32>,
    status: FunctionStatus,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl<'de> Deserialize<'de> for FunctionRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let (m, spec): (FunctionMeta, FunctionSpec) = crate::flat::split(deserializer)?;
        Ok(FunctionRecord {
            namespace: m.namespace,
            name: m.name,
            spec,
            resource_version: m.resource_version,
            active_version: m.active_version,
            status: m.status,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

/// A page of a sorted list: at most `limit` items, from the start or where the previous
/// page's `next` token left off (Kubernetes' `limit` / `continue`).
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Most items to return (1–1000).
    pub limit: u32,
    /// The previous page's [`Listed::next`], opaque to callers; `None` for the first page.
    pub continue_token: Option<String>,
}

impl Page {
    /// The first page of at most `limit` items.
    pub fn first(limit: u32) -> Self {
        Page { limit, continue_token: None }
    }
}

/// One page of a list, sorted by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    /// At most the page's `limit` items.
    pub items: Vec<T>,
    /// The token for the next page (its [`Page::continue_token`]); `None` on the last page.
    pub next: Option<String>,
}

impl<T> Listed<T> {
    /// The page of at most `limit` items out of `items` fetched with one more than `limit`
    /// (the extra one tells that a next page exists); `key` gives the token of the last
    /// item kept.
    pub fn from_overfetch(mut items: Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> Self {
        let limit = limit as usize;
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(key)
        } else {
            None
        };
        Listed { items, next }
    }
}

/// The kind of a changed resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A function (its spec, status or versions).
    Function,
    /// A trigger.
    Trigger,
    /// A job.
    Job,
}

/// A change notification: something about this resource was written (or it was deleted).
/// Controllers re-read the resource; notifications carry no state, so a lost one is repaired
/// by the periodic resync.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    /// What changed.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// How a registry announces its changes: a broadcast channel of [`Change`]s plus a
/// generation counter, bumped before each announcement, that caches compare instead of
/// subscribing (see [`Registry::generation`]). Clones share both.
#[derive(Debug, Clone)]
pub struct ChangeFeed {
    sender: tokio::sync::broadcast::Sender<Change>,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ChangeFeed {
    /// A feed whose subscribers may lag `capacity` changes behind before they lose some.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = tokio::sync::broadcast::channel(capacity);
        ChangeFeed { sender, generation: Default::default() }
    }

    /// Announces `change` (call it after the write is committed): bumps the generation, then
    /// tells the subscribers. Nobody listening is fine.
    pub fn send(&self, change: Change) {
        self.bump();
        let _ = self.sender.send(change);
    }

    /// Bumps the generation without a change to name: for when changes may have been missed
    /// (e.g. a lost connection to the other servers' announcements).
    pub fn bump(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Change notifications from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.sender.subscribe()
    }

    /// The number of announcements so far (plus bumps).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The registry of functions, versions, triggers and jobs (SQL locally; custom resources on
/// Kubernetes). Every write sends a [`Change`] to subscribers.
#[async_trait::async_trait]
pub trait Registry: Send + Sync {
    /// Change notifications from now on. A receiver that lags loses notifications (and
    /// learns so from `RecvError::Lagged`): resync then.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change>;
    /// A counter that grows with every change this registry announces: its own writes (once
    /// committed) and, where several servers share the store, the others' announcements as
    /// they arrive. A cache stamps what it reads with the generation read *before* the read;
    /// an unchanged generation later means the entry is still current, as far as this server
    /// has heard.
    fn generation(&self) -> u64;
    /// Stores a new function and returns its record. Errors: `AlreadyExists`.
    async fn create_function(&self, new: &NewFunction) -> Result<FunctionRecord>;
    /// One function. Errors: `NotFound`.
    async fn get_function(&self, namespace: &str, name: &str) -> Result<FunctionRecord>;
    /// A page of a namespace's functions, sorted by name.
    async fn list_functions(&self, namespace: &str, page: &Page) -> Result<Listed<FunctionRecord>>;
    /// Every function in every namespace (for start-up reconciliation).
    async fn all_functions(&self) -> Result<Vec<FunctionRecord>>;
    /// Replaces the spec if `expected_resource_version` is `None` or current; bumps
    /// `resource_version` and `updated_at`. Errors: `NotFound`, `Stale`.
    async fn replace_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &FunctionSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<FunctionRecord>;
    /// Writes the status and the active version.
    async fn update_status(
        &self,
        namespace: &str,
        name: &str,
        status: &FunctionStatus,
        active_version: Option<u32>,
    ) -> Result<()>;
    /// Deletes a function and its versions. Errors: `NotFound`.
    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()>;
    /// Adds a version for archive `sha256`, numbered after the last one, in phase `Building`;
    /// when the function already has a version with this SHA-256 returns it and `false`.
    async fn add_version(
        &self,
        namespace: &str,
        function: &str,
        sha256: &str,
        size_bytes: u64,
        runtime: Runtime,
    ) -> Result<(VersionRecord, bool)>;
    /// One version. Errors: `NotFound`.
    async fn get_version(&self, namespace: &str, function: &str, version: u32) -> Result<VersionRecord>;
    /// All versions of a function, oldest first.
    async fn list_versions(&self, namespace: &str, function: &str) -> Result<Vec<VersionRecord>>;
    /// Deletes a version, unless it is the function's active version
    /// (checked atomically). Returns whether it was deleted; a missing one is not an error.
    async fn delete_version(&self, namespace: &str, function: &str, version: u32) -> Result<bool>;
    /// Records a version's build result (its log is in the blob store, under
    /// `archive::build_log_key`).
    async fn set_version_build(
        &self,
        namespace: &str,
        function: &str,
        version: u32,
        phase: VersionPhase,
        message: &str,
    ) -> Result<()>;

    /// Stores a new trigger and returns its record. Errors: `AlreadyExists` (also for a
    /// second http trigger of one function).
    async fn create_trigger(&self, new: &NewTrigger) -> Result<TriggerRecord>;
    /// One trigger. Errors: `NotFound`.
    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<TriggerRecord>;
    /// A page of a namespace's triggers, sorted by name.
    async fn list_triggers(&self, namespace: &str, page: &Page) -> Result<Listed<TriggerRecord>>;
    /// Every trigger in every namespace.
    async fn all_triggers(&self) -> Result<Vec<TriggerRecord>>;
    /// Replaces the spec (checking `resource_version` when given), bumps `resource_version`
    /// and `updated_at`. Errors: `NotFound`, `Stale`.
    async fn replace_trigger_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &TriggerSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<TriggerRecord>;
    /// Writes a trigger's status. Errors: `NotFound`.
    async fn update_trigger_status(&self, namespace: &str, name: &str, status: &TriggerStatus) -> Result<()>;
    /// Deletes a trigger. Errors: `NotFound`.
    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()>;

    /// Stores a new job and returns its record. Errors: `AlreadyExists`.
    async fn create_job(&self, new: &NewJob) -> Result<JobRecord>;
    /// One job. Errors: `NotFound`.
    async fn get_job(&self, namespace: &str, name: &str) -> Result<JobRecord>;
    /// A page of a namespace's jobs, sorted by name.
    async fn list_jobs(&self, namespace: &str, page: &Page) -> Result<Listed<JobRecord>>;
    /// Every job in every namespace.
    async fn all_jobs(&self) -> Result<Vec<JobRecord>>;
    /// Replaces the spec (checking `resource_version` when given), bumps `resource_version`
    /// and `updated_at`. Errors: `NotFound`, `Stale`.
    async fn replace_job_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: &JobSpec,
        expected_resource_version: Option<&ResourceVersion>,
    ) -> Result<JobRecord>;
    /// Writes a job's status. Errors: `NotFound`.
    async fn update_job_status(&self, namespace: &str, name: &str, status: &JobStatus) -> Result<()>;
    /// Deletes a job. Errors: `NotFound`.
    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()>;
}

/// Namespaces and tokens (SQL on both backends: on Kubernetes they live beside the
/// invocation log in PostgreSQL). Namespace names are checked by the caller.
#[async_trait::async_trait]
pub trait Tenants: Send + Sync {
    /// Creates the namespace with no quotas unless it exists (an admin's first write into a
    /// namespace creates it). A namespace made anew (here or by `create_namespace`) is first
    /// taken out of every token: a token made for an earlier namespace of that name (say,
    /// while it was being deleted) never reaches the new one.
    async fn ensure_namespace(&self, name: &str) -> Result<()>;
    /// Creates a namespace. Errors: `AlreadyExists`.
    async fn create_namespace(&self, name: &str, quotas: &Quotas) -> Result<NamespaceRecord>;
    /// One namespace. Errors: `NotFound`.
    async fn get_namespace(&self, name: &str) -> Result<NamespaceRecord>;
    /// A page of namespaces, by name.
    async fn list_namespaces(&self, page: &Page) -> Result<Listed<NamespaceRecord>>;
    /// Replaces a namespace's quotas if its `resource_version` is `expected` (when given).
    /// Errors: `NotFound`, `Stale`.
    async fn replace_quotas(
        &self,
        name: &str,
        quotas: &Quotas,
        expected: Option<&ResourceVersion>,
    ) -> Result<NamespaceRecord>;
    /// Marks a namespace `Terminating` (a delete has begun). Errors: `NotFound`.
    async fn terminate_namespace(&self, name: &str) -> Result<()>;
    /// Deletes a namespace (what it holds is the caller's to delete first), takes it out of
    /// every token's namespaces and deletes the tokens left with none. Errors: `NotFound`.
    async fn delete_namespace(&self, name: &str) -> Result<()>;
    /// Stores a new token. Errors: `AlreadyExists` (its id).
    async fn create_token(&self, token: &StoredToken) -> Result<()>;
    /// One token with its secret's hash. Errors: `NotFound`.
    async fn get_token(&self, id: &str) -> Result<StoredToken>;
    /// Every token, by id.
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>>;
    /// Deletes (revokes) a token. Errors: `NotFound`.
    async fn delete_token(&self, id: &str) -> Result<()>;
}

/// Where invocation records go (SQL: SQLite or PostgreSQL).
#[async_trait::async_trait]
pub trait InvocationLog: Send + Sync {
    /// Stores a batch of records in one statement or transaction.
    async fn insert(&self, records: &[InvocationRecord]) -> Result<()>;
    /// Records of a namespace matching `query`, newest first.
    async fn list(&self, namespace: &str, query: &InvocationQuery) -> Result<Vec<InvocationRecord>>;
    /// One record with its logs. Errors: `NotFound`.
    async fn get(&self, namespace: &str, id: &str) -> Result<InvocationRecord>;
    /// Deletes records older than `retention.max_age_sec` before `now` and, per function,
    /// all but the newest `retention.max_per_function`. Returns how many were deleted.
    async fn prune(&self, retention: &Retention, now: DateTime<Utc>) -> Result<u64>;
    /// Deletes every record of a namespace (it is being deleted: a namespace made again under
    /// its name must not show them); returns how many.
    async fn delete_namespace_records(&self, namespace: &str) -> Result<u64>;
}

/// A stored blob, as [`BlobStore::list`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobMeta {
    /// Its key, e.g. `archives/<sha256>.zip`.
    pub key: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// When it was last written.
    pub last_modified: DateTime<Utc>,
}

/// Where code archives and build logs are kept, by key (see `archive::blob_key`,
/// `archive::build_log_key`); a folder locally, S3 in production.
#[async_trait::async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` under `key` (atomically: a reader sees all of it or nothing).
    async fn put(&self, key: &str, bytes: Bytes) -> Result<()>;
    /// Reads a blob. Errors: `NotFound`.
    async fn get(&self, key: &str) -> Result<Bytes>;
    /// Deletes a blob; a missing blob is not an error.
    async fn delete(&self, key: &str) -> Result<()>;
    /// Every blob whose key starts with `prefix` (e.g. `archives/`), in no
    /// particular order.
    async fn list(&self, prefix: &str) -> Result<Vec<BlobMeta>>;
}

/// What to run: a function's spec at one built version.
#[derive(Debug, Clone, PartialEq)]
pub struct InvokeTarget {
    /// The namespace.
    pub namespace: String,
    /// The function's name.
    pub name: String,
    /// The spec to run with (env, limits, entrypoint).
    pub spec: FunctionSpec,
    /// The version number.
    pub version: u32,
    /// The version's archive SHA-256.
    pub sha256: String,
}

impl InvokeTarget {
    /// `function`'s current spec at version `version`.
    pub fn new(function: &FunctionRecord, version: &VersionRecord) -> Self {
        InvokeTarget {
            namespace: function.namespace.clone(),
            name: function.name.clone(),
            spec: function.spec.clone(),
            version: version.version,
            sha256: version.sha256.clone(),
        }
    }
}

/// One call to make.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The request id (also given to the handler as `context.aws_request_id`).
    pub request_id: String,
    /// The event as JSON text (an API Gateway proxy 1.0 event, a scheduled event, a job
    /// event), passed to the runtime as it is.
    pub event: Box<serde_json::value::RawValue>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum InvokeResult {
    /// The handler returned this JSON value.
    Returned(Value),
    /// The handler raised (or the runtime failed it, e.g. `Runtime.ImportModuleError`).
    Failed {
        /// e.g. `ValueError`.
        error_type: String,
        /// The exception's message.
        error_message: String,
    },
    /// The call ran past `timeout_sec`; the instance was killed.
    TimedOut,
    /// The instance exited during the call.
    Crashed {
        /// What is known of the exit (code or signal).
        message: String,
    },
    /// The instance was killed for using more than `memory_mb`.
    OutOfMemory {
        /// What was observed (the limit, the mechanism).
        message: String,
    },
    /// Every instance is busy and the wait queue is full (or the wait took too long).
    Throttled {
        /// Why.
        message: String,
    },
    /// The function's instances keep crashing at start; no new one is started for a while.
    Unavailable {
        /// The last crash.
        message: String,
        /// When to try again, in seconds.
        retry_after_sec: u64,
    },
    /// Not run: the function was disabled or deleted while the call waited for an instance
    /// (503 `Function.NotReady`, as a call arriving after it would get).
    Withdrawn {
        /// Why.
        message: String,
    },
}

/// A call's outcome with what was observed around it.
#[derive(Debug, Clone)]
pub struct InvokeOutcome {
    /// How it ended.
    pub result: InvokeResult,
    /// How an instance was started for this call, if one was (a cold start).
    pub cold_start: Option<ColdStart>,
    /// Output lines printed during the call (stdout and stderr, in order).
    pub logs: Vec<String>,
    /// The most memory the instance has used so far, in bytes (its memory cgroup's peak), when
    /// the backend can tell.
    pub max_memory_bytes: Option<u64>,
    /// On a cold start, how long loading the function into the instance took before the call
    /// was handed over (Lambda's "Init Duration").
    pub init_duration: Option<std::time::Duration>,
}

/// What a build produced: whether the version can run, its log, and a one-line reason for a
/// failure (shown as the version's and the function's status message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOutcome {
    /// Whether the version was built and its entrypoint loaded.
    pub ok: bool,
    /// The build's whole output (dependency install, entrypoint check), kept as the build log.
    pub log: String,
    /// Why it failed (e.g. the import error), or empty.
    pub message: String,
}

/// Builds and runs versions (local processes; Kubernetes objects). The workflow around a
/// build (statuses, the active version, the build log, resuming after a restart) is the
/// control plane's (`sless_control::Rollouts`); an executor only carries it out.
#[async_trait::async_trait]
pub trait Executor: Send + Sync {
    /// Builds `target` (its spec at one version) from the code archive `archive` into
    /// something runnable. A build that fails because of the function's code or dependencies
    /// is `Ok` with `ok: false`; errors are platform failures.
    async fn build(&self, target: &InvokeTarget, archive: Bytes) -> Result<BuildOutcome>;
    /// Whether a finished build of `target`'s version is available to this executor (a new
    /// server on a shared store may have to build versions built elsewhere).
    async fn is_built(&self, target: &InvokeTarget) -> Result<bool>;
    /// Calls the function once. Errors only for platform failures (the function's own
    /// failures are in the outcome).
    async fn invoke(&self, target: &InvokeTarget, invocation: Invocation) -> Result<InvokeOutcome>;
    /// Starts an instance ahead of a call (cron `prewarm_sec`), unless one is idle already.
    async fn prewarm(&self, target: &InvokeTarget) -> Result<()>;
    /// Stops serving a function (it was deleted or disabled): calls running finish, calls
    /// waiting are refused, no new instance starts.
    async fn remove(&self, namespace: &str, name: &str) -> Result<()>;
    /// Releases what this server process owns and waits for it (local: its instances;
    /// a Kubernetes backend leaves the workloads, which outlive the process).
    async fn shutdown(&self);
}

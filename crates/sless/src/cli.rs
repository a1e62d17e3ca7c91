//! Command-line arguments. Every server flag has a `SLESS_*` environment equivalent.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::telemetry::LogFormat;

/// sless: a self-hosted serverless functions platform.
#[derive(Debug, Parser)]
#[command(name = "sless", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// A client command's arguments with where to find the server (`--url`, `--token`, `-n`,
/// which only client commands take).
#[derive(Debug, Args)]
pub struct Client<T: Args> {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub args: T,
}

/// A client command group (`fn`, `trigger`, `job`, `invocation`) with where to find the
/// server; the connection flags are accepted before or after the subcommand.
#[derive(Debug, Args)]
pub struct ClientGroup<T: Subcommand> {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: T,
}

/// Where the client commands find the server. Without flags or environment variables, the
/// `client.json` written by `sless up` (in `./.sless`) or `sless server` (in the user's
/// config folder) is used.
#[derive(Debug, Args, Clone)]
pub struct Connection {
    /// Server URL, e.g. http://127.0.0.1:8080.
    #[arg(long, global = true, env = "SLESS_URL")]
    pub url: Option<String>,
    /// API token.
    #[arg(long, global = true, env = "SLESS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the API token from this file instead (e.g. a mounted Secret or a projected
    /// service-account token); surrounding whitespace is ignored.
    #[arg(long, global = true, env = "SLESS_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Namespace of the functions.
    #[arg(long, short = 'n', global = true, env = "SLESS_NAMESPACE", default_value = "default")]
    pub namespace: String,
}

/// The variables a server reads besides its flags' (shown after `server --help`, `up --help`).
const SERVER_ENVIRONMENT: &str = "\
Environment (besides each flag's SLESS_* variable above):
  SLESS_ADMIN_TOKEN   the admin token (at least 16 characters); without it one is generated
                      at first start into <data dir>/admin-token (mode 0600). A variable, not
                      a flag: a flag's value is visible to every local user in the process list.
  SLESS_TOKEN_KEY     the key token secrets are hashed under (at least 32 characters); without
                      it one is generated at first start into <data dir>/token-key (mode 0600).
                      Servers sharing a database must share it.
  SLESS_CONFIG_DIR    where the CLI's client.json is written (default $XDG_CONFIG_HOME/sless
                      or ~/.config/sless)
  AWS_*               the S3 settings of an s3:// --blob-url (AWS_ENDPOINT_URL, AWS_REGION, ...)
  RUST_LOG            log filter (default info)";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the platform: API, builds and the local supervisor.
    #[command(after_help = SERVER_ENVIRONMENT)]
    Server(ServerArgs),
    /// Run a platform in the foreground and deploy the app in DIR (a dev loop).
    #[command(after_help = SERVER_ENVIRONMENT)]
    Up(UpArgs),
    /// Zip a folder, create or update the function, upload it and wait until it is Ready.
    Deploy(Client<DeployArgs>),
    /// Call a function and print its response body.
    Invoke(Client<InvokeArgs>),
    /// List, show, update or delete functions.
    Fn(ClientGroup<FnCommand>),
    /// List a function's versions.
    Versions(Client<VersionsArgs>),
    /// Make an earlier version of a function active again.
    Rollback(Client<RollbackArgs>),
    /// List, set or unset a function's environment variables.
    Env(ClientGroup<EnvCommand>),
    /// Create, list, show, enable, disable or delete triggers (http URLs and cron schedules).
    Trigger(ClientGroup<TriggerCommand>),
    /// Create, run, list, show or delete jobs (one-off runs of a function).
    Job(ClientGroup<JobCommand>),
    /// List a function's recent calls, newest first.
    Invocations(Client<InvocationsArgs>),
    /// Show one call with its log lines (`sless invocation ID`, or `invocation get ID`).
    Invocation(InvocationGroup),
    /// Print a function's log lines (-f to follow).
    Logs(Client<LogsArgs>),
    /// Delete unused versions and the archives no version references, now (the server
    /// also does it periodically).
    Gc(Client<GcArgs>),
    /// Create, list or revoke tokens scoped to namespaces with a role (admin, developer,
    /// invoker, viewer).
    Token(ClientGroup<TokenCommand>),
    /// Create, list, show, set quotas of or delete namespaces (tenants).
    Namespace(ClientGroup<NamespaceCommand>),
    /// Print the CustomResourceDefinitions of the Kubernetes backend (Function, Trigger,
    /// FunctionJob) as YAML, for `kubectl apply -f -`.
    Crds,
    /// Run the Kubernetes operator's controllers against the cluster of KUBECONFIG (or the
    /// in-cluster config): Functions become image builds, Deployments and Services
    /// (docs/kubernetes.md, "The operator").
    Operator(OperatorArgs),
    /// Write the build context of an archive: fetch it from the archive store, check its
    /// SHA-256 and entries, unpack it, add the runtime's shim and a Dockerfile (the first
    /// step of a Kubernetes build Job; docs/kubernetes.md, "Builds").
    BuildContext(BuildContextArgs),
}

/// `sless build-context`.
#[derive(Debug, Args)]
pub struct BuildContextArgs {
    /// The archive store: s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH.
    #[arg(long, env = "SLESS_BLOB_URL")]
    pub blob_url: String,
    /// The archive's SHA-256 (lowercase hex): archives/<sha256>.zip.
    #[arg(long)]
    pub sha256: String,
    /// The runtime: python3.11 or nodejs20.
    #[arg(long)]
    pub runtime: String,
    /// The base image the Dockerfile starts from, pinned by digest.
    #[arg(long)]
    pub base_image: String,
    /// The folder to write (empty or missing).
    #[arg(long)]
    pub out: PathBuf,
}

/// `sless operator`: every setting has a flag and a `SLESS_` variable (docs/kubernetes.md,
/// "Operator settings").
#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// Reconcile the Functions of this namespace only (default: every namespace).
    #[arg(long, env = "SLESS_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// Prefix of the tenants' workload namespaces: tenant `acme` runs in `<prefix>acme`.
    #[arg(long, env = "SLESS_NAMESPACE_PREFIX", default_value = "sless-fn-")]
    pub namespace_prefix: String,
    /// The namespace of sless itself (API and operator): the only source of traffic to
    /// function pods.
    #[arg(long, env = "SLESS_SYSTEM_NAMESPACE", default_value = "sless")]
    pub sless_namespace: String,
    /// Per tenant: most pods (ResourceQuota).
    #[arg(long, env = "SLESS_TENANT_MAX_PODS", default_value_t = 50)]
    pub tenant_max_pods: u32,
    /// Per tenant: most memory of all pods, in MiB (ResourceQuota).
    #[arg(long, env = "SLESS_TENANT_MAX_MEMORY_MB", default_value_t = 16384)]
    pub tenant_max_memory_mb: u64,
    /// CPU requested by each function pod, in millicores.
    #[arg(long, env = "SLESS_CPU_REQUEST_MILLIS", default_value_t = 100)]
    pub cpu_request_millis: u32,
    /// Address ranges of the cluster that function egress may not reach besides DNS and the
    /// sless namespace (repeat, or separate with commas).
    #[arg(
        long = "cluster-cidr",
        env = "SLESS_CLUSTER_CIDRS",
        value_delimiter = ',',
        default_value = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
    )]
    pub cluster_cidrs: Vec<String>,
    /// The namespace builds run in (holds the push credentials; Pod Security `baseline`).
    #[arg(long, env = "SLESS_BUILD_NAMESPACE", default_value = "sless-build")]
    pub build_namespace: String,
    /// The image builder (a maintained kaniko fork), pinned by digest: NAME@sha256:<64 hex>.
    #[arg(long, env = "SLESS_BUILDER_IMAGE")]
    pub builder_image: String,
    /// The sless image, pinned by digest: it prepares build contexts and fires cron triggers.
    #[arg(long, env = "SLESS_IMAGE")]
    pub sless_image: String,
    /// Base image of python3.11 functions, pinned by digest.
    #[arg(long, env = "SLESS_PYTHON311_BASE_IMAGE")]
    pub python311_base_image: String,
    /// Base image of nodejs20 functions, pinned by digest.
    #[arg(long, env = "SLESS_NODEJS20_BASE_IMAGE")]
    pub nodejs20_base_image: String,
    /// Where images are pushed, REGISTRY/PATH: an image is <repository>/<runtime>:<sha256>.
    #[arg(long, env = "SLESS_IMAGE_REPOSITORY")]
    pub image_repository: String,
    /// The archive store builds read, s3://BUCKET/PREFIX (the API server's --blob-url).
    #[arg(long, env = "SLESS_BLOB_URL")]
    pub blob_url: String,
    /// Secret in the build namespace whose keys are the context step's environment (S3
    /// credentials); optional.
    #[arg(long, env = "SLESS_BLOB_SECRET", default_value = "sless-blobs")]
    pub blob_secret: String,
    /// Secret (kubernetes.io/dockerconfigjson) in the build namespace the builder pushes with.
    #[arg(long, env = "SLESS_PUSH_SECRET", default_value = "sless-registry")]
    pub push_secret: String,
    /// A build running longer fails, in seconds.
    #[arg(long, env = "SLESS_BUILD_DEADLINE_SEC", default_value_t = 900)]
    pub build_deadline_sec: u32,
    /// A finished build Job is deleted after this many seconds.
    #[arg(long, env = "SLESS_BUILD_TTL_SEC", default_value_t = 86400)]
    pub build_ttl_sec: u32,
    /// Memory limit of a build pod, in MiB.
    #[arg(long, env = "SLESS_BUILD_MEMORY_MB", default_value_t = 2048)]
    pub build_memory_mb: u32,
    /// An extra label on build pods, KEY=VALUE (repeat; e.g. for cost allocation or a
    /// scheduling policy).
    #[arg(long = "build-pod-label", env = "SLESS_BUILD_POD_LABELS", value_delimiter = ',')]
    pub build_pod_labels: Vec<String>,
    /// The sless API's Service in the sless namespace (Ingresses and cron calls reach it).
    #[arg(long, env = "SLESS_API_SERVICE", default_value = "sless-api")]
    pub api_service: String,
    /// The sless API Service's port.
    #[arg(long, env = "SLESS_API_PORT", default_value_t = 8080)]
    pub api_port: i32,
    /// The class of the http triggers' Ingresses (default: the cluster's default class).
    #[arg(long, env = "SLESS_INGRESS_CLASS")]
    pub ingress_class: Option<String>,
    /// The host the http triggers' Ingresses answer for (default: any).
    #[arg(long, env = "SLESS_INGRESS_HOST")]
    pub ingress_host: Option<String>,
    /// The audience of the service-account token a cron pod presents to the API.
    #[arg(long, env = "SLESS_TOKEN_AUDIENCE", default_value = "sless")]
    pub token_audience: String,
    /// A cron tick missed by more than this many seconds is skipped.
    #[arg(long, env = "SLESS_CRON_STARTING_DEADLINE_SEC", default_value_t = 60)]
    pub cron_starting_deadline_sec: i64,
    /// Elect a leader among the operator's replicas: only the holder of the Lease
    /// `--lease-name` in the sless namespace runs the controllers.
    #[arg(long, env = "SLESS_LEADER_ELECT")]
    pub leader_elect: bool,
    /// The Lease of leader election.
    #[arg(long, env = "SLESS_LEASE_NAME", default_value = "sless-operator")]
    pub lease_name: String,
    /// This replica's identity in the Lease (default: the pod's name, `$HOSTNAME`).
    #[arg(long, env = "SLESS_LEASE_IDENTITY")]
    pub lease_identity: Option<String>,
    /// A leader that has not renewed the Lease for this many seconds loses it.
    #[arg(long, env = "SLESS_LEASE_DURATION_SEC", default_value_t = 15)]
    pub lease_duration_sec: u64,
    /// The leader renews this many seconds before its lock would expire.
    #[arg(long, env = "SLESS_LEASE_GRACE_SEC", default_value_t = 5)]
    pub lease_grace_sec: u64,
    /// Log format.
    #[arg(long, env = "SLESS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print its secret (shown this once).
    Create(TokenCreateArgs),
    /// List tokens (never their secrets).
    List(OutputArgs),
    /// Revoke a token: it is refused from now on.
    Revoke {
        /// The token's id (tok_…).
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The namespaces it reaches (repeat, or separate with commas); default: -n's.
    #[arg(long = "scope", value_delimiter = ',')]
    pub scope: Vec<String>,
    /// What it may do: admin (developer + tokens), developer (manage and call), invoker
    /// (call only), viewer (read only).
    #[arg(long, value_parser = ["admin", "developer", "invoker", "viewer"])]
    pub role: String,
    /// What it is for.
    #[arg(long, default_value = "")]
    pub description: String,
    /// When it stops working: a duration from now (90m, 12h, 30d) or an RFC 3339 time.
    #[arg(long)]
    pub expires: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create a namespace, with quotas if given.
    Create {
        /// Namespace name.
        name: String,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// List namespaces (a token sees those it reaches).
    List(OutputArgs),
    /// Show a namespace with its quotas and usage.
    Get {
        /// Namespace name.
        name: String,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Set quotas (`none` removes one; quotas not named stay as they are).
    SetQuota {
        /// Namespace name.
        name: String,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// Delete a namespace (refused while it holds functions, triggers or jobs, unless
    /// --force deletes them too).
    Delete {
        /// Namespace name.
        name: String,
        /// Delete its functions, triggers and jobs with it.
        #[arg(long)]
        force: bool,
    },
}

/// A namespace's quotas as flags: a number, or `none` for no limit.
#[derive(Debug, Args)]
pub struct QuotaArgs {
    /// Most functions.
    #[arg(long)]
    pub max_functions: Option<String>,
    /// Most instances (the sum of the functions' max_instances).
    #[arg(long)]
    pub max_instances: Option<String>,
    /// Most memory in MiB (the sum of memory_mb × max_instances).
    #[arg(long)]
    pub max_memory_mb: Option<String>,
    /// Most requests per minute per token.
    #[arg(long)]
    pub requests_per_minute: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct ServerArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "SLESS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Data folder: database, archives, builds. Default: ./.sless for `up`, the platform
    /// data folder ($XDG_DATA_HOME/sless or ~/.local/share/sless) for `server`.
    #[arg(long, env = "SLESS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Registry and invocation log: sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DB
    /// (default: sless.db in the data folder).
    #[arg(long, env = "SLESS_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Archive store: file:///PATH or s3://BUCKET/PREFIX, configured by the usual AWS_*
    /// variables (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_ALLOW_HTTP, …) (default: archives/ in the data folder).
    #[arg(long, env = "SLESS_BLOB_URL")]
    pub blob_url: Option<String>,
    /// Where functions run; only `local` in this build.
    #[arg(long, env = "SLESS_BACKEND", value_enum, default_value = "local")]
    pub backend: Backend,
    /// Python 3.11 interpreter (a name in PATH or a path).
    #[arg(long, env = "SLESS_PYTHON", default_value = "python3")]
    pub python: String,
    /// Node.js 20 interpreter (a name in PATH or a path).
    #[arg(long, env = "SLESS_NODE", default_value = "node")]
    pub node: String,
    /// Longest build (unpack, dependency install, entrypoint load), in seconds.
    #[arg(long, env = "SLESS_BUILD_TIMEOUT_SEC", default_value_t = 300)]
    pub build_timeout_sec: u64,
    /// Most instances of one function at once; more calls wait.
    #[arg(long, env = "SLESS_MAX_INSTANCES_PER_FUNCTION", default_value_t = 4)]
    pub max_instances_per_function: usize,
    /// Most calls of one function waiting for a free instance; more get 429 with Retry-After.
    #[arg(long, env = "SLESS_MAX_QUEUE_PER_FUNCTION", default_value_t = 100)]
    pub max_queue_per_function: usize,
    /// Most instances of all functions together; at the cap the least recently used idle
    /// instance is stopped to make room.
    #[arg(long, env = "SLESS_MAX_INSTANCES", default_value_t = 256)]
    pub max_instances: usize,
    /// Seconds an idle instance is kept before it stops (scale to zero); a function's
    /// `idle_timeout_sec` overrides it.
    #[arg(long, env = "SLESS_IDLE_TIMEOUT_SEC", default_value_t = 300)]
    pub idle_timeout_sec: u64,
    /// Seconds an idle instance beyond a function's first is kept (scale down).
    #[arg(long, env = "SLESS_SCALE_DOWN_DELAY_SEC", default_value_t = 30)]
    pub scale_down_delay_sec: u64,
    /// Generic runtime processes kept started per runtime, so a cold start pays only the
    /// function's import (0 disables the warm pool).
    #[arg(long, env = "SLESS_WARM_POOL_SIZE", default_value_t = 1)]
    pub warm_pool_size: usize,
    /// Largest code archive (zipped), in MiB.
    #[arg(long, env = "SLESS_MAX_ARCHIVE_MB", default_value_t = 50)]
    pub max_archive_mb: u64,
    /// Largest unpacked code archive, in MiB.
    #[arg(long, env = "SLESS_MAX_UNPACKED_MB", default_value_t = 250)]
    pub max_unpacked_mb: u64,
    /// Largest invoke request and function response body, in MiB.
    #[arg(long, env = "SLESS_MAX_BODY_MB", default_value_t = 6)]
    pub max_body_mb: usize,
    /// Invocation records older than this are deleted, in hours.
    #[arg(long, env = "SLESS_INVOCATIONS_MAX_AGE_HOURS", default_value_t = 168)]
    pub invocations_max_age_hours: u64,
    /// At most this many invocation records are kept per function.
    #[arg(long, env = "SLESS_INVOCATIONS_PER_FUNCTION", default_value_t = 10_000)]
    pub invocations_per_function: u64,
    /// Keep no invocation records (calls are still counted in /metrics and their logs still
    /// stream): saves one database row per call on servers where records are not wanted.
    #[arg(long, env = "SLESS_NO_RECORD")]
    pub no_record: bool,
    /// How often triggers and jobs are reconciled even without a change, in seconds.
    #[arg(long, env = "SLESS_RESYNC_SEC", default_value_t = 30)]
    pub resync_sec: u64,
    /// How often unused versions and archives are collected, in seconds (0: only by
    /// `sless gc`).
    #[arg(long, env = "SLESS_GC_INTERVAL_SEC", default_value_t = 3600)]
    pub gc_interval_sec: u64,
    /// Versions the collector keeps per function besides the active one: the newest ones.
    #[arg(long, env = "SLESS_GC_KEEP_VERSIONS", default_value_t = 10)]
    pub gc_keep_versions: u32,
    /// Archives no version references are kept this long after they were written, in
    /// seconds (an upload stores its archive before it adds the version).
    #[arg(long, env = "SLESS_GC_GRACE_SEC", default_value_t = 3600)]
    pub gc_grace_sec: u64,
    /// Longest time from a connection's accept, or a request's first byte, until its whole
    /// head (request line and headers) is in, in ms; then the connection is closed.
    #[arg(
        long,
        env = "SLESS_HEADER_READ_TIMEOUT_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub header_read_timeout_ms: u64,
    /// Longest wait for the next part of a request body, in ms; then 408 and the connection
    /// is closed.
    #[arg(
        long,
        env = "SLESS_BODY_READ_TIMEOUT_MS",
        default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub body_read_timeout_ms: u64,
    /// Longest time from a request's head until its whole body is in, in ms (600 s: a 50 MiB
    /// archive at 0.7 Mbit/s); then 408 and the connection is closed. Answers are not timed.
    #[arg(
        long,
        env = "SLESS_BODY_TOTAL_TIMEOUT_MS",
        default_value_t = 600_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub body_total_timeout_ms: u64,
    /// How long a keep-alive connection may wait for its next request, in ms; then it is
    /// closed.
    #[arg(
        long,
        env = "SLESS_KEEP_ALIVE_TIMEOUT_MS",
        default_value_t = 75_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub keep_alive_timeout_ms: u64,
    /// Most HTTP connections at once; one more is answered 503 with Retry-After and closed.
    /// Keep it well below `ulimit -n`.
    #[arg(
        long,
        env = "SLESS_MAX_CONNECTIONS",
        default_value_t = 512,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_connections: u64,
    /// Most HTTP connections at once from one client address; one more from it is answered
    /// 503 like one over --max-connections. Behind a reverse proxy (every client has its
    /// address) set it to --max-connections, where it never applies.
    #[arg(
        long,
        env = "SLESS_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = 256,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_connections_per_client: u64,
    /// Largest request head (request line and headers), in bytes; a larger one gets 431.
    #[arg(
        long,
        env = "SLESS_MAX_HEADER_BYTES",
        default_value_t = 65_536,
        value_parser = clap::value_parser!(u64).range(1024..=16 * 1024 * 1024)
    )]
    pub max_header_bytes: u64,
    /// Most header fields in a request; more get 431.
    #[arg(
        long,
        env = "SLESS_MAX_HEADERS",
        default_value_t = 100,
        value_parser = clap::value_parser!(u64).range(1..=10_000)
    )]
    pub max_headers: u64,
    /// Log format.
    #[arg(long, env = "SLESS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// The backend that runs functions.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Backend {
    /// Child processes on this machine.
    Local,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// The app folder: a sless.toml manifest, or one function's code.
    pub dir: PathBuf,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args, Clone)]
pub struct DeployArgs {
    /// The function's folder.
    pub dir: PathBuf,
    /// Function name (default: the folder's name).
    #[arg(long)]
    pub name: Option<String>,
    /// python3.11 or nodejs20 (default: detected from the files).
    #[arg(long)]
    pub runtime: Option<String>,
    /// folder/module.function (default: detected, handler `handler`).
    #[arg(long)]
    pub entrypoint: Option<String>,
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Environment variable KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Don't wait for the build.
    #[arg(long)]
    pub no_wait: bool,
}

/// A function's settings as flags (docs/api.md, "Functions"); those not given stay as they
/// are.
#[derive(Debug, Args, Clone, Default)]
pub struct SpecArgs {
    /// Memory limit of one instance in MiB (64–4096).
    #[arg(long, value_name = "MIB")]
    pub memory: Option<u32>,
    /// Longest call in seconds (1–900).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u32>,
    /// Calls one instance serves at once (1–100).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Most instances at once (1–1000), or `default` for the server's.
    #[arg(long, value_name = "N|default")]
    pub max_instances: Option<String>,
    /// Seconds an idle instance is kept (1–86400), or `default` for the server's.
    #[arg(long, value_name = "SECONDS|default")]
    pub idle_timeout: Option<String>,
    /// The HTTP event format: 1.0 (API Gateway REST, the default) or 2.0 (HTTP API, function URLs).
    #[arg(long, value_parser = ["1.0", "2.0"])]
    pub payload_format: Option<String>,
    /// Serve calls (the default for a new function).
    #[arg(long, conflicts_with = "disable")]
    pub enable: bool,
    /// Keep the code but answer calls with 503.
    #[arg(long)]
    pub disable: bool,
}

#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// Function name.
    pub name: String,
    /// Request body, or @FILE to read it from a file (@- for stdin).
    #[arg(short = 'd', long = "data")]
    pub data: Option<String>,
    /// Raw invocation: this JSON (or @FILE, @- for stdin) is the event itself, and the
    /// handler's return value is printed as JSON (`?integration=raw`).
    #[arg(long, value_name = "JSON|@FILE", conflicts_with_all = ["data", "method", "path", "headers"])]
    pub payload: Option<String>,
    /// HTTP method (default: POST with data, GET without).
    #[arg(short = 'X', long)]
    pub method: Option<String>,
    /// Path after the function's URL, e.g. /notes/1?x=y.
    #[arg(long, default_value = "/")]
    pub path: String,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Print the status line and headers too.
    #[arg(short = 'i', long)]
    pub include: bool,
}

#[derive(Debug, Subcommand)]
pub enum FnCommand {
    /// List functions.
    List(OutputArgs),
    /// Show one function.
    Get {
        /// Function name.
        name: String,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Delete a function with everything it owns.
    Delete {
        /// Function name.
        name: String,
    },
    /// Change a function's settings (only those given; env: `sless env`).
    Update {
        /// Function name.
        name: String,
        /// python3.11 or nodejs20 (the code is built again for it).
        #[arg(long)]
        runtime: Option<String>,
        /// folder/module.function.
        #[arg(long)]
        entrypoint: Option<String>,
        #[command(flatten)]
        spec: SpecArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Print a function's environment variables (KEY=VALUE; they may be secrets).
    List {
        /// Function name.
        name: String,
    },
    /// Set environment variables (the others stay).
    Set {
        /// Function name.
        name: String,
        /// KEY=VALUE (one or more).
        #[arg(required = true, value_name = "KEY=VALUE")]
        vars: Vec<String>,
    },
    /// Remove environment variables.
    Unset {
        /// Function name.
        name: String,
        /// KEY (one or more).
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Function name.
    pub name: String,
    /// The earlier version to make active again (`sless versions NAME` lists them).
    pub version: u32,
    /// Don't wait until it serves.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct VersionsArgs {
    /// Function name.
    pub name: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// The API's JSON.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum TriggerCommand {
    /// Create a trigger: `--http` publishes the function at {server}/fn/{ns}/{function},
    /// `--cron SCHEDULE` calls it on a schedule.
    Create(TriggerCreateArgs),
    /// List triggers.
    List(OutputArgs),
    /// Show one trigger.
    Get {
        /// Trigger name.
        name: String,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Delete a trigger.
    Delete {
        /// Trigger name.
        name: String,
    },
    /// Enable a trigger.
    Enable {
        /// Trigger name.
        name: String,
    },
    /// Disable a trigger (it stays, but does nothing).
    Disable {
        /// Trigger name.
        name: String,
    },
    /// Fire a cron trigger now: its function is called once with the event its schedule
    /// sends, and its answer printed (as `invoke` prints it).
    Fire {
        /// Trigger name.
        name: String,
        /// Print the status line and headers too.
        #[arg(short = 'i', long)]
        include: bool,
    },
}

/// Who may call an http trigger's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpAuthArg {
    /// Anyone.
    None,
    /// Callers with a token for the namespace.
    Token,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("kind").required(true).args(["http", "cron"])))]
pub struct TriggerCreateArgs {
    /// Trigger name.
    pub name: String,
    /// The function it calls.
    #[arg(long, short = 'f')]
    pub function: String,
    /// An http trigger: the function's public URL.
    #[arg(long)]
    pub http: bool,
    /// Who may call the URL (http only).
    #[arg(long, value_enum, conflicts_with = "cron")]
    pub auth: Option<HttpAuthArg>,
    /// The HTTP event format of calls through the URL: 1.0 or 2.0 (http only; default: the function's).
    #[arg(long, value_parser = ["1.0", "2.0"], conflicts_with = "cron")]
    pub payload_format: Option<String>,
    /// A cron trigger: 5-field cron, an @hourly-style macro, or `@every 30s`.
    #[arg(long, value_name = "SCHEDULE")]
    pub cron: Option<String>,
    /// IANA time zone of the schedule (cron only; default UTC).
    #[arg(long, conflicts_with = "http")]
    pub timezone: Option<String>,
    /// JSON delivered as the cron event's `detail`, or @FILE (cron only).
    #[arg(long, conflicts_with = "http", value_name = "JSON|@FILE")]
    pub payload: Option<String>,
    /// Start an instance this many seconds before each tick (cron only).
    #[arg(long, conflicts_with = "http", value_name = "SEC")]
    pub prewarm: Option<u32>,
    /// Create it disabled.
    #[arg(long)]
    pub disabled: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Create a job; it runs once its function is Ready (unless --run-id 0 or --disabled).
    Create(JobCreateArgs),
    /// Run a job again: bumps its run_id by one.
    Run(JobRunArgs),
    /// List jobs.
    List(OutputArgs),
    /// Show one job with its last run.
    Get {
        /// Job name.
        name: String,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Delete a job.
    Delete {
        /// Job name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct JobCreateArgs {
    /// Job name.
    pub name: String,
    /// The function it runs.
    #[arg(long, short = 'f')]
    pub function: String,
    /// Run id: 0 never runs; any other value runs once, and again whenever it changes.
    #[arg(long, default_value_t = 1)]
    pub run_id: u64,
    /// JSON delivered as the job event's `payload`, or @FILE.
    #[arg(long, value_name = "JSON|@FILE")]
    pub payload: Option<String>,
    /// Create it disabled.
    #[arg(long)]
    pub disabled: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct JobRunArgs {
    /// Job name.
    pub name: String,
    /// Wait for the run to finish and print its result (exit code 1 if it failed).
    #[arg(long, short = 'w')]
    pub wait: bool,
    /// With --wait: give up after this many seconds.
    #[arg(long, value_name = "SEC", requires = "wait")]
    pub timeout: Option<u64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct InvocationsArgs {
    /// Function name.
    pub name: String,
    /// Only these outcomes, comma-separated: ok, error, timeout, oom, crash, rejected.
    #[arg(long, value_name = "OUTCOMES")]
    pub status: Option<String>,
    /// Only calls started since then: a duration ago (30s, 10m, 2h, 1d, 1h30m) or RFC 3339.
    #[arg(long, value_name = "AGO|RFC3339")]
    pub since: Option<String>,
    /// Only calls started before then: a duration ago or RFC 3339.
    #[arg(long, value_name = "AGO|RFC3339")]
    pub until: Option<String>,
    /// Most calls to show.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `sless invocation ID` or `sless invocation get ID`.
#[derive(Debug, Args)]
pub struct InvocationGroup {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: Option<InvocationCommand>,
    /// Invocation id (the request id).
    pub id: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

impl InvocationGroup {
    /// The one thing asked: the id and the output format, from either form. Errors: neither
    /// given.
    pub fn wanted(self) -> anyhow::Result<(String, OutputArgs)> {
        match (self.command, self.id) {
            (Some(InvocationCommand::Get { id, out }), _) => Ok((id, out)),
            (None, Some(id)) => Ok((id, self.out)),
            (None, None) => anyhow::bail!("name the invocation: sless invocation ID"),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum InvocationCommand {
    /// Show one call and the lines it printed.
    Get {
        /// Invocation id (the request id).
        id: String,
        #[command(flatten)]
        out: OutputArgs,
    },
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Function name.
    pub name: String,
    /// Keep printing new lines until Ctrl-C.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// How many recent lines to print first.
    #[arg(long, default_value_t = 100)]
    pub tail: u32,
    /// Output format: table prints `TIME REQUEST_ID LINE`, json one JSON object per line.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Versions to keep per function besides the active one (default: the server's
    /// --gc-keep-versions).
    #[arg(long, value_name = "N")]
    pub keep_versions: Option<u32>,
    /// Keep unreferenced archives written less than this many seconds ago (default: the
    /// server's --gc-grace-sec).
    #[arg(long, value_name = "SEC")]
    pub grace_sec: Option<u64>,
    /// Only show what would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

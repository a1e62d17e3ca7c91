//! Command-line arguments. Every server flag has a `SLESS_*` environment equivalent.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::telemetry::LogFormat;

/// sless: a self-hosted serverless functions platform.
#[derive(Debug, Parser)]
#[command(name = "sless", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: Command,
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
    /// Namespace of the functions.
    #[arg(long, short = 'n', global = true, env = "SLESS_NAMESPACE", default_value = "default")]
    pub namespace: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the platform: API, builds and the local supervisor.
    Server(ServerArgs),
    /// Run a platform in the foreground and deploy the app in DIR (a dev loop).
    Up(UpArgs),
    /// Zip a folder, create or update the function, upload it and wait until it is Ready.
    Deploy(DeployArgs),
    /// Call a function and print its response body.
    Invoke(InvokeArgs),
    /// List, show or delete functions.
    #[command(subcommand)]
    Fn(FnCommand),
    /// List a function's versions.
    Versions(VersionsArgs),
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
    /// Registry database: sqlite://PATH (default: sless.db in the data folder).
    #[arg(long, env = "SLESS_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Archive store: file:///PATH (default: archives/ in the data folder).
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
    /// Largest code archive (zipped), in MiB.
    #[arg(long, env = "SLESS_MAX_ARCHIVE_MB", default_value_t = 50)]
    pub max_archive_mb: u64,
    /// Largest unpacked code archive, in MiB.
    #[arg(long, env = "SLESS_MAX_UNPACKED_MB", default_value_t = 250)]
    pub max_unpacked_mb: u64,
    /// Largest invoke request and function response body, in MiB.
    #[arg(long, env = "SLESS_MAX_BODY_MB", default_value_t = 6)]
    pub max_body_mb: usize,
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
    /// Memory limit in MiB.
    #[arg(long)]
    pub memory: Option<u32>,
    /// Timeout in seconds.
    #[arg(long)]
    pub timeout: Option<u32>,
    /// Environment variable KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Don't wait for the build.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// Function name.
    pub name: String,
    /// Request body, or @FILE to read it from a file (@- for stdin).
    #[arg(short = 'd', long = "data")]
    pub data: Option<String>,
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

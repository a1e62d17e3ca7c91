//! What the platform reports besides resources: function output lines (`GET …/logs`) and
//! what a collector run deleted (`POST /v1/gc`). Shared by the server, which writes them, and
//! the client, which reads them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One output line of a function (`GET …/logs`, and each event of the followed stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogLine {
    /// When sless read it.
    pub time: DateTime<Utc>,
    /// The call it belongs to, when known.
    pub request_id: Option<String>,
    /// The line, without its newline.
    pub line: String,
}

/// A version the collector deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CollectedVersion {
    /// The function's namespace.
    pub namespace: String,
    /// The function.
    pub function: String,
    /// The version number.
    pub version: u32,
    /// Its archive's SHA-256.
    pub sha256: String,
}

/// An archive the collector deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CollectedArchive {
    /// Its blob key.
    pub key: String,
    /// Its size in bytes.
    pub size_bytes: u64,
}

/// What one collector run deleted (or, on a dry run, would delete).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GcReport {
    /// Whether nothing was actually deleted.
    pub dry_run: bool,
    /// Versions deleted, by function and number.
    pub versions: Vec<CollectedVersion>,
    /// Archives deleted.
    pub archives: Vec<CollectedArchive>,
    /// Build logs deleted (of versions that no longer exist), by key (absent from servers
    /// older than build logs in the blob store: read as empty).
    #[serde(default)]
    pub build_logs: Vec<String>,
    /// The archives' and build logs' bytes together.
    pub bytes_freed: u64,
}

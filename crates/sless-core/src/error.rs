//! The error type of `sless-core`.

/// Errors raised by validation, archive checks and the backend traits.
///
/// Each variant maps to one HTTP status in the API (docs/api.md); the mapping lives in
/// `sless-server`, the message here is safe to show to users (it never contains env values).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request field is missing or invalid (400). `field` is the JSON path, e.g. `memory_mb`.
    #[error("{field}: {message}")]
    InvalidField {
        /// The offending field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The archive is larger than the compressed limit (413).
    #[error("archive is {size} bytes, larger than the limit of {limit} bytes")]
    ArchiveTooLarge {
        /// Size of the body in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The archive is not acceptable (422). `entry` names the zip entry at fault, if any.
    #[error("{}{message}", entry.as_ref().map(|e| format!("entry {e:?}: ")).unwrap_or_default())]
    InvalidArchive {
        /// The zip entry at fault.
        entry: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The resource does not exist (404).
    #[error("{kind} {name:?} not found")]
    NotFound {
        /// `function`, `version`, …
        kind: &'static str,
        /// Its name or number.
        name: String,
    },
    /// The resource already exists (409).
    #[error("{kind} {name:?} already exists")]
    AlreadyExists {
        /// `function`, …
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// `If-Match` named another `resource_version` (412).
    #[error("resource_version is {current}, not {expected}")]
    Stale {
        /// The version the client expected.
        expected: String,
        /// The stored version.
        current: String,
    },
    /// A write would exceed a namespace's quota (403).
    #[error(transparent)]
    QuotaExceeded(#[from] crate::tenant::QuotaExceeded),
    /// The request conflicts with what exists, e.g. deleting a namespace that holds
    /// functions (409).
    #[error("{0}")]
    Conflict(String),
    /// A storage backend failed (500/503; details are logged, not shown).
    #[error("storage error: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Any other internal failure (500; details are logged, not shown).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::InvalidField`].
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidField { field: field.into(), message: message.into() }
    }

    /// Shorthand for [`Error::InvalidArchive`] naming an entry.
    pub fn archive(entry: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidArchive { entry: Some(entry.into()), message: message.into() }
    }

    /// Shorthand for [`Error::Storage`].
    pub fn storage(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Storage(Box::new(err))
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

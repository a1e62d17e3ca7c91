//! The error type of `sless-local`.

/// Errors of the local executor.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An interpreter (`python3`, `node`) is missing or is not the expected version.
    #[error("runtime {runtime}: {message}")]
    Interpreter {
        /// The runtime's name.
        runtime: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The runtime process broke the frame protocol.
    #[error("runtime protocol error: {0}")]
    Protocol(String),
    /// The function cannot be called now (no active version, or disabled).
    #[error("{0}")]
    NotReady(String),
    /// A registry or blob-store call failed.
    #[error(transparent)]
    Core(#[from] sless_core::Error),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}

impl From<Error> for sless_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(e) => e,
            other => sless_core::Error::Internal(other.to_string()),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

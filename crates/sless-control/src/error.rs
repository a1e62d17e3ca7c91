//! The error type of `sless-control`.

/// Errors of the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The function cannot be called now (no active version, or disabled): the API answers
    /// 503 `Function.NotReady` with this message.
    #[error("{0}")]
    NotReady(String),
    /// A registry, blob-store or executor call failed.
    #[error(transparent)]
    Core(#[from] sless_core::Error),
}

impl From<Error> for sless_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(e) => e,
            Error::NotReady(message) => sless_core::Error::Internal(message),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The client's one error type.

use std::time::Duration;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

/// An RFC 9457 problem the server answered with (`application/problem+json`), or what the
/// client made of an error answer that was not one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The problem type, e.g. `https://sless.dev/problems/not-found`; `about:blank` when the
    /// answer was not a problem document.
    #[serde(rename = "type", default = "about_blank")]
    pub kind: String,
    /// A short summary of the type, e.g. `Not found`.
    #[serde(default)]
    pub title: String,
    /// The HTTP status code (always the status line's, whatever the body said).
    #[serde(default)]
    pub status: u16,
    /// What went wrong, for a user; for a non-problem answer, its body text (at most 1,024
    /// bytes).
    #[serde(default)]
    pub detail: String,
    /// The request field at fault (`invalid-field` problems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The archive entry at fault (`invalid-archive` problems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The quota exceeded (`quota-exceeded` and `rate-limited` problems), e.g.
    /// `max_functions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
}

fn about_blank() -> String {
    "about:blank".into()
}

/// The prefix of the server's problem types.
pub const PROBLEM_BASE: &str = "https://sless.dev/problems/";

/// The longest body text kept in [`Problem::detail`] for a non-problem answer.
const MAX_DETAIL: usize = 1024;

impl Problem {
    /// Reads an error answer: a problem document when the body is one (a JSON object with a
    /// `type`, `title` or `detail`), else a problem of type `about:blank` whose detail is
    /// the body's text. `status` always wins over the body's `status`.
    pub fn from_response(status: StatusCode, body: &[u8]) -> Problem {
        let parsed = serde_json::from_slice::<serde_json::Value>(body).ok().filter(|v| {
            v.as_object().is_some_and(|o| o.contains_key("type") || o.contains_key("title") || o.contains_key("detail"))
        });
        if let Some(mut p) = parsed.and_then(|v| serde_json::from_value::<Problem>(v).ok()) {
            p.status = status.as_u16();
            if p.title.is_empty() {
                p.title = status.canonical_reason().unwrap_or_default().to_string();
            }
            return p;
        }
        let text = String::from_utf8_lossy(body);
        let mut detail = text.trim().to_string();
        if detail.len() > MAX_DETAIL {
            let mut cut = MAX_DETAIL;
            while !detail.is_char_boundary(cut) {
                cut -= 1;
            }
            detail.truncate(cut);
            detail.push('…');
        }
        Problem {
            kind: about_blank(),
            title: status.canonical_reason().unwrap_or_default().to_string(),
            status: status.as_u16(),
            detail,
            field: None,
            entry: None,
            quota: None,
        }
    }

    /// The type's last part (`not-found`, `invalid-field`, …), or the whole type when it is
    /// not one of the server's.
    pub fn slug(&self) -> &str {
        self.kind.strip_prefix(PROBLEM_BASE).unwrap_or(&self.kind)
    }
}

impl std::fmt::Display for Problem {
    /// `404 Not Found: function "f" not found` (the status line's reason, then the detail).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reason = StatusCode::from_u16(self.status).ok().and_then(|s| s.canonical_reason()).unwrap_or_default();
        write!(f, "{} {reason}: {}", self.status, self.detail)
    }
}

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status (4xx/5xx); the problem it described.
    #[error("{0}")]
    Api(Box<Problem>),
    /// The request did not get an answer: connection refused or reset, timeout, a broken
    /// body.
    #[error("cannot reach the server at {url}")]
    Transport {
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with a success status but a body that is not the expected JSON.
    #[error("cannot read the server's answer to {what}")]
    Decode {
        /// The request (`GET …/functions/f`), or `the log stream`.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// An answer lacked what it must have (e.g. a success status the route never sends).
    #[error("unexpected answer to {what}: {message}")]
    Unexpected {
        /// The request.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// A wait ([`crate::Client::wait_ready`]) ran past its deadline.
    #[error("{what} did not finish within {} s", .after.as_secs())]
    Timeout {
        /// What was awaited, e.g. `version 3 of f`.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
    /// The request could not be built (e.g. a header value with a newline).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl Error {
    /// The problem, when the server answered with an error status.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::Api(p) => Some(p.as_ref()),
            _ => None,
        }
    }

    /// The HTTP status, when the server answered with an error status.
    pub fn status(&self) -> Option<u16> {
        self.problem().map(|p| p.status)
    }

    /// Whether the server answered 404.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! Bearer-token auth for `/v1` (docs/architecture.md, "Security").

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use crate::{AppError, AppState};

/// The admin token. Only its SHA-256 is kept in memory; comparison is of digests, so it
/// takes the same time whatever the guess.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl AdminToken {
    /// Wraps a token.
    pub fn new(token: &str) -> Self {
        AdminToken { digest: Sha256::digest(token.as_bytes()).into() }
    }

    /// Whether `candidate` is the token.
    pub fn matches(&self, candidate: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        d.iter().zip(self.digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

pub(crate) async fn require_admin(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, AppError> {
    check(&state, request.headers())?;
    Ok(next.run(request).await)
}

/// Checks `Authorization: Bearer <token>`. Errors: 401.
pub(crate) fn check(state: &AppState, headers: &axum::http::HeaderMap) -> Result<(), AppError> {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Err(AppError::Unauthorized("missing bearer token: send Authorization: Bearer <token>"));
    };
    let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).map(str::trim);
    match token {
        Some(t) if state.admin_token.matches(t) => Ok(()),
        Some(_) => Err(AppError::Unauthorized("invalid bearer token")),
        // e.g. `Basic …`: not a wrong token, a scheme this API does not take.
        None => Err(AppError::Unauthorized("unsupported authorization scheme: send Authorization: Bearer <token>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_token() {
        let t = AdminToken::new("secret");
        assert!(t.matches("secret"));
        assert!(!t.matches("secret2"));
        assert!(!t.matches(""));
        assert!(!format!("{t:?}").contains("secret"));
    }
}

//! Who a request comes from and whether it may do what it asks (docs/architecture.md,
//! "Tenants"; docs/security.md): bearer tokens — the platform's admin token, or a token of
//! `POST /v1/tokens` scoped to namespaces with a role — checked against the namespace in
//! the path before any handler runs, and the per-token request rate of a namespace's quota.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use chrono::Utc;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use sless_core::tenant::{Action, Denied, NamespacePhase, Principal, authorize, split_token};

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

/// The key under which token secrets are hashed (HMAC-SHA256): a database of token hashes
/// alone does not let anyone check a guess. Servers sharing a database share the key
/// (`SLESS_TOKEN_KEY`, or `<data>/token-key` made at first start).
#[derive(Clone)]
pub struct TokenKey {
    key: Arc<[u8]>,
}

impl TokenKey {
    /// Wraps key bytes (at least 32).
    pub fn new(key: &[u8]) -> Self {
        TokenKey { key: key.into() }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }

    /// The hash of a secret as stored: HMAC-SHA256, lowercase hex.
    pub fn hash(&self, secret: &str) -> String {
        let mut mac = self.mac();
        mac.update(secret.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `secret` hashes to `stored` (lowercase hex), compared in constant time.
    pub fn verify(&self, secret: &str, stored: &str) -> bool {
        let Ok(expected) = hex::decode(stored) else { return false };
        let mut mac = self.mac();
        mac.update(secret.as_bytes());
        mac.verify_slice(&expected).is_ok()
    }
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

/// A limiter and the `requests_per_minute` it was made for.
type Limiter = (u32, Arc<DefaultDirectRateLimiter>);

/// The request rate each token has left in each namespace (`requests_per_minute`): a
/// GCRA limiter per (token id, namespace), replaced when the quota changes.
#[derive(Clone, Default)]
pub(crate) struct RateLimits {
    limiters: Arc<Mutex<HashMap<(String, String), Limiter>>>,
}

impl RateLimits {
    /// Takes one request from `token`'s allowance in `namespace`. Errors: 429 with the
    /// seconds until the next request is allowed.
    fn take(&self, token: &str, namespace: &str, per_minute: u32) -> Result<(), AppError> {
        let Some(rate) = NonZeroU32::new(per_minute) else { return Ok(()) };
        let limiter = {
            let mut map = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
            let entry = map
                .entry((token.to_string(), namespace.to_string()))
                .or_insert_with(|| (per_minute, Arc::new(RateLimiter::direct(Quota::per_minute(rate)))));
            if entry.0 != per_minute {
                *entry = (per_minute, Arc::new(RateLimiter::direct(Quota::per_minute(rate))));
            }
            entry.1.clone()
        };
        limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            AppError::RateLimited {
                namespace: namespace.to_string(),
                limit: per_minute,
                retry_after_secs: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
            }
        })
    }

    /// Forgets a revoked token's limiters.
    pub(crate) fn forget(&self, token: &str) {
        self.limiters.lock().unwrap_or_else(|e| e.into_inner()).retain(|(t, _), _| t != token);
    }
}

/// The bearer token of a request. Errors: 401 saying what is wrong with the header.
fn bearer(headers: &HeaderMap) -> Result<&str, AppError> {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = all.next() else {
        return Err(AppError::Unauthorized("missing bearer token: send Authorization: Bearer <token>"));
    };
    if all.next().is_some() {
        return Err(AppError::Unauthorized("more than one Authorization header: send one"));
    }
    let Ok(value) = value.to_str() else {
        return Err(AppError::Unauthorized("invalid bearer token"));
    };
    // The scheme is case-insensitive (RFC 9110 §11.1).
    let token = match value.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => Some(rest.trim()),
        _ if value.eq_ignore_ascii_case("bearer") => Some(""),
        _ => None,
    };
    match token {
        Some(t) if !t.is_empty() => Ok(t),
        Some(_) => Err(AppError::Unauthorized("missing bearer token: send Authorization: Bearer <token>")),
        // e.g. `Basic …`: not a wrong token, a scheme this API does not take.
        None => Err(AppError::Unauthorized("unsupported authorization scheme: send Authorization: Bearer <token>")),
    }
}

/// A hash no secret has, checked for an unknown token id.
const UNKNOWN_TOKEN_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Who sent `headers`. Errors: 401 for no token, a malformed one, a wrong secret, an
/// expired or a revoked token — all alike but for a missing or malformed header, so an
/// answer never tells which tokens exist.
pub(crate) async fn principal(state: &AppState, headers: &HeaderMap) -> Result<Principal, AppError> {
    let token = bearer(headers)?;
    if state.admin_token.matches(token) {
        return Ok(Principal::PlatformAdmin);
    }
    let invalid = AppError::Unauthorized("invalid bearer token");
    let Some((id, secret)) = split_token(token) else { return Err(invalid) };
    let stored = match state.tenants.get_token(&id).await {
        Ok(t) => t,
        Err(sless_core::Error::NotFound { .. }) => {
            // The same work as for a known id, so that timing does not tell ids apart.
            let _ = state.token_key.verify(secret, UNKNOWN_TOKEN_HASH);
            return Err(invalid);
        }
        Err(e) => return Err(e.into()),
    };
    if !state.token_key.verify(secret, &stored.secret_hash) {
        return Err(invalid);
    }
    if stored.record.expired(Utc::now()) {
        return Err(AppError::Unauthorized("the token has expired"));
    }
    Ok(Principal::Token(stored.record.grant()))
}

/// Whether `headers` carry one of the platform's credentials (the admin token, or a token of
/// the shape `POST /v1/tokens` makes): such a header is never passed on to a function.
pub(crate) fn is_platform_credential(state: &AppState, headers: &HeaderMap) -> bool {
    headers.get_all(header::AUTHORIZATION).iter().any(|v| {
        let text = String::from_utf8_lossy(v.as_bytes());
        let text = text.trim();
        // Whatever the scheme and however it is separated (a tab, a list of credentials): a
        // value that holds one of the platform's tokens anywhere is one of its credentials.
        let after_scheme = text.split_once(char::is_whitespace).map_or(text, |(_, t)| t).trim();
        let pieces = text.split(|c: char| c.is_whitespace() || c == ',' || c == ';').filter(|p| !p.is_empty());
        [text, after_scheme]
            .into_iter()
            .chain(pieces)
            .any(|candidate| state.admin_token.matches(candidate) || split_token(candidate).is_some())
    })
}

/// What a `/v1` route does, from its method and route template.
pub(crate) fn action(method: &Method, route: &str) -> Action {
    let read = method == Method::GET || method == Method::HEAD;
    match route {
        "/v1/gc" => Action::Platform,
        r if r.starts_with("/v1/tokens") => Action::ManageTokens,
        "/v1/namespaces" if read => Action::Discover,
        "/v1/namespaces/{ns}" if read => Action::Read,
        "/v1/namespaces" | "/v1/namespaces/{ns}" => Action::Platform,
        r if r.contains("/invoke") || r.ends_with("/fire") => Action::Invoke,
        _ if read => Action::Read,
        _ => Action::Write,
    }
}

/// Authenticates and authorises every `/v1` request before its handler, then applies the
/// request-rate quota. The principal goes into the request's extensions for handlers that
/// narrow what they show (tokens, namespaces). After a successful write by the platform
/// admin into a namespace that does not exist yet, the namespace is created.
pub(crate) async fn require_access(
    State(state): State<AppState>,
    route: MatchedPath,
    params: RawPathParams,
    mut request: Request,
    next: Next,
) -> Result<Response, AppError> {
    let principal = principal(&state, request.headers()).await?;
    let action = action(request.method(), route.as_str());
    let namespace = params.iter().find(|(k, _)| *k == "ns").map(|(_, v)| v.to_string());
    authorize(&principal, namespace.as_deref(), action).map_err(AppError::Forbidden)?;
    match (namespace.as_deref(), &principal) {
        (Some(ns), _) => admit_into(&state, &principal, ns, action).await?,
        // Routes outside a namespace (`/v1/tokens`, `/v1/namespaces`) take from the token's
        // allowance in each of its namespaces.
        (None, Principal::Token(grant)) => {
            for ns in &grant.namespaces {
                admit_into(&state, &principal, ns, Action::Read).await.or_else(|e| match e {
                    AppError::Forbidden(_) => Ok(()),
                    other => Err(other),
                })?;
            }
        }
        (None, Principal::PlatformAdmin) => {}
    }
    let admin_write = principal == Principal::PlatformAdmin && action == Action::Write;
    request.extensions_mut().insert(principal);
    let response = next.run(request).await;
    if admin_write
        && response.status().is_success()
        && let Some(ns) = namespace
        && let Err(e) = state.tenants.ensure_namespace(&ns).await
    {
        tracing::warn!(namespace = %ns, error = %e, "could not record the namespace");
    }
    Ok(response)
}

/// What the namespace itself says about a request already authorised: a token's namespace
/// must still exist (a token made while it was being deleted reaches nothing), nothing is
/// written into a namespace being deleted (409), and a token's request rate is taken. The
/// platform admin's reads and calls skip the lookup (the call path reads no database).
async fn admit_into(state: &AppState, principal: &Principal, ns: &str, action: Action) -> Result<(), AppError> {
    let token = match principal {
        Principal::Token(grant) => Some(grant),
        Principal::PlatformAdmin if action == Action::Write => None,
        Principal::PlatformAdmin => return Ok(()),
    };
    let record = match state.tenants.get_namespace(ns).await {
        Ok(r) => Some(r),
        Err(sless_core::Error::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    match (&record, token) {
        (None, Some(_)) => return Err(AppError::Forbidden(Denied::OtherNamespace(ns.to_string()))),
        (Some(r), _) if r.phase == NamespacePhase::Terminating && action == Action::Write => {
            return Err(sless_core::Error::Conflict(format!("namespace {ns:?} is being deleted")).into());
        }
        _ => {}
    }
    if let (Some(grant), Some(r)) = (token, &record)
        && let Some(per_minute) = r.quotas.requests_per_minute
    {
        state.guards.rate_limits.take(&grant.token_id, ns, per_minute)?;
    }
    Ok(())
}

/// What a long answer (a followed log stream) needs to check again, now and then, that its
/// request's token still may read the namespace: revoked, expired or narrowed tokens lose
/// their streams too.
pub(crate) struct Recheck {
    /// The API's state.
    pub(crate) state: AppState,
    /// The request's headers (its `Authorization`).
    pub(crate) headers: HeaderMap,
    /// The path's namespace.
    pub(crate) namespace: String,
}

impl Recheck {
    /// Whether the request would still be allowed to read.
    pub(crate) async fn still_allowed(&self) -> bool {
        let Ok(principal) = principal(&self.state, &self.headers).await else { return false };
        if authorize(&principal, Some(&self.namespace), Action::Read).is_err() {
            return false;
        }
        match principal {
            Principal::PlatformAdmin => true,
            Principal::Token(_) => self.state.tenants.get_namespace(&self.namespace).await.is_ok(),
        }
    }
}

/// The check of an `auth: token` http trigger in `namespace`: the admin token, or a token
/// scoped to the namespace whose role may invoke. Errors: 401, 403, 429.
pub(crate) async fn check_invoke(state: &AppState, headers: &HeaderMap, namespace: &str) -> Result<(), AppError> {
    let principal = principal(state, headers).await?;
    authorize(&principal, Some(namespace), Action::Invoke).map_err(AppError::Forbidden)?;
    admit_into(state, &principal, namespace, Action::Invoke).await
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

    #[test]
    fn token_hashes_depend_on_the_key() {
        let (a, b) = (TokenKey::new(&[1; 32]), TokenKey::new(&[2; 32]));
        let hash = a.hash("s3cret");
        assert_eq!(hash.len(), 64);
        assert!(a.verify("s3cret", &hash));
        assert!(!a.verify("s3cret!", &hash));
        assert!(!b.verify("s3cret", &hash), "another key");
        assert!(!a.verify("s3cret", "not hex"));
    }

    #[test]
    fn routes_map_to_actions() {
        let fns = "/v1/namespaces/{ns}/functions/{name}";
        for (method, route, expected) in [
            (Method::GET, fns, Action::Read),
            (Method::DELETE, fns, Action::Write),
            (Method::PATCH, fns, Action::Write),
            (Method::GET, "/v1/namespaces/{ns}/functions/{name}/invoke/{*path}", Action::Invoke),
            (Method::POST, "/v1/namespaces/{ns}/functions/{name}/invoke", Action::Invoke),
            (Method::POST, "/v1/namespaces/{ns}/triggers/{name}/fire", Action::Invoke),
            (Method::GET, "/v1/namespaces/{ns}/functions/{name}/logs", Action::Read),
            (Method::POST, "/v1/tokens", Action::ManageTokens),
            (Method::GET, "/v1/tokens", Action::ManageTokens),
            (Method::DELETE, "/v1/tokens/{id}", Action::ManageTokens),
            (Method::GET, "/v1/namespaces", Action::Discover),
            (Method::POST, "/v1/namespaces", Action::Platform),
            (Method::PATCH, "/v1/namespaces/{ns}", Action::Platform),
            (Method::DELETE, "/v1/namespaces/{ns}", Action::Platform),
            (Method::POST, "/v1/gc", Action::Platform),
        ] {
            assert_eq!(action(&method, route), expected, "{method} {route}");
        }
    }

    #[test]
    fn the_rate_holds_its_number_and_says_when_to_retry() {
        let limits = RateLimits::default();
        for _ in 0..3 {
            limits.take("tok_a", "ns", 3).expect("within the burst");
        }
        match limits.take("tok_a", "ns", 3) {
            Err(AppError::RateLimited { limit: 3, retry_after_secs, .. }) => {
                assert!((1..=20).contains(&retry_after_secs), "{retry_after_secs}")
            }
            other => panic!("{other:?}"),
        }
        limits.take("tok_b", "ns", 3).expect("another token has its own");
        limits.take("tok_a", "other", 3).expect("another namespace has its own");
        limits.take("tok_a", "ns", 4).expect("a changed quota starts afresh");
        limits.forget("tok_a");
        limits.take("tok_a", "ns", 4).expect("forgotten");
    }
}

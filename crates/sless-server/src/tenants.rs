//! Namespaces (tenants, with their quotas) and tokens: `/v1/namespaces` and `/v1/tokens`
//! (docs/api.md, "Tenants"), and the quota check of a function's spec.

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sless_core::names::validate_name;
use sless_core::spec::FunctionSpec;
use sless_core::tenant::{
    DEFAULT_NAMESPACE, Denied, Grant, NamespacePhase, NamespaceRecord, Principal, Quotas, Role, StoredToken,
    TOKEN_PREFIX, TokenRecord, admit,
};
use sless_core::traits::{FunctionRecord, Page};

use crate::body::read_json;
use crate::extract::{Path, Query};
use crate::resource::{ListQuery, NsPath, if_match, with_etag};
use crate::{ApiResult, AppError, AppState};

/// How often a namespace delete empties the namespace before it gives up (each pass deletes
/// what the one before missed: writes admitted just before the namespace became Terminating).
const MAX_EMPTYING_PASSES: usize = 10;

/// Longest token `description`, in characters.
const MAX_DESCRIPTION_CHARS: usize = 256;

/// What the namespace's functions use of its quotas.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub(crate) struct Usage {
    /// Functions.
    functions: u64,
    /// The sum of their `max_instances` (unset counts as 1).
    instances: u64,
    /// The sum of `memory_mb × max_instances`, in MiB.
    memory_mb: u64,
}

/// A namespace as `GET /v1/namespaces/{ns}` shows it: the record, then `usage`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Namespace)]
pub(crate) struct NamespaceView {
    #[serde(flatten)]
    record: NamespaceRecord,
    /// What its functions use of the quotas.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

/// Every function of `ns` (all pages).
async fn all_functions(state: &AppState, ns: &str) -> ApiResult<Vec<FunctionRecord>> {
    let mut out = Vec::new();
    let mut page = Page::first(1000);
    loop {
        let listed = state.registry.list_functions(ns, &page).await?;
        out.extend(listed.items);
        match listed.next {
            Some(next) => page.continue_token = Some(next),
            None => return Ok(out),
        }
    }
}

/// The quotas of `ns` (none when it is not recorded yet).
async fn quotas_of(state: &AppState, ns: &str) -> ApiResult<Quotas> {
    match state.tenants.get_namespace(ns).await {
        Ok(n) => Ok(n.quotas),
        Err(sless_core::Error::NotFound { .. }) => Ok(Quotas::default()),
        Err(e) => Err(e.into()),
    }
}

/// Checks that `spec`, stored as function `name` of `ns` (new or replacing its spec), fits
/// the namespace's quotas. The returned guard serialises such checks with their writes in
/// this server; keep it until the spec is stored. Errors: 403 naming the quota.
pub(crate) async fn admit_spec(
    state: &AppState,
    ns: &str,
    name: &str,
    spec: &FunctionSpec,
) -> ApiResult<Option<tokio::sync::OwnedMutexGuard<()>>> {
    let quotas = quotas_of(state, ns).await?;
    if quotas.max_functions.is_none() && quotas.max_instances.is_none() && quotas.max_memory_mb.is_none() {
        return Ok(None);
    }
    let guard = state.guards.admission.clone().lock_owned().await;
    let functions = all_functions(state, ns).await?;
    let others: Vec<&FunctionSpec> = functions.iter().filter(|f| f.name != name).map(|f| &f.spec).collect();
    let previous = functions.iter().find(|f| f.name == name).map(|f| &f.spec);
    admit(ns, &quotas, &others, spec, previous).map_err(sless_core::Error::from)?;
    Ok(Some(guard))
}

fn usage(functions: &[FunctionRecord]) -> Usage {
    functions.iter().fold(Usage::default(), |mut u, f| {
        let n = u64::from(f.spec.max_instances.unwrap_or(1));
        u.functions += 1;
        u.instances += n;
        u.memory_mb += n * u64::from(f.spec.memory_mb);
        u
    })
}

fn namespace_response(status: StatusCode, record: NamespaceRecord, usage: Option<Usage>) -> Response {
    let rv = record.resource_version.clone();
    let body = serde_json::to_value(NamespaceView { record, usage }).unwrap_or(Value::Null);
    with_etag(status, body, &rv)
}

/// Only `fields` may appear in `obj`. Errors: 400 naming the first other one.
fn only_fields(obj: &Map<String, Value>, fields: &[&str]) -> ApiResult<()> {
    match obj.keys().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => Err(AppError::field(k, format!("unknown field; known: {}", fields.join(", ")))),
        None => Ok(()),
    }
}

fn object(body: &Value) -> ApiResult<&Map<String, Value>> {
    body.as_object().ok_or_else(|| AppError::field("body", "must be a JSON object"))
}

#[utoipa::path(
    post,
    path = "/v1/namespaces",
    operation_id = "createNamespace",
    summary = "Create a namespace (platform admin)",
    tag = "tenants",
    request_body(content = crate::openapi::NamespaceInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created.", body = NamespaceView),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 409, response = crate::openapi::Conflict),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn create_namespace(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = read_json(&headers, body, &["application/json"]).await?;
    let obj = object(&body)?;
    only_fields(obj, &["name", "quotas"])?;
    let name = obj.get("name").and_then(Value::as_str).ok_or_else(|| AppError::field("name", "is required"))?;
    validate_name("name", name)?;
    let quotas = Quotas::from_json(obj.get("quotas").unwrap_or(&Value::Null), "quotas.")?;
    let record = state.tenants.create_namespace(name, &quotas).await?;
    Ok(namespace_response(StatusCode::CREATED, record, None))
}

#[utoipa::path(
    get,
    path = "/v1/namespaces",
    operation_id = "listNamespaces",
    summary = "List namespaces (a token sees its own)",
    tag = "tenants",
    params(ListQuery),
    responses(
        (status = 200, description = "A page, sorted by name.", body = crate::openapi::NamespaceList),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn list_namespaces(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    match principal {
        Principal::PlatformAdmin => {
            let listed = state.tenants.list_namespaces(&page).await?;
            ListQuery::respond_serialized(listed, |n| n)
        }
        Principal::Token(grant) => {
            // The same pages as the store's: by name, after the cursor (a name).
            if let Some(cursor) = &page.continue_token {
                validate_name("cursor", cursor)
                    .map_err(|_| AppError::field("cursor", "is not a next_cursor this API gave"))?;
            }
            let mut names: Vec<&String> = grant.namespaces.iter().collect();
            names.sort();
            let after = page.continue_token.as_deref().unwrap_or("");
            let mut items = Vec::new();
            for ns in names.into_iter().filter(|n| n.as_str() > after) {
                match state.tenants.get_namespace(ns).await {
                    Ok(n) => items.push(n),
                    Err(sless_core::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                if items.len() > page.limit as usize {
                    break;
                }
            }
            let listed =
                sless_core::traits::Listed::from_overfetch(items, page.limit, |n: &NamespaceRecord| n.name.clone());
            ListQuery::respond_serialized(listed, |n| n)
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}",
    operation_id = "getNamespace",
    summary = "Read a namespace with its quotas and usage",
    tag = "tenants",
    params(NsPath),
    responses(
        (status = 200, description = "The namespace.", body = NamespaceView),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn get_namespace(
    State(state): State<AppState>,
    Path(NsPath { ns }): Path<NsPath>,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let record = state.tenants.get_namespace(&ns).await?;
    let used = usage(&all_functions(&state, &ns).await?);
    Ok(namespace_response(StatusCode::OK, record, Some(used)))
}

#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}",
    operation_id = "patchNamespace",
    summary = "Merge-patch a namespace's quotas (platform admin)",
    tag = "tenants",
    params(NsPath, ("If-Match" = Option<String>, Header, description = "`\"<resource_version>\"`: 412 when stale")),
    request_body(content = crate::openapi::NamespaceInput, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Patched.", body = NamespaceView),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 404, response = crate::openapi::NotFound),
        (status = 412, response = crate::openapi::PreconditionFailed),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn patch_namespace(
    State(state): State<AppState>,
    Path(NsPath { ns }): Path<NsPath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let expected = if_match(&headers)?;
    let patch = read_json(&headers, body, &["application/merge-patch+json", "application/json"]).await?;
    let obj = object(&patch)?;
    only_fields(obj, &["name", "quotas"])?;
    if let Some(name) = obj.get("name").filter(|n| n.as_str() != Some(ns.as_str())) {
        return Err(AppError::field(
            "name",
            format!("is {name}, not the path's {ns:?} (a namespace cannot be renamed)"),
        ));
    }
    let current = state.tenants.get_namespace(&ns).await?;
    let quotas = match obj.get("quotas") {
        Some(q) => current.quotas.merge_patch(q, "quotas.")?,
        None => current.quotas,
    };
    if let Some(e) = expected.filter(|e| *e != current.resource_version) {
        return Err(sless_core::Error::Stale {
            expected: e.to_string(),
            current: current.resource_version.to_string(),
        }
        .into());
    }
    let record = state.tenants.replace_quotas(&ns, &quotas, Some(&current.resource_version)).await?;
    Ok(namespace_response(StatusCode::OK, record, None))
}

/// `?force=true` on `DELETE /v1/namespaces/{ns}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteParams {
    /// `true`: delete the namespace's functions, triggers and jobs with it.
    #[param(value_type = Option<bool>)]
    force: Option<String>,
}

#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}",
    operation_id = "deleteNamespace",
    summary = "Delete a namespace (platform admin)",
    tag = "tenants",
    params(NsPath, DeleteParams),
    responses(
        (status = 204, description = "Deleted, and taken out of every token (a token left with none is revoked)."),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 404, response = crate::openapi::NotFound),
        (status = 409, response = crate::openapi::Conflict),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn delete_namespace(
    State(state): State<AppState>,
    Path(NsPath { ns }): Path<NsPath>,
    Query(q): Query<DeleteParams>,
) -> ApiResult<Response> {
    validate_name("namespace", &ns)?;
    let force = match q.force.as_deref() {
        None | Some("") | Some("false") => false,
        Some("true") | Some("1") => true,
        Some(_) => return Err(AppError::field("force", "must be true or false")),
    };
    if ns == DEFAULT_NAMESPACE {
        return Err(sless_core::Error::Conflict("the default namespace always exists".into()).into());
    }
    let record = state.tenants.get_namespace(&ns).await?;
    // A delete that began earlier (and stopped midway) goes on without asking again.
    if !force && record.phase == NamespacePhase::Active {
        let functions = all_functions(&state, &ns).await?;
        let triggers = state.registry.list_triggers(&ns, &Page::first(1000)).await?;
        let jobs = state.registry.list_jobs(&ns, &Page::first(1000)).await?;
        if !functions.is_empty() || !triggers.items.is_empty() || !jobs.items.is_empty() {
            return Err(sless_core::Error::Conflict(format!(
                "namespace {ns:?} holds {} functions, {} triggers and {} jobs{}: delete them first, or pass force=true",
                functions.len(),
                triggers.items.len(),
                jobs.items.len(),
                if triggers.next.is_some() || jobs.next.is_some() { " (at least)" } else { "" },
            ))
            .into());
        }
    }
    // From here on nothing is written into it (`auth::require_access` answers 409), so what
    // it holds can be emptied for good; writes admitted just before are caught by emptying
    // until a pass finds nothing.
    state.tenants.terminate_namespace(&ns).await?;
    let mut passes = 0;
    loop {
        let jobs = state.registry.list_jobs(&ns, &Page::first(1000)).await?;
        let triggers = state.registry.list_triggers(&ns, &Page::first(1000)).await?;
        let functions = all_functions(&state, &ns).await?;
        if jobs.items.is_empty() && triggers.items.is_empty() && functions.is_empty() {
            break;
        }
        passes += 1;
        if passes > MAX_EMPTYING_PASSES {
            return Err(sless_core::Error::Conflict(format!(
                "namespace {ns:?} is still being written to; it stays Terminating: delete it again"
            ))
            .into());
        }
        // Jobs and triggers first, so nothing calls a function being deleted.
        for j in jobs.items {
            ignore_gone(state.registry.delete_job(&ns, &j.name).await)?;
        }
        for t in triggers.items {
            ignore_gone(state.registry.delete_trigger(&ns, &t.name).await)?;
        }
        for f in functions {
            match crate::functions::remove(&state, &ns, &f.name).await {
                Ok(_) | Err(AppError::Core(sless_core::Error::NotFound { .. })) => {}
                Err(e) => return Err(e),
            }
        }
    }
    // Its records go too: a namespace made again under this name must not show them.
    state.invocations.delete_namespace_records(&ns).await?;
    state.tenants.delete_namespace(&ns).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `Ok` for a resource deleted meanwhile.
fn ignore_gone(r: sless_core::Result<()>) -> ApiResult<()> {
    match r {
        Ok(()) | Err(sless_core::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A new token as `POST /v1/tokens` answers it: the record, then the secret, shown once.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = NewToken)]
pub(crate) struct CreatedToken {
    #[serde(flatten)]
    record: TokenRecord,
    /// The secret token (`slt_…`), to send as `Authorization: Bearer <token>`. Shown once:
    /// only a keyed hash of it is stored.
    token: String,
}

/// Whether `principal` may see or manage a token over `namespaces`: the platform admin any,
/// a token with role `admin` those within its own namespaces.
fn covers(principal: &Principal, namespaces: &[String]) -> Result<(), Denied> {
    match principal {
        Principal::PlatformAdmin => Ok(()),
        Principal::Token(grant) => match namespaces.iter().find(|n| !grant.reaches(n)) {
            Some(outside) => Err(Denied::OtherNamespace(outside.clone())),
            None => Ok(()),
        },
    }
}

#[utoipa::path(
    post,
    path = "/v1/tokens",
    operation_id = "createToken",
    summary = "Create a token scoped to namespaces, with a role",
    tag = "tenants",
    request_body(content = crate::openapi::TokenInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; `token` is the secret, shown this once.", body = CreatedToken),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 404, response = crate::openapi::NotFound),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn create_token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = read_json(&headers, body, &["application/json"]).await?;
    let obj = object(&body)?;
    only_fields(obj, &["namespaces", "role", "description", "expires_at"])?;
    let namespaces = match obj.get("namespaces") {
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut names = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let field = format!("namespaces[{i}]");
                let name = item.as_str().ok_or_else(|| AppError::field(&field, "must be a string"))?;
                validate_name(&field, name)?;
                names.push(name.to_string());
            }
            names.sort();
            names.dedup();
            names
        }
        Some(_) => return Err(AppError::field("namespaces", "must be a non-empty array of namespace names")),
        None => return Err(AppError::field("namespaces", "is required")),
    };
    let role: Role = match obj.get("role") {
        Some(Value::String(r)) => r.parse()?,
        Some(_) => return Err(AppError::field("role", "must be one of admin, developer, invoker, viewer")),
        None => return Err(AppError::field("role", "is required")),
    };
    let description = match obj.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(d)) if d.chars().count() <= MAX_DESCRIPTION_CHARS && !d.chars().any(char::is_control) => {
            d.clone()
        }
        Some(_) => {
            return Err(AppError::field(
                "description",
                format!("must be text of at most {MAX_DESCRIPTION_CHARS} characters, without control characters"),
            ));
        }
    };
    let now = sless_core::time::now();
    let expires_at = match obj.get("expires_at") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => {
            let at = DateTime::parse_from_rfc3339(t)
                .map_err(|_| AppError::field("expires_at", "must be an RFC 3339 time, e.g. 2027-01-01T00:00:00Z"))?
                .with_timezone(&Utc)
                .trunc_subsecs(3);
            if at <= now {
                return Err(AppError::field("expires_at", "must be in the future"));
            }
            Some(at)
        }
        Some(_) => return Err(AppError::field("expires_at", "must be an RFC 3339 time, e.g. 2027-01-01T00:00:00Z")),
    };
    covers(&principal, &namespaces).map_err(AppError::Forbidden)?;
    // A token made by a token does not outlive it: without an expiry it takes its maker's.
    let expires_at = match (&principal, expires_at) {
        (Principal::Token(Grant { expires_at: Some(limit), .. }), Some(at)) if at > *limit => {
            return Err(AppError::field(
                "expires_at",
                format!("must not be later than the expiry of the token making it ({})", limit.to_rfc3339()),
            ));
        }
        (Principal::Token(Grant { expires_at: Some(limit), .. }), None) => Some(*limit),
        (_, at) => at,
    };
    for ns in &namespaces {
        if state.tenants.get_namespace(ns).await?.phase == NamespacePhase::Terminating {
            return Err(sless_core::Error::Conflict(format!("namespace {ns:?} is being deleted")).into());
        }
    }
    let id_hex = hex::encode(rand::random::<[u8; 8]>());
    let secret = hex::encode(rand::random::<[u8; 32]>());
    let record =
        TokenRecord { id: format!("tok_{id_hex}"), role, namespaces, description, created_at: now, expires_at };
    let stored = StoredToken { record: record.clone(), secret_hash: state.token_key.hash(&secret) };
    state.tenants.create_token(&stored).await?;
    let token = format!("{TOKEN_PREFIX}{id_hex}_{secret}");
    let body = serde_json::to_value(CreatedToken { record, token }).unwrap_or(Value::Null);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/tokens",
    operation_id = "listTokens",
    summary = "List tokens (never their secrets)",
    tag = "tenants",
    responses(
        (status = 200, description = "Every token the caller may manage, by id.", body = crate::openapi::TokenList),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn list_tokens(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Response> {
    let items: Vec<TokenRecord> =
        state.tenants.list_tokens().await?.into_iter().filter(|t| covers(&principal, &t.namespaces).is_ok()).collect();
    Ok(Json(json!({"items": items, "next_cursor": null})).into_response())
}

/// `/v1/tokens/{id}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct TokenPath {
    /// The token's id (`tok_…`).
    id: String,
}

#[utoipa::path(
    delete,
    path = "/v1/tokens/{id}",
    operation_id = "revokeToken",
    summary = "Revoke a token",
    tag = "tenants",
    params(TokenPath),
    responses(
        (status = 204, description = "Revoked: it is refused from now on."),
        (status = 401, response = crate::openapi::Unauthorized),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 404, response = crate::openapi::NotFound),
        (status = 503, response = crate::openapi::Unavailable),
    )
)]
pub(crate) async fn revoke_token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(TokenPath { id }): Path<TokenPath>,
) -> ApiResult<Response> {
    let not_found = || AppError::Core(sless_core::Error::NotFound { kind: "token", name: id.clone() });
    let stored = match state.tenants.get_token(&id).await {
        Ok(t) => t,
        Err(sless_core::Error::NotFound { .. }) => return Err(not_found()),
        Err(e) => return Err(e.into()),
    };
    // A token outside the caller's namespaces is as good as absent: 404, not 403.
    if covers(&principal, &stored.record.namespaces).is_err() {
        return Err(not_found());
    }
    state.tenants.delete_token(&id).await?;
    state.guards.rate_limits.forget(&id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

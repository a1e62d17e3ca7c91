//! Tenants: namespaces with their quotas, tokens with a role over some namespaces, and the
//! pure decisions both backends share — who may do what ([`authorize`]) and whether a
//! function fits its namespace's quotas ([`admit`]) (docs/architecture.md, "Tenants").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::resource_version::ResourceVersion;
use crate::spec::FunctionSpec;
use crate::{Error, Result};

/// The namespace that always exists (it cannot be deleted).
pub const DEFAULT_NAMESPACE: &str = "default";

/// What a token may do in its namespaces. Ordered from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read only: functions, versions, build logs, invocations, logs, triggers, jobs.
    Viewer,
    /// Call functions only (`…/invoke` and `auth: token` http triggers).
    Invoker,
    /// Manage and call: everything a viewer and an invoker may, plus writes.
    Developer,
    /// A developer that also creates, lists and revokes tokens within its namespaces.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Invoker, Role::Developer, Role::Admin];

    /// The role's name as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Invoker => "invoker",
            Role::Developer => "developer",
            Role::Admin => "admin",
        }
    }

    /// Whether the role allows `action` (in a namespace the token is scoped to).
    pub fn allows(self, action: Action) -> bool {
        match action {
            Action::Discover => true,
            Action::Read => self != Role::Invoker,
            Action::Invoke => self != Role::Viewer,
            Action::Write => self >= Role::Developer,
            Action::ManageTokens => self == Role::Admin,
            Action::Platform => false,
        }
    }
}

impl std::str::FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| Error::field("role", format!("{s:?} is not one of admin, developer, invoker, viewer")))
    }
}

/// What a request does, as far as access is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Lists the namespaces the token reaches (any role).
    Discover,
    /// Reads (`GET`).
    Read,
    /// Calls a function.
    Invoke,
    /// Creates, changes or deletes functions, code, triggers and jobs.
    Write,
    /// Creates, lists or revokes tokens.
    ManageTokens,
    /// What only the platform's admin token may do: namespaces, quotas, the collector.
    Platform,
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The platform's admin token (`SLESS_ADMIN_TOKEN` or `<data>/admin-token`): everything.
    PlatformAdmin,
    /// A token made by `POST /v1/tokens`.
    Token(Grant),
}

/// What a token grants: its role over its namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token's id (`tok_…`).
    pub token_id: String,
    /// Its role.
    pub role: Role,
    /// The namespaces it reaches.
    pub namespaces: Vec<String>,
    /// When the token expires, if it does: a token it makes may not outlive it.
    pub expires_at: Option<DateTime<Utc>>,
}

impl Grant {
    /// Whether the token reaches `namespace`.
    pub fn reaches(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|n| n == namespace)
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The token is not scoped to the namespace (403; says nothing of what it holds).
    #[error("this token is not scoped to namespace {0:?}")]
    OtherNamespace(String),
    /// The role may not do this (403).
    #[error("role {role} may not {what}", role = .role.as_str())]
    Role {
        /// The token's role.
        role: Role,
        /// What was asked, e.g. `write`.
        what: &'static str,
    },
    /// Only the platform's admin token may do this (403).
    #[error("only the platform admin token may {0}")]
    PlatformOnly(&'static str),
}

/// Whether `principal` may do `action` in `namespace` (`None` for routes outside a
/// namespace: `/v1/tokens`, `/v1/namespaces`, `/v1/gc`). A token is checked against the
/// namespace first, so a refusal never depends on what the namespace holds.
/// Errors: [`Denied`] (403).
pub fn authorize(principal: &Principal, namespace: Option<&str>, action: Action) -> Result<(), Denied> {
    let grant = match principal {
        Principal::PlatformAdmin => return Ok(()),
        Principal::Token(grant) => grant,
    };
    if action == Action::Platform {
        return Err(Denied::PlatformOnly("manage namespaces, quotas or the collector"));
    }
    if let Some(ns) = namespace
        && !grant.reaches(ns)
    {
        return Err(Denied::OtherNamespace(ns.to_string()));
    }
    if grant.role.allows(action) {
        return Ok(());
    }
    let what = match action {
        Action::Discover | Action::Read => "read",
        Action::Invoke => "invoke functions",
        Action::Write => "write",
        Action::ManageTokens => "manage tokens",
        Action::Platform => "manage the platform",
    };
    Err(Denied::Role { role: grant.role, what })
}

/// A namespace's quotas; `None` is no limit. Counted over the functions the namespace holds
/// (enabled or not), as Kubernetes' ResourceQuota counts objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quotas {
    /// Most functions.
    pub max_functions: Option<u32>,
    /// Most instances: the sum of the functions' `max_instances`. When set, every function
    /// must set `max_instances`.
    pub max_instances: Option<u32>,
    /// Most memory, in MiB: the sum of `memory_mb × max_instances`. When set, every function
    /// must set `max_instances`.
    pub max_memory_mb: Option<u64>,
    /// Most requests per minute per token, in this namespace (a burst of as many, then
    /// evenly spread); the platform admin token is not limited.
    pub requests_per_minute: Option<u32>,
}

/// The quota fields.
const QUOTA_FIELDS: [&str; 4] = ["max_functions", "max_instances", "max_memory_mb", "requests_per_minute"];

impl Quotas {
    /// Reads quotas from a JSON object; each field is a non-negative integer or `null`
    /// (`requests_per_minute` at least 1), unknown fields are refused. `prefix` names
    /// the object in errors, e.g. `quotas.`. Errors: `InvalidField`.
    pub fn from_json(value: &Value, prefix: &str) -> Result<Self> {
        let empty = Map::new();
        let obj = match value {
            Value::Object(o) => o,
            Value::Null => &empty,
            _ => return Err(Error::field(prefix.trim_end_matches('.'), "must be an object")),
        };
        if let Some(unknown) = obj.keys().find(|k| !QUOTA_FIELDS.contains(&k.as_str())) {
            return Err(Error::field(
                format!("{prefix}{unknown}"),
                format!("unknown quota; known: {}", QUOTA_FIELDS.join(", ")),
            ));
        }
        let int = |name: &str, min: u64, max: u64| -> Result<Option<u64>> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                    _ => {
                        Err(Error::field(format!("{prefix}{name}"), format!("must be an integer from {min} to {max}")))
                    }
                },
            }
        };
        let small = |name: &str, min: u64| int(name, min, u64::from(u32::MAX)).map(|v| v.map(|n| n as u32));
        Ok(Quotas {
            max_functions: small("max_functions", 0)?,
            max_instances: small("max_instances", 0)?,
            max_memory_mb: int("max_memory_mb", 0, u64::MAX >> 12)?,
            requests_per_minute: small("requests_per_minute", 1)?,
        })
    }

    /// These quotas with an RFC 7396 merge patch applied (`null` removes a limit).
    /// Errors: `InvalidField`.
    pub fn merge_patch(&self, patch: &Value, prefix: &str) -> Result<Self> {
        let mut doc = serde_json::to_value(self).map_err(|e| Error::Internal(e.to_string()))?;
        json_patch::merge(&mut doc, patch);
        Quotas::from_json(&doc, prefix)
    }
}

/// A quota a write would exceed (403), with the numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota {quota} of namespace {namespace:?} exceeded: {detail}")]
pub struct QuotaExceeded {
    /// The quota's field name, e.g. `max_functions`.
    pub quota: &'static str,
    /// The namespace.
    pub namespace: String,
    /// The limit, what is used and what was asked.
    pub detail: String,
}

/// What a spec reserves of the instance and memory quotas: `max_instances` (1 when unset,
/// for functions stored before a quota was set) and `memory_mb × max_instances` (MiB).
fn reservation(spec: &FunctionSpec) -> (u64, u64) {
    let n = u64::from(spec.max_instances.unwrap_or(1));
    (n, n * u64::from(spec.memory_mb))
}

/// Whether `candidate` may be stored among `others` — the namespace's other functions —
/// under `quotas`: as a new function (`previous` is `None`) or replacing the spec
/// `previous`. A replacement never counts against `max_functions`, and one that reserves no
/// more instances or memory than before is always admitted, so that lowering a quota below
/// what is used never locks a tenant out of editing (or disabling) its functions, as
/// Kubernetes' ResourceQuota checks only what an update adds. Pure; both backends call it
/// before a function's spec is stored. Errors: [`QuotaExceeded`] naming the first quota
/// exceeded.
pub fn admit(
    namespace: &str,
    quotas: &Quotas,
    others: &[&FunctionSpec],
    candidate: &FunctionSpec,
    previous: Option<&FunctionSpec>,
) -> Result<(), QuotaExceeded> {
    let exceeded = |quota: &'static str, detail: String| QuotaExceeded { quota, namespace: namespace.into(), detail };
    if let (Some(max), None) = (quotas.max_functions, previous) {
        let used = others.len() as u64;
        if used + 1 > u64::from(max) {
            return Err(exceeded("max_functions", format!("limit {max}, {used} functions exist")));
        }
    }
    if quotas.max_instances.is_none() && quotas.max_memory_mb.is_none() {
        return Ok(());
    }
    let (asked_instances, asked_mb) = reservation(candidate);
    if let Some(previous) = previous {
        let (had_instances, had_mb) = reservation(previous);
        let unset_before = previous.max_instances.is_none();
        if asked_instances <= had_instances && asked_mb <= had_mb && (candidate.max_instances.is_some() || unset_before)
        {
            return Ok(());
        }
    }
    if candidate.max_instances.is_none() {
        let quota = if quotas.max_instances.is_some() { "max_instances" } else { "max_memory_mb" };
        return Err(exceeded(quota, "the function must set max_instances in a namespace with this quota".into()));
    }
    let (used_instances, used_mb) = others.iter().map(|s| reservation(s)).fold((0, 0), |(i, m), (a, b)| (i + a, m + b));
    if let Some(max) = quotas.max_instances
        && used_instances + asked_instances > u64::from(max)
    {
        return Err(exceeded(
            "max_instances",
            format!("limit {max}, {used_instances} used by other functions, {asked_instances} asked"),
        ));
    }
    if let Some(max) = quotas.max_memory_mb
        && used_mb + asked_mb > max
    {
        return Err(exceeded(
            "max_memory_mb",
            format!(
                "limit {max} MiB, {used_mb} MiB used by other functions, {asked_mb} MiB asked (memory_mb × max_instances)"
            ),
        ));
    }
    Ok(())
}

/// Where a namespace is in its life (Kubernetes' namespace phases).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum NamespacePhase {
    /// In use.
    #[default]
    Active,
    /// Being deleted: what it holds is being removed, and nothing may be written into it.
    Terminating,
}

impl NamespacePhase {
    /// The phase as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            NamespacePhase::Active => "Active",
            NamespacePhase::Terminating => "Terminating",
        }
    }
}

/// A namespace: a tenant's space and the home of its quotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamespaceRecord {
    /// DNS-1123 label.
    pub name: String,
    /// Its quotas.
    pub quotas: Quotas,
    /// `Active`, or `Terminating` while a delete runs.
    #[serde(default)]
    pub phase: NamespacePhase,
    /// Changes whenever the quotas change; compared with `If-Match`.
    pub resource_version: ResourceVersion,
    /// Creation time (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
    /// Last change (RFC 3339 UTC).
    pub updated_at: DateTime<Utc>,
}

/// A token as the API shows it (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenRecord {
    /// `tok_` and 16 lowercase hex digits; the first part of the secret token.
    pub id: String,
    /// Its role.
    pub role: Role,
    /// The namespaces it reaches (sorted, at least one).
    pub namespaces: Vec<String>,
    /// What it is for (free text, up to 256 characters).
    pub description: String,
    /// Creation time (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
    /// When it stops working (RFC 3339 UTC), or `null` for never.
    pub expires_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// Whether it has expired at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// What it grants.
    pub fn grant(&self) -> Grant {
        Grant {
            token_id: self.id.clone(),
            role: self.role,
            namespaces: self.namespaces.clone(),
            expires_at: self.expires_at,
        }
    }
}

/// A token as a store keeps it: the record and the keyed hash of its secret (lowercase hex).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredToken {
    /// What the API shows.
    pub record: TokenRecord,
    /// HMAC-SHA256 of the secret under the server's token key, lowercase hex.
    pub secret_hash: String,
}

/// The prefix of every token `POST /v1/tokens` makes: `slt_<id hex>_<secret>`.
pub const TOKEN_PREFIX: &str = "slt_";

/// A presented token split into its id (`tok_<hex>`) and secret, or `None` when it does not
/// have the shape of a token `POST /v1/tokens` makes (it may still be the admin token).
pub fn split_token(token: &str) -> Option<(String, &str)> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex(id, 16) && hex(secret, 64)).then(|| (format!("tok_{id}"), secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token(role: Role, namespaces: &[&str]) -> Principal {
        Principal::Token(Grant {
            token_id: "tok_1".into(),
            role,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            expires_at: None,
        })
    }

    #[test]
    fn roles_allow_what_their_names_say() {
        use Action::*;
        let table = [
            (Role::Viewer, [true, false, false, false, false]),
            (Role::Invoker, [false, true, false, false, false]),
            (Role::Developer, [true, true, true, false, false]),
            (Role::Admin, [true, true, true, true, false]),
        ];
        for (role, expected) in table {
            let got = [Read, Invoke, Write, ManageTokens, Platform].map(|a| role.allows(a));
            assert!(role.allows(Discover));
            assert_eq!(got, expected, "{role:?}");
        }
    }

    #[test]
    fn a_token_reaches_only_its_namespaces_whatever_the_role() {
        for role in Role::ALL {
            let p = token(role, &["a", "b"]);
            assert_eq!(authorize(&p, Some("c"), Action::Read), Err(Denied::OtherNamespace("c".into())));
            assert_eq!(authorize(&p, Some("c"), Action::Invoke), Err(Denied::OtherNamespace("c".into())));
            assert!(matches!(authorize(&p, None, Action::Platform), Err(Denied::PlatformOnly(_))));
            assert!(matches!(authorize(&p, Some("b"), Action::Platform), Err(Denied::PlatformOnly(_))));
        }
        assert_eq!(authorize(&token(Role::Viewer, &["a", "b"]), Some("b"), Action::Read), Ok(()));
        let err = authorize(&token(Role::Viewer, &["a"]), Some("a"), Action::Write).unwrap_err();
        assert_eq!(err.to_string(), "role viewer may not write");
        assert_eq!(authorize(&Principal::PlatformAdmin, Some("x"), Action::Platform), Ok(()));
    }

    #[test]
    fn roles_parse_and_print() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(serde_json::to_value(role).unwrap(), json!(role.as_str()));
        }
        assert!("root".parse::<Role>().unwrap_err().to_string().starts_with("role: "));
    }

    #[test]
    fn quotas_read_and_name_the_bad_field() {
        let q = Quotas::from_json(&json!({"max_functions": 3, "requests_per_minute": null}), "quotas.").unwrap();
        assert_eq!(q, Quotas { max_functions: Some(3), ..Quotas::default() });
        assert_eq!(Quotas::from_json(&Value::Null, "").unwrap(), Quotas::default());
        for (bad, field) in [
            (json!({"max_function": 1}), "quotas.max_function"),
            (json!({"max_functions": -1}), "quotas.max_functions"),
            (json!({"max_instances": "2"}), "quotas.max_instances"),
            (json!({"requests_per_minute": 0}), "quotas.requests_per_minute"),
            (json!({"max_functions": 1.5}), "quotas.max_functions"),
            (json!([1]), "quotas"),
        ] {
            match Quotas::from_json(&bad, "quotas.") {
                Err(Error::InvalidField { field: f, .. }) => assert_eq!(f, field, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let patched = q.merge_patch(&json!({"max_functions": null, "max_instances": 4}), "").unwrap();
        assert_eq!(patched, Quotas { max_instances: Some(4), ..Quotas::default() });
    }

    fn spec(memory_mb: u32, max_instances: Option<u32>) -> FunctionSpec {
        let mut body = json!({"runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": memory_mb});
        if let Some(n) = max_instances {
            body["max_instances"] = json!(n);
        }
        FunctionSpec::from_json(&body).unwrap().1
    }

    #[test]
    fn admission_holds_each_quota_exactly() {
        let q = Quotas { max_functions: Some(2), ..Quotas::default() };
        let (a, b) = (spec(128, None), spec(128, None));
        assert!(admit("t", &q, &[], &a, None).is_ok());
        assert!(admit("t", &q, &[&a], &b, None).is_ok());
        let err = admit("t", &q, &[&a, &b], &spec(128, None), None).unwrap_err();
        assert_eq!(err.quota, "max_functions");
        assert_eq!(err.to_string(), "quota max_functions of namespace \"t\" exceeded: limit 2, 2 functions exist");

        let q = Quotas { max_instances: Some(5), max_memory_mb: Some(1024), ..Quotas::default() };
        let two = spec(256, Some(2));
        assert!(admit("t", &q, &[&two], &spec(128, Some(3)), None).is_ok(), "5 instances, 896 MiB");
        assert_eq!(admit("t", &q, &[&two], &spec(128, Some(4)), None).unwrap_err().quota, "max_instances");
        assert!(admit("t", &q, &[&two], &spec(512, Some(1)), None).is_ok(), "exactly 1024 MiB");
        assert_eq!(admit("t", &q, &[&two], &spec(640, Some(1)), None).unwrap_err().quota, "max_memory_mb");
        let unset = admit("t", &q, &[], &spec(128, None), None).unwrap_err();
        assert_eq!(unset.quota, "max_instances");
        assert!(unset.detail.contains("must set max_instances"));
    }

    #[test]
    fn a_quota_lowered_below_use_still_lets_functions_be_edited_but_not_grown() {
        // Two functions exist; the quotas were lowered to one function and 2 instances.
        let q = Quotas { max_functions: Some(1), max_instances: Some(2), ..Quotas::default() };
        let (a, b) = (spec(128, Some(2)), spec(128, Some(2)));
        let mut disabled = a.clone();
        disabled.enabled = false;
        assert!(admit("t", &q, &[&b], &disabled, Some(&a)).is_ok(), "an edit that adds nothing");
        assert!(admit("t", &q, &[&b], &spec(128, Some(1)), Some(&a)).is_ok(), "shrinking");
        assert_eq!(admit("t", &q, &[&b], &spec(128, Some(3)), Some(&a)).unwrap_err().quota, "max_instances");
        let new = admit("t", &q, &[&a, &b], &spec(128, Some(1)), None).unwrap_err();
        assert_eq!((new.quota, new.detail.as_str()), ("max_functions", "limit 1, 2 functions exist"));
        // An old function without max_instances may be edited, not grown past its 1 instance.
        let old = spec(128, None);
        let q = Quotas { max_instances: Some(1), ..Quotas::default() };
        assert!(admit("t", &q, &[&b], &old.clone(), Some(&old)).is_ok());
    }

    #[test]
    fn tokens_split_only_in_their_own_shape() {
        let secret = "ab".repeat(32);
        let t = format!("slt_0123456789abcdef_{secret}");
        assert_eq!(split_token(&t), Some(("tok_0123456789abcdef".to_string(), secret.as_str())));
        for bad in
            ["sless_abc", "slt_0123_ab", "slt_0123456789ABCDEF_x", "", &format!("slt_0123456789abcdef_{secret}0")]
        {
            assert_eq!(split_token(bad), None, "{bad}");
        }
    }
}

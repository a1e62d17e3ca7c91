//! `sless_token`: a tenant token (`POST/GET/DELETE /v1/tokens`). Its secret is shown once,
//! at create, and kept in the state as a sensitive attribute; any change of role,
//! namespaces, description or expiry replaces the token (the API has no update).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sless_core::tenant::{Role, TokenRecord};
use tf_provider::schema::{AttributeConstraint as C, AttributeType as T, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::error::{Context, Error, diagnostic};
use crate::provider::{Shared, attr, conn, schema};
use crate::util::{Str, s};

/// The attributes (an API `field` names one of these).
pub const ATTRIBUTES: [&str; 7] = ["id", "role", "namespaces", "description", "expires_at", "token", "created_at"];

/// The state of a `sless_token`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenState {
    /// `tok_<16 hex>`.
    pub id: Str,
    /// `viewer`, `invoker`, `developer` or `admin`.
    pub role: Str,
    /// The namespaces it reaches.
    pub namespaces: Value<Vec<Value<String>>>,
    /// A note.
    pub description: Str,
    /// RFC 3339, or null for never.
    pub expires_at: Str,
    /// The secret (`slt_…`), known only to the state that created it.
    pub token: Str,
    /// RFC 3339.
    pub created_at: Str,
}

/// The `sless_token` resource.
#[derive(Debug, Clone)]
pub struct TokenResource(pub Shared);

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl TokenState {
    fn from_record(r: &TokenRecord, prior: &TokenState) -> TokenState {
        let role = serde_json::to_value(r.role).ok().and_then(|v| v.as_str().map(str::to_string));
        // The prior text of the same instant stays (formatting never plans a change).
        let expires_at = match (&r.expires_at, s(&prior.expires_at)) {
            (Some(t), Some(p)) if DateTime::parse_from_rfc3339(p).is_ok_and(|p| p == *t) => prior.expires_at.clone(),
            (Some(t), _) => Value::Value(rfc3339(t)),
            (None, _) => Value::Null,
        };
        let description = if prior.description.is_null() && r.description.is_empty() {
            Value::Null
        } else {
            Value::Value(r.description.clone())
        };
        TokenState {
            id: Value::Value(r.id.clone()),
            role: role.into(),
            namespaces: Value::Value(r.namespaces.iter().cloned().map(Value::Value).collect()),
            description,
            expires_at,
            token: prior.token.clone(),
            created_at: Value::Value(rfc3339(&r.created_at)),
        }
    }

    fn id(&self) -> String {
        s(&self.id).unwrap_or_default().to_string()
    }
}

impl TokenResource {
    fn report(&self, diags: &mut Diagnostics, err: &Error, action: &str, id: &str) {
        let ctx = Context { resource: "sless_token", action, id, attributes: &ATTRIBUTES, code_attribute: "role" };
        diags.add_error(diagnostic(err, &ctx));
    }

    async fn find(&self, client: &sless_client::Client, id: &str) -> Result<Option<TokenRecord>, Error> {
        Ok(client.list_tokens().await?.into_iter().find(|t| t.id == id))
    }
}

#[async_trait]
impl Resource for TokenResource {
    type State<'a> = TokenState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let mut secret =
            attr(T::String, C::Computed, "The secret (`slt_…`), shown once at create: null after an import.");
        secret.sensitive = true;
        Some(schema(
            "A tenant token: a role over namespaces. Any change replaces it (a new secret).",
            vec![
                ("id", attr(T::String, C::Computed, "`tok_<16 hex>`; the import id.")),
                ("role", attr(T::String, C::Required, "`viewer`, `invoker`, `developer` or `admin`.")),
                (
                    "namespaces",
                    attr(T::List(T::String.into()), C::Required, "The namespaces it reaches (each must exist)."),
                ),
                ("description", attr(T::String, C::Optional, "A note, e.g. `ci`.")),
                ("expires_at", attr(T::String, C::Optional, "When it stops working, RFC 3339 (unset: never).")),
                ("token", secret),
                ("created_at", attr(T::String, C::Computed, "RFC 3339.")),
            ],
        ))
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: TokenState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TokenState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        match self.find(&c.client, &state.id()).await {
            Ok(found) => found.map(|r| (TokenState::from_record(&r, &state), private)),
            Err(e) => {
                self.report(diags, &e, "read", &state.id());
                None
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        _d: &mut Diagnostics,
        mut p: TokenState,
        _c: TokenState,
        _m: ValueEmpty,
    ) -> Option<(TokenState, ValueEmpty)> {
        p.id = Value::Unknown;
        p.token = Value::Unknown;
        p.created_at = Value::Unknown;
        Some((p, ValueEmpty::default()))
    }

    async fn plan_update<'a>(
        &self,
        _d: &mut Diagnostics,
        prior: TokenState,
        mut p: TokenState,
        _c: TokenState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TokenState, ValueEmpty, Vec<AttributePath>)> {
        let mut replace = Vec::new();
        if prior.role != p.role {
            replace.push(AttributePath::new("role"));
        }
        if prior.namespaces != p.namespaces {
            replace.push(AttributePath::new("namespaces"));
        }
        if prior.description != p.description {
            replace.push(AttributePath::new("description"));
        }
        if prior.expires_at != p.expires_at {
            replace.push(AttributePath::new("expires_at"));
        }
        if replace.is_empty() {
            p.id = prior.id;
            p.token = prior.token;
            p.created_at = prior.created_at;
        } else {
            p.id = Value::Unknown;
            p.token = Value::Unknown;
            p.created_at = Value::Unknown;
        }
        Some((p, private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _d: &mut Diagnostics,
        _p: TokenState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<ValueEmpty> {
        Some(private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: TokenState,
        _c: TokenState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TokenState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let role: Role = match serde_json::from_value(serde_json::json!(s(&planned.role).unwrap_or_default())) {
            Ok(r) => r,
            Err(_) => {
                crate::error::add(
                    diags,
                    "invalid role",
                    "role must be viewer, invoker, developer or admin.",
                    AttributePath::new("role"),
                );
                return None;
            }
        };
        let expires_at = match s(&planned.expires_at).map(DateTime::parse_from_rfc3339) {
            None => None,
            Some(Ok(t)) => Some(t.with_timezone(&Utc)),
            Some(Err(e)) => {
                crate::error::add(
                    diags,
                    "invalid expires_at",
                    format!("expires_at must be an RFC 3339 time such as 2027-01-01T00:00:00Z ({e})."),
                    AttributePath::new("expires_at"),
                );
                return None;
            }
        };
        let namespaces: Vec<String> = planned
            .namespaces
            .as_ref_option()
            .map(|v| v.iter().filter_map(|n| n.as_ref_option().cloned()).collect())
            .unwrap_or_default();
        let description = s(&planned.description).unwrap_or_default();
        match c.client.create_token(&namespaces, role, description, expires_at).await {
            Ok(t) => {
                let mut state = TokenState::from_record(&t.record, &planned);
                state.token = Value::Value(t.token);
                Some((state, private))
            }
            Err(e) => {
                self.report(diags, &e.into(), "create", "(new)");
                None
            }
        }
    }

    async fn update<'a>(
        &self,
        _d: &mut Diagnostics,
        _prior: TokenState,
        planned: TokenState,
        _c: TokenState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TokenState, ValueEmpty)> {
        // Only replacements change a token: nothing to send.
        Some((planned, private))
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: TokenState,
        _p: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<()> {
        let c = conn(&self.0, diags)?;
        match c.client.revoke_token(&prior.id()).await {
            Ok(()) => Some(()),
            Err(e) if e.is_not_found() => Some(()),
            Err(e) => {
                self.report(diags, &e.into(), "delete", &prior.id());
                None
            }
        }
    }

    async fn import<'a>(&self, diags: &mut Diagnostics, id: String) -> Option<(TokenState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        match self.find(&c.client, &id).await {
            Ok(Some(r)) => Some((TokenState::from_record(&r, &TokenState::default()), ValueEmpty::default())),
            Ok(None) => {
                crate::error::add_root(
                    diags,
                    format!("cannot import sless_token {id:?}: not found"),
                    "The import id is the token's id, tok_…",
                );
                None
            }
            Err(e) => {
                self.report(diags, &e, "import", &id);
                None
            }
        }
    }
}

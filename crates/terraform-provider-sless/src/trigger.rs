//! `sless_trigger`: an http or cron trigger of a function. The function need not exist or be
//! Ready yet (the server starts the trigger as soon as it is), so a trigger and its function
//! can be created in one plan in any order.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};
use sless_client::{Client, etag};
use sless_core::trigger::TriggerRecord;
use tf_provider::schema::{AttributeConstraint as C, AttributeType as T, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::error::{Context, Error, Result, diagnostic};
use crate::provider::{Shared, attr, conn, schema};
use crate::util::{Bool, Num, Str, keep_null, payload_json, payload_state, s, split_id};

/// The attributes (an API `field` names one of these).
pub const ATTRIBUTES: [&str; 15] = [
    "id",
    "namespace",
    "name",
    "function",
    "type",
    "auth",
    "schedule",
    "timezone",
    "payload",
    "prewarm_sec",
    "enabled",
    "phase",
    "url",
    "next_fire",
    "resource_version",
];

/// The state of a `sless_trigger`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerState {
    /// `namespace/name`.
    pub id: Str,
    /// The namespace.
    pub namespace: Str,
    /// The name.
    pub name: Str,
    /// The function it calls.
    pub function: Str,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    pub kind: Str,
    /// http: `none` or `token`.
    pub auth: Str,
    /// cron: the schedule.
    pub schedule: Str,
    /// cron: the IANA time zone.
    pub timezone: Str,
    /// cron: JSON text.
    pub payload: Str,
    /// cron: seconds to start an instance before each tick.
    pub prewarm_sec: Num,
    /// Whether it fires.
    pub enabled: Bool,
    /// `Waiting`, `Active` or `Failed`.
    pub phase: Str,
    /// http: the public URL.
    pub url: Str,
    /// cron: the next tick (RFC 3339).
    pub next_fire: Str,
    /// The server's resource version.
    pub resource_version: Str,
}

/// The `sless_trigger` resource.
#[derive(Debug, Clone)]
pub struct TriggerResource(pub Shared);

/// The spec attributes, compared to tell an update.
fn spec_of(t: &TriggerState) -> (Str, Str, Str, Str, Str, Str, Num, Bool) {
    (
        t.function.clone(),
        t.kind.clone(),
        t.auth.clone(),
        t.schedule.clone(),
        t.timezone.clone(),
        t.payload.clone(),
        t.prewarm_sec,
        t.enabled,
    )
}

impl TriggerState {
    fn ns_name(&self) -> (String, String) {
        (s(&self.namespace).unwrap_or_default().to_string(), s(&self.name).unwrap_or_default().to_string())
    }

    /// The API body. Errors: `payload` is not JSON.
    fn spec_json(&self) -> Result<Json> {
        let mut m = Map::new();
        for (k, v) in [
            ("name", &self.name),
            ("function", &self.function),
            ("type", &self.kind),
            ("auth", &self.auth),
            ("schedule", &self.schedule),
            ("timezone", &self.timezone),
        ] {
            if let Some(v) = s(v) {
                m.insert(k.into(), json!(v));
            }
        }
        let payload =
            payload_json(&self.payload).map_err(|message| Error::Invalid { attribute: "payload", message })?;
        if !payload.is_null() {
            m.insert("payload".into(), payload);
        }
        if let Some(n) = self.prewarm_sec.as_ref_option() {
            m.insert("prewarm_sec".into(), json!(n));
        }
        if let Some(e) = self.enabled.as_ref_option() {
            m.insert("enabled".into(), json!(e));
        }
        Ok(Json::Object(m))
    }

    fn from_record(client: &Client, r: &TriggerRecord, prior: &TriggerState) -> TriggerState {
        let text = |v: Json| v.as_str().map(str::to_string);
        let kind = text(serde_json::to_value(r.spec.kind).unwrap_or_default()).unwrap_or_default();
        let auth = text(serde_json::to_value(r.spec.auth).unwrap_or_default()).unwrap_or_default();
        let http = kind == "http";
        TriggerState {
            id: Value::Value(format!("{}/{}", r.namespace, r.name)),
            namespace: Value::Value(r.namespace.clone()),
            name: Value::Value(r.name.clone()),
            function: Value::Value(r.spec.function.clone()),
            auth: keep_null(&prior.auth, auth, "none".into()),
            schedule: r.spec.schedule.clone().into(),
            timezone: if http {
                Value::Null
            } else {
                keep_null(&prior.timezone, r.spec.timezone.clone(), "UTC".into())
            },
            payload: payload_state(&prior.payload, &r.spec.payload),
            prewarm_sec: keep_null(&prior.prewarm_sec, i64::from(r.spec.prewarm_sec), 0),
            enabled: keep_null(&prior.enabled, r.spec.enabled, true),
            phase: Value::Value(format!("{:?}", r.status.phase)),
            url: if http { Value::Value(client.trigger_url(r)) } else { Value::Null },
            next_fire: r.status.next_fire.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).into(),
            resource_version: Value::Value(r.resource_version.to_string()),
            kind: Value::Value(kind),
        }
    }
}

impl TriggerResource {
    fn report(&self, diags: &mut Diagnostics, err: &Error, action: &str, state: &TriggerState) {
        let (ns, name) = state.ns_name();
        let id = format!("{ns}/{name}");
        let ctx =
            Context { resource: "sless_trigger", action, id: &id, attributes: &ATTRIBUTES, code_attribute: "function" };
        diags.add_error(diagnostic(err, &ctx));
    }

    async fn fetch(&self, client: &Client, name: &str, prior: &TriggerState) -> Result<Option<TriggerState>> {
        match client.get_trigger(name).await {
            Ok(r) => Ok(Some(TriggerState::from_record(client, &r, prior))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn plan(&self, diags: &mut Diagnostics, prior: Option<&TriggerState>, mut p: TriggerState) -> Option<TriggerState> {
        let c = conn(&self.0, diags)?;
        if p.namespace.is_null() {
            p.namespace = Value::Value(c.namespace.clone());
        }
        if let Err(message) = payload_json(&p.payload) {
            crate::error::add(diags, "invalid payload", message, AttributePath::new("payload"));
            return None;
        }
        let (ns, name) = p.ns_name();
        p.id = if p.name.is_value() && p.namespace.is_value() {
            Value::Value(format!("{ns}/{name}"))
        } else {
            Value::Unknown
        };
        match prior {
            Some(q) if spec_of(q) == spec_of(&p) => {
                p.phase = q.phase.clone();
                p.url = q.url.clone();
                p.next_fire = q.next_fire.clone();
                p.resource_version = q.resource_version.clone();
            }
            _ => {
                p.phase = Value::Unknown;
                p.url = if s(&p.kind) == Some("http") { Value::Unknown } else { Value::Null };
                p.next_fire = Value::Unknown;
                p.resource_version = Value::Unknown;
            }
        }
        Some(p)
    }
}

/// The schema of `sless_trigger`.
fn trigger_schema() -> Schema {
    schema(
        "A trigger of a sless function: `http` (publishes `/fn/{ns}/{function}`) or `cron`.",
        vec![
            ("id", attr(T::String, C::Computed, "`namespace/name`.")),
            (
                "namespace",
                attr(
                    T::String,
                    C::OptionalComputed,
                    "The namespace; the provider's by default. Changing it replaces the trigger.",
                ),
            ),
            ("name", attr(T::String, C::Required, "The trigger's name. Changing it replaces the trigger.")),
            (
                "function",
                attr(T::String, C::Required, "The function it calls (same namespace; it need not exist yet)."),
            ),
            ("type", attr(T::String, C::Required, "`http` or `cron`. Changing it replaces the trigger.")),
            ("auth", attr(T::String, C::Optional, "http: `none` (public, default) or `token`.")),
            ("schedule", attr(T::String, C::Optional, "cron: 5 fields, `@daily`…, or `@every 5m`.")),
            ("timezone", attr(T::String, C::Optional, "cron: IANA time zone (default UTC).")),
            (
                "payload",
                attr(T::String, C::Optional, "cron: the event's `detail`, as JSON text (`jsonencode({...})`)."),
            ),
            (
                "prewarm_sec",
                attr(T::Number, C::Optional, "cron: start an instance this many seconds before each tick (0–3600)."),
            ),
            ("enabled", attr(T::Bool, C::Optional, "Whether it fires (default true).")),
            ("phase", attr(T::String, C::Computed, "`Waiting`, `Active` or `Failed`.")),
            ("url", attr(T::String, C::Computed, "http: the public URL.")),
            ("next_fire", attr(T::String, C::Computed, "cron: the next tick (RFC 3339), as of the last read.")),
            ("resource_version", attr(T::String, C::Computed, "The server's version of the spec; sent as `If-Match`.")),
        ],
    )
}

#[async_trait]
impl Resource for TriggerResource {
    type State<'a> = TriggerState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(trigger_schema())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: TriggerState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TriggerState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = state.ns_name();
        match self.fetch(&c.client.in_namespace(&ns), &name, &state).await {
            Ok(found) => found.map(|s| (s, private)),
            Err(e) => {
                self.report(diags, &e, "read", &state);
                None
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed: TriggerState,
        _c: TriggerState,
        _m: ValueEmpty,
    ) -> Option<(TriggerState, ValueEmpty)> {
        Some((self.plan(diags, None, proposed)?, ValueEmpty::default()))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: TriggerState,
        proposed: TriggerState,
        _c: TriggerState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TriggerState, ValueEmpty, Vec<AttributePath>)> {
        let planned = self.plan(diags, Some(&prior), proposed)?;
        let mut replace = Vec::new();
        for (k, a, b) in [
            ("namespace", &prior.namespace, &planned.namespace),
            ("name", &prior.name, &planned.name),
            ("type", &prior.kind, &planned.kind),
        ] {
            if a != b {
                replace.push(AttributePath::new(k));
            }
        }
        Some((planned, private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _d: &mut Diagnostics,
        _p: TriggerState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<ValueEmpty> {
        Some(private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: TriggerState,
        _c: TriggerState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TriggerState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, _) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        let result = match planned.spec_json() {
            Ok(body) => client.create_trigger(&body).await.map_err(Error::from),
            Err(e) => Err(e),
        };
        match result {
            Ok(r) => Some((TriggerState::from_record(&client, &r, &planned), private)),
            Err(e) => {
                self.report(diags, &e, "create", &planned);
                None
            }
        }
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: TriggerState,
        planned: TriggerState,
        _c: TriggerState,
        private: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<(TriggerState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        let tag = prior.resource_version.as_ref_option().map(etag);
        let result = match planned.spec_json() {
            Ok(body) => client.replace_trigger(&name, &body, tag.as_deref()).await.map_err(Error::from),
            Err(e) => Err(e),
        };
        match result {
            Ok(r) => Some((TriggerState::from_record(&client, &r, &planned), private)),
            Err(e) => {
                self.report(diags, &e, "update", &planned);
                None
            }
        }
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: TriggerState,
        _p: ValueEmpty,
        _m: ValueEmpty,
    ) -> Option<()> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = prior.ns_name();
        let client = c.client.in_namespace(&ns);
        let result = match client.delete_trigger(&name).await {
            Ok(_) => {
                let get = || {
                    let (client, name) = (client.clone(), name.clone());
                    async move { client.get_trigger(&name).await.map(drop) }
                };
                crate::job::wait_gone(get, &name).await
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(()) => Some(()),
            Err(e) => {
                self.report(diags, &e, "delete", &prior);
                None
            }
        }
    }

    async fn import<'a>(&self, diags: &mut Diagnostics, id: String) -> Option<(TriggerState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let Some((ns, name)) = split_id(&id, &c.namespace) else {
            crate::error::add_root(
                diags,
                format!("cannot import sless_trigger {id:?}"),
                "The import id is namespace/name.",
            );
            return None;
        };
        let prior =
            TriggerState { namespace: Value::Value(ns.into()), name: Value::Value(name.into()), ..Default::default() };
        match self.fetch(&c.client.in_namespace(ns), name, &prior).await {
            Ok(Some(s)) => Some((s, ValueEmpty::default())),
            Ok(None) => {
                crate::error::add_root(
                    diags,
                    format!("cannot import sless_trigger {id:?}: not found"),
                    "Check the namespace and name.",
                );
                None
            }
            Err(e) => {
                self.report(diags, &e, "import", &prior);
                None
            }
        }
    }
}

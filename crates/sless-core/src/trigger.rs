//! Triggers (docs/api.md; docs/architecture.md, "Triggers and jobs"): what calls a function — `http` (a public URL under
//! `/fn/{ns}/{name}`) or `cron` (a schedule).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::names::validate_name;
use crate::resource_version::ResourceVersion;
use crate::spec::check_same_name;
use crate::status::Condition;
use crate::{Error, Result};

/// The kind of trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TriggerType {
    /// Publishes the function at `/fn/{ns}/{function}[/{path}]`.
    Http,
    /// Calls the function on a schedule with a cron event.
    Cron,
}

/// Who may call an `http` trigger's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HttpAuth {
    /// Anyone (the default).
    #[default]
    None,
    /// Callers with a token for the namespace (`Authorization: Bearer …`).
    Token,
}

/// Longest `prewarm_sec` (seconds).
pub const MAX_PREWARM_SEC: u32 = 3600;

/// What a user declares about a trigger. Serialised flat, as in the API's trigger object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerSpec {
    /// The function it calls (in the same namespace). It need not exist yet.
    pub function: String,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    pub kind: TriggerType,
    /// Cron only: 5-field cron, an `@hourly`-style macro, or `@every <duration>`.
    pub schedule: Option<String>,
    /// Cron only: IANA time zone of the schedule (default `UTC`).
    pub timezone: String,
    /// Cron only: JSON delivered as the cron event's `detail`.
    pub payload: Value,
    /// Http only: `none` (public, default) or `token`.
    pub auth: HttpAuth,
    /// A disabled trigger does nothing.
    pub enabled: bool,
    /// Cron only: start an instance this many seconds before each tick (0 = off).
    pub prewarm_sec: u32,
    /// Http only: the payload format of calls through this trigger (`"1.0"` or `"2.0"`);
    /// `None`: the function's.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub payload_format: Option<crate::event::PayloadFormat>,
}

const TRIGGER_FIELDS: [&str; 10] =
    ["name", "function", "type", "schedule", "timezone", "payload", "auth", "enabled", "prewarm_sec", "payload_format"];
const READ_ONLY: [&str; 5] = ["namespace", "resource_version", "created_at", "updated_at", "status"];

impl TriggerSpec {
    /// Validates a create or full-replace body; errors name the field. The schedule and time
    /// zone are checked with `check_schedule` (see `crate::schedule`). Returns `name` if present.
    pub fn from_json(
        body: &Value,
        check_schedule: impl Fn(&str, &str) -> Result<()>,
    ) -> Result<(Option<String>, TriggerSpec)> {
        let obj = object(body, &TRIGGER_FIELDS)?;
        let name = optional_name(obj)?;
        let function = required_str(obj, "function")?;
        validate_name("function", function)?;
        let kind = match obj.get("type") {
            None | Some(Value::Null) => return Err(Error::field("type", "is required: http or cron")),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| Error::field("type", format!("must be http or cron, got {v}")))?,
        };
        let auth = match obj.get("auth") {
            None | Some(Value::Null) => HttpAuth::None,
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| Error::field("auth", format!("must be none or token, got {v}")))?,
        };
        let schedule = match obj.get("schedule") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(_) => return Err(Error::field("schedule", "must be a string")),
        };
        let timezone = match obj.get("timezone") {
            None | Some(Value::Null) => "UTC".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(Error::field("timezone", "must be an IANA time zone name")),
        };
        let payload = obj.get("payload").cloned().unwrap_or(Value::Null);
        let payload_format = match obj.get("payload_format") {
            None | Some(Value::Null) => None,
            Some(v) => Some(crate::event::PayloadFormat::parse("payload_format", v)?),
        };
        let enabled = optional_bool(obj, "enabled", true)?;
        let prewarm_sec = match obj.get("prewarm_sec") {
            None | Some(Value::Null) => 0,
            Some(v) => {
                v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n <= MAX_PREWARM_SEC).ok_or_else(|| {
                    Error::field("prewarm_sec", format!("must be an integer from 0 to {MAX_PREWARM_SEC}"))
                })?
            }
        };
        match kind {
            TriggerType::Cron => {
                let Some(s) = schedule.as_deref() else {
                    return Err(Error::field("schedule", "is required for a cron trigger"));
                };
                check_schedule(s, &timezone)?;
                if auth != HttpAuth::None {
                    return Err(Error::field("auth", "applies to http triggers only"));
                }
                if payload_format.is_some() {
                    return Err(Error::field("payload_format", "applies to http triggers only"));
                }
            }
            TriggerType::Http => {
                for (field, set) in [
                    ("schedule", schedule.is_some()),
                    ("timezone", obj.get("timezone").is_some_and(|v| !v.is_null())),
                    ("payload", !payload.is_null()),
                    ("prewarm_sec", prewarm_sec != 0),
                ] {
                    if set {
                        return Err(Error::field(field, "applies to cron triggers only"));
                    }
                }
            }
        }
        Ok((
            name,
            TriggerSpec {
                function: function.to_string(),
                kind,
                schedule,
                timezone,
                payload,
                auth,
                enabled,
                prewarm_sec,
                payload_format,
            },
        ))
    }

    /// Applies an RFC 7396 merge patch and validates the result; `name` must not change.
    pub fn merge_patch(
        &self,
        name: &str,
        patch: &Value,
        check_schedule: impl Fn(&str, &str) -> Result<()>,
    ) -> Result<TriggerSpec> {
        let mut doc = serde_json::to_value(self).map_err(|e| Error::Internal(e.to_string()))?;
        if self.kind == TriggerType::Http {
            // Defaults of cron-only fields are not "set" on an http trigger.
            if let Value::Object(m) = &mut doc {
                for k in ["schedule", "timezone", "payload", "prewarm_sec"] {
                    m.remove(k);
                }
            }
        }
        if !patch.is_object() {
            return Err(Error::field("body", "a merge patch must be a JSON object"));
        }
        json_patch::merge(&mut doc, patch);
        let (patched_name, spec) = TriggerSpec::from_json(&doc, check_schedule)?;
        check_same_name(name, patched_name.as_deref())?;
        Ok(spec)
    }
}

/// Phase of a trigger: `Waiting` (its function is missing or not ready, or it is disabled),
/// `Active`, `Failed` (its function failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TriggerPhase {
    /// Not firing yet; `message` says why.
    Waiting,
    /// Firing (cron) or serving (http).
    Active,
    /// Its function is `Failed`.
    Failed,
}

/// The status of a trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerStatus {
    /// The phase.
    pub phase: TriggerPhase,
    /// Why.
    pub message: String,
    /// `Ready` (the trigger is active).
    pub conditions: Vec<Condition>,
    /// Cron: the last tick fired (never fired twice, also across restarts).
    pub last_fired: Option<DateTime<Utc>>,
    /// Cron: the next tick, when active.
    pub next_fire: Option<DateTime<Utc>>,
    /// Http: the public URL path, `/fn/{ns}/{function}`.
    pub url: Option<String>,
}

impl TriggerStatus {
    /// A new trigger's status before its first reconcile.
    pub fn new() -> Self {
        TriggerStatus {
            phase: TriggerPhase::Waiting,
            message: "not reconciled yet".into(),
            conditions: vec![],
            last_fired: None,
            next_fire: None,
            url: None,
        }
    }
}

impl Default for TriggerStatus {
    fn default() -> Self {
        Self::new()
    }
}

/// A stored trigger. Serialised as the API's trigger object (the spec's fields flat); `Deserialize`
/// reads that object back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerRecord {
    /// The namespace.
    pub namespace: String,
    /// The trigger's name.
    pub name: String,
    /// What the user declared.
    #[serde(flatten)]
    pub spec: TriggerSpec,
    /// Changes whenever the spec changes.
    pub resource_version: ResourceVersion,
    /// Phase, message, conditions, cron bookkeeping.
    pub status: TriggerStatus,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last spec change; cron `@every` intervals count from here.
    pub updated_at: DateTime<Utc>,
}

/// The server-owned fields of a [`TriggerRecord`], read next to its flat spec.
#[derive(Deserialize)]
struct TriggerMeta {
    namespace: String,
    name: String,
    resource_version: ResourceVersion,
    status: TriggerStatus,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl<'de> Deserialize<'de> for TriggerRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let (m, spec): (TriggerMeta, TriggerSpec) = crate::flat::split(deserializer)?;
        Ok(TriggerRecord {
            namespace: m.namespace,
            name: m.name,
            spec,
            resource_version: m.resource_version,
            status: m.status,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

pub(crate) fn object<'a>(body: &'a Value, known: &[&str]) -> Result<&'a Map<String, Value>> {
    let obj = body.as_object().ok_or_else(|| Error::field("body", "must be a JSON object"))?;
    if let Some(key) = obj.keys().find(|k| !known.contains(&k.as_str()) && !READ_ONLY.contains(&k.as_str())) {
        return Err(Error::field(key, "unknown field"));
    }
    Ok(obj)
}

pub(crate) fn optional_name(obj: &Map<String, Value>) -> Result<Option<String>> {
    match obj.get("name") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            validate_name("name", s)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(Error::field("name", "must be a string")),
    }
}

pub(crate) fn required_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(Error::field(field, "is required")),
        Some(Value::String(s)) if s.is_empty() => Err(Error::field(field, "is required (empty string)")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Error::field(field, "must be a string")),
    }
}

pub(crate) fn optional_bool(obj: &Map<String, Value>, field: &str, default: bool) -> Result<bool> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::field(field, "must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(_: &str, _: &str) -> Result<()> {
        Ok(())
    }

    #[test]
    fn http_defaults_and_cron_only_fields_are_refused() {
        let (_, t) = TriggerSpec::from_json(&json!({"function": "f", "type": "http"}), ok).expect("valid");
        assert_eq!((t.auth, t.enabled, t.timezone.as_str()), (HttpAuth::None, true, "UTC"));
        let err = TriggerSpec::from_json(&json!({"function": "f", "type": "http", "schedule": "@hourly"}), ok)
            .expect_err("schedule");
        assert!(err.to_string().starts_with("schedule: "), "{err}");
    }

    #[test]
    fn cron_needs_a_schedule_and_checks_it() {
        let err = TriggerSpec::from_json(&json!({"function": "f", "type": "cron"}), ok).expect_err("no schedule");
        assert!(err.to_string().starts_with("schedule: "), "{err}");
        let bad = |_: &str, _: &str| Err(Error::field("timezone", "unknown"));
        let err = TriggerSpec::from_json(
            &json!({"function": "f", "type": "cron", "schedule": "* * * * *", "timezone": "Mars/Base"}),
            bad,
        )
        .expect_err("tz");
        assert!(err.to_string().starts_with("timezone: "), "{err}");
    }

    #[test]
    fn fields_are_named() {
        for (body, field) in [
            (json!({"type": "http"}), "function"),
            (json!({"function": "F", "type": "http"}), "function"),
            (json!({"function": "f"}), "type"),
            (json!({"function": "f", "type": "queue"}), "type"),
            (json!({"function": "f", "type": "http", "auth": "basic"}), "auth"),
            (json!({"function": "f", "type": "cron", "schedule": "@hourly", "prewarm_sec": -1}), "prewarm_sec"),
            (json!({"function": "f", "type": "http", "sched": 1}), "sched"),
        ] {
            let err = TriggerSpec::from_json(&body, ok).expect_err(field);
            assert!(err.to_string().starts_with(&format!("{field}: ")), "{body}: {err}");
        }
    }

    #[test]
    fn merge_patch_keeps_http_triggers_valid() {
        let (_, t) = TriggerSpec::from_json(&json!({"function": "f", "type": "http"}), ok).expect("valid");
        let p = t.merge_patch("t", &json!({"auth": "token"}), ok).expect("patched");
        assert_eq!(p.auth, HttpAuth::Token);
        let p = t.merge_patch("t", &json!({"enabled": false}), ok).expect("patched");
        assert!(!p.enabled);
    }
}

//! The function spec: what a user declares, validated from JSON with every error naming its
//! field (docs/api.md). PUT replaces the whole spec; PATCH applies an RFC 7396 merge patch to the
//! current spec's JSON and validates the result with the same rules.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::runtime::{Entrypoint, Runtime};
use crate::{Error, Result};

/// Default `memory_mb` (MiB).
pub const DEFAULT_MEMORY_MB: u32 = 128;
/// Allowed `memory_mb` range (MiB).
pub const MEMORY_MB_RANGE: std::ops::RangeInclusive<u32> = 64..=4096;
/// Default `timeout_sec` (seconds).
pub const DEFAULT_TIMEOUT_SEC: u32 = 30;
/// Allowed `timeout_sec` range (seconds).
pub const TIMEOUT_SEC_RANGE: std::ops::RangeInclusive<u32> = 1..=900;
/// Allowed `concurrency` range: calls one instance serves at once (default 1, as Lambda).
pub const CONCURRENCY_RANGE: std::ops::RangeInclusive<u32> = 1..=100;
/// Largest total size of `env` keys and values, in bytes (Lambda allows 4 KiB; we allow more).
pub const MAX_ENV_BYTES: usize = 32 * 1024;
/// Env names reserved for the platform (a function may not set them).
pub const RESERVED_ENV_PREFIXES: [&str; 2] = ["SLESS_", "AWS_LAMBDA_"];
/// Env names of Lambda's runtime that the platform sets and a function may not (Lambda
/// reserves them too; docs/writing-functions.md, "Environment").
pub const RESERVED_ENV_NAMES: [&str; 4] = ["_HANDLER", "AWS_EXECUTION_ENV", "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR"];

/// What the user declares about a function. Serialised flat, as in the API's function object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionSpec {
    /// The language runtime.
    pub runtime: Runtime,
    /// `folder/module.function`, see [`Entrypoint`].
    pub entrypoint: String,
    /// Memory limit of one instance in MiB (64–4096, default 128).
    pub memory_mb: u32,
    /// Longest call in seconds (1–900, default 30); longer calls get 504.
    pub timeout_sec: u32,
    /// Environment variables given to the function (secrets: never logged).
    pub env: BTreeMap<String, String>,
    /// A disabled function keeps its code but answers 503 to calls.
    pub enabled: bool,
    /// Calls one instance serves at once (1–100, default 1).
    #[serde(default = "default_concurrency")]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub concurrency: u32,
    /// Most instances at once (1–1000); `None`: the server's default.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub max_instances: Option<u32>,
    /// Seconds an idle instance is kept before it stops (1–86400); `None`: the server's
    /// default (300 s).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub idle_timeout_sec: Option<u32>,
    /// The HTTP event and response rules: `"1.0"` (API Gateway REST, the default) or `"2.0"`
    /// (HTTP API / function URLs); an http trigger may choose its own.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub payload_format: crate::event::PayloadFormat,
}

fn default_concurrency() -> u32 {
    1
}

/// Fields the server owns; they may appear in a PUT/PATCH body (read back from a GET) and are
/// ignored, except `name`, which must match the path.
const READ_ONLY: [&str; 8] =
    ["namespace", "resource_version", "active_version", "url", "created_at", "updated_at", "status", "versions"];

impl FunctionSpec {
    /// Validates a create or full-replace body: `runtime` and `entrypoint` are required, the
    /// rest take their defaults. Unknown fields are rejected (a typo must not be silently
    /// dropped). Returns the `name` field if present.
    pub fn from_json(body: &Value) -> Result<(Option<String>, FunctionSpec)> {
        let obj = body.as_object().ok_or_else(|| Error::field("body", "must be a JSON object"))?;
        for key in obj.keys() {
            let known = matches!(
                key.as_str(),
                "name"
                    | "runtime"
                    | "entrypoint"
                    | "memory_mb"
                    | "timeout_sec"
                    | "env"
                    | "enabled"
                    | "concurrency"
                    | "max_instances"
                    | "idle_timeout_sec"
                    | "payload_format"
            ) || READ_ONLY.contains(&key.as_str());
            if !known {
                return Err(Error::field(key, "unknown field"));
            }
        }
        let name = match obj.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                crate::names::validate_name("name", s)?;
                Some(s.clone())
            }
            Some(_) => return Err(Error::field("name", "must be a string")),
        };
        let runtime = Runtime::parse("runtime", required_str(obj, "runtime")?)?;
        let entrypoint = required_str(obj, "entrypoint")?.to_string();
        Entrypoint::parse("entrypoint", &entrypoint)?;
        let memory_mb = optional_u32(obj, "memory_mb", DEFAULT_MEMORY_MB, MEMORY_MB_RANGE)?;
        let timeout_sec = optional_u32(obj, "timeout_sec", DEFAULT_TIMEOUT_SEC, TIMEOUT_SEC_RANGE)?;
        let env = parse_env(obj.get("env"))?;
        let enabled = match obj.get("enabled") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(Error::field("enabled", "must be true or false")),
        };
        let concurrency = optional_u32(obj, "concurrency", 1, CONCURRENCY_RANGE)?;
        let max_instances = match obj.get("max_instances") {
            None | Some(Value::Null) => None,
            Some(_) => Some(optional_u32(obj, "max_instances", 1, 1..=1000)?),
        };
        let idle_timeout_sec = match obj.get("idle_timeout_sec") {
            None | Some(Value::Null) => None,
            Some(_) => Some(optional_u32(obj, "idle_timeout_sec", 300, 1..=86_400)?),
        };
        let payload_format = match obj.get("payload_format") {
            None | Some(Value::Null) => crate::event::PayloadFormat::V1,
            Some(v) => crate::event::PayloadFormat::parse("payload_format", v)?,
        };
        Ok((
            name,
            FunctionSpec {
                payload_format,
                runtime,
                entrypoint,
                memory_mb,
                timeout_sec,
                env,
                enabled,
                concurrency,
                max_instances,
                idle_timeout_sec,
            },
        ))
    }

    /// Applies a JSON merge patch (RFC 7396) to this spec and validates the result.
    /// `name` in the patch must equal `name` (renaming is not supported).
    pub fn merge_patch(&self, name: &str, patch: &Value) -> Result<FunctionSpec> {
        if !patch.is_object() {
            return Err(Error::field("body", "a merge patch must be a JSON object"));
        }
        let mut doc = serde_json::to_value(self).map_err(|e| Error::Internal(e.to_string()))?;
        json_patch::merge(&mut doc, patch);
        let (patched_name, spec) = FunctionSpec::from_json(&doc)?;
        check_same_name(name, patched_name.as_deref())?;
        Ok(spec)
    }

    /// The parsed entrypoint (always valid for a validated spec).
    pub fn parsed_entrypoint(&self) -> Result<Entrypoint> {
        Entrypoint::parse("entrypoint", &self.entrypoint)
    }
}

/// Checks that a body's `name` (if any) equals the name in the path.
pub fn check_same_name(path_name: &str, body_name: Option<&str>) -> Result<()> {
    match body_name {
        Some(n) if n != path_name => {
            Err(Error::field("name", format!("is {n:?} but the path names {path_name:?}; renaming is not supported")))
        }
        _ => Ok(()),
    }
}

fn required_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(Error::field(field, "is required")),
        Some(Value::String(s)) if s.is_empty() => Err(Error::field(field, "is required (empty string)")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Error::field(field, "must be a string")),
    }
}

fn optional_u32(
    obj: &Map<String, Value>,
    field: &str,
    default: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32> {
    let out_of_range = || Error::field(field, format!("must be an integer from {} to {}", range.start(), range.end()));
    match obj.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => {
            let v = n.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or_else(out_of_range)?;
            if range.contains(&v) { Ok(v) } else { Err(out_of_range()) }
        }
        Some(_) => Err(out_of_range()),
    }
}

fn parse_env(value: Option<&Value>) -> Result<BTreeMap<String, String>> {
    let obj = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(obj)) => obj,
        Some(_) => return Err(Error::field("env", "must be an object of string values")),
    };
    let mut env = BTreeMap::new();
    let mut total = 0;
    for (key, value) in obj {
        let field = format!("env.{key}");
        let valid_name = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(Error::field(field, "name must match [A-Za-z_][A-Za-z0-9_]*"));
        }
        if let Some(prefix) = RESERVED_ENV_PREFIXES.iter().find(|p| key.starts_with(**p)) {
            return Err(Error::field(field, format!("names starting with {prefix} are reserved")));
        }
        if RESERVED_ENV_NAMES.contains(&key.as_str()) {
            return Err(Error::field(field, "this name is reserved: the platform sets it"));
        }
        // Values are secrets: the error never echoes them.
        let Value::String(value) = value else {
            return Err(Error::field(field, "value must be a string (quote numbers and booleans)"));
        };
        let value = value.clone();
        if value.contains('\0') {
            return Err(Error::field(field, "value must not contain NUL"));
        }
        total += key.len() + value.len();
        env.insert(key.clone(), value);
    }
    if total > MAX_ENV_BYTES {
        return Err(Error::field("env", format!("is {total} bytes, more than {MAX_ENV_BYTES}")));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> FunctionSpec {
        FunctionSpec::from_json(&json!({"runtime": "python3.11", "entrypoint": "main.handler", "env": {"X": "1"}}))
            .expect("valid")
            .1
    }

    #[test]
    fn defaults_apply() {
        let s = spec();
        assert_eq!((s.memory_mb, s.timeout_sec, s.enabled), (128, 30, true));
    }

    #[test]
    fn required_fields_are_named() {
        let err = FunctionSpec::from_json(&json!({"entrypoint": "main.handler"})).expect_err("no runtime");
        assert_eq!(err.to_string(), "runtime: is required");
        let err = FunctionSpec::from_json(&json!({"runtime": "nodejs20"})).expect_err("no entrypoint");
        assert_eq!(err.to_string(), "entrypoint: is required");
    }

    #[test]
    fn ranges_and_types_are_checked() {
        for (field, value) in [
            ("memory_mb", json!(32)),
            ("memory_mb", json!("128")),
            ("timeout_sec", json!(901)),
            ("timeout_sec", json!(1.5)),
        ] {
            let mut body = json!({"runtime": "nodejs20", "entrypoint": "index.handler"});
            body[field] = value;
            let err = FunctionSpec::from_json(&body).expect_err(field);
            assert!(err.to_string().starts_with(&format!("{field}: ")), "{err}");
        }
    }

    #[test]
    fn a_spec_stored_before_payload_format_existed_reads_as_1_0() {
        // The SQL store keeps specs as JSON: a row written by an older server has no field.
        let mut old = serde_json::to_value(spec()).expect("json");
        old.as_object_mut().expect("object").remove("payload_format");
        let read: FunctionSpec = serde_json::from_value(old).expect("an old row");
        assert_eq!(read.payload_format, crate::event::PayloadFormat::V1);
        let v2 = spec().merge_patch("f", &json!({"payload_format": "2.0"})).expect("2.0");
        assert_eq!(v2.payload_format, crate::event::PayloadFormat::V2);
        let err = spec().merge_patch("f", &json!({"payload_format": "3.0"})).expect_err("3.0");
        assert!(err.to_string().starts_with("payload_format: "), "{err}");
    }

    #[test]
    fn unknown_fields_and_bad_env_are_named() {
        let err = FunctionSpec::from_json(&json!({"runtime": "nodejs20", "entrypoint": "i.h", "memroy_mb": 1}))
            .expect_err("typo");
        assert_eq!(err.to_string(), "memroy_mb: unknown field");
        let err = FunctionSpec::from_json(&json!({"runtime": "nodejs20", "entrypoint": "i.h", "env": {"1A": "x"}}))
            .expect_err("env");
        assert!(err.to_string().starts_with("env.1A: "));
        let err =
            FunctionSpec::from_json(&json!({"runtime": "nodejs20", "entrypoint": "i.h", "env": {"SLESS_X": "x"}}))
                .expect_err("reserved");
        assert!(err.to_string().starts_with("env.SLESS_X: "));
        let err =
            FunctionSpec::from_json(&json!({"runtime": "nodejs20", "entrypoint": "i.h", "env": {"_HANDLER": "x"}}))
                .expect_err("reserved");
        assert!(err.to_string().starts_with("env._HANDLER: "), "{err}");
        let err =
            FunctionSpec::from_json(&json!({"runtime": "nodejs20", "entrypoint": "i.h", "env": {"S": {"secret": 1}}}))
                .expect_err("obj");
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn merge_patch_changes_only_what_it_names() {
        let s = spec();
        let patched = s.merge_patch("f", &json!({"env": {"A": "1"}})).expect("valid");
        assert_eq!(patched.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(patched.env.get("X").map(String::as_str), Some("1"));
        assert_eq!((patched.runtime, patched.entrypoint.as_str(), patched.memory_mb), (s.runtime, "main.handler", 128));
        let removed = s.merge_patch("f", &json!({"env": {"X": null}})).expect("valid");
        assert!(removed.env.is_empty());
    }

    #[test]
    fn merge_patch_is_validated_after_merging() {
        let err = spec().merge_patch("f", &json!({"runtime": null})).expect_err("removes required");
        assert_eq!(err.to_string(), "runtime: is required");
        let err = spec().merge_patch("f", &json!({"memory_mb": 0})).expect_err("range");
        assert!(err.to_string().starts_with("memory_mb: "));
        let err = spec().merge_patch("f", &json!({"name": "g"})).expect_err("rename");
        assert!(err.to_string().starts_with("name: "));
    }
}

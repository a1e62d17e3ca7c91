//! Conversions between Terraform values and the API's JSON.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use tf_provider::value::Value;

/// A string attribute.
pub type Str = Value<String>;
/// A number attribute (Terraform numbers are whole here).
pub type Num = Value<i64>;
/// A bool attribute.
pub type Bool = Value<bool>;
/// A `map(string)` attribute.
pub type StrMap = Value<BTreeMap<String, Value<String>>>;

/// The state's value for an optional attribute the server always fills in: the server's,
/// except that the server's default stays `null` where the prior state had `null` (so a
/// configuration that leaves it out plans no change, and a change made outside Terraform
/// is still seen).
pub fn keep_null<T: PartialEq>(prior: &Value<T>, server: T, default: T) -> Value<T> {
    if prior.is_null() && server == default { Value::Null } else { Value::Value(server) }
}

/// A known string, if any.
pub fn s(v: &Str) -> Option<&str> {
    v.as_ref_option().map(String::as_str)
}

/// A JSON `payload` attribute (a JSON-encoded string) as JSON; `null` when unset. Errors:
/// the text is not JSON.
pub fn payload_json(v: &Str) -> Result<Json, String> {
    match s(v) {
        None => Ok(Json::Null),
        Some(text) => serde_json::from_str(text).map_err(|e| format!("payload is not JSON ({e}): use jsonencode(...)")),
    }
}

/// The state's `payload` for the server's: the prior text when it means the same JSON (so
/// formatting never plans a change), else the server's, compact.
pub fn payload_state(prior: &Str, server: &Json) -> Str {
    if server.is_null() {
        return Value::Null;
    }
    if let Some(text) = s(prior)
        && serde_json::from_str::<Json>(text).is_ok_and(|p| &p == server)
    {
        return prior.clone();
    }
    Value::Value(server.to_string())
}

/// A `map(string)` as JSON (unknown or null elements left out).
pub fn map_json(v: &StrMap) -> serde_json::Map<String, Json> {
    v.as_ref_option()
        .map(|m| {
            m.iter().filter_map(|(k, v)| v.as_ref_option().map(|v| (k.clone(), Json::String(v.clone())))).collect()
        })
        .unwrap_or_default()
}

/// The `namespace/name` id; `name` alone means `default_ns`. Errors: an empty part.
pub fn split_id<'a>(id: &'a str, default_ns: &'a str) -> Option<(&'a str, &'a str)> {
    let (ns, name) = id.split_once('/').unwrap_or((default_ns, id));
    (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then_some((ns, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_server_default_stays_null_where_the_state_had_null() {
        assert_eq!(keep_null(&Value::Null, 128, 128), Value::Null);
        assert_eq!(keep_null(&Value::Null, 256, 128), Value::Value(256), "a change outside Terraform is seen");
        assert_eq!(keep_null(&Value::Value(128), 128, 128), Value::Value(128));
    }

    #[test]
    fn a_payload_keeps_its_text_while_it_means_the_same_json() {
        let prior: Str = Value::Value("{ \"a\" : 1 }".into());
        assert_eq!(payload_state(&prior, &json!({"a": 1})), prior);
        assert_eq!(payload_state(&prior, &json!({"a": 2})), Value::Value("{\"a\":2}".into()));
        assert_eq!(payload_state(&prior, &Json::Null), Value::Null);
        assert!(payload_json(&Value::Value("{nope".into())).is_err_and(|e| e.contains("jsonencode")));
    }

    #[test]
    fn import_ids_are_namespace_slash_name() {
        assert_eq!(split_id("team/f", "default"), Some(("team", "f")));
        assert_eq!(split_id("f", "default"), Some(("default", "f")));
        assert_eq!(split_id("a/b/c", "default"), None);
        assert_eq!(split_id("/f", "default"), None);
    }
}

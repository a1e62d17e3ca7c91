//! Deserialising records whose spec is serialised flat (`#[serde(flatten)]` on the
//! Serialize side).
//!
//! `#[serde(flatten)]` cannot be used to deserialise them: serde buffers a flattened struct's
//! input, and with serde_json's `arbitrary_precision` feature (on in this workspace) a
//! buffered number becomes a map that no integer field accepts. Instead the object is read
//! once as a JSON value and both halves are read from it; each half ignores the other's
//! fields.

use serde::de::{Deserialize, DeserializeOwned, Deserializer, Error as _};
use serde_json::Value;

/// Reads one JSON object as two structs: the record's own fields (`M`) and its flat spec (`S`).
pub(crate) fn split<'de, D, M, S>(deserializer: D) -> Result<(M, S), D::Error>
where
    D: Deserializer<'de>,
    M: DeserializeOwned,
    S: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    if !value.is_object() {
        return Err(D::Error::custom("expected a JSON object"));
    }
    let meta = M::deserialize(&value).map_err(D::Error::custom)?;
    let spec = S::deserialize(&value).map_err(D::Error::custom)?;
    Ok((meta, spec))
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use serde_json::json;

    use crate::job::{JobRecord, JobSpec, JobStatus};
    use crate::spec::FunctionSpec;
    use crate::status::FunctionStatus;
    use crate::traits::{FunctionRecord, VersionRecord};
    use crate::trigger::{TriggerRecord, TriggerSpec, TriggerStatus};

    fn at() -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).single().expect("time") + chrono::Duration::milliseconds(678)
    }

    /// Regression: with `arbitrary_precision`, a derived `#[serde(flatten)]` Deserialize
    /// refused every number of the spec ("invalid type: map, expected u32").
    #[test]
    fn records_round_trip_through_their_api_json() {
        let (_, spec) = FunctionSpec::from_json(&json!({
            "runtime": "python3.11", "entrypoint": "main.handler", "memory_mb": 256, "timeout_sec": 7,
            "env": {"A": "1"}, "concurrency": 3, "max_instances": 9, "idle_timeout_sec": 60,
        }))
        .expect("spec");
        let f = FunctionRecord {
            namespace: "default".into(),
            name: "f".into(),
            spec,
            resource_version: crate::resource_version::ResourceVersion::from_count(42),
            active_version: Some(3),
            status: FunctionStatus::pending(at()),
            created_at: at(),
            updated_at: at(),
        };
        let mut text = serde_json::to_value(&f).expect("serialise");
        text["url"] = json!("http://h/v1/namespaces/default/functions/f/invoke");
        let text = text.to_string();
        let back: FunctionRecord = serde_json::from_str(&text).expect("function");
        assert_eq!(back, f);

        let (_, spec) = TriggerSpec::from_json(
            &json!({"function": "f", "type": "cron", "schedule": "@every 1m", "payload": {"n": 1.50, "big": 12345678901234567890123_u128}, "prewarm_sec": 5}),
            |_, _| Ok(()),
        )
        .expect("trigger spec");
        let t = TriggerRecord {
            namespace: "default".into(),
            name: "t".into(),
            spec,
            resource_version: crate::resource_version::ResourceVersion::from_count(7),
            status: TriggerStatus::new(),
            created_at: at(),
            updated_at: at(),
        };
        let text = serde_json::to_string(&t).expect("serialise");
        let back: TriggerRecord = serde_json::from_str(&text).expect("trigger");
        assert_eq!(back, t);
        assert_eq!(serde_json::to_string(&back).expect("again"), text, "payload numbers are kept exactly");

        let (_, spec) =
            JobSpec::from_json(&json!({"function": "f", "run_id": 18446744073709551615_u64, "payload": [1, 2]}))
                .expect("job spec");
        let j = JobRecord {
            namespace: "default".into(),
            name: "j".into(),
            spec,
            resource_version: crate::resource_version::ResourceVersion::from_count(2),
            status: JobStatus::new(),
            created_at: at(),
            updated_at: at(),
        };
        let back: JobRecord = serde_json::from_str(&serde_json::to_string(&j).expect("serialise")).expect("job");
        assert_eq!(back, j);

        let v = VersionRecord {
            namespace: "default".into(),
            function: "f".into(),
            version: 3,
            sha256: "ab".repeat(32),
            size_bytes: 1234,
            runtime: crate::runtime::Runtime::Nodejs20,
            phase: crate::status::VersionPhase::Ready,
            message: String::new(),
            created_at: at(),
        };
        let back: VersionRecord =
            serde_json::from_str(&serde_json::to_string(&v).expect("serialise")).expect("version");
        assert_eq!(back, v);
    }

    #[test]
    fn a_record_must_be_an_object() {
        assert!(serde_json::from_str::<FunctionRecord>("[1]").is_err());
        assert!(serde_json::from_str::<JobRecord>(r#"{"name": "j"}"#).is_err());
    }
}

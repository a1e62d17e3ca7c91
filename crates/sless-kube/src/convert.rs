//! Between the custom resources and the core specs (`sless_core`), both ways, and the pure
//! mapper the Trigger and FunctionJob controllers watch Functions through. A resource read
//! from the cluster is checked by the same validation as the REST API's bodies
//! (`FunctionSpec::from_json`, …), so what `kubectl apply` stores and what the API accepts
//! mean the same; errors name the REST API's field (`memory_mb`, `schedule`).

use serde_json::{Value, json};
use sless_core::Result;
use sless_core::event::PayloadFormat as CoreFormat;
use sless_core::job::JobSpec;
use sless_core::spec::FunctionSpec;
use sless_core::trigger::{HttpAuth as CoreAuth, TriggerSpec, TriggerType as CoreType};

use crate::crd::{self, Function, FunctionJob, Trigger};

fn runtime_name(r: crd::Runtime) -> &'static str {
    match r {
        crd::Runtime::Python311 => "python3.11",
        crd::Runtime::Nodejs20 => "nodejs20",
    }
}

/// The REST API's body for a Function's spec, validated as the API validates it.
/// Errors: `InvalidField` naming the REST API's field.
pub fn function_spec(spec: &crd::FunctionSpec) -> Result<FunctionSpec> {
    let body = json!({
        "runtime": runtime_name(spec.runtime),
        "entrypoint": spec.entrypoint,
        "memory_mb": spec.memory_mb,
        "timeout_sec": spec.timeout_sec,
        "env": spec.env,
        "enabled": spec.enabled,
        "concurrency": spec.concurrency,
        "max_instances": spec.max_instances,
        "idle_timeout_sec": spec.idle_timeout_sec,
        "payload_format": spec.payload_format.map(format_name),
    });
    FunctionSpec::from_json(&body).map(|(_, s)| s)
}

/// A Function's spec for a core spec and the archive it runs (`None` before an upload).
pub fn function_resource_spec(spec: &FunctionSpec, sha256: Option<&str>) -> crd::FunctionSpec {
    let runtime = match spec.runtime {
        sless_core::runtime::Runtime::Python311 => crd::Runtime::Python311,
        sless_core::runtime::Runtime::Nodejs20 => crd::Runtime::Nodejs20,
    };
    crd::FunctionSpec {
        runtime,
        entrypoint: spec.entrypoint.clone(),
        memory_mb: spec.memory_mb,
        timeout_sec: spec.timeout_sec,
        env: spec.env.clone(),
        enabled: spec.enabled,
        concurrency: spec.concurrency,
        max_instances: spec.max_instances,
        idle_timeout_sec: spec.idle_timeout_sec,
        payload_format: (spec.payload_format != CoreFormat::V1).then(|| resource_format(spec.payload_format)),
        code: sha256.map(|s| crd::Code { sha256: s.to_string() }),
    }
}

/// The REST API's trigger spec for a Trigger's, validated (schedules and time zones too) as
/// the API validates it. Errors: `InvalidField`.
pub fn trigger_spec(spec: &crd::TriggerSpec) -> Result<TriggerSpec> {
    let kind = match spec.kind {
        crd::TriggerType::Http => "http",
        crd::TriggerType::Cron => "cron",
    };
    let auth = match spec.auth {
        crd::HttpAuth::None => "none",
        crd::HttpAuth::Token => "token",
    };
    let body = json!({
        "function": spec.function,
        "type": kind,
        "schedule": spec.schedule,
        // The CRD defaults `timezone` to UTC on every trigger; the API takes it for cron only.
        "timezone": (spec.kind == crd::TriggerType::Cron).then_some(&spec.timezone),
        "payload": spec.payload.clone().unwrap_or(Value::Null),
        "auth": auth,
        "enabled": spec.enabled,
        "prewarm_sec": spec.prewarm_sec.unwrap_or(0),
        "payload_format": spec.payload_format.map(format_name),
    });
    TriggerSpec::from_json(&body, sless_core::schedule::check).map(|(_, s)| s)
}

/// A Trigger's spec for a core trigger spec.
pub fn trigger_resource_spec(spec: &TriggerSpec) -> crd::TriggerSpec {
    crd::TriggerSpec {
        function: spec.function.clone(),
        kind: match spec.kind {
            CoreType::Http => crd::TriggerType::Http,
            CoreType::Cron => crd::TriggerType::Cron,
        },
        schedule: spec.schedule.clone(),
        timezone: spec.timezone.clone(),
        payload: (!spec.payload.is_null()).then(|| spec.payload.clone()),
        auth: match spec.auth {
            CoreAuth::None => crd::HttpAuth::None,
            CoreAuth::Token => crd::HttpAuth::Token,
        },
        enabled: spec.enabled,
        prewarm_sec: (spec.prewarm_sec > 0).then_some(spec.prewarm_sec),
        payload_format: spec.payload_format.map(resource_format),
    }
}

/// The REST API's name of a payload format.
fn format_name(f: crd::PayloadFormat) -> &'static str {
    match f {
        crd::PayloadFormat::V1 => CoreFormat::V1.as_str(),
        crd::PayloadFormat::V2 => CoreFormat::V2.as_str(),
    }
}

fn resource_format(f: CoreFormat) -> crd::PayloadFormat {
    match f {
        CoreFormat::V1 => crd::PayloadFormat::V1,
        CoreFormat::V2 => crd::PayloadFormat::V2,
    }
}

/// The REST API's job spec for a FunctionJob's. Errors: `InvalidField`.
pub fn job_spec(spec: &crd::FunctionJobSpec) -> Result<JobSpec> {
    let body = json!({
        "function": spec.function,
        "run_id": spec.run_id,
        "payload": spec.payload.clone().unwrap_or(Value::Null),
        "enabled": spec.enabled,
    });
    JobSpec::from_json(&body).map(|(_, s)| s)
}

/// A FunctionJob's spec for a core job spec (`run_id` above `i64::MAX` is refused: the
/// resource stores a signed integer). Errors: `InvalidField` naming `run_id`.
pub fn job_resource_spec(spec: &JobSpec) -> Result<crd::FunctionJobSpec> {
    let run_id = i64::try_from(spec.run_id)
        .map_err(|_| sless_core::Error::field("run_id", format!("must be at most {} on Kubernetes", i64::MAX)))?;
    Ok(crd::FunctionJobSpec {
        function: spec.function.clone(),
        run_id,
        payload: (!spec.payload.is_null()).then(|| spec.payload.clone()),
        enabled: spec.enabled,
    })
}

/// The Triggers of `function`'s namespace that name it: what the Trigger controller
/// reconciles when the Function changes (its phase, its version). Pure; the controller feeds
/// it its cache.
pub fn triggers_of<'a>(function: &Function, triggers: &'a [Trigger]) -> Vec<&'a Trigger> {
    let (ns, name) = (function.metadata.namespace.as_deref(), function.metadata.name.as_deref());
    triggers
        .iter()
        .filter(|t| t.metadata.namespace.as_deref() == ns && Some(t.spec.function.as_str()) == name)
        .collect()
}

/// The FunctionJobs of `function`'s namespace that name it.
pub fn jobs_of<'a>(function: &Function, jobs: &'a [FunctionJob]) -> Vec<&'a FunctionJob> {
    let (ns, name) = (function.metadata.namespace.as_deref(), function.metadata.name.as_deref());
    jobs.iter().filter(|j| j.metadata.namespace.as_deref() == ns && Some(j.spec.function.as_str()) == name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..ObjectMeta::default() }
    }

    #[test]
    fn function_specs_go_both_ways_and_keep_the_apis_validation() {
        let body = json!({"runtime": "nodejs20", "entrypoint": "src/app.handler", "memory_mb": 256, "env": {"A": "1"},
                          "concurrency": 4, "max_instances": 3, "idle_timeout_sec": 60, "enabled": false});
        let (_, core) = FunctionSpec::from_json(&body).expect("spec");
        let resource = function_resource_spec(&core, Some(&"a".repeat(64)));
        assert_eq!(resource.code.as_ref().map(|c| c.sha256.len()), Some(64));
        assert_eq!(function_spec(&resource).expect("back"), core);
        let mut bad = resource.clone();
        bad.memory_mb = 10;
        assert!(function_spec(&bad).expect_err("range").to_string().starts_with("memory_mb: "));
        bad = resource;
        bad.env.insert("SLESS_X".into(), "1".into());
        assert!(function_spec(&bad).expect_err("reserved").to_string().starts_with("env.SLESS_X"));
    }

    #[test]
    fn regression_an_http_trigger_with_the_crds_default_timezone_is_valid() {
        // The CRD defaults `timezone` to UTC on every Trigger, http ones too; the API refuses a
        // timezone on an http trigger, so it must not be passed on.
        let t: crd::TriggerSpec =
            serde_json::from_value(json!({"function": "f", "type": "http", "auth": "token"})).expect("spec");
        assert_eq!(t.timezone, "UTC");
        let core = trigger_spec(&t).expect("an http trigger as kubectl applies it");
        assert_eq!(core.auth, CoreAuth::Token);
    }

    #[test]
    fn trigger_and_job_specs_go_both_ways() {
        let body = json!({"function": "f", "type": "cron", "schedule": "@every 30s", "timezone": "Europe/Berlin",
                          "payload": {"x": 1}, "prewarm_sec": 5});
        let (_, core) = TriggerSpec::from_json(&body, sless_core::schedule::check).expect("trigger");
        assert_eq!(trigger_spec(&trigger_resource_spec(&core)).expect("back"), core);
        let mut bad = trigger_resource_spec(&core);
        bad.schedule = Some("61 * * * *".into());
        assert!(trigger_spec(&bad).expect_err("schedule").to_string().starts_with("schedule"));
        let (_, job) = JobSpec::from_json(&json!({"function": "f", "run_id": 7, "payload": [1]})).expect("job");
        assert_eq!(job_spec(&job_resource_spec(&job).expect("resource")).expect("back"), job);
        let huge = JobSpec { run_id: u64::MAX, ..job };
        assert!(job_resource_spec(&huge).expect_err("too large").to_string().starts_with("run_id: "));
    }

    #[test]
    fn a_function_maps_to_the_triggers_and_jobs_that_name_it_in_its_namespace() {
        let f = Function {
            metadata: meta("a", "hello"),
            ..Function::new(
                "hello",
                serde_json::from_value(json!({"runtime": "python3.11", "entrypoint": "m.h"})).expect("spec"),
            )
        };
        let trigger = |ns: &str, name: &str, function: &str| Trigger {
            metadata: meta(ns, name),
            ..Trigger::new(name, serde_json::from_value(json!({"function": function, "type": "http"})).expect("spec"))
        };
        let all = [
            trigger("a", "t1", "hello"),
            trigger("a", "t2", "other"),
            trigger("b", "t3", "hello"),
            trigger("a", "t4", "hello"),
        ];
        let names: Vec<&str> = triggers_of(&f, &all).iter().filter_map(|t| t.metadata.name.as_deref()).collect();
        assert_eq!(names, ["t1", "t4"]);
        let job = |ns: &str, name: &str, function: &str| FunctionJob {
            metadata: meta(ns, name),
            ..FunctionJob::new(name, serde_json::from_value(json!({"function": function})).expect("spec"))
        };
        let jobs = [job("a", "j1", "hello"), job("b", "j2", "hello")];
        assert_eq!(jobs_of(&f, &jobs).len(), 1);
    }
}

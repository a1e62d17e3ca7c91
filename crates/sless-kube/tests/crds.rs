//! The CustomResourceDefinitions: `deploy/crds.yaml` is what `sless crds` prints, and a real
//! kube-apiserver (scripts/kube-testenv) accepts them, applies their defaults, refuses what
//! their validation refuses naming the field, and keeps status behind its subresource.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use sless_kube::crd::{Function, GROUP, VERSION};
use sless_kube_testenv::{TestNamespace, eventually};

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn deploy_crds_yaml_is_what_sless_crds_prints() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds.yaml");
    let printed = sless_kube::crds_yaml().expect("yaml");
    if std::env::var_os("SLESS_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &printed).expect("write deploy/crds.yaml");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == printed,
        "deploy/crds.yaml differs from `sless crds`; regenerate it with \
         SLESS_UPDATE_DOCS=1 cargo test -p sless-kube --test crds (changes must stay additive)"
    );
    // Numbers are numbers (not serde_json's private representation).
    assert!(printed.contains("default: 128") && !printed.contains("serde_json"), "{printed}");
}

fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

#[tokio::test]
async fn the_api_server_takes_the_crds_and_enforces_them() {
    let ns = TestNamespace::create("crds").await.expect("namespace");
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    // Server-side apply, as `kubectl apply --server-side` of deploy/crds.yaml would.
    for crd in sless_kube::crds() {
        let name = crd.name_any();
        let params = PatchParams::apply("sless-crds-test").force();
        crds.patch(&name, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|e| panic!("apply {name}: {e}"));
        eventually(&format!("{name} to be established"), WAIT, || async {
            let crd = crds.get(&name).await?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            Ok(conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(()))
        })
        .await
        .expect("established");
    }

    let functions: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &resource("Function", "functions"));
    let triggers: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource("Trigger", "triggers"));
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &resource("FunctionJob", "functionjobs"));
    let object = |kind: &str, plural: &str, name: &str, spec: Value| {
        DynamicObject::new(name, &resource(kind, plural)).data(json!({ "spec": spec }))
    };
    let create = |api: &Api<DynamicObject>, obj: DynamicObject| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &obj).await }
    };

    // A minimal function gets the defaults the REST API gives.
    let hello =
        object("Function", "functions", "hello", json!({"runtime": "python3.11", "entrypoint": "main.handler"}));
    create(&functions, hello).await.expect("a valid function");
    let typed: Api<Function> = Api::namespaced(ns.client(), ns.name());
    let f = typed.get("hello").await.expect("read back typed");
    assert_eq!((f.spec.memory_mb, f.spec.timeout_sec, f.spec.concurrency, f.spec.enabled), (128, 30, 1, true));

    // What the validation refuses, each naming its field.
    for (spec, field) in [
        (json!({"runtime": "python3.11", "entrypoint": "main.handler", "memoryMb": 10}), "spec.memoryMb"),
        (json!({"runtime": "python3.12", "entrypoint": "main.handler"}), "spec.runtime"),
        (json!({"runtime": "nodejs20", "entrypoint": "no-dot"}), "spec.entrypoint"),
        (json!({"runtime": "nodejs20", "entrypoint": "a.b", "env": {"SLESS_X": "1"}}), "spec.env"),
        (json!({"runtime": "nodejs20", "entrypoint": "a.b", "code": {"sha256": "xyz"}}), "spec.code.sha256"),
        (json!({"runtime": "nodejs20", "entrypoint": "a.b", "maxInstances": 0}), "spec.maxInstances"),
    ] {
        let status = refusal(create(&functions, object("Function", "functions", "bad", spec.clone())).await);
        assert_eq!(status.code, 422, "{spec}: {status:?}");
        assert!(status.message.contains(field), "{spec}: {}", status.message);
    }
    for (spec, words) in [
        (json!({"function": "hello", "type": "cron"}), "a cron trigger needs a schedule"),
        (json!({"function": "hello", "type": "http", "schedule": "@hourly"}), "an http trigger takes no schedule"),
        (
            json!({"function": "hello", "type": "cron", "schedule": "@hourly", "auth": "token"}),
            "auth is for http triggers",
        ),
        (json!({"function": "Hello", "type": "http"}), "spec.function"),
    ] {
        let status = refusal(create(&triggers, object("Trigger", "triggers", "bad", spec.clone())).await);
        assert!(status.message.contains(words), "{spec}: {}", status.message);
    }
    let cron = json!({"function": "hello", "type": "cron", "schedule": "@every 30s", "payload": {"any": ["json", 1]}});
    let t = create(&triggers, object("Trigger", "triggers", "tick", cron)).await.expect("a valid trigger");
    assert_eq!(t.data["spec"]["payload"], json!({"any": ["json", 1]}), "the payload is kept as given");
    assert_eq!(t.data["spec"]["timezone"], "UTC");
    let status = refusal(
        create(&jobs, object("FunctionJob", "functionjobs", "bad", json!({"function": "hello", "runId": -1}))).await,
    );
    assert!(status.message.contains("spec.runId"), "{}", status.message);
    create(&jobs, object("FunctionJob", "functionjobs", "once", json!({"function": "hello"})))
        .await
        .expect("a valid job");

    // Status is written only through its subresource; conditions merge by type.
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "reason": "Test", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z", "observedGeneration": 1});
    let patched = functions
        .patch_status(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready", "activeVersion": 1, "conditions": [condition("Built", "True"), condition("Ready", "True")]}})),
        )
        .await
        .expect("status patch");
    assert_eq!(patched.data["status"]["phase"], "Ready");
    let f = typed.get("hello").await.expect("typed");
    let status = f.status.expect("status");
    assert_eq!(status.active_version, Some(1));
    assert_eq!(status.conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["Built", "Ready"]);
    let updated = functions
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"memoryMb": 256}, "status": {"phase": "Forged"}})),
        )
        .await
        .expect("spec patch");
    assert_eq!((updated.data["status"]["phase"].clone(), updated.metadata.generation), (json!("Ready"), Some(2)));

    // The names kubectl shows: short names, the category, the printer columns.
    let stored = crds.get(&format!("functions.{GROUP}")).await.expect("crd");
    assert_eq!(stored.spec.names.short_names.clone().unwrap_or_default(), ["fn"]);
    assert_eq!(stored.spec.names.categories.clone().unwrap_or_default(), ["sless"]);
    let columns: Vec<String> = stored.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(columns, ["Phase", "Ready", "Version", "Age"]);
}

//! The objects the operator applies for a tenant and a function (sless_kube::workload):
//! field by field against golden files, and accepted by a real kube-apiserver — the function's
//! pod passes Pod Security `restricted` in the tenant's namespace, a privileged pod does not.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Pod, ResourceQuota, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use sless_kube::build::build_job;
use sless_kube::crd::{Function, Runtime, Trigger};
use sless_kube::trigger::{TriggerSettings, cronjob, ingress};
use sless_kube::workload::{
    self, FUNCTION_LABEL, Settings, TENANT_LABEL, deployment, service, tenant_limits, tenant_namespace,
    tenant_network_policy, tenant_quota,
};
use sless_kube_testenv::{TestNamespace, eventually};

mod common;

/// An image pinned by digest, as the builder records it.
const IMAGE: &str =
    "registry.sless.invalid/team-a/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// An archive's SHA-256.
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn function() -> Function {
    serde_json::from_value(json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1",
        "kind": "Function",
        "metadata": {"name": "hello", "namespace": "team-a"},
        "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "memoryMb": 256, "env": {"GREETING": "hi"}},
    }))
    .expect("a function")
}

#[test]
fn the_objects_match_their_golden_files_and_hold_the_security_rules() {
    let s = Settings::default();
    let f = function();
    let dep = deployment(&s, "team-a", &f, IMAGE);
    let trigger = |name: &str, spec: serde_json::Value| -> Trigger {
        serde_json::from_value(json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}))
        .expect("trigger")
    };
    let cron = trigger(
        "nightly",
        json!({"function": "hello", "type": "cron", "schedule": "30 1 * * *", "timezone": "Europe/Berlin"}),
    );
    let http = trigger("web", json!({"function": "hello", "type": "http"}));
    for (name, value) in [
        ("namespace", serde_json::to_value(tenant_namespace(&s, "team-a"))),
        ("resourcequota", serde_json::to_value(tenant_quota(&s, "team-a"))),
        ("limitrange", serde_json::to_value(tenant_limits(&s, "team-a"))),
        ("networkpolicy", serde_json::to_value(tenant_network_policy(&s, "team-a"))),
        ("deployment", serde_json::to_value(&dep)),
        ("service", serde_json::to_value(service(&s, "team-a", &f))),
        (
            "build-job",
            serde_json::to_value(build_job(&common::build_settings("sless-build", 900), Runtime::Python311, SHA)),
        ),
        (
            "cronjob",
            serde_json::to_value(cronjob(&s, &TriggerSettings::default(), IMAGE, "team-a", &cron, "30 1 * * *", false)),
        ),
        ("ingress", serde_json::to_value(ingress(&s, &TriggerSettings::default(), "team-a", &http))),
        ("cron-serviceaccount", serde_json::to_value(workload::tenant_cron_service_account(&s, "team-a"))),
    ] {
        common::golden(name, &value.expect("json"));
    }
    // The rules the golden files must never lose, checked by name.
    assert_eq!(dep.namespace().as_deref(), Some("sless-fn-team-a"));
    let spec = &dep.spec;
    assert_eq!(spec.replicas, None, "replicas are the activator's (deployments/scale)");
    let pod = spec.template.spec.as_ref().expect("pod");
    assert_eq!(pod.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    let image = c.image.as_deref().expect("image");
    assert!(!image.ends_with(":latest") && image.contains("@sha256:"), "{image}");
    let sc = c.security_context.as_ref().expect("security context");
    assert_eq!(
        (sc.run_as_non_root, sc.read_only_root_filesystem, sc.allow_privilege_escalation),
        (Some(true), Some(true), Some(false))
    );
    assert_eq!(sc.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_string()]));
    assert_eq!(sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()), Some("RuntimeDefault"));
    let res = c.resources.as_ref().expect("resources");
    let memory = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.as_ref().and_then(|m| m.get("memory")).map(|q| q.0.clone()) };
    assert_eq!((memory(&res.requests), memory(&res.limits)), (Some("256Mi".into()), Some("256Mi".into())));
    let env: Vec<(String, String)> =
        c.env.clone().unwrap_or_default().into_iter().map(|e| (e.name, e.value.unwrap_or_default())).collect();
    assert!(env.contains(&("GREETING".into(), "hi".into())) && env.contains(&("SLESS_MEMORY_MB".into(), "256".into())));
    let labels = dep.labels();
    assert_eq!(
        (labels.get(TENANT_LABEL), labels.get(FUNCTION_LABEL)),
        (Some(&"team-a".to_string()), Some(&"hello".to_string()))
    );
    assert!(dep.meta().owner_references.is_none(), "no owner reference crosses a namespace");
    // The prefix is used everywhere it appears.
    let other = Settings { namespace_prefix: "fn-".into(), ..Settings::default() };
    assert_eq!(tenant_namespace(&other, "a").name_any(), "fn-a");
    assert_eq!(service(&other, "a", &f).namespace().as_deref(), Some("fn-a"));
    assert_eq!(tenant_network_policy(&other, "a").namespace().as_deref(), Some("fn-a"));
}

#[tokio::test]
async fn the_api_server_admits_the_tenant_objects_and_the_function_pod_but_no_privileged_pod() {
    let ns = TestNamespace::create("wl").await.expect("test namespace");
    let client = ns.client();
    // A tenant namespace of this test's own: `<test namespace>-t`.
    let settings = Settings { namespace_prefix: format!("{}-", ns.name()), ..Settings::default() };
    let tenant = "t";
    let workload_ns = settings.workload_namespace(tenant);
    let apply = PatchParams::apply("sless-operator").force();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(&workload_ns, &apply, &Patch::Apply(tenant_namespace(&settings, tenant)))
        .await
        .expect("the tenant namespace");
    let result = async {
        let f = function();
        Api::<ResourceQuota>::namespaced(client.clone(), &workload_ns)
            .patch("sless-tenant", &apply, &Patch::Apply(tenant_quota(&settings, tenant)))
            .await
            .expect("quota");
        Api::<LimitRange>::namespaced(client.clone(), &workload_ns)
            .patch("sless-tenant", &apply, &Patch::Apply(tenant_limits(&settings, tenant)))
            .await
            .expect("limits");
        Api::<NetworkPolicy>::namespaced(client.clone(), &workload_ns)
            .patch("sless-tenant", &apply, &Patch::Apply(tenant_network_policy(&settings, tenant)))
            .await
            .expect("network policy");
        let dep = deployment(&settings, tenant, &f, IMAGE);
        let applied = Api::<Deployment>::namespaced(client.clone(), &workload_ns)
            .patch("hello", &apply, &Patch::Apply(&dep))
            .await
            .expect("deployment");
        // Applied without replicas, the API server defaults them to 1; the activator owns them.
        assert_eq!(applied.spec.replicas, Some(1));
        Api::<Service>::namespaced(client.clone(), &workload_ns)
            .patch("hello", &apply, &Patch::Apply(service(&settings, tenant, &f)))
            .await
            .expect("service");

        // The function's pod passes Pod Security `restricted`; a privileged one is refused.
        let pods: Api<Pod> = Api::namespaced(client.clone(), &workload_ns);
        let template = dep.spec.template.clone();
        let pod = Pod {
            metadata: kube::api::ObjectMeta { name: Some("fn-pod".into()), ..Default::default() },
            spec: template.spec,
            ..Pod::default()
        };
        pods.create(&PostParams::default(), &pod).await.expect("the function's pod is admitted under restricted");
        let privileged: Pod = serde_json::from_value(json!({
            "metadata": {"name": "root-pod"},
            "spec": {"containers": [{"name": "c", "image": "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "securityContext": {"privileged": true}}]},
        }))
        .expect("pod");
        match pods.create(&PostParams::default(), &privileged).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 403, "{status:?}");
                assert!(status.message.contains("restricted"), "{}", status.message);
            }
            other => panic!("a privileged pod was admitted: {other:?}"),
        }
        // A pod over the largest memory the LimitRange allows is refused too.
        let mut big = pod.clone();
        big.metadata.name = Some("big-pod".into());
        if let Some(spec) = big.spec.as_mut() {
            let limits = spec.containers[0].resources.as_mut().and_then(|r| r.limits.as_mut()).expect("limits");
            limits.insert("memory".into(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("8Gi".into()));
        }
        let refused = pods.create(&PostParams::default(), &big).await;
        assert!(matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 403), "{refused:?}");
        let _ = workload::FUNCTION_PORT;
    };
    result.await;
    namespaces.delete(&workload_ns, &DeleteParams::default()).await.expect("delete the tenant namespace");
    eventually("the tenant namespace to go", Duration::from_secs(60), || async {
        Ok(namespaces.get_opt(&workload_ns).await?.is_none().then_some(()))
    })
    .await
    .expect("gone");
}

//! The Function controller (sless_kube::function) against a real kube-apiserver with its
//! Deployment and Job controllers (docs/kubernetes-testing.md): a Function builds once per
//! archive in the build namespace, then serves from a Deployment and a Service in the tenant's
//! workload namespace, with its quota, limits and network policy; a failed build keeps the old
//! image serving and says why; a restarted operator does not build again; a stalled build
//! fails at its deadline; a deleted Function leaves nothing behind.
//!
//! Build pods are scripted (sless_kube_testenv::scripted): the test decides when a build
//! ends and how, as a kubelet running kaniko would report it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Pod, ResourceQuota, Service};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use sless_kube::build::{self, BuildSettings};
use sless_kube::crd::{Function, FunctionStatus, Trigger, TriggerStatus};
use sless_kube::function::FINALIZER;
use sless_kube::operator::{self, Context};
use sless_kube::trigger::TriggerSettings;
use sless_kube::workload::Settings;
use sless_kube_testenv::scripted::{self, Outcome};
use sless_kube_testenv::{TestNamespace, eventually};
use tokio::sync::oneshot;

mod common;

const WAIT: Duration = Duration::from_secs(30);

fn sha(c: char) -> String {
    c.to_string().repeat(64)
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in sless_kube::crds() {
        let name = crd.name_any();
        let params = PatchParams::apply("sless-operator-test").force();
        crds.patch(&name, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|e| panic!("apply {name}: {e}"));
        eventually(&format!("{name} established"), WAIT, || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                let crd = crds.get(&name).await?;
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                Ok(conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(()))
            }
        })
        .await
        .expect("CRD established");
    }
}

fn build_settings(namespace: &str, deadline_sec: u32) -> BuildSettings {
    let mut marked = ObjectMeta::default();
    scripted::mark_scripted(&mut marked);
    BuildSettings { pod_labels: marked.labels.unwrap_or_default(), ..common::build_settings(namespace, deadline_sec) }
}

/// An operator (the Function controller) watching one tenant namespace; stopped when dropped.
struct Operator {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Operator {
    fn start(client: Client, tenant: &str, build: BuildSettings) -> Operator {
        Operator::start_with(client, tenant, build, Settings::default())
    }

    fn start_with(client: Client, tenant: &str, build: BuildSettings, settings: Settings) -> Operator {
        let ctx = Arc::new(Context {
            client,
            settings,
            build,
            triggers: TriggerSettings::default(),
            watch_namespace: Some(tenant.into()),
            tenants: Default::default(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(operator::run(ctx, async move {
            let _ = stopped.await;
        }));
        Operator { stop: Some(stop), task: Some(task) }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(WAIT, task).await.expect("the operator stops").expect("no panic");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn apply_function(api: &Api<Function>, name: &str, sha256: &str) {
    let f = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
        "metadata": {"name": name},
        "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "memoryMb": 128, "code": {"sha256": sha256}},
    });
    api.patch(name, &PatchParams::apply("kubectl").force(), &Patch::Apply(&f)).await.expect("apply function");
}

/// Waits until the Function's status satisfies `check`, and returns it.
async fn status_until(
    api: &Api<Function>,
    name: &str,
    what: &str,
    check: impl Fn(&FunctionStatus) -> bool,
) -> FunctionStatus {
    let last = std::sync::Mutex::new(None);
    let found = eventually(what, WAIT, || {
        let api = api.clone();
        let name = name.to_string();
        let check = &check;
        let last = &last;
        async move {
            let f = api.get(&name).await?;
            let Some(status) = f.status.clone() else { return Ok(None) };
            *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(status.clone());
            Ok((check(&status) && status.observed_generation == f.metadata.generation).then_some(status))
        }
    })
    .await;
    found.unwrap_or_else(|e| panic!("{e}; last status: {:#?}", last.lock().ok().and_then(|l| l.clone())))
}

fn condition<'a>(s: &'a FunctionStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
        .unwrap_or(("", "", ""))
}

async fn build_pod(pods: &Api<Pod>, job: &str) -> String {
    let pod = scripted::scheduled_pod(pods, &format!("batch.kubernetes.io/job-name={job}"), WAIT)
        .await
        .expect("the build pod is scheduled");
    pod.name_any()
}

async fn workload_image(deployments: &Api<Deployment>, name: &str) -> String {
    let d = deployments.get(name).await.expect("deployment");
    d.spec.template.spec.and_then(|p| p.containers.first().and_then(|c| c.image.clone())).unwrap_or_default()
}

#[tokio::test]
async fn a_function_builds_once_serves_keeps_serving_through_a_failed_build_and_leaves_nothing_when_deleted() {
    let tenant = TestNamespace::create("op-tenant").await.expect("tenant namespace");
    // The build namespace enforces Pod Security `baseline` (docs/kubernetes.md, "Builds"):
    // the builder runs as root with a few capabilities, never privileged.
    let baseline = [("pod-security.kubernetes.io/enforce".to_string(), "baseline".to_string())].into();
    let builds = TestNamespace::create_labelled("op-build", baseline).await.expect("build namespace");
    let client = tenant.client();
    install_crds(&client).await;
    let workload_ns = Settings::default().workload_namespace(tenant.name());
    let operator = Operator::start(client.clone(), tenant.name(), build_settings(builds.name(), 600));
    let functions: Api<Function> = tenant.api();
    let jobs: Api<Job> = builds.api();
    let pods: Api<Pod> = builds.api();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &workload_ns);

    // 1. A Function with code: a build Job in the build namespace, the Function Building.
    apply_function(&functions, "hello", &sha('a')).await;
    let building = status_until(&functions, "hello", "Building", |s| s.phase.as_deref() == Some("Building")).await;
    assert_eq!(condition(&building, "Built").0, "Unknown");
    assert_eq!(condition(&building, "Ready").1, "Building");
    let job_a = build::job_name(sless_kube::crd::Runtime::Python311, &sha('a'));
    let job = jobs.get(&job_a).await.expect("the build Job exists");
    assert_eq!(job.annotations().get(build::SHA256_ANNOTATION), Some(&sha('a')));
    let f = functions.get("hello").await.expect("function");
    assert!(f.finalizers().iter().any(|x| x == FINALIZER), "the cleanup finalizer is set");
    // The tenant's workload namespace exists with its policies, before anything runs in it.
    let ns = Api::<Namespace>::all(client.clone()).get(&workload_ns).await.expect("workload namespace");
    assert_eq!(ns.labels().get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
    Api::<ResourceQuota>::namespaced(client.clone(), &workload_ns).get("sless-tenant").await.expect("quota");
    Api::<LimitRange>::namespaced(client.clone(), &workload_ns).get("sless-tenant").await.expect("limits");
    Api::<NetworkPolicy>::namespaced(client.clone(), &workload_ns).get("sless-tenant").await.expect("policy");
    assert!(deployments.get_opt("hello").await.expect("get").is_none(), "nothing serves before the image exists");

    // 2. The build pushes (its digest as termination message): the Deployment runs that digest.
    let pod = build_pod(&pods, &job_a).await;
    scripted::set_outcome(&pods, &pod, &Outcome::SucceededWith { message: digest('d') }).await.expect("build done");
    let ready = status_until(&functions, "hello", "Ready", |s| s.phase.as_deref() == Some("Ready")).await;
    let image_a = format!("registry.sless.invalid/functions/python3.11@{}", digest('d'));
    assert_eq!(ready.image.as_deref(), Some(image_a.as_str()));
    assert_eq!(ready.built_sha256, Some(sha('a')));
    assert_eq!(condition(&ready, "Built").0, "True");
    assert_eq!(condition(&ready, "Ready").0, "True");
    assert_eq!(workload_image(&deployments, "hello").await, image_a);
    Api::<Service>::namespaced(client.clone(), &workload_ns).get("hello").await.expect("the function's Service");
    let jobs_now = jobs.list(&ListParams::default()).await.expect("jobs").items.len();
    assert_eq!(jobs_now, 1, "one build for one archive");

    // 3. New code whose build fails: the old image keeps serving, the Function says why.
    apply_function(&functions, "hello", &sha('b')).await;
    let job_b = build::job_name(sless_kube::crd::Runtime::Python311, &sha('b'));
    let pod = build_pod(&pods, &job_b).await;
    let log =
        "Step 3/5 : RUN pip install -r requirements.txt\nERROR: No matching distribution found for nosuchpkg==9.9\n";
    scripted::set_outcome(&pods, &pod, &Outcome::Failed { exit_code: 1, log: log.into() }).await.expect("build fails");
    let failed = status_until(&functions, "hello", "Built False", |s| condition(s, "Built").0 == "False").await;
    let (_, reason, message) = condition(&failed, "Built");
    assert_eq!(reason, "BuildFailed");
    assert!(message.contains("No matching distribution found for nosuchpkg==9.9"), "{message}");
    assert_eq!(failed.phase.as_deref(), Some("Ready"), "the previous image still serves");
    assert!(failed.message.as_deref().is_some_and(|m| m.contains("nosuchpkg") && m.contains("previous image")));
    assert_eq!(condition(&failed, "Ready").0, "True");
    assert_eq!(workload_image(&deployments, "hello").await, image_a, "the Deployment was left alone");

    // 4. The operator restarted mid-build builds nothing twice: the same Job finishes it.
    apply_function(&functions, "hello", &sha('c')).await;
    let job_c = build::job_name(sless_kube::crd::Runtime::Python311, &sha('c'));
    status_until(&functions, "hello", "building c", |s| condition(s, "Built").0 == "Unknown").await;
    let uid = jobs.get(&job_c).await.expect("job c").uid();
    operator.stop().await;
    let operator = Operator::start(client.clone(), tenant.name(), build_settings(builds.name(), 600));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(jobs.get(&job_c).await.expect("job c").uid(), uid, "the Job was not made again");
    let pod = build_pod(&pods, &job_c).await;
    scripted::set_outcome(&pods, &pod, &Outcome::SucceededWith { message: digest('f') }).await.expect("build done");
    let image_c = format!("registry.sless.invalid/functions/python3.11@{}", digest('f'));
    let ready = status_until(&functions, "hello", "Ready on c", |s| {
        s.phase.as_deref() == Some("Ready") && s.built_sha256 == Some(sha('c'))
    })
    .await;
    assert_eq!(ready.image.as_deref(), Some(image_c.as_str()));
    assert_eq!(workload_image(&deployments, "hello").await, image_c);
    assert_eq!(jobs.list(&ListParams::default()).await.expect("jobs").items.len(), 3, "a, b and c: one each");

    // 5. Delete: the Deployment and the Service go, then the Function itself.
    functions.delete("hello", &DeleteParams::default()).await.expect("delete");
    eventually("the function gone", WAIT, || {
        let functions = functions.clone();
        async move { Ok(functions.get_opt("hello").await?.is_none().then_some(())) }
    })
    .await
    .expect("the finalizer lets the function go");
    assert!(deployments.get_opt("hello").await.expect("get").is_none(), "the Deployment is gone");
    let services: Api<Service> = Api::namespaced(client.clone(), &workload_ns);
    assert!(services.get_opt("hello").await.expect("get").is_none(), "the Service is gone");
    operator.stop().await;
    let _ = Api::<Namespace>::all(client).delete(&workload_ns, &DeleteParams::default()).await;
}

#[tokio::test]
async fn a_stalled_build_fails_at_its_deadline_and_an_invalid_spec_builds_nothing() {
    let tenant = TestNamespace::create("op-stall").await.expect("tenant namespace");
    let builds = TestNamespace::create("op-stall-build").await.expect("build namespace");
    let client = tenant.client();
    install_crds(&client).await;
    let operator = Operator::start(client.clone(), tenant.name(), build_settings(builds.name(), 3));
    let functions: Api<Function> = tenant.api();
    let jobs: Api<Job> = builds.api();

    // The build pod is scheduled but never finishes (a hung registry, a stuck pip).
    apply_function(&functions, "slow", &sha('5')).await;
    let failed = status_until(&functions, "slow", "Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    let (status, reason, message) = condition(&failed, "Built");
    assert_eq!((status, reason), ("False", "BuildDeadlineExceeded"));
    assert!(message.contains("did not finish within 3 s"), "{message}");
    assert_eq!(condition(&failed, "Ready").1, "BuildDeadlineExceeded");

    // A spec the REST API would refuse but the CRD's schema cannot (env over 32 KiB in all)
    // fails without a build.
    let bad = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
        "metadata": {"name": "bad"},
        "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "code": {"sha256": sha('6')},
                 "env": {"BIG": "x".repeat(40 * 1024)}},
    });
    functions.create(&PostParams::default(), &serde_json::from_value(bad).expect("function")).await.expect("create");
    let invalid = status_until(&functions, "bad", "Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!(condition(&invalid, "Ready").1, "InvalidSpec", "{invalid:#?}");
    let job_6 = build::job_name(sless_kube::crd::Runtime::Python311, &sha('6'));
    assert!(jobs.get_opt(&job_6).await.expect("get").is_none(), "an invalid function builds nothing");
    operator.stop().await;
    let workload_ns = Settings::default().workload_namespace(tenant.name());
    let _ = Api::<Namespace>::all(client).delete(&workload_ns, &DeleteParams::default()).await;
}

#[test]
fn deploy_rbac_yaml_is_what_the_rbac_builder_makes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/rbac.yaml");
    let made = sless_kube::rbac::rbac_yaml().expect("yaml");
    if std::env::var_os("SLESS_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &made).expect("write deploy/rbac.yaml");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == made,
        "deploy/rbac.yaml differs (regenerate: SLESS_UPDATE_DOCS=1 cargo test -p sless-kube --test operator)"
    );
    for forbidden in ["secrets", "'*'", "\"*\""] {
        assert!(!made.contains(forbidden), "the operator's RBAC never names {forbidden}");
    }
}

#[tokio::test]
async fn the_operator_works_under_its_own_rbac_alone() {
    let system = TestNamespace::create("op-rbac-sys").await.expect("sless namespace");
    let tenant = TestNamespace::create("op-rbac").await.expect("tenant namespace");
    let builds = TestNamespace::create("op-rbac-build").await.expect("build namespace");
    let admin = tenant.client();
    install_crds(&admin).await;
    let name = format!("sless-operator-{}", system.name());
    let rbac = sless_kube::rbac::operator_rbac(&name, system.name(), builds.name());
    let params = PatchParams::apply("sless-operator-test").force();
    let sa = serde_json::to_value(&rbac.service_account).expect("json");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), system.name())
        .patch(&name, &params, &Patch::Apply(&sa))
        .await
        .expect("service account");
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    cluster_roles.patch(&name, &params, &Patch::Apply(&rbac.cluster_role)).await.expect("cluster role");
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    cluster_bindings.patch(&name, &params, &Patch::Apply(&rbac.cluster_role_binding)).await.expect("binding");
    Api::<Role>::namespaced(admin.clone(), builds.name())
        .patch(&name, &params, &Patch::Apply(&rbac.build_role))
        .await
        .expect("build role");
    Api::<RoleBinding>::namespaced(admin.clone(), builds.name())
        .patch(&name, &params, &Patch::Apply(&rbac.build_role_binding))
        .await
        .expect("build role binding");
    Api::<Role>::namespaced(admin.clone(), system.name())
        .patch(&name, &params, &Patch::Apply(&rbac.sless_role))
        .await
        .expect("sless role");
    Api::<RoleBinding>::namespaced(admin.clone(), system.name())
        .patch(&name, &params, &Patch::Apply(&rbac.sless_role_binding))
        .await
        .expect("sless role binding");

    // A client that is the operator's service account and nothing else.
    let plane = tokio::task::spawn_blocking(sless_kube_testenv::control_plane).await.expect("join").expect("plane");
    let mut config = plane.config().await.expect("config");
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{}:{name}", system.name()));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{}", system.name()),
        "system:authenticated".into(),
    ]);
    let operator_client = Client::try_from(config).expect("client");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(operator_client.clone(), builds.name());
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("the operator may not read Secrets, even in the build namespace: {other:?}"),
    }

    let settings = Settings { sless_namespace: system.name().into(), ..Settings::default() };
    let operator = Operator::start_with(operator_client, tenant.name(), build_settings(builds.name(), 600), settings);
    let functions: Api<Function> = tenant.api();
    let pods: Api<Pod> = builds.api();
    apply_function(&functions, "hello", &sha('9')).await;
    let job = build::job_name(sless_kube::crd::Runtime::Python311, &sha('9'));
    let pod = build_pod(&pods, &job).await;
    scripted::set_outcome(&pods, &pod, &Outcome::SucceededWith { message: digest('9') }).await.expect("build done");
    let ready = status_until(&functions, "hello", "Ready", |s| s.phase.as_deref() == Some("Ready")).await;
    assert_eq!(condition(&ready, "Ready").0, "True");
    // Triggers too: a CronJob in the workload namespace, an Ingress in the sless namespace.
    let triggers: Api<Trigger> = tenant.api();
    for (name, spec) in [
        ("nightly", json!({"function": "hello", "type": "cron", "schedule": "@hourly"})),
        ("web", json!({"function": "hello", "type": "http"})),
    ] {
        let t = json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger", "metadata": {"name": name}, "spec": spec});
        triggers.patch(name, &PatchParams::apply("kubectl"), &Patch::Apply(&t)).await.expect("apply trigger");
        trigger_until(&triggers, name, "Active", |s| s.phase.as_deref() == Some("Active")).await;
    }
    for name in ["nightly", "web"] {
        triggers.delete(name, &DeleteParams::default()).await.expect("delete trigger");
    }
    eventually("the triggers gone", WAIT, || {
        let triggers = triggers.clone();
        async move { Ok(triggers.list(&ListParams::default()).await?.items.is_empty().then_some(())) }
    })
    .await
    .expect("the finalizers let the triggers go under the operator's own RBAC");
    functions.delete("hello", &DeleteParams::default()).await.expect("delete");
    eventually("the function gone", WAIT, || {
        let functions = functions.clone();
        async move { Ok(functions.get_opt("hello").await?.is_none().then_some(())) }
    })
    .await
    .expect("the finalizer lets the function go under the operator's own RBAC");
    operator.stop().await;
    let workload_ns = Settings::default().workload_namespace(tenant.name());
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), &workload_ns).get_opt("hello").await.expect("get").is_none(),
        "the Deployment is gone"
    );
    let _ = cluster_bindings.delete(&name, &DeleteParams::default()).await;
    let _ = cluster_roles.delete(&name, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(admin).delete(&workload_ns, &DeleteParams::default()).await;
}

async fn trigger_until(
    api: &Api<Trigger>,
    name: &str,
    what: &str,
    check: impl Fn(&TriggerStatus) -> bool,
) -> TriggerStatus {
    let found = eventually(what, WAIT, || {
        let api = api.clone();
        let name = name.to_string();
        let check = &check;
        async move {
            let t = api.get(&name).await?;
            let Some(status) = t.status.clone() else { return Ok(None) };
            Ok((check(&status) && status.observed_generation == t.metadata.generation).then_some(status))
        }
    })
    .await;
    match found {
        Ok(s) => s,
        Err(e) => panic!("{e}; trigger {name}: {:#?}", api.get(name).await.ok().and_then(|t| t.status)),
    }
}

fn trigger_reason(s: &TriggerStatus) -> &str {
    s.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.reason.as_str()).unwrap_or_default()
}

#[tokio::test]
async fn triggers_applied_before_their_function_turn_active_the_moment_it_is_ready() {
    let system = TestNamespace::create("op-trg-sys").await.expect("sless namespace");
    let tenant = TestNamespace::create("op-trg").await.expect("tenant namespace");
    let builds = TestNamespace::create("op-trg-build").await.expect("build namespace");
    let client = tenant.client();
    install_crds(&client).await;
    let settings = Settings { sless_namespace: system.name().into(), ..Settings::default() };
    let workload_ns = settings.workload_namespace(tenant.name());
    let operator = Operator::start_with(client.clone(), tenant.name(), build_settings(builds.name(), 600), settings);
    let triggers: Api<Trigger> = tenant.api();
    let apply_trigger = |name: &str, spec: serde_json::Value| {
        let triggers = triggers.clone();
        let t = json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger", "metadata": {"name": name}, "spec": spec});
        let name = name.to_string();
        async move {
            triggers
                .patch(&name, &PatchParams::apply("kubectl").force(), &Patch::Apply(&t))
                .await
                .expect("apply trigger");
        }
    };
    // Triggers first, in one apply with the Function, in any order.
    apply_trigger(
        "nightly",
        json!({"function": "hello", "type": "cron", "schedule": "30 1 * * *", "timezone": "Europe/Berlin"}),
    )
    .await;
    apply_trigger("web", json!({"function": "hello", "type": "http", "auth": "token"})).await;
    apply_trigger("fast", json!({"function": "hello", "type": "cron", "schedule": "@every 30s"})).await;
    let waiting = trigger_until(&triggers, "nightly", "Waiting", |s| s.phase.as_deref() == Some("Waiting")).await;
    assert_eq!(trigger_reason(&waiting), "FunctionNotReady");
    assert!(waiting.message.as_deref().is_some_and(|m| m.contains("does not exist")), "{waiting:?}");
    let fast = trigger_until(&triggers, "fast", "Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!(trigger_reason(&fast), "UnsupportedSchedule");
    assert!(fast.message.as_deref().is_some_and(|m| m.contains("at most once a minute")), "{fast:?}");

    let functions: Api<Function> = tenant.api();
    let pods: Api<Pod> = builds.api();
    apply_function(&functions, "hello", &sha('1')).await;
    let building = trigger_until(&triggers, "nightly", "Waiting on the build", |s| {
        s.message.as_deref().is_some_and(|m| m.contains("is Building"))
    })
    .await;
    assert_eq!(building.phase.as_deref(), Some("Waiting"));
    let job = build::job_name(sless_kube::crd::Runtime::Python311, &sha('1'));
    let pod = build_pod(&pods, &job).await;
    scripted::set_outcome(&pods, &pod, &Outcome::SucceededWith { message: digest('1') }).await.expect("build done");
    status_until(&functions, "hello", "Ready", |s| s.phase.as_deref() == Some("Ready")).await;
    // Active through the watch on the Function, long before any resync (5 min) or tick.
    let active = trigger_until(&triggers, "nightly", "Active", |s| s.phase.as_deref() == Some("Active")).await;
    assert_eq!(trigger_reason(&active), "FunctionReady");
    trigger_until(&triggers, "web", "Active", |s| s.phase.as_deref() == Some("Active")).await;

    let crons: Api<CronJob> = Api::namespaced(client.clone(), &workload_ns);
    let cron = crons.get("nightly").await.expect("the CronJob");
    let spec = &cron.spec;
    assert_eq!((spec.schedule.as_str(), spec.time_zone.as_deref()), ("30 1 * * *", Some("Europe/Berlin")));
    assert_eq!(
        (spec.concurrency_policy.as_deref(), spec.suspend, spec.starting_deadline_seconds),
        (Some("Forbid"), Some(false), Some(60))
    );
    let pod_spec = spec.job_template.spec.as_ref().and_then(|j| j.template.spec.clone()).expect("pod template");
    let c = &pod_spec.containers[0];
    assert!(c.image.as_deref().is_some_and(|i| i.starts_with("registry.sless.invalid/sless@sha256:")), "{:?}", c.image);
    assert_eq!(
        c.command.as_deref(),
        Some(&["sless".to_string(), "trigger".into(), "fire".into(), "nightly".into()][..])
    );
    let api_url = format!("--url=http://sless-api.{}.svc:8080", system.name());
    assert!(c.args.iter().flatten().any(|a| *a == api_url), "{:?}", c.args);
    assert_eq!(pod_spec.automount_service_account_token, Some(false));
    assert_eq!(pod_spec.service_account_name.as_deref(), Some("sless-cron"));
    // The cron pod is admitted under the workload namespace's `restricted` policy (dry run).
    let probe: Pod =
        serde_json::from_value(json!({"metadata": {"name": "cron-probe"}, "spec": pod_spec})).expect("pod");
    Api::<Pod>::namespaced(client.clone(), &workload_ns)
        .create(&PostParams { dry_run: true, ..PostParams::default() }, &probe)
        .await
        .expect("the cron pod passes Pod Security restricted");
    assert!(crons.get_opt("fast").await.expect("get").is_none(), "no CronJob for a schedule it cannot keep");
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), system.name());
    let ing = ingresses.get(&format!("{}-web", tenant.name())).await.expect("the Ingress");
    let rule = ing.spec.and_then(|s| s.rules).and_then(|r| r.into_iter().next()).expect("rule");
    let path = rule.http.map(|h| h.paths[0].clone()).expect("path");
    assert_eq!(path.path, Some(format!("/fn/{}/hello", tenant.name())));
    assert_eq!(path.backend.service.map(|s| s.name), Some("sless-api".to_string()), "to the API, never to the pods");

    // Disabled: Waiting, and the CronJob stops firing.
    let patch = json!({"spec": {"enabled": false}});
    triggers.patch("nightly", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("disable");
    let off = trigger_until(&triggers, "nightly", "Disabled", |s| trigger_reason(s) == "Disabled").await;
    assert_eq!(off.phase.as_deref(), Some("Waiting"));
    assert_eq!(crons.get("nightly").await.expect("cron").spec.suspend, Some(true));

    // Deleted: its CronJob and Ingress go with it.
    for name in ["nightly", "web", "fast"] {
        triggers.delete(name, &DeleteParams::default()).await.expect("delete trigger");
    }
    eventually("the triggers gone", WAIT, || {
        let triggers = triggers.clone();
        async move { Ok(triggers.list(&ListParams::default()).await?.items.is_empty().then_some(())) }
    })
    .await
    .expect("the finalizers let the triggers go");
    assert!(crons.get_opt("nightly").await.expect("get").is_none(), "the CronJob is gone");
    assert!(ingresses.get_opt(&format!("{}-web", tenant.name())).await.expect("get").is_none(), "the Ingress is gone");
    operator.stop().await;
    let _ = Api::<Namespace>::all(client).delete(&workload_ns, &DeleteParams::default()).await;
}

/// An operator replica under leader election; stopped (releasing the Lease) by [`Elected::stop`].
struct Elected {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<sless_kube::Result<()>>,
}

impl Elected {
    fn start(client: Client, tenant: &str, build: BuildSettings, system: &str, identity: &str) -> Elected {
        let ctx = Arc::new(Context {
            client,
            settings: Settings { sless_namespace: system.into(), ..Settings::default() },
            build,
            triggers: TriggerSettings::default(),
            watch_namespace: Some(tenant.into()),
            tenants: Default::default(),
        });
        let election = operator::Election {
            namespace: system.into(),
            lease: "sless-operator".into(),
            identity: identity.into(),
            duration_sec: 4,
            grace_sec: 1,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(operator::run_elected(ctx, election, async move {
            let _ = stopped.await;
        }));
        Elected { stop: Some(stop), task }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let done = tokio::time::timeout(WAIT, &mut self.task).await.expect("the replica stops");
        done.expect("no panic").expect("the replica released its lease");
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get("sless-operator").await.ok()?.spec?.holder_identity
}

#[tokio::test]
async fn only_the_lease_holder_reconciles_and_a_standby_takes_over_on_release() {
    let system = TestNamespace::create("op-lease-sys").await.expect("sless namespace");
    let tenant = TestNamespace::create("op-lease").await.expect("tenant namespace");
    let builds = TestNamespace::create("op-lease-build").await.expect("build namespace");
    let client = tenant.client();
    install_crds(&client).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), system.name());
    // Someone else holds the Lease: another operator that renewed it just now for 8 s, and
    // then stops renewing (it crashed).
    let now = k8s_openapi::jiff::Timestamp::now();
    let held = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "sless-operator"},
                      "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 8,
                               "acquireTime": MicroTime(now), "renewTime": MicroTime(now)}});
    leases.patch("sless-operator", &PatchParams::apply("other-operator"), &Patch::Apply(&held)).await.expect("lease");

    let functions: Api<Function> = tenant.api();
    let b =
        Elected::start(client.clone(), tenant.name(), build_settings(builds.name(), 600), system.name(), "replica-b");
    apply_function(&functions, "first", &sha('3')).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let f = functions.get("first").await.expect("function");
    assert_eq!(holder(&leases).await.as_deref(), Some("someone-else"));
    assert!(f.status.is_none() && f.finalizers().is_empty(), "a standby reconciles nothing: {:?}", f.status);

    // The holder's lock expires: the standby takes the Lease and reconciles.
    status_until(&functions, "first", "reconciled by b", |s| s.phase.as_deref() == Some("Building")).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));

    // A second replica waits; when b stops it releases the Lease, and a takes over at once.
    let a =
        Elected::start(client.clone(), tenant.name(), build_settings(builds.name(), 600), system.name(), "replica-a");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"), "one holder at a time");
    b.stop().await;
    eventually("replica a holds the lease", WAIT, || {
        let leases = leases.clone();
        async move { Ok((holder(&leases).await.as_deref() == Some("replica-a")).then_some(())) }
    })
    .await
    .expect("handover");
    apply_function(&functions, "second", &sha('4')).await;
    status_until(&functions, "second", "reconciled by a", |s| s.phase.as_deref() == Some("Building")).await;
    a.stop().await;
    let _ = Api::<Namespace>::all(client)
        .delete(&Settings::default().workload_namespace(tenant.name()), &DeleteParams::default())
        .await;
}

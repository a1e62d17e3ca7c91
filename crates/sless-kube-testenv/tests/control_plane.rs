//! Proofs that the tests run against real Kubernetes behaviour (docs/kubernetes-testing.md):
//! each test talks to the control plane of `scripts/kube-testenv` through kube-rs, in a
//! namespace of its own.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, ResourceQuota};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use sless_kube_testenv::scripted::{self, Outcome};
use sless_kube_testenv::{TestNamespace, eventually};

const WAIT: Duration = Duration::from_secs(60);

fn obj<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// The API server's refusal inside `result`, which must be an error.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

fn pod(name: &str, container: Value) -> Pod {
    obj(json!({"metadata": {"name": name}, "spec": {"containers": [container]}}))
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn crd_with_status_subresource_refuses_an_invalid_object_naming_the_field() {
    let ns = TestNamespace::create("crd").await.expect("namespace");
    let group = format!("{}.testenv.sless.invalid", ns.name());
    let crd_name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = obj(json!({
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["replicas"], "properties": {
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                        "mode": {"type": "string", "enum": ["fast", "safe"]},
                    }},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                }}},
            }],
        },
    }));
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    crds.create(&PostParams::default(), &crd).await.expect("create the CRD");
    eventually("the CRD to be established", WAIT, || async {
        let crd = crds.get(&crd_name).await?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        Ok(conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(()))
    })
    .await
    .expect("established");

    let resource = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let widget = |name: &str, body: Value| DynamicObject::new(name, &resource).data(body);

    let invalid = widget("bad", json!({"spec": {"replicas": 50, "mode": "slow"}}));
    let status = refusal(widgets.create(&PostParams::default(), &invalid).await);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("spec.replicas"), "{}", status.message);
    assert!(status.message.contains("spec.mode"), "{}", status.message);
    let missing = refusal(widgets.create(&PostParams::default(), &widget("bad", json!({"spec": {}}))).await);
    assert!(missing.message.contains("spec.replicas: Required value"), "{}", missing.message);

    // With the status subresource, a create or an update of the object ignores status, and
    // status is written only through /status (which leaves the generation alone).
    let created = widgets
        .create(
            &PostParams::default(),
            &widget("good", json!({"spec": {"replicas": 2}, "status": {"phase": "Forged"}})),
        )
        .await
        .expect("a valid widget");
    assert!(created.data.get("status").is_none(), "status was not dropped on create: {:?}", created.data);
    let patched = widgets
        .patch_status("good", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Ready"}})))
        .await
        .expect("status patch");
    assert_eq!(patched.data["status"]["phase"], "Ready");
    assert_eq!(patched.metadata.generation, Some(1));
    let updated = widgets
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"phase": "Forged"}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(updated.data["status"]["phase"], "Ready");
    assert_eq!(updated.metadata.generation, Some(2));

    crds.delete(&crd_name, &DeleteParams::default()).await.expect("delete the CRD");
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn server_side_apply_by_two_field_managers_conflicts() {
    let ns = TestNamespace::create("ssa").await.expect("namespace");
    let config_maps = ns.api::<ConfigMap>();
    let config = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"key": value}});
    config_maps
        .patch("shared", &PatchParams::apply("manager-a"), &Patch::Apply(config("from-a")))
        .await
        .expect("apply a");

    let status =
        refusal(config_maps.patch("shared", &PatchParams::apply("manager-b"), &Patch::Apply(config("from-b"))).await);
    assert_eq!(status.code, 409, "{status:?}");
    assert_eq!(status.reason, "Conflict");
    assert!(status.message.contains("manager-a") && status.message.contains(".data.key"), "{}", status.message);
    assert_eq!(config_maps.get("shared").await.expect("get").data.expect("data")["key"], "from-a");

    // A field nobody else manages does not conflict; forcing takes the contested one over.
    let other =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"other": "b"}});
    config_maps.patch("shared", &PatchParams::apply("manager-b"), &Patch::Apply(other)).await.expect("no conflict");
    let forced = config_maps
        .patch("shared", &PatchParams::apply("manager-b").force(), &Patch::Apply(config("from-b")))
        .await
        .expect("forced apply");
    assert_eq!(forced.data.as_ref().expect("data")["key"], "from-b");
    // manager-b applied without `other` the second time, so it gave that field up.
    assert!(!forced.data.as_ref().expect("data").contains_key("other"));
    let owners: Vec<(String, String)> = forced
        .managed_fields()
        .iter()
        .map(|m| {
            let fields = serde_json::to_string(&m.fields_v1).unwrap_or_default();
            (m.manager.clone().unwrap_or_default(), fields)
        })
        .collect();
    let owns_key = |manager: &str| owners.iter().any(|(m, f)| m == manager && f.contains("f:key"));
    assert!(owns_key("manager-b") && !owns_key("manager-a"), "{owners:?}");
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_watch_sees_create_update_and_delete() {
    let ns = TestNamespace::create("watch").await.expect("namespace");
    let config_maps = ns.api::<ConfigMap>();
    let start = config_maps.list(&ListParams::default()).await.expect("list");
    let version = start.metadata.resource_version.expect("a list resourceVersion");
    let mut events = config_maps.watch(&WatchParams::default().timeout(60), &version).await.expect("watch").boxed();

    let created: ConfigMap = obj(json!({"metadata": {"name": "watched"}, "data": {"v": "1"}}));
    config_maps.create(&PostParams::default(), &created).await.expect("create");
    config_maps
        .patch("watched", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}})))
        .await
        .expect("update");
    config_maps.delete("watched", &DeleteParams::default()).await.expect("delete");

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(WAIT, events.try_next()).await.expect("an event in time").expect("watch");
        match event.expect("the watch ended early") {
            WatchEvent::Added(cm) => seen.push(("added", cm.name_any(), cm.data.unwrap_or_default()["v"].clone())),
            WatchEvent::Modified(cm) => {
                seen.push(("modified", cm.name_any(), cm.data.unwrap_or_default()["v"].clone()))
            }
            WatchEvent::Deleted(cm) => seen.push(("deleted", cm.name_any(), cm.data.unwrap_or_default()["v"].clone())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(err) => panic!("watch error: {err:?}"),
        }
    }
    let expected = [("added", "1"), ("modified", "2"), ("deleted", "2")];
    for ((kind, name, value), (want_kind, want_value)) in seen.iter().zip(expected) {
        assert_eq!((*kind, name.as_str(), value.as_str()), (want_kind, "watched", want_value), "{seen:?}");
    }
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_deployment_becomes_available_on_kwok_nodes() {
    let ns = TestNamespace::create("deploy").await.expect("namespace");
    let deployments = ns.api::<Deployment>();
    let deployment: Deployment = obj(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
            },
        },
    }));
    deployments.create(&PostParams::default(), &deployment).await.expect("create");
    let status = eventually("the deployment to be available", WAIT, || async {
        let status = deployments.get("web").await?.status.unwrap_or_default();
        let available = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"));
        Ok((available && status.available_replicas == Some(2)).then_some(status))
    })
    .await
    .expect("available");
    assert_eq!(status.ready_replicas, Some(2));

    let replica_sets = ns.api::<ReplicaSet>().list(&ListParams::default()).await.expect("replica sets");
    assert_eq!(replica_sets.items.len(), 1);
    assert_eq!(replica_sets.items[0].owner_references()[0].name, "web");
    let pods = ns.api::<Pod>().list(&ListParams::default().labels("app=web")).await.expect("pods");
    assert_eq!(pods.items.len(), 2);
    for pod in &pods.items {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert!(node.starts_with("kwok-node-"), "{} is on {node:?}", pod.name_any());
        assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    }
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_job_completes() {
    let ns = TestNamespace::create("job").await.expect("namespace");
    let jobs = ns.api::<Job>();
    let job: Job = obj(json!({
        "metadata": {"name": "once"},
        "spec": {
            "completions": 2,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "registry.invalid/run:1"}]}},
        },
    }));
    jobs.create(&PostParams::default(), &job).await.expect("create");
    let status = eventually("the job to complete", WAIT, || async {
        let status = jobs.get("once").await?.status.unwrap_or_default();
        let complete = status.conditions.iter().flatten().any(|c| c.type_ == "Complete" && c.status == "True");
        Ok(complete.then_some(status))
    })
    .await
    .expect("complete");
    assert_eq!(status.succeeded, Some(2));
    assert_eq!(status.failed.unwrap_or(0), 0);
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_cronjob_with_a_time_zone_creates_its_job_at_a_minute_boundary() {
    let ns = TestNamespace::create("cron").await.expect("namespace");
    let cron_jobs = ns.api::<CronJob>();
    let cron_job = |name: &str, schedule: &str, zone: &str| -> CronJob {
        obj(json!({
            "metadata": {"name": name},
            "spec": {
                "schedule": schedule,
                "timeZone": zone,
                "startingDeadlineSeconds": 30,
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "tick", "image": "registry.invalid/tick:1"}],
                }}}},
            },
        }))
    };
    let refused =
        refusal(cron_jobs.create(&PostParams::default(), &cron_job("bad", "* * * * *", "Mars/Olympus_Mons")).await);
    assert_eq!(refused.code, 422);
    assert!(refused.message.contains("spec.timeZone"), "{}", refused.message);

    // Asia/Kolkata is UTC+05:30 all year: a schedule for the next minute in Kolkata's time
    // fires then only if the controller honours timeZone (read as UTC it is 5.5 hours off).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let mut minute = now / 60 + 1;
    if minute * 60 - now < 15 {
        minute += 1;
    }
    let local = (minute + 330) % 1440;
    let schedule = format!("{} {} * * *", local % 60, local / 60);
    cron_jobs.create(&PostParams::default(), &cron_job("tick", &schedule, "Asia/Kolkata")).await.expect("create");

    let jobs = ns.api::<Job>();
    let job = eventually("the cron job's job", Duration::from_secs(120), || async {
        let list = jobs.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|j| j.owner_references().iter().any(|o| o.kind == "CronJob" && o.name == "tick")))
    })
    .await
    .expect("a job");
    // The controller names a job after its scheduled time, in minutes since the epoch.
    assert_eq!(job.name_any(), format!("tick-{minute}"));
    let created = job.metadata.creation_timestamp.expect("creationTimestamp").0.as_second();
    assert!(created >= (minute * 60) as i64, "created at {created}, before the scheduled minute {}", minute * 60);
    let status = cron_jobs.get("tick").await.expect("get").status.unwrap_or_default();
    assert_eq!(status.last_schedule_time.map(|t| t.0.as_second()), Some((minute * 60) as i64));
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_pod_violating_restricted_is_refused_where_the_namespace_enforces_it() {
    let labels = BTreeMap::from([("pod-security.kubernetes.io/enforce".to_string(), "restricted".to_string())]);
    let restricted = TestNamespace::create_labelled("psa", labels).await.expect("namespace");
    let open = TestNamespace::create("psa-open").await.expect("namespace");
    let privileged = pod(
        "privileged",
        json!({"name": "c", "image": "registry.invalid/c:1", "securityContext": {"privileged": true}}),
    );

    let status = refusal(restricted.api::<Pod>().create(&PostParams::default(), &privileged).await);
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("violates PodSecurity \"restricted:latest\""), "{}", status.message);
    assert!(status.message.contains("privileged"), "{}", status.message);
    // The same pod is admitted where nothing is enforced (--allow-privileged=true): the refusal
    // above is PodSecurity's.
    open.api::<Pod>().create(&PostParams::default(), &privileged).await.expect("admitted without enforcement");

    let compliant = pod(
        "compliant",
        json!({"name": "c", "image": "registry.invalid/c:1", "securityContext": {
            "runAsNonRoot": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }}),
    );
    restricted.api::<Pod>().create(&PostParams::default(), &compliant).await.expect("a restricted-compliant pod");
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_resource_quota_limits_pods() {
    let ns = TestNamespace::create("quota").await.expect("namespace");
    let quotas = ns.api::<ResourceQuota>();
    let quota: ResourceQuota = obj(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}}));
    quotas.create(&PostParams::default(), &quota).await.expect("create quota");
    // Admission counts against a quota once the controller has written its status.
    eventually("the quota's status", WAIT, || async {
        let status = quotas.get("pods").await?.status.unwrap_or_default();
        Ok(status.hard.is_some_and(|h| h.contains_key("pods")).then_some(()))
    })
    .await
    .expect("quota status");

    let pods = ns.api::<Pod>();
    let container = json!({"name": "c", "image": "registry.invalid/c:1"});
    pods.create(&PostParams::default(), &pod("first", container.clone())).await.expect("the first pod");
    let status = refusal(pods.create(&PostParams::default(), &pod("second", container.clone())).await);
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("exceeded quota: pods"), "{}", status.message);

    // Room again once the first pod is gone (KWOK's pod-delete stage finishes the deletion).
    pods.delete("first", &DeleteParams::default()).await.expect("delete");
    eventually("room under the quota", WAIT, || async {
        match pods.create(&PostParams::default(), &pod("second", container.clone())).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(status)) if status.code == 403 => Ok(None),
            Err(err) => Err(err.into()),
        }
    })
    .await
    .expect("the second pod after the first is gone");
}

/// The seed platform's bug: an owner reference across namespaces. Kubernetes reports it on the
/// dependent (`OwnerRefInvalidNamespace`) and garbage-collects the dependent, because the owner
/// is looked up in the dependent's namespace, where it does not exist.
#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn cross_namespace_owner_reference_is_reported_and_garbage_collected() {
    let owners_ns = TestNamespace::create("owner").await.expect("namespace");
    let dependents_ns = TestNamespace::create("dependent").await.expect("namespace");
    let owner: ConfigMap = obj(json!({"metadata": {"name": "owner"}}));
    let owner = owners_ns.api::<ConfigMap>().create(&PostParams::default(), &owner).await.expect("owner");
    let dependent: ConfigMap = obj(json!({"metadata": {"name": "dependent", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().expect("uid"),
    }]}}));
    let dependents = dependents_ns.api::<ConfigMap>();
    dependents.create(&PostParams::default(), &dependent).await.expect("dependent");

    let events = dependents_ns.api::<Event>();
    let event = eventually("the OwnerRefInvalidNamespace event", WAIT, || async {
        let list = events.list(&ListParams::default().fields("reason=OwnerRefInvalidNamespace")).await?;
        Ok(list.items.into_iter().find(|e| e.involved_object.name.as_deref() == Some("dependent")))
    })
    .await
    .expect("event");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(event.message.unwrap_or_default().contains(dependents_ns.name()));
    eventually("the dependent to be collected", WAIT, || async {
        Ok(dependents.get_opt("dependent").await?.is_none().then_some(()))
    })
    .await
    .expect("collected");
    assert!(owners_ns.api::<ConfigMap>().get_opt("owner").await.expect("get").is_some(), "the owner must stay");
}

/// What KWOK cannot do: a build pod that fails with a given log (sless_kube_testenv::scripted).
#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_scripted_build_pod_fails_its_job_with_the_log_as_termination_message() {
    let ns = TestNamespace::create("scripted").await.expect("namespace");
    let mut job: Job = obj(json!({
        "metadata": {"name": "build"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "build", "image": "registry.invalid/builder:1",
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }]}},
        },
    }));
    let template = &mut job.spec.as_mut().expect("spec").template;
    scripted::mark_scripted(template.metadata.get_or_insert_with(Default::default));
    let jobs = ns.api::<Job>();
    jobs.create(&PostParams::default(), &job).await.expect("create");

    let pods = ns.api::<Pod>();
    let pod = scripted::scheduled_pod(&pods, "job-name=build", WAIT).await.expect("scheduled");
    // KWOK leaves a scripted pod alone: it is still Pending a moment later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pending = pods.get(&pod.name_any()).await.expect("get");
    assert_eq!(pending.status.and_then(|s| s.phase).as_deref(), Some("Pending"));

    let log = "Step 1/3: pip install -r requirements.txt\nERROR: No matching distribution found for flask==0.0.1\n";
    let failed = scripted::set_outcome(&pods, &pod.name_any(), &Outcome::Failed { exit_code: 2, log: log.into() })
        .await
        .expect("fail the pod");
    let container = &failed.status.expect("status").container_statuses.expect("container statuses")[0];
    let terminated = container.state.as_ref().and_then(|s| s.terminated.as_ref()).expect("terminated");
    assert_eq!(terminated.exit_code, 2);
    assert!(terminated.message.as_deref().unwrap_or_default().ends_with("flask==0.0.1"), "{terminated:?}");

    let condition = eventually("the job to fail", WAIT, || async {
        let status = jobs.get("build").await?.status.unwrap_or_default();
        Ok(status.conditions.into_iter().flatten().find(|c| c.type_ == "Failed" && c.status == "True"))
    })
    .await
    .expect("failed");
    assert_eq!(condition.reason.as_deref(), Some("BackoffLimitExceeded"));
    // Not simulated: there is no kubelet to serve the log.
    assert!(pods.logs(&pod.name_any(), &Default::default()).await.is_err());
}

/// KWOK's own steering per pod: its `pod-container-running-failed` stage fails a pod that
/// carries its label, with the reason, message and exit code of its annotations.
#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn kwok_fails_a_pod_labelled_for_its_failure_stage() {
    let ns = TestNamespace::create("kwok-fail").await.expect("namespace");
    let stage = "pod-container-running-failed.stage.kwok.x-k8s.io";
    let failing: Pod = obj(json!({
        "metadata": {
            "name": "failing",
            "labels": {stage: "true"},
            "annotations": {
                format!("{stage}/reason"): "OOMKilled",
                format!("{stage}/message"): "out of memory",
                format!("{stage}/exit-code"): "137",
            },
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.invalid/c:1"}]},
    }));
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &failing).await.expect("create");
    let status = eventually("the pod to fail", WAIT, || async {
        let status = pods.get("failing").await?.status.unwrap_or_default();
        Ok((status.phase.as_deref() == Some("Failed")).then_some(status))
    })
    .await
    .expect("failed");
    let container = &status.container_statuses.expect("container statuses")[0];
    let terminated = container.state.as_ref().and_then(|s| s.terminated.as_ref()).expect("terminated");
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (137, Some("OOMKilled")));
    assert_eq!(terminated.message.as_deref(), Some("out of memory"));
}

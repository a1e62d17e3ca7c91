//! The operator section (docs/performance.md, "Operator"): the release `sless operator`
//! against the local Kubernetes control plane (docs/kubernetes-testing.md; build pods
//! scripted by the benchmark as a kubelet running kaniko would report them). It measures:
//!
//! - build Job complete → Deployment applied: from the build Job's `Complete` condition to
//!   the Deployment's creation, both as the benchmark's watches see them (the build pod's
//!   success is the benchmark's own write; the Job controller's delay in marking the Job
//!   complete is not the operator's and is left out);
//! - Function Ready → Trigger Active: both observed on the benchmark's watches, so the
//!   observer's delay cancels out;
//! - the operator's resident memory (VmRSS) before any Function and with `functions` of them
//!   Ready (sharing one archive, so one build).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde_json::json;
use sless_kube::crd::{Function, Trigger};
use sless_kube_testenv::scripted::{self, Outcome};
use sless_kube_testenv::{TestNamespace, control_plane};

use crate::stats::Summary;

/// What the operator section measured.
#[derive(Debug, Clone, Serialize)]
pub struct OperatorBench {
    /// Build Job `Complete` → the Function's Deployment created.
    pub build_to_deployment: Summary,
    /// Function Ready → its Trigger Active.
    pub ready_to_active: Summary,
    /// The operator's resident memory with no Function, in MiB.
    pub rss_idle_mib: f64,
    /// The operator's resident memory with `functions` Functions Ready, in MiB.
    pub rss_loaded_mib: f64,
    /// Functions alive for `rss_loaded_mib`.
    pub functions: usize,
}

fn pinned(name: &str) -> String {
    format!("{name}@sha256:{}", "e".repeat(64))
}

fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading the operator's status")?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS for pid {pid}"))?;
    Ok(kb / 1024.0)
}

/// When each named object was first seen in the wanted state, by the benchmark's watch.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

fn seen_at(seen: &Seen, name: &str) -> Option<Instant> {
    seen.lock().unwrap_or_else(PoisonError::into_inner).get(name).copied()
}

async fn wait_seen(seen: &Seen, name: &str, timeout: Duration) -> Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(at) = seen_at(seen, name) {
            return Ok(at);
        }
        if Instant::now() > deadline {
            return Err(anyhow!("{name} not seen within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Records, for every object of `api` for which `ready` holds, the first instant it was seen so.
fn watch_seen<K>(api: Api<K>, ready: impl Fn(&K) -> bool + Send + 'static) -> (Seen, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let seen: Seen = Arc::default();
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff().applied_objects());
        while let Some(Ok(object)) = events.next().await {
            if ready(&object) {
                out.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(object.name_any())
                    .or_insert_with(Instant::now);
            }
        }
    });
    (seen, task)
}

/// Runs the section with `samples` timed Functions (each its own archive and build) and
/// `functions` Functions for the memory figure.
pub async fn run(bin: &std::path::Path, samples: usize, functions: usize) -> Result<OperatorBench> {
    let system = TestNamespace::create("bench-sys").await.map_err(|e| anyhow!("control plane: {e}"))?;
    let tenant = TestNamespace::create("bench").await.map_err(|e| anyhow!("{e}"))?;
    let builds = TestNamespace::create("bench-build").await.map_err(|e| anyhow!("{e}"))?;
    let client = tenant.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in sless_kube::crds() {
        crds.patch(&crd.name_any(), &PatchParams::apply("sless-bench").force(), &Patch::Apply(&crd)).await?;
    }
    let kubeconfig = tokio::task::spawn_blocking(|| control_plane().map(|p| p.kubeconfig().to_path_buf()))
        .await?
        .map_err(|e| anyhow!("{e}"))?;
    let mut marked = kube::core::ObjectMeta::default();
    scripted::mark_scripted(&mut marked);
    let label = marked.labels.unwrap_or_default().into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>();
    let mut operator = tokio::process::Command::new(bin)
        .arg("operator")
        .args([
            format!("--watch-namespace={}", tenant.name()),
            format!("--build-namespace={}", builds.name()),
            format!("--sless-namespace={}", system.name()),
            format!("--builder-image={}", pinned("registry.sless.invalid/kaniko")),
            format!("--sless-image={}", pinned("registry.sless.invalid/sless")),
            format!("--python311-base-image={}", pinned("registry.sless.invalid/python")),
            format!("--nodejs20-base-image={}", pinned("registry.sless.invalid/node")),
            "--image-repository=registry.sless.invalid/functions".into(),
            "--blob-url=s3://sless/archives".into(),
            format!("--build-pod-label={}", label.join(",")),
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .context("starting sless operator")?;
    let pid = operator.id().ok_or_else(|| anyhow!("the operator exited at once"))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle_mib = rss_mib(pid)?;

    let workload_ns = format!("sless-fn-{}", tenant.name());
    let functions_api: Api<Function> = tenant.api();
    let triggers_api: Api<Trigger> = tenant.api();
    let pods: Api<Pod> = builds.api();
    let (deployed, t1) = watch_seen(Api::<Deployment>::namespaced(client.clone(), &workload_ns), |_| true);
    let (complete, t0) = watch_seen(builds.api::<Job>(), |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
    });
    let (ready, t2) = watch_seen(functions_api.clone(), |f: &Function| {
        f.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    });
    let (active, t3) = watch_seen(triggers_api.clone(), |t: &Trigger| {
        t.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active")
    });
    let apply = PatchParams::apply("sless-bench").force();
    let mut to_deployment = Vec::new();
    let mut to_active = Vec::new();
    for i in 0..samples {
        let (name, sha) = (format!("fn-{i}"), format!("{:064x}", i + 1));
        let trigger = json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger", "metadata": {"name": name},
                             "spec": {"function": name, "type": "cron", "schedule": "0 3 * * *"}});
        triggers_api.patch(&name, &apply, &Patch::Apply(&trigger)).await?;
        let f = json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function", "metadata": {"name": name},
                       "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "code": {"sha256": sha}}});
        functions_api.patch(&name, &apply, &Patch::Apply(&f)).await?;
        let job = sless_kube::build::job_name(sless_kube::crd::Runtime::Python311, &sha);
        let pod =
            scripted::scheduled_pod(&pods, &format!("batch.kubernetes.io/job-name={job}"), Duration::from_secs(60))
                .await
                .map_err(|e| anyhow!("{e}"))?;
        let message = format!("sha256:{sha}");
        scripted::set_outcome(&pods, &pod.name_any(), &Outcome::SucceededWith { message })
            .await
            .map_err(|e| anyhow!("{e}"))?;
        let built = wait_seen(&complete, &job, Duration::from_secs(60)).await?;
        let applied = wait_seen(&deployed, &name, Duration::from_secs(60)).await?;
        to_deployment.push(applied.saturating_duration_since(built));
        let is_ready = wait_seen(&ready, &name, Duration::from_secs(60)).await?;
        let is_active = wait_seen(&active, &name, Duration::from_secs(60)).await?;
        to_active.push(is_active.saturating_duration_since(is_ready));
    }
    // Memory: `functions` Functions sharing one archive (one build), all Ready.
    let shared = format!("{:064x}", 0xbeef);
    for i in 0..functions {
        let f = json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function", "metadata": {"name": format!("load-{i}")},
                       "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "code": {"sha256": shared}}});
        functions_api.patch(&format!("load-{i}"), &apply, &Patch::Apply(&f)).await?;
    }
    let job = sless_kube::build::job_name(sless_kube::crd::Runtime::Python311, &shared);
    let pod = scripted::scheduled_pod(&pods, &format!("batch.kubernetes.io/job-name={job}"), Duration::from_secs(120))
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let message = format!("sha256:{shared}");
    scripted::set_outcome(&pods, &pod.name_any(), &Outcome::SucceededWith { message })
        .await
        .map_err(|e| anyhow!("{e}"))?;
    for i in 0..functions {
        wait_seen(&ready, &format!("load-{i}"), Duration::from_secs(600)).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_loaded_mib = rss_mib(pid)?;
    for task in [t0, t1, t2, t3] {
        task.abort();
    }
    // Deleted while the operator runs, so that their finalizers go and the namespace with them.
    let everything = kube::api::ListParams::default();
    triggers_api.delete_collection(&DeleteParams::default(), &everything).await?;
    functions_api.delete_collection(&DeleteParams::default(), &everything).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while !functions_api.list(&everything).await?.items.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
    let _ = tokio::time::timeout(Duration::from_secs(30), operator.wait()).await;
    let _ = Api::<Namespace>::all(client).delete(&workload_ns, &DeleteParams::default()).await;
    Ok(OperatorBench {
        build_to_deployment: Summary::of_durations(&to_deployment),
        ready_to_active: Summary::of_durations(&to_active),
        rss_idle_mib,
        rss_loaded_mib,
        functions,
    })
}

//! The Function controller (docs/kubernetes.md, "The operator"): for each Function, an image
//! build Job per archive ([`crate::build`]), then the tenant's workload namespace and the
//! function's Deployment and Service ([`crate::workload`]), and the Function's status with
//! its `Built` and `Ready` conditions and `observedGeneration`.
//!
//! Shape (kube-rs/controller-rs): the finalizer helper is the only top-level call of
//! [`reconcile`]; `apply` and `cleanup` do the work; what to do and which status follows are
//! the pure functions [`needs_build`], [`serving_image`] and [`status`], unit-tested here.
//! Everything is written by server-side apply under one field manager ([`MANAGER`]). No owner
//! reference crosses a namespace: what a Function has in the workload namespace is found by
//! its name and labels and deleted by the finalizer; build Jobs are shared by every Function
//! with the same archive and runtime, and expire by their TTL.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Pod, ResourceQuota, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::build::{self, BuildState};
use crate::crd::{Function, FunctionStatus};
use crate::operator::Context;
use crate::workload::{self, FUNCTION_LABEL, MANAGED_BY_LABEL, TENANT_LABEL};
use crate::{Error, Result};

/// The field manager of everything the operator applies.
pub const MANAGER: &str = "sless-operator";
/// The finalizer that deletes a Function's Deployment and Service before it goes.
pub const FINALIZER: &str = "sless.kube5s.ru/cleanup";
/// How often a Function is reconciled without any change (the safety net for a lost event).
const RESYNC: Duration = Duration::from_secs(300);
/// How soon a Function whose build or rollout is under way is looked at again, besides the
/// Job and Deployment events that normally wake it.
const IN_PROGRESS: Duration = Duration::from_secs(30);

/// How a Function's Deployment is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    /// The image its pod template runs.
    pub image: String,
    /// The Deployment controller has seen its latest spec, and it is `Available` with every
    /// replica updated.
    pub ready: bool,
}

/// A Deployment's [`Rollout`]. Pure.
pub fn rollout_state(d: &Deployment) -> Rollout {
    let image = d
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let wanted = d.spec.replicas.unwrap_or(1);
    let ready = d.status.as_ref().is_some_and(|s| {
        let caught_up = s.observed_generation.is_some() && s.observed_generation >= d.metadata.generation;
        let available = s
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"));
        caught_up && available && s.updated_replicas.unwrap_or(0) >= wanted
    });
    Rollout { image, ready }
}

fn wanted_sha(f: &Function) -> Option<&str> {
    f.spec.code.as_ref().map(|c| c.sha256.as_str())
}

fn built_already(f: &Function) -> bool {
    let status = f.status.as_ref();
    wanted_sha(f).is_some()
        && status.and_then(|s| s.built_sha256.as_deref()) == wanted_sha(f)
        && status.is_some_and(|s| s.image.is_some())
}

/// Whether the build Job of the Function's archive must be created: it has code whose image
/// is not recorded yet and no Job was found for it. Pure.
pub fn needs_build(f: &Function, build: Option<&BuildState>) -> bool {
    wanted_sha(f).is_some() && !built_already(f) && build.is_none()
}

/// The image the Function's Deployment runs: the newly built one, else the one already
/// serving (a failed or running build keeps the previous version serving). Pure.
pub fn serving_image(f: &Function, build: Option<&BuildState>) -> Option<String> {
    match build {
        Some(BuildState::Succeeded { image }) if !built_already(f) => Some(image.clone()),
        _ => f.status.as_ref().and_then(|s| s.image.clone()),
    }
}

/// Sets condition `type_` in `conditions` (Kubernetes API conventions: `lastTransitionTime`
/// changes only when `status` does; reason, message and observedGeneration always follow).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let fresh = Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: now.clone(),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => {
            *c = Condition { last_transition_time: c.last_transition_time.clone(), ..fresh };
        }
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

/// The Function's status after this reconcile. Pure: from the Function (its spec and the
/// status it had), the spec check's error, the build of its archive and its Deployment's
/// rollout.
///
/// - no code: `Pending` (`Built` and `Ready` False, `NoCode`);
/// - an invalid spec: `Failed` (`InvalidSpec`), nothing built or served;
/// - a build running: `Built` Unknown (`Building`); a failed one: `Built` False
///   (`BuildFailed`, `BuildDeadlineExceeded`) with the log's tail, the previous image serving;
/// - `Ready` True (`Available`) when the Deployment runs the serving image and is available.
pub fn status(
    f: &Function,
    invalid: Option<&str>,
    build: Option<&BuildState>,
    rollout: Option<&Rollout>,
    now: &Time,
) -> FunctionStatus {
    let generation = f.metadata.generation;
    let mut s = f.status.clone().unwrap_or_default();
    s.observed_generation = generation;
    let set = |s: &mut FunctionStatus, type_: &str, status: &str, reason: &str, message: &str| {
        set_condition(&mut s.conditions, type_, status, reason, message, generation, now);
    };
    if let Some(why) = invalid {
        let message = format!("invalid spec: {why}");
        set(&mut s, "Built", "False", "InvalidSpec", &message);
        set(&mut s, "Ready", "False", "InvalidSpec", &message);
        s.phase = Some("Failed".into());
        s.message = Some(message);
        return s;
    }
    let Some(sha) = wanted_sha(f) else {
        set(&mut s, "Built", "False", "NoCode", "no code uploaded yet");
        set(&mut s, "Ready", "False", "NoCode", "no code uploaded yet");
        s.phase = Some("Pending".into());
        s.message = Some("waiting for code upload".into());
        return s;
    };
    let short = &sha[..sha.len().min(12)];
    let previous = s.image.clone();
    let (building, failure) = if built_already(f) {
        let image = previous.clone().unwrap_or_default();
        set(&mut s, "Built", "True", "Built", &format!("archive {short} built as {image}"));
        (false, None)
    } else {
        match build {
            Some(BuildState::Succeeded { image }) => {
                set(&mut s, "Built", "True", "Built", &format!("archive {short} built as {image}"));
                s.image = Some(image.clone());
                s.built_sha256 = Some(sha.to_string());
                (false, None)
            }
            Some(BuildState::Failed { reason, message }) => {
                set(&mut s, "Built", "False", reason, message);
                (false, Some((reason.clone(), message.clone())))
            }
            Some(BuildState::Running) | None => {
                set(&mut s, "Built", "Unknown", "Building", &format!("building archive {short}"));
                (true, None)
            }
        }
    };
    let serving = s.image.clone();
    let ready = match (&serving, rollout) {
        (Some(image), Some(r)) => r.ready && &r.image == image,
        _ => false,
    };
    let (phase, message) = match (&serving, ready, &failure) {
        (None, _, Some((reason, why))) => {
            set(&mut s, "Ready", "False", reason, why);
            ("Failed", why.clone())
        }
        (None, _, None) => {
            set(&mut s, "Ready", "False", "Building", "no image yet: the first build is running");
            ("Building", format!("building archive {short}"))
        }
        (Some(_), false, _) => {
            let why = "waiting for the Deployment to become available";
            set(&mut s, "Ready", "False", "RollingOut", why);
            ("Building", why.to_string())
        }
        (Some(image), true, failure) => {
            set(&mut s, "Ready", "True", "Available", &format!("serving {image}"));
            let message = match (failure, building) {
                (Some((_, why)), _) => format!("{why} (the previous image still serves)"),
                (None, true) => format!("building archive {short}; the previous image serves calls meanwhile"),
                (None, false) => format!("serving {image}"),
            };
            (if building { "Building" } else { "Ready" }, message)
        }
    };
    s.phase = Some(phase.into());
    s.message = Some(message);
    s
}

/// Writes `status` of custom resource `name` (of `kind`, in this crate's group) through its
/// status subresource, by server-side apply under [`MANAGER`].
pub(crate) async fn apply_status<K>(api: &Api<K>, kind: &str, name: &str, status: &impl Serialize) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": format!("{}/{}", crate::crd::GROUP, crate::crd::VERSION),
        "kind": kind,
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(name, &apply_params(), &Patch::Apply(&patch)).await?;
    Ok(())
}

pub(crate) fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

pub(crate) async fn apply<K>(api: &Api<K>, object: &K) -> Result<K>
where
    K: Resource + Serialize + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    Ok(api.patch(&name, &apply_params(), &Patch::Apply(object)).await?)
}

/// Makes the tenant's workload namespace with its quota, limits, network policy and cron
/// service account (first use creates them; a later call re-applies them once
/// [`crate::operator::TenantsEnsured::EVERY`] has passed).
async fn ensure_tenant(ctx: &Context, tenant: &str) -> Result<()> {
    if ctx.tenants.fresh(tenant) {
        return Ok(());
    }
    let applied = apply_tenant(ctx, tenant).await;
    match &applied {
        Ok(()) => ctx.tenants.done(tenant),
        Err(_) => ctx.tenants.forget(tenant),
    }
    applied
}

async fn apply_tenant(ctx: &Context, tenant: &str) -> Result<()> {
    let s = &ctx.settings;
    let ns = s.workload_namespace(tenant);
    apply(&Api::<Namespace>::all(ctx.client.clone()), &with_kind(workload::tenant_namespace(s, tenant))?).await?;
    let client = &ctx.client;
    apply(&Api::<ResourceQuota>::namespaced(client.clone(), &ns), &with_kind(workload::tenant_quota(s, tenant))?)
        .await?;
    apply(&Api::<LimitRange>::namespaced(client.clone(), &ns), &with_kind(workload::tenant_limits(s, tenant))?).await?;
    apply(
        &Api::<NetworkPolicy>::namespaced(client.clone(), &ns),
        &with_kind(workload::tenant_network_policy(s, tenant))?,
    )
    .await?;
    apply(
        &Api::<ServiceAccount>::namespaced(client.clone(), &ns),
        &with_kind(workload::tenant_cron_service_account(s, tenant))?,
    )
    .await?;
    Ok(())
}

/// k8s-openapi's types leave `apiVersion` and `kind` to their serializer, which writes them
/// (server-side apply needs both): a round trip through JSON checks it.
pub(crate) fn with_kind<K: Serialize + serde::de::DeserializeOwned>(object: K) -> Result<K> {
    serde_json::from_value(serde_json::to_value(object).map_err(Error::Json)?).map_err(Error::Json)
}

/// The build of the Function's archive as the cluster shows it (`None`: no Job).
async fn observe_build(ctx: &Context, f: &Function) -> Result<Option<BuildState>> {
    let Some(sha) = wanted_sha(f) else { return Ok(None) };
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.build.namespace);
    let name = build::job_name(f.spec.runtime, sha);
    let Some(job) = jobs.get_opt(&name).await? else { return Ok(None) };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.build.namespace);
    let finished = !matches!(build::build_state(&job, &[]), BuildState::Running);
    let pods = if finished {
        pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"))).await?.items
    } else {
        Vec::new()
    };
    Ok(Some(build::build_state(&job, &pods)))
}

/// Creates the build Job; AlreadyExists means another reconcile (or a previous operator)
/// started it, which is the same build.
async fn start_build(ctx: &Context, f: &Function, sha: &str) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.build.namespace);
    let job = build::build_job(&ctx.build, f.spec.runtime, sha);
    match jobs.create(&PostParams { field_manager: Some(MANAGER.into()), ..PostParams::default() }, &job).await {
        Ok(_) => {
            tracing::info!(function = %f.name_any(), namespace = ?f.namespace(), job = ?job.metadata.name, "build started");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn apply_function(f: Arc<Function>, ctx: &Context) -> Result<Action> {
    let tenant = f.namespace().unwrap_or_default();
    let name = f.name_any();
    let invalid = crate::convert::function_spec(&f.spec).err().map(|e| e.to_string());
    let mut build = None;
    let mut rollout = None;
    if invalid.is_none() && wanted_sha(&f).is_some() {
        ensure_tenant(ctx, &tenant).await?;
        if !built_already(&f) {
            build = observe_build(ctx, &f).await?;
        }
        if needs_build(&f, build.as_ref())
            && let Some(sha) = wanted_sha(&f)
        {
            start_build(ctx, &f, sha).await?;
            build = Some(BuildState::Running);
        }
        if let Some(image) = serving_image(&f, build.as_ref()) {
            let ns = ctx.settings.workload_namespace(&tenant);
            let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
            let applied =
                apply(&deployments, &with_kind(workload::deployment(&ctx.settings, &tenant, &f, &image))?).await?;
            let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
            apply(&services, &with_kind(workload::service(&ctx.settings, &tenant, &f))?).await?;
            rollout = Some(rollout_state(&applied));
        }
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let next = status(&f, invalid.as_deref(), build.as_ref(), rollout.as_ref(), &now);
    if f.status.as_ref() != Some(&next) {
        apply_status(&Api::<Function>::namespaced(ctx.client.clone(), &tenant), "Function", &name, &next).await?;
    }
    let settled = matches!(next.phase.as_deref(), Some("Ready" | "Failed" | "Pending"));
    Ok(Action::requeue(if settled { RESYNC } else { IN_PROGRESS }))
}

/// Deletes the Function's Deployment and Service (when they carry its labels), so that the
/// finalizer can go.
async fn cleanup_function(f: Arc<Function>, ctx: &Context) -> Result<Action> {
    let tenant = f.namespace().unwrap_or_default();
    let name = f.name_any();
    let ns = ctx.settings.workload_namespace(&tenant);
    let ours = |labels: &std::collections::BTreeMap<String, String>| {
        labels.get(TENANT_LABEL) == Some(&tenant) && labels.get(FUNCTION_LABEL) == Some(&name)
    };
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(d) = deployments.get_opt(&name).await?
        && ours(d.labels())
    {
        deployments.delete(&name, &DeleteParams::background()).await?;
    }
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(s) = services.get_opt(&name).await?
        && ours(s.labels())
    {
        services.delete(&name, &DeleteParams::background()).await?;
    }
    tracing::info!(function = %name, namespace = %tenant, "deleted the function's workloads");
    Ok(Action::await_change())
}

/// Reconciles one Function: the finalizer helper decides between [`apply_function`] and
/// [`cleanup_function`]. Errors: [`Error::Kube`] from the API, wrapped by the finalizer
/// helper ([`Error::Finalizer`]).
pub async fn reconcile(f: Arc<Function>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<Function> = Api::namespaced(ctx.client.clone(), &f.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, f, |event| async {
        match event {
            Finalizer::Apply(f) => {
                let tenant = f.namespace().unwrap_or_default();
                let applied = apply_function(f, &ctx).await;
                if applied.is_err() {
                    // Perhaps the workload namespace went: the retry applies it again.
                    ctx.tenants.forget(&tenant);
                }
                applied
            }
            Finalizer::Cleanup(f) => cleanup_function(f, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// After a failed reconcile: soon again for a transient error (the API unreachable, a
/// conflict, a server error), later for a permanent one (a refused object: the settings or
/// the cluster's policy must change first).
pub fn error_policy(f: Arc<Function>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(function = %f.name_any(), namespace = ?f.namespace(), error = %error, "reconcile failed");
    if error.is_transient() { Action::requeue(Duration::from_secs(5)) } else { Action::requeue(RESYNC) }
}

/// The Functions a build Job (its metadata) serves: those (in the controller's cache) whose
/// archive and runtime it builds. Pure.
pub fn functions_of_build(job: &ObjectMeta, functions: &[Arc<Function>]) -> Vec<ObjectRef<Function>> {
    let annotations = job.annotations.as_ref();
    let sha = annotations.and_then(|a| a.get(build::SHA256_ANNOTATION));
    let runtime = annotations.and_then(|a| a.get(build::RUNTIME_ANNOTATION));
    functions
        .iter()
        .filter(|f| {
            wanted_sha(f).map(str::to_string).as_ref() == sha
                && Some(build::runtime_name(f.spec.runtime)) == runtime.map(String::as_str)
        })
        .map(|f| ObjectRef::from_obj(f.as_ref()))
        .collect()
}

/// The Function a workload (Deployment) belongs to, by its labels. Pure.
pub fn function_of_workload(labels: &std::collections::BTreeMap<String, String>) -> Option<ObjectRef<Function>> {
    let (tenant, name) = (labels.get(TENANT_LABEL)?, labels.get(FUNCTION_LABEL)?);
    Some(ObjectRef::new(name).within(tenant))
}

/// Runs the Function controller until `shutdown` completes (then lets running reconciles
/// finish). Watches Functions (of [`Context::watch_namespace`] or all), the build Jobs of the
/// build namespace and the operator's Deployments, each through a label selector.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let (functions, deployments): (Api<Function>, Api<PartialObjectMeta<Deployment>>) = match &ctx.watch_namespace {
        Some(ns) => {
            (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), &ctx.settings.workload_namespace(ns)))
        }
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let jobs: Api<PartialObjectMeta<Job>> = Api::namespaced(client.clone(), &ctx.build.namespace);
    // The cache holds Functions without their managed fields (docs/kubernetes.md, "Memory");
    // Jobs and Deployments are watched as metadata only: their mappers need labels and
    // annotations, and the reconcile reads what it needs afresh.
    let (reader, writer) = reflector::store::<Function>();
    let functions = watcher(functions, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|f| f.managed_fields_mut().clear())
        .reflect(writer)
        .applied_objects();
    let controller = Controller::for_stream(functions, reader);
    let store = controller.store();
    let build_jobs =
        watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}=sless,{}=build", build::COMPONENT_LABEL));
    let workloads = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}=sless,{FUNCTION_LABEL}"));
    controller
        .watches_stream(
            watcher(jobs, build_jobs).default_backoff().touched_objects(),
            move |job: PartialObjectMeta<Job>| functions_of_build(&job.metadata, &store.state()),
        )
        .watches_stream(
            watcher(deployments, workloads).default_backoff().touched_objects(),
            |d: PartialObjectMeta<Deployment>| function_of_workload(d.labels()),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|outcome| async move {
            if let Err(e) = outcome {
                tracing::debug!(error = %e, "function controller");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::Code;

    fn function(sha: Option<&str>, status: Option<FunctionStatus>) -> Function {
        let mut f: Function = serde_json::from_value(json!({
            "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
            "metadata": {"name": "hello", "namespace": "team-a", "generation": 3},
            "spec": {"runtime": "python3.11", "entrypoint": "main.handler"},
        }))
        .expect("function");
        f.spec.code = sha.map(|s| Code { sha256: s.into() });
        f.status = status;
        f
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).expect("time"))
    }

    fn cond<'a>(s: &'a FunctionStatus, type_: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).expect("condition");
        assert_eq!(c.observed_generation, Some(3), "{type_} carries observedGeneration");
        (c.status.as_str(), c.reason.as_str())
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn no_code_is_pending_and_builds_nothing() {
        let f = function(None, None);
        assert!(!needs_build(&f, None));
        let s = status(&f, None, None, None, &now());
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&s, "Ready"), ("False", "NoCode"));
        assert_eq!(s.observed_generation, Some(3));
    }

    #[test]
    fn code_without_a_job_starts_one_and_the_same_archive_never_builds_twice() {
        let f = function(Some(A), None);
        assert!(needs_build(&f, None));
        assert!(!needs_build(&f, Some(&BuildState::Running)), "a Job exists: it is that build");
        let s = status(&f, None, Some(&BuildState::Running), None, &now());
        assert_eq!((s.phase.as_deref(), cond(&s, "Built")), (Some("Building"), ("Unknown", "Building")));
        assert_eq!(cond(&s, "Ready"), ("False", "Building"));
        // Built once: the image is recorded, so a Job deleted by its TTL is not made again.
        let built = status(&f, None, Some(&BuildState::Succeeded { image: "r/py@sha256:1".into() }), None, &now());
        let f = function(Some(A), Some(built));
        assert!(!needs_build(&f, None));
        assert_eq!(serving_image(&f, None).as_deref(), Some("r/py@sha256:1"));
    }

    #[test]
    fn ready_needs_the_deployment_available_with_the_serving_image() {
        let f = function(Some(A), None);
        let done = BuildState::Succeeded { image: "r/py@sha256:1".into() };
        let rolling = Rollout { image: "r/py@sha256:1".into(), ready: false };
        let s = status(&f, None, Some(&done), Some(&rolling), &now());
        assert_eq!((cond(&s, "Built"), cond(&s, "Ready")), (("True", "Built"), ("False", "RollingOut")));
        let up = Rollout { ready: true, ..rolling };
        let s = status(&f, None, Some(&done), Some(&up), &now());
        assert_eq!((s.phase.as_deref(), cond(&s, "Ready")), (Some("Ready"), ("True", "Available")));
        assert_eq!(s.built_sha256.as_deref(), Some(A));
        let old = Rollout { image: "r/py@sha256:0".into(), ready: true };
        assert_eq!(cond(&status(&f, None, Some(&done), Some(&old), &now()), "Ready").0, "False");
    }

    #[test]
    fn a_failed_build_keeps_the_previous_image_serving_and_says_why() {
        let first = function(Some(A), None);
        let done = BuildState::Succeeded { image: "r/py@sha256:1".into() };
        let up = Rollout { image: "r/py@sha256:1".into(), ready: true };
        let serving = status(&first, None, Some(&done), Some(&up), &now());
        let ready_since =
            serving.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.last_transition_time.clone());
        let f = function(Some(B), Some(serving));
        assert!(needs_build(&f, None), "a new archive builds");
        let failed = BuildState::Failed {
            reason: "BuildFailed".into(),
            message: "the build failed: pip: no such package".into(),
        };
        assert_eq!(serving_image(&f, Some(&failed)).as_deref(), Some("r/py@sha256:1"));
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_100).expect("time"));
        let s = status(&f, None, Some(&failed), Some(&up), &later);
        assert_eq!(
            (s.phase.as_deref(), cond(&s, "Built"), cond(&s, "Ready")),
            (Some("Ready"), ("False", "BuildFailed"), ("True", "Available"))
        );
        assert!(s.message.as_deref().is_some_and(|m| m.contains("no such package") && m.contains("previous image")));
        assert_eq!(s.built_sha256.as_deref(), Some(A), "the recorded image is still the old archive's");
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.last_transition_time.clone());
        assert_eq!(ready, ready_since, "Ready did not change, so neither did its lastTransitionTime");
        // With nothing serving, a failed first build fails the Function.
        let s = status(&function(Some(B), None), None, Some(&failed), None, &now());
        assert_eq!((s.phase.as_deref(), cond(&s, "Ready")), (Some("Failed"), ("False", "BuildFailed")));
    }

    #[test]
    fn an_invalid_spec_fails_without_building() {
        let s = status(&function(Some(A), None), Some("memory_mb: must be 64..4096"), None, None, &now());
        assert_eq!((s.phase.as_deref(), cond(&s, "Ready")), (Some("Failed"), ("False", "InvalidSpec")));
    }

    #[test]
    fn jobs_and_deployments_map_back_to_their_functions() {
        let settings = build::tests::settings();
        let job = build::build_job(&settings, crate::crd::Runtime::Python311, A);
        let mut node = function(Some(A), None);
        node.spec.runtime = crate::crd::Runtime::Nodejs20;
        let all = [function(Some(A), None), function(Some(B), None), node].map(Arc::new);
        let refs = functions_of_build(&job.metadata, &all);
        assert_eq!(refs, vec![ObjectRef::new("hello").within("team-a")]);
        let labels = [(TENANT_LABEL, "team-a"), (FUNCTION_LABEL, "hello")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(function_of_workload(&labels), Some(ObjectRef::new("hello").within("team-a")));
        assert_eq!(function_of_workload(&Default::default()), None);
    }
}

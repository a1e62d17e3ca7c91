//! The Trigger controller (docs/kubernetes.md, "Triggers"): a Trigger follows its Function
//! (found by name in its namespace, watched through a pure mapper, so a Trigger applied before
//! its Function turns Active the moment the Function is Ready — never at the next timer), and
//! its calls go through the sless API, so each is recorded, `auth: token` holds and scale from
//! zero works:
//!
//! - `http`: an Ingress in the sless namespace routing `/fn/<namespace>/<function>` to the
//!   API's Service — never to the tenant's pods;
//! - `cron`: a CronJob in the tenant's workload namespace whose pod runs the sless image's
//!   `sless trigger fire <trigger>` against the API with a projected service-account token
//!   (audience [`TriggerSettings::token_audience`]), `concurrencyPolicy: Forbid`,
//!   `startingDeadlineSeconds`, `timeZone`; suspended while the trigger is disabled or its
//!   function not Ready. A schedule a CronJob cannot keep (more often than once a minute, or
//!   not on the clock: `@every 30s`, `@every 7m`; `L`, `W`, `#`) is `Failed`
//!   (`UnsupportedSchedule`), never approximated.
//!
//! Builders and decisions are pure ([`cron_schedule`], [`cronjob`], [`ingress`], [`status`]);
//! the objects are found again by name and labels and deleted by the finalizer (no owner
//! reference crosses a namespace).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodSecurityContext, PodSpec, PodTemplateSpec, ProjectedVolumeSource, ResourceRequirements,
    SeccompProfile, SecurityContext, ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule, IngressServiceBackend, IngressSpec,
    ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::crd::{Function, Trigger, TriggerStatus, TriggerType};
use crate::function::{FINALIZER, apply, apply_params, apply_status, set_condition, with_kind};
use crate::operator::Context;
use crate::workload::{self, CRON_SERVICE_ACCOUNT, FUNCTION_LABEL, MANAGED_BY_LABEL, Settings, TENANT_LABEL};
use crate::{Error, Result};

/// Label: the trigger an object serves.
pub const TRIGGER_LABEL: &str = "sless.kube5s.ru/trigger";
/// Where a cron pod's projected token is mounted.
const TOKEN_DIR: &str = "/var/run/secrets/sless";
/// How often a Trigger is reconciled without any change.
const RESYNC: Duration = Duration::from_secs(300);

/// How triggers reach the sless API; every field is used.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerSettings {
    /// The API's Service in the sless namespace (what Ingresses route to).
    pub api_service: String,
    /// Its port.
    pub api_port: i32,
    /// The class of the Ingresses (`ingressClassName`); `None`: the cluster's default class.
    pub ingress_class: Option<String>,
    /// The host the Ingresses answer for; `None`: any host.
    pub ingress_host: Option<String>,
    /// The audience of the token a cron pod presents to the API.
    pub token_audience: String,
    /// A cron tick missed by more than this many seconds is skipped
    /// (`startingDeadlineSeconds`).
    pub starting_deadline_sec: i64,
}

impl Default for TriggerSettings {
    fn default() -> Self {
        TriggerSettings {
            api_service: "sless-api".into(),
            api_port: 8080,
            ingress_class: None,
            ingress_host: None,
            token_audience: "sless".into(),
            starting_deadline_sec: 60,
        }
    }
}

impl TriggerSettings {
    /// The API's URL from inside the cluster: `http://<service>.<sless namespace>.svc:<port>`.
    pub fn api_url(&self, settings: &Settings) -> String {
        format!("http://{}.{}.svc:{}", self.api_service, settings.sless_namespace, self.api_port)
    }
}

/// The CronJob schedule that keeps a trigger's `schedule`, or why none can (the message of the
/// `UnsupportedSchedule` status). CronJobs fire on the clock at most once a minute and know
/// 5-field expressions (names, ranges, steps) and the macros; so `@every d` maps only when `d`
/// is a whole number of minutes dividing an hour, or of hours dividing a day. Pure.
pub fn cron_schedule(schedule: &str, timezone: &str) -> std::result::Result<String, String> {
    let parsed = sless_core::schedule::Schedule::parse(schedule, timezone).map_err(|e| e.to_string())?;
    let text = schedule.trim();
    if let Some(every) = parsed.every() {
        let secs = every.num_seconds();
        let (m, h) = (secs / 60, secs / 3600);
        return match secs {
            s if s % 60 == 0 && m <= 60 && 60 % m == 0 => Ok(if m == 1 {
                "* * * * *".into()
            } else if m == 60 {
                "0 * * * *".into()
            } else {
                format!("*/{m} * * * *")
            }),
            s if s % 3600 == 0 && h <= 24 && 24 % h == 0 => {
                Ok(if h == 24 { "0 0 * * *".into() } else { format!("0 */{h} * * *") })
            }
            _ => Err(format!(
                "{text:?}: Kubernetes CronJobs fire on the clock, at most once a minute; use a 5-field \
                 schedule, or @every a number of minutes that divides an hour (or of hours that divides a day)"
            )),
        };
    }
    if text.starts_with('@') {
        return Ok(text.to_string());
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let (dom, dow) = (fields.get(2).copied().unwrap_or_default(), fields.get(4).copied().unwrap_or_default());
    let last_weekday = dow.as_bytes().windows(2).any(|w| w[0].is_ascii_digit() && w[1] == b'L');
    if text.contains('#') || dom.contains(['L', 'W']) || last_weekday {
        return Err(format!(
            "{text:?}: Kubernetes CronJobs do not know L, W or # (last day, nearest weekday, nth weekday)"
        ));
    }
    Ok(fields.join(" "))
}

fn trigger_labels(tenant: &str, t: &Trigger) -> BTreeMap<String, String> {
    workload::labels(&[
        (MANAGED_BY_LABEL, "sless"),
        (TENANT_LABEL, tenant),
        (TRIGGER_LABEL, &t.name_any()),
        (FUNCTION_LABEL, &t.spec.function),
    ])
}

/// A name of at most `max` characters for `name`: itself when short enough, else a prefix
/// and a hash of the whole (stable, so the object is found again).
fn bounded_name(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    use sha2::Digest;
    let hash = hex::encode(&sha2::Sha256::digest(name.as_bytes())[..4]);
    format!("{}-{hash}", name[..max - 9].trim_end_matches('-'))
}

/// The CronJob's name: the trigger's, bounded to 52 characters (a CronJob's Jobs add 11).
pub fn cronjob_name(trigger: &str) -> String {
    bounded_name(trigger, 52)
}

/// The Ingress's name in the sless namespace: `<namespace>-<trigger>`, bounded to 63.
pub fn ingress_name(tenant: &str, trigger: &str) -> String {
    bounded_name(&format!("{tenant}-{trigger}"), 63)
}

/// The CronJob of cron trigger `t` (of namespace `tenant`) firing `schedule` (from
/// [`cron_schedule`]), running `image` (the sless image) as the tenant's
/// [`CRON_SERVICE_ACCOUNT`]; `suspend` while it must not fire. The pod passes Pod Security
/// `restricted`, and has no service-account token but a projected one for the API.
pub fn cronjob(
    settings: &Settings,
    triggers: &TriggerSettings,
    image: &str,
    tenant: &str,
    t: &Trigger,
    schedule: &str,
    suspend: bool,
) -> CronJob {
    let ns = settings.workload_namespace(tenant);
    let labels = trigger_labels(tenant, t);
    let restricted = SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(workload::FUNCTION_UID),
        run_as_group: Some(workload::FUNCTION_UID),
        read_only_root_filesystem: Some(true),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
        ..SecurityContext::default()
    };
    let memory = workload::mib(64);
    let container = Container {
        name: "fire".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["sless".into(), "trigger".into(), "fire".into(), t.name_any()]),
        args: Some(vec![
            format!("--namespace={tenant}"),
            format!("--url={}", triggers.api_url(settings)),
            format!("--token-file={TOKEN_DIR}/token"),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("memory".to_string(), memory.clone()),
                ("cpu".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("10m".into())),
            ])),
            limits: Some(BTreeMap::from([("memory".to_string(), memory)])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(restricted),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![VolumeMount {
            name: "api-token".into(),
            mount_path: TOKEN_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        restart_policy: Some("Never".into()),
        service_account_name: Some(CRON_SERVICE_ACCOUNT.into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
            ..PodSecurityContext::default()
        }),
        volumes: Some(vec![Volume {
            name: "api-token".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        audience: Some(triggers.token_audience.clone()),
                        expiration_seconds: Some(600),
                        path: "token".into(),
                        user: None,
                    }),
                    ..VolumeProjection::default()
                }]),
                default_mode: None,
                default_user: None,
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    CronJob {
        metadata: workload::meta(&cronjob_name(&t.name_any()), Some(&ns), labels.clone()),
        spec: CronJobSpec {
            schedule: schedule.into(),
            time_zone: Some(t.spec.timezone.clone()),
            concurrency_policy: Some("Forbid".into()),
            starting_deadline_seconds: Some(triggers.starting_deadline_sec),
            suspend: Some(suspend),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(kube::core::ObjectMeta { labels: Some(labels.clone()), ..Default::default() }),
                spec: Some(JobSpec {
                    backoff_limit: Some(0),
                    active_deadline_seconds: Some(960),
                    ttl_seconds_after_finished: Some(3600),
                    template: PodTemplateSpec {
                        metadata: Some(kube::core::ObjectMeta { labels: Some(labels), ..Default::default() }),
                        spec: Some(pod),
                    },
                    ..JobSpec::default()
                }),
            },
        },
        status: None,
    }
}

/// The Ingress of http trigger `t` (of namespace `tenant`): `/fn/<tenant>/<function>` (a
/// prefix) to the API's Service, in the sless namespace.
pub fn ingress(settings: &Settings, triggers: &TriggerSettings, tenant: &str, t: &Trigger) -> Ingress {
    let path = HTTPIngressPath {
        path: Some(format!("/fn/{tenant}/{}", t.spec.function)),
        path_type: "Prefix".into(),
        backend: IngressBackend {
            service: Some(IngressServiceBackend {
                name: triggers.api_service.clone(),
                port: Some(ServiceBackendPort { number: Some(triggers.api_port), name: None }),
            }),
            resource: None,
        },
    };
    Ingress {
        metadata: workload::meta(
            &ingress_name(tenant, &t.name_any()),
            Some(&settings.sless_namespace),
            trigger_labels(tenant, t),
        ),
        spec: Some(IngressSpec {
            ingress_class_name: triggers.ingress_class.clone(),
            rules: Some(vec![IngressRule {
                host: triggers.ingress_host.clone(),
                http: Some(HTTPIngressRuleValue { paths: vec![path] }),
            }]),
            ..IngressSpec::default()
        }),
        status: None,
    }
}

/// Whether the trigger's function can be called, from the Function resource: `Ok` when its
/// `Ready` condition is True; `Err((failed, why))` otherwise (`failed`: the Function is
/// `Failed`). Pure.
pub fn function_readiness(function: Option<&Function>, name: &str) -> std::result::Result<(), (bool, String)> {
    let Some(f) = function else { return Err((false, format!("function {name:?} does not exist yet"))) };
    let status = f.status.as_ref();
    let ready = status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready {
        return Ok(());
    }
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let message = status.and_then(|s| s.message.as_deref()).unwrap_or("not reconciled yet");
    Err((phase == "Failed", format!("function {name:?} is {phase}: {message}")))
}

/// The Trigger's status: `Active` (`Ready` True) when enabled with its function Ready and its
/// schedule (cron) kept by a CronJob; `Waiting` while disabled or its function is missing or
/// not ready; `Failed` for an invalid spec, an unsupported schedule or a failed function. Pure.
pub fn status(
    t: &Trigger,
    invalid: Option<&str>,
    readiness: std::result::Result<(), (bool, String)>,
    now: &Time,
) -> TriggerStatus {
    let generation = t.metadata.generation;
    let mut s = t.status.clone().unwrap_or_default();
    s.observed_generation = generation;
    let (phase, ready, reason, message) = match (invalid, readiness) {
        (Some(why), _) => {
            let reason = if why.contains("CronJobs") { "UnsupportedSchedule" } else { "InvalidSpec" };
            ("Failed", "False", reason, why.to_string())
        }
        (None, _) if !t.spec.enabled => ("Waiting", "False", "Disabled", "trigger is disabled".to_string()),
        (None, Ok(())) => {
            let what = match t.spec.kind {
                TriggerType::Http => "serving",
                TriggerType::Cron => "scheduled",
            };
            ("Active", "True", "FunctionReady", format!("{what}; function {:?} is ready", t.spec.function))
        }
        (None, Err((true, why))) => ("Failed", "False", "FunctionFailed", why),
        (None, Err((false, why))) => ("Waiting", "False", "FunctionNotReady", why),
    };
    set_condition(&mut s.conditions, "Ready", ready, reason, &message, generation, now);
    s.phase = Some(phase.into());
    s.message = Some(message);
    s
}

async fn apply_trigger(t: Arc<Trigger>, ctx: &Context) -> Result<Action> {
    let tenant = t.namespace().unwrap_or_default();
    let name = t.name_any();
    let mut invalid = crate::convert::trigger_spec(&t.spec).err().map(|e| e.to_string());
    let schedule = match (&invalid, t.spec.kind, t.spec.schedule.as_deref()) {
        (None, TriggerType::Cron, Some(text)) => match cron_schedule(text, &t.spec.timezone) {
            Ok(s) => Some(s),
            Err(why) => {
                invalid = Some(why);
                None
            }
        },
        _ => None,
    };
    let functions: Api<Function> = Api::namespaced(ctx.client.clone(), &tenant);
    let function = functions.get_opt(&t.spec.function).await?;
    let readiness = function_readiness(function.as_ref(), &t.spec.function);
    if invalid.is_none() && readiness.is_ok() {
        match (t.spec.kind, &schedule) {
            (TriggerType::Cron, Some(schedule)) => {
                let ns = ctx.settings.workload_namespace(&tenant);
                let cron = cronjob(
                    &ctx.settings,
                    &ctx.triggers,
                    &ctx.build.sless_image,
                    &tenant,
                    &t,
                    schedule,
                    !t.spec.enabled,
                );
                apply(&Api::<CronJob>::namespaced(ctx.client.clone(), &ns), &with_kind(cron)?).await?;
            }
            (TriggerType::Http, _) => {
                let ing = ingress(&ctx.settings, &ctx.triggers, &tenant, &t);
                apply(&Api::<Ingress>::namespaced(ctx.client.clone(), &ctx.settings.sless_namespace), &with_kind(ing)?)
                    .await?;
            }
            (TriggerType::Cron, None) => {}
        }
    } else if t.spec.kind == TriggerType::Cron {
        // Not callable now: an existing CronJob stops firing until it is.
        suspend_cronjob(ctx, &tenant, &name).await?;
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let next = status(&t, invalid.as_deref(), readiness, &now);
    if t.status.as_ref() != Some(&next) {
        apply_status(&Api::<Trigger>::namespaced(ctx.client.clone(), &tenant), "Trigger", &name, &next).await?;
    }
    Ok(Action::requeue(RESYNC))
}

async fn suspend_cronjob(ctx: &Context, tenant: &str, trigger: &str) -> Result<()> {
    let crons: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ctx.settings.workload_namespace(tenant));
    let name = cronjob_name(trigger);
    if let Some(c) = crons.get_opt(&name).await?
        && c.spec.suspend != Some(true)
    {
        let patch = json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"suspend": true}});
        crons.patch(&name, &apply_params(), &Patch::Apply(&patch)).await?;
    }
    Ok(())
}

/// Deletes the Trigger's CronJob or Ingress (when it carries the Trigger's labels).
async fn cleanup_trigger(t: Arc<Trigger>, ctx: &Context) -> Result<Action> {
    let tenant = t.namespace().unwrap_or_default();
    let name = t.name_any();
    let ours = |labels: &BTreeMap<String, String>| {
        labels.get(TENANT_LABEL) == Some(&tenant) && labels.get(TRIGGER_LABEL) == Some(&name)
    };
    let crons: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ctx.settings.workload_namespace(&tenant));
    if let Some(c) = crons.get_opt(&cronjob_name(&name)).await?
        && ours(c.labels())
    {
        crons.delete(&c.name_any(), &DeleteParams::background()).await?;
    }
    let ingresses: Api<Ingress> = Api::namespaced(ctx.client.clone(), &ctx.settings.sless_namespace);
    if let Some(i) = ingresses.get_opt(&ingress_name(&tenant, &name)).await?
        && ours(i.labels())
    {
        ingresses.delete(&i.name_any(), &DeleteParams::background()).await?;
    }
    Ok(Action::await_change())
}

/// Reconciles one Trigger (the finalizer helper decides between apply and cleanup).
/// Errors: [`Error::Kube`], wrapped by the finalizer helper ([`Error::Finalizer`]).
pub async fn reconcile(t: Arc<Trigger>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<Trigger> = Api::namespaced(ctx.client.clone(), &t.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, t, |event| async {
        match event {
            Finalizer::Apply(t) => apply_trigger(t, &ctx).await,
            Finalizer::Cleanup(t) => cleanup_trigger(t, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// After a failed reconcile: soon for a transient error, later for a refusal.
pub fn error_policy(t: Arc<Trigger>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(trigger = %t.name_any(), namespace = ?t.namespace(), error = %error, "reconcile failed");
    if error.is_transient() { Action::requeue(Duration::from_secs(5)) } else { Action::requeue(RESYNC) }
}

/// The Triggers (in the controller's cache) that name `function` (its metadata) in its
/// namespace: what a Function's change wakes. Pure.
pub fn triggers_of_function(function: &ObjectMeta, triggers: &[Arc<Trigger>]) -> Vec<ObjectRef<Trigger>> {
    let (ns, name) = (function.namespace.clone(), function.name.clone().unwrap_or_default());
    triggers
        .iter()
        .filter(|t| t.namespace() == ns && t.spec.function == name)
        .map(|t| ObjectRef::from_obj(t.as_ref()))
        .collect()
}

/// The Trigger an object (CronJob, Ingress) serves, by its labels. Pure.
pub fn trigger_of_object(labels: &BTreeMap<String, String>) -> Option<ObjectRef<Trigger>> {
    Some(ObjectRef::new(labels.get(TRIGGER_LABEL)?).within(labels.get(TENANT_LABEL)?))
}

/// Runs the Trigger controller until `shutdown` completes. Watches Triggers, their Functions
/// (metadata and status: what readiness needs) and the CronJobs and Ingresses it made.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    type Meta<K> = Api<PartialObjectMeta<K>>;
    let (triggers, functions, crons): (Api<Trigger>, Meta<Function>, Meta<CronJob>) = match &ctx.watch_namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), &ctx.settings.workload_namespace(ns)),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone()), Api::all(client.clone())),
    };
    let ingresses: Meta<Ingress> = Api::namespaced(client.clone(), &ctx.settings.sless_namespace);
    let ours = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}=sless,{TRIGGER_LABEL}"));
    // Triggers cached without managed fields; everything else watched as metadata only (the
    // mappers need names and labels; the reconcile reads the Function afresh).
    let (reader, writer) = reflector::store::<Trigger>();
    let triggers = watcher(triggers, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|t| t.managed_fields_mut().clear())
        .reflect(writer)
        .applied_objects();
    let controller = Controller::for_stream(triggers, reader);
    let store = controller.store();
    let watch_namespace = ctx.watch_namespace.clone();
    controller
        .watches_stream(
            watcher(functions, watcher::Config::default()).default_backoff().touched_objects(),
            move |f: PartialObjectMeta<Function>| triggers_of_function(&f.metadata, &store.state()),
        )
        .watches_stream(
            watcher(crons, ours.clone()).default_backoff().touched_objects(),
            |c: PartialObjectMeta<CronJob>| trigger_of_object(c.labels()),
        )
        .watches_stream(
            watcher(ingresses, ours).default_backoff().touched_objects(),
            move |i: PartialObjectMeta<Ingress>| {
                trigger_of_object(i.labels()).filter(|r| watch_namespace.is_none() || r.namespace == watch_namespace)
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|outcome| async move {
            if let Err(e) = outcome {
                tracing::debug!(error = %e, "trigger controller");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_map_to_cronjobs_or_say_why_they_cannot() {
        assert_eq!(cron_schedule("*/5 1-3 * JAN MON-FRI", "UTC").as_deref(), Ok("*/5 1-3 * JAN MON-FRI"));
        assert_eq!(cron_schedule("@daily", "UTC").as_deref(), Ok("@daily"));
        assert_eq!(cron_schedule("@every 1m", "UTC").as_deref(), Ok("* * * * *"));
        assert_eq!(cron_schedule("@every 15m", "UTC").as_deref(), Ok("*/15 * * * *"));
        assert_eq!(cron_schedule("@every 1h", "UTC").as_deref(), Ok("0 * * * *"));
        assert_eq!(cron_schedule("@every 6h", "UTC").as_deref(), Ok("0 */6 * * *"));
        assert_eq!(cron_schedule("@every 24h", "UTC").as_deref(), Ok("0 0 * * *"));
        for refused in [
            "@every 30s",
            "@every 7m",
            "@every 90m",
            "@every 5h",
            "0 0 L * *",
            "0 0 15W * *",
            "0 0 * * 5#2",
            "0 0 * * 5L",
        ] {
            let why = cron_schedule(refused, "UTC").expect_err(refused);
            assert!(why.contains("CronJobs"), "{refused}: {why}");
        }
        // WED has a W and JUL an L: names are not the extended syntax.
        assert!(cron_schedule("0 0 * JUL WED", "UTC").is_ok());
        assert!(cron_schedule("61 * * * *", "UTC").expect_err("range").starts_with("schedule"));
    }

    #[test]
    fn long_names_are_bounded_stably() {
        let long = "a".repeat(63);
        let name = cronjob_name(&long);
        assert_eq!((name.len() <= 52, name.clone()), (true, cronjob_name(&long)));
        assert_ne!(cronjob_name(&"b".repeat(63)), name);
        assert_eq!(cronjob_name("nightly"), "nightly");
        assert!(ingress_name(&"t".repeat(63), &"x".repeat(63)).len() <= 63);
    }

    fn trigger(enabled: bool) -> Trigger {
        serde_json::from_value(json!({
            "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger",
            "metadata": {"name": "nightly", "namespace": "team-a", "generation": 2},
            "spec": {"function": "hello", "type": "cron", "schedule": "0 1 * * *", "enabled": enabled},
        }))
        .expect("trigger")
    }

    fn function(ready: bool, phase: &str) -> Function {
        serde_json::from_value(json!({
            "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
            "metadata": {"name": "hello", "namespace": "team-a"},
            "spec": {"runtime": "python3.11", "entrypoint": "main.handler"},
            "status": {"phase": phase, "message": "m", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                       "reason": "r", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("function")
    }

    #[test]
    fn a_trigger_follows_its_function() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).expect("time"));
        let t = trigger(true);
        let phase = |s: TriggerStatus| (s.phase.unwrap_or_default(), s.conditions[0].reason.clone());
        let missing = status(&t, None, function_readiness(None, "hello"), &now);
        assert_eq!(phase(missing.clone()), ("Waiting".into(), "FunctionNotReady".into()));
        assert!(missing.message.as_deref().is_some_and(|m| m.contains("does not exist")));
        let building = function(false, "Building");
        assert_eq!(phase(status(&t, None, function_readiness(Some(&building), "hello"), &now)).0, "Waiting");
        let ready = function(true, "Ready");
        let active = status(&t, None, function_readiness(Some(&ready), "hello"), &now);
        assert_eq!(phase(active.clone()), ("Active".into(), "FunctionReady".into()));
        assert_eq!(active.observed_generation, Some(2));
        let failed = function(false, "Failed");
        assert_eq!(phase(status(&t, None, function_readiness(Some(&failed), "hello"), &now)).0, "Failed");
        let off = status(&trigger(false), None, Ok(()), &now);
        assert_eq!(phase(off), ("Waiting".into(), "Disabled".into()));
        let bad = status(&t, Some("\"@every 30s\": Kubernetes CronJobs fire on the clock"), Ok(()), &now);
        assert_eq!(phase(bad), ("Failed".into(), "UnsupportedSchedule".into()));
    }

    #[test]
    fn functions_and_objects_map_back_to_their_triggers() {
        let all = [trigger(true)].map(Arc::new);
        assert_eq!(
            triggers_of_function(&function(true, "Ready").metadata, &all),
            vec![ObjectRef::new("nightly").within("team-a")]
        );
        let mut other = function(true, "Ready");
        other.metadata.namespace = Some("team-b".into());
        assert!(triggers_of_function(&other.metadata, &all).is_empty());
        let labels = trigger_labels("team-a", &all[0]);
        assert_eq!(trigger_of_object(&labels), Some(ObjectRef::new("nightly").within("team-a")));
    }
}

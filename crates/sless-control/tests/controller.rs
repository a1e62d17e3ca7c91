//! The trigger and job controllers' decisions (`src/controller.rs`), against the in-memory
//! fakes of `sless-testing`: what a trigger or job does while its function is missing, not
//! ready, ready or failed; `run_id` bumps; disabled jobs; and the periodic resync repairing a
//! lost notification.
//!
//! Every wait is bounded by a deadline ([`eventually`]); nothing sleeps for a fixed time or
//! asserts on how long something took. "Did not run" is checked after a barrier: a probe job
//! created after the change under test, whose run proves that a later reconcile pass (which
//! read the change) has finished.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sless_control::{Dispatcher, Metrics, Recorder, RecorderConfig, spawn_controllers};
use sless_core::job::{JobPhase, JobRecord};
use sless_core::traits::{Change, InvokeResult, Kind, Registry};
use sless_core::trigger::{TriggerPhase, TriggerRecord};
use sless_testing::{FakeExecutor, FakeInvocationLog, FakeRegistry, FunctionBuilder, JobBuilder, TriggerBuilder};
use tokio::sync::watch;

/// Longest wait for anything the controllers should do.
const DEADLINE: Duration = Duration::from_secs(20);

/// A resync interval longer than any test: only notifications drive the controllers.
const NO_RESYNC: Duration = Duration::from_secs(3600);

/// The controllers running on fakes.
struct Harness {
    reg: Arc<FakeRegistry>,
    exec: Arc<FakeExecutor>,
    stop: watch::Sender<bool>,
    controllers: tokio::task::JoinHandle<()>,
}

impl Harness {
    /// Controllers over a fresh registry, resyncing every `resync`; `setup` runs first (so
    /// the controllers' first pass already sees what it writes).
    async fn start(resync: Duration) -> Self {
        let reg = Arc::new(FakeRegistry::new());
        let exec = Arc::new(FakeExecutor::new());
        let metrics = Arc::new(Metrics::new());
        let (recorder, _writer) =
            Recorder::start(Arc::new(FakeInvocationLog::new()), metrics.clone(), RecorderConfig::default());
        let dispatcher = Arc::new(Dispatcher::new(reg.clone(), exec.clone(), recorder, metrics, 1 << 20));
        let (stop, stopped) = watch::channel(false);
        let controllers = spawn_controllers(reg.clone(), exec.clone(), dispatcher, resync, stopped);
        Harness { reg, exec, stop, controllers }
    }

    async fn job(&self, name: &str) -> JobRecord {
        self.reg.get_job("default", name).await.expect("job")
    }

    async fn trigger(&self, name: &str) -> TriggerRecord {
        self.reg.get_trigger("default", name).await.expect("trigger")
    }

    /// Waits until job `name` satisfies `done`; returns it.
    async fn job_until(&self, name: &str, what: &str, done: impl Fn(&JobRecord) -> bool) -> JobRecord {
        eventually(what, || async {
            let j = self.job(name).await;
            done(&j).then_some(j)
        })
        .await
    }

    /// Waits until trigger `name` satisfies `done`; returns it.
    async fn trigger_until(&self, name: &str, what: &str, done: impl Fn(&TriggerRecord) -> bool) -> TriggerRecord {
        eventually(what, || async {
            let t = self.trigger(name).await;
            done(&t).then_some(t)
        })
        .await
    }

    /// A barrier: creates a job of function `probe_fn` (ready) and waits for its run. Every
    /// write made before this call has been reconciled when it returns.
    async fn barrier(&self, probe: &str) {
        let probe_fn = format!("{probe}-fn");
        self.reg.seed_function(&FunctionBuilder::new(&probe_fn).ready_at(1).build()).await.expect("probe fn");
        self.reg.create_job(&JobBuilder::new(probe, &probe_fn).build().into()).await.expect("probe");
        self.job_until(probe, "the probe job ran", |j| j.status.phase == JobPhase::Succeeded).await;
    }

    /// The runs of job `job` the executor saw.
    fn runs_of(&self, job: &str) -> Vec<serde_json::Value> {
        self.exec.invocations().into_iter().map(|c| c.event).filter(|e| e["job"] == job).collect()
    }

    async fn stop(self) {
        self.stop.send_replace(true);
        tokio::time::timeout(DEADLINE, self.controllers).await.expect("controllers stop").expect("join");
    }
}

/// Polls `check` until it returns `Some`, failing the test after [`DEADLINE`].
async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn triggers_wait_for_their_function_and_become_active_when_it_is_ready() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg.create_trigger(&TriggerBuilder::http("web", "f").build().into()).await.expect("http");
    h.reg
        .create_trigger(&TriggerBuilder::cron("nightly", "f").schedule("0 1 * * *").build().into())
        .await
        .expect("cron");
    let t =
        h.trigger_until("web", "waiting for a missing function", |t| t.status.message.contains("does not exist")).await;
    assert_eq!(t.status.phase, TriggerPhase::Waiting);

    h.reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("function");
    let t = h.trigger_until("web", "waiting for code", |t| t.status.message.contains("no code")).await;
    assert_eq!(t.status.phase, TriggerPhase::Waiting);
    let ready = t.status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready condition");
    assert_eq!(ready.status, "False");

    h.reg.deploy("default", "f", "aa").await.expect("deploy");
    let web = h.trigger_until("web", "active", |t| t.status.phase == TriggerPhase::Active).await;
    assert_eq!(web.status.url.as_deref(), Some("/fn/default/f"));
    assert!(web.status.message.contains("version 1 is ready"), "{}", web.status.message);
    let cron = h.trigger_until("nightly", "active", |t| t.status.phase == TriggerPhase::Active).await;
    assert!(cron.status.next_fire.is_some(), "an active cron trigger knows its next tick");

    // Disabling the function sends its triggers back to waiting.
    let mut spec = h.reg.get_function("default", "f").await.expect("f").spec;
    spec.enabled = false;
    h.reg.replace_spec("default", "f", &spec, None).await.expect("disable");
    let web = h.trigger_until("web", "waiting again", |t| t.status.phase == TriggerPhase::Waiting).await;
    assert!(web.status.message.contains("disabled"), "{}", web.status.message);
    h.stop().await;
}

#[tokio::test]
async fn a_job_waits_then_runs_once_its_function_is_ready_and_records_the_outcome() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg
        .create_job(&JobBuilder::new("backfill", "f").payload(json!({"day": "2026-11-28"})).build().into())
        .await
        .expect("job");
    let j = h.job_until("backfill", "waiting", |j| j.status.message.contains("does not exist")).await;
    assert_eq!((j.status.phase, j.status.last_run_id), (JobPhase::Waiting, None));

    h.exec.hold("f");
    h.reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("function");
    h.reg.deploy("default", "f", "aa").await.expect("deploy");
    let j = h.job_until("backfill", "running", |j| j.status.phase == JobPhase::Running).await;
    assert_eq!(j.status.last_run_id, Some(1), "the run is recorded before the call");
    h.exec.release("f");

    let j = h.job_until("backfill", "succeeded", |j| j.status.phase == JobPhase::Succeeded).await;
    let run = j.status.last_run.expect("last run");
    assert_eq!((run.run_id, run.status_code, run.outcome.as_str()), (1, 200, "ok"));
    assert_eq!(run.output_excerpt, "ok");
    let complete = j.status.conditions.iter().find(|c| c.type_ == "Complete").expect("Complete");
    assert_eq!((complete.status.as_str(), complete.reason.as_str()), ("True", "Succeeded"));
    let runs = h.runs_of("backfill");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0],
        json!({"source": "sless.job", "job": "backfill", "run_id": 1, "payload": {"day": "2026-11-28"}})
    );
    h.stop().await;
}

#[tokio::test]
async fn a_run_that_fails_fails_the_job_with_its_outcome() {
    let h = Harness::start(NO_RESYNC).await;
    h.exec.on_invoke("f", InvokeResult::Failed { error_type: "ValueError".into(), error_message: "bad day".into() });
    h.reg.seed_function(&FunctionBuilder::new("f").ready_at(1).build()).await.expect("function");
    h.reg.create_job(&JobBuilder::new("j", "f").build().into()).await.expect("job");
    let j = h.job_until("j", "failed", |j| j.status.phase == JobPhase::Failed).await;
    let run = j.status.last_run.expect("last run");
    assert_eq!((run.status_code, run.outcome.as_str()), (502, "error"));
    assert!(run.output_excerpt.contains("bad day"), "{}", run.output_excerpt);
    assert!(j.status.message.contains("failed"), "{}", j.status.message);
    h.stop().await;
}

#[tokio::test]
async fn bumping_run_id_runs_the_job_again_and_the_same_run_id_does_not() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg.seed_function(&FunctionBuilder::new("f").ready_at(1).build()).await.expect("function");
    h.reg.create_job(&JobBuilder::new("j", "f").run_id(1).build().into()).await.expect("job");
    h.job_until("j", "the first run", |j| j.status.phase == JobPhase::Succeeded).await;

    // A spec change that keeps run_id (a new payload) does not run the job again.
    let mut spec = h.job("j").await.spec;
    spec.payload = json!({"changed": true});
    h.reg.replace_job_spec("default", "j", &spec, None).await.expect("same run_id");
    h.barrier("probe").await;
    assert_eq!(h.runs_of("j").len(), 1, "the same run_id ran again");
    assert_eq!(h.job("j").await.status.phase, JobPhase::Succeeded);

    spec.run_id = 2;
    h.reg.replace_job_spec("default", "j", &spec, None).await.expect("bump");
    let j = h.job_until("j", "the second run", |j| j.status.last_run.as_ref().is_some_and(|r| r.run_id == 2)).await;
    assert_eq!((j.status.phase, j.status.last_run_id), (JobPhase::Succeeded, Some(2)));
    let runs = h.runs_of("j");
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[1]["run_id"].clone(), runs[1]["payload"].clone()), (json!(2), json!({"changed": true})));
    h.stop().await;
}

#[tokio::test]
async fn run_id_zero_is_skipped_and_a_disabled_job_waits_without_running() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg.seed_function(&FunctionBuilder::new("f").ready_at(1).build()).await.expect("function");
    h.reg.create_job(&JobBuilder::new("zero", "f").run_id(0).build().into()).await.expect("job");
    h.reg.create_job(&JobBuilder::new("off", "f").disabled().build().into()).await.expect("job");
    let zero = h.job_until("zero", "skipped", |j| j.status.phase == JobPhase::Skipped).await;
    assert_eq!(zero.status.last_run_id, None);
    let off = h.job_until("off", "waiting", |j| j.status.message.contains("disabled")).await;
    assert_eq!(off.status.phase, JobPhase::Waiting);
    h.barrier("probe").await;
    assert!(h.runs_of("zero").is_empty() && h.runs_of("off").is_empty(), "{:?}", h.exec.invocations());

    // Enabling the job runs it.
    let mut spec = off.spec;
    spec.enabled = true;
    h.reg.replace_job_spec("default", "off", &spec, None).await.expect("enable");
    h.job_until("off", "the run once enabled", |j| j.status.phase == JobPhase::Succeeded).await;
    assert_eq!(h.runs_of("off").len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_failed_function_fails_its_triggers_and_jobs() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("function");
    h.reg.create_trigger(&TriggerBuilder::cron("t", "f").build().into()).await.expect("trigger");
    h.reg.create_job(&JobBuilder::new("j", "f").build().into()).await.expect("job");
    h.job_until("j", "waiting", |j| j.status.message.contains("no code")).await;

    h.reg.deploy_failing("default", "f", "aa", "SyntaxError: invalid syntax").await.expect("failing build");
    let t = h.trigger_until("t", "failed", |t| t.status.phase == TriggerPhase::Failed).await;
    assert!(t.status.message.contains("SyntaxError"), "{}", t.status.message);
    assert_eq!(t.status.next_fire, None);
    let j = h.job_until("j", "failed", |j| j.status.phase == JobPhase::Failed).await;
    assert!(j.status.message.contains("SyntaxError"), "{}", j.status.message);
    assert_eq!(j.status.last_run_id, None, "a failed function's job does not use up its run_id");

    // A fixed upload makes them go.
    h.reg.deploy("default", "f", "bb").await.expect("fixed");
    h.trigger_until("t", "active", |t| t.status.phase == TriggerPhase::Active).await;
    h.job_until("j", "the run", |j| j.status.phase == JobPhase::Succeeded).await;
    h.stop().await;
}

#[tokio::test]
async fn a_lost_notification_is_repaired_by_the_periodic_resync() {
    let h = Harness::start(Duration::from_millis(200)).await;
    h.reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("function");
    h.reg.create_trigger(&TriggerBuilder::http("web", "f").build().into()).await.expect("trigger");
    h.reg.create_job(&JobBuilder::new("j", "f").build().into()).await.expect("job");
    h.job_until("j", "waiting", |j| j.status.message.contains("no code")).await;

    // The deploy is stored but nobody hears of it (and, silenced, nor of the controllers'
    // own status writes): only the resync can find it.
    h.reg.silence();
    h.reg.deploy("default", "f", "aa").await.expect("deploy");
    assert!(h.reg.lost() > 0);
    h.trigger_until("web", "active after a resync", |t| t.status.phase == TriggerPhase::Active).await;
    let j = h.job_until("j", "run after a resync", |j| j.status.phase == JobPhase::Succeeded).await;
    assert_eq!(j.status.last_run_id, Some(1));
    assert_eq!(h.runs_of("j").len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_pass_that_hits_a_storage_failure_is_retried() {
    let h = Harness::start(Duration::from_millis(300)).await;
    h.reg.seed_function(&FunctionBuilder::new("f").ready_at(1).build()).await.expect("function");
    h.reg.silence();
    h.reg.create_job(&JobBuilder::new("j", "f").build().into()).await.expect("job");
    h.reg.unsilence();
    // Every call fails until the controllers have hit it at least once.
    h.reg.failures().fail_all(true);
    h.reg.announce_only(Change { kind: Kind::Job, namespace: "default".into(), name: "j".into() });
    eventually("a failed pass", || async { (h.reg.failures().failed() > 0).then_some(()) }).await;
    h.reg.failures().fail_all(false);
    h.job_until("j", "the run after the retry", |j| j.status.phase == JobPhase::Succeeded).await;
    assert_eq!(h.runs_of("j").len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_cron_trigger_fires_its_function_with_a_cron_event() {
    let h = Harness::start(NO_RESYNC).await;
    h.reg.seed_function(&FunctionBuilder::new("f").ready_at(1).build()).await.expect("function");
    h.reg
        .create_trigger(
            &TriggerBuilder::cron("tick", "f").schedule("@every 1s").payload(json!({"n": 1})).build().into(),
        )
        .await
        .expect("trigger");
    let call = eventually("a cron call", || async { h.exec.invocations_of("f").into_iter().next() }).await;
    assert_eq!((call.event["source"].clone(), call.event["detail"].clone()), (json!("sless.cron"), json!({"n": 1})));
    assert_eq!(call.event["resources"], json!(["default/tick"]));
    let t = h.trigger("tick").await;
    assert!(t.status.last_fired.is_some(), "the tick is recorded");
    h.stop().await;
}

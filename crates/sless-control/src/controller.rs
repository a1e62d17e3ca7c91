//! The trigger and job controllers (docs/architecture.md, "Triggers and jobs"), the same for
//! every backend. One loop reconciles every trigger and job whenever the registry reports a
//! change (so a trigger created before its function is ready starts as soon as the function
//! is), at each cron tick, and on a periodic resync (the safety net for lost notifications). The decisions are the pure
//! functions of `sless_core::decide` and `sless_core::schedule`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sless_core::decide::{JobAction, job_action, trigger_phase};
use sless_core::event::{cron_event, job_event, raw};
use sless_core::invocation::Source;
use sless_core::job::{JobPhase, JobRecord, JobRun, JobStatus};
use sless_core::schedule::Schedule;
use sless_core::status::set_condition;
use sless_core::traits::{Executor, FunctionRecord, Registry};
use sless_core::trigger::{TriggerPhase, TriggerRecord, TriggerStatus, TriggerType};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::dispatcher::{CallSource, Dispatcher, Rejection};
use sless_core::event::{PayloadFormat, Reply};

/// Bytes of a job's response kept in its status.
const EXCERPT_BYTES: usize = 1024;

/// Starts the controllers; they stop when `shutdown` becomes true (runs in flight are
/// cancelled: a cron tick or job run is started at most once, never repeated).
pub fn spawn_controllers(
    registry: Arc<dyn Registry>,
    executor: Arc<dyn Executor>,
    dispatcher: Arc<Dispatcher>,
    resync: Duration,
    shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let changes = registry.subscribe();
    let ctl = Controller { registry, executor, dispatcher, prewarmed: HashMap::new(), runs: JoinSet::new() };
    tokio::spawn(ctl.run(changes, resync, shutdown).instrument(tracing::info_span!("controllers")))
}

struct Controller {
    registry: Arc<dyn Registry>,
    executor: Arc<dyn Executor>,
    dispatcher: Arc<Dispatcher>,
    /// The tick each cron trigger was last prewarmed for.
    prewarmed: HashMap<(String, String), DateTime<Utc>>,
    /// Cron calls and job runs in flight; a job run ends with its result, which this task
    /// (the only writer of job statuses) records.
    runs: JoinSet<Option<JobDone>>,
}

/// A finished job run, to be recorded by the controller.
struct JobDone {
    namespace: String,
    name: String,
    run_id: u64,
    status: JobStatus,
}

impl Controller {
    async fn run(
        mut self,
        mut changes: broadcast::Receiver<sless_core::traits::Change>,
        resync: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let wake = match self.reconcile_all().await {
                Ok(wake) => wake,
                Err(e) => {
                    tracing::warn!(error = %e, "reconcile failed; retrying");
                    Some(Utc::now() + chrono::Duration::seconds(1))
                }
            };
            let until_wake = wake.and_then(|w| (w - Utc::now()).to_std().ok()).unwrap_or(Duration::ZERO).min(resync);
            let sleep = if wake.is_some() { until_wake } else { resync };
            let mut finished = None;
            tokio::select! {
                change = changes.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = change {
                        return;
                    }
                    // Coalesce a burst of changes into one pass.
                    while changes.try_recv().is_ok() {}
                }
                _ = tokio::time::sleep(sleep) => {}
                _ = shutdown.wait_for(|s| *s) => {
                    self.runs.abort_all();
                    return;
                }
                Some(done) = self.runs.join_next(), if !self.runs.is_empty() => {
                    finished = done.ok().flatten();
                }
            }
            if let Some(done) = finished {
                self.record_run(done).await;
            }
        }
    }

    /// One pass over every trigger and job. Returns when the next cron tick (or prewarm) is.
    async fn reconcile_all(&mut self) -> sless_core::Result<Option<DateTime<Utc>>> {
        let functions: HashMap<(String, String), FunctionRecord> = self
            .registry
            .all_functions()
            .await?
            .into_iter()
            .map(|f| ((f.namespace.clone(), f.name.clone()), f))
            .collect();
        let mut wake: Option<DateTime<Utc>> = None;
        let mut earliest = |t: DateTime<Utc>| wake = Some(wake.map_or(t, |w| w.min(t)));
        for t in self.registry.all_triggers().await? {
            let function = functions.get(&(t.namespace.clone(), t.spec.function.clone()));
            match self.reconcile_trigger(&t, function).await {
                Ok(Some(next)) => earliest(next),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(namespace = %t.namespace, trigger = %t.name, error = %e, "trigger reconcile failed")
                }
            }
        }
        for j in self.registry.all_jobs().await? {
            let function = functions.get(&(j.namespace.clone(), j.spec.function.clone()));
            if let Err(e) = self.reconcile_job(&j, function).await {
                tracing::warn!(namespace = %j.namespace, job = %j.name, error = %e, "job reconcile failed");
            }
        }
        Ok(wake)
    }

    async fn reconcile_trigger(
        &mut self,
        t: &TriggerRecord,
        function: Option<&FunctionRecord>,
    ) -> sless_core::Result<Option<DateTime<Utc>>> {
        let now = sless_core::time::now();
        let (mut phase, mut message) = trigger_phase(&t.spec, function);
        let mut status = t.status.clone();
        let mut wake = None;
        status.url = (t.spec.kind == TriggerType::Http).then(|| format!("/fn/{}/{}", t.namespace, t.spec.function));
        status.next_fire = None;
        if t.spec.kind == TriggerType::Cron {
            match Schedule::parse(t.spec.schedule.as_deref().unwrap_or_default(), &t.spec.timezone) {
                Err(e) => {
                    phase = TriggerPhase::Failed;
                    message = format!("invalid schedule: {e}");
                }
                Ok(schedule) if phase == TriggerPhase::Active => {
                    let anchor = t.updated_at;
                    if let Some(tick) = schedule.due(anchor, status.last_fired, now) {
                        // Recorded before the call: a tick is fired at most once, even across a crash.
                        status.last_fired = Some(tick);
                        self.write_trigger_status(t, &status, phase, &message, now).await?;
                        self.fire(t, tick).await;
                    }
                    status.next_fire = schedule.next_fire(anchor, status.last_fired, now);
                    if let Some(next) = status.next_fire {
                        wake = Some(next);
                        let key = (t.namespace.clone(), t.name.clone());
                        let prewarm = chrono::Duration::seconds(i64::from(t.spec.prewarm_sec));
                        if t.spec.prewarm_sec > 0 {
                            if now >= next - prewarm && self.prewarmed.get(&key) != Some(&next) {
                                self.prewarmed.insert(key, next);
                                self.prewarm(t).await;
                            } else if now < next - prewarm {
                                wake = Some(next - prewarm);
                            }
                        }
                    }
                }
                Ok(_) => {}
            }
        }
        self.write_trigger_status(t, &status, phase, &message, now).await?;
        Ok(wake)
    }

    async fn write_trigger_status(
        &self,
        t: &TriggerRecord,
        status: &TriggerStatus,
        phase: TriggerPhase,
        message: &str,
        now: DateTime<Utc>,
    ) -> sless_core::Result<()> {
        let mut next = status.clone();
        next.phase = phase;
        next.message = message.to_string();
        set_condition(
            &mut next.conditions,
            "Ready",
            phase == TriggerPhase::Active,
            if phase == TriggerPhase::Active { "Active" } else { "NotActive" },
            message,
            now,
        );
        if next != t.status {
            self.registry.update_trigger_status(&t.namespace, &t.name, &next).await?;
        }
        Ok(())
    }

    async fn fire(&mut self, t: &TriggerRecord, tick: DateTime<Utc>) {
        let dispatcher = self.dispatcher.clone();
        let (ns, name, function, payload) =
            (t.namespace.clone(), t.name.clone(), t.spec.function.clone(), t.spec.payload.clone());
        let span = tracing::info_span!("cron", namespace = %ns, trigger = %name, %tick);
        self.runs.spawn(
            async move {
                let from = CallSource { source: Source::Cron, name: Some(name.clone()) };
                let target = match dispatcher.target(&ns, &function).await {
                    Ok(t) => t,
                    Err(e) => {
                        dispatcher.rejected(&ns, &function, &from, Rejection::not_ready(e.to_string()));
                        return None;
                    }
                };
                let id = uuid::Uuid::now_v7().to_string();
                let event = raw(&cron_event(&id, &ns, &name, tick, &payload));
                if let Err(e) = dispatcher.call(&target, id, event, &from, 0, Reply::Http(PayloadFormat::V1)).await {
                    tracing::warn!(error = %e, "cron call failed");
                }
                None
            }
            .instrument(span),
        );
    }

    async fn prewarm(&self, t: &TriggerRecord) {
        match self.dispatcher.target(&t.namespace, &t.spec.function).await {
            Ok(target) => {
                if let Err(e) = self.executor.prewarm(&target).await {
                    tracing::warn!(trigger = %t.name, error = %e, "prewarm failed");
                }
            }
            Err(e) => tracing::debug!(trigger = %t.name, error = %e, "nothing to prewarm"),
        }
    }

    async fn reconcile_job(&mut self, j: &JobRecord, function: Option<&FunctionRecord>) -> sless_core::Result<()> {
        let now = sless_core::time::now();
        match job_action(&j.spec, &j.status, function) {
            JobAction::Keep => Ok(()),
            JobAction::Set(phase, message) => {
                let mut status = j.status.clone();
                status.phase = phase;
                status.message = message.clone();
                let complete = phase == JobPhase::Skipped;
                set_condition(
                    &mut status.conditions,
                    "Complete",
                    complete,
                    if complete { "Skipped" } else { "Waiting" },
                    &message,
                    now,
                );
                if status != j.status {
                    self.registry.update_job_status(&j.namespace, &j.name, &status).await?;
                }
                Ok(())
            }
            JobAction::Run => {
                let mut status = j.status.clone();
                status.phase = JobPhase::Running;
                status.message = format!("running run_id {}", j.spec.run_id);
                // Recorded before the call: a run_id runs at most once, even across a crash.
                status.last_run_id = Some(j.spec.run_id);
                set_condition(&mut status.conditions, "Complete", false, "Running", &status.message.clone(), now);
                self.registry.update_job_status(&j.namespace, &j.name, &status).await?;
                self.start_run(j.clone(), status);
                Ok(())
            }
        }
    }

    /// Records a finished run, unless a newer `run_id` started meanwhile.
    async fn record_run(&self, done: JobDone) {
        match self.registry.get_job(&done.namespace, &done.name).await {
            Ok(current) if current.status.last_run_id == Some(done.run_id) => {
                if let Err(e) = self.registry.update_job_status(&done.namespace, &done.name, &done.status).await {
                    tracing::warn!(job = %done.name, error = %e, "cannot record the job's result");
                }
            }
            Ok(_) | Err(sless_core::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!(job = %done.name, error = %e, "cannot record the job's result"),
        }
    }

    fn start_run(&mut self, j: JobRecord, status: JobStatus) {
        let dispatcher = self.dispatcher.clone();
        let span = tracing::info_span!("job", namespace = %j.namespace, job = %j.name, run_id = j.spec.run_id);
        self.runs.spawn(
            async move {
                let from = CallSource { source: Source::Job, name: Some(j.name.clone()) };
                let started_at = sless_core::time::now();
                let id = uuid::Uuid::now_v7().to_string();
                let result = match dispatcher.target(&j.namespace, &j.spec.function).await {
                    Ok(target) => {
                        dispatcher
                            .call(
                                &target,
                                id.clone(),
                                raw(&job_event(&j.name, j.spec.run_id, &j.spec.payload)),
                                &from,
                                0,
                                Reply::Http(PayloadFormat::V1),
                            )
                            .await
                    }
                    Err(e) => Err(e),
                };
                let mut status = status;
                let run = match result {
                    Ok(answer) => JobRun {
                        run_id: j.spec.run_id,
                        invocation_id: id,
                        status_code: answer.response.status,
                        outcome: answer.outcome.as_str().into(),
                        duration_ms: (Utc::now() - started_at).num_milliseconds().max(0) as u64,
                        output_excerpt: excerpt(&answer.response.body),
                        started_at,
                    },
                    Err(e) => {
                        dispatcher.rejected(&j.namespace, &j.spec.function, &from, Rejection::not_ready(e.to_string()));
                        JobRun {
                            run_id: j.spec.run_id,
                            invocation_id: String::new(),
                            status_code: 503,
                            outcome: "rejected".into(),
                            duration_ms: 0,
                            output_excerpt: e.to_string(),
                            started_at,
                        }
                    }
                };
                let ok = run.outcome == "ok" && run.status_code < 400;
                status.phase = if ok { JobPhase::Succeeded } else { JobPhase::Failed };
                status.message = format!(
                    "run_id {} {} with status {} in {} ms",
                    run.run_id,
                    if ok { "succeeded" } else { "failed" },
                    run.status_code,
                    run.duration_ms
                );
                set_condition(
                    &mut status.conditions,
                    "Complete",
                    true,
                    if ok { "Succeeded" } else { "Failed" },
                    &status.message.clone(),
                    sless_core::time::now(),
                );
                status.last_run = Some(run);
                Some(JobDone { namespace: j.namespace, name: j.name, run_id: j.spec.run_id, status })
            }
            .instrument(span),
        );
    }
}

fn excerpt(body: &[u8]) -> String {
    let cut = &body[..body.len().min(EXCERPT_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}

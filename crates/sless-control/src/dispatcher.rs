//! Every call of a function, whatever its source (invoke API, http trigger, cron, job), goes
//! through the [`Dispatcher`]: it finds the version to run, calls the executor, turns the
//! result into an HTTP answer, counts it and records it.

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use sless_core::event::{Answer, answer, platform_log_line, report_line};
use sless_core::invocation::{ColdStart, InvocationRecord, Outcome, Source};
use sless_core::traits::{Executor, Invocation, InvokeTarget, Registry};
use sless_core::trigger::TriggerRecord;

use crate::Result;
use crate::metrics::{InvocationLabels, Metrics};
use crate::recorder::Recorder;
use crate::routes::RouteCache;

/// Where a call came from, for the record and the metrics.
#[derive(Debug, Clone)]
pub struct CallSource {
    /// The kind of source.
    pub source: Source,
    /// The trigger's or job's name.
    pub name: Option<String>,
}

impl CallSource {
    /// The invoke API.
    pub fn invoke() -> Self {
        CallSource { source: Source::Invoke, name: None }
    }
}

/// A call the platform refused, for its invocation record.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The HTTP status answered (503, 413, …).
    pub status: u16,
    /// e.g. `Function.NotReady`.
    pub error_type: &'static str,
    /// Why.
    pub message: String,
    /// The request body's size in bytes, as far as it was read.
    pub request_bytes: u64,
}

impl Rejection {
    /// A 503 `Function.NotReady`.
    pub fn not_ready(message: impl Into<String>) -> Self {
        Rejection { status: 503, error_type: "Function.NotReady", message: message.into(), request_bytes: 0 }
    }
}

/// Calls functions and records every call.
pub struct Dispatcher {
    routes: RouteCache,
    executor: Arc<dyn Executor>,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    max_response_bytes: usize,
    /// Where the platform's own lines about a call (timeouts, crashes) are published too.
    logs: Option<Arc<crate::LogHub>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dispatcher")
    }
}

impl Dispatcher {
    /// A dispatcher answering with at most `max_response_bytes` of body.
    pub fn new(
        registry: Arc<dyn Registry>,
        executor: Arc<dyn Executor>,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        max_response_bytes: usize,
    ) -> Self {
        Dispatcher { routes: RouteCache::new(registry), executor, recorder, metrics, max_response_bytes, logs: None }
    }

    /// Also publishes the platform's lines about a call (`<id> Task timed out after N.00
    /// seconds`, a crash, running out of memory) to `logs`, beside the function's own output,
    /// as Lambda puts them into the function's log stream.
    pub fn with_logs(mut self, logs: Arc<crate::LogHub>) -> Self {
        self.logs = Some(logs);
        self
    }

    /// The metrics the dispatcher counts into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// What to run for a function now (from memory while the registry is unchanged, see
    /// [`RouteCache`]). Errors: `Core(NotFound)` for a missing function,
    /// [`crate::Error::NotReady`] when it has no active version or is disabled.
    pub async fn target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        self.routes.target(namespace, name).await
    }

    /// The function's enabled http trigger, `None` without one (cached like
    /// [`Dispatcher::target`]).
    pub async fn http_trigger(&self, namespace: &str, function: &str) -> Result<Option<TriggerRecord>> {
        self.routes.http_trigger(namespace, function).await
    }

    /// Calls `target` with `event` and records the call under `request_id`; `reply` says how
    /// a returned value becomes the response.
    /// Errors only for platform failures (the function's failures are in the answer).
    pub async fn call(
        &self,
        target: &InvokeTarget,
        request_id: String,
        event: Box<RawValue>,
        from: &CallSource,
        request_bytes: u64,
        reply: sless_core::event::Reply,
    ) -> Result<Answer> {
        let started_at = sless_core::time::now();
        let started = Instant::now();
        let mut outcome = self.executor.invoke(target, Invocation { request_id: request_id.clone(), event }).await?;
        let elapsed = started.elapsed();
        // The platform's own lines: why the call ended, if the function did not end it, and the
        // REPORT line every call gets, as in Lambda's log stream.
        let platform = platform_log_line(&outcome.result, target.spec.timeout_sec, &request_id);
        let report =
            report_line(&request_id, elapsed, target.spec.memory_mb, outcome.max_memory_bytes, outcome.init_duration);
        for line in platform.into_iter().chain([report]) {
            if let Some(logs) = &self.logs {
                let entry = crate::LogLine {
                    time: sless_core::time::now(),
                    request_id: Some(request_id.clone()),
                    line: line.clone(),
                };
                logs.publish(&target.namespace, &target.name, entry);
            }
            outcome.logs.push(line);
        }
        let answer = answer(&outcome.result, reply, target.spec.timeout_sec, self.max_response_bytes);
        let labels = Metrics::function(&target.namespace, &target.name);
        self.metrics.invocation_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        if outcome.cold_start.is_some() {
            self.metrics.cold_starts.get_or_create(&labels).inc();
        }
        for line in &outcome.logs {
            tracing::debug!(target: "function", namespace = %target.namespace, function = %target.name, request_id = %request_id, "{line}");
        }
        // One line per call at `debug` (the invocation record holds the same and more): a
        // line per call at `info` costs a busy server a measurable share of its time.
        tracing::debug!(
            namespace = %target.namespace, function = %target.name, version = target.version, request_id = %request_id,
            source = from.source.as_str(), status = answer.response.status, outcome = answer.outcome.as_str(),
            duration_ms = elapsed.as_secs_f64() * 1000.0, cold_start = outcome.cold_start.map(ColdStart::as_str), "invocation"
        );
        let (error_type, error_message) = match &answer.error {
            Some((t, m)) => (Some(t.clone()), Some(m.clone())),
            None => (None, None),
        };
        self.finish(InvocationRecord {
            id: request_id,
            namespace: target.namespace.clone(),
            function: target.name.clone(),
            version: Some(target.version),
            source: from.source,
            source_name: from.name.clone(),
            started_at,
            duration_ms: elapsed.as_millis() as u64,
            status: answer.response.status,
            outcome: answer.outcome,
            error_type,
            error_message,
            request_bytes,
            response_bytes: answer.response.body.len() as u64,
            cold_start: outcome.cold_start.is_some(),
            cold_start_kind: outcome.cold_start,
            logs: outcome.logs,
        });
        Ok(answer)
    }

    /// Records a call the platform refused before running it (not ready, too large, …).
    pub fn rejected(&self, namespace: &str, function: &str, from: &CallSource, rejection: Rejection) {
        self.finish(InvocationRecord {
            id: uuid::Uuid::now_v7().to_string(),
            namespace: namespace.into(),
            function: function.into(),
            version: None,
            source: from.source,
            source_name: from.name.clone(),
            started_at: sless_core::time::now(),
            duration_ms: 0,
            status: rejection.status,
            outcome: Outcome::Rejected,
            error_type: Some(rejection.error_type.into()),
            error_message: Some(rejection.message),
            request_bytes: rejection.request_bytes,
            response_bytes: 0,
            cold_start: false,
            cold_start_kind: None,
            logs: Vec::new(),
        });
    }

    fn finish(&self, record: InvocationRecord) {
        self.metrics
            .invocations
            .get_or_create(&InvocationLabels {
                namespace: record.namespace.clone(),
                function: record.function.clone(),
                trigger: record.source.as_str().into(),
                outcome: record.outcome.as_str().into(),
            })
            .inc();
        self.recorder.record(record);
    }
}

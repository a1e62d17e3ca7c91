//! Scripted pod outcomes: what KWOK's stages cannot give a test (docs/kubernetes-testing.md,
//! "Scripted pods").
//!
//! A pod whose labels include [`SCRIPTED_LABEL`]` = "true"` (put it in a Job's or Deployment's
//! pod template with [`mark_scripted`]) is left alone by KWOK (the `sless-scripted-hold` stage
//! in `testenv/kube/stages/scripted.yaml`): it is scheduled to a fake node by the real
//! kube-scheduler and then stays `Pending` until the test calls [`set_outcome`], which writes
//! the status a kubelet would write through the pods' `status` subresource: a running, ready
//! pod, or containers that ended with an exit code, and, for a failure, the termination message
//! the kubelet would derive from the log. The log itself is not served: there is no kubelet, so
//! `pods/log` answers with an error.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

use crate::{Error, Result};

/// The label that hands a pod's status to the test (value `"true"`).
pub const SCRIPTED_LABEL: &str = "kube-testenv.sless.invalid/scripted";

/// The kubelet's bound on a termination message taken from the log
/// (`terminationMessagePolicy: FallbackToLogsOnError`): the last 80 lines, at most 2048 bytes.
pub const LOG_TAIL_LINES: usize = 80;
/// See [`LOG_TAIL_LINES`].
pub const LOG_TAIL_BYTES: usize = 2048;

/// Adds [`SCRIPTED_LABEL`] to `meta`'s labels (a pod's or a pod template's metadata).
pub fn mark_scripted(meta: &mut ObjectMeta) {
    meta.labels.get_or_insert_with(Default::default).insert(SCRIPTED_LABEL.into(), "true".into());
}

/// What a scripted pod's containers do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every container runs and is ready; the pod is `Running` and `Ready`.
    Running,
    /// Every container exited 0; the pod is `Succeeded`.
    Succeeded,
    /// Every container exited 0 after writing `message` to its termination-message file
    /// (`terminationMessagePath`, e.g. a builder's image digest); the pod is `Succeeded`.
    SucceededWith {
        /// The termination message, as the kubelet reads it from the file.
        message: String,
    },
    /// Every container exited with `exit_code` (not 0) after writing `log`; the pod is
    /// `Failed`. A container with `terminationMessagePolicy: FallbackToLogsOnError` gets the
    /// log's tail as its termination message ([`termination_message`]); one with the default
    /// policy (`File`) gets none, as no termination-message file is written.
    Failed {
        /// The containers' exit code, 1..=255.
        exit_code: i32,
        /// What the containers wrote to standard output and error.
        log: String,
    },
}

/// The termination message the kubelet derives from a failed container's `log`: its last
/// [`LOG_TAIL_LINES`] lines, then at most the last [`LOG_TAIL_BYTES`] bytes of those (cut at a
/// character boundary).
pub fn termination_message(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
    let mut start = tail.len().saturating_sub(LOG_TAIL_BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    tail[start..].to_string()
}

/// Writes `outcome` as the status of pod `name` (through the `status` subresource, as a
/// kubelet does) and returns the updated pod.
///
/// # Errors
/// [`Error::Pod`] when the pod is not scheduled yet (no `spec.nodeName`: a kubelet would not
/// have started it) or a failure's exit code is 0; [`Error::Kube`] when a request fails.
pub async fn set_outcome(pods: &Api<Pod>, name: &str, outcome: &Outcome) -> Result<Pod> {
    let pod = pods.get(name).await?;
    let spec = pod.spec.unwrap_or_default();
    if spec.node_name.is_none() {
        return Err(Error::Pod { pod: name.into(), message: "not scheduled to a node yet".into() });
    }
    if let Outcome::Failed { exit_code: 0, .. } = outcome {
        return Err(Error::Pod { pod: name.into(), message: "a failure needs a non-zero exit code".into() });
    }
    // Whole seconds, as the API server stores `metav1.Time`.
    let now = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or_default();
    let containers: Vec<Value> = spec
        .containers
        .iter()
        .map(|c| {
            let state = match outcome {
                Outcome::Running => json!({"running": {"startedAt": now}}),
                Outcome::Succeeded => json!({"terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}),
                Outcome::SucceededWith { message } => json!({"terminated": {
                    "exitCode": 0, "reason": "Completed", "message": message, "startedAt": now, "finishedAt": now}}),
                Outcome::Failed { exit_code, log } => {
                    let mut terminated = json!({
                        "exitCode": exit_code, "reason": "Error", "startedAt": now, "finishedAt": now});
                    if c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError") {
                        terminated["message"] = json!(termination_message(log));
                    }
                    json!({ "terminated": terminated })
                }
            };
            json!({
                "name": c.name,
                "image": c.image,
                "imageID": "",
                "ready": *outcome == Outcome::Running,
                "started": *outcome == Outcome::Running,
                "restartCount": 0,
                "state": state,
            })
        })
        .collect();
    let (phase, ready) = match outcome {
        Outcome::Running => ("Running", "True"),
        Outcome::Succeeded | Outcome::SucceededWith { .. } => ("Succeeded", "False"),
        Outcome::Failed { .. } => ("Failed", "False"),
    };
    let condition = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastTransitionTime": now});
    let status = json!({
        "status": {
            "phase": phase,
            "startTime": now,
            "conditions": [
                condition("PodScheduled", "True"),
                condition("Initialized", "True"),
                condition("ContainersReady", ready),
                condition("Ready", ready),
            ],
            "containerStatuses": containers,
        }
    });
    Ok(pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await?)
}

/// Waits until a pod matching the label `selector` is scheduled to a node, and returns it.
///
/// # Errors
/// [`Error::Timeout`] after `timeout`; [`Error::Kube`] when a request fails.
pub async fn scheduled_pod(pods: &Api<Pod>, selector: &str, timeout: Duration) -> Result<Pod> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = pods.list(&ListParams::default().labels(selector)).await?;
        if let Some(pod) = list.items.into_iter().find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        {
            return Ok(pod);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Timeout { what: format!("a scheduled pod with labels {selector}"), after: timeout });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_message_keeps_the_last_80_lines() {
        let log: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let message = termination_message(&log);
        assert!(message.starts_with("line 21\n"), "{message}");
        assert!(message.ends_with("line 100"));
    }

    #[test]
    fn termination_message_keeps_the_last_2048_bytes_at_a_char_boundary() {
        let log = format!("{}{}", "é".repeat(2000), "end");
        let message = termination_message(&log);
        assert!(message.len() <= LOG_TAIL_BYTES);
        assert!(message.len() >= LOG_TAIL_BYTES - 1);
        assert!(message.ends_with("end"));
    }
}

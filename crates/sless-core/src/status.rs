//! Status objects: phases, messages and Kubernetes-style conditions (docs/architecture.md, "Concepts").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Lifecycle phase of a function: `Pending` (no code yet) → `Building` → `Ready` / `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum FunctionPhase {
    /// Created, no code uploaded yet.
    Pending,
    /// A version is being built.
    Building,
    /// A version is active and can be called.
    Ready,
    /// No version can serve (the build or the start failed); `message` says why.
    Failed,
}

/// Build phase of one version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum VersionPhase {
    /// Being built.
    Building,
    /// Built and loadable.
    Ready,
    /// The build failed; the build log says why.
    Failed,
}

impl VersionPhase {
    /// The phase's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionPhase::Building => "Building",
            VersionPhase::Ready => "Ready",
            VersionPhase::Failed => "Failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [VersionPhase::Building, VersionPhase::Ready, VersionPhase::Failed].into_iter().find(|p| p.as_str() == s)
    }
}

/// A condition as in Kubernetes API conventions (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Condition {
    /// e.g. `Ready`, `BuildSucceeded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase machine-readable reason.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
    /// When `status` last changed (RFC 3339 UTC).
    pub last_transition_time: DateTime<Utc>,
}

/// The status of a function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionStatus {
    /// The phase.
    pub phase: FunctionPhase,
    /// A human-readable explanation of the phase.
    pub message: String,
    /// Maintained conditions: `Ready` (a version serves), `BuildSucceeded` (the latest build).
    pub conditions: Vec<Condition>,
}

impl FunctionStatus {
    /// The status of a function that has no code yet.
    pub fn pending(now: DateTime<Utc>) -> Self {
        let mut s = FunctionStatus {
            phase: FunctionPhase::Pending,
            message: "waiting for code upload".into(),
            conditions: vec![],
        };
        s.set_condition("Ready", false, "NoCode", "no version uploaded yet", now);
        s
    }

    /// Sets a condition; see [`set_condition`].
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: impl Into<ConditionStatus>,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        set_condition(&mut self.conditions, type_, status, reason, message, now);
    }

    /// The condition of this type, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// Sets a condition in a list (Kubernetes API conventions: `lastTransitionTime` changes only
/// when `status` changes; `reason` and `message` always update).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: impl Into<ConditionStatus>,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) {
    let status = status.into().as_str().to_string();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
                c.status = status;
            }
            c.reason = reason.into();
            c.message = message.into();
        }
        None => conditions.push(Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now,
        }),
    }
}

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b { ConditionStatus::True } else { ConditionStatus::False }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let t0 = DateTime::from_timestamp(0, 0).expect("epoch");
        let t1 = DateTime::from_timestamp(10, 0).expect("t1");
        let mut s = FunctionStatus::pending(t0);
        s.set_condition("Ready", false, "Other", "same status", t1);
        assert_eq!(s.condition("Ready").map(|c| c.last_transition_time), Some(t0));
        s.set_condition("Ready", true, "Built", "now true", t1);
        let c = s.condition("Ready").expect("set");
        assert_eq!((c.status.as_str(), c.last_transition_time), ("True", t1));
    }
}

//! The pure decisions both backends carry out (DESIGN §2): what an upload does, and which
//! status follows a build. Functions of (spec, status, observation) only — no I/O.

use chrono::{DateTime, Utc};

use crate::status::{FunctionPhase, FunctionStatus, VersionPhase};

/// What to do with an uploaded archive given the version it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadAction {
    /// A new version, or the same bytes whose earlier build failed: build it.
    Build,
    /// The same bytes are built or being built: nothing to do but make sure it is active.
    Activate,
    /// The same bytes are being built right now: nothing to do.
    AlreadyBuilding,
}

/// Decides what an upload does. `created` is true when the archive is a new version.
/// Re-uploading bytes whose build failed builds them again (the failure may have been
/// transient, e.g. the package index was unreachable).
pub fn upload_action(created: bool, phase: VersionPhase) -> UploadAction {
    match (created, phase) {
        (true, _) | (false, VersionPhase::Failed) => UploadAction::Build,
        (false, VersionPhase::Ready) => UploadAction::Activate,
        (false, VersionPhase::Building) => UploadAction::AlreadyBuilding,
    }
}

/// The status while `version` builds. A serving version keeps serving.
pub fn status_building(
    current: &FunctionStatus,
    active: Option<u32>,
    version: u32,
    now: DateTime<Utc>,
) -> FunctionStatus {
    let mut s = current.clone();
    s.phase = FunctionPhase::Building;
    s.message = match active {
        Some(a) => format!("building version {version}; version {a} serves calls meanwhile"),
        None => format!("building version {version}"),
    };
    s.set_condition("BuildSucceeded", crate::status::ConditionStatus::Unknown, "Building", &s.message.clone(), now);
    s
}

/// The status and active version after `version`'s build ended. On failure the previously
/// active version keeps serving (phase `Ready`, message saying why the new one failed); with
/// none, the function is `Failed`. `log_tail` is the end of the build log.
pub fn status_after_build(
    current: &FunctionStatus,
    active: Option<u32>,
    version: u32,
    ok: bool,
    log_tail: &str,
    now: DateTime<Utc>,
) -> (FunctionStatus, Option<u32>) {
    let mut s = current.clone();
    if ok {
        s.phase = FunctionPhase::Ready;
        s.message = format!("version {version} is serving");
        s.set_condition("BuildSucceeded", true, "Built", &format!("version {version} built"), now);
        s.set_condition("Ready", true, "VersionActive", &s.message.clone(), now);
        return (s, Some(version));
    }
    let why = format!("version {version} failed to build: {log_tail}");
    s.set_condition("BuildSucceeded", false, "BuildFailed", &why, now);
    match active {
        Some(a) if a != version => {
            s.phase = FunctionPhase::Ready;
            s.message = format!("{why} (version {a} still serves)");
        }
        _ => {
            s.phase = FunctionPhase::Failed;
            s.message = why.clone();
            s.set_condition("Ready", false, "BuildFailed", &why, now);
            return (s, None);
        }
    }
    (s, active)
}

/// Whether a function may be called: enabled with an active version. `Err` holds the reason
/// given with 503.
pub fn callable(enabled: bool, active: Option<u32>, status: &FunctionStatus) -> Result<u32, String> {
    if !enabled {
        return Err("function is disabled".into());
    }
    active.ok_or_else(|| match status.phase {
        FunctionPhase::Pending => "function has no code yet: upload a version".to_string(),
        FunctionPhase::Building => format!("function is not ready: {}", status.message),
        _ => format!("function is not ready: {}", status.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> DateTime<Utc> {
        DateTime::from_timestamp(100, 0).expect("time")
    }

    #[test]
    fn same_bytes_do_not_rebuild_unless_they_failed() {
        assert_eq!(upload_action(true, VersionPhase::Building), UploadAction::Build);
        assert_eq!(upload_action(false, VersionPhase::Ready), UploadAction::Activate);
        assert_eq!(upload_action(false, VersionPhase::Building), UploadAction::AlreadyBuilding);
        assert_eq!(upload_action(false, VersionPhase::Failed), UploadAction::Build);
    }

    #[test]
    fn first_build_success_makes_it_ready_and_active() {
        let s = status_building(&FunctionStatus::pending(t()), None, 1, t());
        assert_eq!(s.phase, FunctionPhase::Building);
        let (s, active) = status_after_build(&s, None, 1, true, "", t());
        assert_eq!((s.phase, active), (FunctionPhase::Ready, Some(1)));
        assert_eq!(s.condition("Ready").map(|c| c.status.as_str()), Some("True"));
    }

    #[test]
    fn failed_build_keeps_the_previous_version_serving() {
        let (s, active) =
            status_after_build(&FunctionStatus::pending(t()), Some(1), 2, false, "ERROR: no such package", t());
        assert_eq!((s.phase, active), (FunctionPhase::Ready, Some(1)));
        assert!(s.message.contains("no such package") && s.message.contains("version 1 still serves"), "{}", s.message);
        assert_eq!(s.condition("BuildSucceeded").map(|c| c.status.as_str()), Some("False"));
    }

    #[test]
    fn failed_first_build_fails_the_function() {
        let (s, active) = status_after_build(&FunctionStatus::pending(t()), None, 1, false, "SyntaxError", t());
        assert_eq!((s.phase, active), (FunctionPhase::Failed, None));
        assert!(s.message.contains("SyntaxError"));
        assert!(callable(true, active, &s).is_err());
    }

    #[test]
    fn disabled_or_codeless_functions_are_not_callable() {
        let s = FunctionStatus::pending(t());
        assert!(callable(false, Some(1), &s).is_err());
        assert!(callable(true, None, &s).expect_err("no code").contains("upload"));
        assert_eq!(callable(true, Some(3), &s), Ok(3));
    }
}

//! The pure decisions both backends carry out (docs/architecture.md, "Seams"): what an upload does, and which
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
        Some(a) => {
            // The serving version was re-checked after a spec change (entrypoint, runtime) and
            // no longer loads. It stays active, as on Lambda: calls fail with the import error
            // until the spec is fixed, and fixing it needs no new upload.
            s.phase = FunctionPhase::Failed;
            s.message = format!("version {a} does not load with the current spec: {log_tail}");
            s.set_condition("Ready", false, "LoadFailed", &s.message.clone(), now);
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
    fn a_spec_change_that_breaks_the_serving_version_keeps_it_active() {
        let (s, active) =
            status_after_build(&FunctionStatus::pending(t()), Some(1), 1, false, "Runtime.ImportModuleError", t());
        assert_eq!((s.phase, active), (FunctionPhase::Failed, Some(1)));
        let (s, active) = status_after_build(&s, Some(1), 1, true, "", t());
        assert_eq!((s.phase, active), (FunctionPhase::Ready, Some(1)));
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

/// Why a trigger or job cannot act on its function, or `Ok` with the active version.
/// Missing or not-ready functions mean waiting; a `Failed` function means failed.
pub fn function_readiness(function: Option<&crate::traits::FunctionRecord>, name: &str) -> Result<u32, (bool, String)> {
    let Some(f) = function else {
        return Err((false, format!("function {name:?} does not exist yet")));
    };
    if f.status.phase == FunctionPhase::Failed {
        return Err((true, format!("function {name:?} failed: {}", f.status.message)));
    }
    callable(f.spec.enabled, f.active_version, &f.status).map_err(|why| (false, format!("function {name:?}: {why}")))
}

/// The phase and message of a trigger given its function.
pub fn trigger_phase(
    spec: &crate::trigger::TriggerSpec,
    function: Option<&crate::traits::FunctionRecord>,
) -> (crate::trigger::TriggerPhase, String) {
    use crate::trigger::{TriggerPhase, TriggerType};
    if !spec.enabled {
        return (TriggerPhase::Waiting, "trigger is disabled".into());
    }
    match function_readiness(function, &spec.function) {
        Ok(v) => {
            let what = match spec.kind {
                TriggerType::Http => "serving",
                TriggerType::Cron => "scheduled",
            };
            (TriggerPhase::Active, format!("{what}; function {:?} version {v} is ready", spec.function))
        }
        Err((true, why)) => (TriggerPhase::Failed, why),
        Err((false, why)) => (TriggerPhase::Waiting, why),
    }
}

/// What to do with a job now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobAction {
    /// Set this phase and message (no run).
    Set(crate::job::JobPhase, String),
    /// The current `run_id` already ran (or runs): leave the status as it is.
    Keep,
    /// Start a run of the current `run_id`.
    Run,
}

/// Decides a job's next step (docs/architecture.md, "Triggers and jobs"): `run_id` 0 → `Skipped`; a run when enabled and
/// `run_id` differs from the last run's and the function is ready; otherwise wait (or fail
/// when the function failed). A run is started at most once per `run_id`.
pub fn job_action(
    spec: &crate::job::JobSpec,
    status: &crate::job::JobStatus,
    function: Option<&crate::traits::FunctionRecord>,
) -> JobAction {
    use crate::job::JobPhase;
    if spec.run_id == 0 {
        return JobAction::Set(JobPhase::Skipped, "run_id is 0: nothing to run".into());
    }
    if status.last_run_id == Some(spec.run_id) {
        return JobAction::Keep;
    }
    if !spec.enabled {
        return JobAction::Set(JobPhase::Waiting, "job is disabled".into());
    }
    match function_readiness(function, &spec.function) {
        Ok(_) => JobAction::Run,
        Err((true, why)) => JobAction::Set(JobPhase::Failed, why),
        Err((false, why)) => JobAction::Set(JobPhase::Waiting, why),
    }
}

#[cfg(test)]
mod job_tests {
    use super::*;
    use crate::job::{JobPhase, JobSpec, JobStatus};
    use crate::spec::FunctionSpec;
    use crate::traits::FunctionRecord;
    use serde_json::json;

    fn function(active: Option<u32>, phase: FunctionPhase) -> FunctionRecord {
        let (_, spec) =
            FunctionSpec::from_json(&json!({"runtime": "python3.11", "entrypoint": "main.handler"})).expect("spec");
        let mut status = FunctionStatus::pending(t());
        status.phase = phase;
        FunctionRecord {
            namespace: "default".into(),
            name: "f".into(),
            spec,
            resource_version: crate::resource_version::ResourceVersion::from_count(1),
            active_version: active,
            status,
            created_at: t(),
            updated_at: t(),
        }
    }

    fn t() -> DateTime<Utc> {
        DateTime::from_timestamp(100, 0).expect("time")
    }

    fn job(run_id: u64) -> JobSpec {
        JobSpec::from_json(&json!({"function": "f", "run_id": run_id})).expect("job").1
    }

    #[test]
    fn run_id_zero_is_skipped() {
        let f = function(Some(1), FunctionPhase::Ready);
        assert!(matches!(job_action(&job(0), &JobStatus::new(), Some(&f)), JobAction::Set(JobPhase::Skipped, _)));
    }

    #[test]
    fn runs_once_per_run_id_and_again_when_bumped() {
        let f = function(Some(1), FunctionPhase::Ready);
        let mut status = JobStatus::new();
        assert_eq!(job_action(&job(1), &status, Some(&f)), JobAction::Run);
        status.last_run_id = Some(1);
        assert_eq!(job_action(&job(1), &status, Some(&f)), JobAction::Keep);
        assert_eq!(job_action(&job(2), &status, Some(&f)), JobAction::Run);
    }

    #[test]
    fn waits_for_a_missing_or_building_function_and_fails_with_a_failed_one() {
        assert!(
            matches!(job_action(&job(1), &JobStatus::new(), None), JobAction::Set(JobPhase::Waiting, m) if m.contains("does not exist"))
        );
        let building = function(None, FunctionPhase::Building);
        assert!(matches!(
            job_action(&job(1), &JobStatus::new(), Some(&building)),
            JobAction::Set(JobPhase::Waiting, _)
        ));
        let failed = function(None, FunctionPhase::Failed);
        assert!(matches!(job_action(&job(1), &JobStatus::new(), Some(&failed)), JobAction::Set(JobPhase::Failed, _)));
    }

    #[test]
    fn trigger_phases_follow_the_function() {
        use crate::trigger::{TriggerPhase, TriggerSpec};
        let ok = |_: &str, _: &str| Ok(());
        let (_, spec) = TriggerSpec::from_json(&json!({"function": "f", "type": "http"}), ok).expect("spec");
        assert_eq!(trigger_phase(&spec, None).0, TriggerPhase::Waiting);
        assert_eq!(trigger_phase(&spec, Some(&function(Some(2), FunctionPhase::Ready))).0, TriggerPhase::Active);
        assert_eq!(trigger_phase(&spec, Some(&function(None, FunctionPhase::Failed))).0, TriggerPhase::Failed);
        let mut disabled = spec.clone();
        disabled.enabled = false;
        assert_eq!(trigger_phase(&disabled, Some(&function(Some(2), FunctionPhase::Ready))).0, TriggerPhase::Waiting);
    }
}

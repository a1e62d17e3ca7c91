//! Image builds (docs/kubernetes.md, "Builds"): one Kubernetes Job per runtime and archive
//! SHA-256, named after them, in the build namespace (never a tenant's), and what the
//! operator reads back from it. Pure builders and readers; the Function controller
//! (`crate::function`) creates the Job and acts on its state.
//!
//! A Job's name is its identity: creating it again answers AlreadyExists, which means "this
//! build is in progress or done", so one archive is built once per runtime, also across
//! operator restarts. The Job runs two containers over an `emptyDir` workspace: `context`
//! (the sless image, [`BuildSettings::sless_image`]) fetches the archive from the blob
//! store and writes the build context, and `build` (a kaniko fork,
//! [`BuildSettings::builder_image`]) builds it and pushes `<repository>/<runtime>:<sha256>`,
//! writing the pushed digest to its termination message, so the Deployment runs the image by
//! digest. A build that passes [`BuildSettings::deadline_sec`] fails with `DeadlineExceeded`;
//! a failed build's log tail is its termination message (`FallbackToLogsOnError`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, KeyToPath, Pod, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecretEnvSource, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crd::Runtime;
use crate::workload::MANAGED_BY_LABEL;
use crate::{Error, Result};

/// Label on build Jobs and their pods: `build`.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// Annotation on a build Job: the archive's full SHA-256 (a label value holds at most 63
/// characters).
pub const SHA256_ANNOTATION: &str = "sless.kube5s.ru/sha256";
/// Annotation on a build Job: the runtime it builds for (`python3.11`, `nodejs20`).
pub const RUNTIME_ANNOTATION: &str = "sless.kube5s.ru/runtime";
/// Annotation on a build Job: the image (repository and tag) it pushes.
pub const IMAGE_ANNOTATION: &str = "sless.kube5s.ru/image";
/// The build container's name (its termination message is the digest, or the log's tail).
pub const BUILD_CONTAINER: &str = "build";

/// How the operator builds images; every field is used (docs/kubernetes.md, "Builds").
#[derive(Debug, Clone, PartialEq)]
pub struct BuildSettings {
    /// The namespace builds run in: it holds the registry push credentials, never a tenant's.
    pub namespace: String,
    /// The builder (a maintained kaniko fork), pinned by digest (`…@sha256:<64 hex>`).
    pub builder_image: String,
    /// The sless image, pinned by digest: it prepares build contexts (`sless build-context`)
    /// and fires cron triggers (`sless trigger fire`).
    pub sless_image: String,
    /// The base image per runtime, pinned by digest.
    pub base_images: BaseImages,
    /// Where images are pushed: `<registry>/<path>`; an image is `<repository>/<runtime>:<sha256>`.
    pub repository: String,
    /// The archive store the context container reads (`s3://bucket/prefix`, as `--blob-url`).
    pub blob_url: String,
    /// Secret in the build namespace whose keys become the context container's environment
    /// (the S3 credentials, e.g. `AWS_ACCESS_KEY_ID`); optional.
    pub blob_secret: String,
    /// Secret in the build namespace of type `kubernetes.io/dockerconfigjson` the builder pushes with.
    pub push_secret: String,
    /// A build running longer fails (`activeDeadlineSeconds`), in seconds.
    pub deadline_sec: u32,
    /// A finished build Job is deleted after this many seconds (`ttlSecondsAfterFinished`);
    /// the image stays recorded on its Functions.
    pub ttl_after_finished_sec: u32,
    /// Memory limit of a build pod, in MiB.
    pub memory_mb: u32,
    /// Extra labels on build pods (e.g. for cost allocation or a scheduling policy).
    pub pod_labels: BTreeMap<String, String>,
}

/// The base image of each runtime, pinned by digest.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseImages {
    /// For `python3.11`, e.g. `python:3.11-slim@sha256:…`.
    pub python311: String,
    /// For `nodejs20`, e.g. `node:20-slim@sha256:…`.
    pub nodejs20: String,
}

/// Whether `image` names a digest: `<name>@sha256:<64 lowercase hex>`.
pub fn pinned_by_digest(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(name, hex)| {
        !name.is_empty() && hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

impl BuildSettings {
    /// Checks the settings: every image pinned by digest, a repository, a positive deadline.
    /// Errors: [`Error::Settings`] naming the setting (its flag's name without `--`).
    pub fn check(&self) -> Result<()> {
        for (field, image) in [
            ("builder-image", &self.builder_image),
            ("sless-image", &self.sless_image),
            ("python311-base-image", &self.base_images.python311),
            ("nodejs20-base-image", &self.base_images.nodejs20),
        ] {
            if !pinned_by_digest(image) {
                return Err(Error::Settings {
                    field,
                    message: format!("{image:?} is not pinned by digest (expected NAME@sha256:<64 hex>)"),
                });
            }
        }
        let repo = &self.repository;
        if !repo.contains('/') || repo.contains('@') || repo.chars().any(char::is_whitespace) {
            return Err(Error::Settings {
                field: "image-repository",
                message: format!("{:?} is not REGISTRY/PATH", self.repository),
            });
        }
        if self.deadline_sec == 0 {
            return Err(Error::Settings { field: "build-deadline-sec", message: "must be at least 1".into() });
        }
        if !self.blob_url.starts_with("s3://") {
            return Err(Error::Settings {
                field: "blob-url",
                message: format!("{:?}: builds read archives from s3://BUCKET/PREFIX", self.blob_url),
            });
        }
        Ok(())
    }

    /// The base image of `runtime`.
    pub fn base_image(&self, runtime: Runtime) -> &str {
        match runtime {
            Runtime::Python311 => &self.base_images.python311,
            Runtime::Nodejs20 => &self.base_images.nodejs20,
        }
    }
}

/// The runtime's name in the REST API (`python3.11`, `nodejs20`).
pub fn runtime_name(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Python311 => "python3.11",
        Runtime::Nodejs20 => "nodejs20",
    }
}

/// Where an image holds the function's code (Lambda's `LAMBDA_TASK_ROOT`).
pub const TASK_ROOT: &str = "/var/task";

/// The Dockerfile of a build context (docs/kubernetes.md, "Builds"): the runtime's base
/// image, the code in [`TASK_ROOT`], the runtime's shim in `/opt/sless`, dependencies
/// installed as the local build installs them (`pip install --target` from
/// `requirements.txt`; `npm ci` / `npm install --omit=dev` from `package.json`), and the unprivileged user of the function pods. The context it describes holds
/// `code/` and `runtime/` beside it. Pure.
pub fn dockerfile(runtime: Runtime, base_image: &str, shim_file: &str) -> String {
    let uid = crate::workload::FUNCTION_UID;
    let (install, env, interpreter) = match runtime {
        Runtime::Python311 => (
            "RUN if [ -f requirements.txt ]; then python3 -m pip install --no-cache-dir --disable-pip-version-check \\\n      --target /var/task/.sless-deps -r requirements.txt; fi",
            "ENV PYTHONPATH=/var/task/.sless-deps:/var/task PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1",
            "python3",
        ),
        Runtime::Nodejs20 => (
            "RUN if [ -f package-lock.json ]; then npm ci --omit=dev --no-audit --no-fund; \\\n    elif [ -f package.json ]; then npm install --omit=dev --no-audit --no-fund; fi",
            "ENV NODE_ENV=production",
            "node",
        ),
    };
    format!(
        "# Generated by `sless build-context` (docs/kubernetes.md, \"Builds\").\n\
         FROM {base_image}\n\
         COPY code/ {TASK_ROOT}/\n\
         COPY runtime/ /opt/sless/\n\
         WORKDIR {TASK_ROOT}\n\
         {install}\n\
         {env} LAMBDA_TASK_ROOT={TASK_ROOT} SLESS_RUNTIME={}\n\
         USER {uid}:{uid}\n\
         ENTRYPOINT [\"{interpreter}\", \"/opt/sless/{shim_file}\"]\n",
        runtime_name(runtime)
    )
}

/// The build Job's name for `runtime` and archive `sha256`: `build-py311-<first 48 hex>` or
/// `build-node20-<first 48 hex>` (at most 63 characters, a DNS-1123 label).
pub fn job_name(runtime: Runtime, sha256: &str) -> String {
    let short = match runtime {
        Runtime::Python311 => "py311",
        Runtime::Nodejs20 => "node20",
    };
    format!("build-{short}-{}", &sha256[..sha256.len().min(48)])
}

/// The image a build pushes: `<repository>/<runtime>:<sha256>` (tagged by the archive, never
/// `latest`).
pub fn image_tag(settings: &BuildSettings, runtime: Runtime, sha256: &str) -> String {
    format!("{}/{}:{sha256}", settings.repository.trim_end_matches('/'), runtime_name(runtime))
}

fn restricted_container_context(run_as_root: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            // kaniko unpacks base images as root: ownership and set-id bits need these.
            add: run_as_root
                .then(|| ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"].map(String::from).to_vec()),
        }),
        run_as_non_root: Some(!run_as_root),
        run_as_user: Some(if run_as_root { 0 } else { crate::workload::FUNCTION_UID }),
        seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..SecurityContext::default()
    }
}

/// The build Job for `runtime` and archive `sha256` (docs/kubernetes.md, "Builds"): in the
/// build namespace, `backoffLimit: 0` (a failed build fails with its own log rather than
/// trying again), `activeDeadlineSeconds` and `ttlSecondsAfterFinished` from the settings, no
/// service-account token, the push credentials mounted only into the builder.
pub fn build_job(settings: &BuildSettings, runtime: Runtime, sha256: &str) -> Job {
    let name = job_name(runtime, sha256);
    let image = image_tag(settings, runtime, sha256);
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), "sless".to_string()),
        (COMPONENT_LABEL.to_string(), "build".to_string()),
    ]);
    let annotations = BTreeMap::from([
        (SHA256_ANNOTATION.to_string(), sha256.to_string()),
        (RUNTIME_ANNOTATION.to_string(), runtime_name(runtime).to_string()),
        (IMAGE_ANNOTATION.to_string(), image.clone()),
    ]);
    let mut pod_labels = labels.clone();
    pod_labels.extend(settings.pod_labels.clone());
    let workspace = VolumeMount { name: "workspace".into(), mount_path: "/workspace".into(), ..VolumeMount::default() };
    let memory = Quantity(format!("{}Mi", settings.memory_mb));
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([("memory".to_string(), memory.clone())])),
        limits: Some(BTreeMap::from([("memory".to_string(), memory)])),
        ..ResourceRequirements::default()
    };
    let context = Container {
        name: "context".into(),
        image: Some(settings.sless_image.clone()),
        command: Some(vec!["sless".into(), "build-context".into()]),
        args: Some(vec![
            format!("--blob-url={}", settings.blob_url),
            format!("--sha256={sha256}"),
            format!("--runtime={}", runtime_name(runtime)),
            format!("--base-image={}", settings.base_image(runtime)),
            "--out=/workspace".into(),
        ]),
        env_from: Some(vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource { name: settings.blob_secret.clone(), optional: Some(true) }),
            ..EnvFromSource::default()
        }]),
        resources: Some(resources.clone()),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            ..restricted_container_context(false)
        }),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![workspace.clone()]),
        ..Container::default()
    };
    let build = Container {
        name: BUILD_CONTAINER.into(),
        image: Some(settings.builder_image.clone()),
        args: Some(vec![
            "--context=dir:///workspace".into(),
            "--dockerfile=/workspace/Dockerfile".into(),
            format!("--destination={image}"),
            "--digest-file=/dev/termination-log".into(),
            "--reproducible".into(),
        ]),
        resources: Some(resources),
        security_context: Some(restricted_container_context(true)),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![
            workspace,
            VolumeMount {
                name: "push-credentials".into(),
                mount_path: "/kaniko/.docker".into(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    };
    let pod = PodSpec {
        init_containers: Some(vec![context]),
        containers: vec![build],
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        volumes: Some(vec![
            Volume { name: "workspace".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() },
            Volume {
                name: "push-credentials".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(settings.push_secret.clone()),
                    items: Some(vec![KeyToPath {
                        key: ".dockerconfigjson".into(),
                        path: "config.json".into(),
                        mode: None,
                        user: None,
                    }]),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            },
        ]),
        ..PodSpec::default()
    };
    Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(settings.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(i64::from(settings.deadline_sec)),
            ttl_seconds_after_finished: Some(i32::try_from(settings.ttl_after_finished_sec).unwrap_or(i32::MAX)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels), ..ObjectMeta::default() }),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// What became of a build, read from its Job and the Job's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildState {
    /// Not finished yet.
    Running,
    /// Pushed: the image to run, by digest when the builder reported one
    /// (`<repository>/<runtime>@sha256:…`), else by its tag.
    Succeeded {
        /// The image reference for the Deployment.
        image: String,
    },
    /// Failed or timed out.
    Failed {
        /// `BuildFailed` or `BuildDeadlineExceeded`.
        reason: String,
        /// For a user: why, with the end of the build's log where there is one.
        message: String,
    },
}

fn job_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_ && c.status == "True")
}

/// The build container's termination message of the Job's newest pod that has one.
fn termination_message(pods: &[Pod]) -> Option<String> {
    let mut messages: Vec<(Option<_>, String)> = pods
        .iter()
        .filter_map(|p| {
            let status = p.status.as_ref()?;
            let all = status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
            let message = all
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
                .find(|m| !m.trim().is_empty())?;
            Some((p.metadata.creation_timestamp.clone(), message))
        })
        .collect();
    messages.sort_by(|a, b| a.0.as_ref().map(|t| t.0).cmp(&b.0.as_ref().map(|t| t.0)));
    messages.pop().map(|(_, m)| m)
}

/// The image a succeeded build pushed: `<repository>/<runtime>@sha256:<digest>` when the build
/// container's termination message is a digest, else the tag `image` the Job was made for.
fn pushed_image(tag: &str, message: Option<&str>) -> String {
    let digest = message.map(str::trim).filter(|m| pinned_by_digest(&format!("x@{m}")));
    match (digest, tag.rsplit_once(':')) {
        (Some(d), Some((repository, _))) => format!("{repository}@{d}"),
        _ => tag.to_string(),
    }
}

/// The state of build `job` (with its pods, for the digest or the log's tail). Pure.
pub fn build_state(job: &Job, pods: &[Pod]) -> BuildState {
    let tag = job.metadata.annotations.as_ref().and_then(|a| a.get(IMAGE_ANNOTATION)).cloned().unwrap_or_default();
    if job_condition(job, "Complete").is_some() {
        return BuildState::Succeeded { image: pushed_image(&tag, termination_message(pods).as_deref()) };
    }
    if let Some(failed) = job_condition(job, "Failed") {
        let reason = failed.reason.as_deref().unwrap_or_default();
        let log = termination_message(pods);
        let (reason, mut message) = if reason == "DeadlineExceeded" {
            let limit = job.spec.as_ref().and_then(|s| s.active_deadline_seconds).unwrap_or_default();
            ("BuildDeadlineExceeded", format!("the build did not finish within {limit} s"))
        } else {
            ("BuildFailed", "the build failed".to_string())
        };
        match log {
            Some(log) => {
                message.push_str(": ");
                message.push_str(log.trim_end());
            }
            None => {
                if let Some(m) = failed.message.as_deref().filter(|m| !m.is_empty()) {
                    message.push_str(&format!(" ({m})"));
                }
            }
        }
        return BuildState::Failed { reason: reason.into(), message };
    }
    BuildState::Running
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    pub(crate) fn settings() -> BuildSettings {
        let pinned = |name: &str| format!("{name}@sha256:{}", "e".repeat(64));
        BuildSettings {
            namespace: "sless-build".into(),
            builder_image: pinned("ghcr.io/example/kaniko"),
            sless_image: pinned("ghcr.io/example/sless"),
            base_images: BaseImages { python311: pinned("python:3.11-slim"), nodejs20: pinned("node:20-slim") },
            repository: "registry.example:5000/sless".into(),
            blob_url: "s3://sless/archives".into(),
            blob_secret: "sless-blobs".into(),
            push_secret: "sless-registry".into(),
            deadline_sec: 600,
            ttl_after_finished_sec: 3600,
            memory_mb: 2048,
            pod_labels: BTreeMap::new(),
        }
    }

    #[test]
    fn images_must_be_pinned_by_digest_and_settings_name_the_bad_flag() {
        assert!(pinned_by_digest(&format!("python:3.11@sha256:{}", "a".repeat(64))));
        for bad in ["python:3.11", "python@sha256:abc", &format!("@sha256:{}", "a".repeat(64)), "x@sha256:"] {
            assert!(!pinned_by_digest(bad), "{bad}");
        }
        assert!(settings().check().is_ok());
        let mut s = settings();
        s.builder_image = "gcr.io/kaniko-project/executor:latest".into();
        assert!(s.check().expect_err("a tag").to_string().starts_with("--builder-image: "));
        let mut s = settings();
        s.repository = "registry@x".into();
        assert!(s.check().expect_err("repository").to_string().starts_with("--image-repository: "));
        let mut s = settings();
        s.blob_url = "file:///var/lib/sless".into();
        assert!(s.check().expect_err("blob url").to_string().starts_with("--blob-url: "));
    }

    #[test]
    fn the_dockerfile_installs_dependencies_as_the_local_build_and_runs_unprivileged() {
        let base = format!("python:3.11-slim@sha256:{}", "a".repeat(64));
        let py = dockerfile(Runtime::Python311, &base, "bootstrap.py");
        assert!(py.contains(&format!("FROM {base}\n")), "{py}");
        assert!(py.contains("--target /var/task/.sless-deps -r requirements.txt"), "{py}");
        assert!(py.contains("USER 65532:65532\n"), "{py}");
        assert!(py.ends_with("ENTRYPOINT [\"python3\", \"/opt/sless/bootstrap.py\"]\n"), "{py}");
        let js = dockerfile(Runtime::Nodejs20, "node@sha256:x", "bootstrap.cjs");
        assert!(js.contains("npm ci --omit=dev --no-audit") && js.contains("SLESS_RUNTIME=nodejs20"), "{js}");
        assert!(!js.contains(":latest") && !py.contains(":latest"));
    }

    #[test]
    fn a_build_job_is_named_after_its_runtime_and_archive() {
        let name = job_name(Runtime::Nodejs20, SHA);
        assert_eq!(name, format!("build-node20-{}", &SHA[..48]));
        assert!(name.len() <= 63 && job_name(Runtime::Python311, SHA).len() <= 63);
        assert_eq!(
            image_tag(&settings(), Runtime::Python311, SHA),
            format!("registry.example:5000/sless/python3.11:{SHA}")
        );
    }

    fn job(conditions: serde_json::Value) -> Job {
        let mut j = build_job(&settings(), Runtime::Python311, SHA);
        j.status = serde_json::from_value(json!({"conditions": conditions})).expect("status");
        j
    }

    fn pod(message: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [{
            "name": "build", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "message": message}}}]}}))
        .expect("pod")
    }

    #[test]
    fn the_build_state_comes_from_the_jobs_conditions_and_the_pods_termination_message() {
        assert_eq!(build_state(&job(json!([])), &[]), BuildState::Running);
        let complete = job(json!([{"type": "Complete", "status": "True"}]));
        let digest = format!("sha256:{}", "d".repeat(64));
        assert_eq!(
            build_state(&complete, &[pod(&format!("{digest}\n"))]),
            BuildState::Succeeded { image: format!("registry.example:5000/sless/python3.11@{digest}") }
        );
        assert_eq!(
            build_state(&complete, &[]),
            BuildState::Succeeded { image: image_tag(&settings(), Runtime::Python311, SHA) },
            "without a digest, the archive's tag"
        );
        let failed = job(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]));
        assert_eq!(
            build_state(&failed, &[pod("ERROR: No matching distribution found for nosuchpkg\n")]),
            BuildState::Failed {
                reason: "BuildFailed".into(),
                message: "the build failed: ERROR: No matching distribution found for nosuchpkg".into()
            }
        );
        let stalled = job(json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                   "message": "Job was active longer than specified deadline"}]));
        assert_eq!(
            build_state(&stalled, &[]),
            BuildState::Failed {
                reason: "BuildDeadlineExceeded".into(),
                message: "the build did not finish within 600 s (Job was active longer than specified deadline)".into()
            }
        );
    }
}

//! `sless operator`, the binary, against the real control plane (docs/kubernetes-testing.md):
//! it refuses settings that would break the promises (an image not pinned by digest), and
//! with good ones it reconciles a Function applied as `kubectl apply` would into its build
//! Job, and stops cleanly on SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use sless_kube::crd::Function;
use sless_kube_testenv::{TestNamespace, control_plane, eventually};

mod common;

fn pinned(name: &str) -> String {
    format!("{name}@sha256:{}", "e".repeat(64))
}

fn operator_args(build_namespace: &str, watch: &str) -> Vec<String> {
    [
        "operator".to_string(),
        format!("--watch-namespace={watch}"),
        format!("--build-namespace={build_namespace}"),
        format!("--builder-image={}", pinned("registry.sless.invalid/kaniko/executor")),
        format!("--sless-image={}", pinned("registry.sless.invalid/sless")),
        format!("--python311-base-image={}", pinned("registry.sless.invalid/python")),
        format!("--nodejs20-base-image={}", pinned("registry.sless.invalid/node")),
        "--image-repository=registry.sless.invalid/functions".to_string(),
        "--blob-url=s3://sless/archives".to_string(),
    ]
    .to_vec()
}

#[test]
fn an_image_not_pinned_by_digest_is_refused_naming_its_flag() {
    let mut args = operator_args("sless-build", "team-a");
    args[3] = "--builder-image=gcr.io/kaniko-project/executor:latest".into();
    let out = Command::new(common::bin()).args(&args).env_remove("KUBECONFIG").output().expect("run sless");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--builder-image") && stderr.contains("not pinned by digest"), "{stderr}");
    let mut args = operator_args("sless-build", "team-a");
    args.retain(|a| !a.starts_with("--blob-url"));
    let out = Command::new(common::bin()).args(&args).output().expect("run sless");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--blob-url"), "a required setting is named");
}

#[tokio::test]
async fn the_operator_builds_a_function_applied_with_kubectl_and_stops_on_sigterm() {
    let tenant = TestNamespace::create("bin-op").await.expect("tenant");
    let builds = TestNamespace::create("bin-op-build").await.expect("build namespace");
    let client = tenant.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in sless_kube::crds() {
        crds.patch(&crd.name_any(), &PatchParams::apply("sless-test").force(), &Patch::Apply(&crd))
            .await
            .expect("apply the CRDs");
    }
    let kubeconfig = tokio::task::spawn_blocking(|| control_plane().map(|p| p.kubeconfig().to_path_buf()))
        .await
        .expect("join")
        .expect("control plane");
    let mut operator = Command::new(common::bin())
        .args(operator_args(builds.name(), tenant.name()))
        .env("KUBECONFIG", &kubeconfig)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sless operator");
    let functions: Api<Function> = tenant.api();
    let sha = "7".repeat(64);
    let f = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
        "metadata": {"name": "hello"},
        "spec": {"runtime": "nodejs20", "entrypoint": "index.handler", "code": {"sha256": sha}},
    });
    // The CRDs may take a moment to be served after their first apply.
    eventually("the Function applied", Duration::from_secs(30), || {
        let functions = functions.clone();
        let f = f.clone();
        async move { Ok(functions.patch("hello", &PatchParams::apply("kubectl"), &Patch::Apply(&f)).await.ok()) }
    })
    .await
    .expect("apply");
    let jobs: Api<Job> = builds.api();
    let name = format!("build-node20-{}", &sha[..48]);
    let job = eventually("the build Job", Duration::from_secs(30), || {
        let jobs = jobs.clone();
        let name = name.clone();
        async move { Ok(jobs.get_opt(&name).await?) }
    })
    .await
    .expect("the operator made the build Job");
    let image = job.annotations().get("sless.kube5s.ru/image").cloned().unwrap_or_default();
    assert_eq!(image, format!("registry.sless.invalid/functions/nodejs20:{sha}"));
    let phase = eventually("Building", Duration::from_secs(30), || {
        let functions = functions.clone();
        async move { Ok(functions.get("hello").await?.status.and_then(|s| s.phase).filter(|p| p == "Building")) }
    })
    .await;
    assert!(phase.is_ok(), "the Function says Building");

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(operator.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .expect("SIGTERM");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = operator.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the operator did not stop within 15 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "exit status {status}");
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
        .delete(&format!("sless-fn-{}", tenant.name()), &Default::default())
        .await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn build_context(blobs: &std::path::Path, sha: &str, out: &std::path::Path) -> std::process::Output {
    Command::new(common::bin())
        .args(["build-context", "--runtime=python3.11", &format!("--sha256={sha}")])
        .arg(format!("--blob-url=file://{}", blobs.display()))
        .arg(format!("--base-image={}", pinned("registry.sless.invalid/python")))
        .arg("--out")
        .arg(out)
        .output()
        .expect("run sless build-context")
}

#[test]
fn build_context_writes_the_code_the_shim_and_a_dockerfile_and_refuses_what_the_upload_would() {
    let dir = tempfile::tempdir().expect("temp");
    let blobs = dir.path().join("blobs");
    std::fs::create_dir_all(blobs.join("archives")).expect("mkdir");
    let archive =
        common::zip(&[("main.py", "def handler(e, c):\n    return 1\n"), ("requirements.txt", "six==1.16.0\n")]);
    let sha = sha256_hex(&archive);
    std::fs::write(blobs.join(format!("archives/{sha}.zip")), &archive).expect("archive");

    let out = dir.path().join("ctx");
    let run = build_context(&blobs, &sha, &out);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(std::fs::read_to_string(out.join("code/main.py")).expect("code"), "def handler(e, c):\n    return 1\n");
    assert!(out.join("code/requirements.txt").exists());
    let shim = std::fs::read_to_string(out.join("runtime/bootstrap.py")).expect("the shim");
    assert!(!shim.is_empty());
    let dockerfile = std::fs::read_to_string(out.join("Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains(&format!("FROM {}\n", pinned("registry.sless.invalid/python"))), "{dockerfile}");
    assert!(
        dockerfile.contains("-r requirements.txt") && dockerfile.contains("/opt/sless/bootstrap.py"),
        "{dockerfile}"
    );

    // The store holds other bytes under that name: refused, nothing written.
    let other = common::zip(&[("main.py", "evil = 1\n")]);
    let claimed = sha256_hex(b"something else");
    std::fs::write(blobs.join(format!("archives/{claimed}.zip")), &other).expect("archive");
    let out = dir.path().join("ctx2");
    let run = build_context(&blobs, &claimed, &out);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("not") && stderr.contains(&claimed), "{stderr}");
    assert!(!out.join("Dockerfile").exists() && !out.join("code").exists());

    // An entry leaving the folder is refused, naming it, as an upload is.
    let evil = common::zip(&[("main.py", "x = 1\n"), ("../escape.py", "x = 2\n")]);
    let sha = sha256_hex(&evil);
    std::fs::write(blobs.join(format!("archives/{sha}.zip")), &evil).expect("archive");
    let run = build_context(&blobs, &sha, &dir.path().join("ctx3"));
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("../escape.py"), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(!dir.path().join("escape.py").exists());
}

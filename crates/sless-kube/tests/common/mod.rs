//! What the Kubernetes backend's test files share: golden files and the operator's build
//! settings.

use std::path::PathBuf;

use serde_json::Value;
use sless_kube::build::{BaseImages, BuildSettings};

/// Checks `value` against `tests/golden/<name>.json` (rewritten with `SLESS_UPDATE_DOCS=1`).
#[allow(dead_code, reason = "used by workloads.rs, not by every test file that includes this module")]
pub fn golden(name: &str, value: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = format!("{}\n", serde_json::to_string_pretty(value).expect("json"));
    if std::env::var_os("SLESS_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().expect("folder")).expect("mkdir");
        std::fs::write(&path, &text).expect("write golden");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == text,
        "{} differs from what the builder makes now:\n{text}\n(regenerate with SLESS_UPDATE_DOCS=1 cargo test -p sless-kube once the change is meant)",
        path.display()
    );
}

/// Build settings with every image pinned by digest, building in `namespace`.
pub fn build_settings(namespace: &str, deadline_sec: u32) -> BuildSettings {
    let pinned = |name: &str| format!("{name}@sha256:{}", "e".repeat(64));
    BuildSettings {
        namespace: namespace.into(),
        builder_image: pinned("registry.sless.invalid/kaniko/executor"),
        sless_image: pinned("registry.sless.invalid/sless"),
        base_images: BaseImages {
            python311: pinned("registry.sless.invalid/python"),
            nodejs20: pinned("registry.sless.invalid/node"),
        },
        repository: "registry.sless.invalid/functions".into(),
        blob_url: "s3://sless/archives".into(),
        blob_secret: "sless-blobs".into(),
        push_secret: "sless-registry".into(),
        deadline_sec,
        ttl_after_finished_sec: 3600,
        memory_mb: 1024,
        pod_labels: Default::default(),
    }
}

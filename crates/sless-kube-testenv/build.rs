//! Declares `cfg(sless_kube_testenv_no_go)` and sets it where neither Go (to build the control
//! plane with `scripts/kube-testenv build`) nor an external control plane
//! (`SLESS_TEST_KUBECONFIG`) is there: the tests that need one are then reported as ignored by
//! `cargo test`, never as passed (docs/kubernetes-testing.md).

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sless_kube_testenv_no_go)");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=SLESS_TEST_KUBECONFIG");
    let has_go = Command::new("go").arg("version").output().is_ok_and(|out| out.status.success());
    if !has_go && std::env::var_os("SLESS_TEST_KUBECONFIG").is_none() {
        println!("cargo::rustc-cfg=sless_kube_testenv_no_go");
        println!(
            "cargo::warning=Go is not on PATH: the tests against the Kubernetes control plane are ignored (scripts/kube-testenv build needs Go)"
        );
    }
}

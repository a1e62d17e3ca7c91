//! The operator's RBAC, least privilege and listed verb by verb (docs/kubernetes.md, "RBAC"):
//! exactly what the controllers of this crate call, nothing more — no Secrets anywhere, no
//! wildcard. `deploy/rbac.yaml` is [`rbac_yaml`] for the default namespaces (a test fails when
//! they differ), and the operator's tests run under these rules alone (impersonating its
//! service account).
//!
//! - a ClusterRole bound cluster-wide: the Functions and Triggers and their status (the
//!   finalizer is a patch); the tenants' workload namespaces and what the operator puts in
//!   them (namespaces, ResourceQuotas, LimitRanges, NetworkPolicies, ServiceAccounts,
//!   Deployments, Services, CronJobs),
//!   created and updated by server-side apply (`create` + `patch`);
//! - a Role in the build namespace: build Jobs (create, watch) and their pods (list, for the
//!   digest or the log's tail in a termination message);
//! - a Role in the sless namespace: the http triggers' Ingresses, and the Lease of leader
//!   election.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::workload::MANAGED_BY_LABEL;
use crate::{Error, Result};

/// The operator's service account, roles and bindings.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorRbac {
    /// `<name>` in the sless namespace.
    pub service_account: ServiceAccount,
    /// `<name>`: what the operator does in every namespace.
    pub cluster_role: ClusterRole,
    /// Binds the ClusterRole to the service account.
    pub cluster_role_binding: ClusterRoleBinding,
    /// `<name>` in the build namespace: build Jobs and their pods.
    pub build_role: Role,
    /// Binds the build Role to the service account.
    pub build_role_binding: RoleBinding,
    /// `<name>` in the sless namespace: the http triggers' Ingresses.
    pub sless_role: Role,
    /// Binds the sless-namespace Role to the service account.
    pub sless_role_binding: RoleBinding,
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some(BTreeMap::from([(MANAGED_BY_LABEL.to_string(), "sless".to_string())])),
        ..ObjectMeta::default()
    }
}

/// The operator's RBAC: service account `name` in `sless_namespace`, builds in
/// `build_namespace`. Pure.
pub fn operator_rbac(name: &str, sless_namespace: &str, build_namespace: &str) -> OperatorRbac {
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(sless_namespace.into()),
        api_group: None,
    };
    let cluster_rules = vec![
        rule(crate::crd::GROUP, &["functions", "triggers"], &["get", "list", "watch", "patch"]),
        rule(crate::crd::GROUP, &["functions/status", "triggers/status"], &["get", "patch"]),
        rule("", &["namespaces"], &["get", "create", "patch"]),
        rule("", &["resourcequotas", "limitranges", "serviceaccounts"], &["get", "create", "patch"]),
        rule("batch", &["cronjobs"], &["get", "list", "watch", "create", "patch", "delete"]),
        rule("networking.k8s.io", &["networkpolicies"], &["get", "create", "patch"]),
        rule("apps", &["deployments"], &["get", "list", "watch", "create", "patch", "delete"]),
        rule("", &["services"], &["get", "create", "patch", "delete"]),
    ];
    let build_rules =
        vec![rule("batch", &["jobs"], &["get", "list", "watch", "create"]), rule("", &["pods"], &["list"])];
    let sless_rules = vec![
        rule("networking.k8s.io", &["ingresses"], &["get", "list", "watch", "create", "patch", "delete"]),
        rule("coordination.k8s.io", &["leases"], &["get", "create", "patch"]),
    ];
    let role_ref = |kind: &str| RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    };
    OperatorRbac {
        service_account: ServiceAccount {
            metadata: meta(name, Some(sless_namespace)),
            automount_service_account_token: Some(true),
            ..ServiceAccount::default()
        },
        cluster_role: ClusterRole { metadata: meta(name, None), rules: Some(cluster_rules), aggregation_rule: None },
        cluster_role_binding: ClusterRoleBinding {
            metadata: meta(name, None),
            role_ref: role_ref("ClusterRole"),
            subjects: Some(vec![subject.clone()]),
        },
        build_role: Role { metadata: meta(name, Some(build_namespace)), rules: Some(build_rules) },
        build_role_binding: RoleBinding {
            metadata: meta(name, Some(build_namespace)),
            role_ref: role_ref("Role"),
            subjects: Some(vec![subject.clone()]),
        },
        sless_role: Role { metadata: meta(name, Some(sless_namespace)), rules: Some(sless_rules) },
        sless_role_binding: RoleBinding {
            metadata: meta(name, Some(sless_namespace)),
            role_ref: role_ref("Role"),
            subjects: Some(vec![subject]),
        },
    }
}

/// The RBAC of the default install (service account `sless-operator` in `sless`, builds in
/// `sless-build`) as one multi-document YAML stream, as `deploy/rbac.yaml` holds it.
/// Errors: [`Error::Json`], [`Error::Yaml`].
pub fn rbac_yaml() -> Result<String> {
    let r = operator_rbac("sless-operator", "sless", "sless-build");
    let docs = [
        serde_json::to_string(&r.service_account),
        serde_json::to_string(&r.cluster_role),
        serde_json::to_string(&r.cluster_role_binding),
        serde_json::to_string(&r.build_role),
        serde_json::to_string(&r.build_role_binding),
        serde_json::to_string(&r.sless_role),
        serde_json::to_string(&r.sless_role_binding),
    ];
    let mut out = String::from(
        "# The operator's RBAC, generated from crates/sless-kube/src/rbac.rs (least privilege; no Secrets).\n",
    );
    for doc in docs {
        // Through JSON text, as crds_yaml does (serde_json's arbitrary_precision numbers).
        let value: serde_yaml::Value = serde_yaml::from_str(&doc.map_err(Error::Json)?)?;
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&value)?);
    }
    Ok(out)
}

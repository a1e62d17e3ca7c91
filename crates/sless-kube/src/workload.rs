//! What the operator applies for a tenant and its functions, as pure builders from the custom
//! resources and the operator's [`Settings`] (docs/kubernetes.md, "Workloads"): the tenant's
//! namespace `<prefix><namespace>` with its ResourceQuota, LimitRange and NetworkPolicies, and
//! per function a Deployment and a Service. Every object carries the labels that find it
//! again (no owner reference ever crosses a namespace: a Function lives in the tenant's own
//! namespace, its workloads in the prefixed one).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction, LimitRange, LimitRangeItem,
    LimitRangeSpec, Namespace, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceQuota, ResourceQuotaSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Service, ServiceAccount, ServicePort, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::crd::{Function, Runtime};

/// Label: the tenant (the namespace of the custom resources).
pub const TENANT_LABEL: &str = "sless.kube5s.ru/tenant";
/// Label: the function a workload runs.
pub const FUNCTION_LABEL: &str = "sless.kube5s.ru/function";
/// Label: who manages the object (`sless`).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The port a function's pod serves calls on (the shims' network mode).
pub const FUNCTION_PORT: i32 = 8080;
/// The path the readiness probe asks (answered by the shim once the handler is loaded).
pub const READY_PATH: &str = "/_sless/ready";
/// The unprivileged user functions run as (the distroless `nonroot` user).
pub const FUNCTION_UID: i64 = 65532;

/// How the operator names and bounds what it makes; every field is used (no dead settings).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Prefix of the tenants' workload namespaces (default `sless-fn-`).
    pub namespace_prefix: String,
    /// The namespace sless itself (API, operator) runs in: the only source of ingress to
    /// function pods, and a destination of their egress.
    pub sless_namespace: String,
    /// Per tenant: most pods (ResourceQuota `pods`).
    pub max_pods: u32,
    /// Per tenant: most memory of all pods, in MiB (ResourceQuota `limits.memory`).
    pub max_memory_mb: u64,
    /// CPU requested per function pod, in millicores.
    pub cpu_request_millis: u32,
    /// Address ranges of the cluster (pods, services, nodes) that function egress may not
    /// reach besides DNS and the sless namespace; the rest of the internet is allowed.
    pub cluster_cidrs: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace_prefix: "sless-fn-".into(),
            sless_namespace: "sless".into(),
            max_pods: 50,
            max_memory_mb: 16 * 1024,
            cpu_request_millis: 100,
            cluster_cidrs: vec!["10.0.0.0/8".into(), "172.16.0.0/12".into(), "192.168.0.0/16".into()],
        }
    }
}

impl Settings {
    /// The workload namespace of tenant `tenant`: `<prefix><tenant>`.
    pub fn workload_namespace(&self, tenant: &str) -> String {
        format!("{}{tenant}", self.namespace_prefix)
    }
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub(crate) fn mib(n: u64) -> Quantity {
    Quantity(format!("{n}Mi"))
}

pub(crate) fn meta(name: &str, namespace: Option<&str>, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// The tenant's workload namespace, enforcing Pod Security `restricted`.
pub fn tenant_namespace(settings: &Settings, tenant: &str) -> Namespace {
    let name = settings.workload_namespace(tenant);
    let labels = labels(&[
        (TENANT_LABEL, tenant),
        (MANAGED_BY_LABEL, "sless"),
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
        ("kubernetes.io/metadata.name", &name),
    ]);
    Namespace { metadata: meta(&name, None, labels), ..Namespace::default() }
}

/// The tenant's ResourceQuota: pods and memory ([`Settings::max_pods`],
/// [`Settings::max_memory_mb`]).
pub fn tenant_quota(settings: &Settings, tenant: &str) -> ResourceQuota {
    let ns = settings.workload_namespace(tenant);
    let hard = BTreeMap::from([
        ("pods".to_string(), Quantity(settings.max_pods.to_string())),
        ("limits.memory".to_string(), mib(settings.max_memory_mb)),
        ("requests.memory".to_string(), mib(settings.max_memory_mb)),
    ]);
    ResourceQuota {
        metadata: meta("sless-tenant", Some(&ns), labels(&[(TENANT_LABEL, tenant), (MANAGED_BY_LABEL, "sless")])),
        spec: Some(ResourceQuotaSpec { hard: Some(hard), ..ResourceQuotaSpec::default() }),
        ..ResourceQuota::default()
    }
}

/// The tenant's LimitRange: a container without limits gets the REST API's default memory
/// (128 MiB), and none may ask for more than the largest `memoryMb` (4096 MiB).
pub fn tenant_limits(settings: &Settings, tenant: &str) -> LimitRange {
    let ns = settings.workload_namespace(tenant);
    let item = LimitRangeItem {
        type_: "Container".into(),
        default: Some(BTreeMap::from([("memory".to_string(), mib(128))])),
        default_request: Some(BTreeMap::from([("memory".to_string(), mib(128))])),
        max: Some(BTreeMap::from([("memory".to_string(), mib(4096))])),
        ..LimitRangeItem::default()
    };
    LimitRange {
        metadata: meta("sless-tenant", Some(&ns), labels(&[(TENANT_LABEL, tenant), (MANAGED_BY_LABEL, "sless")])),
        spec: Some(LimitRangeSpec { limits: vec![item] }),
    }
}

fn namespace_peer(name: &str) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(labels(&[("kubernetes.io/metadata.name", name)])),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The tenant's NetworkPolicy: ingress only from the sless namespace; egress to DNS
/// (kube-system, port 53), to the sless namespace, and to the internet outside
/// [`Settings::cluster_cidrs`] — never to other tenants.
pub fn tenant_network_policy(settings: &Settings, tenant: &str) -> NetworkPolicy {
    let ns = settings.workload_namespace(tenant);
    let dns_ports = ["UDP", "TCP"]
        .map(|protocol| NetworkPolicyPort {
            protocol: Some(protocol.into()),
            port: Some(IntOrString::Int(53)),
            ..NetworkPolicyPort::default()
        })
        .to_vec();
    let egress = vec![
        NetworkPolicyEgressRule { to: Some(vec![namespace_peer("kube-system")]), ports: Some(dns_ports) },
        NetworkPolicyEgressRule { to: Some(vec![namespace_peer(&settings.sless_namespace)]), ports: None },
        NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock { cidr: "0.0.0.0/0".into(), except: Some(settings.cluster_cidrs.clone()) }),
                ..NetworkPolicyPeer::default()
            }]),
            ports: None,
        },
    ];
    NetworkPolicy {
        metadata: meta("sless-tenant", Some(&ns), labels(&[(TENANT_LABEL, tenant), (MANAGED_BY_LABEL, "sless")])),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![namespace_peer(&settings.sless_namespace)]),
                ports: None,
            }]),
            egress: Some(egress),
        }),
    }
}

/// The service account the tenant's cron pods run as (`sless-cron`): no secret and no
/// mounted token; the pods present a projected token of it to the sless API
/// (docs/kubernetes.md, "Triggers").
pub const CRON_SERVICE_ACCOUNT: &str = "sless-cron";

/// The tenant's [`CRON_SERVICE_ACCOUNT`] in its workload namespace.
pub fn tenant_cron_service_account(settings: &Settings, tenant: &str) -> ServiceAccount {
    let ns = settings.workload_namespace(tenant);
    ServiceAccount {
        metadata: meta(CRON_SERVICE_ACCOUNT, Some(&ns), labels(&[(TENANT_LABEL, tenant), (MANAGED_BY_LABEL, "sless")])),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// The labels of a function's workloads (and the Deployment's selector).
fn function_labels(tenant: &str, function: &str) -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/name", function),
        (MANAGED_BY_LABEL, "sless"),
        (TENANT_LABEL, tenant),
        (FUNCTION_LABEL, function),
    ])
}

/// What the shim is told of the function (the variables of docs/writing-functions.md).
fn function_env(f: &Function, tenant: &str) -> Vec<EnvVar> {
    let var = |name: &str, value: String| EnvVar { name: name.into(), value: Some(value), value_from: None };
    let runtime = match f.spec.runtime {
        Runtime::Python311 => "python3.11",
        Runtime::Nodejs20 => "nodejs20",
    };
    let mut env = vec![
        var("SLESS_NAMESPACE", tenant.to_string()),
        var("SLESS_FUNCTION_NAME", f.name_any()),
        var("SLESS_RUNTIME", runtime.into()),
        var("SLESS_ENTRYPOINT", f.spec.entrypoint.clone()),
        var("SLESS_MEMORY_MB", f.spec.memory_mb.to_string()),
        var("SLESS_TIMEOUT_SEC", f.spec.timeout_sec.to_string()),
        var("SLESS_CONCURRENCY", f.spec.concurrency.to_string()),
        var("SLESS_LISTEN_PORT", FUNCTION_PORT.to_string()),
        var("HOME", "/tmp".into()),
        var("TMPDIR", "/tmp".into()),
    ];
    env.extend(f.spec.env.iter().map(|(k, v)| var(k, v.clone())));
    env
}

/// The Deployment serving function `f` (of namespace `tenant`) from `image`, in the tenant's
/// workload namespace. It leaves `replicas` out: the API scales it through
/// `deployments/scale` (the activator), from zero on demand. The pod runs as a non-root user,
/// with a read-only root filesystem and a writable `/tmp`, no service-account token, seccomp
/// `RuntimeDefault` and every capability dropped (Pod Security `restricted`); its memory
/// request and limit are `memoryMb`.
pub fn deployment(settings: &Settings, tenant: &str, f: &Function, image: &str) -> Deployment {
    let name = f.name_any();
    let ns = settings.workload_namespace(tenant);
    let selector = labels(&[(TENANT_LABEL, tenant), (FUNCTION_LABEL, &name)]);
    let memory = mib(u64::from(f.spec.memory_mb));
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("memory".to_string(), memory.clone()),
            ("cpu".to_string(), Quantity(format!("{}m", settings.cpu_request_millis))),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), memory)])),
        ..ResourceRequirements::default()
    };
    let container = Container {
        name: "function".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        env: Some(function_env(f, tenant)),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: FUNCTION_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some(READY_PATH.into()),
                port: IntOrString::String("http".into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        resources: Some(resources),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(FUNCTION_UID),
            run_as_group: Some(FUNCTION_UID),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
            ..PodSecurityContext::default()
        }),
        termination_grace_period_seconds: Some(i64::from(f.spec.timeout_sec) + 5),
        volumes: Some(vec![Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource { size_limit: Some(mib(512)), ..EmptyDirVolumeSource::default() }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    Deployment {
        metadata: meta(&name, Some(&ns), function_labels(tenant, &name)),
        spec: DeploymentSpec {
            selector: LabelSelector { match_labels: Some(selector), ..LabelSelector::default() },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(function_labels(tenant, &name)), ..ObjectMeta::default() }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

/// The Service in front of function `f`'s pods (the gateway reaches them through its
/// EndpointSlices).
pub fn service(settings: &Settings, tenant: &str, f: &Function) -> Service {
    let name = f.name_any();
    let ns = settings.workload_namespace(tenant);
    Service {
        metadata: meta(&name, Some(&ns), function_labels(tenant, &name)),
        spec: Some(ServiceSpec {
            selector: Some(labels(&[(TENANT_LABEL, tenant), (FUNCTION_LABEL, &name)])),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: FUNCTION_PORT,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

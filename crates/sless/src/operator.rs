//! `sless operator`: the Kubernetes backend's controllers (docs/kubernetes.md, "The
//! operator"). Parses the settings, checks them, connects to the cluster as kubectl would
//! (KUBECONFIG, else the in-cluster service account) and runs until SIGTERM or Ctrl-C.

use std::sync::Arc;

use anyhow::Context as _;
use sless_kube::build::{BaseImages, BuildSettings};
use sless_kube::operator::{self, Context, Election};
use sless_kube::trigger::TriggerSettings;
use sless_kube::workload::Settings;

use crate::cli::OperatorArgs;

/// The operator's settings from its flags, checked (images pinned by digest, an s3:// archive
/// store). Errors name the flag.
/// What `settings` makes of the flags.
struct Parsed {
    settings: Settings,
    build: BuildSettings,
    triggers: TriggerSettings,
    watch_namespace: Option<String>,
    election: Option<Election>,
}

fn settings(args: OperatorArgs) -> anyhow::Result<Parsed> {
    let settings = Settings {
        namespace_prefix: args.namespace_prefix,
        sless_namespace: args.sless_namespace,
        max_pods: args.tenant_max_pods,
        max_memory_mb: args.tenant_max_memory_mb,
        cpu_request_millis: args.cpu_request_millis,
        cluster_cidrs: args.cluster_cidrs,
    };
    let build = BuildSettings {
        namespace: args.build_namespace,
        builder_image: args.builder_image,
        sless_image: args.sless_image,
        base_images: BaseImages { python311: args.python311_base_image, nodejs20: args.nodejs20_base_image },
        repository: args.image_repository,
        blob_url: args.blob_url,
        blob_secret: args.blob_secret,
        push_secret: args.push_secret,
        deadline_sec: args.build_deadline_sec,
        ttl_after_finished_sec: args.build_ttl_sec,
        memory_mb: args.build_memory_mb,
        pod_labels: args
            .build_pod_labels
            .iter()
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => anyhow::bail!("--build-pod-label {pair:?}: expected KEY=VALUE"),
            })
            .collect::<anyhow::Result<_>>()?,
    };
    build.check()?;
    let triggers = TriggerSettings {
        api_service: args.api_service,
        api_port: args.api_port,
        ingress_class: args.ingress_class,
        ingress_host: args.ingress_host,
        token_audience: args.token_audience,
        starting_deadline_sec: args.cron_starting_deadline_sec,
    };
    let election = args.leader_elect.then(|| Election {
        namespace: settings.sless_namespace.clone(),
        lease: args.lease_name,
        identity: args
            .lease_identity
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("sless-operator-{}", std::process::id())),
        duration_sec: args.lease_duration_sec,
        grace_sec: args.lease_grace_sec,
    });
    if let Some(e) = &election {
        anyhow::ensure!(
            e.grace_sec < e.duration_sec,
            "--lease-grace-sec ({}) must be less than --lease-duration-sec ({})",
            e.grace_sec,
            e.duration_sec
        );
    }
    Ok(Parsed { settings, build, triggers, watch_namespace: args.watch_namespace, election })
}

/// Runs the Function and Trigger controllers until SIGTERM or Ctrl-C.
pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    let Parsed { settings, build, triggers, watch_namespace, election } = settings(args)?;
    // kube's TLS (rustls): the workspace enables two crypto providers, so one is chosen here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube::Client::try_default().await.context("connecting to the cluster (KUBECONFIG or in-cluster)")?;
    tracing::info!(
        watch_namespace = watch_namespace.as_deref().unwrap_or("(all)"),
        build_namespace = %build.namespace,
        namespace_prefix = %settings.namespace_prefix,
        "operator started"
    );
    let ctx = Arc::new(Context { client, settings, build, triggers, watch_namespace, tenants: Default::default() });
    match election {
        Some(election) => operator::run_elected(ctx, election, crate::serve::shutdown_signal()).await?,
        None => operator::run(ctx, crate::serve::shutdown_signal()).await,
    }
    tracing::info!("operator stopped");
    Ok(())
}

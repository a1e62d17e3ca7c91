//! `sless operator`: the Kubernetes backend's controllers (docs/kubernetes.md, "The
//! operator"). Parses the settings, checks them, connects to the cluster as kubectl would
//! (KUBECONFIG, else the in-cluster service account) and runs until SIGTERM or Ctrl-C.

use std::sync::Arc;

use anyhow::Context as _;
use sless_kube::build::{BaseImages, BuildSettings};
use sless_kube::operator::{self, Context};
use sless_kube::trigger::TriggerSettings;
use sless_kube::workload::Settings;

use crate::cli::OperatorArgs;

/// The operator's settings from its flags, checked (images pinned by digest, an s3:// archive
/// store). Errors name the flag.
fn settings(args: OperatorArgs) -> anyhow::Result<(Settings, BuildSettings, TriggerSettings, Option<String>)> {
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
        pod_labels: Default::default(),
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
    Ok((settings, build, triggers, args.watch_namespace))
}

/// Runs the Function and Trigger controllers until SIGTERM or Ctrl-C.
pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    let (settings, build, triggers, watch_namespace) = settings(args)?;
    // kube's TLS (rustls): the workspace enables two crypto providers, so one is chosen here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube::Client::try_default().await.context("connecting to the cluster (KUBECONFIG or in-cluster)")?;
    tracing::info!(
        watch_namespace = watch_namespace.as_deref().unwrap_or("(all)"),
        build_namespace = %build.namespace,
        namespace_prefix = %settings.namespace_prefix,
        "operator started"
    );
    let ctx = Arc::new(Context { client, settings, build, triggers, watch_namespace });
    operator::run(ctx, crate::serve::shutdown_signal()).await;
    tracing::info!("operator stopped");
    Ok(())
}

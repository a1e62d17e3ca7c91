//! The Terraform provider of sless (`kube5s/sless`, Terraform plugin protocol 6, served by
//! the `tf-provider` crate): resources `sless_function`, `sless_trigger`,
//! `sless_function_job` and `sless_token`, data sources `sless_function` and
//! `sless_functions` (docs/terraform.md).
//!
//! It talks to the sless API only, through [`sless_client`]. Terraform starts the provider
//! anew for every phase (validate, plan, apply), so it keeps nothing between calls but the
//! connection [`SlessProvider::configure`](tf_provider::Provider::configure) sets up: every
//! fact comes from the configuration, the state Terraform hands over, or the server.

mod archive;
mod data;
mod error;
mod function;
mod job;
mod provider;
mod token;
mod trigger;
mod util;

pub use archive::{read_zip, sha256, skipped, zip_dir};
pub use error::{Context, Error, Result, attribute_of, diagnostic};
pub use provider::{Conn, SlessProvider};

/// The provider's name in its source address `kube5s/sless`.
pub const PROVIDER_NAME: &str = "sless";

/// Serves the provider on the go-plugin handshake Terraform expects (prints the handshake
/// line on stdout, then answers gRPC until Terraform stops it). Errors: the listener or the
/// TLS setup failed (as reported by `tf-provider`).
pub async fn serve() -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tf_provider::serve(PROVIDER_NAME, SlessProvider::default()).await.map_err(|e| e.into())
}

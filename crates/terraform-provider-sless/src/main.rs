//! `terraform-provider-sless`: the binary Terraform starts (see the library for what it does).

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    // Terraform's AutoMTLS needs a TLS server; with both of rustls' providers compiled in (the
    // workspace enables ring and aws-lc-rs), rustls cannot pick one by itself and the handshake
    // dies before Terraform reads it ("Unrecognized remote plugin message").
    let _ = rustls::crypto::ring::default_provider().install_default();
    match terraform_provider_sless::serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terraform-provider-sless: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! `terraform-provider-sless`: the binary Terraform starts (see the library for what it does).

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match terraform_provider_sless::serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terraform-provider-sless: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

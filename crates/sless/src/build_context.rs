//! `sless build-context` (docs/kubernetes.md, "Builds"): the first container of a build Job.
//! It fetches `archives/<sha256>.zip`, refuses bytes whose SHA-256 is not the one asked for,
//! unpacks them with the upload's own checks (`sless_core::archive::unpack`), and writes the
//! context the builder reads: `code/`, `runtime/<shim>` and a `Dockerfile`.

use anyhow::{Context as _, bail, ensure};
use sha2::Digest;
use sless_core::archive::{ArchiveLimits, blob_key, unpack};
use sless_core::runtime::Runtime;
use sless_core::traits::BlobStore;

use crate::cli::BuildContextArgs;

/// Writes the build context of `args.sha256` into `args.out`.
pub async fn run(args: BuildContextArgs) -> anyhow::Result<()> {
    let sha = args.sha256.trim();
    ensure!(
        sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "--sha256 {sha:?}: expected 64 lowercase hex digits"
    );
    let runtime = Runtime::parse("runtime", &args.runtime)?;
    ensure!(
        sless_kube::build::pinned_by_digest(&args.base_image),
        "--base-image {:?}: not pinned by digest (expected NAME@sha256:<64 hex>)",
        args.base_image
    );
    let out = &args.out;
    if out.exists() && std::fs::read_dir(out).with_context(|| format!("--out {}", out.display()))?.next().is_some() {
        bail!("--out {}: the folder is not empty", out.display());
    }
    let blobs = crate::serve::open_blob_url(&args.blob_url).await?;
    let key = blob_key(sha);
    let bytes = blobs.get(&key).await.with_context(|| format!("cannot read {key} from {}", args.blob_url))?;
    let got = hex::encode(sha2::Sha256::digest(&bytes));
    ensure!(got == sha, "{key}: its bytes have SHA-256 {got}, not {sha}; the archive store holds something else");
    let code = out.join("code");
    std::fs::create_dir_all(&code).with_context(|| format!("creating {}", code.display()))?;
    unpack(&bytes, &code, &ArchiveLimits::default()).with_context(|| format!("unpacking {key}"))?;
    let (shim_file, shim) = sless_local::shim_source(runtime);
    let runtime_dir = out.join("runtime");
    std::fs::create_dir_all(&runtime_dir).with_context(|| format!("creating {}", runtime_dir.display()))?;
    std::fs::write(runtime_dir.join(shim_file), shim).context("writing the shim")?;
    let kube_runtime = match runtime {
        Runtime::Python311 => sless_kube::crd::Runtime::Python311,
        Runtime::Nodejs20 => sless_kube::crd::Runtime::Nodejs20,
    };
    let dockerfile = sless_kube::build::dockerfile(kube_runtime, &args.base_image, shim_file);
    std::fs::write(out.join("Dockerfile"), dockerfile).context("writing the Dockerfile")?;
    eprintln!("wrote the build context of {key} ({} bytes) to {}", bytes.len(), out.display());
    Ok(())
}

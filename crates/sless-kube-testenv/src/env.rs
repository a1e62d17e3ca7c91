//! The control plane a test binary uses: the one named by `SLESS_TEST_KUBECONFIG` (`scripts/test`
//! starts one for the whole run), or else one this binary starts with `scripts/kube-testenv`
//! and that the script's watcher stops when the binary has exited.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, Result};

/// A running control plane: where its admin kubeconfig is (a client certificate in
/// `system:masters`) and whether this process started it.
#[derive(Debug)]
pub struct ControlPlane {
    kubeconfig: PathBuf,
    started_here: bool,
}

impl ControlPlane {
    /// The admin kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Whether this test binary started the control plane (`false`: `SLESS_TEST_KUBECONFIG`).
    pub fn started_here(&self) -> bool {
        self.started_here
    }

    /// The client configuration from the kubeconfig file.
    ///
    /// # Errors
    /// [`Error::Kubeconfig`] when the file cannot be read or holds no usable context.
    pub async fn config(&self) -> Result<kube::Config> {
        install_crypto_provider();
        let kubeconfig_error = |source| Error::Kubeconfig { path: self.kubeconfig.clone(), source };
        let file = Kubeconfig::read_from(&self.kubeconfig).map_err(kubeconfig_error)?;
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await.map_err(kubeconfig_error)
    }

    /// A new client as the admin user. A client belongs to the Tokio runtime it was made on
    /// (each `#[tokio::test]` has its own), so make one per test rather than sharing one.
    ///
    /// # Errors
    /// [`Error::Kubeconfig`], or [`Error::Kube`] when the client cannot be built.
    pub async fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }
}

/// Installs rustls' `ring` provider as the process default, once. kube-rs enables `ring`; in a
/// `cargo test --workspace` build, feature unification also enables `aws-lc-rs` (object_store's
/// S3 client), and with two providers compiled in rustls refuses to pick one: the first TLS
/// connection panics with "Could not automatically determine the process-level
/// CryptoProvider" (docs/errors-log.md).
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means another provider is already the default, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

static PLANE: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();

/// The control plane of this test binary, started on first use (blocking: `build` is a no-op
/// when the binaries are cached, about 10 s for `start`; a first `build` compiles for minutes).
///
/// `SLESS_TEST_KUBECONFIG`, when set, names a running control plane's kubeconfig and nothing is
/// started. Otherwise `scripts/kube-testenv build` and `start` run with a state folder of this
/// process's own (`$TMPDIR/sless-kube-testenv-<pid>`) and `SLESS_KUBE_TESTENV_PARENT_PID` set to
/// this process, so the script stops the instance once the test binary has ended, whichever
/// way it ends.
///
/// # Errors
/// [`Error::Spawn`] or [`Error::Script`] from the script on the first call;
/// [`Error::Unavailable`] with the first error's text on every later call.
pub fn control_plane() -> Result<&'static ControlPlane> {
    let mut first_error = None;
    let plane = PLANE.get_or_init(|| match start() {
        Ok(plane) => Ok(plane),
        Err(err) => {
            let text = err.to_string();
            first_error = Some(err);
            Err(text)
        }
    });
    match (plane, first_error) {
        (Ok(plane), _) => Ok(plane),
        (Err(_), Some(err)) => Err(err),
        (Err(text), None) => Err(Error::Unavailable(text.clone())),
    }
}

fn start() -> Result<ControlPlane> {
    if let Some(path) = std::env::var_os("SLESS_TEST_KUBECONFIG") {
        return Ok(ControlPlane { kubeconfig: PathBuf::from(path), started_here: false });
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kube-testenv");
    let state = std::env::temp_dir().join(format!("sless-kube-testenv-{}", std::process::id()));
    run(&script, "build", &state)?;
    let out = run(&script, "start", &state)?;
    let kubeconfig = out.lines().last().unwrap_or_default().trim();
    if kubeconfig.is_empty() {
        return Err(Error::Script {
            command: format!("{} start", script.display()),
            status: "exit 0".into(),
            output: "printed no kubeconfig path".into(),
        });
    }
    Ok(ControlPlane { kubeconfig: PathBuf::from(kubeconfig), started_here: true })
}

/// Runs `script verb` for the instance in `state`; returns its standard output. Its standard
/// error (progress) is passed through, so a long first build shows in the test's output.
fn run(script: &Path, verb: &str, state: &Path) -> Result<String> {
    let command = format!("{} {verb}", script.display());
    let out = Command::new(script)
        .arg(verb)
        .env("SLESS_KUBE_TESTENV_DIR", state)
        .env("SLESS_KUBE_TESTENV_PARENT_PID", std::process::id().to_string())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|source| Error::Spawn { command: command.clone(), source })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!("{stderr}");
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let output = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(Error::Script { command, status: out.status.to_string(), output });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

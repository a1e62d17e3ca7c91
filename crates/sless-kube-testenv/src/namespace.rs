//! A namespace of its own for each test, deleted when the test's [`TestNamespace`] is dropped
//! (also when the test panics).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, Resource};
use rand::Rng;

use crate::{Error, Result, control_plane};

/// The label every test namespace carries (value `"true"`), to find leftovers.
pub const TEST_NAMESPACE_LABEL: &str = "kube-testenv.sless.invalid/test";

/// How long [`TestNamespace::create`] waits for the namespace's `default` ServiceAccount (the
/// ServiceAccount admission plugin refuses pods until the controller-manager has made it).
const SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(30);

/// A namespace made for one test on the test binary's control plane, with an admin client.
/// Dropping it deletes the namespace (Kubernetes then deletes what is in it).
pub struct TestNamespace {
    name: String,
    client: Client,
    config: kube::Config,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace").field("name", &self.name).finish_non_exhaustive()
    }
}

impl TestNamespace {
    /// Creates namespace `<prefix>-<6 random characters>` (so `prefix`, a DNS label, is at
    /// most 56 characters) and waits until its `default` ServiceAccount exists.
    ///
    /// # Errors
    /// As [`control_plane`]; [`Error::Kube`] when the namespace cannot be created;
    /// [`Error::Timeout`] when the ServiceAccount does not appear within 30 s.
    pub async fn create(prefix: &str) -> Result<Self> {
        Self::create_labelled(prefix, BTreeMap::new()).await
    }

    /// As [`TestNamespace::create`], with `labels` on the namespace as well (e.g.
    /// `pod-security.kubernetes.io/enforce: restricted`).
    ///
    /// # Errors
    /// As [`TestNamespace::create`].
    pub async fn create_labelled(prefix: &str, mut labels: BTreeMap<String, String>) -> Result<Self> {
        // The first call may build and start the control plane: off the runtime's thread.
        let plane =
            tokio::task::spawn_blocking(control_plane).await.map_err(|err| Error::Unavailable(err.to_string()))??;
        let config = plane.config().await?;
        let client = Client::try_from(config.clone())?;
        let suffix: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .map(|c| char::from(c).to_ascii_lowercase())
            .take(6)
            .collect();
        let name = format!("{prefix}-{suffix}");
        labels.insert(TEST_NAMESPACE_LABEL.into(), "true".into());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(name.clone());
        namespace.metadata.labels = Some(labels);
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
        let this = Self { name, client, config };
        let accounts = this.api::<ServiceAccount>();
        let deadline = tokio::time::Instant::now() + SERVICE_ACCOUNT_WAIT;
        while accounts.get_opt("default").await?.is_none() {
            if tokio::time::Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("ServiceAccount {}/default", this.name),
                    after: SERVICE_ACCOUNT_WAIT,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(this)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin client (made on the creating test's runtime).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// An API for the namespaced kind `K` in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    /// Deletes the namespace from a thread with a runtime of its own: `drop` cannot await, and
    /// the test's runtime may be the one unwinding.
    fn drop(&mut self) {
        let config = self.config.clone();
        let name = self.name.clone();
        let deleted = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let client = Client::try_from(config).map_err(|e| e.to_string())?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(err)) = deleted {
            eprintln!("kube-testenv: could not delete namespace {}: {err}", self.name);
        }
    }
}

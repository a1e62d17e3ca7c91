//! What a call needs from the registry — the function's target (spec, active version and its
//! archive) and, for the public `/fn/` route, the function's http trigger — kept in memory,
//! so a warm call reads no database.
//!
//! Entries are stamped with the registry's [`generation`](sless_core::traits::Registry::generation)
//! read before they were loaded; any change the registry announces (a deploy, a rollback, a
//! spec or trigger edit, a status update) moves the generation on and empties the cache, so
//! a call that starts after a write has returned sees it. Changes made by another server on
//! the same PostgreSQL database arrive with its announcement (milliseconds later); an entry
//! is also never used after [`MAX_AGE`], which bounds what a lost announcement can cost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sless_core::decide::callable;
use sless_core::traits::{InvokeTarget, Page, Registry};
use sless_core::trigger::{TriggerRecord, TriggerType};

use crate::{Error, Result};

/// The longest an entry is used without reading the registry again (1 s).
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// A function's target, or why it cannot be called now (`Error::NotReady`'s message).
type TargetEntry = std::result::Result<InvokeTarget, String>;

#[derive(Default)]
struct Entries {
    /// The registry generation every entry was loaded at (or after).
    generation: u64,
    /// (namespace, function) → target.
    targets: HashMap<(String, String), (Instant, TargetEntry)>,
    /// namespace → function → its enabled http trigger.
    http: HashMap<String, (Instant, Arc<HashMap<String, TriggerRecord>>)>,
}

/// The cache in front of the registry for the call path. Missing functions are not cached
/// (names nobody deployed cannot fill memory).
pub struct RouteCache {
    registry: Arc<dyn Registry>,
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for RouteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouteCache")
    }
}

impl RouteCache {
    /// An empty cache over `registry`.
    pub fn new(registry: Arc<dyn Registry>) -> Self {
        RouteCache { registry, entries: Mutex::new(Entries::default()) }
    }

    /// The entries, emptied first if the registry has changed since they were loaded.
    fn current(&self, generation: u64) -> MutexGuard<'_, Entries> {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.generation != generation {
            e.targets.clear();
            e.http.clear();
            e.generation = generation;
        }
        e
    }

    /// What to run for a function now. Errors: `Core(NotFound)` for a missing function,
    /// [`Error::NotReady`] when it has no active version or is disabled, storage errors.
    pub async fn target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        let generation = self.registry.generation();
        let key = (namespace.to_string(), name.to_string());
        if let Some((at, entry)) = self.current(generation).targets.get(&key)
            && at.elapsed() < MAX_AGE
        {
            return entry.clone().map_err(Error::NotReady);
        }
        let entry = self.load_target(namespace, name).await?;
        let mut e = self.current(self.registry.generation());
        if e.generation == generation {
            e.targets.insert(key, (Instant::now(), entry.clone()));
        }
        entry.map_err(Error::NotReady)
    }

    async fn load_target(&self, namespace: &str, name: &str) -> Result<TargetEntry> {
        let f = self.registry.get_function(namespace, name).await?;
        let version = match callable(f.spec.enabled, f.active_version, &f.status) {
            Ok(v) => v,
            Err(why) => return Ok(Err(why)),
        };
        let v = self.registry.get_version(namespace, name, version).await?;
        Ok(Ok(InvokeTarget { namespace: f.namespace, name: f.name, spec: f.spec, version, sha256: v.sha256 }))
    }

    /// The function's enabled http trigger (at most one: the store's unique index; the first
    /// by name should an older database hold two), `None` without one. A namespace without
    /// any is not cached: unauthenticated `/fn/` calls naming made-up namespaces must not grow
    /// the cache.
    pub async fn http_trigger(&self, namespace: &str, function: &str) -> Result<Option<TriggerRecord>> {
        let generation = self.registry.generation();
        let cached = match self.current(generation).http.get(namespace) {
            Some((at, index)) if at.elapsed() < MAX_AGE => Some(index.clone()),
            _ => None,
        };
        let index = match cached {
            Some(index) => index,
            None => {
                let index = Arc::new(self.load_http(namespace).await?);
                let mut e = self.current(self.registry.generation());
                if e.generation == generation && !index.is_empty() {
                    e.http.insert(namespace.to_string(), (Instant::now(), index.clone()));
                }
                index
            }
        };
        Ok(index.get(function).cloned())
    }

    /// Every enabled http trigger of a namespace, by function.
    async fn load_http(&self, namespace: &str) -> Result<HashMap<String, TriggerRecord>> {
        let mut index = HashMap::new();
        let mut page = Page::first(1000);
        loop {
            let batch = self.registry.list_triggers(namespace, &page).await?;
            for t in batch.items {
                if t.spec.kind == TriggerType::Http && t.spec.enabled {
                    index.entry(t.spec.function.clone()).or_insert(t);
                }
            }
            match batch.next {
                Some(next) => page.continue_token = Some(next),
                None => return Ok(index),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sless_core::runtime::Runtime;
    use sless_core::status::{FunctionPhase, FunctionStatus};
    use sless_core::trigger::TriggerSpec;
    use sless_store::SqlRegistry;
    use sless_store::testing::function_record;

    use super::*;

    async fn ready(reg: &SqlRegistry, name: &str, sha: &str) -> u32 {
        let (v, _) = reg.add_version("default", name, sha, 1, Runtime::Python311).await.expect("version");
        let mut status = FunctionStatus::pending(sless_core::time::now());
        status.phase = FunctionPhase::Ready;
        reg.update_status("default", name, &status, Some(v.version)).await.expect("status");
        v.version
    }

    /// Every write is seen by the next lookup: deploys, disabling, deletion, triggers.
    #[tokio::test]
    async fn a_lookup_after_a_write_sees_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("open");
        let cache = RouteCache::new(Arc::new(reg.clone()));
        assert!(matches!(cache.target("default", "f").await, Err(Error::Core(sless_core::Error::NotFound { .. }))));

        reg.create_function(&sless_core::traits::New::from(&function_record("f"))).await.expect("create");
        assert!(matches!(cache.target("default", "f").await, Err(Error::NotReady(_))));
        let v1 = ready(&reg, "f", "aa").await;
        let t = cache.target("default", "f").await.expect("target");
        assert_eq!((t.version, t.sha256.as_str()), (v1, "aa"));
        assert_eq!(cache.target("default", "f").await.expect("cached").version, v1);

        let v2 = ready(&reg, "f", "bb").await;
        assert_ne!(v1, v2);
        assert_eq!(cache.target("default", "f").await.expect("target").sha256, "bb");

        let mut spec = reg.get_function("default", "f").await.expect("get").spec;
        spec.enabled = false;
        reg.replace_spec("default", "f", &spec, None).await.expect("disable");
        assert!(matches!(cache.target("default", "f").await, Err(Error::NotReady(m)) if m.contains("disabled")));

        assert_eq!(cache.http_trigger("default", "f").await.expect("lookup"), None);
        let (_, spec) =
            TriggerSpec::from_json(&serde_json::json!({"function": "f", "type": "http"}), |_, _| Ok(())).expect("spec");
        let now = sless_core::time::now();
        let trigger = TriggerRecord {
            namespace: "default".into(),
            name: "f-http".into(),
            spec,
            resource_version: sless_core::resource_version::ResourceVersion::from_count(1),
            status: sless_core::trigger::TriggerStatus::new(),
            created_at: now,
            updated_at: now,
        };
        reg.create_trigger(&sless_core::traits::New::from(&trigger)).await.expect("trigger");
        assert_eq!(cache.http_trigger("default", "f").await.expect("lookup").map(|t| t.name), Some("f-http".into()));
        assert_eq!(cache.http_trigger("default", "g").await.expect("lookup"), None);
        reg.delete_trigger("default", "f-http").await.expect("delete trigger");
        assert_eq!(cache.http_trigger("default", "f").await.expect("lookup"), None);

        reg.delete_function("default", "f").await.expect("delete");
        assert!(matches!(cache.target("default", "f").await, Err(Error::Core(sless_core::Error::NotFound { .. }))));
    }
}

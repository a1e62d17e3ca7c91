//! [`FakeTenants`]: namespaces and tokens in memory, with the SQL store's semantics
//! (`crates/sless-store/src/sql/tests.rs`, `namespaces_and_tokens`).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use chrono::{SubsecRound, Utc};
use sless_core::resource_version::ResourceVersion;
use sless_core::tenant::{DEFAULT_NAMESPACE, NamespacePhase, NamespaceRecord, Quotas, StoredToken, TokenRecord};
use sless_core::traits::{Listed, Page, Tenants};
use sless_core::{Error, Result};

#[derive(Debug, Default)]
struct State {
    namespaces: BTreeMap<String, NamespaceRecord>,
    tokens: BTreeMap<String, StoredToken>,
}

/// Namespaces and tokens in memory; `default` exists from the start.
#[derive(Debug)]
pub struct FakeTenants {
    state: Mutex<State>,
}

impl Default for FakeTenants {
    fn default() -> Self {
        let fake = FakeTenants { state: Mutex::default() };
        fake.lock().namespaces.insert(DEFAULT_NAMESPACE.into(), namespace(DEFAULT_NAMESPACE, &Quotas::default()));
        fake
    }
}

impl FakeTenants {
    /// Empty but for `default`.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn namespace(name: &str, quotas: &Quotas) -> NamespaceRecord {
    let at = Utc::now().trunc_subsecs(3);
    NamespaceRecord {
        name: name.into(),
        quotas: *quotas,
        phase: NamespacePhase::Active,
        resource_version: ResourceVersion::from_count(1),
        created_at: at,
        updated_at: at,
    }
}

/// Takes `name` out of every token, deleting the tokens left with none.
fn forget(state: &mut State, name: &str) {
    state.tokens.retain(|_, t| {
        t.record.namespaces.retain(|n| n != name);
        !t.record.namespaces.is_empty()
    });
}

fn not_found(kind: &'static str, name: &str) -> Error {
    Error::NotFound { kind, name: name.into() }
}

#[async_trait::async_trait]
impl Tenants for FakeTenants {
    async fn ensure_namespace(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        if !state.namespaces.contains_key(name) {
            state.namespaces.insert(name.into(), namespace(name, &Quotas::default()));
            forget(&mut state, name);
        }
        Ok(())
    }

    async fn create_namespace(&self, name: &str, quotas: &Quotas) -> Result<NamespaceRecord> {
        let mut state = self.lock();
        if state.namespaces.contains_key(name) {
            return Err(Error::AlreadyExists { kind: "namespace", name: name.into() });
        }
        let record = namespace(name, quotas);
        state.namespaces.insert(name.into(), record.clone());
        forget(&mut state, name);
        Ok(record)
    }

    async fn get_namespace(&self, name: &str) -> Result<NamespaceRecord> {
        self.lock().namespaces.get(name).cloned().ok_or_else(|| not_found("namespace", name))
    }

    async fn list_namespaces(&self, page: &Page) -> Result<Listed<NamespaceRecord>> {
        let after = page.continue_token.clone().unwrap_or_default();
        let items: Vec<NamespaceRecord> = self
            .lock()
            .namespaces
            .range::<String, _>((std::ops::Bound::Excluded(&after), std::ops::Bound::Unbounded))
            .take(page.limit as usize + 1)
            .map(|(_, n)| n.clone())
            .collect();
        Ok(Listed::from_overfetch(items, page.limit, |n: &NamespaceRecord| n.name.clone()))
    }

    async fn replace_quotas(
        &self,
        name: &str,
        quotas: &Quotas,
        expected: Option<&ResourceVersion>,
    ) -> Result<NamespaceRecord> {
        let mut state = self.lock();
        let record = state.namespaces.get_mut(name).ok_or_else(|| not_found("namespace", name))?;
        if let Some(expected) = expected
            && *expected != record.resource_version
        {
            return Err(Error::Stale { expected: expected.to_string(), current: record.resource_version.to_string() });
        }
        let next = record.resource_version.as_count().unwrap_or(0) + 1;
        record.quotas = *quotas;
        record.resource_version = ResourceVersion::from_count(next);
        record.updated_at = Utc::now().trunc_subsecs(3);
        Ok(record.clone())
    }

    async fn terminate_namespace(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        let record = state.namespaces.get_mut(name).ok_or_else(|| not_found("namespace", name))?;
        record.phase = NamespacePhase::Terminating;
        Ok(())
    }

    async fn delete_namespace(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        state.namespaces.remove(name).ok_or_else(|| not_found("namespace", name))?;
        forget(&mut state, name);
        Ok(())
    }

    async fn create_token(&self, token: &StoredToken) -> Result<()> {
        let mut state = self.lock();
        if state.tokens.contains_key(&token.record.id) {
            return Err(Error::AlreadyExists { kind: "token", name: token.record.id.clone() });
        }
        state.tokens.insert(token.record.id.clone(), token.clone());
        Ok(())
    }

    async fn get_token(&self, id: &str) -> Result<StoredToken> {
        self.lock().tokens.get(id).cloned().ok_or_else(|| not_found("token", id))
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        Ok(self.lock().tokens.values().map(|t| t.record.clone()).collect())
    }

    async fn delete_token(&self, id: &str) -> Result<()> {
        self.lock().tokens.remove(id).map(drop).ok_or_else(|| not_found("token", id))
    }
}

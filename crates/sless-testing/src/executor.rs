//! [`FakeExecutor`]: an executor that runs nothing, records every call and answers as
//! scripted.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use sless_core::traits::{BuildOutcome, Executor, Invocation, InvokeOutcome, InvokeResult, InvokeTarget};
use sless_core::{Error, Result};
use tokio::sync::watch;

/// One call of [`Executor::invoke`] as the fake saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct InvokeCall {
    /// The target's namespace.
    pub namespace: String,
    /// The function's name.
    pub function: String,
    /// The version called.
    pub version: u32,
    /// The request id.
    pub request_id: String,
    /// The event, parsed (`Null` if it was not JSON).
    pub event: Value,
}

/// What an invoke answers: a result, or a platform failure (`Err(Error::Internal)`).
type Script = std::result::Result<InvokeResult, String>;

#[derive(Debug, Default)]
struct State {
    build_scripts: HashMap<String, BuildOutcome>,
    invoke_scripts: HashMap<String, Script>,
    builds: Vec<InvokeTarget>,
    /// (namespace, function, version) built successfully.
    built: BTreeSet<(String, String, u32)>,
    invocations: Vec<InvokeCall>,
    prewarms: HashMap<String, usize>,
    removes: HashMap<String, usize>,
    shutdowns: usize,
}

/// An executor for tests. Scripts and counters are keyed by function name (in any
/// namespace).
///
/// - `build` records the target and answers the outcome set with
///   [`FakeExecutor::on_build`] (default: success); successful builds are then `is_built`.
/// - `invoke` records an [`InvokeCall`] and answers the result set with
///   [`FakeExecutor::on_invoke`] (default: `Returned("ok")`, a 200), or a platform error set
///   with [`FakeExecutor::fail_invokes`]. [`FakeExecutor::hold`] keeps a function's calls
///   waiting until [`FakeExecutor::release`] (to observe a call in flight).
/// - `prewarm`, `remove` and `shutdown` are counted.
#[derive(Debug)]
pub struct FakeExecutor {
    state: Mutex<State>,
    /// The functions whose calls wait.
    held: watch::Sender<BTreeSet<String>>,
    /// Bumped after every recorded call, for [`FakeExecutor::wait_for_invocations`].
    calls: watch::Sender<usize>,
}

impl Default for FakeExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeExecutor {
    /// An executor whose builds succeed and whose calls return `"ok"`.
    pub fn new() -> Self {
        FakeExecutor {
            state: Mutex::default(),
            held: watch::Sender::new(BTreeSet::new()),
            calls: watch::Sender::new(0),
        }
    }

    /// Builds of `function` end with `outcome` from now on.
    pub fn on_build(&self, function: &str, outcome: BuildOutcome) -> &Self {
        self.lock().build_scripts.insert(function.into(), outcome);
        self
    }

    /// Calls of `function` end with `result` from now on.
    pub fn on_invoke(&self, function: &str, result: InvokeResult) -> &Self {
        self.lock().invoke_scripts.insert(function.into(), Ok(result));
        self
    }

    /// Calls of `function` fail as a platform failure (`Error::Internal(message)`) from now on.
    pub fn fail_invokes(&self, function: &str, message: &str) -> &Self {
        self.lock().invoke_scripts.insert(function.into(), Err(message.into()));
        self
    }

    /// Calls of `function` wait (after being recorded) until [`FakeExecutor::release`].
    pub fn hold(&self, function: &str) -> &Self {
        self.held.send_modify(|h| {
            h.insert(function.into());
        });
        self
    }

    /// Lets `function`'s waiting and future calls finish.
    pub fn release(&self, function: &str) -> &Self {
        self.held.send_modify(|h| {
            h.remove(function);
        });
        self
    }

    /// Every build so far, in order.
    pub fn builds(&self) -> Vec<InvokeTarget> {
        self.lock().builds.clone()
    }

    /// Every call so far, in order.
    pub fn invocations(&self) -> Vec<InvokeCall> {
        self.lock().invocations.clone()
    }

    /// The calls of `function` so far, in order.
    pub fn invocations_of(&self, function: &str) -> Vec<InvokeCall> {
        self.lock().invocations.iter().filter(|c| c.function == function).cloned().collect()
    }

    /// Waits until at least `n` calls have been recorded, or `timeout` passes; returns the
    /// calls recorded by then.
    pub async fn wait_for_invocations(&self, n: usize, timeout: std::time::Duration) -> Vec<InvokeCall> {
        let mut rx = self.calls.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|count| *count >= n)).await;
        self.invocations()
    }

    /// How often `function` was prewarmed.
    pub fn prewarms(&self, function: &str) -> usize {
        self.lock().prewarms.get(function).copied().unwrap_or(0)
    }

    /// How often `function` was removed.
    pub fn removes(&self, function: &str) -> usize {
        self.lock().removes.get(function).copied().unwrap_or(0)
    }

    /// How often `shutdown` was called.
    pub fn shutdowns(&self) -> usize {
        self.lock().shutdowns
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn built_key(target: &InvokeTarget) -> (String, String, u32) {
    (target.namespace.clone(), target.name.clone(), target.version)
}

#[async_trait::async_trait]
impl Executor for FakeExecutor {
    async fn build(&self, target: &InvokeTarget, _archive: Bytes) -> Result<BuildOutcome> {
        let mut s = self.lock();
        s.builds.push(target.clone());
        let outcome = s.build_scripts.get(&target.name).cloned().unwrap_or_else(|| BuildOutcome {
            ok: true,
            log: format!("built version {}\n", target.version),
            message: String::new(),
        });
        if outcome.ok {
            s.built.insert(built_key(target));
        }
        Ok(outcome)
    }

    async fn is_built(&self, target: &InvokeTarget) -> Result<bool> {
        Ok(self.lock().built.contains(&built_key(target)))
    }

    async fn invoke(&self, target: &InvokeTarget, invocation: Invocation) -> Result<InvokeOutcome> {
        let script = {
            let mut s = self.lock();
            s.invocations.push(InvokeCall {
                namespace: target.namespace.clone(),
                function: target.name.clone(),
                version: target.version,
                request_id: invocation.request_id.clone(),
                event: serde_json::from_str(invocation.event.get()).unwrap_or(Value::Null),
            });
            let count = s.invocations.len();
            self.calls.send_replace(count);
            s.invoke_scripts.get(&target.name).cloned()
        };
        let mut held = self.held.subscribe();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = held.wait_for(|h| !h.contains(&target.name)).await;
        match script.unwrap_or_else(|| Ok(InvokeResult::Returned(Value::String("ok".into())))) {
            Ok(result) => Ok(InvokeOutcome {
                result,
                cold_start: None,
                logs: Vec::new(),
                max_memory_bytes: None,
                init_duration: None,
            }),
            Err(message) => Err(Error::Internal(message)),
        }
    }

    async fn prewarm(&self, target: &InvokeTarget) -> Result<()> {
        *self.lock().prewarms.entry(target.name.clone()).or_default() += 1;
        Ok(())
    }

    async fn remove(&self, _namespace: &str, name: &str) -> Result<()> {
        *self.lock().removes.entry(name.to_string()).or_default() += 1;
        Ok(())
    }

    async fn shutdown(&self) {
        self.lock().shutdowns += 1;
    }
}

//! A switch that makes a fake's calls fail with `Error::Storage`, as a store that lost its
//! database would.

use std::sync::Mutex;

use sless_core::{Error, Result};

/// When a fake's calls fail: every call while [`Failures::fail_all`] is on, and the next
/// `n` calls after [`Failures::fail_next`]. Failed calls change nothing and announce nothing.
#[derive(Debug, Default)]
pub struct Failures {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    all: bool,
    next: usize,
    failed: usize,
}

impl Failures {
    /// Makes every call fail (`true`) or succeed again (`false`).
    pub fn fail_all(&self, on: bool) {
        self.lock().all = on;
    }

    /// Makes the next `n` calls fail.
    pub fn fail_next(&self, n: usize) {
        self.lock().next = n;
    }

    /// How many calls have failed so far.
    pub fn failed(&self) -> usize {
        self.lock().failed
    }

    /// `Err(Error::Storage)` when this call is to fail, naming `call`.
    pub(crate) fn check(&self, call: &str) -> Result<()> {
        let mut s = self.lock();
        let fail = s.all || s.next > 0;
        if !fail {
            return Ok(());
        }
        s.next = s.next.saturating_sub(1);
        s.failed += 1;
        Err(Error::storage(std::io::Error::other(format!("{call}: injected failure"))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

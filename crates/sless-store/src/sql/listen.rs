//! Change notifications between servers on one PostgreSQL database: every write is announced
//! with `NOTIFY`, and a listener passes the other servers' announcements to this server's
//! subscribers.

use std::time::Duration;

use sless_core::traits::{Change, ChangeFeed, Kind};
use sqlx::postgres::{PgListener, PgPool};
use tokio::task::JoinHandle;

/// The channel the servers announce changes on.
const CHANNEL: &str = "sless_changes";

/// How long the listener waits before it connects again after losing the database.
const RECONNECT_DELAY: Duration = Duration::from_secs(2);

/// This server's end: its id (to skip its own announcements) and its listener, stopped
/// when the last clone of the registry is dropped.
#[derive(Debug)]
pub(super) struct Peers {
    origin: String,
    listener: JoinHandle<()>,
}

impl Drop for Peers {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

fn kind_code(kind: Kind) -> &'static str {
    match kind {
        Kind::Function => "function",
        Kind::Trigger => "trigger",
        Kind::Job => "job",
    }
}

/// `ORIGIN KIND NAMESPACE NAME` (names and namespaces are DNS labels: no spaces).
fn payload(origin: &str, change: &Change) -> String {
    format!("{origin} {} {} {}", kind_code(change.kind), change.namespace, change.name)
}

/// The change in another server's announcement (`None` for this server's own or a
/// malformed one).
fn parse(payload: &str, origin: &str) -> Option<Change> {
    let mut parts = payload.split(' ');
    let (from, kind, namespace, name) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if from == origin || parts.next().is_some() {
        return None;
    }
    let kind = [Kind::Function, Kind::Trigger, Kind::Job].into_iter().find(|k| kind_code(*k) == kind)?;
    Some(Change { kind, namespace: namespace.to_string(), name: name.to_string() })
}

impl Peers {
    /// Listens (before returning, so no announcement after it is missed) and passes the
    /// other servers' changes to `changes`.
    pub(super) async fn start(pool: &PgPool, changes: ChangeFeed) -> sqlx::Result<Peers> {
        let origin = format!("{:016x}", rand_id());
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        let task = tokio::spawn(relay(listener, pool.clone(), origin.clone(), changes));
        Ok(Peers { origin, listener: task })
    }

    /// Announces `change` to the other servers (in the background: a lost announcement is
    /// repaired by their resync).
    pub(super) fn tell(&self, pool: &PgPool, change: &Change) {
        let (pool, payload) = (pool.clone(), payload(&self.origin, change));
        tokio::spawn(async move {
            let sent = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(payload).execute(&pool).await;
            if let Err(e) = sent {
                tracing::debug!(error = %e, "cannot announce a change to the other servers");
            }
        });
    }
}

/// Passes announcements on until the pool is closed; reconnects after losing the database.
async fn relay(mut listener: PgListener, pool: PgPool, origin: String, changes: ChangeFeed) {
    loop {
        match listener.recv().await {
            Ok(n) => {
                if let Some(change) = parse(n.payload(), &origin) {
                    changes.send(change);
                }
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "lost the other servers' change notifications; reconnecting");
                loop {
                    tokio::time::sleep(RECONNECT_DELAY).await;
                    if pool.is_closed() {
                        return;
                    }
                    if let Ok(mut l) = PgListener::connect_with(&pool).await
                        && l.listen(CHANNEL).await.is_ok()
                    {
                        listener = l;
                        // What was announced while the connection was down is lost: tell
                        // the caches to read again.
                        changes.bump();
                        break;
                    }
                }
            }
        }
    }
}

/// A random id for this server's announcements.
fn rand_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_own_ones_are_skipped() {
        let change = Change { kind: Kind::Trigger, namespace: "default".into(), name: "nightly-1".into() };
        let text = payload("aa", &change);
        assert_eq!(text, "aa trigger default nightly-1");
        assert_eq!(parse(&text, "bb"), Some(change));
        assert_eq!(parse(&text, "aa"), None);
        for bad in ["", "aa", "bb function default", "bb nope default f", "bb job default f extra"] {
            assert_eq!(parse(bad, "cc"), None, "{bad}");
        }
    }
}

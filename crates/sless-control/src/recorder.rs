//! Writes invocation records off the request path, in batches (docs/architecture.md, "Observability"). A full queue or a
//! failing database drops records — never the call — and counts them in
//! `sless_invocation_records_dropped_total`.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use sless_core::invocation::{InvocationRecord, Retention};
use sless_core::traits::InvocationLog;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::metrics::Metrics;

/// Settings of the recorder.
#[derive(Debug, Clone, Copy)]
pub struct RecorderConfig {
    /// Records waiting to be written at most; more are dropped (default 10,000).
    pub queue: usize,
    /// Most records per write (default 500).
    pub batch: usize,
    /// Longest wait before a partial batch is written (default 100 ms).
    pub flush_every: Duration,
    /// How long records are kept.
    pub retention: Retention,
    /// How often retention is applied (default 5 minutes).
    pub prune_every: Duration,
    /// Whether records are kept at all (default true; `sless server --no-record`). When
    /// false, [`Recorder::record`] discards them; retention still prunes older ones.
    pub keep: bool,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            queue: 10_000,
            batch: 500,
            flush_every: Duration::from_millis(100),
            retention: Retention::default(),
            prune_every: Duration::from_secs(300),
            keep: true,
        }
    }
}

/// The sending side: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<InvocationRecord>,
    metrics: Arc<Metrics>,
    keep: bool,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    /// Starts the writer task. It ends, after writing what is queued, when every `Recorder`
    /// clone is dropped; await the handle to be sure everything was written.
    pub fn start(
        log: Arc<dyn InvocationLog>,
        metrics: Arc<Metrics>,
        config: RecorderConfig,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let handle =
            tokio::spawn(write_loop(rx, log, metrics.clone(), config).instrument(tracing::info_span!("recorder")));
        (Recorder { tx, metrics, keep: config.keep }, handle)
    }

    /// Queues a record; when the queue is full the record is dropped and counted. Does
    /// nothing when the recorder keeps no records.
    pub fn record(&self, record: InvocationRecord) {
        if self.keep && self.tx.try_send(record).is_err() {
            self.metrics.records_dropped.inc();
        }
    }
}

async fn write_loop(
    mut rx: mpsc::Receiver<InvocationRecord>,
    log: Arc<dyn InvocationLog>,
    metrics: Arc<Metrics>,
    config: RecorderConfig,
) {
    let mut batch = Vec::with_capacity(config.batch);
    let mut prune = tokio::time::interval(config.prune_every);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            received = rx.recv_many(&mut batch, config.batch) => {
                if received == 0 {
                    break;
                }
                // Let a burst fill the batch a little before writing it.
                if batch.len() < config.batch {
                    let deadline = tokio::time::Instant::now() + config.flush_every;
                    while batch.len() < config.batch {
                        let room = config.batch - batch.len();
                        match tokio::time::timeout_at(deadline, rx.recv_many(&mut batch, room)).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                }
                write(&*log, &metrics, &mut batch).await;
            }
            _ = prune.tick() => {
                match log.prune(&config.retention, Utc::now()).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(deleted = n, "pruned invocation records"),
                    Err(e) => tracing::warn!(error = %e, "pruning invocation records failed"),
                }
            }
        }
    }
    write(&*log, &metrics, &mut batch).await;
}

async fn write(log: &dyn InvocationLog, metrics: &Metrics, batch: &mut Vec<InvocationRecord>) {
    if batch.is_empty() {
        return;
    }
    if let Err(e) = log.insert(batch).await {
        metrics.records_dropped.inc_by(batch.len() as u64);
        tracing::warn!(error = %e, dropped = batch.len(), "invocation records could not be written");
    }
    batch.clear();
}

//! Function output lines as they are printed: a small ring buffer per function for
//! `GET …/logs` and a broadcast for `follow=true`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::{broadcast, watch};

/// Lines kept per function for `GET …/logs`.
const RECENT_LINES: usize = 1000;

pub use sless_core::report::LogLine;

struct Channel {
    recent: VecDeque<LogLine>,
    tx: broadcast::Sender<LogLine>,
}

/// The output of every function, by (namespace, function).
pub struct LogHub {
    channels: Mutex<HashMap<(String, String), Channel>>,
    /// `true` once the server stops: followers end their streams.
    closed: watch::Sender<bool>,
}

impl Default for LogHub {
    fn default() -> Self {
        LogHub { channels: Mutex::default(), closed: watch::channel(false).0 }
    }
}

/// What [`LogHub::follow`] gives: the recent lines, the lines that follow, and when to stop.
pub struct Follow {
    /// The last lines, oldest first.
    pub recent: Vec<LogLine>,
    /// The lines printed from now on.
    pub lines: broadcast::Receiver<LogLine>,
    /// Becomes `true` when the server stops ([`LogHub::close`]): a stream ends there.
    pub closed: watch::Receiver<bool>,
}

impl LogHub {
    /// Ends every follower's stream (the server is stopping: a follower must not hold the
    /// shutdown until its drain timeout).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Records a line and sends it to followers.
    pub fn publish(&self, namespace: &str, function: &str, line: LogLine) {
        let mut channels = self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ch = channels
            .entry((namespace.to_string(), function.to_string()))
            .or_insert_with(|| Channel { recent: VecDeque::new(), tx: broadcast::channel(1024).0 });
        if ch.recent.len() == RECENT_LINES {
            ch.recent.pop_front();
        }
        ch.recent.push_back(line.clone());
        let _ = ch.tx.send(line);
    }

    /// The last `n` lines (oldest first), a receiver of the lines that follow them, and the
    /// signal to stop.
    pub fn follow(&self, namespace: &str, function: &str, n: usize) -> Follow {
        let mut channels = self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ch = channels
            .entry((namespace.to_string(), function.to_string()))
            .or_insert_with(|| Channel { recent: VecDeque::new(), tx: broadcast::channel(1024).0 });
        let skip = ch.recent.len().saturating_sub(n);
        Follow {
            recent: ch.recent.iter().skip(skip).cloned().collect(),
            lines: ch.tx.subscribe(),
            closed: self.closed.subscribe(),
        }
    }

    /// Forgets a deleted function's lines.
    pub fn remove(&self, namespace: &str, function: &str) {
        let mut channels = self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        channels.remove(&(namespace.to_string(), function.to_string()));
    }
}

impl std::fmt::Debug for LogHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogHub")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> LogLine {
        LogLine { time: chrono::Utc::now(), request_id: None, line: s.into() }
    }

    #[test]
    fn keeps_recent_lines_and_streams_new_ones() {
        let hub = LogHub::default();
        hub.publish("n", "f", line("a"));
        hub.publish("n", "f", line("b"));
        let Follow { recent, lines: mut rx, .. } = hub.follow("n", "f", 1);
        assert_eq!(recent.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(), ["b"]);
        hub.publish("n", "f", line("c"));
        assert_eq!(rx.try_recv().expect("streamed").line, "c");
        let other = hub.follow("n", "g", 10).recent;
        assert!(other.is_empty());
    }
}

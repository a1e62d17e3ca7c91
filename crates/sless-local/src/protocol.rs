//! Frames of the shim protocol: a 4-byte big-endian length, then that many bytes of JSON
//! (runtimes/PROTOCOL.md).

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::{Error, Result};

/// Largest frame accepted, in bytes (64 MiB).
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Writes one frame.
pub async fn write_frame(w: &mut (impl AsyncWrite + Unpin), value: &impl serde::Serialize) -> Result<()> {
    // The length prefix is written in front of the JSON in one buffer (one write, no copy).
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, value).map_err(|e| Error::Protocol(e.to_string()))?;
    let len = u32::try_from(buf.len() - 4).map_err(|_| Error::Protocol("frame too large".into()))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    w.write_all(&buf).await.map_err(Error::io("writing to the runtime"))?;
    w.flush().await.map_err(Error::io("writing to the runtime"))
}

/// Most bytes of frames being read at once by this process, from every instance together
/// (1 GiB): a runtime announcing a large frame and sending it slowly holds only what it has
/// sent, and all of them together cannot hold more than this (docs/security.md, "Local
/// backend: function isolation").
pub const FRAME_BUDGET_BYTES: usize = 1024 * 1024 * 1024;

/// Bytes of frames being read now, by every instance of this process.
static IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Bytes taken from a counter ([`IN_FLIGHT`]) by one frame, given back when it is dropped.
struct Budget {
    counter: &'static std::sync::atomic::AtomicUsize,
    held: usize,
}

impl Budget {
    fn new(counter: &'static std::sync::atomic::AtomicUsize) -> Budget {
        Budget { counter, held: 0 }
    }

    /// Takes `n` more bytes, or fails when the process's budget would be passed.
    fn take(&mut self, n: usize) -> Result<()> {
        use std::sync::atomic::Ordering;
        let before = self.counter.fetch_add(n, Ordering::AcqRel);
        self.held += n;
        if before + n > FRAME_BUDGET_BYTES {
            return Err(Error::Protocol(format!(
                "frames being read by this server exceed {FRAME_BUDGET_BYTES} bytes in all"
            )));
        }
        Ok(())
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.held, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How much of a frame is read at a time: its buffer grows with what really arrives, never
/// to the length a runtime announced before sending it.
const READ_CHUNK: usize = 64 * 1024;

/// Reads one frame; `Ok(None)` at a clean end of stream. Errors: [`Error::Protocol`] for a
/// frame over [`MAX_FRAME_BYTES`], over the process's [`FRAME_BUDGET_BYTES`], or not JSON.
pub async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<Value>> {
    read_frame_counted(r, &IN_FLIGHT).await
}

async fn read_frame_counted(
    r: &mut (impl AsyncRead + Unpin),
    counter: &'static std::sync::atomic::AtomicUsize,
) -> Result<Option<Value>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::io("reading from the runtime")(e)),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(Error::Protocol(format!("frame of {len} bytes exceeds {MAX_FRAME_BYTES}")));
    }
    let mut budget = Budget::new(counter);
    let mut body = Vec::with_capacity(len.min(READ_CHUNK));
    while body.len() < len {
        let chunk = (len - body.len()).min(READ_CHUNK);
        budget.take(chunk)?;
        let start = body.len();
        body.resize(start + chunk, 0);
        match r.read_exact(&mut body[start..]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(Error::io("reading from the runtime")(e)),
        }
    }
    serde_json::from_slice(&body).map(Some).map_err(|e| Error::Protocol(format!("bad frame: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn round_trip_and_clean_eof() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        write_frame(&mut a, &json!({"type": "ready"})).await.expect("write");
        drop(a);
        assert_eq!(read_frame(&mut b).await.expect("read"), Some(json!({"type": "ready"})));
        assert_eq!(read_frame(&mut b).await.expect("eof"), None);
    }

    #[tokio::test]
    async fn regression_an_announced_frame_holds_only_what_was_sent() {
        // Found by an attacker's review: a runtime announcing a 64 MiB frame and sending
        // nothing made the server allocate 64 MiB at once, per instance.
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(&((MAX_FRAME_BYTES - 16) as u32).to_be_bytes()).await.expect("length");
        a.write_all(b"{\"type\":").await.expect("start");
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let reading = tokio::spawn(async move { read_frame_counted(&mut b, &COUNTER).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let held = COUNTER.load(std::sync::atomic::Ordering::Acquire);
        assert!(held <= READ_CHUNK * 2, "{held} bytes held for a frame that sent 8");
        drop(a);
        assert!(matches!(reading.await.expect("join"), Ok(None)), "an unfinished frame is the end of the stream");
        assert_eq!(COUNTER.load(std::sync::atomic::Ordering::Acquire), 0, "the budget is given back");
    }

    #[test]
    fn the_process_wide_budget_refuses_past_its_bytes() {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut first = Budget::new(&COUNTER);
        assert!(first.take(FRAME_BUDGET_BYTES - 10).is_ok());
        let mut second = Budget::new(&COUNTER);
        assert!(matches!(second.take(11), Err(Error::Protocol(_))));
        drop(second);
        drop(first);
        assert!(Budget::new(&COUNTER).take(FRAME_BUDGET_BYTES).is_ok());
    }

    #[tokio::test]
    async fn oversized_frames_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(16);
        tokio::spawn(async move { a.write_all(&u32::MAX.to_be_bytes()).await });
        assert!(matches!(read_frame(&mut b).await, Err(Error::Protocol(_))));
    }
}

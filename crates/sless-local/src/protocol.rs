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

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<Value>> {
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
    let mut body = vec![0u8; len];
    match r.read_exact(&mut body).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::io("reading from the runtime")(e)),
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
    async fn oversized_frames_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(16);
        tokio::spawn(async move { a.write_all(&u32::MAX.to_be_bytes()).await });
        assert!(matches!(read_frame(&mut b).await, Err(Error::Protocol(_))));
    }
}

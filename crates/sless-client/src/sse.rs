//! A followed log (`GET …/logs?follow=true`): server-sent events, one JSON [`LogLine`] per
//! event's data.

use crate::{Error, LogLine, Result};

/// The lines of a followed log as they arrive. Made by [`crate::Client::follow_logs`].
pub struct LogStream {
    response: reqwest::Response,
    url: String,
    /// Text received but not yet split into events.
    buf: String,
    /// The bytes of a UTF-8 character split across chunks.
    pending: Vec<u8>,
    /// Events split off but not yet returned.
    ready: std::collections::VecDeque<String>,
}

impl LogStream {
    pub(crate) fn new(response: reqwest::Response, url: String) -> Self {
        LogStream { response, url, buf: String::new(), pending: Vec::new(), ready: Default::default() }
    }

    /// The next line; `Ok(None)` when the server closed the stream. Keep-alive comments are
    /// skipped. Errors: [`Error::Transport`] when the stream breaks; [`Error::Decode`] for an
    /// event whose data is not a log line (the stream stays usable: call again).
    pub async fn next(&mut self) -> Result<Option<LogLine>> {
        loop {
            while let Some(event) = self.ready.pop_front() {
                let Some(data) = sse_data(&event) else { continue };
                return serde_json::from_str(&data)
                    .map(Some)
                    .map_err(|source| Error::Decode { what: "the log stream".into(), source });
            }
            let chunk =
                self.response.chunk().await.map_err(|source| Error::Transport { url: self.url.clone(), source })?;
            let Some(chunk) = chunk else { return Ok(None) };
            self.pending.extend_from_slice(&chunk);
            let valid = match std::str::from_utf8(&self.pending) {
                Ok(_) => self.pending.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => self.pending.len(),
            };
            self.buf.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
            self.pending.drain(..valid);
            self.ready.extend(take_events(&mut self.buf));
        }
    }
}

/// One SSE event's data, from the lines of an event (the text between blank lines).
/// `data:` lines are joined with `\n`; comments (`: keepalive`) and other fields are ignored.
fn sse_data(event: &str) -> Option<String> {
    let mut data: Option<String> = None;
    for line in event.lines() {
        let Some(rest) = line.strip_prefix("data:") else { continue };
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        match &mut data {
            Some(d) => {
                d.push('\n');
                d.push_str(rest);
            }
            None => data = Some(rest.to_string()),
        }
    }
    data
}

/// Splits complete events (ended by a blank line) off the front of `buf`.
fn take_events(buf: &mut String) -> Vec<String> {
    let mut events = Vec::new();
    loop {
        let lf_end = buf.find("\n\n").map(|i| (i, 2));
        let crlf_end = buf.find("\r\n\r\n").map(|i| (i, 4));
        let end = match (lf_end, crlf_end) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let Some((i, len)) = end else { break };
        events.push(buf[..i].replace('\r', ""));
        buf.drain(..i + len);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_split_and_comments_skipped() {
        let mut buf = String::from(": keepalive\n\ndata: {\"line\":\"a\"}\n\ndata: x\r\ndata: y\r\n\r\ndata: partial");
        let events = take_events(&mut buf);
        let data: Vec<Option<String>> = events.iter().map(|e| sse_data(e)).collect();
        assert_eq!(data, vec![None, Some("{\"line\":\"a\"}".into()), Some("x\ny".into())]);
        assert_eq!(buf, "data: partial");
    }
}

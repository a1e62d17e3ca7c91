//! `sless invocations`, `sless invocation get` and `sless logs` (docs/api.md; docs/architecture.md, "Observability").

use std::io::Write;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::cli::{Connection, InvocationCommand, InvocationsArgs, LogsArgs, Output};
use crate::client::{Client, print_table, problem_text, s};

/// Parses a `--since`/`--until` value: a duration ago (`30s`, `10m`, `2h`, `1d`, `1w`,
/// `1h30m`; a bare number is seconds) or an RFC 3339 time. Returns an RFC 3339 UTC time.
pub fn parse_time(arg: &str, now: DateTime<Utc>) -> anyhow::Result<String> {
    let arg = arg.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(arg) {
        return Ok(t.with_timezone(&Utc).to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    let secs = parse_duration_secs(arg).with_context(|| {
        format!("{arg:?} is neither a duration (30s, 10m, 2h, 1d, 1h30m) nor an RFC 3339 time (2024-05-01T12:00:00Z)")
    })?;
    let ago = chrono::Duration::try_seconds(secs).context("duration too long")?;
    let t = now.checked_sub_signed(ago).context("duration too long")?;
    Ok(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// `1h30m` → 5400. Units: s, m, h, d, w; a bare number is seconds.
fn parse_duration_secs(text: &str) -> Option<i64> {
    if text.is_empty() {
        return None;
    }
    if let Ok(n) = text.parse::<i64>() {
        return (n >= 0).then_some(n);
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 7 * 86_400,
            _ => return None,
        };
        let n: i64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        digits.clear();
    }
    digits.is_empty().then_some(total)
}

fn source_cell(v: &Value) -> String {
    match (v["source"].as_str(), v["source_name"].as_str()) {
        (Some(src), Some(name)) if !name.is_empty() => format!("{src}:{name}"),
        _ => s(v, &["source"]),
    }
}

pub async fn invocations(conn: &Connection, args: InvocationsArgs) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    let now = Utc::now();
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(st) = &args.status {
        query.push(("status", st.replace(' ', "")));
    }
    if let Some(since) = &args.since {
        query.push(("since", parse_time(since, now).context("--since")?));
    }
    if let Some(until) = &args.until {
        query.push(("until", parse_time(until, now).context("--until")?));
    }
    let url = client.ns_url(&format!("/functions/{}/invocations", args.name));
    let mut items: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    while items.len() < args.limit as usize {
        let want = (args.limit as usize - items.len()).min(1000);
        let mut req = client.http().get(&url).query(&query).query(&[("limit", want.to_string())]);
        if let Some(c) = &cursor {
            req = req.query(&[("cursor", c)]);
        }
        let page = client.expect(req).await?;
        let got = page["items"].as_array().cloned().unwrap_or_default();
        let empty = got.is_empty();
        items.extend(got);
        cursor = page["next_cursor"].as_str().filter(|c| !c.is_empty()).map(str::to_string);
        if cursor.is_none() || empty {
            break;
        }
    }
    items.truncate(args.limit as usize);
    if args.out.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&json!({ "items": items, "next_cursor": cursor }))?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|v| {
            let mut outcome = s(v, &["outcome"]);
            if let Some(t) = v["error_type"].as_str().filter(|t| !t.is_empty()) {
                outcome = format!("{outcome} ({t})");
            }
            vec![
                s(v, &["id"]),
                s(v, &["started_at"]),
                source_cell(v),
                s(v, &["status"]),
                outcome,
                s(v, &["duration_ms"]),
                if v["cold_start"].as_bool() == Some(true) { "yes".into() } else { String::new() },
            ]
        })
        .collect();
    print_table(&["ID", "STARTED", "SOURCE", "STATUS", "OUTCOME", "DURATION_MS", "COLD"], &rows);
    Ok(())
}

pub async fn invocation(conn: &Connection, cmd: InvocationCommand) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    match cmd {
        InvocationCommand::Get { id, out } => {
            let v = client
                .expect(client.http().get(client.ns_url(&format!("/invocations/{id}"))))
                .await
                .with_context(|| format!("invocation {id}"))?;
            if out.output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            for (k, path) in [
                ("id", &["id"][..]),
                ("namespace", &["namespace"]),
                ("function", &["function"]),
                ("version", &["version"]),
                ("source", &["source"]),
                ("source_name", &["source_name"]),
                ("started_at", &["started_at"]),
                ("duration_ms", &["duration_ms"]),
                ("status", &["status"]),
                ("outcome", &["outcome"]),
                ("error_type", &["error_type"]),
                ("error_message", &["error_message"]),
                ("request_bytes", &["request_bytes"]),
                ("response_bytes", &["response_bytes"]),
                ("cold_start", &["cold_start"]),
            ] {
                println!("{k:<15} {}", s(&v, path));
            }
            let logs = v["logs"].as_array().cloned().unwrap_or_default();
            if logs.is_empty() {
                println!("{:<15} -", "logs");
            } else {
                println!("logs:");
                for line in logs {
                    println!("  {}", line.as_str().map(str::to_string).unwrap_or_else(|| line.to_string()));
                }
            }
        }
    }
    Ok(())
}

fn print_log_line(out: &mut impl Write, item: &Value, format: Output) -> std::io::Result<()> {
    if format == Output::Json {
        writeln!(out, "{item}")?;
    } else {
        let rid = item["request_id"].as_str().filter(|r| !r.is_empty()).unwrap_or("-");
        let time = s(item, &["time"]);
        // A line holding newlines (e.g. a traceback) is printed as several, each prefixed.
        for line in item["line"].as_str().unwrap_or_default().split('\n') {
            writeln!(out, "{time} {rid} {}", line.trim_end_matches('\r'))?;
        }
    }
    out.flush()
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
        let normalized_end = buf.find("\n\n").map(|i| (i, 2));
        let crlf_end = buf.find("\r\n\r\n").map(|i| (i, 4));
        let end = match (normalized_end, crlf_end) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let Some((i, len)) = end else { break };
        events.push(buf[..i].replace('\r', ""));
        buf.drain(..i + len);
    }
    events
}

pub async fn logs(conn: &Connection, args: LogsArgs) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    let url = client.ns_url(&format!("/functions/{}/logs", args.name));
    let mut stdout = std::io::stdout().lock();
    if !args.follow {
        let page = client.expect(client.http().get(&url).query(&[("tail", args.tail.to_string())])).await?;
        for item in page["items"].as_array().cloned().unwrap_or_default() {
            print_log_line(&mut stdout, &item, args.output)?;
        }
        return Ok(());
    }
    let req = client
        .http()
        .get(&url)
        .query(&[("tail", args.tail.to_string()), ("follow", "true".to_string())])
        .header(reqwest::header::ACCEPT, "text/event-stream");
    let mut resp =
        client.authed(req).send().await.with_context(|| format!("cannot reach the server at {}", client.base()))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        bail!("{}", problem_text(status, &body));
    }
    let mut buf = String::new();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = tokio::select! {
            c = resp.chunk() => c.context("the log stream broke")?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some(chunk) = chunk else {
            eprintln!("the server closed the log stream");
            return Ok(());
        };
        // Keep a multi-byte character split across chunks for the next one.
        pending.extend_from_slice(&chunk);
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        buf.push_str(&String::from_utf8_lossy(&pending[..valid]));
        pending.drain(..valid);
        for event in take_events(&mut buf) {
            let Some(data) = sse_data(&event) else { continue };
            let item = serde_json::from_str::<Value>(&data).unwrap_or_else(|_| json!({ "line": data }));
            print_log_line(&mut stdout, &item, args.output)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z").expect("time").with_timezone(&Utc)
    }

    #[test]
    fn since_takes_durations_ago() {
        for (arg, want) in [
            ("10m", "2024-05-01T11:50:00.000Z"),
            ("2h", "2024-05-01T10:00:00.000Z"),
            ("30s", "2024-05-01T11:59:30.000Z"),
            ("90", "2024-05-01T11:58:30.000Z"),
            ("1d", "2024-04-30T12:00:00.000Z"),
            ("1w", "2024-04-24T12:00:00.000Z"),
            ("1h30m", "2024-05-01T10:30:00.000Z"),
            (" 5m ", "2024-05-01T11:55:00.000Z"),
        ] {
            assert_eq!(parse_time(arg, now()).expect(arg), want, "{arg}");
        }
    }

    #[test]
    fn since_takes_rfc3339_times() {
        assert_eq!(parse_time("2024-04-01T10:00:00Z", now()).expect("utc"), "2024-04-01T10:00:00.000Z");
        assert_eq!(parse_time("2024-04-01T12:00:00+02:00", now()).expect("offset"), "2024-04-01T10:00:00.000Z");
    }

    #[test]
    fn since_refuses_nonsense() {
        for arg in ["", "m", "10x", "10m5", "-5m", "-5", "yesterday", "2024-04-01", "99999999999999999999d"] {
            assert!(parse_time(arg, now()).is_err(), "{arg:?}");
        }
    }

    #[test]
    fn sse_events_are_split_and_comments_skipped() {
        let mut buf = String::from(": keepalive\n\ndata: {\"line\":\"a\"}\n\ndata: x\r\ndata: y\r\n\r\ndata: partial");
        let events = take_events(&mut buf);
        let data: Vec<Option<String>> = events.iter().map(|e| sse_data(e)).collect();
        assert_eq!(data, vec![None, Some("{\"line\":\"a\"}".into()), Some("x\ny".into())]);
        assert_eq!(buf, "data: partial");
    }
}

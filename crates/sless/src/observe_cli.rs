//! `sless invocations`, `sless invocation get` and `sless logs` (docs/api.md; docs/architecture.md, "Observability").

use std::io::Write;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sless_client::{InvocationFilter, LogLine, PageRequest};

use crate::cli::{Connection, InvocationsArgs, LogsArgs, Output, OutputArgs};
use crate::connect::connect;
use crate::output::{json, print_table, s};

/// Parses a `--since`/`--until` value: a duration ago (`30s`, `10m`, `2h`, `1d`, `1w`,
/// `1h30m`; a bare number is seconds) or an RFC 3339 time.
fn parse_instant(arg: &str, now: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    let arg = arg.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(arg) {
        return Ok(t.with_timezone(&Utc));
    }
    let secs = parse_duration_secs(arg).with_context(|| {
        format!("{arg:?} is neither a duration (30s, 10m, 2h, 1d, 1h30m) nor an RFC 3339 time (2024-05-01T12:00:00Z)")
    })?;
    let ago = chrono::Duration::try_seconds(secs).context("duration too long")?;
    now.checked_sub_signed(ago).context("duration too long")
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
    let client = connect(conn)?;
    let now = Utc::now();
    let mut filter = InvocationFilter::default();
    if let Some(st) = &args.status {
        filter.outcomes = st.split(',').map(str::trim).filter(|o| !o.is_empty()).map(str::to_string).collect();
    }
    if let Some(since) = &args.since {
        filter.since = Some(parse_instant(since, now).context("--since")?);
    }
    if let Some(until) = &args.until {
        filter.until = Some(parse_instant(until, now).context("--until")?);
    }
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    while records.len() < args.limit as usize {
        let want = (args.limit as usize - records.len()).min(1000) as u32;
        let page = client.list_invocations(&args.name, &filter, &PageRequest { limit: Some(want), cursor }).await?;
        let empty = page.items.is_empty();
        records.extend(page.items);
        cursor = page.next_cursor.filter(|c| !c.is_empty());
        if cursor.is_none() || empty {
            break;
        }
    }
    records.truncate(args.limit as usize);
    // The list's shape: everything but the logs (they are in `sless invocation get`).
    let items: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut v = json(r);
            if let Value::Object(m) = &mut v {
                m.remove("logs");
            }
            v
        })
        .collect();
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

pub async fn invocation(conn: &Connection, id: &str, out: OutputArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let v = json(&client.get_invocation(id).await.with_context(|| format!("invocation {id}"))?);
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
    Ok(())
}

fn print_log_line(out: &mut impl Write, line: &LogLine, format: Output) -> std::io::Result<()> {
    let item = json(line);
    if format == Output::Json {
        writeln!(out, "{item}")?;
    } else {
        let rid = line.request_id.as_deref().filter(|r| !r.is_empty()).unwrap_or("-");
        let time = s(&item, &["time"]);
        // A line holding newlines (e.g. a traceback) is printed as several, each prefixed.
        for text in line.line.split('\n') {
            writeln!(out, "{time} {rid} {}", text.trim_end_matches('\r'))?;
        }
    }
    out.flush()
}

pub async fn logs(conn: &Connection, args: LogsArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let mut stdout = std::io::stdout().lock();
    if !args.follow {
        for line in client.logs(&args.name, args.tail).await? {
            print_log_line(&mut stdout, &line, args.output)?;
        }
        return Ok(());
    }
    let mut stream = client.follow_logs(&args.name, args.tail).await?;
    loop {
        let next = tokio::select! {
            n = stream.next() => n,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match next {
            Ok(Some(line)) => print_log_line(&mut stdout, &line, args.output)?,
            Ok(None) => {
                eprintln!("the server closed the log stream");
                return Ok(());
            }
            Err(e @ sless_client::Error::Decode { .. }) => eprintln!("warning: {:#}", anyhow::Error::new(e)),
            Err(e) => return Err(anyhow::Error::new(e).context("the log stream broke")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_time(arg: &str, now: DateTime<Utc>) -> anyhow::Result<String> {
        Ok(parse_instant(arg, now)?.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    }

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
}

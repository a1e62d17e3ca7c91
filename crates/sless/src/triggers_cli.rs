//! `sless trigger …` and `sless job …`: the triggers and jobs APIs (docs/api.md; docs/architecture.md, "Triggers and jobs").

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::cli::{Connection, HttpAuthArg, JobCommand, JobCreateArgs, JobRunArgs, Output, TriggerCommand};
use crate::client::{Client, print_table, problem_text, s};

/// Reads a `--payload`: JSON text, or `@FILE` holding JSON.
pub fn read_payload(arg: &str) -> anyhow::Result<Value> {
    let (text, from) = match arg.strip_prefix('@') {
        Some(file) => {
            (std::fs::read_to_string(Path::new(file)).with_context(|| format!("cannot read {file}"))?, file.to_string())
        }
        None => (arg.to_string(), "--payload".to_string()),
    };
    serde_json::from_str(&text)
        .with_context(|| format!("{from} is not JSON (a string payload needs quotes: '\"text\"')"))
}

/// Creates or replaces `{ns}/{kind}/{name}` (PUT; POST when it does not exist yet).
/// Returns the object as the server shows it.
pub async fn put_or_create(client: &Client, kind: &str, name: &str, body: &Value) -> anyhow::Result<Value> {
    let url = client.ns_url(&format!("/{kind}/{name}"));
    let (status, _, answer) = client.send_full(client.http().put(&url).json(body)).await?;
    match status {
        s if s.is_success() => Ok(answer),
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => {
            client.expect(client.http().post(client.ns_url(&format!("/{kind}"))).json(body)).await
        }
        s => bail!("{}", problem_text(s, &answer)),
    }
}

/// The full public URL of an http trigger (`{base}{status.url}`, else `{base}/fn/{ns}/{function}`).
pub fn trigger_public_url(client: &Client, t: &Value) -> String {
    match t["status"]["url"].as_str() {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => u.to_string(),
        Some(u) if u.starts_with('/') => format!("{}{u}", client.base()),
        _ => client.public_url(t["function"].as_str().unwrap_or_default()),
    }
}

async fn get(client: &Client, kind: &str, name: &str) -> anyhow::Result<(Value, Option<String>)> {
    let (status, headers, body) =
        client.send_full(client.http().get(client.ns_url(&format!("/{kind}/{name}")))).await?;
    if status == StatusCode::NOT_FOUND {
        bail!("{} {name:?} not found in namespace {:?}", &kind[..kind.len() - 1], client.namespace());
    }
    if !status.is_success() {
        bail!("{}", problem_text(status, &body));
    }
    let etag = headers.get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_string);
    Ok((body, etag))
}

async fn patch(
    client: &Client,
    kind: &str,
    name: &str,
    patch: &Value,
    if_match: Option<&str>,
) -> anyhow::Result<Value> {
    let (status, _, body) = patch_raw(client, kind, name, patch, if_match).await?;
    if !status.is_success() {
        bail!("{}", problem_text(status, &body));
    }
    Ok(body)
}

async fn patch_raw(
    client: &Client,
    kind: &str,
    name: &str,
    patch: &Value,
    if_match: Option<&str>,
) -> anyhow::Result<(StatusCode, reqwest::header::HeaderMap, Value)> {
    let mut req = client
        .http()
        .patch(client.ns_url(&format!("/{kind}/{name}")))
        .header("content-type", "application/merge-patch+json")
        .body(patch.to_string());
    if let Some(tag) = if_match {
        req = req.header(reqwest::header::IF_MATCH, tag);
    }
    client.send_full(req).await
}

fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn print_fields(v: &Value, fields: &[(&str, &[&str])]) {
    for (k, path) in fields {
        println!("{k:<15} {}", s(v, path));
    }
}

fn schedule_cell(t: &Value) -> String {
    match (t["schedule"].as_str(), t["timezone"].as_str()) {
        (Some(sch), Some(tz)) if tz != "UTC" => format!("{sch} ({tz})"),
        (Some(sch), _) => sch.to_string(),
        _ => "-".into(),
    }
}

fn is_http(t: &Value) -> bool {
    t["type"].as_str() == Some("http")
}

pub async fn triggers(conn: &Connection, cmd: TriggerCommand) -> anyhow::Result<()> {
    let client = Client::connect(conn)?;
    match cmd {
        TriggerCommand::Create(args) => {
            let mut body = json!({
                "name": args.name,
                "function": args.function,
                "type": if args.http { "http" } else { "cron" },
                "enabled": !args.disabled,
            });
            if let Some(sch) = &args.cron {
                body["schedule"] = json!(sch);
            }
            if let Some(tz) = &args.timezone {
                body["timezone"] = json!(tz);
            }
            if let Some(p) = &args.payload {
                body["payload"] = read_payload(p)?;
            }
            if let Some(sec) = args.prewarm {
                body["prewarm_sec"] = json!(sec);
            }
            if let Some(auth) = args.auth {
                body["auth"] = json!(match auth {
                    HttpAuthArg::None => "none",
                    HttpAuthArg::Token => "token",
                });
            }
            let t = client
                .expect(client.http().post(client.ns_url("/triggers")).json(&body))
                .await
                .with_context(|| format!("creating trigger {}", args.name))?;
            if args.out.output == Output::Json {
                return print_json(&t);
            }
            if is_http(&t) {
                let token = if t["auth"].as_str() == Some("token") { " (token required)" } else { "" };
                eprintln!("created http trigger {} for {}{token}", args.name, args.function);
                println!("{}", trigger_public_url(&client, &t));
            } else {
                eprintln!(
                    "created cron trigger {} for {} ({}); `sless trigger get {}` shows the next fire",
                    args.name,
                    args.function,
                    schedule_cell(&t),
                    args.name
                );
            }
        }
        TriggerCommand::List(out) => {
            let items = client.list_all(&client.ns_url("/triggers")).await?;
            if out.output == Output::Json {
                return print_json(&json!({ "items": items }));
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|t| {
                    let phase = if t["enabled"].as_bool() == Some(false) {
                        format!("{} (disabled)", s(t, &["status", "phase"]))
                    } else {
                        s(t, &["status", "phase"])
                    };
                    vec![
                        s(t, &["name"]),
                        s(t, &["type"]),
                        s(t, &["function"]),
                        schedule_cell(t),
                        phase,
                        if is_http(t) { trigger_public_url(&client, t) } else { s(t, &["status", "next_fire"]) },
                    ]
                })
                .collect();
            print_table(&["NAME", "TYPE", "FUNCTION", "SCHEDULE", "PHASE", "NEXT_FIRE/URL"], &rows);
        }
        TriggerCommand::Get { name, out } => {
            let (t, _) = get(&client, "triggers", &name).await?;
            if out.output == Output::Json {
                return print_json(&t);
            }
            print_fields(
                &t,
                &[
                    ("name", &["name"]),
                    ("namespace", &["namespace"]),
                    ("type", &["type"]),
                    ("function", &["function"]),
                    ("enabled", &["enabled"]),
                ],
            );
            if is_http(&t) {
                print_fields(&t, &[("auth", &["auth"])]);
                println!("{:<15} {}", "url", trigger_public_url(&client, &t));
            } else {
                print_fields(
                    &t,
                    &[
                        ("schedule", &["schedule"]),
                        ("timezone", &["timezone"]),
                        ("payload", &["payload"]),
                        ("prewarm_sec", &["prewarm_sec"]),
                        ("last_fired", &["status", "last_fired"]),
                        ("next_fire", &["status", "next_fire"]),
                    ],
                );
            }
            print_fields(
                &t,
                &[
                    ("phase", &["status", "phase"]),
                    ("message", &["status", "message"]),
                    ("created_at", &["created_at"]),
                    ("updated_at", &["updated_at"]),
                ],
            );
        }
        TriggerCommand::Delete { name } => {
            client.expect(client.http().delete(client.ns_url(&format!("/triggers/{name}")))).await?;
            eprintln!("deleted trigger {name}");
        }
        TriggerCommand::Enable { name } => {
            let t = patch(&client, "triggers", &name, &json!({ "enabled": true }), None).await?;
            eprintln!("enabled trigger {name} ({})", s(&t, &["status", "phase"]));
        }
        TriggerCommand::Disable { name } => {
            patch(&client, "triggers", &name, &json!({ "enabled": false }), None).await?;
            eprintln!("disabled trigger {name}");
        }
    }
    Ok(())
}

pub async fn jobs(conn: &Connection, cmd: JobCommand) -> anyhow::Result<ExitCode> {
    let client = Client::connect(conn)?;
    match cmd {
        JobCommand::Create(args) => create_job(&client, args).await?,
        JobCommand::Run(args) => return run_job(&client, args).await,
        JobCommand::List(out) => {
            let items = client.list_all(&client.ns_url("/jobs")).await?;
            if out.output == Output::Json {
                print_json(&json!({ "items": items }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|j| {
                    vec![
                        s(j, &["name"]),
                        s(j, &["function"]),
                        s(j, &["run_id"]),
                        s(j, &["enabled"]),
                        s(j, &["status", "phase"]),
                        s(j, &["status", "last_run", "run_id"]),
                        s(j, &["status", "last_run", "outcome"]),
                        s(j, &["status", "last_run", "duration_ms"]),
                        s(j, &["status", "last_run", "started_at"]),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "FUNCTION", "RUN_ID", "ENABLED", "PHASE", "LAST_RUN", "OUTCOME", "DURATION_MS", "STARTED"],
                &rows,
            );
        }
        JobCommand::Get { name, out } => {
            let (j, _) = get(&client, "jobs", &name).await?;
            if out.output == Output::Json {
                print_json(&j)?;
            } else {
                print_job(&j);
            }
        }
        JobCommand::Delete { name } => {
            client.expect(client.http().delete(client.ns_url(&format!("/jobs/{name}")))).await?;
            eprintln!("deleted job {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn create_job(client: &Client, args: JobCreateArgs) -> anyhow::Result<()> {
    let mut body = json!({
        "name": args.name,
        "function": args.function,
        "run_id": args.run_id,
        "enabled": !args.disabled,
    });
    if let Some(p) = &args.payload {
        body["payload"] = read_payload(p)?;
    }
    let j = client
        .expect(client.http().post(client.ns_url("/jobs")).json(&body))
        .await
        .with_context(|| format!("creating job {}", args.name))?;
    if args.out.output == Output::Json {
        return print_json(&j);
    }
    eprintln!(
        "created job {} for {} (run_id {}): {}",
        args.name,
        args.function,
        args.run_id,
        s(&j, &["status", "phase"])
    );
    Ok(())
}

fn print_job(j: &Value) {
    print_fields(
        j,
        &[
            ("name", &["name"]),
            ("namespace", &["namespace"]),
            ("function", &["function"]),
            ("run_id", &["run_id"]),
            ("enabled", &["enabled"]),
            ("payload", &["payload"]),
            ("phase", &["status", "phase"]),
            ("message", &["status", "message"]),
            ("last_run_id", &["status", "last_run_id"]),
        ],
    );
    if j["status"]["last_run"].is_object() {
        print_last_run(j);
    }
}

fn print_last_run(j: &Value) {
    let r = &j["status"]["last_run"];
    print_fields(
        r,
        &[
            ("run", &["run_id"]),
            ("outcome", &["outcome"]),
            ("status_code", &["status_code"]),
            ("duration_ms", &["duration_ms"]),
            ("started_at", &["started_at"]),
            ("invocation", &["invocation_id"]),
        ],
    );
    let out = r["output_excerpt"].as_str().unwrap_or_default();
    println!("{:<15} {}", "output", if out.is_empty() { "-" } else { out });
}

/// Bumps `run_id` (PATCH with `If-Match`, retried on a concurrent change) and, with `--wait`,
/// polls until that run (or a later one) has finished.
async fn run_job(client: &Client, args: JobRunArgs) -> anyhow::Result<ExitCode> {
    let mut attempts = 0;
    let (job, run_id) = loop {
        let (current, etag) = get(client, "jobs", &args.name).await?;
        let run_id = current["run_id"].as_u64().context("the job has no run_id")? + 1;
        let tag = etag.unwrap_or_else(|| format!("\"{}\"", s(&current, &["resource_version"])));
        let (status, _, body) = patch_raw(client, "jobs", &args.name, &json!({ "run_id": run_id }), Some(&tag)).await?;
        match status {
            s if s.is_success() => break (body, run_id),
            StatusCode::PRECONDITION_FAILED if attempts < 5 => attempts += 1,
            s => bail!("{}", problem_text(s, &body)),
        }
    };
    if job["enabled"].as_bool() == Some(false) {
        eprintln!("warning: job {} is disabled; run {run_id} starts when it is enabled", args.name);
    }
    if !args.wait {
        if args.out.output == Output::Json {
            print_json(&job)?;
        } else {
            eprintln!("job {} run_id {run_id} requested ({})", args.name, s(&job, &["status", "phase"]));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let deadline = args.timeout.map(|t| started + Duration::from_secs(t));
    let tty = std::io::stderr().is_terminal();
    let mut last_message = String::new();
    let job = loop {
        let (j, _) = get(client, "jobs", &args.name).await?;
        let phase = j["status"]["phase"].as_str().unwrap_or_default();
        let ran = j["status"]["last_run"]["run_id"].as_u64().unwrap_or(0);
        if ran >= run_id && matches!(phase, "Succeeded" | "Failed") {
            if ran > run_id {
                eprintln!("note: run {run_id} was superseded by run {ran}");
            }
            break j;
        }
        let message = format!("{phase}: {}", s(&j, &["status", "message"]));
        if tty && message != last_message {
            eprintln!("job {} run {run_id}: {message}", args.name);
            last_message = message;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            bail!(
                "job {} run {run_id} did not finish within {} s ({last_message})",
                args.name,
                started.elapsed().as_secs()
            );
        }
        let _ = std::io::stderr().flush();
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let failed = job["status"]["phase"].as_str() == Some("Failed");
    if args.out.output == Output::Json {
        print_json(&job)?;
    } else {
        print_fields(&job, &[("job", &["name"]), ("phase", &["status", "phase"])]);
        print_last_run(&job);
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_json_or_files() {
        assert_eq!(read_payload(r#"{"a": 1}"#).expect("json"), json!({"a": 1}));
        assert_eq!(read_payload(r#""text""#).expect("string"), json!("text"));
        assert!(read_payload("text").is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("p.json");
        std::fs::write(&file, "[1, 2]").expect("write");
        assert_eq!(read_payload(&format!("@{}", file.display())).expect("file"), json!([1, 2]));
    }

    #[test]
    fn public_urls_come_from_the_status_or_the_function() {
        let c = Client::new("http://h:1/", "t", "ns");
        assert_eq!(
            trigger_public_url(&c, &json!({"function": "f", "status": {"url": "/fn/ns/f"}})),
            "http://h:1/fn/ns/f"
        );
        assert_eq!(trigger_public_url(&c, &json!({"function": "f", "status": {"url": null}})), "http://h:1/fn/ns/f");
    }
}

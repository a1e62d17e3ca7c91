//! `sless trigger …` and `sless job …`: the triggers and jobs APIs (docs/api.md; docs/architecture.md, "Triggers and jobs").

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sless_client::Client;
use sless_core::job::{JobPhase, JobRecord};
use sless_core::trigger::{HttpAuth, TriggerRecord, TriggerType};

use crate::cli::{Connection, HttpAuthArg, JobCommand, JobCreateArgs, JobRunArgs, Output, TriggerCommand};
use crate::connect::connect;
use crate::output::{json, name_of, print_json, print_table, s};

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

/// A 404 said in the user's words: `trigger "x" not found in namespace "default"`.
fn not_found(client: &Client, kind: &str, name: &str) -> impl FnOnce(sless_client::Error) -> anyhow::Error {
    let message = format!("{kind} {name:?} not found in namespace {:?}", client.namespace());
    move |e| if e.is_not_found() { anyhow::anyhow!(message) } else { e.into() }
}

async fn get_trigger(client: &Client, name: &str) -> anyhow::Result<TriggerRecord> {
    client.get_trigger(name).await.map_err(not_found(client, "trigger", name))
}

async fn get_job(client: &Client, name: &str) -> anyhow::Result<JobRecord> {
    client.get_job(name).await.map_err(not_found(client, "job", name))
}

fn print_fields(v: &Value, fields: &[(&str, &[&str])]) {
    for (k, path) in fields {
        println!("{k:<15} {}", s(v, path));
    }
}

fn schedule_cell(t: &TriggerRecord) -> String {
    match (t.spec.kind, t.spec.schedule.as_deref(), t.spec.timezone.as_str()) {
        (TriggerType::Cron, Some(sch), tz) if tz != "UTC" => format!("{sch} ({tz})"),
        (TriggerType::Cron, Some(sch), _) => sch.to_string(),
        _ => "-".into(),
    }
}

fn is_http(t: &TriggerRecord) -> bool {
    t.spec.kind == TriggerType::Http
}

pub async fn triggers(conn: &Connection, cmd: TriggerCommand) -> anyhow::Result<ExitCode> {
    let client = connect(conn)?;
    match cmd {
        TriggerCommand::Fire { name, include } => {
            let resp = client.fire_trigger(&name).await?;
            return crate::functions_cli::print_answer(&resp, include);
        }
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
            if let Some(f) = &args.payload_format {
                body["payload_format"] = json!(f);
            }
            if let Some(auth) = args.auth {
                body["auth"] = json!(match auth {
                    HttpAuthArg::None => "none",
                    HttpAuthArg::Token => "token",
                });
            }
            let t = client.create_trigger(&body).await.with_context(|| format!("creating trigger {}", args.name))?;
            if args.out.output == Output::Json {
                print_json(&t)?;
                return Ok(ExitCode::SUCCESS);
            }
            if is_http(&t) {
                let token = if t.spec.auth == HttpAuth::Token { " (token required)" } else { "" };
                eprintln!("created http trigger {} for {}{token}", args.name, args.function);
                println!("{}", client.trigger_url(&t));
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
            let items = client.list_all_triggers().await?;
            if out.output == Output::Json {
                print_json(&json!({ "items": items }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|rec| {
                    let t = json(rec);
                    let phase = if rec.spec.enabled {
                        s(&t, &["status", "phase"])
                    } else {
                        format!("{} (disabled)", s(&t, &["status", "phase"]))
                    };
                    vec![
                        s(&t, &["name"]),
                        s(&t, &["type"]),
                        s(&t, &["function"]),
                        schedule_cell(rec),
                        phase,
                        if is_http(rec) { client.trigger_url(rec) } else { s(&t, &["status", "next_fire"]) },
                    ]
                })
                .collect();
            print_table(&["NAME", "TYPE", "FUNCTION", "SCHEDULE", "PHASE", "NEXT_FIRE/URL"], &rows);
        }
        TriggerCommand::Get { name, out } => {
            let rec = get_trigger(&client, &name).await?;
            if out.output == Output::Json {
                print_json(&rec)?;
                return Ok(ExitCode::SUCCESS);
            }
            let t = json(&rec);
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
            if is_http(&rec) {
                print_fields(&t, &[("auth", &["auth"]), ("payload_format", &["payload_format"])]);
                println!("{:<15} {}", "url", client.trigger_url(&rec));
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
            client.delete_trigger(&name).await?;
            eprintln!("deleted trigger {name}");
        }
        TriggerCommand::Enable { name } => {
            let t = client.patch_trigger(&name, &json!({ "enabled": true }), None).await?;
            eprintln!("enabled trigger {name} ({})", name_of(&t.status.phase));
        }
        TriggerCommand::Disable { name } => {
            client.patch_trigger(&name, &json!({ "enabled": false }), None).await?;
            eprintln!("disabled trigger {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn jobs(conn: &Connection, cmd: JobCommand) -> anyhow::Result<ExitCode> {
    let client = connect(conn)?;
    match cmd {
        JobCommand::Create(args) => create_job(&client, args).await?,
        JobCommand::Run(args) => return run_job(&client, args).await,
        JobCommand::List(out) => {
            let items = client.list_all_jobs().await?;
            if out.output == Output::Json {
                print_json(&json!({ "items": items }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|j| {
                    let j = json(j);
                    vec![
                        s(&j, &["name"]),
                        s(&j, &["function"]),
                        s(&j, &["run_id"]),
                        s(&j, &["enabled"]),
                        s(&j, &["status", "phase"]),
                        s(&j, &["status", "last_run", "run_id"]),
                        s(&j, &["status", "last_run", "outcome"]),
                        s(&j, &["status", "last_run", "duration_ms"]),
                        s(&j, &["status", "last_run", "started_at"]),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "FUNCTION", "RUN_ID", "ENABLED", "PHASE", "LAST_RUN", "OUTCOME", "DURATION_MS", "STARTED"],
                &rows,
            );
        }
        JobCommand::Get { name, out } => {
            let j = get_job(&client, &name).await?;
            if out.output == Output::Json {
                print_json(&j)?;
            } else {
                print_job(&json(&j));
            }
        }
        JobCommand::Delete { name } => {
            client.delete_job(&name).await?;
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
    let j = client.create_job(&body).await.with_context(|| format!("creating job {}", args.name))?;
    if args.out.output == Output::Json {
        return print_json(&j);
    }
    eprintln!("created job {} for {} (run_id {}): {}", args.name, args.function, args.run_id, name_of(&j.status.phase));
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
        let current = get_job(client, &args.name).await?;
        let run_id = current.spec.run_id.checked_add(1).ok_or_else(|| {
            anyhow::anyhow!(
                "job {} is at the largest run_id ({}); set a smaller one to run it again",
                args.name,
                u64::MAX
            )
        })?;
        let tag = sless_client::etag(current.resource_version);
        match client.patch_job(&args.name, &json!({ "run_id": run_id }), Some(&tag)).await {
            Ok(job) => break (job, run_id),
            Err(e) if e.status() == Some(412) && attempts < 5 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    };
    if !job.spec.enabled {
        eprintln!("warning: job {} is disabled; run {run_id} starts when it is enabled", args.name);
    }
    if !args.wait {
        if args.out.output == Output::Json {
            print_json(&job)?;
        } else {
            // The status read back is the previous run's: the controller has not started this
            // one yet, so no phase is shown (`sless job get` or `--wait` tells what follows).
            eprintln!("job {} run_id {run_id} requested", args.name);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let deadline = args.timeout.map(|t| started + Duration::from_secs(t));
    let tty = std::io::stderr().is_terminal();
    let mut last_message = String::new();
    let job = loop {
        let j = get_job(client, &args.name).await?;
        let ran = j.status.last_run.as_ref().map_or(0, |r| r.run_id);
        if ran >= run_id && matches!(j.status.phase, JobPhase::Succeeded | JobPhase::Failed) {
            if ran > run_id {
                eprintln!("note: run {run_id} was superseded by run {ran}");
            }
            break j;
        }
        let message = format!("{}: {}", name_of(&j.status.phase), j.status.message);
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
    let failed = job.status.phase == JobPhase::Failed;
    if args.out.output == Output::Json {
        print_json(&job)?;
    } else {
        let j = json(&job);
        print_fields(&j, &[("job", &["name"]), ("phase", &["status", "phase"])]);
        print_last_run(&j);
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
}

//! `sless token …` and `sless namespace …`: tokens and namespaces (docs/api.md, "Tenants").

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sless_core::tenant::Role;

use crate::cli::{Connection, NamespaceCommand, Output, QuotaArgs, TokenCommand};
use crate::connect::connect;
use crate::output::{json, print_json, print_table, s};

/// `--expires`: a duration from `now` (`90m`, `12h`, `30d`, `2w`) or an RFC 3339 time.
fn expires_at(arg: &str, now: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(arg) {
        return Ok(t.with_timezone(&Utc));
    }
    let unit_at = arg.find(|c: char| !c.is_ascii_digit()).unwrap_or(arg.len());
    let (n, unit) = arg.split_at(unit_at);
    let n: i64 = n.parse().ok().filter(|n| *n > 0).with_context(|| bad_expiry(arg))?;
    let seconds = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => bail!(bad_expiry(arg)),
    };
    n.checked_mul(seconds)
        .and_then(chrono::TimeDelta::try_seconds)
        .and_then(|d| now.checked_add_signed(d))
        .with_context(|| bad_expiry(arg))
}

fn bad_expiry(arg: &str) -> String {
    format!("--expires {arg:?}: expected a duration such as 90m, 12h, 30d, 2w, or an RFC 3339 time")
}

/// The quota flags as a merge patch: a number sets a limit, `none` removes it.
fn quota_patch(q: &QuotaArgs) -> anyhow::Result<Value> {
    let mut patch = Map::new();
    for (name, value) in [
        ("max_functions", &q.max_functions),
        ("max_instances", &q.max_instances),
        ("max_memory_mb", &q.max_memory_mb),
        ("requests_per_minute", &q.requests_per_minute),
    ] {
        let Some(value) = value else { continue };
        let v =
            match value.as_str() {
                "none" => Value::Null,
                n => json!(n.parse::<u64>().with_context(|| {
                    format!("--{}: {n:?} is not a whole number or none", name.replace('_', "-"))
                })?),
            };
        patch.insert(name.to_string(), v);
    }
    Ok(Value::Object(patch))
}

fn quota_cells(quotas: &Value) -> String {
    let set: Vec<String> = quotas
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if set.is_empty() { "-".into() } else { set.join(",") }
}

pub async fn tokens(conn: &Connection, cmd: TokenCommand) -> anyhow::Result<()> {
    let client = connect(conn)?;
    match cmd {
        TokenCommand::Create(args) => {
            let scope = if args.scope.is_empty() { vec![client.namespace().to_string()] } else { args.scope };
            let role: Role = args.role.parse()?;
            let expires = args.expires.as_deref().map(|e| expires_at(e, Utc::now())).transpose()?;
            let created = client.create_token(&scope, role, &args.description, expires).await?;
            if args.out.output == Output::Json {
                return print_json(&created);
            }
            let r = &created.record;
            eprintln!(
                "created token {} ({} of {}{}); its secret is shown only now:",
                r.id,
                r.role.as_str(),
                r.namespaces.join(", "),
                r.expires_at.map(|t| format!(", expires {}", t.to_rfc3339())).unwrap_or_default()
            );
            println!("{}", created.token);
        }
        TokenCommand::List(out) => {
            let tokens = client.list_tokens().await?;
            if out.output == Output::Json {
                return print_json(&tokens);
            }
            let rows: Vec<Vec<String>> = tokens
                .iter()
                .map(|t| {
                    let v = json(t);
                    vec![
                        t.id.clone(),
                        t.role.as_str().into(),
                        t.namespaces.join(","),
                        s(&v, &["expires_at"]),
                        if t.description.is_empty() { "-".into() } else { t.description.clone() },
                    ]
                })
                .collect();
            print_table(&["ID", "ROLE", "NAMESPACES", "EXPIRES", "DESCRIPTION"], &rows);
        }
        TokenCommand::Revoke { id } => {
            client.revoke_token(&id).await?;
            eprintln!("revoked token {id}");
        }
    }
    Ok(())
}

pub async fn namespaces(conn: &Connection, cmd: NamespaceCommand) -> anyhow::Result<()> {
    let client = connect(conn)?;
    match cmd {
        NamespaceCommand::Create { name, quotas } => {
            let created = client.create_namespace(&name, &quota_patch(&quotas)?).await?;
            eprintln!("created namespace {} (quotas: {})", created.name, quota_cells(&json(&created.quotas)));
        }
        NamespaceCommand::List(out) => {
            let list = client.list_namespaces().await?;
            if out.output == Output::Json {
                return print_json(&list);
            }
            let rows: Vec<Vec<String>> =
                list.iter().map(|n| vec![n.name.clone(), quota_cells(&json(&n.quotas))]).collect();
            print_table(&["NAME", "QUOTAS"], &rows);
        }
        NamespaceCommand::Get { name, out } => {
            let ns = client.get_namespace(&name).await?;
            if out.output == Output::Json {
                return print_json(&ns);
            }
            println!("{:<20} {}", "name", s(&ns, &["name"]));
            for q in ["max_functions", "max_instances", "max_memory_mb", "requests_per_minute"] {
                println!("{:<20} {}", q, s(&ns, &["quotas", q]));
            }
            for (label, field) in [("functions", "functions"), ("instances", "instances"), ("memory_mb", "memory_mb")] {
                println!("{:<20} {}", format!("used {label}"), s(&ns, &["usage", field]));
            }
        }
        NamespaceCommand::SetQuota { name, quotas } => {
            let patch = quota_patch(&quotas)?;
            if patch.as_object().is_some_and(Map::is_empty) {
                bail!(
                    "name at least one quota: --max-functions, --max-instances, --max-memory-mb, --requests-per-minute"
                );
            }
            let updated = client.patch_namespace(&name, &json!({"quotas": patch})).await?;
            eprintln!("namespace {} quotas: {}", updated.name, quota_cells(&json(&updated.quotas)));
        }
        NamespaceCommand::Delete { name, force } => {
            client.delete_namespace(&name, force).await?;
            eprintln!("deleted namespace {name}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_takes_durations_and_times() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(expires_at("90m", now).unwrap().to_rfc3339(), "2026-12-01T01:30:00+00:00");
        assert_eq!(expires_at("30d", now).unwrap().to_rfc3339(), "2026-12-31T00:00:00+00:00");
        assert_eq!(expires_at("2027-01-01T00:00:00Z", now).unwrap().to_rfc3339(), "2027-01-01T00:00:00+00:00");
        for bad in ["", "0d", "5", "5y", "-3d", "99999999999999999w"] {
            assert!(expires_at(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn quota_flags_become_a_merge_patch() {
        let q = QuotaArgs {
            max_functions: Some("3".into()),
            max_instances: Some("none".into()),
            max_memory_mb: None,
            requests_per_minute: None,
        };
        assert_eq!(quota_patch(&q).unwrap(), json!({"max_functions": 3, "max_instances": null}));
        let bad = QuotaArgs { max_functions: Some("three".into()), ..q };
        assert!(quota_patch(&bad).unwrap_err().to_string().starts_with("--max-functions: "));
    }
}

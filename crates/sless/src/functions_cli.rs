//! `sless deploy`, `sless invoke`, `sless fn …`, `sless versions` and `sless gc`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::json;
use sless_client::{Client, GcOptions, InvokeRequest, Method};

use crate::apply::{ApplyFailed, DeployPlan, apply_manifest, deploy_plan, find_function};
use crate::cli::{Connection, DeployArgs, FnCommand, GcArgs, InvokeArgs, Output, VersionsArgs};
use crate::connect::connect;
use crate::manifest::{folder_name, resolve};
use crate::output::{json, print_json, print_table, s};

pub async fn deploy(conn: &Connection, args: DeployArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let dir = args.dir.canonicalize().with_context(|| format!("cannot open {}", args.dir.display()))?;
    if dir.join(crate::manifest::MANIFEST).exists() {
        return deploy_manifest(&client, &dir, &args).await;
    }
    let name = match &args.name {
        Some(n) => n.clone(),
        None => folder_name(&dir)?,
    };
    let (runtime, entrypoint) = resolve(&dir, args.runtime.as_deref(), args.entrypoint.as_deref())?;
    let mut env = BTreeMap::new();
    for kv in &args.env {
        let (k, v) = kv.split_once('=').with_context(|| format!("--env {kv:?}: expected KEY=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let plan = DeployPlan {
        name,
        dir,
        runtime,
        entrypoint,
        memory_mb: args.memory,
        timeout_sec: args.timeout,
        env,
        replace: false,
    };
    let f = deploy_plan(&client, &plan, !args.no_wait).await?;
    println!("{}", f.url);
    Ok(())
}

/// Deploys every function of a `sless.toml` (flags that name one function are refused).
async fn deploy_manifest(client: &Client, dir: &Path, args: &DeployArgs) -> anyhow::Result<()> {
    if args.name.is_some()
        || args.runtime.is_some()
        || args.entrypoint.is_some()
        || args.memory.is_some()
        || args.timeout.is_some()
        || !args.env.is_empty()
    {
        bail!("{} has a {}: set function fields there, not with flags", dir.display(), crate::manifest::MANIFEST);
    }
    let manifest = crate::manifest::load(dir)?;
    let client = client.in_namespace(&manifest.namespace);
    match apply_manifest(&client, &manifest, !args.no_wait).await {
        Ok(lines) => {
            print_lines(&lines);
            Ok(())
        }
        Err(e) => {
            if let Some(partial) = e.downcast_ref::<ApplyFailed>() {
                print_lines(&partial.lines);
            }
            Err(e)
        }
    }
}

fn print_lines(lines: &[(String, String)]) {
    for (label, url) in lines {
        println!("{label:<20} {url}");
    }
}

pub async fn invoke(conn: &Connection, args: InvokeArgs) -> anyhow::Result<std::process::ExitCode> {
    let client = connect(conn)?;
    let body = match args.data.as_deref() {
        None => None,
        Some("@-") => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
            Some(buf)
        }
        Some(d) if d.starts_with('@') => {
            Some(std::fs::read(Path::new(&d[1..])).with_context(|| format!("cannot read {}", &d[1..]))?)
        }
        Some(d) => Some(d.as_bytes().to_vec()),
    };
    let method = args.method.clone().unwrap_or_else(|| if body.is_some() { "POST".into() } else { "GET".into() });
    let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).context("invalid --method")?;
    let mut call = InvokeRequest::new(method).path(&args.path);
    for h in &args.headers {
        let (k, v) = h.split_once(':').with_context(|| format!("-H {h:?}: expected \"Name: value\""))?;
        call = call.header(k.trim(), v.trim());
    }
    if let Some(body) = body {
        call = call.body(body);
    }
    let resp = client.invoke(&args.name, &call).await?;
    let status = resp.status;
    if args.include {
        println!("HTTP {} {}", status.as_u16(), status.canonical_reason().unwrap_or_default());
        for (k, v) in &resp.headers {
            println!("{k}: {}", v.to_str().unwrap_or("<binary>"));
        }
        println!();
    }
    let mut out = std::io::stdout();
    out.write_all(&resp.body)?;
    if !resp.body.ends_with(b"\n") && out.is_terminal() {
        out.write_all(b"\n")?;
    }
    if status.is_client_error() || status.is_server_error() {
        if !args.include {
            eprintln!("HTTP {} {}", status.as_u16(), status.canonical_reason().unwrap_or_default());
        }
        return Ok(std::process::ExitCode::FAILURE);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

pub async fn functions(conn: &Connection, cmd: FnCommand) -> anyhow::Result<()> {
    let client = connect(conn)?;
    match cmd {
        FnCommand::List(out) => {
            let items = client.list_all_functions().await?;
            if out.output == Output::Json {
                return print_json(&json!({ "items": items }));
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|f| {
                    let f = json(f);
                    vec![
                        s(&f, &["name"]),
                        s(&f, &["runtime"]),
                        s(&f, &["status", "phase"]),
                        s(&f, &["active_version"]),
                        s(&f, &["memory_mb"]),
                        s(&f, &["timeout_sec"]),
                        s(&f, &["url"]),
                    ]
                })
                .collect();
            print_table(&["NAME", "RUNTIME", "PHASE", "VERSION", "MEMORY_MB", "TIMEOUT_SEC", "URL"], &rows);
        }
        FnCommand::Get { name, out } => {
            let f = find_function(&client, &name).await?.with_context(|| format!("function {name:?} not found"))?;
            if out.output == Output::Json {
                return print_json(&f);
            }
            let v = json(&f);
            for (k, path) in [
                ("name", &["name"][..]),
                ("namespace", &["namespace"]),
                ("runtime", &["runtime"]),
                ("entrypoint", &["entrypoint"]),
                ("memory_mb", &["memory_mb"]),
                ("timeout_sec", &["timeout_sec"]),
                ("enabled", &["enabled"]),
                ("phase", &["status", "phase"]),
                ("message", &["status", "message"]),
                ("active_version", &["active_version"]),
                ("url", &["url"]),
            ] {
                println!("{k:<15} {}", s(&v, path));
            }
            let env_names: Vec<&String> = f.record.spec.env.keys().collect();
            println!(
                "{:<15} {}",
                "env",
                if env_names.is_empty() {
                    "-".to_string()
                } else {
                    format!("{env_names:?} (values hidden; -o json shows them)")
                }
            );
        }
        FnCommand::Delete { name } => {
            client.delete_function(&name).await?;
            eprintln!("deleted {name}");
        }
    }
    Ok(())
}

pub async fn versions(conn: &Connection, args: VersionsArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let f = find_function(&client, &args.name).await?.with_context(|| format!("function {:?} not found", args.name))?;
    let items = client.list_versions(&args.name).await?;
    if args.out.output == Output::Json {
        return print_json(&json!({ "items": items, "next_cursor": null }));
    }
    let active = f.record.active_version;
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|rec| {
            let v = json(rec);
            vec![
                s(&v, &["version"]),
                s(&v, &["phase"]),
                if Some(rec.version) == active { "*".into() } else { String::new() },
                s(&v, &["sha256"]).chars().take(12).collect(),
                s(&v, &["size_bytes"]),
                s(&v, &["created_at"]),
                s(&v, &["message"]).lines().last().unwrap_or_default().chars().take(60).collect(),
            ]
        })
        .collect();
    print_table(&["VERSION", "PHASE", "ACTIVE", "SHA256", "SIZE_BYTES", "CREATED", "MESSAGE"], &rows);
    Ok(())
}

/// `sless gc`: asks the server to collect now and prints what it deleted.
pub async fn gc(conn: &Connection, args: GcArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let options = GcOptions { keep_versions: args.keep_versions, grace_sec: args.grace_sec, dry_run: args.dry_run };
    let report = client.gc(&options).await?;
    if args.out.output == Output::Json {
        return print_json(&report);
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for v in &report.versions {
        rows.push(vec!["version".into(), format!("{}/{} {}", v.namespace, v.function, v.version), String::new()]);
    }
    for a in &report.archives {
        rows.push(vec!["archive".into(), a.key.clone(), a.size_bytes.to_string()]);
    }
    if !rows.is_empty() {
        print_table(&["KIND", "WHAT", "SIZE_BYTES"], &rows);
    }
    eprintln!(
        "{} {} versions and {} archives ({} bytes)",
        if report.dry_run { "would delete" } else { "deleted" },
        report.versions.len(),
        report.archives.len(),
        report.bytes_freed
    );
    Ok(())
}

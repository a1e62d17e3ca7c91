//! `sless deploy`, `sless invoke`, `sless fn …`, `sless versions` and `sless gc`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, bail};
use std::time::Duration;

use serde_json::{Map, Value, json};
use sless_client::{Client, GcOptions, InvokeRequest, Method};
use sless_core::status::VersionPhase;

use crate::apply::{ApplyFailed, DeployPlan, apply_manifest, deploy_plan, find_function};
use crate::cli::{
    Connection, DeployArgs, EnvCommand, FnCommand, GcArgs, InvokeArgs, Output, RollbackArgs, SpecArgs, VersionsArgs,
};
use crate::connect::connect;
use crate::manifest::{folder_name, resolve};
use crate::output::{json, print_json, print_table, s};

/// `KEY=VALUE` split at the first `=`. Errors name the flag.
fn key_value<'a>(kv: &'a str, what: &str) -> anyhow::Result<(&'a str, &'a str)> {
    kv.split_once('=').filter(|(k, _)| !k.is_empty()).with_context(|| format!("{what} {kv:?}: expected KEY=VALUE"))
}

/// The spec fields the flags set, as the API names them (`default` → `null`: the server's).
fn spec_fields(args: &SpecArgs) -> anyhow::Result<Map<String, Value>> {
    let mut fields = Map::new();
    if let Some(m) = args.memory {
        fields.insert("memory_mb".into(), json!(m));
    }
    if let Some(t) = args.timeout {
        fields.insert("timeout_sec".into(), json!(t));
    }
    if let Some(c) = args.concurrency {
        fields.insert("concurrency".into(), json!(c));
    }
    for (flag, field, value) in [
        ("--max-instances", "max_instances", &args.max_instances),
        ("--idle-timeout", "idle_timeout_sec", &args.idle_timeout),
    ] {
        let Some(value) = value else { continue };
        let v = match value.as_str() {
            "default" => Value::Null,
            n => json!(n.parse::<u32>().with_context(|| format!("{flag} {n:?}: expected a number or default"))?),
        };
        fields.insert(field.into(), v);
    }
    if let Some(f) = &args.payload_format {
        fields.insert("payload_format".into(), json!(f));
    }
    if args.enable || args.disable {
        fields.insert("enabled".into(), json!(args.enable));
    }
    Ok(fields)
}

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
        let (k, v) = key_value(kv, "--env")?;
        env.insert(k.to_string(), v.to_string());
    }
    let plan = DeployPlan { name, dir, runtime, entrypoint, fields: spec_fields(&args.spec)?, env, replace: false };
    let f = deploy_plan(&client, &plan, !args.no_wait).await?;
    println!("{}", f.url);
    Ok(())
}

/// Deploys every function of a `sless.toml` (flags that name one function are refused).
async fn deploy_manifest(client: &Client, dir: &Path, args: &DeployArgs) -> anyhow::Result<()> {
    if args.name.is_some()
        || args.runtime.is_some()
        || args.entrypoint.is_some()
        || !spec_fields(&args.spec)?.is_empty()
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
    let read = |d: &str| -> anyhow::Result<Vec<u8>> {
        Ok(match d {
            "@-" => {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
                buf
            }
            d if d.starts_with('@') => {
                std::fs::read(Path::new(&d[1..])).with_context(|| format!("cannot read {}", &d[1..]))?
            }
            d => d.as_bytes().to_vec(),
        })
    };
    let (body, path) = match args.payload.as_deref() {
        // Raw invocation (docs/writing-functions.md, "Raw invocation"): the JSON is the event.
        Some(p) => {
            let payload = read(p)?;
            serde_json::from_slice::<Value>(&payload).context("--payload is not JSON")?;
            (Some(payload), "/?integration=raw".to_string())
        }
        None => (args.data.as_deref().map(read).transpose()?, args.path.clone()),
    };
    let method = args.method.clone().unwrap_or_else(|| if body.is_some() { "POST".into() } else { "GET".into() });
    let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).context("invalid --method")?;
    let mut call = InvokeRequest::new(method).path(&path);
    for h in &args.headers {
        let (k, v) = h.split_once(':').with_context(|| format!("-H {h:?}: expected \"Name: value\""))?;
        call = call.header(k.trim(), v.trim());
    }
    if let Some(body) = body {
        call = call.body(body);
    }
    let resp = client.invoke(&args.name, &call).await?;
    print_answer(&resp, args.include)
}

/// Prints a function's answer (`-i`: with its status line and headers) and exits non-zero on
/// a 4xx or 5xx.
pub fn print_answer(resp: &sless_client::RawResponse, include: bool) -> anyhow::Result<std::process::ExitCode> {
    let status = resp.status;
    if include {
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
        if !include {
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
                ("concurrency", &["concurrency"]),
                ("max_instances", &["max_instances"]),
                ("idle_timeout_sec", &["idle_timeout_sec"]),
                ("payload_format", &["payload_format"]),
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
        FnCommand::Update { name, runtime, entrypoint, spec } => {
            let mut patch = spec_fields(&spec)?;
            if let Some(r) = runtime {
                patch.insert("runtime".into(), json!(r));
            }
            if let Some(e) = entrypoint {
                patch.insert("entrypoint".into(), json!(e));
            }
            if patch.is_empty() {
                bail!(
                    "name a setting to change: --memory, --timeout, --concurrency, --max-instances, --idle-timeout, --payload-format, --enable, --disable, --runtime, --entrypoint"
                );
            }
            let f = client
                .patch_function(&name, &Value::Object(patch.clone()), None)
                .await
                .map_err(not_found(&client, &name))?;
            let shown: Vec<String> = patch.keys().map(|k| format!("{k}={}", s(&json(&f), &[k.as_str()]))).collect();
            eprintln!("updated {name}: {}", shown.join(" "));
        }
    }
    Ok(())
}

/// A 404 said in the user's words: `function "x" not found in namespace "default"`.
fn not_found(client: &Client, name: &str) -> impl FnOnce(sless_client::Error) -> anyhow::Error {
    let message = format!("function {name:?} not found in namespace {:?}", client.namespace());
    move |e| if e.is_not_found() { anyhow::anyhow!(message) } else { e.into() }
}

/// `sless env list|set|unset`: a function's environment through merge patches of `env`.
pub async fn env(conn: &Connection, cmd: EnvCommand) -> anyhow::Result<()> {
    let client = connect(conn)?;
    match cmd {
        EnvCommand::List { name } => {
            let f = client.get_function(&name).await.map_err(not_found(&client, &name))?;
            for (k, v) in &f.record.spec.env {
                println!("{k}={v}");
            }
        }
        EnvCommand::Set { name, vars } => {
            let mut env = Map::new();
            for kv in &vars {
                let (k, v) = key_value(kv, "set")?;
                env.insert(k.to_string(), json!(v));
            }
            client.patch_function(&name, &json!({ "env": env }), None).await.map_err(not_found(&client, &name))?;
            eprintln!("set {} on {name}", env.keys().cloned().collect::<Vec<_>>().join(", "));
        }
        EnvCommand::Unset { name, keys } => {
            let f = client.get_function(&name).await.map_err(not_found(&client, &name))?;
            if let Some(missing) = keys.iter().find(|k| !f.record.spec.env.contains_key(*k)) {
                bail!("{name} has no environment variable {missing:?}");
            }
            let env: Map<String, Value> = keys.iter().map(|k| (k.clone(), Value::Null)).collect();
            let etag = sless_client::etag(&f.record.resource_version);
            client.patch_function(&name, &json!({ "env": env }), Some(&etag)).await?;
            eprintln!("unset {} on {name}", keys.join(", "));
        }
    }
    Ok(())
}

/// `sless rollback NAME VERSION`: makes an earlier version active and (unless `--no-wait`)
/// waits until it serves.
pub async fn rollback(conn: &Connection, args: RollbackArgs) -> anyhow::Result<()> {
    let client = connect(conn)?;
    let r = client.rollback(&args.name, args.version).await.map_err(not_found(&client, &args.name))?;
    if !args.no_wait {
        let v = client.wait_ready(&args.name, r.version, Duration::from_secs(600), Duration::from_millis(100)).await?;
        if v.record.phase == VersionPhase::Failed {
            bail!("{} version {} failed to start: {}", args.name, r.version, v.record.message);
        }
    }
    eprintln!("{} now serves version {} (sha256 {})", args.name, r.version, &r.sha256[..12.min(r.sha256.len())]);
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

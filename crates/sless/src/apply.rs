//! Deploying: a folder as a function (create or update, upload, wait for the build), and a
//! whole manifest (functions, then triggers and jobs).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sless_client::{Client, Function};
use sless_core::job::JobRecord;
use sless_core::status::VersionPhase;
use sless_core::trigger::{TriggerRecord, TriggerType};

use crate::manifest::{FunctionDecl, Manifest, resolve};
use crate::output::name_of;
use crate::pack::zip_dir;

/// What to deploy: a folder and the spec fields given for it.
pub struct DeployPlan {
    pub name: String,
    pub dir: PathBuf,
    pub runtime: String,
    pub entrypoint: String,
    /// Spec fields besides name, runtime, entrypoint and env (`memory_mb`, `timeout_sec`,
    /// `concurrency`, …), as the API names them; fields left out keep their value (or, with
    /// `replace`, take their default).
    pub fields: serde_json::Map<String, Value>,
    pub env: BTreeMap<String, String>,
    /// Replace the whole spec (a manifest is the truth) rather than patch the given fields.
    pub replace: bool,
}

impl DeployPlan {
    /// The plan for a manifest entry.
    pub fn from_decl(decl: &FunctionDecl) -> anyhow::Result<Self> {
        let dir = decl.path.clone().context("function has no path")?;
        let (runtime, entrypoint) = resolve(&dir, decl.runtime.as_deref(), decl.entrypoint.as_deref())?;
        let mut fields = serde_json::Map::new();
        if let Some(m) = decl.memory_mb {
            fields.insert("memory_mb".into(), json!(m));
        }
        if let Some(t) = decl.timeout_sec {
            fields.insert("timeout_sec".into(), json!(t));
        }
        if let Some(f) = decl.payload_format {
            fields.insert("payload_format".into(), json!(f));
        }
        Ok(DeployPlan {
            name: decl.name.clone(),
            dir,
            runtime,
            entrypoint,
            fields,
            env: decl.env.clone(),
            replace: true,
        })
    }

    fn spec(&self) -> Value {
        let mut spec = json!({ "name": self.name, "runtime": self.runtime, "entrypoint": self.entrypoint });
        for (k, v) in &self.fields {
            spec[k.as_str()] = v.clone();
        }
        if self.replace || !self.env.is_empty() {
            spec["env"] = json!(self.env);
        }
        spec
    }
}

/// The function, or `None` when the server has none of that name.
pub async fn find_function(client: &Client, name: &str) -> anyhow::Result<Option<Function>> {
    match client.get_function(name).await {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Creates or updates the function, uploads the folder and (with `wait`) waits until the
/// new version serves. Returns the function as the server shows it.
pub async fn deploy_plan(client: &Client, plan: &DeployPlan, wait: bool) -> anyhow::Result<Function> {
    let started = Instant::now();
    let spec = plan.spec();
    let existing = find_function(client, &plan.name).await?;
    let mut created = false;
    if existing.is_none() {
        match client.create_function(&spec).await {
            Ok(_) => created = true,
            // Someone else created it meanwhile (parallel deploys): update it instead.
            Err(e) if e.status() == Some(409) => {}
            Err(e) => return Err(anyhow::Error::new(e).context(format!("creating {}", plan.name))),
        }
    }
    if !created {
        let updated = if plan.replace {
            client.replace_function(&plan.name, &spec, None).await
        } else {
            client.patch_function(&plan.name, &spec, None).await
        };
        updated.with_context(|| format!("updating {}", plan.name))?;
    }
    let dir = plan.dir.clone();
    let archive = tokio::task::spawn_blocking(move || zip_dir(&dir)).await??;
    let uploaded = match client.upload_code(&plan.name, archive).await {
        Ok(u) => u,
        Err(e) => {
            // A function this deploy created is not left behind without code.
            if created {
                let _ = client.delete_function(&plan.name).await;
            }
            return Err(anyhow::Error::new(e).context(format!("uploading {}", plan.dir.display())));
        }
    };
    let version = uploaded.version;
    if !wait {
        return find_function(client, &plan.name).await?.context("the function disappeared");
    }
    let tty = std::io::stderr().is_terminal();
    let mut shown = false;
    loop {
        let v = client.get_version(&plan.name, version).await?;
        match v.record.phase {
            VersionPhase::Failed => {
                if tty && shown {
                    eprintln!();
                }
                let log = client.build_log(&plan.name, version).await?;
                let tail: Vec<&str> = log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
                bail!("{} version {version} failed to build:\n{}", plan.name, tail.join("\n"));
            }
            VersionPhase::Ready if v.active => break,
            _ => {}
        }
        if tty {
            if !shown {
                eprint!("building {} version {version} ", plan.name);
                shown = true;
            }
            eprint!(".");
            let _ = std::io::stderr().flush();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if tty && shown {
        eprintln!(" done");
    }
    let f = find_function(client, &plan.name).await?.context("the function disappeared")?;
    eprintln!("deployed {} version {version} in {} ms", plan.name, started.elapsed().as_millis());
    Ok(f)
}

/// Some entries of a manifest failed to apply; the others were applied. Returned (inside the
/// `anyhow::Error`) by [`apply_manifest`]; `downcast_ref::<ApplyFailed>()` gives the lines of
/// what did deploy, to print them anyway.
#[derive(Debug)]
pub struct ApplyFailed {
    /// (label, url) of what was applied, as [`apply_manifest`] returns them on success.
    pub lines: Vec<(String, String)>,
    /// `function NAME`, `trigger NAME` or `job NAME` of each failure (each was printed to
    /// stderr when it happened).
    pub failed: Vec<String>,
}

impl std::fmt::Display for ApplyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of the manifest's entries failed to apply: {}", self.failed.len(), self.failed.join(", "))
    }
}

impl std::error::Error for ApplyFailed {}

/// Creates or replaces a trigger: PUT, and POST when it does not exist yet.
async fn put_or_create_trigger(client: &Client, name: &str, body: &Value) -> sless_client::Result<TriggerRecord> {
    match client.replace_trigger(name, body, None).await {
        Err(e) if matches!(e.status(), Some(404 | 405)) => client.create_trigger(body).await,
        other => other,
    }
}

/// Creates or replaces a job: PUT, and POST when it does not exist yet.
async fn put_or_create_job(client: &Client, name: &str, body: &Value) -> sless_client::Result<JobRecord> {
    match client.replace_job(name, body, None).await {
        Err(e) if matches!(e.status(), Some(404 | 405)) => client.create_job(body).await,
        other => other,
    }
}

/// Applies a manifest: deploys each function (waiting for its build with `wait`), then
/// creates or replaces (PUT) each trigger and job — a trigger or job whose function is not
/// Ready waits for it on the server. A failing entry does not stop the others: it is printed
/// to stderr (`error: function NAME: …`) and, if any failed, the result is an error wrapping
/// [`ApplyFailed`] (which still carries the lines). Returns (label, url) lines to print: each
/// function's invoke URL (label: its name) and each http trigger's public URL
/// `{base}/fn/{ns}/{function}` (label: `NAME (http)`). Progress goes to stderr.
pub async fn apply_manifest(client: &Client, manifest: &Manifest, wait: bool) -> anyhow::Result<Vec<(String, String)>> {
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for decl in &manifest.functions {
        match async { deploy_plan(client, &DeployPlan::from_decl(decl)?, wait).await }.await {
            Ok(f) => lines.push((decl.name.clone(), f.url)),
            Err(e) => {
                eprintln!("error: function {}: {e:#}", decl.name);
                failed.push(format!("function {}", decl.name));
            }
        }
    }
    for t in &manifest.triggers {
        match put_or_create_trigger(client, &t.name, &t.body()).await {
            Ok(rec) => {
                let what = match t.kind {
                    TriggerType::Http => {
                        lines.push((format!("{} (http)", t.name), client.trigger_url(&rec)));
                        format!("http → {}", t.function)
                    }
                    TriggerType::Cron => {
                        format!("cron {:?} → {}", t.schedule.as_deref().unwrap_or_default(), t.function)
                    }
                };
                eprintln!("applied trigger {} ({what}): {}", t.name, name_of(&rec.status.phase));
            }
            Err(e) => {
                eprintln!("error: trigger {}: {:#}", t.name, anyhow::Error::new(e));
                failed.push(format!("trigger {}", t.name));
            }
        }
    }
    for j in &manifest.jobs {
        match put_or_create_job(client, &j.name, &j.body()).await {
            Ok(rec) => eprintln!(
                "applied job {} (run_id {} → {}): {}",
                j.name,
                j.run_id,
                j.function,
                name_of(&rec.status.phase)
            ),
            Err(e) => {
                eprintln!("error: job {}: {:#}", j.name, anyhow::Error::new(e));
                failed.push(format!("job {}", j.name));
            }
        }
    }
    if !failed.is_empty() {
        return Err(ApplyFailed { lines, failed }.into());
    }
    Ok(lines)
}

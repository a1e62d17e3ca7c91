//! The measurements, one function per section of the report.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;

use crate::baseline::Runtime;
use crate::load::{self, Outcome, Plan, Target};
use crate::sless::{Sless, instance_runs};
use crate::stats::Summary;
use sless_core::status::FunctionPhase;

/// How big a run is (`--quick` or full).
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Unmeasured lead-in of every warm cell.
    pub warmup: Duration,
    /// Measured time of every warm cell per round.
    pub cell: Duration,
    /// Rounds per warm cell (direct, invoke and /fn/ alternate in each round).
    pub rounds: usize,
    /// Cold-start samples per runtime and mode.
    pub cold_samples: usize,
    /// Deploys per runtime.
    pub deploys: usize,
    /// Functions of the density section.
    pub functions: usize,
    /// Timed list calls.
    pub lists: usize,
    /// Length of the recording burst.
    pub burst: Duration,
    /// Timed Functions of the operator section (each its own build).
    pub operator_samples: usize,
    /// Functions alive for the operator's memory figure.
    pub operator_functions: usize,
}

impl Size {
    /// The full run (about ten minutes on 2 cores).
    pub const FULL: Size = Size {
        warmup: Duration::from_millis(500),
        cell: Duration::from_millis(2500),
        rounds: 2,
        cold_samples: 20,
        deploys: 10,
        functions: 1000,
        lists: 50,
        burst: Duration::from_secs(4),
        operator_samples: 20,
        operator_functions: 1000,
    };
    /// The smoke test (about a minute).
    pub const QUICK: Size = Size {
        warmup: Duration::from_millis(200),
        cell: Duration::from_millis(600),
        rounds: 1,
        cold_samples: 3,
        deploys: 3,
        functions: 100,
        lists: 10,
        burst: Duration::from_secs(1),
        operator_samples: 5,
        operator_functions: 20,
    };
}

/// The concurrency levels of the warm section.
pub const CONCURRENCY: [usize; 3] = [1, 16, 64];
/// The ways a warm call reaches the runtime, plus `healthz`: sless's `GET /healthz`, no
/// function at all (what the HTTP layer alone costs, to split the overhead).
pub const ROUTES: [&str; 4] = ["direct", "invoke", "fn", "healthz"];

/// One cell of the warm table.
#[derive(Debug, Clone, Serialize)]
pub struct WarmCell {
    /// `python` / `node`.
    pub runtime: String,
    /// `direct`, `invoke` or `fn`.
    pub route: String,
    /// Connections.
    pub concurrency: usize,
    /// Successful requests in the measured windows.
    pub requests: usize,
    /// Failed requests.
    pub errors: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Successful requests per second.
    pub rps: f64,
    /// Latency of the successful requests.
    pub latency: Summary,
}

fn function_name(rt: &Runtime) -> String {
    format!("hello-{}", rt.label)
}

/// The `concurrency` of the warm section's functions: one instance takes as many calls at
/// once as the bare server it is compared with (which serves every connection it has).
pub const WARM_FUNCTION_CONCURRENCY: usize = 64;

/// Warm calls: the bare server vs sless's invoke API vs the public `/fn/` route.
pub async fn warm(server: &Sless, runtimes: &[Runtime], size: Size) -> Result<Vec<WarmCell>> {
    let mut cells = Vec::new();
    for rt in runtimes {
        let name = function_name(rt);
        let mut extra = serde_json::Map::new();
        extra.insert("concurrency".into(), WARM_FUNCTION_CONCURRENCY.into());
        server.deploy_with(&name, rt.sless_runtime, rt.entrypoint, &[(rt.file, rt.hello)], extra).await?;
        server.http_trigger(&name).await?;
        wait_public(server, &name).await?;
        let (_direct_child, direct_addr) = rt.spawn_server().await?;
        let targets = [
            Target { addr: direct_addr, path: "/".into(), auth: None },
            Target {
                addr: server.addr,
                path: format!("/v1/namespaces/default/functions/{name}/invoke"),
                auth: Some(Sless::auth()),
            },
            Target { addr: server.addr, path: format!("/fn/default/{name}"), auth: None },
            Target { addr: server.addr, path: "/healthz".into(), auth: None },
        ];
        for c in CONCURRENCY {
            let mut merged: Vec<Outcome> = ROUTES.iter().map(|_| Outcome::empty()).collect();
            for _ in 0..size.rounds {
                for (i, target) in targets.iter().enumerate() {
                    let plan = Plan { concurrency: c, warmup: size.warmup, duration: size.cell, max_requests: None };
                    let o = load::run(target, plan).await?;
                    eprintln!(
                        "  warm {:<6} c={c:<2} {:<6} {:>8.0} req/s  p50 {:.3} ms  p99 {:.3} ms  errors {}",
                        rt.label,
                        ROUTES[i],
                        o.rps(),
                        o.summary().p50_ms,
                        o.summary().p99_ms,
                        o.errors
                    );
                    merged[i].merge(o);
                }
            }
            for (route, o) in ROUTES.iter().zip(merged) {
                cells.push(WarmCell {
                    runtime: rt.label.into(),
                    route: (*route).into(),
                    concurrency: c,
                    requests: o.latencies_us.len(),
                    errors: o.errors,
                    first_error: o.first_error.clone(),
                    rps: o.rps(),
                    latency: o.summary(),
                });
            }
        }
    }
    Ok(cells)
}

/// Waits until the function's http trigger serves `/fn/default/{name}`.
async fn wait_public(server: &Sless, name: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((200, _, _)) = load::timed_get(server.addr, &format!("/fn/default/{name}"), None).await {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("/fn/default/{name} never answered 200");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Cold starts of one runtime.
#[derive(Debug, Clone, Serialize)]
pub struct ColdRow {
    /// `python` / `node`.
    pub runtime: String,
    /// The bare interpreter with its minimal HTTP server: spawn → first response.
    pub floor: Summary,
    /// For context: the interpreter alone, spawn → exit (`-c pass` / `-e 0`).
    pub interpreter_only: Summary,
    /// Through sless without a warm pool: scaled to zero → first response.
    pub no_pool: Summary,
    /// The same with the warm pool (None: this server has no pool).
    pub pool: Option<Summary>,
    /// Calls sless counted as cold starts (`sless_cold_starts_total`) / samples, per mode.
    pub counted_cold: Vec<String>,
}

/// Functions answering their instance: its temp folder (`TMPDIR`, one per instance). A pid
/// would not do: each instance is pid 1 of a pid namespace of its own (docs/security.md, "PID
/// namespaces").
const INSTANCE_PY: &str =
    "import os\n\ndef handler(event, context):\n    return {\"instance\": os.environ[\"TMPDIR\"]}\n";
const INSTANCE_NODE: &str = "exports.handler = async () => ({ instance: process.env.TMPDIR });\n";

/// Cold starts with and without the warm pool, next to the interpreter floor.
pub async fn cold(bin: &Path, runtimes: &[Runtime], size: Size, pool_flag: bool) -> Result<Vec<ColdRow>> {
    let mut floors: Vec<Vec<Duration>> = runtimes.iter().map(|_| Vec::new()).collect();
    let mut bare: Vec<Vec<Duration>> = runtimes.iter().map(|_| Vec::new()).collect();
    let modes: &[Option<&str>] = if pool_flag { &[Some("0"), Some("2")] } else { &[None] };
    let mut per_mode: Vec<Vec<(Summary, String)>> = Vec::new();
    for pool in modes {
        let mut args = vec!["--idle-timeout-sec".to_string(), "1".into()];
        if let Some(n) = pool {
            args.extend(["--warm-pool-size".to_string(), (*n).to_string()]);
        }
        let server = Sless::start(bin, &args)?;
        let mut results = Vec::new();
        for (ri, rt) in runtimes.iter().enumerate() {
            let r = cold_runtime(&server, rt, size, pool.unwrap_or("none"), &mut floors[ri], &mut bare[ri]).await;
            results.push(server.explain(r)?);
        }
        per_mode.push(results);
    }
    let mut rows = Vec::new();
    for (ri, rt) in runtimes.iter().enumerate() {
        let floor = Summary::of_durations(&floors[ri]);
        let interpreter_only = Summary::of_durations(&bare[ri]);
        eprintln!(
            "  floor {:<6} p50 {:.1} ms  p99 {:.1} ms  (interpreter alone p50 {:.1} ms)",
            rt.label, floor.p50_ms, floor.p99_ms, interpreter_only.p50_ms
        );
        rows.push(ColdRow {
            runtime: rt.label.into(),
            floor,
            interpreter_only,
            no_pool: per_mode[0][ri].0,
            pool: per_mode.get(1).map(|m| m[ri].0),
            counted_cold: per_mode.iter().map(|m| m[ri].1.clone()).collect(),
        });
    }
    Ok(rows)
}

/// Cold-start samples of one runtime on one server, each next to a floor sample.
async fn cold_runtime(
    server: &Sless,
    rt: &Runtime,
    size: Size,
    pool: &str,
    floors: &mut Vec<Duration>,
    bare: &mut Vec<Duration>,
) -> Result<(Summary, String)> {
    let name = format!("cold-{}", rt.label);
    let code = if rt.label == "python" { INSTANCE_PY } else { INSTANCE_NODE };
    server.deploy(&name, rt.sless_runtime, rt.entrypoint, &[(rt.file, code)]).await?;
    let path = format!("/v1/namespaces/default/functions/{name}/invoke");
    let auth = Sless::auth();
    let (_, mut instance) = call_instance(server, &path, &auth).await?;
    let before = server.metric("sless_cold_starts_total", &[("function", &name)]).await?;
    let mut samples = Vec::new();
    for _ in 0..size.cold_samples {
        wait_gone(&instance).await?;
        // The floor is sampled here, so both see the same machine state.
        floors.push(rt.floor_sample().await?);
        bare.push(rt.bare_start_sample().await?);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (took, new_instance) = call_instance(server, &path, &auth).await?;
        if new_instance == instance {
            bail!("{name}: the instance {instance} was still serving: not a cold start");
        }
        samples.push(took);
        instance = new_instance;
    }
    let after = server.metric("sless_cold_starts_total", &[("function", &name)]).await?;
    let s = Summary::of_durations(&samples);
    eprintln!(
        "  cold {:<6} pool={pool:<4} p50 {:.1} ms  p99 {:.1} ms  (counted cold: {}/{})",
        rt.label,
        s.p50_ms,
        s.p99_ms,
        after - before,
        samples.len()
    );
    Ok((s, format!("{}/{}", after - before, samples.len())))
}

/// One invoke on a fresh connection: the time and the instance the function reported.
async fn call_instance(server: &Sless, path: &str, auth: &str) -> Result<(Duration, String)> {
    let (status, body, took) = load::timed_get(server.addr, path, Some(auth)).await?;
    if status != 200 {
        bail!("{path}: HTTP {status}: {}", String::from_utf8_lossy(&body));
    }
    let v: Value = serde_json::from_slice(&body)?;
    let instance = v["instance"].as_str().ok_or_else(|| anyhow!("{path}: no instance in {v}"))?;
    Ok((took, instance.to_string()))
}

/// Waits until an instance's processes have exited (it scaled to zero).
async fn wait_gone(instance: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while instance_runs(instance) {
        if Instant::now() > deadline {
            bail!("instance {instance} did not stop within 60 s of idling");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Deploy times of one runtime.
#[derive(Debug, Clone, Serialize)]
pub struct DeployRow {
    /// `python` / `node`.
    pub runtime: String,
    /// Upload (PUT code) → the version Ready and active.
    pub took: Summary,
}

/// Deploys of changed, dependency-free code: upload → Ready and active (polled every 5 ms).
pub async fn deploy(server: &Sless, runtimes: &[Runtime], size: Size) -> Result<Vec<DeployRow>> {
    let mut rows = Vec::new();
    for rt in runtimes {
        let name = format!("deploy-{}", rt.label);
        let comment = if rt.label == "python" { "#" } else { "//" };
        server.deploy(&name, rt.sless_runtime, rt.entrypoint, &[(rt.file, rt.hello)]).await?;
        let mut samples = Vec::new();
        for i in 0..size.deploys {
            let code = format!("{}{comment} change {i}\n", rt.hello);
            let zip = crate::sless::zip(&[(rt.file, &code)])?;
            let t0 = Instant::now();
            let v = server.upload(&name, zip).await?;
            server.wait_version(&name, v, Duration::from_millis(5)).await?;
            samples.push(t0.elapsed());
        }
        let took = Summary::of_durations(&samples);
        eprintln!("  deploy {:<6} p50 {:.1} ms  max {:.1} ms", rt.label, took.p50_ms, took.max_ms);
        rows.push(DeployRow { runtime: rt.label.into(), took });
    }
    Ok(rows)
}

/// The density section's findings.
#[derive(Debug, Clone, Serialize)]
pub struct Density {
    /// Functions deployed (half Python, half Node).
    pub functions: usize,
    /// Wall time to create, upload and build them all, in seconds.
    pub deploy_s: f64,
    /// Processes other than the server whose command line mentions the data folder, idle.
    pub processes_idle: usize,
    /// Of those, function instances (`sless_instances`, every state).
    pub function_instances: usize,
    /// Generic warm-pool processes the server keeps by default (`--warm-pool-size` × 2
    /// runtimes; 0 without a pool): not per function.
    pub warm_pool_processes: usize,
    /// The server's VmRSS when idle, in MiB.
    pub server_rss_mib: f64,
    /// `GET …/functions?limit=1000`, body read.
    pub list: Summary,
    /// Items the list returned.
    pub listed: usize,
}

/// Many functions: idle processes, server memory, list latency.
pub async fn density(bin: &Path, runtimes: &[Runtime], size: Size, pool_default: usize) -> Result<Density> {
    let server = Arc::new(Sless::start(bin, &[])?);
    let r = density_on(&server, runtimes, size, pool_default * runtimes.len()).await;
    server.explain(r)
}

async fn density_on(
    server: &Arc<Sless>,
    runtimes: &[Runtime],
    size: Size,
    warm_pool_processes: usize,
) -> Result<Density> {
    let t0 = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..size.functions {
        let rt = runtimes[i % runtimes.len()].clone();
        let (server, gate) = (server.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire().await?;
            let name = format!("f-{i:04}");
            let spec = serde_json::json!({"name": name, "runtime": rt.sless_runtime, "entrypoint": rt.entrypoint});
            server.create(&spec).await?;
            server.upload(&name, crate::sless::zip(&[(rt.file, rt.hello)])?).await?;
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("deploy task panicked")??;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let items = server.list_functions().await?;
        let ready = items.iter().filter(|f| f.record.status.phase == FunctionPhase::Ready).count();
        if let Some(f) = items.iter().find(|f| f.record.status.phase == FunctionPhase::Failed) {
            bail!("{} failed: {}", f.record.name, f.record.status.message);
        }
        if ready >= size.functions {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {ready} of {} functions became Ready", size.functions);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let deploy_s = t0.elapsed().as_secs_f64();
    eprintln!("  density: {} functions Ready in {deploy_s:.1} s", size.functions);
    // Idle: builds are over; give the server a moment to settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let processes_idle = server.instance_processes();
    let function_instances = server.metric("sless_instances", &[]).await?.round() as usize;
    let server_rss_mib = server.rss_mib()?;
    let listed = server.list_functions().await?.len();
    let mut samples = Vec::new();
    for _ in 0..size.lists {
        samples.push(server.time_list().await?);
    }
    let list = Summary::of_durations(&samples);
    eprintln!(
        "  density: {processes_idle} processes idle ({function_instances} function instances), RSS {server_rss_mib:.1} MiB, list p50 {:.1} ms p99 {:.1} ms",
        list.p50_ms, list.p99_ms
    );
    Ok(Density {
        functions: size.functions,
        deploy_s,
        processes_idle,
        function_instances,
        warm_pool_processes,
        server_rss_mib,
        list,
        listed,
    })
}

/// The recording section's findings.
#[derive(Debug, Clone, Serialize)]
pub struct Recording {
    /// Calls answered during the burst.
    pub calls: usize,
    /// The burst's length, in seconds.
    pub burst_s: f64,
    /// Records readable right after the burst.
    pub records_at_end: usize,
    /// Records readable once writing settled.
    pub records: usize,
    /// Time from the burst's end until every record was readable, in ms (None: never).
    pub flush_ms: Option<f64>,
    /// Records written per second, burst and flush included.
    pub records_per_s: f64,
    /// `sless_invocation_records_dropped_total` after the burst.
    pub dropped: f64,
    /// p50 of a warm invoke with recording on (c=1, from the warm section), in ms.
    pub p50_on_ms: Option<f64>,
    /// p50 with recording off (None: the server has no switch).
    pub p50_off_ms: Option<f64>,
    /// What could not be measured and why.
    pub note: String,
}

/// Invocation records: a burst of calls at concurrency 16, then count what was written.
pub async fn recording(
    bin: &Path,
    server: &Sless,
    runtimes: &[Runtime],
    size: Size,
    warm: &[WarmCell],
    no_record_flag: bool,
) -> Result<Recording> {
    let rt = runtimes.first().ok_or_else(|| anyhow!("no runtime"))?;
    let name = "recorded";
    server.deploy(name, rt.sless_runtime, rt.entrypoint, &[(rt.file, rt.hello)]).await?;
    let target = Target {
        addr: server.addr,
        path: format!("/v1/namespaces/default/functions/{name}/invoke"),
        auth: Some(Sless::auth()),
    };
    // Under the 10,000 records a function keeps by default.
    let plan = Plan { concurrency: 16, warmup: Duration::ZERO, duration: size.burst, max_requests: Some(9000) };
    let t0 = Instant::now();
    let o = load::run(&target, plan).await?;
    let burst_end = Instant::now();
    let calls = o.latencies_us.len() + o.errors;
    let records_at_end = server.count_invocations(name).await?;
    let mut records = records_at_end;
    let mut flush_ms = (records >= calls).then(|| burst_end.elapsed().as_secs_f64() * 1000.0);
    let mut last_growth = Instant::now();
    while flush_ms.is_none() && last_growth.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let n = server.count_invocations(name).await?;
        if n > records {
            last_growth = Instant::now();
        }
        records = n;
        if records >= calls {
            flush_ms = Some(burst_end.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let total = flush_ms.map_or_else(|| last_growth - t0, |ms| (burst_end - t0) + Duration::from_secs_f64(ms / 1000.0));
    let dropped = server.metric("sless_invocation_records_dropped_total", &[]).await?;
    let (p50_on_ms, p50_off_ms, note) = if no_record_flag {
        let (on, off) = recording_cost(bin, server, rt, size).await?;
        (Some(on), Some(off), "recording on: the benchmark's server; off: a second server with --no-record".into())
    } else {
        let on = warm
            .iter()
            .find(|c| c.runtime == rt.label && c.route == "invoke" && c.concurrency == 1)
            .map(|c| c.latency.p50_ms);
        let note = "the server has no switch to turn recording off, so its latency cost is not measured \
                    (needs a --no-record flag)";
        (on, None, note.to_string())
    };
    let r = Recording {
        calls,
        burst_s: (burst_end - t0).as_secs_f64(),
        records_at_end,
        records,
        flush_ms,
        records_per_s: records as f64 / total.as_secs_f64(),
        dropped,
        p50_on_ms,
        p50_off_ms,
        note,
    };
    eprintln!(
        "  recording: {} calls in {:.1} s, {} records at the end, {} after {:?} ms, {:.0} records/s, {} dropped",
        r.calls, r.burst_s, r.records_at_end, r.records, r.flush_ms, r.records_per_s, r.dropped
    );
    Ok(r)
}

/// p50 of a warm invoke (c=1) with recording on (`server`) and off (a second server started
/// with `--no-record`), alternating rounds.
async fn recording_cost(bin: &Path, server: &Sless, rt: &Runtime, size: Size) -> Result<(f64, f64)> {
    let off = Sless::start(bin, &["--no-record".to_string()])?;
    let name = "recording-cost";
    for s in [server, &off] {
        s.deploy(name, rt.sless_runtime, rt.entrypoint, &[(rt.file, rt.hello)]).await?;
    }
    let target = |s: &Sless| Target {
        addr: s.addr,
        path: format!("/v1/namespaces/default/functions/{name}/invoke"),
        auth: Some(Sless::auth()),
    };
    let (mut on_o, mut off_o) = (Outcome::empty(), Outcome::empty());
    let plan = Plan { concurrency: 1, warmup: size.warmup, duration: size.cell, max_requests: None };
    for _ in 0..size.rounds.max(2) {
        on_o.merge(load::run(&target(server), plan).await?);
        off_o.merge(load::run(&target(&off), plan).await?);
    }
    Ok((on_o.summary().p50_ms, off_o.summary().p50_ms))
}

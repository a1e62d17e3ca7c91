//! The results: JSON, the Markdown tables, and the performance targets (docs/performance.md) judged met or
//! missed.

use std::fmt::Write as _;

use serde::Serialize;

use crate::sections::{CONCURRENCY, ColdRow, Density, DeployRow, Recording, WARM_FUNCTION_CONCURRENCY, WarmCell};

/// Where and how the run happened.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// `/proc/cpuinfo` model name.
    pub cpu_model: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// `/proc/loadavg` when the run started and ended (noise from other work).
    pub loadavg_start: String,
    /// As above, at the end.
    pub loadavg_end: String,
    /// The Python interpreter (real binary) and version.
    pub python: String,
    /// The Node binary and version.
    pub node: String,
    /// `git describe` of the sless tree measured.
    pub sless_rev: String,
    /// Whether `sless server --help` shows `--warm-pool-size`.
    pub warm_pool_flag: bool,
    /// Whether `sless server --help` shows `--no-record`.
    pub no_record_flag: bool,
}

/// One target of item 6.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// What is measured.
    pub target: String,
    /// The goal.
    pub goal: String,
    /// The measurement (ratio, difference or count).
    pub measured: String,
    /// `met`, `missed` or `n/a`.
    pub result: String,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// `full` or `quick`.
    pub mode: String,
    /// UTC, RFC 3339.
    pub generated_at: String,
    /// The machine.
    pub machine: Machine,
    /// Warm calls.
    pub warm: Vec<WarmCell>,
    /// Cold starts.
    pub cold: Vec<ColdRow>,
    /// Deploys.
    pub deploy: Vec<DeployRow>,
    /// Density.
    pub density: Option<Density>,
    /// Invocation recording.
    pub recording: Option<Recording>,
    /// The Kubernetes operator.
    pub operator: Option<crate::operator::OperatorBench>,
    /// The targets.
    pub targets: Vec<Verdict>,
}

fn cell<'a>(warm: &'a [WarmCell], runtime: &str, route: &str, c: usize) -> Option<&'a WarmCell> {
    warm.iter().find(|w| w.runtime == runtime && w.route == route && w.concurrency == c)
}

fn verdict(target: String, goal: &str, measured: String, ok: Option<bool>) -> Verdict {
    let result = match ok {
        Some(true) => "met",
        Some(false) => "missed",
        None => "n/a",
    };
    Verdict { target, goal: goal.into(), measured, result: result.into() }
}

fn route_label(route: &str) -> &'static str {
    match route {
        "invoke" => "invoke API",
        "fn" => "/fn/ route",
        "healthz" => "sless /healthz (no function)",
        _ => "direct",
    }
}

/// Judges every target of item 6 from this run's numbers.
pub fn judge(r: &Results) -> Vec<Verdict> {
    let mut v = Vec::new();
    let mut runtimes: Vec<&str> = Vec::new();
    for rt in r.warm.iter().map(|w| w.runtime.as_str()) {
        if !runtimes.contains(&rt) {
            runtimes.push(rt);
        }
    }
    for rt in runtimes {
        for route in ["invoke", "fn"] {
            let (Some(d1), Some(s1)) = (cell(&r.warm, rt, "direct", 1), cell(&r.warm, rt, route, 1)) else { continue };
            let p50 = s1.latency.p50_ms - d1.latency.p50_ms;
            let p99 = s1.latency.p99_ms - d1.latency.p99_ms;
            v.push(verdict(
                format!("warm overhead p50, {rt}, {} (c=1)", route_label(route)),
                "≤ +0.3 ms over direct",
                format!("{p50:+.3} ms ({:.2}×)", s1.latency.p50_ms / d1.latency.p50_ms),
                Some(p50 <= 0.3),
            ));
            v.push(verdict(
                format!("warm overhead p99, {rt}, {} (c=1)", route_label(route)),
                "≤ +1 ms over direct",
                format!("{p99:+.3} ms ({:.2}×)", s1.latency.p99_ms / d1.latency.p99_ms),
                Some(p99 <= 1.0),
            ));
            if let (Some(d16), Some(s16)) = (cell(&r.warm, rt, "direct", 16), cell(&r.warm, rt, route, 16)) {
                let ratio = s16.rps / d16.rps;
                v.push(verdict(
                    format!("throughput, {rt}, {} (c=16)", route_label(route)),
                    "≥ 0.9× direct",
                    format!("{ratio:.2}× ({:.0} vs {:.0} req/s)", s16.rps, d16.rps),
                    Some(ratio >= 0.9),
                ));
            }
        }
    }
    for c in &r.cold {
        let ratio = c.no_pool.p50_ms / c.floor.p50_ms;
        v.push(verdict(
            format!("cold start without pool, {} (p50)", c.runtime),
            "≤ 1.3× interpreter floor",
            format!("{ratio:.2}× ({:.1} vs {:.1} ms)", c.no_pool.p50_ms, c.floor.p50_ms),
            Some(ratio <= 1.3),
        ));
        let (measured, ok) = match &c.pool {
            Some(p) => {
                let ratio = p.p50_ms / c.floor.p50_ms;
                (format!("{ratio:.2}× ({:.1} vs {:.1} ms)", p.p50_ms, c.floor.p50_ms), Some(ratio <= 0.3))
            }
            None => ("n/a (no warm pool yet)".to_string(), None),
        };
        v.push(verdict(format!("cold start with pool, {} (p50)", c.runtime), "≤ 0.3× interpreter floor", measured, ok));
    }
    for d in &r.deploy {
        v.push(verdict(
            format!("deploy, {} (p50, upload → Ready)", d.runtime),
            "≤ 300 ms",
            format!("{:.0} ms", d.took.p50_ms),
            Some(d.took.p50_ms <= 300.0),
        ));
    }
    if let Some(d) = &r.density {
        let n = d.functions;
        // Processes per function: the warm pool's generic processes are a fixed cost of the
        // server (item 3), shown but not counted against the functions.
        let per_function = d.processes_idle.saturating_sub(d.warm_pool_processes);
        let measured = if d.warm_pool_processes > 0 {
            format!(
                "{per_function} ({} processes in all: {} function instances + {} generic warm-pool processes, fixed)",
                d.processes_idle, d.function_instances, d.warm_pool_processes
            )
        } else {
            d.processes_idle.to_string()
        };
        v.push(verdict(
            format!("{n} idle functions: processes"),
            "0",
            measured,
            Some(per_function == 0 && d.function_instances == 0),
        ));
        v.push(verdict(
            format!("{n} idle functions: server RSS"),
            "≤ 100 MB",
            format!("{:.1} MiB", d.server_rss_mib),
            Some(d.server_rss_mib * 1.048_576 <= 100.0),
        ));
        v.push(verdict(
            format!("{n} functions: list p99"),
            "≤ 50 ms",
            format!("{:.1} ms", d.list.p99_ms),
            Some(d.list.p99_ms <= 50.0),
        ));
    }
    if let Some(rec) = &r.recording {
        let (measured, ok) = match (rec.p50_on_ms, rec.p50_off_ms) {
            (Some(on), Some(off)) => {
                // "Not measurable": within 5 % or 0.02 ms, the noise of one run here.
                let diff = on - off;
                (format!("{diff:+.3} ms ({on:.3} vs {off:.3} ms)"), Some(diff <= (off * 0.05).max(0.02)))
            }
            _ => ("n/a (no switch to turn recording off: needs a --no-record flag)".to_string(), None),
        };
        v.push(verdict("recording cost at p50".into(), "no measurable difference", measured, ok));
    }
    if let Some(o) = &r.operator {
        for (what, sample) in [
            ("build Job complete → Deployment applied, p50", &o.build_to_deployment),
            ("Function Ready → Trigger Active, p50", &o.ready_to_active),
        ] {
            v.push(verdict(what.into(), "≤ 100 ms", format!("{:.1} ms", sample.p50_ms), Some(sample.p50_ms <= 100.0)));
        }
    }
    v
}

fn ms(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// The Markdown tables.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(
        s,
        "Run `{}` at {} · sless {} · {} CPUs ({}) · Linux {} · Python {} · Node {} · load average {} → {}\n",
        r.mode,
        r.generated_at,
        m.sless_rev,
        m.cpus,
        m.cpu_model,
        m.kernel,
        m.python,
        m.node,
        m.loadavg_start,
        m.loadavg_end
    );
    if !r.targets.is_empty() {
        s.push_str("### Targets\n\n| target | goal | measured | result |\n| --- | --- | --- | --- |\n");
        for t in &r.targets {
            let result = if t.result == "missed" { "**missed**".to_string() } else { t.result.clone() };
            let _ = writeln!(s, "| {} | {} | {} | {} |", t.target, t.goal, t.measured, result);
        }
        let missed = r.targets.iter().filter(|t| t.result == "missed").count();
        let met = r.targets.iter().filter(|t| t.result == "met").count();
        let _ = writeln!(s, "\n{met} met, {missed} missed, {} not measurable.\n", r.targets.len() - met - missed);
    }
    if !r.warm.is_empty() {
        s.push_str(
            "### Warm calls (keep-alive, loopback; ratios against direct at the same concurrency)\n\n\
             | runtime | c | route | p50 ms | p99 ms | req/s | req/s × direct | p50 over direct | p99 over direct | errors |\n\
             | --- | --: | --- | --: | --: | --: | --: | --: | --: | --: |\n",
        );
        for w in &r.warm {
            let d = cell(&r.warm, &w.runtime, "direct", w.concurrency);
            let (ratio, dp50, dp99) = match (d, w.route.as_str()) {
                (Some(d), "invoke" | "fn" | "healthz") => (
                    format!("{:.2}×", w.rps / d.rps),
                    format!("{:+.3} ms", w.latency.p50_ms - d.latency.p50_ms),
                    format!("{:+.3} ms", w.latency.p99_ms - d.latency.p99_ms),
                ),
                _ => ("".into(), "".into(), "".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.0} | {ratio} | {dp50} | {dp99} | {} |",
                w.runtime,
                w.concurrency,
                route_label(&w.route),
                ms(w.latency.p50_ms),
                ms(w.latency.p99_ms),
                w.rps,
                w.errors
            );
        }
        let _ = writeln!(
            s,
            "\nConcurrency levels: {CONCURRENCY:?}; the functions run with `concurrency` {WARM_FUNCTION_CONCURRENCY}.\n"
        );
    }
    if !r.cold.is_empty() {
        s.push_str(
            "### Cold starts (scaled to zero → first response; ms)\n\n\
             | runtime | interpreter alone p50 | floor p50 / p99 | sless, no pool p50 / p99 | × floor | with warm pool p50 / p99 | × floor | counted cold |\n\
             | --- | --: | --: | --: | --: | --: | --: | --- |\n",
        );
        for c in &r.cold {
            let (pool, pool_ratio) = match &c.pool {
                Some(p) => {
                    (format!("{} / {}", ms(p.p50_ms), ms(p.p99_ms)), format!("{:.2}×", p.p50_ms / c.floor.p50_ms))
                }
                None => ("n/a (no warm pool yet)".into(), "".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} / {} | {} / {} | {:.2}× | {pool} | {pool_ratio} | {} |",
                c.runtime,
                ms(c.interpreter_only.p50_ms),
                ms(c.floor.p50_ms),
                ms(c.floor.p99_ms),
                ms(c.no_pool.p50_ms),
                ms(c.no_pool.p99_ms),
                c.no_pool.p50_ms / c.floor.p50_ms,
                c.counted_cold.join(", ")
            );
        }
        s.push('\n');
    }
    if !r.deploy.is_empty() {
        s.push_str("### Deploy (dependency-free, upload → Ready and active)\n\n| runtime | deploys | p50 ms | max ms |\n| --- | --: | --: | --: |\n");
        for d in &r.deploy {
            let _ = writeln!(s, "| {} | {} | {} | {} |", d.runtime, d.took.n, ms(d.took.p50_ms), ms(d.took.max_ms));
        }
        s.push('\n');
    }
    if let Some(d) = &r.density {
        let _ = writeln!(
            s,
            "### Density\n\n| functions | deployed in | processes when idle | of which function instances | of which warm pool | server RSS | list p50 | list p99 | listed |\n\
             | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n\
             | {} | {:.1} s | {} | {} | {} | {:.1} MiB | {} ms | {} ms | {} |\n",
            d.functions,
            d.deploy_s,
            d.processes_idle,
            d.function_instances,
            d.warm_pool_processes,
            d.server_rss_mib,
            ms(d.list.p50_ms),
            ms(d.list.p99_ms),
            d.listed
        );
    }
    if let Some(rec) = &r.recording {
        let opt = |x: Option<f64>| x.map_or_else(|| "n/a".to_string(), ms);
        let _ = writeln!(
            s,
            "### Invocation recording\n\n| calls (c=16) | burst | records right after | records | all written after | records/s | dropped | warm p50 on | warm p50 off |\n\
             | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n\
             | {} | {:.1} s | {} | {} | {} | {:.0} | {} | {} ms | {} |\n\n{}\n",
            rec.calls,
            rec.burst_s,
            rec.records_at_end,
            rec.records,
            rec.flush_ms.map_or_else(|| "never".to_string(), |f| format!("{f:.0} ms")),
            rec.records_per_s,
            rec.dropped,
            opt(rec.p50_on_ms),
            rec.p50_off_ms.map_or_else(|| "n/a".to_string(), |x| format!("{} ms", ms(x))),
            rec.note
        );
    }
    if let Some(o) = &r.operator {
        let _ = writeln!(
            s,
            "### Operator (local control plane, KWOK nodes)\n\n| measure | n | p50 ms | p99 ms | max ms |\n| --- | --: | --: | --: | --: |\n\
             | build Job complete → Deployment applied | {} | {} | {} | {} |\n\
             | Function Ready → Trigger Active | {} | {} | {} | {} |\n\n\
             Operator RSS: {:.1} MiB idle, {:.1} MiB with {} Functions Ready.\n",
            o.build_to_deployment.n,
            ms(o.build_to_deployment.p50_ms),
            ms(o.build_to_deployment.p99_ms),
            ms(o.build_to_deployment.max_ms),
            o.ready_to_active.n,
            ms(o.ready_to_active.p50_ms),
            ms(o.ready_to_active.p99_ms),
            ms(o.ready_to_active.max_ms),
            o.rss_idle_mib,
            o.rss_loaded_mib,
            o.functions
        );
    }
    s
}

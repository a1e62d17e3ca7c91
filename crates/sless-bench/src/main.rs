//! `sless-bench`: measures the real release `sless` binary next to the bare runtimes, in one
//! run on this machine, and writes `bench/results.json` and `bench/results.md`
//! (`bench/results-quick.*` with `--quick`). Method: `docs/performance.md`.
//!
//! ```sh
//! cargo run --release -p sless-bench -- [--quick]
//! ```

mod baseline;
mod load;
mod operator;
mod report;
mod sections;
mod sless;
mod stats;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;

use crate::report::{Machine, Results};
use crate::sections::Size;

/// Benchmarks sless: warm calls, cold starts, deploys, density and invocation recording.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A small run (a few seconds per section) as a smoke test; writes `results-quick.*`.
    #[arg(long)]
    quick: bool,
    /// The `sless` binary to measure (default: `cargo build --release -p sless`, then the
    /// workspace's `release/sless`).
    #[arg(long, env = "SLESS_BENCH_BIN")]
    sless_bin: Option<PathBuf>,
    /// Where the results go (default: `bench/` in the workspace).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Only these sections (comma-separated: warm, recording, deploy, cold, density,
    /// operator); writes `results-partial.*` (or `results-quick.*`). `operator` runs only when
    /// named: it needs the local Kubernetes control plane (`scripts/kube-testenv build`, or
    /// `SLESS_TEST_KUBECONFIG`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Python 3.11 (resolved to its real binary, as the server does).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Node.js 20.
    #[arg(long, default_value = "node")]
    node: String,
}

/// The workspace root (this crate is `crates/sless-bench`).
fn workspace() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The `[default: N]` that `--help` shows for `flag`.
fn help_default(help: &str, flag: &str) -> Option<usize> {
    let rest = &help[help.find(&format!("{flag} "))?..];
    let end = rest[2..].find("\n      -").map_or(rest.len(), |i| i + 2);
    let value = rest[..end].split("[default: ").nth(1)?;
    value.split(']').next()?.trim().parse().ok()
}

/// Builds the release `sless` with the cargo that runs us (same target folder, same
/// profile) and returns its path; `cargo metadata` says where the target folder is.
fn build_sless() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("== building the release sless binary (cargo build --release -p sless)");
    let status = Command::new(&cargo)
        .args(["build", "--release", "-p", "sless"])
        .current_dir(workspace())
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p sless failed");
    }
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace())
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let target = meta["target_directory"].as_str().ok_or_else(|| anyhow!("cargo metadata: no target_directory"))?;
    let bin = Path::new(target).join("release/sless");
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    Ok(bin)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into())
}

fn loadavg() -> String {
    read_trimmed("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn git_rev() -> String {
    let out = Command::new("git").args(["describe", "--always", "--dirty"]).current_dir(workspace()).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "?".into(),
    }
}

/// UTC now as RFC 3339 (seconds).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Replaces the text between the results markers of `docs/performance.md`.
fn update_doc(doc: &Path, table: &str) -> Result<bool> {
    const BEGIN: &str = "<!-- bench-results:begin -->";
    const END: &str = "<!-- bench-results:end -->";
    let Ok(text) = std::fs::read_to_string(doc) else { return Ok(false) };
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else { return Ok(false) };
    if b < a {
        return Ok(false);
    }
    let new = format!("{}{BEGIN}\n\n{}\n{}", &text[..a], table.trim_end(), &text[b..]);
    std::fs::write(doc, new)?;
    Ok(true)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let size = if args.quick { Size::QUICK } else { Size::FULL };
    let wants = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    let wants_operator = args.only.iter().any(|o| o == "operator");
    let bin = match &args.sless_bin {
        Some(b) => b.clone(),
        None => build_sless()?,
    };
    let help = Command::new(&bin).args(["server", "--help"]).output().context("sless server --help")?;
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let warm_pool_flag = help.contains("--warm-pool-size");
    let no_record_flag = help.contains("--no-record");
    let pool_default = if warm_pool_flag { help_default(&help, "--warm-pool-size").unwrap_or(0) } else { 0 };
    let scripts = tempfile::Builder::new().prefix("sless-bench-scripts-").tempdir()?;
    let runtimes = baseline::runtimes(&args.python, &args.node, scripts.path())?;
    let mut results = Results {
        mode: if args.quick { "quick" } else { "full" }.into(),
        generated_at: now_rfc3339(),
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: read_trimmed("/proc/cpuinfo")
                .lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_string()))
                .unwrap_or_else(|| "?".into()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            loadavg_start: loadavg(),
            loadavg_end: String::new(),
            python: format!("{} ({})", runtimes[0].version, runtimes[0].interpreter.display()),
            node: format!("{} ({})", runtimes[1].version, runtimes[1].interpreter.display()),
            sless_rev: git_rev(),
            warm_pool_flag,
            no_record_flag,
        },
        warm: Vec::new(),
        cold: Vec::new(),
        deploy: Vec::new(),
        density: None,
        recording: None,
        operator: None,
        targets: Vec::new(),
    };
    eprintln!("== sless {} ({}), {} run", results.machine.sless_rev, bin.display(), results.mode);
    if wants("warm") || wants("recording") || wants("deploy") {
        let server = sless::Sless::start(&bin, &[])?;
        eprintln!("== server {} (data {})", server.url, server.data.display());
        if wants("warm") {
            eprintln!("== warm calls");
            results.warm = server.explain(sections::warm(&server, &runtimes, size).await)?;
        }
        if wants("recording") {
            eprintln!("== invocation recording");
            let r = sections::recording(&bin, &server, &runtimes, size, &results.warm, no_record_flag).await;
            results.recording = Some(server.explain(r)?);
        }
        if wants("deploy") {
            eprintln!("== deploys");
            results.deploy = server.explain(sections::deploy(&server, &runtimes, size).await)?;
        }
    }
    if wants("cold") {
        eprintln!("== cold starts (idle timeout 1 s; warm pool flag: {warm_pool_flag})");
        results.cold = sections::cold(&bin, &runtimes, size, warm_pool_flag).await?;
    }
    if wants("density") {
        eprintln!("== density ({} functions)", size.functions);
        results.density = Some(sections::density(&bin, &runtimes, size, pool_default).await?);
    }
    if wants_operator {
        eprintln!(
            "== operator ({} timed builds, {} functions for memory)",
            size.operator_samples, size.operator_functions
        );
        results.operator = Some(operator::run(&bin, size.operator_samples, size.operator_functions).await?);
    }
    results.machine.loadavg_end = loadavg();
    results.targets = report::judge(&results);
    let md = report::markdown(&results);
    let out_dir = args.out_dir.clone().unwrap_or_else(|| workspace().join("bench"));
    std::fs::create_dir_all(&out_dir)?;
    // Only a full run of every section makes `results.*`; the others never overwrite it.
    let stem = match (args.quick, args.only.is_empty()) {
        (true, _) => "results-quick",
        (false, false) => "results-partial",
        (false, true) => "results",
    };
    let json_path = out_dir.join(format!("{stem}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(&results)? + "\n")?;
    std::fs::write(out_dir.join(format!("{stem}.md")), format!("# sless benchmark results\n\n{md}"))?;
    println!("{md}");
    eprintln!("== wrote {} and {stem}.md", json_path.display());
    // Only a full run of every section is "the latest table" of the docs.
    if !args.quick && args.only.is_empty() && args.out_dir.is_none() {
        let doc = workspace().join("docs/performance.md");
        if update_doc(&doc, &md)? {
            eprintln!("== updated {}", doc.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_flags_default_from_help() {
        let help = "      --warm-pool-size <N>\n          Generic processes\n\n          [env: X=]\n          [default: 1]\n\n      \
                    --max-archive-mb <M>\n          [default: 50]\n      --no-default <X>\n          none\n";
        assert_eq!(help_default(help, "--warm-pool-size"), Some(1));
        assert_eq!(help_default(help, "--max-archive-mb"), Some(50));
        assert_eq!(help_default(help, "--no-default"), None);
        assert_eq!(help_default(help, "--absent"), None);
    }

    #[test]
    fn rfc3339_now_looks_right() {
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z') && now.starts_with("20"), "{now}");
    }
}

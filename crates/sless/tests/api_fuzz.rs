//! A property-based run of the OpenAPI document against the real server: `schemathesis`
//! (PyPI; `.ci/run` installs the version pinned in [`SCHEMATHESIS`]) reads `/openapi.json`
//! of a `sless server` on 127.0.0.1 port 0 and sends generated requests to every operation,
//! with the admin token, a bounded number of examples each and a request timeout. It fails on
//! a 5xx, a status, content type or body the document does not allow, or a hang. Findings
//! and their fixes are in docs/errors-log.md.
//!
//! Without schemathesis this test fails (it is never skipped as a pass).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, TOKEN, repo};

/// The version `.ci/run` installs (`python3 -m pip install schemathesis==…`).
const SCHEMATHESIS: &str = "4.32.5";
/// Generated test cases per operation and phase.
const MAX_EXAMPLES: &str = "25";
/// Longest a single request may take before it counts as a hang, in seconds.
const REQUEST_TIMEOUT: &str = "10";
/// Longest the whole run may take.
const RUN_BUDGET: Duration = Duration::from_secs(240);

#[test]
fn openapi_document_holds_against_the_real_server() {
    let version = Command::new("schemathesis").arg("--version").output();
    let Some(version) = version.ok().filter(|o| o.status.success()) else {
        panic!(
            "schemathesis is not installed: python3 -m pip install schemathesis=={SCHEMATHESIS} \
             (.ci/run does); this test cannot run without it"
        );
    };
    eprintln!("{}", String::from_utf8_lossy(&version.stdout).trim());
    let server = Server::start();
    let work = tempfile::tempdir().expect("temp dir");
    let hooks = repo().join("crates/sless/tests/api_fuzz");
    // Output goes to a file: a full pipe would stall the run while this thread waits.
    let out_path = work.path().join("schemathesis.txt");
    let out = std::fs::File::create(&out_path).expect("output file");
    let mut child = Command::new("schemathesis")
        .current_dir(work.path())
        .env("PYTHONPATH", &hooks)
        .env("SCHEMATHESIS_HOOKS", "sless_fuzz_hooks")
        .arg("--config-file")
        .arg(hooks.join("schemathesis.toml"))
        .args(["run", &format!("{}/openapi.json", server.url)])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", MAX_EXAMPLES, "--request-timeout", REQUEST_TIMEOUT])
        // One worker: CPython 3.11's parser is not safe to use from several threads at once,
        // which hypothesis does when it describes strategies.
        .args(["--workers", "1", "--generation-database", "none", "--no-color"])
        // The code upload's path patterns and binary bodies make hypothesis discard many
        // candidates; its health check for that then fails the run now and then although
        // nothing was wrong (the checks above still judge every request it sends).
        .args(["--suppress-health-check", "filter_too_much"])
        .stdout(out.try_clone().expect("output file"))
        .stderr(out)
        .spawn()
        .expect("start schemathesis");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for schemathesis") {
            break Some(status);
        }
        if start.elapsed() > RUN_BUDGET {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = child.wait();
    let report = std::fs::read_to_string(&out_path).unwrap_or_default();
    let Some(status) = status else {
        panic!("schemathesis ran past {RUN_BUDGET:?}:\n{report}\nserver log:\n{}", server.log());
    };
    assert!(status.success(), "schemathesis found problems:\n{report}\nserver log:\n{}", server.log());
    eprintln!("{}", report.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n"));
}

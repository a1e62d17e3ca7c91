//! How API errors become Terraform diagnostics: the attribute at fault (the problem's
//! `field`), and what to do.

use sless_client::{Error as ApiError, Problem, StatusCode};
use terraform_provider_sless::{Context, Error, attribute_of, diagnostic};
use tf_provider::{AttributePath, Diagnostic};

const ATTRS: [&str; 5] = ["name", "namespace", "memory_mb", "env", "source_dir"];

fn ctx() -> Context<'static> {
    Context {
        resource: "sless_function",
        action: "create",
        id: "default/f",
        attributes: &ATTRS,
        code_attribute: "source_dir",
    }
}

fn api(status: u16, body: serde_json::Value) -> Error {
    let status = StatusCode::from_u16(status).expect("status");
    Error::Api(ApiError::Api(Box::new(Problem::from_response(status, body.to_string().as_bytes()))))
}

fn diag(err: &Error) -> Diagnostic {
    diagnostic(err, &ctx())
}

#[test]
fn an_invalid_field_names_its_attribute() {
    let d = diag(&api(
        400,
        serde_json::json!({"type": "https://sless.dev/problems/invalid-field", "title": "Invalid field", "detail": "memory_mb must be 64–4096", "field": "memory_mb"}),
    ));
    assert_eq!(d.attribute, AttributePath::new("memory_mb"));
    assert!(d.summary.contains("invalid memory_mb"), "{}", d.summary);
    assert!(d.detail.contains("memory_mb must be 64–4096") && d.detail.contains("Fix the value"), "{}", d.detail);
}

#[test]
fn a_field_inside_a_map_names_the_key() {
    assert_eq!(attribute_of("env.SLESS_X", &ATTRS), Some(AttributePath::new("env").key("SLESS_X")));
    assert_eq!(attribute_of("env", &ATTRS), Some(AttributePath::new("env")));
    assert_eq!(attribute_of("body", &ATTRS), None);
}

#[test]
fn a_stale_update_says_to_refresh() {
    let d = diag(&api(
        412,
        serde_json::json!({"type": "https://sless.dev/problems/precondition-failed", "detail": "resource_version is 4"}),
    ));
    assert!(d.summary.contains("changed outside Terraform"), "{}", d.summary);
    assert!(d.detail.contains("refresh"), "{}", d.detail);
}

#[test]
fn a_refused_token_says_which_setting_to_fix() {
    let d = diag(&api(
        401,
        serde_json::json!({"type": "https://sless.dev/problems/unauthorized", "detail": "invalid token"}),
    ));
    assert!(d.summary.contains("refused the token"), "{}", d.summary);
    assert!(d.detail.contains("SLESS_TOKEN"), "{}", d.detail);
}

#[test]
fn an_archive_problem_names_the_code_attribute_and_entry() {
    let d = diag(&api(
        422,
        serde_json::json!({"type": "https://sless.dev/problems/invalid-archive", "detail": "main.py is missing", "entry": "main.py"}),
    ));
    assert_eq!(d.attribute, AttributePath::new("source_dir"));
    assert!(d.summary.contains("\"main.py\""), "{}", d.summary);
}

#[test]
fn a_failed_build_shows_the_log_tail_on_the_code_attribute() {
    let err = Error::BuildFailed {
        function: "f".into(),
        version: 2,
        message: "import failed".into(),
        log_tail: "RuntimeError: boom".into(),
    };
    let d = diag(&err);
    assert_eq!(d.attribute, AttributePath::new("source_dir"));
    assert!(d.detail.contains("RuntimeError: boom"), "{}", d.detail);
}

#[test]
fn a_conflict_says_to_import() {
    let d = diag(&api(
        409,
        serde_json::json!({"type": "https://sless.dev/problems/conflict", "detail": "function f exists"}),
    ));
    assert_eq!(d.attribute, AttributePath::new("name"));
    assert!(d.detail.contains("terraform import sless_function.<name> default/f"), "{}", d.detail);
}

#[test]
fn a_quota_names_the_quota() {
    let d = diag(&api(
        403,
        serde_json::json!({"type": "https://sless.dev/problems/quota-exceeded", "detail": "limit 2", "quota": "max_functions"}),
    ));
    assert!(d.summary.contains("quota max_functions exceeded"), "{}", d.summary);
}

#[test]
fn regression_a_backtrace_never_reaches_a_diagnostic() {
    // Terraform takes a `panic:` in a diagnostic (as in a Rust backtrace, which
    // `Diagnostic::new` appends under RUST_BACKTRACE) for its own crash; terraform.rs runs
    // the provider with RUST_BACKTRACE=1 to pin it end to end.
    let err = Error::NotConfigured;
    let d = diag(&err);
    assert!(!d.detail.contains("backtrace") && !d.detail.contains("panic"), "{}", d.detail);
    let d = diag(&api(500, serde_json::json!({"detail": "boom"})));
    assert!(!d.detail.contains("panic"), "{}", d.detail);
}

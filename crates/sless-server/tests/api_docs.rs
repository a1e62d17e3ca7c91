//! docs/api.md against the OpenAPI document: its "Routes" table is generated from
//! `sless_server::openapi_document()`, and this test fails when the committed table has drifted
//! (a route the spec has and the docs lack, or the other way round). Regenerate it with
//!
//! ```sh
//! SLESS_UPDATE_DOCS=1 cargo test -p sless-server --test api_docs
//! ```

use std::path::PathBuf;

use serde_json::Value;

const BEGIN: &str = "<!-- routes: generated from /openapi.json by `SLESS_UPDATE_DOCS=1 cargo test -p sless-server --test api_docs`; do not edit by hand -->";
const END: &str = "<!-- end of routes -->";

fn api_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md")
}

fn spec() -> Value {
    serde_json::to_value(sless_server::openapi_document()).expect("the document serialises")
}

/// One row per operation: method, path, auth, summary.
fn routes_table(spec: &Value) -> String {
    let mut out = String::from("| method | path | auth | what |\n| --- | --- | --- | --- |\n");
    let paths = spec["paths"].as_object().expect("paths");
    for (path, item) in paths {
        let item = item.as_object().expect("path item");
        let methods: Vec<(&String, &Value)> = item.iter().filter(|(k, _)| k.as_str() != "parameters").collect();
        let all_same = methods.len() == 8;
        for (method, op) in &methods {
            let auth = match op.get("security").and_then(Value::as_array) {
                None => "none",
                Some(reqs) if reqs.iter().any(|r| r.as_object().is_some_and(|o| o.is_empty())) => "optional bearer",
                Some(_) => "bearer",
            };
            let summary = op["summary"].as_str().unwrap_or_default().trim_end_matches('.');
            let method = if all_same { "ANY".to_string() } else { method.to_uppercase() };
            out.push_str(&format!("| {method} | `{path}` | {auth} | {summary} |\n"));
            if all_same {
                break;
            }
        }
    }
    out
}

#[test]
fn docs_api_md_routes_match_the_openapi_document() {
    let table = routes_table(&spec());
    let path = api_md();
    let text = std::fs::read_to_string(&path).expect("docs/api.md");
    let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("docs/api.md lacks the generated routes section ({BEGIN} … {END})");
    };
    let committed = text[begin + BEGIN.len()..end].trim();
    if std::env::var_os("SLESS_UPDATE_DOCS").is_some() {
        let updated = format!("{}{BEGIN}\n\n{}\n{}", &text[..begin], table.trim(), &text[end..]);
        let updated = updated.replacen(&format!("{}\n{END}", table.trim()), &format!("{}\n\n{END}", table.trim()), 1);
        std::fs::write(&path, updated).expect("write docs/api.md");
        return;
    }
    assert_eq!(
        committed,
        table.trim(),
        "docs/api.md's routes table differs from the OpenAPI document; regenerate it with \
         SLESS_UPDATE_DOCS=1 cargo test -p sless-server --test api_docs"
    );
}

#[test]
fn every_operation_has_a_summary_and_an_id() {
    let spec = spec();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item").iter().filter(|(k, _)| k.as_str() != "parameters") {
            assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{method} {path} has no summary");
            assert!(op["operationId"].as_str().is_some(), "{method} {path} has no operationId");
        }
    }
}

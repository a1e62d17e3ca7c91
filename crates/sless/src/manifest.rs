//! The app manifest `sless.toml`, or a folder holding one function whose runtime and
//! entrypoint are detected from its files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use sless_core::event::PayloadFormat;
use sless_core::runtime::Runtime;
use sless_core::trigger::{HttpAuth, TriggerType};

/// The manifest file's name.
pub const MANIFEST: &str = "sless.toml";

/// An app: functions, triggers and jobs to deploy into one namespace.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Namespace to deploy into (default `default`).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The functions.
    #[serde(default)]
    pub functions: Vec<FunctionDecl>,
    /// The triggers (created or replaced after the functions).
    #[serde(default)]
    pub triggers: Vec<TriggerDecl>,
    /// The jobs (created or replaced after the triggers).
    #[serde(default)]
    pub jobs: Vec<JobDecl>,
}

fn default_namespace() -> String {
    "default".into()
}

/// One function of a manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDecl {
    /// DNS-1123 name.
    pub name: String,
    /// Code folder, relative to the manifest (default: the function's name).
    pub path: Option<PathBuf>,
    /// `python3.11` or `nodejs20` (default: detected).
    pub runtime: Option<String>,
    /// `folder/module.function` (default: detected).
    pub entrypoint: Option<String>,
    /// Memory limit in MiB.
    pub memory_mb: Option<u32>,
    /// Timeout in seconds.
    pub timeout_sec: Option<u32>,
    /// The HTTP event format: `"1.0"` (default) or `"2.0"`.
    pub payload_format: Option<PayloadFormat>,
    /// Environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// One trigger of a manifest (`[[triggers]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerDecl {
    /// DNS-1123 name.
    pub name: String,
    /// The function it calls.
    pub function: String,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    pub kind: TriggerType,
    /// Cron only: 5-field cron, an `@hourly`-style macro, or `@every 30s`.
    pub schedule: Option<String>,
    /// Cron only: IANA time zone (default UTC).
    pub timezone: Option<String>,
    /// Cron only: any TOML value, delivered as the cron event's `detail` (as JSON).
    pub payload: Option<toml::Value>,
    /// Http only: `none` (default) or `token`.
    pub auth: Option<HttpAuth>,
    /// Http only: the payload format of calls through the URL (default: the function's).
    pub payload_format: Option<PayloadFormat>,
    /// Default true.
    pub enabled: Option<bool>,
    /// Cron only: start an instance this many seconds before each tick.
    pub prewarm_sec: Option<u32>,
}

impl TriggerDecl {
    /// The API body (a full spec: fields left out take the server's defaults).
    pub fn body(&self) -> Value {
        let mut body = json!({
            "name": self.name,
            "function": self.function,
            "type": self.kind,
            "enabled": self.enabled.unwrap_or(true),
        });
        if let Some(s) = &self.schedule {
            body["schedule"] = json!(s);
        }
        if let Some(tz) = &self.timezone {
            body["timezone"] = json!(tz);
        }
        if let Some(p) = &self.payload {
            body["payload"] = toml_to_json(p);
        }
        if let Some(a) = self.auth {
            body["auth"] = json!(a);
        }
        if let Some(f) = self.payload_format {
            body["payload_format"] = json!(f);
        }
        if let Some(p) = self.prewarm_sec {
            body["prewarm_sec"] = json!(p);
        }
        body
    }
}

/// One job of a manifest (`[[jobs]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobDecl {
    /// DNS-1123 name.
    pub name: String,
    /// The function it runs.
    pub function: String,
    /// 0 never runs; any other value runs once, and again whenever it changes (default 1).
    #[serde(default = "default_run_id")]
    pub run_id: u64,
    /// Any TOML value, delivered as the job event's `payload` (as JSON).
    pub payload: Option<toml::Value>,
    /// Default true.
    pub enabled: Option<bool>,
}

fn default_run_id() -> u64 {
    1
}

impl JobDecl {
    /// The API body (a full spec).
    pub fn body(&self) -> Value {
        let mut body = json!({
            "name": self.name,
            "function": self.function,
            "run_id": self.run_id,
            "enabled": self.enabled.unwrap_or(true),
        });
        if let Some(p) = &self.payload {
            body["payload"] = toml_to_json(p);
        }
        body
    }
}

/// A TOML value as JSON; dates and times become RFC 3339 strings.
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

/// Checks what the server would refuse anyway, but naming the manifest: duplicate names,
/// a cron trigger without a valid schedule, cron-only fields on http triggers, and two http
/// triggers for one function.
fn check_triggers_and_jobs(file: &Path, m: &Manifest) -> anyhow::Result<()> {
    let mut functions = std::collections::BTreeSet::new();
    for f in &m.functions {
        if !functions.insert(f.name.as_str()) {
            bail!("{}: function {:?} declared twice", file.display(), f.name);
        }
    }
    let mut names = std::collections::BTreeSet::new();
    let mut http_functions = BTreeMap::new();
    for t in &m.triggers {
        let at = || format!("{}: trigger {:?}", file.display(), t.name);
        if !names.insert(t.name.as_str()) {
            bail!("{}: declared twice", at());
        }
        match t.kind {
            TriggerType::Cron => {
                let Some(schedule) = &t.schedule else {
                    bail!("{}: a cron trigger needs a schedule", at());
                };
                // Checked here too, so nothing of the manifest is applied when it is wrong.
                sless_core::schedule::check(schedule, t.timezone.as_deref().unwrap_or("UTC"))
                    .map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
                if t.auth.is_some() {
                    bail!("{}: auth applies to http triggers only", at());
                }
                if t.payload_format.is_some() {
                    bail!("{}: payload_format applies to http triggers only", at());
                }
            }
            TriggerType::Http => {
                for (field, set) in [
                    ("schedule", t.schedule.is_some()),
                    ("timezone", t.timezone.is_some()),
                    ("payload", t.payload.is_some()),
                    ("prewarm_sec", t.prewarm_sec.is_some()),
                ] {
                    if set {
                        bail!("{}: {field} applies to cron triggers only", at());
                    }
                }
                if let Some(other) = http_functions.insert(t.function.as_str(), t.name.as_str()) {
                    bail!(
                        "{}: function {:?} already has the http trigger {other:?} (one per function)",
                        at(),
                        t.function
                    );
                }
            }
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for j in &m.jobs {
        if !names.insert(j.name.as_str()) {
            bail!("{}: job {:?} declared twice", file.display(), j.name);
        }
    }
    Ok(())
}

/// Reads `dir/sless.toml`, or treats `dir` as one function named after the folder.
pub fn load(dir: &Path) -> anyhow::Result<Manifest> {
    let dir = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
    let file = dir.join(MANIFEST);
    if !file.exists() {
        let name = folder_name(&dir)?;
        let decl = FunctionDecl {
            name,
            path: Some(dir),
            runtime: None,
            entrypoint: None,
            memory_mb: None,
            timeout_sec: None,
            payload_format: None,
            env: BTreeMap::new(),
        };
        return Ok(Manifest {
            namespace: default_namespace(),
            functions: vec![decl],
            triggers: Vec::new(),
            jobs: Vec::new(),
        });
    }
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut manifest: Manifest =
        toml::from_str(&text).with_context(|| format!("{} is not a valid manifest", file.display()))?;
    if manifest.functions.is_empty() && manifest.triggers.is_empty() && manifest.jobs.is_empty() {
        bail!("{} declares no [[functions]], [[triggers]] or [[jobs]]", file.display());
    }
    check_triggers_and_jobs(&file, &manifest)?;
    for f in &mut manifest.functions {
        let rel = f.path.clone().unwrap_or_else(|| PathBuf::from(&f.name));
        let path = dir.join(&rel);
        if !path.is_dir() {
            bail!("{}: function {:?}: path {} is not a folder", file.display(), f.name, path.display());
        }
        f.path = Some(path);
    }
    Ok(manifest)
}

/// A folder's name as a function name: lowercase, other characters → `-`.
pub fn folder_name(dir: &Path) -> anyhow::Result<String> {
    let raw = dir.file_name().and_then(|n| n.to_str()).context("the folder has no usable name; pass --name")?;
    let name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    Ok(name.trim_matches('-').to_string())
}

/// The runtime and entrypoint of a folder: given values win, the rest is detected.
pub fn resolve(dir: &Path, runtime: Option<&str>, entrypoint: Option<&str>) -> anyhow::Result<(String, String)> {
    let exists = |f: &str| dir.join(f).is_file();
    let read = |f: &str| if exists(f) { std::fs::read_to_string(dir.join(f)).ok() } else { None };
    match (runtime, entrypoint) {
        (Some(r), Some(e)) => Ok((r.to_string(), e.to_string())),
        (None, Some(e)) => {
            // The runtime whose file the entrypoint names.
            let ep = sless_core::runtime::Entrypoint::parse("--entrypoint", e)?;
            let found: Vec<Runtime> =
                Runtime::ALL.into_iter().filter(|rt| rt.entrypoint_files(&ep).iter().any(|f| exists(f))).collect();
            match found.as_slice() {
                [rt] => Ok((rt.name().to_string(), e.to_string())),
                [] => {
                    let looked: Vec<String> =
                        Runtime::ALL.into_iter().flat_map(|rt| rt.entrypoint_files(&ep)).collect();
                    bail!(
                        "no file in {} matches the entrypoint {e:?} (looked for {})",
                        dir.display(),
                        looked.join(", ")
                    )
                }
                _ => {
                    bail!("the entrypoint {e:?} matches files of several runtimes in {}; pass --runtime", dir.display())
                }
            }
        }
        (Some(r), None) => {
            let rt = Runtime::parse("--runtime", r)?;
            let python = rt == Runtime::Python311;
            let Some((_, ep)) = Runtime::detect(|f| read(f).filter(|_| f.ends_with(".py") == python)) else {
                bail!("cannot find the {r} entrypoint in {}: pass --entrypoint", dir.display());
            };
            Ok((r.to_string(), ep))
        }
        (None, None) => {
            let python = Runtime::detect(|f| read(f).filter(|_| f.ends_with(".py")));
            let node = Runtime::detect(|f| read(f).filter(|_| !f.ends_with(".py")));
            match (python, node) {
                (Some((rt, ep)), None) | (None, Some((rt, ep))) => Ok((rt.name().to_string(), ep)),
                (Some(_), Some(_)) => bail!(
                    "{} has both a Python and a Node entry file (main.py/handler.py/lambda_function.py and index.js/index.mjs); pass --runtime",
                    dir.display()
                ),
                (None, None) => bail!(
                    "cannot detect the runtime of {}: no main.py, handler.py, lambda_function.py, index.js or index.mjs; pass --runtime and --entrypoint",
                    dir.display()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_become_function_names() {
        assert_eq!(folder_name(Path::new("/x/Hello_World")).expect("name"), "hello-world");
    }

    #[test]
    fn manifest_typos_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(MANIFEST), "[[functions]]\nname = \"a\"\nmemroy_mb = 1\n").expect("write");
        let err = load(dir.path()).expect_err("typo");
        assert!(format!("{err:#}").contains("memroy_mb"), "{err:#}");
    }

    #[test]
    fn detection_uses_the_entrypoint_and_refuses_ambiguity() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("src/hello_world")).expect("mkdir");
        std::fs::write(dir.path().join("src/hello_world/app.py"), "def handler(e, c): pass").expect("write");
        let got = resolve(dir.path(), None, Some("src/hello_world.app.handler")).expect("by entrypoint");
        assert_eq!(got.0, "python3.11");
        std::fs::write(dir.path().join("main.py"), "").expect("write");
        std::fs::write(dir.path().join("index.js"), "").expect("write");
        let err = resolve(dir.path(), None, None).expect_err("ambiguous");
        assert!(err.to_string().contains("both"), "{err}");
        assert_eq!(resolve(dir.path(), Some("nodejs20"), None).expect("node").1, "index.handler");
    }

    #[test]
    fn regression_a_lambda_console_folder_deploys_without_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let code = "import json\n\ndef lambda_handler(event, context):\n    return {'statusCode': 200}\n";
        std::fs::write(dir.path().join("lambda_function.py"), code).expect("write");
        let got = resolve(dir.path(), None, None).expect("detect");
        assert_eq!(got, ("python3.11".to_string(), "lambda_function.lambda_handler".to_string()));
        // A wrong --entrypoint names what was looked for, instead of advising --runtime.
        let err = resolve(dir.path(), None, Some("nope.handler")).expect_err("no such file").to_string();
        assert!(err.contains("looked for nope.py") && !err.contains("--runtime"), "{err}");
    }

    #[test]
    fn single_function_folders_are_detected() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("index.mjs"), "export const handler = async () => 1;").expect("write");
        let m = load(dir.path()).expect("load");
        assert_eq!(m.functions.len(), 1);
        let path = m.functions[0].path.clone().expect("path");
        assert_eq!(resolve(&path, None, None).expect("detect"), ("nodejs20".to_string(), "index.handler".to_string()));
    }

    fn manifest_with(text: &str) -> anyhow::Result<Manifest> {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("a")).expect("mkdir");
        std::fs::write(dir.path().join(MANIFEST), format!("[[functions]]\nname = \"a\"\n{text}")).expect("write");
        load(dir.path())
    }

    #[test]
    fn triggers_and_jobs_are_parsed() {
        let m = manifest_with(
            r#"
[[triggers]]
name = "a-http"
function = "a"
type = "http"
auth = "token"

[[triggers]]
name = "a-tick"
function = "a"
type = "cron"
schedule = "@every 1m"
timezone = "Europe/Berlin"
payload = { from = "cron", n = 2, tags = ["x", 1.5], at = 1979-05-27T07:32:00Z }
prewarm_sec = 5
enabled = false

[[jobs]]
name = "seed"
function = "a"
payload = "hi"

[[jobs]]
name = "again"
function = "a"
run_id = 7
enabled = false
"#,
        )
        .expect("load");
        assert_eq!(m.triggers.len(), 2);
        assert_eq!(
            m.triggers[0].body(),
            json!({"name": "a-http", "function": "a", "type": "http", "auth": "token", "enabled": true})
        );
        assert_eq!(
            m.triggers[1].body(),
            json!({
                "name": "a-tick", "function": "a", "type": "cron", "schedule": "@every 1m",
                "timezone": "Europe/Berlin", "prewarm_sec": 5, "enabled": false,
                "payload": {"from": "cron", "n": 2, "tags": ["x", 1.5], "at": "1979-05-27T07:32:00Z"},
            })
        );
        assert_eq!(
            m.jobs[0].body(),
            json!({"name": "seed", "function": "a", "run_id": 1, "enabled": true, "payload": "hi"})
        );
        assert_eq!(m.jobs[1].body(), json!({"name": "again", "function": "a", "run_id": 7, "enabled": false}));
    }

    #[test]
    fn trigger_and_job_mistakes_are_errors() {
        for (text, needle) in [
            ("[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"http\"\nschedul = \"x\"\n", "schedul"),
            ("[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"queue\"\n", "queue"),
            ("[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"cron\"\n", "needs a schedule"),
            (
                "[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"http\"\nschedule = \"@hourly\"\n",
                "cron triggers only",
            ),
            ("[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"http\"\nauth = \"basic\"\n", "basic"),
            (
                "[[triggers]]\nname = \"t\"\nfunction = \"a\"\ntype = \"http\"\n[[triggers]]\nname = \"u\"\nfunction = \"a\"\ntype = \"http\"\n",
                "one per function",
            ),
            ("[[jobs]]\nname = \"j\"\nfunction = \"a\"\nrunid = 2\n", "runid"),
            ("[[jobs]]\nname = \"j\"\nfunction = \"a\"\n[[jobs]]\nname = \"j\"\nfunction = \"a\"\n", "twice"),
        ] {
            let err = manifest_with(text).expect_err(needle);
            assert!(format!("{err:#}").contains(needle), "{text}: {err:#}");
        }
    }

    #[test]
    fn the_quickstart_manifest_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart");
        let m = load(&dir).expect("quickstart");
        assert_eq!(m.functions.len(), 2);
        assert!(m.triggers.iter().any(|t| t.kind == TriggerType::Http && t.function == "hello-py"));
        let cron = m.triggers.iter().find(|t| t.kind == TriggerType::Cron).expect("cron");
        assert_eq!((cron.function.as_str(), cron.schedule.as_deref()), ("hello-js", Some("@every 1m")));
        assert_eq!(cron.body()["payload"], json!({"from": "cron"}));
    }
}

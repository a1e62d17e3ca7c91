//! `sless_function`: a function, its spec and its code (from `source_dir` or `source_zip`).
//! Create and update wait until the function serves the new version (or fail with the build
//! log's tail); delete waits until it is gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};
use sless_client::{Client, Function, etag};
use sless_core::status::{FunctionPhase, VersionPhase};
use tf_provider::schema::{AttributeConstraint as C, AttributeType as T, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::archive;
use crate::error::{Context, Error, Result, diagnostic};
use crate::provider::{Shared, attr, conn, schema};
use crate::util::{Bool, Num, Str, StrMap, keep_null, map_json, s, split_id};

/// The attributes (an API `field` names one of these).
pub const ATTRIBUTES: [&str; 21] = [
    "id",
    "namespace",
    "name",
    "runtime",
    "entrypoint",
    "memory_mb",
    "timeout_sec",
    "concurrency",
    "max_instances",
    "idle_timeout_sec",
    "payload_format",
    "env",
    "enabled",
    "source_dir",
    "source_zip",
    "source_sha256",
    "ready_timeout_sec",
    "version",
    "phase",
    "url",
    "resource_version",
];

/// How long create and update wait for Ready by default, seconds.
pub const DEFAULT_READY_TIMEOUT_SEC: i64 = 300;

/// The state of a `sless_function` (and the data source's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionState {
    /// `namespace/name`.
    pub id: Str,
    /// The namespace (the provider's by default).
    pub namespace: Str,
    /// The name.
    pub name: Str,
    /// `python3.11` or `nodejs20`.
    pub runtime: Str,
    /// `[folder/]module.function`.
    pub entrypoint: Str,
    /// MiB.
    pub memory_mb: Num,
    /// Seconds.
    pub timeout_sec: Num,
    /// Calls per instance.
    pub concurrency: Num,
    /// Most instances at once.
    pub max_instances: Num,
    /// Seconds.
    pub idle_timeout_sec: Num,
    /// `"1.0"` or `"2.0"`.
    pub payload_format: Str,
    /// Environment variables.
    pub env: StrMap,
    /// Whether it answers calls.
    pub enabled: Bool,
    /// The code folder.
    pub source_dir: Str,
    /// A prepared zip file.
    pub source_zip: Str,
    /// SHA-256 of the code archive.
    pub source_sha256: Str,
    /// Seconds create and update wait for Ready.
    pub ready_timeout_sec: Num,
    /// The active version.
    pub version: Num,
    /// `Pending`, `Building`, `Ready` or `Failed`.
    pub phase: Str,
    /// The invoke URL.
    pub url: Str,
    /// The server's resource version of the spec.
    pub resource_version: Str,
}

/// The `sless_function` resource.
#[derive(Debug, Clone)]
pub struct FunctionResource(pub Shared);

/// The attributes of the spec, in the API's names.
const SPEC: [&str; 10] = [
    "runtime",
    "entrypoint",
    "memory_mb",
    "timeout_sec",
    "concurrency",
    "max_instances",
    "idle_timeout_sec",
    "payload_format",
    "env",
    "enabled",
];

impl FunctionState {
    fn ns_name(&self) -> (String, String) {
        (s(&self.namespace).unwrap_or_default().to_string(), s(&self.name).unwrap_or_default().to_string())
    }

    /// The spec as the API's JSON (`PUT` and `POST` bodies): unset optional fields left out.
    pub fn spec_json(&self) -> Json {
        let mut m = Map::new();
        if let Some(n) = s(&self.name) {
            m.insert("name".into(), json!(n));
        }
        for (k, v) in
            [("runtime", &self.runtime), ("entrypoint", &self.entrypoint), ("payload_format", &self.payload_format)]
        {
            if let Some(v) = s(v) {
                m.insert(k.into(), json!(v));
            }
        }
        for (k, v) in [
            ("memory_mb", &self.memory_mb),
            ("timeout_sec", &self.timeout_sec),
            ("concurrency", &self.concurrency),
            ("max_instances", &self.max_instances),
            ("idle_timeout_sec", &self.idle_timeout_sec),
        ] {
            if let Some(v) = v.as_ref_option() {
                m.insert(k.into(), json!(v));
            }
        }
        m.insert("env".into(), Json::Object(map_json(&self.env)));
        if let Some(e) = self.enabled.as_ref_option() {
            m.insert("enabled".into(), json!(e));
        }
        Json::Object(m)
    }

    /// Whether the spec attributes differ (those the server stores).
    fn spec_differs(&self, other: &FunctionState) -> bool {
        let mut a = self.spec_json();
        let mut b = other.spec_json();
        for j in [&mut a, &mut b] {
            if let Json::Object(m) = j {
                m.retain(|k, _| SPEC.contains(&k.as_str()));
            }
        }
        a != b
    }

    /// The state for the server's record, keeping `prior`'s configuration-only attributes
    /// and its `null`s where the server shows its defaults.
    fn from_record(f: &Function, sha: Option<String>, prior: &FunctionState) -> FunctionState {
        let r = &f.record;
        let spec = &r.spec;
        let runtime = serde_json::to_value(spec.runtime).ok().and_then(|v| v.as_str().map(str::to_string));
        let env = if prior.env.is_null() && spec.env.is_empty() {
            Value::Null
        } else {
            Value::Value(spec.env.iter().map(|(k, v)| (k.clone(), Value::Value(v.clone()))).collect::<BTreeMap<_, _>>())
        };
        FunctionState {
            id: Value::Value(format!("{}/{}", r.namespace, r.name)),
            namespace: Value::Value(r.namespace.clone()),
            name: Value::Value(r.name.clone()),
            runtime: runtime.into(),
            entrypoint: Value::Value(spec.entrypoint.clone()),
            memory_mb: keep_null(&prior.memory_mb, i64::from(spec.memory_mb), 128),
            timeout_sec: keep_null(&prior.timeout_sec, i64::from(spec.timeout_sec), 30),
            concurrency: keep_null(&prior.concurrency, i64::from(spec.concurrency), 1),
            max_instances: spec.max_instances.map(i64::from).into(),
            idle_timeout_sec: spec.idle_timeout_sec.map(i64::from).into(),
            payload_format: keep_null(&prior.payload_format, spec.payload_format.as_str().to_string(), "1.0".into()),
            env,
            enabled: keep_null(&prior.enabled, spec.enabled, true),
            source_dir: prior.source_dir.clone(),
            source_zip: prior.source_zip.clone(),
            source_sha256: sha.into(),
            ready_timeout_sec: prior.ready_timeout_sec,
            version: r.active_version.map(i64::from).into(),
            phase: Value::Value(format!("{:?}", r.status.phase)),
            url: Value::Value(f.url.clone()),
            resource_version: Value::Value(r.resource_version.to_string()),
        }
    }

    /// [`FunctionState::from_record`] for the data source.
    pub(crate) fn from_record_pub(f: &Function, sha: Option<String>, prior: &FunctionState) -> FunctionState {
        Self::from_record(f, sha, prior)
    }

    /// The code attribute in use, for diagnostics.
    fn code_attribute(&self) -> &'static str {
        if self.source_zip.is_value() { "source_zip" } else { "source_dir" }
    }

    fn ready_timeout(&self) -> Duration {
        let secs = self.ready_timeout_sec.as_ref_option().copied().unwrap_or(DEFAULT_READY_TIMEOUT_SEC);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }
}

/// The code archive the configuration names: its bytes. `None` when no code attribute is
/// set. Errors: the folder or file cannot be read.
pub fn code(state: &FunctionState) -> Result<Option<Vec<u8>>> {
    if let Some(dir) = s(&state.source_dir) {
        return archive::zip_dir(Path::new(dir)).map(Some);
    }
    if let Some(file) = s(&state.source_zip) {
        return archive::read_zip(Path::new(file)).map(Some);
    }
    Ok(None)
}

/// Reads the function and the SHA-256 of its active version; `None` when it does not exist.
pub async fn fetch(client: &Client, name: &str) -> Result<Option<(Function, Option<String>)>> {
    let f = match client.get_function(name).await {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let sha = match f.record.active_version {
        Some(v) => match client.get_version(name, v).await {
            Ok(v) => Some(v.record.sha256),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    Ok(Some((f, sha)))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Waits until `version` (when given) is built and active and the function is `Ready` (or,
/// without a version to wait for, still `Pending`: a function without code).
/// Errors: [`Error::BuildFailed`] with the build log's tail, [`Error::NotReady`] when the
/// function settles in `Failed`, [`Error::Timeout`].
pub async fn wait_ready(client: &Client, name: &str, version: Option<u32>, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some(v) = version {
            let ver = client.get_version(name, v).await?;
            if ver.record.phase == VersionPhase::Failed {
                let log = client.build_log(name, v).await.unwrap_or_default();
                return Err(Error::BuildFailed {
                    function: name.to_string(),
                    version: v,
                    message: ver.record.message.clone(),
                    log_tail: tail(&log, 30),
                });
            }
        }
        let f = client.get_function(name).await?;
        let active = version.is_none_or(|v| f.record.active_version == Some(v));
        match f.record.status.phase {
            FunctionPhase::Ready if active => return Ok(()),
            // No code yet, and none to wait for.
            FunctionPhase::Pending if version.is_none() && f.record.active_version.is_none() => return Ok(()),
            FunctionPhase::Failed if active || version.is_none() => {
                return Err(Error::NotReady {
                    function: name.to_string(),
                    phase: "Failed".into(),
                    message: f.record.status.message.clone(),
                });
            }
            _ => {}
        }
        if started.elapsed() >= timeout {
            return Err(Error::Timeout {
                what: format!("function {name} becoming Ready ({})", f.record.status.message),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `name` is gone (404), at most two minutes.
async fn wait_gone(client: &Client, name: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        match client.get_function(name).await {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(_) if started.elapsed() > Duration::from_secs(120) => {
                return Err(Error::Timeout { what: format!("deleting function {name}"), secs: 120 });
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

impl FunctionResource {
    fn report(&self, diags: &mut Diagnostics, err: &Error, action: &str, state: &FunctionState) {
        let (ns, name) = state.ns_name();
        let id = format!("{ns}/{name}");
        let ctx = Context {
            resource: "sless_function",
            action,
            id: &id,
            attributes: &ATTRIBUTES,
            code_attribute: state.code_attribute(),
        };
        diags.add_error(diagnostic(err, &ctx));
    }

    /// Uploads the code when its SHA-256 is not `known_sha`, waits for Ready, reads back.
    async fn deploy(&self, c: &Client, planned: &FunctionState, known_sha: Option<&str>) -> Result<FunctionState> {
        let (_, name) = planned.ns_name();
        let mut version = None;
        if let Some(zip) = code(planned)?
            && known_sha != Some(archive::sha256(&zip).as_str())
        {
            version = Some(c.upload_code(&name, zip).await?.version);
        }
        wait_ready(c, &name, version, planned.ready_timeout()).await?;
        let (f, sha) = fetch(c, &name).await?.ok_or_else(|| {
            Error::Api(sless_client::Error::Unexpected {
                what: name.clone(),
                message: "deleted while deploying".into(),
            })
        })?;
        Ok(FunctionState::from_record(&f, sha, planned))
    }

    /// The plan: the configuration with the namespace and the computed values filled in.
    fn plan(
        &self,
        diags: &mut Diagnostics,
        prior: Option<&FunctionState>,
        mut p: FunctionState,
    ) -> Option<FunctionState> {
        let c = conn(&self.0, diags)?;
        if p.namespace.is_null() {
            p.namespace = Value::Value(c.namespace.clone());
        }
        if p.source_dir.is_value() && p.source_zip.is_value() {
            crate::error::add(
                diags,
                "set source_dir or source_zip, not both",
                "Remove one of them.",
                AttributePath::new("source_zip"),
            );
            return None;
        }
        if p.namespace.is_value() && p.name.is_value() {
            let (ns, name) = p.ns_name();
            p.id = Value::Value(format!("{ns}/{name}"));
        } else {
            p.id = Value::Unknown;
        }
        p.source_sha256 = if p.source_dir.is_unknown() || p.source_zip.is_unknown() {
            Value::Unknown
        } else {
            match code(&p) {
                Ok(Some(zip)) => Value::Value(archive::sha256(&zip)),
                Ok(None) => prior.map(|q| q.source_sha256.clone()).unwrap_or(Value::Null),
                Err(e) => {
                    self.report(diags, &e, "plan", &p);
                    return None;
                }
            }
        };
        match prior {
            Some(q) if !q.spec_differs(&p) && q.source_sha256 == p.source_sha256 => {
                p.version = q.version;
                p.phase = q.phase.clone();
                p.url = q.url.clone();
                p.resource_version = q.resource_version.clone();
            }
            Some(q) => {
                p.version = if q.source_sha256 == p.source_sha256 { q.version } else { Value::Unknown };
                p.phase = Value::Unknown;
                p.url = q.url.clone();
                p.resource_version = Value::Unknown;
            }
            None => {
                p.version = Value::Unknown;
                p.phase = Value::Unknown;
                p.url = Value::Unknown;
                p.resource_version = Value::Unknown;
            }
        }
        Some(p)
    }
}

/// The schema of `sless_function` (`data`: the data source's, every attribute computed but
/// `namespace` and `name`).
pub fn function_schema(data: bool) -> Schema {
    let opt = |t, text| attr(t, if data { C::Computed } else { C::Optional }, text);
    let mut env = opt(T::Map(T::String.into()), "Environment variables (sensitive).");
    env.sensitive = true;
    let mut attrs = vec![
        ("id", attr(T::String, C::Computed, "`namespace/name`.")),
        (
            "namespace",
            attr(
                T::String,
                if data { C::Optional } else { C::OptionalComputed },
                "The namespace; the provider's `namespace` by default. Changing it replaces the function.",
            ),
        ),
        (
            "name",
            attr(T::String, C::Required, "The function's name (DNS-1123 label). Changing it replaces the function."),
        ),
        ("runtime", attr(T::String, if data { C::Computed } else { C::Required }, "`python3.11` or `nodejs20`.")),
        (
            "entrypoint",
            attr(
                T::String,
                if data { C::Computed } else { C::Required },
                "`[folder/]module.function`, e.g. `main.handler`.",
            ),
        ),
        ("memory_mb", opt(T::Number, "Memory of one instance, MiB (64–4096; the server's default 128).")),
        ("timeout_sec", opt(T::Number, "Longest call, seconds (1–900; default 30).")),
        ("concurrency", opt(T::Number, "Calls one instance takes at once (1–100; default 1).")),
        ("max_instances", opt(T::Number, "Most instances at once (1–1000; unset: the server's default).")),
        (
            "idle_timeout_sec",
            opt(T::Number, "Seconds an idle instance is kept (1–86400; unset: the server's default)."),
        ),
        (
            "payload_format",
            opt(
                T::String,
                "The HTTP event format: `1.0` (API Gateway REST, the default) or `2.0` (HTTP API, function URLs).",
            ),
        ),
        ("env", env),
        ("enabled", opt(T::Bool, "Whether the function answers calls (default true).")),
        (
            "source_sha256",
            attr(
                T::String,
                C::Computed,
                "Lowercase hex SHA-256 of the code archive (the deterministic zip of `source_dir`, or `source_zip`'s bytes).",
            ),
        ),
        ("version", attr(T::Number, C::Computed, "The active version.")),
        ("phase", attr(T::String, C::Computed, "`Pending`, `Building`, `Ready` or `Failed`.")),
        (
            "url",
            attr(
                T::String,
                C::Computed,
                "The invoke URL (needs a token; an http trigger publishes `/fn/{ns}/{name}`).",
            ),
        ),
        (
            "resource_version",
            attr(T::String, C::Computed, "The server's version of the spec; sent as `If-Match` on every update."),
        ),
    ];
    if !data {
        attrs.push(("source_dir", attr(T::String, C::Optional, "A folder with the function's code, zipped deterministically (docs/terraform.md lists what is skipped).")));
        attrs.push((
            "source_zip",
            attr(T::String, C::Optional, "A prepared zip file of the code (instead of `source_dir`)."),
        ));
        attrs.push((
            "ready_timeout_sec",
            attr(T::Number, C::Optional, "Seconds create and update wait for the function to be Ready (default 300)."),
        ));
    }
    schema("A sless function: its spec and its code.", attrs)
}

#[async_trait]
impl Resource for FunctionResource {
    type State<'a> = FunctionState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(function_schema(false))
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: FunctionState,
        private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<(FunctionState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = state.ns_name();
        match fetch(&c.client.in_namespace(&ns), &name).await {
            Ok(Some((f, sha))) => Some((FunctionState::from_record(&f, sha, &state), private)),
            Ok(None) => None,
            Err(e) => {
                self.report(diags, &e, "read", &state);
                None
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed: FunctionState,
        _config: FunctionState,
        _meta: ValueEmpty,
    ) -> Option<(FunctionState, ValueEmpty)> {
        Some((self.plan(diags, None, proposed)?, ValueEmpty::default()))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: FunctionState,
        proposed: FunctionState,
        _config: FunctionState,
        private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<(FunctionState, ValueEmpty, Vec<AttributePath>)> {
        let planned = self.plan(diags, Some(&prior), proposed)?;
        let mut replace = Vec::new();
        for (k, a, b) in [("namespace", &prior.namespace, &planned.namespace), ("name", &prior.name, &planned.name)] {
            if a != b {
                replace.push(AttributePath::new(k));
            }
        }
        Some((planned, private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior: FunctionState,
        private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<ValueEmpty> {
        Some(private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: FunctionState,
        _config: FunctionState,
        private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<(FunctionState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        if let Err(e) = client.create_function(&planned.spec_json()).await {
            self.report(diags, &e.into(), "create", &planned);
            return None;
        }
        match self.deploy(&client, &planned, None).await {
            Ok(state) => Some((state, private)),
            Err(e) => {
                self.report(diags, &e, "create", &planned);
                // The function exists: hand back what it is, so Terraform keeps track of it
                // (as tainted) and the next apply replaces it.
                match fetch(&client, &name).await {
                    Ok(Some((f, sha))) => Some((FunctionState::from_record(&f, sha, &planned), private)),
                    _ => None,
                }
            }
        }
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: FunctionState,
        planned: FunctionState,
        _config: FunctionState,
        private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<(FunctionState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = planned.ns_name();
        let client = c.client.in_namespace(&ns);
        if prior.spec_differs(&planned) {
            let tag = prior.resource_version.as_ref_option().map(etag);
            if let Err(e) = client.replace_function(&name, &planned.spec_json(), tag.as_deref()).await {
                self.report(diags, &e.into(), "update", &planned);
                return None;
            }
        }
        match self.deploy(&client, &planned, s(&prior.source_sha256)).await {
            Ok(state) => Some((state, private)),
            Err(e) => {
                self.report(diags, &e, "update", &planned);
                match fetch(&client, &name).await {
                    Ok(Some((f, sha))) => Some((FunctionState::from_record(&f, sha, &planned), private)),
                    _ => None,
                }
            }
        }
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: FunctionState,
        _private: ValueEmpty,
        _meta: ValueEmpty,
    ) -> Option<()> {
        let c = conn(&self.0, diags)?;
        let (ns, name) = prior.ns_name();
        let client = c.client.in_namespace(&ns);
        let result = match client.delete_function(&name).await {
            Ok(_) => wait_gone(&client, &name).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(()) => Some(()),
            Err(e) => {
                self.report(diags, &e, "delete", &prior);
                None
            }
        }
    }

    async fn import<'a>(&self, diags: &mut Diagnostics, id: String) -> Option<(FunctionState, ValueEmpty)> {
        let c = conn(&self.0, diags)?;
        let Some((ns, name)) = split_id(&id, &c.namespace) else {
            crate::error::add_root(
                diags,
                format!("cannot import sless_function {id:?}"),
                "The import id is namespace/name (or name, in the provider's namespace).",
            );
            return None;
        };
        let prior = FunctionState {
            namespace: Value::Value(ns.to_string()),
            name: Value::Value(name.to_string()),
            ..Default::default()
        };
        match fetch(&c.client.in_namespace(ns), name).await {
            Ok(Some((f, sha))) => Some((FunctionState::from_record(&f, sha, &prior), ValueEmpty::default())),
            Ok(None) => {
                crate::error::add_root(
                    diags,
                    format!("cannot import sless_function {id:?}: not found"),
                    "Check the namespace and name.",
                );
                None
            }
            Err(e) => {
                self.report(diags, &e, "import", &prior);
                None
            }
        }
    }
}

//! Data sources: `sless_function` (one function, read-only) and `sless_functions` (the
//! functions of a namespace).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{AttributeConstraint as C, AttributeType as T, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{DataSource, Diagnostics};

use crate::error::{Context, diagnostic};
use crate::function::{ATTRIBUTES, FunctionState, fetch, function_schema};
use crate::provider::{Shared, attr, conn, schema};
use crate::util::{Str, s};

/// The `sless_function` data source.
#[derive(Debug, Clone)]
pub struct FunctionData(pub Shared);

/// The data source's state: a function without the configuration-only attributes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionDataState {
    #[serde(flatten)]
    inner: FunctionStateView,
}

/// [`FunctionState`] without `source_dir`, `source_zip`, `ready_timeout_sec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct FunctionStateView {
    id: Str,
    namespace: Str,
    name: Str,
    runtime: Str,
    entrypoint: Str,
    memory_mb: Value<i64>,
    timeout_sec: Value<i64>,
    concurrency: Value<i64>,
    max_instances: Value<i64>,
    idle_timeout_sec: Value<i64>,
    payload_format: Str,
    env: crate::util::StrMap,
    enabled: Value<bool>,
    source_sha256: Str,
    version: Value<i64>,
    phase: Str,
    url: Str,
    resource_version: Str,
}

impl From<FunctionState> for FunctionStateView {
    fn from(f: FunctionState) -> Self {
        FunctionStateView {
            id: f.id,
            namespace: f.namespace,
            name: f.name,
            runtime: f.runtime,
            entrypoint: f.entrypoint,
            memory_mb: f.memory_mb,
            timeout_sec: f.timeout_sec,
            concurrency: f.concurrency,
            max_instances: f.max_instances,
            idle_timeout_sec: f.idle_timeout_sec,
            payload_format: f.payload_format,
            env: f.env,
            enabled: f.enabled,
            source_sha256: f.source_sha256,
            version: f.version,
            phase: f.phase,
            url: f.url,
            resource_version: f.resource_version,
        }
    }
}

#[async_trait]
impl DataSource for FunctionData {
    type State<'a> = FunctionDataState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(function_schema(true))
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: FunctionDataState,
        _m: ValueEmpty,
    ) -> Option<FunctionDataState> {
        let c = conn(&self.0, diags)?;
        let ns = s(&config.inner.namespace).unwrap_or(&c.namespace).to_string();
        let name = s(&config.inner.name).unwrap_or_default().to_string();
        let id = format!("{ns}/{name}");
        let ctx = Context {
            resource: "sless_function",
            action: "read",
            id: &id,
            attributes: &ATTRIBUTES,
            code_attribute: "name",
        };
        let prior = FunctionState { env: Value::Value(Default::default()), ..Default::default() };
        match fetch(&c.client.in_namespace(&ns), &name).await {
            Ok(Some((f, sha))) => {
                let state = FunctionState::from_record_pub(&f, sha, &prior);
                Some(FunctionDataState { inner: state.into() })
            }
            Ok(None) => {
                crate::error::add_root(
                    diags,
                    format!("sless_function {id:?} not found"),
                    "Check the namespace and name.",
                );
                None
            }
            Err(e) => {
                diags.add_error(diagnostic(&e, &ctx));
                None
            }
        }
    }
}

/// The `sless_functions` data source.
#[derive(Debug, Clone)]
pub struct FunctionsData(pub Shared);

/// One function in `sless_functions`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct FunctionSummary {
    name: Str,
    runtime: Str,
    phase: Str,
    version: Value<i64>,
    url: Str,
}

/// The state of `sless_functions`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionsState {
    namespace: Str,
    names: Value<Vec<Value<String>>>,
    functions: Value<Vec<FunctionSummary>>,
}

#[async_trait]
impl DataSource for FunctionsData {
    type State<'a> = FunctionsState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let item = T::Object(
            [
                ("name", T::String),
                ("runtime", T::String),
                ("phase", T::String),
                ("version", T::Number),
                ("url", T::String),
            ]
            .into_iter()
            .map(|(k, t)| (k.to_string(), t))
            .collect(),
        );
        Some(schema(
            "The functions of a namespace, by name.",
            vec![
                ("namespace", attr(T::String, C::OptionalComputed, "The namespace; the provider's by default.")),
                ("names", attr(T::List(T::String.into()), C::Computed, "Their names, sorted.")),
                (
                    "functions",
                    attr(
                        T::List(item.into()),
                        C::Computed,
                        "Each function's name, runtime, phase, active version and invoke URL.",
                    ),
                ),
            ],
        ))
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: FunctionsState,
        _m: ValueEmpty,
    ) -> Option<FunctionsState> {
        let c = conn(&self.0, diags)?;
        let ns = s(&config.namespace).unwrap_or(&c.namespace).to_string();
        match list_all(&c.client.in_namespace(&ns)).await {
            Ok(fs) => {
                let summaries: Vec<FunctionSummary> = fs
                    .iter()
                    .map(|f| FunctionSummary {
                        name: Value::Value(f.record.name.clone()),
                        runtime: serde_json::to_value(f.record.spec.runtime)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .into(),
                        phase: Value::Value(format!("{:?}", f.record.status.phase)),
                        version: f.record.active_version.map(i64::from).into(),
                        url: Value::Value(f.url.clone()),
                    })
                    .collect();
                Some(FunctionsState {
                    namespace: Value::Value(ns),
                    names: Value::Value(fs.iter().map(|f| Value::Value(f.record.name.clone())).collect()),
                    functions: Value::Value(summaries),
                })
            }
            Err(e) => {
                let ctx = Context {
                    resource: "sless_functions",
                    action: "read",
                    id: &ns,
                    attributes: &["namespace"],
                    code_attribute: "namespace",
                };
                diags.add_error(diagnostic(&e.into(), &ctx));
                None
            }
        }
    }
}

/// Every function of the client's namespace, following `next_cursor`.
async fn list_all(client: &sless_client::Client) -> sless_client::Result<Vec<sless_client::Function>> {
    let mut items = Vec::new();
    let mut page = sless_client::PageRequest::first(1000);
    loop {
        let got = client.list_functions(&page).await?;
        let empty = got.items.is_empty();
        items.extend(got.items);
        match got.next_cursor.filter(|c| !c.is_empty()) {
            Some(c) if !empty => page.cursor = Some(c),
            _ => return Ok(items),
        }
    }
}

//! The provider: its configuration (`endpoint`, `token`, `namespace`, each also from
//! `SLESS_URL`, `SLESS_TOKEN`, `SLESS_NAMESPACE`) and the resources and data sources it
//! serves.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sless_client::Client;
use tf_provider::schema::{Attribute, AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::ValueEmpty;
use tf_provider::{AttributePath, Diagnostics, DynamicDataSource, DynamicResource, Provider};

use crate::util::{Str, s};

/// The connection the provider's configuration sets up, shared by its resources for the
/// life of the process (one Terraform phase).
#[derive(Debug, Clone)]
pub struct Conn {
    /// The client, in the default namespace.
    pub client: Client,
    /// The default namespace (`namespace`, `SLESS_NAMESPACE`, else `default`).
    pub namespace: String,
}

/// Where the resources find the connection once it is configured.
pub type Shared = Arc<OnceLock<Conn>>;

/// The provider's configuration block.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    pub endpoint: Str,
    /// A bearer token: the admin token or a tenant token.
    pub token: Str,
    /// The namespace of resources that do not name one.
    pub namespace: Str,
}

/// The `sless` provider (Terraform plugin protocol 6).
#[derive(Debug, Default, Clone)]
pub struct SlessProvider {
    conn: Shared,
}

/// A string attribute of a schema.
pub(crate) fn attr(kind: AttributeType, constraint: AttributeConstraint, text: &str) -> Attribute {
    Attribute { attr_type: kind, description: Description::markdown(text), constraint, ..Default::default() }
}

/// A schema of `attributes`.
pub(crate) fn schema(text: &str, attributes: Vec<(&str, Attribute)>) -> Schema {
    Schema {
        version: 0,
        block: Block {
            version: 0,
            description: Description::markdown(text),
            attributes: attributes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            ..Default::default()
        },
    }
}

/// The value of an attribute, or of its environment variable when unset.
fn setting(value: &Str, var: &str) -> Option<String> {
    s(value).map(str::to_string).or_else(|| std::env::var(var).ok()).filter(|v| !v.is_empty())
}

#[async_trait]
impl Provider for SlessProvider {
    type Config<'a> = ProviderConfig;
    type MetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::Optional;
        let mut token =
            attr(AttributeType::String, Optional, "A bearer token (admin or tenant `slt_…`); else `SLESS_TOKEN`.");
        token.sensitive = true;
        Some(schema(
            "sless: functions, triggers, jobs and tokens of a sless server.",
            vec![
                (
                    "endpoint",
                    attr(
                        AttributeType::String,
                        Optional,
                        "The server's URL, e.g. `http://127.0.0.1:8080`; else `SLESS_URL`.",
                    ),
                ),
                ("token", token),
                (
                    "namespace",
                    attr(
                        AttributeType::String,
                        Optional,
                        "The default namespace; else `SLESS_NAMESPACE`, else `default`.",
                    ),
                ),
            ],
        ))
    }

    async fn configure<'a>(&self, diags: &mut Diagnostics, _version: String, config: ProviderConfig) -> Option<()> {
        if config.endpoint.is_unknown() || config.token.is_unknown() || config.namespace.is_unknown() {
            return Some(());
        }
        let Some(endpoint) = setting(&config.endpoint, "SLESS_URL") else {
            diags.add_error(crate::error::diag(
                "the sless provider needs an endpoint",
                "Set endpoint in the provider block, or SLESS_URL, to the server's URL (e.g. http://127.0.0.1:8080).",
                AttributePath::new("endpoint"),
            ));
            return None;
        };
        let Some(token) = setting(&config.token, "SLESS_TOKEN") else {
            diags.add_error(crate::error::diag(
                "the sless provider needs a token",
                "Set token in the provider block, or SLESS_TOKEN: the admin token or a tenant token (slt_…).",
                AttributePath::new("token"),
            ));
            return None;
        };
        let namespace = setting(&config.namespace, "SLESS_NAMESPACE").unwrap_or_else(|| "default".to_string());
        let http = match reqwest_client() {
            Ok(h) => h,
            Err(e) => {
                crate::error::add_root(diags, "cannot set up the HTTP client", e);
                return None;
            }
        };
        let client = Client::with_http(http, &endpoint, &token, &namespace);
        // One cheap call that every valid token may make: a wrong endpoint or token fails here,
        // once, with a diagnostic on the attribute to fix.
        if let Err(e) = first_call(&client).await {
            let (summary, attribute) = match e.status() {
                Some(401) => ("the sless server refused the token", "token"),
                Some(_) => ("the sless server refused the provider's first request", "endpoint"),
                None => ("cannot reach the sless server", "endpoint"),
            };
            let detail = match e.status() {
                Some(401) => format!(
                    "{e}. Set token (or SLESS_TOKEN) to a valid, unexpired token of the server at {endpoint}: the \
                     platform's admin token or a tenant token (slt_…)."
                ),
                _ => format!("{e}. Check endpoint (or SLESS_URL): {endpoint} should be a running sless server."),
            };
            diags.add_error(crate::error::diag(summary, detail, AttributePath::new(attribute)));
            return None;
        }
        let _ = self.conn.set(Conn { client, namespace });
        Some(())
    }

    /// Names without the `sless_` prefix: `tf-provider` adds the provider's name.
    fn get_resources(&self, _diags: &mut Diagnostics) -> Option<HashMap<String, Box<dyn DynamicResource>>> {
        let mut m: HashMap<String, Box<dyn DynamicResource>> = HashMap::new();
        m.insert("function".into(), Box::new(crate::function::FunctionResource(self.conn.clone())));
        m.insert("trigger".into(), Box::new(crate::trigger::TriggerResource(self.conn.clone())));
        m.insert("function_job".into(), Box::new(crate::job::JobResource(self.conn.clone())));
        m.insert("token".into(), Box::new(crate::token::TokenResource(self.conn.clone())));
        Some(m)
    }

    fn get_data_sources(&self, _diags: &mut Diagnostics) -> Option<HashMap<String, Box<dyn DynamicDataSource>>> {
        let mut m: HashMap<String, Box<dyn DynamicDataSource>> = HashMap::new();
        m.insert("function".into(), Box::new(crate::data::FunctionData(self.conn.clone())));
        m.insert("functions".into(), Box::new(crate::data::FunctionsData(self.conn.clone())));
        Some(m)
    }
}

/// `GET /v1/namespaces?limit=1`: a call every valid token may make.
async fn first_call(client: &Client) -> sless_client::Result<()> {
    let url = format!("{}/v1/namespaces", client.base());
    client.send(client.http().get(url).query(&[("limit", "1")])).await?.error_for_status().map(drop)
}

/// The HTTP client: a request never hangs an apply (uploads of up to 50 MiB included).
fn reqwest_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())
}

/// The connection, or the diagnostic saying the provider is not configured.
pub(crate) fn conn(shared: &Shared, diags: &mut Diagnostics) -> Option<Conn> {
    match shared.get() {
        Some(c) => Some(c.clone()),
        None => {
            crate::error::add_root(
                diags,
                "the sless provider is not configured",
                "Configure the provider (endpoint and token, or SLESS_URL and SLESS_TOKEN).",
            );
            None
        }
    }
}

//! A typed client of the sless HTTP API (docs/api.md): functions, code upload, versions,
//! build logs, rollback, invoke, invocations, logs, triggers, jobs and the collector.
//!
//! One [`Client`] talks to one server in one namespace with one bearer token. Records come
//! back as the `sless-core` types (a function with its `url` as [`Function`]); an error
//! answer becomes [`Error::Api`] holding the server's problem+json ([`Problem`]). The client
//! prints nothing and reads no configuration: callers (the CLI, tests, the benchmark) find
//! the server and the token themselves. Plain `http://` only (no TLS in this build).
//!
//! ```no_run
//! # async fn demo() -> sless_client::Result<()> {
//! use sless_client::{Client, InvokeRequest};
//! let client = Client::new("http://127.0.0.1:8080", "my-token", "default");
//! let f = client.get_function("hello").await?;
//! let answer = client.invoke(&f.record.name, &InvokeRequest::get().query("name", "Ada")).await?;
//! println!("{} {}", answer.status, answer.text());
//! # Ok(()) }
//! ```

mod error;
mod sse;
mod types;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, IF_MATCH};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sless_core::invocation::InvocationRecord;
use sless_core::job::JobRecord;
use sless_core::tenant::{NamespaceRecord, Role, TokenRecord};
use sless_core::traits::VersionRecord;
use sless_core::trigger::TriggerRecord;

pub use error::{Error, PROBLEM_BASE, Problem, Result};
pub use reqwest::header::HeaderMap;
pub use reqwest::{Method, RequestBuilder, StatusCode};
pub use sse::LogStream;
pub use types::{
    CollectedArchive, CollectedVersion, Function, GcOptions, GcReport, InvocationFilter, InvokeRequest, LogLine,
    NewToken, Page, PageRequest, RawResponse, Rollback, Upload, Version,
};

/// The media type of a JSON merge patch (RFC 7396).
const MERGE_PATCH: &str = "application/merge-patch+json";

/// The largest page the server gives.
const MAX_PAGE: u32 = 1000;

/// A client of one server, for one namespace. Cheap to clone (the connection pool is
/// shared).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    namespace: String,
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`; a trailing `/` is
    /// dropped) sending `token` as `Authorization: Bearer`, working in `namespace`.
    pub fn new(base: &str, token: &str, namespace: &str) -> Self {
        Self::with_http(reqwest::Client::new(), base, token, namespace)
    }

    /// [`Client::new`] over a configured `reqwest::Client` (timeouts, pool size).
    pub fn with_http(http: reqwest::Client, base: &str, token: &str, namespace: &str) -> Self {
        Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            namespace: namespace.to_string(),
        }
    }

    /// The same server and token in another namespace.
    pub fn in_namespace(&self, namespace: &str) -> Client {
        Client { namespace: namespace.to_string(), ..self.clone() }
    }

    /// The server's base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The namespace this client works in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The underlying HTTP client (requests built on it carry no token: see
    /// [`Client::request`] and [`Client::send`]).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `{base}/v1/namespaces/{ns}{rest}`.
    pub fn ns_url(&self, rest: &str) -> String {
        format!("{}/v1/namespaces/{}{rest}", self.base, self.namespace)
    }

    /// `{base}/v1/namespaces/{ns}/functions{rest}`.
    pub fn functions_url(&self, rest: &str) -> String {
        self.ns_url(&format!("/functions{rest}"))
    }

    /// The public URL of a function's http trigger: `{base}/fn/{ns}/{function}`.
    pub fn public_url(&self, function: &str) -> String {
        format!("{}/fn/{}/{function}", self.base, self.namespace)
    }

    /// The full public URL of an http trigger: its `status.url` (a path, or already
    /// absolute) on this server, else [`Client::public_url`] of its function.
    pub fn trigger_url(&self, trigger: &TriggerRecord) -> String {
        match trigger.status.url.as_deref() {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => u.to_string(),
            Some(u) if u.starts_with('/') => format!("{}{u}", self.base),
            _ => self.public_url(&trigger.spec.function),
        }
    }

    // --- Raw requests -------------------------------------------------------------------

    /// A request to `url` (absolute) with the token: finish it and pass it to
    /// [`Client::send`], or use it for anything the typed methods do not cover.
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        self.http.request(method, url).bearer_auth(&self.token)
    }

    /// Adds the token to `request` and sends it; returns the answer whatever its status.
    /// Errors: [`Error::Transport`] only.
    pub async fn send(&self, request: RequestBuilder) -> Result<RawResponse> {
        send_raw(request.bearer_auth(&self.token)).await
    }

    /// Sends (token added), fails with [`Error::Api`] on a 4xx/5xx and decodes the JSON body.
    async fn call<T: DeserializeOwned>(&self, what: &str, request: RequestBuilder) -> Result<T> {
        let raw = self.send(request).await?.error_for_status()?;
        serde_json::from_slice(&raw.body).map_err(|source| Error::Decode { what: what.to_string(), source })
    }

    // --- Functions ----------------------------------------------------------------------

    /// `POST …/functions`: creates a function from a spec (`name`, `runtime`, `entrypoint`
    /// and the optional fields of docs/api.md). Errors: `Api` 400 (`field` names the bad
    /// one), 409 when it exists.
    pub async fn create_function(&self, spec: &Value) -> Result<Function> {
        self.call("POST …/functions", self.http.post(self.functions_url("")).json(spec)).await
    }

    /// `GET …/functions?limit=&cursor=`: one page of functions, by name.
    pub async fn list_functions(&self, page: &PageRequest) -> Result<Page<Function>> {
        self.call("GET …/functions", self.http.get(self.functions_url("")).query(&page.query())).await
    }

    /// Every function of the namespace (all pages of 1,000).
    pub async fn list_all_functions(&self) -> Result<Vec<Function>> {
        self.all(async |p| self.list_functions(p).await).await
    }

    /// `GET …/functions/{name}`. Errors: `Api` 404 when there is none
    /// ([`Error::is_not_found`]).
    pub async fn get_function(&self, name: &str) -> Result<Function> {
        self.call(&format!("GET …/functions/{name}"), self.http.get(self.functions_url(&format!("/{name}")))).await
    }

    /// `PUT …/functions/{name}`: replaces the whole spec (fields left out take their
    /// defaults). With `if_match` (an ETag such as `"7"`, or `*`), only if the function's
    /// resource version is that one. Errors: `Api` 400, 404, 412 (stale).
    pub async fn replace_function(&self, name: &str, spec: &Value, if_match: Option<&str>) -> Result<Function> {
        let req = with_if_match(self.http.put(self.functions_url(&format!("/{name}"))).json(spec), if_match)?;
        self.call(&format!("PUT …/functions/{name}"), req).await
    }

    /// `PATCH …/functions/{name}` with a JSON merge patch (RFC 7396: `null` removes a
    /// field). `if_match` as in [`Client::replace_function`]. Errors: `Api` 400, 404, 412.
    pub async fn patch_function(&self, name: &str, patch: &Value, if_match: Option<&str>) -> Result<Function> {
        let req = self.merge_patch(self.functions_url(&format!("/{name}")), patch, if_match)?;
        self.call(&format!("PATCH …/functions/{name}"), req).await
    }

    /// `DELETE …/functions/{name}`: deletes it with its versions and triggers' targets;
    /// returns it as it was. Errors: `Api` 404.
    pub async fn delete_function(&self, name: &str) -> Result<Function> {
        self.call(&format!("DELETE …/functions/{name}"), self.http.delete(self.functions_url(&format!("/{name}"))))
            .await
    }

    /// `PUT …/functions/{name}/code`: uploads a zip archive; a new archive starts a build,
    /// the same archive again returns its existing version. Errors: `Api` 404, 413 (too
    /// large), 415, 422 (`invalid-archive`, `entry` names the bad entry).
    pub async fn upload_code(&self, name: &str, zip: impl Into<bytes::Bytes>) -> Result<Upload> {
        let req = self
            .http
            .put(self.functions_url(&format!("/{name}/code")))
            .header(CONTENT_TYPE, "application/zip")
            .body(zip.into());
        self.call(&format!("PUT …/functions/{name}/code"), req).await
    }

    /// `GET …/functions/{name}/versions`: every version, oldest first. Errors: `Api` 404.
    pub async fn list_versions(&self, name: &str) -> Result<Vec<VersionRecord>> {
        let url = self.functions_url(&format!("/{name}/versions"));
        let page: Page<VersionRecord> =
            self.call(&format!("GET …/functions/{name}/versions"), self.http.get(url)).await?;
        Ok(page.items)
    }

    /// `GET …/functions/{name}/versions/{version}`. Errors: `Api` 404.
    pub async fn get_version(&self, name: &str, version: u32) -> Result<Version> {
        let url = self.functions_url(&format!("/{name}/versions/{version}"));
        self.call(&format!("GET …/functions/{name}/versions/{version}"), self.http.get(url)).await
    }

    /// `GET …/versions/{version}/build-log`: the build's output (text). Errors: `Api` 404.
    pub async fn build_log(&self, name: &str, version: u32) -> Result<String> {
        let url = self.functions_url(&format!("/{name}/versions/{version}/build-log"));
        Ok(self.send(self.http.get(url)).await?.error_for_status()?.text())
    }

    /// `POST …/functions/{name}/rollback`: makes a built earlier version active again.
    /// Errors: `Api` 400 (`field` `version`: none such, or not Ready), 404.
    pub async fn rollback(&self, name: &str, version: u32) -> Result<Rollback> {
        let req = self.http.post(self.functions_url(&format!("/{name}/rollback"))).json(&json!({ "version": version }));
        self.call(&format!("POST …/functions/{name}/rollback"), req).await
    }

    /// Polls `version` of `name` every `every` until it is Ready and active or Failed, and
    /// returns it (check `record.phase`). Errors: [`Error::Timeout`] after `timeout`; `Api`
    /// (e.g. 404) at once.
    pub async fn wait_ready(&self, name: &str, version: u32, timeout: Duration, every: Duration) -> Result<Version> {
        let started = Instant::now();
        loop {
            let v = self.get_version(name, version).await?;
            if v.is_settled() {
                return Ok(v);
            }
            if started.elapsed() >= timeout {
                return Err(Error::Timeout { what: format!("version {version} of {name}"), after: timeout });
            }
            tokio::time::sleep(every).await;
        }
    }

    // --- Calls --------------------------------------------------------------------------

    /// Calls a function through `…/functions/{name}/invoke{path}`; returns the answer
    /// whatever its status (the function's own, or the platform's problem). A body without a
    /// `content-type` header is sent as `application/json` when it parses as JSON, else
    /// `application/octet-stream`. Errors: [`Error::Transport`], [`Error::InvalidRequest`].
    pub async fn invoke(&self, name: &str, call: &InvokeRequest) -> Result<RawResponse> {
        let url = self.functions_url(&format!("/{name}/invoke{}", call.path));
        let mut req = self.http.request(call.method.clone(), url);
        if !call.query.is_empty() {
            req = req.query(&call.query);
        }
        let mut has_type = false;
        for (k, v) in &call.headers {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|e| Error::InvalidRequest(format!("header name {k:?}: {e}")))?;
            let value = HeaderValue::from_str(v.trim())
                .map_err(|e| Error::InvalidRequest(format!("header {k:?} value: {e}")))?;
            has_type |= name == CONTENT_TYPE;
            req = req.header(name, value);
        }
        if let Some(body) = &call.body {
            if !has_type {
                let json = serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
                req = req.header(CONTENT_TYPE, if json { "application/json" } else { "application/octet-stream" });
            }
            req = req.body(body.clone());
        }
        self.send(req).await
    }

    // --- Invocations and logs -----------------------------------------------------------

    /// `GET …/functions/{name}/invocations`: one page of recorded calls, newest first,
    /// without their `logs` (empty here; [`Client::get_invocation`] has them). Records
    /// outlive their function: no 404. Errors: `Api` 400 (`field` names a bad filter).
    pub async fn list_invocations(
        &self,
        name: &str,
        filter: &InvocationFilter,
        page: &PageRequest,
    ) -> Result<Page<InvocationRecord>> {
        let req = self
            .http
            .get(self.functions_url(&format!("/{name}/invocations")))
            .query(&filter.query())
            .query(&page.query());
        self.call(&format!("GET …/functions/{name}/invocations"), req).await
    }

    /// `GET …/invocations/{id}`: one recorded call with the lines it printed. Errors: `Api`
    /// 404.
    pub async fn get_invocation(&self, id: &str) -> Result<InvocationRecord> {
        self.call(&format!("GET …/invocations/{id}"), self.http.get(self.ns_url(&format!("/invocations/{id}")))).await
    }

    /// `GET …/functions/{name}/logs?tail=`: the last `tail` (0–1000) output lines, oldest
    /// first. Errors: `Api` 400, 404.
    pub async fn logs(&self, name: &str, tail: u32) -> Result<Vec<LogLine>> {
        #[derive(serde::Deserialize)]
        struct Lines {
            items: Vec<LogLine>,
        }
        let req = self.http.get(self.functions_url(&format!("/{name}/logs"))).query(&[("tail", tail.to_string())]);
        let lines: Lines = self.call(&format!("GET …/functions/{name}/logs"), req).await?;
        Ok(lines.items)
    }

    /// `GET …/functions/{name}/logs?tail=&follow=true`: the last `tail` lines, then each
    /// new one as it is printed, until the stream is dropped. Errors: `Api` 400, 404.
    pub async fn follow_logs(&self, name: &str, tail: u32) -> Result<LogStream> {
        let url = self.functions_url(&format!("/{name}/logs"));
        let req = self
            .http
            .get(&url)
            .query(&[("tail", tail.to_string()), ("follow", "true".to_string())])
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .bearer_auth(&self.token);
        let response = req.send().await.map_err(|source| Error::Transport { url: url.clone(), source })?;
        let status = response.status();
        if status.is_client_error() || status.is_server_error() {
            let body = response.bytes().await.unwrap_or_default();
            return Err(Error::Api(Box::new(Problem::from_response(status, &body))));
        }
        Ok(LogStream::new(response, url))
    }

    // --- Triggers -----------------------------------------------------------------------

    /// `POST …/triggers`: creates a trigger from a spec (`name`, `function`, `type` and the
    /// fields of its type). Errors: `Api` 400, 409 (exists, or the function already has an
    /// http trigger).
    pub async fn create_trigger(&self, spec: &Value) -> Result<TriggerRecord> {
        self.call("POST …/triggers", self.http.post(self.ns_url("/triggers")).json(spec)).await
    }

    /// `GET …/triggers?limit=&cursor=`: one page of triggers, by name.
    pub async fn list_triggers(&self, page: &PageRequest) -> Result<Page<TriggerRecord>> {
        self.call("GET …/triggers", self.http.get(self.ns_url("/triggers")).query(&page.query())).await
    }

    /// Every trigger of the namespace.
    pub async fn list_all_triggers(&self) -> Result<Vec<TriggerRecord>> {
        self.all(async |p| self.list_triggers(p).await).await
    }

    /// `GET …/triggers/{name}`. Errors: `Api` 404.
    pub async fn get_trigger(&self, name: &str) -> Result<TriggerRecord> {
        self.call(&format!("GET …/triggers/{name}"), self.http.get(self.ns_url(&format!("/triggers/{name}")))).await
    }

    /// `PUT …/triggers/{name}`: replaces the whole spec; `if_match` as in
    /// [`Client::replace_function`]. Errors: `Api` 400, 404, 409, 412.
    pub async fn replace_trigger(&self, name: &str, spec: &Value, if_match: Option<&str>) -> Result<TriggerRecord> {
        let req = with_if_match(self.http.put(self.ns_url(&format!("/triggers/{name}"))).json(spec), if_match)?;
        self.call(&format!("PUT …/triggers/{name}"), req).await
    }

    /// `PATCH …/triggers/{name}` with a JSON merge patch. Errors: `Api` 400, 404, 409, 412.
    pub async fn patch_trigger(&self, name: &str, patch: &Value, if_match: Option<&str>) -> Result<TriggerRecord> {
        let req = self.merge_patch(self.ns_url(&format!("/triggers/{name}")), patch, if_match)?;
        self.call(&format!("PATCH …/triggers/{name}"), req).await
    }

    /// `POST …/triggers/{name}/fire`: calls a cron trigger's function once now, with the event
    /// its schedule sends; the answer is the function's (status, headers, body), as
    /// [`Client::invoke`]'s. A 409 (an http or disabled trigger) or 503 is in the answer's
    /// status too.
    pub async fn fire_trigger(&self, name: &str) -> Result<RawResponse> {
        self.send(self.http.post(self.ns_url(&format!("/triggers/{name}/fire")))).await
    }

    /// `DELETE …/triggers/{name}`; returns it as it was. Errors: `Api` 404.
    pub async fn delete_trigger(&self, name: &str) -> Result<TriggerRecord> {
        self.call(&format!("DELETE …/triggers/{name}"), self.http.delete(self.ns_url(&format!("/triggers/{name}"))))
            .await
    }

    // --- Jobs ---------------------------------------------------------------------------

    /// `POST …/jobs`: creates a job (`name`, `function`, `run_id`, `payload`, `enabled`).
    /// Errors: `Api` 400, 409.
    pub async fn create_job(&self, spec: &Value) -> Result<JobRecord> {
        self.call("POST …/jobs", self.http.post(self.ns_url("/jobs")).json(spec)).await
    }

    /// `GET …/jobs?limit=&cursor=`: one page of jobs, by name.
    pub async fn list_jobs(&self, page: &PageRequest) -> Result<Page<JobRecord>> {
        self.call("GET …/jobs", self.http.get(self.ns_url("/jobs")).query(&page.query())).await
    }

    /// Every job of the namespace.
    pub async fn list_all_jobs(&self) -> Result<Vec<JobRecord>> {
        self.all(async |p| self.list_jobs(p).await).await
    }

    /// `GET …/jobs/{name}`. Errors: `Api` 404.
    pub async fn get_job(&self, name: &str) -> Result<JobRecord> {
        self.call(&format!("GET …/jobs/{name}"), self.http.get(self.ns_url(&format!("/jobs/{name}")))).await
    }

    /// `PUT …/jobs/{name}`: replaces the whole spec; `if_match` as in
    /// [`Client::replace_function`]. Errors: `Api` 400, 404, 412.
    pub async fn replace_job(&self, name: &str, spec: &Value, if_match: Option<&str>) -> Result<JobRecord> {
        let req = with_if_match(self.http.put(self.ns_url(&format!("/jobs/{name}"))).json(spec), if_match)?;
        self.call(&format!("PUT …/jobs/{name}"), req).await
    }

    /// `PATCH …/jobs/{name}` with a JSON merge patch (e.g. `{"run_id": 2}` runs it again).
    /// Errors: `Api` 400, 404, 412.
    pub async fn patch_job(&self, name: &str, patch: &Value, if_match: Option<&str>) -> Result<JobRecord> {
        let req = self.merge_patch(self.ns_url(&format!("/jobs/{name}")), patch, if_match)?;
        self.call(&format!("PATCH …/jobs/{name}"), req).await
    }

    /// `DELETE …/jobs/{name}`; returns it as it was. Errors: `Api` 404.
    pub async fn delete_job(&self, name: &str) -> Result<JobRecord> {
        self.call(&format!("DELETE …/jobs/{name}"), self.http.delete(self.ns_url(&format!("/jobs/{name}")))).await
    }

    // --- Collector ----------------------------------------------------------------------

    /// `POST /v1/gc`: collects unused versions and unreferenced archives now (of every
    /// namespace; an admin call). Errors: `Api` 400, 401.
    pub async fn gc(&self, options: &GcOptions) -> Result<GcReport> {
        let mut query = Vec::new();
        if let Some(n) = options.keep_versions {
            query.push(("keep_versions", n.to_string()));
        }
        if let Some(sec) = options.grace_sec {
            query.push(("grace_sec", sec.to_string()));
        }
        if options.dry_run {
            query.push(("dry_run", "true".to_string()));
        }
        self.call("POST /v1/gc", self.http.post(format!("{}/v1/gc", self.base)).query(&query)).await
    }

    // --- Tenants ------------------------------------------------------------------------

    /// `POST /v1/namespaces` (platform admin): creates a namespace with `quotas` (an object
    /// of docs/api.md's quota fields, or `null`). Errors: `Api` 400, 403, 409 when it exists.
    pub async fn create_namespace(&self, name: &str, quotas: &Value) -> Result<NamespaceRecord> {
        let body = json!({"name": name, "quotas": quotas});
        self.call("POST /v1/namespaces", self.http.post(format!("{}/v1/namespaces", self.base)).json(&body)).await
    }

    /// `GET /v1/namespaces`: every namespace (a token: those it reaches).
    pub async fn list_namespaces(&self) -> Result<Vec<NamespaceRecord>> {
        self.all(async |p| {
            self.call("GET /v1/namespaces", self.http.get(format!("{}/v1/namespaces", self.base)).query(&p.query()))
                .await
        })
        .await
    }

    /// `GET /v1/namespaces/{ns}`: the namespace with its quotas and `usage` (as JSON).
    /// Errors: `Api` 403, 404.
    pub async fn get_namespace(&self, name: &str) -> Result<Value> {
        self.call("GET /v1/namespaces/{ns}", self.http.get(format!("{}/v1/namespaces/{name}", self.base))).await
    }

    /// `PATCH /v1/namespaces/{ns}` (platform admin) with a merge patch such as
    /// `{"quotas": {"max_functions": 10}}` (`null` removes a limit). Errors: `Api` 400, 403,
    /// 404, 412.
    pub async fn patch_namespace(&self, name: &str, patch: &Value) -> Result<NamespaceRecord> {
        let req = self.merge_patch(format!("{}/v1/namespaces/{name}", self.base), patch, None)?;
        self.call("PATCH /v1/namespaces/{ns}", req).await
    }

    /// `DELETE /v1/namespaces/{ns}` (platform admin); `force` deletes its functions,
    /// triggers and jobs too. Errors: `Api` 403, 404, 409 (`default`, or not empty).
    pub async fn delete_namespace(&self, name: &str, force: bool) -> Result<()> {
        let req = self.http.delete(format!("{}/v1/namespaces/{name}", self.base)).query(&[("force", force)]);
        self.send(req).await?.error_for_status().map(drop)
    }

    /// `POST /v1/tokens`: a token with `role` over `namespaces`, described and expiring as
    /// given; the answer holds its secret (`token`), shown once. Errors: `Api` 400, 403, 404
    /// (a namespace that does not exist).
    pub async fn create_token(
        &self,
        namespaces: &[String],
        role: Role,
        description: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<NewToken> {
        let body =
            json!({"namespaces": namespaces, "role": role, "description": description, "expires_at": expires_at});
        self.call("POST /v1/tokens", self.http.post(format!("{}/v1/tokens", self.base)).json(&body)).await
    }

    /// `GET /v1/tokens`: the tokens the caller may manage (never their secrets).
    pub async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let page: Page<TokenRecord> =
            self.call("GET /v1/tokens", self.http.get(format!("{}/v1/tokens", self.base))).await?;
        Ok(page.items)
    }

    /// `DELETE /v1/tokens/{id}`: revokes a token. Errors: `Api` 404.
    pub async fn revoke_token(&self, id: &str) -> Result<()> {
        self.send(self.http.delete(format!("{}/v1/tokens/{id}", self.base))).await?.error_for_status().map(drop)
    }

    // --- Helpers ------------------------------------------------------------------------

    fn merge_patch(&self, url: String, patch: &Value, if_match: Option<&str>) -> Result<RequestBuilder> {
        with_if_match(self.http.patch(url).header(CONTENT_TYPE, MERGE_PATCH).body(patch.to_string()), if_match)
    }

    /// Every item of a list, following `next_cursor` through pages of [`MAX_PAGE`].
    async fn all<T>(&self, fetch: impl AsyncFn(&PageRequest) -> Result<Page<T>>) -> Result<Vec<T>> {
        let mut items = Vec::new();
        let mut page = PageRequest::first(MAX_PAGE);
        loop {
            let got = fetch(&page).await?;
            let empty = got.items.is_empty();
            items.extend(got.items);
            match got.next_cursor.filter(|c| !c.is_empty()) {
                Some(c) if !empty => page.cursor = Some(c),
                _ => return Ok(items),
            }
        }
    }
}

fn with_if_match(req: RequestBuilder, if_match: Option<&str>) -> Result<RequestBuilder> {
    let Some(tag) = if_match else { return Ok(req) };
    let value = HeaderValue::from_str(tag).map_err(|e| Error::InvalidRequest(format!("If-Match {tag:?}: {e}")))?;
    Ok(req.header(IF_MATCH, value))
}

/// Sends a request as it is; returns the answer whatever its status.
async fn send_raw(request: RequestBuilder) -> Result<RawResponse> {
    let (client, request) = request.build_split();
    let request = request.map_err(|e| Error::InvalidRequest(e.to_string()))?;
    let url = request.url().to_string();
    let response = client.execute(request).await.map_err(|source| Error::Transport { url: url.clone(), source })?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.map_err(|source| Error::Transport { url, source })?;
    Ok(RawResponse { status, headers, body })
}

/// The `If-Match` value that names a record's resource version (its `ETag`): `"7"`.
pub fn etag(resource_version: impl std::fmt::Display) -> String {
    format!("\"{resource_version}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(url: Value) -> TriggerRecord {
        serde_json::from_value(json!({
            "namespace": "ns", "name": "t", "function": "f", "type": "http", "schedule": null,
            "timezone": "UTC", "payload": null, "auth": "none", "enabled": true, "prewarm_sec": 0,
            "resource_version": 1, "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z",
            "status": {"phase": "Active", "message": "", "conditions": [], "last_fired": null, "next_fire": null, "url": url},
        }))
        .expect("trigger")
    }

    #[test]
    fn public_urls_come_from_the_status_or_the_function() {
        let c = Client::new("http://h:1/", "t", "ns");
        assert_eq!(c.trigger_url(&trigger(json!("/fn/ns/f"))), "http://h:1/fn/ns/f");
        assert_eq!(c.trigger_url(&trigger(json!("https://x/fn/ns/f"))), "https://x/fn/ns/f");
        assert_eq!(c.trigger_url(&trigger(Value::Null)), "http://h:1/fn/ns/f");
        assert_eq!(c.in_namespace("other").functions_url("/f"), "http://h:1/v1/namespaces/other/functions/f");
    }

    #[test]
    fn etags_quote_the_resource_version() {
        assert_eq!(etag(7), "\"7\"");
    }
}

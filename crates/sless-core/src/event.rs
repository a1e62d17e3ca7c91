//! The HTTP event given to a handler and the HTTP response made from its result (docs/writing-functions.md).
//!
//! Event: the API Gateway REST proxy integration format 1.0 ("payload format version 1.0"),
//! every field API Gateway documents, with placeholders where sless has no equivalent (the
//! account id, the API id and the stage; docs/writing-functions.md, "The HTTP event" lists
//! them). Header names are in the case the client sent them, in both `headers` and
//! `multiValueHeaders`; a name sent in two spellings is one header, under its first
//! spelling. `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Forwarded-Port` are added as API
//! Gateway adds them ([`add_forwarded`]). An empty query string gives `null` parameter maps,
//! an empty body gives `body: null`, as API Gateway does. A body that is valid UTF-8 is
//! passed as text; any other body is base64 with `isBase64Encoded: true`.
//!
//! Response: a JSON object with `statusCode` is an HTTP response (`headers`,
//! `multiValueHeaders`, `body`, `isBase64Encoded`, `cookies`); any other result is a 200: a
//! string as `text/plain`, everything else as its JSON.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The account id of every event (`requestContext.accountId`): sless has no accounts, so
/// twelve zeros, a well-formed AWS account id that is nobody's.
pub const ACCOUNT_ID: &str = "000000000000";

/// The stage of every event (`requestContext.stage`): sless has no stages; `$default` is the
/// name API Gateway gives the stage that serves the root of an API.
pub const STAGE: &str = "$default";

/// Which HTTP event a function gets and how its result becomes the response
/// (docs/writing-functions.md, "The HTTP event"): API Gateway's payload format versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PayloadFormat {
    /// `"1.0"`: the REST API proxy event (header names as sent, `multiValueHeaders`); a
    /// result without `statusCode` is a 200, a string as `text/plain`.
    #[default]
    #[serde(rename = "1.0")]
    V1,
    /// `"2.0"`: the HTTP API / Lambda function URL event (lowercase headers, `cookies`,
    /// `rawPath`, `rawQueryString`, `requestContext.http`); a result without `statusCode`
    /// is a 200 `application/json` body.
    #[serde(rename = "2.0")]
    V2,
}

impl PayloadFormat {
    /// `"1.0"` or `"2.0"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadFormat::V1 => "1.0",
            PayloadFormat::V2 => "2.0",
        }
    }

    /// Parses `"1.0"` / `"2.0"`; errors name `field`.
    pub fn parse(field: &str, value: &Value) -> crate::Result<Self> {
        match value.as_str() {
            Some("1.0") => Ok(PayloadFormat::V1),
            Some("2.0") => Ok(PayloadFormat::V2),
            _ => Err(crate::Error::field(field, format!("must be \"1.0\" or \"2.0\", got {value}"))),
        }
    }
}

/// How a call's returned value becomes its HTTP response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The rules of an HTTP event's payload format ([`http_response_for`]).
    Http(PayloadFormat),
    /// Raw invocation (Lambda's `Invoke`, Yandex's `?integration=raw`): the returned value is
    /// the response body, as JSON, with status 200 (`statusCode` means nothing here).
    Raw,
}

/// Builds the event of `format` for `req` ([`http_event`] or [`http_event_v2`]).
pub fn http_event_for(format: PayloadFormat, req: &HttpRequest<'_>) -> Box<RawValue> {
    match format {
        PayloadFormat::V1 => http_event(req),
        PayloadFormat::V2 => http_event_v2(req),
    }
}

/// Builds the HTTP API payload 2.0 event for `req` (what Lambda function URLs and HTTP APIs
/// send), as JSON text. Header names are lowercase; a repeated header is one, its values
/// joined with `,` (`Cookie` headers excepted: their cookies are `cookies`, split at `;`, and
/// they are not in `headers`). Repeated query parameters are joined with `,` too.
/// `rawQueryString` is the query as sent (`""` without one); `rawPath` and
/// `requestContext.http.path` are `path`. Without a query, cookies or a body, the
/// `queryStringParameters`, `cookies` and `body` fields are left out, as function URLs do;
/// `routeKey` and `stage` are `$default`. The placeholders are those of payload 1.0.
pub fn http_event_v2(req: &HttpRequest<'_>) -> Box<RawValue> {
    let mut headers: Vec<(String, String)> = Vec::with_capacity(req.headers.len());
    let mut cookies: Vec<&str> = Vec::new();
    for (name, value) in req.headers {
        if name.eq_ignore_ascii_case("cookie") {
            cookies.extend(value.split(';').map(str::trim).filter(|c| !c.is_empty()));
            continue;
        }
        let name = name.to_ascii_lowercase();
        match headers.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.push(',');
                joined.push_str(value);
            }
            None => headers.push((name, value.clone())),
        }
    }
    let raw_query = req.query.unwrap_or("");
    let mut query: Vec<(Cow<'_, str>, String)> = Vec::new();
    for (name, value) in form_urlencoded::parse(raw_query.as_bytes()) {
        match query.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            None => query.push((name, value.into_owned())),
        }
    }
    let (body, is_base64) = if req.body.is_empty() {
        (None, false)
    } else {
        match std::str::from_utf8(req.body) {
            Ok(text) => (Some(Cow::Borrowed(text)), false),
            Err(_) => (Some(Cow::Owned(BASE64.encode(req.body))), true),
        }
    };
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let domain_name = header("host").filter(|h| !h.is_empty()).unwrap_or("localhost").to_string();
    let domain_prefix = domain_name.split(['.', ':']).next().unwrap_or(&domain_name).to_string();
    let user_agent = header("user-agent").unwrap_or("").to_string();
    let event = ProxyEventV2 {
        version: "2.0",
        route_key: "$default",
        raw_path: req.path,
        raw_query_string: raw_query,
        cookies: (!cookies.is_empty()).then_some(cookies),
        headers: Pairs::last(&headers),
        query_string_parameters: (!query.is_empty()).then(|| Pairs::last(&query)),
        request_context: RequestContextV2 {
            account_id: ACCOUNT_ID,
            api_id: req.api_id,
            domain_name: &domain_name,
            domain_prefix: &domain_prefix,
            http: HttpV2 {
                method: req.method,
                path: req.path,
                protocol: "HTTP/1.1",
                source_ip: req.source_ip,
                user_agent: &user_agent,
            },
            request_id: req.request_id,
            route_key: "$default",
            stage: STAGE,
            time: &request_time(req.request_time_epoch_ms),
            time_epoch: req.request_time_epoch_ms,
        },
        body,
        is_base64_encoded: is_base64,
    };
    raw(&event)
}

/// The parts of an HTTP request that become an event.
#[derive(Debug, Clone)]
pub struct HttpRequest<'a> {
    /// The method, e.g. `GET`.
    pub method: &'a str,
    /// The path after the function's URL, starting with `/` (`/` when nothing follows).
    pub path: &'a str,
    /// The raw query string without `?`, if any.
    pub query: Option<&'a str>,
    /// Header (name, value) pairs in arrival order, names as the client spelled them (or
    /// lowercase where the spelling is not known); repeated names allowed.
    pub headers: &'a [(String, String)],
    /// The body bytes.
    pub body: &'a [u8],
    /// The client's address.
    pub source_ip: &'a str,
    /// The invocation's request id.
    pub request_id: &'a str,
    /// When the request arrived, Unix epoch milliseconds.
    pub request_time_epoch_ms: i64,
    /// `requestContext.apiId`: the function's namespace (sless's API is one per namespace).
    pub api_id: &'a str,
}

/// Adds the headers API Gateway adds to what a client sent (its "X-Forwarded" headers):
/// `X-Forwarded-For` gets the client's address appended (`"<sent>, <ip>"`, or just the
/// address), and `X-Forwarded-Proto` (`scheme`, e.g. `http`) and `X-Forwarded-Port` (`port`,
/// the port the request came in on) are added unless the request has them already (from a
/// proxy in front of sless, which knows the client's scheme and port better). Names are
/// compared case-insensitively; a header the client sent keeps its spelling.
pub fn add_forwarded(headers: &mut Vec<(String, String)>, source_ip: &str, scheme: &str, port: u16) {
    match headers.iter_mut().rev().find(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for")) {
        Some((_, value)) if !value.trim().is_empty() => {
            value.push_str(", ");
            value.push_str(source_ip);
        }
        Some((_, value)) => *value = source_ip.to_string(),
        None => headers.push(("X-Forwarded-For".into(), source_ip.to_string())),
    }
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-proto")) {
        headers.push(("X-Forwarded-Proto".into(), scheme.to_string()));
    }
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-port")) {
        headers.push(("X-Forwarded-Port".into(), port.to_string()));
    }
}

/// `epoch_ms` in API Gateway's `requestTime` format, `09/Apr/2015:12:34:56 +0000` (UTC,
/// English month abbreviations); the epoch itself if it is out of chrono's range.
pub fn request_time(epoch_ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(epoch_ms) {
        Some(t) => t.format("%d/%b/%Y:%H:%M:%S +0000").to_string(),
        None => epoch_ms.to_string(),
    }
}

/// Builds the API Gateway proxy 1.0 event for `req`, as JSON text: serialised in one pass
/// from borrowed parts (this runs on every HTTP call, so no `Value` tree is built).
///
/// `headers` and `queryStringParameters` hold each name once, at its first position, with
/// its last value; `multiValueHeaders` and `multiValueQueryStringParameters` hold every value
/// in arrival order (as API Gateway does). Header names keep the client's spelling; the
/// spellings of one name (compared case-insensitively) are one header under the first.
/// Empty headers, no query string and an empty body are `null`; a body that is not UTF-8 is
/// base64 with `isBase64Encoded: true`. The root path (`/`) is API Gateway's root resource
/// `/` (no `pathParameters`); any other path is the resource `/{proxy+}`.
pub fn http_event(req: &HttpRequest<'_>) -> Box<RawValue> {
    let headers: Vec<(&str, &str)> = first_spelling(req.headers);
    let query: Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> =
        req.query.filter(|q| !q.is_empty()).map(|q| form_urlencoded::parse(q.as_bytes()).collect());
    let (body, is_base64) = if req.body.is_empty() {
        (None, false)
    } else {
        match std::str::from_utf8(req.body) {
            Ok(text) => (Some(Cow::Borrowed(text)), false),
            Err(_) => (Some(Cow::Owned(BASE64.encode(req.body))), true),
        }
    };
    let proxy = req.path.trim_start_matches('/');
    let resource = if proxy.is_empty() { "/" } else { "/{proxy+}" };
    let last = |name: &str| headers.iter().rev().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
    let user_agent = last("user-agent");
    let domain_name = last("host").filter(|h| !h.is_empty()).unwrap_or("localhost");
    let domain_prefix = domain_name.split(['.', ':']).next().unwrap_or(domain_name);
    let request_time = request_time(req.request_time_epoch_ms);
    let headers = (!headers.is_empty()).then_some(headers);
    let event = ProxyEvent {
        resource,
        path: req.path,
        http_method: req.method,
        headers: headers.as_deref().map(Pairs::last),
        multi_value_headers: headers.as_deref().map(Pairs::all),
        query_string_parameters: query.as_deref().map(Pairs::last),
        multi_value_query_string_parameters: query.as_deref().map(Pairs::all),
        path_parameters: (!proxy.is_empty()).then_some(PathParameters { proxy }),
        stage_variables: None,
        request_context: RequestContext {
            account_id: ACCOUNT_ID,
            api_id: req.api_id,
            resource_id: if proxy.is_empty() { "root" } else { "proxy" },
            resource_path: resource,
            http_method: req.method,
            path: req.path,
            request_id: req.request_id,
            extended_request_id: req.request_id,
            request_time: &request_time,
            request_time_epoch: req.request_time_epoch_ms,
            stage: STAGE,
            protocol: "HTTP/1.1",
            domain_name,
            domain_prefix,
            identity: Identity {
                access_key: None,
                account_id: None,
                api_key: None,
                api_key_id: None,
                caller: None,
                client_cert: None,
                cognito_authentication_provider: None,
                cognito_authentication_type: None,
                cognito_identity_id: None,
                cognito_identity_pool_id: None,
                principal_org_id: None,
                source_ip: req.source_ip,
                user: None,
                user_agent,
                user_arn: None,
            },
            authorizer: None,
        },
        body,
        is_base64_encoded: is_base64,
    };
    raw(&event)
}

/// `headers` with each name in the spelling of its first occurrence (names compared
/// case-insensitively), so that the spellings of one name are one header. Allocation-free
/// for the usual few dozen headers.
fn first_spelling(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let first = out.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map_or(name.as_str(), |(n, _)| *n);
        out.push((first, value.as_str()));
    }
    out
}

/// `value` as JSON text. Serialising these types cannot fail (string keys only); `null`
/// stands in if it ever did.
pub fn raw(value: &impl Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// API Gateway proxy payload 1.0, field for field (camelCase names, as AWS sends them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProxyEvent<'a> {
    resource: &'static str,
    path: &'a str,
    http_method: &'a str,
    headers: Option<Pairs<'a, &'a str, &'a str>>,
    multi_value_headers: Option<Pairs<'a, &'a str, &'a str>>,
    query_string_parameters: Option<Pairs<'a, Cow<'a, str>, Cow<'a, str>>>,
    multi_value_query_string_parameters: Option<Pairs<'a, Cow<'a, str>, Cow<'a, str>>>,
    path_parameters: Option<PathParameters<'a>>,
    stage_variables: Option<()>,
    request_context: RequestContext<'a>,
    body: Option<Cow<'a, str>>,
    is_base64_encoded: bool,
}

/// HTTP API payload 2.0, field for field (camelCase names, as AWS sends them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProxyEventV2<'a> {
    version: &'static str,
    route_key: &'static str,
    raw_path: &'a str,
    raw_query_string: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cookies: Option<Vec<&'a str>>,
    headers: Pairs<'a, String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    query_string_parameters: Option<Pairs<'a, Cow<'a, str>, String>>,
    request_context: RequestContextV2<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<Cow<'a, str>>,
    is_base64_encoded: bool,
}

/// `requestContext` of payload 2.0.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestContextV2<'a> {
    account_id: &'static str,
    api_id: &'a str,
    domain_name: &'a str,
    domain_prefix: &'a str,
    http: HttpV2<'a>,
    request_id: &'a str,
    route_key: &'static str,
    stage: &'static str,
    time: &'a str,
    time_epoch: i64,
}

/// `requestContext.http` of payload 2.0.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HttpV2<'a> {
    method: &'a str,
    path: &'a str,
    protocol: &'static str,
    source_ip: &'a str,
    user_agent: &'a str,
}

#[derive(Serialize)]
struct PathParameters<'a> {
    proxy: &'a str,
}

/// `requestContext` of payload 1.0 (a REST API's proxy integration).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestContext<'a> {
    account_id: &'static str,
    api_id: &'a str,
    resource_id: &'static str,
    resource_path: &'static str,
    http_method: &'a str,
    path: &'a str,
    request_id: &'a str,
    extended_request_id: &'a str,
    request_time: &'a str,
    request_time_epoch: i64,
    stage: &'static str,
    protocol: &'static str,
    domain_name: &'a str,
    domain_prefix: &'a str,
    identity: Identity<'a>,
    authorizer: Option<()>,
}

/// `requestContext.identity` of payload 1.0: who called. sless knows the address and the
/// user agent; the IAM and Cognito fields are `null`, as for an unauthenticated call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Identity<'a> {
    access_key: Option<()>,
    account_id: Option<()>,
    api_key: Option<()>,
    api_key_id: Option<()>,
    caller: Option<()>,
    client_cert: Option<()>,
    cognito_authentication_provider: Option<()>,
    cognito_authentication_type: Option<()>,
    cognito_identity_id: Option<()>,
    cognito_identity_pool_id: Option<()>,
    principal_org_id: Option<()>,
    source_ip: &'a str,
    user: Option<()>,
    user_agent: Option<&'a str>,
    user_arn: Option<()>,
}

/// (name, value) pairs written as a JSON object with each name once, at its first position:
/// with its last value (`all == false`) or with the array of all its values.
struct Pairs<'a, K, V> {
    pairs: &'a [(K, V)],
    all: bool,
}

impl<'a, K, V> Pairs<'a, K, V> {
    fn last(pairs: &'a [(K, V)]) -> Self {
        Pairs { pairs, all: false }
    }

    fn all(pairs: &'a [(K, V)]) -> Self {
        Pairs { pairs, all: true }
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Serialize for Pairs<'_, K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // name → the indexes of its values, in order; names in order of first appearance.
        let mut index: HashMap<&str, Vec<usize>> = HashMap::with_capacity(self.pairs.len());
        let mut order = Vec::with_capacity(self.pairs.len());
        for (i, (name, _)) in self.pairs.iter().enumerate() {
            index
                .entry(name.as_ref())
                .or_insert_with(|| {
                    order.push(name.as_ref());
                    Vec::new()
                })
                .push(i);
        }
        let value = |i: &usize| self.pairs[*i].1.as_ref();
        let mut map = serializer.serialize_map(Some(order.len()))?;
        for name in order {
            let at = &index[name];
            if self.all {
                map.serialize_entry(name, &at.iter().map(value).collect::<Vec<_>>())?;
            } else if let Some(last) = at.last() {
                map.serialize_entry(name, value(last))?;
            }
        }
        map.end()
    }
}

/// An HTTP response made from a handler's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code, 100–599.
    pub status: u16,
    /// (name, value) pairs; a name may repeat (`Set-Cookie` is never comma-joined).
    pub headers: Vec<(String, String)>,
    /// Body bytes (base64-decoded when the result said `isBase64Encoded`).
    pub body: Vec<u8>,
}

/// Turns a handler's JSON result into an HTTP response under `format`'s rules: payload 1.0
/// as [`http_response`]; payload 2.0 the same for an object with `statusCode`, and any other
/// result a 200 `application/json` whose body is the result's JSON (a string as it is), as
/// HTTP APIs and function URLs infer it.
pub fn http_response_for(format: PayloadFormat, result: &Value) -> Result<HttpResponse, String> {
    match (format, result) {
        (PayloadFormat::V2, Value::Object(o)) if !o.contains_key("statusCode") => Ok(json_200(result)),
        (PayloadFormat::V2, Value::String(s)) => Ok(HttpResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: s.clone().into_bytes(),
        }),
        (PayloadFormat::V2, v) if !v.is_object() => Ok(json_200(v)),
        _ => http_response(result),
    }
}

/// The response for a returned value under `reply`'s rules.
fn reply_to(reply: Reply, value: &Value) -> Result<HttpResponse, String> {
    match reply {
        Reply::Http(format) => http_response_for(format, value),
        Reply::Raw => Ok(json_200(value)),
    }
}

fn json_200(result: &Value) -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: result.to_string().into_bytes(),
    }
}

/// Turns a handler's JSON result into an HTTP response (see the module doc). Errors describe
/// a malformed proxy response (e.g. `statusCode` not an integer); the gateway answers those
/// with 502.
pub fn http_response(result: &Value) -> Result<HttpResponse, String> {
    let Some(obj) = result.as_object().filter(|o| o.contains_key("statusCode")) else {
        return Ok(match result {
            Value::String(s) => HttpResponse {
                status: 200,
                headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
                body: s.clone().into_bytes(),
            },
            other => HttpResponse {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: other.to_string().into_bytes(),
            },
        });
    };
    let status = obj
        .get("statusCode")
        .and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (100..=599).contains(n))
        .ok_or_else(|| format!("statusCode must be an integer from 100 to 599, got {}", obj["statusCode"]))?;
    let mut headers: Vec<(String, String)> = Vec::new();
    let set = |name: &str, value: String, headers: &mut Vec<(String, String)>| {
        headers.push((name.to_ascii_lowercase(), value));
    };
    if let Some(h) = obj.get("headers").filter(|v| !v.is_null()) {
        let h = h.as_object().ok_or("headers must be an object")?;
        for (name, value) in h {
            set(name, scalar(value).ok_or_else(|| format!("header {name:?} must be a string"))?, &mut headers);
        }
    }
    if let Some(mh) = obj.get("multiValueHeaders").filter(|v| !v.is_null()) {
        let mh = mh.as_object().ok_or("multiValueHeaders must be an object")?;
        for (name, values) in mh {
            let values = values.as_array().ok_or_else(|| format!("multiValueHeaders {name:?} must be a list"))?;
            // multiValueHeaders wins over headers for the same name, as in API Gateway.
            let lower = name.to_ascii_lowercase();
            headers.retain(|(n, _)| *n != lower);
            for v in values {
                set(
                    name,
                    scalar(v).ok_or_else(|| format!("multiValueHeaders {name:?} must hold strings"))?,
                    &mut headers,
                );
            }
        }
    }
    if let Some(cookies) = obj.get("cookies").filter(|v| !v.is_null()) {
        for c in cookies.as_array().ok_or("cookies must be a list")? {
            set("set-cookie", c.as_str().ok_or("cookies must hold strings")?.to_string(), &mut headers);
        }
    }
    let base64 = matches!(obj.get("isBase64Encoded"), Some(Value::Bool(true)));
    let body = match obj.get("body") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if base64 => BASE64.decode(s).map_err(|e| format!("body is not valid base64: {e}"))?,
        Some(Value::String(s)) => s.clone().into_bytes(),
        Some(other) => {
            if !headers.iter().any(|(n, _)| n == "content-type") {
                headers.push(("content-type".into(), "application/json".into()));
            }
            other.to_string().into_bytes()
        }
    };
    if !headers.iter().any(|(n, _)| n == "content-type") {
        headers.push(("content-type".into(), "application/json".into()));
    }
    // Framing and hop-by-hop headers (RFC 9110 §7.6.1, §8.6) are the server's to set: a
    // function's `Content-Length` counted in characters or a `Transfer-Encoding` passed on by
    // a framework would corrupt the connection. They are dropped (API Gateway remaps them).
    headers.retain(|(n, _)| !HOP_BY_HOP.contains(&n.as_str()));
    for (name, value) in &headers {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
            return Err(format!("header name {name:?} is not a valid HTTP header name"));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!("header {name:?} has a line break or NUL in its value"));
        }
    }
    // RFC 9110 §6.4.1: 1xx, 204 and 304 responses have no content.
    let body = if status < 200 || status == 204 || status == 304 { Vec::new() } else { body };
    Ok(HttpResponse { status, headers, body })
}

/// Response headers a function may not set (framing and hop-by-hop).
const HOP_BY_HOP: [&str; 8] =
    ["content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "upgrade", "te", "trailer"];

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_read_as_lambdas() {
        use std::time::Duration;
        let line = report_line("r1", Duration::from_micros(12_345), 128, Some(41 * 1024 * 1024 + 1), None);
        assert_eq!(
            line,
            "REPORT RequestId: r1\tDuration: 12.35 ms\tBilled Duration: 13 ms\tMemory Size: 128 MB\tMax Memory Used: 42 MB"
        );
        let cold = report_line("r2", Duration::from_micros(400), 256, None, Some(Duration::from_micros(5_670)));
        assert_eq!(
            cold,
            "REPORT RequestId: r2\tDuration: 0.40 ms\tBilled Duration: 1 ms\tMemory Size: 256 MB\tInit Duration: 5.67 ms"
        );
    }

    fn req<'a>(query: Option<&'a str>, headers: &'a [(String, String)], body: &'a [u8]) -> HttpRequest<'a> {
        HttpRequest {
            method: "POST",
            path: "/a/b",
            query,
            headers,
            body,
            source_ip: "127.0.0.1",
            request_id: "r1",
            request_time_epoch_ms: 1,
            api_id: "default",
        }
    }

    fn event(r: &HttpRequest<'_>) -> Value {
        serde_json::from_str(http_event(r).get()).expect("the event is JSON")
    }

    #[test]
    fn the_http_event_is_api_gateway_proxy_1_0() {
        let h = vec![
            ("Host".to_string(), "fn.example:8080".to_string()),
            ("User-Agent".to_string(), "curl/8".to_string()),
            ("X-B".to_string(), "1".to_string()),
            ("accept".to_string(), "*/*".to_string()),
            ("x-b".to_string(), "2".to_string()),
        ];
        let mut r = req(Some("q=%C3%A9+x&z"), &h, b"hi");
        r.request_time_epoch_ms = 1_428_582_896_000;
        let text = http_event(&r);
        assert_eq!(
            serde_json::from_str::<Value>(text.get()).expect("json"),
            json!({
                "resource": "/{proxy+}",
                "path": "/a/b",
                "httpMethod": "POST",
                "headers": {"Host": "fn.example:8080", "User-Agent": "curl/8", "X-B": "2", "accept": "*/*"},
                "multiValueHeaders": {"Host": ["fn.example:8080"], "User-Agent": ["curl/8"], "X-B": ["1", "2"], "accept": ["*/*"]},
                "queryStringParameters": {"q": "é x", "z": ""},
                "multiValueQueryStringParameters": {"q": ["é x"], "z": [""]},
                "pathParameters": {"proxy": "a/b"},
                "stageVariables": null,
                "requestContext": {
                    "accountId": "000000000000",
                    "apiId": "default",
                    "resourceId": "proxy",
                    "resourcePath": "/{proxy+}",
                    "httpMethod": "POST",
                    "path": "/a/b",
                    "requestId": "r1",
                    "extendedRequestId": "r1",
                    "requestTime": "09/Apr/2015:12:34:56 +0000",
                    "requestTimeEpoch": 1_428_582_896_000_i64,
                    "stage": "$default",
                    "protocol": "HTTP/1.1",
                    "domainName": "fn.example:8080",
                    "domainPrefix": "fn",
                    "identity": {
                        "accessKey": null, "accountId": null, "apiKey": null, "apiKeyId": null,
                        "caller": null, "clientCert": null, "cognitoAuthenticationProvider": null,
                        "cognitoAuthenticationType": null, "cognitoIdentityId": null,
                        "cognitoIdentityPoolId": null, "principalOrgId": null,
                        "sourceIp": "127.0.0.1", "user": null, "userAgent": "curl/8", "userArn": null,
                    },
                    "authorizer": null,
                },
                "body": "hi",
                "isBase64Encoded": false,
            })
        );
        // A repeated name keeps its first position and spelling (with its last value).
        assert!(
            text.get()
                .contains(r#""headers":{"Host":"fn.example:8080","User-Agent":"curl/8","X-B":"2","accept":"*/*"}"#),
            "{text}"
        );
    }

    #[test]
    fn the_root_path_is_the_root_resource() {
        let mut r = req(None, &[], b"");
        r.path = "/";
        let e = event(&r);
        assert_eq!((e["resource"].as_str(), e["requestContext"]["resourcePath"].as_str()), (Some("/"), Some("/")));
        assert_eq!(e["pathParameters"], Value::Null);
        assert_eq!(e["requestContext"]["domainName"], "localhost");
    }

    #[test]
    fn request_time_is_api_gateways_format() {
        assert_eq!(request_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(request_time(1_764_450_000_123), "29/Nov/2025:21:00:00 +0000");
    }

    #[test]
    fn forwarded_headers_are_added_as_api_gateway_adds_them() {
        let mut h = vec![("Host".to_string(), "x".to_string())];
        add_forwarded(&mut h, "10.0.0.9", "http", 8080);
        assert_eq!(
            h[1..],
            [
                ("X-Forwarded-For".to_string(), "10.0.0.9".to_string()),
                ("X-Forwarded-Proto".to_string(), "http".to_string()),
                ("X-Forwarded-Port".to_string(), "8080".to_string()),
            ]
        );
        // A proxy in front: its chain gets the address appended, its scheme and port stay.
        let mut h = vec![
            ("x-forwarded-for".to_string(), "1.2.3.4".to_string()),
            ("X-Forwarded-Proto".to_string(), "https".to_string()),
            ("x-forwarded-port".to_string(), "443".to_string()),
        ];
        add_forwarded(&mut h, "10.0.0.9", "http", 8080);
        assert_eq!(h[0].1, "1.2.3.4, 10.0.0.9");
        assert_eq!((h.len(), h[1].1.as_str(), h[2].1.as_str()), (3, "https", "443"));
    }

    #[test]
    fn the_v2_event_is_an_http_api_payload_2_0() {
        let h = vec![
            ("Host".to_string(), "fn.example:8080".to_string()),
            ("User-Agent".to_string(), "curl/8".to_string()),
            ("X-B".to_string(), "1".to_string()),
            ("Cookie".to_string(), "a=1; b=2".to_string()),
            ("x-b".to_string(), "2".to_string()),
            ("cookie".to_string(), "c=3".to_string()),
        ];
        let mut r = req(Some("q=1&q=2&z"), &h, b"hi");
        r.request_time_epoch_ms = 1_428_582_896_000;
        let e: Value = serde_json::from_str(http_event_v2(&r).get()).expect("json");
        assert_eq!(
            e,
            json!({
                "version": "2.0",
                "routeKey": "$default",
                "rawPath": "/a/b",
                "rawQueryString": "q=1&q=2&z",
                "cookies": ["a=1", "b=2", "c=3"],
                "headers": {"host": "fn.example:8080", "user-agent": "curl/8", "x-b": "1,2"},
                "queryStringParameters": {"q": "1,2", "z": ""},
                "requestContext": {
                    "accountId": "000000000000",
                    "apiId": "default",
                    "domainName": "fn.example:8080",
                    "domainPrefix": "fn",
                    "http": {"method": "POST", "path": "/a/b", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "curl/8"},
                    "requestId": "r1",
                    "routeKey": "$default",
                    "stage": "$default",
                    "time": "09/Apr/2015:12:34:56 +0000",
                    "timeEpoch": 1_428_582_896_000_i64,
                },
                "body": "hi",
                "isBase64Encoded": false,
            })
        );
        // Without a query, cookies or a body those fields are left out, as function URLs do.
        let e: Value = serde_json::from_str(http_event_v2(&req(None, &[], b"")).get()).expect("json");
        for absent in ["cookies", "queryStringParameters", "body"] {
            assert!(e.get(absent).is_none(), "{absent}: {e}");
        }
        assert_eq!((&e["rawQueryString"], &e["headers"]), (&json!(""), &json!({})));
        assert_eq!(e["requestContext"]["http"]["userAgent"], "");
    }

    #[test]
    fn v2_results_without_status_code_are_json_200s() {
        for (result, body) in [
            (json!({"a": 1}), &b"{\"a\":1}"[..]),
            (json!("hi"), b"hi"),
            (json!([1, 2]), b"[1,2]"),
            (Value::Null, b"null"),
        ] {
            let r = http_response_for(PayloadFormat::V2, &result).expect("ok");
            assert_eq!((r.status, r.body.as_slice()), (200, body), "{result}");
            assert_eq!(r.headers, [("content-type".to_string(), "application/json".to_string())]);
        }
        let r = http_response_for(PayloadFormat::V2, &json!({"statusCode": 201, "cookies": ["a=1"], "body": "x"}))
            .expect("ok");
        assert_eq!((r.status, r.body.as_slice()), (201, &b"x"[..]));
        assert!(r.headers.contains(&("set-cookie".into(), "a=1".into())));
        // Payload 1.0 keeps its rules: a string is text/plain.
        let r = http_response_for(PayloadFormat::V1, &json!("hi")).expect("ok");
        assert_eq!(r.headers[0].1, "text/plain; charset=utf-8");
    }

    #[test]
    fn a_raw_reply_is_the_returned_value_as_json() {
        use crate::traits::InvokeResult;
        let proxy_shaped = json!({"statusCode": 404, "body": "x"});
        let a = answer(&InvokeResult::Returned(proxy_shaped.clone()), Reply::Raw, 3, 1 << 20);
        assert_eq!(a.response.status, 200);
        assert_eq!(serde_json::from_slice::<Value>(&a.response.body).expect("json"), proxy_shaped);
        let a = answer(
            &InvokeResult::Failed { error_type: "ValueError".into(), error_message: "bad".into() },
            Reply::Raw,
            3,
            1 << 20,
        );
        assert_eq!(a.response.status, 502);
        assert!(a.response.headers.contains(&("x-function-error".into(), "true".into())));
    }

    #[test]
    fn payload_formats_read_and_write_as_their_version_strings() {
        assert_eq!(serde_json::to_value(PayloadFormat::V2).expect("json"), json!("2.0"));
        assert_eq!(PayloadFormat::parse("f", &json!("1.0")).expect("1.0"), PayloadFormat::V1);
        let err = PayloadFormat::parse("payload_format", &json!(2)).expect_err("a number");
        assert!(err.to_string().starts_with("payload_format: "), "{err}");
    }

    #[test]
    fn query_single_and_multi_values() {
        let e = event(&req(Some("a=1&a=2&b="), &[], b""));
        assert_eq!(e["queryStringParameters"], json!({"a": "2", "b": ""}));
        assert_eq!(e["multiValueQueryStringParameters"], json!({"a": ["1", "2"], "b": [""]}));
        assert_eq!(e["pathParameters"], json!({"proxy": "a/b"}));
    }

    #[test]
    fn empty_query_and_body_are_null() {
        let e = event(&req(None, &[], b""));
        assert_eq!(e["queryStringParameters"], Value::Null);
        assert_eq!(e["body"], Value::Null);
        assert_eq!(e["isBase64Encoded"], false);
    }

    #[test]
    fn spellings_of_one_header_are_one_and_binary_is_base64() {
        let h = vec![("X-A".to_string(), "1".to_string()), ("x-a".to_string(), "2".to_string())];
        let e = event(&req(None, &h, &[0xff, 0x00]));
        assert_eq!(e["headers"], json!({"X-A": "2"}));
        assert_eq!(e["multiValueHeaders"], json!({"X-A": ["1", "2"]}));
        assert_eq!(e["body"], "/wA=");
        assert_eq!(e["isBase64Encoded"], true);
        let e = event(&req(None, &h, "{\"é\":1}".as_bytes()));
        assert_eq!(e["body"], "{\"é\":1}");
    }

    #[test]
    fn results_without_status_code_are_inferred() {
        let r = http_response(&json!({"a": 1})).expect("ok");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
        let r = http_response(&json!("hi")).expect("ok");
        assert_eq!(r.headers[0].1, "text/plain; charset=utf-8");
        assert_eq!(r.body, b"hi");
        assert_eq!(http_response(&Value::Null).expect("ok").body, b"null");
    }

    #[test]
    fn proxy_responses_keep_cookies_apart_and_decode_base64() {
        let r = http_response(&json!({
            "statusCode": 201,
            "headers": {"X-N": 5},
            "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
            "cookies": ["c=3"],
            "body": "AAE=",
            "isBase64Encoded": true
        }))
        .expect("ok");
        assert_eq!(r.status, 201);
        assert_eq!(r.body, vec![0, 1]);
        let cookies: Vec<_> = r.headers.iter().filter(|(n, _)| n == "set-cookie").map(|(_, v)| v.as_str()).collect();
        assert_eq!(cookies, ["a=1", "b=2", "c=3"]);
        assert!(r.headers.contains(&("x-n".into(), "5".into())));
    }

    #[test]
    fn no_content_statuses_carry_no_body() {
        for status in [204, 304] {
            assert!(http_response(&json!({"statusCode": status, "body": "x"})).expect("ok").body.is_empty());
        }
    }

    #[test]
    fn framing_headers_are_dropped_and_broken_values_refused() {
        let r = http_response(&json!({"statusCode": 200, "headers": {"Content-Length": "999", "Transfer-Encoding": "chunked", "X-Ok": "1"}, "body": "short"}))
            .expect("ok");
        assert!(r.headers.iter().all(|(n, _)| n != "content-length" && n != "transfer-encoding"), "{:?}", r.headers);
        assert!(r.headers.contains(&("x-ok".into(), "1".into())));
        assert!(http_response(&json!({"statusCode": 200, "headers": {"X-Bad": "a\r\nb"}})).is_err());
        assert!(http_response(&json!({"statusCode": 200, "headers": {"Bad Name": "a"}})).is_err());
    }

    #[test]
    fn malformed_status_code_is_an_error() {
        assert!(http_response(&json!({"statusCode": "abc"})).is_err());
        assert!(http_response(&json!({"statusCode": 1000})).is_err());
    }
}

/// The cron event (docs/writing-functions.md): `{"source": "sless.cron", "detail-type": "Scheduled Event",
/// "id", "time", "resources": ["ns/trigger"], "detail": <payload>}`, like an EventBridge
/// scheduled event. `time` is the tick (RFC 3339 UTC), not the moment of the call.
pub fn cron_event(
    id: &str,
    namespace: &str,
    trigger: &str,
    tick: chrono::DateTime<chrono::Utc>,
    payload: &Value,
) -> Value {
    json!({
        "version": "0",
        "id": id,
        "source": "sless.cron",
        "detail-type": "Scheduled Event",
        "time": tick.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "resources": [format!("{namespace}/{trigger}")],
        "detail": payload,
    })
}

/// The job event (docs/writing-functions.md): `{"source": "sless.job", "job", "run_id", "payload"}`.
pub fn job_event(job: &str, run_id: u64, payload: &Value) -> Value {
    json!({ "source": "sless.job", "job": job, "run_id": run_id, "payload": payload })
}

/// A call's HTTP answer with what the invocation record needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The response to send.
    pub response: HttpResponse,
    /// How the call ended.
    pub outcome: crate::invocation::Outcome,
    /// The error's type and message when the function failed.
    pub error: Option<(String, String)>,
}

/// The line the platform adds to a call's log when the function's process did not end the
/// call itself, as Lambda prints one (`<request id> Task timed out after 3.00 seconds`): for a
/// timeout, a crash and an out-of-memory kill; `None` otherwise.
pub fn platform_log_line(result: &crate::traits::InvokeResult, timeout_sec: u32, request_id: &str) -> Option<String> {
    use crate::traits::InvokeResult;
    match result {
        InvokeResult::TimedOut => Some(format!("{request_id} Task timed out after {timeout_sec}.00 seconds")),
        InvokeResult::OutOfMemory { message } => {
            Some(format!("{request_id} Runtime exited: out of memory, killed ({message})"))
        }
        InvokeResult::Crashed { message } => Some(format!("{request_id} Runtime exited: {message}")),
        _ => None,
    }
}

/// The line the platform adds at the end of every call's log, in Lambda's format (tab
/// separated): `REPORT RequestId: <id>\tDuration: 12.34 ms\tBilled Duration: 13 ms\tMemory
/// Size: 128 MB\tMax Memory Used: 41 MB`, then `\tInit Duration: 5.67 ms` on a cold start.
/// Billed duration is the duration rounded up to the next millisecond; memory is in MiB
/// (Lambda's "MB"); `Max Memory Used` is left out when the backend cannot tell.
pub fn report_line(
    request_id: &str,
    duration: std::time::Duration,
    memory_mb: u32,
    max_memory_bytes: Option<u64>,
    init: Option<std::time::Duration>,
) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    let billed = duration.as_micros().div_ceil(1000).max(1);
    let mut line = format!(
        "REPORT RequestId: {request_id}\tDuration: {ms:.2} ms\tBilled Duration: {billed} ms\tMemory Size: {memory_mb} MB"
    );
    if let Some(bytes) = max_memory_bytes {
        line.push_str(&format!("\tMax Memory Used: {} MB", bytes.div_ceil(1024 * 1024)));
    }
    if let Some(init) = init {
        line.push_str(&format!("\tInit Duration: {:.2} ms", init.as_secs_f64() * 1000.0));
    }
    line
}

/// Turns a call's result into its HTTP answer (docs/writing-functions.md): a returned value → its response
/// under `reply`'s rules ([`Reply`]; cron and job calls use payload 1.0's)
/// (502 `Runtime.MalformedResponse` when malformed, 502 `Function.ResponseSizeTooLarge` over
/// `max_response_bytes`); an exception → 502 `{"errorType","errorMessage"}`; a timeout → 504
/// `Function.Timeout`; a crash → 502 `RuntimeExited`. Function failures carry
/// `X-Function-Error: true`.
pub fn answer(
    result: &crate::traits::InvokeResult,
    reply: Reply,
    timeout_sec: u32,
    max_response_bytes: usize,
) -> Answer {
    use crate::invocation::Outcome;
    use crate::traits::InvokeResult;
    let failure = |status: u16, outcome: Outcome, error_type: &str, message: &str| {
        let body = json!({ "errorType": error_type, "errorMessage": message }).to_string().into_bytes();
        Answer {
            response: HttpResponse {
                status,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("x-function-error".into(), "true".into()),
                ],
                body,
            },
            outcome,
            error: Some((error_type.to_string(), message.to_string())),
        }
    };
    match result {
        InvokeResult::Returned(value) => match reply_to(reply, value) {
            Ok(r) if r.body.len() > max_response_bytes => failure(
                502,
                Outcome::Error,
                "Function.ResponseSizeTooLarge",
                &format!("the response is {} bytes, more than the limit of {max_response_bytes}", r.body.len()),
            ),
            Ok(response) => Answer { response, outcome: Outcome::Ok, error: None },
            Err(why) => failure(502, Outcome::Error, "Runtime.MalformedResponse", &why),
        },
        InvokeResult::Failed { error_type, error_message } => failure(502, Outcome::Error, error_type, error_message),
        InvokeResult::TimedOut => failure(
            504,
            Outcome::Timeout,
            "Function.Timeout",
            &format!("the function did not finish within timeout_sec = {timeout_sec} s"),
        ),
        InvokeResult::Crashed { message } => failure(502, Outcome::Crash, "RuntimeExited", message),
        InvokeResult::OutOfMemory { message } => failure(502, Outcome::Oom, "OutOfMemory", message),
        InvokeResult::Throttled { message } => platform_refusal(429, "TooManyRequestsException", message, 1),
        InvokeResult::Unavailable { message, retry_after_sec } => {
            platform_refusal(503, "Function.CrashLoop", message, *retry_after_sec)
        }
        InvokeResult::Withdrawn { message } => platform_refusal(503, "Function.NotReady", message, 1),
    }
}

/// The platform refused the call (not the function's failure: no `X-Function-Error`).
fn platform_refusal(status: u16, error_type: &str, message: &str, retry_after_sec: u64) -> Answer {
    let body = json!({ "errorType": error_type, "errorMessage": message }).to_string().into_bytes();
    Answer {
        response: HttpResponse {
            status,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("retry-after".into(), retry_after_sec.max(1).to_string()),
            ],
            body,
        },
        outcome: crate::invocation::Outcome::Rejected,
        error: Some((error_type.to_string(), message.to_string())),
    }
}

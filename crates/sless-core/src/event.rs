//! The HTTP event given to a handler and the HTTP response made from its result (DESIGN §5).
//!
//! Event: the API Gateway REST proxy integration format 1.0 ("payload format version 1.0").
//! Header names are lowercase in both `headers` and `multiValueHeaders` (HTTP/2 style; what a
//! client sent in another case arrives lowercased). An empty query string gives `null`
//! parameter maps, an empty body gives `body: null`, as API Gateway does. A body that is valid
//! UTF-8 is passed as text; any other body is base64 with `isBase64Encoded: true`.
//!
//! Response: a JSON object with `statusCode` is an HTTP response (`headers`,
//! `multiValueHeaders`, `body`, `isBase64Encoded`, `cookies`); any other result is a 200: a
//! string as `text/plain`, everything else as its JSON.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

/// The parts of an HTTP request that become an event.
#[derive(Debug, Clone)]
pub struct HttpRequest<'a> {
    /// The method, e.g. `GET`.
    pub method: &'a str,
    /// The path after the function's URL, starting with `/` (`/` when nothing follows).
    pub path: &'a str,
    /// The raw query string without `?`, if any.
    pub query: Option<&'a str>,
    /// Header (lowercase name, value) pairs in arrival order; repeated names allowed.
    pub headers: &'a [(String, String)],
    /// The body bytes.
    pub body: &'a [u8],
    /// The client's address.
    pub source_ip: &'a str,
    /// The invocation's request id.
    pub request_id: &'a str,
    /// When the request arrived, Unix epoch milliseconds.
    pub request_time_epoch_ms: i64,
}

/// Builds the API Gateway proxy 1.0 event for `req`.
pub fn http_event(req: &HttpRequest<'_>) -> Value {
    let mut headers = Map::new();
    let mut multi_headers: Map<String, Value> = Map::new();
    for (name, value) in req.headers {
        let name = name.to_ascii_lowercase();
        headers.insert(name.clone(), Value::String(value.clone()));
        push_multi(&mut multi_headers, name, value.clone());
    }
    let (query, multi_query) = match req.query.filter(|q| !q.is_empty()) {
        None => (Value::Null, Value::Null),
        Some(q) => {
            let mut single = Map::new();
            let mut multi = Map::new();
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                single.insert(k.to_string(), Value::String(v.to_string()));
                push_multi(&mut multi, k.into_owned(), v.into_owned());
            }
            (Value::Object(single), Value::Object(multi))
        }
    };
    let (body, is_base64) = if req.body.is_empty() {
        (Value::Null, false)
    } else {
        match std::str::from_utf8(req.body) {
            Ok(text) => (Value::String(text.to_string()), false),
            Err(_) => (Value::String(BASE64.encode(req.body)), true),
        }
    };
    let proxy = req.path.trim_start_matches('/');
    let path_parameters = if proxy.is_empty() { Value::Null } else { json!({ "proxy": proxy }) };
    let user_agent = headers.get("user-agent").cloned().unwrap_or(Value::Null);
    let empty_if_none = |m: Map<String, Value>| if m.is_empty() { Value::Null } else { Value::Object(m) };
    json!({
        "resource": "/{proxy+}",
        "path": req.path,
        "httpMethod": req.method,
        "headers": empty_if_none(headers),
        "multiValueHeaders": empty_if_none(multi_headers),
        "queryStringParameters": query,
        "multiValueQueryStringParameters": multi_query,
        "pathParameters": path_parameters,
        "stageVariables": null,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": req.method,
            "path": req.path,
            "requestId": req.request_id,
            "requestTimeEpoch": req.request_time_epoch_ms,
            "stage": "$default",
            "protocol": "HTTP/1.1",
            "identity": { "sourceIp": req.source_ip, "userAgent": user_agent },
        },
        "body": body,
        "isBase64Encoded": is_base64,
    })
}

fn push_multi(map: &mut Map<String, Value>, key: String, value: String) {
    if let Value::Array(items) = map.entry(key).or_insert_with(|| Value::Array(Vec::new())) {
        items.push(Value::String(value));
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
        }
    }

    #[test]
    fn query_single_and_multi_values() {
        let e = http_event(&req(Some("a=1&a=2&b="), &[], b""));
        assert_eq!(e["queryStringParameters"], json!({"a": "2", "b": ""}));
        assert_eq!(e["multiValueQueryStringParameters"], json!({"a": ["1", "2"], "b": [""]}));
        assert_eq!(e["pathParameters"], json!({"proxy": "a/b"}));
    }

    #[test]
    fn empty_query_and_body_are_null() {
        let e = http_event(&req(None, &[], b""));
        assert_eq!(e["queryStringParameters"], Value::Null);
        assert_eq!(e["body"], Value::Null);
        assert_eq!(e["isBase64Encoded"], false);
    }

    #[test]
    fn headers_lowercase_last_wins_and_binary_is_base64() {
        let h = vec![("X-A".to_string(), "1".to_string()), ("x-a".to_string(), "2".to_string())];
        let e = http_event(&req(None, &h, &[0xff, 0x00]));
        assert_eq!(e["headers"]["x-a"], "2");
        assert_eq!(e["multiValueHeaders"]["x-a"], json!(["1", "2"]));
        assert_eq!(e["body"], "/wA=");
        assert_eq!(e["isBase64Encoded"], true);
        let e = http_event(&req(None, &h, "{\"é\":1}".as_bytes()));
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

/// The cron event (DESIGN §5): `{"source": "sless.cron", "detail-type": "Scheduled Event",
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

/// The job event (DESIGN §5): `{"source": "sless.job", "job", "run_id", "payload"}`.
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

/// Turns a call's result into its HTTP answer (DESIGN §5): a returned value → its response
/// (502 `Runtime.MalformedResponse` when malformed, 502 `Function.ResponseSizeTooLarge` over
/// `max_response_bytes`); an exception → 502 `{"errorType","errorMessage"}`; a timeout → 504
/// `Function.Timeout`; a crash → 502 `RuntimeExited`. Function failures carry
/// `X-Function-Error: true`.
pub fn answer(result: &crate::traits::InvokeResult, timeout_sec: u32, max_response_bytes: usize) -> Answer {
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
        InvokeResult::Returned(value) => match http_response(value) {
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

//! The load generator: N workers, each with one keep-alive HTTP/1.1 connection (TCP_NODELAY)
//! on loopback, sending GETs back to back for a fixed time or a fixed count, whichever ends
//! first. Latency is measured per request, from before the request is written to after the
//! whole body is read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::stats::Summary;

/// Where the load goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's address (loopback).
    pub addr: SocketAddr,
    /// The request's path and query.
    pub path: String,
    /// The `Authorization` header, if any.
    pub auth: Option<String>,
}

/// How much load.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Concurrent workers (connections).
    pub concurrency: usize,
    /// Requests before this are not measured.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// At most this many measured requests in all (None: only the time bounds the run).
    pub max_requests: Option<usize>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Latencies of the measured requests that answered 200, in microseconds.
    pub latencies_us: Vec<u32>,
    /// Measured requests that failed (connection error, timeout or a status other than 200).
    pub errors: usize,
    /// The measured window as it really lasted (until the last measured response).
    pub elapsed: Duration,
    /// The first error seen, for the report.
    pub first_error: Option<String>,
}

impl Outcome {
    /// Successful requests per second in the measured window.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { self.latencies_us.len() as f64 / secs } else { 0.0 }
    }

    /// Merges another run of the same cell (rounds are summed).
    pub fn merge(&mut self, other: Outcome) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// An empty outcome to merge rounds into.
    pub fn empty() -> Outcome {
        Outcome { latencies_us: Vec::new(), errors: 0, elapsed: Duration::ZERO, first_error: None }
    }

    /// Percentiles of the successful requests, in milliseconds.
    pub fn summary(&self) -> Summary {
        Summary::of_us(&self.latencies_us)
    }
}

/// One request's longest wait; a hung call counts as an error and the worker reconnects.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `plan` against `target`.
pub async fn run(target: &Target, plan: Plan) -> Result<Outcome> {
    let start = Instant::now();
    let measure_from = start + plan.warmup;
    let deadline = measure_from + plan.duration;
    let budget = Arc::new(AtomicUsize::new(plan.max_requests.unwrap_or(usize::MAX)));
    let mut workers = Vec::with_capacity(plan.concurrency);
    for _ in 0..plan.concurrency {
        let (target, budget) = (target.clone(), budget.clone());
        workers.push(tokio::spawn(async move { worker(&target, measure_from, deadline, &budget).await }));
    }
    let mut out = Outcome::empty();
    let mut last_end = measure_from;
    for w in workers {
        let (o, end) = w.await.context("load worker panicked")??;
        last_end = last_end.max(end);
        out.merge(o);
    }
    out.elapsed = last_end.saturating_duration_since(measure_from);
    Ok(out)
}

type Sender = http1::SendRequest<Empty<Bytes>>;

async fn connect(addr: SocketAddr) -> Result<Sender> {
    let stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Ends when the connection closes; errors show up on the next request.
        let _ = conn.await;
    });
    Ok(sender)
}

async fn one(sender: &mut Sender, target: &Target) -> Result<u16> {
    let mut req = hyper::Request::get(target.path.as_str()).header(hyper::header::HOST, target.addr.to_string());
    if let Some(auth) = &target.auth {
        req = req.header(hyper::header::AUTHORIZATION, auth.as_str());
    }
    sender.ready().await?;
    let resp = sender.send_request(req.body(Empty::new())?).await?;
    let status = resp.status().as_u16();
    resp.into_body().collect().await?;
    Ok(status)
}

/// Takes one request from the shared budget; false when it is spent.
fn take(budget: &AtomicUsize) -> bool {
    budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
}

async fn worker(
    target: &Target,
    measure_from: Instant,
    deadline: Instant,
    budget: &AtomicUsize,
) -> Result<(Outcome, Instant)> {
    let mut out = Outcome::empty();
    let mut sender: Option<Sender> = None;
    let mut last_end = measure_from;
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        let measured = t0 >= measure_from;
        if measured && !take(budget) {
            break;
        }
        let s = match sender.as_mut() {
            Some(s) => s,
            None => match connect(target.addr).await {
                Ok(s) => sender.insert(s),
                Err(e) => {
                    // A refused connection would spin: count it and back off a little.
                    if measured {
                        out.errors += 1;
                        out.first_error.get_or_insert_with(|| format!("{e:#}"));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let result = tokio::time::timeout(REQUEST_TIMEOUT, one(s, target)).await;
        let t1 = Instant::now();
        let error = match result {
            Ok(Ok(200)) => None,
            Ok(Ok(status)) => Some(format!("HTTP {status}")),
            Ok(Err(e)) => {
                sender = None;
                Some(format!("{e:#}"))
            }
            Err(_) => {
                sender = None;
                Some(format!("no answer in {REQUEST_TIMEOUT:?}"))
            }
        };
        if measured {
            last_end = t1;
            match error {
                None => out.latencies_us.push(u32::try_from((t1 - t0).as_micros()).unwrap_or(u32::MAX)),
                Some(e) => {
                    out.errors += 1;
                    out.first_error.get_or_insert(e);
                }
            }
        }
    }
    Ok((out, last_end))
}

/// One timed GET on a fresh client (cold starts, floors): the status, the body and the time.
pub async fn timed_get(addr: SocketAddr, path: &str, auth: Option<&str>) -> Result<(u16, Bytes, Duration)> {
    let t0 = Instant::now();
    let mut sender = connect(addr).await?;
    let mut req = hyper::Request::get(path).header(hyper::header::HOST, addr.to_string());
    if let Some(auth) = auth {
        req = req.header(hyper::header::AUTHORIZATION, auth);
    }
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, sender.send_request(req.body(Empty::new())?))
        .await
        .context("no answer")??;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, body, t0.elapsed()))
}

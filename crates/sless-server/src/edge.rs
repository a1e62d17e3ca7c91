//! The HTTP edge (docs/security.md, "HTTP edge"): sless's own accept loop over hyper's HTTP/1.1
//! connections, with a read timeout for request heads, one for request bodies (between two
//! parts and in total), an idle timeout for keep-alive connections, a cap on connections (and
//! on the connections of one client address) and caps on the size and number of header fields. Only *reading a request* is timed: once its
//! head is in, the answer may take as long as the call does.
//!
//! Each connection is in one of three phases, kept in a [`Phase`] shared by its reader
//! ([`EdgeIo`]), its service ([`ConnService`]) and its response body ([`MarkIdle`]):
//!
//! - `HEAD`: from the accept, or from the first byte after an idle spell, until the head is
//!   parsed: cut at `header_read_timeout` (a byte now and then does not extend it);
//! - `BUSY`: from the head until the response is written: never cut by the edge (the body has
//!   its own timeouts, [`TimedBody`]);
//! - `IDLE`: after a response, until the next request's first byte: cut at
//!   `keep_alive_timeout`.
//!
//! hyper's own `header_read_timeout` is not used: it also runs while a keep-alive connection is
//! idle, so it cannot be told apart from the idle timeout (docs/errors-log.md). Without it hyper
//! does not read again after a response until bytes arrive, so the end of a response wakes the
//! connection's task ([`MarkIdle`]), whose next read starts the idle timer.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::future::RouteFuture;
use bytes::Bytes;
use futures::task::AtomicWaker;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use sless_control::Metrics;
use sless_control::metrics::ReadTimeoutLabels;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::{Instant, Sleep};

use crate::AppError;

/// How the edge reads requests and how many connections it holds. Every timeout is of
/// *reading a request*; none limits how long an answer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Longest time from a connection's accept, or from a request's first byte, until its
    /// whole head (request line and header fields) is in; then the connection is closed
    /// without an answer. Default 10 s (`--header-read-timeout-ms 10000`).
    pub header_read_timeout: Duration,
    /// Longest wait for the next part of a request body; then the request is answered 408
    /// and the connection closed. Default 30 s (`--body-read-timeout-ms 30000`).
    pub body_read_timeout: Duration,
    /// Longest time from a request's head until its whole body is in (a 50 MiB archive at
    /// 0.7 Mbit/s takes 600 s); then the request is answered 408 and the connection closed.
    /// Default 600 s (`--body-total-timeout-ms 600000`).
    pub body_total_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request; then it is closed.
    /// Default 75 s (`--keep-alive-timeout-ms 75000`, as nginx's `keepalive_timeout`: longer
    /// than the 60 s idle timeout of common load balancers, so they close first).
    pub keep_alive_timeout: Duration,
    /// Most connections held at once; a connection beyond them is answered 503 (problem+json,
    /// `Retry-After: 1`, `Connection: close`) and closed. Default 512
    /// (`--max-connections 512`).
    pub max_connections: usize,
    /// Most connections held at once from one client address (IPv4 address, or whole IPv6
    /// address); one more from it is answered 503 like a connection over `max_connections`, so
    /// one client reconnecting slowloris-style cannot take every place. Default 256
    /// (`--max-connections-per-client 256`); at `max_connections` or above it never applies
    /// (behind a reverse proxy every client has the proxy's address).
    pub max_connections_per_client: usize,
    /// Largest request head (request line and header fields), in bytes; a larger one is
    /// answered 431 and the connection closed. Default 65536 (`--max-header-bytes 65536`).
    pub max_header_bytes: usize,
    /// Most header fields of a request; more are answered 431 and the connection closed.
    /// Default 100 (`--max-headers 100`).
    pub max_headers: usize,
}

impl Default for Edge {
    fn default() -> Self {
        Edge {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            body_total_timeout: Duration::from_secs(600),
            keep_alive_timeout: Duration::from_secs(75),
            max_connections: 512,
            max_connections_per_client: 256,
            max_header_bytes: 64 * 1024,
            max_headers: 100,
        }
    }
}

/// hyper's read buffer (`max_buf_size`) by default, in bytes: a head limit above it needs a
/// larger buffer.
const HYPER_DEFAULT_BUF: usize = 8192 + 4096 * 100;
/// A connection over the cap is answered and closed within this time.
const REFUSE_FOR: Duration = Duration::from_secs(1);
/// At most this many connections over the cap are being answered at once; beyond them a
/// connection is closed without an answer (each costs a file descriptor meanwhile).
const REFUSING_AT_ONCE: usize = 64;
/// At most this much of a refused connection's request is read and thrown away (so that the
/// close does not reset the connection before the client has read the 503).
const REFUSE_DRAIN_BYTES: usize = 64 * 1024;
/// Reaching the connection cap is logged at most this often.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(10);

const HEAD: u8 = 0;
const BUSY: u8 = 1;
const IDLE: u8 = 2;

/// A connection's phase (`HEAD`, `BUSY`, `IDLE`) and its task's waker.
struct Phase {
    now: AtomicU8,
    /// The bytes of the request head being read, as the client sent them (hyper keeps header
    /// names only lowercased): taken by the service into the request's [`RawHead`].
    head: std::sync::Mutex<Vec<u8>>,
    /// Woken when a response is written, so that the reader starts the idle timer.
    task: AtomicWaker,
    /// Where its timeouts are counted.
    metrics: Arc<Metrics>,
}

impl Phase {
    fn get(&self) -> u8 {
        self.now.load(Ordering::Relaxed)
    }

    fn set(&self, phase: u8) {
        self.now.store(phase, Ordering::Relaxed);
    }

    fn head(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.head.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A request's head (request line and header fields) as its bytes came in, for the header
/// names in the client's spelling that payload 1.0 events carry
/// (docs/writing-functions.md, "The HTTP event"). hyper's `preserve_header_case` keeps them
/// only in a private extension, so the edge copies the head's bytes as it reads them (a
/// few hundred bytes per request; the body is not copied). Empty when the edge could not
/// tell this request's head apart (a request pipelined behind another one in the same
/// read): [`RawHead::spellings`] then gives `None` and the names stay lowercase.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawHead(Bytes);

impl RawHead {
    /// The header names of this head in arrival order, as the client spelled them, if the
    /// head parses and holds exactly the fields of `headers` (so that it is this request's
    /// head).
    pub(crate) fn spellings<'a>(&'a self, headers: &http::HeaderMap) -> Option<Vec<&'a str>> {
        if self.0.is_empty() {
            return None;
        }
        let mut fields = vec![httparse::EMPTY_HEADER; headers.len()];
        let mut request = httparse::Request::new(&mut fields);
        if !matches!(request.parse(&self.0), Ok(httparse::Status::Complete(_)))
            || request.headers.len() != headers.len()
        {
            return None;
        }
        let names: Vec<&str> = request.headers.iter().map(|h| h.name).collect();
        names.iter().all(|n| headers.contains_key(*n)).then_some(names)
    }
}

/// Most bytes of a head kept for [`RawHead`] (hyper refuses longer heads anyway).
const RAW_HEAD_CAP: usize = 256 * 1024;

/// Serves `router` on `listener` with the edge's limits until `shutdown` completes; then
/// stops accepting, closes idle connections and waits for the requests in flight to be
/// answered. Counts connections and timeouts in `metrics`. Errors: none so far (accept
/// errors are logged and retried).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    metrics: Arc<Metrics>,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(None) // ours, see the module's comment
        .max_headers(edge.max_headers)
        .max_header_size(edge.max_header_bytes);
    if edge.max_header_bytes > HYPER_DEFAULT_BUF {
        http.max_buf_size(edge.max_header_bytes);
    }
    let local_port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let shared = Arc::new(Shared {
        http,
        local_port,
        edge,
        refusal: refusal(edge.max_connections),
        client_refusal: client_refusal(edge.max_connections_per_client),
        metrics,
    });
    let per_client = PerClient::new(edge.max_connections_per_client);
    let connections = Arc::new(Semaphore::new(edge.max_connections.max(1)));
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    // `closing` tells every connection to finish; `done` is held by each and closes when the
    // last one ends.
    let (closing, closing_rx) = watch::channel(());
    let (done, mut all_done) = mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut cap_warned: Option<Instant> = None;
    let mut client_cap_warned: Option<Instant> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors, most often: the timeouts free some soon.
                    tracing::error!(error = %e, "cannot accept a connection; trying again in 1 s");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        // Small responses must not wait for delayed ACKs (Nagle).
        let _ = tcp.set_nodelay(true);
        let Some(client) = per_client.enter(peer.ip()) else {
            shared.metrics.http_connections_refused.inc();
            if client_cap_warned.is_none_or(|at| at.elapsed() >= CAP_WARNING_EVERY) {
                client_cap_warned = Some(Instant::now());
                tracing::warn!(
                    client = %peer.ip(),
                    max_connections_per_client = edge.max_connections_per_client,
                    "a client is at its connection cap: its new connections are answered 503 \
                     (see sless_http_connections_refused_total)"
                );
            }
            refuse_at_most(&refusing, tcp, &shared.client_refusal, &done);
            continue;
        };
        match connections.clone().try_acquire_owned() {
            Ok(permit) => {
                let (shared, router, closing, done) =
                    (shared.clone(), router.clone(), closing_rx.clone(), done.clone());
                tokio::spawn(async move {
                    // Held for the connection's life (named, so moved in): its place under the
                    // cap, the shutdown's count of connections, the gauge.
                    let _held = (permit, client, done, Open::count(&shared.metrics));
                    connection(tcp, peer, router, &shared, closing).await;
                });
            }
            Err(_) => {
                shared.metrics.http_connections_refused.inc();
                if cap_warned.is_none_or(|at| at.elapsed() >= CAP_WARNING_EVERY) {
                    cap_warned = Some(Instant::now());
                    tracing::warn!(
                        max_connections = edge.max_connections,
                        "at the connection cap: new connections are answered 503 (see sless_http_connections_refused_total)"
                    );
                }
                refuse_at_most(&refusing, tcp, &shared.refusal, &done);
            }
        }
    }
    drop(listener);
    drop(closing);
    drop(done);
    let _ = all_done.recv().await;
    Ok(())
}

/// Answers a connection over the cap ([`refuse`]) in a task of its own, unless
/// [`REFUSING_AT_ONCE`] are being answered already: then it is closed at once.
fn refuse_at_most(refusing: &Arc<Semaphore>, tcp: TcpStream, answer: &Bytes, done: &mpsc::Sender<()>) {
    match refusing.clone().try_acquire_owned() {
        Ok(permit) => {
            let (answer, done) = (answer.clone(), done.clone());
            tokio::spawn(async move {
                let _held = (permit, done); // named, so moved in
                refuse(tcp, &answer).await;
            });
        }
        Err(_) => drop(tcp),
    }
}

/// One open connection in `sless_http_connections`, until dropped (also when its task
/// panics).
struct Open(Arc<Metrics>);

impl Open {
    fn count(metrics: &Arc<Metrics>) -> Open {
        metrics.http_connections.inc();
        Open(metrics.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.http_connections.dec();
    }
}

/// The connections held per client address, for `max_connections_per_client`.
#[derive(Clone)]
struct PerClient {
    max: usize,
    held: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

impl PerClient {
    fn new(max: usize) -> PerClient {
        PerClient { max, held: Arc::default() }
    }

    /// A place for one more connection from `ip`, held until dropped; `None` if `ip` holds
    /// `max` already.
    fn enter(&self, ip: std::net::IpAddr) -> Option<ClientPlace> {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = held.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(ClientPlace { of: self.clone(), ip })
    }
}

/// One connection of a client under `max_connections_per_client`, until dropped (also when
/// its task panics).
struct ClientPlace {
    of: PerClient,
    ip: std::net::IpAddr,
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut held = self.of.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// What every connection task reads.
struct Shared {
    http: hyper::server::conn::http1::Builder,
    /// The listener's port (`X-Forwarded-Port` of the events).
    local_port: u16,
    edge: Edge,
    /// The whole answer to a connection over the cap.
    refusal: Bytes,
    /// The whole answer to a connection over its client's cap.
    client_refusal: Bytes,
    metrics: Arc<Metrics>,
}

/// Errors of one connection that `accept` reports; the listener is fine.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// The 503 a connection over the cap gets, as raw HTTP/1.1.
fn refusal(max_connections: usize) -> Bytes {
    problem_503(&format!("the server holds its limit of {max_connections} connections; try again later"))
}

/// The 503 a connection over its client address's cap gets, as raw HTTP/1.1.
fn client_refusal(max_per_client: usize) -> Bytes {
    problem_503(&format!(
        "this client address holds its limit of {max_per_client} connections; close one or try again later"
    ))
}

/// A 503 `too-many-connections` problem saying `detail`, as raw HTTP/1.1.
fn problem_503(detail: &str) -> Bytes {
    let body = serde_json::json!({
        "type": "https://sless.dev/problems/too-many-connections",
        "title": "Too many connections",
        "status": 503,
        "detail": detail,
    })
    .to_string();
    Bytes::from(format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ))
}

/// Answers a connection over the cap with `answer` and closes it, within [`REFUSE_FOR`]. What
/// the client sent is read and thrown away until it closes, so that it reads the answer
/// rather than a reset.
async fn refuse(mut tcp: TcpStream, answer: &[u8]) {
    let _ = tokio::time::timeout(REFUSE_FOR, async {
        tcp.write_all(answer).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = REFUSE_DRAIN_BYTES;
        loop {
            let n = tcp.read(&mut sink).await?;
            if n == 0 || n >= left {
                return Ok::<_, io::Error>(());
            }
            left -= n;
        }
    })
    .await;
}

/// Serves one connection until it closes, or until `closing` fires and its request in flight
/// (if any) is answered.
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    shared: &Shared,
    mut closing: watch::Receiver<()>,
) {
    let phase = Arc::new(Phase {
        now: AtomicU8::new(HEAD),
        head: std::sync::Mutex::new(Vec::new()),
        task: AtomicWaker::new(),
        metrics: shared.metrics.clone(),
    });
    let io = TokioIo::new(EdgeIo::new(tcp, phase.clone(), &shared.edge));
    let service = ConnService {
        router,
        peer,
        local_port: shared.local_port,
        phase,
        body_read: shared.edge.body_read_timeout,
        body_total: shared.edge.body_total_timeout,
    };
    let conn = shared.http.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = closing.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // Timeouts, resets and malformed requests: the client's doing, not an operator's.
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

/// The port a request came in on (the listener's), in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalPort(pub(crate) u16);

/// A connection's socket that closes it (returns an error from a read) when a request head
/// or the next request is late; see the module's comment.
struct EdgeIo {
    tcp: TcpStream,
    /// The connection's phase, shared with its service and response body.
    phase: Arc<Phase>,
    /// The phase this reader last acted on.
    seen: u8,
    /// When the current head or idle spell runs out.
    deadline: Instant,
    /// Armed only while a read waits.
    sleep: Pin<Box<Sleep>>,
    header: Duration,
    idle: Duration,
    /// The current head is whole in the phase's `head` (bytes after it are not kept).
    head_done: bool,
}

/// Appends `new` to the head kept so far, up to the blank line that ends it (or
/// [`RAW_HEAD_CAP`]); true when the head is whole.
fn keep_head(head: &mut Vec<u8>, new: &[u8]) -> bool {
    let from = head.len().saturating_sub(3);
    head.extend_from_slice(&new[..new.len().min(RAW_HEAD_CAP.saturating_sub(head.len()))]);
    match head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => {
            head.truncate(from + at + 4);
            true
        }
        None => head.len() >= RAW_HEAD_CAP,
    }
}

impl EdgeIo {
    fn new(tcp: TcpStream, phase: Arc<Phase>, edge: &Edge) -> Self {
        let deadline = Instant::now() + edge.header_read_timeout;
        EdgeIo {
            tcp,
            phase,
            seen: HEAD,
            deadline,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            header: edge.header_read_timeout,
            idle: edge.keep_alive_timeout,
            head_done: false,
        }
    }
}

impl AsyncRead for EdgeIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let phase = this.phase.get();
        if phase != this.seen {
            // The service took a head (BUSY) or the response is written (IDLE).
            if phase == IDLE {
                this.deadline = Instant::now() + this.idle;
            }
            this.seen = phase;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.seen == IDLE && buf.filled().len() > before {
                    // A new request's first byte: its head must follow in time.
                    this.seen = HEAD;
                    this.phase.set(HEAD);
                    this.deadline = Instant::now() + this.header;
                    this.head_done = false;
                    this.phase.head().clear();
                }
                if this.seen == HEAD && !this.head_done {
                    this.head_done = keep_head(&mut this.phase.head(), &buf.filled()[before..]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if this.seen == BUSY => Poll::Pending,
            Poll::Pending => {
                if this.sleep.deadline() != this.deadline {
                    this.sleep.as_mut().reset(this.deadline);
                }
                ready!(this.sleep.as_mut().poll(cx));
                let what = if this.seen == HEAD {
                    count_timeout(&this.phase.metrics, "head");
                    "request head read timeout"
                } else {
                    "keep-alive idle timeout"
                };
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
        }
    }
}

impl AsyncWrite for EdgeIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// One connection's service: the router, with the peer's address (`ConnectInfo`), the body's
/// timeouts and the phase kept.
struct ConnService {
    router: Router,
    peer: SocketAddr,
    /// The port the connection came in on.
    local_port: u16,
    phase: Arc<Phase>,
    body_read: Duration,
    body_total: Duration,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<MarkIdle>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        use tower::Service as _;
        self.phase.set(BUSY);
        let head = RawHead(Bytes::from(std::mem::take(&mut *self.phase.head())));
        let mut request = request
            .map(|body| TimedBody::new(body, self.body_read, self.body_total).counted(self.phase.metrics.clone()));
        request.extensions_mut().insert(ConnectInfo(self.peer));
        request.extensions_mut().insert(LocalPort(self.local_port));
        request.extensions_mut().insert(head);
        Answer { inner: self.router.clone().call(request), phase: Some(self.phase.clone()) }
    }
}

pin_project_lite::pin_project! {
    /// The router's answer with its body wrapped in [`MarkIdle`].
    struct Answer {
        #[pin]
        inner: RouteFuture<Infallible>,
        phase: Option<Arc<Phase>>,
    }
}

impl Future for Answer {
    type Output = Result<Response<MarkIdle>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match ready!(this.inner.poll(cx)) {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let phase = this.phase.take();
        if let Some(phase) = &phase {
            // This is the connection's task (hyper polls the answer on it).
            phase.task.register(cx.waker());
        }
        Poll::Ready(Ok(response.map(|body| MarkIdle { body, phase })))
    }
}

/// A response body that marks its connection idle when hyper is done with it (it is dropped
/// once written, or when the connection ends) and wakes the connection's task, whose next
/// read then starts the idle timer.
struct MarkIdle {
    body: axum::body::Body,
    phase: Option<Arc<Phase>>,
}

impl Drop for MarkIdle {
    fn drop(&mut self) {
        if let Some(phase) = &self.phase {
            phase.set(IDLE);
            phase.task.wake();
        }
    }
}

impl HttpBody for MarkIdle {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that fails with a 408 ([`AppError::RequestTimeout`]) when its next part is
/// later than `read` or the whole of it later than `total` after the head. The timer is made
/// only when a read has to wait (a body that came with its head costs nothing).
pub(crate) struct TimedBody<B = Incoming> {
    inner: B,
    read: Duration,
    total: Duration,
    /// The head's arrival plus `total`.
    total_at: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    /// The timer is set for the wait in progress.
    armed: bool,
    /// Where a timeout is counted (taken when it is).
    metrics: Option<Arc<Metrics>>,
}

impl<B> TimedBody<B> {
    fn new(inner: B, read: Duration, total: Duration) -> Self {
        TimedBody { inner, read, total, total_at: Instant::now() + total, sleep: None, armed: false, metrics: None }
    }

    /// Counts a timeout in `metrics`.
    fn counted(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

impl<B> HttpBody for TimedBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.armed = false;
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        let at = if this.armed {
            this.sleep.as_ref().map_or(this.total_at, |s| s.deadline())
        } else {
            this.armed = true;
            let at = (Instant::now() + this.read).min(this.total_at);
            match &mut this.sleep {
                Some(sleep) => sleep.as_mut().reset(at),
                None => this.sleep = Some(Box::pin(tokio::time::sleep_until(at))),
            }
            at
        };
        let Some(sleep) = &mut this.sleep else { return Poll::Pending };
        ready!(sleep.as_mut().poll(cx));
        if let Some(metrics) = this.metrics.take() {
            count_timeout(&metrics, "body"); // once, however often it is polled again
        }
        let message = if at >= this.total_at {
            format!("the request body did not arrive within {} ms", this.total.as_millis())
        } else {
            format!("no part of the request body arrived for {} ms", this.read.as_millis())
        };
        Poll::Ready(Some(Err(Box::new(AppError::RequestTimeout(message)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn count_timeout(metrics: &Metrics, part: &str) {
    metrics.http_read_timeouts.get_or_create(&ReadTimeoutLabels { part: part.into() }).inc();
}

/// The 408 of a request body that [`TimedBody`] ended, if that is why reading `e` failed.
pub(crate) fn timed_out(e: axum::Error) -> Option<AppError> {
    match e.into_inner().downcast::<AppError>() {
        Ok(e) => Some(*e),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use futures::StreamExt as _;
    use http_body::{Body as HttpBody, Frame};
    use tokio::sync::mpsc;

    use super::{RawHead, TimedBody, keep_head, timed_out};
    use crate::AppError;

    #[test]
    fn a_head_is_kept_up_to_its_blank_line_across_reads() {
        let mut head = Vec::new();
        assert!(!keep_head(&mut head, b"GET / HTTP/1.1\r\nX-GitHub-Event: push\r"));
        assert!(keep_head(&mut head, b"\n\r\nbody bytes, then GET /next"));
        assert_eq!(head, b"GET / HTTP/1.1\r\nX-GitHub-Event: push\r\n\r\n");
        let mut map = http::HeaderMap::new();
        map.insert("x-github-event", http::HeaderValue::from_static("push"));
        let raw = RawHead(bytes::Bytes::from(head));
        assert_eq!(raw.spellings(&map), Some(vec!["X-GitHub-Event"]));
        // Another request's fields: not this head.
        map.insert("x-other", http::HeaderValue::from_static("1"));
        assert_eq!(raw.spellings(&map), None);
        assert_eq!(RawHead::default().spellings(&map), None);
    }

    /// A body whose parts come from a channel; it ends when the sender is dropped.
    struct Parts(mpsc::Receiver<Bytes>);

    impl HttpBody for Parts {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|part| part.map(|b| Ok(Frame::data(b))))
        }
    }

    /// Reads `body` through axum's `Body`, as the handlers do: the bytes that came and the
    /// error that ended it, if any.
    async fn read(body: TimedBody<Parts>) -> (Vec<u8>, Option<AppError>) {
        let mut stream = axum::body::Body::new(body).into_data_stream();
        let mut got = Vec::new();
        while let Some(part) = stream.next().await {
            match part {
                Ok(bytes) => got.extend_from_slice(&bytes),
                Err(e) => return (got, Some(timed_out(e).expect("the edge's 408"))),
            }
        }
        (got, None)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test]
    async fn a_body_that_stops_coming_ends_in_a_408_after_the_read_timeout() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Bytes::from_static(b"half")).await.expect("send");
        let (got, error) = read(TimedBody::new(Parts(rx), ms(50), ms(60_000))).await;
        assert_eq!(got, b"half");
        let Some(AppError::RequestTimeout(message)) = error else { panic!("{error:?}") };
        assert_eq!(message, "no part of the request body arrived for 50 ms");
        drop(tx);
    }

    #[tokio::test]
    async fn a_body_that_trickles_ends_in_a_408_at_the_total_timeout() {
        let (tx, rx) = mpsc::channel(4);
        let trickle = tokio::spawn(async move {
            while tx.send(Bytes::from_static(b".")).await.is_ok() {
                tokio::time::sleep(ms(10)).await;
            }
        });
        // Parts every 10 ms never let the 1 s read timeout run out; the 150 ms total does.
        let (got, error) = read(TimedBody::new(Parts(rx), ms(1000), ms(150))).await;
        assert!(!got.is_empty());
        let Some(AppError::RequestTimeout(message)) = error else { panic!("{error:?}") };
        assert_eq!(message, "the request body did not arrive within 150 ms");
        trickle.abort();
    }

    #[tokio::test]
    async fn a_body_that_is_there_is_read_without_a_timer() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Bytes::from_static(b"whole")).await.expect("send");
        drop(tx);
        let mut body = TimedBody::new(Parts(rx), ms(1), ms(1));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut pinned = std::pin::Pin::new(&mut body);
        assert!(matches!(pinned.as_mut().poll_frame(&mut cx), std::task::Poll::Ready(Some(Ok(_)))));
        assert!(matches!(pinned.as_mut().poll_frame(&mut cx), std::task::Poll::Ready(None)));
        assert!(body.sleep.is_none(), "no timer for a body that never made a read wait");
    }
}

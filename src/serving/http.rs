//! HTTP/1 over TCP or TLS: an accept loop with bounded handshakes and headers, graceful
//! drain and stop, bodies read up to a limit, and the plain and JSON replies every server
//! of the operator sends.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::connections::{Admission, Busy, ConnectionLimits, Connections, Slot};

/// A response with a body.
pub(crate) type Reply = Response<Full<Bytes>>;

/// A plain-text reply.
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(body.into()))
        .unwrap_or_default()
}

/// A JSON reply.
pub fn json(status: StatusCode, body: Vec<u8>) -> Reply {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

/// Longest the requests in progress when a server stops may take to be answered.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// Time over [`STOP_GRACE`] for connections to finish closing.
pub(crate) const STOP_SLACK: Duration = Duration::from_secs(1);

/// When a server stops. Once `draining` is cancelled every response says
/// `Connection: close`, so that clients (the API server keeps its connections to a Service
/// open) move to a new connection, which the Service sends to a replica still ready. Once
/// `stop` is cancelled no connection is accepted, idle connections close and requests in
/// progress are answered first (up to [`STOP_GRACE`]). A connection closed while idle can
/// cross a request already on its way; after a drain, hardly any connection is still idle.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    pub draining: CancellationToken,
    pub stop: CancellationToken,
}

impl Lifecycle {
    /// Stops at `stop` with no drain before.
    pub fn stop_at(stop: CancellationToken) -> Self {
        Lifecycle {
            draining: CancellationToken::new(),
            stop,
        }
    }
}

/// A response body that keeps its connection busy until it has been written whole (or the
/// connection is gone): hyper drops the body then.
struct Tracked<B> {
    body: B,
    _busy: Busy,
}

impl<B> hyper::body::Body for Tracked<B>
where
    B: hyper::body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Longest a connection told to close (to make room for another) may take to finish the
/// request it is answering.
const EVICTED_GRACE: Duration = STOP_GRACE;

async fn serve_connection<IO, H, F, B>(
    io: IO,
    handler: H,
    lifecycle: Lifecycle,
    slot: Arc<Slot>,
    limits: ConnectionLimits,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let handler = Arc::new(handler);
    let draining = lifecycle.draining.clone();
    let busy_slot = slot.clone();
    let service = service_fn(move |req| {
        let handler = handler.clone();
        let draining = draining.clone();
        let busy = busy_slot.begin();
        async move {
            let mut reply = handler(req).await;
            if draining.is_cancelled() {
                reply.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(reply.map(|body| Tracked { body, _busy: busy }))
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle.max(Duration::from_millis(1)))
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    // Once told to close (idle too long, or its slot taken), it finishes the request it is
    // answering, for a while.
    let mut closing_by: Option<Instant> = None;
    let ended = loop {
        let idle_check = Instant::now() + limits.idle.saturating_sub(slot.idle_for(Instant::now()));
        tokio::select! {
            ended = connection.as_mut() => break ended,
            _ = lifecycle.stop.cancelled() => {
                connection.as_mut().graceful_shutdown();
                match tokio::time::timeout(STOP_GRACE, connection.as_mut()).await {
                    Ok(ended) => break ended,
                    Err(_) => return,
                }
            }
            _ = slot.evicted().cancelled(), if closing_by.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing_by = Some(Instant::now() + EVICTED_GRACE);
            }
            _ = tokio::time::sleep_until(idle_check), if closing_by.is_none() => {
                if slot.idle_for(Instant::now()) >= limits.idle {
                    connection.as_mut().graceful_shutdown();
                    closing_by = Some(Instant::now() + EVICTED_GRACE);
                }
            }
            _ = tokio::time::sleep_until(closing_by.unwrap_or_else(Instant::now)), if closing_by.is_some() => return,
        }
    };
    if let Err(e) = ended {
        debug!(error = %e, "connection ended with an error");
    }
}

/// Accepts connections until `lifecycle.stop`, over TLS when `tls` is given, and answers
/// each request with `handler`, holding connections within [`ConnectionLimits::DEFAULT`].
/// Returns once every connection has closed (or [`STOP_GRACE`] has passed).
pub async fn serve<H, F, B>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    lifecycle: Lifecycle,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_within(ConnectionLimits::DEFAULT, listener, tls, handler, lifecycle).await
}

/// [`serve`] holding connections within `limits` (see [`super::connections`]).
pub async fn serve_within<H, F, B>(
    limits: ConnectionLimits,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    lifecycle: Lifecycle,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slots = Connections::new(limits);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let room = slots.has_room();
        let accepted = tokio::select! {
            _ = lifecycle.stop.cancelled() => break,
            // Reaps the tasks of connections that have closed.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            // Every connection busy: new ones wait in the backlog until one is idle or closes.
            _ = slots.changed(), if !room => continue,
            a = listener.accept(), if room => a,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Every connection may have become busy since the room was seen: this one then waits,
        // accepted, for a connection to close or become idle, as it would in the backlog.
        let held = loop {
            match slots.admit(peer) {
                Admission::Admitted(held) => break Some(held),
                Admission::PeerFull => {
                    debug!(%peer, "closed a connection: every connection of its peer is busy");
                    break None;
                }
                Admission::Full => tokio::select! {
                    _ = lifecycle.stop.cancelled() => break None,
                    _ = slots.changed() => {}
                },
            }
        };
        let Some(held) = held else { continue };
        let handler = handler.clone();
        let tls = tls.clone();
        let lifecycle = lifecycle.clone();
        let limits = slots.limits();
        connections.spawn(async move {
            let slot = held.slot().clone();
            match tls {
                None => serve_connection(tcp, handler, lifecycle, slot, limits).await,
                Some(acceptor) => {
                    // A handshake holds an idle slot: a new connection may take it.
                    let handshake = tokio::select! {
                        h = tokio::time::timeout(limits.handshake, acceptor.accept(tcp)) => h,
                        _ = slot.evicted().cancelled() => return,
                    };
                    match handshake {
                        Ok(Ok(stream)) => {
                            serve_connection(stream, handler, lifecycle, slot, limits).await
                        }
                        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(held);
        });
    }
    drop(listener);
    // Each connection shuts down on its own, within STOP_GRACE; this bounds the rest.
    let _ = tokio::time::timeout(STOP_GRACE + STOP_SLACK, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

/// [`serve`] on threads of its own, with a runtime of its own: its connections are polled and
/// its requests answered there, never queued behind the rest of the process's tasks (a pass's
/// status writes, watch streams). The admission webhook is served so, because the API server
/// waits for its answers. The task returned ends when [`serve`] has returned.
pub fn serve_apart<H, F, B>(
    name: &str,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    lifecycle: Lifecycle,
) -> std::io::Result<tokio::task::JoinHandle<()>>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    run_apart(name, listener, move |listener| {
        serve(listener, tls, handler, lifecycle)
    })
}

/// Runs `work` over `listener` on threads of its own, with a runtime of its own ([`serve_apart`]
/// for a server; the Placement API runs its server and its client there). The task returned
/// ends when `work` has.
pub fn run_apart<W, F>(
    name: &str,
    listener: TcpListener,
    work: W,
) -> std::io::Result<tokio::task::JoinHandle<()>>
where
    W: FnOnce(TcpListener) -> F + Send + 'static,
    F: Future<Output = ()>,
{
    // Registered again with the new runtime's reactor, so that its readiness is seen there.
    let listener = listener.into_std()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(APART_THREADS)
        .thread_name(name)
        .enable_all()
        .build()?;
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => work(listener).await,
                    Err(e) => warn!(error = %e, "cannot serve on a runtime of its own"),
                }
            });
            // Tasks the requests left behind (an Event being published) get a moment.
            runtime.shutdown_timeout(STOP_SLACK);
            let _ = done.send(());
        })?;
    Ok(tokio::spawn(async move {
        let _ = ended.await;
    }))
}

/// Worker threads of a runtime of [`serve_apart`]: two, so that one slow request (a claim
/// that waits for the leader) does not hold the others.
const APART_THREADS: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A plain-HTTP server whose handler waits `delay` before answering "ok".
    async fn start(
        delay: Duration,
    ) -> (std::net::SocketAddr, Lifecycle, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lifecycle = Lifecycle::default();
        let handler = move |_req: Request<Incoming>| async move {
            tokio::time::sleep(delay).await;
            text(StatusCode::OK, "ok\n")
        };
        let served = tokio::spawn(serve(listener, None, handler, lifecycle.clone()));
        (addr, lifecycle, served)
    }

    const GET: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: kubeplace\r\n\r\n";

    /// A server within `limits` whose handler answers "ok" at once, or after `slow` for
    /// `GET /slow`.
    async fn start_within(
        limits: ConnectionLimits,
        slow: Duration,
    ) -> (std::net::SocketAddr, Lifecycle) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lifecycle = Lifecycle::default();
        let handler = move |req: Request<Incoming>| async move {
            if req.uri().path() == "/slow" {
                tokio::time::sleep(slow).await;
            }
            text(StatusCode::OK, "ok\n")
        };
        tokio::spawn(serve_within(
            limits,
            listener,
            None,
            handler,
            lifecycle.clone(),
        ));
        (addr, lifecycle)
    }

    /// Connects from `source` (any 127.0.0.0/8 address is this host's loopback).
    async fn connect_from(source: &str, to: std::net::SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        socket.connect(to).await.unwrap()
    }

    const SLOW: &[u8] = b"GET /slow HTTP/1.1\r\nHost: kubeplace\r\n\r\n";

    #[tokio::test]
    async fn a_new_connection_to_a_full_server_takes_the_slot_idle_longest() {
        let limits = ConnectionLimits {
            max: 2,
            per_peer: 2,
            ..ConnectionLimits::DEFAULT
        };
        let (addr, lifecycle) = start_within(limits, Duration::ZERO).await;
        // Two connections held open by different peers, each answered once and now idle.
        let mut first = connect_from("127.0.0.2", addr).await;
        first.write_all(GET).await.unwrap();
        assert!(response(&mut first).await.starts_with("http/1.1 200"));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut second = connect_from("127.0.0.3", addr).await;
        second.write_all(GET).await.unwrap();
        assert!(response(&mut second).await.starts_with("http/1.1 200"));
        // A third is answered at once: the first, idle longest, is closed for it.
        let mut third = connect_from("127.0.0.4", addr).await;
        third.write_all(GET).await.unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(2), response(&mut third)).await;
        assert!(
            answered
                .expect("answered at once")
                .starts_with("http/1.1 200")
        );
        assert!(
            closed(&mut first).await,
            "the connection idle longest stayed open"
        );
        second.write_all(GET).await.unwrap();
        assert!(response(&mut second).await.starts_with("http/1.1 200"));
        lifecycle.stop.cancel();
    }

    #[tokio::test]
    async fn busy_connections_keep_their_slots_and_the_next_waits() {
        let limits = ConnectionLimits {
            max: 2,
            per_peer: 2,
            ..ConnectionLimits::DEFAULT
        };
        let (addr, lifecycle) = start_within(limits, Duration::from_millis(800)).await;
        let mut held = Vec::new();
        for source in ["127.0.0.2", "127.0.0.3"] {
            let mut c = connect_from(source, addr).await;
            c.write_all(SLOW).await.unwrap();
            held.push(c);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Both are answering: a third is not served while they are...
        let mut third = connect_from("127.0.0.4", addr).await;
        third.write_all(GET).await.unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
        assert!(early.is_err(), "served beyond the limit: {early:?}");
        // ...and is once one of them has answered.
        let answered = tokio::time::timeout(Duration::from_secs(5), response(&mut third)).await;
        assert!(
            answered
                .expect("served once a slot freed")
                .starts_with("http/1.1 200")
        );
        for c in &mut held {
            assert!(response(c).await.starts_with("http/1.1 200"));
        }
        lifecycle.stop.cancel();
    }

    #[tokio::test]
    async fn one_peer_holds_no_more_than_its_share() {
        let limits = ConnectionLimits {
            max: 100,
            per_peer: 3,
            ..ConnectionLimits::DEFAULT
        };
        let (addr, lifecycle) = start_within(limits, Duration::from_secs(3)).await;
        // A peer keeps three connections busy...
        let mut busy = Vec::new();
        for _ in 0..3 {
            let mut c = connect_from("127.0.0.2", addr).await;
            c.write_all(SLOW).await.unwrap();
            busy.push(c);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // ...so its fourth is closed unanswered, while another peer is answered.
        let mut fourth = connect_from("127.0.0.2", addr).await;
        let _ = fourth.write_all(GET).await;
        assert!(closed(&mut fourth).await, "a peer held more than its share");
        let mut other = connect_from("127.0.0.3", addr).await;
        other.write_all(GET).await.unwrap();
        assert!(response(&mut other).await.starts_with("http/1.1 200"));
        lifecycle.stop.cancel();
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_the_idle_time() {
        let limits = ConnectionLimits {
            idle: Duration::from_millis(300),
            ..ConnectionLimits::DEFAULT
        };
        let (addr, lifecycle) = start_within(limits, Duration::from_millis(600)).await;
        let mut c = TcpStream::connect(addr).await.unwrap();
        // A request longer than the idle time is answered: busy is not idle.
        c.write_all(SLOW).await.unwrap();
        assert!(response(&mut c).await.starts_with("http/1.1 200"));
        let started = std::time::Instant::now();
        assert!(closed(&mut c).await, "an idle connection stayed open");
        let after = started.elapsed();
        assert!(
            after >= Duration::from_millis(250) && after < Duration::from_secs(3),
            "closed after {after:?}"
        );
        // A connection that never sends a request is closed as well.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        assert!(closed(&mut silent).await, "a silent connection stayed open");
        lifecycle.stop.cancel();
    }

    /// Handshakes that never start hold no slot a TLS client needs: with every slot taken
    /// by connections that sent nothing, a real client's handshake and request are
    /// answered at once.
    #[tokio::test]
    async fn stalled_handshakes_give_way_to_a_client() {
        use rustls::pki_types::ServerName;
        use tokio_rustls::TlsConnector;
        let served = crate::serving::certs::self_signed("127.0.0.1").unwrap();
        let resolver = crate::serving::certs::CertResolver::new(served.certified_key().unwrap());
        let acceptor = TlsAcceptor::from(crate::serving::certs::server_config(resolver).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lifecycle = Lifecycle::default();
        let handler = |_req: Request<Incoming>| async { text(StatusCode::OK, "ok\n") };
        let limits = ConnectionLimits {
            max: 8,
            per_peer: 8,
            ..ConnectionLimits::DEFAULT
        };
        tokio::spawn(serve_within(
            limits,
            listener,
            Some(acceptor),
            handler,
            lifecycle.clone(),
        ));
        let mut stalled = Vec::new();
        for i in 0..8 {
            stalled.push(connect_from(&format!("127.0.0.{}", 2 + i), addr).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let tcp = connect_from("127.0.0.20", addr).await;
        let config = crate::serving::certs::client_config(&served.ca_pem).unwrap();
        let mut tls = TlsConnector::from(config)
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .expect("the handshake");
        tls.write_all(GET).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&got).ends_with("ok\n") {
            let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
                .await
                .expect("answered")
                .unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "answered after {:?}",
            started.elapsed()
        );
        lifecycle.stop.cancel();
    }

    /// Reads one response (this handler's bodies are 3 bytes) as lower-case text.
    async fn response(stream: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&got).ends_with("ok\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the connection closed before a whole response: {got:?}"
            );
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).to_lowercase()
    }

    async fn closed(stream: &mut TcpStream) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn once_draining_each_response_closes_its_connection() {
        let (addr, lifecycle, _served) = start(Duration::ZERO).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(GET).await.unwrap();
        let first = response(&mut stream).await;
        assert!(first.starts_with("http/1.1 200"), "{first}");
        assert!(!first.contains("connection: close"), "{first}");
        // Kept alive: a second request on the same connection.
        lifecycle.draining.cancel();
        stream.write_all(GET).await.unwrap();
        let second = response(&mut stream).await;
        assert!(second.starts_with("http/1.1 200"), "{second}");
        assert!(second.contains("connection: close"), "{second}");
        assert!(
            closed(&mut stream).await,
            "the server kept the connection open"
        );
        // New connections are still answered while draining.
        let mut again = TcpStream::connect(addr).await.unwrap();
        again.write_all(GET).await.unwrap();
        assert!(response(&mut again).await.contains("connection: close"));
    }

    #[tokio::test]
    async fn at_stop_requests_in_progress_are_answered_and_idle_connections_close() {
        let (addr, lifecycle, served) = start(Duration::from_millis(400)).await;
        let mut busy = TcpStream::connect(addr).await.unwrap();
        let mut idle = TcpStream::connect(addr).await.unwrap();
        busy.write_all(GET).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        lifecycle.stop.cancel();
        assert!(
            closed(&mut idle).await,
            "an idle connection stayed open after stop"
        );
        let answer = response(&mut busy).await;
        assert!(answer.starts_with("http/1.1 200"), "{answer}");
        assert!(closed(&mut busy).await);
        tokio::time::timeout(Duration::from_secs(5), served)
            .await
            .expect("serve returns once its connections are closed")
            .unwrap();
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener still accepts after stop"
        );
    }

    /// Served apart, requests are answered while every worker of the caller's runtime is
    /// busy; served on that runtime, the same request waits (the control case); either way the
    /// server's task ends at stop.
    #[test]
    fn served_apart_requests_are_answered_while_the_callers_runtime_is_busy() {
        let answered_while_busy = |apart: bool| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let lifecycle = Lifecycle::default();
                let handler = |_req: Request<Incoming>| async move { text(StatusCode::OK, "ok\n") };
                let served = if apart {
                    serve_apart("test-apart", listener, None, handler, lifecycle.clone()).unwrap()
                } else {
                    tokio::spawn(serve(listener, None, handler, lifecycle.clone()))
                };
                tokio::task::yield_now().await;
                // A client on a thread of its own, while this runtime's only thread is busy.
                let client = std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut stream = std::net::TcpStream::connect(addr).unwrap();
                    stream
                        .set_read_timeout(Some(Duration::from_millis(500)))
                        .unwrap();
                    stream.write_all(GET).unwrap();
                    let mut buf = [0u8; 256];
                    matches!(stream.read(&mut buf), Ok(n) if n > 0)
                });
                std::thread::sleep(Duration::from_millis(900));
                let answered = client.join().unwrap();
                lifecycle.stop.cancel();
                tokio::time::timeout(Duration::from_secs(5), served)
                    .await
                    .expect("the server's task ends at stop")
                    .unwrap();
                answered
            })
        };
        assert!(answered_while_busy(true));
        assert!(!answered_while_busy(false));
    }
}

//! HTTP/1 over TCP or TLS: an accept loop with bounded handshakes and headers, graceful
//! drain and stop, bodies read up to a limit, and the plain and JSON replies every server
//! of the operator sends.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Longest a TLS handshake or a request's headers may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

async fn serve_connection<IO, H, F, B>(io: IO, handler: H, lifecycle: Lifecycle)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let handler = Arc::new(handler);
    let draining = lifecycle.draining.clone();
    let service = service_fn(move |req| {
        let handler = handler.clone();
        let draining = draining.clone();
        async move {
            let mut reply = handler(req).await;
            if draining.is_cancelled() {
                reply.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(reply)
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = lifecycle.stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(STOP_GRACE, connection.as_mut()).await {
                Ok(ended) => ended,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = ended {
        debug!(error = %e, "connection ended with an error");
    }
}

/// Accepts connections until `lifecycle.stop`, over TLS when `tls` is given, and answers
/// each request with `handler`. Returns once every connection has closed (or
/// [`STOP_GRACE`] has passed).
pub async fn serve<H, F, B>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    lifecycle: Lifecycle,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_at_most(MAX_CONNECTIONS, listener, tls, handler, lifecycle).await
}

/// Connections one server holds open at once. Each costs its buffers (some KiB) and a task;
/// an idle one closes after [`HANDSHAKE_TIMEOUT`] without a request. Beyond it, new
/// connections wait in the listener's backlog until one closes.
pub const MAX_CONNECTIONS: usize = 1024;

/// [`serve`] holding at most `max` connections open at once.
pub async fn serve_at_most<H, F, B>(
    max: usize,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    lifecycle: Lifecycle,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = lifecycle.stop.cancelled() => break,
            // Reaps the tasks of connections that have closed.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            a = listener.accept(), if connections.len() < max => a,
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
        let handler = handler.clone();
        let tls = tls.clone();
        let lifecycle = lifecycle.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(tcp, handler, lifecycle).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_connection(stream, handler, lifecycle).await,
                        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
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
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
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

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body is larger than {} MiB", .max / (1024 * 1024))]
    TooLarge { max: usize },
    #[error("cannot read the request body: {0}")]
    Unreadable(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads a body of at most `max` bytes. A body whose length is announced (hyper's size hint
/// holds its `Content-Length`) over `max` is refused before any of it is read.
pub(crate) async fn read_body<B>(body: B, max: usize) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.size_hint().lower() > max as u64 {
        return Err(BodyError::TooLarge { max });
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge { max }),
        Err(e) => Err(BodyError::Unreadable(e)),
    }
}

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

    #[tokio::test]
    async fn connections_beyond_the_limit_wait_until_one_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lifecycle = Lifecycle::default();
        let handler = |_req: Request<Incoming>| async { text(StatusCode::OK, "ok\n") };
        tokio::spawn(serve_at_most(2, listener, None, handler, lifecycle.clone()));
        // Two connections held open, each answered once.
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(GET).await.unwrap();
            assert!(response(&mut c).await.starts_with("http/1.1 200"));
            held.push(c);
        }
        // A third is not served while they are open...
        let mut third = TcpStream::connect(addr).await.unwrap();
        third.write_all(GET).await.unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
        assert!(early.is_err(), "served beyond the limit: {early:?}");
        // ...and is as soon as one closes.
        drop(held.pop());
        let answered = tokio::time::timeout(Duration::from_secs(5), response(&mut third)).await;
        assert!(
            answered
                .expect("served once a slot freed")
                .starts_with("http/1.1 200")
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

//! HTTP(S) serving: an accept loop with bounded handshakes, headers, bodies and request
//! time, and the webhook's routes.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
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

use super::{MAX_BODY, REQUEST_TIMEOUT, Webhook, invalid};

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

async fn serve_connection<IO, H, F>(io: IO, handler: H)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    let handler = Arc::new(handler);
    let service = service_fn(move |req| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(handler(req).await) }
    });
    if let Err(e) = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .serve_connection(TokioIo::new(io), service)
        .await
    {
        debug!(error = %e, "connection ended with an error");
    }
}

/// Accepts connections until `cancel`, over TLS when `tls` is given, and answers each
/// request with `handler`.
pub async fn serve<H, F>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    cancel: CancellationToken,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
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
        tokio::spawn(async move {
            match tls {
                None => serve_connection(tcp, handler).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_connection(stream, handler).await,
                        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// Reads a body of at most `max` bytes.
pub(crate) async fn read_body(body: Incoming, max: usize) -> Result<Bytes, String> {
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(format!(
            "the request body is larger than {} MiB",
            max / (1024 * 1024)
        )),
        Err(e) => Err(format!("cannot read the request body: {e}")),
    }
}

fn review_reply(review: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(review) {
        Ok(body) => json(StatusCode::OK, body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Answers a request to the webhook: `POST /validate/<plural>` with an AdmissionReview,
/// and `GET /healthz`.
pub async fn handle(webhook: Arc<Webhook>, request: Request<Incoming>) -> Reply {
    let path = request.uri().path().to_string();
    if path == "/healthz" {
        return text(StatusCode::OK, "ok\n");
    }
    let Some(plural) = path.strip_prefix("/validate/").map(str::to_string) else {
        return text(
            StatusCode::NOT_FOUND,
            "kubeplace's webhook serves /validate/<plural>\n",
        );
    };
    let Some(resource) = kubeplace_api::Kind::from_plural(&plural) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("kubeplace serves no kind at /validate/{plural}\n"),
        );
    };
    if request.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "POST an AdmissionReview\n");
    }
    let refuse = |message: String| {
        webhook
            .metrics()
            .admission(resource.as_str(), "invalid", Duration::ZERO);
        let mut review = invalid(message, None).into_review();
        review.types.api_version = super::ADMISSION_API_VERSION.into();
        review_reply(&review)
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return refuse(format!(
            "the request body is larger than {} MiB",
            MAX_BODY / (1024 * 1024)
        ));
    }
    let forwarded = request
        .headers()
        .contains_key(super::claims_route::FORWARDED_HEADER);
    let work = async {
        let body = read_body(request.into_body(), MAX_BODY).await?;
        Ok::<_, String>(webhook.review_from(&plural, &body, forwarded).await)
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, work).await {
        Ok(Ok(review)) => review_reply(&review),
        Ok(Err(message)) => refuse(message),
        Err(_) => refuse(format!(
            "the request took longer than {} s",
            REQUEST_TIMEOUT.as_secs()
        )),
    }
}

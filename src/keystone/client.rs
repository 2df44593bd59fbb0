//! Requests to Keystone's identity API: one HTTP/1.1 connection a request (they are rare:
//! answers are cached), bounded in connecting and in all, over TLS checked against
//! `cafile` or the system's CAs.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The largest answer read from Keystone: a token's body with a large catalog fits.
const MAX_ANSWER: usize = 4 << 20;

/// What Keystone answered.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be made: nothing reached Keystone, so asking again is safe.
    #[error("{0}")]
    Connect(String),
    /// The request was sent, or could not be made.
    #[error("{0}")]
    Failed(String),
}

/// A client of one Keystone.
pub struct Client {
    tls: Option<TlsConnector>,
    connect_timeout: Duration,
    request_timeout: Duration,
}

impl Client {
    /// A client for `identity_url`'s scheme; https checks Keystone's certificate against
    /// the PEM file `cafile`, else the system's CAs.
    pub fn new(
        identity_url: &str,
        cafile: Option<&std::path::Path>,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Client, String> {
        let tls = if identity_url.starts_with("https://") {
            let config = match cafile {
                Some(path) => {
                    let pem = std::fs::read_to_string(path).map_err(|e| {
                        format!("[keystone_authtoken] cafile = {}: {e}", path.display())
                    })?;
                    crate::serving::certs::client_config(&pem).map_err(|e| {
                        format!("[keystone_authtoken] cafile = {}: {e}", path.display())
                    })?
                }
                None => system_roots()?,
            };
            Some(TlsConnector::from(config))
        } else {
            None
        };
        Ok(Client {
            tls,
            connect_timeout,
            request_timeout,
        })
    }

    /// Sends one request; an error says why no answer came (refused, timed out, TLS).
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, SendError> {
        match tokio::time::timeout(
            self.request_timeout,
            self.send_unbounded(method, url, headers, body),
        )
        .await
        {
            Ok(answer) => answer,
            Err(_) => Err(SendError::Failed(format!(
                "no answer within {:?}",
                self.request_timeout
            ))),
        }
    }

    async fn send_unbounded(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, SendError> {
        let failed = SendError::Failed;
        let uri: Uri = url.parse().map_err(|e| failed(format!("{url:?}: {e}")))?;
        let host = uri.host().unwrap_or_default();
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tcp = tokio::time::timeout(
            self.connect_timeout,
            TcpStream::connect((bare.as_str(), port)),
        )
        .await
        .map_err(|_| {
            SendError::Connect(format!(
                "cannot connect to {bare}:{port} within {:?}",
                self.connect_timeout
            ))
        })?
        .map_err(|e| SendError::Connect(format!("cannot connect to {bare}:{port}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let mut request = Request::builder()
            .method(method)
            .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
            .header(header::HOST, authority)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, "kubeplace-keystone");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| failed(format!("cannot make the request: {e}")))?;
        match &self.tls {
            Some(connector) if https => {
                let name = ServerName::try_from(bare.clone())
                    .map_err(|e| failed(format!("{bare:?} is not a server name: {e}")))?;
                let stream = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| failed(format!("TLS with {bare}:{port} failed: {e}")))?;
                exchange(stream, request).await.map_err(failed)
            }
            _ => exchange(tcp, request).await.map_err(failed),
        }
    }
}

async fn exchange<IO>(io: IO, request: Request<Full<Bytes>>) -> Result<Answer, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP failed: {e}"))?;
    let driver = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP failed: {e}"))?;
    let (parts, body) = response.into_parts();
    let body = http_body_util::Limited::new(body, MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?
        .to_bytes();
    driver.abort();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// A TLS client configuration trusting the system's CAs.
fn system_roots() -> Result<Arc<rustls::ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "Keystone's auth_url is https and no system CA certificates were found; give [keystone_authtoken] cafile".into(),
        );
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

//! A small client of a live Placement for `kubeplace placement import` and `export`: one
//! HTTP/1.1 connection kept alive (made again when the server closes it), `X-Auth-Token`,
//! microversion 1.39, JSON bodies, a deadline per request. `https://` is checked against the
//! CA given with `--ca-file` (no system roots are built in).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::serving::certs;

/// The microversion every request is made at: Placement 16's last.
pub const MICROVERSION: &str = "1.39";
/// Longest one request may take, connecting included.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

/// Why a request to Placement did not give what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("Placement at {url} cannot be reached: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "Placement at {url} refused the token ({status} on {method} {path}); give a token it takes for an admin with --token"
    )]
    Token {
        url: String,
        status: u16,
        method: Method,
        path: String,
    },
    #[error("Placement answered {status} to {method} {path}: {detail}")]
    Refused {
        status: u16,
        method: Method,
        path: String,
        detail: String,
    },
    #[error("Placement's answer to {method} {path} is not what Placement 16 sends: {reason}")]
    Unexpected {
        method: Method,
        path: String,
        reason: String,
    },
}

impl ClientError {
    /// The HTTP status of a refusal, if it was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Refused { status, .. } | ClientError::Token { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

/// A client of one Placement endpoint.
pub struct PlacementClient {
    runtime: tokio::runtime::Runtime,
    base: Uri,
    url: String,
    token: String,
    tls: Option<TlsConnector>,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Requests made, for progress and figures.
    pub requests: u64,
}

impl PlacementClient {
    /// A client of `url` (`http://` or `https://`, with an optional path prefix), sending
    /// `token`; `https://` needs `ca_file`.
    pub fn new(url: &str, token: &str, ca_file: Option<&Path>) -> Result<PlacementClient, String> {
        let trimmed = url.trim_end_matches('/');
        let base: Uri = trimmed
            .parse()
            .map_err(|_| format!("{url:?} is not a URL; give http://HOST:PORT or https://HOST:PORT, with Placement's path prefix if it has one"))?;
        let https = match base.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "{url:?}: expected http://HOST[:PORT][/PREFIX] or https://HOST[:PORT][/PREFIX]"
                ));
            }
        };
        if base.host().is_none() {
            return Err(format!("{url:?} names no host"));
        }
        let tls = match (https, ca_file) {
            (true, Some(path)) => {
                let pem = std::fs::read_to_string(path)
                    .map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
                let config = certs::client_config(&pem)
                    .map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
                Some(TlsConnector::from(config))
            }
            (true, None) => {
                return Err(format!(
                    "{url}: give --ca-file with the CA that signed Placement's certificate"
                ));
            }
            (false, _) => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        Ok(PlacementClient {
            runtime,
            base,
            url: trimmed.to_string(),
            token: token.to_string(),
            tls,
            sender: None,
            requests: 0,
        })
    }

    /// Another client of the same endpoint, with a connection of its own (for reads made
    /// side by side).
    pub fn sibling(&self) -> Result<PlacementClient, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Unreachable {
                url: self.url.clone(),
                reason: format!("cannot start the runtime: {e}"),
            })?;
        Ok(PlacementClient {
            runtime,
            base: self.base.clone(),
            url: self.url.clone(),
            token: self.token.clone(),
            tls: self.tls.clone(),
            sender: None,
            requests: 0,
        })
    }

    /// The endpoint, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `GET path`: the JSON body of a 2xx answer.
    pub fn get(&mut self, path: &str) -> Result<Value, ClientError> {
        let (status, body) = self.send(Method::GET, path, None)?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(self.refusal(status, Method::GET, path, &body))
        }
    }

    /// A request whose answer must be 2xx; its body (null when empty).
    pub fn write(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let (status, answer) = self.send(method.clone(), path, body)?;
        if (200..300).contains(&status) {
            Ok(answer)
        } else {
            Err(self.refusal(status, method, path, &answer))
        }
    }

    fn refusal(&self, status: u16, method: Method, path: &str, body: &Value) -> ClientError {
        if status == 401 || status == 403 {
            return ClientError::Token {
                url: self.url.clone(),
                status,
                method,
                path: path.to_string(),
            };
        }
        let detail = body["errors"][0]["detail"]
            .as_str()
            .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| body.to_string());
        ClientError::Refused {
            status,
            method,
            path: path.to_string(),
            detail,
        }
    }

    /// Sends one request; the status and the JSON body (null when empty).
    pub fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ClientError> {
        self.requests += 1;
        // A kept connection the server closed is made again, once.
        let mut attempt = 0;
        loop {
            let fresh = self.sender.is_none();
            match self.try_send(method.clone(), path, body) {
                Ok(answer) => return Ok(answer),
                Err(Failure::Connection(reason)) => {
                    self.sender = None;
                    if fresh || attempt == 1 {
                        return Err(ClientError::Unreachable {
                            url: self.url.clone(),
                            reason,
                        });
                    }
                    attempt += 1;
                }
                Err(Failure::Answer(reason)) => {
                    self.sender = None;
                    return Err(ClientError::Unexpected {
                        method,
                        path: path.to_string(),
                        reason,
                    });
                }
            }
        }
    }

    fn try_send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), Failure> {
        let prefix = self.base.path().trim_end_matches('/');
        let full = format!("{prefix}{path}");
        let authority = self
            .base
            .authority()
            .map_or(String::new(), |a| a.to_string());
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let mut request = Request::builder()
            .method(method)
            .uri(&full)
            .header(header::HOST, authority)
            .header("X-Auth-Token", &self.token)
            .header("OpenStack-API-Version", format!("placement {MICROVERSION}"))
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| Failure::Answer(e.to_string()))?;
        let existing = self.sender.take();
        let base = self.base.clone();
        let tls = self.tls.clone();
        let (sender, answer) = self.runtime.block_on(async move {
            let work = async move {
                let mut sender = match existing {
                    Some(s) if !s.is_closed() => s,
                    _ => connect(&base, tls.as_ref()).await?,
                };
                sender
                    .ready()
                    .await
                    .map_err(|e| Failure::Connection(e.to_string()))?;
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| Failure::Connection(format!("no answer: {e}")))?;
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| Failure::Connection(format!("the answer broke off: {e}")))?
                    .to_bytes();
                let value = if body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&body).map_err(|e| {
                        Failure::Answer(format!(
                            "status {status} with a body that is not JSON ({e}): {}",
                            String::from_utf8_lossy(&body[..body.len().min(200)])
                        ))
                    })?
                };
                Ok::<_, Failure>((sender, (status, value)))
            };
            match tokio::time::timeout(REQUEST_DEADLINE, work).await {
                Ok(Ok((sender, answer))) => (Some(sender), Ok(answer)),
                Ok(Err(e)) => (None, Err(e)),
                Err(_) => (
                    None,
                    Err(Failure::Connection(format!(
                        "no answer within {} s",
                        REQUEST_DEADLINE.as_secs()
                    ))),
                ),
            }
        });
        self.sender = sender;
        answer
    }
}

enum Failure {
    /// The connection could not be made or broke: worth one more try on a kept one.
    Connection(String),
    /// An answer came, but not one this client can read.
    Answer(String),
}

async fn connect(
    base: &Uri,
    tls: Option<&TlsConnector>,
) -> Result<SendRequest<Full<Bytes>>, Failure> {
    let host = base.host().unwrap_or_default();
    let https = base.scheme_str() == Some("https");
    let port = base.port_u16().unwrap_or(if https { 443 } else { 80 });
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = TcpStream::connect((bare, port))
        .await
        .map_err(|e| Failure::Connection(format!("cannot connect to {bare}:{port}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    match tls {
        Some(connector) => {
            let name = ServerName::try_from(bare.to_string())
                .map_err(|e| Failure::Connection(format!("{bare:?} is not a server name: {e}")))?;
            let stream = connector
                .connect(name, tcp)
                .await
                .map_err(|e| Failure::Connection(format!("TLS failed: {e}")))?;
            handshake(stream).await
        }
        None => handshake(tcp).await,
    }
}

async fn handshake<IO>(io: IO) -> Result<SendRequest<Full<Bytes>>, Failure>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| Failure::Connection(format!("HTTP failed: {e}")))?;
    tokio::spawn(connection);
    Ok(sender)
}

//! A small client of a live Placement for `kubeplace placement import` and `export`: one
//! HTTP/1.1 connection kept alive (made again when the server closes it), `X-Auth-Token`,
//! microversion 1.39, JSON bodies, a deadline per request. `https://` is checked against the
//! CA given with `--ca-file` (no system roots are built in).
//!
//! The token is a static one (`--token`), or the Keystone token of the service user of
//! `--keystone-authtoken`: logged in before the first request, renewed shortly before it
//! expires and when Placement answers 401 (a long import outlives a token), and shared by
//! the clients reading side by side. With Keystone and no URL, Placement's endpoint is the
//! one the login's service catalog lists.

use std::path::{Path, PathBuf};
use std::sync::Arc;
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

use crate::args::KeystoneArgs;
use crate::placement_api::keystone::catalog::{self, Wanted};
use crate::placement_api::keystone::service::{LoginError, ServiceUser};
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
    #[error("Placement at {url} refused the token ({status} on {method} {path}); {hint}")]
    Token {
        url: String,
        status: u16,
        method: Method,
        path: String,
        /// What to change, for the kind of token sent.
        hint: String,
    },
    /// No Keystone token could be had.
    #[error("{0}")]
    Keystone(#[from] LoginError),
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

/// What requests carry in `X-Auth-Token`.
#[derive(Clone)]
pub enum Credential {
    /// One token, sent as given.
    Static(String),
    /// The service user's Keystone token, renewed as it nears expiry and on a 401.
    Keystone(Arc<ServiceUser>),
}

/// How to reach a live Placement (`placement import` and `export`).
#[derive(clap::Args, Debug, Clone)]
pub struct SourceAuth {
    /// The token sent in `X-Auth-Token` (a Keystone token of an admin, or the static token of
    /// a Placement with `auth_strategy = noauth2`, which takes `admin`) [default: $OS_TOKEN,
    /// else admin]. Not with --keystone-authtoken.
    #[arg(long, value_name = "TOKEN", conflicts_with = "keystone_authtoken")]
    pub token: Option<String>,
    #[command(flatten)]
    pub keystone: KeystoneArgs,
    /// The CA (PEM) an `https://` Placement's certificate is checked against [default: the
    /// `cafile` of --keystone-authtoken's section, if any].
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Connections Placement is read over side by side (1 to 32).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub connections: u16,
}

/// Why no client was made: what was given is wrong (exit 2), or what it names failed.
#[derive(Debug)]
pub enum Opening {
    BadInput(String),
    Failed(String),
}

impl SourceAuth {
    /// A client of `url` (given with `flag`), or of the Placement endpoint in Keystone's
    /// catalog when none is given; and a line saying where the endpoint came from. With
    /// Keystone, the service user logs in first, so bad credentials or an unreachable
    /// Keystone are known before anything is read or written.
    pub fn open(
        &self,
        url: Option<&str>,
        flag: &str,
    ) -> Result<(PlacementClient, Option<String>), Opening> {
        let config = self.keystone.config().map_err(Opening::BadInput)?;
        let Some(config) = config else {
            let token = self
                .token
                .clone()
                .or_else(|| std::env::var("OS_TOKEN").ok())
                .unwrap_or_else(|| "admin".to_string());
            let url = url.ok_or_else(|| {
                Opening::BadInput(format!(
                    "give {flag} URL, or --keystone-authtoken FILE to find Placement in Keystone's catalog"
                ))
            })?;
            let client =
                PlacementClient::new(url, Credential::Static(token), self.ca_file.as_deref())
                    .map_err(|e| Opening::BadInput(format!("{flag} {e}")))?;
            return Ok((client, None));
        };
        let ca_file = self.ca_file.clone().or(config.cafile.clone());
        let wanted = Wanted {
            service_type: "placement".into(),
            interfaces: if config.interfaces.is_empty() {
                catalog::DEFAULT_INTERFACES
                    .iter()
                    .map(|i| i.to_string())
                    .collect()
            } else {
                config.interfaces.clone()
            },
            region: config.region_name.clone(),
        };
        let user = Arc::new(ServiceUser::new(config).map_err(Opening::BadInput)?);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Opening::Failed(format!("cannot start the runtime: {e}")))?;
        let login = runtime
            .block_on(user.login_with_catalog())
            .map_err(|e| Opening::Failed(e.to_string()))?;
        let (url, said) = match url {
            Some(u) => (u.to_string(), None),
            None => {
                let found =
                    catalog::endpoint(login.catalog.as_ref().unwrap_or(&Value::Null), &wanted)
                        .map_err(|e| {
                            Opening::BadInput(format!(
                                "{e}; register Placement's endpoint in Keystone, or give {flag} URL"
                            ))
                        })?;
                let said = format!("Placement's endpoint in Keystone's catalog: {found}");
                (found, Some(said))
            }
        };
        let client = PlacementClient::new(&url, Credential::Keystone(user), ca_file.as_deref())
            .map_err(|e| match said {
                Some(_) => {
                    Opening::BadInput(format!("Placement's endpoint in Keystone's catalog, {e}"))
                }
                None => Opening::BadInput(format!("{flag} {e}")),
            })?;
        Ok((client, said))
    }
}

/// A client of one Placement endpoint.
pub struct PlacementClient {
    runtime: tokio::runtime::Runtime,
    base: Uri,
    url: String,
    credential: Credential,
    tls: Option<TlsConnector>,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Requests made, for progress and figures.
    pub requests: u64,
}

impl PlacementClient {
    /// A client of `url` (`http://` or `https://`, with an optional path prefix), sending
    /// `credential`'s token; `https://` needs `ca_file`.
    pub fn new(
        url: &str,
        credential: Credential,
        ca_file: Option<&Path>,
    ) -> Result<PlacementClient, String> {
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
            credential,
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
            credential: self.credential.clone(),
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
            let hint = match &self.credential {
                Credential::Static(_) => "give a token it takes for an admin with --token".into(),
                Credential::Keystone(user) => {
                    let (who, project) = user.who();
                    let keystone = &user.config().identity_url;
                    if status == 401 {
                        format!(
                            "it did not take a fresh token of {who} in {project} from Keystone at {keystone}: does it validate tokens with that Keystone?"
                        )
                    } else {
                        format!(
                            "{who} in {project} (--keystone-authtoken) needs the admin or service role in that project"
                        )
                    }
                }
            };
            return ClientError::Token {
                url: self.url.clone(),
                status,
                method,
                path: path.to_string(),
                hint,
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

    /// The token to send: the static one, or the service user's (renewed when near expiry,
    /// or when it is `refused`).
    fn token(&self, refused: Option<&str>) -> Result<String, ClientError> {
        match &self.credential {
            Credential::Static(token) => Ok(token.clone()),
            Credential::Keystone(user) => Ok(self.runtime.block_on(user.token(refused))?),
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
        let mut token = self.token(None)?;
        let mut renewed = false;
        // A kept connection the server closed is made again, once.
        let mut attempt = 0;
        loop {
            let fresh = self.sender.is_none();
            match self.try_send(method.clone(), path, body, &token) {
                // A Keystone token Placement stopped taking (revoked, or expired early): a
                // fresh one, once. Placement refused the request whole, so it is safe to send
                // again.
                Ok((401, _)) if !renewed && matches!(self.credential, Credential::Keystone(_)) => {
                    token = self.token(Some(&token))?;
                    renewed = true;
                }
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
        token: &str,
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
            .header("X-Auth-Token", token)
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

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
//!
//! A Placement is not trusted to be small or quick: each answer's body is read into one
//! buffer and refused past `--max-answer-bytes` counted on the bytes as they arrive (a
//! declared length above it is refused before reading), and no request is sent, or waited
//! for, past the run's `--timeout`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::args::KeystoneArgs;
use crate::keystone::catalog::{self, Wanted};
use crate::keystone::config::KeystoneConfig;
use crate::keystone::service::{LoginError, ServiceUser};
use crate::serving::certs;

/// The microversion every request is made at: Placement 16's last.
pub const MICROVERSION: &str = "1.39";
/// Longest one request may take, connecting included.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);
/// Room made for an answer that declares no length, before its bytes arrive.
const FIRST_ROOM: usize = 64 << 10;
/// An answer's buffer grows by doubling up to this size, then to the limit at once.
const DOUBLING_UP_TO: usize = 8 << 20;

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
    #[error(
        "Placement's answer to {method} {path} is larger than {} (--max-answer-bytes); it was not read further. Raise --max-answer-bytes for a Placement whose answers are that large",
        show_bytes(*cap)
    )]
    TooLarge {
        method: Method,
        path: String,
        cap: usize,
    },
    #[error(
        "the run took longer than --timeout ({seconds} s); it stopped at {method} {path}. Raise --timeout for a Placement this large or slow"
    )]
    OutOfTime {
        method: Method,
        path: String,
        seconds: u64,
    },
}

/// `n` bytes for people: `256 MiB (268435456 bytes)`, or `1000 bytes`.
pub fn show_bytes(n: usize) -> String {
    for (unit, size) in [("GiB", 1usize << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n % size == 0 {
            return format!("{} {unit} ({n} bytes)", n / size);
        }
    }
    format!("{n} bytes")
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
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["keystone_authtoken", "os_cloud"])]
    pub token: Option<String>,
    #[command(flatten)]
    pub keystone: KeystoneArgs,
    /// Log in as cloud NAME of clouds.yaml (OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
    /// ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml; secrets from
    /// secure.yaml), as openstackclient does, and find Placement in the catalog. Without
    /// it, --token or --keystone-authtoken: $OS_CLOUD, else $OS_TOKEN, else the OS_*
    /// variables of an openrc file when OS_AUTH_URL is set.
    #[arg(long, value_name = "NAME", conflicts_with = "keystone_authtoken")]
    pub os_cloud: Option<String>,
    /// The CA (PEM) an `https://` Placement's certificate is checked against [default: the
    /// `cafile` of --keystone-authtoken's section, if any].
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Connections Placement is read over side by side (1 to 32).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub connections: u16,
}

/// How much of a live Placement `import` and `export` take on: bounds that a real cloud of
/// 10,000 compute hosts passes many times over, so that a Placement (or something posing as
/// one) that answers without end, or slowly, stops the command with an error instead of
/// filling the memory or holding it for ever. A refusal of the read writes nothing.
#[derive(clap::Args, Debug, Clone)]
pub struct RunLimits {
    /// Bytes one answer of Placement may have, counted as they arrive (bytes, or with
    /// KiB, MiB or GiB). The list of a cloud's 45,010 providers (10,000 compute trees) is
    /// about 35 MB; the default holds a list of some 300,000.
    #[arg(long, value_name = "BYTES", value_parser = byte_count, default_value = "256MiB")]
    pub max_answer_bytes: usize,
    /// Providers Placement may have. The default is over twice the 45,010 providers of a
    /// 10,000-host cloud of nested trees (a root, two NUMA cells, a physical function).
    #[arg(long, value_name = "N", value_parser = at_least_one, default_value_t = 100_000)]
    pub max_providers: usize,
    /// Allocations Placement may hold: a consumer's (an instance's, a migration's)
    /// resources on one provider, as each provider's allocations list them. The default is
    /// 100 instances a host on 10,000 hosts, each on up to 4 providers.
    #[arg(long, value_name = "N", value_parser = at_least_one, default_value_t = 4_000_000)]
    pub max_allocations: usize,
    /// Seconds the whole command may take (reading and writing). A 10,000-host cloud is
    /// read in about 9 minutes and exported in about 19 on a small machine; the default,
    /// 6 hours, leaves room for a cloud of --max-providers.
    #[arg(long, value_name = "SECONDS", value_parser = at_least_one, default_value_t = 21_600)]
    pub timeout: usize,
}

impl RunLimits {
    /// When a run started at `started` must end.
    pub fn deadline(&self, started: Instant) -> Instant {
        started + Duration::from_secs(self.timeout as u64)
    }
}

fn at_least_one(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{value:?} is not accepted; give a whole number, 1 or more"
        )),
    }
}

/// A size: bytes, or a whole number of KiB, MiB or GiB (`256MiB`, `64 KiB`).
fn byte_count(value: &str) -> Result<usize, String> {
    let refused = || {
        format!(
            "{value:?} is not a size; give bytes (1048576), or KiB, MiB or GiB (256MiB), at least 1 KiB"
        )
    };
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (number, unit) = v.split_at(digits);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => return Err(refused()),
    };
    let n: usize = number.parse().map_err(|_| refused())?;
    n.checked_mul(1 << shift)
        .filter(|n| *n >= 1024)
        .ok_or_else(refused)
}

/// Why no client was made: what was given is wrong (exit 2), or what it names failed.
#[derive(Debug)]
pub enum Opening {
    BadInput(String),
    Failed(String),
}

impl SourceAuth {
    /// The Keystone login asked for: the flags first (`--os-cloud`, `--keystone-authtoken`,
    /// `--token`), then the environment (`OS_CLOUD`, `OS_TOKEN`, an openrc file's `OS_*`);
    /// `None` for a static token.
    fn login(&self) -> Result<Option<KeystoneConfig>, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(cloud) = &self.os_cloud {
            return crate::keystone::clouds::from_clouds_yaml(cloud, var).map(Some);
        }
        if let Some(config) = self.keystone.config()? {
            return Ok(Some(config));
        }
        if self.token.is_some() {
            return Ok(None);
        }
        if let Some(cloud) = var("OS_CLOUD") {
            return crate::keystone::clouds::from_clouds_yaml(&cloud, var).map(Some);
        }
        if var("OS_TOKEN").is_some() {
            return Ok(None);
        }
        crate::keystone::clouds::from_environment(var)
    }

    /// A client of `url` (given with `flag`), or of the Placement endpoint in Keystone's
    /// catalog when none is given; and a line saying where the endpoint came from. With
    /// Keystone, the service user logs in first, so bad credentials or an unreachable
    /// Keystone are known before anything is read or written.
    pub fn open(
        &self,
        url: Option<&str>,
        flag: &str,
    ) -> Result<(PlacementClient, Option<String>), Opening> {
        let config = self.login().map_err(Opening::BadInput)?;
        let Some(config) = config else {
            let token = self
                .token
                .clone()
                .or_else(|| std::env::var("OS_TOKEN").ok())
                .unwrap_or_else(|| "admin".to_string());
            let url = url.ok_or_else(|| {
                Opening::BadInput(format!(
                    "give {flag} URL, or --keystone-authtoken FILE to find Placement in Keystone's catalog (or --os-cloud NAME, or an openrc file's OS_* variables)"
                ))
            })?;
            let client =
                PlacementClient::new(url, Credential::Static(token), self.ca_file.as_deref())
                    .map_err(|e| Opening::BadInput(format!("{flag} {e}")))?;
            return Ok((client, None));
        };
        let ca_file = self.ca_file.clone().or(config.cafile.clone());
        let wanted = Wanted::placement(&config);
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
    /// Bytes one answer may have.
    max_answer_bytes: usize,
    /// When the run must end, and its `--timeout` for the message.
    deadline: Option<(Instant, u64)>,
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
            max_answer_bytes: usize::MAX,
            deadline: None,
            requests: 0,
        })
    }

    /// Holds this client (and its siblings) to `limits`, for a run started at `started`.
    pub fn bound(&mut self, limits: &RunLimits, started: Instant) {
        self.max_answer_bytes = limits.max_answer_bytes;
        self.deadline = Some((limits.deadline(started), limits.timeout as u64));
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
            max_answer_bytes: self.max_answer_bytes,
            deadline: self.deadline,
            requests: 0,
        })
    }

    /// The endpoint, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `GET path`: the body of a 2xx answer, read as `T`.
    pub fn get<T: DeserializeOwned>(&mut self, path: &str) -> Result<T, ClientError> {
        let body = self.get_bytes(path)?;
        parse(&Method::GET, path, &body)
    }

    /// `GET path`: the bytes of a 2xx answer.
    pub fn get_bytes(&mut self, path: &str) -> Result<Vec<u8>, ClientError> {
        let (status, body) = self.send(Method::GET, path, None)?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(self.refusal(status, Method::GET, path, &body))
        }
    }

    /// A request whose answer must be 2xx; its body read as `T` (`T::default()` when empty).
    pub fn write<T: DeserializeOwned + Default>(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ClientError> {
        let (status, answer) = self.send(method.clone(), path, body)?;
        if !(200..300).contains(&status) {
            return Err(self.refusal(status, method, path, &answer));
        }
        if answer.iter().all(u8::is_ascii_whitespace) {
            return Ok(T::default());
        }
        parse(&method, path, &answer)
    }

    fn refusal(&self, status: u16, method: Method, path: &str, body: &[u8]) -> ClientError {
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
        let detail = serde_json::from_slice::<ErrorAnswer>(body)
            .ok()
            .and_then(|a| a.errors.0)
            .and_then(|e| e.detail)
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
        ClientError::Refused {
            status,
            method,
            path: path.to_string(),
            detail: detail.split_whitespace().collect::<Vec<_>>().join(" "),
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

    /// Sends one request; the status and the answer's body.
    pub fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>), ClientError> {
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
                Err(Failure::TooLarge) => {
                    self.sender = None;
                    return Err(ClientError::TooLarge {
                        method,
                        path: path.to_string(),
                        cap: self.max_answer_bytes,
                    });
                }
                Err(Failure::OutOfTime) => {
                    self.sender = None;
                    return Err(ClientError::OutOfTime {
                        method,
                        path: path.to_string(),
                        seconds: self.deadline.map_or(0, |(_, s)| s),
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
    ) -> Result<(u16, Vec<u8>), Failure> {
        // The run's deadline, when it comes before the request's own.
        let mut wait = REQUEST_DEADLINE;
        let mut run_ends_first = false;
        if let Some((deadline, _)) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::OutOfTime);
            }
            if left <= wait {
                (wait, run_ends_first) = (left, true);
            }
        }
        let cap = self.max_answer_bytes;
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
                let declared = response
                    .headers()
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                let body = read_body(response.into_body(), declared, cap).await?;
                Ok::<_, Failure>((sender, (status, body)))
            };
            match tokio::time::timeout(wait, work).await {
                Ok(Ok((sender, answer))) => (Some(sender), Ok(answer)),
                Ok(Err(e)) => (None, Err(e)),
                Err(_) if run_ends_first => (None, Err(Failure::OutOfTime)),
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
    /// The answer is longer than the client takes.
    TooLarge,
    /// The run's deadline passed.
    OutOfTime,
}

/// An answer's body in one buffer, refused once more than `cap` bytes have arrived (or when
/// it declares more). Each frame is copied as it comes and let go, so many small frames
/// cost what their bytes do; the buffer never has room past `cap`, whatever length was
/// declared, and what it holds is the bytes received.
async fn read_body(
    mut body: Incoming,
    declared: Option<u64>,
    cap: usize,
) -> Result<Vec<u8>, Failure> {
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(Failure::TooLarge);
    }
    // Room for the declared length (at most `cap`), so that a long answer is not copied
    // as it grows: untouched room costs address space, not memory, if no bytes come.
    let mut buf: Vec<u8> = Vec::with_capacity(declared.map_or(FIRST_ROOM, |n| n as usize));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failure::Connection(format!("the answer broke off: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let len = buf.len() + data.len();
        if len > cap {
            return Err(Failure::TooLarge);
        }
        if len > buf.capacity() {
            // Doubling, up to a step; past it, room for the whole limit at once: address
            // space, whose pages cost memory only as bytes fill them, where further
            // doublings would each leave the last buffer behind in the allocator.
            let room = if len <= DOUBLING_UP_TO {
                len.max(buf.capacity() * 2).min(DOUBLING_UP_TO)
            } else {
                cap
            };
            buf.reserve_exact(room - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf)
}

/// An answer's body read as `T`.
fn parse<T: DeserializeOwned>(method: &Method, path: &str, body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| ClientError::Unexpected {
        method: method.clone(),
        path: path.to_string(),
        reason: if e.is_syntax() || e.is_eof() {
            format!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            )
        } else {
            e.to_string()
        },
    })
}

/// Placement's error answer: the first error's detail is all that is read of it.
#[derive(Deserialize)]
struct ErrorAnswer {
    errors: First<ErrorEntry>,
}

#[derive(Deserialize)]
struct ErrorEntry {
    detail: Option<String>,
}

/// The first entry of a list; the others are skipped, not kept.
struct First<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<First<T>, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<First<T>, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
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

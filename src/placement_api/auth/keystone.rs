//! Tokens checked by Keystone, as keystonemiddleware checks them for Placement: kubeplace
//! logs in as its service user ([`service`]: password authentication, a project-scoped
//! token, renewed before it expires and when Keystone stops taking it), asks Keystone about each token a
//! caller sends (`GET /v3/auth/tokens` with `X-Subject-Token`), and keeps the answer for a
//! while ([`cache`]). What the caller may do is then Placement's policy's to say
//! (`super::policy`), from the roles and scope Keystone gave.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::remembered::TokenDigest;
use super::token_cache::{self, Known, Tokens};
use crate::keystone::config::KeystoneConfig;
use crate::keystone::service::{self, ServiceUser};
use crate::keystone::time::instant_of;
use crate::metrics::KeystoneMetrics;
use crate::placement_api::caller::Credentials;

/// Why a token was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Keystone does not know the token (bad, expired or revoked).
    Invalid(String),
    /// Keystone could not be asked, or did not answer in time: the token may be good.
    Unavailable(String),
}

/// A validation's outcome, shared by the requests that asked about the same token at once.
type Validation = Result<(Credentials, Instant), Refused>;

/// Tokens checked by one Keystone.
pub struct KeystoneAuth {
    /// kubeplace's own login, whose token asks about callers' tokens.
    service: ServiceUser,
    /// The runtime requests to Keystone run on when a check is made from blocking code.
    runtime: tokio::runtime::Handle,
    tokens: std::sync::Mutex<Tokens>,
    /// Validations being asked of Keystone, by token: requests sending a token already
    /// being asked about wait for that answer instead of asking again.
    asking: std::sync::Mutex<HashMap<TokenDigest, Arc<OnceCell<Validation>>>>,
    /// `Keystone uri="…"`, the `WWW-Authenticate` of a 401.
    challenge: String,
    /// Validations by outcome, and answers from the cache.
    counted: KeystoneMetrics,
}

impl KeystoneAuth {
    /// Checks tokens with the Keystone of `config`; its requests run on `runtime`.
    pub fn new(
        config: KeystoneConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<KeystoneAuth, String> {
        let challenge = format!("Keystone uri=\"{}\"", config.www_authenticate_uri);
        Ok(KeystoneAuth {
            tokens: std::sync::Mutex::new(Tokens::new(config.cache_time, token_cache::KEPT)),
            asking: std::sync::Mutex::new(HashMap::new()),
            service: ServiceUser::new(config)?,
            runtime,
            challenge,
            counted: KeystoneMetrics::default(),
        })
    }

    /// Counts validations and cache hits into `metrics` (the operator's, registered).
    pub fn counting_in(mut self, metrics: KeystoneMetrics) -> KeystoneAuth {
        self.counted = metrics;
        self
    }

    /// The `WWW-Authenticate` value of a 401.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    /// How long an answer is kept: a revoked token passes for at most this long.
    pub fn cache_time(&self) -> Duration {
        self.service.config().cache_time
    }

    /// Keys of the section read and not used.
    pub fn ignored_keys(&self) -> &[String] {
        &self.service.config().ignored
    }

    /// [`KeystoneAuth::validate`] from blocking code.
    pub fn validate_blocking(&self, token: &str) -> Result<Credentials, Refused> {
        self.runtime.block_on(self.validate(token))
    }

    /// The credentials of `token`: remembered, or asked of Keystone (once, however many
    /// requests send the token at the same time).
    pub async fn validate(&self, token: &str) -> Result<Credentials, Refused> {
        let key = TokenDigest::of(token);
        let recalled = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recall(&key, Instant::now());
        match recalled {
            Some(Known::Valid(creds)) => {
                self.counted.cache_hits.inc();
                return Ok(creds);
            }
            Some(Known::Refused(why)) => {
                self.counted.cache_hits.inc();
                return Err(Refused::Invalid(why));
            }
            None => {}
        }
        let asking = self
            .asking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        // Whoever gets here first asks; the others wait for its answer. Should the one asking
        // go away, the next waiting asks in its place.
        let answer = asking
            .get_or_init(|| self.ask_and_keep(key, token))
            .await
            .clone();
        {
            let mut all = self
                .asking
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if all.get(&key).is_some_and(|a| Arc::ptr_eq(a, &asking)) {
                all.remove(&key);
            }
        }
        answer.map(|(creds, _)| creds)
    }

    /// Asks Keystone about a token within the validation's deadline, and keeps the answer.
    async fn ask_and_keep(&self, key: TokenDigest, token: &str) -> Validation {
        // One deadline for the whole validation (a login, the question, their retries, and
        // the wait for another request's login), so a Keystone that is down or slow costs a
        // request at most this long.
        let deadline = self.deadline();
        let answer = match tokio::time::timeout(deadline, self.ask(token)).await {
            Ok(answer) => answer,
            Err(_) => Err(Refused::Unavailable(format!(
                "Keystone did not answer within {deadline:?}"
            ))),
        };
        let now = Instant::now();
        let mut tokens = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &answer {
            Ok((creds, expires)) => {
                self.counted.validated("valid");
                tokens.keep_valid(key, creds.clone(), *expires, now)
            }
            Err(Refused::Invalid(why)) => {
                self.counted.validated("invalid");
                tokens.keep_refused(key, why.clone(), now)
            }
            // Not kept: the next request asks again.
            Err(Refused::Unavailable(_)) => self.counted.validated("unavailable"),
        }
        answer
    }

    /// The longest a validation may take: two requests' time (a login and the question).
    fn deadline(&self) -> Duration {
        2 * self.service.config().request_timeout
    }

    /// Asks Keystone about `token` with the service token, logging in again once when
    /// Keystone no longer takes the service token.
    async fn ask(&self, token: &str) -> Result<(Credentials, Instant), Refused> {
        let url = format!("{}/auth/tokens", self.service.config().identity_url);
        let mut refused: Option<String> = None;
        for attempt in 0..2 {
            let service = self
                .service
                .token(refused.as_deref())
                .await
                .map_err(unavailable)?;
            let answer = self
                .service
                .send(
                    Method::GET,
                    &url,
                    &[("X-Auth-Token", &service), ("X-Subject-Token", token)],
                    None,
                )
                .await
                .map_err(|e| Refused::Unavailable(format!("Keystone could not be asked: {e}")))?;
            match answer.status {
                StatusCode::OK => return read_token(&answer.body),
                // Keystone answers 404 to a token it does not know, and 400 to one it cannot
                // read: either way the caller's token, not kubeplace's configuration.
                StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => {
                    return Err(Refused::Invalid(
                        "Keystone does not know the token: it is bad, expired or revoked".into(),
                    ));
                }
                status if status.is_server_error() => {
                    return Err(Refused::Unavailable(format!(
                        "Keystone answered {status} when asked about the token"
                    )));
                }
                StatusCode::UNAUTHORIZED if attempt == 0 => {
                    refused = Some(service);
                    continue;
                }
                status => {
                    tracing::error!(
                        %status,
                        body = %String::from_utf8_lossy(&answer.body[..answer.body.len().min(500)]),
                        "Keystone refused to validate a token for kubeplace's service user: check [keystone_authtoken] (the user needs the service or admin role in its project)"
                    );
                    return Err(Refused::Unavailable(format!(
                        "Keystone answered {status} when asked about the token"
                    )));
                }
            }
        }
        Err(Refused::Unavailable(
            "Keystone does not take kubeplace's service token".into(),
        ))
    }
}

/// A failed login as a caller sees it: what failed, without the service user's name (the
/// log has the details).
fn unavailable(e: service::LoginError) -> Refused {
    Refused::Unavailable(match e {
        service::LoginError::Unreachable { reason, .. } => {
            format!("Keystone could not be asked: {reason}")
        }
        service::LoginError::Refused { status, .. } => {
            format!("kubeplace's service user could not log in to Keystone ({status})")
        }
        service::LoginError::Failed { .. } => {
            "kubeplace's service user could not log in to Keystone".into()
        }
    })
}

/// The credentials in a token's body (`{"token": {…}}`) and when it expires.
fn read_token(body: &[u8]) -> Result<(Credentials, Instant), Refused> {
    let unreadable = |why: &str| {
        Refused::Unavailable(format!(
            "Keystone's answer about the token is not readable: {why}"
        ))
    };
    let value: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    let token = &value["token"];
    let expires_at = token["expires_at"]
        .as_str()
        .ok_or_else(|| unreadable("no expires_at"))?;
    let expires = instant_of(expires_at).ok_or_else(|| unreadable("expires_at is not a time"))?;
    let roles = token["roles"]
        .as_array()
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| r["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let creds = Credentials {
        roles,
        project_id: token["project"]["id"].as_str().map(str::to_string),
        system: token["system"]["all"].as_bool().unwrap_or(false),
        domain_id: token["domain"]["id"].as_str().map(str::to_string),
        user_id: token["user"]["id"].as_str().map(str::to_string),
    };
    Ok((creds, expires))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::keystone::config;

    /// A stand-in for Keystone's token API, for the traffic of one validation: logins
    /// succeed; questions about tokens are answered `status` after `delay`, and counted.
    async fn keystone(status: StatusCode, delay: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        let later = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600)).to_string();
        let handler = move |req: http::Request<hyper::body::Incoming>| {
            let counted = counted.clone();
            let later = later.clone();
            async move {
                let body = json!({"token": {"expires_at": later, "roles": [{"name": "admin"}],
                                            "project": {"id": "p"}, "user": {"id": "u"}}});
                if req.method() == Method::POST {
                    let mut reply = crate::serving::http::json(
                        StatusCode::CREATED,
                        body.to_string().into_bytes(),
                    );
                    reply
                        .headers_mut()
                        .insert("x-subject-token", "service".parse().unwrap());
                    return reply;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                crate::serving::http::json(status, body.to_string().into_bytes())
            }
        };
        tokio::spawn(crate::serving::http::serve(
            listener,
            None,
            handler,
            crate::serving::http::Lifecycle::default(),
        ));
        (url, asked)
    }

    fn auth(url: &str) -> KeystoneAuth {
        let config = config::parse(&format!(
            "[keystone_authtoken]\nauth_type = password\nauth_url = {url}\nusername = placement\npassword = p\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\nhttp_request_max_retries = 3\n"
        ))
        .unwrap();
        KeystoneAuth::new(config, tokio::runtime::Handle::current()).unwrap()
    }

    /// Sixteen requests with one new token at once cost Keystone one question.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_sending_one_token_at_once_ask_keystone_once() {
        let (url, asked) = keystone(StatusCode::OK, Duration::from_millis(300)).await;
        let auth = Arc::new(auth(&url));
        let answers = futures::future::join_all((0..16).map(|_| {
            let auth = auth.clone();
            async move { auth.validate("a-new-token").await }
        }))
        .await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        // Kept: asked again, nothing is sent.
        auth.validate("a-new-token").await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    /// A Keystone answering 5xx is not asked again (only a connection that could not be made
    /// is retried); nor is the answer kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_keystone_answering_5xx_is_not_asked_again() {
        let (url, asked) = keystone(StatusCode::SERVICE_UNAVAILABLE, Duration::ZERO).await;
        let auth = auth(&url);
        let refused = auth.validate("t").await.unwrap_err();
        assert!(matches!(refused, Refused::Unavailable(_)), "{refused:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        auth.validate("t").await.unwrap_err();
        assert_eq!(asked.load(Ordering::SeqCst), 2, "a 503 is not kept");
    }

    /// Keystone's 400 (a token it cannot read) is the caller's bad token, kept as such.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_keystone_cannot_read_is_invalid() {
        let (url, asked) = keystone(StatusCode::BAD_REQUEST, Duration::ZERO).await;
        let auth = auth(&url);
        assert!(matches!(auth.validate("t").await, Err(Refused::Invalid(_))));
        auth.validate("t").await.unwrap_err();
        assert_eq!(asked.load(Ordering::SeqCst), 1, "the refusal is kept");
    }

    #[test]
    fn a_tokens_body_gives_roles_scope_and_expiry() {
        let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
        let body = json!({"token": {
            "expires_at": later.to_string(),
            "roles": [{"id": "1", "name": "member"}, {"id": "2", "name": "reader"}],
            "project": {"id": "p1", "domain": {"id": "default"}},
            "user": {"id": "u1"},
        }});
        let (creds, expires) = read_token(body.to_string().as_bytes()).unwrap();
        assert_eq!(creds.roles, ["member", "reader"]);
        assert_eq!(creds.project_id.as_deref(), Some("p1"));
        assert!(!creds.system);
        let left = expires - Instant::now();
        assert!(left > Duration::from_secs(590) && left <= Duration::from_secs(600));
        let system = json!({"token": {"expires_at": "2020-01-01T00:00:00.000000Z", "system": {"all": true}, "roles": []}});
        let (creds, expires) = read_token(system.to_string().as_bytes()).unwrap();
        assert!(creds.system && creds.project_id.is_none());
        assert!(expires <= Instant::now());
        assert!(matches!(
            read_token(b"{\"token\": {}}"),
            Err(Refused::Unavailable(_))
        ));
    }
}

//! Tokens checked by Keystone, as keystonemiddleware checks them for Placement: kubeplace
//! logs in as its service user (password authentication, a project-scoped token, renewed
//! before it expires and when Keystone stops taking it), asks Keystone about each token a
//! caller sends (`GET /v3/auth/tokens` with `X-Subject-Token`), and keeps the answer for a
//! while ([`cache`]). What the caller may do is then Placement's policy's to say
//! (`super::policy`), from the roles and scope Keystone gave.

pub mod cache;
pub mod client;
pub mod config;

use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::policy::Credentials;
use cache::{Known, Tokens};
use config::{Domain, KeystoneConfig, Named};

/// The service token is renewed this long before it expires at the most (less for tokens
/// that live shorter).
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// Why a token was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Keystone does not know the token (bad, expired or revoked).
    Invalid(String),
    /// Keystone could not be asked, or did not answer in time: the token may be good.
    Unavailable(String),
}

/// The service user's token and when to renew it.
struct ServiceToken {
    token: String,
    renew_at: Instant,
}

/// Tokens checked by one Keystone.
pub struct KeystoneAuth {
    config: KeystoneConfig,
    client: client::Client,
    /// The runtime requests to Keystone run on when a check is made from blocking code.
    runtime: tokio::runtime::Handle,
    /// Held while the service token is read or renewed: one login at a time.
    service: tokio::sync::Mutex<Option<ServiceToken>>,
    tokens: std::sync::Mutex<Tokens>,
    /// `Keystone uri="…"`, the `WWW-Authenticate` of a 401.
    challenge: String,
}

impl KeystoneAuth {
    /// Checks tokens with the Keystone of `config`; its requests run on `runtime`.
    pub fn new(
        config: KeystoneConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<KeystoneAuth, String> {
        let client = client::Client::new(
            &config.identity_url,
            config.cafile.as_deref(),
            config.connect_timeout,
            config.request_timeout,
        )?;
        let challenge = format!("Keystone uri=\"{}\"", config.www_authenticate_uri);
        Ok(KeystoneAuth {
            tokens: std::sync::Mutex::new(Tokens::new(config.cache_time, cache::KEPT)),
            config,
            client,
            runtime,
            service: tokio::sync::Mutex::new(None),
            challenge,
        })
    }

    /// The `WWW-Authenticate` value of a 401.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    /// How long an answer is kept: a revoked token passes for at most this long.
    pub fn cache_time(&self) -> Duration {
        self.config.cache_time
    }

    /// Keys of the section read and not used.
    pub fn ignored_keys(&self) -> &[String] {
        &self.config.ignored
    }

    /// [`KeystoneAuth::validate`] from blocking code.
    pub fn validate_blocking(&self, token: &str) -> Result<Credentials, Refused> {
        self.runtime.block_on(self.validate(token))
    }

    /// The credentials of `token`: remembered, or asked of Keystone.
    pub async fn validate(&self, token: &str) -> Result<Credentials, Refused> {
        let recalled = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recall(token, Instant::now());
        match recalled {
            Some(Known::Valid(creds)) => return Ok(creds),
            Some(Known::Refused(why)) => return Err(Refused::Invalid(why)),
            None => {}
        }
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
        match answer {
            Ok((creds, expires)) => {
                tokens.keep_valid(token, creds.clone(), expires, now);
                Ok(creds)
            }
            Err(Refused::Invalid(why)) => {
                tokens.keep_refused(token, why.clone(), now);
                Err(Refused::Invalid(why))
            }
            // Not kept: the next request asks again.
            Err(e) => Err(e),
        }
    }

    /// The longest a validation may take: two requests' time (a login and the question).
    fn deadline(&self) -> Duration {
        2 * self.config.request_timeout
    }

    /// Asks Keystone about `token` with the service token, logging in again once when
    /// Keystone no longer takes the service token.
    async fn ask(&self, token: &str) -> Result<(Credentials, Instant), Refused> {
        let url = format!("{}/auth/tokens", self.config.identity_url);
        for attempt in 0..2 {
            let service = self.service_token(attempt > 0).await?;
            let answer = self
                .send(
                    Method::GET,
                    &url,
                    &[("X-Auth-Token", &service), ("X-Subject-Token", token)],
                    None,
                )
                .await?;
            match answer.status {
                StatusCode::OK => return read_token(&answer.body),
                StatusCode::NOT_FOUND => {
                    return Err(Refused::Invalid(
                        "Keystone does not know the token: it is bad, expired or revoked".into(),
                    ));
                }
                StatusCode::UNAUTHORIZED if attempt == 0 => continue,
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

    /// The service token: the one held while it is fresh, else a new login.
    async fn service_token(&self, renew: bool) -> Result<String, Refused> {
        let mut held = self.service.lock().await;
        if let Some(t) = held.as_ref()
            && !renew
            && Instant::now() < t.renew_at
        {
            return Ok(t.token.clone());
        }
        *held = None;
        let fresh = self.login().await?;
        let token = fresh.token.clone();
        *held = Some(fresh);
        Ok(token)
    }

    /// Password authentication as the service user, scoped to its project.
    async fn login(&self) -> Result<ServiceToken, Refused> {
        let c = &self.config;
        let user = match &c.user {
            Named::Id(id) => json!({"id": id, "password": c.password}),
            Named::Name { name, domain } => {
                json!({"name": name, "domain": domain_json(domain), "password": c.password})
            }
        };
        let project = match &c.project {
            Named::Id(id) => json!({"id": id}),
            Named::Name { name, domain } => json!({"name": name, "domain": domain_json(domain)}),
        };
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": user}},
            "scope": {"project": project},
        }});
        let url = format!("{}/auth/tokens?nocatalog", c.identity_url);
        let answer = self
            .send(Method::POST, &url, &[], Some(body.to_string().into_bytes()))
            .await?;
        if answer.status != StatusCode::CREATED && answer.status != StatusCode::OK {
            tracing::error!(
                status = %answer.status,
                "kubeplace's service user could not log in to Keystone: check username, password, project_name and their domains in [keystone_authtoken]"
            );
            return Err(Refused::Unavailable(format!(
                "kubeplace's service user could not log in to Keystone ({})",
                answer.status
            )));
        }
        let token = answer
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or(Refused::Unavailable(
                "Keystone's login answer has no X-Subject-Token".into(),
            ))?
            .to_string();
        let (_, expires) = read_token(&answer.body)?;
        let now = Instant::now();
        let life = expires.saturating_duration_since(now);
        let renew_at = expires - RENEW_BEFORE.min(life / 4);
        Ok(ServiceToken { token, renew_at })
    }

    /// One request, retried on connection failures (`http_request_max_retries`), not on
    /// a Keystone that connects and then does not answer in time.
    async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<client::Answer, Refused> {
        let mut tries = 0;
        loop {
            match self
                .client
                .send(method.clone(), url, headers, body.clone())
                .await
            {
                Ok(answer) if answer.status.is_server_error() && tries < self.config.retries => {}
                Ok(answer) => return Ok(answer),
                Err(e) if e.starts_with("cannot connect") && tries < self.config.retries => {
                    tracing::debug!(error = %e, "Keystone: retrying");
                }
                Err(e) => {
                    tracing::warn!(error = %e, url, "Keystone could not be asked");
                    return Err(Refused::Unavailable(format!(
                        "Keystone could not be asked: {e}"
                    )));
                }
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(100 << tries.min(4))).await;
        }
    }
}

fn domain_json(domain: &Domain) -> Value {
    match domain {
        Domain::Id(id) => json!({"id": id}),
        Domain::Name(name) => json!({"name": name}),
    }
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

/// The monotonic instant of a time Keystone wrote (`2026-11-28T10:00:00.000000Z`).
fn instant_of(text: &str) -> Option<Instant> {
    let at: jiff::Timestamp = text.parse().ok()?;
    let now = jiff::Timestamp::now();
    let now_instant = Instant::now();
    if at <= now {
        return Some(now_instant);
    }
    let ahead = now.duration_until(at);
    let ahead = Duration::try_from(ahead).ok()?;
    now_instant.checked_add(ahead)
}

#[cfg(test)]
mod tests {
    use super::*;

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

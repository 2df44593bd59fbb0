//! kubeplace's own login to Keystone as the section's service user: password
//! authentication scoped to its project, the token held and renewed before it expires or
//! when a server stops taking it. The Placement API validates callers' tokens with it
//! (`placement_api::auth::keystone::KeystoneAuth`); `placement import` and `export` send it to a live Placement and
//! read Placement's endpoint from the catalog of its first login.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::client::{self, Client};
use super::config::{Credential, Domain, KeystoneConfig, Named};

/// The service token is renewed this long before it expires at the most (less for tokens
/// that live shorter).
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// Why the service user has no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// Keystone could not be reached, or did not answer in time.
    #[error("Keystone at {identity_url} (auth_url) cannot be reached: {reason}")]
    Unreachable {
        identity_url: String,
        reason: String,
    },
    /// Keystone answered the login with a refusal: the credentials are wrong.
    #[error(
        "Keystone at {identity_url} (auth_url) refused the login of {user} in {project} ({status}): check username, password, project_name and their domains in [keystone_authtoken] (application_credential_id and application_credential_secret for an application credential, which may have expired or been deleted)"
    )]
    Refused {
        identity_url: String,
        status: u16,
        user: String,
        project: String,
    },
    /// Keystone answered something else than a token.
    #[error("Keystone at {identity_url} (auth_url) did not give a token: {reason}")]
    Failed {
        identity_url: String,
        reason: String,
    },
}

/// What a login gave.
#[derive(Debug, Clone)]
pub struct Login {
    pub token: String,
    pub expires: Instant,
    /// The token's service catalog (`token.catalog`), when it was asked for.
    pub catalog: Option<Value>,
}

/// The token held and when to renew it.
struct Held {
    token: String,
    renew_at: Instant,
}

/// The section's service user, logged in on demand.
pub struct ServiceUser {
    config: KeystoneConfig,
    client: Client,
    /// Held while the token is read or renewed: one login at a time.
    held: tokio::sync::Mutex<Option<Held>>,
}

impl ServiceUser {
    /// The service user of `config`; fails only on TLS settings that cannot be used.
    pub fn new(config: KeystoneConfig) -> Result<ServiceUser, String> {
        let client = Client::new(
            &config.identity_url,
            config.cafile.as_deref(),
            config.connect_timeout,
            config.request_timeout,
        )?;
        Ok(ServiceUser {
            config,
            client,
            held: tokio::sync::Mutex::new(None),
        })
    }

    pub fn config(&self) -> &KeystoneConfig {
        &self.config
    }

    /// Who logs in and to what, for messages: `user "placement" (domain Default)` in
    /// `project "service" (domain Default)`, or the application credential and `its project`.
    pub fn who(&self) -> (String, String) {
        match &self.config.credential {
            Credential::Password { user, project, .. } => {
                (describe("user", user), describe("project", project))
            }
            Credential::ApplicationCredential { id, name, user, .. } => {
                let credential = match (id, name, user) {
                    (Some(id), _, _) => format!("application credential id {id}"),
                    (None, Some(name), Some(user)) => {
                        format!(
                            "application credential {name:?} of {}",
                            describe("user", user)
                        )
                    }
                    _ => "an application credential".to_string(),
                };
                (credential, "its project".to_string())
            }
        }
    }

    /// A token to send: the one held while it is fresh, else a new login. `refused` is a
    /// token a server just answered 401 to: if it is still the one held, it is replaced (a
    /// token another thread already replaced is not replaced again).
    pub async fn token(&self, refused: Option<&str>) -> Result<String, LoginError> {
        let mut held = self.held.lock().await;
        if let Some(h) = held.as_ref()
            && refused != Some(h.token.as_str())
            && Instant::now() < h.renew_at
        {
            return Ok(h.token.clone());
        }
        *held = None;
        let login = self.login(false).await?;
        *held = Some(Held::of(&login));
        Ok(login.token)
    }

    /// A new login whose answer carries the service catalog; its token is held from then
    /// on.
    pub async fn login_with_catalog(&self) -> Result<Login, LoginError> {
        let mut held = self.held.lock().await;
        let login = self.login(true).await?;
        *held = Some(Held::of(&login));
        Ok(login)
    }

    /// Password authentication as the service user, scoped to its project.
    async fn login(&self, catalog: bool) -> Result<Login, LoginError> {
        let c = &self.config;
        let body = match &c.credential {
            Credential::Password {
                user,
                project,
                password,
            } => {
                let mut user = named_json(user);
                user["password"] = json!(password);
                json!({"auth": {
                    "identity": {"methods": ["password"], "password": {"user": user}},
                    "scope": {"project": named_json(project)},
                }})
            }
            // Scoped to the project it was made in; a scope may not be asked for.
            Credential::ApplicationCredential {
                id,
                name,
                user,
                secret,
            } => {
                let mut credential = json!({"secret": secret});
                if let Some(id) = id {
                    credential["id"] = json!(id);
                } else {
                    credential["name"] = json!(name);
                    credential["user"] = user.as_ref().map(named_json).unwrap_or_default();
                }
                json!({"auth": {"identity": {"methods": ["application_credential"],
                    "application_credential": credential}}})
            }
        };
        let url = if catalog {
            format!("{}/auth/tokens", c.identity_url)
        } else {
            format!("{}/auth/tokens?nocatalog", c.identity_url)
        };
        let answer = self
            .send(Method::POST, &url, &[], Some(body.to_string().into_bytes()))
            .await
            .map_err(|reason| LoginError::Unreachable {
                identity_url: c.identity_url.clone(),
                reason,
            })?;
        if answer.status == StatusCode::UNAUTHORIZED
            || answer.status == StatusCode::FORBIDDEN
            || answer.status == StatusCode::NOT_FOUND
        {
            tracing::error!(
                status = %answer.status,
                "kubeplace's service user could not log in to Keystone: check its credentials in [keystone_authtoken]"
            );
            let (user, project) = self.who();
            return Err(LoginError::Refused {
                identity_url: c.identity_url.clone(),
                status: answer.status.as_u16(),
                user,
                project,
            });
        }
        let failed = |reason: String| LoginError::Failed {
            identity_url: c.identity_url.clone(),
            reason,
        };
        if answer.status != StatusCode::CREATED && answer.status != StatusCode::OK {
            return Err(failed(format!(
                "it answered the login with {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            )));
        }
        let token = answer
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| failed("its answer has no X-Subject-Token".into()))?
            .to_string();
        let value: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| failed(format!("its answer is not JSON: {e}")))?;
        let expires = value["token"]["expires_at"]
            .as_str()
            .and_then(super::time::instant_of)
            .ok_or_else(|| failed("its answer has no readable expires_at".into()))?;
        Ok(Login {
            token,
            expires,
            catalog: catalog.then(|| value["token"]["catalog"].clone()),
        })
    }

    /// One request, retried when no connection could be made (`http_request_max_retries`),
    /// as keystonemiddleware retries: not on an answer, a 5xx included (an overloaded
    /// Keystone is not sent more), nor on a Keystone that connects and then does not answer in
    /// time.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<client::Answer, String> {
        let mut tries = 0;
        loop {
            match self
                .client
                .send(method.clone(), url, headers, body.clone())
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(client::SendError::Connect(e)) if tries < self.config.retries => {
                    tracing::debug!(error = %e, "Keystone: retrying");
                }
                Err(e) => {
                    tracing::warn!(error = %e, url, "Keystone could not be asked");
                    return Err(e.to_string());
                }
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(100 << tries.min(4))).await;
        }
    }
}

impl Held {
    /// Renewed a minute before it expires, or a quarter of its life for short-lived tokens.
    fn of(login: &Login) -> Held {
        let life = login.expires.saturating_duration_since(Instant::now());
        Held {
            token: login.token.clone(),
            renew_at: login.expires - RENEW_BEFORE.min(life / 4),
        }
    }
}

fn named_json(named: &Named) -> Value {
    match named {
        Named::Id(id) => json!({"id": id}),
        Named::Name { name, domain } => json!({"name": name, "domain": domain_json(domain)}),
    }
}

fn domain_json(domain: &Domain) -> Value {
    match domain {
        Domain::Id(id) => json!({"id": id}),
        Domain::Name(name) => json!({"name": name}),
    }
}

fn describe(what: &str, named: &Named) -> String {
    match named {
        Named::Id(id) => format!("{what} id {id}"),
        Named::Name {
            name,
            domain: Domain::Id(d),
        } => format!("{what} {name:?} (domain id {d})"),
        Named::Name {
            name,
            domain: Domain::Name(d),
        } => format!("{what} {name:?} (domain {d})"),
    }
}

//! Who may call the API.
//!
//! `kubeplace placement serve` accepts one static token, as Placement's noauth2 does. Over a
//! cluster, the token a client sends (`X-Auth-Token`, what OpenStack clients send, or
//! `Authorization: Bearer`) is checked with a Kubernetes TokenReview, and what the caller
//! may do is asked of Kubernetes RBAC with a SubjectAccessReview on the resource
//! `placement` of the group `kubeplace.io`: `get` for reads, `create` for POST, `update`
//! for PUT and `delete` for DELETE. Answers are remembered for a short while, so a client
//! making many requests costs the API server two reviews now and then, not two a request.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, Method, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::wire::{self, Reply};

/// The API group and resource RBAC rules name to grant the Placement API.
pub const RBAC_GROUP: &str = "kubeplace.io";
/// See [`RBAC_GROUP`].
pub const RBAC_RESOURCE: &str = "placement";

/// How long a review's answer is reused.
const REMEMBER: Duration = Duration::from_secs(10);
/// How many answers are remembered at most.
const REMEMBERED: usize = 4096;

/// How callers are authenticated and authorized.
pub enum Auth {
    /// One static token, which may do everything.
    Token(String),
    /// Kubernetes TokenReview and SubjectAccessReview.
    Kubernetes(KubernetesAuth),
}

/// Reviews' answers by token and verb, with when they were given.
type Answers = HashMap<(String, &'static str), (Instant, Result<(), Refusal>)>;

/// Tokens checked by the Kubernetes API server.
pub struct KubernetesAuth {
    client: Client,
    runtime: tokio::runtime::Handle,
    remembered: Mutex<Answers>,
}

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    /// The reply that refuses the request.
    pub(crate) fn reply(&self, request_id: &str) -> Reply {
        wire::with_request_id(wire::auth_error(self.status, &self.message), request_id)
    }
    fn unauthorized(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::UNAUTHORIZED,
            message: message.into(),
        }
    }
    fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }
    fn unavailable(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
        }
    }
}

/// The RBAC verb a method needs.
pub fn verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT | Method::PATCH => "update",
        Method::DELETE => "delete",
        _ => "get",
    }
}

/// The token a request carries: `X-Auth-Token`, else `Authorization: Bearer`.
fn token(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    if let Some(v) = headers.get("x-auth-token") {
        return Some(v.to_str().map_err(|_| ()));
    }
    let v = headers.get(http::header::AUTHORIZATION)?;
    Some(
        v.to_str()
            .ok()
            .and_then(|s| s.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(()),
    )
}

impl Auth {
    /// Checks a request's token for its method; why it is refused, if it is. Over a cluster
    /// this waits for the reviews: call it off the runtime's worker threads, or use
    /// [`Auth::check_async`] there.
    pub(crate) fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        match self.sent(headers)? {
            Checked::Done(answer) => answer,
            Checked::Review(k, sent) => k.check(sent, verb(method)),
        }
    }

    /// [`Auth::check`] from async code: the reviews are awaited, not blocked on.
    pub(crate) async fn check_async(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<(), Refusal> {
        match self.sent(headers)? {
            Checked::Done(answer) => answer,
            Checked::Review(k, sent) => k.check_async(sent, verb(method)).await,
        }
    }

    /// The token sent, checked as far as it can be without asking Kubernetes.
    fn sent<'a>(&'a self, headers: &'a HeaderMap) -> Result<Checked<'a>, Refusal> {
        let Some(sent) = token(headers) else {
            return Err(Refusal::unauthorized(
                "The request you have made requires authentication: send a token in X-Auth-Token or Authorization: Bearer.",
            ));
        };
        let Ok(sent) = sent else {
            return Err(Refusal::unauthorized(
                "The token sent is not readable text.",
            ));
        };
        // No token matches an empty one, and Kubernetes need not be asked about it.
        if sent.is_empty() {
            return Err(Refusal::unauthorized(
                "The token sent is empty: send a token in X-Auth-Token or Authorization: Bearer.",
            ));
        }
        match self {
            // Compared in constant time, so the time of a refusal says nothing of how much
            // of the token was right.
            Auth::Token(expected) if same_token(sent, expected) => Ok(Checked::Done(Ok(()))),
            // Placement's noauth2 answers a token other than its own with 403.
            Auth::Token(_) => Ok(Checked::Done(Err(Refusal::forbidden(
                "The X-Auth-Token sent is not the token this server accepts.",
            )))),
            Auth::Kubernetes(k) => Ok(Checked::Review(k, sent)),
        }
    }
}

/// How far a token was checked from the headers alone.
enum Checked<'a> {
    /// The answer.
    Done(Result<(), Refusal>),
    /// Kubernetes decides.
    Review(&'a KubernetesAuth, &'a str),
}

/// Whether two tokens are the same, in a time that depends on their lengths only.
fn same_token(sent: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(sent.as_bytes().ct_eq(expected.as_bytes()))
}

impl KubernetesAuth {
    /// Reviews with `client`, whose calls run on `runtime` (requests are answered on
    /// blocking threads, which wait for the reviews).
    pub fn new(client: Client, runtime: tokio::runtime::Handle) -> KubernetesAuth {
        KubernetesAuth {
            client,
            runtime,
            remembered: Mutex::new(HashMap::new()),
        }
    }

    fn check(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        self.runtime.block_on(self.check_async(token, verb))
    }

    async fn check_async(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        let key = (token.to_string(), verb);
        if let Some(answer) = self.recall(&key) {
            return answer;
        }
        let answer = self.review(token, verb).await;
        // An API server that could not be asked is not remembered: the next request asks again.
        if answer
            .as_ref()
            .err()
            .is_none_or(|r| r.status != StatusCode::SERVICE_UNAVAILABLE)
        {
            self.remember(key, answer.clone());
        }
        answer
    }

    /// A review's answer given less than [`REMEMBER`] ago.
    fn recall(&self, key: &(String, &'static str)) -> Option<Result<(), Refusal>> {
        // A cache: whatever a panicking holder left in it is still a cache.
        let remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (at, answer) = remembered.get(key)?;
        (at.elapsed() < REMEMBER).then(|| answer.clone())
    }

    fn remember(&self, key: (String, &'static str), answer: Result<(), Refusal>) {
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if remembered.len() >= REMEMBERED {
            remembered.retain(|_, (at, _)| at.elapsed() < REMEMBER);
            if remembered.len() >= REMEMBERED {
                remembered.clear();
            }
        }
        remembered.insert(key, (Instant::now(), answer));
    }

    async fn review(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                Refusal::unavailable(format!(
                    "The token could not be checked with Kubernetes: {e}"
                ))
            })?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                return Err(Refusal::unauthorized(format!(
                    "The token was not accepted by Kubernetes{}.",
                    status.error.map(|e| format!(": {e}")).unwrap_or_default()
                )));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                resource_attributes: Some(ResourceAttributes {
                    group: Some(RBAC_GROUP.to_string()),
                    resource: Some(RBAC_RESOURCE.to_string()),
                    verb: Some(verb.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| {
                Refusal::unavailable(format!(
                    "The caller's access could not be checked with Kubernetes: {e}"
                ))
            })?;
        match decided.status {
            Some(s) if s.allowed => Ok(()),
            _ => Err(Refusal::forbidden(format!(
                "{name:?} may not {verb} {RBAC_RESOURCE}.{RBAC_GROUP}: grant it with a ClusterRole (the chart's kubeplace-placement-reader or kubeplace-placement-writer)."
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-auth-token", token.parse().unwrap());
        h
    }

    #[test]
    fn the_static_token_is_matched_whole() {
        let auth = Auth::Token("sesame".into());
        assert_eq!(auth.check(&Method::GET, &headers("sesame")), Ok(()));
        for other in ["sesam", "sesame!", "SESAME", "x"] {
            let refused = auth.check(&Method::GET, &headers(other)).unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{other}");
        }
        assert!(same_token("a b", "a b") && !same_token("a", "") && !same_token("", "a"));
    }

    #[test]
    fn an_empty_token_matches_nothing_not_even_an_empty_one() {
        for expected in ["", "admin"] {
            let auth = Auth::Token(expected.into());
            let refused = auth.check(&Method::GET, &headers("")).unwrap_err();
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        }
        let refused = Auth::Token("admin".into())
            .check(&Method::GET, &HeaderMap::new())
            .unwrap_err();
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    }
}

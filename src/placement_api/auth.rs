//! Who may call the API.
//!
//! `kubeplace placement serve` accepts one static token, as Placement's noauth2 does. Over a
//! cluster, the token a client sends (`X-Auth-Token`, what OpenStack clients send, or
//! `Authorization: Bearer`) is checked with a Kubernetes TokenReview for the API's audience
//! (`kubeplace-placement` unless the operator is told otherwise), which the review's answer
//! must confirm: such a token is refused by the API server itself, so a token sent here
//! cannot be replayed against the rest of the cluster. What the caller
//! may do is asked of Kubernetes RBAC with a SubjectAccessReview on the resource
//! `placement` of the group `kubeplace.io`: `get` for reads, `create` for POST, `update`
//! for PUT and `delete` for DELETE. Answers are remembered for a short while, so a client
//! making many requests costs the API server two reviews now and then, not two a request;
//! refused tokens are remembered apart from accepted ones (so they never push a user out),
//! and reviews of tokens remembered in neither are rate-limited (past it, a 429).
//!
//! With `--keystone-authtoken` (both commands), tokens are checked by Keystone
//! (`super::keystone`) and what a caller may do is Placement's default policy for its roles
//! and scope (`super::policy`, applied by the router once the route is known). When a
//! cluster's Kubernetes tokens are taken too, a token shaped as a JWT (three dot-separated
//! base64url parts whose first is a JSON header with `alg`, as every Kubernetes service
//! account token is) goes to Kubernetes, any other (Keystone's fernet tokens) to Keystone:
//! neither is ever shown the other's tokens. The test-only `--test-roles-from-headers`
//! mode of `serve` takes any token and the roles and project its headers claim, as
//! Placement's noauth2 does in Placement's own functional tests.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, Method, StatusCode};
use k8s_openapi::api::authentication::v1::{
    TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::keystone::{self, KeystoneAuth};
use super::policy::Credentials;
use super::wire::{self, Reply};
use crate::placement_api::remembered::{Remembered, TokenDigest};

/// The API group and resource RBAC rules name to grant the Placement API.
pub const RBAC_GROUP: &str = "kubeplace.io";
/// See [`RBAC_GROUP`].
pub const RBAC_RESOURCE: &str = "placement";

/// How long a review's answer for a token Kubernetes accepted is reused.
const REMEMBER: Duration = Duration::from_secs(10);
/// How many such answers are remembered at most; past it the least recently used goes.
const REMEMBERED: usize = 4096;
/// How long a token Kubernetes refused is refused without asking again: short, so a token
/// just created is not refused for long.
const REFUSED_FOR: Duration = Duration::from_secs(5);
/// How many refused tokens are remembered at most, apart from accepted ones, so bad tokens
/// never push out a valid user's answer.
const REFUSED: usize = 4096;
/// Bytes each of the two keeps at most.
const REMEMBERED_BYTES: usize = 4 << 20;
/// The longest token taken, in bytes. Keystone's tokens are a few hundred bytes and
/// Kubernetes' service account tokens one or two thousand; a longer one is refused before
/// anyone is asked about it.
pub const MAX_TOKEN_BYTES: usize = 8192;
/// Reviews of tokens not remembered, per second and in a burst: enough for a fleet of
/// clients starting at once, while a client sending new bad tokens costs the API server
/// at most this many TokenReviews a second.
const REVIEWS_PER_SECOND: f64 = 20.0;
const REVIEWS_BURST: f64 = 40.0;

/// How callers are authenticated and authorized.
pub enum Auth {
    /// One static token, which may do everything.
    Token(String),
    /// Kubernetes TokenReview and SubjectAccessReview.
    Kubernetes(KubernetesAuth),
    /// Keystone tokens, judged by Placement's policies; and Kubernetes tokens beside them
    /// when a cluster is served.
    Keystone {
        keystone: Box<KeystoneAuth>,
        kubernetes: Option<KubernetesAuth>,
    },
    /// For tests only: any token, with the roles and project its headers claim
    /// (`X-Roles`, `X-Project-Id`, `OpenStack-System-Scope`), as Placement's noauth2.
    RoleHeaders,
}

/// Who a request comes from, once its token is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// May call every endpoint: the static token, or a Kubernetes caller whose RBAC verb
    /// was allowed.
    Unrestricted,
    /// Placement's policies decide, from these roles and scope.
    Roles(Credentials),
}

/// What reviews answered, and how many more may be asked for now.
struct Reviews {
    /// Answers for tokens Kubernetes accepted (allowed or forbidden), by token and verb.
    accepted: Remembered<(TokenDigest, &'static str), Result<(), Refusal>>,
    /// Tokens Kubernetes refused, and why.
    refused: Remembered<TokenDigest, Refusal>,
    /// Reviews of unremembered tokens that may start now (a token bucket).
    budget: f64,
    filled: Instant,
}

impl Reviews {
    fn new(now: Instant) -> Reviews {
        Reviews {
            accepted: Remembered::new(REMEMBERED, REMEMBERED_BYTES),
            refused: Remembered::new(REFUSED, REMEMBERED_BYTES),
            budget: REVIEWS_BURST,
            filled: now,
        }
    }

    /// A remembered answer still fresh at `now`.
    fn recall(
        &mut self,
        key: &(TokenDigest, &'static str),
        now: Instant,
    ) -> Option<Result<(), Refusal>> {
        if let Some(answer) = self.accepted.recall(key, now) {
            return Some(answer);
        }
        self.refused.peek(&key.0, now).map(Err)
    }

    /// Whether a review may be asked for `key`'s token: one Kubernetes accepted before
    /// always may; another spends the budget, and over it is refused with a 429.
    fn may_review(
        &mut self,
        key: &(TokenDigest, &'static str),
        now: Instant,
    ) -> Result<(), Refusal> {
        if self.accepted.holds(key) {
            return Ok(());
        }
        let elapsed = now.duration_since(self.filled).as_secs_f64();
        self.budget = (self.budget + elapsed * REVIEWS_PER_SECOND).min(REVIEWS_BURST);
        self.filled = now;
        if self.budget >= 1.0 {
            self.budget -= 1.0;
            Ok(())
        } else {
            Err(Refusal::too_many(
                "Too many tokens to check with Kubernetes just now: retry after a second.",
            ))
        }
    }

    fn remember(
        &mut self,
        key: (TokenDigest, &'static str),
        answer: Result<(), Refusal>,
        now: Instant,
    ) {
        match answer {
            Err(why) if why.status == StatusCode::UNAUTHORIZED => {
                let bytes = why.message.len();
                self.refused.keep(key.0, why, bytes, now + REFUSED_FOR, now);
            }
            answer => {
                self.refused.forget(&key.0);
                let bytes = answer.as_ref().err().map_or(0, |why| why.message.len());
                self.accepted.keep(key, answer, bytes, now + REMEMBER, now);
            }
        }
    }
}

/// `key`'s answer: remembered, or reviewed by `review` (within the budget) and remembered.
async fn decide<F>(
    remembered: &Mutex<Reviews>,
    key: (TokenDigest, &'static str),
    review: impl FnOnce() -> F,
) -> Result<(), Refusal>
where
    F: std::future::Future<Output = Result<(), Refusal>>,
{
    {
        // A cache: whatever a panicking holder left in it is still a cache.
        let mut r = remembered.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if let Some(answer) = r.recall(&key, now) {
            return answer;
        }
        r.may_review(&key, now)?;
    }
    let answer = review().await;
    // An API server that could not be asked is not remembered: the next request asks again.
    if answer
        .as_ref()
        .err()
        .is_none_or(|r| r.status != StatusCode::SERVICE_UNAVAILABLE)
    {
        remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(key, answer.clone(), Instant::now());
    }
    answer
}

/// Tokens checked by the Kubernetes API server.
pub struct KubernetesAuth {
    client: Client,
    runtime: tokio::runtime::Handle,
    /// The audience tokens must be issued for; `None`: the API server's own.
    audience: Option<String>,
    /// Boxed: it is large beside [`Auth::Token`].
    remembered: Box<Mutex<Reviews>>,
}

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    status: StatusCode,
    /// What the caller is told. A 503's is fixed text: what failed is in `detail`, logged.
    message: String,
    /// Why a token could not be checked (a 503): for the log only, as it may name Keystone's
    /// or the API server's address and what kubeplace's own login got.
    detail: Option<String>,
    /// Keystone's refusals: the `WWW-Authenticate` of a 401 (`Keystone uri="…"`), and
    /// keystonemiddleware's body shape.
    keystone: Option<String>,
}

impl Refusal {
    /// The reply that refuses the request. A 403 (a caller known but not allowed) is in
    /// Placement's error shape, as its policy's refusals are; a 401 and a 429 in the shape
    /// of the authentication in front of it.
    pub(crate) fn reply(&self, request_id: &str, headers: &http::HeaderMap) -> Reply {
        if let Some(detail) = &self.detail {
            tracing::warn!(request_id, reason = %detail, "a caller's token could not be checked");
        }
        if self.status == StatusCode::FORBIDDEN {
            let ctx = super::Ctx {
                mv: super::version::requested(headers).unwrap_or(super::version::MIN),
                request_id: request_id.to_string(),
            };
            return wire::error(&ctx, super::wire::ApiError::new(self.status, &self.message));
        }
        if let Some(challenge) = &self.keystone {
            let mut reply =
                wire::with_request_id(wire::keystone_error(self.status, &self.message), request_id);
            if self.status == StatusCode::UNAUTHORIZED
                && let Ok(v) = http::HeaderValue::from_str(challenge)
            {
                reply
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, v);
            }
            return reply;
        }
        let mut reply =
            wire::with_request_id(wire::auth_error(self.status, &self.message), request_id);
        if self.status == StatusCode::TOO_MANY_REQUESTS
            || self.status == StatusCode::SERVICE_UNAVAILABLE
        {
            reply.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        reply
    }
    fn of(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
            detail: None,
            keystone: None,
        }
    }
    fn too_many(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::TOO_MANY_REQUESTS, message)
    }
    fn unauthorized(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::UNAUTHORIZED, message)
    }
    fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::FORBIDDEN, message)
    }
    /// Keystone's refusal of a token, or its being unreachable.
    fn keystone(refused: keystone::Refused, challenge: &str) -> Refusal {
        let mut refusal = match refused {
            keystone::Refused::Invalid(why) => Refusal::unauthorized(why),
            keystone::Refused::Unavailable(why) => Refusal::unavailable(why),
        };
        refusal.keystone = Some(challenge.to_string());
        refusal
    }
    /// The token could not be checked, for `detail`'s reason (logged, not sent).
    fn unavailable(detail: impl Into<String>) -> Refusal {
        Refusal {
            detail: Some(detail.into()),
            ..Refusal::of(
                StatusCode::SERVICE_UNAVAILABLE,
                "The token could not be checked just now; retry in a moment. The server's log says why, under this request's id.",
            )
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

/// Why the token a request carries cannot be taken, from the headers alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadToken {
    Unreadable,
    /// Two `X-Auth-Token` headers (or two `Authorization`): which one counts is not for the
    /// server to guess.
    Several,
    TooLong(usize),
}

impl BadToken {
    fn message(self) -> String {
        match self {
            BadToken::Unreadable => "The token sent is not readable text.".to_string(),
            BadToken::Several => {
                "More than one token was sent: send exactly one X-Auth-Token (or one Authorization: Bearer) header.".to_string()
            }
            BadToken::TooLong(n) => format!(
                "The token sent is {n} bytes long; this server takes tokens of at most {MAX_TOKEN_BYTES} bytes."
            ),
        }
    }
}

/// The token a request carries: `X-Auth-Token`, else `Authorization: Bearer`.
fn token(headers: &HeaderMap) -> Option<Result<&str, BadToken>> {
    let only = |name: http::header::HeaderName| {
        let mut all = headers.get_all(name).iter();
        let first = all.next()?;
        Some(match all.next() {
            Some(_) => Err(BadToken::Several),
            None => Ok(first),
        })
    };
    let sent = match only(http::header::HeaderName::from_static("x-auth-token")) {
        Some(v) => v.and_then(|v| v.to_str().map_err(|_| BadToken::Unreadable)),
        None => only(http::header::AUTHORIZATION)?.and_then(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or(BadToken::Unreadable)
        }),
    };
    Some(sent.and_then(|t| {
        if t.len() > MAX_TOKEN_BYTES {
            Err(BadToken::TooLong(t.len()))
        } else {
            Ok(t)
        }
    }))
}

impl Auth {
    /// Checks a request's token for its method; why it is refused, if it is. Over a cluster
    /// this waits for the reviews: call it off the runtime's worker threads, or use
    /// [`Auth::check_async`] there.
    pub(crate) fn check(&self, method: &Method, headers: &HeaderMap) -> Result<Caller, Refusal> {
        match self.sent(headers)? {
            Checked::Done(answer) => answer,
            Checked::Review(k, sent) => k.check(sent, verb(method)).map(|()| Caller::Unrestricted),
            Checked::Keystone(k, sent) => k
                .validate_blocking(sent)
                .map(Caller::Roles)
                .map_err(|r| Refusal::keystone(r, k.challenge())),
        }
    }

    /// [`Auth::check`] from async code: the reviews are awaited, not blocked on.
    pub(crate) async fn check_async(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<Caller, Refusal> {
        match self.sent(headers)? {
            Checked::Done(answer) => answer,
            Checked::Review(k, sent) => k
                .check_async(sent, verb(method))
                .await
                .map(|()| Caller::Unrestricted),
            Checked::Keystone(k, sent) => k
                .validate(sent)
                .await
                .map(Caller::Roles)
                .map_err(|r| Refusal::keystone(r, k.challenge())),
        }
    }

    /// The token sent, checked as far as it can be without asking Kubernetes.
    fn sent<'a>(&'a self, headers: &'a HeaderMap) -> Result<Checked<'a>, Refusal> {
        let Some(sent) = token(headers) else {
            if let Auth::Keystone { keystone, .. } = self {
                return Err(Refusal::keystone(
                    keystone::Refused::Invalid(
                        "The request you have made requires authentication.".into(),
                    ),
                    keystone.challenge(),
                ));
            }
            return Err(Refusal::unauthorized(
                "The request you have made requires authentication: send a token in X-Auth-Token or Authorization: Bearer.",
            ));
        };
        let sent = match sent {
            Ok(sent) => sent,
            Err(bad) => {
                let refused = Refusal::unauthorized(bad.message());
                return Err(match self {
                    Auth::Keystone { keystone, .. } => Refusal {
                        keystone: Some(keystone.challenge().to_string()),
                        ..refused
                    },
                    _ => refused,
                });
            }
        };
        // No token matches an empty one, and Kubernetes need not be asked about it.
        if sent.is_empty() {
            return Err(Refusal::unauthorized(
                "The token sent is empty: send a token in X-Auth-Token or Authorization: Bearer.",
            ));
        }
        match self {
            // Compared in constant time, so the time of a refusal says nothing of how much
            // of the token was right. As in Placement's noauth2, `TOKEN:PROJECT` is the
            // same caller acting in a project.
            Auth::Token(expected)
                if same_token(sent, expected) | same_token(caller(sent), expected) =>
            {
                Ok(Checked::Done(Ok(Caller::Unrestricted)))
            }
            // Placement's noauth2 answers a token other than its own with 403.
            Auth::Token(_) => Ok(Checked::Done(Err(Refusal::forbidden(
                "The X-Auth-Token sent is not the token this server accepts.",
            )))),
            Auth::Kubernetes(k) => Ok(Checked::Review(k, sent)),
            Auth::Keystone {
                kubernetes: Some(k),
                ..
            } if is_jwt(sent) => Ok(Checked::Review(k, sent)),
            Auth::Keystone { keystone, .. } => Ok(Checked::Keystone(keystone, sent)),
            Auth::RoleHeaders => Ok(Checked::Done(Ok(Caller::Roles(claimed(sent, headers))))),
        }
    }
}

/// The credentials a request's headers claim, read as Placement's noauth2 reads them: the
/// token is `USER[:PROJECT]` (the project defaults to the user); `X-Roles` lists the roles
/// (without it, the user `admin` is an admin and any other has none); `X-Project-Id`
/// overrides the project; `OpenStack-System-Scope` makes the token system-scoped.
fn claimed(token: &str, headers: &HeaderMap) -> Credentials {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (user, project) = token.split_once(':').unwrap_or((token, token));
    let project = if project.is_empty() { user } else { project };
    let roles = match header("x-roles") {
        Some(roles) => roles
            .split(',')
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect(),
        None if user == "admin" => vec!["admin".to_string()],
        None => Vec::new(),
    };
    let system = header("openstack-system-scope").is_some_and(|s| !s.is_empty());
    let project_id = match header("x-project-id") {
        Some(p) => Some(p.to_string()),
        None if system => None,
        None => Some(project.to_string()),
    };
    Credentials {
        roles,
        project_id,
        system,
        domain_id: None,
        user_id: Some(user.to_string()),
    }
}

/// Whether a token is shaped as a JWT, as Kubernetes service account tokens are: three
/// base64url parts separated by dots, the first a JSON object naming its `alg`. Keystone's
/// fernet tokens have no dots.
fn is_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return false;
    }
    let Some(header) = base64url(parts[0]) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&header)
        .ok()
        .is_some_and(|h| h.get("alg").is_some_and(serde_json::Value::is_string))
}

/// Base64url without padding, decoded.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// How far a token was checked from the headers alone.
enum Checked<'a> {
    /// The answer.
    Done(Result<Caller, Refusal>),
    /// Kubernetes decides.
    Review(&'a KubernetesAuth, &'a str),
    /// Keystone decides.
    Keystone(&'a KeystoneAuth, &'a str),
}

/// The caller part of a static token sent as `CALLER:PROJECT`.
fn caller(sent: &str) -> &str {
    sent.split_once(':').map_or(sent, |(caller, _)| caller)
}

/// Whether two tokens are the same, in a time that depends on their lengths only.
fn same_token(sent: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(sent.as_bytes().ct_eq(expected.as_bytes()))
}

impl KubernetesAuth {
    /// Reviews with `client`, whose calls run on `runtime` (requests are answered on
    /// blocking threads, which wait for the reviews), tokens issued for `audience` (`None`:
    /// for the API server's own audience, so each is a credential for the API server too).
    pub fn new(
        client: Client,
        runtime: tokio::runtime::Handle,
        audience: Option<String>,
    ) -> KubernetesAuth {
        KubernetesAuth {
            client,
            runtime,
            audience,
            remembered: Box::new(Mutex::new(Reviews::new(Instant::now()))),
        }
    }

    fn check(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        self.runtime.block_on(self.check_async(token, verb))
    }

    async fn check_async(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        decide(&self.remembered, (TokenDigest::of(token), verb), || {
            self.review(token, verb)
        })
        .await
    }

    async fn review(&self, token: &str, verb: &'static str) -> Result<(), Refusal> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: self.audience.clone().map(|a| vec![a]),
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
        let user = authenticated(
            reviewed.status.unwrap_or_default(),
            self.audience.as_deref(),
        )?;
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

/// The user a TokenReview's answer vouches for: authenticated, and, when the review asked
/// for `audience`, confirmed for it. An API server that does not know audiences answers
/// without them, which would make any of its tokens pass: such an answer is refused too.
fn authenticated(status: TokenReviewStatus, audience: Option<&str>) -> Result<UserInfo, Refusal> {
    let user = match (status.authenticated, status.user) {
        (Some(true), Some(user)) => user,
        _ => {
            return Err(Refusal::unauthorized(format!(
                "The token was not accepted by Kubernetes{}{}.{}",
                audience
                    .map(|a| format!(" for the audience {a:?}"))
                    .unwrap_or_default(),
                status.error.map(|e| format!(": {e}")).unwrap_or_default(),
                audience.map(create_token).unwrap_or_default()
            )));
        }
    };
    if let Some(audience) = audience {
        let confirmed = status.audiences.unwrap_or_default();
        if !confirmed.iter().any(|a| a == audience) {
            return Err(Refusal::unauthorized(format!(
                "The token is not for the audience {audience:?}: Kubernetes confirmed it for {}.{}",
                if confirmed.is_empty() {
                    "no audience".to_string()
                } else {
                    confirmed.join(", ")
                },
                create_token(audience)
            )));
        }
    }
    Ok(user)
}

/// How a caller gets a token this API takes.
fn create_token(audience: &str) -> String {
    format!(" Send a token for it: `kubectl create token SERVICEACCOUNT --audience {audience}`.")
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
        assert_eq!(
            auth.check(&Method::GET, &headers("sesame")),
            Ok(Caller::Unrestricted)
        );
        for other in ["sesam", "sesame!", "SESAME", "x"] {
            let refused = auth.check(&Method::GET, &headers(other)).unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{other}");
        }
        assert!(same_token("a b", "a b") && !same_token("a", "") && !same_token("", "a"));
        // `TOKEN:PROJECT` is the same caller in a project, as in Placement's noauth2.
        assert_eq!(
            auth.check(&Method::GET, &headers("sesame:p1")),
            Ok(Caller::Unrestricted)
        );
        for other in ["sesam:p1", "p1:sesame", ":sesame"] {
            let refused = auth.check(&Method::GET, &headers(other)).unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{other}");
        }
        // A token holding a colon itself is matched whole.
        let colon = Auth::Token("a:b".into());
        assert!(colon.check(&Method::GET, &headers("a:b")).is_ok());
        assert!(colon.check(&Method::GET, &headers("a")).is_err());
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

    /// A fake reviewer: `good` is accepted, every other token refused; counts its calls.
    fn reviewing(
        remembered: &Mutex<Reviews>,
        calls: &std::cell::Cell<usize>,
        token: &str,
    ) -> Result<(), Refusal> {
        futures::executor::block_on(decide(remembered, (TokenDigest::of(token), "get"), || {
            calls.set(calls.get() + 1);
            let answer = if token == "good" {
                Ok(())
            } else {
                Err(Refusal::unauthorized("not accepted"))
            };
            async move { answer }
        }))
    }

    #[test]
    fn a_bad_token_sent_again_is_reviewed_once() {
        let remembered = Mutex::new(Reviews::new(Instant::now()));
        let calls = std::cell::Cell::new(0);
        for _ in 0..500 {
            let refused = reviewing(&remembered, &calls, "bad").unwrap_err();
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        }
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn many_bad_tokens_neither_evict_a_user_nor_pass_the_review_budget() {
        let remembered = Mutex::new(Reviews::new(Instant::now()));
        let calls = std::cell::Cell::new(0);
        assert_eq!(reviewing(&remembered, &calls, "good"), Ok(()));
        let started = Instant::now();
        let mut too_many = 0;
        for i in 0..(REMEMBERED + REFUSED) {
            match reviewing(&remembered, &calls, &format!("bad-{i}")) {
                Err(r) if r.status == StatusCode::TOO_MANY_REQUESTS => too_many += 1,
                Err(r) => assert_eq!(r.status, StatusCode::UNAUTHORIZED),
                Ok(()) => panic!("a bad token was accepted"),
            }
        }
        // At most the burst and what refilled meanwhile were reviewed; the rest got 429s.
        let allowed = REVIEWS_BURST + started.elapsed().as_secs_f64() * REVIEWS_PER_SECOND;
        assert!(
            (calls.get() - 1) as f64 <= allowed.ceil(),
            "{} reviews",
            calls.get() - 1
        );
        assert!(too_many > 0);
        // The valid user is still remembered: no review for it.
        let before = calls.get();
        assert_eq!(reviewing(&remembered, &calls, "good"), Ok(()));
        assert_eq!(calls.get(), before);
        // Bad tokens past the refused cache's bound keep it bounded, and never touch the user.
        let mut r = remembered.lock().unwrap();
        let now = Instant::now();
        for i in 0..(2 * REFUSED) {
            r.remember(
                (TokenDigest::of(&format!("worse-{i}")), "get"),
                Err(Refusal::unauthorized("no")),
                now,
            );
        }
        assert!(r.refused.len() <= REFUSED);
        assert!(r.recall(&("good".into(), "get"), now) == Some(Ok(())));
    }

    #[test]
    fn a_full_cache_of_users_lets_the_least_recently_used_go() {
        let mut r = Reviews::new(Instant::now());
        let now = Instant::now();
        r.remember(("first".into(), "get"), Ok(()), now);
        for i in 0..REMEMBERED {
            // "first" is used between every insert, so it is never the least recent.
            let later = now + Duration::from_millis(1 + i as u64);
            assert!(r.recall(&("first".into(), "get"), later).is_some(), "{i}");
            r.remember(
                (TokenDigest::of(&format!("user-{i}")), "get"),
                Ok(()),
                later,
            );
        }
        assert_eq!(r.accepted.len(), REMEMBERED);
        assert!(!r.accepted.holds(&("user-0".into(), "get")));
    }

    fn reviewed(authenticated: bool, audiences: Option<&[&str]>) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(authenticated),
            audiences: audiences.map(|a| a.iter().map(|s| s.to_string()).collect()),
            user: Some(UserInfo {
                username: Some("system:serviceaccount:openstack:nova".into()),
                ..Default::default()
            }),
            error: (!authenticated).then(|| "token audiences [\"https://kubernetes.default.svc.cluster.local\"] is invalid for the target audiences [\"kubeplace-placement\"]".into()),
        }
    }

    #[test]
    fn a_token_is_taken_only_when_the_review_confirms_the_audience() {
        let ours = Some("kubeplace-placement");
        let user = authenticated(reviewed(true, Some(&["kubeplace-placement"])), ours).unwrap();
        assert_eq!(
            user.username.as_deref(),
            Some("system:serviceaccount:openstack:nova")
        );
        assert!(
            authenticated(
                reviewed(true, Some(&["other", "kubeplace-placement"])),
                ours
            )
            .is_ok()
        );
        // Authenticated, but not confirmed for the audience asked: an API server (or an
        // authenticator) that ignored the audience, or confirmed another one.
        for (audiences, said) in [
            (None, "confirmed it for no audience"),
            (Some(&[][..]), "confirmed it for no audience"),
            (
                Some(&["https://kubernetes.default.svc.cluster.local"][..]),
                "confirmed it for https://kubernetes.default.svc.cluster.local",
            ),
        ] {
            let refused = authenticated(reviewed(true, audiences), ours).unwrap_err();
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{audiences:?}");
            assert!(
                refused
                    .message
                    .contains("not for the audience \"kubeplace-placement\"")
                    && refused.message.contains(said)
                    && refused.message.contains(
                        "kubectl create token SERVICEACCOUNT --audience kubeplace-placement"
                    ),
                "{}",
                refused.message
            );
        }
        // Not authenticated: the API server's reason, and how to get a token that passes.
        let refused = authenticated(reviewed(false, None), ours).unwrap_err();
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        assert!(
            refused
                .message
                .contains("for the audience \"kubeplace-placement\": token audiences")
                && refused.message.contains("--audience kubeplace-placement"),
            "{}",
            refused.message
        );
        // Without an audience (the weaker setting) the API server's own tokens pass.
        assert!(authenticated(reviewed(true, None), None).is_ok());
        assert!(authenticated(reviewed(false, None), None).is_err());
    }

    /// The reviews `KubernetesAuth` asks of a fake API server.
    mod reviews {
        use std::time::Duration;

        use http::{Method, Request, Response};
        use kube::client::Body;
        use serde_json::{Value, json};
        use tower_test::mock;

        use super::super::*;

        type Handle = mock::Handle<Request<Body>, Response<Body>>;

        const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
        const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

        /// Answers the next request, which must be a POST to `path`, with `status`; returns
        /// the body sent.
        async fn answer(h: &mut Handle, path: &str, status: Value) -> Value {
            let (request, send) = h.next_request().await.expect("a request");
            assert_eq!(
                (request.method(), request.uri().path()),
                (&Method::POST, path)
            );
            let sent: Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                    .unwrap();
            let mut reply = sent.clone();
            reply["status"] = status;
            send.send_response(
                Response::builder()
                    .status(201)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
            sent
        }

        fn auth(audience: Option<&str>) -> (KubernetesAuth, Handle) {
            let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
            let client = Client::new(service, "default");
            let auth = KubernetesAuth::new(
                client,
                tokio::runtime::Handle::current(),
                audience.map(str::to_string),
            );
            (auth, handle)
        }

        fn user() -> Value {
            json!({"username": "system:serviceaccount:openstack:nova", "groups": ["system:serviceaccounts"]})
        }

        #[tokio::test]
        async fn the_token_review_asks_for_the_audience_and_an_unconfirmed_one_goes_no_further() {
            let (auth, mut h) = auth(Some("kubeplace-placement"));
            let checked = tokio::spawn(async move { auth.check_async("tok", "get").await });
            let sent = answer(
                &mut h,
                TOKEN_REVIEWS,
                json!({"authenticated": true, "user": user()}),
            )
            .await;
            assert_eq!(sent["spec"]["token"], "tok");
            assert_eq!(sent["spec"]["audiences"], json!(["kubeplace-placement"]));
            // No access review is asked for a token that was refused: the check ends, and
            // its client with it, without another request.
            let next = tokio::time::timeout(Duration::from_secs(5), h.next_request()).await;
            assert!(
                matches!(next, Ok(None)),
                "another request after the token review"
            );
            let refused = checked.await.unwrap().unwrap_err();
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{refused:?}");
        }

        #[tokio::test]
        async fn a_token_confirmed_for_the_audience_goes_on_to_the_access_review() {
            let (auth, mut h) = auth(Some("kubeplace-placement"));
            let checked = tokio::spawn(async move { auth.check_async("tok", "update").await });
            answer(
                &mut h,
                TOKEN_REVIEWS,
                json!({"authenticated": true, "user": user(), "audiences": ["kubeplace-placement"]}),
            )
            .await;
            let asked = answer(&mut h, ACCESS_REVIEWS, json!({"allowed": true})).await;
            assert_eq!(
                asked["spec"]["user"],
                "system:serviceaccount:openstack:nova"
            );
            assert_eq!(asked["spec"]["resourceAttributes"]["verb"], "update");
            assert_eq!(checked.await.unwrap(), Ok(()));
        }

        #[tokio::test]
        async fn without_an_audience_the_review_asks_for_none() {
            let (auth, mut h) = auth(None);
            let checked = tokio::spawn(async move { auth.check_async("tok", "get").await });
            let sent = answer(
                &mut h,
                TOKEN_REVIEWS,
                json!({"authenticated": true, "user": user()}),
            )
            .await;
            assert!(sent["spec"].get("audiences").is_none(), "{sent}");
            answer(&mut h, ACCESS_REVIEWS, json!({"allowed": true})).await;
            assert_eq!(checked.await.unwrap(), Ok(()));
        }
    }

    #[test]
    fn kubernetes_tokens_are_told_from_keystone_tokens_by_their_shape() {
        // A service account token's header, and a fernet token.
        let jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJzeXN0ZW0ifQ.c2ln";
        assert!(is_jwt(jwt));
        assert!(!is_jwt(
            "gAAAAABpKx3mZyQ4B3k2C1oK6bFh9p0Xw3d_4o-kQ0d6mVYQ2aEk8lQ1pX5bN9kQ=="
        ));
        assert!(!is_jwt("a.b.c"));
        assert!(!is_jwt("eyJ0eXAiOiJKV1QifQ.e30.c2ln"), "no alg");
        assert!(!is_jwt("admin"));
    }

    #[test]
    fn role_headers_are_read_as_placements_noauth2_reads_them() {
        let mut h = headers("user");
        h.insert("x-roles", "reader, member".parse().unwrap());
        h.insert("x-project-id", "p1".parse().unwrap());
        let c = claimed("user", &h);
        assert_eq!(c.roles, ["reader", "member"]);
        assert_eq!(c.project_id.as_deref(), Some("p1"));
        let c = claimed("admin", &HeaderMap::new());
        assert_eq!(c.roles, ["admin"]);
        assert_eq!(c.project_id.as_deref(), Some("admin"));
        assert_eq!(
            claimed("u:p9", &HeaderMap::new()).project_id.as_deref(),
            Some("p9")
        );
        let mut h = HeaderMap::new();
        h.insert("openstack-system-scope", "all".parse().unwrap());
        let c = claimed("user", &h);
        assert!(c.system && c.project_id.is_none() && c.roles.is_empty());
    }

    #[test]
    fn a_429_says_when_to_retry() {
        let reply = Refusal::too_many("slow down").reply("req-1", &http::HeaderMap::new());
        assert_eq!(reply.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(reply.headers()[http::header::RETRY_AFTER], "1");
    }
}

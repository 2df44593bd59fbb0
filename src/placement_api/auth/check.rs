//! A request's token checked from its headers, by whichever authentication the API serves:
//! the static token, Kubernetes' TokenReview, Keystone, or (in tests) the roles headers
//! claim; and a refusal as the caller gets it.

use http::{HeaderMap, Method};

use super::keystone::{self, KeystoneAuth};
use super::kubernetes::KubernetesAuth;
use super::refusal::Refusal;
pub use crate::placement_api::caller::{Caller, Credentials};

/// The longest token taken, in bytes. Keystone's tokens are a few hundred bytes and
/// Kubernetes' service account tokens one or two thousand; a longer one is refused before
/// anyone is asked about it.
pub const MAX_TOKEN_BYTES: usize = 8192;

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
            Checked::Review(k, sent) => k
                .check(sent, verb(method))
                .map(|user| Caller::Unrestricted(Some(user))),
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
                .map(|user| Caller::Unrestricted(Some(user))),
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
                Ok(Checked::Done(Ok(Caller::Unrestricted(None))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

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
            Ok(Caller::Unrestricted(None))
        );
        for other in ["sesam", "sesame!", "SESAME", "x"] {
            let refused = auth.check(&Method::GET, &headers(other)).unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{other}");
        }
        assert!(same_token("a b", "a b") && !same_token("a", "") && !same_token("", "a"));
        // `TOKEN:PROJECT` is the same caller in a project, as in Placement's noauth2.
        assert_eq!(
            auth.check(&Method::GET, &headers("sesame:p1")),
            Ok(Caller::Unrestricted(None))
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

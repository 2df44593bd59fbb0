//! Callers checked by the Kubernetes API server: a TokenReview for the API's audience, then a
//! SubjectAccessReview of the RBAC verb the method needs on `placement.kubeplace.io`. Answers
//! are remembered for a short while by the token's digest (refused tokens apart from
//! accepted ones), and reviews of tokens remembered in neither are rate-limited.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::StatusCode;
use k8s_openapi::api::authentication::v1::{
    TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::refusal::Refusal;
use super::remembered::{Remembered, TokenDigest};

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
/// Reviews of tokens not remembered, per second and in a burst: enough for a fleet of
/// clients starting at once, while a client sending new bad tokens costs the API server
/// at most this many TokenReviews a second.
const REVIEWS_PER_SECOND: f64 = 20.0;
const REVIEWS_BURST: f64 = 40.0;

/// A review's answer: the user Kubernetes named, allowed the verb; or why not.
type Answer = Result<String, Refusal>;

/// What reviews answered, and how many more may be asked for now.
struct Reviews {
    /// Answers for tokens Kubernetes accepted (allowed or forbidden), by token and verb.
    accepted: Remembered<(TokenDigest, &'static str), Answer>,
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
    fn recall(&mut self, key: &(TokenDigest, &'static str), now: Instant) -> Option<Answer> {
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

    fn remember(&mut self, key: (TokenDigest, &'static str), answer: Answer, now: Instant) {
        match answer {
            Err(why) if why.status == StatusCode::UNAUTHORIZED => {
                let bytes = why.message.len();
                self.refused.keep(key.0, why, bytes, now + REFUSED_FOR, now);
            }
            answer => {
                self.refused.forget(&key.0);
                let bytes = match &answer {
                    Ok(user) => user.len(),
                    Err(why) => why.message.len(),
                };
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
) -> Answer
where
    F: std::future::Future<Output = Answer>,
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

    /// The user the token is of, when it may `verb`; why not otherwise.
    pub(super) fn check(&self, token: &str, verb: &'static str) -> Answer {
        self.runtime.block_on(self.check_async(token, verb))
    }

    pub(super) async fn check_async(&self, token: &str, verb: &'static str) -> Answer {
        decide(&self.remembered, (TokenDigest::of(token), verb), || {
            self.review(token, verb)
        })
        .await
    }

    async fn review(&self, token: &str, verb: &'static str) -> Answer {
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
            Some(s) if s.allowed => Ok(name),
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

    /// A fake reviewer: `good` is accepted, every other token refused; counts its calls.
    fn reviewing(
        remembered: &Mutex<Reviews>,
        calls: &std::cell::Cell<usize>,
        token: &str,
    ) -> Answer {
        futures::executor::block_on(decide(remembered, (TokenDigest::of(token), "get"), || {
            calls.set(calls.get() + 1);
            let answer = if token == "good" {
                Ok("system:serviceaccount:nova:nova".to_string())
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
        assert_eq!(
            reviewing(&remembered, &calls, "good").as_deref(),
            Ok("system:serviceaccount:nova:nova")
        );
        let started = Instant::now();
        let mut too_many = 0;
        for i in 0..(REMEMBERED + REFUSED) {
            match reviewing(&remembered, &calls, &format!("bad-{i}")) {
                Err(r) if r.status == StatusCode::TOO_MANY_REQUESTS => too_many += 1,
                Err(r) => assert_eq!(r.status, StatusCode::UNAUTHORIZED),
                Ok(_) => panic!("a bad token was accepted"),
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
        assert_eq!(
            reviewing(&remembered, &calls, "good").as_deref(),
            Ok("system:serviceaccount:nova:nova")
        );
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
        assert!(
            r.recall(&("good".into(), "get"), now)
                .is_some_and(|a| a.is_ok())
        );
    }

    #[test]
    fn a_full_cache_of_users_lets_the_least_recently_used_go() {
        let mut r = Reviews::new(Instant::now());
        let now = Instant::now();
        r.remember(("first".into(), "get"), Ok("first".into()), now);
        for i in 0..REMEMBERED {
            // "first" is used between every insert, so it is never the least recent.
            let later = now + Duration::from_millis(1 + i as u64);
            assert!(r.recall(&("first".into(), "get"), later).is_some(), "{i}");
            r.remember(
                (TokenDigest::of(&format!("user-{i}")), "get"),
                Ok(format!("user-{i}")),
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
            assert_eq!(
                checked.await.unwrap().as_deref(),
                Ok("system:serviceaccount:openstack:nova"),
                "allowed, and who it is"
            );
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
            assert_eq!(
                checked.await.unwrap().as_deref(),
                Ok("system:serviceaccount:openstack:nova"),
                "allowed, and who it is"
            );
        }
    }
}

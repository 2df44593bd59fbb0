//! Keystone's answers about tokens, kept for a while so that a client's every request does
//! not cost a validation ([`Remembered`]): by the token's digest (never the token), bounded
//! in number and in bytes (the least recently used go first) and in age
//! (`token_cache_time`, and never past the token's own expiry). Tokens Keystone refused are
//! kept apart, so a flood of bad tokens never pushes out a valid one.

use std::time::{Duration, Instant};

use super::remembered::{Remembered, TokenDigest};
use crate::placement_api::caller::Credentials;

/// Tokens kept at most, valid ones and refused ones each.
pub const KEPT: usize = 10_000;
/// Bytes of valid tokens' credentials kept at most: ten thousand callers of a dozen roles.
pub const KEPT_BYTES: usize = 16 << 20;
/// Bytes of refusals kept at most.
pub const REFUSED_BYTES: usize = 4 << 20;

/// Kept answers: credentials for valid tokens, the reason for refused ones.
pub struct Tokens {
    valid: Remembered<TokenDigest, Credentials>,
    refused: Remembered<TokenDigest, String>,
    /// How long an answer is kept at most.
    age: Duration,
}

/// What is known of a token.
#[derive(Debug, PartialEq, Eq)]
pub enum Known {
    Valid(Credentials),
    Refused(String),
}

impl Tokens {
    /// Keeps answers for `age` at most, `bound` of each kind at most, of [`KEPT_BYTES`] and
    /// [`REFUSED_BYTES`].
    pub fn new(age: Duration, bound: usize) -> Tokens {
        Tokens::within(age, bound, KEPT_BYTES, REFUSED_BYTES)
    }

    fn within(age: Duration, bound: usize, valid_bytes: usize, refused_bytes: usize) -> Tokens {
        Tokens {
            valid: Remembered::new(bound, valid_bytes),
            refused: Remembered::new(bound, refused_bytes),
            age,
        }
    }

    /// The answer kept for a token, if still fresh at `now`.
    pub fn recall(&mut self, token: &TokenDigest, now: Instant) -> Option<Known> {
        if let Some(creds) = self.valid.recall(token, now) {
            return Some(Known::Valid(creds));
        }
        self.refused.peek(token, now).map(Known::Refused)
    }

    /// Keeps a valid token's credentials until `expires` (the token's end) or the cache's
    /// age, whichever is first.
    pub fn keep_valid(
        &mut self,
        token: TokenDigest,
        creds: Credentials,
        expires: Instant,
        now: Instant,
    ) {
        let until = expires.min(now + self.age);
        if until <= now {
            return;
        }
        self.refused.forget(&token);
        let bytes = credentials_bytes(&creds);
        self.valid.keep(token, creds, bytes, until, now);
    }

    /// Keeps a refusal for the cache's age.
    pub fn keep_refused(&mut self, token: TokenDigest, why: String, now: Instant) {
        if self.age.is_zero() {
            return;
        }
        let bytes = why.len();
        self.refused.keep(token, why, bytes, now + self.age, now);
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        (self.valid.len(), self.refused.len())
    }
}

/// The heap a token's credentials take, about.
fn credentials_bytes(creds: &Credentials) -> usize {
    const STRING: usize = std::mem::size_of::<String>();
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    std::mem::size_of::<Credentials>()
        + creds.roles.iter().map(|r| STRING + r.len()).sum::<usize>()
        + text(&creds.project_id)
        + text(&creds.domain_id)
        + text(&creds.user_id)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn d(token: &str) -> TokenDigest {
        TokenDigest::of(token)
    }

    fn creds(project: &str) -> Credentials {
        Credentials {
            roles: vec!["admin".into()],
            project_id: Some(project.into()),
            ..Credentials::default()
        }
    }

    #[test]
    fn an_answer_lasts_the_cache_age_or_the_token_whichever_ends_first() {
        let now = Instant::now();
        let mut t = Tokens::new(Duration::from_secs(300), 10);
        t.keep_valid(d("long"), creds("p"), now + Duration::from_secs(3600), now);
        t.keep_valid(d("short"), creds("p"), now + Duration::from_secs(5), now);
        let later = now + Duration::from_secs(6);
        assert_eq!(t.recall(&d("long"), later), Some(Known::Valid(creds("p"))));
        assert_eq!(t.recall(&d("short"), later), None);
        assert_eq!(t.recall(&d("long"), now + Duration::from_secs(301)), None);
        // An answer about a token already expired is not kept.
        t.keep_valid(d("gone"), creds("p"), now, now);
        assert_eq!(t.recall(&d("gone"), now), None);
    }

    #[test]
    fn no_age_keeps_nothing() {
        let now = Instant::now();
        let mut t = Tokens::new(Duration::ZERO, 10);
        t.keep_valid(d("a"), creds("p"), now + Duration::from_secs(60), now);
        t.keep_refused(d("b"), "no".into(), now);
        assert_eq!(t.recall(&d("a"), now), None);
        assert_eq!(t.recall(&d("b"), now), None);
    }

    #[test]
    fn bad_tokens_never_push_out_a_valid_one_and_both_stay_bounded() {
        let now = Instant::now();
        let mut t = Tokens::new(Duration::from_secs(300), 100);
        t.keep_valid(d("user"), creds("p"), now + Duration::from_secs(3600), now);
        for i in 0..1000 {
            let at = now + Duration::from_millis(i);
            t.keep_refused(d(&format!("bad-{i}")), "no".into(), at);
        }
        for i in 0..150 {
            let at = now + Duration::from_millis(1000 + i);
            // The user keeps being used, so it is never the least recent.
            assert!(t.recall(&d("user"), at).is_some());
            t.keep_valid(
                d(&format!("v-{i}")),
                creds("q"),
                at + Duration::from_secs(60),
                at,
            );
        }
        let (valid, refused) = t.len();
        assert!(valid <= 100 && refused <= 100, "{valid} {refused}");
        assert!(t.recall(&d("user"), now + Duration::from_secs(2)).is_some());
        assert_eq!(
            t.recall(&d("bad-999"), now + Duration::from_secs(2)),
            Some(Known::Refused("no".into()))
        );
    }

    /// Twelve thousand distinct tokens of 60 KB each, refused: what is kept is bounded in
    /// bytes, and does not grow with the tokens' length.
    #[test]
    fn long_refused_tokens_cost_their_digest_not_their_length() {
        let now = Instant::now();
        let mut t = Tokens::within(Duration::from_secs(300), KEPT, KEPT_BYTES, 1 << 20);
        let mut token = "x".repeat(60_000);
        for i in 0..12_000 {
            token.truncate(59_990);
            token.push_str(&format!("{i:010}"));
            t.keep_refused(d(&token), "refused".into(), now);
        }
        let (_, refused) = t.len();
        assert!(refused * (super::super::remembered::ENTRY_BYTES + 7) <= 1 << 20);
        assert!(refused > 1000, "{refused}");
        assert!(t.refused.bytes() <= 1 << 20, "{}", t.refused.bytes());
    }
}

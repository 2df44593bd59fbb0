//! Keystone's answers about tokens, kept for a while so that a client's every request does
//! not cost a validation ([`Remembered`]): bounded in number (the least recently used go
//! first) and in age (`token_cache_time`, and never past the token's own expiry). Tokens
//! Keystone refused are kept apart, so a flood of bad tokens never pushes out a valid one.

use std::time::{Duration, Instant};

use crate::placement_api::policy::Credentials;
use crate::placement_api::remembered::Remembered;

/// Tokens kept at most, valid ones and refused ones each.
pub const KEPT: usize = 10_000;

/// Kept answers: credentials for valid tokens, the reason for refused ones.
pub struct Tokens {
    valid: Remembered<String, Credentials>,
    refused: Remembered<String, String>,
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
    /// Keeps answers for `age` at most, `bound` of each kind at most.
    pub fn new(age: Duration, bound: usize) -> Tokens {
        Tokens {
            valid: Remembered::new(bound),
            refused: Remembered::new(bound),
            age,
        }
    }

    /// The answer kept for `token`, if still fresh at `now`.
    pub fn recall(&mut self, token: &str, now: Instant) -> Option<Known> {
        if let Some(creds) = self.valid.recall(token, now) {
            return Some(Known::Valid(creds));
        }
        self.refused.peek(token, now).map(Known::Refused)
    }

    /// Keeps a valid token's credentials until `expires` (the token's end) or the cache's
    /// age, whichever is first.
    pub fn keep_valid(&mut self, token: &str, creds: Credentials, expires: Instant, now: Instant) {
        let until = expires.min(now + self.age);
        if until <= now {
            return;
        }
        self.refused.forget(token);
        self.valid.keep(token.to_string(), creds, until, now);
    }

    /// Keeps a refusal for the cache's age.
    pub fn keep_refused(&mut self, token: &str, why: String, now: Instant) {
        if self.age.is_zero() {
            return;
        }
        self.refused
            .keep(token.to_string(), why, now + self.age, now);
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        (self.valid.len(), self.refused.len())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

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
        t.keep_valid("long", creds("p"), now + Duration::from_secs(3600), now);
        t.keep_valid("short", creds("p"), now + Duration::from_secs(5), now);
        let later = now + Duration::from_secs(6);
        assert_eq!(t.recall("long", later), Some(Known::Valid(creds("p"))));
        assert_eq!(t.recall("short", later), None);
        assert_eq!(t.recall("long", now + Duration::from_secs(301)), None);
        // An answer about a token already expired is not kept.
        t.keep_valid("gone", creds("p"), now, now);
        assert_eq!(t.recall("gone", now), None);
    }

    #[test]
    fn no_age_keeps_nothing() {
        let now = Instant::now();
        let mut t = Tokens::new(Duration::ZERO, 10);
        t.keep_valid("a", creds("p"), now + Duration::from_secs(60), now);
        t.keep_refused("b", "no".into(), now);
        assert_eq!(t.recall("a", now), None);
        assert_eq!(t.recall("b", now), None);
    }

    #[test]
    fn bad_tokens_never_push_out_a_valid_one_and_both_stay_bounded() {
        let now = Instant::now();
        let mut t = Tokens::new(Duration::from_secs(300), 100);
        t.keep_valid("user", creds("p"), now + Duration::from_secs(3600), now);
        for i in 0..1000 {
            let at = now + Duration::from_millis(i);
            t.keep_refused(&format!("bad-{i}"), "no".into(), at);
        }
        for i in 0..150 {
            let at = now + Duration::from_millis(1000 + i);
            // The user keeps being used, so it is never the least recent.
            assert!(t.recall("user", at).is_some());
            t.keep_valid(
                &format!("v-{i}"),
                creds("q"),
                at + Duration::from_secs(60),
                at,
            );
        }
        let (valid, refused) = t.len();
        assert!(valid <= 100 && refused <= 100, "{valid} {refused}");
        assert!(t.recall("user", now + Duration::from_secs(2)).is_some());
        assert_eq!(
            t.recall("bad-999", now + Duration::from_secs(2)),
            Some(Known::Refused("no".into()))
        );
    }
}

//! Answers remembered for a while, so that a client's every request does not cost a
//! question to Kubernetes or Keystone (the Placement API's token checks: `placement_api::
//! auth` and `placement_api::keystone::cache`): each until its own deadline, and at most a
//! bound of them; room for a new one is made by dropping the stale ones first, then the
//! least recently used. Callers keep accepted and refused answers in two of these, so a
//! flood of bad tokens never pushes out a valid user.

use std::borrow::Borrow;
use std::hash::Hash;
use std::time::Instant;

use kubeplace_core::shelf::Shelf;

/// One remembered answer and its deadline.
struct Entry<V> {
    answer: V,
    until: Instant,
}

/// A token as the caches keep it: its SHA-256, never the token itself, so that what a cache
/// holds for a token does not grow with the token's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenDigest([u8; 32]);

impl From<&str> for TokenDigest {
    fn from(token: &str) -> TokenDigest {
        TokenDigest::of(token)
    }
}

impl TokenDigest {
    pub fn of(token: &str) -> TokenDigest {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(digest.as_ref());
        TokenDigest(bytes)
    }
}

/// What an entry costs beside its answer's own bytes: the key, the deadline, the shelf's
/// bookkeeping.
pub const ENTRY_BYTES: usize = 96;

/// Answers by key, bounded in number, in bytes, and each in time.
pub struct Remembered<K, V> {
    entries: Shelf<K, Entry<V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Remembered<K, V> {
    /// Remembers at most `bound` answers, of `bytes` bytes in all.
    pub fn new(bound: usize, bytes: usize) -> Remembered<K, V> {
        Remembered {
            entries: Shelf::new(bound, bytes),
        }
    }

    /// The answer for `key` if still fresh at `now`, which counts as a use of it.
    pub fn recall<Q>(&mut self, key: &Q, now: Instant) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let answer = self.peek(key, now)?;
        self.entries.touch(key);
        Some(answer)
    }

    /// The answer for `key` if still fresh at `now`, not counted as a use: refusals are let
    /// go in the order they came, however often they are sent again.
    pub fn peek<Q>(&self, key: &Q, now: Instant) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries
            .peek(key)
            .filter(|e| now < e.until)
            .map(|e| e.answer.clone())
    }

    /// Remembers `answer`, of `bytes` bytes, for `key` until `until`, making room first when
    /// full: the stale answers go first, then the least recently used. An answer larger than
    /// the whole bound is not remembered.
    pub fn keep(&mut self, key: K, answer: V, bytes: usize, until: Instant, now: Instant) {
        let _ = self
            .entries
            .keep(key, Entry { answer, until }, bytes + ENTRY_BYTES, |e| {
                e.until <= now
            });
    }

    /// Bytes of the answers kept.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.entries.bytes()
    }

    /// Forgets `key`'s answer.
    pub fn forget<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.remove(key);
    }

    /// Whether an answer is kept for `key`, fresh or not.
    pub fn holds<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.peek(key).is_some()
    }

    /// Answers kept, fresh or not.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_answer_lasts_until_its_deadline() {
        let now = Instant::now();
        let mut r = Remembered::new(4, usize::MAX);
        r.keep("a", 1, 0, now + Duration::from_secs(5), now);
        assert_eq!(r.recall("a", now + Duration::from_secs(4)), Some(1));
        assert_eq!(r.peek("a", now + Duration::from_secs(4)), Some(1));
        assert_eq!(r.recall("a", now + Duration::from_secs(5)), None);
        assert_eq!(r.peek("a", now + Duration::from_secs(5)), None);
        assert!(r.holds("a"), "a stale answer stays until room is needed");
        r.forget("a");
        assert!(!r.holds("a") && r.is_empty());
    }

    #[test]
    fn when_full_the_stale_go_first_then_the_least_recently_used() {
        let now = Instant::now();
        let at = |ms: u64| now + Duration::from_millis(ms);
        let long = at(60_000);
        let mut r = Remembered::new(3, usize::MAX);
        r.keep("stale", 0, 0, at(10), now);
        r.keep("old", 1, 0, long, at(1));
        r.keep("used", 2, 0, long, at(2));
        // Full: the stale one makes room.
        r.keep("new", 3, 0, long, at(20));
        assert!(!r.holds("stale") && r.len() == 3);
        // Full of fresh ones: "old" was used last before "used" was recalled.
        assert_eq!(r.recall("old", at(30)), Some(1));
        assert_eq!(r.recall("used", at(31)), Some(2));
        r.keep("newer", 4, 0, long, at(40));
        assert!(!r.holds("new") && r.holds("old") && r.holds("used"));
        // A peek is not a use: "old" goes although it was just peeked at.
        assert_eq!(r.peek("old", at(50)), Some(1));
        r.keep("newest", 5, 0, long, at(60));
        assert!(!r.holds("old"), "peeked, not used");
        // Replacing a kept key never evicts another.
        r.keep("newest", 6, 0, long, at(70));
        assert_eq!(r.len(), 3);
        assert_eq!(r.recall("newest", at(80)), Some(6));
    }

    #[test]
    fn answers_are_bounded_in_bytes_too() {
        let now = Instant::now();
        let long = now + Duration::from_secs(60);
        let mut r = Remembered::new(1000, 10 * (ENTRY_BYTES + 100));
        for i in 0..100 {
            r.keep(i, i, 100, long, now + Duration::from_millis(i));
        }
        assert_eq!(r.len(), 10, "ten answers of 100 bytes fit");
        assert!(r.bytes() <= 10 * (ENTRY_BYTES + 100));
        // The most recent stay.
        assert!(r.holds(&99) && !r.holds(&89));
        // One larger than the bound is not kept, and lets nothing go.
        r.keep(1000, 1000, 1 << 20, long, now);
        assert!(!r.holds(&1000) && r.len() == 10);
    }

    #[test]
    fn a_tokens_digest_is_its_sha256() {
        let d = TokenDigest::of("abc");
        assert_eq!(
            d.0[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "SHA-256(\"abc\") begins ba7816bf"
        );
        assert_ne!(TokenDigest::of("abc"), TokenDigest::of("abd"));
    }
}

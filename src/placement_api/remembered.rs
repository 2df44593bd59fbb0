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

/// Answers by key, bounded in number and each in time.
pub struct Remembered<K, V> {
    entries: Shelf<K, Entry<V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Remembered<K, V> {
    /// Remembers at most `bound` answers.
    pub fn new(bound: usize) -> Remembered<K, V> {
        Remembered {
            entries: Shelf::new(bound, usize::MAX),
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

    /// Remembers `answer` for `key` until `until`, making room first when full: the stale
    /// answers go first, then the least recently used.
    pub fn keep(&mut self, key: K, answer: V, until: Instant, now: Instant) {
        // Handed back only by a bound of none: then nothing is remembered.
        let _ = self
            .entries
            .keep(key, Entry { answer, until }, 0, |e| e.until <= now);
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
        let mut r = Remembered::new(4);
        r.keep("a", 1, now + Duration::from_secs(5), now);
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
        let mut r = Remembered::new(3);
        r.keep("stale", 0, at(10), now);
        r.keep("old", 1, long, at(1));
        r.keep("used", 2, long, at(2));
        // Full: the stale one makes room.
        r.keep("new", 3, long, at(20));
        assert!(!r.holds("stale") && r.len() == 3);
        // Full of fresh ones: "old" was used last before "used" was recalled.
        assert_eq!(r.recall("old", at(30)), Some(1));
        assert_eq!(r.recall("used", at(31)), Some(2));
        r.keep("newer", 4, long, at(40));
        assert!(!r.holds("new") && r.holds("old") && r.holds("used"));
        // A peek is not a use: "old" goes although it was just peeked at.
        assert_eq!(r.peek("old", at(50)), Some(1));
        r.keep("newest", 5, long, at(60));
        assert!(!r.holds("old"), "peeked, not used");
        // Replacing a kept key never evicts another.
        r.keep("newest", 6, long, at(70));
        assert_eq!(r.len(), 3);
        assert_eq!(r.recall("newest", at(80)), Some(6));
    }
}

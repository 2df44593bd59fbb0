//! Values kept by key within a number of values and of bytes. Room for a new value is made
//! by letting go, first, of every value its keeper says is of no more use (an answer of an
//! index no one holds, a token check past its deadline), then of the least recently used.
//! The Placement API's kept answers and parts and its remembered token checks are each
//! kept on one.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// A value on the shelf, its bytes, and when it was last used (on the shelf's clock).
struct Shelved<V> {
    value: V,
    bytes: usize,
    used: u64,
}

/// Values by key, at most `most` of them and of `most_bytes` bytes in all.
pub struct Shelf<K, V> {
    values: HashMap<K, Shelved<V>>,
    bytes: usize,
    clock: u64,
    most: usize,
    most_bytes: usize,
}

impl<K: Eq + Hash + Clone, V> Shelf<K, V> {
    /// A shelf holding at most `most` values of at most `most_bytes` bytes in all.
    pub fn new(most: usize, most_bytes: usize) -> Self {
        Shelf {
            values: HashMap::new(),
            bytes: 0,
            clock: 0,
            most,
            most_bytes,
        }
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The bytes the kept values hold, as each was counted when kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a value of `bytes` bytes could be kept (room made for it as [`Shelf::keep`]
    /// makes it).
    pub fn could_hold(&self, bytes: usize) -> bool {
        bytes <= self.most_bytes && self.most > 0
    }

    /// The value at `key`, not counted as a use.
    pub fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.values.get(key).map(|s| &s.value)
    }

    /// Counts a use of the value at `key`: it goes after every value used before.
    pub fn touch<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.clock += 1;
        let now = self.clock;
        if let Some(s) = self.values.get_mut(key) {
            s.used = now;
        }
    }

    /// Lets the value at `key` go.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let gone = self.values.remove(key)?;
        self.bytes -= gone.bytes;
        Some(gone.value)
    }

    /// Keeps `value`, of `bytes` bytes, at `key` in place of the value kept there, as just
    /// used. Room is made first from the values `useless` judges of no more use, then from
    /// the least recently used. A value that could never fit (more bytes than the shelf
    /// holds, or a shelf of no values) is handed back, and the shelf is left as it was.
    pub fn keep(
        &mut self,
        key: K,
        value: V,
        bytes: usize,
        useless: impl Fn(&V) -> bool,
    ) -> Result<(), V> {
        if !self.could_hold(bytes) {
            return Err(value);
        }
        self.remove(&key);
        let full = |shelf: &Self| {
            shelf.values.len() >= shelf.most || shelf.bytes + bytes > shelf.most_bytes
        };
        if full(self) {
            let useless: Vec<K> = self
                .values
                .iter()
                .filter(|(_, s)| useless(&s.value))
                .map(|(k, _)| k.clone())
                .collect();
            for k in &useless {
                self.remove(k);
            }
        }
        while full(self) {
            let Some(least) = self
                .values
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.remove(&least);
        }
        self.clock += 1;
        self.bytes += bytes;
        self.values.insert(
            key,
            Shelved {
                value,
                bytes,
                used: self.clock,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within its number and bytes; the least recently used go first, after the useless
    /// ones; a value kept again at its key replaces it and counts once.
    #[test]
    fn values_are_kept_within_their_number_and_bytes() {
        let mut shelf: Shelf<&str, i32> = Shelf::new(3, 100);
        let never = |_: &i32| false;
        assert_eq!(shelf.keep("huge", 1, 101, never), Err(1));
        assert!(shelf.is_empty());
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            shelf.keep(k, v, 10, never).unwrap();
        }
        assert_eq!((shelf.len(), shelf.bytes()), (3, 30));
        // A use of "a" leaves "b" the least recently used: it goes for "d".
        shelf.touch("a");
        shelf.keep("d", 4, 10, never).unwrap();
        assert_eq!(shelf.peek("b"), None);
        assert_eq!((shelf.peek("a"), shelf.peek("d")), (Some(&1), Some(&4)));
        // Kept again: replaced, counted once, no room made.
        shelf.keep("d", 40, 20, never).unwrap();
        assert_eq!((shelf.len(), shelf.bytes()), (3, 40));
        assert_eq!(shelf.peek("d"), Some(&40));
        // The useless go before the least recently used ("c").
        shelf.keep("e", 5, 10, |v| *v == 40).unwrap();
        assert_eq!(shelf.peek("d"), None);
        assert_eq!((shelf.peek("c"), shelf.peek("a")), (Some(&3), Some(&1)));
        // Bytes make room as the number does: the least recently used ("c") goes for 75.
        shelf.keep("f", 6, 75, never).unwrap();
        assert_eq!((shelf.len(), shelf.bytes()), (3, 95));
        assert_eq!(shelf.peek("c"), None);
        assert_eq!(shelf.remove("f"), Some(6));
        assert_eq!((shelf.len(), shelf.bytes()), (2, 20));
        // A shelf of no values keeps none.
        assert_eq!(
            Shelf::<&str, i32>::new(0, 100).keep("a", 1, 1, never),
            Err(1)
        );
    }
}

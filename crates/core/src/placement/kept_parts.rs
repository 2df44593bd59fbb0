//! Parts of large answers kept whole from one request to the next, within a number of bytes.
//!
//! A large answer (a list of tens of thousands of providers, tens of thousands of
//! allocation candidates) is written in parts. A part is kept with what it was written from;
//! a later answer with a part at the same place, written from the same things, is sent from
//! the kept bytes, shared, not copied. What "the same" means is each kind of part's own
//! (`list_parts`, `candidates_parts`): the shelf only finds a part by its place, keeps it
//! within its bytes, and lets the least recently sent go first.

use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use super::ids::ProviderId;
use crate::shelf::Shelf;

/// Parts smaller than this are written again each time: copying them costs less than
/// keeping them.
pub const KEPT_PART_MIN: usize = 64 << 10;

/// Whether each provider's kept entry now (`now`) is, by address, the one a part was
/// written from (`was`, in the providers' order): a provider changed since has none, or one
/// at a new address.
pub(crate) fn same_entries<'a>(
    providers: impl ExactSizeIterator<Item = ProviderId>,
    was: &[Arc<[u8]>],
    now: impl Fn(ProviderId) -> Option<&'a Arc<[u8]>>,
) -> bool {
    providers.len() == was.len()
        && providers
            .zip(was)
            .all(|(p, was)| now(p).is_some_and(|now| Arc::ptr_eq(now, was)))
}

/// A part written and kept: what it was written from, its bytes.
struct WrittenPart<F> {
    from: F,
    bytes: Vec<u8>,
}

/// A kept part, shared with the answers sending it.
pub struct KeptPart<F>(Arc<WrittenPart<F>>);

impl<F> Clone for KeptPart<F> {
    fn clone(&self) -> Self {
        KeptPart(self.0.clone())
    }
}

#[cfg(test)]
impl<F> KeptPart<F> {
    /// What the part was written from.
    pub(crate) fn from(&self) -> &F {
        &self.0.from
    }
}

impl<F> AsRef<[u8]> for KeptPart<F> {
    fn as_ref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl<F> std::fmt::Debug for KeptPart<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPart")
            .field("bytes", &self.0.bytes.len())
            .finish()
    }
}

/// The kept parts of one kind of answer, by place, within a number of bytes: the least
/// recently sent go first.
pub struct KeptParts<K, F> {
    least_bytes: usize,
    shelf: Mutex<Shelf<K, KeptPart<F>>>,
}

impl<K: Eq + Hash + Clone, F> KeptParts<K, F> {
    /// Keeping at most `most_bytes` bytes of parts.
    pub fn new(most_bytes: usize) -> Self {
        KeptParts {
            least_bytes: KEPT_PART_MIN,
            shelf: Mutex::new(Shelf::new(usize::MAX, most_bytes)),
        }
    }

    /// Keeping parts of any size (for tests of answers of a few entries).
    #[cfg(test)]
    pub(crate) fn keeping_every_part(most_bytes: usize) -> Self {
        KeptParts {
            least_bytes: 1,
            ..KeptParts::new(most_bytes)
        }
    }

    /// How many parts and bytes are kept.
    pub fn kept(&self) -> (usize, usize) {
        let shelf = self.lock();
        (shelf.len(), shelf.bytes())
    }

    /// The part kept at `key`, if `same` finds it written from what would be written now.
    pub(crate) fn find(&self, key: &K, same: impl FnOnce(&F) -> bool) -> Option<KeptPart<F>> {
        let part = self.lock().peek(key)?.clone();
        if !same(&part.0.from) {
            return None;
        }
        self.lock().touch(key);
        Some(part)
    }

    /// Keeps `bytes`, written from `from` (which holds `besides` bytes of its own) at `key`,
    /// in place of a part kept there before, when it is large enough and fits; the part to
    /// send either way.
    pub(crate) fn keep(
        &self,
        key: K,
        from: F,
        besides: usize,
        bytes: Vec<u8>,
    ) -> Result<KeptPart<F>, Vec<u8>> {
        if bytes.len() < self.least_bytes {
            return Err(bytes);
        }
        // A part is written in a buffer with room to spare (a megabyte for a few hundred
        // kilobytes): kept, it holds only its bytes. What it was written from counts too.
        let mut bytes = bytes;
        bytes.shrink_to_fit();
        let held = bytes.capacity() + besides;
        let mut shelf = self.lock();
        if !shelf.could_hold(held) {
            return Err(bytes);
        }
        let part = KeptPart(Arc::new(WrittenPart { from, bytes }));
        // Kept: it fits, as just asked under the same lock.
        let _ = shelf.keep(key, part.clone(), held, |_| false);
        Ok(part)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shelf<K, KeptPart<F>>> {
        self.shelf.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts under the least size or over every byte allowed are not kept; what they hold
    /// besides counts in the bound; the least recently sent goes first; keeping at a place
    /// replaces what was there.
    #[test]
    fn parts_are_kept_within_their_bytes_the_least_recently_sent_going_first() {
        let parts: KeptParts<u32, usize> = KeptParts::new(3 * KEPT_PART_MIN);
        let big = || vec![b'x'; KEPT_PART_MIN];
        assert!(parts.keep(0, 0, 0, vec![b'x'; 10]).is_err());
        assert!(parts.keep(0, 0, 2 * KEPT_PART_MIN + 1, big()).is_err());
        assert_eq!(parts.kept(), (0, 0));
        parts.keep(1, 10, 0, big()).unwrap();
        parts.keep(2, 20, KEPT_PART_MIN, big()).unwrap();
        assert_eq!(parts.kept(), (2, 3 * KEPT_PART_MIN));
        // Found only where `same` says so.
        assert!(parts.find(&1, |from| *from == 10).is_some());
        assert!(parts.find(&1, |from| *from == 11).is_none());
        assert!(parts.find(&3, |_| true).is_none());
        // 2 was sent less recently than 1: it goes to make room for 3.
        parts.keep(3, 30, 0, big()).unwrap();
        assert_eq!(parts.kept(), (2, 2 * KEPT_PART_MIN));
        assert!(parts.find(&2, |_| true).is_none());
        let found = parts.find(&3, |_| true).unwrap();
        assert_eq!((found.as_ref().len(), *found.from()), (KEPT_PART_MIN, 30));
        // Kept from a buffer with room to spare: only its bytes are held.
        let mut roomy = Vec::with_capacity(2 * KEPT_PART_MIN);
        roomy.extend_from_slice(&big());
        parts.keep(3, 30, 0, roomy).unwrap();
        assert_eq!(parts.kept(), (2, 2 * KEPT_PART_MIN));
        // In place of the part at the same place.
        parts.keep(3, 31, 0, big()).unwrap();
        assert_eq!(parts.kept(), (2, 2 * KEPT_PART_MIN));
        assert!(parts.find(&3, |from| *from == 31).is_some());
    }
}

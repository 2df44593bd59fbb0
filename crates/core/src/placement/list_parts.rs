//! Parts of `GET /resource_providers` answers kept whole from one request to the next.
//!
//! A list is written in parts of about a thousand entries, each entry the provider's
//! generation and its kept JSON ([`super::fragments`]). A part asked for again — the same
//! providers, at the same generations, with the same kept entries, in the same place of
//! its list — is sent from the bytes kept for it instead of being copied anew, entry by
//! entry: a list asked for again costs what sending its bytes costs.
//!
//! A part is known again by what it was written from, compared when it is asked for: its
//! providers and their generations, and the address of each provider's kept entry. The
//! index drops a provider's kept entry whenever it changes the provider, so a changed
//! provider has an entry at a new address; a kept part holds the entries it was written
//! from, so that no new entry can be made at the address of one it compares with.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::ids::ProviderId;

/// Parts smaller than this are written again each time: copying them costs less than
/// keeping them.
pub const KEPT_PART_MIN: usize = 64 << 10;

/// Where a part is in its list: what opens the list goes with the first part, what closes
/// it with the last, and a comma before each part but the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PartKey {
    first: ProviderId,
    entries: usize,
    opens: bool,
    closes: bool,
}

/// A part of a list, written and kept.
struct WrittenPart {
    key: PartKey,
    /// The providers and generations it lists, in order.
    providers: Vec<(ProviderId, u64)>,
    /// Each provider's kept entry it was written from.
    entries: Vec<Arc<[u8]>>,
    bytes: Vec<u8>,
    /// When it was last sent, on the clock of its [`ListParts`].
    used: AtomicU64,
}

/// A kept part, shared with the answers sending it.
#[derive(Clone)]
pub struct KeptPart(Arc<WrittenPart>);

impl AsRef<[u8]> for KeptPart {
    fn as_ref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl std::fmt::Debug for KeptPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPart")
            .field("entries", &self.0.providers.len())
            .field("bytes", &self.0.bytes.len())
            .finish()
    }
}

/// The kept parts of a server's lists, within a number of bytes: the least recently sent
/// go first.
pub struct ListParts {
    least_bytes: usize,
    most_bytes: usize,
    shelf: Mutex<Shelf>,
    clock: AtomicU64,
}

#[derive(Default)]
struct Shelf {
    parts: HashMap<PartKey, Arc<WrittenPart>>,
    bytes: usize,
}

impl ListParts {
    /// Keeping at most `most_bytes` bytes of parts (the kept entries they hold are mostly
    /// the index's own; those of providers changed since are held besides).
    pub fn new(most_bytes: usize) -> ListParts {
        ListParts {
            least_bytes: KEPT_PART_MIN,
            most_bytes,
            shelf: Mutex::new(Shelf::default()),
            clock: AtomicU64::new(0),
        }
    }

    /// Keeping parts of any size (for tests of lists of a few providers).
    #[cfg(test)]
    pub(crate) fn keeping_every_part(most_bytes: usize) -> ListParts {
        ListParts {
            least_bytes: 1,
            ..ListParts::new(most_bytes)
        }
    }

    /// How many parts and bytes are kept.
    pub fn kept(&self) -> (usize, usize) {
        let shelf = self.shelf.lock().unwrap_or_else(PoisonError::into_inner);
        (shelf.parts.len(), shelf.bytes)
    }

    /// The part kept for `providers` at this place of a list, if it was written from the
    /// entries `entry` gives now.
    pub(crate) fn find<'a>(
        &self,
        providers: &[(ProviderId, u64)],
        opens: bool,
        closes: bool,
        entry: impl Fn(ProviderId) -> Option<&'a Arc<[u8]>>,
    ) -> Option<KeptPart> {
        let key = PartKey {
            first: providers.first()?.0,
            entries: providers.len(),
            opens,
            closes,
        };
        let part = {
            let shelf = self.shelf.lock().unwrap_or_else(PoisonError::into_inner);
            shelf.parts.get(&key)?.clone()
        };
        let same = part.providers == providers
            && part
                .providers
                .iter()
                .zip(&part.entries)
                .all(|((p, _), was)| entry(*p).is_some_and(|now| Arc::ptr_eq(now, was)));
        if !same {
            return None;
        }
        part.used.store(self.tick(), Ordering::Relaxed);
        Some(KeptPart(part))
    }

    /// Keeps `bytes`, written from `providers` and their `entries` at this place of a list
    /// (in place of a part kept there before), when it is large enough and fits; the part
    /// to send either way.
    pub(crate) fn keep(
        &self,
        providers: &[(ProviderId, u64)],
        entries: Vec<Arc<[u8]>>,
        opens: bool,
        closes: bool,
        bytes: Vec<u8>,
    ) -> Result<KeptPart, Vec<u8>> {
        let Some(&(first, _)) = providers.first() else {
            return Err(bytes);
        };
        if bytes.len() < self.least_bytes || bytes.len() > self.most_bytes {
            return Err(bytes);
        }
        let key = PartKey {
            first,
            entries: providers.len(),
            opens,
            closes,
        };
        let part = Arc::new(WrittenPart {
            key,
            providers: providers.to_vec(),
            entries,
            bytes,
            used: AtomicU64::new(self.tick()),
        });
        let mut shelf = self.shelf.lock().unwrap_or_else(PoisonError::into_inner);
        let shelf = &mut *shelf;
        if let Some(old) = shelf.parts.insert(key, part.clone()) {
            shelf.bytes -= old.bytes.len();
        }
        shelf.bytes += part.bytes.len();
        while shelf.bytes > self.most_bytes {
            let Some(oldest) = shelf
                .parts
                .values()
                .filter(|p| !Arc::ptr_eq(p, &part))
                .min_by_key(|p| p.used.load(Ordering::Relaxed))
                .map(|p| p.key)
            else {
                break;
            };
            if let Some(gone) = shelf.parts.remove(&oldest) {
                shelf.bytes -= gone.bytes.len();
            }
        }
        Ok(KeptPart(part))
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize) -> Vec<Arc<[u8]>> {
        (0..n).map(|i| Arc::from(vec![i as u8; 8])).collect()
    }

    fn providers(first: u32, n: usize, generation: u64) -> Vec<(ProviderId, u64)> {
        (0..n as u32)
            .map(|i| (ProviderId(first + i), generation))
            .collect()
    }

    /// A part is found again only for the same providers, generations, entries and place;
    /// small parts are not kept; the least recently sent go once the bytes are spent.
    #[test]
    fn a_part_is_found_again_only_when_written_from_the_same_entries() {
        let parts = ListParts::new(3 * KEPT_PART_MIN);
        let listed = providers(0, 4, 1);
        let kept = entries(4);
        let at = |p: ProviderId| kept.get(p.index());
        let big = vec![b'x'; KEPT_PART_MIN];
        assert!(
            parts
                .keep(&listed, kept.clone(), true, false, vec![b'x'; 10])
                .is_err()
        );
        assert_eq!(parts.kept(), (0, 0));
        let part = parts
            .keep(&listed, kept.clone(), true, false, big.clone())
            .unwrap();
        assert_eq!(part.as_ref(), &big[..]);
        assert!(parts.find(&listed, true, false, at).is_some());
        // Elsewhere in a list, at another generation, or another entry: not the same.
        assert!(parts.find(&listed, false, false, at).is_none());
        assert!(parts.find(&listed, true, true, at).is_none());
        assert!(parts.find(&providers(0, 4, 2), true, false, at).is_none());
        assert!(parts.find(&providers(0, 3, 1), true, false, at).is_none());
        let changed = {
            let mut e = kept.clone();
            e[2] = Arc::from(vec![2u8; 8]);
            e
        };
        assert!(
            parts
                .find(&listed, true, false, |p| changed.get(p.index()))
                .is_none()
        );
        assert!(
            parts
                .find(&listed, true, false, |p| (p.index() != 3)
                    .then(|| kept.get(p.index()))
                    .flatten())
                .is_none()
        );
        // Three parts fit; a fourth sends away the one least recently sent.
        let second = providers(10, 4, 1);
        let third = providers(20, 4, 1);
        let fourth = providers(30, 4, 1);
        let far = |p: ProviderId| kept.get(p.index() % 10);
        for l in [&second, &third] {
            parts
                .keep(l, kept.clone(), false, false, big.clone())
                .unwrap();
        }
        assert_eq!(parts.kept(), (3, 3 * KEPT_PART_MIN));
        assert!(parts.find(&listed, true, false, at).is_some());
        parts
            .keep(&fourth, kept.clone(), false, true, big.clone())
            .unwrap();
        assert_eq!(parts.kept(), (3, 3 * KEPT_PART_MIN));
        assert!(parts.find(&second, false, false, far).is_none());
        assert!(parts.find(&listed, true, false, at).is_some());
        assert!(parts.find(&third, false, false, far).is_some());
        assert!(parts.find(&fourth, false, true, far).is_some());
        // Kept again at the same place: in place of the one before.
        parts
            .keep(&fourth, kept.clone(), false, true, big.clone())
            .unwrap();
        assert_eq!(parts.kept(), (3, 3 * KEPT_PART_MIN));
        // Larger than every byte allowed: not kept.
        assert!(
            parts
                .keep(&fourth, kept, false, true, vec![0; 4 * KEPT_PART_MIN])
                .is_err()
        );
    }
}

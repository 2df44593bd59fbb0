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

use std::sync::Arc;

use super::ids::ProviderId;
use super::kept_parts::{self, KeptParts};

pub use super::kept_parts::KEPT_PART_MIN;

/// Where a part is in its list: what opens the list goes with the first part, what closes
/// it with the last, and a comma before each part but the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartKey {
    first: ProviderId,
    entries: usize,
    opens: bool,
    closes: bool,
}

/// What a list part was written from.
pub struct ListedFrom {
    /// The providers and generations it lists, in order.
    providers: Vec<(ProviderId, u64)>,
    /// Each provider's kept entry it was written from.
    entries: Vec<Arc<[u8]>>,
}

/// A kept part of a list, shared with the answers sending it.
pub type KeptPart = kept_parts::KeptPart<ListedFrom>;

/// The kept parts of a server's lists, within a number of bytes: the least recently sent
/// go first.
pub struct ListParts(KeptParts<PartKey, ListedFrom>);

impl ListParts {
    /// Keeping at most `most_bytes` bytes of parts (the kept entries they hold are mostly
    /// the index's own; those of providers changed since are held besides).
    pub fn new(most_bytes: usize) -> ListParts {
        ListParts(KeptParts::new(most_bytes))
    }

    /// Keeping parts of any size (for tests of lists of a few providers).
    #[cfg(test)]
    pub(crate) fn keeping_every_part(most_bytes: usize) -> ListParts {
        ListParts(KeptParts::keeping_every_part(most_bytes))
    }

    /// How many parts and bytes are kept.
    pub fn kept(&self) -> (usize, usize) {
        self.0.kept()
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
        self.0.find(&key, |from| {
            from.providers == providers
                && kept_parts::same_entries(
                    from.providers.iter().map(|(p, _)| *p),
                    &from.entries,
                    entry,
                )
        })
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
        let key = PartKey {
            first,
            entries: providers.len(),
            opens,
            closes,
        };
        let from = ListedFrom {
            providers: providers.to_vec(),
            entries,
        };
        self.0.keep(key, from, 0, bytes)
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

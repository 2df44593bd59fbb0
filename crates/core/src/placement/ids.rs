//! The index's ids: provider slots, interned resource classes, traits and aggregates.
//!
//! Each is a `u32` underneath, but each numbers a different table; as distinct types an
//! id of one table cannot be used in another by mistake. Packed trees keep ids as raw
//! words and convert at their boundary.

use std::marker::PhantomData;

/// What the generic tables (the interner, [`SortedIds`]) need of an id.
pub(crate) trait Id: Copy + Ord {
    fn from_raw(raw: u32) -> Self;
    fn raw(self) -> u32;
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The id as an index into its table.
            #[inline]
            pub(crate) fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl Id for $name {
            #[inline]
            fn from_raw(raw: u32) -> Self {
                $name(raw)
            }

            #[inline]
            fn raw(self) -> u32 {
                self.0
            }
        }
    };
}

id_type!(
    /// A provider's slot in the index.
    ProviderId
);
impl ProviderId {
    /// Its slot's position, for a table kept beside the index (see
    /// [`super::ProviderIndex::slot_count`]).
    pub fn slot(self) -> usize {
        self.index()
    }
}

id_type!(
    /// An interned resource class.
    ClassId
);
id_type!(
    /// An interned trait.
    TraitId
);
id_type!(
    /// An interned aggregate uuid.
    AggregateId
);

/// Sorted ids of one table read from raw words, as a pack and a provider both keep them,
/// so the search reads either alike.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SortedIds<'a, I> {
    words: &'a [u32],
    id: PhantomData<I>,
}

impl<'a, I: Id> SortedIds<'a, I> {
    /// `words` must be sorted.
    #[inline]
    pub(crate) fn new(words: &'a [u32]) -> Self {
        SortedIds {
            words,
            id: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn contains(self, id: I) -> bool {
        self.words.binary_search(&id.raw()).is_ok()
    }

    #[inline]
    pub(crate) fn iter(self) -> impl Iterator<Item = I> + 'a {
        self.words.iter().map(|w| I::from_raw(*w))
    }
}

//! What a tree's walk found, kept by the places of its providers so that a tree alike can
//! replay it (`replay`).

use smallvec::SmallVec;

use crate::placement::ids::{ClassId, ProviderId};

/// Where a provider of a kept candidate is: by position in its tree's pack, or a sharing
/// provider linked to the tree, by slot (the same for every tree of the shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At {
    Tree(u32),
    Sharing(ProviderId),
}

/// One kept candidate, its providers by place.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) allocations: SmallVec<[(At, ClassId, i64); 4]>,
    /// Per group (by its place among the search's groups), the providers serving it.
    pub(super) mappings: SmallVec<[(usize, SmallVec<[At; 4]>); 1]>,
}

/// What a tree's walk found: its candidates, and the steps it took besides what the
/// visit charged for them.
#[derive(Debug)]
pub(super) struct Walked {
    pub(super) candidates: Vec<Kept>,
    pub(super) steps: u64,
    /// What the visit charged for the candidates when they were walked.
    pub(super) charged: u64,
}

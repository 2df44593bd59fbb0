//! What a group asks of one provider: its traits, aggregates and capacity judged against a
//! group, for a provider of the tree, its root, or a sharing provider linked to the tree.

use smallvec::SmallVec;

use super::group::Group;
use crate::placement::ids::{AggregateId, ClassId, ProviderId, SortedIds, TraitId};
use crate::placement::packed_tree::PackedTree;
use crate::placement::provider::Provider;

/// Whether sorted `aggregates` meet every any-of set.
pub(crate) fn in_every_set(
    aggregates: SortedIds<'_, AggregateId>,
    sets: &[Vec<AggregateId>],
) -> bool {
    sets.iter()
        .all(|any| any.iter().any(|a| aggregates.contains(*a)))
}

/// Whether sorted `aggregates` hold any of `wanted`.
pub(crate) fn in_any(aggregates: SortedIds<'_, AggregateId>, wanted: &[AggregateId]) -> bool {
    wanted.iter().any(|a| aggregates.contains(*a))
}

/// Whether sorted `traits` hold any of `wanted`.
pub(super) fn has_any(traits: SortedIds<'_, TraitId>, wanted: &[TraitId]) -> bool {
    wanted.iter().any(|t| traits.contains(*t))
}

/// Bit i set: `traits` hold a trait of the group's required any-of set i.
pub(super) fn required_mask(g: &Group, traits: SortedIds<'_, TraitId>) -> u16 {
    g.required
        .iter()
        .enumerate()
        .filter(|(_, any)| has_any(traits, any))
        .fold(0u16, |m, (i, _)| m | (1 << i))
}

/// Where the unnumbered group stands with a tree's root: whether the root is in the
/// group's aggregates, and whether it is in a forbidden one.
#[derive(Clone, Copy)]
pub(super) struct SpreadAnchor {
    pub(super) in_aggregates: bool,
    pub(super) forbidden: bool,
}

impl SpreadAnchor {
    pub(super) fn new(g: &Group, root_aggregates: SortedIds<'_, AggregateId>) -> Self {
        SpreadAnchor {
            in_aggregates: g
                .member_of
                .as_ref()
                .is_none_or(|m| in_every_set(root_aggregates, m)),
            forbidden: in_any(root_aggregates, &g.forbidden_aggregates),
        }
    }

    /// Whether the unnumbered group may take resources from a provider of the tree with
    /// these traits and aggregates. A sharing provider must also be in the group's
    /// aggregates itself.
    pub(super) fn keeps(
        &self,
        g: &Group,
        traits: SortedIds<'_, TraitId>,
        aggregates: SortedIds<'_, AggregateId>,
    ) -> bool {
        (self.in_aggregates
            || g.member_of
                .as_ref()
                .is_none_or(|m| in_every_set(aggregates, m)))
            && !self.forbidden
            && !in_any(aggregates, &g.forbidden_aggregates)
            && !has_any(traits, &g.forbidden)
    }
}

/// What the unnumbered group makes of a sharing provider linked to a tree: the same for
/// every tree, so judged once per query.
pub(super) struct SharedFacts {
    pub(super) root: ProviderId,
    /// [`required_mask`] of its traits.
    pub(super) mask: u16,
    /// Per requested class, whether its amount fits.
    pub(super) fits: SmallVec<[bool; 4]>,
}

impl SharedFacts {
    /// Whether and how a tree's unnumbered group may take resources from a linked sharing
    /// provider. (A tree whose root is in a forbidden aggregate gets nothing at all; the
    /// tree's own judgement, [`SpreadAnchor`], says so.)
    pub(super) fn judge(g: &Group, prov: &Provider) -> Option<SharedFacts> {
        let kept = g
            .member_of
            .as_ref()
            .is_none_or(|m| in_every_set(prov.aggregates(), m))
            && !in_any(prov.aggregates(), &g.forbidden_aggregates)
            && !has_any(prov.traits(), &g.forbidden);
        kept.then(|| SharedFacts {
            root: prov.root.unwrap_or(ProviderId(u32::MAX)),
            mask: required_mask(g, prov.traits()),
            fits: g.resources.iter().map(|(c, a)| prov.fits(*c, *a)).collect(),
        })
    }
}

/// What the search reads of one provider: from its tree's pack, or from the provider.
#[derive(Clone, Copy)]
pub(super) enum Facts<'f> {
    Packed(PackedTree<'f>, usize),
    Index(&'f Provider),
}

impl<'f> Facts<'f> {
    pub(super) fn traits(&self) -> SortedIds<'f, TraitId> {
        match self {
            Facts::Packed(t, i) => t.traits(*i),
            Facts::Index(p) => p.traits(),
        }
    }

    pub(super) fn aggregates(&self) -> SortedIds<'f, AggregateId> {
        match self {
            Facts::Packed(t, i) => t.aggregates(*i),
            Facts::Index(p) => p.aggregates(),
        }
    }

    pub(super) fn fits(&self, class: ClassId, amount: i64) -> bool {
        match self {
            Facts::Packed(t, i) => t.fits(*i, class, amount),
            Facts::Index(p) => p.fits(class, amount),
        }
    }
}

/// Whether one provider satisfies everything a numbered group asks of it.
pub(super) fn single_ok(g: &Group, f: Facts<'_>) -> bool {
    g.resources.iter().all(|(c, a)| f.fits(*c, *a))
        && g.required.iter().all(|any| has_any(f.traits(), any))
        && !has_any(f.traits(), &g.forbidden)
        && g.member_of
            .as_ref()
            .is_none_or(|m| in_every_set(f.aggregates(), m))
        && !in_any(f.aggregates(), &g.forbidden_aggregates)
}

//! A tree's candidates walked once and replayed for the trees alike after it.
//!
//! Wherever every candidate is wanted, a walk finds under a tree what the tree's pack and
//! the sharing providers its aggregates link allow (see `tree_shapes`). So a tree of a
//! shape walked before in the same query has the same candidates, each provider in the
//! same place of its tree: the first tree's candidates are kept with their providers by
//! position (or, for a linked sharing provider, by slot), and a tree alike makes its own
//! from them instead of listing parts and trying combinations. It reports them in the
//! walk's order and spends the walk's steps, so the answer, its order and where a budget
//! runs out are the walk's.
//!
//! Not replayed: searches with a limit that ends them (after a few trees, too soon for
//! replay to pay for keeping candidates), with same_subtree (which reads the tree's links,
//! not in the pack) or in_tree (which names one tree); trees whose walk met a candidate
//! made only of sharing providers (those count once across trees), trees with more
//! candidates than [`MAX_REPLAYED`], trees the budget left would not cover; and no tree is
//! kept any more once a walk has kept [`MAX_KEPT_FOR_REPLAY`] candidates.

use super::answer::Candidate;
use super::search::{Scratch, Search};
use super::visit::{Found, MadeOf, Visit};
use super::walked::{At, Kept, Walked};
use crate::placement::ids::ProviderId;
use crate::placement::packed_tree::PackedTree;
use crate::placement::tree_shapes::Lookup;

/// Most candidates a tree's walk may find and still be kept for replay.
const MAX_REPLAYED: usize = 256;
/// Most candidates one walk keeps for replay over all its trees (about 11 MiB): where
/// trees are seldom alike, what is kept is seldom replayed.
const MAX_KEPT_FOR_REPLAY: usize = 1 << 16;

/// Forwards a walk's candidates to the visit, and keeps them by place.
struct Recorder<'v, 'p, V> {
    inner: &'v mut V,
    pack: PackedTree<'p>,
    kept: Vec<Kept>,
    charged: u64,
    /// Cleared when the walk cannot be replayed (too many candidates, or some counted
    /// without being reported).
    replayable: bool,
}

impl<V> Recorder<'_, '_, V> {
    fn at(&self, p: ProviderId) -> At {
        match self.pack.ids().position(|q| q == p) {
            Some(i) => At::Tree(i as u32),
            None => At::Sharing(p),
        }
    }

    fn keep(&mut self, candidate: &Candidate) {
        let allocations = candidate
            .allocations
            .iter()
            .map(|(p, c, a)| (self.at(*p), *c, *a))
            .collect();
        let mappings = candidate
            .mappings
            .iter()
            .map(|(g, providers)| (g, providers.iter().map(|p| self.at(*p)).collect()))
            .collect();
        self.kept.push(Kept {
            allocations,
            mappings,
        });
    }
}

impl<V: Visit> Visit for Recorder<'_, '_, V> {
    fn wants_each(&self) -> bool {
        self.inner.wants_each()
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        let cost = self.inner.one(found)?;
        self.charged = self.charged.saturating_add(cost);
        if self.replayable && self.kept.len() < MAX_REPLAYED {
            self.keep(&found.candidate());
        } else {
            self.replayable = false;
        }
        Some(cost)
    }

    fn many(&mut self, n: usize) -> bool {
        self.replayable = false;
        self.inner.many(n)
    }

    fn tree(&mut self, anchor: ProviderId) {
        self.inner.tree(anchor);
    }
}

impl<'a> Search<'a> {
    /// Visits a tree's candidates, replaying those of a tree alike walked before in this
    /// query where there is one, and keeping them for the trees alike after where there
    /// is none; false when `visit` asks to stop.
    pub(super) fn visit_replayed(
        &self,
        anchor: ProviderId,
        s: &mut Scratch,
        visit: &mut impl Visit,
    ) -> bool {
        match s.walks.lookup(self.index, anchor) {
            Lookup::Known(shape) => match self.replay(shape, anchor, s, visit) {
                Some(done) => done,
                None => self.walk_tree(anchor, Lookup::Off, s, visit),
            },
            Lookup::Unseen(shape) if s.kept_for_replay < MAX_KEPT_FOR_REPLAY => {
                let before = s.steps.left;
                s.met_only_sharing = false;
                let mut recorder = Recorder {
                    inner: visit,
                    pack: self.index.root_pack(anchor),
                    kept: Vec::new(),
                    charged: 0,
                    replayable: true,
                };
                let done = self.walk_tree(anchor, Lookup::Off, s, &mut recorder);
                if done && !s.steps.ran_out && !s.met_only_sharing && recorder.replayable {
                    let walked = Walked {
                        steps: (before - s.steps.left).saturating_sub(recorder.charged),
                        charged: recorder.charged,
                        candidates: recorder.kept,
                    };
                    s.kept_for_replay += walked.candidates.len();
                    s.walks.remember(self.index, shape, anchor, walked);
                }
                done
            }
            Lookup::Unseen(_) | Lookup::Off => self.walk_tree(anchor, Lookup::Off, s, visit),
        }
    }

    /// Replays the candidates kept for `shape` under `anchor`: `None` where the budget
    /// left might not cover them (the tree is walked instead), else whether to go on.
    fn replay(
        &self,
        shape: u32,
        anchor: ProviderId,
        s: &mut Scratch,
        visit: &mut impl Visit,
    ) -> Option<bool> {
        let Scratch {
            walks,
            steps,
            sums,
            replayed,
            ..
        } = s;
        let walked = walks.get(shape)?;
        if steps.left < walked.steps.saturating_add(walked.charged) {
            return None;
        }
        let pack = self.index.root_pack(anchor);
        let place = |at: &At| match *at {
            At::Tree(i) => pack.id(i as usize),
            At::Sharing(p) => p,
        };
        if !steps.spend(walked.steps) {
            return Some(false);
        }
        for kept in &walked.candidates {
            sums.clear();
            sums.extend(
                kept.allocations
                    .iter()
                    .map(|(at, c, a)| (place(at), *c, *a)),
            );
            sums.sort_unstable_by_key(|(p, c, _)| (*p, *c));
            replayed.clear();
            // In this tree's slots; `Found::candidate` sorts each group's providers.
            for (g, ats) in &kept.mappings {
                replayed.push((*g, ats.iter().map(place).collect()));
            }
            let found = Found {
                allocations: sums,
                made_of: MadeOf::Mappings(replayed),
            };
            match visit.one(&found) {
                Some(cost) if steps.spend(cost) => {}
                _ => return Some(false),
            }
        }
        Some(true)
    }
}

//! Which of the candidates found an answer holds, by Placement's `[placement]` options:
//! `max_allocation_candidates` (at most so many generated, from the trees depth-first or in
//! turn), then the query's `limit`, taken at random with `randomize_allocation_candidates`
//! (which otherwise shuffles the whole answer), so that schedulers asking at once do not all
//! claim on the same first hosts. The provider summaries keep the trees the chosen
//! candidates use, as Placement's do.

use std::collections::{HashSet, VecDeque};

use super::answer::{Candidate, CandidateSet};
use crate::placement::ids::ProviderId;
use crate::placement::provider_tree::ProviderIndex;

/// The order candidates are generated in, across their trees, when they are capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Every candidate of the first tree, then of the next.
    #[default]
    DepthFirst,
    /// One candidate of each tree in turn.
    BreadthFirst,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Strategy, String> {
        match s {
            "depth-first" => Ok(Strategy::DepthFirst),
            "breadth-first" => Ok(Strategy::BreadthFirst),
            other => Err(format!(
                "{other:?} is not a generation strategy; give depth-first or breadth-first"
            )),
        }
    }
}

/// Placement's options for choosing among the candidates found; the default chooses as a
/// search alone does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Choosing {
    /// `randomize_allocation_candidates`.
    pub randomize: bool,
    /// `max_allocation_candidates` (none: -1).
    pub max: Option<usize>,
    /// `allocation_candidates_generation_strategy`.
    pub strategy: Strategy,
}

impl Choosing {
    /// Whether it chooses as the search alone does.
    pub fn is_plain(&self) -> bool {
        !self.randomize && self.max.is_none()
    }

    /// The limit to search with, for a query of `limit`: a search that stops early gives
    /// the first candidates, which is what is chosen without randomness, depth-first;
    /// otherwise every candidate (up to the cap, depth-first) is needed to choose from.
    pub fn search_limit(&self, limit: Option<usize>) -> Option<usize> {
        match (self.randomize, self.strategy, self.max) {
            (false, Strategy::DepthFirst, max) => match (limit, max) {
                (Some(l), Some(m)) => Some(l.min(m)),
                (l, m) => l.or(m),
            },
            (true, Strategy::DepthFirst, Some(max)) => Some(max),
            _ => None,
        }
    }
}

/// The tree a candidate is anchored in: the root of its first provider that is not
/// shared (its first provider's when all are).
fn anchor(index: &ProviderIndex, c: &Candidate) -> Option<ProviderId> {
    let first = c
        .allocations
        .iter()
        .map(|(p, _, _)| *p)
        .find(|p| index.sharing.binary_search(p).is_err())
        .or_else(|| c.allocations.first().map(|(p, _, _)| *p))?;
    Some(index.get(first).root.unwrap_or(first))
}

/// Keeps, of `set`'s candidates, those `choosing` and the query's `limit` choose;
/// `random(n)` gives a number below `n`.
pub fn choose(
    index: &ProviderIndex,
    set: &mut CandidateSet,
    limit: Option<usize>,
    choosing: &Choosing,
    random: &mut dyn FnMut(usize) -> usize,
) {
    let found = set.candidates.len();
    if let Some(max) = choosing.max.filter(|m| *m < set.candidates.len()) {
        match choosing.strategy {
            Strategy::DepthFirst => set.candidates.truncate(max),
            Strategy::BreadthFirst => {
                set.candidates = in_turn(index, std::mem::take(&mut set.candidates), max)
            }
        }
    }
    match limit.filter(|l| *l < set.candidates.len()) {
        Some(limit) if choosing.randomize => {
            // The first `limit` places of a shuffle: a sample in random order.
            for i in 0..limit {
                let j = i + random(set.candidates.len() - i);
                set.candidates.swap(i, j);
            }
            set.candidates.truncate(limit);
        }
        Some(limit) => set.candidates.truncate(limit),
        None if choosing.randomize => {
            for i in (1..set.candidates.len()).rev() {
                set.candidates.swap(i, random(i + 1));
            }
        }
        None => {}
    }
    if set.candidates.len() < found {
        keep_summaries_of_chosen(index, set);
    }
}

/// `candidates` taken one from each tree in turn, in the order the trees first appear,
/// until `max` are taken.
fn in_turn(index: &ProviderIndex, candidates: Vec<Candidate>, max: usize) -> Vec<Candidate> {
    let mut trees: Vec<(Option<ProviderId>, VecDeque<Candidate>)> = Vec::new();
    for c in candidates {
        let root = anchor(index, &c);
        match trees.iter_mut().find(|(r, _)| *r == root) {
            Some((_, queue)) => queue.push_back(c),
            None => trees.push((root, VecDeque::from([c]))),
        }
    }
    let mut taken = Vec::with_capacity(max);
    while taken.len() < max {
        let before = taken.len();
        for (_, queue) in trees.iter_mut() {
            if taken.len() == max {
                break;
            }
            if let Some(c) = queue.pop_front() {
                taken.push(c);
            }
        }
        if taken.len() == before {
            break;
        }
    }
    taken
}

/// The summaries of the trees the chosen candidates use (sharing providers' trees too).
fn keep_summaries_of_chosen(index: &ProviderIndex, set: &mut CandidateSet) {
    let root = |p: ProviderId| index.get(p).root.unwrap_or(p);
    let trees: HashSet<ProviderId> = set
        .candidates
        .iter()
        .flat_map(|c| c.allocations.iter().map(|(p, _, _)| root(*p)))
        .collect();
    set.summary_trees.retain(|t| trees.contains(t));
    if let Some(only) = &mut set.summary_only {
        only.retain(|p| trees.contains(&root(*p)));
    }
}

#[cfg(test)]
mod tests;

//! A provider tree's search data side by side.
//!
//! For every tree it considers, candidate search reads each provider's traits, its
//! aggregates and whether an amount of a class fits. Read from the providers themselves
//! that is several scattered allocations per provider, and over a hundred thousand trees
//! the search waits on memory more than it computes. A packed tree keeps those facts for a
//! whole tree in one run of 32-bit words, and every tree's run lives in one arena, laid out
//! in root-name order (the order the search visits trees in) each time it is compacted.
//! The index keeps the packs current as providers, provider configs and usages change.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

use super::ids::{AggregateId, ClassId, ProviderId, SortedIds, TraitId};
use super::inventory::Inventory;
use super::provider::Provider;

/// Whether an amount of one class fits on one provider at its present usage: the
/// inventory's unit rules and its free capacity folded into a range and a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PackedFit {
    class: ClassId,
    /// The smallest amount that fits (`i64::MAX` when none does).
    min: i64,
    /// The largest amount that fits: the lesser of maxUnit and what capacity leaves.
    max: i64,
    step: i64,
    /// The fit takes [`SHORT_FIT`] words (the inventory's minUnit and stepSize are both
    /// one). Decided by the inventory alone, so a change of usage never changes a fit's
    /// size and it can be rewritten in place.
    short: bool,
}

impl PackedFit {
    pub(crate) fn new(class: ClassId, inventory: &Inventory, used: i64) -> Self {
        let (min, max) = match headroom(inventory, used) {
            Some(h) if inventory.min_unit <= h.min(inventory.max_unit) => {
                (inventory.min_unit, h.min(inventory.max_unit))
            }
            _ => (i64::MAX, i64::MIN),
        };
        PackedFit {
            class,
            min,
            max,
            step: inventory.step_size,
            short: inventory.min_unit == 1 && inventory.step_size == 1,
        }
    }

    /// Exactly [`Inventory::admits`] at the usage the fit was made with.
    pub(crate) fn fits(&self, amount: i64) -> bool {
        amount >= self.min && amount <= self.max && amount.checked_rem(self.step) == Some(0)
    }
}

/// The largest amount that capacity leaves room for on top of `used`, as
/// [`Inventory::fits_capacity`] judges it; `None` when no amount does.
fn headroom(inventory: &Inventory, used: i64) -> Option<i64> {
    let fits = |amount: i64| inventory.fits_capacity(used, amount);
    if !fits(i64::MIN) {
        return None;
    }
    if fits(i64::MAX) {
        return Some(i64::MAX);
    }
    // The capacity test rises monotonically with the amount but is made in floating
    // point: its edge is searched for, not computed, so rounding can never disagree.
    let (mut lo, mut hi) = (i64::MIN as i128, i64::MAX as i128);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid as i64) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo as i64)
}

/// Set on a fit's class word when the fit takes [`LONG_FIT`] words: a minUnit or stepSize
/// other than 1. Others take [`SHORT_FIT`] words: the class and the largest amount.
const LONG: u32 = 1 << 31;
const SHORT_FIT: usize = 3;
const LONG_FIT: usize = 7;

impl PackedFit {
    fn write(&self, out: &mut Vec<u32>) {
        let halves = |v: i64| [v as u32, (v >> 32) as u32];
        if self.short {
            // Nothing fits: a largest amount of 0 under a minUnit of 1.
            let max = if self.min == i64::MAX { 0 } else { self.max };
            out.push(self.class.0);
            out.extend(halves(max));
        } else {
            out.push(self.class.0 | LONG);
            for v in [self.min, self.max, self.step] {
                out.extend(halves(v));
            }
        }
    }

    /// Reads a fit written at the start of `words`, and how many words it took.
    fn read(words: &[u32]) -> (Self, usize) {
        let int = |k: usize| (words[k] as u64 | (words[k + 1] as u64) << 32) as i64;
        if words[0] & LONG == 0 {
            let fit = PackedFit {
                class: ClassId(words[0]),
                min: 1,
                max: int(1),
                step: 1,
                short: true,
            };
            (fit, SHORT_FIT)
        } else {
            let fit = PackedFit {
                class: ClassId(words[0] & !LONG),
                min: int(1),
                max: int(3),
                step: int(5),
                short: false,
            };
            (fit, LONG_FIT)
        }
    }
}

/// Builds one tree's pack from its providers in walk order (root first, depth first,
/// children by name). The words, relative to the pack's start:
///
/// - word 0: the number of providers, n;
/// - n entries of 4 words: slot, and where the provider's traits, aggregates and fits end
///   (each starts where the previous provider's ended);
/// - every provider's fits, sorted by class, right after the entries, so that the root's
///   (which pruning reads alone) share the entries' first words;
/// - every provider's sorted traits, then its sorted aggregates.
pub(crate) fn pack<'p>(
    providers: impl IntoIterator<Item = (ProviderId, &'p Provider)>,
) -> Vec<u32> {
    let providers: Vec<(ProviderId, &Provider)> = providers.into_iter().collect();
    let n = providers.len();
    let mut words = vec![0u32; 1 + 4 * n];
    words[0] = n as u32;
    for (i, (id, p)) in providers.iter().enumerate() {
        for (c, inv) in &p.inventories {
            PackedFit::new(*c, inv, p.used(*c)).write(&mut words);
        }
        words[1 + 4 * i] = id.0;
        words[4 + 4 * i] = words.len() as u32;
    }
    for (i, (_, p)) in providers.iter().enumerate() {
        words.extend(p.trait_words.iter().copied());
        words[2 + 4 * i] = words.len() as u32;
        words.extend(p.aggregate_words.iter().copied());
        words[3 + 4 * i] = words.len() as u32;
    }
    words
}

/// One tree's pack, read where it lies (see [`pack`] for its words).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PackedTree<'a>(&'a [u32]);

impl<'a> PackedTree<'a> {
    pub(crate) fn len(&self) -> usize {
        self.0[0] as usize
    }

    /// The pack's words, exactly.
    pub(crate) fn words(&self) -> &'a [u32] {
        let n = self.len();
        &self.0[..self.0[3 + 4 * (n - 1)] as usize]
    }

    /// The providers' slots in walk order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = ProviderId> + 'a {
        let words = self.0;
        (0..self.len()).map(move |i| ProviderId(words[1 + 4 * i]))
    }

    pub(crate) fn id(&self, i: usize) -> ProviderId {
        ProviderId(self.0[1 + 4 * i])
    }

    /// Where the `i`th provider's traits begin and its fits begin.
    fn starts(&self, i: usize) -> (usize, usize) {
        match i.checked_sub(1) {
            Some(j) => (self.0[3 + 4 * j] as usize, self.0[4 + 4 * j] as usize),
            None => {
                let n = self.len();
                (self.0[4 + 4 * (n - 1)] as usize, 1 + 4 * n)
            }
        }
    }

    /// The `i`th provider's effective traits, sorted.
    pub(crate) fn traits(&self, i: usize) -> SortedIds<'a, TraitId> {
        let (start, _) = self.starts(i);
        SortedIds::new(&self.0[start..self.0[2 + 4 * i] as usize])
    }

    /// The `i`th provider's aggregates, sorted.
    pub(crate) fn aggregates(&self, i: usize) -> SortedIds<'a, AggregateId> {
        SortedIds::new(&self.0[self.0[2 + 4 * i] as usize..self.0[3 + 4 * i] as usize])
    }

    /// The `i`th provider's fits, each with where it begins relative to the pack.
    fn fits_of(&self, i: usize) -> impl Iterator<Item = (usize, PackedFit)> + 'a {
        let words = self.0;
        let mut at = self.starts(i).1;
        let end = words[4 + 4 * i] as usize;
        std::iter::from_fn(move || {
            (at < end).then(|| {
                let (fit, len) = PackedFit::read(&words[at..]);
                let here = at;
                at += len;
                (here, fit)
            })
        })
    }

    /// Calls `f(j)` for each requested `(class, amount)` at `j` that fits on the `i`th
    /// provider, reading its fits once.
    pub(crate) fn each_fit(
        &self,
        i: usize,
        requested: &[(ClassId, i64)],
        mut f: impl FnMut(usize),
    ) {
        for (_, fit) in self.fits_of(i) {
            for (j, (c, a)) in requested.iter().enumerate() {
                if *c == fit.class && fit.fits(*a) {
                    f(j);
                }
            }
        }
    }

    /// The pack's words in three runs that leave out its providers' slots: the count,
    /// each entry's three offsets (relative to the pack, so equal trees give equal words),
    /// and everything after the entries. What two trees must agree in for every query
    /// that reads only packs to answer them alike.
    fn shape_parts(&self) -> (u32, impl Iterator<Item = &'a [u32]>, &'a [u32]) {
        let words = self.words();
        let n = self.len();
        let entries = words[1..1 + 4 * n].chunks_exact(4).map(|e| &e[1..]);
        (words[0], entries, &words[1 + 4 * n..])
    }

    /// Feeds the words [`Self::shape_parts`] gives to `h`.
    fn hash_shape(&self, h: &mut impl Hasher) {
        let (n, entries, rest) = self.shape_parts();
        h.write_u32(n);
        for e in entries {
            h.write_u32(e[0]);
            h.write_u32(e[1]);
            h.write_u32(e[2]);
        }
        for &w in rest {
            h.write_u32(w);
        }
    }

    /// Whether two packs are alike in everything but their providers' slots.
    pub(crate) fn same_shape(&self, other: &PackedTree<'_>) -> bool {
        let (n, entries, rest) = self.shape_parts();
        let (m, other_entries, other_rest) = other.shape_parts();
        n == m && rest == other_rest && entries.zip(other_entries).all(|(a, b)| a == b)
    }

    /// Whether `amount` of `class` fits on the `i`th provider.
    pub(crate) fn fits(&self, i: usize, class: ClassId, amount: i64) -> bool {
        self.fits_of(i)
            .find(|(_, fit)| fit.class == class)
            .is_some_and(|(_, fit)| fit.fits(amount))
    }
}

/// Every root's pack in one arena.
#[derive(Debug, Clone, Default)]
pub(crate) struct PackedTrees {
    words: Vec<u32>,
    /// By slot: where the slot's pack starts, `u32::MAX` for a slot that is not a root.
    start: Vec<u32>,
    /// Words of packs replaced since the last compaction.
    garbage: usize,
    shapes: Shapes,
}

/// A shape: the class of trees whose packs agree in everything but their providers' slots
/// ([`PackedTree::same_shape`]). A query that reads only packs answers every tree of one
/// shape alike, so it can answer a shape once; the index keeps each root's shape as its
/// pack changes, comparing packs word for word, so that queries only look shapes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ShapeId(pub(crate) u32);

/// The roots of each shape.
#[derive(Debug, Clone, Default)]
struct Shapes {
    /// By slot: its shape, [`NO_SHAPE`] for a slot that is not a root.
    of: Vec<u32>,
    /// By slot: where it is among its shape's members.
    at: Vec<u32>,
    entries: Vec<ShapeEntry>,
    /// Shape hash → the first entry with that hash (others follow `next`).
    by_hash: HashMap<u64, u32>,
    /// Entries without members, to use again.
    free: Vec<u32>,
    hasher: RandomState,
}

#[derive(Debug, Clone)]
struct ShapeEntry {
    hash: u64,
    /// The roots of this shape; the first one's pack is compared with newcomers.
    members: Vec<ProviderId>,
    /// The next entry with the same hash, [`NO_SHAPE`] at the end.
    next: u32,
}

const NO_SHAPE: u32 = u32::MAX;

const NO_PACK: u32 = u32::MAX;

impl PackedTrees {
    /// A root's pack.
    pub(crate) fn get(&self, root: ProviderId) -> Option<PackedTree<'_>> {
        match self.start.get(root.index()) {
            Some(&start) if start != NO_PACK => Some(PackedTree(&self.words[start as usize..])),
            _ => None,
        }
    }

    /// A root's shape.
    pub(crate) fn shape(&self, root: ProviderId) -> Option<ShapeId> {
        match self.shapes.of.get(root.index()) {
            Some(&s) if s != NO_SHAPE => Some(ShapeId(s)),
            _ => None,
        }
    }

    /// How many shape ids there are (some may have no member now): every [`ShapeId`] is
    /// below it.
    pub(crate) fn shape_ids(&self) -> usize {
        self.shapes.entries.len()
    }

    /// Takes a root out of its shape, before its pack changes.
    fn leave_shape(&mut self, slot: ProviderId) {
        let shapes = &mut self.shapes;
        let Some(&id) = shapes.of.get(slot.index()) else {
            return;
        };
        if id == NO_SHAPE {
            return;
        }
        shapes.of[slot.index()] = NO_SHAPE;
        let at = shapes.at[slot.index()] as usize;
        let entry = &mut shapes.entries[id as usize];
        entry.members.swap_remove(at);
        if let Some(&moved) = entry.members.get(at) {
            shapes.at[moved.index()] = at as u32;
        }
        if !entry.members.is_empty() {
            return;
        }
        // Unlink the empty entry from its hash's chain.
        let (hash, next) = (entry.hash, entry.next);
        let head = shapes.by_hash[&hash];
        if head == id {
            if next == NO_SHAPE {
                shapes.by_hash.remove(&hash);
            } else {
                shapes.by_hash.insert(hash, next);
            }
        } else {
            let mut e = head;
            while shapes.entries[e as usize].next != id {
                e = shapes.entries[e as usize].next;
            }
            shapes.entries[e as usize].next = next;
        }
        shapes.entries[id as usize].members = Vec::new();
        shapes.free.push(id);
    }

    /// Puts a root in the shape of its (new) pack.
    fn join_shape(&mut self, slot: ProviderId) {
        let Some(tree) = self.get(slot) else { return };
        let mut h = self.shapes.hasher.build_hasher();
        tree.hash_shape(&mut h);
        let hash = h.finish();
        let mut found = None;
        let mut e = self.shapes.by_hash.get(&hash).copied().unwrap_or(NO_SHAPE);
        while e != NO_SHAPE {
            let entry = &self.shapes.entries[e as usize];
            let rep = self.get(entry.members[0]).expect("shape members are roots");
            if rep.same_shape(&tree) {
                found = Some(e);
                break;
            }
            e = entry.next;
        }
        let shapes = &mut self.shapes;
        let id = found.unwrap_or_else(|| {
            let next = shapes.by_hash.get(&hash).copied().unwrap_or(NO_SHAPE);
            let entry = ShapeEntry {
                hash,
                members: Vec::new(),
                next,
            };
            let id = match shapes.free.pop() {
                Some(id) => {
                    shapes.entries[id as usize] = entry;
                    id
                }
                None => {
                    shapes.entries.push(entry);
                    (shapes.entries.len() - 1) as u32
                }
            };
            shapes.by_hash.insert(hash, id);
            id
        });
        let i = slot.index();
        if shapes.of.len() <= i {
            shapes.of.resize(i + 1, NO_SHAPE);
            shapes.at.resize(i + 1, 0);
        }
        let members = &mut shapes.entries[id as usize].members;
        shapes.of[i] = id;
        shapes.at[i] = members.len() as u32;
        members.push(slot);
    }

    /// Sets or drops a slot's pack. When replaced packs make up most of the arena it is
    /// compacted, laying packs out in `order` (the roots in name order).
    pub(crate) fn set(
        &mut self,
        slot: ProviderId,
        pack: Option<Vec<u32>>,
        order: impl FnOnce() -> Vec<ProviderId>,
    ) {
        self.leave_shape(slot);
        self.place(slot, pack, order);
        self.join_shape(slot);
    }

    fn place(
        &mut self,
        slot: ProviderId,
        pack: Option<Vec<u32>>,
        order: impl FnOnce() -> Vec<ProviderId>,
    ) {
        let i = slot.index();
        if self.start.len() <= i {
            if pack.is_none() {
                return;
            }
            self.start.resize(i + 1, NO_PACK);
        }
        let old = self
            .get(slot)
            .map(|t| (self.start[i] as usize, t.words().len()));
        match (old, pack) {
            (None, None) => {}
            (Some((_, len)), None) => {
                self.start[i] = NO_PACK;
                self.garbage += len;
            }
            // Same size: written over the old one, so the arena keeps its order.
            (Some((at, len)), Some(words)) if len == words.len() => {
                self.words[at..at + len].copy_from_slice(&words);
            }
            (old, Some(words)) => {
                if let Some((_, len)) = old {
                    self.garbage += len;
                }
                self.start[i] = self.words.len() as u32;
                self.words.extend_from_slice(&words);
            }
        }
        if self.garbage > 1024 && self.garbage * 2 > self.words.len() {
            self.compact(order());
        }
    }

    /// Whether packs lie in `order` with nothing between them (as after a compaction), and
    /// how many words replaced packs hold.
    #[cfg(test)]
    pub(crate) fn layout(&self, order: &[ProviderId]) -> (bool, usize) {
        let mut at = 0;
        let mut in_order = true;
        for root in order {
            if let Some(t) = self.get(*root) {
                in_order &= self.start[root.index()] as usize == at;
                at += t.words().len();
            }
        }
        (in_order && at == self.words.len(), self.garbage)
    }

    fn compact(&mut self, order: Vec<ProviderId>) {
        let mut words = Vec::with_capacity(self.words.len() - self.garbage);
        for root in order {
            if let Some(t) = self.get(root) {
                let at = words.len() as u32;
                words.extend_from_slice(t.words());
                self.start[root.index()] = at;
            }
        }
        self.words = words;
        self.garbage = 0;
    }

    /// Follows a change of a provider's usage of one class, in place.
    pub(crate) fn set_usage(
        &mut self,
        root: ProviderId,
        id: ProviderId,
        class: ClassId,
        provider: &Provider,
    ) {
        let Some(tree) = self.get(root) else { return };
        let Some(i) = (0..tree.len()).find(|i| tree.id(*i) == id) else {
            return;
        };
        let at = tree.fits_of(i).find(|(_, fit)| fit.class == class);
        let (Some((at, _)), Some(inv)) = (at, provider.inventory(class)) else {
            return;
        };
        let mut words = Vec::with_capacity(LONG_FIT);
        PackedFit::new(class, inv, provider.used(class)).write(&mut words);
        let at = self.start[root.index()] as usize + at;
        if self.words[at..at + words.len()] == words[..] {
            return;
        }
        self.leave_shape(root);
        self.words[at..at + words.len()].copy_from_slice(&words);
        self.join_shape(root);
    }

    /// Checks that every root is in the shape of its pack and no other slot in any: two
    /// roots share a shape exactly when their packs are alike.
    #[cfg(test)]
    pub(crate) fn assert_shapes_fresh(&self) {
        let roots: Vec<ProviderId> = (0..self.start.len())
            .map(|i| ProviderId(i as u32))
            .filter(|r| self.get(*r).is_some())
            .collect();
        for i in 0..self.shapes.of.len().max(self.start.len()) {
            let slot = ProviderId(i as u32);
            assert_eq!(
                self.shape(slot).is_some(),
                self.get(slot).is_some(),
                "slot {slot} has a shape exactly when it has a pack"
            );
            if let Some(ShapeId(id)) = self.shape(slot) {
                let members = &self.shapes.entries[id as usize].members;
                assert_eq!(members[self.shapes.at[i] as usize], slot);
            }
        }
        for a in &roots {
            for b in &roots {
                let alike = self.get(*a).unwrap().same_shape(&self.get(*b).unwrap());
                assert_eq!(
                    self.shape(*a) == self.shape(*b),
                    alike,
                    "roots {a} and {b}: same shape exactly when alike"
                );
            }
        }
        let members: usize = self.shapes.entries.iter().map(|e| e.members.len()).sum();
        assert_eq!(members, roots.len(), "every root in one shape");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn inventory() -> impl Strategy<Value = Inventory> {
        let int = prop_oneof![
            -3i64..40,
            Just(0i64),
            Just(i64::MAX),
            Just(i64::MIN),
            Just(i32::MAX as i64),
            (1i64 << 52)..(1i64 << 54),
        ];
        let ratio = prop_oneof![
            Just(1.0f64),
            Just(0.57),
            Just(16.0),
            Just(3.40282e38),
            Just(f64::NAN),
            Just(0.0),
            -2.0f64..20.0,
        ];
        (
            int.clone(),
            int.clone(),
            int.clone(),
            int.clone(),
            -2i64..5,
            ratio,
        )
            .prop_map(|(total, reserved, min_unit, max_unit, step_size, ratio)| {
                Inventory {
                    total,
                    reserved,
                    min_unit,
                    max_unit,
                    step_size,
                    allocation_ratio: ratio,
                }
            })
    }

    fn amount() -> impl Strategy<Value = i64> {
        prop_oneof![
            -3i64..64,
            Just(i64::MAX),
            Just(i64::MIN),
            (1i64 << 52)..(1i64 << 54),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// A packed fit answers as the inventory does, however odd the inventory.
        #[test]
        fn packed_fit_agrees_with_the_inventory(
            inv in inventory(),
            used in amount(),
            amounts in proptest::collection::vec(amount(), 1..16),
        ) {
            let fit = PackedFit::new(ClassId(0), &inv, used);
            let mut words = Vec::new();
            fit.write(&mut words);
            let (read, len) = PackedFit::read(&words);
            prop_assert_eq!(len, words.len());
            for a in amounts {
                let admitted = inv.admits(used, a).is_ok();
                prop_assert_eq!(fit.fits(a), admitted, "amount {}", a);
                prop_assert_eq!(read.fits(a), admitted, "amount {} read back", a);
            }
        }
    }

    #[test]
    fn capacity_is_judged_in_floating_point() {
        // 100 * 0.57 is just under 57 as a float: 56 fits, 57 does not.
        let inv = Inventory {
            allocation_ratio: 0.57,
            ..Inventory::with_total(100)
        };
        let fit = PackedFit::new(ClassId(0), &inv, 0);
        assert!(fit.fits(56));
        assert!(!fit.fits(57));
        // Usage above capacity (after an inventory shrank) leaves no room at all.
        assert!(!PackedFit::new(ClassId(0), &Inventory::with_total(4), 9).fits(1));
    }

    #[test]
    fn unit_rules_carry_over() {
        let inv = Inventory {
            min_unit: 2,
            max_unit: 8,
            step_size: 2,
            ..Inventory::with_total(100)
        };
        let fit = PackedFit::new(ClassId(0), &inv, 95);
        assert_eq!(
            (1..=10).filter(|a| fit.fits(*a)).collect::<Vec<_>>(),
            vec![2, 4]
        );
    }
}

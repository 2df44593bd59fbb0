//! A provider tree's search data side by side.
//!
//! For every tree it considers, candidate search reads each provider's traits, its
//! aggregates and whether an amount of a class fits. Read from the providers themselves
//! that is several scattered allocations per provider, and over a hundred thousand trees
//! the search waits on memory more than it computes. A packed tree keeps those facts for a
//! whole tree in one run of 32-bit words, and every tree's run lives in one arena, laid out
//! in root-name order (the order the search visits trees in) each time it is compacted.
//! The index keeps the packs current as providers, provider configs and usages change.

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

    /// A hash of the words [`Self::shape_parts`] gives.
    pub(crate) fn shape_hash(&self) -> u64 {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mix = |h: u64, w: u32| (h.rotate_left(5) ^ u64::from(w)).wrapping_mul(K);
        let (n, entries, rest) = self.shape_parts();
        let mut h = mix(0, n);
        for e in entries {
            h = mix(mix(mix(h, e[0]), e[1]), e[2]);
        }
        // Two lanes, so that the multiplications do not wait on each other.
        let mut pairs = rest.chunks_exact(2);
        let mut g = h ^ K;
        for p in &mut pairs {
            h = mix(h, p[0]);
            g = mix(g, p[1]);
        }
        for &w in pairs.remainder() {
            h = mix(h, w);
        }
        mix(h ^ g.rotate_left(32), 0)
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
}

const NO_PACK: u32 = u32::MAX;

impl PackedTrees {
    /// A root's pack.
    pub(crate) fn get(&self, root: ProviderId) -> Option<PackedTree<'_>> {
        match self.start.get(root.index()) {
            Some(&start) if start != NO_PACK => Some(PackedTree(&self.words[start as usize..])),
            _ => None,
        }
    }

    /// Sets or drops a slot's pack. When replaced packs make up most of the arena it is
    /// compacted, laying packs out in `order` (the roots in name order).
    pub(crate) fn set(
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
        self.words[at..at + words.len()].copy_from_slice(&words);
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

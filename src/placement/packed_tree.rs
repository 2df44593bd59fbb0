//! A provider tree's search data side by side.
//!
//! For every tree it considers, candidate search reads each provider's traits, its
//! aggregates and whether an amount of a class fits. Read from the providers themselves
//! that is several scattered allocations per provider, and over a hundred thousand trees
//! the search waits on memory more than it computes. A packed tree keeps those facts for a
//! whole tree in three flat arrays; the index keeps it current as providers, provider
//! configs and usages change.

use super::inventory::Inventory;
use super::provider_tree::{AggregateId, ClassId, Provider, ProviderId, TraitId};

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

impl PackedFit {
    /// Words a fit takes in a packed tree.
    const WORDS: usize = 7;

    fn write(&self, out: &mut [u32]) {
        out[0] = self.class;
        for (k, v) in [self.min, self.max, self.step].into_iter().enumerate() {
            out[1 + 2 * k] = v as u32;
            out[2 + 2 * k] = (v >> 32) as u32;
        }
    }

    fn read(words: &[u32]) -> Self {
        let int = |k: usize| (words[1 + 2 * k] as u64 | (words[2 + 2 * k] as u64) << 32) as i64;
        PackedFit {
            class: words[0],
            min: int(0),
            max: int(1),
            step: int(2),
        }
    }
}

/// One tree's providers in walk order (root first, depth first, children by name), with
/// their effective traits, aggregates and fits, in a single allocation of 32-bit words so
/// that reading a tree touches one run of memory:
///
/// - word 0: the number of providers, n;
/// - n entries of 4 words: slot, and where the provider's traits, aggregates and fits end
///   (each starts where the previous provider's ended, the first right after the entries);
/// - every provider's sorted traits, then its sorted aggregates;
/// - every provider's fits, sorted by class, [`PackedFit::WORDS`] words each.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PackedTree(Box<[u32]>);

impl PackedTree {
    /// Packs providers given in walk order.
    pub(crate) fn pack<'p>(
        providers: impl IntoIterator<Item = (ProviderId, &'p Provider)>,
    ) -> Self {
        let providers: Vec<(ProviderId, &Provider)> = providers.into_iter().collect();
        let n = providers.len();
        let mut words = vec![0u32; 1 + 4 * n];
        words[0] = n as u32;
        for (i, (id, p)) in providers.iter().enumerate() {
            words.extend(p.traits.iter().copied());
            let traits_end = words.len() as u32;
            words.extend(p.aggregates.iter().copied());
            words[1 + 4 * i] = *id;
            words[2 + 4 * i] = traits_end;
            words[3 + 4 * i] = words.len() as u32;
        }
        for (i, (_, p)) in providers.iter().enumerate() {
            for (c, inv) in &p.inventories {
                let at = words.len();
                words.resize(at + PackedFit::WORDS, 0);
                PackedFit::new(*c, inv, p.used(*c)).write(&mut words[at..]);
            }
            words[4 + 4 * i] = words.len() as u32;
        }
        PackedTree(words.into())
    }

    pub(crate) fn len(&self) -> usize {
        self.0[0] as usize
    }

    /// The providers' slots in walk order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = ProviderId> + '_ {
        (0..self.len()).map(|i| self.id(i))
    }

    pub(crate) fn id(&self, i: usize) -> ProviderId {
        self.0[1 + 4 * i]
    }

    /// Where the `i`th provider's words begin and its fits begin.
    fn starts(&self, i: usize) -> (usize, usize) {
        match i.checked_sub(1) {
            Some(j) => (self.0[3 + 4 * j] as usize, self.0[4 + 4 * j] as usize),
            None => {
                let n = self.len();
                let words = 1 + 4 * n;
                let fits = if n == 0 {
                    words
                } else {
                    self.0[3 + 4 * (n - 1)] as usize
                };
                (words, fits)
            }
        }
    }

    /// The `i`th provider's effective traits, sorted.
    pub(crate) fn traits(&self, i: usize) -> &[TraitId] {
        let (start, _) = self.starts(i);
        &self.0[start..self.0[2 + 4 * i] as usize]
    }

    /// The `i`th provider's aggregates, sorted.
    pub(crate) fn aggregates(&self, i: usize) -> &[AggregateId] {
        &self.0[self.0[2 + 4 * i] as usize..self.0[3 + 4 * i] as usize]
    }

    /// Where the `i`th provider's fit of `class` begins.
    fn fit_at(&self, i: usize, class: ClassId) -> Option<usize> {
        let (_, start) = self.starts(i);
        (start..self.0[4 + 4 * i] as usize)
            .step_by(PackedFit::WORDS)
            .find(|at| self.0[*at] == class)
    }

    /// Whether `amount` of `class` fits on the `i`th provider.
    pub(crate) fn fits(&self, i: usize, class: ClassId, amount: i64) -> bool {
        self.fit_at(i, class)
            .is_some_and(|at| PackedFit::read(&self.0[at..]).fits(amount))
    }

    /// Follows a change of a provider's usage of one class.
    pub(crate) fn set_usage(&mut self, id: ProviderId, class: ClassId, provider: &Provider) {
        let Some(i) = (0..self.len()).find(|i| self.id(*i) == id) else {
            return;
        };
        if let (Some(at), Some(inv)) = (self.fit_at(i, class), provider.inventory(class)) {
            PackedFit::new(class, inv, provider.used(class)).write(&mut self.0[at..]);
        }
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
            let fit = PackedFit::new(0, &inv, used);
            let mut words = [0u32; PackedFit::WORDS];
            fit.write(&mut words);
            prop_assert_eq!(PackedFit::read(&words), fit);
            for a in amounts {
                prop_assert_eq!(fit.fits(a), inv.admits(used, a).is_ok(), "amount {}", a);
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
        let fit = PackedFit::new(0, &inv, 0);
        assert!(fit.fits(56));
        assert!(!fit.fits(57));
        // Usage above capacity (after an inventory shrank) leaves no room at all.
        assert!(!PackedFit::new(0, &Inventory::with_total(4), 9).fits(1));
    }

    #[test]
    fn unit_rules_carry_over() {
        let inv = Inventory {
            min_unit: 2,
            max_unit: 8,
            step_size: 2,
            ..Inventory::with_total(100)
        };
        let fit = PackedFit::new(0, &inv, 95);
        assert_eq!(
            (1..=10).filter(|a| fit.fits(*a)).collect::<Vec<_>>(),
            vec![2, 4]
        );
    }
}

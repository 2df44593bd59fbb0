//! Trees that can take one more of a request on their own: a candidate made only of the
//! tree's own providers, none of which shares via an aggregate.
//!
//! Such a tree goes on fitting one more until something is placed in it, whatever is placed
//! elsewhere: a placement anchored in another tree uses that tree's providers and sharing
//! providers only. So where `n` such trees exist, `n` requests placed one after another
//! each find a candidate, however each is chosen. Headroom counts use this to stop early.

use super::search::prepare;
use super::visit::{Found, Visit};
use crate::placement::ids::ProviderId;
use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::CandidatesQuery;

/// Counts trees with a candidate of their own, up to `at_least`.
struct OnTheirOwn<'i> {
    index: &'i ProviderIndex,
    /// Whether the tree whose candidates come now is counted already.
    counted: bool,
    trees: usize,
    at_least: usize,
}

impl Visit for OnTheirOwn<'_> {
    fn wants_each(&self) -> bool {
        // Each candidate's providers are judged: a count alone cannot say whose they are.
        true
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        if self.counted {
            return Some(0);
        }
        // A candidate's providers outside its tree are sharing ones, so a candidate with
        // none that shares is made of the tree's own providers.
        let own = found
            .allocations
            .iter()
            .all(|(p, _, _)| self.index.sharing.binary_search(p).is_err());
        if own {
            self.counted = true;
            self.trees += 1;
            if self.trees >= self.at_least {
                return None;
            }
        }
        Some(0)
    }

    fn many(&mut self, _n: usize) -> bool {
        // Not called for a visit that wants each candidate; counts nothing if it were.
        true
    }

    fn tree(&mut self, _anchor: ProviderId) {
        self.counted = false;
    }
}

/// How many trees can each take one more of the query on their own providers alone, none
/// of them sharing via an aggregate; counting stops at `at_least`, and where the search
/// runs out of its budget, at the trees found by then (still a lower bound). The query's
/// limit is not applied.
pub fn trees_fitting_alone(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    at_least: usize,
) -> usize {
    if at_least == 0 {
        return 0;
    }
    let mut search = prepare(index, query);
    search.limit = None;
    search.walk_before_pruning = 0;
    let mut visit = OnTheirOwn {
        index,
        counted: false,
        trees: 0,
        at_least,
    };
    search.run(&mut visit);
    visit.trees
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Inventory;
    use crate::placement::microversion::Microversion;
    use crate::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
    use crate::placement::query::parse_candidates_query;

    const AGG: &str = "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01";

    fn rp(
        index: &mut ProviderIndex,
        name: &str,
        parent: Option<&str>,
        inventories: &[(&str, i64)],
        traits: &[&str],
        aggregates: &[&str],
    ) {
        index.upsert_provider(ProviderRecord {
            name: name.into(),
            uuid: crate::placement::derived_provider_uuid(name),
            placement_name: None,
            parent: parent.map(Into::into),
            inventories: inventories
                .iter()
                .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                .collect(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
            aggregates: aggregates.iter().map(|a| a.to_string()).collect(),
        });
    }

    /// cn1 holds VCPU and disk itself; cn2 has no disk but a pool's through the aggregate;
    /// cn3 has its VCPU in a NUMA cell and its disk on the root; cn4's only disk is a
    /// provider of its own that shares via the aggregate; cn5 has VCPU but all of it used.
    fn cloud() -> ProviderIndex {
        let mut index = ProviderIndex::default();
        rp(
            &mut index,
            "cn1",
            None,
            &[("VCPU", 8), ("DISK_GB", 100)],
            &[],
            &[],
        );
        rp(&mut index, "cn2", None, &[("VCPU", 8)], &[], &[AGG]);
        rp(
            &mut index,
            "pool",
            None,
            &[("DISK_GB", 1000)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        );
        rp(&mut index, "cn3", None, &[("DISK_GB", 100)], &[], &[]);
        rp(
            &mut index,
            "cn3-numa0",
            Some("cn3"),
            &[("VCPU", 4)],
            &[],
            &[],
        );
        rp(&mut index, "cn4", None, &[("VCPU", 8)], &[], &[]);
        rp(
            &mut index,
            "cn4-disk",
            Some("cn4"),
            &[("DISK_GB", 100)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        );
        rp(
            &mut index,
            "cn5",
            None,
            &[("VCPU", 2), ("DISK_GB", 100)],
            &[],
            &[],
        );
        index.upsert_allocations(
            "used",
            ConsumerAllocations {
                consumer: "used".into(),
                items: vec![("cn5".into(), "VCPU".into(), 2)],
            },
        );
        index
    }

    fn alone(index: &ProviderIndex, q: &str, at_least: usize) -> usize {
        let query = parse_candidates_query(q, Microversion::LATEST).unwrap();
        trees_fitting_alone(index, &query, at_least)
    }

    #[test]
    fn only_trees_with_a_candidate_of_their_own_unshared_providers_count() {
        let index = cloud();
        // cn1 and cn3 alone: cn2 needs the pool, cn4's disk shares, cn5 is full.
        assert_eq!(alone(&index, "resources=VCPU:1,DISK_GB:10", 100), 2);
        // VCPU alone: cn1, cn2, cn3 and cn4 (cn5 is full; the pool has none).
        assert_eq!(alone(&index, "resources=VCPU:1", 100), 4);
        // Disk alone: cn1, cn3 and cn5; the pool and cn4's disk share theirs.
        assert_eq!(alone(&index, "resources=DISK_GB:10", 100), 3);
        // More than any one provider holds: none.
        assert_eq!(alone(&index, "resources=VCPU:9", 100), 0);
    }

    #[test]
    fn counting_stops_at_the_number_asked_for() {
        let index = cloud();
        assert_eq!(alone(&index, "resources=VCPU:1", 2), 2);
        assert_eq!(alone(&index, "resources=VCPU:1", 1), 1);
        assert_eq!(alone(&index, "resources=VCPU:1", 0), 0);
    }

    #[test]
    fn traits_aggregates_and_numbered_groups_are_the_searchs() {
        let mut index = cloud();
        rp(
            &mut index,
            "cn6",
            None,
            &[("VCPU", 8), ("DISK_GB", 100)],
            &["HW_CPU_X86_AVX2"],
            &[],
        );
        assert_eq!(
            alone(
                &index,
                "resources=VCPU:1,DISK_GB:10&required=HW_CPU_X86_AVX2",
                100
            ),
            1
        );
        assert_eq!(
            alone(
                &index,
                "resources=VCPU:1,DISK_GB:10&required=!HW_CPU_X86_AVX2",
                100
            ),
            2
        );
        // A numbered group on the NUMA cell, the disk in the unnumbered group.
        assert_eq!(
            alone(&index, "resources=DISK_GB:10&resources1=VCPU:1", 100),
            3
        );
        // member_of the aggregate: only cn2 and cn4 are in it, and neither fits alone.
        assert_eq!(
            alone(
                &index,
                &format!("resources=VCPU:1,DISK_GB:10&member_of={AGG}"),
                100
            ),
            0
        );
    }
}

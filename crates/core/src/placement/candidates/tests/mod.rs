//! Candidate search on small hand-built trees: Placement's rules one by one (`rules`), and
//! the ways of walking the trees compared with walking every tree and combination
//! (`walks`).

mod rules;
mod walks;

use super::{CandidateSet, allocation_candidates};
use crate::placement::Inventory;
use crate::placement::microversion::Microversion;
use crate::placement::provider_tree::{ConsumerAllocations, ProviderIndex, ProviderRecord};
use crate::placement::query::parse_candidates_query;

const AGG: &str = "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01";
const AGG2: &str = "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02";

struct Cloud(ProviderIndex);

impl Cloud {
    fn new() -> Self {
        Cloud(ProviderIndex::default())
    }

    fn rp(
        mut self,
        name: &str,
        parent: Option<&str>,
        inv: &[(&str, i64)],
        traits: &[&str],
        aggs: &[&str],
    ) -> Self {
        self.0.upsert_provider(ProviderRecord {
            name: name.into(),
            uuid: crate::placement::derived_provider_uuid(name),
            placement_name: None,
            parent: parent.map(Into::into),
            inventories: inv
                .iter()
                .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                .collect(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
            aggregates: aggs.iter().map(|a| a.to_string()).collect(),
        });
        self
    }

    /// A sharing provider `pool` of DISK_GB in aggregate [`AGG`].
    fn disk_pool(self) -> Self {
        self.rp(
            "pool",
            None,
            &[("DISK_GB", 1000)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        )
    }

    fn inv(mut self, name: &str, class: &str, inv: Inventory) -> Self {
        let mut r = self.0.provider(name).unwrap();
        r.inventories.insert(class.into(), inv);
        self.0.upsert_provider(r);
        self
    }

    fn used(mut self, name: &str, class: &str, n: i64) -> Self {
        let key = format!("{name}-{class}");
        self.0.upsert_allocations(
            &key,
            ConsumerAllocations {
                consumer: key.clone(),
                items: vec![(name.into(), class.into(), n)],
            },
        );
        self
    }

    /// Candidates as sorted lists of "provider:CLASS=n", one string per candidate, sorted.
    fn ask_at(&self, q: &str, mv: u16) -> Vec<String> {
        let query = parse_candidates_query(q, Microversion(mv)).unwrap();
        let set = allocation_candidates(&self.0, &query);
        let mut out: Vec<String> = set
            .candidates
            .iter()
            .map(|c| {
                let mut parts: Vec<String> = set
                    .named(&self.0, c)
                    .into_iter()
                    .map(|(p, cl, a)| format!("{p}:{cl}={a}"))
                    .collect();
                parts.sort();
                parts.join(" ")
            })
            .collect();
        out.sort();
        out
    }

    fn ask(&self, q: &str) -> Vec<String> {
        self.ask_at(q, 39)
    }

    fn set(&self, q: &str, mv: u16) -> CandidateSet {
        allocation_candidates(
            &self.0,
            &parse_candidates_query(q, Microversion(mv)).unwrap(),
        )
    }
}

fn numa_node(c: Cloud, cn: &str, root_traits: &[&str]) -> Cloud {
    c.rp(cn, None, &[("DISK_GB", 100)], root_traits, &[])
        .rp(
            &format!("{cn}-numa0"),
            Some(cn),
            &[("VCPU", 4), ("MEMORY_MB", 1024)],
            &[],
            &[],
        )
        .rp(
            &format!("{cn}-numa1"),
            Some(cn),
            &[("VCPU", 4), ("MEMORY_MB", 1024)],
            &[],
            &[],
        )
}

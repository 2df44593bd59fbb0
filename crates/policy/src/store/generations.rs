//! Placement's provider generations over a cluster, as records the objects carry.
//!
//! A provider's generation must move on every change Placement counts (its inventories,
//! traits and aggregates, and claims, moves and reshapes of allocations on it), and must
//! read the same on every replica and after every restart. The API server moves a
//! ResourceProvider's `metadata.generation` on each change of its spec; claims change only
//! Allocation objects. So a write that moves a provider's generation further than its spec
//! does leaves a record `G@M`: "the generation was G when the provider's
//! `metadata.generation` was M". An Allocation records it for each provider it holds
//! ([`PROVIDER_GENERATIONS_ANNOTATION`], `name=G@M,…`): a claim costs no write besides its
//! own. A provider that no written Allocation holds any more keeps it itself
//! ([`GENERATION_ANNOTATION`]), an annotation, which leaves `metadata.generation` alone.
//!
//! Some spec changes are not changes to Placement (a new parent, aggregates set before
//! microversion 1.19): the provider counts those it made in
//! [`UNCOUNTED_ANNOTATION`], written with the change. `M` is then the provider's counted
//! spec generation, `metadata.generation` less the uncounted changes.
//!
//! The generation is `M + max(-1, G - M over every record)`: a new provider is 0, a counted
//! spec change moves every record's share by one, and a record holds its generation until a
//! higher one is written. This module keeps, per provider, the records its Allocations
//! carry, so that reading a generation is a lookup.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError};

use kubeplace_api::{Allocation, Object, ResourceProvider};

/// On an Allocation: the generation its write gave each provider it holds, `name=G@M,…`.
pub const PROVIDER_GENERATIONS_ANNOTATION: &str = "placement.kubeplace.io/provider-generations";
/// On a ResourceProvider: its generation when no Allocation records it, `G@M`.
pub const GENERATION_ANNOTATION: &str = "placement.kubeplace.io/generation";
/// On a ResourceProvider: how many changes of its spec Placement would not count.
pub const UNCOUNTED_ANNOTATION: &str = "placement.kubeplace.io/uncounted-spec-changes";

/// One record: generation `generation` when `metadata.generation` was `spec_generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub generation: i64,
    pub spec_generation: i64,
}

impl Record {
    /// What the record adds to `metadata.generation`.
    pub fn offset(self) -> i64 {
        self.generation - self.spec_generation
    }

    /// `G@M`, or `None` when malformed.
    pub fn parse(text: &str) -> Option<Record> {
        let (g, m) = text.trim().split_once('@')?;
        Some(Record {
            generation: g.parse().ok()?,
            spec_generation: m.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.generation, self.spec_generation)
    }
}

/// The records an Allocation carries, by provider name: only for providers it holds (a
/// record for any other is not its to keep), malformed entries left out.
pub fn allocation_records(a: &Allocation) -> BTreeMap<String, Record> {
    let Some(text) = a
        .metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(PROVIDER_GENERATIONS_ANNOTATION))
    else {
        return BTreeMap::new();
    };
    text.split(',')
        .filter_map(|entry| {
            let (name, record) = entry.trim().split_once('=')?;
            let held = a.spec.allocations.iter().any(|pa| pa.provider == name);
            held.then(|| Some((name.to_string(), Record::parse(record)?)))
                .flatten()
        })
        .collect()
}

/// Sets an Allocation's records.
pub fn set_allocation_records(a: &mut Allocation, records: &BTreeMap<String, Record>) {
    let annotations = a.metadata.annotations.get_or_insert_with(Default::default);
    if records.is_empty() {
        annotations.remove(PROVIDER_GENERATIONS_ANNOTATION);
        return;
    }
    let text = records
        .iter()
        .map(|(name, r)| format!("{name}={r}"))
        .collect::<Vec<_>>()
        .join(",");
    annotations.insert(PROVIDER_GENERATIONS_ANNOTATION.to_string(), text);
}

/// The record a provider keeps itself.
pub fn provider_record(rp: &ResourceProvider) -> Option<Record> {
    rp.metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(GENERATION_ANNOTATION))
        .and_then(|t| Record::parse(t))
}

/// Sets the record a provider keeps itself.
pub fn set_provider_record(rp: &mut ResourceProvider, record: Record) {
    rp.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(GENERATION_ANNOTATION.to_string(), record.to_string());
}

/// The spec changes of a provider Placement would not count.
pub fn uncounted(rp: &ResourceProvider) -> i64 {
    rp.metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(UNCOUNTED_ANNOTATION))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Sets the spec changes of a provider Placement would not count.
pub fn set_uncounted(rp: &mut ResourceProvider, n: i64) {
    rp.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(UNCOUNTED_ANNOTATION.to_string(), n.to_string());
}

/// `metadata.generation` less the changes not counted: what records are made against.
pub fn counted_spec_generation(rp: &ResourceProvider) -> i64 {
    rp.metadata.generation.unwrap_or(1) - uncounted(rp)
}

/// A provider's generation from its object and the largest offset its Allocations record.
pub fn generation_of(rp: &ResourceProvider, allocations_offset: Option<i64>) -> u64 {
    OwnGeneration::of(rp).with_allocations(allocations_offset)
}

/// What a provider's own object says of its generation: its counted spec generation and
/// the offset it records. Kept by the store per provider, so that a list of thousands of
/// providers reads each one's generation without reading its object's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnGeneration {
    spec: i64,
    offset: Option<i64>,
}

impl OwnGeneration {
    pub fn of(rp: &ResourceProvider) -> OwnGeneration {
        OwnGeneration {
            spec: counted_spec_generation(rp),
            offset: provider_record(rp).map(Record::offset),
        }
    }

    /// The provider's generation, given the largest offset its Allocations record.
    pub fn with_allocations(self, allocations_offset: Option<i64>) -> u64 {
        let offset = [Some(-1), self.offset, allocations_offset]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(-1);
        u64::try_from(self.spec + offset).unwrap_or(0)
    }
}

/// The offsets Allocations record, per provider name, counted (several may record the same).
#[derive(Debug, Clone, Default)]
pub struct GenerationRecords {
    by_provider: HashMap<String, BTreeMap<i64, u32>>,
}

impl GenerationRecords {
    /// The largest offset any Allocation records for the provider.
    pub fn max_offset(&self, provider: &str) -> Option<i64> {
        self.by_provider
            .get(provider)
            .and_then(|m| m.last_key_value())
            .map(|(offset, _)| *offset)
    }

    /// Follows an object replaced by another (either may be absent); other kinds than
    /// Allocation change nothing.
    pub(crate) fn replace(&mut self, old: Option<&Object>, new: Option<&Object>) {
        if let Some(Object::Allocation(a)) = old {
            for (name, r) in allocation_records(a) {
                self.remove(&name, r.offset());
            }
        }
        if let Some(Object::Allocation(a)) = new {
            for (name, r) in allocation_records(a) {
                *self
                    .by_provider
                    .entry(name)
                    .or_default()
                    .entry(r.offset())
                    .or_insert(0) += 1;
            }
        }
    }

    fn remove(&mut self, provider: &str, offset: i64) {
        let Some(counts) = self.by_provider.get_mut(provider) else {
            return;
        };
        if let Some(n) = counts.get_mut(&offset) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&offset);
            }
        }
        if counts.is_empty() {
            self.by_provider.remove(provider);
        }
    }
}

/// [`Store::provider_generations`]' table and the epoch it was made at. A copy of the
/// store starts without one.
#[derive(Debug, Default)]
pub(super) struct GenerationsKept(std::sync::Mutex<Option<(u64, Arc<Vec<u64>>)>>);

/// The table kept, if it was made at `epoch`.
fn kept_at(kept: &Option<(u64, Arc<Vec<u64>>)>, epoch: u64) -> Option<Arc<Vec<u64>>> {
    kept.as_ref()
        .filter(|(at, _)| *at == epoch)
        .map(|(_, table)| Arc::clone(table))
}

impl Clone for GenerationsKept {
    fn clone(&self) -> Self {
        GenerationsKept::default()
    }
}

impl super::Store {
    /// The provider generations recorded by Allocations ([`generations`]).
    pub fn generation_records(&self) -> &GenerationRecords {
        &self.generation_records
    }

    /// Follows a provider replaced by another (either may be absent) in
    /// [`Store::provider_generation`]'s map, copying a shared map only when it changes.
    pub(super) fn note_own_generation(
        &mut self,
        old: Option<&ResourceProvider>,
        new: Option<&ResourceProvider>,
    ) {
        let now = new.map(|rp| {
            (
                rp.metadata.name.as_deref().unwrap_or_default(),
                OwnGeneration::of(rp),
            )
        });
        if let Some(old) = old {
            let name = old.metadata.name.as_deref().unwrap_or_default();
            if now.is_some_and(|(n, g)| n == name && self.own_generations.get(name) == Some(&g)) {
                return;
            }
            if now.is_none_or(|(n, _)| n != name) {
                self.generations_epoch += 1;
                Arc::make_mut(&mut self.own_generations).remove(name);
            }
        }
        if let Some((name, g)) = now
            && self.own_generations.get(name) != Some(&g)
        {
            self.generations_epoch += 1;
            Arc::make_mut(&mut self.own_generations).insert(name.to_string(), g);
        }
    }

    /// A stored provider's Placement generation over a cluster, by object name: what its
    /// object records with what its Allocations record (see [`generations`]).
    pub fn provider_generation(&self, name: &str) -> Option<u64> {
        self.own_generations
            .get(name)
            .map(|own| own.with_allocations(self.generation_records.max_offset(name)))
    }

    /// Every provider's generation over a cluster ([`Store::provider_generation`]) by
    /// [`ProviderId::slot`] of the current index, 0 where no provider is: made once
    /// and kept until a provider, an Allocation or the index changes, so that listing
    /// thousands of providers reads a table instead of a lookup by name for each one.
    pub fn provider_generations(&self) -> Arc<Vec<u64>> {
        let mut kept = self.kept_generations();
        if let Some(table) = kept_at(&kept, self.generations_epoch) {
            return table;
        }
        let mut table = vec![0; self.index.slot_count()];
        for (id, name) in self.index.named_slots() {
            table[id.slot()] = self.provider_generation(name).unwrap_or(0);
        }
        let table = Arc::new(table);
        *kept = Some((self.generations_epoch, Arc::clone(&table)));
        table
    }

    /// Whether [`Store::provider_generations`] has its table made for the store as it is.
    pub fn provider_generations_kept(&self) -> bool {
        kept_at(&self.kept_generations(), self.generations_epoch).is_some()
    }

    pub(super) fn kept_generations(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<(u64, Arc<Vec<u64>>)>> {
        self.generations_kept
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A count that grows whenever a provider's generation may change or the index's slots
    /// move (see [`Store::provider_generations`]).
    pub fn generations_epoch(&self) -> u64 {
        self.generations_epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::{AllocationSpec, ProviderAllocation, ResourceProviderSpec};

    fn allocation(name: &str, providers: &[&str], records: &str) -> Allocation {
        let mut a = Allocation::new(
            name,
            AllocationSpec {
                numa: None,
                consumer: "c".into(),
                allocations: providers
                    .iter()
                    .map(|p| ProviderAllocation {
                        provider: p.to_string(),
                        resources: BTreeMap::from([("VCPU".to_string(), 1)]),
                    })
                    .collect(),
            },
        );
        a.metadata.annotations = Some(BTreeMap::from([(
            PROVIDER_GENERATIONS_ANNOTATION.to_string(),
            records.to_string(),
        )]));
        a
    }

    #[test]
    fn records_are_read_only_for_providers_held_and_when_well_formed() {
        let a = allocation("a", &["cn1", "cn2"], "cn1=5@2, cn2=x@1,cn3=9@1,bad");
        let records = allocation_records(&a);
        assert_eq!(
            records,
            BTreeMap::from([(
                "cn1".to_string(),
                Record {
                    generation: 5,
                    spec_generation: 2
                }
            )])
        );
    }

    #[test]
    fn the_generation_is_the_largest_record_over_the_spec_generation() {
        let mut rp = ResourceProvider::new(
            "cn1",
            ResourceProviderSpec {
                numa_cell: None,
                uuid: None,
                parent: None,
                inventories: Default::default(),
                traits: Vec::new(),
                aggregates: Vec::new(),
            },
        );
        rp.metadata.generation = Some(3);
        // No record: metadata.generation less one.
        assert_eq!(generation_of(&rp, None), 2);
        // A claim recorded 7 when metadata.generation was 3.
        assert_eq!(generation_of(&rp, Some(4)), 7);
        // A spec change since moves it by one.
        rp.metadata.generation = Some(4);
        assert_eq!(generation_of(&rp, Some(4)), 8);
        // The provider's own record counts when higher.
        set_provider_record(
            &mut rp,
            Record {
                generation: 10,
                spec_generation: 4,
            },
        );
        assert_eq!(generation_of(&rp, Some(4)), 10);
        // A spec change not counted leaves it.
        rp.metadata.generation = Some(5);
        set_uncounted(&mut rp, 1);
        assert_eq!(generation_of(&rp, Some(4)), 10);
    }

    #[test]
    fn records_are_counted_so_that_removing_one_keeps_an_equal_other() {
        let mut records = GenerationRecords::default();
        let a = Object::Allocation(allocation("a", &["cn1"], "cn1=5@1"));
        let b = Object::Allocation(allocation("b", &["cn1"], "cn1=5@1"));
        let c = Object::Allocation(allocation("c", &["cn1"], "cn1=3@1"));
        records.replace(None, Some(&a));
        records.replace(None, Some(&b));
        records.replace(None, Some(&c));
        assert_eq!(records.max_offset("cn1"), Some(4));
        records.replace(Some(&a), None);
        assert_eq!(records.max_offset("cn1"), Some(4));
        records.replace(Some(&b), None);
        assert_eq!(records.max_offset("cn1"), Some(2));
        records.replace(Some(&c), None);
        assert_eq!(records.max_offset("cn1"), None);
        assert!(records.by_provider.is_empty());
    }
}

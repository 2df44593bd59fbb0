//! Checks that span every part of the index (after any sequence of changes, every member
//! list and packed tree equals one built from scratch), and the helpers the tests beside
//! each part share.

use std::collections::{BTreeMap, BTreeSet};

use super::{ConsumerAllocations, ProviderIndex, ProviderRecord};
use crate::placement::Inventory;
use crate::placement::ids::{ClassId, ProviderId, TraitId};

pub(super) fn rp(name: &str, parent: Option<&str>) -> ProviderRecord {
    ProviderRecord {
        name: name.into(),
        uuid: format!("uuid-{name}"),
        parent: parent.map(Into::into),
        ..Default::default()
    }
}

/// Checks every posting list against one computed from scratch over the live slots.
fn assert_posting_lists_fresh(idx: &ProviderIndex) {
    fn sorted(lists: &[Vec<ProviderId>]) -> Vec<Vec<ProviderId>> {
        let mut out: Vec<Vec<ProviderId>> = lists
            .iter()
            .map(|l| {
                let mut l = l.clone();
                l.sort_unstable();
                l
            })
            .collect();
        while out.last().is_some_and(Vec::is_empty) {
            out.pop();
        }
        out
    }
    let mut classes: Vec<Vec<ProviderId>> = Vec::new();
    let mut traits: Vec<Vec<ProviderId>> = Vec::new();
    let mut aggregates: Vec<Vec<ProviderId>> = Vec::new();
    let push = |lists: &mut Vec<Vec<ProviderId>>, key: usize, id: ProviderId| {
        if lists.len() <= key {
            lists.resize_with(key + 1, Vec::new);
        }
        lists[key].push(id);
    };
    for (id, p) in idx.slots.iter().enumerate() {
        let Some(p) = p else { continue };
        let id = ProviderId(id as u32);
        for (c, _) in &p.inventories {
            push(&mut classes, c.index(), id);
        }
        for t in p.traits().iter() {
            push(&mut traits, t.index(), id);
        }
        for a in p.aggregates().iter() {
            push(&mut aggregates, a.index(), id);
        }
    }
    assert_eq!(
        sorted(&idx.class_members),
        sorted(&classes),
        "class_members"
    );
    assert_eq!(sorted(&idx.trait_members), sorted(&traits), "trait_members");
    let mut trait_classes: BTreeMap<(usize, ClassId), u32> = BTreeMap::new();
    for p in idx.slots.iter().flatten() {
        for t in p.traits().iter() {
            for (c, _) in &p.inventories {
                *trait_classes.entry((t.index(), *c)).or_default() += 1;
            }
        }
    }
    let kept: BTreeMap<(usize, ClassId), u32> = idx
        .trait_classes
        .iter()
        .enumerate()
        .flat_map(|(t, counts)| counts.iter().map(move |(c, n)| ((t, *c), *n)))
        .collect();
    assert_eq!(kept, trait_classes, "trait_classes");
    let classes_held: BTreeSet<ClassId> = idx
        .slots
        .iter()
        .flatten()
        .flat_map(|p| p.inventories.iter().map(|(c, _)| *c))
        .collect();
    for t in 0..=idx.trait_classes.len() {
        for &c in &classes_held {
            assert_eq!(
                idx.trait_supplies(TraitId(t as u32), c),
                trait_classes.contains_key(&(t, c)),
                "trait {t} supplies class {c}"
            );
        }
    }
    assert_eq!(
        sorted(&idx.aggregate_members),
        sorted(&aggregates),
        "aggregate_members"
    );
    assert_packs_fresh(idx);
}

/// Checks every root's packed tree against one packed from scratch, and that no other
/// slot has one.
pub(super) fn assert_packs_fresh(idx: &ProviderIndex) {
    for (slot, p) in idx.slots.iter().enumerate() {
        let slot = ProviderId(slot as u32);
        match p {
            Some(p) if p.parent_name.is_none() => {
                assert_eq!(
                    idx.packed(slot).map(|t| t.words()),
                    Some(&idx.pack_tree(slot)[..]),
                    "pack of root {}",
                    p.name
                );
            }
            _ => assert!(idx.packed(slot).is_none(), "slot {slot} is no root"),
        }
    }
    idx.packed.assert_shapes_fresh();
}

#[derive(Debug, Clone)]
enum Change {
    Upsert {
        name: usize,
        parent: Option<usize>,
        classes: Vec<usize>,
        traits: Vec<usize>,
    },
    Remove(usize),
    Allocate {
        key: usize,
        provider: usize,
        class: usize,
        amount: i64,
    },
    Free(usize),
    Configure {
        name: usize,
        classes: Vec<usize>,
        traits: Vec<usize>,
    },
}

const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];
const TRAITS: [&str; 3] = ["CUSTOM_A", "CUSTOM_B", "MISC_SHARES_VIA_AGGREGATE"];

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let subset = |n: usize| proptest::collection::vec(0..n, 0..3);
    prop_oneof![
        4 => (0usize..6, proptest::option::of(0usize..6), subset(3), subset(3)).prop_map(
            |(name, parent, classes, traits)| Change::Upsert { name, parent, classes, traits }
        ),
        1 => (0usize..6).prop_map(Change::Remove),
        3 => (0usize..4, 0usize..6, 0usize..3, 1i64..6).prop_map(
            |(key, provider, class, amount)| Change::Allocate { key, provider, class, amount }
        ),
        1 => (0usize..4).prop_map(Change::Free),
        1 => (0usize..6, subset(3), subset(3)).prop_map(
            |(name, classes, traits)| Change::Configure { name, classes, traits }
        ),
    ]
}

fn apply(idx: &mut ProviderIndex, change: Change) {
    let name = |i: usize| format!("rp{i}");
    match change {
        Change::Upsert {
            name: n,
            parent,
            classes,
            traits,
        } => {
            let mut r = rp(&name(n), parent.map(name).as_deref());
            for c in classes {
                r.inventories
                    .insert(CLASSES[c].to_string(), Inventory::with_total(8));
            }
            r.traits = traits.iter().map(|t| TRAITS[*t].to_string()).collect();
            r.aggregates = [format!("agg-{}", n % 2)].into();
            idx.upsert_provider(r);
        }
        Change::Remove(n) => {
            idx.remove_provider(&name(n));
        }
        Change::Allocate {
            key,
            provider,
            class,
            amount,
        } => idx.upsert_allocations(
            &format!("a{key}"),
            ConsumerAllocations {
                consumer: format!("c{key}"),
                items: vec![(name(provider), CLASSES[class].to_string(), amount)],
            },
        ),
        Change::Free(key) => {
            idx.remove_allocations(&format!("a{key}"));
        }
        Change::Configure {
            name: n,
            classes,
            traits,
        } => idx.set_config_additions(
            &name(n),
            &classes
                .iter()
                .map(|c| (CLASSES[*c].to_string(), Inventory::with_total(3)))
                .collect(),
            &traits.iter().map(|t| TRAITS[*t].to_string()).collect(),
        ),
    }
}

/// The orders the index kept (or made on first use) are the orders made again now.
fn assert_orders_fresh(idx: &ProviderIndex) {
    let mut fresh = idx.clone();
    fresh.root_order = Default::default();
    fresh.tree_order = Default::default();
    fresh.uuid_order = Default::default();
    // A slot taken since the roots' order was made is no root (a new root makes it again):
    // its rank is `u32::MAX`, kept or not.
    let by_slot = |rank: &[u32]| -> Vec<u32> {
        (0..idx.slots.len())
            .map(|i| rank.get(i).copied().unwrap_or(u32::MAX))
            .collect()
    };
    let (kept, made) = (idx.root_order(), fresh.root_order());
    assert_eq!(
        (&kept.roots, by_slot(&kept.rank)),
        (&made.roots, by_slot(&made.rank))
    );
    let (kept, made) = (idx.tree_order(), fresh.tree_order());
    assert_eq!(
        (&kept.providers, &kept.rank, kept.once, &kept.root),
        (&made.providers, &made.rank, made.once, &made.root)
    );
    let (kept, made) = (idx.uuid_order(), fresh.uuid_order());
    assert_eq!(
        (&kept.rank, kept.plain, &kept.quoted),
        (&made.rank, made.plain, &made.quoted)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Whatever happens to providers, parents, configs and allocations (cycles and
    /// missing parents included), every lookup equals one built from scratch.
    #[test]
    fn lookups_follow_any_sequence_of_changes(
        changes in proptest::collection::vec(change(), 1..40)
    ) {
        let mut idx = ProviderIndex::default();
        for c in changes {
            apply(&mut idx, c);
            assert_posting_lists_fresh(&idx);
            assert_orders_fresh(&idx);
        }
    }
}

#[test]
fn posting_lists_follow_every_change() {
    let mut idx = ProviderIndex::default();
    let with = |name: &str, parent: Option<&str>, classes: &[&str], traits: &[&str]| {
        let mut r = rp(name, parent);
        for c in classes {
            r.inventories
                .insert(c.to_string(), Inventory::with_total(8));
        }
        r.traits = traits.iter().map(|t| t.to_string()).collect();
        r.aggregates = ["agg-1".to_string()].into();
        r
    };
    idx.upsert_provider(with("cn1", None, &["DISK_GB"], &["COMPUTE_NODE"]));
    idx.upsert_provider(with("cn1-numa0", Some("cn1"), &["VCPU", "MEMORY_MB"], &[]));
    idx.upsert_provider(with("cn2", None, &["VCPU"], &["HW_CPU_X86_AVX2"]));
    assert_posting_lists_fresh(&idx);
    // Replacing a provider changes its classes and traits.
    idx.upsert_provider(with("cn2", None, &["PCPU", "DISK_GB"], &["CUSTOM_GOLD"]));
    assert_posting_lists_fresh(&idx);
    // Config additions add classes the provider lacks, then are replaced and removed.
    idx.set_config_additions(
        "cn1",
        &[
            ("CUSTOM_X".to_string(), Inventory::with_total(1)),
            ("DISK_GB".to_string(), Inventory::with_total(5)),
        ]
        .into(),
        &["CUSTOM_Y".to_string()].into(),
    );
    assert_posting_lists_fresh(&idx);
    idx.upsert_provider(with("cn1", None, &["VCPU"], &[]));
    assert_posting_lists_fresh(&idx);
    idx.set_config_additions(
        "cn1",
        &[("CUSTOM_Z".to_string(), Inventory::with_total(1))].into(),
        &BTreeSet::new(),
    );
    assert_posting_lists_fresh(&idx);
    idx.set_config_additions("cn1", &BTreeMap::new(), &BTreeSet::new());
    assert_posting_lists_fresh(&idx);
    // Deleting frees a slot; the next provider reuses it with other classes.
    let freed = idx.id("cn1-numa0").unwrap();
    idx.remove_provider("cn1-numa0");
    assert_posting_lists_fresh(&idx);
    idx.upsert_provider(with("cn3", None, &["SRIOV_NET_VF"], &["HW_NIC_SRIOV"]));
    assert_eq!(idx.id("cn3"), Some(freed), "the freed slot is reused");
    assert_posting_lists_fresh(&idx);
    idx.remove_provider("cn1");
    idx.remove_provider("cn2");
    idx.remove_provider("cn3");
    assert_posting_lists_fresh(&idx);
    assert!(idx.class_members.iter().all(Vec::is_empty));
}

/// The index keeps every uuid in quotes by slot only while every uuid is 36 characters with
/// nothing to escape; an emptied slot holds none, and a change that breaks the rule (or
/// mends it) is seen by the next answer.
#[test]
fn quoted_uuids_are_kept_while_every_uuid_is_plain_and_36_long() {
    let with_uuid = |name: &str, uuid: &str| ProviderRecord {
        uuid: uuid.into(),
        ..rp(name, None)
    };
    let uuid = |n: u32| format!("00000000-0000-4000-8000-{n:012}");
    let mut idx = ProviderIndex::default();
    for n in 0..4 {
        idx.upsert_provider(with_uuid(&format!("p{n}"), &uuid(n)));
    }
    idx.remove_provider("p2");
    let quoted = idx
        .uuid_order()
        .quoted
        .clone()
        .expect("every uuid plain and 36 long");
    assert_eq!(quoted.len(), idx.slots.len());
    for (slot, q) in idx.slots.iter().zip(&quoted) {
        match slot {
            Some(p) => assert_eq!(&q[..], format!("\"{}\"", p.uuid).as_bytes()),
            None => assert_eq!(q, &[0; 38]),
        }
    }
    for odd in [
        "short",
        "00000000-0000-4000-8000-00000000000\"",
        "00000000-0000-4000-8000-0000000000001",
    ] {
        idx.upsert_provider(with_uuid("odd", odd));
        assert!(idx.uuid_order().quoted.is_none(), "{odd:?}");
    }
    idx.remove_provider("odd");
    assert!(idx.uuid_order().quoted.is_some(), "every uuid plain again");
}

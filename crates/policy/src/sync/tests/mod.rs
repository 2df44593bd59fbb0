//! The round trip: any Placement imported (its snapshot made into objects, the objects into
//! a store) and exported (the store read as a snapshot, the export's writes applied to an
//! empty Placement) reads back the same, generations excepted.

pub(super) mod model;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kubeplace_api::{Inventory, Object};
use proptest::prelude::*;
use proptest::sample::Index;

use super::export;
use super::import;
use super::snapshot::{Consumer, Provider, Snapshot};
use super::{desired, snapshot_of};
use crate::store::{Change, Store};
use model::Placement;

const STANDARD_CLASSES: [&str; 6] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "PCPU",
    "SRIOV_NET_VF",
    "VGPU",
];
const CUSTOM_CLASSES: [&str; 4] = [
    "CUSTOM_GPU",
    "CUSTOM_FPGA_X",
    "CUSTOM_BAREMETAL_GOLD",
    "CUSTOM_NIC_1G",
];
const CUSTOM_TRAITS: [&str; 4] = [
    "CUSTOM_RACK_A",
    "CUSTOM_SSD",
    "CUSTOM_PHYSNET_PUBLIC",
    "CUSTOM_Z9",
];
const CONSUMER_TYPES: [&str; 3] = ["INSTANCE", "MIGRATION", "CUSTOM_TYPE_1"];
const RATIOS: [f64; 6] = [1.0, 0.5, 1.5, 16.0, 0.57, 1.2];

/// One inventory, drawn.
#[derive(Debug, Clone)]
struct InventorySeed {
    class: Index,
    total: i64,
    reserved: u8,
    min_unit: i64,
    max_unit: u8,
    step_size: i64,
    ratio: Result<Index, f64>,
}

/// One provider, drawn: its parent an earlier provider.
#[derive(Debug, Clone)]
struct ProviderSeed {
    parent: Option<Index>,
    naming: u8,
    generation: u64,
    inventories: Vec<InventorySeed>,
    traits: Vec<Result<Index, Index>>,
    aggregates: Vec<Index>,
}

/// One consumer, drawn: the allocations it would like, of which those that fit are made.
#[derive(Debug, Clone)]
struct ConsumerSeed {
    project: String,
    user: String,
    consumer_type: Index,
    generation: u64,
    wishes: Vec<(Index, Index, u16)>,
}

#[derive(Debug, Clone)]
struct Seed {
    salt: u32,
    classes: u8,
    traits: u8,
    providers: Vec<ProviderSeed>,
    consumers: Vec<ConsumerSeed>,
}

fn inventory_seed() -> impl Strategy<Value = InventorySeed> {
    (
        any::<Index>(),
        1i64..=2048,
        any::<u8>(),
        1i64..=4,
        any::<u8>(),
        1i64..=4,
        prop_oneof![any::<Index>().prop_map(Ok), (0.01f64..64.0).prop_map(Err)],
    )
        .prop_map(
            |(class, total, reserved, min_unit, max_unit, step_size, ratio)| InventorySeed {
                class,
                total,
                reserved,
                min_unit,
                max_unit,
                step_size,
                ratio,
            },
        )
}

fn provider_seed() -> impl Strategy<Value = ProviderSeed> {
    (
        proptest::option::weighted(0.6, any::<Index>()),
        0u8..9,
        any::<u64>(),
        proptest::collection::vec(inventory_seed(), 0..4),
        proptest::collection::vec(
            prop_oneof![any::<Index>().prop_map(Ok), any::<Index>().prop_map(Err)],
            0..4,
        ),
        proptest::collection::vec(any::<Index>(), 0..3),
    )
        .prop_map(
            |(parent, naming, generation, inventories, traits, aggregates)| ProviderSeed {
                parent,
                naming,
                generation,
                inventories,
                traits,
                aggregates,
            },
        )
}

fn consumer_seed() -> impl Strategy<Value = ConsumerSeed> {
    (
        "[a-zA-Z0-9 _.-]{1,40}",
        "[a-zA-Z0-9 _.-]{1,40}",
        any::<Index>(),
        0u64..1_000_000,
        proptest::collection::vec((any::<Index>(), any::<Index>(), any::<u16>()), 1..4),
    )
        .prop_map(
            |(project, user, consumer_type, generation, wishes)| ConsumerSeed {
                project,
                user,
                consumer_type,
                generation,
                wishes,
            },
        )
}

fn seed() -> impl Strategy<Value = Seed> {
    (
        any::<u32>(),
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec(provider_seed(), 0..14),
        proptest::collection::vec(consumer_seed(), 0..10),
    )
        .prop_map(|(salt, classes, traits, providers, consumers)| Seed {
            salt,
            classes,
            traits,
            providers,
            consumers,
        })
}

/// The names of `pool` whose bit is set in `mask`.
fn chosen(pool: &[&str], mask: u8) -> BTreeSet<String> {
    pool.iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// A Placement name of one of the shapes providers have: object names as they are, and
/// names Kubernetes refuses (Nova's and Neutron's, capitals, other scripts, a trailing
/// space, the longest); two providers may have names that differ only in case.
fn provider_name(naming: u8, i: usize) -> String {
    match naming {
        0 => format!("cn{i}"),
        1 => format!("cn{i}_NUMA0"),
        2 => format!("compute-{i}.localdomain"),
        3 => format!("CN{i}:Open vSwitch agent:br-ex"),
        4 => format!("ünïcode {i}"),
        5 => format!("cn{} ", i / 2),
        6 => format!("cn{}", i / 2),
        7 => format!("CN{}", i / 2),
        _ => format!("{:_<190}{i}", "x_long"),
    }
}

/// A consistent Placement from a seed: parents exist, names are unique, custom names used
/// are listed, every allocation fits its inventory.
fn snapshot(seed: &Seed) -> Snapshot {
    let salt = seed.salt;
    let custom_classes = chosen(&CUSTOM_CLASSES, seed.classes);
    let custom_traits = chosen(&CUSTOM_TRAITS, seed.traits);
    let classes: Vec<String> = STANDARD_CLASSES
        .iter()
        .map(|c| c.to_string())
        .chain(custom_classes.iter().cloned())
        .collect();
    let standard_traits = kubeplace_core::placement::standard_traits();
    let custom_trait_list: Vec<&String> = custom_traits.iter().collect();
    let aggregates: Vec<String> = (0..4)
        .map(|k| format!("{salt:08x}-aaaa-4000-a000-{k:012x}"))
        .collect();
    let mut providers: Vec<Provider> = Vec::new();
    let mut names = BTreeSet::new();
    for (i, p) in seed.providers.iter().enumerate() {
        // The same salt, the same uuids: two Placements drawn so share providers.
        let uuid = format!("{salt:08x}-{i:04x}-4000-8000-{:012x}", i * 7919);
        let parent = match (&p.parent, i) {
            (Some(at), i) if i > 0 => Some(providers[at.index(i)].uuid.clone()),
            _ => None,
        };
        // Names are unique in Placement.
        let mut name = provider_name(p.naming, i);
        if !names.insert(name.clone()) {
            name = format!("{name}-{i}");
            names.insert(name.clone());
        }
        let mut provider = Provider::new(&uuid, &name, None);
        provider.parent = parent;
        provider.generation = p.generation;
        for inv in &p.inventories {
            let total = inv.total;
            let max_unit = (inv.min_unit + total * i64::from(inv.max_unit) / 255).max(inv.min_unit);
            provider.inventories.insert(
                inv.class.get(&classes).clone(),
                Inventory {
                    total,
                    reserved: total * i64::from(inv.reserved) / 255,
                    min_unit: inv.min_unit,
                    max_unit,
                    step_size: inv.step_size,
                    allocation_ratio: match inv.ratio {
                        Ok(at) => *at.get(&RATIOS),
                        Err(r) => r,
                    },
                },
            );
        }
        for t in &p.traits {
            let name = match t {
                Ok(at) => at.get(standard_traits).to_string(),
                Err(_) if custom_trait_list.is_empty() => continue,
                Err(at) => at.get(&custom_trait_list).to_string(),
            };
            provider.traits.insert(name);
        }
        for a in &p.aggregates {
            provider.aggregates.insert(a.get(&aggregates).clone());
        }
        providers.push(provider);
    }
    // What each provider's classes hold so far.
    let mut used: HashMap<(String, String), i64> = HashMap::new();
    let mut consumers = BTreeMap::new();
    for (i, c) in seed.consumers.iter().enumerate() {
        let uuid = format!("{salt:08x}-{i:04x}-4000-9000-{:012x}", i * 104_729);
        let mut allocations: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (at, class_at, amount) in &c.wishes {
            if providers.is_empty() {
                break;
            }
            let p = at.get(&providers);
            let held: Vec<(&String, &Inventory)> = p.inventories.iter().collect();
            if held.is_empty() {
                continue;
            }
            let (class, inv) = *class_at.get(&held);
            if allocations
                .get(&p.uuid)
                .is_some_and(|r| r.contains_key(class))
            {
                continue;
            }
            // An amount within the units, a whole number of steps.
            let wanted = inv.min_unit + i64::from(*amount) % (inv.max_unit - inv.min_unit + 1);
            let amount = (wanted + inv.step_size - 1) / inv.step_size * inv.step_size;
            let key = (p.uuid.clone(), class.clone());
            let before = used.get(&key).copied().unwrap_or(0);
            let capacity = (inv.total - inv.reserved) as f64 * inv.allocation_ratio;
            if amount > inv.max_unit || (before + amount) as f64 > capacity {
                continue;
            }
            used.insert(key, before + amount);
            allocations
                .entry(p.uuid.clone())
                .or_default()
                .insert(class.clone(), amount);
        }
        if allocations.is_empty() {
            continue;
        }
        consumers.insert(
            uuid.clone(),
            Consumer {
                uuid,
                project_id: c.project.clone(),
                user_id: c.user.clone(),
                consumer_type: c.consumer_type.get(&CONSUMER_TYPES).to_string(),
                generation: Some(c.generation),
                allocations,
            },
        );
    }
    let by_uuid = providers.into_iter().map(|p| (p.uuid.clone(), p)).collect();
    Snapshot {
        custom_classes: custom_classes.into_iter().collect(),
        custom_traits: custom_traits.into_iter().collect(),
        providers: super::parents_first(by_uuid),
        consumers,
    }
}

/// What Placement's reads show of a snapshot, less the generations it counts itself.
fn shown(mut s: Snapshot) -> Snapshot {
    for p in &mut s.providers {
        p.generation = 0;
    }
    for c in s.consumers.values_mut() {
        c.generation = None;
    }
    s
}

/// A snapshot less the custom names no provider or consumer uses.
fn without_unused(mut s: Snapshot, unused: &[&str]) -> Snapshot {
    s.custom_classes.retain(|n| !unused.contains(&n.as_str()));
    s.custom_traits.retain(|n| !unused.contains(&n.as_str()));
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn an_import_then_an_export_gives_back_the_same_placement(seed in seed()) {
        let original = snapshot(&seed);
        let desired = match desired(&original) {
            Ok(d) => d,
            Err(refusals) => {
                return Err(TestCaseError::fail(format!("import refused: {refusals:?}")));
            }
        };
        let refusals = import::refusals(&desired, &HashMap::new());
        prop_assert!(refusals.is_empty(), "admission refused: {:?}", refusals);
        let mut store = Store::default();
        store.apply_changes(desired.objects.iter().cloned().map(|o| Change::Put(Box::new(o))));
        // Into a cluster: its registry keeps the custom names.
        let exported = snapshot_of(&store, &desired.custom_classes, &desired.custom_traits);
        let ops = match export::plan(&exported, &Snapshot::default()) {
            Ok(ops) => ops,
            Err(refusals) => {
                return Err(TestCaseError::fail(format!("export refused: {refusals:?}")));
            }
        };
        let mut placement = Placement::default();
        for op in &ops {
            if let Err(e) = placement.apply(op) {
                return Err(TestCaseError::fail(format!("Placement refused {}: {e}", op.what)));
            }
        }
        let back = placement.read();
        prop_assert_eq!(shown(back.clone()), shown(original.clone()));
        // Exported again, nothing is left to write.
        let again = export::plan(&exported, &back).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert!(again.is_empty(), "{:?}", again);
        // Into a file: the same, less the custom names no object uses.
        let unused = import::unused_names(&desired);
        let from_file = snapshot_of(&store, &Default::default(), &Default::default());
        prop_assert_eq!(shown(from_file), shown(without_unused(original, &unused)));
        // And a second import over the objects written finds nothing to do.
        let there = desired
            .objects
            .iter()
            .map(|o| (crate::store::ObjectKey::of(o), o.clone()))
            .collect::<HashMap<_, Object>>();
        let plan = import::plan(&desired, &there, None);
        prop_assert!(plan.steps.iter().all(|s| *s == import::Step::Same));
        prop_assert!(plan.others.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn an_export_over_any_placement_leaves_it_showing_the_source(
        source in seed(),
        target in seed(),
    ) {
        let target = Seed { salt: source.salt, ..target };
        let (source, target) = (snapshot(&source), snapshot(&target));
        let Ok(ops) = export::plan(&source, &target) else {
            return Ok(());
        };
        let mut placement = Placement::from(&target);
        for op in &ops {
            if let Err(e) = placement.apply(op) {
                return Err(TestCaseError::fail(format!("Placement refused {}: {e}", op.what)));
            }
        }
        // Custom names the target has are left there: the export creates names, never
        // deletes them.
        let mut expected = source;
        expected.custom_classes.extend(target.custom_classes);
        expected.custom_traits.extend(target.custom_traits);
        prop_assert_eq!(shown(placement.read()), shown(expected));
    }
}

/// `source` exported over a Placement showing `target`: what it then shows, or the first
/// write it refuses.
fn export_over(source: &Snapshot, target: &Snapshot) -> Result<Snapshot, String> {
    let ops = export::plan(source, target).map_err(|e| format!("{e:?}"))?;
    let mut placement = Placement::from(target);
    for op in &ops {
        placement
            .apply(op)
            .map_err(|e| format!("{} {}: {e}", op.method, op.path))?;
    }
    Ok(shown(placement.read()))
}

fn uuid(n: u32) -> String {
    format!("a0000000-0000-4000-8000-{n:012}")
}

/// A root with `n` VCPU.
fn vcpus(n: u32, name: &str, total: i64) -> Provider {
    let mut p = Provider::new(&uuid(n), name, None);
    p.inventories
        .insert("VCPU".to_string(), Inventory::with_total(total));
    p
}

fn consumer(n: u32, on: &[(u32, &str, i64)]) -> (String, Consumer) {
    let mut allocations: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (rp, class, amount) in on {
        allocations
            .entry(uuid(*rp))
            .or_default()
            .insert(class.to_string(), *amount);
    }
    let uuid = format!("c0000000-0000-4000-8000-{n:012}");
    let c = Consumer {
        uuid: uuid.clone(),
        project_id: "p".to_string(),
        user_id: "u".to_string(),
        consumer_type: "INSTANCE".to_string(),
        generation: Some(1),
        allocations,
    };
    (uuid, c)
}

#[test]
fn providers_that_trade_names_are_renamed_through_a_name_of_their_own() {
    let target = Snapshot {
        providers: vec![vcpus(1, "a", 4), vcpus(2, "b", 4)],
        ..Default::default()
    };
    let source = Snapshot {
        providers: vec![vcpus(2, "a", 4), vcpus(1, "b", 4)],
        ..Default::default()
    };
    assert_eq!(export_over(&source, &target), Ok(shown(source.clone())));
}

#[test]
fn a_consumer_leaves_an_inventory_before_its_provider_loses_it() {
    let mut cn1 = vcpus(1, "cn1", 4);
    cn1.inventories
        .insert("MEMORY_MB".to_string(), Inventory::with_total(1024));
    let target = Snapshot {
        providers: vec![cn1],
        consumers: BTreeMap::from([consumer(1, &[(1, "VCPU", 1), (1, "MEMORY_MB", 512)])]),
        ..Default::default()
    };
    let source = Snapshot {
        providers: vec![vcpus(1, "cn1", 4)],
        consumers: BTreeMap::from([consumer(1, &[(1, "VCPU", 2)])]),
        ..Default::default()
    };
    assert_eq!(export_over(&source, &target), Ok(shown(source.clone())));
}

#[test]
fn a_consumer_moves_into_room_another_frees_after_it() {
    // Consumer 1 (first by uuid) moves to cn2, which consumer 2 fills until it moves off.
    let providers = vec![vcpus(1, "cn1", 4), vcpus(2, "cn2", 4)];
    let target = Snapshot {
        providers: providers.clone(),
        consumers: BTreeMap::from([
            consumer(1, &[(1, "VCPU", 1)]),
            consumer(2, &[(2, "VCPU", 4)]),
        ]),
        ..Default::default()
    };
    let source = Snapshot {
        providers,
        consumers: BTreeMap::from([
            consumer(1, &[(2, "VCPU", 4)]),
            consumer(2, &[(1, "VCPU", 1)]),
        ]),
        ..Default::default()
    };
    assert_eq!(export_over(&source, &target), Ok(shown(source.clone())));
}

#[test]
fn consumers_that_trade_full_providers_are_put_afresh() {
    let providers = vec![vcpus(1, "cn1", 4), vcpus(2, "cn2", 4)];
    let target = Snapshot {
        providers: providers.clone(),
        consumers: BTreeMap::from([
            consumer(1, &[(1, "VCPU", 4)]),
            consumer(2, &[(2, "VCPU", 4)]),
        ]),
        ..Default::default()
    };
    let source = Snapshot {
        providers,
        consumers: BTreeMap::from([
            consumer(1, &[(2, "VCPU", 4)]),
            consumer(2, &[(1, "VCPU", 4)]),
        ]),
        ..Default::default()
    };
    assert_eq!(export_over(&source, &target), Ok(shown(source.clone())));
    // The two are deleted first and put afresh; nothing else is written.
    let ops = export::plan(&source, &target).unwrap();
    let said: Vec<String> = ops
        .iter()
        .map(|o| format!("{} {}", o.method, o.path))
        .collect();
    assert_eq!(
        said,
        [
            "DELETE /allocations/c0000000-0000-4000-8000-000000000001",
            "DELETE /allocations/c0000000-0000-4000-8000-000000000002",
            "PUT /allocations/c0000000-0000-4000-8000-000000000001",
            "PUT /allocations/c0000000-0000-4000-8000-000000000002",
        ]
    );
}

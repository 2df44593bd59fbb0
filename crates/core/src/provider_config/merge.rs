//! Merging provider config entries into the providers they identify.
//!
//! Explicit uuid or name entries win over `$COMPUTE_NODE`, which applies to every root
//! provider with the COMPUTE_NODE trait that no explicit entry names. An inventory of a
//! class the provider already has is a conflict: it is ignored and reported.

use std::collections::{BTreeMap, BTreeSet};

use crate::placement::trait_name::COMPUTE_NODE;
use crate::placement::{Inventory, ProviderIndex};

/// How an entry names its provider.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Identification {
    Uuid(String),
    Name(String),
    /// `$COMPUTE_NODE`: every root with the COMPUTE_NODE trait not otherwise identified.
    ComputeNode,
}

impl std::fmt::Display for Identification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identification::Uuid(u) => write!(f, "uuid {u}"),
            Identification::Name(n) => write!(f, "name {n}"),
            Identification::ComputeNode => f.write_str("uuid $COMPUTE_NODE"),
        }
    }
}

/// One provider entry of one config.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    /// The config (ProviderConfig name or file) the entry comes from.
    pub source: String,
    /// The entry's position in its config.
    pub position: usize,
    pub identification: Identification,
    pub inventories: BTreeMap<String, Inventory>,
    pub traits: BTreeSet<String>,
}

/// A provider's inventories and traits after the merge.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Effective {
    pub inventories: BTreeMap<String, Inventory>,
    pub traits: BTreeSet<String>,
    /// Configs whose entries applied.
    pub applied: BTreeSet<String>,
    /// Conflicts that concern this provider.
    pub conflicts: Vec<String>,
}

/// A config inventory for a class the provider already has of its own (the seed's "managed by
/// the virt driver"): the config's inventory is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryConflict {
    /// The entry's position in its config.
    pub position: usize,
    /// The provider reached.
    pub provider: String,
    pub class: String,
}

/// What became of one config's entries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigOutcome {
    pub matched: BTreeSet<String>,
    pub unmatched: Vec<String>,
    /// Every conflict, one sentence each.
    pub conflicts: Vec<String>,
    /// The inventory conflicts among them, as records.
    pub inventory_conflicts: Vec<InventoryConflict>,
}

/// The merge of every entry into the index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergeResult {
    /// Only providers that some entry reached; the others keep their own inventories and traits.
    pub providers: BTreeMap<String, Effective>,
    pub configs: BTreeMap<String, ConfigOutcome>,
}

impl MergeResult {
    /// A provider's effective inventories and traits: its own, plus what configs added.
    pub fn effective(&self, index: &ProviderIndex, name: &str) -> Effective {
        let mut e = self.providers.get(name).cloned().unwrap_or_default();
        if let Some((inventories, traits)) = index.own_inventories_and_traits(name) {
            for (class, inv) in inventories {
                e.inventories.insert(class.to_string(), inv.clone());
            }
            e.traits.extend(traits.map(str::to_string));
        }
        e
    }
}

/// Merges entries (in the order given: configs sorted by name, entries by position) into the index.
pub fn merge(index: &ProviderIndex, entries: &[ConfigEntry]) -> MergeResult {
    let mut result = MergeResult::default();
    // Which entry reached each provider first, to report a provider reached twice.
    let mut reached_by: BTreeMap<String, String> = BTreeMap::new();
    let explicit = entries
        .iter()
        .filter(|e| e.identification != Identification::ComputeNode);
    let compute = entries
        .iter()
        .filter(|e| e.identification == Identification::ComputeNode);
    let mut explicitly_named = BTreeSet::new();
    let mut targets: Vec<(&ConfigEntry, Vec<String>)> = Vec::new();
    for entry in explicit {
        let names: Vec<String> = match &entry.identification {
            Identification::Uuid(u) => index.names_with_uuid(u),
            Identification::Name(n) => index.provider(n).map(|p| vec![p.name]).unwrap_or_default(),
            Identification::ComputeNode => Vec::new(),
        };
        explicitly_named.extend(names.iter().cloned());
        targets.push((entry, names));
    }
    for entry in compute {
        let names = index
            .roots_with_own_trait(COMPUTE_NODE)
            .into_iter()
            .filter(|n| !explicitly_named.contains(n))
            .collect();
        targets.push((entry, names));
    }
    for (entry, names) in targets {
        let outcome = result.configs.entry(entry.source.clone()).or_default();
        let here = format!(
            "{} providers[{}] ({})",
            entry.source, entry.position, entry.identification
        );
        if names.is_empty() && entry.identification != Identification::ComputeNode {
            outcome.unmatched.push(entry.identification.to_string());
        }
        for name in names {
            if let Some(first) = reached_by.get(&name) {
                let msg = format!(
                    "{here} reaches provider {name:?}, already configured by {first}; ignored"
                );
                outcome.conflicts.push(msg.clone());
                result
                    .providers
                    .entry(name)
                    .or_default()
                    .conflicts
                    .push(msg);
                continue;
            }
            reached_by.insert(name.clone(), here.clone());
            let own = index.provider(&name).map(|p| p.inventories);
            let effective = result.providers.entry(name.clone()).or_default();
            let mut applied = false;
            for (class, inv) in &entry.inventories {
                if own.as_ref().is_some_and(|o| o.contains_key(class)) {
                    let msg = format!(
                        "{here}: provider {name:?} already has {class} inventory of its own; the config's is ignored"
                    );
                    outcome.conflicts.push(msg.clone());
                    outcome.inventory_conflicts.push(InventoryConflict {
                        position: entry.position,
                        provider: name.clone(),
                        class: class.clone(),
                    });
                    effective.conflicts.push(msg);
                } else {
                    effective.inventories.insert(class.clone(), inv.clone());
                    applied = true;
                }
            }
            if !entry.traits.is_empty() {
                effective.traits.extend(entry.traits.iter().cloned());
                applied = true;
            }
            if applied {
                effective.applied.insert(entry.source.clone());
            }
            outcome.matched.insert(name);
        }
    }
    result
}

/// What the merge reads of a provider that changed, as it was before the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFacts {
    /// An entry naming this uuid reached it.
    pub uuid: String,
}

/// Brings a merge up to date after some providers alone changed (created, updated or
/// deleted; the entries unchanged), without merging every provider again: each changed
/// provider's outcome is worked out alone. `changed` gives each one's name and facts
/// before the change (`None`: it did not exist); the index is as it is after. Returns the
/// providers whose outcome moved, or `None`, leaving `result` as it was, where a full
/// [`merge`] is needed for the answer it would give: an explicit entry names a changed
/// provider (by name, or by its uuid before or after), more than one `$COMPUTE_NODE` entry
/// exists, or a changed provider has or would have a conflict. The common case, one
/// `$COMPUTE_NODE` entry and compute nodes coming and going, costs in proportion to the
/// providers that changed instead of to every compute node.
pub fn merge_changed(
    result: &mut MergeResult,
    index: &ProviderIndex,
    entries: &[ConfigEntry],
    changed: &[(String, Option<ProviderFacts>)],
) -> Option<Vec<String>> {
    let mut compute = entries
        .iter()
        .filter(|e| e.identification == Identification::ComputeNode);
    let entry = compute.next();
    if compute.next().is_some() {
        return None;
    }
    // Each changed provider's outcome after the change, checked before any is set.
    let mut outcomes: Vec<(&str, Option<Effective>)> = Vec::with_capacity(changed.len());
    for (name, before) in changed {
        let now_uuid = index.uuid(name);
        let named = entries.iter().any(|e| match &e.identification {
            Identification::Name(n) => n == name,
            Identification::Uuid(u) => {
                before.as_ref().is_some_and(|b| &b.uuid == u) || now_uuid == Some(u.as_str())
            }
            Identification::ComputeNode => false,
        });
        if named
            || result
                .providers
                .get(name)
                .is_some_and(|e| !e.conflicts.is_empty())
        {
            return None;
        }
        let outcome = match entry {
            Some(entry) if index.is_root_with_own_trait(name, COMPUTE_NODE) => {
                let (own, _) = index.own_inventories_and_traits(name)?;
                let mut own = own.map(|(class, _)| class);
                if own.any(|class| entry.inventories.contains_key(class)) {
                    return None;
                }
                let applied = !entry.inventories.is_empty() || !entry.traits.is_empty();
                Some(Effective {
                    inventories: entry.inventories.clone(),
                    traits: entry.traits.clone(),
                    applied: if applied {
                        [entry.source.clone()].into()
                    } else {
                        BTreeSet::new()
                    },
                    conflicts: Vec::new(),
                })
            }
            _ => None,
        };
        outcomes.push((name, outcome));
    }
    let mut moved = Vec::new();
    for (name, outcome) in outcomes {
        if let Some(entry) = entry
            && let Some(config) = result.configs.get_mut(&entry.source)
        {
            if outcome.is_some() {
                config.matched.insert(name.to_string());
            } else {
                config.matched.remove(name);
            }
        }
        if result.providers.get(name) != outcome.as_ref() {
            moved.push(name.to_string());
        }
        match outcome {
            Some(e) => {
                result.providers.insert(name.to_string(), e);
            }
            None => {
                result.providers.remove(name);
            }
        }
    }
    moved.sort();
    moved.dedup();
    Some(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::ProviderRecord;

    fn index() -> ProviderIndex {
        let mut idx = ProviderIndex::default();
        for (name, parent, compute) in [
            ("cn1", None, true),
            ("cn2", None, true),
            ("cn1-numa0", Some("cn1"), false),
        ] {
            let mut r = ProviderRecord {
                name: name.into(),
                uuid: format!("00000000-0000-0000-0000-00000000000{}", name.len()),
                parent: parent.map(Into::into),
                ..Default::default()
            };
            if compute {
                r.traits.insert(COMPUTE_NODE.into());
            }
            r.inventories
                .insert("VCPU".into(), Inventory::with_total(8));
            idx.upsert_provider(r);
        }
        idx
    }

    fn entry(source: &str, id: Identification, class: &str, t: &str) -> ConfigEntry {
        ConfigEntry {
            source: source.into(),
            position: 0,
            identification: id,
            inventories: [(class.to_string(), Inventory::with_total(4))].into(),
            traits: [t.to_string()].into(),
        }
    }

    /// A compute node added or gone is merged alone, as a full merge would; an explicit
    /// entry naming it or a second `$COMPUTE_NODE` entry sends it to the full merge.
    #[test]
    fn changed_providers_merge_alone_where_that_is_the_full_answer() {
        let mut idx = index();
        let every_node = [entry(
            "a",
            Identification::ComputeNode,
            "CUSTOM_LLC",
            "CUSTOM_P_STATE",
        )];
        let mut result = merge(&idx, &every_node);
        let mut cn3 = ProviderRecord {
            name: "cn3".into(),
            uuid: "00000000-0000-0000-0000-000000000099".into(),
            ..Default::default()
        };
        cn3.traits.insert(COMPUTE_NODE.into());
        idx.upsert_provider(cn3);
        let added = [("cn3".to_string(), None)];
        let moved = merge_changed(&mut result, &idx, &every_node, &added);
        assert_eq!(moved, Some(vec!["cn3".to_string()]));
        assert_eq!(result, merge(&idx, &every_node));
        let facts = ProviderFacts {
            uuid: "00000000-0000-0000-0000-000000000099".into(),
        };
        idx.remove_provider("cn3");
        let gone = [("cn3".to_string(), Some(facts))];
        let moved = merge_changed(&mut result, &idx, &every_node, &gone);
        assert_eq!(moved, Some(vec!["cn3".to_string()]));
        assert_eq!(result, merge(&idx, &every_node));
        // Named explicitly, or reached by two `$COMPUTE_NODE` entries: left as it was.
        let named = [
            every_node[0].clone(),
            entry(
                "b",
                Identification::Name("cn3".into()),
                "CUSTOM_X",
                "CUSTOM_Y",
            ),
        ];
        let before = result.clone();
        assert_eq!(merge_changed(&mut result, &idx, &named, &gone), None);
        let twice = [every_node[0].clone(), every_node[0].clone()];
        assert_eq!(merge_changed(&mut result, &idx, &twice, &gone), None);
        assert_eq!(result, before);
    }

    #[test]
    fn explicit_beats_compute_node() {
        let idx = index();
        let r = merge(
            &idx,
            &[
                entry(
                    "a",
                    Identification::ComputeNode,
                    "CUSTOM_LLC",
                    "CUSTOM_P_STATE",
                ),
                entry(
                    "b",
                    Identification::Name("cn1".into()),
                    "CUSTOM_FPGA",
                    "CUSTOM_GOLD",
                ),
            ],
        );
        let cn1 = r.effective(&idx, "cn1");
        assert!(
            cn1.inventories.contains_key("CUSTOM_FPGA")
                && !cn1.inventories.contains_key("CUSTOM_LLC")
        );
        assert!(cn1.traits.contains("CUSTOM_GOLD") && !cn1.traits.contains("CUSTOM_P_STATE"));
        let cn2 = r.effective(&idx, "cn2");
        assert!(cn2.inventories.contains_key("CUSTOM_LLC") && cn2.traits.contains(COMPUTE_NODE));
        // $COMPUTE_NODE reaches roots only.
        assert!(!r.providers.contains_key("cn1-numa0"));
        assert_eq!(r.configs["a"].matched, ["cn2".to_string()].into());
    }

    #[test]
    fn conflicts_are_ignored_and_reported() {
        let idx = index();
        let r = merge(
            &idx,
            &[
                entry("a", Identification::Name("cn1".into()), "VCPU", "CUSTOM_X"),
                entry(
                    "b",
                    Identification::Uuid("00000000-0000-0000-0000-000000000003".into()),
                    "CUSTOM_Y",
                    "CUSTOM_Y",
                ),
                entry(
                    "c",
                    Identification::Name("gone".into()),
                    "CUSTOM_Z",
                    "CUSTOM_Z",
                ),
            ],
        );
        let cn1 = r.effective(&idx, "cn1");
        assert_eq!(
            cn1.inventories["VCPU"].total, 8,
            "the provider's own inventory stays"
        );
        assert!(cn1.traits.contains("CUSTOM_X"));
        assert!(
            !cn1.traits.contains("CUSTOM_Y"),
            "second entry reaching cn1 is ignored"
        );
        assert_eq!(r.configs["a"].conflicts.len(), 1);
        assert!(r.configs["b"].conflicts[0].contains("already configured by a providers[0]"));
        assert_eq!(r.configs["c"].unmatched, vec!["name gone".to_string()]);
    }

    fn record(name: &str, uuid: &str, parent: Option<&str>, traits: &[&str]) -> ProviderRecord {
        let mut r = ProviderRecord {
            name: name.into(),
            uuid: uuid.into(),
            parent: parent.map(Into::into),
            ..Default::default()
        };
        r.traits.extend(traits.iter().map(|t| t.to_string()));
        r.inventories
            .insert("VCPU".into(), Inventory::with_total(16));
        r
    }

    const U1: &str = "11111111-1111-1111-1111-111111111111";
    const U2: &str = "22222222-2222-2222-2222-222222222222";
    const U3: &str = "33333333-3333-3333-3333-333333333333";
    const U4: &str = "44444444-4444-4444-4444-444444444444";

    /// cn1 and cn2 are compute nodes, cn1-pf is nested under cn1, storage is a root without
    /// the COMPUTE_NODE trait.
    fn cloud() -> ProviderIndex {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(record("cn1", U1, None, &[COMPUTE_NODE]));
        idx.upsert_provider(record("cn2", U2, None, &[COMPUTE_NODE]));
        idx.upsert_provider(record("cn1-pf", U3, Some("cn1"), &[]));
        idx.upsert_provider(record("storage", U4, None, &["MISC_SHARES_VIA_AGGREGATE"]));
        idx
    }

    fn at(
        source: &str,
        position: usize,
        id: Identification,
        classes: &[&str],
        traits: &[&str],
    ) -> ConfigEntry {
        ConfigEntry {
            source: source.into(),
            position,
            identification: id,
            inventories: classes
                .iter()
                .map(|c| (c.to_string(), Inventory::with_total(2)))
                .collect(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn compute_node_reaches_compute_node_roots_only() {
        let idx = cloud();
        let r = merge(
            &idx,
            &[at(
                "a",
                0,
                Identification::ComputeNode,
                &["CUSTOM_LLC"],
                &["CUSTOM_P"],
            )],
        );
        assert_eq!(
            r.configs["a"].matched,
            ["cn1".to_string(), "cn2".to_string()].into()
        );
        assert!(r.configs["a"].unmatched.is_empty() && r.configs["a"].conflicts.is_empty());
        assert!(
            !r.providers.contains_key("cn1-pf"),
            "nested providers are not reached"
        );
        assert!(
            !r.providers.contains_key("storage"),
            "roots without COMPUTE_NODE are not reached"
        );
        assert_eq!(r.providers["cn2"].applied, ["a".to_string()].into());
    }

    #[test]
    fn explicit_uuid_or_name_beats_compute_node_whatever_the_order() {
        let idx = cloud();
        // The explicit entries come from configs sorted after the $COMPUTE_NODE one.
        let r = merge(
            &idx,
            &[
                at(
                    "a",
                    0,
                    Identification::ComputeNode,
                    &["CUSTOM_LLC"],
                    &["CUSTOM_DEFAULT"],
                ),
                at(
                    "b",
                    0,
                    Identification::Uuid(U1.into()),
                    &[],
                    &["CUSTOM_ONE"],
                ),
                at(
                    "c",
                    0,
                    Identification::Name("cn2".into()),
                    &["CUSTOM_FPGA"],
                    &[],
                ),
            ],
        );
        let cn1 = r.effective(&idx, "cn1");
        assert!(cn1.traits.contains("CUSTOM_ONE") && !cn1.traits.contains("CUSTOM_DEFAULT"));
        assert!(
            !cn1.inventories.contains_key("CUSTOM_LLC"),
            "nothing of the default entry is combined"
        );
        let cn2 = r.effective(&idx, "cn2");
        assert!(
            cn2.inventories.contains_key("CUSTOM_FPGA")
                && !cn2.inventories.contains_key("CUSTOM_LLC")
        );
        assert!(
            r.configs["a"].matched.is_empty(),
            "every compute node is identified explicitly"
        );
        assert!(
            r.configs["a"].unmatched.is_empty(),
            "$COMPUTE_NODE reaching nothing is not reported"
        );
        assert_eq!(cn1.applied, ["b".to_string()].into());
    }

    #[test]
    fn the_same_provider_by_name_and_by_uuid_is_a_conflict() {
        let idx = cloud();
        let r = merge(
            &idx,
            &[
                at(
                    "a",
                    0,
                    Identification::Name("cn1".into()),
                    &[],
                    &["CUSTOM_BY_NAME"],
                ),
                at(
                    "b",
                    3,
                    Identification::Uuid(U1.into()),
                    &["CUSTOM_X"],
                    &["CUSTOM_BY_UUID"],
                ),
            ],
        );
        let cn1 = r.effective(&idx, "cn1");
        assert!(cn1.traits.contains("CUSTOM_BY_NAME"));
        assert!(
            !cn1.traits.contains("CUSTOM_BY_UUID") && !cn1.inventories.contains_key("CUSTOM_X"),
            "the second entry is ignored whole: nothing is half-applied"
        );
        assert_eq!(
            r.configs["b"].conflicts,
            vec![format!(
                "b providers[3] (uuid {U1}) reaches provider \"cn1\", already configured by a providers[0] (name cn1); ignored"
            )]
        );
        assert_eq!(cn1.conflicts.len(), 1, "reported on the provider too");
        assert!(r.configs["a"].conflicts.is_empty());
        // Within one config as well.
        let r = merge(
            &idx,
            &[
                at("a", 0, Identification::Uuid(U2.into()), &[], &["CUSTOM_A"]),
                at(
                    "a",
                    1,
                    Identification::Name("cn2".into()),
                    &[],
                    &["CUSTOM_B"],
                ),
            ],
        );
        assert_eq!(r.configs["a"].conflicts.len(), 1);
        assert!(!r.effective(&idx, "cn2").traits.contains("CUSTOM_B"));
    }

    #[test]
    fn an_inventory_the_provider_has_is_ignored_and_reported() {
        let mut idx = cloud();
        let mut cn1 = idx.provider("cn1").unwrap().clone();
        cn1.inventories
            .insert("CUSTOM_LLC".into(), Inventory::with_total(30));
        idx.upsert_provider(cn1);
        let r = merge(
            &idx,
            &[at(
                "a",
                2,
                Identification::Name("cn1".into()),
                &["CUSTOM_LLC", "CUSTOM_FPGA"],
                &["CUSTOM_T"],
            )],
        );
        let cn1 = r.effective(&idx, "cn1");
        assert_eq!(
            cn1.inventories["CUSTOM_LLC"].total, 30,
            "the provider's own inventory stays"
        );
        assert_eq!(
            cn1.inventories["CUSTOM_FPGA"].total, 2,
            "the rest of the entry applies"
        );
        assert!(cn1.traits.contains("CUSTOM_T"));
        assert_eq!(
            r.configs["a"].inventory_conflicts,
            vec![InventoryConflict {
                position: 2,
                provider: "cn1".into(),
                class: "CUSTOM_LLC".into()
            }]
        );
        assert_eq!(
            r.configs["a"].conflicts,
            vec!["a providers[2] (name cn1): provider \"cn1\" already has CUSTOM_LLC inventory of its own; the config's is ignored".to_string()]
        );
        assert_eq!(
            cn1.conflicts, r.configs["a"].conflicts,
            "and on the provider"
        );
        // A $COMPUTE_NODE entry meets the same rule on every node it reaches.
        let r = merge(
            &idx,
            &[at(
                "d",
                0,
                Identification::ComputeNode,
                &["CUSTOM_LLC"],
                &[],
            )],
        );
        assert_eq!(r.configs["d"].inventory_conflicts.len(), 1);
        assert_eq!(r.effective(&idx, "cn2").inventories["CUSTOM_LLC"].total, 2);
    }

    #[test]
    fn an_identification_naming_no_provider_is_reported_not_an_error() {
        let idx = cloud();
        let r = merge(
            &idx,
            &[
                at(
                    "a",
                    0,
                    Identification::Name("ghost".into()),
                    &["CUSTOM_X"],
                    &[],
                ),
                at(
                    "a",
                    1,
                    Identification::Uuid("99999999-9999-9999-9999-999999999999".into()),
                    &[],
                    &["CUSTOM_Y"],
                ),
                at(
                    "a",
                    2,
                    Identification::Name("cn2".into()),
                    &[],
                    &["CUSTOM_Z"],
                ),
            ],
        );
        let outcome = &r.configs["a"];
        assert_eq!(
            outcome.unmatched,
            vec![
                "name ghost".to_string(),
                "uuid 99999999-9999-9999-9999-999999999999".to_string()
            ]
        );
        assert!(outcome.conflicts.is_empty());
        assert_eq!(
            outcome.matched,
            ["cn2".to_string()].into(),
            "the other entries still apply"
        );
        assert!(r.effective(&idx, "cn2").traits.contains("CUSTOM_Z"));
    }
}

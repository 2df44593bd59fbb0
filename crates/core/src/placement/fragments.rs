//! Each provider's JSON, kept rendered: its member of `provider_summaries` in
//! `GET /allocation_candidates` and its entry in `GET /resource_providers`, in the shapes
//! most callers ask for (summaries from 1.27, list entries from 1.14). A large answer is
//! then mostly copies of these bytes instead of formatting tens of thousands of providers
//! anew on every request.
//!
//! A fragment is rendered on first use by the same code that renders it when it is not
//! kept, and is dropped whenever the index changes the provider: every change goes through
//! `ProviderIndex::get_mut` or puts a new provider in its slot, and both leave the provider
//! with no fragments. A fragment also shows the uuids of the provider's parent and root;
//! a change of those reaches the provider through the same path (the index sets each
//! child's parent link and each descendant's root again when a provider is put back).
//! Fragments are shared (`Arc`) so that copying the index for a writer while a search
//! holds it copies no JSON.

use std::sync::{Arc, OnceLock};

use super::microversion::Microversion;

/// A provider's kept fragments, empty until first used.
#[derive(Clone, Default)]
pub(crate) struct Fragments {
    /// `"uuid":{…}` in `provider_summaries` from 1.29 (with parent and root).
    summary_29: OnceLock<Arc<[u8]>>,
    /// The same at 1.27 and 1.28 (every class of its inventory, no parent and root).
    summary_27: OnceLock<Arc<[u8]>>,
    /// Its `GET /resource_providers` entry from 1.14, after the generation (which changes
    /// apart from the index): `,"links":[…],…,"uuid":"…"}`.
    listed_14: OnceLock<Arc<[u8]>>,
}

impl std::fmt::Debug for Fragments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = |x: &OnceLock<Arc<[u8]>>| x.get().map(|b| b.len());
        f.debug_struct("Fragments")
            .field("summary_29", &kept(&self.summary_29))
            .field("summary_27", &kept(&self.summary_27))
            .field("listed_14", &kept(&self.listed_14))
            .finish()
    }
}

/// Which kept summary serves a microversion; none below 1.27, where a summary lists only
/// the classes the query asked for.
fn summary_slot(f: &Fragments, mv: Microversion) -> Option<&OnceLock<Arc<[u8]>>> {
    if mv.at_least(29) {
        Some(&f.summary_29)
    } else if mv.at_least(27) {
        Some(&f.summary_27)
    } else {
        None
    }
}

impl Fragments {
    /// Appends the provider's summary member at `mv`, kept when `mv` has a kept shape
    /// (`render` writes it either way).
    pub(crate) fn summary(
        &self,
        out: &mut Vec<u8>,
        mv: Microversion,
        render: impl FnOnce(&mut Vec<u8>),
    ) {
        kept_or_rendered(summary_slot(self, mv), out, render);
    }

    /// The provider's summary member at `mv`, when it is kept already.
    pub(crate) fn kept_summary(&self, mv: Microversion) -> Option<&Arc<[u8]>> {
        summary_slot(self, mv)?.get()
    }

    /// Appends the provider's list entry after its generation at `mv`, kept from 1.14.
    pub(crate) fn listed(
        &self,
        out: &mut Vec<u8>,
        mv: Microversion,
        render: impl FnOnce(&mut Vec<u8>),
    ) {
        let slot = mv.at_least(14).then_some(&self.listed_14);
        kept_or_rendered(slot, out, render);
    }

    /// The length of the provider's list entry after its generation from 1.14, kept (and
    /// rendered by `render` when it was not).
    pub(crate) fn listed_len(&self, render: impl FnOnce(&mut Vec<u8>)) -> usize {
        kept(&self.listed_14, render).len()
    }

    /// The provider's list entry after its generation from 1.14, when it is kept already.
    pub(crate) fn kept_listed(&self) -> Option<&Arc<[u8]>> {
        self.listed_14.get()
    }

    /// How many fragments are kept (for tests).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        [&self.summary_29, &self.summary_27, &self.listed_14]
            .iter()
            .filter(|f| f.get().is_some())
            .count()
    }
}

fn kept_or_rendered(
    slot: Option<&OnceLock<Arc<[u8]>>>,
    out: &mut Vec<u8>,
    render: impl FnOnce(&mut Vec<u8>),
) {
    match slot {
        Some(slot) => out.extend_from_slice(kept(slot, render)),
        None => render(out),
    }
}

/// The fragment kept in `slot`, rendered by `render` when there is none yet.
fn kept(slot: &OnceLock<Arc<[u8]>>, render: impl FnOnce(&mut Vec<u8>)) -> &Arc<[u8]> {
    slot.get_or_init(|| {
        let mut fresh = Vec::with_capacity(512);
        render(&mut fresh);
        fresh.into()
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::super::candidates::allocation_candidates;
    use super::super::ids::ProviderId;
    use super::super::provider_tree::{ConsumerAllocations, ProviderIndex, ProviderRecord};
    use super::super::query::{parse_candidates_query, parse_providers_query};
    use super::super::resource_providers::matching_providers;
    use super::super::response::{FreshBuffers, candidates_body, providers_json_parts};
    use super::super::trait_rows::TraitRows;
    use super::*;
    use crate::placement::Inventory;

    /// The list microversions whose entries differ (links at 1.1, 1.6, 1.11; parent and
    /// root at 1.14), and the candidates ones (1.12 dict, 1.17 traits, 1.27 every class,
    /// 1.29 parent and root, 1.34 mappings).
    const LIST_VERSIONS: [u16; 8] = [0, 1, 6, 11, 13, 14, 29, 39];
    const CANDIDATE_VERSIONS: [u16; 9] = [10, 12, 17, 26, 27, 28, 29, 34, 39];
    const QUERIES: [&str; 3] = [
        "resources=VCPU:1",
        "resources=DISK_GB:1&required=!CUSTOM_X",
        "resources=VCPU:1&resources1=DISK_GB:1&group_policy=none",
    ];

    /// A generation per provider, as the API would read it beside the index.
    fn generation(p: ProviderId) -> u64 {
        p.index() as u64 * 7 + 1
    }

    /// The list body as the API wrote it before entries were kept: a JSON object per
    /// provider, serialized by serde_json.
    fn list_by_serde(index: &ProviderIndex, listed: &[ProviderId], mv: Microversion) -> Vec<u8> {
        let items: Vec<Value> = listed
            .iter()
            .map(|&p| {
                let prov = index.get(p);
                let base = format!("/resource_providers/{}", prov.uuid);
                let links: Vec<Value> = [
                    ("self", "", 0),
                    ("inventories", "/inventories", 0),
                    ("usages", "/usages", 0),
                    ("aggregates", "/aggregates", 1),
                    ("traits", "/traits", 6),
                    ("allocations", "/allocations", 11),
                ]
                .into_iter()
                .filter(|(_, _, from)| mv.0 >= *from)
                .map(|(rel, path, _)| json!({"rel": rel, "href": format!("{base}{path}")}))
                .collect();
                let mut v = json!({
                    "uuid": &*prov.uuid,
                    "name": prov.shown_name(),
                    "generation": generation(p),
                    "links": links,
                });
                if mv.0 >= 14 {
                    v["parent_provider_uuid"] = prov
                        .parent
                        .map(|pp| Value::from(&*index.get(pp).uuid))
                        .unwrap_or(Value::Null);
                    let root = prov.root.unwrap_or(p);
                    v["root_provider_uuid"] = Value::from(&*index.get(root).uuid);
                }
                v
            })
            .collect();
        serde_json::to_vec(&json!({ "resource_providers": items })).unwrap()
    }

    /// Every answer written with the kept fragments (kept ones first, when `warm`) is the
    /// answer serde_json writes from the index as it is. Returns how many answers were
    /// compared.
    fn check(index: &ProviderIndex) -> usize {
        let mut compared = 0;
        for mv in LIST_VERSIONS.map(Microversion) {
            let q = parse_providers_query("", mv).unwrap();
            let found = matching_providers(index, &q);
            let listed: Vec<(ProviderId, u64)> =
                found.iter().map(|&p| (p, generation(p))).collect();
            for threads in [1, 3] {
                let written =
                    providers_json_parts(index, &listed, mv, threads, &FreshBuffers).concat();
                let want = list_by_serde(index, &found, mv);
                assert_eq!(
                    String::from_utf8_lossy(&written),
                    String::from_utf8_lossy(&want),
                    "list at {mv}"
                );
                compared += 1;
            }
        }
        for mv in CANDIDATE_VERSIONS.map(Microversion) {
            for query in QUERIES {
                let Ok(q) = parse_candidates_query(query, mv) else {
                    continue;
                };
                let set = allocation_candidates(index, &q);
                let body = candidates_body(index, &set, mv);
                let want = serde_json::to_vec(&body).unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&body.to_json(2)),
                    String::from_utf8_lossy(&want),
                    "{query} at {mv}"
                );
                compared += 1;
            }
        }
        compared
    }

    /// The list made piece by piece is the list written whole, and as long as it says, for
    /// any number of entries a part (kept fragments or not yet); below 1.14 it is not made.
    #[test]
    fn a_list_made_piece_by_piece_is_the_list_written_whole() {
        use super::super::list_parts::ListParts;
        use super::super::response::{ListPart, ProvidersStream};
        use std::sync::Arc;
        let mut index = ProviderIndex::default();
        for i in 0..7 {
            let mut r = record(&format!("cn{i}"), None, &[("VCPU", 4)]);
            r.placement_name = (i % 3 == 0).then(|| format!("cn {i} \"odd\""));
            index.upsert_provider(r);
            index.upsert_provider(record(&format!("cn{i}-numa"), Some(&format!("cn{i}")), &[]));
        }
        let index = Arc::new(index);
        for mv in LIST_VERSIONS.map(Microversion) {
            let q = parse_providers_query("", mv).unwrap();
            let all = matching_providers(&index, &q);
            for n in [0, 1, 5, all.len()] {
                let listed: Vec<(ProviderId, u64)> = all[..n]
                    .iter()
                    .map(|&p| (p, generation(p) * 1001))
                    .collect();
                let whole = providers_json_parts(&index, &listed, mv, 1, &FreshBuffers).concat();
                let Ok(stream) = ProvidersStream::new(index.clone(), listed.clone(), mv) else {
                    assert!(mv.0 < 14);
                    continue;
                };
                for per_part in [1, 2, 3, 1024] {
                    let stream_of = |listed: &[(ProviderId, u64)]| {
                        ProvidersStream::new(index.clone(), listed.to_vec(), mv)
                            .unwrap_or_else(|_| panic!("entries are kept from 1.14"))
                            .with_entries_per_part(per_part)
                    };
                    // Parts written, kept, then sent from there; after a generation
                    // changes, the parts with that provider are written again.
                    let kept = ListParts::keeping_every_part(1 << 30);
                    let mut changed = listed.clone();
                    if let Some(first) = changed.first_mut() {
                        first.1 += 1;
                    }
                    let changed_whole =
                        providers_json_parts(&index, &changed, mv, 1, &FreshBuffers).concat();
                    for (round, (listed, whole)) in [
                        (&listed, &whole),
                        (&listed, &whole),
                        (&changed, &changed_whole),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        let mut stream = stream_of(listed);
                        let at = format!("{n} at {mv}, {per_part} a part, round {round}");
                        assert_eq!(stream.len(&kept), whole.len() as u64, "{at}");
                        // Every part kept in the second round; in the third, all but the
                        // changed one.
                        assert_eq!(stream.is_kept(), round == 1 && n > 0, "{at}");
                        let parts: Vec<ListPart> =
                            std::iter::from_fn(|| stream.next_part(&kept, &FreshBuffers)).collect();
                        let sent: Vec<u8> = parts
                            .iter()
                            .flat_map(|p| match p {
                                ListPart::Kept(k) => k.as_ref().to_vec(),
                                ListPart::Written(w) => w.clone(),
                            })
                            .collect();
                        assert_eq!(
                            String::from_utf8_lossy(&sent),
                            String::from_utf8_lossy(whole),
                            "{at}"
                        );
                        let written = parts
                            .iter()
                            .filter(|p| matches!(p, ListPart::Written(_)))
                            .count();
                        // Only the part of no entries (the list's brackets) is not kept.
                        assert_eq!(written, usize::from(n == 0), "{at}");
                    }
                    let mut stream = stream_of(&listed);
                    let pieces: Vec<Vec<u8>> = std::iter::from_fn(|| {
                        let mut part = Vec::new();
                        stream.fill(&mut part).then_some(part)
                    })
                    .collect();
                    // The opening and closing go with the first and last entries.
                    assert_eq!(
                        pieces.len(),
                        n.div_ceil(per_part).max(1),
                        "{n} at {mv}, {per_part} a part"
                    );
                    assert_eq!(
                        String::from_utf8_lossy(&pieces.concat()),
                        String::from_utf8_lossy(&whole),
                        "{n} at {mv}, {per_part} a part"
                    );
                }
                drop(stream);
            }
        }
    }

    fn kept(index: &ProviderIndex, name: &str) -> usize {
        index.get(index.id(name).unwrap()).fragments.kept()
    }

    fn record(name: &str, parent: Option<&str>, classes: &[(&str, i64)]) -> ProviderRecord {
        ProviderRecord {
            name: name.into(),
            uuid: format!("uuid-{name}"),
            parent: parent.map(Into::into),
            inventories: classes
                .iter()
                .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                .collect(),
            ..Default::default()
        }
    }

    fn uses(items: &[(&str, &str, i64)]) -> ConsumerAllocations {
        ConsumerAllocations {
            consumer: "c".into(),
            items: items
                .iter()
                .map(|(p, c, n)| (p.to_string(), c.to_string(), *n))
                .collect(),
        }
    }

    /// A kept fragment is never written once its provider, or the parent or root it shows,
    /// changed: after each kind of change every answer at every shape is what serde_json
    /// writes from the index as it now is.
    #[test]
    fn kept_fragments_are_dropped_by_every_change_they_show() {
        let mut index = ProviderIndex::default();
        index.upsert_provider(record("cn1", None, &[("DISK_GB", 100)]));
        index.upsert_provider(record("cn1-numa0", Some("cn1"), &[("VCPU", 8)]));
        index.upsert_provider(record("cn1-numa0-pf", Some("cn1-numa0"), &[("VCPU", 2)]));
        index.upsert_provider(record("cn2", None, &[("VCPU", 4), ("DISK_GB", 10)]));
        assert!(check(&index) > 0);
        // Every shape that is kept was kept for every provider.
        assert_eq!(kept(&index, "cn1-numa0"), 3);

        // An allocation changes usages.
        index.upsert_allocations("a1", uses(&[("cn1-numa0", "VCPU", 3)]));
        assert_eq!(kept(&index, "cn1-numa0"), 0);
        assert_eq!(
            kept(&index, "cn2"),
            3,
            "a provider not changed keeps its JSON"
        );
        check(&index);

        // Its inventory changes (and the allocation goes).
        index.upsert_provider(record(
            "cn1-numa0",
            Some("cn1"),
            &[("VCPU", 16), ("MEMORY_MB", 512)],
        ));
        check(&index);
        index.remove_allocations("a1");
        check(&index);

        // Traits, aggregates, and a Placement name that is not the object name.
        let mut r = record("cn2", None, &[("VCPU", 4)]);
        r.traits = BTreeSet::from([
            "CUSTOM_X".to_string(),
            "CUSTOM_Y".to_string(),
            "HW_CPU_X86_AVX2".to_string(),
        ]);
        r.aggregates = BTreeSet::from(["agg-1".to_string()]);
        r.placement_name = Some("cn2 \"the second\"".into());
        index.upsert_provider(r);
        check(&index);

        // The order custom traits were created in (a summary lists them in it).
        assert!(check(&index) > 0);
        index.set_trait_rows(TraitRows::new(["CUSTOM_Y", "CUSTOM_X"]));
        assert_eq!(kept(&index, "cn2"), 0);
        check(&index);

        // The root's uuid changes: its descendants show it as their root (and parent).
        let mut root = record("cn1", None, &[("DISK_GB", 100)]);
        root.uuid = "uuid-cn1-new".into();
        index.upsert_provider(root);
        check(&index);

        // What provider configs add.
        index.set_config_additions(
            "cn1-numa0-pf",
            &BTreeMap::from([("CUSTOM_ACCEL".to_string(), Inventory::with_total(2))]),
            &BTreeSet::from(["CUSTOM_FAST".to_string()]),
        );
        check(&index);

        // Moved under another tree (its root and parent change), then its old parent goes.
        index.upsert_provider(record("cn1-numa0-pf", Some("cn2"), &[("VCPU", 2)]));
        check(&index);
        index.remove_provider("cn1-numa0");
        check(&index);

        // A removed provider's slot taken by a new one, and a parent removed under a child.
        index.upsert_provider(record("cn3", None, &[("VCPU", 1)]));
        check(&index);
        index.remove_provider("cn2");
        check(&index);
        index.upsert_provider(record("cn2", None, &[("DISK_GB", 1)]));
        check(&index);
    }

    #[derive(Debug, Clone)]
    enum Change {
        Put {
            name: usize,
            parent: Option<usize>,
            uuid: usize,
            shown: Option<usize>,
            classes: Vec<(usize, i64)>,
            traits: Vec<usize>,
        },
        Remove(usize),
        Allocate(usize, Vec<(usize, usize, i64)>),
        Free(usize),
        Configure(usize, Vec<usize>),
    }

    const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
    const UUIDS: [&str; 4] = ["u1", "u2", "q\"u\\o", "u4"];
    const SHOWN: [&str; 2] = ["A name", "ünï\u{1}"];
    const CLASSES: [&str; 3] = ["VCPU", "DISK_GB", "CUSTOM_ACCEL"];
    const TRAITS: [&str; 3] = ["CUSTOM_X", "HW_CPU_X86_AVX2", "CUSTOM_\"Q"];

    fn change() -> impl Strategy<Value = Change> {
        let name = 0..NAMES.len();
        prop_oneof![
            4 => (
                name.clone(),
                proptest::option::of(0..NAMES.len()),
                0..UUIDS.len(),
                proptest::option::of(0..SHOWN.len()),
                proptest::collection::vec((0..CLASSES.len(), 1i64..20), 0..3),
                proptest::collection::vec(0..TRAITS.len(), 0..3),
            )
                .prop_map(|(name, parent, uuid, shown, classes, traits)| Change::Put {
                    name,
                    parent,
                    uuid,
                    shown,
                    classes,
                    traits,
                }),
            1 => name.clone().prop_map(Change::Remove),
            3 => (
                0usize..3,
                proptest::collection::vec((name.clone(), 0..CLASSES.len(), 1i64..5), 1..3)
            )
                .prop_map(|(c, items)| Change::Allocate(c, items)),
            1 => (0usize..3).prop_map(Change::Free),
            1 => (name, proptest::collection::vec(0..TRAITS.len(), 0..2))
                .prop_map(|(n, t)| Change::Configure(n, t)),
        ]
    }

    fn apply(index: &mut ProviderIndex, change: &Change) {
        match change {
            Change::Put {
                name,
                parent,
                uuid,
                shown,
                classes,
                traits,
            } => {
                index.upsert_provider(ProviderRecord {
                    name: NAMES[*name].into(),
                    uuid: UUIDS[*uuid].into(),
                    placement_name: shown.map(|s| SHOWN[s].to_string()),
                    parent: parent.map(|p| NAMES[p].to_string()),
                    inventories: classes
                        .iter()
                        .map(|(c, t)| (CLASSES[*c].to_string(), Inventory::with_total(*t)))
                        .collect(),
                    traits: traits.iter().map(|t| TRAITS[*t].to_string()).collect(),
                    aggregates: BTreeSet::new(),
                });
            }
            Change::Remove(name) => {
                index.remove_provider(NAMES[*name]);
            }
            Change::Allocate(consumer, items) => {
                let items: Vec<(&str, &str, i64)> = items
                    .iter()
                    .map(|(p, c, n)| (NAMES[*p], CLASSES[*c], *n))
                    .collect();
                index.upsert_allocations(&format!("c{consumer}"), uses(&items));
            }
            Change::Free(consumer) => {
                index.remove_allocations(&format!("c{consumer}"));
            }
            Change::Configure(name, traits) => {
                let traits = traits.iter().map(|t| TRAITS[*t].to_string()).collect();
                let inventories =
                    BTreeMap::from([("CUSTOM_ACCEL".to_string(), Inventory::with_total(3))]);
                index.set_config_additions(NAMES[*name], &inventories, &traits);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// After any run of changes, answers written from kept fragments (kept before the
        /// change, as a server keeps them between requests) are the answers serde_json
        /// writes from the index as it is; so are answers from a copy of the index taken
        /// while fragments were kept (the copy a writer makes while a search holds it).
        #[test]
        fn kept_fragments_never_outlive_a_change(changes in proptest::collection::vec(change(), 1..12)) {
            let mut index = ProviderIndex::default();
            for change in &changes {
                apply(&mut index, change);
                check(&index);
                let mut copy = index.clone();
                apply(&mut copy, change);
                check(&copy);
            }
        }
    }
}

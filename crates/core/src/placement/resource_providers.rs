//! `GET /resource_providers` filtering: each filter is judged on the provider itself.

use super::ids::{AggregateId, ClassId, ProviderId, TraitId};
use super::provider_tree::ProviderIndex;
use super::query::ProvidersQuery;

/// The providers matching every filter, in tree order (roots by name, depth-first).
pub fn matching_providers(index: &ProviderIndex, q: &ProvidersQuery) -> Vec<ProviderId> {
    // No list judges more than every provider there is.
    matching(index, q, true, usize::MAX).unwrap_or_default()
}

/// [`matching_providers`] if it judges at most `most` providers; `None`, having judged
/// none, if it would judge more. The count is known before any provider is judged: the
/// provider named, the providers with the uuid asked for, the tree asked for, the members
/// of the first aggregate, trait or class asked for, or every provider.
pub fn matching_providers_within(
    index: &ProviderIndex,
    q: &ProvidersQuery,
    most: usize,
) -> Option<Vec<ProviderId>> {
    matching(index, q, true, most)
}

/// [`matching_providers_within`]; when `narrow`, from the index's tree order and the members
/// of the first aggregate, trait or class asked for, else from a walk of every tree.
fn matching(
    index: &ProviderIndex,
    q: &ProvidersQuery,
    narrow: bool,
    most: usize,
) -> Option<Vec<ProviderId>> {
    let f = &q.filters;
    let classes: Option<Vec<(ClassId, i64)>> = f
        .resources
        .iter()
        .map(|(c, a)| index.classes.get(c).map(|id| (id, *a)))
        .collect();
    let Some(classes) = classes else {
        return Some(Vec::new());
    };
    let required: Option<Vec<Vec<TraitId>>> = f
        .required
        .iter()
        .map(|any| {
            let ids: Vec<TraitId> = any.iter().filter_map(|t| index.traits.get(t)).collect();
            (!ids.is_empty()).then_some(ids)
        })
        .collect();
    let Some(required) = required else {
        return Some(Vec::new());
    };
    let forbidden: Vec<TraitId> = f
        .forbidden
        .iter()
        .filter_map(|t| index.traits.get(t))
        .collect();
    let member_of: Vec<Vec<AggregateId>> = f
        .member_of
        .iter()
        .map(|any| {
            any.iter()
                .filter_map(|a| index.aggregate_names.get(a))
                .collect()
        })
        .collect();
    let bad_aggs: Vec<AggregateId> = f
        .forbidden_aggregates
        .iter()
        .filter_map(|a| index.aggregate_names.get(a))
        .collect();
    let order = match &f.in_tree {
        Some(u) => {
            let Some(p) = index.names_with_uuid(u).first().and_then(|n| index.id(n)) else {
                return Some(Vec::new());
            };
            let Some(root) = index.get(p).root else {
                return Some(Vec::new());
            };
            let mut order = Vec::new();
            index.tree(root, &mut order);
            if order.len() > most {
                return None;
            }
            order
        }
        None if !narrow => {
            if index.len() > most {
                return None;
            }
            let mut order = Vec::new();
            for &r in index.roots.values() {
                index.tree(r, &mut order);
            }
            order
        }
        None => {
            // Every match is the provider named, a provider with the uuid asked for (found
            // so while no stored uuid has an upper-case letter), or a member of the first
            // aggregate, trait or class asked for: those alone are judged, in tree order,
            // rather than every provider.
            let named = q.name.as_ref().map(|n| index.id(n));
            let by_uuid = q
                .uuid
                .as_ref()
                .and_then(|u| index.ids_with_uuid_in_any_case(u));
            let narrowed: Option<Vec<&[ProviderId]>> = if let Some(named) = &named {
                Some(vec![named.as_slice()])
            } else if let Some(ids) = by_uuid {
                Some(vec![ids])
            } else if let Some(any) = member_of.first() {
                Some(lists(
                    &index.aggregate_members,
                    any.iter().map(|a| a.index()),
                ))
            } else if let Some(any) = required.first() {
                Some(lists(&index.trait_members, any.iter().map(|t| t.index())))
            } else {
                classes
                    .first()
                    .map(|(c, _)| lists(&index.class_members, std::iter::once(c.index())))
            };
            let tree = index.tree_order();
            match narrowed {
                Some(lists) if tree.once => {
                    if lists.iter().map(|l| l.len()).sum::<usize>() > most {
                        return None;
                    }
                    let mut some: Vec<ProviderId> = lists.concat();
                    some.retain(|p| tree.rank[p.index()] != u32::MAX);
                    some.sort_unstable_by_key(|p| tree.rank[p.index()]);
                    some.dedup();
                    some
                }
                _ if tree.providers.len() > most => return None,
                _ => tree.providers.clone(),
            }
        }
    };
    let judged = q.name.is_some()
        || q.uuid.is_some()
        || !classes.is_empty()
        || !required.is_empty()
        || !forbidden.is_empty()
        || !member_of.is_empty()
        || !bad_aggs.is_empty();
    if !judged {
        // Nothing to judge: every provider of the order is listed, unread.
        return Some(order);
    }
    let found = order
        .into_iter()
        .filter(|&p| {
            let prov = index.get(p);
            q.name.as_ref().is_none_or(|n| *prov.name == **n)
                && q.uuid
                    .as_ref()
                    .is_none_or(|u| prov.uuid.eq_ignore_ascii_case(u))
                && classes.iter().all(|(c, a)| {
                    prov.inventory(*c)
                        .is_some_and(|inv| inv.admits(prov.used(*c), *a).is_ok())
                })
                && required
                    .iter()
                    .all(|any| any.iter().any(|t| prov.has_trait(*t)))
                && !forbidden.iter().any(|t| prov.has_trait(*t))
                && member_of
                    .iter()
                    .all(|any| any.iter().any(|a| prov.aggregates().contains(*a)))
                && !bad_aggs.iter().any(|a| prov.aggregates().contains(*a))
        })
        .collect();
    Some(found)
}

/// The lists of these ids' members (ids with no list have no members).
fn lists(members: &[Vec<ProviderId>], ids: impl Iterator<Item = usize>) -> Vec<&[ProviderId]> {
    ids.filter_map(|i| members.get(i).map(Vec::as_slice))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::placement::Inventory;
    use crate::placement::microversion::Microversion;
    use crate::placement::provider_tree::ProviderRecord;
    use crate::placement::query::parse_providers_query;

    const NAMES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
    const AGGS: [&str; 3] = [
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    ];
    const TRAITS: [&str; 3] = ["CUSTOM_T1", "CUSTOM_T2", "HW_CPU_X86_AVX2"];
    const QUERIES: [&str; 18] = [
        "",
        "uuid=00000000-0000-4000-8000-0000000000a2",
        "uuid=00000000-0000-4000-8000-0000000000A3",
        "uuid=00000000-0000-4000-8000-0000000000a9",
        "uuid=00000000-0000-4000-8000-0000000000a4&member_of=00000000-0000-4000-8000-000000000002",
        "uuid=00000000-0000-4000-8000-0000000000a5&name=f",
        "name=c",
        "name=h",
        "name=c&member_of=00000000-0000-4000-8000-000000000001",
        "member_of=00000000-0000-4000-8000-000000000001",
        "member_of=in:00000000-0000-4000-8000-000000000001,00000000-0000-4000-8000-000000000002",
        "member_of=!00000000-0000-4000-8000-000000000001",
        "required=CUSTOM_T1",
        "required=in:CUSTOM_T1,CUSTOM_T2&member_of=00000000-0000-4000-8000-000000000002",
        "required=!CUSTOM_T1",
        "resources=VCPU:1",
        "resources=VCPU:2&required=CUSTOM_T2,!HW_CPU_X86_AVX2",
        "resources=DISK_GB:1",
    ];

    /// (name, parent, aggregates, traits, VCPU total) to put, or a name to remove; whether
    /// its uuid is in upper case.
    type Change = (
        usize,
        Option<usize>,
        Vec<usize>,
        Vec<usize>,
        Option<i64>,
        bool,
        bool,
    );

    fn change() -> impl Strategy<Value = Change> {
        (
            0..NAMES.len(),
            proptest::option::of(0..NAMES.len()),
            proptest::collection::vec(0..AGGS.len(), 0..3),
            proptest::collection::vec(0..TRAITS.len(), 0..3),
            proptest::option::of(0i64..4),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.2),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Listing from the index's tree order and the first filter's members (or the
        /// providers of a uuid, while no uuid has an upper-case letter) finds what walking
        /// every tree finds, in the same order, after any run of changes (parents missing,
        /// cycles, providers removed and put back, uuids in either case); so does reading
        /// one tree from that order.
        #[test]
        fn narrowed_lists_are_the_walked_lists(changes in proptest::collection::vec(change(), 1..16)) {
            let mut index = ProviderIndex::default();
            // Whether each name's provider, if there, has its uuid in upper case.
            let mut upper_now = [false; NAMES.len()];
            for (name, parent, aggs, traits, vcpu, remove, upper) in changes {
                upper_now[name] = !remove && upper;
                if remove {
                    index.remove_provider(NAMES[name]);
                } else {
                    index.upsert_provider(ProviderRecord {
                        name: NAMES[name].into(),
                        uuid: if upper {
                            format!("00000000-0000-4000-8000-0000000000A{name}")
                        } else {
                            format!("00000000-0000-4000-8000-0000000000a{name}")
                        },
                        parent: parent.map(|p| NAMES[p].to_string()),
                        inventories: vcpu
                            .map(|t| ("VCPU".to_string(), Inventory::with_total(t)))
                            .into_iter()
                            .collect(),
                        traits: traits.iter().map(|t| TRAITS[*t].to_string()).collect(),
                        aggregates: aggs.iter().map(|a| AGGS[*a].to_string()).collect(),
                        ..Default::default()
                    });
                }
                // A tree read from the tree order is the tree walked.
                for &root in index.roots.values() {
                    let mut walked = Vec::new();
                    index.tree(root, &mut walked);
                    let read = index.tree_in_order(root);
                    prop_assert!(read.is_some() || !index.tree_order().once);
                    if let Some(read) = read {
                        prop_assert_eq!(read, &walked[..]);
                    }
                }
                for query in QUERIES {
                    let q = parse_providers_query(query, Microversion::LATEST).unwrap();
                    let walked = matching(&index, &q, false, usize::MAX);
                    prop_assert_eq!(&matching(&index, &q, true, usize::MAX), &walked, "{}", query);
                    // Within a bound, the same list or none; none whenever more are found
                    // than may be judged, never when every provider twice over may be (no
                    // query here names more than two aggregates or traits of one filter).
                    let walked = walked.unwrap();
                    for most in 0..=2 * NAMES.len() {
                        let within = matching_providers_within(&index, &q, most);
                        if let Some(within) = &within {
                            prop_assert_eq!(within, &walked, "{} within {}", query, most);
                        }
                        prop_assert!(walked.len() <= most || within.is_none(), "{} within {}", query, most);
                        prop_assert!(most < 2 * index.len() || within.is_some(), "{} within {}", query, most);
                    }
                    // A uuid names one provider here: while no uuid is in upper case, that
                    // one alone is judged.
                    if query.contains("uuid=") && !upper_now.contains(&true) {
                        prop_assert!(matching_providers_within(&index, &q, 1).is_some(), "{}", query);
                    }
                }
            }
        }
    }
}

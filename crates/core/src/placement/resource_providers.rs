//! `GET /resource_providers` filtering: each filter is judged on the provider itself.

use super::ids::{AggregateId, ClassId, ProviderId, TraitId};
use super::provider_tree::ProviderIndex;
use super::query::ProvidersQuery;

/// The providers matching every filter, in tree order (roots by name, depth-first).
pub fn matching_providers(index: &ProviderIndex, q: &ProvidersQuery) -> Vec<ProviderId> {
    let f = &q.filters;
    let classes: Option<Vec<(ClassId, i64)>> = f
        .resources
        .iter()
        .map(|(c, a)| index.classes.get(c).map(|id| (id, *a)))
        .collect();
    let Some(classes) = classes else {
        return Vec::new();
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
        return Vec::new();
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
    let mut order = Vec::new();
    match &f.in_tree {
        Some(u) => {
            let Some(p) = index.names_with_uuid(u).first().and_then(|n| index.id(n)) else {
                return Vec::new();
            };
            let Some(root) = index.get(p).root else {
                return Vec::new();
            };
            index.tree(root, &mut order);
        }
        None => {
            for &r in index.roots.values() {
                index.tree(r, &mut order);
            }
        }
    }
    order
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
        .collect()
}

//! The groups a query resolves to: each request group with its names interned against the
//! index (a name the index has never seen makes the group impossible), and one group's
//! share of a candidate.

use smallvec::SmallVec;

use crate::placement::ids::{AggregateId, ClassId, ProviderId, TraitId};
use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::GroupQuery;

/// One group's request in interned form. `None` in a filter means "names something the
/// index has never seen", which no provider can satisfy.
pub(super) struct Group {
    pub(super) suffix: String,
    pub(super) same_provider: bool,
    pub(super) resources: Vec<(ClassId, i64)>,
    /// The group can match nothing (an unknown class, trait or tree).
    pub(super) impossible: bool,
    pub(super) required: Vec<Vec<TraitId>>,
    pub(super) forbidden: Vec<TraitId>,
    pub(super) member_of: Option<Vec<Vec<AggregateId>>>,
    pub(super) forbidden_aggregates: Vec<AggregateId>,
    /// The root of the tree `in_tree` names.
    pub(super) in_tree_root: Option<ProviderId>,
}

/// One group's share of a candidate, as Placement's per-group allocation requests.
#[derive(Debug, Clone, Default)]
pub(super) struct GroupPart {
    pub(super) items: SmallVec<[(ProviderId, ClassId, i64); 4]>,
    pub(super) providers: SmallVec<[ProviderId; 4]>,
}

/// The root of the tree of the provider `in_tree` names by uuid (in any case).
pub(crate) fn tree_root_of_uuid(index: &ProviderIndex, uuid: &str) -> Option<ProviderId> {
    let names = index.names_with_uuid(uuid);
    let names = if names.is_empty() {
        index.names_with_uuid(&uuid.to_ascii_lowercase())
    } else {
        names
    };
    names
        .first()
        .and_then(|n| index.id(n))
        .and_then(|p| index.get(p).root)
}

/// A request group with its names interned against the index.
pub(super) fn resolve_group(index: &ProviderIndex, q: &GroupQuery) -> Group {
    let mut impossible = false;
    let required = q
        .required
        .iter()
        .map(|any| {
            let ids: Vec<TraitId> = any.iter().filter_map(|t| index.traits.get(t)).collect();
            impossible |= ids.is_empty();
            ids
        })
        .collect();
    let member_of: Option<Vec<Vec<AggregateId>>> = (!q.member_of.is_empty()).then(|| {
        q.member_of
            .iter()
            .map(|any| {
                any.iter()
                    .filter_map(|a| index.aggregate_names.get(a))
                    .collect()
            })
            .collect()
    });
    impossible |= member_of
        .as_ref()
        .is_some_and(|m| m.iter().any(Vec::is_empty));
    let resources = q
        .resources
        .iter()
        .filter_map(|(c, a)| match index.classes.get(c) {
            Some(id) => Some((id, *a)),
            None => {
                impossible = true;
                None
            }
        })
        .collect();
    let in_tree_root = match &q.in_tree {
        None => None,
        Some(u) => match tree_root_of_uuid(index, u) {
            Some(r) => Some(r),
            None => {
                // Placement ignores in_tree for a group without resources.
                impossible |= !q.resources.is_empty();
                None
            }
        },
    };
    Group {
        suffix: q.suffix.clone(),
        same_provider: q.use_same_provider,
        resources,
        impossible,
        required,
        forbidden: q
            .forbidden
            .iter()
            .filter_map(|t| index.traits.get(t))
            .collect(),
        member_of,
        forbidden_aggregates: q
            .forbidden_aggregates
            .iter()
            .filter_map(|a| index.aggregate_names.get(a))
            .collect(),
        in_tree_root,
    }
}

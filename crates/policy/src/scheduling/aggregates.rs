//! Nova's scheduler pre-filters over Aggregates: what a placement adds to its request
//! before candidates are searched, so that Placement's own `member_of` and `root_required`
//! do the filtering (and explain, when nothing is left, says which rule lost the hosts).
//!
//! - Disabled hosts: every placement forbids `COMPUTE_STATUS_DISABLED` on the root provider
//!   (Nova's `compute_status_filter`). Cordoning a compute node is adding that trait to its
//!   root ResourceProvider.
//! - Availability zones: a Server asking for a zone is placed in the aggregates of that
//!   zone (`map_az_to_placement_aggregate`). The default zone, `nova`, is every host not in
//!   an aggregate of another zone.
//! - Tenant isolation: hosts of an aggregate with `tenants` take Servers of those
//!   namespaces only (`AggregateMultiTenancyIsolation`); with `confineTenants`, those
//!   namespaces' Servers go only to aggregates listing them
//!   (`limit_tenants_to_placement_aggregate`).
//! - Isolated aggregates: hosts of an aggregate with `requiredTraits` take only requests
//!   that require all of them (`enable_isolated_aggregate_filtering`).

use std::collections::{BTreeSet, HashMap};

use kubeplace_api::{Aggregate, Kind, Object};
use kubeplace_core::placement::request::{MemberOf, Request};
use kubeplace_core::placement::weighers::WEIGHERS;
#[cfg(doc)]
use kubeplace_core::placement::weighers::Weigher;

use crate::store::Store;

/// The zone of hosts in no aggregate with a zone (Nova's `default_availability_zone`).
pub const DEFAULT_ZONE: &str = "nova";

/// The trait of a disabled compute node, forbidden on the root of every placement.
pub const DISABLED_TRAIT: &str = "COMPUTE_STATUS_DISABLED";

/// A zone no Aggregate has, with the zones there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no Aggregate has availability zone {zone:?}; the zones are {}", .zones.join(", "))]
pub struct ZoneNotFound {
    pub zone: String,
    pub zones: Vec<String>,
}

/// Who is being placed: the Server's namespace and the zone it asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placing<'a> {
    /// The namespace (Nova's project); `None` for a flavor with no server (headroom),
    /// which no tenant-limited host takes.
    pub namespace: Option<&'a str>,
    pub zone: Option<&'a str>,
}

fn aggregates(store: &Store) -> impl Iterator<Item = &Aggregate> {
    store.list(Kind::Aggregate).filter_map(|o| match o {
        Object::Aggregate(a) => Some(a),
        _ => None,
    })
}

fn uuids<'a>(of: impl Iterator<Item = &'a Aggregate>) -> BTreeSet<String> {
    of.map(|a| a.spec.uuid.to_ascii_lowercase()).collect()
}

/// Adds the pre-filters to `request`, or says why no host can qualify.
pub fn apply(
    store: &Store,
    placing: Placing<'_>,
    request: &mut Request,
) -> Result<(), ZoneNotFound> {
    if let Some(zone) = placing.zone {
        zone_filter(store, zone, request)?;
    }
    host_filters(store, placing.namespace, request);
    Ok(())
}

/// The zone's aggregates, as a `member_of` clause; an error when no aggregate has the zone.
fn zone_filter(store: &Store, zone: &str, request: &mut Request) -> Result<(), ZoneNotFound> {
    let all: Vec<&Aggregate> = aggregates(store).collect();
    let in_zone = |a: &&Aggregate| a.spec.availability_zone.as_deref() == Some(zone);
    if zone == DEFAULT_ZONE {
        let elsewhere = uuids(all.iter().copied().filter(|a| {
            a.spec
                .availability_zone
                .as_deref()
                .is_some_and(|z| z != DEFAULT_ZONE)
        }));
        request.member_of.push(MemberOf {
            aggregates: elsewhere,
            forbidden: true,
        });
    } else if !all.iter().any(in_zone) {
        let mut zones: BTreeSet<&str> = all
            .iter()
            .filter_map(|a| a.spec.availability_zone.as_deref())
            .collect();
        zones.insert(DEFAULT_ZONE);
        return Err(ZoneNotFound {
            zone: zone.to_string(),
            zones: zones.into_iter().map(str::to_string).collect(),
        });
    } else {
        request.member_of.push(MemberOf {
            aggregates: uuids(all.iter().copied().filter(in_zone)),
            forbidden: false,
        });
    }
    Ok(())
}

/// The rules every placement follows whatever its zone: disabled hosts, hosts kept for
/// other namespaces or for requests with other traits, and a confined namespace's
/// aggregates. `namespace` is `None` for a flavor placed with no server (headroom).
pub fn host_filters(store: &Store, namespace: Option<&str>, request: &mut Request) {
    request.root_forbidden.insert(DISABLED_TRAIT.to_string());
    let all: Vec<&Aggregate> = aggregates(store).collect();
    let lists = |a: &Aggregate| namespace.is_some_and(|ns| a.spec.tenants.iter().any(|t| t == ns));
    // Hosts kept for other namespaces.
    request.member_of.push(MemberOf {
        aggregates: uuids(
            all.iter()
                .copied()
                .filter(|a| !a.spec.tenants.is_empty() && !lists(a)),
        ),
        forbidden: true,
    });
    // A namespace confined to its aggregates.
    if all.iter().any(|a| a.spec.confine_tenants && lists(a)) {
        request.member_of.push(MemberOf {
            aggregates: uuids(all.iter().copied().filter(|a| lists(a))),
            forbidden: false,
        });
    }
    // Hosts kept for requests that require traits this one does not.
    let required: BTreeSet<&str> = request
        .groups
        .values()
        .flat_map(|g| g.required.iter().map(String::as_str))
        .collect();
    let isolated = uuids(all.iter().copied().filter(|a| {
        a.spec
            .required_traits
            .iter()
            .any(|t| !required.contains(t.as_str()))
    }));
    request.member_of.push(MemberOf {
        aggregates: isolated,
        forbidden: true,
    });
}

/// Each aggregate's uuid and how a message names it: "6a1c… (zone-a, zone zone-a)".
pub fn labels(store: &Store) -> Vec<(String, String)> {
    aggregates(store)
        .map(|a| {
            let name = a.metadata.name.as_deref().unwrap_or("");
            let label = match &a.spec.availability_zone {
                Some(zone) => format!("{} ({name}, zone {zone})", a.spec.uuid),
                None => format!("{} ({name})", a.spec.uuid),
            };
            (a.spec.uuid.clone(), label)
        })
        .collect()
}

/// Each host's weigher multipliers from the aggregates it is in (root provider name to
/// overrides in [`Weigher::ALL`] order), for hosts in an aggregate that sets any. A host in
/// several takes the smallest of each, as Nova does.
pub fn weigher_overrides(store: &Store) -> HashMap<String, [Option<f64>; WEIGHERS]> {
    let mut per_host: HashMap<String, [Option<f64>; WEIGHERS]> = HashMap::new();
    for aggregate in aggregates(store) {
        let m = &aggregate.spec.weigher_multipliers;
        if m.is_empty() {
            continue;
        }
        let set = [m.spread, m.ram, m.cpu, m.disk, m.instances];
        for host in store.index().roots_in_aggregate(&aggregate.spec.uuid) {
            let row = per_host.entry(host).or_default();
            for (have, new) in row.iter_mut().zip(set) {
                *have = match (*have, new) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }
    per_host
}

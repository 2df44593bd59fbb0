//! Headroom: how many more servers of a flavor fit now, and after some hosts are drained.
//!
//! Not a division of free capacity by the flavor's size: on a copy of the store, servers
//! waiting for a host are placed first, then servers of the flavor are placed one at a
//! time with the scheduler's own choice ([`choose`]) and claimed through admission like
//! any Allocation, until one no longer fits. Nested trees, allocation ratios, reserved
//! amounts, max_unit, step sizes and the spread weighing all count exactly as they would.
//!
//! A drain (`without`) removes whole provider trees from the copy first; the servers that
//! held allocations there are placed again elsewhere before counting, as the migrations of
//! a real drain would.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::provider_name::placement_name;
use kubeplace_api::{Allocation, AllocationSpec, Kind, Object, ProviderAllocation};

use super::place::schedule_pending;
use super::plan::{Unplaceable, Weighing, choose, host};
use crate::admission::admit_and_store;
use crate::store::{ObjectKey, Store};
use crate::translate::flavor_request;

/// Servers headroom places at most by default: each costs one bounded search.
pub const DEFAULT_CAP: usize = 1000;

/// Names listed at most in an error, so a cloud of thousands gives a readable message.
const NAMES_LISTED: usize = 20;

/// A headroom question that cannot be answered as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadroomError {
    #[error("flavor {name:?} does not exist; flavors: {}", listed(.known))]
    UnknownFlavor { name: String, known: Vec<String> },
    #[error(
        "provider {name:?} (to drain) does not exist; give a ResourceProvider's name, e.g. one of: {}",
        listed(.known)
    )]
    UnknownProvider { name: String, known: Vec<String> },
    #[error("the cap must be at least 1 server, not 0")]
    ZeroCap,
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let mut out = names
        .iter()
        .take(NAMES_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_LISTED {
        out.push_str(&format!(" and {} more", names.len() - NAMES_LISTED));
    }
    out
}

/// How many more servers of a flavor fit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Headroom {
    pub flavor: String,
    /// Servers of the flavor placed before one did not fit (or the cap was reached).
    pub fits: usize,
    pub cap: usize,
    /// Whether counting stopped at the cap: at least `fits` fit.
    pub capped: bool,
    /// Why the next one did not fit (the scheduler's reason and message), unless capped.
    pub stopped_by: Option<String>,
    /// Where they were placed: tree root → servers.
    pub per_tree: BTreeMap<String, usize>,
    /// Provider trees drained (their roots).
    pub drained: Vec<String>,
    /// Servers that held allocations in the drained trees, and how many of them found
    /// no other host.
    pub displaced: usize,
    pub displaced_unplaced: usize,
    /// Servers that were waiting for a host and were placed first.
    pub pending_placed: usize,
}

/// How many more servers of `flavor` fit in the store, after draining the trees of the
/// providers in `without`, placing at most `cap`.
pub fn headroom(
    store: &Store,
    flavor: &str,
    without: &[String],
    cap: usize,
) -> Result<Headroom, HeadroomError> {
    if cap == 0 {
        return Err(HeadroomError::ZeroCap);
    }
    let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, flavor) else {
        return Err(HeadroomError::UnknownFlavor {
            name: flavor.to_string(),
            known: store
                .list(Kind::Flavor)
                .map(|o| o.name().to_string())
                .collect(),
        });
    };
    let mut request = flavor_request(f);
    // Servers of the flavor asking for no zone, from a namespace no aggregate keeps hosts for.
    super::aggregates::host_filters(store, None, &mut request);
    let mut copy = store.clone();
    let drain = drain(&mut copy, without)?;
    let placed_first = schedule_pending(&mut copy);
    let replaced: BTreeSet<&str> = placed_first
        .iter()
        .filter_map(|a| a.metadata.name.as_deref())
        .collect();
    let displaced_unplaced = drain
        .displaced
        .iter()
        .filter(|name| !replaced.contains(name.as_str()))
        .count();
    // After the drain, which takes hosts out of their aggregates.
    let weighing = Weighing::of(&copy);
    let mut per_tree: BTreeMap<String, usize> = BTreeMap::new();
    let mut fits = 0;
    let mut stopped_by = None;
    while fits < cap {
        match claim_one(&mut copy, &weighing, &request, flavor, fits) {
            Ok(root) => {
                *per_tree.entry(root).or_default() += 1;
                fits += 1;
            }
            Err(u) => {
                stopped_by = Some(format!("{}: {}", u.reason, u.message));
                break;
            }
        }
    }
    Ok(Headroom {
        flavor: flavor.to_string(),
        fits,
        cap,
        capped: stopped_by.is_none(),
        stopped_by,
        per_tree,
        drained: drain.roots,
        displaced: drain.displaced.len(),
        displaced_unplaced,
        pending_placed: placed_first.len() - (drain.displaced.len() - displaced_unplaced),
    })
}

/// The consumer of the `n`th server headroom places: a uuid no real consumer has.
fn consumer(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// Places one server of the request as the scheduler would and claims it through
/// admission; the root of the tree it landed in.
fn claim_one(
    store: &mut Store,
    weighing: &Weighing,
    request: &kubeplace_core::placement::request::Request,
    flavor: &str,
    n: usize,
) -> Result<String, Unplaceable> {
    let per_provider = choose(store.index(), weighing, request, flavor, None)?;
    let allocations: Vec<ProviderAllocation> = per_provider
        .into_iter()
        .map(|(provider, resources)| ProviderAllocation {
            provider,
            resources,
        })
        .collect();
    let root = host(store.index(), &allocations).unwrap_or_default();
    let allocation = Allocation::new(
        &format!("headroom-{n}"),
        AllocationSpec {
            consumer: consumer(n),
            allocations,
        },
    );
    let verdict = admit_and_store(store, Object::Allocation(allocation));
    if verdict.allowed {
        Ok(root)
    } else {
        Err(Unplaceable {
            reason: "ClaimRefused",
            message: verdict.message,
        })
    }
}

/// What a drain removed.
struct Drained {
    roots: Vec<String>,
    /// Allocation names of the Servers that held allocations there.
    displaced: Vec<String>,
}

/// Removes the trees of the named providers, and every Allocation on them; the Servers
/// that held those are left without, for the scheduler to place again.
fn drain(store: &mut Store, without: &[String]) -> Result<Drained, HeadroomError> {
    let providers: Vec<(String, ObjectKey)> = store
        .list(Kind::ResourceProvider)
        .filter_map(|o| match o {
            Object::ResourceProvider(rp) => Some((placement_name(rp), ObjectKey::of(o))),
            _ => None,
        })
        .collect();
    let mut roots = BTreeSet::new();
    for name in without {
        let placement = providers
            .iter()
            .find(|(p, key)| p == name || key.name == *name)
            .map(|(p, _)| p.clone());
        let root = placement.and_then(|p| store.index().root_of(&p).ok());
        let Some(root) = root else {
            return Err(HeadroomError::UnknownProvider {
                name: name.clone(),
                known: providers.iter().map(|(p, _)| p.clone()).collect(),
            });
        };
        roots.insert(root);
    }
    let in_drained =
        |store: &Store, p: &str| store.index().root_of(p).is_ok_and(|r| roots.contains(&r));
    let gone: BTreeSet<String> = providers
        .iter()
        .filter(|(p, _)| in_drained(store, p))
        .map(|(p, _)| p.clone())
        .collect();
    let allocations: Vec<(ObjectKey, bool)> = store
        .list(Kind::Allocation)
        .filter_map(|o| match o {
            Object::Allocation(a)
                if a.spec
                    .allocations
                    .iter()
                    .any(|pa| gone.contains(&pa.provider)) =>
            {
                Some((ObjectKey::of(o), held_by_server(a)))
            }
            _ => None,
        })
        .collect();
    let mut displaced = Vec::new();
    for (key, server) in allocations {
        store.delete(&key);
        if server {
            displaced.push(key.name);
        }
    }
    for (_, key) in providers.iter().filter(|(p, _)| gone.contains(p)) {
        store.delete(key);
    }
    Ok(Drained {
        roots: roots.into_iter().collect(),
        displaced,
    })
}

fn held_by_server(a: &Allocation) -> bool {
    a.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(kubeplace_api::SERVER_NAME_LABEL))
}

#[cfg(test)]
#[path = "headroom_tests.rs"]
mod tests;

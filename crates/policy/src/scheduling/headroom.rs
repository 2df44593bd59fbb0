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
//!
//! Counting every Flavor takes far longer than computing statuses, so it runs apart from
//! them: [`HeadroomFigures`] keep each Flavor's last count, which its status shows.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::provider_name::placement_name;
use kubeplace_api::{Allocation, AllocationSpec, HeadroomStatus, Kind, Object, ProviderAllocation};
use kubeplace_core::numa::guest_topology;
use kubeplace_core::placement::candidates::trees_fitting_alone;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::weighers::Weighers;

use super::place::schedule_pending;
use super::plan::{Unplaceable, Weighing, choose, host};
use crate::admission::admit_and_store;
use crate::numa::NumaJudge;
use crate::store::{ObjectKey, Store};
use crate::translate::flavor_request;

/// Servers headroom places at most by default: each costs one bounded search.
pub const DEFAULT_CAP: usize = 1000;

/// Servers a Flavor's status counts at most by default (`--headroom-cap`): enough to tell
/// "plenty" from "a few", at the cost of that many searches per Flavor and count.
pub const STATUS_CAP: usize = 100;

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
    /// The count's deadline passed before it ended: `fits` is only a lower bound.
    #[error(
        "counting ran out of its {budget_ms} ms budget after placing {fits} of at most {cap} servers; at least {fits} fit: ask again with a cap of {fits} or less"
    )]
    OutOfTime {
        fits: usize,
        cap: usize,
        budget_ms: u128,
    },
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
    /// How many of them the project asked about may still create under its quota
    /// ([`Headroom::within_quota_of`]); none when not asked, or no quota limits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_quota: Option<kubeplace_api::QuotaRoom>,
}

impl Headroom {
    /// The headroom with how many servers `project` (a namespace or Placement project id)
    /// may still create: within its quota, over the store's usage now, and within the room
    /// counted.
    pub fn within_quota_of(mut self, store: &Store, project: &str) -> Headroom {
        if let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, &self.flavor) {
            let fits = i64::try_from(self.fits).unwrap_or(i64::MAX);
            self.within_quota = quota_room(store, f, project, Some(fits));
        }
        self
    }
}

/// How many more servers of `flavor` fit in the store, after draining the trees of the
/// providers in `without`, placing at most `cap`, weighing candidates by `weighers`.
pub fn headroom(
    store: &Store,
    weighers: &Weighers,
    flavor: &str,
    without: &[String],
    cap: usize,
) -> Result<Headroom, HeadroomError> {
    headroom_of_copy(store.clone(), weighers, flavor, without, cap, None)
}

/// [`headroom`] over `copy`, a copy of the store the caller already made (and holds no
/// lock on), stopping with [`HeadroomError::OutOfTime`] once `deadline` (a start and a
/// budget) has passed, so one question cannot keep a server busy for long.
pub fn headroom_of_copy(
    mut copy: Store,
    weighers: &Weighers,
    flavor: &str,
    without: &[String],
    cap: usize,
    deadline: Option<(std::time::Instant, std::time::Duration)>,
) -> Result<Headroom, HeadroomError> {
    let store = &copy;
    if cap == 0 {
        return Err(HeadroomError::ZeroCap);
    }
    let Some(request) = headroom_request(store, flavor) else {
        return Err(HeadroomError::UnknownFlavor {
            name: flavor.to_string(),
            known: store
                .list(Kind::Flavor)
                .map(|o| o.name().to_string())
                .collect(),
        });
    };
    let drain = drain(&mut copy, without)?;
    let placed_first = schedule_pending(&mut copy, weighers);
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
    let weighing = Weighing::of(&copy, weighers);
    let counted = count(&mut copy, &weighing, flavor, &request, cap, deadline);
    if counted.out_of_time {
        return Err(HeadroomError::OutOfTime {
            fits: counted.fits,
            cap,
            budget_ms: deadline.map_or(0, |(_, budget)| budget.as_millis()),
        });
    }
    Ok(Headroom {
        flavor: flavor.to_string(),
        fits: counted.fits,
        cap,
        capped: counted.stopped_by.is_none(),
        stopped_by: counted.stopped_by,
        per_tree: counted.per_tree,
        drained: drain.roots,
        displaced: drain.displaced.len(),
        displaced_unplaced,
        pending_placed: placed_first.len() - (drain.displaced.len() - displaced_unplaced),
        within_quota: None,
    })
}

/// The request of a server of `flavor` that headroom places: one asking for no zone, from
/// a namespace no aggregate keeps hosts for. `None` for a Flavor the store does not hold.
fn headroom_request(
    store: &Store,
    flavor: &str,
) -> Option<kubeplace_core::placement::request::Request> {
    let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, flavor) else {
        return None;
    };
    let mut request = flavor_request(f);
    super::aggregates::host_filters(store, None, &mut request);
    Some(request)
}

/// What one count placed.
struct Counted {
    fits: usize,
    stopped_by: Option<String>,
    per_tree: BTreeMap<String, usize>,
    /// The Allocations it claimed, to take back.
    claimed: Vec<ObjectKey>,
    /// Whether it stopped because its deadline passed.
    out_of_time: bool,
}

/// Places servers of the request one at a time until one does not fit or `cap` did.
fn count(
    store: &mut Store,
    weighing: &Weighing,
    flavor: &str,
    request: &kubeplace_core::placement::request::Request,
    cap: usize,
    deadline: Option<(std::time::Instant, std::time::Duration)>,
) -> Counted {
    let mut counted = Counted {
        fits: 0,
        stopped_by: None,
        per_tree: BTreeMap::new(),
        claimed: Vec::new(),
        out_of_time: false,
    };
    while counted.fits < cap {
        if deadline.is_some_and(|(start, budget)| start.elapsed() >= budget) {
            counted.out_of_time = true;
            break;
        }
        match claim_one(store, weighing, request, flavor, counted.fits) {
            Ok((root, key)) => {
                *counted.per_tree.entry(root).or_default() += 1;
                counted.claimed.push(key);
                counted.fits += 1;
            }
            Err(u) => {
                counted.stopped_by = Some(format!("{}: {}", u.reason, u.message));
                break;
            }
        }
    }
    counted
}

/// Every Flavor's headroom over one copy of the store: the copy is made, and the servers
/// waiting for a host placed in it, once; each Flavor's count is then taken back before
/// the next, so every Flavor is counted against the same cloud.
pub struct HeadroomRound {
    copy: Store,
    weighing: Weighing,
}

impl HeadroomRound {
    /// A round over the store as it is now, weighing candidates by `weighers`.
    pub fn new(store: &Store, weighers: &Weighers) -> HeadroomRound {
        // A cloud without Flavors has nothing to count: it is not copied.
        let mut copy = if store.list(Kind::Flavor).next().is_some() {
            store.clone()
        } else {
            Store::default()
        };
        schedule_pending(&mut copy, weighers);
        let weighing = Weighing::of(&copy, weighers);
        HeadroomRound { copy, weighing }
    }

    /// The Flavors of the store the round was made from, in name order.
    pub fn flavors(&self) -> Vec<String> {
        self.copy
            .list(Kind::Flavor)
            .map(|o| o.name().to_string())
            .collect()
    }

    /// A Flavor's headroom, placing at most `cap` servers; `None` for a Flavor the store
    /// does not hold (or a cap of 0).
    pub fn count(&mut self, flavor: &str, cap: usize) -> Option<HeadroomStatus> {
        if cap == 0 {
            return None;
        }
        let request = headroom_request(&self.copy, flavor)?;
        // A tree that can take a server by Placement's counts may not fit its NUMA cells:
        // a flavor with a NUMA topology is counted by placing.
        if !has_numa_topology(&self.copy, flavor) && trees_each_take_one(&self.copy, &request, cap)
        {
            return Some(HeadroomStatus {
                servers: i64::try_from(cap).unwrap_or(i64::MAX),
                capped: true,
                stopped_by: None,
                within_quota: Vec::new(),
            });
        }
        let counted = count(&mut self.copy, &self.weighing, flavor, &request, cap, None);
        for key in &counted.claimed {
            self.copy.delete(key);
        }
        Some(HeadroomStatus {
            servers: i64::try_from(counted.fits).unwrap_or(i64::MAX),
            capped: counted.stopped_by.is_none(),
            stopped_by: counted
                .stopped_by
                .map(|s| kubeplace_core::text::truncated(&s, STOPPED_BY_MAX)),
            within_quota: Vec::new(),
        })
    }
}

/// Whether the flavor (booted from an image that says nothing) makes a guest with a NUMA
/// topology, which the scheduler fits on each host's cells.
fn has_numa_topology(store: &Store, flavor: &str) -> bool {
    let no_image = BTreeMap::new();
    match store.get_cluster(Kind::Flavor, flavor) {
        Some(Object::Flavor(f)) => {
            matches!(
                guest_topology(crate::translate::guest_source(f, &no_image)),
                Ok(Some(_))
            )
        }
        _ => false,
    }
}

/// Whether `cap` servers of the request surely fit without placing them: at least `cap`
/// trees can each take one on unshared providers of their own. Each such tree keeps its
/// room until a server lands in it, whatever lands elsewhere, so each of `cap` servers
/// placed one at a time still finds a candidate, and the scheduler places every server
/// that has one (headroom's servers belong to no server group). In a large cloud this
/// answers most Flavors with one short search instead of `cap` searches and claims.
fn trees_each_take_one(
    store: &Store,
    request: &kubeplace_core::placement::request::Request,
    cap: usize,
) -> bool {
    let Ok(query) = parse_candidates_query(&request.to_query(), Microversion::LATEST) else {
        // Counted the long way, which says what is wrong with the request.
        return false;
    };
    trees_fitting_alone(store.index(), &query, cap) >= cap
}

/// Longest reason a Flavor's status gives for the next server not fitting.
const STOPPED_BY_MAX: usize = 512;

/// Counts every Flavor's headroom in `store` (at most `cap` servers each, weighing
/// candidates by `weighers`) and records it in `figures`, as `kubeplace apply` does before
/// it computes statuses.
pub fn record_headroom(
    figures: &mut HeadroomFigures,
    store: &Store,
    weighers: &Weighers,
    cap: usize,
) {
    let mut round = HeadroomRound::new(store, weighers);
    for flavor in round.flavors() {
        let h = round.count(&flavor, cap);
        figures.set(&flavor, h);
    }
    figures.forget_deleted_flavors(store);
}

/// Every Flavor's headroom as last counted, which its status shows: counted apart from the
/// statuses, so a status pass never waits for a count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadroomFigures {
    /// Per Flavor, its headroom as last counted.
    counted: BTreeMap<String, HeadroomStatus>,
    /// Nobody counts headroom (`--headroom-cap 0`): statuses show none.
    off: bool,
}

impl HeadroomFigures {
    /// A Flavor's headroom as last counted. Before its first count, the headroom its
    /// status in `store` already shows (written by an earlier leader), so that a new
    /// leader's first pass does not take it away only to write it back a round later.
    pub fn of<'a>(&'a self, flavor: &str, store: &'a Store) -> Option<&'a HeadroomStatus> {
        if self.off {
            return None;
        }
        self.counted
            .get(flavor)
            .or_else(|| match store.get_cluster(Kind::Flavor, flavor) {
                Some(Object::Flavor(f)) => f.status.as_ref()?.headroom.as_ref(),
                _ => None,
            })
    }

    /// Says that nobody counts headroom: Flavor statuses show none.
    pub fn turn_off(&mut self) {
        self.off = true;
        self.counted.clear();
    }

    /// Records a Flavor's headroom (or forgets it); whether that changed what was recorded.
    pub fn set(&mut self, flavor: &str, headroom: Option<HeadroomStatus>) -> bool {
        match headroom {
            Some(h) if self.counted.get(flavor) == Some(&h) => false,
            Some(h) => {
                self.counted.insert(flavor.to_string(), h);
                true
            }
            None => self.counted.remove(flavor).is_some(),
        }
    }

    /// Forgets the headroom of Flavors no longer in `store`.
    pub fn forget_deleted_flavors(&mut self, store: &Store) {
        self.counted
            .retain(|name, _| store.get_cluster(Kind::Flavor, name).is_some());
    }
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
) -> Result<(String, ObjectKey), Unplaceable> {
    let name = format!("headroom-{n}");
    let chosen = {
        // A flavor with a NUMA topology counts on the hosts its cells fit, with the cells,
        // CPUs and pages the servers before it took.
        let flavor_object = match store.get_cluster(Kind::Flavor, flavor) {
            Some(Object::Flavor(f)) => Some(f.clone()),
            _ => None,
        };
        let mut judge = flavor_object
            .as_ref()
            .and_then(|f| NumaJudge::new(store, f, None, &name).ok().flatten());
        choose(
            store.index(),
            weighing,
            request,
            flavor,
            None,
            judge.as_mut(),
        )?
    };
    let allocations: Vec<ProviderAllocation> = chosen
        .per_provider
        .into_iter()
        .map(|(provider, resources)| ProviderAllocation {
            provider,
            resources,
        })
        .collect();
    let root = host(store.index(), &allocations).unwrap_or_default();
    let allocation = Allocation::new(
        &name,
        AllocationSpec {
            numa: chosen.numa,
            consumer: consumer(n),
            allocations,
        },
    );
    let allocation = Object::Allocation(allocation);
    let key = ObjectKey::of(&allocation);
    let verdict = admit_and_store(store, allocation);
    if verdict.allowed {
        Ok((root, key))
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
mod tests;

/// Quota rooms a Flavor's status lists at most.
pub const QUOTA_ROOMS_MAX: usize = 20;

/// What one server of a flavor charges its project: the flavor's request, every group
/// summed, and one server.
fn flavor_charge(f: &kubeplace_api::Flavor) -> kubeplace_core::quota::Usage {
    let mut each = kubeplace_core::quota::Usage {
        servers: 1,
        ..Default::default()
    };
    for group in flavor_request(f).groups.values() {
        for (class, n) in &group.resources {
            *each.resources.entry(class.clone()).or_insert(0) += n;
        }
    }
    each
}

/// How many more servers of `flavor` a project's quota allows, no more than `fits` (the
/// cloud's room) when given; none when no quota limits the project.
pub fn quota_room(
    store: &Store,
    flavor: &kubeplace_api::Flavor,
    project: &str,
    fits: Option<i64>,
) -> Option<kubeplace_api::QuotaRoom> {
    let (servers, key, quota) =
        crate::quota::headroom_within(store, project, &flavor_charge(flavor))?;
    Some(kubeplace_api::QuotaRoom {
        project: project.to_string(),
        quota,
        servers: fits.map_or(servers, |fits| servers.min(fits)),
        limited_by: key.to_string(),
    })
}

/// [`quota_room`] for the namespace of each ProjectQuota, at most [`QUOTA_ROOMS_MAX`].
pub fn quota_rooms(
    store: &Store,
    flavor: &kubeplace_api::Flavor,
    fits: Option<i64>,
) -> Vec<kubeplace_api::QuotaRoom> {
    store
        .list(Kind::ProjectQuota)
        .filter_map(|o| o.meta().namespace.as_deref())
        .collect::<BTreeSet<&str>>()
        .into_iter()
        .filter_map(|namespace| quota_room(store, flavor, namespace, fits))
        .take(QUOTA_ROOMS_MAX)
        .collect()
}

//! Scheduling a server: the request from its flavor and image, one candidate picked by a
//! documented weighing, and the Allocation that holds it.
//!
//! Weighing ([`Weighers`], the operator's setting, which every caller passes): by default
//! it spreads load: for every (provider, class) a candidate uses, the share of the
//! provider's capacity still free after the allocation is computed, and a candidate scores
//! the smallest of those shares. The ram, cpu and disk weighers score the free amount of
//! their class on the candidate's host tree, as Nova's do. Scores are normalized over the
//! candidates, multiplied and summed; the highest sum wins. A server group's soft policy
//! comes before the weighing. Ties go to the candidate whose provider names sort first, so
//! the same store and weighers always give the same choice.
//!
//! As Nova's scheduler does (`max_placement_results`), the search asks for at most
//! [`MAX_PLACEMENT_RESULTS`] candidates, so a flavor with astronomically many (several
//! isolated groups over wide device trees) is placed as fast as one with few.

use std::collections::{BTreeMap, HashMap};

use crate::store::Store;
use kubeplace_api::{
    Allocation, AllocationSpec, Flavor, Image, Object, ProviderAllocation, Server,
};
use kubeplace_core::placement::ProviderIndex;
use kubeplace_core::placement::candidates::try_allocation_candidates;
use kubeplace_core::placement::explain::explain;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::request::{Request, TraitConflict};
use kubeplace_core::placement::weighers::{WEIGHERS, Weigher, Weighers, weigh_each};

use super::aggregates::Placing;
use super::server_groups::{Members, host_of};
use crate::numa::NumaJudge;
use crate::translate::server_request;
use kubeplace_api::Kind;
use kubeplace_api::NumaClaim;
use kubeplace_api::{ServerRef, allocation_name, consumer_uuid};

/// Candidates the scheduler weighs at most: Nova's default `max_placement_results`.
pub const MAX_PLACEMENT_RESULTS: usize = 1000;

/// Reasons a NoValidHost message gives at most (the largest losses of provider trees).
pub const EXPLAIN_LINES: usize = 3;

/// Why a server cannot be placed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaceable {
    /// `FlavorNotFound`, `ImageNotFound`, `TraitConflict`, `InvalidRequest`,
    /// `SearchBudgetExhausted` (the search ran out of work before finding a candidate) or
    /// `NoValidHost`.
    pub reason: &'static str,
    pub message: String,
}

/// The server's flavor and image, or why one is missing.
pub(crate) fn flavor_and_image<'a>(
    store: &'a Store,
    server: &Server,
) -> Result<(&'a Flavor, &'a Image), Unplaceable> {
    let flavor = match store.get_cluster(Kind::Flavor, &server.spec.flavor) {
        Some(Object::Flavor(f)) => f,
        _ => {
            return Err(Unplaceable {
                reason: "FlavorNotFound",
                message: format!("Flavor {:?} does not exist", server.spec.flavor),
            });
        }
    };
    let image = match store.get_cluster(Kind::Image, &server.spec.image) {
        Some(Object::Image(i)) => i,
        _ => {
            return Err(Unplaceable {
                reason: "ImageNotFound",
                message: format!("Image {:?} does not exist", server.spec.image),
            });
        }
    };
    Ok((flavor, image))
}

/// An explanation with each aggregate uuid followed by its Aggregate's name, so that a
/// NoValidHost says "outside member_of 6a1c… (zone-a, zone zone-a)". The query before the
/// explanation is left as the search read it.
fn with_aggregate_names(store: &Store, mut u: Unplaceable) -> Unplaceable {
    let Some((query, why)) = u.message.split_once("): ") else {
        return u;
    };
    let mut why = why.to_string();
    for (uuid, label) in super::aggregates::labels(store) {
        why = why.replace(&uuid, &label);
    }
    u.message = format!("{query}): {why}");
    u
}

/// Picks a candidate for the server and returns the Allocation to create (or replace).
/// The server's own current allocation, if any, is not counted as usage (a resize may stay
/// where it is). `weighers` says how candidates are weighed.
pub fn plan(
    store: &Store,
    weighers: &Weighers,
    server: &Server,
) -> Result<Allocation, Unplaceable> {
    plan_weighed(store, server, &Weighing::of(store, weighers))
}

/// [`plan`] with the weighing computed once by the caller: it depends on the Aggregates
/// and the weighers only, which placing servers one after another does not change.
pub(crate) fn plan_weighed(
    store: &Store,
    server: &Server,
    weighing: &Weighing,
) -> Result<Allocation, Unplaceable> {
    let (flavor, image) = flavor_and_image(store, server)?;
    let mut request = server_request(flavor, image).map_err(|TraitConflict(t)| Unplaceable {
        reason: "TraitConflict",
        message: format!(
            "flavor {:?} forbids {t}, which image {:?} requires",
            server.spec.flavor, server.spec.image
        ),
    })?;
    let placing = Placing {
        namespace: Some(server.metadata.namespace.as_deref().unwrap_or("default")),
        zone: server.spec.availability_zone.as_deref(),
    };
    super::aggregates::apply(store, placing, &mut request).map_err(|e| Unplaceable {
        reason: "AvailabilityZoneNotFound",
        message: e.to_string(),
    })?;
    let name = allocation_name(server);
    let owned;
    let index: &ProviderIndex = if store.index().allocations(&name).is_some() {
        let mut without = store.index().clone();
        without.remove_allocations(&name);
        owned = without;
        &owned
    } else {
        store.index()
    };
    let members = super::server_groups::members(store, server).map_err(|e| Unplaceable {
        reason: "ServerGroupNotFound",
        message: e.to_string(),
    })?;
    if let Some(host) = members.as_ref().and_then(|m| m.affinity_host()) {
        request.in_tree = index.provider(host).map(|r| r.uuid);
    }
    let mut numa = NumaJudge::new(store, flavor, Some(image), &name).map_err(|e| Unplaceable {
        reason: "InvalidRequest",
        message: format!(
            "flavor {:?} with image {:?} makes no guest Nova would boot: {e}",
            server.spec.flavor, server.spec.image
        ),
    })?;
    let chosen = choose(
        index,
        weighing,
        &request,
        &server.spec.flavor,
        members.as_ref(),
        numa.as_mut(),
    )
    .map_err(|u| with_aggregate_names(store, u))?;
    let mut allocation = Allocation::new(
        &name,
        AllocationSpec {
            numa: chosen.numa,
            consumer: consumer_uuid(server),
            allocations: chosen
                .per_provider
                .into_iter()
                .map(|(provider, resources)| ProviderAllocation {
                    provider,
                    resources,
                })
                .collect(),
        },
    );
    let who = ServerRef::of(server);
    allocation.metadata.labels = Some(
        [
            (
                kubeplace_api::SERVER_NAMESPACE_LABEL.to_string(),
                who.namespace,
            ),
            (kubeplace_api::SERVER_NAME_LABEL.to_string(), who.name),
        ]
        .into(),
    );
    // A server over its project's quota waits as one without a host does.
    let charge = crate::quota::charge_of(&allocation);
    let current = [store.charges().of_claim(&name)];
    crate::quota::check_claim(store, &Default::default(), &name, &current, charge.as_ref())
        .map_err(|refusal| Unplaceable {
            reason: "QuotaExceeded",
            message: refusal.to_string(),
        })?;
    Ok(allocation)
}

/// What the scheduler chose: amounts per provider and class, and for a guest with a NUMA
/// topology its cells, CPUs and pages on the chosen host.
pub(crate) struct Chosen {
    pub per_provider: BTreeMap<String, BTreeMap<String, i64>>,
    pub numa: Option<NumaClaim>,
}

/// What the scheduler chooses for a request over the index: the best weighed of at most
/// [`MAX_PLACEMENT_RESULTS`] candidates, as amounts per provider and class; with `numa`,
/// only candidates on hosts the guest's NUMA topology fits, their amounts on the cells it
/// fits. `flavor` names the request in messages.
pub(crate) fn choose(
    index: &ProviderIndex,
    weighing: &Weighing,
    request: &Request,
    flavor: &str,
    members: Option<&Members>,
    mut numa: Option<&mut NumaJudge<'_>>,
) -> Result<Chosen, Unplaceable> {
    let query_string = format!("{}&limit={MAX_PLACEMENT_RESULTS}", request.to_query());
    let query =
        parse_candidates_query(&query_string, Microversion::LATEST).map_err(|e| Unplaceable {
            reason: "InvalidRequest",
            message: e.detail,
        })?;
    let budget = |e: kubeplace_core::placement::candidates::BudgetExhausted| Unplaceable {
        reason: "SearchBudgetExhausted",
        message: format!("placing {flavor}: {e}"),
    };
    let set = try_allocation_candidates(index, &query).map_err(budget)?;
    if set.candidates.is_empty()
        && let Some(e) = set.exhausted
    {
        return Err(budget(e));
    }
    let mut refused_hosts: Vec<String> = Vec::new();
    let mut numa_refused: BTreeMap<String, String> = BTreeMap::new();
    let mut free_on_host = HashMap::new();
    let mut instances: Option<HashMap<String, usize>> = None;
    let mut weighed: Vec<_> = set
        .candidates
        .iter()
        .filter_map(|c| {
            let mut named = set.named(index, c);
            let host = host_of(index, named.iter().map(|(p, _, _)| p.as_str())).unwrap_or_default();
            if let Some(m) = members
                && !m.allows(&host)
            {
                refused_hosts.push(host);
                return None;
            }
            let cells = match numa.as_deref_mut().map(|j| j.fit(index, &host, &mut named)) {
                None => None,
                Some(Ok(claim)) => Some(claim),
                Some(Err(why)) => {
                    numa_refused.entry(host).or_insert(why);
                    return None;
                }
            };
            let preference = members.map_or(0, |m| m.preference(&host));
            let multipliers = weighing.multipliers(&host);
            let mut raw = [0.0; WEIGHERS];
            for weigher in weighing.weighers_used() {
                raw[weigher.column()] = match (weigher, weigher.resource_class()) {
                    (Weigher::Instances, _) => {
                        let per_host = instances.get_or_insert_with(|| instances_per_host(index));
                        per_host.get(host.as_str()).copied().unwrap_or(0) as f64
                    }
                    (_, None) => spread(index, &named),
                    (_, Some(class)) => *free_on_host
                        .entry((host.clone(), class))
                        .or_insert_with(|| index.free_in_tree(&host, class) as f64),
                };
            }
            let mut providers: Vec<String> = named.iter().map(|(p, _, _)| p.clone()).collect();
            providers.sort();
            providers.dedup();
            Some((preference, (raw, multipliers), providers, (named, cells)))
        })
        .collect();
    let raw: Vec<[f64; WEIGHERS]> = weighed.iter().map(|w| w.1.0).collect();
    let multipliers: Vec<[f64; WEIGHERS]> = weighed.iter().map(|w| w.1.1).collect();
    let weights = weigh_each(&raw, &multipliers);
    let best = (0..weighed.len()).max_by(|&a, &b| {
        let (a_, b_) = (&weighed[a], &weighed[b]);
        a_.0.cmp(&b_.0)
            .then_with(|| weights[a].total_cmp(&weights[b]))
            .then_with(|| b_.2.cmp(&a_.2))
    });
    let best = best.map(|i| weighed.swap_remove(i));
    if best.is_none()
        && !refused_hosts.is_empty()
        && let Some(m) = members
    {
        refused_hosts.sort();
        refused_hosts.dedup();
        return Err(Unplaceable {
            reason: "NoValidHost",
            message: format!(
                "every candidate for {flavor} is on a host that server group {} rules out: {}",
                m.describe(),
                refused_hosts.join(", ")
            ),
        });
    }
    if best.is_none() && !numa_refused.is_empty() {
        let why: Vec<String> = numa_refused
            .iter()
            .take(EXPLAIN_LINES)
            .map(|(host, why)| format!("{host}: {why}"))
            .collect();
        let more = numa_refused.len().saturating_sub(EXPLAIN_LINES);
        return Err(Unplaceable {
            reason: "NoValidHost",
            message: format!(
                "no host's NUMA cells fit {flavor} ({} of {} candidate hosts refused): {}{}",
                numa_refused.len(),
                numa_refused.len() + refused_hosts.len(),
                why.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ),
        });
    }
    let Some((_, _, _, (named, cells))) = best else {
        // Why, in the few lines that matter most: a bounded status and Event, not a log.
        let why = explain(index, &query).summary(EXPLAIN_LINES);
        return Err(Unplaceable {
            reason: "NoValidHost",
            message: format!(
                "no provider tree can host {} ({}): {}",
                flavor,
                request.to_query(),
                why.join("; ")
            ),
        });
    };
    let mut per_provider: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (p, class, amount) in named {
        *per_provider.entry(p).or_default().entry(class).or_default() += amount;
    }
    Ok(Chosen {
        per_provider,
        numa: cells,
    })
}

/// How candidates are weighed: the operator's weighers, and the multipliers of hosts
/// whose aggregates set their own.
pub(crate) struct Weighing {
    weighers: Weighers,
    per_host: HashMap<String, [Option<f64>; WEIGHERS]>,
}

impl Weighing {
    /// The weighing of `weighers` over the store's aggregates.
    pub(crate) fn of(store: &Store, weighers: &Weighers) -> Weighing {
        Weighing {
            weighers: weighers.clone(),
            per_host: super::aggregates::weigher_overrides(store),
        }
    }

    /// A host's multipliers, in [`Weigher::ALL`] order.
    fn multipliers(&self, host: &str) -> [f64; WEIGHERS] {
        self.weighers
            .overridden(self.per_host.get(host).copied().unwrap_or_default())
    }

    /// The weighers with a nonzero multiplier for some host: only their raw values are
    /// worth computing.
    fn weighers_used(&self) -> Vec<Weigher> {
        Weigher::ALL
            .into_iter()
            .filter(|w| {
                self.weighers.multiplier(*w) != 0.0
                    || self
                        .per_host
                        .values()
                        .any(|o| o[w.column()].is_some_and(|m| m != 0.0))
            })
            .collect()
    }
}

/// The spread weigher's raw value: the smallest share of capacity a candidate leaves free
/// on any provider and class it uses.
fn spread(index: &ProviderIndex, named: &[(String, String, i64)]) -> f64 {
    named
        .iter()
        .map(|(p, class, amount)| {
            let inv = index
                .inventory(p, class)
                .expect("candidates use existing inventories");
            let capacity = inv.capacity().max(1) as f64;
            (capacity - (index.used(p, class) + amount) as f64) / capacity
        })
        .fold(f64::INFINITY, f64::min)
}

/// Each host's instances, as Nova's NumInstancesWeigher counts them: the consumers holding
/// allocations in the host's tree (a consumer counts on the host of its allocations, not on
/// a sharing provider it borrows from). Counted over the index once per choice, and only
/// when the instances weigher is in use.
fn instances_per_host(index: &ProviderIndex) -> HashMap<String, usize> {
    let mut per_host: HashMap<String, usize> = HashMap::new();
    for consumer in index.consumers() {
        let providers = consumer.items.iter().map(|(p, _, _)| p.as_str());
        if let Some(host) = host_of(index, providers) {
            *per_host.entry(host).or_default() += 1;
        }
    }
    per_host
}

/// The tree a server runs in: the root of a provider it holds, preferring providers that
/// are not sharing providers it borrows from.
pub(crate) fn host(index: &ProviderIndex, held: &[ProviderAllocation]) -> Option<String> {
    host_of(index, held.iter().map(|pa| pa.provider.as_str()))
}

/// Whether the server's current Allocation still matches what its flavor asks (per class
/// totals); a changed flavor means the server must be placed again.
pub(crate) fn allocation_matches(store: &Store, server: &Server) -> Option<bool> {
    let Some(Object::Allocation(current)) =
        store.get_cluster(Kind::Allocation, &allocation_name(server))
    else {
        return None;
    };
    let Ok((flavor, image)) = flavor_and_image(store, server) else {
        return Some(true);
    };
    let Ok(request) = server_request(flavor, image) else {
        return Some(true);
    };
    let mut wanted: BTreeMap<&str, i64> = BTreeMap::new();
    for g in request.groups.values() {
        for (c, n) in &g.resources {
            *wanted.entry(c.as_str()).or_default() += n;
        }
    }
    let mut held: BTreeMap<&str, i64> = BTreeMap::new();
    for pa in &current.spec.allocations {
        for (c, n) in &pa.resources {
            *held.entry(c.as_str()).or_default() += n;
        }
    }
    Some(wanted == held)
}

#[cfg(test)]
mod weighing_tests;

//! Capacity at a glance, as the operator's metrics and `kubeplace top` show it: what each
//! host (a provider tree) or each provider has and uses per resource class, the same per
//! availability zone, each Flavor's headroom and candidates, and each project against its
//! quota. Plain figures read from a store; the statuses they read (headroom, quota usage)
//! are those the reconcile wrote.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::Inventory;
use kubeplace_core::placement::provider_tree::ProviderFigures;

use crate::scheduling::aggregates::DEFAULT_ZONE;
use crate::store::Store;

/// One class's figures on a provider, or summed over several.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Amounts {
    /// The inventories' totals.
    pub total: i64,
    /// What they keep back.
    pub reserved: i64,
    /// What claims may take: `(total - reserved) * allocation_ratio`, truncated per
    /// inventory as Placement does, then summed.
    pub capacity: i64,
    /// What claims hold.
    pub used: i64,
    /// The allocation ratio: an inventory's own, or for a sum the one that gives the sum's
    /// capacity, `capacity / (total - reserved)` (the same as each part's when they agree).
    pub allocation_ratio: f64,
}

impl Amounts {
    /// One inventory and what is used of it.
    pub fn of(inventory: &Inventory, used: i64) -> Amounts {
        Amounts {
            total: inventory.total,
            reserved: inventory.reserved,
            capacity: inventory.capacity(),
            used,
            allocation_ratio: inventory.allocation_ratio,
        }
    }

    /// Adds another's figures to these.
    pub fn add(&mut self, other: &Amounts) {
        let first = self.total == 0 && self.reserved == 0 && self.capacity == 0;
        self.total = self.total.saturating_add(other.total);
        self.reserved = self.reserved.saturating_add(other.reserved);
        self.capacity = self.capacity.saturating_add(other.capacity);
        self.used = self.used.saturating_add(other.used);
        let usable = self.total.saturating_sub(self.reserved);
        self.allocation_ratio = if first {
            other.allocation_ratio
        } else if usable > 0 {
            self.capacity as f64 / usable as f64
        } else {
            self.allocation_ratio
        };
    }

    /// The share of the capacity in use: 0 for none, 1 for full, above 1 when claims hold
    /// more than the capacity (an inventory shrunk under them). 0 without capacity and use.
    pub fn used_fraction(&self) -> f64 {
        match (self.capacity, self.used) {
            (_, u) if u <= 0 => 0.0,
            (c, _) if c <= 0 => f64::INFINITY,
            (c, u) => u as f64 / c as f64,
        }
    }

    /// What claims may still take.
    pub fn free(&self) -> i64 {
        self.capacity.saturating_sub(self.used).max(0)
    }
}

/// What figures are gathered per: each tree (a host, named by its root), or each provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One entry per root provider: its whole tree's inventories summed by class (a
    /// compute node's NUMA cells and devices with it).
    Trees,
    /// One entry per provider, its own inventories: as Placement lists providers.
    Providers,
}

/// A host (a tree) or a provider and its figures by class.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// The object's name (the root's, for a tree).
    pub name: String,
    /// The name Placement shows.
    pub shown_name: String,
    /// The availability zone of its tree's root.
    pub zone: String,
    /// By resource class.
    pub classes: BTreeMap<String, Amounts>,
}

/// The hosts (or providers) of the store, in the order of the names Placement shows.
/// Providers outside a well-formed tree (a parent missing, a cycle) are left out: no claim
/// can be placed on them.
pub fn hosts(store: &Store, scope: Scope) -> Vec<Host> {
    let (trees, providers) = walk(store, scope == Scope::Providers);
    match scope {
        Scope::Trees => trees,
        Scope::Providers => providers,
    }
}

/// [`hosts`] of both scopes, from one walk over the providers: trees, then providers.
pub fn trees_and_providers(store: &Store) -> (Vec<Host>, Vec<Host>) {
    walk(store, true)
}

/// The trees, and the providers too when `providers` (else none), each sorted by the name
/// Placement shows.
fn walk(store: &Store, providers: bool) -> (Vec<Host>, Vec<Host>) {
    let index = store.index();
    let zones = Zones::read(store);
    // Each root's zone first: a tree's providers share it.
    let mut root_zone: HashMap<&str, String> = HashMap::new();
    let all: Vec<ProviderFigures<'_>> = index.figures().filter(|f| f.root.is_some()).collect();
    for f in all.iter().filter(|f| f.is_root()) {
        root_zone.insert(f.name, zones.zone(&f.aggregates));
    }
    let zone_of = |f: &ProviderFigures<'_>| {
        f.root
            .and_then(|r| root_zone.get(r).cloned())
            .unwrap_or_else(|| DEFAULT_ZONE.to_string())
    };
    let host = |f: &ProviderFigures<'_>| Host {
        name: f.name.to_string(),
        shown_name: f.shown_name.to_string(),
        zone: zone_of(f),
        classes: BTreeMap::new(),
    };
    let mut trees: HashMap<&str, Host> = all
        .iter()
        .filter(|f| f.is_root())
        .map(|f| (f.name, host(f)))
        .collect();
    let mut own: Vec<Host> = Vec::new();
    for f in &all {
        let amounts: Vec<(String, Amounts)> = f
            .classes
            .iter()
            .map(|c| (c.class.to_string(), Amounts::of(c.inventory, c.used)))
            .collect();
        if let Some(tree) = f.root.and_then(|r| trees.get_mut(r)) {
            for (class, a) in &amounts {
                tree.classes.entry(class.clone()).or_default().add(a);
            }
        }
        if providers {
            own.push(Host {
                classes: amounts.into_iter().collect(),
                ..host(f)
            });
        }
    }
    let by_shown = |a: &Host, b: &Host| a.shown_name.cmp(&b.shown_name).then(a.name.cmp(&b.name));
    let mut trees: Vec<Host> = trees.into_values().collect();
    trees.sort_by(by_shown);
    own.sort_by(by_shown);
    (trees, own)
}

impl Host {
    /// The share it is ranked by: of `class`, or the largest of any class.
    pub fn share(&self, class: Option<&str>) -> Option<f64> {
        match class {
            Some(c) => self.classes.get(c).map(Amounts::used_fraction),
            None => self
                .classes
                .values()
                .map(Amounts::used_fraction)
                .max_by(f64::total_cmp),
        }
    }
}

/// A host and the share it was ranked by ([`Host::share`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub share: Option<f64>,
    pub host: Host,
}

/// No host has inventory of the class hosts were to be ranked by.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no host has inventory of {class}; the classes of this cloud are {}", if .known.is_empty() { "none (it has no inventory)".to_string() } else { .known.join(", ") })]
pub struct NoSuchClass {
    pub class: String,
    /// The classes some host has, by name.
    pub known: Vec<String>,
}

/// Hosts, the most used first (by shown name among equals): by the share of `class`, only
/// those with it; without it, by the largest share of any class.
pub fn rank_hosts(hosts: Vec<Host>, class: Option<&str>) -> Result<Vec<Ranked>, NoSuchClass> {
    if let Some(c) = class
        && !hosts.iter().any(|h| h.classes.contains_key(c))
    {
        let known: std::collections::BTreeSet<&String> =
            hosts.iter().flat_map(|h| h.classes.keys()).collect();
        return Err(NoSuchClass {
            class: c.to_string(),
            known: known.into_iter().cloned().collect(),
        });
    }
    let mut ranked: Vec<Ranked> = hosts
        .into_iter()
        .filter(|h| class.is_none_or(|c| h.classes.contains_key(c)))
        .map(|host| Ranked {
            share: host.share(class),
            host,
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.share
            .unwrap_or(0.0)
            .total_cmp(&a.share.unwrap_or(0.0))
            .then_with(|| a.host.shown_name.cmp(&b.host.shown_name))
    });
    Ok(ranked)
}

/// Each zone's figures by class, summed over its hosts: (zone, class) → figures.
pub fn zones(hosts: &[Host]) -> BTreeMap<(String, String), Amounts> {
    let mut out: BTreeMap<(String, String), Amounts> = BTreeMap::new();
    for host in hosts {
        for (class, amounts) in &host.classes {
            out.entry((host.zone.clone(), class.clone()))
                .or_default()
                .add(amounts);
        }
    }
    out
}

/// Availability zones by aggregate uuid, from the Aggregates that name one.
struct Zones(HashMap<String, String>);

impl Zones {
    fn read(store: &Store) -> Zones {
        let mut by_uuid = HashMap::new();
        for object in store.list(Kind::Aggregate) {
            if let Object::Aggregate(a) = object
                && let Some(zone) = &a.spec.availability_zone
            {
                by_uuid.insert(a.spec.uuid.to_ascii_lowercase(), zone.clone());
            }
        }
        Zones(by_uuid)
    }

    /// The zone of a host in these aggregates: the first by name of their zones (Nova keeps
    /// a host in one zone), or the default zone.
    fn zone(&self, aggregates: &[&str]) -> String {
        aggregates
            .iter()
            .filter_map(|a| self.0.get(&a.to_ascii_lowercase()))
            .min()
            .cloned()
            .unwrap_or_else(|| DEFAULT_ZONE.to_string())
    }
}

/// A Flavor's room, as its status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlavorRoom {
    pub name: String,
    /// Servers of it that still fit, when counted.
    pub headroom: Option<i64>,
    /// Counting stopped at the cap: at least `headroom` fit.
    pub capped: bool,
    /// Why one more would not fit.
    pub stopped_by: Option<String>,
    /// Its allocation candidates.
    pub candidates: Option<i64>,
}

/// Every Flavor's room: the fewest servers that still fit first (not counted last), then
/// by name.
pub fn flavors(store: &Store) -> Vec<FlavorRoom> {
    let mut out: Vec<FlavorRoom> = store
        .list(Kind::Flavor)
        .filter_map(|o| match o {
            Object::Flavor(f) => Some(f),
            _ => None,
        })
        .map(|f| {
            let status = f.status.as_ref();
            let headroom = status.and_then(|s| s.headroom.as_ref());
            FlavorRoom {
                name: f.metadata.name.clone().unwrap_or_default(),
                headroom: headroom.map(|h| h.servers),
                capped: headroom.is_some_and(|h| h.capped),
                stopped_by: headroom.and_then(|h| h.stopped_by.clone()),
                candidates: status.and_then(|s| s.candidate_count),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        let key = |f: &FlavorRoom| (f.headroom.is_none(), f.headroom, f.capped);
        key(a).cmp(&key(b)).then(a.name.cmp(&b.name))
    });
    out
}

/// One limit of a project's quota and what is charged against it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectUse {
    /// The ProjectQuota's namespace and name.
    pub namespace: String,
    pub quota: String,
    /// The Placement project it governs.
    pub project: String,
    /// The limit's name (`servers`, `class:VCPU`).
    pub limit: String,
    /// The limit in force (-1: none).
    pub max: i64,
    pub used: i64,
}

impl ProjectUse {
    /// The share of the limit in use (0 without a limit; infinite for use over a limit of 0).
    pub fn used_fraction(&self) -> f64 {
        match (self.max, self.used) {
            (m, _) if m < 0 => 0.0,
            (_, u) if u <= 0 => 0.0,
            (0, _) => f64::INFINITY,
            (m, u) => u as f64 / m as f64,
        }
    }
}

/// Every limit of every ProjectQuota, as its status shows it: the most used first, then
/// by namespace and limit.
pub fn projects(store: &Store) -> Vec<ProjectUse> {
    let mut out = Vec::new();
    for object in store.list(Kind::ProjectQuota) {
        let Object::ProjectQuota(q) = object else {
            continue;
        };
        let Some(status) = &q.status else { continue };
        let namespace = q.metadata.namespace.clone().unwrap_or_default();
        let project = status
            .project_id
            .clone()
            .unwrap_or_else(|| namespace.clone());
        for (limit, usage) in &status.usage {
            out.push(ProjectUse {
                namespace: namespace.clone(),
                quota: q.metadata.name.clone().unwrap_or_default(),
                project: project.clone(),
                limit: limit.clone(),
                max: usage.limit,
                used: usage.used,
            });
        }
    }
    out.sort_by(|a, b| {
        b.used_fraction()
            .total_cmp(&a.used_fraction())
            .then(a.namespace.cmp(&b.namespace))
            .then(a.limit.cmp(&b.limit))
    });
    out
}

/// A Server not placed, and why, as its `Scheduled` condition says.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingServer {
    pub namespace: String,
    pub name: String,
    pub flavor: String,
    /// The condition's reason (`Pending`, `NoValidHost`, …), or `Pending` before the
    /// controller wrote one.
    pub reason: String,
    pub message: String,
    /// When the condition last changed, as written.
    pub since: Option<String>,
}

/// Every Server that holds no placement, the latest to wait first (then by namespace and
/// name): what an operator looks at when a boot does not start.
pub fn waiting_servers(store: &Store) -> Vec<WaitingServer> {
    let mut out: Vec<WaitingServer> = store
        .list(Kind::Server)
        .filter_map(|o| match o {
            Object::Server(s) => Some(s),
            _ => None,
        })
        .filter(|s| s.status.as_ref().is_none_or(|st| st.host.is_none()))
        .map(|s| {
            let scheduled = s
                .status
                .as_ref()
                .and_then(|st| st.conditions.iter().find(|c| c.type_ == "Scheduled"));
            WaitingServer {
                namespace: s.metadata.namespace.clone().unwrap_or_default(),
                name: s.metadata.name.clone().unwrap_or_default(),
                flavor: s.spec.flavor.clone(),
                reason: scheduled.map_or_else(|| "Pending".into(), |c| c.reason.clone()),
                message: scheduled.map(|c| c.message.clone()).unwrap_or_default(),
                since: scheduled.and_then(|c| c.last_transition_time.clone()),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.since
            .cmp(&a.since)
            .then(a.namespace.cmp(&b.namespace))
            .then(a.name.cmp(&b.name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::object;

    #[test]
    fn servers_without_a_host_wait_with_their_conditions_reason() {
        let store = store(&[
            "apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata: {name: placed, namespace: p1}
spec: {flavor: small, image: img}
status: {host: cn1}",
            "apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata: {name: stuck, namespace: p1}
spec: {flavor: large, image: img}
status:
  conditions:
  - {type: Scheduled, status: 'False', reason: NoValidHost, message: no host has 64 VCPU free, lastTransitionTime: '2026-12-07T10:00:00Z'}",
            "apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata: {name: new, namespace: p2}
spec: {flavor: small, image: img}",
        ]);
        let waiting = waiting_servers(&store);
        let seen: Vec<(&str, &str, &str)> = waiting
            .iter()
            .map(|w| (w.name.as_str(), w.flavor.as_str(), w.reason.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("stuck", "large", "NoValidHost"),
                ("new", "small", "Pending")
            ]
        );
        assert_eq!(waiting[0].message, "no host has 64 VCPU free");
    }

    fn store(yaml: &[&str]) -> Store {
        let mut store = Store::default();
        for doc in yaml {
            store.apply(object(doc));
        }
        store
    }

    const CN1: &str = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1}
spec:
  inventories: {DISK_GB: {total: 100, reserved: 10}}
  aggregates: [AAAAAAAA-0000-4000-8000-000000000001]";
    const NUMA0: &str = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1-numa0}
spec:
  parent: cn1
  inventories: {VCPU: {total: 8, allocationRatio: 4.0}}";
    const NUMA1: &str = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1-numa1}
spec:
  parent: cn1
  inventories: {VCPU: {total: 8, reserved: 2, allocationRatio: 2.0}}";
    const CN2: &str = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn2}
spec:
  inventories: {VCPU: {total: 4}}";
    const ZONE_A: &str = "apiVersion: kubeplace.io/v1alpha1
kind: Aggregate
metadata: {name: zone-a}
spec: {uuid: aaaaaaaa-0000-4000-8000-000000000001, availabilityZone: az1}";
    const CLAIM: &str = "apiVersion: kubeplace.io/v1alpha1
kind: Allocation
metadata: {name: c1}
spec:
  consumer: 11111111-0000-4000-8000-000000000001
  allocations:
  - {provider: cn1-numa0, resources: {VCPU: 5}}
  - {provider: cn2, resources: {VCPU: 4}}";

    /// One walk gives both scopes as each alone gives it.
    #[test]
    fn trees_and_providers_are_each_scope() {
        let s = store(&[CN1, NUMA0, NUMA1, CN2, ZONE_A, CLAIM]);
        assert_eq!(
            trees_and_providers(&s),
            (hosts(&s, Scope::Trees), hosts(&s, Scope::Providers))
        );
        assert_eq!(hosts(&s, Scope::Providers).len(), 4);
    }

    /// The most used first, by name among equals; by a class, only hosts with it; a class
    /// no host has is refused with the classes there are.
    #[test]
    fn hosts_rank_by_the_share_they_use() {
        let s = store(&[CN1, NUMA0, NUMA1, CN2, ZONE_A, CLAIM]);
        let names = |r: Vec<Ranked>| r.into_iter().map(|r| r.host.name).collect::<Vec<_>>();
        let trees = hosts(&s, Scope::Trees);
        assert_eq!(
            names(rank_hosts(trees.clone(), None).unwrap()),
            ["cn2", "cn1"]
        );
        let by_disk = rank_hosts(trees.clone(), Some("DISK_GB")).unwrap();
        assert_eq!(by_disk.len(), 1);
        assert_eq!(by_disk[0].share, Some(0.0));
        let refused = rank_hosts(trees, Some("VCPUS")).unwrap_err();
        assert_eq!(refused.known, ["DISK_GB", "VCPU"]);
        assert!(
            refused
                .to_string()
                .contains("the classes of this cloud are DISK_GB, VCPU")
        );
    }

    #[test]
    fn a_tree_sums_its_providers_in_its_roots_zone() {
        let s = store(&[CN1, NUMA0, NUMA1, CN2, ZONE_A, CLAIM]);
        let trees = hosts(&s, Scope::Trees);
        assert_eq!(
            trees.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
            ["cn1", "cn2"]
        );
        let vcpu = trees[0].classes["VCPU"];
        assert_eq!((vcpu.total, vcpu.reserved, vcpu.used), (16, 2, 5));
        // 8 * 4 + 6 * 2: the sum's ratio gives the sum's capacity.
        assert_eq!(vcpu.capacity, 44);
        assert!((vcpu.allocation_ratio - 44.0 / 14.0).abs() < 1e-9);
        assert_eq!(trees[0].zone, "az1", "the aggregate's uuid in any case");
        assert_eq!(trees[0].classes["DISK_GB"].capacity, 90);
        assert_eq!(trees[1].zone, DEFAULT_ZONE);
        assert_eq!(trees[1].classes["VCPU"].used_fraction(), 1.0);

        let providers = hosts(&s, Scope::Providers);
        assert_eq!(providers.len(), 4);
        let numa1 = providers.iter().find(|h| h.name == "cn1-numa1").unwrap();
        assert_eq!(numa1.zone, "az1", "its root's zone");
        assert_eq!(numa1.classes["VCPU"].allocation_ratio, 2.0);

        let by_zone = zones(&trees);
        assert_eq!(by_zone[&("az1".into(), "VCPU".into())].capacity, 44);
        assert_eq!(by_zone[&("nova".into(), "VCPU".into())].used, 4);
    }

    #[test]
    fn a_provider_outside_a_tree_is_left_out() {
        let orphan = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: lost}
spec:
  parent: missing
  inventories: {VCPU: {total: 8}}";
        let s = store(&[CN2, orphan]);
        assert_eq!(hosts(&s, Scope::Trees).len(), 1);
        assert_eq!(hosts(&s, Scope::Providers).len(), 1);
    }

    #[test]
    fn fractions_of_nothing_and_of_too_much() {
        let none = Amounts::default();
        assert_eq!(none.used_fraction(), 0.0);
        let over = Amounts {
            capacity: 0,
            used: 3,
            ..Amounts::default()
        };
        assert!(over.used_fraction().is_infinite());
        assert_eq!(over.free(), 0);
        let unlimited = ProjectUse {
            namespace: "n".into(),
            quota: "q".into(),
            project: "p".into(),
            limit: "servers".into(),
            max: -1,
            used: 5,
        };
        assert_eq!(unlimited.used_fraction(), 0.0);
    }
}

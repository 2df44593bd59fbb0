//! The export's plan: the writes that make a target Placement (as read) show a source's
//! state, in an order Placement takes them: custom names created, consumers that are gone
//! deleted, providers created (parents first) or renamed and moved, inventories, traits and
//! aggregates set, consumers' allocations put, providers that are gone deleted (children
//! first). Or everything Placement would refuse, found before the first write.
//!
//! Where that order would meet a refusal of Placement's, the plan goes round it: a provider
//! whose name another takes first is renamed out of the way (providers that trade names);
//! consumers' allocations are put in an order where each fits when its turn comes (one
//! moves into room another frees), and a consumer's allocations are deleted first and put
//! afresh when it holds a class its provider's inventory loses (Placement does not remove
//! an inventory in use) or when consumers wait on each other's room.
//!
//! A write that carries a provider's generation names the provider; the writer fills the
//! generation in as it goes (each write moves it).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use kubeplace_core::placement::response::inventory_json;
use serde_json::{Value, json};

use super::snapshot::{Allocations, Consumer, Provider, Snapshot};
use crate::translate::resource_provider::inventory;

/// An HTTP method the export writes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Put,
    Post,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One write into Placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub method: Method,
    /// The path under Placement's root (`/resource_providers/{uuid}/traits`).
    pub path: String,
    pub body: Option<Value>,
    /// The provider whose generation the body carries (and the answer moves).
    pub generation_of: Option<String>,
    /// The write for people (`set the traits of provider "cn1" (…)`).
    pub what: String,
}

impl Op {
    /// Whether this write creates a provider (its answer gives the new provider's
    /// generation).
    pub fn creates_provider(&self) -> bool {
        self.method == Method::Post && self.path == "/resource_providers"
    }
}

/// Something of the source that Placement would not take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Untakable {
    #[error(
        "provider {name:?} ({uuid}): Placement has a provider of that name with uuid {other}; delete or rename it there first"
    )]
    NameTaken {
        name: String,
        uuid: String,
        other: String,
    },
    #[error("provider {name:?} ({uuid}): Placement takes names of at most 200 characters")]
    NameTooLong { name: String, uuid: String },
    #[error(
        "consumer {consumer}: consumer type {consumer_type:?} is not one Placement takes (A-Z, 0-9 and _)"
    )]
    ConsumerType {
        consumer: String,
        consumer_type: String,
    },
    #[error("consumer {consumer}: project or user id {id:?} is not 1-255 characters")]
    ProjectOrUser { consumer: String, id: String },
    #[error(
        "consumer {consumer}: it has allocations on {provider}, which is not one of the providers exported"
    )]
    ProviderNotExported { consumer: String, provider: String },
}

/// The longest provider name Placement takes, in characters.
const MAX_PROVIDER_NAME: usize = 200;

/// What Placement would refuse of `source` written over `target`.
fn untakable(source: &Snapshot, target: &Snapshot) -> Vec<Untakable> {
    let mut refusals = Vec::new();
    let here = source.by_uuid();
    let target_names: HashMap<&str, &str> = target
        .providers
        .iter()
        .map(|p| (p.name.as_str(), p.uuid.as_str()))
        .collect();
    for p in &source.providers {
        // A provider of the target holding the name is refused unless the source renames it.
        if let Some(u) = target_names.get(p.name.as_str())
            && *u != p.uuid
            && here.get(u).is_none_or(|mine| mine.name == p.name)
        {
            refusals.push(Untakable::NameTaken {
                name: p.name.clone(),
                uuid: p.uuid.clone(),
                other: u.to_string(),
            });
        }
        if p.name.chars().count() > MAX_PROVIDER_NAME {
            refusals.push(Untakable::NameTooLong {
                name: p.name.clone(),
                uuid: p.uuid.clone(),
            });
        }
    }
    for c in source.consumers.values() {
        if !kubeplace_core::placement::is_placement_name(&c.consumer_type) {
            refusals.push(Untakable::ConsumerType {
                consumer: c.uuid.clone(),
                consumer_type: c.consumer_type.clone(),
            });
        }
        for id in [&c.project_id, &c.user_id] {
            if id.is_empty() || id.len() > 255 {
                refusals.push(Untakable::ProjectOrUser {
                    consumer: c.uuid.clone(),
                    id: id.clone(),
                });
            }
        }
        for rp in c.allocations.keys() {
            if !here.contains_key(rp.as_str()) {
                refusals.push(Untakable::ProviderNotExported {
                    consumer: c.uuid.clone(),
                    provider: rp.clone(),
                });
            }
        }
    }
    refusals
}

fn inventories_body(p: &Provider) -> Value {
    let inventories: serde_json::Map<String, Value> = p
        .inventories
        .iter()
        .map(|(c, i)| (c.clone(), inventory_json(&inventory(i))))
        .collect();
    json!({"inventories": inventories})
}

/// The writes that make `target` into `source`, or what Placement would refuse.
pub fn plan(source: &Snapshot, target: &Snapshot) -> Result<Vec<Op>, Vec<Untakable>> {
    let refusals = untakable(source, target);
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let there = target.by_uuid();
    let here = source.by_uuid();
    let mut ops = Vec::new();
    for class in source.custom_classes.difference(&target.custom_classes) {
        ops.push(Op {
            method: Method::Put,
            path: format!("/resource_classes/{class}"),
            body: None,
            generation_of: None,
            what: format!("create resource class {class}"),
        });
    }
    for t in source.custom_traits.difference(&target.custom_traits) {
        ops.push(Op {
            method: Method::Put,
            path: format!("/traits/{t}"),
            body: None,
            generation_of: None,
            what: format!("create trait {t}"),
        });
    }
    let (puts, put_afresh) = consumers_in_order(source, target);
    // Consumers gone first: their allocations may hold what a provider change needs. So
    // are those whose allocations must be put afresh (see `consumers_in_order`).
    for c in target.consumers.keys() {
        if !source.consumers.contains_key(c) || put_afresh.contains(c.as_str()) {
            ops.push(Op {
                method: Method::Delete,
                path: format!("/allocations/{c}"),
                body: None,
                generation_of: None,
                what: format!("delete the allocations of consumer {c}"),
            });
        }
    }
    // Providers whose names others take are renamed out of the way first.
    for (old, name) in out_of_the_way(source, target) {
        ops.push(Op {
            method: Method::Put,
            path: format!("/resource_providers/{}", old.uuid),
            body: Some(json!({"name": name, "parent_provider_uuid": old.parent})),
            generation_of: None,
            what: format!(
                "rename {} to {name:?} while another provider takes its name",
                old.who()
            ),
        });
    }
    // Providers parents first (the source's order), so a parent exists before its child.
    for p in &source.providers {
        let Some(old) = there.get(p.uuid.as_str()) else {
            ops.push(Op {
                method: Method::Post,
                path: "/resource_providers".to_string(),
                body: Some(json!({
                    "name": p.name,
                    "uuid": p.uuid,
                    "parent_provider_uuid": p.parent,
                })),
                generation_of: None,
                what: format!("create provider {:?} ({})", p.name, p.uuid),
            });
            continue;
        };
        if old.name != p.name || old.parent != p.parent {
            ops.push(Op {
                method: Method::Put,
                path: format!("/resource_providers/{}", p.uuid),
                body: Some(json!({"name": p.name, "parent_provider_uuid": p.parent})),
                generation_of: None,
                what: format!("rename or move provider {:?} ({})", p.name, p.uuid),
            });
        }
    }
    for p in &source.providers {
        let old = there.get(p.uuid.as_str());
        let who = p.who();
        if old.map(|o| &o.inventories) != Some(&p.inventories)
            && !(old.is_none() && p.inventories.is_empty())
        {
            ops.push(Op {
                method: Method::Put,
                path: format!("/resource_providers/{}/inventories", p.uuid),
                body: Some(inventories_body(p)),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the inventories of {who}"),
            });
        }
        if old.map(|o| &o.traits) != Some(&p.traits) && !(old.is_none() && p.traits.is_empty()) {
            ops.push(Op {
                method: Method::Put,
                path: format!("/resource_providers/{}/traits", p.uuid),
                body: Some(json!({"traits": p.traits})),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the traits of {who}"),
            });
        }
        if old.map(|o| &o.aggregates) != Some(&p.aggregates)
            && !(old.is_none() && p.aggregates.is_empty())
        {
            ops.push(Op {
                method: Method::Put,
                path: format!("/resource_providers/{}/aggregates", p.uuid),
                body: Some(json!({"aggregates": p.aggregates})),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the aggregates of {who}"),
            });
        }
    }
    for c in puts {
        let old = target
            .consumers
            .get(&c.uuid)
            .filter(|_| !put_afresh.contains(c.uuid.as_str()));
        let allocations: serde_json::Map<String, Value> = c
            .allocations
            .iter()
            .map(|(rp, r)| (rp.clone(), json!({"resources": r})))
            .collect();
        ops.push(Op {
            method: Method::Put,
            path: format!("/allocations/{}", c.uuid),
            body: Some(json!({
                "allocations": allocations,
                "project_id": c.project_id,
                "user_id": c.user_id,
                "consumer_generation": old.and_then(|o| o.generation),
                "consumer_type": c.consumer_type,
            })),
            generation_of: None,
            what: format!("put the allocations of consumer {}", c.uuid),
        });
    }
    // Providers gone last, children before their parents.
    for p in target.providers.iter().rev() {
        if !here.contains_key(p.uuid.as_str()) {
            ops.push(Op {
                method: Method::Delete,
                path: format!("/resource_providers/{}", p.uuid),
                body: None,
                generation_of: None,
                what: format!("delete {}", p.who()),
            });
        }
    }
    Ok(ops)
}

/// Whether `c` is as `old` (no write needed).
fn same_consumer(c: &Consumer, old: Option<&Consumer>) -> bool {
    old.is_some_and(|o| {
        o.allocations == c.allocations
            && o.project_id == c.project_id
            && o.user_id == c.user_id
            && o.consumer_type == c.consumer_type
    })
}

/// Each target provider whose name a different source provider takes before it has its
/// own new name (in the source's order of creates and renames, which would otherwise meet
/// Placement's "name taken"), with a name of its own meanwhile.
fn out_of_the_way<'a>(source: &Snapshot, target: &'a Snapshot) -> Vec<(&'a Provider, String)> {
    let there = target.by_uuid();
    let mut aside: BTreeSet<&str> = BTreeSet::new();
    // The creates and renames gone through in order, those set aside out of the way: a
    // name still met sets its holder aside too, until none is met.
    loop {
        let mut holder: HashMap<&str, &str> = target
            .providers
            .iter()
            .filter(|p| !aside.contains(p.uuid.as_str()))
            .map(|p| (p.name.as_str(), p.uuid.as_str()))
            .collect();
        let mut more = Vec::new();
        for p in &source.providers {
            let old = there.get(p.uuid.as_str());
            if old.is_some_and(|o| o.name == p.name) {
                continue;
            }
            if let Some(q) = holder.get(p.name.as_str())
                && *q != p.uuid
            {
                more.push(*q);
            }
            if let Some(o) = old {
                holder.remove(o.name.as_str());
            }
            holder.insert(p.name.as_str(), p.uuid.as_str());
        }
        let before = aside.len();
        aside.extend(more);
        if aside.len() == before {
            break;
        }
    }
    let taken: BTreeSet<&str> = source
        .providers
        .iter()
        .chain(&target.providers)
        .map(|p| p.name.as_str())
        .collect();
    target
        .providers
        .iter()
        .filter(|p| aside.contains(p.uuid.as_str()))
        .map(|p| {
            let name = (0..)
                .map(|n| format!("kubeplace-export-{n}-{}", p.uuid))
                .find(|n| !taken.contains(n.as_str()))
                .unwrap_or_default();
            (p, name)
        })
        .collect()
}

/// Resources held, by provider and class.
type Usage<'a> = HashMap<(&'a str, &'a str), i64>;

/// The consumers whose allocations are put, in an order each fits when its turn comes
/// (by uuid where that does), and those of them whose allocations are deleted first and
/// put afresh: a consumer holding a class its provider's inventory loses (Placement
/// refuses to remove an inventory in use), and consumers that wait on each other's room.
fn consumers_in_order<'a>(
    source: &'a Snapshot,
    target: &'a Snapshot,
) -> (Vec<&'a Consumer>, BTreeSet<&'a str>) {
    let inventories: HashMap<&str, &Provider> = source.by_uuid();
    let pending: Vec<&Consumer> = source
        .consumers
        .values()
        .filter(|c| !same_consumer(c, target.consumers.get(&c.uuid)))
        .collect();
    let old = |c: &str| target.consumers.get(c).map(|o| &o.allocations);
    let mut afresh: BTreeSet<&str> = BTreeSet::new();
    for c in &pending {
        // A provider the source does not have is deleted after the puts: no matter.
        let loses = old(&c.uuid).into_iter().flatten().any(|(rp, resources)| {
            resources.keys().any(|class| {
                inventories
                    .get(rp.as_str())
                    .is_some_and(|p| !p.inventories.contains_key(class))
            })
        });
        if loses {
            afresh.insert(&c.uuid);
        }
    }
    loop {
        // What the target's consumers hold once the gone and those put afresh are deleted.
        let mut usage: Usage<'_> = HashMap::new();
        for (uuid, c) in &target.consumers {
            if source.consumers.contains_key(uuid) && !afresh.contains(uuid.as_str()) {
                for (rp, resources) in &c.allocations {
                    for (class, n) in resources {
                        *usage.entry((rp.as_str(), class.as_str())).or_default() += n;
                    }
                }
            }
        }
        let mut order = Vec::with_capacity(pending.len());
        let mut waiting: Vec<&Consumer> = pending.clone();
        loop {
            let before = waiting.len();
            waiting.retain(|c| {
                let held = old(&c.uuid).filter(|_| !afresh.contains(c.uuid.as_str()));
                if !fits(c, held, &usage, &inventories) {
                    return true;
                }
                move_usage(&mut usage, held, -1);
                move_usage(&mut usage, Some(&c.allocations), 1);
                order.push(*c);
                false
            });
            if waiting.is_empty() || waiting.len() == before {
                break;
            }
        }
        if waiting.is_empty() {
            return (order, afresh);
        }
        // Those that wait on each other are deleted first: then each fits, as the
        // source's state holds them all.
        let before = afresh.len();
        afresh.extend(waiting.iter().map(|c| c.uuid.as_str()));
        if afresh.len() == before {
            // Nothing more to free: the order by uuid, as Placement will say what it refuses.
            return (pending, afresh);
        }
    }
}

/// Adds (`sign` 1) or takes away (-1) `allocations` to `usage`.
fn move_usage<'a>(usage: &mut Usage<'a>, allocations: Option<&'a Allocations>, sign: i64) {
    for (rp, resources) in allocations.into_iter().flatten() {
        for (class, n) in resources {
            *usage.entry((rp.as_str(), class.as_str())).or_default() += sign * n;
        }
    }
}

/// Whether Placement takes `c`'s allocations now, replacing `held`: each within its
/// provider's capacity beside what others hold (compared as a float, as Placement does).
fn fits(
    c: &Consumer,
    held: Option<&Allocations>,
    usage: &Usage<'_>,
    providers: &HashMap<&str, &Provider>,
) -> bool {
    c.allocations.iter().all(|(rp, resources)| {
        resources.iter().all(|(class, n)| {
            let Some(i) = providers
                .get(rp.as_str())
                .and_then(|p| p.inventories.get(class))
            else {
                return false;
            };
            let mine = held
                .and_then(|h| h.get(rp))
                .and_then(|r| r.get(class))
                .copied()
                .unwrap_or(0);
            let others = usage
                .get(&(rp.as_str(), class.as_str()))
                .copied()
                .unwrap_or(0)
                - mine;
            (others + n) as f64 <= (i.total - i.reserved) as f64 * i.allocation_ratio
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sync::snapshot::Consumer;

    fn consumer(uuid: &str, rp: &str, consumer_type: &str) -> Consumer {
        Consumer {
            uuid: uuid.to_string(),
            project_id: "p".to_string(),
            user_id: "u".to_string(),
            consumer_type: consumer_type.to_string(),
            generation: None,
            allocations: BTreeMap::from([(
                rp.to_string(),
                BTreeMap::from([("VCPU".to_string(), 1)]),
            )]),
        }
    }

    #[test]
    fn only_differences_are_written_in_order() {
        let mut cn1 = Provider::new("u1", "cn1", None);
        cn1.inventories
            .insert("VCPU".to_string(), kubeplace_api::Inventory::with_total(4));
        let numa = Provider::new("u2", "cn1_NUMA0", Some("u1"));
        let source = Snapshot {
            custom_traits: crate::placement_records::CustomNameSet::from(["CUSTOM_X".to_string()]),
            providers: vec![cn1.clone(), numa],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u1", "INSTANCE"))]),
            ..Default::default()
        };
        let target = Snapshot {
            providers: vec![cn1, Provider::new("u9", "gone", None)],
            consumers: BTreeMap::from([("c9".to_string(), consumer("c9", "u9", "INSTANCE"))]),
            ..Default::default()
        };
        let ops = plan(&source, &target).unwrap();
        let said: Vec<String> = ops
            .iter()
            .map(|o| format!("{} {}", o.method, o.path))
            .collect();
        assert_eq!(
            said,
            [
                "PUT /traits/CUSTOM_X",
                "DELETE /allocations/c9",
                "POST /resource_providers",
                "PUT /allocations/c1",
                "DELETE /resource_providers/u9",
            ]
        );
        // The same state on both sides: nothing.
        assert!(plan(&source, &source).unwrap().is_empty());
    }

    #[test]
    fn a_consumer_moving_off_a_provider_that_goes_is_put_once() {
        let mut cn1 = Provider::new("u1", "cn1", None);
        cn1.inventories
            .insert("VCPU".to_string(), kubeplace_api::Inventory::with_total(4));
        let mut gone = cn1.clone();
        (gone.uuid, gone.name) = ("u9".to_string(), "gone".to_string());
        let source = Snapshot {
            providers: vec![cn1.clone()],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u1", "INSTANCE"))]),
            ..Default::default()
        };
        let target = Snapshot {
            providers: vec![cn1, gone],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u9", "INSTANCE"))]),
            ..Default::default()
        };
        let said: Vec<String> = plan(&source, &target)
            .unwrap()
            .iter()
            .map(|o| format!("{} {}", o.method, o.path))
            .collect();
        assert_eq!(
            said,
            ["PUT /allocations/c1", "DELETE /resource_providers/u9"]
        );
    }

    #[test]
    fn what_placement_would_refuse_is_named_before_any_write() {
        let source = Snapshot {
            providers: vec![Provider::new("u1", "cn1", None)],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u1", "vm-like"))]),
            ..Default::default()
        };
        let target = Snapshot {
            providers: vec![Provider::new("u7", "cn1", None)],
            ..Default::default()
        };
        let refusals: Vec<String> = plan(&source, &target)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            refusals[0].contains("\"cn1\" (u1)") && refusals[0].contains("u7"),
            "{refusals:?}"
        );
        assert!(
            refusals[1].contains("consumer c1") && refusals[1].contains("vm-like"),
            "{refusals:?}"
        );
    }
}

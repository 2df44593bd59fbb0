//! A Placement in memory, for the round-trip property: the export's writes applied as
//! Placement 16 takes them (or refuses them, as it would: an unknown name, a parent that
//! does not exist, an allocation past capacity or outside an inventory's units, a provider
//! deleted with children or allocations), and its state read back as a [`Snapshot`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kubeplace_api::Inventory;
use kubeplace_core::placement::{is_placement_name, is_uuid};
use serde_json::Value;

use crate::sync::export::{Method, Op};
use crate::sync::snapshot::{Allocations, Consumer, Provider, Snapshot, parents_first};

/// Placement's state.
#[derive(Debug, Default)]
pub struct Placement {
    classes: BTreeSet<String>,
    traits: BTreeSet<String>,
    providers: HashMap<String, Provider>,
    consumers: BTreeMap<String, Consumer>,
}

fn standard_class(name: &str) -> bool {
    kubeplace_core::placement::standard_resource_classes().contains(&name)
}

fn standard_trait(name: &str) -> bool {
    kubeplace_core::placement::standard_traits().contains(&name)
}

fn text(v: &Value, field: &str) -> Result<String, String> {
    v[field]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{field} is not a string: {v}"))
}

fn whole(v: &Value, field: &str) -> Result<i64, String> {
    v[field]
        .as_i64()
        .ok_or_else(|| format!("{field} is not a whole number: {v}"))
}

impl Placement {
    /// A Placement that shows `snapshot`.
    pub fn from(snapshot: &Snapshot) -> Placement {
        Placement {
            classes: snapshot.custom_classes.iter().cloned().collect(),
            traits: snapshot.custom_traits.iter().cloned().collect(),
            providers: snapshot
                .providers
                .iter()
                .map(|p| (p.uuid.clone(), p.clone()))
                .collect(),
            consumers: snapshot.consumers.clone(),
        }
    }

    /// One write, as Placement answers it: done, or why it is refused.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        let parts: Vec<&str> = op.path.trim_start_matches('/').split('/').collect();
        let body = op.body.as_ref();
        let body = || body.ok_or_else(|| format!("{} {} has no body", op.method, op.path));
        match (op.method, parts.as_slice()) {
            (Method::Put, ["resource_classes", name]) => {
                if !name.starts_with("CUSTOM_") || !is_placement_name(name) {
                    return Err(format!("400: bad resource class {name}"));
                }
                self.classes.insert(name.to_string());
            }
            (Method::Put, ["traits", name]) => {
                if !name.starts_with("CUSTOM_") || !is_placement_name(name) {
                    return Err(format!("400: bad trait {name}"));
                }
                self.traits.insert(name.to_string());
            }
            (Method::Post, ["resource_providers"]) => self.create(body()?)?,
            (Method::Put, ["resource_providers", uuid]) => self.update(uuid, body()?)?,
            (Method::Delete, ["resource_providers", uuid]) => self.delete(uuid)?,
            (Method::Put, ["resource_providers", uuid, what]) => {
                self.set(uuid, what, body()?)?;
            }
            (Method::Put, ["allocations", consumer]) => self.allocate(consumer, body()?)?,
            (Method::Delete, ["allocations", consumer]) => {
                if self.consumers.remove(*consumer).is_none() {
                    return Err(format!("404: no consumer {consumer}"));
                }
            }
            _ => return Err(format!("405: {} {}", op.method, op.path)),
        }
        Ok(())
    }

    /// The state as Placement's reads show it.
    pub fn read(&self) -> Snapshot {
        Snapshot {
            custom_classes: self.classes.iter().cloned().collect(),
            custom_traits: self.traits.iter().cloned().collect(),
            providers: parents_first(self.providers.clone()),
            consumers: self.consumers.clone(),
        }
    }

    fn provider(&mut self, uuid: &str) -> Result<&mut Provider, String> {
        self.providers
            .get_mut(uuid)
            .ok_or_else(|| format!("404: no provider {uuid}"))
    }

    fn parent(&self, body: &Value) -> Result<Option<String>, String> {
        match &body["parent_provider_uuid"] {
            Value::Null => Ok(None),
            Value::String(p) if self.providers.contains_key(p) => Ok(Some(p.clone())),
            p => Err(format!("400: parent provider {p} does not exist")),
        }
    }

    fn check_name(&self, name: &str, uuid: &str) -> Result<(), String> {
        if name.is_empty() || name.chars().count() > 200 {
            return Err(format!("400: name {name:?} is not 1-200 characters"));
        }
        if self
            .providers
            .values()
            .any(|p| p.name == name && p.uuid != uuid)
        {
            return Err(format!("409: name {name:?} is taken"));
        }
        Ok(())
    }

    fn create(&mut self, body: &Value) -> Result<(), String> {
        let name = text(body, "name")?;
        let uuid = text(body, "uuid")?;
        if !is_uuid(&uuid) || self.providers.contains_key(&uuid) {
            return Err(format!("409: uuid {uuid} is not a new uuid"));
        }
        self.check_name(&name, &uuid)?;
        let parent = self.parent(body)?;
        let mut p = Provider::new(&uuid, &name, None);
        p.parent = parent;
        p.generation = 0;
        self.providers.insert(uuid, p);
        Ok(())
    }

    fn update(&mut self, uuid: &str, body: &Value) -> Result<(), String> {
        let name = text(body, "name")?;
        self.check_name(&name, uuid)?;
        let parent = self.parent(body)?;
        // A provider cannot become its own descendant.
        let mut up = parent.clone();
        while let Some(u) = up {
            if u == uuid {
                return Err(format!("400: {uuid} would be its own ancestor"));
            }
            up = self.providers.get(&u).and_then(|p| p.parent.clone());
        }
        let p = self.provider(uuid)?;
        p.name = name;
        p.parent = parent;
        Ok(())
    }

    fn delete(&mut self, uuid: &str) -> Result<(), String> {
        if self
            .providers
            .values()
            .any(|p| p.parent.as_deref() == Some(uuid))
        {
            return Err(format!("409: provider {uuid} has children"));
        }
        if self
            .consumers
            .values()
            .any(|c| c.allocations.contains_key(uuid))
        {
            return Err(format!("409: provider {uuid} has allocations"));
        }
        self.providers
            .remove(uuid)
            .map(drop)
            .ok_or_else(|| format!("404: no provider {uuid}"))
    }

    /// Resources allocated on `uuid` of `class`, by consumers other than `except`.
    fn used(&self, uuid: &str, class: &str, except: &str) -> i64 {
        self.consumers
            .values()
            .filter(|c| c.uuid != except)
            .filter_map(|c| c.allocations.get(uuid)?.get(class))
            .sum()
    }

    fn set(&mut self, uuid: &str, what: &str, body: &Value) -> Result<(), String> {
        match what {
            "inventories" => {
                let Some(listed) = body["inventories"].as_object() else {
                    return Err(format!("400: no inventories in {body}"));
                };
                let mut inventories = BTreeMap::new();
                for (class, i) in listed {
                    if !(standard_class(class) || self.classes.contains(class)) {
                        return Err(format!("400: no resource class {class}"));
                    }
                    let inventory = Inventory {
                        total: whole(i, "total")?,
                        reserved: whole(i, "reserved")?,
                        min_unit: whole(i, "min_unit")?,
                        max_unit: whole(i, "max_unit")?,
                        step_size: whole(i, "step_size")?,
                        allocation_ratio: i["allocation_ratio"]
                            .as_f64()
                            .ok_or_else(|| format!("allocation_ratio in {i}"))?,
                    };
                    if inventory.total < 1
                        || inventory.reserved < 0
                        || inventory.reserved > inventory.total
                        || inventory.min_unit < 1
                        || inventory.max_unit < inventory.min_unit
                        || inventory.step_size < 1
                        || inventory.allocation_ratio <= 0.0
                    {
                        return Err(format!("400: inventory of {class}: {i}"));
                    }
                    inventories.insert(class.clone(), inventory);
                }
                let p = self.provider(uuid)?;
                let gone: Vec<String> = p
                    .inventories
                    .keys()
                    .filter(|c| !inventories.contains_key(*c))
                    .cloned()
                    .collect();
                for class in gone {
                    if self.used(uuid, &class, "") > 0 {
                        return Err(format!("409: inventory of {class} on {uuid} is in use"));
                    }
                }
                let p = self.provider(uuid)?;
                p.inventories = inventories;
            }
            "traits" => {
                let mut traits = BTreeSet::new();
                for t in body["traits"].as_array().into_iter().flatten() {
                    let t = t.as_str().unwrap_or_default();
                    if !(standard_trait(t) || self.traits.contains(t)) {
                        return Err(format!("400: no trait {t}"));
                    }
                    traits.insert(t.to_string());
                }
                self.provider(uuid)?.traits = traits;
            }
            "aggregates" => {
                let mut aggregates = BTreeSet::new();
                for a in body["aggregates"].as_array().into_iter().flatten() {
                    let a = a.as_str().unwrap_or_default();
                    if !is_uuid(a) {
                        return Err(format!("400: aggregate {a} is not a uuid"));
                    }
                    aggregates.insert(a.to_string());
                }
                self.provider(uuid)?.aggregates = aggregates;
            }
            _ => return Err(format!("404: /resource_providers/{uuid}/{what}")),
        }
        self.provider(uuid)?.generation += 1;
        Ok(())
    }

    fn allocate(&mut self, consumer: &str, body: &Value) -> Result<(), String> {
        let project_id = text(body, "project_id")?;
        let user_id = text(body, "user_id")?;
        let consumer_type = text(body, "consumer_type")?;
        if !is_placement_name(&consumer_type) {
            return Err(format!("400: consumer type {consumer_type:?}"));
        }
        let old = self.consumers.get(consumer);
        let generation = body["consumer_generation"].as_u64();
        if generation != old.and_then(|c| c.generation) {
            return Err(format!(
                "409: consumer generation {generation:?} for {consumer}"
            ));
        }
        let mut allocations: Allocations = BTreeMap::new();
        let Some(listed) = body["allocations"].as_object() else {
            return Err(format!("400: no allocations in {body}"));
        };
        for (rp, a) in listed {
            let Some(p) = self.providers.get(rp) else {
                return Err(format!("400: no provider {rp}"));
            };
            let Some(resources) = a["resources"].as_object() else {
                return Err(format!("400: no resources in {a}"));
            };
            for (class, amount) in resources {
                let amount = amount.as_i64().unwrap_or(0);
                let Some(i) = p.inventories.get(class) else {
                    return Err(format!("409: {rp} has no inventory of {class}"));
                };
                let capacity = (i.total - i.reserved) as f64 * i.allocation_ratio;
                let used = self.used(rp, class, consumer);
                if amount < i.min_unit
                    || amount > i.max_unit
                    || amount % i.step_size != 0
                    || (used + amount) as f64 > capacity
                {
                    return Err(format!("409: {amount} {class} does not fit on {rp}"));
                }
                allocations
                    .entry(rp.clone())
                    .or_default()
                    .insert(class.clone(), amount);
            }
        }
        for rp in allocations.keys() {
            self.provider(rp)?.generation += 1;
        }
        if allocations.is_empty() {
            self.consumers.remove(consumer);
            return Ok(());
        }
        self.consumers.insert(
            consumer.to_string(),
            Consumer {
                uuid: consumer.to_string(),
                project_id,
                user_id,
                consumer_type,
                generation: Some(generation.map_or(0, |g| g + 1)),
                allocations,
            },
        );
        Ok(())
    }
}

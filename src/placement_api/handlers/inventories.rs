//! `/resource_providers/{uuid}/inventories[/{class}]`.
//!
//! Reads show the provider's effective inventories (its own plus what provider configs
//! add); writes change the ResourceProvider's `spec.inventories` through admission.

use std::collections::BTreeMap;

use http::StatusCode;
use serde_json::{Map, Value, json};

use kubeplace_api::{Inventory, SortedMap};
use kubeplace_core::placement::Inventory as CoreInventory;
use kubeplace_core::placement::response::inventory_json;

use crate::placement_api::request::body::{self, MAX_INT};
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::wire::{ApiError, Reply, code, empty, json_reply, located};
use kubeplace_policy::placement_records::State;

/// The inventory fields Placement takes, besides the generation.
pub(super) const FIELDS: [&str; 6] = [
    "total",
    "reserved",
    "min_unit",
    "max_unit",
    "step_size",
    "allocation_ratio",
];

/// One inventory from a body, with Placement's defaults for the fields left out. Its
/// capacity, `(total - reserved) × allocation_ratio` truncated, must be above 0 before 1.26
/// and may be 0 (all reserved) from 1.26.
pub(super) fn parse_inventory(
    b: &Map<String, Value>,
    uuid: &str,
    class: &str,
    ctx: &Ctx,
) -> Result<Inventory, ApiError> {
    let ratio = match b.get("allocation_ratio") {
        None => 1.0,
        Some(v) => match v.as_f64() {
            Some(r) if r > 0.0 && r <= 3.40282e38 => r,
            _ => {
                return Err(body::invalid(format!(
                    "{class}: allocation_ratio is {v}; it must be a number greater than 0"
                )));
            }
        },
    };
    let inv = Inventory {
        total: body::int(b, "total", 1, None)?,
        reserved: body::int(b, "reserved", 0, Some(0))?,
        min_unit: body::int(b, "min_unit", 1, Some(1))?,
        max_unit: body::int(b, "max_unit", 1, Some(MAX_INT))?,
        step_size: body::int(b, "step_size", 1, Some(1))?,
        allocation_ratio: ratio,
    };
    if inv.reserved > inv.total {
        return Err(ApiError::bad_request(format!(
            "Unable to update inventory for resource provider {uuid}: Invalid inventory for '{class}' on resource provider '{uuid}'. The reserved value is greater than total."
        )));
    }
    let capacity = kubeplace_policy::translate::resource_provider::inventory(&inv).capacity();
    if ctx.mv.0 < 26 && capacity <= 0 {
        return Err(ApiError::bad_request(format!(
            "Unable to update inventory for resource provider {uuid}: the inventory of '{class}' leaves no capacity (total {}, reserved {}, allocation_ratio {}); below microversion 1.26 reserved must be less than total",
            inv.total, inv.reserved, inv.allocation_ratio
        )));
    }
    Ok(inv)
}

/// The provider's effective inventories.
fn effective(state: &State<'_>, name: &str) -> BTreeMap<String, CoreInventory> {
    state
        .store()
        .index()
        .effective(name)
        .map(|(inventories, _)| inventories)
        .unwrap_or_default()
}

fn list_body(state: &State<'_>, uuid: &str, name: &str) -> Value {
    let inventories: Map<String, Value> = effective(state, name)
        .iter()
        .map(|(c, i)| (c.clone(), inventory_json(i)))
        .collect();
    json!({"inventories": inventories, "resource_provider_generation": state.generation(uuid)})
}

/// `GET …/inventories`.
pub(crate) fn list(state: &State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    Ok(json_reply(StatusCode::OK, &list_body(state, uuid, &name)))
}

/// The amount of a class in use on a provider.
fn used(state: &State<'_>, name: &str, class: &str) -> i64 {
    state.store().index().used(name, class)
}

/// A class the client names must exist (standard, or created).
pub(super) fn known_class(state: &State<'_>, uuid: &str, class: &str) -> Result<(), ApiError> {
    if state.class_exists(class) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Unknown resource class in inventory for resource provider {uuid}: No such resource class {class}."
        )))
    }
}

/// A new set of inventories must keep every class the provider has allocations of
/// (Placement's 409 `inventory.inuse`, naming every such class).
pub(super) fn keeps_classes_in_use(
    state: &State<'_>,
    uuid: &str,
    name: &str,
    inventories: &SortedMap<String, Inventory>,
) -> Result<(), ApiError> {
    let in_use: Vec<(String, i64)> = effective(state, name)
        .into_keys()
        .filter(|class| !inventories.contains_key(class))
        .map(|class| {
            let n = used(state, name, &class);
            (class, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if in_use.is_empty() {
        return Ok(());
    }
    let classes: Vec<&str> = in_use.iter().map(|(c, _)| c.as_str()).collect();
    let amounts: Vec<String> = in_use.iter().map(|(c, n)| format!("{n} {c}")).collect();
    Err(ApiError::conflict(format!(
        "update conflict: Inventory for '{}' on resource provider '{uuid}' in use ({} allocated).",
        classes.join(", "),
        amounts.join(", ")
    ))
    .with_code(code::INVENTORY_INUSE))
}

/// Stores the provider's new inventories and moves its generation.
pub(super) fn store_inventories(
    state: &mut State<'_>,
    uuid: &str,
    name: &str,
    inventories: SortedMap<String, Inventory>,
) -> Result<(), ApiError> {
    let mut rp = state.provider_object(name)?;
    rp.spec.inventories = inventories;
    state.write_provider(rp)?;
    state.bump(uuid)?;
    Ok(())
}

/// `PUT …/inventories`: replaces the whole set.
pub(crate) fn replace(
    state: &mut State<'_>,
    ctx: &Ctx,
    uuid: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let b = body::object(call)?;
    body::only(&b, &["inventories", "resource_provider_generation"])?;
    let generation = body::provider_generation(&b)?;
    let Some(Value::Object(given)) = b.get("inventories") else {
        return Err(body::invalid(
            "inventories is a required property: an object of resource class to inventory",
        ));
    };
    // The body is judged whole before the generation, as Placement does: a bad body is a
    // 400 even when it is also stale.
    let mut inventories = SortedMap::new();
    for (class, v) in given {
        let Value::Object(fields) = v else {
            return Err(body::invalid(format!(
                "inventories.{class} is {v}, not an object"
            )));
        };
        body::only(fields, &FIELDS)?;
        inventories.insert(class.clone(), parse_inventory(fields, uuid, class, ctx)?);
    }
    for class in inventories.keys() {
        known_class(state, uuid, class)?;
    }
    state.check_generation(uuid, generation)?;
    keeps_classes_in_use(state, uuid, &name, &inventories)?;
    store_inventories(state, uuid, &name, inventories)?;
    Ok(json_reply(StatusCode::OK, &list_body(state, uuid, &name)))
}

/// `POST …/inventories`: adds one class. A generation in the body is checked for its type
/// only: Placement adds the class to the provider as it is now.
pub(crate) fn create(
    state: &mut State<'_>,
    ctx: &Ctx,
    uuid: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let b = body::object(call)?;
    let mut allowed = FIELDS.to_vec();
    allowed.extend(["resource_class", "resource_provider_generation"]);
    body::only(&b, &allowed)?;
    if b.contains_key("resource_provider_generation") {
        body::provider_generation(&b)?;
    }
    let class = body::string(&b, "resource_class", 255)?
        .ok_or_else(|| body::invalid("\"resource_class\" is a required property"))?;
    let inv = parse_inventory(&b, uuid, &class, ctx)?;
    known_class(state, uuid, &class)?;
    let mut rp = state.provider_object(&name)?;
    if rp.spec.inventories.contains_key(&class) {
        return Err(ApiError::conflict(format!(
            "Update conflict: Inventory for {class} on resource provider {uuid} already exists."
        ))
        .with_code(code::CONCURRENT_UPDATE));
    }
    rp.spec.inventories.insert(class.clone(), inv);
    let inventories = rp.spec.inventories;
    store_inventories(state, uuid, &name, inventories)?;
    let reply = one(state, uuid, &name, &class, StatusCode::CREATED)?;
    Ok(located(
        reply,
        &super::providers::location(
            call,
            &format!("/resource_providers/{uuid}/inventories/{class}"),
        ),
    ))
}

/// `DELETE …/inventories` (1.5).
pub(crate) fn delete_all(state: &mut State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    if let Some((class, n)) = state
        .store()
        .index()
        .usages(&name)
        .and_then(|u| u.into_iter().find(|(_, n)| *n > 0))
    {
        return Err(ApiError::conflict(format!(
            "Unable to delete inventory for resource provider {uuid} because the inventory is in use: {n} of {class} is allocated."
        ))
        .with_code(code::INVENTORY_INUSE));
    }
    store_inventories(state, uuid, &name, SortedMap::new())?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// One inventory with the provider's generation.
fn one(
    state: &State<'_>,
    uuid: &str,
    name: &str,
    class: &str,
    status: StatusCode,
) -> Result<Reply, ApiError> {
    let inventories = effective(state, name);
    let inv = inventories
        .get(class)
        .ok_or_else(|| ApiError::not_found(format!("No inventory of class {class} for {uuid}")))?;
    let mut v = inventory_json(inv);
    v["resource_provider_generation"] = Value::from(state.generation(uuid));
    Ok(json_reply(status, &v))
}

/// `GET …/inventories/{class}`.
pub(crate) fn show(state: &State<'_>, uuid: &str, class: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    one(state, uuid, &name, class, StatusCode::OK)
}

/// `PUT …/inventories/{class}`: changes one class the provider has.
pub(crate) fn update(
    state: &mut State<'_>,
    ctx: &Ctx,
    uuid: &str,
    class: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let b = body::object(call)?;
    let mut allowed = FIELDS.to_vec();
    allowed.push("resource_provider_generation");
    body::only(&b, &allowed)?;
    let generation = body::provider_generation(&b)?;
    let inv = parse_inventory(&b, uuid, class, ctx)?;
    known_class(state, uuid, class)?;
    state.check_generation(uuid, generation)?;
    let mut rp = state.provider_object(&name)?;
    if !rp.spec.inventories.contains_key(class) {
        return Err(ApiError::bad_request(format!(
            "No inventory record with resource class for resource provider {uuid}: No inventory of class {class} found; create it with PUT or POST …/inventories."
        )));
    }
    rp.spec.inventories.insert(class.to_string(), inv);
    let inventories = rp.spec.inventories;
    store_inventories(state, uuid, &name, inventories)?;
    one(state, uuid, &name, class, StatusCode::OK)
}

/// `DELETE …/inventories/{class}`.
pub(crate) fn delete(state: &mut State<'_>, uuid: &str, class: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let mut rp = state.provider_object(&name)?;
    if !rp.spec.inventories.contains_key(class) {
        return Err(ApiError::not_found(format!(
            "No inventory of class {class} found for delete"
        )));
    }
    let n = used(state, &name, class);
    if n > 0 {
        // Placement answers this one with the concurrent-update code.
        return Err(ApiError::conflict(format!(
            "Unable to delete inventory of class {class}: Inventory for '{class}' on resource provider '{uuid}' in use ({n} allocated)."
        ))
        .with_code(code::CONCURRENT_UPDATE));
    }
    rp.spec.inventories.remove(class);
    let inventories = rp.spec.inventories;
    store_inventories(state, uuid, &name, inventories)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

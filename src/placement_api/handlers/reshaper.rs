//! `POST /reshaper` (1.30): new inventories for some providers and new allocations for some
//! consumers, all at once, as a virt driver does when it moves resources from a compute
//! node to new child providers (VGPU to one provider per physical GPU).
//!
//! Every check that can be made first is (body, providers, classes, generations); then the
//! parts are judged in Placement's order: the consumers' old allocations go, each provider
//! given inventories holds what it had and what it is given at once (so the new
//! allocations can land before the old classes leave), the new allocations are written
//! through the claim path, and last each provider's inventories become what was given,
//! where a class still allocated is refused as in use (409 `placement.inventory.inuse`,
//! which Nova's report client tells apart). Any refusal on the way undoes all of it (the
//! write path puts back what a failed write changed), so a reshape happens whole or not at
//! all.

use kubeplace_api::SortedMap;

use http::StatusCode;
use serde_json::Value;

use super::allocations::{self, Wanted};
use super::inventories::{self, FIELDS};
use crate::placement_api::request::body::{self, KeyOrder};
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::wire::{ApiError, Reply, code, empty};
use kubeplace_policy::placement_records::State;

/// One provider's new inventories, as asked.
struct NewInventories {
    uuid: String,
    name: String,
    inventories: SortedMap<String, kubeplace_api::Inventory>,
}

/// `POST /reshaper`.
pub(crate) fn reshape(state: &mut State<'_>, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let b = body::object(call)?;
    body::only(&b, &["inventories", "allocations"])?;
    let Value::Object(given_inventories) = body::required(&b, "inventories")? else {
        return Err(body::invalid(
            "inventories is an object of provider uuid to {resource_provider_generation, inventories}",
        ));
    };
    let Value::Object(given_allocations) = body::required(&b, "allocations")? else {
        return Err(body::invalid(
            "allocations is an object of consumer uuid to that consumer's allocations",
        ));
    };

    // The whole body is judged first, as Placement checks it against its schema before it
    // looks at any provider or generation: a malformed body is a 400 even when stale.
    let mut given = Vec::new();
    for (uuid, entry) in given_inventories {
        let Value::Object(entry) = entry else {
            return Err(body::invalid(format!(
                "inventories.{uuid} is {entry}, not an object"
            )));
        };
        body::only(entry, &["inventories", "resource_provider_generation"])?;
        let generation = body::provider_generation(entry)?;
        let Some(Value::Object(classes)) = entry.get("inventories") else {
            return Err(body::invalid(format!(
                "inventories.{uuid}.inventories is required: an object of resource class to inventory"
            )));
        };
        let mut inventories = SortedMap::new();
        for (class, fields) in classes {
            let Value::Object(fields) = fields else {
                return Err(body::invalid(format!(
                    "inventories.{uuid}.inventories.{class} is {fields}, not an object"
                )));
            };
            body::only(fields, &FIELDS)?;
            inventories.insert(
                class.clone(),
                inventories::parse_inventory(fields, uuid, class, ctx)?,
            );
        }
        given.push((uuid, generation, inventories));
    }
    let written = KeyOrder::of(call);
    let written = written.get("allocations");
    let mut wanted_by_consumer: Vec<(String, Wanted)> = Vec::new();
    for (key, entry) in given_allocations {
        let consumer = allocations::consumer_uuid(key)?;
        let Value::Object(entry) = entry else {
            return Err(body::invalid(format!(
                "allocations.{consumer} is {entry}, not an object"
            )));
        };
        wanted_by_consumer.push((
            consumer,
            allocations::parse_consumer(ctx, entry, written.get(key), true)?,
        ));
    }

    // Every provider must exist before any generation is judged, so that the answer does
    // not hang on the order of the body's keys.
    let mut found = Vec::new();
    for (uuid, generation, inventories) in given {
        let name = state.provider_name(uuid).map_err(|_| {
            ApiError::bad_request(format!(
                "Resource provider {uuid} in inventories not found."
            ))
            .with_code(code::PROVIDER_NOT_FOUND)
        })?;
        found.push((uuid, name, generation, inventories));
    }
    let mut providers = Vec::new();
    for (uuid, name, generation, inventories) in found {
        state.check_generation(uuid, generation)?;
        for class in inventories.keys() {
            inventories::known_class(state, uuid, class)?;
        }
        providers.push(NewInventories {
            uuid: uuid.clone(),
            name,
            inventories,
        });
    }
    let mut consumers: Vec<(String, Wanted)> = Vec::new();
    for (consumer, wanted) in wanted_by_consumer {
        allocations::check_consumer_generation(state, &consumer, wanted.consumer_generation)?;
        consumers.push((consumer, wanted));
    }

    // The consumers' old allocations go first, so that the classes they used can leave
    // the providers that had them.
    let previous: Vec<_> = consumers
        .iter()
        .map(|(c, _)| allocations::before(state, c))
        .collect();
    for (consumer, _) in &consumers {
        for (key, _) in state.consumer_allocations(consumer) {
            state.delete(&key)?;
        }
    }
    // Each provider given inventories holds its own and the given ones together while the
    // allocations move (Placement's interim inventories; one move of its generation). A
    // provider given none keeps its inventories until the end.
    for p in providers.iter().filter(|p| !p.inventories.is_empty()) {
        let mut interim = state.provider_object(&p.name)?.spec.inventories;
        interim.extend(p.inventories.iter().map(|(c, i)| (c.clone(), i.clone())));
        inventories::store_inventories(state, &p.uuid, &p.name, interim)?;
    }
    let plans = consumers
        .into_iter()
        .map(|(consumer, wanted)| allocations::plan_checked(state, consumer, wanted))
        .collect::<Result<Vec<_>, _>>()?;
    allocations::apply_after(state, plans, previous)?;
    // Then the inventories asked for: a class that allocations still hold cannot go.
    for p in providers {
        inventories::keeps_classes_in_use(state, &p.uuid, &p.name, &p.inventories)?;
        inventories::store_inventories(state, &p.uuid, &p.name, p.inventories)?;
    }
    Ok(empty(StatusCode::NO_CONTENT))
}

//! `/resource_classes` (1.2), the rename of a custom class (`PUT /resource_classes/{name}`
//! with a body, 1.2–1.6) and its create-or-check (`PUT`, 1.7).
//!
//! Standard classes always exist; custom ones once created (or used by a seeded object).

use http::StatusCode;
use serde_json::{Value, json};

use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::standard_resource_classes;

use super::traits::is_custom_name;
use crate::placement_api::request::body;
use crate::placement_api::request::call::Call;
use crate::placement_api::request::wire::{ApiError, Reply, empty, json_reply, located};
use kubeplace_policy::placement_records::State;

fn class_json(name: &str) -> Value {
    json!({"name": name, "links": [{"rel": "self", "href": format!("/resource_classes/{name}")}]})
}

/// `GET /resource_classes`: the standard ones in os-resource-classes order, then custom.
pub(crate) fn list(state: &State<'_>) -> Result<Reply, ApiError> {
    let all: Vec<Value> = standard_resource_classes()
        .iter()
        .copied()
        .chain(state.custom_classes().iter().map(String::as_str))
        .map(class_json)
        .collect();
    Ok(json_reply(
        StatusCode::OK,
        &json!({"resource_classes": all}),
    ))
}

/// `GET /resource_classes/{name}`.
pub(crate) fn show(state: &State<'_>, name: &str) -> Result<Reply, ApiError> {
    if state.class_exists(name) {
        Ok(json_reply(StatusCode::OK, &class_json(name)))
    } else {
        Err(ApiError::not_found(format!(
            "No such resource class {name}."
        )))
    }
}

fn check_custom(name: &str) -> Result<(), ApiError> {
    if is_custom_name(name) {
        Ok(())
    } else {
        Err(body::invalid(format!(
            "{name:?} does not match '^CUSTOM_[A-Z0-9_]+$': custom resource classes start with CUSTOM_ and use A-Z, 0-9 and _"
        )))
    }
}

/// `POST /resource_classes` with `{"name": …}`: 201, or 409 when it exists.
pub(crate) fn create(state: &mut State<'_>, call: &Call) -> Result<Reply, ApiError> {
    let b = body::object(call)?;
    body::only(&b, &["name"])?;
    body::required(&b, "name")?;
    let name = body::string(&b, "name", 255)?.unwrap_or_default();
    check_custom(&name)?;
    if state.class_exists(&name) {
        return Err(ApiError::conflict(format!(
            "Conflicting resource class already exists: {name}"
        )));
    }
    state.add_custom_class(&name)?;
    Ok(located(
        empty(StatusCode::CREATED),
        &super::providers::location(call, &format!("/resource_classes/{name}")),
    ))
}

/// `PUT /resource_classes/{name}` (1.7): 201 when created, 204 when it existed, each with
/// the class's `Location`.
pub(crate) fn put(state: &mut State<'_>, name: &str, call: &Call) -> Result<Reply, ApiError> {
    check_custom(name)?;
    let status = if state.add_custom_class(name)? {
        StatusCode::CREATED
    } else {
        StatusCode::NO_CONTENT
    };
    Ok(located(
        empty(status),
        &super::providers::location(call, &format!("/resource_classes/{name}")),
    ))
}

/// `PUT /resource_classes/{name}` with `{"name": NEW}` (1.2–1.6): renames a custom class.
/// A class some provider has an inventory of keeps its name (409): inventories and
/// allocations name their class, and renaming it would rewrite every one of them.
pub(crate) fn rename(state: &mut State<'_>, name: &str, call: &Call) -> Result<Reply, ApiError> {
    let b = body::object(call)?;
    body::only(&b, &["name"])?;
    body::required(&b, "name")?;
    let new = body::string(&b, "name", 255)?.unwrap_or_default();
    check_custom(&new)?;
    if !state.class_exists(name) {
        return Err(ApiError::not_found(format!(
            "No such resource class {name}."
        )));
    }
    if standard_resource_classes().contains(&name) {
        return Err(ApiError::bad_request(format!(
            "{name} is a standard resource class and cannot be renamed; only custom classes can"
        )));
    }
    if new != name && state.class_exists(&new) {
        return Err(ApiError::conflict(format!(
            "A resource class named {new} already exists"
        )));
    }
    if in_inventory(state, name) {
        return Err(ApiError::conflict(format!(
            "{name} cannot be renamed while a resource provider has an inventory of it"
        )));
    }
    if new != name {
        state.remove_custom_class(name)?;
        state.add_custom_class(&new)?;
    }
    Ok(json_reply(StatusCode::OK, &class_json(&new)))
}

/// Whether some provider has an inventory of the class.
fn in_inventory(state: &State<'_>, name: &str) -> bool {
    state.store().list(Kind::ResourceProvider).any(
        |o| matches!(o, Object::ResourceProvider(rp) if rp.spec.inventories.contains_key(name)),
    )
}

/// `DELETE /resource_classes/{name}`.
pub(crate) fn delete(state: &mut State<'_>, name: &str) -> Result<Reply, ApiError> {
    if standard_resource_classes().contains(&name) {
        return Err(ApiError::bad_request(format!(
            "Error in delete resource class: Cannot delete standard resource class {name}."
        )));
    }
    if !state.custom_classes().contains(name) {
        return Err(ApiError::not_found(format!(
            "No such resource class {name}."
        )));
    }
    if in_inventory(state, name) {
        return Err(ApiError::conflict(format!(
            "Error in delete resource class: Resource class {name} is in use in inventory."
        )));
    }
    state.remove_custom_class(name)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

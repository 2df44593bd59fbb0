//! `/traits`, `/traits/{name}` and `/resource_providers/{uuid}/traits` (1.6).
//!
//! Standard traits always exist; custom ones exist once created with `PUT /traits/{name}`
//! (or used by a seeded provider). A provider's traits read back as its effective traits.

use std::collections::BTreeSet;

use http::StatusCode;
use serde_json::{Value, json};

use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::query::decode_pairs;
use kubeplace_core::placement::standard_traits;

use crate::placement_api::request::body;
use crate::placement_api::request::call::Call;
use crate::placement_api::request::wire::{ApiError, Reply, empty, json_reply, located};
use kubeplace_policy::placement_records::State;

/// A provider's effective traits, in the order Placement reads them back: by name where it
/// looks them up by name (the answer to setting them), else in the order of their rows
/// (standard traits first).
fn provider_traits(state: &State<'_>, name: &str, order: Order) -> Vec<String> {
    let mut traits: Vec<String> = state
        .store()
        .index()
        .effective(name)
        .map(|(_, traits)| traits.into_iter().collect())
        .unwrap_or_default();
    order.sort(state, &mut traits);
    traits
}

/// How Placement orders a list of traits: its SQL reads them by the name's index when it
/// asks for names it was given (`name=in:`, the answer to a PUT), else in the order of the
/// rows: the standard traits, then the custom ones as they were created.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    ByName,
    Rows,
}

impl Order {
    fn sort(self, state: &State<'_>, traits: &mut [String]) {
        match self {
            Order::ByName => traits.sort(),
            Order::Rows => state.store().index().trait_rows().sort(traits),
        }
    }
}

fn provider_body(state: &State<'_>, uuid: &str, name: &str, order: Order) -> Value {
    json!({"traits": provider_traits(state, name, order),
           "resource_provider_generation": state.generation(uuid)})
}

/// `GET /resource_providers/{uuid}/traits`.
pub(crate) fn of_provider(state: &State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    Ok(json_reply(
        StatusCode::OK,
        &provider_body(state, uuid, &name, Order::Rows),
    ))
}

/// Unknown traits among `names`: Placement's 400.
fn check_known<'a>(
    state: &State<'_>,
    names: impl IntoIterator<Item = &'a String>,
) -> Result<(), ApiError> {
    let unknown: Vec<&str> = names
        .into_iter()
        .filter(|t| !state.trait_exists(t))
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "No such trait(s): {}",
            unknown.join(", ")
        )))
    }
}

/// Stores a provider's traits and moves its generation.
fn store_traits(
    state: &mut State<'_>,
    uuid: &str,
    name: &str,
    traits: Vec<String>,
) -> Result<(), ApiError> {
    let mut rp = state.provider_object(name)?;
    rp.spec.traits = traits;
    state.write_provider(rp)?;
    state.bump(uuid)?;
    Ok(())
}

/// `PUT /resource_providers/{uuid}/traits`: replaces the provider's traits.
pub(crate) fn set_on_provider(
    state: &mut State<'_>,
    uuid: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let b = body::object(call)?;
    body::only(&b, &["traits", "resource_provider_generation"])?;
    let generation = body::provider_generation(&b)?;
    let Some(Value::Array(items)) = b.get("traits") else {
        return Err(body::invalid(
            "\"traits\" is a required property: a list of trait names",
        ));
    };
    let mut traits = BTreeSet::new();
    for item in items {
        let Some(t) = item.as_str() else {
            return Err(body::invalid(format!("traits: {item} is not a string")));
        };
        traits.insert(t.to_string());
    }
    check_known(state, &traits)?;
    state.check_generation(uuid, generation)?;
    store_traits(state, uuid, &name, traits.into_iter().collect())?;
    Ok(json_reply(
        StatusCode::OK,
        &provider_body(state, uuid, &name, Order::ByName),
    ))
}

/// `DELETE /resource_providers/{uuid}/traits`.
pub(crate) fn clear_on_provider(state: &mut State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    store_traits(state, uuid, &name, Vec::new())?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// Traits some provider's spec names.
fn associated(state: &State<'_>) -> BTreeSet<String> {
    state
        .store()
        .list(Kind::ResourceProvider)
        .filter_map(|o| match o {
            Object::ResourceProvider(rp) => Some(rp.spec.traits.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// `GET /traits?name=in:A,B|startswith:P&associated=true|false`.
pub(crate) fn list(state: &State<'_>, query: &str) -> Result<Reply, ApiError> {
    let pairs = decode_pairs(query).map_err(ApiError::from)?;
    let mut names: BTreeSet<String> = standard_traits().iter().map(|t| t.to_string()).collect();
    names.extend(state.custom_traits().iter().cloned());
    let mut order = Order::Rows;
    for (key, value) in &pairs {
        match key.as_str() {
            "name" => {
                if let Some(list) = value.strip_prefix("in:") {
                    order = Order::ByName;
                    let wanted: BTreeSet<&str> = list.split(',').map(str::trim).collect();
                    names.retain(|n| wanted.contains(n.as_str()));
                } else if let Some(prefix) = value.strip_prefix("startswith:") {
                    names.retain(|n| n.starts_with(prefix));
                } else {
                    return Err(ApiError::bad_request(format!(
                        "Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"{value}\""
                    )));
                }
            }
            "associated" => {
                let wanted = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "associated={value}: the value must be true or false"
                        )));
                    }
                };
                let used = associated(state);
                names.retain(|n| used.contains(n) == wanted);
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "Invalid query string parameters: {key} is not one of name, associated"
                )));
            }
        }
    }
    let mut names: Vec<String> = names.into_iter().collect();
    order.sort(state, &mut names);
    Ok(json_reply(StatusCode::OK, &json!({"traits": names})))
}

/// `GET /traits/{name}`: 204 when it exists.
pub(crate) fn show(state: &State<'_>, name: &str) -> Result<Reply, ApiError> {
    if state.trait_exists(name) {
        Ok(empty(StatusCode::NO_CONTENT))
    } else {
        Err(ApiError::not_found(format!("No such trait(s): {name}.")))
    }
}

/// Whether a name is a custom trait or class name Placement would create.
pub(crate) fn is_custom_name(name: &str) -> bool {
    name.len() > "CUSTOM_".len()
        && name.starts_with("CUSTOM_")
        && kubeplace_core::placement::is_placement_name(name)
}

/// `PUT /traits/{name}`: 201 when created, 204 when it existed.
pub(crate) fn create(state: &mut State<'_>, name: &str, call: &Call) -> Result<Reply, ApiError> {
    if !is_custom_name(name) {
        return Err(ApiError::bad_request(format!(
            "The trait {name:?} is invalid. A valid trait must be no longer than 255 characters, start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\""
        )));
    }
    let location = super::providers::location(call, &format!("/traits/{name}"));
    if state.add_custom_trait(name)? {
        Ok(located(empty(StatusCode::CREATED), &location))
    } else {
        Ok(located(empty(StatusCode::NO_CONTENT), &location))
    }
}

/// `DELETE /traits/{name}`.
pub(crate) fn delete(state: &mut State<'_>, name: &str) -> Result<Reply, ApiError> {
    if standard_traits().binary_search(&name).is_ok() {
        return Err(ApiError::bad_request(format!(
            "Cannot delete standard trait {name}."
        )));
    }
    if !state.custom_traits().contains(name) {
        return Err(ApiError::not_found(format!("No such trait(s): {name}.")));
    }
    if associated(state).contains(name) {
        return Err(ApiError::conflict(format!(
            "The trait {name} is in use by a resource provider."
        )));
    }
    state.remove_custom_trait(name)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

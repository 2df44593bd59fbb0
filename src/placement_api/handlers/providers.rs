//! `/resource_providers`, `/resource_providers/{uuid}` and its aggregates.
//!
//! A provider created through the API is a ResourceProvider object named after its
//! Placement name (see [`kubeplace_api::provider_name`]) whose `spec.uuid` is the uuid given (else
//! kubeplace's UUIDv5 of the name), written through admission.

use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Map, Value, json};

use kubeplace_api::{Kind, Object, ResourceProvider, ResourceProviderSpec, SortedMap};
use kubeplace_core::placement::kept_answers::Asked;
use kubeplace_core::placement::list_parts::ListParts;
use kubeplace_core::placement::query::parse_providers_query;
use kubeplace_core::placement::resource_providers::matching_providers_within;
use kubeplace_core::placement::response::{
    Listed, ProvidersStream, provider_links, providers_json_parts,
};
use kubeplace_core::placement::{derived_provider_uuid, is_uuid_like};
use kubeplace_policy::admission::{Operation, admit};
use kubeplace_policy::store::ObjectKey;

use crate::placement_api::api::PlacementApi;
use crate::placement_api::kept_answers::{Answers, ListKeeping, asked};
use crate::placement_api::request::body;
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::wire::{
    ApiError, Reply, ReplyBody, SpareParts, code, empty, json_bytes_reply, json_reply, list_part,
    located,
};
use kubeplace_api::provider_name::{name_provider, object_name};
use kubeplace_policy::placement_records::State;

/// From this many providers a list is sent while it is made ([`ReplyBody::streamed`]).
/// Below it, a list (under about 4.5 MB at 1.14 and later) is written whole sooner than
/// its parts are handed from a thread of their own to the connection.
const STREAMED_FROM: usize = 6_144;

/// How many bytes of list parts are kept for later answers ([`ListParts`]): every list of
/// the 10k-tree bench cloud (45,010 providers) that holds more than a few thousand, with
/// room to spare.
const KEPT_LIST_BYTES: usize = 64 << 20;

/// The list parts kept for later answers, shared by every list this process serves (a part
/// is known again by the very entries it was written from, whatever index they are in).
static KEPT_LIST_PARTS: LazyLock<ListParts> = LazyLock::new(|| ListParts::new(KEPT_LIST_BYTES));

/// Longest provider name Placement stores.
const MAX_NAME: usize = 200;

/// The links of a provider at a version.
fn links(uuid: &str, ctx: &Ctx) -> Value {
    provider_links(uuid, ctx.mv)
        .map(|(rel, href)| json!({"rel": rel, "href": href}))
        .collect()
}

/// A provider as Placement shows it at a version.
pub(crate) fn provider_json(state: &State<'_>, ctx: &Ctx, name: &str) -> Result<Value, ApiError> {
    let record = state.record(name)?;
    let mut v = json!({
        "uuid": record.uuid,
        "name": state.placement_name(name),
        "generation": state.generation(&record.uuid),
        "links": links(&record.uuid, ctx),
    });
    if ctx.mv.0 >= 14 {
        let index = state.store().index();
        let parent = record.parent.as_deref().and_then(|p| state.uuid_of(p));
        let root = index
            .root_of(name)
            .ok()
            .and_then(|r| state.uuid_of(&r))
            .unwrap_or_else(|| record.uuid.clone());
        v["parent_provider_uuid"] = parent.map(Value::from).unwrap_or(Value::Null);
        v["root_provider_uuid"] = Value::from(root);
    }
    Ok(v)
}

/// `GET /resource_providers?…`: the query filters of `kubeplace placement providers`.
/// The providers and their generations are read under the lock; the body is written after
/// it, from the index as it was then (a large list is megabytes), mostly from each
/// provider's kept JSON ([`providers_json_parts`]). A list asked again of the same index
/// and generations is sent as it was kept whole.
pub(crate) fn list(api: &PlacementApi, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let asked = asked(ctx, call);
    let ((index, listed), generations) =
        match api.read(|state| listed(state, ctx, call, &api.answers, &asked))? {
            Listing::Kept(parts) => {
                return Ok(json_bytes_reply(
                    StatusCode::OK,
                    ReplyBody::from_parts(parts),
                ));
            }
            Listing::Found(found, generations) => (found, generations),
        };
    // A large list whose entries are kept is sent while it is made: copying megabytes of
    // entries and sending them overlap (without a thread to make it on, it is made here).
    // A smaller one is made here. Either way, a part already sent before, unchanged, is
    // sent from the bytes kept for it.
    let mut stream = match ProvidersStream::new(index, listed, ctx.mv) {
        Ok(stream) => stream,
        Err((index, listed)) => {
            let threads = kubeplace_core::runs::cores();
            let parts = providers_json_parts(&index, &listed, ctx.mv, threads, &SpareParts);
            return Ok(json_bytes_reply(
                StatusCode::OK,
                ReplyBody::from_kept_parts(parts),
            ));
        }
    };
    let keeping = ListKeeping::new(
        Arc::clone(&api.answers),
        asked,
        Arc::clone(stream.index()),
        generations,
    );
    // Only a body sent before it is made needs its length first; a body whose every part
    // is kept is made at once.
    let (here, len) = if stream.entries() < STREAMED_FROM {
        (true, 0)
    } else {
        let len = stream.len(&KEPT_LIST_PARTS);
        (stream.is_kept(), len)
    };
    // The whole list is kept once its last part is made (not when the client went away
    // before it was).
    let mut keeping = Some(keeping);
    let next = move || match stream.next_part(&KEPT_LIST_PARTS, &SpareParts) {
        Some(part) => {
            if let Some(keeping) = keeping.as_mut() {
                keeping.add(&part);
            }
            Some(list_part(part))
        }
        None => {
            if let Some(keeping) = keeping.take() {
                keeping.keep();
            }
            None
        }
    };
    let body = if here {
        ReplyBody::from_parts(std::iter::from_fn(next))
    } else {
        match ReplyBody::streamed(len, next) {
            Ok(body) => body,
            Err(next) => ReplyBody::from_parts(std::iter::from_fn(next)),
        }
    };
    Ok(json_bytes_reply(StatusCode::OK, body))
}

/// What a list query finds: the list kept for it whole, or the providers to list, with the
/// index and the generations' mark they were read at.
enum Listing {
    Kept(Vec<Bytes>),
    Found(Listed, u64),
}

/// The providers a list query finds (see [`list`]), or the list kept for it when neither
/// the index nor any generation changed since it was written.
fn listed(
    state: &State<'_>,
    ctx: &Ctx,
    call: &Call,
    answers: &Answers,
    asked: &Asked,
) -> Result<Listing, ApiError> {
    let mut q = parse_providers_query(&call.query, ctx.mv).map_err(ApiError::from)?;
    q.name = q.name.as_deref().map(object_name);
    let unknown: Vec<&String> = q
        .filters
        .required
        .iter()
        .flatten()
        .chain(&q.filters.forbidden)
        .filter(|t| !state.trait_exists(t))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        return Err(ApiError::bad_request(format!(
            "No such trait(s): {}.",
            names.join(", ")
        )));
    }
    if let Some(class) = q.filters.resources.keys().find(|c| !state.class_exists(c)) {
        return Err(ApiError::bad_request(format!(
            "Invalid resource class in resources parameter: No such resource class {class}."
        )));
    }
    let index = state.store().index_now();
    let generations = state.generations_mark();
    if let Some(parts) = answers.list(asked, &index, generations) {
        return Ok(Listing::Kept(parts));
    }
    // Tried where the request was read, a list that would judge more providers than that
    // allows is made on a thread apart (in_place); apart, every provider may be judged.
    let most = call
        .in_place
        .steps()
        .map_or(usize::MAX, |s| usize::try_from(s).unwrap_or(usize::MAX));
    let found =
        matching_providers_within(&index, &q, most).ok_or_else(|| call.in_place.outgrow())?;
    let listed = state.with_generations(&found);
    Ok(Listing::Found((index, listed), generations))
}

/// `GET /resource_providers/{uuid}`.
pub(crate) fn show(state: &State<'_>, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    Ok(json_reply(
        StatusCode::OK,
        &provider_json(state, ctx, &name)?,
    ))
}

/// The fields of a create or update body at a version.
fn fields(ctx: &Ctx, create: bool) -> Vec<&'static str> {
    let mut f = vec!["name"];
    if create {
        f.push("uuid");
    }
    if ctx.mv.0 >= 14 {
        f.push("parent_provider_uuid");
    }
    f
}

/// The name of the parent with this uuid, or Placement's 400.
fn parent_name(state: &State<'_>, parent_uuid: &str) -> Result<String, ApiError> {
    state.provider_name(parent_uuid).map_err(|_| {
        ApiError::bad_request(format!(
            "parent provider UUID cannot be found: no provider has uuid {parent_uuid}"
        ))
    })
}

/// `POST /resource_providers`.
pub(crate) fn create(state: &mut State<'_>, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let b = body::object(call)?;
    body::only(&b, &fields(ctx, true))?;
    body::required(&b, "name")?;
    let name = body::string(&b, "name", MAX_NAME)?.unwrap_or_default();
    let given_uuid = body::uuid(&b, "uuid", false)?;
    let uuid = given_uuid
        .clone()
        .unwrap_or_else(|| derived_provider_uuid(&name));
    let parent_uuid = body::uuid(&b, "parent_provider_uuid", true)?;
    // A given uuid is checked first, as Placement's database reports it first when both
    // are taken: Nova's report client reads "Conflicting resource provider name:" as a
    // real name clash and fails, and anything else as another worker having created the
    // same provider, which it then reads back. A uuid derived from a taken name is a name
    // clash (Placement's would be a fresh random uuid). Both have the duplicate_name code.
    let name_taken = state.store().index().contains(&object_name(&name));
    let uuid_taken = !state.store().index().names_with_uuid(&uuid).is_empty();
    if uuid_taken && (given_uuid.is_some() || !name_taken) {
        return Err(ApiError::conflict(format!(
            "Conflicting resource provider uuid: {uuid} already exists."
        ))
        .with_code(code::DUPLICATE_NAME));
    }
    if name_taken {
        return Err(ApiError::conflict(format!(
            "Conflicting resource provider name: {name} already exists."
        ))
        .with_code(code::DUPLICATE_NAME));
    }
    let parent = parent_uuid
        .as_deref()
        .map(|p| parent_name(state, p))
        .transpose()?;
    let mut rp = ResourceProvider::new(
        &name,
        ResourceProviderSpec {
            numa_cell: None,
            uuid: Some(uuid.clone()),
            parent,
            inventories: SortedMap::new(),
            traits: Vec::new(),
            aggregates: Vec::new(),
        },
    );
    name_provider(&mut rp, &name);
    let object = object_name(&name);
    state.write_provider(rp)?;
    state.forget(&uuid)?;
    let location = location(call, &format!("/resource_providers/{uuid}"));
    let reply = if ctx.mv.0 >= 20 {
        json_reply(StatusCode::OK, &provider_json(state, ctx, &object)?)
    } else {
        empty(StatusCode::CREATED)
    };
    Ok(located(reply, &location))
}

/// An absolute URL on this server as the caller reached it, as Placement gives in
/// `Location`.
pub(crate) fn location(call: &Call, path: &str) -> String {
    call.origin.url(&call.headers, path)
}

/// `PUT /resource_providers/{uuid}`: the name, and from 1.14 the parent.
pub(crate) fn update(
    state: &mut State<'_>,
    ctx: &Ctx,
    uuid: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let b = body::object(call)?;
    body::only(&b, &fields(ctx, false))?;
    body::required(&b, "name")?;
    let new_name = body::string(&b, "name", MAX_NAME)?.unwrap_or_default();
    let mut rp = state.provider_object(&name)?;
    let before = rp.spec.clone();
    if ctx.mv.0 >= 14 && b.contains_key("parent_provider_uuid") {
        let wanted = body::uuid(&b, "parent_provider_uuid", true)?
            .map(|p| parent_name(state, &p))
            .transpose()?;
        // Placement lets a provider change or lose its parent from 1.37 (a cycle is
        // refused by admission); before, only a root may be given one.
        if ctx.mv.0 < 37 && rp.spec.parent.is_some() && wanted != rp.spec.parent {
            let what = if wanted.is_none() {
                "un-parenting"
            } else {
                "re-parenting"
            };
            return Err(ApiError::bad_request(format!(
                "{what} a provider is not currently allowed: provider {uuid} keeps parent {:?}; microversion 1.37 or later allows it",
                rp.spec
                    .parent
                    .as_deref()
                    .and_then(|p| state.uuid_of(p))
                    .unwrap_or_default()
            )));
        }
        rp.spec.parent = wanted;
    }
    if new_name != state.placement_name(&name) {
        rename(state, &name, &new_name, rp)?;
    } else if rp.spec != before {
        state.write_provider(rp)?;
    }
    // Placement keeps the generation when only the name or parent changes.
    show(state, ctx, uuid)
}

/// Renames a provider: its object is re-keyed under the new name. Children and allocations
/// name their provider, so a provider that has either keeps its name (409).
fn rename(
    state: &mut State<'_>,
    name: &str,
    new_name: &str,
    mut rp: ResourceProvider,
) -> Result<(), ApiError> {
    let index = state.store().index();
    let new_object = object_name(new_name);
    if new_object != name && index.contains(&new_object) {
        return Err(ApiError::conflict(format!(
            "Conflicting resource provider name: {new_name} already exists."
        ))
        .with_code(code::DUPLICATE_NAME));
    }
    if new_object == name {
        // Only the Placement name changes: the object keeps its name.
        name_provider(&mut rp, new_name);
        return Ok(state.write_provider(rp)?);
    }
    let index = state.store().index();
    let in_use = index
        .usages(name)
        .is_some_and(|u| u.values().any(|n| *n > 0));
    if !index.children(name).is_empty() || in_use {
        return Err(ApiError::conflict(format!(
            "kubeplace cannot rename provider {name:?} to {new_name:?} while it has child providers or allocations: they name it"
        )));
    }
    // A provider's uuid never changes: one derived from the old name is written down.
    if rp.spec.uuid.is_none() {
        rp.spec.uuid = Some(derived_provider_uuid(name));
    }
    let key = ObjectKey::cluster(Kind::ResourceProvider, name);
    let old = state.delete(&key)?;
    name_provider(&mut rp, new_name);
    rp.metadata.generation = None;
    rp.metadata.resource_version = None;
    rp.metadata.uid = None;
    if let Err(e) = state.write_provider(rp) {
        if let Some(old) = old {
            state.put(old)?;
        }
        return Err(e.into());
    }
    Ok(())
}

/// `DELETE /resource_providers/{uuid}`.
pub(crate) fn delete(state: &mut State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let index = state.store().index();
    if !index.children(&name).is_empty() {
        return Err(ApiError::conflict(format!(
            "Unable to delete parent resource provider {uuid}: It has child resource providers."
        ))
        .with_code(code::PROVIDER_PARENT));
    }
    if index
        .usages(&name)
        .is_some_and(|u| u.values().any(|n| *n > 0))
    {
        return Err(ApiError::conflict(format!(
            "Unable to delete resource provider {uuid}: Resource provider has allocations."
        ))
        .with_code(code::PROVIDER_INUSE));
    }
    let rp = state.provider_object(&name)?;
    let object = Object::ResourceProvider(rp);
    let verdict = admit(Operation::Delete, &object, None, state.store());
    if !verdict.allowed {
        return Err(ApiError::conflict(verdict.message));
    }
    state.delete(&ObjectKey::cluster(Kind::ResourceProvider, &name))?;
    state.forget(uuid)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// The aggregates body: from 1.19 with the provider's generation.
fn aggregates_body(
    state: &State<'_>,
    ctx: &Ctx,
    uuid: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let record = state.record(name)?;
    let mut v = json!({"aggregates": record.aggregates.into_iter().collect::<Vec<_>>()});
    if ctx.mv.0 >= 19 {
        v["resource_provider_generation"] = Value::from(state.generation(uuid));
    }
    Ok(v)
}

/// `GET /resource_providers/{uuid}/aggregates`.
pub(crate) fn aggregates(state: &State<'_>, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    Ok(json_reply(
        StatusCode::OK,
        &aggregates_body(state, ctx, uuid, &name)?,
    ))
}

/// `PUT /resource_providers/{uuid}/aggregates`: a list of uuids, from 1.19 an object with
/// the list and the provider's generation.
pub(crate) fn set_aggregates(
    state: &mut State<'_>,
    ctx: &Ctx,
    uuid: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let (list, generation) = if ctx.mv.0 >= 19 {
        let b: Map<String, Value> = body::object(call)?;
        body::only(&b, &["aggregates", "resource_provider_generation"])?;
        let generation = body::provider_generation(&b)?;
        (body::required(&b, "aggregates")?.clone(), Some(generation))
    } else {
        (body::json(call)?, None)
    };
    let Value::Array(items) = list else {
        return Err(body::invalid(format!(
            "aggregates is {list}, not a list of uuids"
        )));
    };
    // Placement keeps each aggregate as the string it was given (with or without hyphens,
    // in any case, braced or as a urn), compares them as strings and answers with them.
    let mut sent: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for item in &items {
        match item.as_str().filter(|s| is_uuid_like(s)) {
            Some(s) if !seen.insert(s) => {
                return Err(body::invalid(format!(
                    "aggregates lists {s} more than once; give each aggregate once"
                )));
            }
            Some(s) => sent.push(s.to_string()),
            None => {
                return Err(body::invalid(format!(
                    "aggregates: {item} is not a uuid (32 hex digits, with or without hyphens)"
                )));
            }
        }
    }
    if let Some(generation) = generation {
        state.check_generation(uuid, generation)?;
    }
    let mut aggregates = sent.clone();
    aggregates.sort();
    let mut rp = state.provider_object(&name)?;
    rp.spec.aggregates = aggregates;
    state.write_provider(rp)?;
    // Only the 1.19 form, which carries a generation, moves it, as in Placement.
    if ctx.mv.0 >= 19 {
        state.bump(uuid)?;
    }
    // The answer lists the aggregates as they were sent, as Placement's does.
    let mut v = json!({ "aggregates": sent });
    if ctx.mv.0 >= 19 {
        v["resource_provider_generation"] = Value::from(state.generation(uuid));
    }
    Ok(json_reply(StatusCode::OK, &v))
}

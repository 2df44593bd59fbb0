//! Consumers' allocations (`/allocations/{consumer}`), a provider's allocations and usages,
//! and `GET /allocation_candidates`.
//!
//! A consumer's allocations written through the API are one Allocation object named by the
//! consumer's uuid, admitted like any other Allocation: admission decides capacity, under
//! the state's write lock, so concurrent claims cannot oversubscribe a provider. Seeded
//! consumers may have several Allocation objects; a write replaces them all.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use http::StatusCode;
use serde_json::{Map, Value, json};

use kubeplace_api::{Allocation, AllocationSpec, Object, ProviderAllocation};
use kubeplace_core::placement::candidates::choice::choose;
use kubeplace_core::placement::candidates::{
    SpareCandidates, allocation_candidates_within, try_allocation_candidates_until,
};
use kubeplace_core::placement::candidates_parts::CandidatesParts;
use kubeplace_core::placement::query::{decode_pairs, parse_candidates_query};
use kubeplace_core::placement::response::candidates_body;
use kubeplace_policy::store::ObjectKey;

use crate::placement_api::api::PlacementApi;
use crate::placement_api::kept_answers::asked;
use crate::placement_api::request::body::{self, KeyOrder};
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::searches;
use crate::placement_api::request::wire::{
    ApiError, Reply, ReplyBody, SpareParts, candidates_part, code, empty, json_bytes_reply,
    json_reply,
};
use kubeplace_policy::placement_records::{
    CONSUMER_GENERATION_ANNOTATION, CONSUMER_TYPE_ANNOTATION, Consumer, PROJECT_ANNOTATION, State,
    UNKNOWN_CONSUMER_TYPE, UNKNOWN_PROJECT, USER_ANNOTATION,
};

/// A consumer's resources per provider name, summed over its Allocation objects.
fn by_provider(state: &State<'_>, consumer: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (_, a) in state.consumer_allocations(consumer) {
        for pa in a.spec.allocations {
            let entry = out.entry(pa.provider).or_default();
            for (class, n) in pa.resources {
                *entry.entry(class).or_insert(0) += n;
            }
        }
    }
    out
}

/// A consumer's resources per provider name, summed over its Allocation objects, the
/// providers in the order the objects list them (the order they were written in).
fn in_written_order(state: &State<'_>, consumer: &str) -> Vec<(String, BTreeMap<String, i64>)> {
    let mut out = InOrder::default();
    for (_, a) in state.consumer_allocations(consumer) {
        for pa in a.spec.allocations {
            let resources = out.entry(pa.provider);
            for (class, n) in pa.resources {
                *resources.entry(class).or_insert(0) += n;
            }
        }
    }
    out.list
}

/// Resources per provider, the providers in the order first named: a provider named again
/// (a list's entries, one uuid in two cases, several Allocation objects) keeps its first
/// place.
#[derive(Default)]
struct InOrder {
    list: Vec<(String, BTreeMap<String, i64>)>,
    place: HashMap<String, usize>,
}

impl InOrder {
    fn entry(&mut self, provider: String) -> &mut BTreeMap<String, i64> {
        let at = match self.place.get(&provider) {
            Some(at) => *at,
            None => {
                self.place.insert(provider.clone(), self.list.len());
                self.list.push((provider, BTreeMap::new()));
                self.list.len() - 1
            }
        };
        &mut self.list[at].1
    }
}

/// A consumer's allocations answer: `allocations` with its providers in the order given,
/// then the other fields.
struct ConsumerBody {
    allocations: Vec<(String, Value)>,
    rest: Map<String, Value>,
}

impl serde::Serialize for ConsumerBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct InOrder<'a>(&'a [(String, Value)]);
        impl serde::Serialize for InOrder<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
            }
        }
        let mut m = s.serialize_map(Some(1 + self.rest.len()))?;
        m.serialize_entry("allocations", &InOrder(&self.allocations))?;
        for (k, v) in &self.rest {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `GET /allocations/{consumer}`: its providers in the order its allocations were last
/// written, as Placement lists them (the order of their rows).
pub(crate) fn show(state: &State<'_>, ctx: &Ctx, consumer: &str) -> Result<Reply, ApiError> {
    let mut allocations = Vec::new();
    for (provider, resources) in in_written_order(state, consumer) {
        let Some(uuid) = state.uuid_of(&provider) else {
            continue;
        };
        let entry = json!({"generation": state.generation(&uuid), "resources": resources});
        allocations.push((uuid, entry));
    }
    let mut rest = Map::new();
    if let Some(c) = state.consumer(consumer).filter(|_| !allocations.is_empty()) {
        if ctx.mv.0 >= 12 {
            rest.insert("project_id".into(), Value::from(c.project_id.clone()));
            rest.insert("user_id".into(), Value::from(c.user_id.clone()));
        }
        if ctx.mv.0 >= 28 {
            rest.insert("consumer_generation".into(), Value::from(c.generation));
        }
        if ctx.mv.0 >= 38 {
            rest.insert("consumer_type".into(), Value::from(c.consumer_type.clone()));
        }
    }
    Ok(json_reply(
        StatusCode::OK,
        &ConsumerBody { allocations, rest },
    ))
}

/// What a PUT asks for: amounts per provider uuid (the providers in the order the body
/// wrote them), and the consumer's attributes.
pub(super) struct Wanted {
    resources: Vec<(String, BTreeMap<String, i64>)>,
    project_id: Option<String>,
    user_id: Option<String>,
    pub(super) consumer_generation: Option<i64>,
    consumer_type: Option<String>,
}

/// The fields a PUT body may have at a version.
fn put_fields(ctx: &Ctx) -> Vec<&'static str> {
    let mut f = vec!["allocations"];
    if ctx.mv.0 >= 8 {
        f.extend(["project_id", "user_id"]);
    }
    if ctx.mv.0 >= 28 {
        f.push("consumer_generation");
    }
    if ctx.mv.0 >= 34 {
        f.push("mappings");
    }
    if ctx.mv.0 >= 38 {
        f.push("consumer_type");
    }
    f
}

/// Resources of one provider: `{CLASS: amount ≥ 1}`, at least one.
fn parse_resources(at: &str, v: Option<&Value>) -> Result<BTreeMap<String, i64>, ApiError> {
    let Some(Value::Object(m)) = v else {
        return Err(body::invalid(format!(
            "{at}.resources is required: an object of resource class to amount"
        )));
    };
    if m.is_empty() {
        return Err(body::invalid(format!(
            "{at}.resources is empty; give at least one resource class and amount"
        )));
    }
    m.iter()
        .map(|(class, n)| match n.as_i64() {
            Some(n) if (1..=body::MAX_INT).contains(&n) => Ok((class.clone(), n)),
            _ => Err(body::invalid(format!(
                "{at}.resources.{class} is {n}; amounts are integers of at least 1"
            ))),
        })
        .collect()
}

/// Reads one consumer's allocations in the form of the version: a list before 1.12, an
/// object keyed by provider uuid from 1.12 (which may be empty from 1.28, and in
/// `POST /allocations`, to remove the allocations). `written` is the consumer's entry as
/// the body wrote it, whose order of providers is kept.
pub(super) fn parse_consumer(
    ctx: &Ctx,
    b: &Map<String, Value>,
    written: &KeyOrder,
    may_be_empty: bool,
) -> Result<Wanted, ApiError> {
    body::only(b, &put_fields(ctx))?;
    let mut resources = InOrder::default();
    match (body::required(b, "allocations")?, ctx.mv.0 >= 12) {
        (Value::Array(items), false) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("allocations[{i}]");
                let uuid = item
                    .pointer("/resource_provider/uuid")
                    .and_then(Value::as_str)
                    .filter(|u| body::is_uuid(u))
                    .ok_or_else(|| {
                        body::invalid(format!("{at}.resource_provider.uuid is required: a uuid"))
                    })?;
                let r = parse_resources(&at, item.get("resources"))?;
                resources.entry(body::normalize_uuid(uuid)).extend(r);
            }
        }
        (Value::Object(m), true) if !m.is_empty() || may_be_empty => {
            // The keys in the body's order (the map's own order is sorted).
            let order = written
                .get("allocations")
                .in_order(m.keys().map(String::as_str));
            for uuid in order {
                let value = &m[uuid];
                let at = format!("allocations.{uuid}");
                if !body::is_uuid(uuid) {
                    return Err(body::invalid(format!("{at}: {uuid:?} is not a uuid")));
                }
                if let Value::Object(e) = value {
                    body::only(e, &["resources", "generation"])?;
                }
                let r = parse_resources(&at, value.get("resources"))?;
                *resources.entry(body::normalize_uuid(uuid)) = r;
            }
        }
        (v, _) => {
            let form = if ctx.mv.0 >= 12 {
                "an object of provider uuid to {\"resources\": {CLASS: amount}}"
            } else {
                "a list of {\"resource_provider\": {\"uuid\": …}, \"resources\": {CLASS: amount}}"
            };
            return Err(body::invalid(format!(
                "allocations is {v}; at microversion {} it must be {form}, with at least one entry",
                ctx.mv
            )));
        }
    }
    if ctx.mv.0 >= 8 {
        body::required(b, "project_id")?;
        body::required(b, "user_id")?;
    }
    let consumer_generation = if ctx.mv.0 >= 28 {
        match body::required(b, "consumer_generation")? {
            Value::Null => None,
            v => Some(v.as_i64().ok_or_else(|| {
                body::invalid(format!(
                    "consumer_generation is {v}, not an integer or null"
                ))
            })?),
        }
    } else {
        None
    };
    if ctx.mv.0 >= 38 {
        body::required(b, "consumer_type")?;
    }
    if let Some(m) = b.get("mappings") {
        check_mappings(m)?;
    }
    let consumer_type = body::string(b, "consumer_type", 255)?;
    if let Some(t) = &consumer_type
        && !kubeplace_core::placement::is_placement_name(t)
    {
        return Err(body::invalid(format!(
            "consumer_type is {t:?}; it must be 1 to 255 characters of A-Z, 0-9 and _ (e.g. INSTANCE, MIGRATION)"
        )));
    }
    Ok(Wanted {
        resources: resources.list,
        project_id: body::string(b, "project_id", 255)?,
        user_id: body::string(b, "user_id", 255)?,
        consumer_generation,
        consumer_type,
    })
}

/// `mappings` (1.34): request group suffix → the uuids of the providers that served it,
/// at least one group and one uuid each. Kept by nobody, but checked as Placement does.
fn check_mappings(m: &Value) -> Result<(), ApiError> {
    let Value::Object(groups) = m else {
        return Err(body::invalid(format!(
            "mappings is {m}; it must be an object of request group suffix to a list of provider uuids"
        )));
    };
    if groups.is_empty() {
        return Err(body::invalid(
            "mappings is empty; give at least one request group suffix and its provider uuids, or leave mappings out",
        ));
    }
    for (suffix, uuids) in groups {
        // Placement's schema constrains the keys that hold a suffix's characters.
        if !suffix
            .chars()
            .any(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            continue;
        }
        let listed = match uuids {
            Value::Array(list) if !list.is_empty() => list,
            other => {
                return Err(body::invalid(format!(
                    "mappings.{suffix} is {other}; it must be a list of at least one provider uuid"
                )));
            }
        };
        for u in listed {
            if !u.as_str().is_some_and(kubeplace_core::placement::is_uuid) {
                return Err(body::invalid(format!(
                    "mappings.{suffix} holds {u}, which is not a provider uuid (8-4-4-4-12 hex digits)"
                )));
            }
        }
    }
    Ok(())
}

/// The consumer generation check of 1.28: null for a new consumer, else the current one.
pub(super) fn check_consumer_generation(
    state: &State<'_>,
    consumer: &str,
    sent: Option<i64>,
) -> Result<(), ApiError> {
    let current = state.consumer(consumer).map(|c| c.generation);
    let matches = match (current, sent) {
        (None, None) => true,
        (Some(c), Some(s)) => u64::try_from(s).ok() == Some(c),
        _ => false,
    };
    if matches {
        return Ok(());
    }
    let show = |g: Option<String>| g.unwrap_or_else(|| "null".to_string());
    Err(ApiError::conflict(format!(
        "consumer generation conflict - expected {} but got {}",
        show(current.map(|c| c.to_string())),
        show(sent.map(|s| s.to_string()))
    ))
    .with_code(code::CONCURRENT_UPDATE))
}

/// A consumer uuid from a path or a body key.
pub(super) fn consumer_uuid(consumer: &str) -> Result<String, ApiError> {
    if body::is_uuid(consumer) {
        Ok(body::normalize_uuid(consumer))
    } else {
        Err(ApiError::bad_request(format!(
            "consumer {consumer:?} is not a uuid; consumers are named by uuid"
        )))
    }
}

/// One consumer's checked write: what it asked for and its entries by provider name.
pub(super) struct Plan {
    consumer: String,
    wanted: Wanted,
    entries: Vec<ProviderAllocation>,
}

/// Checks one consumer's write against the state (generation, providers, classes,
/// inventories); capacity is left to admission.
pub(super) fn plan(
    state: &State<'_>,
    ctx: &Ctx,
    consumer: String,
    wanted: Wanted,
) -> Result<Plan, ApiError> {
    if ctx.mv.0 >= 28 {
        check_consumer_generation(state, &consumer, wanted.consumer_generation)?;
    }
    plan_checked(state, consumer, wanted)
}

/// [`plan`], the consumer generation checked already.
pub(super) fn plan_checked(
    state: &State<'_>,
    consumer: String,
    wanted: Wanted,
) -> Result<Plan, ApiError> {
    let mut entries = Vec::new();
    for (uuid, resources) in &wanted.resources {
        let name = state.provider_name(uuid).map_err(|_| {
            ApiError::bad_request(format!(
                "Allocation for resource provider '{uuid}' that does not exist."
            ))
        })?;
        for class in resources.keys() {
            if !state.class_exists(class) {
                return Err(ApiError::bad_request(format!(
                    "Unable to allocate inventory: No such resource class {class}."
                )));
            }
            if state.store().index().inventory(&name, class).is_none() {
                return Err(ApiError::conflict(format!(
                    "Unable to allocate inventory: Inventory for '{class}' on resource provider '{uuid}' invalid."
                )));
            }
        }
        entries.push(ProviderAllocation {
            provider: name,
            resources: resources.clone(),
        });
    }
    Ok(Plan {
        consumer,
        wanted,
        entries,
    })
}

/// `PUT /allocations/{consumer}`: replaces the consumer's allocations.
pub(crate) fn put(
    state: &mut State<'_>,
    ctx: &Ctx,
    consumer: &str,
    call: &Call,
) -> Result<Reply, ApiError> {
    let consumer = consumer_uuid(consumer)?;
    let wanted = parse_consumer(
        ctx,
        &body::object(call)?,
        &KeyOrder::of(call),
        ctx.mv.0 >= 28,
    )?;
    let p = plan(state, ctx, consumer, wanted)?;
    apply(state, vec![p])?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `POST /allocations` (1.13): several consumers' allocations, all written or none. Every
/// old allocation of those consumers is removed before any new one is admitted, so moving
/// resources from one consumer to another on a full provider works (Nova's migrations).
pub(crate) fn post(state: &mut State<'_>, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let b = body::object(call)?;
    if b.is_empty() {
        return Err(body::invalid(
            "the body is empty; give at least one consumer uuid and its allocations",
        ));
    }
    // Every consumer's entry is judged before any is planned: a malformed body is a 400
    // even when a generation in it is also stale.
    let written = KeyOrder::of(call);
    let mut wanted = Vec::new();
    for (key, entry) in &b {
        let consumer = consumer_uuid(key)?;
        let Value::Object(entry) = entry else {
            return Err(body::invalid(format!(
                "{consumer}: {entry} is not an object"
            )));
        };
        wanted.push((
            consumer,
            parse_consumer(ctx, entry, written.get(key), true)?,
        ));
    }
    let mut plans = Vec::new();
    for (consumer, w) in wanted {
        plans.push(plan(state, ctx, consumer, w)?);
    }
    apply(state, plans)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// Writes checked plans atomically under the write lock: every old Allocation object of
/// the consumers goes, then each new one is admitted in turn (seeing the ones before); on a
/// refusal the new ones go and the old ones come back. Then generations move as
/// Placement's do (once per provider per request: those given resources, and for a
/// consumer emptied, those it had; a consumer leaving a provider for another does not move
/// the one left) and the consumers' records are updated.
pub(super) fn apply(state: &mut State<'_>, plans: Vec<Plan>) -> Result<(), ApiError> {
    let previous = plans.iter().map(|p| before(state, &p.consumer)).collect();
    apply_after(state, plans, previous)
}

/// A consumer as it was before a write: its record, and the providers (by name) its
/// allocations were on.
pub(super) struct Before {
    record: Option<Consumer>,
    providers: BTreeSet<String>,
}

/// `consumer` as it is now, for [`apply_after`].
pub(super) fn before(state: &State<'_>, consumer: &str) -> Before {
    Before {
        record: state.consumer(consumer),
        providers: state
            .consumer_allocations(consumer)
            .into_iter()
            .flat_map(|(_, a)| a.spec.allocations.into_iter().map(|pa| pa.provider))
            .collect(),
    }
}

/// [`apply`], given each consumer as it was before the write (a write that removed the
/// consumers' allocations first no longer finds them).
pub(super) fn apply_after(
    state: &mut State<'_>,
    plans: Vec<Plan>,
    previous: Vec<Before>,
) -> Result<(), ApiError> {
    let olds: Vec<Vec<(ObjectKey, Allocation)>> = plans
        .iter()
        .map(|p| state.consumer_allocations(&p.consumer))
        .collect();
    let mut touched: BTreeSet<String> = BTreeSet::new();
    let mut records: Vec<Option<Consumer>> = Vec::new();
    for (p, previous) in plans.iter().zip(previous) {
        if p.entries.is_empty() {
            touched.extend(previous.providers);
        } else {
            touched.extend(p.entries.iter().map(|pa| pa.provider.clone()));
        }
        records.push(record(p, previous.record));
    }
    for old in &olds {
        for (key, _) in old {
            state.delete(key)?;
        }
    }
    let mut written: Vec<ObjectKey> = Vec::new();
    for (p, record) in plans.iter().zip(&records) {
        let Some(record) = record else { continue };
        let mut a = Allocation::new(
            &p.consumer,
            AllocationSpec {
                numa: None,
                consumer: p.consumer.clone(),
                allocations: p.entries.clone(),
            },
        );
        a.metadata.annotations = Some(consumer_annotations(record));
        let key = ObjectKey::cluster(kubeplace_api::Kind::Allocation, &p.consumer);
        if let Err(e) = state.write_allocation(a) {
            for key in &written {
                state.delete(key)?;
            }
            for (_, a) in olds.into_iter().flatten() {
                state.put(Object::Allocation(a))?;
            }
            return Err(e.into());
        }
        written.push(key);
    }
    let uuids: Vec<String> = touched
        .into_iter()
        .filter_map(|name| state.uuid_of(&name))
        .collect();
    for uuid in uuids {
        state.bump(&uuid)?;
    }
    for (p, record) in plans.iter().zip(records) {
        state.set_consumer(&p.consumer, record)?;
    }
    Ok(())
}

/// A consumer's record after a write: its project, user and type (those sent, else those
/// it had) and one more generation; none when it has no allocations left, as Placement
/// deletes such consumers.
fn record(p: &Plan, previous: Option<Consumer>) -> Option<Consumer> {
    if p.entries.is_empty() {
        return None;
    }
    let generation = previous.as_ref().map_or(1, |c| c.generation + 1);
    let keep = |new: &Option<String>, old: Option<String>| {
        new.clone()
            .or(old)
            .unwrap_or_else(|| UNKNOWN_PROJECT.to_string())
    };
    Some(Consumer {
        project_id: keep(
            &p.wanted.project_id,
            previous.as_ref().map(|c| c.project_id.clone()),
        ),
        user_id: keep(
            &p.wanted.user_id,
            previous.as_ref().map(|c| c.user_id.clone()),
        ),
        consumer_type: p
            .wanted
            .consumer_type
            .clone()
            .or(previous.map(|c| c.consumer_type))
            .unwrap_or_else(|| UNKNOWN_CONSUMER_TYPE.to_string()),
        generation,
    })
}

/// The annotations that keep a consumer's attributes on its Allocation object.
fn consumer_annotations(c: &Consumer) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PROJECT_ANNOTATION.to_string(), c.project_id.clone()),
        (USER_ANNOTATION.to_string(), c.user_id.clone()),
        (
            CONSUMER_TYPE_ANNOTATION.to_string(),
            c.consumer_type.clone(),
        ),
        (
            CONSUMER_GENERATION_ANNOTATION.to_string(),
            c.generation.to_string(),
        ),
    ])
}

/// `DELETE /allocations/{consumer}`.
pub(crate) fn delete(state: &mut State<'_>, consumer: &str) -> Result<Reply, ApiError> {
    let consumer = body::normalize_uuid(consumer);
    let objects = state.consumer_allocations(&consumer);
    if objects.is_empty() {
        return Err(ApiError::not_found(format!(
            "No allocations for consumer '{consumer}'"
        )));
    }
    // Placement leaves the providers' generations alone here.
    for (key, _) in objects {
        state.delete(&key)?;
    }
    state.set_consumer(&consumer, None)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_providers/{uuid}/allocations`.
pub(crate) fn of_provider(state: &State<'_>, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let mut per_consumer: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for o in state.store().list(kubeplace_api::Kind::Allocation) {
        let kubeplace_api::Object::Allocation(a) = o else {
            continue;
        };
        for pa in a.spec.allocations.iter().filter(|pa| pa.provider == name) {
            let entry = per_consumer.entry(a.spec.consumer.clone()).or_default();
            for (class, n) in &pa.resources {
                *entry.entry(class.clone()).or_insert(0) += n;
            }
        }
    }
    let allocations: Map<String, Value> = per_consumer
        .into_iter()
        .map(|(consumer, resources)| {
            let mut v = json!({"resources": resources});
            if ctx.mv.0 >= 28
                && let Some(c) = state.consumer(&consumer)
            {
                v["consumer_generation"] = Value::from(c.generation);
            }
            (consumer, v)
        })
        .collect();
    Ok(json_reply(
        StatusCode::OK,
        &json!({"allocations": allocations, "resource_provider_generation": state.generation(uuid)}),
    ))
}

/// `GET /resource_providers/{uuid}/usages`: every class of its inventory, 0 when unused.
pub(crate) fn provider_usages(state: &State<'_>, uuid: &str) -> Result<Reply, ApiError> {
    let name = state.provider_name(uuid)?;
    let index = state.store().index();
    let mut usages: BTreeMap<String, i64> = index
        .effective(&name)
        .map(|(inventories, _)| inventories.into_keys().map(|c| (c, 0)).collect())
        .unwrap_or_default();
    usages.extend(index.usages(&name).unwrap_or_default());
    Ok(json_reply(
        StatusCode::OK,
        &json!({"usages": usages, "resource_provider_generation": state.generation(uuid)}),
    ))
}

/// From this many candidates, an answer's candidates are freed on a thread of their own.
const FREED_APART_FROM: usize = 4_096;

/// The vectors searches gather candidates in, kept from one answer to the next: room for
/// two unlimited answers of 72,000 candidates (9 MiB each) and the runs they were gathered
/// in, so that each such search does not have the kernel map and zero that memory again.
static SPARE_CANDIDATES: SpareCandidates = SpareCandidates::new(32 << 20);

/// How many bytes of candidates answers' parts are kept for later answers, of allocation
/// requests (with the candidates they were written from) and of summaries each: enough for
/// the largest answer of the 10k-tree bench cloud (72,000 candidates: 22 MB of requests
/// written from 9 MB of candidates, 12 MB of summaries), and small enough that the operator
/// serving that cloud stays within its chart's memory limit.
const KEPT_CANDIDATES_BYTES: usize = 32 << 20;

/// The candidates answers' parts kept for later answers, shared by every search this process
/// serves (a part of requests is known again by the index's slots it was written against, a
/// part of summaries by the very summaries it was written from).
static KEPT_CANDIDATES_PARTS: LazyLock<CandidatesParts> =
    LazyLock::new(|| CandidatesParts::new(KEPT_CANDIDATES_BYTES));

/// `GET /allocation_candidates`: what `kubeplace placement candidates` answers, after
/// Placement's checks that every class and trait named exists.
pub(crate) fn candidates(api: &PlacementApi, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let mut q = parse_candidates_query(&call.query, ctx.mv).map_err(ApiError::from)?;
    // Placement's `[placement]` options: the search may need more than the limit to choose
    // from, and a random choice is never the answer kept for the next caller.
    let choosing = api.choosing;
    let limit = q.limit;
    if !choosing.is_plain() {
        q.limit = choosing.search_limit(limit);
    }
    // The names are checked under the lock; the search runs over the index as it was then,
    // without the lock, so a long search keeps no write (and no reader behind it) waiting.
    let index = api.read(|state| match state.unknown_names(&q) {
        Some(detail) => Err(ApiError::bad_request(detail)),
        None => Ok(state.store().index_now()),
    })?;
    let asked = asked(ctx, call);
    if let Some(answer) = api
        .answers
        .candidates(&asked, &index)
        .filter(|_| !choosing.randomize)
    {
        return Ok(json_bytes_reply(
            StatusCode::OK,
            ReplyBody::from_parts(answer),
        ));
    }
    let searched = match call.in_place.steps() {
        // Tried where the request was read: a search that needs more steps is asked again
        // on a thread apart (in_place).
        Some(steps) => {
            match allocation_candidates_within(&index, &q, &call.stop, &SPARE_CANDIDATES, steps) {
                Some(set) => Ok(set),
                None => return Err(call.in_place.outgrow()),
            }
        }
        None => try_allocation_candidates_until(&index, &q, &call.stop, &SPARE_CANDIDATES),
    };
    if call.stop.is_stopped() {
        return Err(searches::past_deadline(api.searches.limits().deadline));
    }
    // Without a limit, a search that runs out of budget is a 400 naming the budget; with
    // one, it answers with the candidates found.
    let mut set = searched.map_err(|e| ApiError::bad_request(e.to_string()))?;
    if !choosing.is_plain() {
        choose(&index, &mut set, limit, &choosing, &mut |n| {
            fastrand::usize(..n)
        });
    }
    // A large answer (tens of megabytes) is written on every core, and sent in the parts
    // written apart.
    let threads = kubeplace_core::runs::cores();
    let parts = candidates_body(&index, &set, ctx.mv).to_json_parts_kept(
        threads,
        &SpareParts,
        Some(&KEPT_CANDIDATES_PARTS),
    );
    // Freeing tens of thousands of candidates takes milliseconds (many allocated on other
    // threads): done beside sending the answer rather than before it. Their vector is kept
    // for the next search.
    if set.candidates.len() >= FREED_APART_FROM {
        std::thread::spawn(move || SPARE_CANDIDATES.give_back(set.candidates));
    } else {
        SPARE_CANDIDATES.give_back(set.candidates);
    }
    if !choosing.randomize {
        api.answers.keep_candidates(asked, &index, &parts);
    }
    Ok(json_bytes_reply(
        StatusCode::OK,
        ReplyBody::from_parts(parts.into_iter().map(candidates_part)),
    ))
}

/// `GET /usages?project_id=P[&user_id=U][&consumer_type=T]` (1.9): a project's (and
/// user's) total usage per class; from 1.38 grouped by consumer type with a consumer
/// count (`consumer_type=all` puts everything under `all`).
pub(crate) fn project_usages(state: &State<'_>, ctx: &Ctx, query: &str) -> Result<Reply, ApiError> {
    let pairs = decode_pairs(query).map_err(ApiError::from)?;
    let mut allowed = vec!["project_id", "user_id"];
    if ctx.mv.0 >= 38 {
        allowed.push("consumer_type");
    }
    let mut params: BTreeMap<&str, &str> = BTreeMap::new();
    for (key, value) in &pairs {
        if !allowed.contains(&key.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Invalid query string parameters: {key:?} is not one of {} at microversion {}",
                allowed.join(", "),
                ctx.mv
            )));
        }
        // Characters, as the message says (and Placement's schema counts), not bytes.
        if value.is_empty() || value.chars().count() > 255 {
            return Err(ApiError::bad_request(format!(
                "Invalid query string parameters: {key}={value:?} must have 1 to 255 characters"
            )));
        }
        params.insert(key.as_str(), value.as_str());
    }
    let Some(project) = params.get("project_id").copied() else {
        return Err(ApiError::bad_request(
            "Invalid query string parameters: 'project_id' is a required property",
        ));
    };
    let user = params.get("user_id").copied();
    let wanted_type = params.get("consumer_type").copied();
    // Totals per group (the consumer type at 1.38, one group before): classes and consumers.
    let mut groups: BTreeMap<String, (BTreeMap<String, i64>, usize)> = BTreeMap::new();
    for (consumer, c) in &state.consumers() {
        if c.project_id != project || user.is_some_and(|u| c.user_id != u) {
            continue;
        }
        let group = match wanted_type {
            _ if ctx.mv.0 < 38 => String::new(),
            Some("all") => "all".to_string(),
            Some(t) if t != c.consumer_type => continue,
            _ => c.consumer_type.clone(),
        };
        let entry = groups.entry(group).or_default();
        entry.1 += 1;
        for resources in by_provider(state, consumer).into_values() {
            for (class, n) in resources {
                *entry.0.entry(class).or_insert(0) += n;
            }
        }
    }
    let usages = if ctx.mv.0 < 38 {
        json!(
            groups
                .remove("")
                .map(|(classes, _)| classes)
                .unwrap_or_default()
        )
    } else {
        let grouped: Map<String, Value> = groups
            .into_iter()
            .map(|(t, (classes, count))| {
                let mut v = json!(classes);
                v["consumer_count"] = Value::from(count);
                (t, v)
            })
            .collect();
        Value::Object(grouped)
    };
    Ok(json_reply(StatusCode::OK, &json!({"usages": usages})))
}

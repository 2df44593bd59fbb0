//! Placement-shaped JSON: `GET /allocation_candidates` and `GET /resource_providers`
//! responses at a microversion, and the error body.

use serde_json::{Map, Value, json};

use super::candidates::CandidateSet;
use super::ids::ProviderId;
use super::microversion::Microversion;
use super::provider_tree::ProviderIndex;

/// Placement's error body for a status and detail.
pub fn error_body(status: u16, detail: &str) -> Value {
    let title = match status {
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        _ => "Error",
    };
    json!({"errors": [{"status": status, "title": title, "detail": detail}]})
}

fn uuid(index: &ProviderIndex, p: ProviderId) -> Value {
    Value::String(index.get(p).uuid.to_string())
}

/// The root of a provider in a well-formed tree (the index keeps it).
fn root_of(index: &ProviderIndex, p: ProviderId) -> ProviderId {
    index.get(p).root.unwrap_or(p)
}

/// The `GET /allocation_candidates` body.
pub fn candidates_body(index: &ProviderIndex, set: &CandidateSet, mv: Microversion) -> Value {
    let requests: Vec<Value> = set
        .candidates
        .iter()
        .map(|c| {
            let mut allocations = Map::new();
            for (p, class, amount) in &c.allocations {
                let entry = allocations
                    .entry(index.get(*p).uuid.to_string())
                    .or_insert_with(|| json!({"resources": {}}));
                entry["resources"][index.classes.name(*class)] = Value::from(*amount);
            }
            // Values are moved into place: `json!` with a variable would copy it by
            // serialising it, which costs more than the search on large answers.
            let mut request = Map::new();
            if mv.at_least(12) {
                request.insert("allocations".into(), Value::Object(allocations));
            } else {
                // Before 1.12 a request lists its providers, each with its resources.
                let listed: Vec<Value> = allocations
                    .into_iter()
                    .map(|(uuid, mut entry)| {
                        json!({"resource_provider": {"uuid": uuid},
                               "resources": entry["resources"].take()})
                    })
                    .collect();
                request.insert("allocations".into(), Value::Array(listed));
            }
            if mv.at_least(34) {
                let mappings: Map<String, Value> = c
                    .mappings
                    .iter()
                    .map(|(suffix, ps)| {
                        let mut uuids: Vec<Value> = ps.iter().map(|p| uuid(index, *p)).collect();
                        uuids.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                        (suffix.clone(), Value::Array(uuids))
                    })
                    .collect();
                request.insert("mappings".into(), Value::Object(mappings));
            }
            Value::Object(request)
        })
        .collect();
    let mut summaries = Map::new();
    let mut tree = Vec::new();
    for root in &set.summary_trees {
        tree.clear();
        index.tree(*root, &mut tree);
        for &p in &tree {
            if set
                .summary_only
                .as_ref()
                .is_some_and(|only| !only.contains(&p))
            {
                continue;
            }
            let prov = index.get(p);
            let mut resources = Map::new();
            for (class, inv) in &prov.inventories {
                if mv.at_least(27) || set.requested_classes.contains(class) {
                    let mut usage = Map::new();
                    usage.insert("capacity".into(), Value::from(inv.capacity()));
                    usage.insert("used".into(), Value::from(prov.used(*class)));
                    resources.insert(index.classes.name(*class).to_string(), Value::Object(usage));
                }
            }
            let mut summary = Map::new();
            summary.insert("resources".into(), Value::Object(resources));
            if mv.at_least(17) {
                let mut traits: Vec<&str> =
                    prov.traits().iter().map(|t| index.traits.name(t)).collect();
                traits.sort_unstable();
                summary.insert(
                    "traits".into(),
                    Value::Array(traits.into_iter().map(Value::from).collect()),
                );
            }
            if mv.at_least(29) {
                summary.insert(
                    "parent_provider_uuid".into(),
                    prov.parent.map(|pp| uuid(index, pp)).unwrap_or(Value::Null),
                );
                summary.insert("root_provider_uuid".into(), uuid(index, root_of(index, p)));
            }
            summaries.insert(prov.uuid.to_string(), Value::Object(summary));
        }
    }
    let mut body = Map::new();
    body.insert("allocation_requests".into(), Value::Array(requests));
    body.insert("provider_summaries".into(), Value::Object(summaries));
    Value::Object(body)
}

/// The `GET /resource_providers` body for the given providers.
pub fn providers_body(index: &ProviderIndex, providers: &[ProviderId], mv: Microversion) -> Value {
    let list: Vec<Value> = providers
        .iter()
        .map(|p| {
            let prov = index.get(*p);
            let mut v = json!({"uuid": prov.uuid.to_string(), "name": prov.name.to_string()});
            if mv.at_least(14) {
                v["parent_provider_uuid"] =
                    prov.parent.map(|pp| uuid(index, pp)).unwrap_or(Value::Null);
                v["root_provider_uuid"] = uuid(index, root_of(index, *p));
            }
            v
        })
        .collect();
    let mut body = Map::new();
    body.insert("resource_providers".into(), Value::Array(list));
    Value::Object(body)
}

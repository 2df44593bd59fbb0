//! The status writer: desired statuses from `kubeplace_policy::status`, stamped with
//! `observedGeneration` and `lastTransitionTime`, written with server-side apply only
//! where they differ from what the API server holds.

use std::ops::ControlFlow;
use std::time::Instant;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::metrics::{Metrics, kind_label};
use kubeplace_api::{Condition, Kind, Object, Status, find_condition};
use kubeplace_core::runs::{in_runs_streamed, threads_for};
use kubeplace_policy::scheduling::HeadroomFigures;
use kubeplace_policy::status::{World, desired_status};
use kubeplace_policy::store::{ObjectKey, Store};

/// The field manager of every status kubeplace writes.
pub(crate) const FIELD_MANAGER: &str = "kubeplace";

/// One status to write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusWrite {
    pub key: ObjectKey,
    /// `metadata.uid`, for Events about the object.
    pub uid: Option<String>,
    /// The status, stamped; turned into JSON only when it is sent, so that writes waiting
    /// to be sent hold no second copy of it.
    pub status: Status,
    /// Conditions that turned `False` (or changed reason while `False`) in this write.
    pub turned_false: Vec<Condition>,
    /// Conditions worth a Normal Event (see [`NORMAL_EVENTS`]) that turned `True`.
    pub turned_true: Vec<Condition>,
}

/// The conditions whose turning `True` is a Normal Event, as a Pod's `Scheduled` is: a
/// Server placed. Other conditions turn `True` on every object created (30,000 providers
/// becoming Ready would be 30,000 Events) and say nothing `kubectl get` does not.
const NORMAL_EVENTS: &[(Kind, &str)] = &[(Kind::Server, "Scheduled")];

/// The conditions of any status.
pub fn conditions(status: &Status) -> &[Condition] {
    match status {
        Status::ResourceProvider(s) => &s.conditions,
        Status::Allocation(s) => &s.conditions,
        Status::ProviderConfig(s) => &s.conditions,
        Status::ExtraSpecDefinition(s) => &s.conditions,
        Status::Flavor(s) => &s.conditions,
        Status::Image(s) => &s.conditions,
        Status::ServiceProfile(s) => &s.conditions,
        Status::Server(s) => &s.conditions,
        Status::Aggregate(s) => &s.conditions,
        Status::ServerGroup(s) => &s.conditions,
        Status::PlacementWrite(s) => &s.conditions,
        Status::ProjectQuota(s) => &s.conditions,
        Status::DefaultProjectQuota(s) => &s.conditions,
    }
}

fn conditions_mut(status: &mut Status) -> &mut Vec<Condition> {
    match status {
        Status::ResourceProvider(s) => &mut s.conditions,
        Status::Allocation(s) => &mut s.conditions,
        Status::ProviderConfig(s) => &mut s.conditions,
        Status::ExtraSpecDefinition(s) => &mut s.conditions,
        Status::Flavor(s) => &mut s.conditions,
        Status::Image(s) => &mut s.conditions,
        Status::ServiceProfile(s) => &mut s.conditions,
        Status::Server(s) => &mut s.conditions,
        Status::Aggregate(s) => &mut s.conditions,
        Status::ServerGroup(s) => &mut s.conditions,
        Status::PlacementWrite(s) => &mut s.conditions,
        Status::ProjectQuota(s) => &mut s.conditions,
        Status::DefaultProjectQuota(s) => &mut s.conditions,
    }
}

/// Now, to the second, in RFC 3339 (`2026-01-02T03:04:05Z`), as Kubernetes writes times.
pub(crate) fn now_rfc3339() -> String {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Stamps a desired status: each condition gets the object's generation as
/// `observedGeneration`, and keeps the current condition's `lastTransitionTime` when its
/// status is unchanged, or gets `now` when it changed or is new.
pub(crate) fn stamp(
    desired: &mut Status,
    current: Option<&Status>,
    generation: Option<i64>,
    now: &str,
) {
    let before = current.map(conditions).unwrap_or_default();
    for c in conditions_mut(desired) {
        c.observed_generation = generation;
        c.last_transition_time = match find_condition(before, &c.type_) {
            Some(old) if old.status == c.status => old
                .last_transition_time
                .clone()
                .or_else(|| Some(now.to_string())),
            _ => Some(now.to_string()),
        };
    }
}

/// The conditions of `desired` that are `False` and were not `False` with the same reason before.
fn turned_false(desired: &Status, current: Option<&Status>) -> Vec<Condition> {
    let before = current.map(conditions).unwrap_or_default();
    conditions(desired)
        .iter()
        .filter(|c| c.status == "False")
        .filter(|c| {
            find_condition(before, &c.type_)
                .is_none_or(|old| old.status != "False" || old.reason != c.reason)
        })
        .cloned()
        .collect()
}

/// The conditions of `desired` named in [`NORMAL_EVENTS`] for `kind` that are `True` and
/// were not before.
fn turned_true(kind: Kind, desired: &Status, current: Option<&Status>) -> Vec<Condition> {
    let before = current.map(conditions).unwrap_or_default();
    conditions(desired)
        .iter()
        .filter(|c| c.status == "True")
        .filter(|c| NORMAL_EVENTS.contains(&(kind, c.type_.as_str())))
        .filter(|c| find_condition(before, &c.type_).is_none_or(|old| old.status != "True"))
        .cloned()
        .collect()
}

/// Objects from which a pass plans statuses on every core.
const PLAN_APART_FROM: usize = 32;

/// Objects a thread takes at a time while planning: statuses differ in cost by a thousand
/// times (a Flavor's counts its candidates over every tree, a provider's reads its own
/// tree), so the threads take short runs as they finish rather than a half each.
const PLAN_RUN: usize = 16;

/// The writes a pass makes over `keys`: each object's desired status from
/// [`desired_status`], Flavors showing the `headroom` figures, stamped, where it differs
/// from the stored status, in the order of `keys`. Objects no longer in the store are
/// skipped.
#[cfg(test)]
pub(crate) fn plan<'a>(
    store: &Store,
    headroom: &HeadroomFigures,
    keys: impl IntoIterator<Item = &'a ObjectKey>,
    now: &str,
    metrics: Option<&Metrics>,
) -> Vec<StatusWrite> {
    let mut writes = Vec::new();
    plan_streamed(store, headroom, keys, now, metrics, |run| {
        writes.extend(run)
    });
    writes
}

/// [`plan`], with the writes handed to `each` a run at a time, in the order of `keys`, as
/// soon as they are planned: the first statuses are written while later ones are planned.
/// A pass of many objects is planned on every core.
pub(crate) fn plan_streamed<'a>(
    store: &Store,
    headroom: &HeadroomFigures,
    keys: impl IntoIterator<Item = &'a ObjectKey>,
    now: &str,
    metrics: Option<&Metrics>,
    mut each: impl FnMut(Vec<StatusWrite>),
) {
    let world = World::new(store, headroom);
    let objects: Vec<(&ObjectKey, &Object)> = keys
        .into_iter()
        .filter_map(|key| Some((key, store.get(key)?)))
        .collect();
    // The caller's thread plans too: one worker fewer than the cores.
    let workers = threads_for(objects.len(), PLAN_APART_FROM).saturating_sub(1);
    in_runs_streamed(
        &objects,
        PLAN_RUN,
        workers,
        |run| {
            run.iter()
                .filter_map(|(key, object)| plan_one(key, object, &world, now, metrics))
                .collect::<Vec<_>>()
        },
        |planned| {
            if !planned.is_empty() {
                each(planned);
            }
            ControlFlow::Continue(())
        },
    );
}

/// The write one object needs, if any.
fn plan_one(
    key: &ObjectKey,
    object: &Object,
    world: &World<'_>,
    now: &str,
    metrics: Option<&Metrics>,
) -> Option<StatusWrite> {
    // A write's record has no status to work out: who finishes the write reports on it.
    // Nor has a mirrored object: it lives in the store only.
    if key.kind == Kind::PlacementWrite || object.is_mirrored() {
        return None;
    }
    let started = Instant::now();
    let mut desired = desired_status(object, world);
    if let Some(m) = metrics {
        let took = started.elapsed().as_secs_f64();
        let label = kind_label(key.kind);
        m.reconciles.get_or_create(&label).inc();
        m.reconcile_duration.get_or_create(&label).observe(took);
        if matches!(object, Object::Flavor(_) | Object::Image(_)) {
            m.candidate_search_duration
                .get_or_create(&label)
                .observe(took);
        }
    }
    let current = object.status();
    stamp(
        &mut desired,
        current.as_ref(),
        object.meta().generation,
        now,
    );
    if current.as_ref() == Some(&desired) {
        return None;
    }
    Some(StatusWrite {
        key: key.clone(),
        uid: object.meta().uid.clone(),
        turned_false: turned_false(&desired, current.as_ref()),
        turned_true: turned_true(key.kind, &desired, current.as_ref()),
        status: desired,
    })
}

/// Writes one status with server-side apply to the status subresource, under
/// [`FIELD_MANAGER`], forcing ownership of every status field.
pub async fn write(client: &Client, w: &StatusWrite) -> Result<(), kube::Error> {
    let ar = w.key.kind.api_resource();
    let api: Api<DynamicObject> = if w.key.namespace.is_empty() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), &w.key.namespace, &ar)
    };
    let body = json!({
        "apiVersion": ar.api_version,
        "kind": ar.kind,
        "status": w.status.to_value(),
    });
    api.patch_status(
        &w.key.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http::{Method, Request, Response};
    use kube::client::Body;
    use tower_test::mock;

    use super::*;
    use kubeplace_api::{Flavor, FlavorSpec};
    use serde_json::Value;

    fn flavor(name: &str, generation: i64, vcpus: i64) -> Object {
        let mut f = Flavor::new(
            name,
            FlavorSpec {
                vcpus,
                memory_mb: 512,
                disk_gb: 1,
                ephemeral_gb: 0,
                swap_mb: 0,
                description: None,
                is_public: true,
                extra_specs: BTreeMap::new(),
                service_profiles: vec![],
            },
        );
        f.metadata.generation = Some(generation);
        f.metadata.uid = Some(format!("uid-{name}"));
        Object::Flavor(f)
    }

    fn store_with(objects: Vec<Object>) -> Store {
        let mut store = Store::default();
        for o in objects {
            store.put(o);
        }
        store
    }

    fn keys(store: &Store) -> Vec<ObjectKey> {
        store.keys().cloned().collect()
    }

    #[test]
    fn plans_a_write_stamped_with_generation_and_time() {
        let store = store_with(vec![flavor("m1.tiny", 3, 1)]);
        let writes = plan(
            &store,
            &HeadroomFigures::default(),
            &keys(&store),
            "2026-01-02T03:04:05Z",
            None,
        );
        assert_eq!(writes.len(), 1);
        let w = &writes[0];
        assert_eq!(w.status.to_value()["observedGeneration"], 3);
        for c in w.status.to_value()["conditions"].as_array().unwrap() {
            assert_eq!(c["lastTransitionTime"], "2026-01-02T03:04:05Z");
            assert_eq!(c["observedGeneration"], 3);
        }
        // No provider: the flavor is not schedulable, which is a new False condition.
        assert_eq!(w.turned_false.len(), 1);
        assert_eq!(w.turned_false[0].reason, "NoCandidates");
    }

    #[test]
    fn skips_a_status_that_is_already_there_and_keeps_timestamps() {
        let mut store = store_with(vec![flavor("m1.tiny", 1, 1)]);
        let first = plan(
            &store,
            &HeadroomFigures::default(),
            &keys(&store),
            "2026-01-02T03:04:05Z",
            None,
        );
        for w in &first {
            store.set_status(&w.key, w.status.clone());
        }
        // Later, nothing changed: nothing to write, whatever the clock says.
        assert_eq!(
            plan(
                &store,
                &HeadroomFigures::default(),
                &keys(&store),
                "2026-01-02T09:00:00Z",
                None
            ),
            vec![]
        );
        // A spec change that keeps every condition's status keeps its timestamp.
        let mut bigger = flavor("m1.tiny", 2, 2);
        bigger.set_status(first[0].status.clone());
        store.put(bigger);
        let second = plan(
            &store,
            &HeadroomFigures::default(),
            &keys(&store),
            "2026-01-02T10:00:00Z",
            None,
        );
        assert_eq!(second.len(), 1);
        let c = &second[0].status.to_value()["conditions"][0];
        assert_eq!(c["lastTransitionTime"], "2026-01-02T03:04:05Z");
        assert_eq!(c["observedGeneration"], 2);
        assert_eq!(second[0].status.to_value()["observedGeneration"], 2);
        assert!(second[0].turned_false.is_empty());
    }

    /// A pass of many objects, planned on every core in runs taken as threads finish,
    /// writes what planning each object alone writes, in the order of the keys.
    #[test]
    fn a_large_pass_plans_what_each_object_alone_plans_in_key_order() {
        let mut store = store_with(
            (0..300)
                .map(|i| flavor(&format!("f{i:03}"), 1, 1 + i % 4))
                .collect(),
        );
        // A third already hold their status: nothing to write for those.
        for w in plan(
            &store,
            &HeadroomFigures::default(),
            &keys(&store),
            "2026-01-02T03:04:05Z",
            None,
        ) {
            if w.key.name.ends_with(['0', '3', '6']) {
                store.set_status(&w.key, w.status);
            }
        }
        let all = keys(&store);
        let together = plan(
            &store,
            &HeadroomFigures::default(),
            &all,
            "2026-01-02T04:00:00Z",
            None,
        );
        let alone: Vec<StatusWrite> = all
            .iter()
            .flat_map(|k| {
                plan(
                    &store,
                    &HeadroomFigures::default(),
                    [k],
                    "2026-01-02T04:00:00Z",
                    None,
                )
            })
            .collect();
        assert_eq!(together.len(), 300 - 90);
        assert_eq!(together, alone);
        let names: Vec<&str> = together.iter().map(|w| w.key.name.as_str()).collect();
        assert!(names.is_sorted(), "{names:?}");
        // Handed over in short runs, so that the writer starts on the first ones at once.
        let mut runs = Vec::new();
        plan_streamed(
            &store,
            &HeadroomFigures::default(),
            &all,
            "2026-01-02T04:00:00Z",
            None,
            |run| runs.push(run),
        );
        assert!(runs.iter().all(|r| !r.is_empty() && r.len() <= PLAN_RUN));
        assert_eq!(runs.concat(), together);
        // Keys asked for twice are planned twice, as asked; missing ones are skipped.
        let gone = ObjectKey {
            kind: Kind::Flavor,
            namespace: String::new(),
            name: "gone".into(),
        };
        let asked = [&all[1], &gone, &all[1]];
        assert_eq!(
            plan(
                &store,
                &HeadroomFigures::default(),
                asked,
                "2026-01-02T04:00:00Z",
                None
            )
            .len(),
            2
        );
    }

    #[test]
    fn a_server_turning_scheduled_is_a_normal_event_other_conditions_are_not() {
        let server = |status: Option<bool>| {
            Status::Server(kubeplace_api::ServerStatus {
                conditions: status
                    .map(|s| Condition::new("Scheduled", s, "Scheduled", "holds Allocation a"))
                    .into_iter()
                    .collect(),
                ..Default::default()
            })
        };
        let placed = server(Some(true));
        for before in [None, Some(server(None)), Some(server(Some(false)))] {
            let turned = turned_true(Kind::Server, &placed, before.as_ref());
            assert_eq!(turned.len(), 1, "{before:?}");
            assert_eq!(turned[0].message, "holds Allocation a");
        }
        // Already placed: no second Event.
        assert!(turned_true(Kind::Server, &placed, Some(&placed)).is_empty());
        assert!(turned_true(Kind::Server, &server(Some(false)), None).is_empty());
        // A flavor turning schedulable is not worth an Event.
        let schedulable = Status::Flavor(kubeplace_api::FlavorStatus {
            conditions: vec![Condition::new("Schedulable", true, "Candidates", "")],
            ..Default::default()
        });
        assert!(turned_true(Kind::Flavor, &schedulable, None).is_empty());
    }

    #[test]
    fn a_condition_that_changes_status_gets_a_new_timestamp() {
        let mut desired = Status::Flavor(kubeplace_api::FlavorStatus {
            conditions: vec![Condition::new("Schedulable", true, "Candidates", "")],
            ..Default::default()
        });
        let mut old = Condition::new("Schedulable", false, "NoCandidates", "");
        old.last_transition_time = Some("2020-01-01T00:00:00Z".into());
        let current = Status::Flavor(kubeplace_api::FlavorStatus {
            conditions: vec![old],
            ..Default::default()
        });
        stamp(
            &mut desired,
            Some(&current),
            Some(7),
            "2026-05-05T05:05:05Z",
        );
        let c = &conditions(&desired)[0];
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2026-05-05T05:05:05Z")
        );
        assert_eq!(c.observed_generation, Some(7));
    }

    #[test]
    fn now_is_rfc3339_to_the_second() {
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z'));
    }

    /// The write goes to the status subresource as a forced server-side apply by kubeplace.
    #[tokio::test]
    async fn writes_with_server_side_apply_to_the_status_subresource() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let store = store_with(vec![flavor("m1.tiny", 4, 1)]);
        let writes = plan(
            &store,
            &HeadroomFigures::default(),
            &keys(&store),
            "2026-01-02T03:04:05Z",
            None,
        );
        let server = tokio::spawn(async move {
            let (request, send) = handle.next_request().await.expect("a request");
            assert_eq!(request.method(), Method::PATCH);
            assert_eq!(
                request.uri().path(),
                "/apis/kubeplace.io/v1alpha1/flavors/m1.tiny/status"
            );
            let query = request.uri().query().unwrap_or_default().to_string();
            assert!(query.contains("fieldManager=kubeplace"), "{query}");
            assert!(query.contains("force=true"), "{query}");
            assert_eq!(
                request.headers()["content-type"],
                "application/apply-patch+yaml"
            );
            let body = request.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["apiVersion"], "kubeplace.io/v1alpha1");
            assert_eq!(body["kind"], "Flavor");
            assert_eq!(body["status"]["observedGeneration"], 4);
            assert!(body.get("spec").is_none(), "only the status is applied");
            let reply = json!({
                "apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                "metadata": {"name": "m1.tiny"}, "spec": {"vcpus": 1, "memoryMb": 512},
                "status": body["status"],
            });
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        });
        write(&client, &writes[0]).await.unwrap();
        server.await.unwrap();
    }
}

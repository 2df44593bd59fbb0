//! Reservation pods: what Servers hold on mirrored Nodes, shown to kube-scheduler and the
//! kubelet. The leader keeps one pod per Server and Node its claim takes cores, memory or
//! disk on ([`kubeplace_policy::mirror::reservations`]): bound to the Node, requesting what
//! the claim takes, owned by the Server (so it goes with it). A pod that does not match
//! (the Server moved, resized or went) is deleted and made again; one the kubelet refused
//! (the Node's pods took the room first) gives the Server's claim back, so the Server is
//! placed again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cache::SharedStore;
use kubeplace_api::{API_VERSION, Kind};
use kubeplace_policy::mirror::quantity::in_thousandths;
use kubeplace_policy::mirror::{RESERVATION_LABEL, Reservation, reservations};

/// How often the leader compares the reservations with the pods.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The loop and what it needs.
pub(crate) struct Reservations {
    pub client: Client,
    pub store: SharedStore,
    /// The image the pods run (a pause container).
    pub image: String,
    pub leader: watch::Receiver<bool>,
    pub ready: watch::Receiver<bool>,
    /// Tells a Server why its claim was given back.
    pub recorder: Recorder,
}

impl Reservations {
    /// Runs until `cancel`, keeping the pods in step while this replica leads.
    pub async fn run(self, cancel: CancellationToken) {
        let (leader, ready) = (self.leader.clone(), self.ready.clone());
        super::leading::every_while_leading(leader, ready, &cancel, LOOK_EVERY, || async {
            if let Err(e) = self.pass().await {
                warn!(error = %e, "reservation pods could not be brought in step; trying again");
            }
            if let Err(e) = self.device_pass().await {
                warn!(error = %e, "reservation claims could not be brought in step; trying again");
            }
        })
        .await;
    }

    /// One comparison: pods made, deleted, or their Servers' claims given back.
    async fn pass(&self) -> Result<(), kube::Error> {
        let wanted: BTreeMap<(String, String), Reservation> = {
            let store = crate::locks::read(&self.store);
            reservations(&store)
                .into_iter()
                .map(|r| ((r.server.namespace.clone(), r.pod_name()), r))
                .collect()
        };
        let all: Api<Pod> = Api::all(self.client.clone());
        let pods = all
            .list(&ListParams::default().labels(RESERVATION_LABEL))
            .await?;
        let mut present = BTreeSet::new();
        for pod in pods {
            let namespace = pod.namespace().unwrap_or_default();
            let key = (namespace.clone(), pod.name_any());
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            match wanted.get(&key) {
                Some(r) if refused_by_node(&pod) => {
                    warn!(server = %r.server.name, namespace = %r.server.namespace, node = %r.node, reason = ?failure_reason(&pod),
                        "the Node refused a Server's reservation; its claim is given back and it is placed again");
                    self.give_back(r).await?;
                    delete(&api, &key.1).await?;
                    self.tell_refused(r, &pod).await;
                }
                Some(r) if matches(&pod, r, &self.image) => {
                    present.insert(key);
                }
                _ => {
                    info!(pod = %key.1, namespace = %namespace, "a reservation pod no Server's claim calls for is deleted");
                    delete(&api, &key.1).await?;
                }
            }
        }
        for (key, r) in &wanted {
            if present.contains(key) {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
            match api
                .create(&PostParams::default(), &pod_for(r, &self.image))
                .await
            {
                Ok(_) => {
                    info!(server = %r.server.name, namespace = %r.server.namespace, node = %r.node, "reservation pod made")
                }
                // The one being deleted is still there: made on a later pass.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Deletes the Server's claim: the planner places it again, elsewhere or once there is
    /// room.
    async fn give_back(&self, r: &Reservation) -> Result<(), kube::Error> {
        let api: Api<kube::api::DynamicObject> =
            Api::all_with(self.client.clone(), &Kind::Allocation.api_resource());
        match api
            .delete(&r.server.allocation_name(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Reservations {
    /// A Warning Event on the Server: its Node gave its reservation up, and its claim with it.
    async fn tell_refused(&self, r: &Reservation, pod: &Pod) {
        let reference = ObjectReference {
            api_version: Some(API_VERSION.to_string()),
            kind: Some("Server".to_string()),
            name: Some(r.server.name.clone()),
            namespace: Some(r.server.namespace.clone()),
            uid: Some(r.server_uid.clone()),
            ..ObjectReference::default()
        };
        let why = failure_reason(pod).unwrap_or_else(|| "Failed".to_string());
        let event = Event {
            type_: EventType::Warning,
            reason: "ReservationRefused".into(),
            note: Some(format!(
                "Node {} gave up the reservation pod {} ({why}); the Server's claim is given back and it is placed again",
                r.node,
                r.pod_name()
            )),
            action: "Reserve".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, server = %r.server.name, "cannot publish an Event");
        }
    }
}

/// Deletes a reservation (a pod or a claim); one already gone is no error.
pub(super) async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the Node gave the pod up: the kubelet refused it (`OutOfcpu`, `OutOfmemory` and
/// the like) or evicted it.
fn refused_by_node(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .is_some_and(|s| s.phase.as_deref() == Some("Failed"))
}

fn failure_reason(pod: &Pod) -> Option<String> {
    pod.status.as_ref().and_then(|s| s.reason.clone())
}

/// Whether a pod is the reservation as it should be: on its Node, requesting what the claim
/// takes (compared by amount: the API server writes quantities in its own form, `2Gi` for
/// `2048Mi`), running the image given, owned by the Server it names.
fn matches(pod: &Pod, r: &Reservation, image: &str) -> bool {
    let wanted = pod_for(r, image);
    let amounts = |m: &Option<BTreeMap<String, Quantity>>| {
        m.iter()
            .flatten()
            .map(|(k, q)| (k.clone(), in_thousandths(&q.0).ok()))
            .collect::<BTreeMap<_, _>>()
    };
    let spec = |p: &Pod| {
        p.spec.as_ref().map(|s| {
            (
                s.node_name.clone(),
                s.containers
                    .iter()
                    .map(|c| {
                        let resources = c.resources.clone().unwrap_or_default();
                        (
                            c.image.clone(),
                            amounts(&resources.requests),
                            amounts(&resources.limits),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
        })
    };
    let owner = |p: &Pod| {
        p.metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>()
    };
    spec(pod) == spec(&wanted) && owner(pod) == owner(&wanted)
}

/// The reservation's pod: bound to its Node (kube-scheduler does not place it), a pause
/// container with the claim's amounts as requests and limits (the Guaranteed class, the
/// last the kubelet evicts), tolerating every taint (the claim stands on a tainted Node as
/// it did before the taint).
fn pod_for(r: &Reservation, image: &str) -> Pod {
    let amounts: BTreeMap<String, Quantity> = r
        .requests
        .iter()
        .map(|(k, v)| (k.clone(), Quantity(v.clone())))
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(r.pod_name()),
            namespace: Some(r.server.namespace.clone()),
            labels: Some(BTreeMap::from([(
                RESERVATION_LABEL.to_string(),
                r.server.name.clone(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: API_VERSION.to_string(),
                kind: "Server".to_string(),
                name: r.server.name.clone(),
                uid: r.server_uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(r.node.clone()),
            containers: vec![Container {
                name: "reserve".to_string(),
                image: Some(image.to_string()),
                resources: Some(ResourceRequirements {
                    requests: Some(amounts.clone()),
                    limits: Some(amounts),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".to_string()),
                ..Toleration::default()
            }]),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(0),
            ..PodSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::ServerRef;

    fn reservation() -> Reservation {
        Reservation {
            server: ServerRef {
                namespace: "shop".into(),
                name: "web".into(),
            },
            server_uid: "u1".into(),
            node: "node-a".into(),
            requests: BTreeMap::from([
                ("cpu".to_string(), "2".to_string()),
                ("memory".to_string(), "512Mi".to_string()),
            ]),
        }
    }

    /// The pod is bound to the Node, owned by the Server, and requests what the claim takes.
    #[test]
    fn the_pod_is_bound_owned_and_requests_the_claim() {
        let pod = pod_for(&reservation(), "pause:1");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-a"));
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(requests["cpu"], Quantity("2".into()));
        assert_eq!(requests["memory"], Quantity("512Mi".into()));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Server", "u1"));
        assert!(kubeplace_policy::mirror::is_reservation(&pod));
    }

    /// A pod on another Node, of other amounts, or of another Server of the name does not
    /// match; the same pod as made does.
    #[test]
    fn a_pod_matches_only_as_made() {
        let r = reservation();
        let pod = pod_for(&r, "pause:1");
        assert!(matches(&pod, &r, "pause:1"));
        let mut moved = r.clone();
        moved.node = "node-b".into();
        assert!(!matches(&pod, &moved, "pause:1"));
        let mut resized = r.clone();
        resized.requests.insert("cpu".into(), "4".into());
        assert!(!matches(&pod, &resized, "pause:1"));
        let mut again = r.clone();
        again.server_uid = "u2".into();
        assert!(!matches(&pod, &again, "pause:1"));
        // The API server's own form of the same amount.
        let mut stored = pod.clone();
        let resources = stored.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        for m in [&mut resources.requests, &mut resources.limits] {
            m.as_mut()
                .unwrap()
                .insert("memory".into(), Quantity("0.5Gi".into()));
        }
        assert!(matches(&stored, &r, "pause:1"));
    }
}

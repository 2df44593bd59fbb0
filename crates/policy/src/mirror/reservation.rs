//! What a Server placed on a mirrored Node holds there in Kubernetes' own terms: a
//! reservation pod bound to the Node, requesting the cores, memory and disk the Server's
//! claim takes on it, so kube-scheduler and the kubelet count them. The claim is decided at
//! the claims ledger as any other; the pod only tells the cluster what was decided.

use std::collections::BTreeMap;

use kubeplace_api::ObjectMeta;
use kubeplace_api::cluster_source::Pod;
use kubeplace_api::{Allocation, Kind, Object, ServerRef, allocation_server};

use super::node::node_resource_of;
use crate::store::{ObjectKey, Store};

/// The label a reservation pod carries: the name of the Server it reserves for.
pub const RESERVATION_LABEL: &str = "kubeplace.io/reservation-for";

/// A Server's holding on one mirrored Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub server: ServerRef,
    /// The Server's uid, which the pod's owner reference names.
    pub server_uid: String,
    pub node: String,
    /// Kubernetes quantities by resource: `cpu`, `memory`, `ephemeral-storage`.
    pub requests: BTreeMap<String, String>,
}

impl Reservation {
    /// The reservation pod's name, in the Server's namespace.
    pub fn pod_name(&self) -> String {
        reservation_name(&self.server)
    }
}

/// The name of a Server's reservations, its pod and its ResourceClaim alike.
pub(super) fn reservation_name(server: &ServerRef) -> String {
    format!("kubeplace-reservation-{}", server.name)
}

/// The Server an object labelled a reservation says it reserves for: the label's name in
/// the object's namespace.
pub(super) fn reserved_for(metadata: &ObjectMeta) -> Option<ServerRef> {
    let name = metadata.labels.as_ref()?.get(RESERVATION_LABEL)?;
    Some(ServerRef {
        namespace: metadata.namespace.clone().unwrap_or_default(),
        name: name.clone(),
    })
}

/// Why an object is not named and controlled as `server`'s `what` (a reservation, a
/// reservation claim), the Server's uid being `uid`, if it is not.
pub(super) fn identity_problem(
    metadata: &ObjectMeta,
    what: &str,
    server: &ServerRef,
    uid: &str,
) -> Option<String> {
    let ServerRef {
        namespace,
        name: server_name,
    } = server;
    let name = metadata.name.as_deref().unwrap_or_default();
    let wanted = reservation_name(server);
    if name != wanted {
        return Some(format!(
            "metadata.name {name:?}: the {what} of Server {namespace}/{server_name} is named {wanted:?}"
        ));
    }
    if !controlled_by(metadata, uid) {
        return Some(format!(
            "metadata.ownerReferences: a {what} is controlled by its Server {namespace}/{server_name} (uid {uid})"
        ));
    }
    None
}

/// A Server's counted claim, with the Server's uid: what its reservations are made of.
pub(super) struct ServerClaim<'s> {
    pub server: ServerRef,
    pub uid: String,
    pub claim: &'s Allocation,
}

/// Which Servers' claims a lookup sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claims {
    /// Every claim written, whether or not the index counts it.
    Written,
    /// Only the claims the index counts (not those that went over capacity).
    Counted,
}

/// The claim of every Server the store shows.
pub(super) fn server_claims(store: &Store, which: Claims) -> impl Iterator<Item = ServerClaim<'_>> {
    store
        .list(Kind::Allocation)
        .filter_map(move |object| match object {
            Object::Allocation(a) => {
                let server = allocation_server(a)?;
                claim_of(store, server, a, which)
            }
            _ => None,
        })
}

/// The claim of one Server, found by its name.
pub(super) fn server_claim<'s>(
    store: &'s Store,
    server: &ServerRef,
    which: Claims,
) -> Option<ServerClaim<'s>> {
    match store.get_cluster(Kind::Allocation, &server.allocation_name())? {
        Object::Allocation(a) => claim_of(store, server.clone(), a, which),
        _ => None,
    }
}

fn claim_of<'s>(
    store: &'s Store,
    server: ServerRef,
    claim: &'s Allocation,
    which: Claims,
) -> Option<ServerClaim<'s>> {
    if which == Claims::Counted {
        store.index().allocations(claim.metadata.name.as_deref()?)?;
    }
    let uid = store.get(&ObjectKey::server(&server))?.meta().uid.clone()?;
    Some(ServerClaim { server, uid, claim })
}

/// Whether an object is controlled by the Server of uid `uid`.
pub(super) fn controlled_by(metadata: &ObjectMeta, uid: &str) -> bool {
    metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "Server" && o.uid == uid)
}

/// The name of the Node a provider was mirrored from, if it was one.
pub(super) fn mirrored_node(store: &Store, provider: &str) -> Option<String> {
    store
        .get_cluster(Kind::ResourceProvider, provider)?
        .mirrored_from()?
        .strip_prefix("Node/")
        .map(str::to_string)
}

/// Every reservation the claims of Servers call for, in Server order: one per Server and
/// mirrored Node it holds cores, memory or disk on. Other classes (devices, extended
/// resources) are not reserved by a pod. A claim the index no longer counts (pods the mirror
/// saw after it was admitted took its cores, as after a failover) still calls for its pod:
/// the kubelet refuses it and the claim is given back, where leaving it out would let the
/// Server keep a claim that nothing holds on the Node.
pub fn reservations(store: &Store) -> Vec<Reservation> {
    let mut found: Vec<Reservation> = server_claims(store, Claims::Written)
        .flat_map(|c| reservations_of(store, &c))
        .collect();
    found.sort_by(|a, b| (&a.server, &a.node).cmp(&(&b.server, &b.node)));
    found
}

/// The reservations one Server's claim calls for: one per mirrored Node.
fn reservations_of(store: &Store, c: &ServerClaim<'_>) -> Vec<Reservation> {
    c.claim
        .spec
        .allocations
        .iter()
        .filter_map(|pa| {
            let node = mirrored_node(store, &pa.provider)?;
            let requests: BTreeMap<String, String> = pa
                .resources
                .iter()
                .filter_map(|(class, amount)| {
                    let (resource, unit) = node_resource_of(class)?;
                    Some((resource.to_string(), unit.quantity(*amount)))
                })
                .collect();
            (!requests.is_empty()).then(|| Reservation {
                server: c.server.clone(),
                server_uid: c.uid.clone(),
                node,
                requests,
            })
        })
        .collect()
}

/// Why a pod labelled a reservation is not one kubeplace calls for, if it is not: it must be
/// named and bound as the reservation of the Server its label names, controlled by that
/// Server (its uid), and request exactly what the Server's claim takes on that Node. Such a
/// pod is left out by the mirror, so no other may carry the label.
pub fn reservation_pod_problem(store: &Store, pod: &Pod) -> Option<String> {
    let asked_for = reserved_for(&pod.metadata)?;
    let ServerRef {
        namespace,
        name: server,
    } = &asked_for;
    let wanted = server_claim(store, &asked_for, Claims::Written)
        .and_then(|c| reservations_of(store, &c).into_iter().next());
    let Some(wanted) = wanted else {
        return Some(format!(
            "label {RESERVATION_LABEL}={server:?}: Server {namespace}/{server} holds no cores, memory or disk on a mirrored Node; only kubeplace makes reservation pods"
        ));
    };
    if let Some(problem) =
        identity_problem(&pod.metadata, "reservation", &asked_for, &wanted.server_uid)
    {
        return Some(problem);
    }
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    if node != wanted.node {
        return Some(format!(
            "spec.nodeName {node:?}: Server {namespace}/{server} holds its cores on Node {:?}",
            wanted.node
        ));
    }
    let amounts = |m: &BTreeMap<String, String>| -> BTreeMap<String, Option<i64>> {
        m.iter()
            .map(|(k, v)| (k.clone(), super::quantity::in_thousandths(v).ok()))
            .collect()
    };
    let asked: BTreeMap<String, String> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.resources.iter().flat_map(|r| r.requests.iter().flatten()))
        .map(|(k, q)| (k.clone(), q.0.clone()))
        .collect();
    if amounts(&asked) != amounts(&wanted.requests) {
        return Some(format!(
            "spec.containers[*].resources.requests {asked:?}: Server {namespace}/{server}'s claim takes {:?} on Node {:?}",
            wanted.requests, wanted.node
        ));
    }
    None
}

/// Whether a pod is a Server's reservation: labelled so, and controlled by a Server. The
/// mirror leaves such pods out: the Server's own claim already counts what they request.
pub fn is_reservation(pod: &Pod) -> bool {
    is_reservation_of_a_server(&pod.metadata)
}

/// Whether an object (a pod, a ResourceClaim) is labelled a reservation and controlled by a
/// Server.
pub fn is_reservation_of_a_server(metadata: &ObjectMeta) -> bool {
    let labelled = metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(RESERVATION_LABEL));
    let owned = metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == "Server"
            && o.api_version.starts_with("kubeplace.io/")
    });
    labelled && owned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::object;

    fn store() -> Store {
        let mut store = Store::default();
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: node-a\n  annotations:\n    kubeplace.io/mirrored-from: Node/node-a\nspec:\n  inventories:\n    VCPU: {total: 8}\n    MEMORY_MB: {total: 8192}\n    CUSTOM_GPU: {total: 1}\n",
        ));
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: written\nspec:\n  inventories:\n    VCPU: {total: 8}\n",
        ));
        store
    }

    fn server(store: &mut Store, name: &str) {
        let mut o = object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  flavor: f\n  image: i\n"
        ));
        o.meta_mut().uid = Some(format!("uid-{name}"));
        store.apply(o);
    }

    fn claim(store: &mut Store, server: &str, provider: &str, resources: &str) {
        let reference = ServerRef {
            namespace: "shop".into(),
            name: server.into(),
        };
        store.apply(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {}\n  labels:\n    {}: shop\n    {}: {server}\nspec:\n  consumer: 00000000-0000-0000-0000-000000000001\n  allocations:\n  - provider: {provider}\n    resources: {resources}\n",
            reference.allocation_name(),
            kubeplace_api::SERVER_NAMESPACE_LABEL,
            kubeplace_api::SERVER_NAME_LABEL,
        )));
    }

    /// A Server's cores and memory on a mirrored Node are reserved in Kubernetes' units; its
    /// device class is not, nor is a claim on a written provider.
    #[test]
    fn servers_on_mirrored_nodes_are_reserved_in_kubernetes_units() {
        let mut store = store();
        server(&mut store, "web");
        server(&mut store, "db");
        claim(
            &mut store,
            "web",
            "node-a",
            "{VCPU: 2, MEMORY_MB: 512, CUSTOM_GPU: 1}",
        );
        claim(&mut store, "db", "written", "{VCPU: 1}");
        let found = reservations(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        let r = &found[0];
        assert_eq!(
            (
                r.server.name.as_str(),
                r.node.as_str(),
                r.server_uid.as_str()
            ),
            ("web", "node-a", "uid-web")
        );
        assert_eq!(
            r.requests,
            BTreeMap::from([
                ("cpu".to_string(), "2".to_string()),
                ("memory".to_string(), "512Mi".to_string())
            ])
        );
        assert_eq!(r.pod_name(), "kubeplace-reservation-web");
    }

    /// A claim that went over capacity (the Node's cores were taken before it, as a
    /// failover's new leader may count it) still calls for its reservation, so that the
    /// kubelet's refusal gives it back; only counted claims call for device reservations.
    #[test]
    fn a_claim_over_capacity_still_calls_for_its_reservation() {
        let mut store = store();
        server(&mut store, "early");
        server(&mut store, "late");
        claim(&mut store, "early", "node-a", "{VCPU: 8}");
        claim(&mut store, "late", "node-a", "{VCPU: 2}");
        // Claims without a verdict are settled oldest first: the late one does not fit.
        let refused = crate::claims::settle(&mut store);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            store.index().allocations("server.shop.late").is_none(),
            "the late claim is over capacity"
        );
        let servers: Vec<String> = reservations(&store)
            .into_iter()
            .map(|r| r.server.name)
            .collect();
        assert_eq!(servers, ["early", "late"]);
        let late = ServerRef {
            namespace: "shop".into(),
            name: "late".into(),
        };
        assert!(server_claim(&store, &late, Claims::Written).is_some());
        assert!(server_claim(&store, &late, Claims::Counted).is_none());
    }

    /// A claim without its Server in the store (deleted, or not seen yet) reserves nothing.
    #[test]
    fn a_claim_without_its_server_reserves_nothing() {
        let mut store = store();
        claim(&mut store, "gone", "node-a", "{VCPU: 1}");
        assert!(reservations(&store).is_empty());
    }

    /// A pod labelled a reservation passes only as the reservation kubeplace would make.
    #[test]
    fn a_labelled_pod_must_be_the_reservation_kubeplace_makes() {
        let mut store = store();
        server(&mut store, "web");
        claim(&mut store, "web", "node-a", "{VCPU: 2, MEMORY_MB: 512}");
        let pod = |name: &str, uid: &str, node: &str, cpu: &str| -> Pod {
            serde_saphyr::from_str(&format!(
                "metadata:\n  name: {name}\n  namespace: shop\n  labels: {{kubeplace.io/reservation-for: web}}\n  ownerReferences: [{{apiVersion: kubeplace.io/v1alpha1, kind: Server, name: web, uid: {uid}, controller: true}}]\nspec:\n  nodeName: {node}\n  containers:\n  - name: reserve\n    resources: {{requests: {{cpu: '{cpu}', memory: 512Mi}}}}\n"
            ))
            .unwrap()
        };
        let name = "kubeplace-reservation-web";
        assert_eq!(
            reservation_pod_problem(&store, &pod(name, "uid-web", "node-a", "2")),
            None
        );
        // The same amounts written another way.
        assert_eq!(
            reservation_pod_problem(&store, &pod(name, "uid-web", "node-a", "2000m")),
            None
        );
        for (bad, field) in [
            (pod("other", "uid-web", "node-a", "2"), "metadata.name"),
            (
                pod(name, "uid-forged", "node-a", "2"),
                "metadata.ownerReferences",
            ),
            (pod(name, "uid-web", "node-b", "2"), "spec.nodeName"),
            (pod(name, "uid-web", "node-a", "8"), "requests"),
        ] {
            let problem = reservation_pod_problem(&store, &bad).expect("refused");
            assert!(problem.contains(field), "{problem}");
        }
        // A Server with no claim on a mirrored Node has no reservation to make.
        let mut bare = Store::default();
        server(&mut bare, "web");
        let problem = reservation_pod_problem(&bare, &pod(name, "uid-web", "node-a", "2")).unwrap();
        assert!(
            problem.contains("only kubeplace makes reservation pods"),
            "{problem}"
        );
    }

    /// Only a labelled pod that a Server controls is taken for a reservation.
    #[test]
    fn a_reservation_is_labelled_and_controlled_by_a_server() {
        let pod = |labels: &str, owners: &str| -> Pod {
            serde_saphyr::from_str(&format!(
                "metadata:\n  name: p\n  namespace: shop\n  labels: {labels}\n  ownerReferences: {owners}\n"
            ))
            .unwrap()
        };
        let server_owner = "[{apiVersion: kubeplace.io/v1alpha1, kind: Server, name: web, uid: u, controller: true}]";
        assert!(is_reservation(&pod(
            "{kubeplace.io/reservation-for: web}",
            server_owner
        )));
        assert!(!is_reservation(&pod("{}", server_owner)));
        assert!(!is_reservation(&pod(
            "{kubeplace.io/reservation-for: web}",
            "[]"
        )));
        assert!(!is_reservation(&pod(
            "{kubeplace.io/reservation-for: web}",
            "[{apiVersion: apps/v1, kind: ReplicaSet, name: r, uid: u, controller: true}]"
        )));
    }
}

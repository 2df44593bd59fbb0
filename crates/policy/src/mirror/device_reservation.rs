//! What a Server placed on mirrored DRA devices holds there in Kubernetes' own terms: one
//! ResourceClaim in the Server's namespace, allocated by kubeplace to exactly those devices
//! and reserved for the Server, so kube-scheduler takes them for in use. The claim was
//! decided at the claims ledger as any other; the ResourceClaim only tells the cluster.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::cluster_source::{DeviceRequestAllocationResult, ResourceClaim};
use kubeplace_api::{Kind, Object, ServerRef};

use super::quantity::in_thousandths;
use super::reservation::{
    Claims, ServerClaim, identity_problem, mirrored_node, reservation_name, reserved_for,
    server_claim, server_claims,
};
use super::resource_slice::{
    DEVICE_CAPACITY_ANNOTATION, DEVICE_CLASS_ANNOTATION, DEVICE_DRIVER_ANNOTATION,
    DEVICE_NAME_ANNOTATION, DEVICE_POOL_ANNOTATION, shared_capacity_of,
};
use crate::store::Store;

/// One DRA device: its driver, pool and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// A device a Server holds, with what a ResourceClaim allocated to it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedDevice {
    pub id: DeviceId,
    /// The DeviceClass its resource class is named after, else its driver's name.
    pub device_class: String,
    /// The Node it is on, when it is on one.
    pub node: Option<String>,
    /// Of a shared device, what the Server consumes of each capacity, as quantities
    /// (`memory: 10240Mi`); empty for a device held whole.
    pub consumed: BTreeMap<String, String>,
}

/// A Server's holding of mirrored devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReservation {
    pub server: ServerRef,
    /// The Server's uid, which the claim's owner reference and `reservedFor` name.
    pub server_uid: String,
    /// In provider order.
    pub devices: Vec<ReservedDevice>,
}

impl DeviceId {
    /// The device an allocation result names.
    pub fn of(result: &DeviceRequestAllocationResult) -> DeviceId {
        DeviceId {
            driver: result.driver.clone(),
            pool: result.pool.clone(),
            device: result.device.clone(),
        }
    }
}

/// What an allocation result consumes of a shared device, as quantities; empty for a device
/// given whole.
pub fn consumed_by(result: &DeviceRequestAllocationResult) -> BTreeMap<String, String> {
    result
        .consumed_capacity
        .iter()
        .flatten()
        .map(|(k, q)| (k.clone(), q.0.clone()))
        .collect()
}

/// Whether two sets of quantities are the same amounts: the API server writes quantities
/// in its own form (`10Gi` for `10240Mi`).
pub fn same_amounts(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    let amounts = |m: &BTreeMap<String, String>| -> BTreeMap<String, Option<i64>> {
        m.iter()
            .map(|(k, v)| (k.clone(), in_thousandths(v).ok()))
            .collect()
    };
    amounts(a) == amounts(b)
}

impl DeviceReservation {
    /// The ResourceClaim's name, in the Server's namespace.
    pub fn claim_name(&self) -> String {
        reservation_name(&self.server)
    }

    /// The devices it holds.
    pub fn devices(&self) -> BTreeSet<DeviceId> {
        self.devices.iter().map(|d| d.id.clone()).collect()
    }

    /// Whether `claim` is controlled by its Server (by uid).
    pub fn owns(&self, claim: &ResourceClaim) -> bool {
        claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == self.server_uid && o.controller == Some(true))
    }

    /// Whether `claim`'s allocation is this reservation's: its devices, and of each shared
    /// one the Server's share.
    pub fn is_allocated_as(&self, claim: &ResourceClaim) -> bool {
        if allocated_devices(claim) != self.devices() {
            return false;
        }
        let written: BTreeMap<DeviceId, BTreeMap<String, String>> =
            super::allocation_results(claim)
                .map(|x| (DeviceId::of(x), consumed_by(x)))
                .collect();
        self.devices.iter().all(|d| {
            same_amounts(
                &written.get(&d.id).cloned().unwrap_or_default(),
                &d.consumed,
            )
        })
    }
}

/// The devices a ResourceClaim's allocation names, those allocated for admin access left out
/// (they take a device from no one).
pub fn allocated_devices(claim: &ResourceClaim) -> BTreeSet<DeviceId> {
    super::allocation_results(claim)
        .filter(|r| r.admin_access != Some(true))
        .map(DeviceId::of)
        .collect()
}

/// Why a ResourceClaim labelled a reservation is not one kubeplace calls for, if it is not:
/// it must be named as the reservation of the Server its label names, controlled by that
/// Server (its uid), and ask for one device per device the Server's claim holds. Its
/// allocation is judged when it is written (only the Server's devices).
pub fn reservation_claim_problem(store: &Store, claim: &ResourceClaim) -> Option<String> {
    let asked_for = reserved_for(&claim.metadata)?;
    let ServerRef {
        namespace,
        name: server,
    } = &asked_for;
    let wanted = reservation_of(store, &asked_for);
    let Some(wanted) = wanted else {
        return Some(format!(
            "label {}={server:?}: Server {namespace}/{server} holds no mirrored devices; only kubeplace makes reservation claims",
            super::RESERVATION_LABEL
        ));
    };
    if let Some(problem) = identity_problem(
        &claim.metadata,
        "reservation claim",
        &asked_for,
        &wanted.server_uid,
    ) {
        return Some(problem);
    }
    let requests = claim
        .spec
        .devices
        .as_ref()
        .and_then(|d| d.requests.as_ref())
        .map_or(0, Vec::len);
    if requests != wanted.devices.len() {
        return Some(format!(
            "spec.devices.requests: {requests} requests; Server {namespace}/{server} holds {} devices, one request each",
            wanted.devices.len()
        ));
    }
    None
}

/// The device a mirrored provider stands for, if it stands for one.
pub fn device_of(store: &Store, provider: &str) -> Option<ReservedDevice> {
    let object = store.get_cluster(Kind::ResourceProvider, provider)?;
    object.mirrored_from()?;
    let annotations = object.meta().annotations.as_ref()?;
    let id = DeviceId {
        driver: annotations.get(DEVICE_DRIVER_ANNOTATION)?.clone(),
        pool: annotations.get(DEVICE_POOL_ANNOTATION)?.clone(),
        device: annotations.get(DEVICE_NAME_ANNOTATION)?.clone(),
    };
    let device_class = annotations
        .get(DEVICE_CLASS_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| id.driver.clone());
    let node = match object {
        Object::ResourceProvider(rp) => rp
            .spec
            .parent
            .as_deref()
            .and_then(|parent| mirrored_node(store, parent)),
        _ => None,
    };
    Some(ReservedDevice {
        id,
        device_class,
        node,
        consumed: BTreeMap::new(),
    })
}

/// What `resources` (a claim's amounts on a shared device's provider) consume of the
/// device's capacities, as quantities; empty for a device held whole.
fn consumed_on(
    store: &Store,
    provider: &str,
    resources: &BTreeMap<String, i64>,
) -> BTreeMap<String, String> {
    let Some(capacity) = store
        .get_cluster(Kind::ResourceProvider, provider)
        .and_then(|o| {
            o.meta()
                .annotations
                .as_ref()?
                .get(DEVICE_CAPACITY_ANNOTATION)
        })
        .and_then(|a| shared_capacity_of(a))
    else {
        return BTreeMap::new();
    };
    capacity
        .iter()
        .filter_map(|(name, (class, unit))| {
            let amount = *resources.get(class)?;
            Some((name.clone(), unit.quantity(amount)))
        })
        .collect()
}

/// Every device reservation the counted claims of Servers call for, in Server order: one
/// per Server that holds mirrored devices.
pub fn device_reservations(store: &Store) -> Vec<DeviceReservation> {
    let mut found: Vec<DeviceReservation> = server_claims(store, Claims::Counted)
        .filter_map(|c| device_reservation_of(store, c))
        .collect();
    found.sort_by(|a, b| a.server.cmp(&b.server));
    found
}

/// The device reservation one Server's claim calls for, if it holds mirrored devices.
fn device_reservation_of(store: &Store, c: ServerClaim<'_>) -> Option<DeviceReservation> {
    let allocations = &c.claim.spec.allocations;
    // A device on no one Node (shared through an aggregate) is used from the Node the
    // Server's cores are on.
    let servers_node = allocations
        .iter()
        .find_map(|pa| mirrored_node(store, &pa.provider));
    let devices: Vec<ReservedDevice> = allocations
        .iter()
        .filter_map(|pa| {
            let mut device = device_of(store, &pa.provider)?;
            device.consumed = consumed_on(store, &pa.provider, &pa.resources);
            device.node = device.node.or_else(|| servers_node.clone());
            Some(device)
        })
        .collect();
    (!devices.is_empty()).then_some(DeviceReservation {
        server: c.server,
        server_uid: c.uid,
        devices,
    })
}

/// The device reservation a Server's counted claim calls for, if it holds mirrored devices.
pub fn reservation_of(store: &Store, server: &ServerRef) -> Option<DeviceReservation> {
    server_claim(store, server, Claims::Counted).and_then(|c| device_reservation_of(store, c))
}

/// Devices as a message names them: `driver/pool/device`, comma separated.
pub fn device_list<'d>(devices: impl IntoIterator<Item = &'d DeviceId>) -> String {
    devices
        .into_iter()
        .map(|d| format!("{}/{}/{}", d.driver, d.pool, d.device))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why an allocation written to a Server's reservation claim is not the Server's, if it is
/// not: it may newly name (`added`) only devices the Server's counted claim holds.
pub fn reservation_allocation_problem(
    store: &Store,
    claim: &ResourceClaim,
    added: &BTreeSet<DeviceId>,
) -> Option<String> {
    let server = reserved_for(&claim.metadata).unwrap_or_else(|| ServerRef {
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        name: String::new(),
    });
    let reservation = reservation_of(store, &server);
    let held = reservation
        .as_ref()
        .map(DeviceReservation::devices)
        .unwrap_or_default();
    let foreign: Vec<&DeviceId> = added.difference(&held).collect();
    if !foreign.is_empty() {
        return Some(format!(
            "a reservation of Server {}/{} names {}, which its claim does not hold; it may name only its Server's devices",
            server.namespace,
            server.name,
            device_list(foreign)
        ));
    }
    // Of a shared device, it may consume only the Server's share.
    let shares: BTreeMap<&DeviceId, &BTreeMap<String, String>> = reservation
        .iter()
        .flat_map(|r| &r.devices)
        .filter(|d| !d.consumed.is_empty())
        .map(|d| (&d.id, &d.consumed))
        .collect();
    super::allocation_results(claim).find_map(|result| {
        let id = DeviceId::of(result);
        let share = shares.get(&id)?;
        let written = consumed_by(result);
        (!same_amounts(&written, share)).then(|| {
            format!(
                "consumedCapacity of {}: {written:?}; Server {}/{} holds a share of {share:?} there",
                device_list([&id]),
                server.namespace,
                server.name
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::object;

    /// A Node with one device under it, the Server `web` and its claim on the device and
    /// the Node's cores.
    fn store() -> Store {
        let mut store = Store::default();
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: node-a\n  annotations:\n    kubeplace.io/mirrored-from: Node/node-a\nspec:\n  inventories:\n    VCPU: {total: 8}\n",
        ));
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: gpu.example.com.node-a.gpu-0\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/node-a-gpus\n    kubeplace.io/device-driver: gpu.example.com\n    kubeplace.io/device-pool: node-a\n    kubeplace.io/device-name: gpu-0\n    kubeplace.io/device-class: gpu\nspec:\n  parent: node-a\n  inventories:\n    CUSTOM_GPU: {total: 1}\n",
        ));
        let mut server = object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  flavor: f\n  image: i\n",
        );
        server.meta_mut().uid = Some("uid-web".into());
        store.apply(server);
        let reference = ServerRef {
            namespace: "shop".into(),
            name: "web".into(),
        };
        store.apply(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {}\n  labels:\n    {}: shop\n    {}: web\nspec:\n  consumer: 00000000-0000-0000-0000-000000000001\n  allocations:\n  - provider: node-a\n    resources: {{VCPU: 1}}\n  - provider: gpu.example.com.node-a.gpu-0\n    resources: {{CUSTOM_GPU: 1}}\n",
            reference.allocation_name(),
            kubeplace_api::SERVER_NAMESPACE_LABEL,
            kubeplace_api::SERVER_NAME_LABEL,
        )));
        store
    }

    #[test]
    fn a_servers_share_of_a_shared_device_is_what_it_consumes() {
        let mut store = store();
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: gpu.example.com.node-a.gpu-0\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/node-a-gpus\n    kubeplace.io/device-driver: gpu.example.com\n    kubeplace.io/device-pool: node-a\n    kubeplace.io/device-name: gpu-0\n    kubeplace.io/device-class: gpu\n    kubeplace.io/device-capacity: '{\"CUSTOM_GPU_MEMORY_MB\": [\"memory\", \"Mi\"], \"CUSTOM_GPU_CORES\": [\"gpu.example.com/cores\", \"\"]}'\nspec:\n  parent: node-a\n  inventories:\n    CUSTOM_GPU_MEMORY_MB: {total: 40960}\n    CUSTOM_GPU_CORES: {total: 100}\n",
        ));
        let reference = ServerRef {
            namespace: "shop".into(),
            name: "web".into(),
        };
        store.apply(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {}\n  labels:\n    {}: shop\n    {}: web\nspec:\n  consumer: 00000000-0000-0000-0000-000000000001\n  allocations:\n  - provider: gpu.example.com.node-a.gpu-0\n    resources: {{CUSTOM_GPU_MEMORY_MB: 10240, CUSTOM_GPU_CORES: 25}}\n",
            reference.allocation_name(),
            kubeplace_api::SERVER_NAMESPACE_LABEL,
            kubeplace_api::SERVER_NAME_LABEL,
        )));
        let found = device_reservations(&store);
        assert_eq!(
            found[0].devices[0].consumed,
            BTreeMap::from([
                ("gpu.example.com/cores".to_string(), "25".to_string()),
                ("memory".to_string(), "10240Mi".to_string()),
            ])
        );
        // Its reservation claim may consume that share, in any form, and no other.
        let written = |memory: &str| -> ResourceClaim {
            serde_saphyr::from_str(&format!(
                "metadata:\n  name: kubeplace-reservation-web\n  namespace: shop\n  labels: {{kubeplace.io/reservation-for: web}}\nspec: {{}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {{request: device-0, driver: gpu.example.com, pool: node-a, device: gpu-0, shareID: 6ba7b810-9dad-41d1-80b4-00c04fd430c8, consumedCapacity: {{memory: {memory}, gpu.example.com/cores: '25'}}}}\n"
            ))
            .unwrap()
        };
        let added = |c: &ResourceClaim| allocated_devices(c);
        let same = written("10Gi");
        assert_eq!(
            reservation_allocation_problem(&store, &same, &added(&same)),
            None
        );
        let more = written("20Gi");
        assert_eq!(
            reservation_allocation_problem(&store, &more, &added(&more)).unwrap(),
            "consumedCapacity of gpu.example.com/node-a/gpu-0: {\"gpu.example.com/cores\": \"25\", \"memory\": \"20Gi\"}; Server shop/web holds a share of {\"gpu.example.com/cores\": \"25\", \"memory\": \"10240Mi\"} there"
        );
    }

    #[test]
    fn a_device_on_no_one_node_is_reserved_on_the_servers_node() {
        let mut store = store();
        // The device is a root of its own (a pool reaching every Node).
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: gpu.example.com.node-a.gpu-0\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/fabric\n    kubeplace.io/device-driver: gpu.example.com\n    kubeplace.io/device-pool: node-a\n    kubeplace.io/device-name: gpu-0\nspec:\n  inventories:\n    CUSTOM_GPU: {total: 1}\n  traits: [MISC_SHARES_VIA_AGGREGATE]\n",
        ));
        let found = device_reservations(&store);
        assert_eq!(found[0].devices[0].node.as_deref(), Some("node-a"));
        // Without cores on a Node, the device is reserved on none.
        let mut store = store;
        let claim = store
            .list(Kind::Allocation)
            .next()
            .cloned()
            .expect("the Server's claim");
        let mut claim = claim;
        if let Object::Allocation(a) = &mut claim {
            a.spec.allocations.retain(|pa| pa.provider != "node-a");
        }
        store.apply(claim);
        assert_eq!(device_reservations(&store)[0].devices[0].node, None);
    }

    #[test]
    fn a_servers_mirrored_device_is_reserved_on_its_node() {
        let store = store();
        let found = device_reservations(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        let r = &found[0];
        assert_eq!(r.claim_name(), "kubeplace-reservation-web");
        assert_eq!(r.server_uid, "uid-web");
        assert_eq!(
            r.devices,
            [ReservedDevice {
                id: DeviceId {
                    driver: "gpu.example.com".into(),
                    pool: "node-a".into(),
                    device: "gpu-0".into(),
                },
                device_class: "gpu".into(),
                node: Some("node-a".into()),
                consumed: BTreeMap::new(),
            }]
        );
        assert_eq!(
            reservation_of(&store, &r.server).map(|r| r.devices.len()),
            Some(1)
        );
        let claim = |name: &str, uid: &str, requests: usize| {
            let requests: Vec<String> = (0..requests)
                .map(|i| format!("{{name: device-{i}, exactly: {{deviceClassName: gpu}}}}"))
                .collect();
            serde_saphyr::from_str::<ResourceClaim>(&format!(
                "metadata:\n  name: {name}\n  namespace: shop\n  labels: {{kubeplace.io/reservation-for: web}}\n  ownerReferences: [{{apiVersion: kubeplace.io/v1alpha1, kind: Server, name: web, uid: {uid}, controller: true}}]\nspec:\n  devices:\n    requests: [{}]\n",
                requests.join(", ")
            ))
            .unwrap()
        };
        assert_eq!(
            reservation_claim_problem(&store, &claim("kubeplace-reservation-web", "uid-web", 1)),
            None
        );
        for (bad, field) in [
            (claim("mine", "uid-web", 1), "metadata.name"),
            (
                claim("kubeplace-reservation-web", "forged", 1),
                "metadata.ownerReferences",
            ),
            (
                claim("kubeplace-reservation-web", "uid-web", 3),
                "spec.devices.requests",
            ),
        ] {
            let problem = reservation_claim_problem(&store, &bad).expect("refused");
            assert!(problem.contains(field), "{problem}");
        }
        // A provider that is not a mirrored device is no device.
        assert!(device_of(&store, "node-a").is_none());
    }
}

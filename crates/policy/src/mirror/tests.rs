//! The mirror over a store: cluster objects in, providers and allocations counted, and
//! out again as they change and go.

use kubeplace_api::Kind;
use kubeplace_api::cluster_source::{ClusterSource, SourceKind};
use kubeplace_api::manifest::{Content, parse_stream};

use super::*;
use crate::store::Store;

fn source(yaml: &str) -> ClusterSource {
    match parse_stream("t.yaml", yaml).unwrap().remove(0).content {
        Ok(Content::Cluster(s)) => s,
        other => panic!("not a cluster object: {other:?}"),
    }
}

fn observe(mirror: &mut Mirror, store: &mut Store, yaml: &str) -> Vec<ObjectKey> {
    let observed = mirror.observe(&source(yaml));
    store.apply_changes(observed.changes);
    observed.outcome.unwrap()
}

const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus: {capacity: {cpu: '4', memory: 8Gi}}\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec: {nodeName: node1, containers: [{name: a, resources: {requests: {cpu: '3', memory: 1Gi}}}]}\n";

#[test]
fn nodes_and_pods_become_providers_and_usages_and_go_again() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    let keys = observe(&mut mirror, &mut store, NODE);
    assert_eq!(keys, [ObjectKey::cluster(Kind::ResourceProvider, "node1")]);
    observe(&mut mirror, &mut store, POD);
    assert_eq!(store.index().used("node1", "VCPU"), 3);
    assert_eq!(store.index().used("node1", "MEMORY_MB"), 1024);
    // The pod finishes: its allocation goes.
    let finished = format!("{POD}status: {{phase: Succeeded}}\n");
    assert!(observe(&mut mirror, &mut store, &finished).is_empty());
    assert_eq!(store.index().used("node1", "VCPU"), 0);
    assert_eq!(store.list(Kind::Allocation).count(), 0);
    // The Node goes.
    let changes = mirror.forget(&source(NODE).key());
    store.apply_changes(changes);
    assert!(store.list(Kind::ResourceProvider).next().is_none());
    assert_eq!(mirror.seen(SourceKind::Node), []);
    assert_eq!(mirror.seen(SourceKind::Pod).len(), 1);
}

#[test]
fn a_pool_of_devices_is_claimed_and_renamed_with_its_device_class() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    let slice = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node1-gpu}\nspec:\n  driver: gpu.example.com\n  nodeName: node1\n  pool: {name: node1, generation: 1, resourceSliceCount: 1}\n  devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]\n";
    assert_eq!(observe(&mut mirror, &mut store, slice).len(), 4);
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml}\nspec: {}\nstatus: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: node1, device: gpu-2}]}}}\n";
    observe(&mut mirror, &mut store, claim);
    let used =
        |store: &Store, class: &str| store.index().used("gpu.example.com.node1.gpu-2", class);
    assert_eq!(used(&store, "CUSTOM_GPU_EXAMPLE_COM"), 1);
    assert_eq!(store.index().children("node1").len(), 4);
    // A DeviceClass for the driver names the class after itself, on devices and claims alike.
    let class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n";
    observe(&mut mirror, &mut store, class);
    assert_eq!(used(&store, "CUSTOM_GPU"), 1);
    assert_eq!(used(&store, "CUSTOM_GPU_EXAMPLE_COM"), 0);
    assert!(
        store
            .index()
            .inventory("gpu.example.com.node1.gpu-0", "CUSTOM_GPU")
            .is_some()
    );
    // The slice goes: its devices go, and the claim's allocation is on nothing.
    store.apply_changes(mirror.forget(&source(slice).key()));
    assert!(store.index().children("node1").is_empty());
}

#[test]
fn a_bad_object_is_mirrored_as_nothing_with_a_message() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    let bad = NODE.replace("'4'", "four");
    let observed = mirror.observe(&source(&bad));
    assert_eq!(
        observed.outcome.unwrap_err().to_string(),
        "field status.capacity.cpu: \"four\" is not a Kubernetes quantity (a number with an optional suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
    );
    store.apply_changes(observed.changes);
    assert!(store.list(Kind::ResourceProvider).next().is_none());
}

#[test]
fn mirrored_allocations_are_decided_facts() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    // Two pods asking for more than the Node has: both are counted, neither refused.
    observe(&mut mirror, &mut store, POD);
    observe(
        &mut mirror,
        &mut store,
        &POD.replace("name: web", "name: web2"),
    );
    assert!(crate::claims::settle(&mut store).is_empty());
    assert_eq!(store.index().used("node1", "VCPU"), 6);
}

#[test]
fn a_shared_devices_claims_hold_what_they_consume() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    // The claim comes before the slice (a list in another order): it holds what it
    // consumes once the device is known to be shared.
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml, uid: 9d1c4c52-0000-4000-8000-000000000009}\nspec: {}\nstatus: {allocation: {devices: {results: [{request: r, driver: vgpu.example.com, pool: node1, device: vgpu-0, shareID: 6ba7b810-9dad-41d1-80b4-00c04fd430c8, consumedCapacity: {memory: 10000Mi, cores: '25'}}]}}}\n";
    observe(&mut mirror, &mut store, claim);
    let device = "vgpu.example.com.node1.vgpu-0";
    let slice = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node1-vgpu}\nspec:\n  driver: vgpu.example.com\n  nodeName: node1\n  pool: {name: node1, generation: 1, resourceSliceCount: 1}\n  devices: [{name: vgpu-0, allowMultipleAllocations: true, capacity: {memory: {value: 40Gi}, cores: {value: '100'}}}]\n";
    observe(&mut mirror, &mut store, slice);
    assert_eq!(store.index().used(device, "CUSTOM_VGPU_EXAMPLE_COM"), 0);
    assert_eq!(
        store
            .index()
            .used(device, "CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB"),
        10000
    );
    assert_eq!(
        store.index().used(device, "CUSTOM_VGPU_EXAMPLE_COM_CORES"),
        25
    );
    // What the claims ledger weighs for the same allocation, read from the store's
    // provider: the same amounts.
    let ClusterSource::ResourceClaim(c) = source(claim) else {
        unreachable!()
    };
    let weighed = claim_allocation(&c, &store).unwrap();
    assert_eq!(
        weighed.spec.allocations[0].resources,
        std::collections::BTreeMap::from([
            ("CUSTOM_VGPU_EXAMPLE_COM_CORES".to_string(), 25),
            ("CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB".to_string(), 10000),
        ])
    );
    // A DeviceClass renames the capacities' classes too.
    let class = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: vgpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"vgpu.example.com\"'}}]}\n";
    observe(&mut mirror, &mut store, class);
    assert_eq!(store.index().used(device, "CUSTOM_VGPU_MEMORY_MB"), 10000);
    assert_eq!(
        store
            .index()
            .used(device, "CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB"),
        0
    );
    // The device is no longer shared: the claim holds it whole.
    let whole = slice.replace("allowMultipleAllocations: true, ", "");
    observe(&mut mirror, &mut store, &whole);
    assert_eq!(store.index().used(device, "CUSTOM_VGPU"), 1);
    assert_eq!(store.index().used(device, "CUSTOM_VGPU_MEMORY_MB"), 0);
}

#[test]
fn a_pool_on_no_one_node_joins_the_aggregates_of_the_nodes_it_reaches() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    let node = |name: &str, rack: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{rack: {rack}}}}}\nstatus: {{capacity: {{cpu: '4'}}}}\n"
        )
    };
    let aggregates =
        |store: &Store, name: &str| match store.get_cluster(Kind::ResourceProvider, name) {
            Some(Object::ResourceProvider(rp)) => rp.spec.aggregates.clone(),
            other => panic!("no provider {name}: {other:?}"),
        };
    observe(&mut mirror, &mut store, &node("node1", "a"));
    let slice = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: fabric}\nspec:\n  driver: nic.example.com\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: [a]}]}]}\n  pool: {name: fabric, generation: 1, resourceSliceCount: 1}\n  devices: [{name: vf-0}]\n";
    observe(&mut mirror, &mut store, slice);
    let shared = aggregates(&store, "nic.example.com.fabric.vf-0");
    assert_eq!(shared.len(), 1);
    // A Node already there joins the pool's aggregate; a Node that comes later too, when
    // the selector picks it; one it does not pick stays out.
    assert_eq!(aggregates(&store, "node1"), shared);
    observe(&mut mirror, &mut store, &node("node2", "a"));
    observe(&mut mirror, &mut store, &node("node3", "b"));
    assert_eq!(aggregates(&store, "node2"), shared);
    assert!(aggregates(&store, "node3").is_empty());
    // A Node's labels move it in and out.
    observe(&mut mirror, &mut store, &node("node2", "b"));
    assert!(aggregates(&store, "node2").is_empty());
    // The slice goes: the Nodes leave its aggregate.
    store.apply_changes(mirror.forget(&source(slice).key()));
    assert!(aggregates(&store, "node1").is_empty());
    assert!(
        store
            .get_cluster(Kind::ResourceProvider, "nic.example.com.fabric.vf-0")
            .is_none()
    );
}

#[test]
fn device_classes_with_cel_selectors_split_a_drivers_devices() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    let slice = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node1-gpu}\nspec:\n  driver: gpu.example.com\n  nodeName: node1\n  pool: {name: node1, generation: 1, resourceSliceCount: 1}\n  devices:\n  - {name: big, capacity: {memory: {value: 80Gi}}}\n  - {name: small, capacity: {memory: {value: 16Gi}}}\n";
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml}\nspec: {}\nstatus: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: node1, device: big}]}}}\n";
    let gpu = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n";
    let big = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: big-gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}, {cel: {expression: 'device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0'}}]}\n";
    for yaml in [gpu, big, slice, claim] {
        observe(&mut mirror, &mut store, yaml);
    }
    let classes = |store: &Store, device: &str| -> Vec<String> {
        match store.get_cluster(
            Kind::ResourceProvider,
            &format!("gpu.example.com.node1.{device}"),
        ) {
            Some(Object::ResourceProvider(rp)) => rp.spec.inventories.keys().cloned().collect(),
            other => panic!("no provider for {device}: {other:?}"),
        }
    };
    assert_eq!(classes(&store, "big"), ["CUSTOM_BIG_GPU"]);
    assert_eq!(classes(&store, "small"), ["CUSTOM_GPU"]);
    assert_eq!(
        store
            .index()
            .used("gpu.example.com.node1.big", "CUSTOM_BIG_GPU"),
        1
    );
    // The selecting class goes: its device and the claim on it fall to the next class.
    store.apply_changes(mirror.forget(&source(big).key()));
    assert_eq!(classes(&store, "big"), ["CUSTOM_GPU"]);
    assert_eq!(
        store
            .index()
            .used("gpu.example.com.node1.big", "CUSTOM_GPU"),
        1
    );
    assert_eq!(
        store
            .index()
            .used("gpu.example.com.node1.big", "CUSTOM_BIG_GPU"),
        0
    );
}

#[test]
fn partitions_of_a_partitionable_device_are_left_to_kube_scheduler() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    // gpu-0 whole, or as two overlapping partitions drawing on its counters.
    let slice = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node1-gpu}\nspec:\n  driver: gpu.example.com\n  nodeName: node1\n  pool: {name: node1, generation: 1, resourceSliceCount: 1}\n  sharedCounters: [{name: gpu-0-counters, counters: {memory: {value: 40Gi}}}]\n  devices:\n  - {name: gpu-1}\n  - {name: gpu-0-half-a, consumesCounters: [{counterSet: gpu-0-counters, counters: {memory: {value: 20Gi}}}]}\n  - {name: gpu-0-whole, consumesCounters: [{counterSet: gpu-0-counters, counters: {memory: {value: 40Gi}}}]}\n";
    let keys = observe(&mut mirror, &mut store, slice);
    assert_eq!(
        keys,
        [ObjectKey::cluster(
            Kind::ResourceProvider,
            "gpu.example.com.node1.gpu-1"
        )],
        "partitions are not providers"
    );
    // A pod's claim on a partition holds nothing kubeplace counts; one on gpu-1 does.
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml}\nspec: {}\nstatus: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: node1, device: gpu-0-half-a}, {request: s, driver: gpu.example.com, pool: node1, device: gpu-1}]}}}\n";
    observe(&mut mirror, &mut store, claim);
    let allocations: Vec<_> = store.list(Kind::Allocation).collect();
    assert_eq!(allocations.len(), 1);
    let Object::Allocation(a) = allocations[0] else {
        panic!("not an allocation")
    };
    let providers: Vec<&str> = a
        .spec
        .allocations
        .iter()
        .map(|pa| pa.provider.as_str())
        .collect();
    assert_eq!(providers, ["gpu.example.com.node1.gpu-1"]);
}

const SLICE: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node1-gpu}\nspec:\n  driver: gpu.example.com\n  nodeName: node1\n  pool: {name: node1, generation: 1, resourceSliceCount: 1}\n  devices: [{name: gpu-0}]\n";

fn class_yaml(name: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {name}}}\nspec: {{selectors: [{{cel: {{expression: 'device.driver == \"gpu.example.com\"'}}}}]}}\n"
    )
}

fn class_of_gpu_0(store: &Store) -> Vec<String> {
    match store.get_cluster(Kind::ResourceProvider, "gpu.example.com.node1.gpu-0") {
        Some(Object::ResourceProvider(rp)) => rp.spec.inventories.keys().cloned().collect(),
        other => panic!("no provider: {other:?}"),
    }
}

#[test]
fn picks_made_apart_are_taken_and_stale_ones_made_again() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    observe(&mut mirror, &mut store, NODE);
    observe(&mut mirror, &mut store, &class_yaml("gpu"));
    let slice = source(SLICE);
    let ClusterSource::ResourceSlice(s) = &slice else {
        unreachable!()
    };
    let picks = mirror.device_classes().pick(s);
    let observed = mirror.observe_picked(&slice, picks.clone());
    assert!(observed.problems.is_empty());
    store.apply_changes(observed.changes);
    assert_eq!(class_of_gpu_0(&store), ["CUSTOM_GPU"]);
    // A class comes between picking and mirroring: the picks are made again with it.
    observe(&mut mirror, &mut store, &class_yaml("a-gpu"));
    let observed = mirror.observe_picked(&slice, picks);
    store.apply_changes(observed.changes);
    assert_eq!(class_of_gpu_0(&store), ["CUSTOM_A_GPU"]);
}

#[test]
fn classes_changed_apart_are_adopted_whole_unless_the_mirrors_changed_since() {
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    for yaml in [NODE, SLICE] {
        observe(&mut mirror, &mut store, yaml);
    }
    assert_eq!(class_of_gpu_0(&store), ["CUSTOM_GPU_EXAMPLE_COM"]);
    let gpu = source(&class_yaml("gpu"));
    let ClusterSource::DeviceClass(class) = &gpu else {
        unreachable!()
    };
    // Picked with classes the mirror no longer has: nothing is taken.
    let mut stale = mirror.picking();
    stale.put_class(class);
    observe(&mut mirror, &mut store, &class_yaml("other"));
    assert!(mirror.adopt(stale.pick_all()).is_none());
    let mut picking = mirror.picking();
    assert!(picking.put_class(class).is_empty());
    assert!(picking.changed());
    let adopted = mirror.adopt(picking.pick_all()).unwrap();
    store.apply_changes(adopted.changes);
    assert_eq!(class_of_gpu_0(&store), ["CUSTOM_GPU"]);
    mirror.note_adopted(&gpu.key(), true);
    assert_eq!(mirror.seen(SourceKind::DeviceClass).len(), 2);
    // Observed after all the same, it finds the class there: nothing is picked again.
    let observed = mirror.observe(&gpu);
    assert!(observed.changes.is_empty() && observed.problems.is_empty());
}

#[test]
fn a_class_that_does_not_compile_is_a_problem_of_its_observation() {
    let mut mirror = Mirror::default();
    let broken = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: broken}\nspec: {selectors: [{cel: {expression: 'device.driver =='}}]}\n";
    let observed = mirror.observe(&source(broken));
    assert_eq!(observed.problems.len(), 1);
    assert_eq!(observed.problems[0].class, "broken");
    // Once for this version of the class.
    assert!(mirror.observe(&source(broken)).problems.is_empty());
}

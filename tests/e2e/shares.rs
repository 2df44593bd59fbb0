//! A DRA device shared among claims on a real node (`allowMultipleAllocations`, the
//! `DRAConsumableCapacity` gate `hack/local-cluster.sh` turns on): kubeplace inventories its
//! capacity, Servers take shares of it that kube-scheduler sees through their reservation
//! claims, pods' claims take shares that kubeplace counts, and at no moment do the shares
//! add up to more than the device has. Run alone, as root, like `devices.rs`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::devices::{
    claim_and_pod, claim_results, delete_pods_now, mirroring_replicas, namespaced_field,
};
use super::mirror::{eventually, first_node, flavor_field};
use crate::support::{ControlPlane, Node};
use kubeplace_policy::mirror::quantity::{MIB, Rounding, in_units};

const DRIVER: &str = "share.e2e.kubeplace.io";
const NS: &str = "share";
/// The device's memory, in MiB, and each share of it.
const MEMORY_MIB: i64 = 40 * 1024;
const SHARE_MIB: i64 = 10 * 1024;

/// Every claim's share of the device now, in MiB: (claim, MiB), reservation claims included.
fn shares(cp: &ControlPlane) -> Vec<(String, i64)> {
    claim_results(cp, NS)
        .into_iter()
        .map(|(claim, result)| {
            let name = claim["metadata"]["name"].as_str().unwrap_or("").to_string();
            let memory = result["consumedCapacity"]["memory"].as_str().unwrap_or("");
            // A result without consumed capacity would be the whole device.
            (
                name,
                in_units(memory, MIB, Rounding::Up).unwrap_or(MEMORY_MIB),
            )
        })
        .collect()
}

fn field(cp: &ControlPlane, kind: &str, name: &str, path: &str) -> String {
    namespaced_field(cp, kind, NS, name, path)
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn server(name: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{flavor: share.ten, image: share-image}}\n"
    )
}

/// A pod with a claim of its own for a 10 GiB share of the device.
fn pod_with_share(name: &str) -> String {
    claim_and_pod(
        NS,
        name,
        name,
        "{deviceClassName: e2e-share, capacity: {requests: {memory: 10Gi}}}",
    )
}

fn headroom(cp: &ControlPlane) -> String {
    flavor_field(cp, "share.ten", ".status.headroom.servers")
}

#[test]
fn a_shared_devices_capacity_is_split_between_pods_and_servers() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let node_name = first_node(cp);
    let (_replicas, _leader) = mirroring_replicas(cp, "kubeplace-shares");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: e2e-share}}\n\
             spec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\"'}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node_name}-share}}\n\
             spec:\n  driver: {DRIVER}\n  nodeName: {node_name}\n  pool: {{name: {node_name}, generation: 1, resourceSliceCount: 1}}\n\
             \x20 devices: [{{name: share-0, allowMultipleAllocations: true, capacity: {{memory: {{value: 40Gi}}}}}}]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: share.ten}}\n\
             spec: {{vcpus: 1, memoryMb: 1, extraSpecs: {{'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:CUSTOM_E2E_SHARE_MEMORY_MB': '{SHARE_MIB}'}}}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: share-image}}\nspec: {{properties: {{os_distro: ubuntu}}}}\n"
        ),
    )
    .ok();
    assert_eq!(
        cp.kubectl(&[
            "get",
            "resourceslice",
            &format!("{node_name}-share"),
            "-o",
            "jsonpath={.spec.devices[0].allowMultipleAllocations}",
        ])
        .stdout
        .trim(),
        "true",
        "the API server keeps allowMultipleAllocations (the DRAConsumableCapacity gate)"
    );
    eventually(60, "four shares of headroom", || {
        let h = headroom(cp);
        (h == "4").then_some(()).ok_or(h)
    });

    // Sampled throughout: the shares never add up to more than the device has.
    let stop = AtomicBool::new(false);
    let over: Mutex<Vec<Vec<(String, i64)>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        // Stops the sampler however the scope ends, a failed assertion included.
        let _stop = StopOnDrop(&stop);
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let now = shares(cp);
                if now.iter().map(|(_, mib)| mib).sum::<i64>() > MEMORY_MIB {
                    over.lock().unwrap().push(now);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });

        // Two Servers take 20 GiB; their reservation claims show kube-scheduler the shares.
        for i in 0..2 {
            cp.kubectl_stdin(&["create", "-f", "-"], &server(&format!("vm-{i}")))
                .ok();
        }
        eventually(90, "both Servers' shares reserved", || {
            let reserved: Vec<(String, i64)> = shares(cp)
                .into_iter()
                .filter(|(name, _)| name.starts_with("kubeplace-reservation-"))
                .collect();
            (reserved.len() == 2 && reserved.iter().all(|(_, mib)| *mib == SHARE_MIB))
                .then_some(())
                .ok_or(format!("{reserved:?}"))
        });
        for i in 0..2 {
            let share_id = field(
                cp,
                "resourceclaim",
                &format!("kubeplace-reservation-vm-{i}"),
                ".status.allocation.devices.results[0].shareID",
            );
            assert_eq!(share_id.len(), 36, "vm-{i}'s share has an id: {share_id:?}");
        }

        // Three pods each asking for 10 GiB: two fit beside the Servers, the third waits.
        for i in 0..3 {
            cp.kubectl_stdin(&["create", "-f", "-"], &pod_with_share(&format!("pod-{i}")))
                .ok();
        }
        let pods_with_shares = || {
            shares(cp)
                .into_iter()
                .filter(|(name, _)| name.starts_with("pod-"))
                .map(|(name, _)| name)
                .collect::<Vec<_>>()
        };
        let (given, _) = eventually(90, "two pods given shares", || {
            let given = pods_with_shares();
            (given.len() == 2)
                .then_some(given.clone())
                .ok_or(format!("{given:?}"))
        });
        let waiting = (0..3)
            .map(|i| format!("pod-{i}"))
            .find(|p| !given.contains(p))
            .unwrap();
        eventually(60, "the third pod refused by kube-scheduler", || {
            let status = field(
                cp,
                "pod",
                &waiting,
                ".status.conditions[?(@.type==\"PodScheduled\")].status",
            );
            (status == "False").then_some(()).ok_or(status)
        });
        // kubeplace counts the pods' shares: no room is left for a Server.
        eventually(30, "no headroom left", || {
            let h = headroom(cp);
            (h == "0").then_some(()).ok_or(h)
        });
        let look = Instant::now();
        while look.elapsed() < Duration::from_secs(5) {
            assert_eq!(pods_with_shares().len(), 2, "a third pod was given a share");
            std::thread::sleep(Duration::from_millis(300));
        }

        // A Server deleted gives its share back: the waiting pod is given it.
        cp.kubectl(&["delete", "server", "vm-0", "-n", NS, "--wait=false"])
            .ok();
        let (_, took) = eventually(60, "the waiting pod given the Server's share", || {
            pods_with_shares()
                .contains(&waiting)
                .then_some(())
                .ok_or(format!("{:?}", shares(cp)))
        });
        eprintln!("shares: the waiting pod was given the deleted Server's share {took:?} later");
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        // The deleted Server's reservation claim went once its share was taken back.
        eventually(30, "vm-0's reservation claim gone", || {
            let left = field(
                cp,
                "resourceclaim",
                "kubeplace-reservation-vm-0",
                ".metadata.name",
            );
            left.is_empty().then_some(()).ok_or(left)
        });
    });
    let over = over.into_inner().unwrap();
    assert!(
        over.is_empty(),
        "the shares added up to more than 40 GiB: {:?}",
        over.first()
    );
    delete_pods_now(cp, NS);
    cp.kubectl(&["delete", "servers", "--all", "-n", NS, "--wait=false"])
        .ok();
}

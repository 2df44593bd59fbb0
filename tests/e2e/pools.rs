//! A DRA pool on no one Node (`allNodes`: devices reachable from every Node, as
//! network-attached devices are) on a real node: kubeplace shares its devices with the
//! Nodes' trees through an aggregate, a Server is placed on the Node's memory and one of
//! the pool's devices (of a DeviceClass whose CEL selector reads an attribute, which
//! kubeplace and kube-scheduler both evaluate; the third device is of no class), its
//! reservation claim shows kube-scheduler the device, and pods' claims get only the devices
//! no Server holds. Then the Node goes: a Server on it keeps its claim and says its
//! provider is gone. Run alone, as root, like `devices.rs`.

use super::devices::{
    claim_and_pod, claim_results, delete_claims, delete_pods_now, mirroring_replicas,
    namespaced_field,
};
use super::mirror::{eventually, first_node, flavor_field};
use crate::support::{ControlPlane, Node};

const DRIVER: &str = "nic.e2e.kubeplace.io";
const NS: &str = "pool";

/// Every allocated claim in the namespace with the devices it got: (claim, device).
fn allocated(cp: &ControlPlane) -> Vec<(String, String)> {
    claim_results(cp, NS)
        .into_iter()
        .map(|(claim, result)| {
            let name = claim["metadata"]["name"].as_str().unwrap_or("");
            (
                name.to_string(),
                result["device"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A pod with a claim of its own for one device of the pool.
fn pod_with_device(name: &str) -> String {
    claim_and_pod(NS, name, name, "{deviceClassName: e2e-nic}")
}

fn headroom(cp: &ControlPlane) -> String {
    flavor_field(cp, "nic.one", ".status.headroom.servers")
}

#[test]
fn a_pool_reaching_every_node_is_one_inventory_for_pods_and_servers() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let node_name = first_node(cp);
    let (_replicas, _leader) = mirroring_replicas(cp, "kubeplace-pools");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: e2e-nic}}\n\
             spec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].vlan >= 100'}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: fabric}}\n\
             spec:\n  driver: {DRIVER}\n  allNodes: true\n  pool: {{name: fabric, generation: 1, resourceSliceCount: 1}}\n\
             \x20 devices: [{{name: vf-0, attributes: {{vlan: {{int: 100}}}}}}, {{name: vf-1, attributes: {{vlan: {{int: 200}}}}}}, {{name: vf-2, attributes: {{vlan: {{int: 7}}}}}}]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: nic.one}}\n\
             spec: {{vcpus: 1, memoryMb: 16, extraSpecs: {{'resources:VCPU': '0', 'resources:CUSTOM_E2E_NIC': '1'}}}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: nic-image}}\nspec: {{properties: {{os_distro: ubuntu}}}}\n"
        ),
    )
    .ok();
    // The Node's memory and the pool's devices combine: two Servers' worth.
    eventually(60, "two Servers of headroom", || {
        let h = headroom(cp);
        (h == "2").then_some(()).ok_or(h)
    });

    // A Server is placed on the Node and one device; its reservation claim holds the
    // device for kube-scheduler, used from the Server's Node.
    cp.kubectl_stdin(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: vm-0, namespace: {NS}}}\nspec: {{flavor: nic.one, image: nic-image}}\n"
        ),
    )
    .ok();
    let (held, took) = eventually(90, "the Server's device reserved", || {
        let reserved: Vec<(String, String)> = allocated(cp)
            .into_iter()
            .filter(|(claim, _)| claim == "kubeplace-reservation-vm-0")
            .collect();
        match reserved.as_slice() {
            [(_, device)] => Ok(device.clone()),
            _ => Err(format!("{reserved:?}")),
        }
    });
    eprintln!("pools: vm-0's device {held} reserved {took:?} after its creation");
    let on_node = namespaced_field(
        cp,
        "resourceclaim",
        NS,
        "kubeplace-reservation-vm-0",
        ".status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]",
    );
    assert_eq!(
        on_node.trim(),
        node_name,
        "the device is used from the Server's Node"
    );

    // Two pods each ask kube-scheduler for a device: one gets the other device, the second
    // waits; neither gets the Server's.
    for i in 0..2 {
        cp.kubectl_stdin(
            &["create", "-f", "-"],
            &pod_with_device(&format!("pod-{i}")),
        )
        .ok();
    }
    let (given, _) = eventually(90, "one pod given the free device", || {
        let pods: Vec<(String, String)> = allocated(cp)
            .into_iter()
            .filter(|(claim, _)| claim.starts_with("pod-"))
            .collect();
        (pods.len() == 1)
            .then_some(pods.clone())
            .ok_or(format!("{pods:?}"))
    });
    assert_ne!(given[0].1, held, "a pod was given the Server's device");
    eventually(30, "no headroom left", || {
        let h = headroom(cp);
        (h == "0").then_some(()).ok_or(h)
    });
    let waiting = if given[0].0 == "pod-0" {
        "pod-1"
    } else {
        "pod-0"
    };
    std::thread::sleep(std::time::Duration::from_secs(5));
    let all = allocated(cp);
    let mut devices: Vec<&String> = all.iter().map(|(_, d)| d).collect();
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), all.len(), "a device given twice: {all:?}");
    assert!(
        !all.iter().any(|(claim, _)| claim == waiting),
        "the second pod got a device: {all:?}"
    );

    // The Server goes: its device goes to the waiting pod.
    cp.kubectl(&["delete", "server", "vm-0", "-n", NS, "--wait=false"])
        .ok();
    let (_, took) = eventually(60, "the waiting pod given the Server's device", || {
        let now = allocated(cp);
        now.iter()
            .any(|(claim, device)| claim == waiting && *device == held)
            .then_some(())
            .ok_or(format!("{now:?}"))
    });
    eprintln!("pools: the waiting pod was given the deleted Server's device {took:?} later");

    // The Node goes (its kubelet stopped for good, the Node deleted): a Server placed on it
    // keeps its claim and says its provider is gone; the pool's devices stay.
    delete_pods_now(cp, NS);
    delete_claims(cp, NS);
    cp.kubectl_stdin(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: vm-1, namespace: {NS}}}\nspec: {{flavor: nic.one, image: nic-image}}\n"
        ),
    )
    .ok();
    let scheduled = |field: &str| {
        namespaced_field(
            cp,
            "server",
            NS,
            "vm-1",
            &format!(".status.conditions[?(@.type==\"Scheduled\")].{field}"),
        )
    };
    eventually(90, "vm-1 placed", || {
        let reason = scheduled("reason");
        (reason == "Scheduled").then_some(()).ok_or(reason)
    });
    let killed = std::process::Command::new("pkill")
        .args([
            "-9",
            "-f",
            &format!("/kubelet .*--root-dir={}/", cp.dir.display()),
        ])
        .status()
        .expect("pkill runs");
    assert!(killed.success(), "the node's kubelet was running");
    cp.kubectl(&["delete", "node", &node_name, "--wait=false"])
        .ok();
    let (_, took) = eventually(60, "vm-1 told its provider is gone", || {
        let reason = scheduled("reason");
        (reason == "ProviderGone").then_some(()).ok_or(reason)
    });
    eprintln!("pools: vm-1 said ProviderGone {took:?} after its Node was deleted");
    let message = scheduled("message");
    assert!(
        message.contains(&format!("provider {node_name} ")),
        "{message}"
    );
    let kept = cp
        .kubectl(&[
            "get",
            "allocations",
            "-l",
            "kubeplace.io/server-name=vm-1",
            "-o",
            "name",
        ])
        .stdout;
    assert!(!kept.trim().is_empty(), "vm-1 keeps its claim");
}

//! The cluster mirror on a real node (`hack/local-cluster.sh`: kube-scheduler, a kubelet):
//! `kubeplace run --mirror-cluster` shows the Node as a provider, a ResourceSlice of four
//! devices as its children, pods' requests and an allocated ResourceClaim as allocations, and
//! Flavors' candidates and headroom move as pods come and go. Run alone, as root, like
//! `node.rs`: `cargo test --test e2e mirror:: -- --test-threads=1`.

use std::time::{Duration, Instant};

use crate::Operator;
use crate::support::{ControlPlane, Node};

const DRIVER: &str = "gpu.e2e.kubeplace.io";

/// Retries `check` every 200 ms for up to `seconds`; the value and how long it took.
pub(super) fn eventually<T: std::fmt::Debug>(
    seconds: u64,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> (T, Duration) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    loop {
        match check() {
            Ok(value) => return (value, started.elapsed()),
            Err(last) if Instant::now() > deadline => {
                panic!("{what} not within {seconds}s; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

pub(super) fn flavor_field(cp: &ControlPlane, name: &str, path: &str) -> String {
    cp.kubectl(&["get", "flavor", name, "-o", &format!("jsonpath={{{path}}}")])
        .stdout
        .trim()
        .to_string()
}

/// Waits until a Flavor's field reads `want`; how long that took.
fn flavor_reads(cp: &ControlPlane, name: &str, path: &str, want: &str, seconds: u64) -> Duration {
    eventually(seconds, &format!("{name} {path} = {want}"), || {
        let got = flavor_field(cp, name, path);
        if got == want { Ok(()) } else { Err(got) }
    })
    .1
}

/// The name of the cluster's Node.
pub(super) fn first_node(cp: &ControlPlane) -> String {
    cp.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
        .ok()
        .trim()
        .to_string()
}

fn apply(cp: &ControlPlane, yaml: &str) {
    cp.kubectl_stdin(&["apply", "-f", "-"], yaml).ok();
}

/// A pod asking for 10 millicores, bound by kube-scheduler: mirrored as one whole VCPU.
fn small_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{requests: {{cpu: 10m, memory: 1Mi}}}}}}\n"
    )
}

#[test]
fn nodes_pods_and_devices_are_mirrored_on_a_real_node() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let node_name = first_node(cp);
    let _operator = Operator::start(cp, "mirror", &["--mirror-cluster", "--headroom-interval=1"]);

    // The Node is a root provider: a Flavor of one core and 1 MiB lands on it, and its
    // headroom is the cores nothing holds (the pods already running each hold a whole one).
    apply(
        cp,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: mirror.one}\nspec: {vcpus: 1, memoryMb: 1}\n",
    );
    flavor_reads(cp, "mirror.one", ".status.candidateCount", "1", 30);
    assert_eq!(
        flavor_field(
            cp,
            "mirror.one",
            ".status.candidates[0].allocations[0].provider"
        ),
        node_name
    );
    let (free, _) = eventually(60, "mirror.one's headroom", || {
        flavor_field(cp, "mirror.one", ".status.headroom.servers")
            .parse::<i64>()
            .map_err(|e| e.to_string())
    });
    assert!(free >= 1, "no core free on the node: {free}");

    // A Flavor of every free core has one candidate until a pod is bound to the node, and
    // again once the pod is gone.
    apply(
        cp,
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: mirror.rest}}\nspec: {{vcpus: {free}, memoryMb: 1}}\n"
        ),
    );
    flavor_reads(cp, "mirror.rest", ".status.candidateCount", "1", 30);
    apply(cp, &small_pod("mirror-pod"));
    eventually(60, "mirror-pod bound", || {
        let out = cp.kubectl(&[
            "get",
            "pod",
            "mirror-pod",
            "-o",
            "jsonpath={.spec.nodeName}",
        ]);
        (out.stdout.trim() == node_name)
            .then_some(())
            .ok_or(out.stdout)
    });
    let came = flavor_reads(cp, "mirror.rest", ".status.candidateCount", "0", 10);
    flavor_reads(
        cp,
        "mirror.one",
        ".status.headroom.servers",
        &(free - 1).to_string(),
        30,
    );
    cp.kubectl(&["delete", "pod", "mirror-pod", "--grace-period=0", "--force"])
        .ok();
    let went = flavor_reads(cp, "mirror.rest", ".status.candidateCount", "1", 10);
    eprintln!(
        "mirror: a bound pod's cores left candidates after {came:?}, came back {went:?} after its deletion"
    );

    // A ResourceSlice of four devices written by the test: four children of the Node's
    // provider, of the class its DeviceClass names.
    apply(
        cp,
        &format!(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: e2e-gpu}}\n\
             spec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\"'}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node_name}-gpus}}\n\
             spec:\n  driver: {DRIVER}\n  nodeName: {node_name}\n  pool: {{name: {node_name}, generation: 1, resourceSliceCount: 1}}\n\
             \x20 devices: [{{name: gpu-0}}, {{name: gpu-1}}, {{name: gpu-2}}, {{name: gpu-3}}]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: mirror.gpu}}\n\
             spec: {{vcpus: 1, memoryMb: 1, extraSpecs: {{'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:CUSTOM_E2E_GPU': '1'}}}}\n"
        ),
    );
    flavor_reads(cp, "mirror.gpu", ".status.candidateCount", "4", 30);

    // A pod with a claim: kube-scheduler allocates it a device, and that device is taken.
    apply(
        cp,
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu-claim, namespace: default}\n\
         spec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: e2e-gpu}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: gpu-user, namespace: default}\n\
         spec:\n  resourceClaims: [{name: gpu, resourceClaimName: gpu-claim}]\n\
         \x20 containers:\n  - {name: c, image: localhost/kubeplace-pause:1, resources: {claims: [{name: gpu}]}}\n",
    );
    eventually(60, "gpu-claim allocated", || {
        let out = cp.kubectl(&[
            "get",
            "resourceclaim",
            "gpu-claim",
            "-o",
            "jsonpath={.status.allocation.devices.results[0].device}",
        ]);
        (!out.stdout.trim().is_empty())
            .then_some(())
            .ok_or(out.stderr)
    });
    flavor_reads(cp, "mirror.gpu", ".status.candidateCount", "3", 10);
    cp.kubectl(&["delete", "pod", "gpu-user", "--grace-period=0", "--force"])
        .ok();
    cp.kubectl(&["delete", "resourceclaim", "gpu-claim", "--wait=false"])
        .ok();
    flavor_reads(cp, "mirror.gpu", ".status.candidateCount", "4", 60);

    // The slice goes: so do its devices.
    cp.kubectl(&["delete", "resourceslice", &format!("{node_name}-gpus")])
        .ok();
    flavor_reads(cp, "mirror.gpu", ".status.candidateCount", "0", 10);

    // Nothing mirrored was written to the API server.
    let written = cp.kubectl(&["get", "resourceproviders,allocations", "-o", "name"]);
    assert_eq!(
        written.ok().trim(),
        "",
        "mirrored objects are never written"
    );
}

fn pod_field(cp: &ControlPlane, namespace: &str, name: &str, path: &str) -> String {
    cp.kubectl(&[
        "get",
        "pod",
        name,
        "-n",
        namespace,
        "-o",
        &format!("jsonpath={{{path}}}"),
    ])
    .stdout
    .trim()
    .to_string()
}

/// A Server placed on a mirrored Node holds its cores there for kube-scheduler too: a
/// reservation pod bound to the Node requests them (and is not counted twice by the
/// mirror), a pod that needs them stays Pending, and it is bound once the Server goes.
#[test]
fn a_servers_cores_on_a_mirrored_node_are_held_for_kube_scheduler() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let node_name = first_node(cp);
    let allocatable = cp
        .kubectl(&[
            "get",
            "node",
            &node_name,
            "-o",
            "jsonpath={.status.allocatable.cpu}",
        ])
        .ok()
        .trim()
        .to_string();
    let allocatable_millis: i64 = match allocatable.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => allocatable.parse::<i64>().unwrap() * 1000,
    };
    let _operator = Operator::start(
        cp,
        "reservations",
        &[
            "--mirror-cluster",
            "--headroom-interval=1",
            "--reservation-image=localhost/kubeplace-pause:1",
        ],
    );
    apply(
        cp,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: reserve.one}\nspec: {vcpus: 1, memoryMb: 1}\n---\n\
         apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: reserve-image}\nspec: {properties: {os_distro: ubuntu}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: reserve}\n",
    );
    let (free, _) = eventually(60, "reserve.one's headroom", || {
        flavor_field(cp, "reserve.one", ".status.headroom.servers")
            .parse::<i64>()
            .map_err(|e| e.to_string())
    });
    assert!(free >= 2, "two free cores are needed: {free}");
    apply(
        cp,
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: reserve.rest}}\nspec: {{vcpus: {}, memoryMb: 1}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: reserve.all}}\nspec: {{vcpus: {free}, memoryMb: 1}}\n",
            free - 1
        ),
    );
    flavor_reads(cp, "reserve.all", ".status.candidateCount", "1", 30);

    // The Server takes one core of the Node; its reservation pod is bound there with it.
    apply(
        cp,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: held, namespace: reserve}\nspec: {flavor: reserve.one, image: reserve-image}\n",
    );
    let pod = "kubeplace-reservation-held";
    let (_, took) = eventually(60, "the reservation pod bound to the Node", || {
        let bound = pod_field(cp, "reserve", pod, ".spec.nodeName");
        let cpu = pod_field(
            cp,
            "reserve",
            pod,
            ".spec.containers[0].resources.requests.cpu",
        );
        (bound == node_name && cpu == "1")
            .then_some(())
            .ok_or(format!("node {bound:?}, cpu {cpu:?}"))
    });
    eprintln!("reservations: the Server's pod was bound {took:?} after the Server was made");
    assert_eq!(
        pod_field(cp, "reserve", pod, ".metadata.ownerReferences[0].kind"),
        "Server"
    );
    // A pod dressed as the reservation (the label, the Server as owner) but asking for
    // more than the claim holds is refused: the mirror would not count it.
    let server_uid = cp
        .kubectl(&[
            "get",
            "server",
            "held",
            "-n",
            "reserve",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .ok()
        .trim()
        .to_string();
    let forged = cp.kubectl_stdin(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kubeplace-reservation-held-2\n  namespace: reserve\n  labels: {{kubeplace.io/reservation-for: held}}\n  ownerReferences: [{{apiVersion: kubeplace.io/v1alpha1, kind: Server, name: held, uid: {server_uid}, controller: true}}]\n\
             spec:\n  nodeName: {node_name}\n  containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{requests: {{cpu: '2'}}}}}}\n"
        ),
    );
    assert!(
        !forged.success
            && forged
                .stderr
                .contains("is not a reservation kubeplace makes"),
        "a forged reservation pod: {} {}",
        forged.stdout,
        forged.stderr
    );

    // Deleted by hand while the claim stands: made again, bound to the same Node.
    let first = pod_field(cp, "reserve", pod, ".metadata.uid");
    cp.kubectl(&["delete", "pod", pod, "-n", "reserve", "--wait=false"])
        .ok();
    let (_, again) = eventually(60, "the reservation pod made again", || {
        let uid = pod_field(cp, "reserve", pod, ".metadata.uid");
        let bound = pod_field(cp, "reserve", pod, ".spec.nodeName");
        (!uid.is_empty() && uid != first && bound == node_name)
            .then_some(())
            .ok_or(format!("uid {uid:?}, node {bound:?}"))
    });
    eprintln!("reservations: a reservation pod deleted by hand was made again after {again:?}");

    // Resized to two cores and back: each time the pod is made again with the new amount.
    let resize = |flavor: &str, cpu: &str| {
        let before = pod_field(cp, "reserve", pod, ".metadata.uid");
        apply(
            cp,
            &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: held, namespace: reserve}}\nspec: {{flavor: {flavor}, image: reserve-image}}\n"
            ),
        );
        eventually(
            60,
            &format!("the reservation pod remade with {cpu} cores"),
            || {
                let uid = pod_field(cp, "reserve", pod, ".metadata.uid");
                let bound = pod_field(cp, "reserve", pod, ".spec.nodeName");
                let requested = pod_field(
                    cp,
                    "reserve",
                    pod,
                    ".spec.containers[0].resources.requests.cpu",
                );
                (!uid.is_empty() && uid != before && bound == node_name && requested == cpu)
                    .then_some(())
                    .ok_or(format!("uid {uid:?}, node {bound:?}, cpu {requested:?}"))
            },
        )
        .1
    };
    apply(
        cp,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: reserve.two}\nspec: {vcpus: 2, memoryMb: 1}\n",
    );
    flavor_reads(cp, "reserve.two", ".status.observedGeneration", "1", 30);
    let grown = resize("reserve.two", "2");
    let shrunk = resize("reserve.one", "1");
    eprintln!(
        "reservations: resized, the pod was made again after {grown:?} (two cores) and {shrunk:?} (one)"
    );
    // Counted once: the rest of the Node still fits a Flavor of the other cores.
    flavor_reads(cp, "reserve.all", ".status.candidateCount", "0", 30);
    flavor_reads(cp, "reserve.rest", ".status.candidateCount", "1", 30);

    // kube-scheduler counts the Server's core: a pod that needs it stays Pending.
    let wanted = allocatable_millis - 1000 + 1;
    apply(
        cp,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: squeezed, namespace: reserve}}\n\
             spec:\n  containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{requests: {{cpu: {wanted}m}}}}}}\n"
        ),
    );
    eventually(60, "squeezed refused by kube-scheduler", || {
        let message = pod_field(
            cp,
            "reserve",
            "squeezed",
            ".status.conditions[?(@.type==\"PodScheduled\")].message",
        );
        message
            .contains("Insufficient cpu")
            .then_some(())
            .ok_or(message)
    });
    assert_eq!(pod_field(cp, "reserve", "squeezed", ".spec.nodeName"), "");

    // The Server goes, and with it its pod: the pod that waited is bound.
    cp.kubectl(&["delete", "server", "held", "-n", "reserve", "--wait=false"])
        .ok();
    let (_, waited) = eventually(90, "squeezed bound once the Server went", || {
        let bound = pod_field(cp, "reserve", "squeezed", ".spec.nodeName");
        (bound == node_name).then_some(()).ok_or(bound)
    });
    eprintln!("reservations: the waiting pod was bound {waited:?} after the Server's deletion");
    assert!(
        !cp.kubectl(&["get", "pod", pod, "-n", "reserve"]).success,
        "the reservation pod outlived its Server"
    );
    cp.kubectl(&[
        "delete",
        "pod",
        "squeezed",
        "-n",
        "reserve",
        "--grace-period=0",
        "--force",
    ])
    .ok();
    flavor_reads(cp, "reserve.all", ".status.candidateCount", "1", 30);

    // A Server of every free core is placed; before its reservation pod is made, a pod is
    // bound straight to the Node (no kube-scheduler) asking for all of it. The kubelet admits
    // one of the two; when it refuses the reservation, the Server's claim is given back and
    // the Server waits instead of holding cores it does not have.
    apply(
        cp,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: raced, namespace: reserve}\nspec: {flavor: reserve.all, image: reserve-image}\n",
    );
    let claimed = || {
        cp.kubectl(&[
            "get",
            "allocations",
            "-l",
            "kubeplace.io/server-name=raced",
            "-o",
            "name",
        ])
        .stdout
        .trim()
        .to_string()
    };
    eventually(60, "the raced Server's claim", || {
        let found = claimed();
        (!found.is_empty()).then_some(()).ok_or(found)
    });
    apply(
        cp,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: hog, namespace: reserve}}\n\
             spec:\n  nodeName: {node_name}\n  containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{requests: {{cpu: {allocatable_millis}m}}}}}}\n"
        ),
    );
    let raced = "kubeplace-reservation-raced";
    let (winner, settled) = eventually(90, "one of the two admitted", || {
        let hog = pod_field(cp, "reserve", "hog", ".status.phase");
        let scheduled = cp
            .kubectl(&[
                "get",
                "server",
                "raced",
                "-n",
                "reserve",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Scheduled\")].status}",
            ])
            .stdout
            .trim()
            .to_string();
        let reservation = pod_field(cp, "reserve", raced, ".status.phase");
        match (hog.as_str(), scheduled.as_str(), reservation.as_str()) {
            // The pod holds the cores; the Server waits, with no claim and no reservation.
            ("Pending" | "Running", "False", "") if claimed().is_empty() => Ok("pod"),
            // The Server holds them; the kubelet refused the pod.
            ("Failed", "True", "Pending" | "Running") => Ok("server"),
            other => Err(format!("{other:?}")),
        }
    });
    eprintln!("reservations: the race went to the {winner}, settled after {settled:?}");
    if winner == "pod" {
        // The Server was told why it waits: a Warning Event names the Node and the reason.
        eventually(30, "a ReservationRefused Event on the Server", || {
            let events = cp
                .kubectl(&[
                    "get",
                    "events",
                    "-n",
                    "reserve",
                    "--field-selector",
                    "reason=ReservationRefused,involvedObject.name=raced",
                    "-o",
                    "jsonpath={.items[*].message}",
                ])
                .stdout;
            (events.contains(&node_name) && events.contains("OutOf"))
                .then_some(())
                .ok_or(events)
        });
    }
}

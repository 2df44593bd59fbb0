//! Servers through kubectl: placed by the leader, listed with their host, a rebuild
//! refused by the webhook, a resize, and a deletion that gives the capacity back.
//!
//! The objects use their own trait (CUSTOM_E2E_LIFECYCLE), so the rest of the shared test
//! cluster cannot take or offer their capacity.

use std::time::Duration;

use super::support::exclusive_lock;
use super::{Operator, crds_installed, eventually};

const NS: &str = "e2e-servers";

const CLOUD: &str = r#"
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: e2e-host
spec:
  inventories:
    VCPU: {total: 4}
    MEMORY_MB: {total: 8192}
  traits: [COMPUTE_NODE, CUSTOM_E2E_LIFECYCLE]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: e2e.small
spec:
  vcpus: 2
  memoryMb: 1024
  extraSpecs:
    trait:CUSTOM_E2E_LIFECYCLE: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: e2e.large
spec:
  vcpus: 4
  memoryMb: 1024
  extraSpecs:
    trait:CUSTOM_E2E_LIFECYCLE: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: e2e-plain
spec:
  properties: {os_distro: ubuntu}
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: e2e-plain-2
spec:
  properties: {os_distro: debian}
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: e2e-needs-fpga
spec:
  properties:
    trait:CUSTOM_E2E_FPGA: required
"#;

fn server(name: &str, flavor: &str, image: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  flavor: {flavor}\n  image: {image}\n"
    )
}

fn server_field(cp: &super::ControlPlane, name: &str, path: &str, want: &str) {
    eventually(
        cp,
        &[
            "get",
            "server",
            name,
            "-n",
            NS,
            "-o",
            &format!("jsonpath={path}"),
        ],
        want,
    );
}

/// Waits until e2e-host's status reports `want` VCPU in use ("" for none).
fn host_vcpu_used(cp: &super::ControlPlane, want: &str) {
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "e2e-host",
            "-o",
            "jsonpath={.status.usages.VCPU}",
        ],
        want,
    );
}

#[test]
fn servers_are_placed_rebuilt_resized_and_give_capacity_back_when_deleted() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let operator = Operator::start(cp, "kubeplace-servers", &["--leader-elect=false"]);
    let _ = cp.kubectl(&["create", "namespace", NS]);
    cp.kubectl_stdin(&["apply", "-f", "-"], CLOUD).ok();
    // Two small servers fill the host (2 + 2 of 4 VCPU); the third waits.
    for name in ["s1", "s2"] {
        cp.kubectl_stdin(
            &["apply", "-f", "-"],
            &server(name, "e2e.small", "e2e-plain"),
        )
        .ok();
        server_field(cp, name, "{.status.host}", "e2e-host");
    }
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &server("s3", "e2e.small", "e2e-plain"),
    )
    .ok();
    server_field(cp, "s3", "{.status.conditions[0].reason}", "NoValidHost");
    // A flavor and image Nova would not boot together are refused through kubectl, with
    // Nova's reason: a shared-CPU flavor, an image that asks for pinned CPUs.
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e.shared\nspec:\n  vcpus: 1\n  memoryMb: 512\n  extraSpecs:\n    hw:cpu_policy: shared\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata:\n  name: e2e-pinned\nspec:\n  properties: {hw_cpu_policy: dedicated}\n",
    )
    .ok();
    let mut refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &server("s-pinned", "e2e.shared", "e2e-pinned"),
    );
    // Until the webhook's store holds the flavor and image just made.
    for _ in 0..20 {
        if !refused.stderr.contains("does not exist") {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        refused = cp.kubectl_stdin(
            &["apply", "-f", "-"],
            &server("s-pinned", "e2e.shared", "e2e-pinned"),
        );
    }
    assert!(
        !refused.success
            && refused.stderr.contains("makes no guest Nova would boot")
            && refused.stderr.contains("ImageCPUPinningForbidden"),
        "{}",
        refused.stderr
    );
    let table = cp.kubectl(&["get", "servers", "-n", NS]).ok().to_string();
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(
        row("s1")[..5],
        ["s1", "e2e.small", "e2e-plain", "e2e-host", "Scheduled"],
        "{table}"
    );
    assert_eq!(row("s3")[3], "NoValidHost", "{table}");
    // Why it waits is in its condition and in a Warning Event in its namespace, both of
    // which `kubectl describe` shows: the host has no VCPU left.
    let mut described = String::new();
    for _ in 0..60 {
        described = cp
            .kubectl(&["describe", "server", "s3", "-n", NS])
            .ok()
            .to_string();
        if described.contains("Warning") && described.matches("no room for VCPU:2").count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(described.contains("NoValidHost"), "{described}");
    assert!(
        described.matches("no room for VCPU:2").count() >= 2,
        "the condition and the Event explain: {described}"
    );
    // A placed server has a Normal Event, as a scheduled Pod has.
    let mut events = String::new();
    for _ in 0..60 {
        events = cp
            .kubectl(&[
                "get",
                "events",
                "-n",
                NS,
                "--field-selector",
                "involvedObject.name=s1,type=Normal",
                "-o",
                "jsonpath={range .items[*]}{.reason}: {.note}{.message}{\"\\n\"}{end}",
            ])
            .ok()
            .to_string();
        if events.contains("Scheduled: Scheduled: holds Allocation") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        events.contains("Scheduled: Scheduled: holds Allocation"),
        "no Normal Scheduled Event for s1: {events:?}"
    );
    // Every server carries the finalizer that releases its allocation.
    server_field(
        cp,
        "s1",
        "{.metadata.finalizers[*]}",
        "kubeplace.io/allocation",
    );
    // A rebuild onto an image whose trait the host lacks is refused, naming it.
    let refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &server("s1", "e2e.small", "e2e-needs-fpga"),
    );
    let text = refused.fails().to_string();
    assert!(
        text.contains("admission webhook \"servers.kubeplace.io\" denied the request"),
        "{text}"
    );
    assert!(
        text.contains("rebuild rejected: image \"e2e-needs-fpga\" requires CUSTOM_E2E_FPGA which the server's providers (e2e-host) lack"),
        "{text}"
    );
    server_field(cp, "s1", "{.spec.image}", "e2e-plain");
    // A rebuild onto an image the host satisfies keeps the allocation.
    let before = cp
        .kubectl(&[
            "get",
            "allocation",
            "server.e2e-servers.s1",
            "-o",
            "jsonpath={.metadata.uid}/{.spec.allocations[0].resources.VCPU}",
        ])
        .ok()
        .to_string();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &server("s1", "e2e.small", "e2e-plain-2"),
    )
    .ok();
    std::thread::sleep(Duration::from_secs(2));
    eventually(
        cp,
        &[
            "get",
            "allocation",
            "server.e2e-servers.s1",
            "-o",
            "jsonpath={.metadata.uid}/{.spec.allocations[0].resources.VCPU}",
        ],
        &before,
    );
    // Deleting a server returns once its allocation is gone, and the waiting one is placed.
    cp.kubectl(&["delete", "server", "s2", "-n", NS, "--timeout=60s"])
        .ok();
    let gone = cp.kubectl(&["get", "allocation", "server.e2e-servers.s2"]);
    assert!(gone.fails().contains("NotFound"), "{}", gone.stderr);
    server_field(cp, "s3", "{.status.host}", "e2e-host");
    host_vcpu_used(cp, "4");
    // A resize that fits once the server's own share is counted out is placed again.
    cp.kubectl(&["delete", "server", "s3", "-n", NS, "--timeout=60s"])
        .ok();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &server("s1", "e2e.large", "e2e-plain-2"),
    )
    .ok();
    eventually(
        cp,
        &[
            "get",
            "allocation",
            "server.e2e-servers.s1",
            "-o",
            "jsonpath={.spec.allocations[0].resources.VCPU}",
        ],
        "4",
    );
    server_field(cp, "s1", "{.status.conditions[0].reason}", "Scheduled");
    // Deleting the last server frees the host.
    cp.kubectl(&["delete", "server", "s1", "-n", NS, "--timeout=60s"])
        .ok();
    let gone = cp.kubectl(&["get", "allocation", "server.e2e-servers.s1"]);
    assert!(gone.fails().contains("NotFound"), "{}", gone.stderr);
    host_vcpu_used(cp, "");
    cp.kubectl_stdin(&["delete", "-f", "-"], CLOUD).ok();
    operator.stop_and_unregister(cp);
}

//! The operator as the ServiceAccount of manifests/10-rbac.yaml, with nothing more: it
//! leads on its Lease, writes statuses, places a server (Allocation, finalizer), releases
//! it on deletion and records a rejection as an Event. No kubelet runs pods here, so this
//! is how the install's least-privilege rules are proven enough.

use super::support::{self, exclusive_lock};
use super::{ControlPlane, Operator, crds_installed, eventually};

const NS: &str = "e2e-rbac";

const OBJECTS: &str = r#"
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: e2e-rbac-host
spec:
  inventories:
    VCPU: {total: 2}
    MEMORY_MB: {total: 4096}
  traits: [COMPUTE_NODE, CUSTOM_E2E_RBAC]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: e2e.rbac
spec:
  vcpus: 2
  memoryMb: 1024
  extraSpecs:
    trait:CUSTOM_E2E_RBAC: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: e2e-rbac-image
spec:
  properties: {os_distro: ubuntu}
---
apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata:
  name: rbac-1
  namespace: e2e-rbac
spec:
  flavor: e2e.rbac
  image: e2e-rbac-image
"#;

/// A kubeconfig for the cluster that authenticates as `user` with `token` alone.
pub(super) fn token_kubeconfig(cp: &ControlPlane, user: &str, token: &str) -> std::path::PathBuf {
    let path = cp.kubeconfig.with_file_name(format!("{user}.kubeconfig"));
    std::fs::copy(&cp.kubeconfig, &path).unwrap();
    let config = path.to_str().unwrap();
    let user_flag = format!("--user={user}");
    for args in [
        vec![
            "config",
            "set-credentials",
            user,
            "--token",
            token,
            "--kubeconfig",
            config,
        ],
        vec![
            "config",
            "set-context",
            "--current",
            &user_flag,
            "--kubeconfig",
            config,
        ],
    ] {
        cp.kubectl(&args).ok();
    }
    path
}

#[test]
fn the_operator_needs_nothing_beyond_the_manifests_rbac() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl(&[
        "apply",
        "-f",
        "manifests/00-namespace.yaml",
        "-f",
        "manifests/10-rbac.yaml",
    ])
    .ok();
    let token = cp
        .kubectl(&[
            "create",
            "token",
            "kubeplace",
            "-n",
            "kubeplace-system",
            "--duration=1h",
        ])
        .ok()
        .trim()
        .to_string();
    let kubeconfig = token_kubeconfig(cp, "kubeplace-sa", &token);
    // The token really is the service account's: it may not read Secrets.
    let denied = cp.kubectl(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "get",
        "secrets",
        "-A",
    ]);
    assert!(denied.fails().contains("Forbidden"), "{}", denied.stderr);

    // The webhook configuration the ClusterRole's resourceNames allow (`kubeplace`).
    let webhook_port = support::free_port();
    let metrics_port = support::free_port();
    super::chart::flavor_webhook_without_ca(cp, "kubeplace", webhook_port);
    // The certificate is made into the Secret the Role names, as the chart runs it.
    let args: Vec<String> = vec![
        "run".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--tls-secret=kubeplace-webhook-tls".into(),
        "--webhook-service=kubeplace-webhook".into(),
        "--webhook-host=127.0.0.1".into(),
        "--webhook-config-name=kubeplace".into(),
        format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        "--namespace=kubeplace-system".into(),
        "--lease-name=e2e-rbac".into(),
    ];
    let operator = Operator::launch(cp, "kubeplace-rbac", args, metrics_port, "kubeplace");
    // The Secret holds a CA and a certificate, and the webhook trusts that CA: every
    // admission below passes through it.
    let secret = super::chart::secret(cp, "kubeplace-system", "kubeplace-webhook-tls");
    let mut keys: Vec<&str> = secret.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    super::chart::eventually_ca_bundle(cp, "kubeplace", &secret["ca.crt"]);
    // It leads on its Lease in its own namespace.
    let leads = (0..60).any(|_| {
        let yes = operator.metric("kubeplace_leader") == Some(1.0);
        if !yes {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        yes
    });
    assert!(leads, "never led:\n{}", operator.process.output());

    let _ = cp.kubectl(&["create", "namespace", NS]);
    cp.kubectl_stdin(&["apply", "-f", "-"], OBJECTS).ok();
    // Status writes, the server's Allocation and its finalizer.
    eventually(
        cp,
        &[
            "get",
            "flavor",
            "e2e.rbac",
            "-o",
            "jsonpath={.status.observedGeneration}",
        ],
        "1",
    );
    eventually(
        cp,
        &[
            "get",
            "server",
            "rbac-1",
            "-n",
            NS,
            "-o",
            "jsonpath={.status.host}/{.metadata.finalizers[*]}",
        ],
        "e2e-rbac-host/kubeplace.io/allocation",
    );
    cp.kubectl(&["get", "allocation", "server.e2e-rbac.rbac-1"])
        .ok();
    // Deleting the server: the Allocation is deleted, then the finalizer removed.
    cp.kubectl(&["delete", "server", "rbac-1", "-n", NS, "--timeout=60s"])
        .ok();
    let gone = cp.kubectl(&["get", "allocation", "server.e2e-rbac.rbac-1"]);
    assert!(gone.fails().contains("NotFound"), "{}", gone.stderr);
    // A rejection is recorded as an Event.
    let rejected_name = "e2e-rbac-typo";
    let refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {rejected_name}\nspec:\n  vcpus: 1\n  memoryMb: 512\n  extraSpecs:\n    hw:cpu_polcy: dedicated\n"
        ),
    );
    assert!(
        refused.fails().contains("denied the request"),
        "{}",
        refused.stderr
    );
    let evented = (0..60).any(|_| {
        let out = cp.kubectl(&[
            "get",
            "events",
            "-A",
            "--field-selector",
            "reason=Rejected",
            "-o",
            "jsonpath={.items[*].involvedObject.name}",
        ]);
        let found = out.success && out.stdout.contains(rejected_name);
        if !found {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        found
    });
    assert!(evented, "no Rejected event for {rejected_name}");
    // Nothing it tried was forbidden.
    let log = operator.process.output();
    assert!(
        !log.to_ascii_lowercase().contains("forbidden"),
        "the operator was refused something:\n{log}"
    );

    cp.kubectl_stdin(&["delete", "--ignore-not-found", "-f", "-"], OBJECTS)
        .ok();
    operator.stop_and_unregister(cp);
    cp.kubectl(&["delete", "-f", "manifests/10-rbac.yaml"]).ok();
    cp.kubectl(&[
        "delete",
        "secret",
        "kubeplace-webhook-tls",
        "-n",
        "kubeplace-system",
    ])
    .ok();
    cp.kubectl(&[
        "delete",
        "lease",
        "e2e-rbac",
        "-n",
        "kubeplace-system",
        "--ignore-not-found",
    ])
    .ok();
}

/// The rules of the ClusterRole and Role in a multi-document YAML stream.
fn role_rules(yaml: &str) -> Vec<(String, serde_json::Value)> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
    docs.into_iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("ClusterRole" | "Role")))
        .map(|d| (d["kind"].as_str().unwrap().to_string(), d["rules"].clone()))
        .collect()
}

#[test]
fn the_chart_grants_what_the_manifests_grant() {
    let _objects = support::objects_lock();
    let cp = support::cluster();
    let rendered = cp.helm(&["template", "kubeplace", "charts/kubeplace"]);
    let mut chart = role_rules(rendered.ok());
    let mut manifests = role_rules(
        &std::fs::read_to_string(format!("{}/manifests/10-rbac.yaml", super::ROOT)).unwrap(),
    );
    assert_eq!(
        chart.len(),
        4,
        "the chart renders the operator's ClusterRole and Role, and the Placement reader and writer"
    );
    // Helm orders the rendered objects by kind; the manifests keep each next to its binding.
    let key = |(kind, rules): &(String, serde_json::Value)| format!("{kind} {rules}");
    chart.sort_by_key(key);
    manifests.sort_by_key(key);
    assert_eq!(chart, manifests);
}

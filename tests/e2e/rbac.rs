//! The operator as the ServiceAccount of manifests/10-rbac.yaml, with nothing more, run
//! as manifests/30-deployment.yaml runs it (the Placement API on, over TLS): it leads on
//! its Lease, writes statuses, places a server (Allocation, finalizer), releases it on
//! deletion, records a rejection as an Event, and serves a caller bound to the
//! kubeplace-placement-writer ClusterRole custom traits, a provider, a claim and a
//! reshape. No kubelet runs pods here, so this is how the install's least-privilege rules
//! are proven enough.

use std::time::Duration;

use serde_json::{Value, json};

use super::placement_api::{Tls, call_tls, namespaced_token, wait_for_api_tls};
use super::support::{self, exclusive_lock};
use super::{ControlPlane, Operator, crds_installed, eventually};

pub(super) const NS: &str = "e2e-rbac";

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
    let placement_port = support::free_port();
    super::chart::flavor_webhook_without_ca(cp, "kubeplace", webhook_port);
    // The certificate is made into the Secret the Role names, the Lease is the one it
    // names, and the Placement API is served over TLS, as the Deployment runs it.
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
        "--lease-name=kubeplace-leader".into(),
        format!("--placement-addr=127.0.0.1:{placement_port}"),
        "--placement-tls".into(),
        "--placement-service=kubeplace-placement".into(),
        "--placement-token-audience=kubeplace-placement".into(),
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
    // The Placement API, for a caller bound to the manifests' writer role.
    placement_writes(cp, placement_port, &secret["ca.crt"], &operator);
    // Nothing it tried was forbidden.
    let log = operator.process.output();
    assert!(
        !log.to_ascii_lowercase().contains("forbidden"),
        "the operator was refused something:\n{log}"
    );

    cp.kubectl_stdin(&["delete", "--ignore-not-found", "-f", "-"], OBJECTS)
        .ok();
    cp.kubectl_stdin(&["delete", "--ignore-not-found", "-f", "-"], CALLER)
        .ok();
    cp.kubectl(&[
        "delete",
        "configmap",
        "kubeplace-placement-registry",
        "-n",
        "kubeplace-system",
        "--ignore-not-found",
    ])
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
        "kubeplace-leader",
        "-n",
        "kubeplace-system",
        "--ignore-not-found",
    ])
    .ok();
}

/// A caller of the Placement API (Nova, say) bound to the manifests' writer ClusterRole.
const CALLER: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: e2e-rbac-nova, namespace: e2e-rbac}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-rbac-nova-placement}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubeplace-placement-writer}
subjects: [{kind: ServiceAccount, name: e2e-rbac-nova, namespace: e2e-rbac}]
"#;

/// Through the Placement API over TLS, by its Service's name, as [`CALLER`]: two custom
/// traits (the second rewrites the registry ConfigMap), a provider with inventory and a
/// child, a claim, a reshape moving the claim to the child, and the claim released, each
/// answered 2xx and each seen in the cluster.
fn placement_writes(cp: &ControlPlane, port: u16, ca_pem: &str, operator: &Operator) {
    cp.kubectl_stdin(&["apply", "-f", "-"], CALLER).ok();
    let token = namespaced_token(cp, "e2e-rbac-nova", super::rbac::NS);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, ca_pem).unwrap();
    let tls = Tls {
        port,
        name: "kubeplace-placement.kubeplace-system.svc",
        ca: &ca,
    };
    wait_for_api_tls(&tls, operator);
    let call = |method: &str, path: &str, body: Option<&Value>| -> (u16, Value) {
        // A token just bound may take a moment to be allowed: retry a 403 briefly.
        for _ in 0..20 {
            let answer =
                call_tls(&tls, method, path, Some(&token), body).unwrap_or_else(|e| panic!("{e}"));
            if answer.0 != 403 {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        call_tls(&tls, method, path, Some(&token), body).unwrap_or_else(|e| panic!("{e}"))
    };
    let ok = |(status, body): (u16, Value), what: &str| -> Value {
        assert!(
            (200..300).contains(&status),
            "{what}: {status} {body}\n{}",
            operator.process.output()
        );
        body
    };

    for name in ["CUSTOM_E2E_RBAC_A", "CUSTOM_E2E_RBAC_B"] {
        ok(call("PUT", &format!("/traits/{name}"), None), name);
    }
    let registry = cp
        .kubectl(&[
            "get",
            "configmap",
            "kubeplace-placement-registry",
            "-n",
            "kubeplace-system",
            "-o",
            "jsonpath={.data.traits}",
        ])
        .ok()
        .to_string();
    assert_eq!(
        registry.lines().collect::<Vec<_>>(),
        ["CUSTOM_E2E_RBAC_A", "CUSTOM_E2E_RBAC_B"]
    );
    // The registry is watched by name with the Role's list and watch: a watch refused
    // would be logged (its first list is made as the API starts serving).
    let log = operator.process.output();
    assert!(!log.contains("cannot watch ConfigMap"), "{log}");

    let root = ok(
        call(
            "POST",
            "/resource_providers",
            Some(&json!({"name": "e2e-rbac-cn"})),
        ),
        "a provider",
    );
    let root = root["uuid"].as_str().expect("a uuid").to_string();
    let generation = |uuid: &str| {
        ok(
            call("GET", &format!("/resource_providers/{uuid}"), None),
            "a provider",
        )["generation"]
            .as_i64()
            .expect("a generation")
    };
    ok(
        call(
            "PUT",
            &format!("/resource_providers/{root}/inventories"),
            Some(&json!({"resource_provider_generation": generation(&root),
                         "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}})),
        ),
        "its inventory",
    );
    ok(
        call(
            "PUT",
            &format!("/resource_providers/{root}/traits"),
            Some(&json!({"resource_provider_generation": generation(&root),
                         "traits": ["CUSTOM_E2E_RBAC_A"]})),
        ),
        "a custom trait on it",
    );
    let child = ok(
        call(
            "POST",
            "/resource_providers",
            Some(&json!({"name": "e2e-rbac-cn_NUMA0", "parent_provider_uuid": root})),
        ),
        "a child provider",
    );
    let child = child["uuid"].as_str().expect("a uuid").to_string();

    let consumer = "77777777-7777-4777-8777-777777777777";
    ok(
        call(
            "PUT",
            &format!("/allocations/{consumer}"),
            Some(&json!({"allocations": {&root: {"resources": {"VCPU": 2}}},
                         "project_id": "p", "user_id": "u",
                         "consumer_generation": null, "consumer_type": "INSTANCE"})),
        ),
        "a claim",
    );
    eventually(
        cp,
        &[
            "get",
            "allocation",
            consumer,
            "-o",
            "jsonpath={.spec.allocations[0].provider}",
        ],
        "e2e-rbac-cn",
    );

    // The reshape: VCPU moves to the child, with the consumer's claim.
    let current = ok(
        call("GET", &format!("/allocations/{consumer}"), None),
        "the claim",
    );
    let reshape = json!({
        "inventories": {
            &root: {"resource_provider_generation": generation(&root),
                    "inventories": {"MEMORY_MB": {"total": 8192}}},
            &child: {"resource_provider_generation": generation(&child),
                     "inventories": {"VCPU": {"total": 8}}}
        },
        "allocations": {
            consumer: {"allocations": {&child: {"resources": {"VCPU": 2}}},
                       "project_id": "p", "user_id": "u",
                       "consumer_generation": current["consumer_generation"],
                       "consumer_type": "INSTANCE"}
        }
    });
    ok(call("POST", "/reshaper", Some(&reshape)), "the reshape");
    let moved = ok(
        call("GET", &format!("/allocations/{consumer}"), None),
        "the claim",
    );
    assert_eq!(
        moved["allocations"][&child]["resources"]["VCPU"], 2,
        "{moved}"
    );
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "e2e-rbac-cn",
            "-o",
            "jsonpath={.spec.inventories.MEMORY_MB.total}-{.spec.inventories.VCPU.total}",
        ],
        "8192-",
    );

    // Released, and the providers deleted.
    ok(
        call("DELETE", &format!("/allocations/{consumer}"), None),
        "the release",
    );
    for uuid in [&child, &root] {
        ok(
            call("DELETE", &format!("/resource_providers/{uuid}"), None),
            "a provider's deletion",
        );
    }
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

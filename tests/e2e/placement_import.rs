//! `kubeplace placement import` into the real control plane: a small live Placement (real
//! Placement 16 from `hack/placement-venv.sh`) copied into the cluster through the API server
//! (admission runs), one of its providers already there with other inventories, then read
//! back through kubeplace's Placement API over the cluster (after an import the API server
//! cut midway, finished by the next run) and compared with Placement's
//! answers; a second run writes nothing. Then exported from the cluster into an empty
//! Placement (the same reads again) and into the one it came from (nothing to write, then
//! only what changed in kubeplace).

use serde_json::{Value, json};

use super::placement_api::{ACCESS, call, token, wait_for_api};
use super::real_placement::{self, RealPlacement};
use super::support;
use super::{Operator, private_with_crds};

fn uuid(kind: u32, n: u32) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

const AGG: &str = "a9900000-0000-4000-8000-0000000000e2";

/// Creates a provider with inventories, traits and aggregates in real Placement.
fn provider(
    url: &str,
    u: &str,
    name: &str,
    parent: Option<&str>,
    inv: Value,
    traits: &[&str],
    aggs: &[&str],
) {
    let ok = real_placement::ok;
    ok(
        url,
        "POST",
        "/resource_providers",
        Some(&json!({"uuid": u, "name": name, "parent_provider_uuid": parent})),
    );
    let mut g = 0;
    for (what, body) in [
        ("inventories", json!({"inventories": inv})),
        ("traits", json!({"traits": traits})),
        ("aggregates", json!({"aggregates": aggs})),
    ] {
        let mut body = body;
        body["resource_provider_generation"] = json!(g);
        let a = ok(
            url,
            "PUT",
            &format!("/resource_providers/{u}/{what}"),
            Some(&body),
        );
        g = a["resource_provider_generation"].as_u64().unwrap();
    }
}

/// The reads compared, generations and links left out, lists sorted.
fn read(get: &dyn Fn(&str) -> Value, path: &str) -> Value {
    let mut v = get(path);
    if let Some(m) = v.as_object_mut() {
        for k in [
            "resource_provider_generation",
            "consumer_generation",
            "generation",
            "links",
        ] {
            m.remove(k);
        }
        for k in ["traits", "aggregates"] {
            if let Some(Value::Array(a)) = m.get_mut(k) {
                a.sort_by_key(|x| x.to_string());
            }
        }
        if let Some(Value::Object(allocs)) = m.get_mut("allocations") {
            for a in allocs.values_mut() {
                if let Some(o) = a.as_object_mut() {
                    o.remove("generation");
                }
            }
        }
    }
    v
}

/// Refuses the creation of one provider, to cut an import midway.
const CUT: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: e2e-import-cut}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [kubeplace.io]
      apiVersions: [v1alpha1]
      operations: [CREATE]
      resources: [resourceproviders]
  validations:
  - expression: "object.metadata.name != 'e2e-import-cn2'"
    message: the test cuts the import here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: e2e-import-cut}
spec:
  policyName: e2e-import-cut
  validationActions: [Deny]
"#;

#[test]
fn a_live_placement_is_imported_into_the_cluster() {
    // A cluster of its own: export reads the whole cluster back.
    let cp = &private_with_crds();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(cp, "placement-writer");
    let port = support::free_port();
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let op = Operator::start(
        cp,
        "kubeplace-placement-import",
        &["--leader-elect=false", &addr],
    );
    wait_for_api(port, &op);

    let placement = RealPlacement::start();
    let url = placement.url.clone();
    let ok = real_placement::ok;
    ok(
        &url,
        "PUT",
        "/resource_classes/CUSTOM_E2E_IMPORT_FPGA",
        None,
    );
    ok(&url, "PUT", "/traits/CUSTOM_E2E_IMPORT_GOLD", None);
    // Used by nothing: only the cluster's registry can carry it.
    ok(&url, "PUT", "/traits/CUSTOM_E2E_IMPORT_UNUSED", None);
    let mut providers = vec![uuid(0xe25a, 0)];
    provider(
        &url,
        &providers[0],
        "e2e-import-ceph",
        None,
        json!({"DISK_GB": {"total": 10000, "reserved": 10}}),
        &["MISC_SHARES_VIA_AGGREGATE"],
        &[AGG],
    );
    for n in 0..3 {
        let root = uuid(0xe2c0, n);
        provider(
            &url,
            &root,
            &format!("e2e-import-cn{n}"),
            None,
            json!({"DISK_GB": {"total": 100, "allocation_ratio": 1.5}}),
            &["COMPUTE_NODE", "CUSTOM_E2E_IMPORT_GOLD"],
            &[AGG],
        );
        let numa = uuid(0xe2ce, n);
        provider(
            &url,
            &numa,
            &format!("E2E-import-cn{n}_NUMA0"),
            Some(&root),
            json!({"VCPU": {"total": 8, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 8192, "step_size": 256}, "CUSTOM_E2E_IMPORT_FPGA": {"total": 1}}),
            &["HW_NUMA_ROOT"],
            &[],
        );
        providers.extend([root, numa]);
    }
    let consumers: Vec<String> = (0..4).map(|i| uuid(0xe21c, i)).collect();
    for (i, c) in consumers.iter().enumerate() {
        let n = i as u32 % 3;
        ok(
            &url,
            "PUT",
            &format!("/allocations/{c}"),
            Some(&json!({
                "allocations": {
                    uuid(0xe2ce, n): {"resources": {"VCPU": 2, "MEMORY_MB": 1024}},
                    uuid(0xe25a, 0): {"resources": {"DISK_GB": 20}},
                },
                "project_id": format!("e2e-project-{}", i % 2),
                "user_id": "e2e-user",
                "consumer_generation": null,
                "consumer_type": if i == 3 { "MIGRATION" } else { "INSTANCE" },
            })),
        );
    }

    // The cluster already holds one of the providers, with other inventories.
    cp.kubectl_stdin(&["apply", "-f", "-"], &format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: e2e-import-cn0}}\nspec: {{uuid: {}, inventories: {{DISK_GB: {{total: 1}}}}}}\n",
        uuid(0xe2c0, 0)
    )).ok();

    let import = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
        cmd.args(["placement", "import", "--from", &url, "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .args(["--namespace", "default"])
            .args(extra);
        let out = cmd.output().expect("kubeplace runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let unused = "/traits/CUSTOM_E2E_IMPORT_UNUSED";
    assert_eq!(call(port, "GET", unused, Some(&writer), None).0, 404);
    let (done, said, err) = import(&["--dry-run"]);
    assert!(done, "{err}");
    assert!(
        said.contains("replace ResourceProvider e2e-import-cn0")
            && said.contains("register CUSTOM_E2E_IMPORT_UNUSED"),
        "{said}"
    );
    // The API server refuses one root provider: the import stops midway, with some objects
    // written. A ValidatingAdmissionPolicy does it, which the import's own checks cannot see.
    cp.kubectl_stdin(&["apply", "-f", "-"], CUT).ok();
    let cut = |want_refused: bool| {
        for _ in 0..60 {
            let out = cp.kubectl_stdin(
                &["create", "--dry-run=server", "-f", "-"],
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: e2e-import-cn2}\nspec: {}\n",
            );
            if out.success != want_refused {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        panic!("the policy never took effect (refusing: {want_refused})");
    };
    cut(true);
    let (done, _, err) = import(&[]);
    assert!(!done, "{err}");
    assert!(
        err.contains("the test cuts the import here")
            && err.contains(
                "3 objects were written before it, and running the import again writes the rest"
            ),
        "{err}"
    );
    // The custom names were saved in the registry before the first object: the running
    // operator, which watches it, knows them within 2 s, not at a periodic re-read.
    let saved = std::time::Instant::now();
    while call(port, "GET", unused, Some(&writer), None).0 != 204 {
        assert!(
            saved.elapsed() < std::time::Duration::from_secs(2),
            "the import's custom trait was not known to the running operator within 2 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cp.kubectl(&[
        "delete",
        "validatingadmissionpolicybinding,validatingadmissionpolicy",
        "e2e-import-cut",
    ])
    .ok();
    cut(false);
    // The next run writes only what is missing.
    let (done, _, err) = import(&[]);
    assert!(done, "{err}");
    assert!(
        err.contains("providers: 4 to create, 0 to replace, 3 unchanged; consumers: 4 to create")
            && err.contains("wrote 8 objects"),
        "{err}"
    );
    let (done, _, err) = import(&[]);
    assert!(done, "{err}");
    assert!(
        err.contains("0 to create, 0 to replace, 7 unchanged")
            && err.contains("4 unchanged; custom names to register: 0"),
        "{err}"
    );

    // kubectl shows the objects; a name Kubernetes refuses is stored under a derived one.
    let names = cp.kubectl(&["get", "resourceproviders", "-o", "name"]);
    assert!(
        names
            .ok()
            .contains("resourceprovider.kubeplace.io/e2e-import-cn1-numa0-"),
        "{}",
        names.stdout
    );

    // Every read through kubeplace's Placement API over the cluster is Placement's.
    let real = |p: &str| real_placement::ok(&url, "GET", p, None);
    let kube = |p: &str| {
        let (status, body) = call(port, "GET", p, Some(&writer), None);
        assert_eq!(status, 200, "{p}: {body}");
        body
    };
    let mut paths = Vec::new();
    for p in &providers {
        paths.push(format!("/resource_providers/{p}"));
        for what in [
            "inventories",
            "traits",
            "aggregates",
            "usages",
            "allocations",
        ] {
            paths.push(format!("/resource_providers/{p}/{what}"));
        }
    }
    for c in &consumers {
        paths.push(format!("/allocations/{c}"));
    }
    paths.push("/usages?project_id=e2e-project-0".to_string());
    paths.push("/usages?project_id=e2e-project-1&user_id=e2e-user".to_string());
    // The store follows the API server's watch; give it a moment to hold every object.
    let mut differing = Vec::new();
    for _ in 0..40 {
        differing = paths
            .iter()
            .filter(|p| read(&real, p) != read(&kube, p))
            .cloned()
            .collect();
        if differing.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(
        differing.is_empty(),
        "{} differ, e.g. {}: {} against {}",
        differing.len(),
        differing[0],
        read(&real, &differing[0]),
        read(&kube, &differing[0])
    );
    // The unused custom trait is in the registry, which every replica watches.
    let mut registered = false;
    for _ in 0..30 {
        let t = kube("/traits?name=startswith:CUSTOM_E2E_IMPORT_");
        registered = t["traits"].as_array().is_some_and(|a| a.len() == 2);
        if registered {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    assert!(
        registered,
        "{}",
        kube("/traits?name=startswith:CUSTOM_E2E_IMPORT_")
    );

    // From the cluster into an empty Placement: the same answers; a second export, nothing.
    let export = |to: &str, extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
        cmd.args(["placement", "export", "--to", to, "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .args(["--namespace", "default"])
            .args(extra);
        let out = cmd.output().expect("kubeplace runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let empty = RealPlacement::start();
    let (done, _, err) = export(&empty.url, &[]);
    assert!(done, "{err}");
    let back = |p: &str| real_placement::ok(&empty.url, "GET", p, None);
    let differing: Vec<&String> = paths
        .iter()
        .filter(|p| read(&real, p) != read(&back, p))
        .collect();
    assert!(differing.is_empty(), "after export: {differing:?}");
    let (done, _, err) = export(&empty.url, &[]);
    assert!(done && err.contains("0 writes to make"), "{err}");
    let unused = back("/traits?name=startswith:CUSTOM_E2E_IMPORT_");
    assert_eq!(
        unused["traits"].as_array().map(Vec::len),
        Some(2),
        "{unused}"
    );

    // Back into the Placement it came from: nothing to write; after a consumer leaves in
    // kubeplace, exactly that.
    let (done, said, err) = export(&url, &["--dry-run"]);
    assert!(done && said.is_empty(), "{said}{err}");
    let (status, body) = call(
        port,
        "DELETE",
        &format!("/allocations/{}", consumers[3]),
        Some(&writer),
        None,
    );
    assert_eq!(status, 204, "{body}");
    let mut said = String::new();
    for _ in 0..20 {
        let (done, out, err) = export(&url, &["--dry-run"]);
        assert!(done, "{err}");
        said = out;
        if !said.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_eq!(
        said.trim(),
        format!(
            "DELETE /allocations/{}: delete the allocations of consumer {}",
            consumers[3], consumers[3]
        )
    );
    let (done, _, err) = export(&url, &[]);
    assert!(done, "{err}");
    let (status, _) =
        real_placement::call(&url, "GET", &format!("/allocations/{}", consumers[3]), None);
    assert_eq!(status, 200);
    assert_eq!(
        real(&format!("/allocations/{}", consumers[3]))["allocations"],
        json!({})
    );
}

/// A bulk-loaded Placement goes into the real control plane whole, with the operator's
/// admission webhook deciding every object (claims included), and how fast: 100 trees by
/// default, more with
///
/// ```sh
/// KUBEPLACE_IMPORT_TREES=400 KUBEPLACE_IMPORT_CONNECTIONS=4 cargo test --test e2e placement_import::import_speed -- --nocapture
/// ```
///
/// The cloud (`trees` compute trees of a root, two NUMA cells and a physical function, ten
/// sharing pools, two consumers a tree) is loaded into real Placement by
/// `hack/placement-oracle/oracle.py` (its bulk loader: the API would take minutes).
#[test]
fn import_speed() {
    let trees: u32 = std::env::var("KUBEPLACE_IMPORT_TREES")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let mut items = Vec::new();
    let rp = |name: String, parent: Option<String>, inv: Value, traits: Value, aggs: Value| {
        json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
               "metadata": {"name": name},
               "spec": {"parent": parent, "inventories": inv, "traits": traits, "aggregates": aggs}})
    };
    let agg = |i: u32| format!("a9900000-0000-4000-8000-{:012x}", i % 10);
    for i in 0..10 {
        items.push(rp(
            format!("pool-{i}"),
            None,
            json!({"DISK_GB": {"total": 1000000}}),
            json!(["MISC_SHARES_VIA_AGGREGATE"]),
            json!([agg(i)]),
        ));
    }
    for n in 0..trees {
        let root = format!("cn{n}");
        items.push(rp(
            root.clone(),
            None,
            json!({"DISK_GB": {"total": 500}}),
            json!(["COMPUTE_NODE"]),
            json!([agg(n)]),
        ));
        for cell in 0..2 {
            items.push(rp(format!("cn{n}-numa{cell}"), Some(root.clone()),
                json!({"VCPU": {"total": 32, "allocationRatio": 4.0}, "MEMORY_MB": {"total": 131072}}),
                json!(["HW_NUMA_ROOT"]), json!([])));
        }
        items.push(rp(
            format!("cn{n}-pf0"),
            Some(format!("cn{n}-numa0")),
            json!({"SRIOV_NET_VF": {"total": 16}}),
            json!(["HW_NIC_OFFLOAD_VXLAN"]),
            json!([]),
        ));
        for k in 0..2 {
            let c = uuid(0xbe1c, n * 2 + k);
            items.push(json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                "metadata": {"name": c},
                "spec": {"consumer": c, "allocations": [
                    {"provider": format!("cn{n}-numa{k}"), "resources": {"VCPU": 2, "MEMORY_MB": 4096}},
                    {"provider": format!("pool-{}", n % 10), "resources": {"DISK_GB": 20}}]}}));
        }
    }
    let file = dir.path().join("cloud.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    let venv = real_placement::python();
    let venv = venv
        .parent()
        .and_then(|b| b.parent())
        .unwrap()
        .to_path_buf();
    let mut oracle = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/hack/placement-oracle/oracle.py"
        ))
        .args(["serve", "-f"])
        .arg(&file)
        .env("PLACEMENT_VENV", &venv)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("oracle.py starts");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(oracle.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://"), "oracle.py said {line:?}");

    let cp = &private_with_crds();
    let port = support::free_port();
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let op = Operator::start(
        cp,
        "kubeplace-import-speed",
        &["--leader-elect=false", &addr],
    );
    wait_for_api(port, &op);
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["placement", "import", "--from", &url, "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["--namespace", "default", "--connections"])
        .arg(std::env::var("KUBEPLACE_IMPORT_CONNECTIONS").unwrap_or_else(|_| "4".into()))
        .output()
        .expect("kubeplace runs");
    let took = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = oracle.kill();
    let _ = oracle.wait();
    assert!(out.status.success(), "{err}");
    println!(
        "import of {trees} trees ({} objects) in {took:.1} s:\n{err}",
        items.len()
    );
    // Every provider and claim is in the cluster.
    let count = |kind: &str| {
        cp.kubectl(&["get", kind, "-o", "name"])
            .ok()
            .lines()
            .filter(|l| !l.is_empty())
            .count()
    };
    let providers = items
        .iter()
        .filter(|i| i["kind"] == "ResourceProvider")
        .count();
    assert_eq!(count("resourceproviders"), providers);
    assert_eq!(count("allocations"), items.len() - providers);
}

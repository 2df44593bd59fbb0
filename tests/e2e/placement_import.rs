//! `kubeplace placement import` into the real control plane: a small live Placement (real
//! Placement 16 from `hack/placement-venv.sh`) copied into the cluster through the API server
//! (admission runs), one of its providers already there with other inventories, then read
//! back through kubeplace's Placement API over the cluster and compared with Placement's
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
    let (done, said, err) = import(&["--dry-run"]);
    assert!(done, "{err}");
    assert!(
        said.contains("replace ResourceProvider e2e-import-cn0")
            && said.contains("register CUSTOM_E2E_IMPORT_UNUSED"),
        "{said}"
    );
    let (done, _, err) = import(&[]);
    assert!(done, "{err}");
    assert!(
        err.contains("providers: 6 to create, 1 to replace, 0 unchanged; consumers: 4 to create")
            && err.contains("wrote 11 objects"),
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
    // The unused custom trait is in the registry (replicas read it every 10 s).
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

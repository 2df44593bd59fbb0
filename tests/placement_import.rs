//! `kubeplace placement import` and `export` against real Placement 16 (the virtualenv of
//! `hack/placement-venv.sh`; without it these tests fail and say how to make it).
//!
//! The round trip: a cloud loaded into Placement through its API (nested trees, sharing
//! providers in aggregates, custom classes and traits, consumers of several projects, users
//! and types), imported into a manifest file, served by `kubeplace placement serve -f`, and
//! every read compared; then exported into a second, empty Placement and compared again.
//! What the comparison ignores is what docs/placement-api.md lists as differences:
//! generations (Placement's own count of writes on each side), the order of lists, and
//! Placement's `last_modified`-style fields it does not send here.
//!
//! Bad inputs: an unreachable URL, a wrong token, Placement changing during the read, a
//! Placement that stops answering midway, names kubeplace cannot carry, a second run, a
//! dry run.

#[path = "support/real_placement.rs"]
mod real_placement;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use real_placement::{RealPlacement, ok, proxy};
use serde_json::{Value, json};

/// Runs `kubeplace ARGS`.
fn kubeplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .env_remove("OS_TOKEN")
        .output()
        .expect("kubeplace runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn uuid(kind: u32, n: u32) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

const AGG: [&str; 3] = [
    "a9900000-0000-4000-8000-000000000001",
    "a9900000-0000-4000-8000-000000000002",
    "a9900000-0000-4000-8000-000000000003",
];

/// Creates a provider with inventories and traits through the API.
fn provider(
    url: &str,
    uuid: &str,
    name: &str,
    parent: Option<&str>,
    inventories: Value,
    traits: &[&str],
    aggregates: &[&str],
) {
    ok(
        url,
        "POST",
        "/resource_providers",
        Some(&json!({"uuid": uuid, "name": name, "parent_provider_uuid": parent})),
    );
    let mut generation = 0;
    if inventories.as_object().is_some_and(|o| !o.is_empty()) {
        let a = ok(
            url,
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            Some(&json!({"resource_provider_generation": generation, "inventories": inventories})),
        );
        generation = a["resource_provider_generation"].as_u64().unwrap();
    }
    if !traits.is_empty() {
        let a = ok(
            url,
            "PUT",
            &format!("/resource_providers/{uuid}/traits"),
            Some(&json!({"resource_provider_generation": generation, "traits": traits})),
        );
        generation = a["resource_provider_generation"].as_u64().unwrap();
    }
    if !aggregates.is_empty() {
        ok(
            url,
            "PUT",
            &format!("/resource_providers/{uuid}/aggregates"),
            Some(&json!({"resource_provider_generation": generation, "aggregates": aggregates})),
        );
    }
}

/// A cloud of `trees` compute trees (root, two NUMA cells named as Nova names them, a
/// physical function under the first), three sharing storage pools each in an aggregate
/// with a third of the roots, custom classes and traits, and consumers of three projects,
/// four users and two consumer types. Returns the consumers' uuids.
fn load_cloud(url: &str, trees: u32) -> Vec<String> {
    for class in ["CUSTOM_FPGA", "CUSTOM_PMEM_GB"] {
        ok(url, "PUT", &format!("/resource_classes/{class}"), None);
    }
    for t in ["CUSTOM_GOLD", "CUSTOM_RACK_A", "CUSTOM_RACK_B"] {
        ok(url, "PUT", &format!("/traits/{t}"), None);
    }
    for (i, agg) in AGG.iter().enumerate() {
        provider(
            url,
            &uuid(0x5a, i as u32),
            &format!("ceph-pool-{i}"),
            None,
            json!({"DISK_GB": {"total": 100000, "reserved": 100, "allocation_ratio": 1.0}}),
            &["MISC_SHARES_VIA_AGGREGATE", "CUSTOM_GOLD"],
            &[agg],
        );
    }
    for n in 0..trees {
        let root = uuid(0xc0, n);
        let rack = if n % 2 == 0 {
            "CUSTOM_RACK_A"
        } else {
            "CUSTOM_RACK_B"
        };
        let mut traits = vec!["COMPUTE_NODE", rack];
        if n % 5 == 0 {
            traits.push("HW_CPU_X86_AVX2");
        }
        let name = if n % 7 == 3 {
            format!("Compute-{n}.Example.COM")
        } else {
            format!("cn{n}")
        };
        provider(
            url,
            &root,
            &name,
            None,
            json!({"DISK_GB": {"total": 500, "reserved": 10, "min_unit": 1, "max_unit": 500, "step_size": 1, "allocation_ratio": 1.5}}),
            &traits,
            &[AGG[(n % 3) as usize]],
        );
        for cell in 0..2u32 {
            let mut inv = json!({
                "VCPU": {"total": 16, "reserved": 1, "allocation_ratio": 4.0, "max_unit": 16},
                "MEMORY_MB": {"total": 65536, "reserved": 512, "step_size": 256, "allocation_ratio": 1.0},
            });
            if n % 4 == 0 && cell == 1 {
                inv["CUSTOM_PMEM_GB"] = json!({"total": 256, "min_unit": 16, "step_size": 16});
            }
            provider(
                url,
                &uuid(0xce, n * 2 + cell),
                &format!("{name}_NUMA{cell}"),
                Some(&root),
                inv,
                if cell == 0 { &["HW_NUMA_ROOT"] } else { &[] },
                &[],
            );
        }
        let mut inv = json!({"SRIOV_NET_VF": {"total": 8}});
        if n % 6 == 0 {
            inv["CUSTOM_FPGA"] = json!({"total": 2});
        }
        provider(
            url,
            &uuid(0xef, n),
            &format!("{name}:pf0:0000:84:00.0"),
            Some(&uuid(0xce, n * 2)),
            inv,
            &["HW_NIC_OFFLOAD_VXLAN"],
            &[],
        );
    }
    let mut consumers = Vec::new();
    for i in 0..trees * 2 {
        let n = i % trees;
        let c = uuid(0x1c, i);
        let mut allocations = json!({
            uuid(0xce, n * 2 + (i / trees) % 2): {"resources": {"VCPU": 1 + i % 3, "MEMORY_MB": 512 * (1 + i % 4)}},
        });
        if i % 3 == 0 {
            allocations[uuid(0x5a, n % 3)] = json!({"resources": {"DISK_GB": 20}});
        } else {
            allocations[uuid(0xc0, n)] = json!({"resources": {"DISK_GB": 10}});
        }
        if i % 4 == 1 {
            allocations[uuid(0xef, n)] = json!({"resources": {"SRIOV_NET_VF": 1}});
        }
        ok(
            url,
            "PUT",
            &format!("/allocations/{c}"),
            Some(&json!({
                "allocations": allocations,
                "project_id": format!("project-{}", i % 3),
                "user_id": format!("user-{}", i % 4),
                "consumer_generation": null,
                "consumer_type": if i % 5 == 0 { "MIGRATION" } else { "INSTANCE" },
            })),
        );
        consumers.push(c);
    }
    consumers
}

/// Candidate queries compared between the two sides.
const QUERIES: [&str; 4] = [
    "resources=VCPU:2,MEMORY_MB:1024",
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:20&required=CUSTOM_RACK_A",
    "resources=DISK_GB:50&required=CUSTOM_GOLD&member_of=a9900000-0000-4000-8000-000000000002",
    "resources_A=VCPU:1&resources_B=SRIOV_NET_VF:1&group_policy=none&same_subtree=_A,_B",
];

fn drop_keys(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            for x in m.values_mut() {
                drop_keys(x, keys);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| drop_keys(x, keys)),
        _ => {}
    }
}

fn sorted_strings(v: &Value) -> Value {
    let mut s: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| x.to_string())
        .collect();
    s.sort();
    json!(s)
}

/// Every read the comparison makes, keyed by what was read, with generations, links,
/// request ids and order taken out (the documented differences).
fn reads(url: &str, consumers: &[String]) -> BTreeMap<String, Value> {
    let gens = [
        "generation",
        "resource_provider_generation",
        "consumer_generation",
        "links",
    ];
    let mut out = BTreeMap::new();
    let mut list = ok(url, "GET", "/resource_providers", None);
    drop_keys(&mut list, &gens);
    let providers: Vec<Value> = list["resource_providers"].as_array().unwrap().to_vec();
    out.insert(
        "/resource_providers".to_string(),
        sorted_strings(&json!(providers)),
    );
    for p in &providers {
        let u = p["uuid"].as_str().unwrap();
        for what in ["inventories", "usages", "allocations"] {
            let path = format!("/resource_providers/{u}/{what}");
            let mut v = ok(url, "GET", &path, None);
            drop_keys(&mut v, &gens);
            out.insert(path, v);
        }
        for what in ["traits", "aggregates"] {
            let path = format!("/resource_providers/{u}/{what}");
            let v = ok(url, "GET", &path, None);
            out.insert(path, sorted_strings(&v[what]));
        }
    }
    for c in consumers {
        let path = format!("/allocations/{c}");
        let mut v = ok(url, "GET", &path, None);
        drop_keys(&mut v, &gens);
        out.insert(path, v);
    }
    for p in 0..3 {
        for path in [
            format!("/usages?project_id=project-{p}"),
            format!("/usages?project_id=project-{p}&user_id=user-{p}"),
        ] {
            let v = ok(url, "GET", &path, None);
            out.insert(path, v);
        }
    }
    let traits = ok(url, "GET", "/traits?name=startswith:CUSTOM_", None);
    out.insert("custom traits".into(), sorted_strings(&traits["traits"]));
    let classes = ok(url, "GET", "/resource_classes", None);
    let custom: BTreeSet<String> = classes["resource_classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter(|n| n.starts_with("CUSTOM_"))
        .map(str::to_string)
        .collect();
    out.insert("custom classes".into(), json!(custom));
    for q in QUERIES {
        let path = format!("/allocation_candidates?{q}");
        let v = ok(url, "GET", &path, None);
        let mut requests: Vec<String> = v["allocation_requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                // Which group got which provider is a list whose order is Placement's set order.
                if let Some(m) = r["mappings"].as_object_mut() {
                    for x in m.values_mut() {
                        *x = sorted_strings(x);
                    }
                }
                r.to_string()
            })
            .collect();
        requests.sort();
        let mut summaries = v["provider_summaries"].clone();
        drop_keys(
            &mut summaries,
            &["parent_provider_uuid", "root_provider_uuid"],
        );
        if let Some(m) = summaries.as_object_mut() {
            for s in m.values_mut() {
                s["traits"] = sorted_strings(&s["traits"]);
            }
        }
        out.insert(path, json!({"requests": requests, "summaries": summaries}));
    }
    out
}

/// Asserts two sets of reads equal, naming the first few that differ.
#[track_caller]
fn same_reads(left: &BTreeMap<String, Value>, right: &BTreeMap<String, Value>, what: &str) {
    let differing: Vec<String> = left
        .iter()
        .filter(|(k, v)| right.get(*k) != Some(v))
        .take(3)
        .map(|(k, v)| format!("{k}:\n  {v}\n  {}", right.get(k).unwrap_or(&Value::Null)))
        .collect();
    assert!(
        differing.is_empty() && left.len() == right.len(),
        "{what}: {} of {} reads differ, e.g.\n{}",
        left.iter()
            .filter(|(k, v)| right.get(*k) != Some(v))
            .count(),
        left.len(),
        differing.join("\n")
    );
}

/// `kubeplace placement serve -f FILE` on a free port; its URL.
struct Serve(std::process::Child, String);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(file: &Path) -> Serve {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["placement", "serve", "--listen", "127.0.0.1:0", "-f"])
        .arg(file)
        .env_remove("KUBEPLACE_PLACEMENT_TOKEN")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.trim().rsplit("http://").next().unwrap_or_default()
    );
    Serve(child, url)
}

/// The round trip on 60 trees (4 providers and 2 consumers a tree, plus 3 pools), loaded
/// through Placement's API (about 15 ms a request here); a larger cloud with
/// `KUBEPLACE_ROUND_TRIP_TREES=400 cargo test --test placement_import a_cloud_goes`.
#[test]
fn a_cloud_goes_from_placement_to_kubeplace_and_back_the_same() {
    let trees = std::env::var("KUBEPLACE_ROUND_TRIP_TREES")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(60);
    round_trip(trees);
}

fn round_trip(trees: u32) {
    let providers = trees * 4 + 3;
    let source = RealPlacement::start();
    let consumers = load_cloud(&source.url, trees);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let m = manifest.to_str().unwrap();

    let out = kubeplace(&["placement", "import", "--from", &source.url, "--to-file", m]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "read {providers} providers and {} consumers",
            trees * 2
        )),
        "{err}"
    );

    let kube = serve(&manifest);
    let want = reads(&source.url, &consumers);
    let got = reads(&kube.1, &consumers);
    same_reads(&want, &got, "Placement against kubeplace serve");

    // A second run finds nothing to change and leaves the file alone.
    let before = std::fs::metadata(&manifest).unwrap().modified().unwrap();
    let out = kubeplace(&["placement", "import", "--from", &source.url, "--to-file", m]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("0 to create, 0 to replace, {providers} unchanged"))
            && err.contains(&format!("{} unchanged", trees * 2))
            && err.contains("up to date"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&manifest).unwrap().modified().unwrap(),
        before
    );

    // Back into an empty Placement, then again: nothing left to write.
    let target = RealPlacement::start();
    let out = kubeplace(&["placement", "export", "--to", &target.url, "-f", m]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let back = reads(&target.url, &consumers);
    same_reads(
        &want,
        &back,
        "Placement against the Placement exported into",
    );
    let out = kubeplace(&["placement", "export", "--to", &target.url, "-f", m]);
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.contains("0 writes to make"),
        "{err}"
    );

    // Back into the Placement it came from: it already holds the file's state, so nothing.
    let out = kubeplace(&[
        "placement",
        "export",
        "--to",
        &source.url,
        "-f",
        m,
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "the file is the source's state");
}

#[test]
fn bad_inputs_are_refused_before_anything_is_written() {
    let placement = RealPlacement::start();
    let consumers = load_cloud(&placement.url, 4);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let f = file.to_str().unwrap();

    // Nothing listens there.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        "http://127.0.0.1:1",
        "--to-file",
        f,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot be reached") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!file.exists());

    // Writes in flight outside what import takes: refused, saying what it takes.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--writes",
        "0",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--writes") && err.contains("1..=64"), "{err}");

    // A token Placement does not take for an admin.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--token",
        "nobody",
        "--to-file",
        f,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused the token") && err.contains("403"),
        "{err}"
    );
    assert!(!file.exists());

    // A dry run says what it would create and writes nothing.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--to-file",
        f,
        "--dry-run",
    ]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        said.lines()
            .filter(|l| l.starts_with("create ResourceProvider"))
            .count(),
        19,
        "{said}"
    );
    assert_eq!(
        said.lines()
            .filter(|l| l.starts_with("create Allocation"))
            .count(),
        8,
        "{said}"
    );
    assert!(!file.exists());

    // Placement stops answering midway: nothing is written, an earlier file stays whole.
    std::fs::write(&file, "# an earlier import\n").unwrap();
    let dead = proxy(&placement.url, Arc::new(|_: &str, n: usize| n < 30));
    let out = kubeplace(&["placement", "import", "--from", &dead, "--to-file", f]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# an earlier import\n"
    );

    // Placement changes while it is read: a provider's traits move its generation between
    // two of the import's reads of it. The import reads it again and carries the new state.
    let changed = Arc::new(AtomicBool::new(false));
    let upstream = placement.url.clone();
    let moving = uuid(0xc0, 1);
    let hook = {
        let changed = changed.clone();
        let moving = moving.clone();
        move |line: &str, _: usize| {
            if line.contains(&format!("/resource_providers/{moving}/traits"))
                && !changed.swap(true, Ordering::SeqCst)
            {
                let p = ok(
                    &upstream,
                    "GET",
                    &format!("/resource_providers/{moving}"),
                    None,
                );
                ok(
                    &upstream,
                    "PUT",
                    &format!("/resource_providers/{moving}/traits"),
                    Some(&json!({
                        "resource_provider_generation": p["generation"],
                        "traits": ["COMPUTE_NODE", "CUSTOM_GOLD"],
                    })),
                );
            }
            true
        }
    };
    let moving_url = proxy(&placement.url, Arc::new(hook));
    let out = kubeplace(&["placement", "import", "--from", &moving_url, "--to-file", f]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(changed.load(Ordering::SeqCst));
    assert!(err.contains("Placement changed during round 1"), "{err}");
    let kube = serve(&file);
    let traits = ok(
        &kube.1,
        "GET",
        &format!("/resource_providers/{moving}/traits"),
        None,
    );
    assert_eq!(
        sorted_strings(&traits["traits"]),
        sorted_strings(&json!(["COMPUTE_NODE", "CUSTOM_GOLD"]))
    );
    same_reads(
        &reads(&placement.url, &consumers),
        &reads(&kube.1, &consumers),
        "after the change",
    );

    // To standard output as a JSON List.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--to-file",
        "-",
        "-o",
        "json",
        "-q",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "-q says nothing");
    let list: Value = serde_json::from_slice(&out.stdout).expect("a JSON List");
    assert_eq!(list["kind"], "List");
    // The registry ConfigMap of custom names, then 19 providers and 8 consumers.
    assert_eq!(list["items"][0]["kind"], "ConfigMap");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1 + 19 + 8));

    // An allocation above its provider's capacity (Placement keeps one when an inventory
    // shrinks under it): kubeplace's admission would refuse it, so the import refuses,
    // naming the consumer.
    let numa = uuid(0xce, 0);
    let inv = ok(
        &placement.url,
        "GET",
        &format!("/resource_providers/{numa}/inventories"),
        None,
    );
    let mut shrunk = inv.clone();
    shrunk["inventories"]["VCPU"]["reserved"] = shrunk["inventories"]["VCPU"]["total"].clone();
    let shrunk = ok(
        &placement.url,
        "PUT",
        &format!("/resource_providers/{numa}/inventories"),
        Some(&shrunk),
    );
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--to-file",
        f,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("consumer {}", uuid(0x1c, 0))) && err.contains("nothing was written"),
        "{err}"
    );
    let mut back = inv.clone();
    back["resource_provider_generation"] = shrunk["resource_provider_generation"].clone();
    ok(
        &placement.url,
        "PUT",
        &format!("/resource_providers/{numa}/inventories"),
        Some(&back),
    );

    // A consumer gone from Placement: the dry run says its Allocation would go from the file.
    let gone = uuid(0x1c, 7);
    ok(
        &placement.url,
        "DELETE",
        &format!("/allocations/{gone}"),
        None,
    );
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--to-file",
        f,
        "--dry-run",
    ]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        said.trim(),
        format!("remove Allocation {gone} (consumer {gone})")
    );

    // Two Placement names one object name would stand for: refused, naming both.
    let clash = kubeplace_api::provider_name::object_name("CN-Clash");
    ok(
        &placement.url,
        "POST",
        "/resource_providers",
        Some(&json!({"name": "CN-Clash"})),
    );
    ok(
        &placement.url,
        "POST",
        "/resource_providers",
        Some(&json!({"name": clash})),
    );
    let before = std::fs::read_to_string(&file).unwrap();
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &placement.url,
        "--to-file",
        f,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused")
            && err.contains("\"CN-Clash\"")
            && err.contains(&clash)
            && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

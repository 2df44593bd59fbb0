//! The cluster mirror offline: `kubeplace apply` and `kubeplace placement` reading Nodes,
//! Pods, ResourceSlices, ResourceClaims and DeviceClasses as the operator's
//! `--mirror-cluster` does.

mod placement_server;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use placement_server::Server;
use serde_json::{Value, json};

fn kubeplace(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeplace runs");
    let mut pipe = child.stdin.take().expect("stdin");
    // A command that refuses its flags exits before reading its input.
    let _ = pipe.write_all(stdin.unwrap_or("").as_bytes());
    drop(pipe);
    child.wait_with_output().expect("kubeplace finishes")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The JSON report of `kubeplace apply -f FILE -o json`, which must succeed.
fn applied(file: &str, stdin: Option<&str>) -> Value {
    let out = kubeplace(&["apply", "-f", file, "-o", "json"], stdin);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

fn item<'a>(report: &'a Value, kind: &str, name: &str) -> &'a Value {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the report"))
}

fn names(body: &Value, list: &str) -> Vec<String> {
    body[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_example_cluster_is_mirrored_and_counted() {
    let report = applied("examples/mirror", None);
    assert_eq!(report["summary"]["rejected"], 0);
    assert_eq!(
        item(&report, "Node", "node1")["status"]["mirroredAs"],
        serde_json::json!(["ResourceProvider/node1"])
    );
    assert_eq!(
        item(&report, "ResourceSlice", "node1-gpu.example.com")["status"]["mirroredAs"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Pending and finished pods hold nothing.
    for pod in ["web-1", "batch"] {
        assert_eq!(
            item(&report, "Pod", pod)["status"]["mirroredAs"],
            serde_json::json!([])
        );
    }
    // node1 has 15 cores for pods (16, the kubelet keeps half of one), web-0 holds 4:
    // m1.large (4 cores) fits twice there; node2 is cordoned.
    let large = &item(&report, "Flavor", "m1.large")["status"];
    assert_eq!(large["headroom"]["servers"], 2, "{large}");
    // Of the four GPUs, two can be partitioned and the claim holds one of them.
    let mig = &item(&report, "Flavor", "g1.mig")["status"];
    assert_eq!(mig["candidateCount"], 1, "{mig}");
    assert_eq!(
        mig["candidates"][0]["allocations"][0]["provider"],
        "gpu.example.com.node1.gpu-1"
    );
    // The table says what each cluster object became.
    let table = kubeplace(&["apply", "-f", "examples/mirror"], None);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains(
            "Node           node1                  mirrored  mirrored as ResourceProvider node1\n"
        ),
        "{text}"
    );
}

#[test]
fn placement_queries_see_mirrored_providers_and_usages() {
    let providers = |query: &str| {
        let out = kubeplace(
            &[
                "placement",
                "providers",
                "-f",
                "examples/mirror",
                "--query",
                query,
                "--microversion",
                "1.39",
                "-o",
                "json",
            ],
            None,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        names(&json(&out), "resource_providers")
    };
    assert_eq!(providers("required=COMPUTE_STATUS_DISABLED"), ["node2"]);
    assert_eq!(
        providers("required=HW_CPU_X86_AVX2,HW_CPU_HYPERTHREADING"),
        ["node1"]
    );
    assert_eq!(providers("required=CUSTOM_GOLD"), ["node2"]);
    assert_eq!(
        providers("resources=CUSTOM_GPU:1&required=CUSTOM_MIG_CAPABLE"),
        ["gpu.example.com.node1.gpu-1"],
        "gpu-0 is held by the claim"
    );
    // node1: 15 usable, 4 used by web-0.
    assert_eq!(providers("resources=VCPU:11"), ["node1"]);
    assert_eq!(providers("resources=VCPU:12"), Vec::<String>::new());
}

#[test]
fn objects_that_cannot_be_mirrored_are_refused_with_file_line_and_field() {
    let input = "\
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  capacity: {cpu: lots}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeName: n1
  containers: [{name: a, resources: {requests: {memory: 1Qi}}}]
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: s}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  nodeName: n1
  pool: {name: p, generation: 1, resourceSliceCount: 1}
---
apiVersion: v1
kind: Node
metadata: {name: Bad_Name}
";
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(input));
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["summary"]["rejected"], 5, "{report:#}");
    let message = |i: usize| {
        report["items"][i]["admission"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        message(0).starts_with("-:1: document 1: Node \"n1\" cannot be mirrored: field status.capacity.cpu: \"lots\" is not a Kubernetes quantity"),
        "{}",
        message(0)
    );
    assert!(
        message(1).contains("field spec.containers[0].resources.requests.memory: \"1Qi\" is not a Kubernetes quantity"),
        "{}",
        message(1)
    );
    assert!(
        message(2).contains("field apiVersion is \"resource.k8s.io/v1beta1\"; ResourceSlice is served as resource.k8s.io/v1"),
        "{}",
        message(2)
    );
    assert!(
        message(3)
            .ends_with("ResourceSlice \"s\" cannot be mirrored: field spec.driver is missing"),
        "{}",
        message(3)
    );
    assert!(
        message(4).contains("metadata.name is \"Bad_Name\""),
        "{}",
        message(4)
    );
}

#[test]
fn a_written_provider_and_a_node_of_one_name() {
    let written = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: node1}\nspec: {inventories: {VCPU: {total: 2}}}\n";
    let node =
        "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus: {capacity: {cpu: '16'}}\n";
    // Written first: it stands in place of the Node's provider, with a warning.
    let out = kubeplace(
        &["apply", "-f", "-", "-o", "json"],
        Some(&format!("{written}---\n{node}")),
    );
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out);
    let warnings = item(&report, "Node", "node1")["admission"]["warnings"].to_string();
    assert!(
        warnings.contains("written by hand and stands in place"),
        "{warnings}"
    );
    // The Node first: writing its name is refused.
    let out = kubeplace(
        &["apply", "-f", "-", "-o", "json"],
        Some(&format!("{node}---\n{written}")),
    );
    assert_eq!(out.status.code(), Some(1));
    let message =
        item(&json(&out), "ResourceProvider", "node1")["admission"]["message"].to_string();
    assert!(
        message.contains("is mirrored from Node/node1: it changes with that object in the cluster and is not written"),
        "{message}"
    );
}

#[test]
fn operators_add_trait_rules_from_a_file() {
    let dir = std::env::temp_dir().join(format!("kubeplace-mirror-traits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.yaml");
    std::fs::write(
        &rules,
        "traits:\n- {label: topology.kubernetes.io/zone, trait: 'CUSTOM_ZONE_{value}'}\n",
    )
    .unwrap();
    let input = "\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: eu-1a}}
status: {capacity: {cpu: '4', memory: 4Gi}}
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata: {name: zoned}
spec: {vcpus: 1, memoryMb: 512, extraSpecs: {trait:CUSTOM_ZONE_EU_1A: required}}
";
    let rules_arg = rules.to_str().unwrap();
    let out = kubeplace(
        &[
            "apply",
            "-f",
            "-",
            "-o",
            "json",
            "--mirror-traits",
            rules_arg,
        ],
        Some(input),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        item(&json(&out), "Flavor", "zoned")["status"]["candidateCount"],
        1
    );
    // Without the rule the Node has no such trait.
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(input));
    assert_eq!(
        item(&json(&out), "Flavor", "zoned")["status"]["candidateCount"],
        0
    );
    // A bad file is bad input.
    std::fs::write(&rules, "traits:\n- {label: a, trait: gold}\n").unwrap();
    let out = kubeplace(
        &["apply", "-f", "-", "--mirror-traits", rules_arg],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--mirror-traits") && err.contains("rule 0 (label \"a\")"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_placement_api_serves_mirrored_providers_and_refuses_to_change_them() {
    let s = Server::start(&["-f", "examples/mirror"]);
    let mv = Some("1.39");
    let list = s.call("GET", "/resource_providers?name=node1", mv, None);
    list.expect(200);
    let node1 = list.json()["resource_providers"][0]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    // Its usages count the pod; its inventory is the Node's.
    let usages = s.call(
        "GET",
        &format!("/resource_providers/{node1}/usages"),
        mv,
        None,
    );
    usages.expect(200);
    assert_eq!(usages.json()["usages"]["VCPU"], 4);
    let inventories = s.call(
        "GET",
        &format!("/resource_providers/{node1}/inventories"),
        mv,
        None,
    );
    let body = inventories.json();
    assert_eq!(body["inventories"]["VCPU"]["total"], 16);
    assert_eq!(body["inventories"]["VCPU"]["reserved"], 1);
    let generation = body["resource_provider_generation"].clone();
    // A write to it is refused with 409, saying why.
    let put = s.call(
        "PUT",
        &format!("/resource_providers/{node1}/inventories"),
        mv,
        Some(
            &json!({"resource_provider_generation": generation, "inventories": {
            "VCPU": {"total": 64}, "MEMORY_MB": {"total": 65536}, "DISK_GB": {"total": 200}}}),
        ),
    );
    put.expect(409);
    assert!(
        put.error().0.contains("is mirrored from Node/node1"),
        "{:?}",
        put.error()
    );
    let traits = s.call(
        "PUT",
        &format!("/resource_providers/{node1}/traits"),
        mv,
        Some(&json!({"resource_provider_generation": generation, "traits": ["COMPUTE_NODE"]})),
    );
    traits.expect(409);
    assert!(traits.error().0.contains("not through the Placement API"));
    s.call("DELETE", &format!("/resource_providers/{node1}"), mv, None)
        .expect(409);
    // A pod's allocations are the pod's: rewriting them is refused too.
    let pod = "6f1c2a80-1d2e-4c3b-9a4f-000000000001";
    let mine = s.call("GET", &format!("/allocations/{pod}"), mv, None);
    mine.expect(200);
    assert_eq!(mine.json()["allocations"][&node1]["resources"]["VCPU"], 4);
    assert_eq!(mine.json()["project_id"], "shop");
    s.call("DELETE", &format!("/allocations/{pod}"), mv, None)
        .expect(409);
    // Allocating from a mirrored Node is what it is for.
    s.call(
        "PUT",
        "/allocations/11111111-2222-4333-8444-555555555555",
        mv,
        Some(&json!({
            "allocations": {&node1: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
            "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE",
        })),
    )
    .expect(204);
    let usages = s.call(
        "GET",
        &format!("/resource_providers/{node1}/usages"),
        mv,
        None,
    );
    assert_eq!(usages.json()["usages"]["VCPU"], 6);
}

/// A device DRA shares among claims (`allowMultipleAllocations`) is inventoried by its
/// capacity; a pod's claim holds what it consumes, whichever comes first in the files, and
/// a Flavor asking for a share counts what is left. A capacity that is not a quantity is
/// refused naming the field.
#[test]
fn a_shared_devices_capacity_is_counted_and_its_shares_taken() {
    let cloud = "\
apiVersion: v1
kind: Node
metadata: {name: node1}
status: {capacity: {cpu: '64', memory: 256Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: notebook, namespace: ml, uid: 9d1c4c52-0000-4000-8000-000000000001}
spec: {}
status:
  allocation:
    devices:
      results:
      - {request: r, driver: vgpu.example.com, pool: node1, device: vgpu-0, shareID: 6ba7b810-9dad-41d1-80b4-00c04fd430c8, consumedCapacity: {memory: 10Gi, vgpu.example.com/cores: '30'}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: vgpu}
spec:
  selectors:
  - cel: {expression: device.driver == \"vgpu.example.com\"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node1-vgpu}
spec:
  driver: vgpu.example.com
  nodeName: node1
  pool: {name: node1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vgpu-0
    allowMultipleAllocations: true
    capacity:
      memory: {value: 40Gi}
      vgpu.example.com/cores: {value: '100'}
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata: {name: v1.share}
spec:
  vcpus: 1
  memoryMb: 1024
  extraSpecs:
    resources:CUSTOM_VGPU_MEMORY_MB: '10240'
    resources:CUSTOM_VGPU_CORES: '20'
";
    let report = applied("-", Some(cloud));
    // 30 GiB and 70 cores left: three shares of 10 GiB and 20 cores.
    let share = &item(&report, "Flavor", "v1.share")["status"];
    assert_eq!(share["headroom"]["servers"], 3, "{share}");
    assert_eq!(
        share["candidates"][0]["allocations"][1],
        json!({"provider": "vgpu.example.com.node1.vgpu-0",
               "resources": {"CUSTOM_VGPU_CORES": 20, "CUSTOM_VGPU_MEMORY_MB": 10240}}),
        "{share}"
    );
    let providers = |query: &str| {
        let out = kubeplace(
            &[
                "placement",
                "providers",
                "-f",
                "-",
                "--query",
                query,
                "--microversion",
                "1.39",
                "-o",
                "json",
            ],
            Some(cloud),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        names(&json(&out), "resource_providers")
    };
    assert_eq!(
        providers("resources=CUSTOM_VGPU_MEMORY_MB:30720"),
        ["vgpu.example.com.node1.vgpu-0"]
    );
    assert_eq!(
        providers("resources=CUSTOM_VGPU_MEMORY_MB:30721"),
        Vec::<String>::new()
    );
    assert_eq!(
        providers("resources=CUSTOM_VGPU_CORES:71"),
        Vec::<String>::new()
    );

    let bad = cloud.replace("memory: {value: 40Gi}", "memory: {value: forty}");
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(&bad));
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    let slice = item(&report, "ResourceSlice", "node1-vgpu");
    let message = slice["admission"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "ResourceSlice \"node1-vgpu\" cannot be mirrored: field spec.devices[0].capacity.memory.value: \"forty\" is not a Kubernetes quantity"
        ),
        "{message}"
    );
}

#[test]
fn a_pool_on_no_one_node_is_shared_with_the_nodes_it_reaches() {
    let cloud = "\
apiVersion: v1
kind: Node
metadata: {name: node1, labels: {rack: a}}
status: {capacity: {cpu: '8', memory: 16Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: node2, labels: {rack: b}}
status: {capacity: {cpu: '8', memory: 16Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric-a}
spec:
  driver: nic.example.com
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: rack, operator: In, values: [a]}]
  pool: {name: fabric-a, generation: 1, resourceSliceCount: 1}
  devices: [{name: vf-0}, {name: vf-1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: taken, namespace: net, uid: 9d1c4c52-0000-4000-8000-000000000002}
spec: {}
status:
  allocation:
    devices:
      results: [{request: r, driver: nic.example.com, pool: fabric-a, device: vf-0}]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata: {name: v1.nic}
spec:
  vcpus: 2
  memoryMb: 1024
  extraSpecs:
    resources:CUSTOM_NIC_EXAMPLE_COM: '1'
";
    let report = applied("-", Some(cloud));
    let status = &item(&report, "Flavor", "v1.nic")["status"];
    // vf-0 is taken and node2's rack is not reached: node1's cores with vf-1, once.
    assert_eq!(status["headroom"]["servers"], 1, "{status}");
    let candidates = status["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 1, "{status}");
    let providers: Vec<&str> = candidates[0]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["provider"].as_str().unwrap())
        .collect();
    assert_eq!(
        providers,
        ["nic.example.com.fabric-a.vf-1", "node1"],
        "{status}"
    );

    // Placement's clients see the sharing provider and the aggregate it shares.
    let out = kubeplace(
        &[
            "placement",
            "candidates",
            "-f",
            "-",
            "--query",
            "resources=VCPU:1,CUSTOM_NIC_EXAMPLE_COM:1",
            "--microversion",
            "1.39",
            "-o",
            "json",
        ],
        Some(cloud),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let body = json(&out);
    assert_eq!(
        body["allocation_requests"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    let summaries = body["provider_summaries"].as_object().unwrap();
    let nic = summaries
        .values()
        .find(|s| s["resources"].get("CUSTOM_NIC_EXAMPLE_COM").is_some())
        .expect("the device's summary");
    assert!(
        nic["traits"]
            .as_array()
            .unwrap()
            .contains(&json!("MISC_SHARES_VIA_AGGREGATE")),
        "{nic}"
    );
}

/// A Node, the DeviceClasses given (name, selectors) and a slice of `devices` GPUs on it.
fn cluster_with_classes(classes: &[(&str, Vec<String>)], devices: usize) -> String {
    let mut docs = vec![
        "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus: {capacity: {cpu: '64', memory: 256Gi}}\n".to_string(),
    ];
    for (name, selectors) in classes {
        let selectors: Vec<Value> = selectors
            .iter()
            .map(|e| json!({"cel": {"expression": e}}))
            .collect();
        docs.push(
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                   "metadata": {"name": name}, "spec": {"selectors": selectors}})
            .to_string(),
        );
    }
    let devices: Vec<Value> = (0..devices)
        .map(|d| json!({"name": format!("gpu-{d}"), "attributes": {"model": {"string": "a100"}}}))
        .collect();
    docs.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "node1-gpu"},
               "spec": {"driver": "gpu.example.com", "nodeName": "node1",
                        "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
                        "devices": devices}})
        .to_string(),
    );
    docs.join("\n---\n")
}

/// The device providers with inventory of `class`, read by `kubeplace placement`.
fn providers_of(cluster: &str, class: &str) -> Vec<String> {
    let query = format!("resources={class}:1");
    let out = kubeplace(
        &[
            "placement",
            "providers",
            "-f",
            "-",
            "--query",
            &query,
            "--microversion",
            "1.39",
            "-o",
            "json",
        ],
        Some(cluster),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    names(&json(&out), "resource_providers")
}

/// The warnings `kubeplace apply` prints for a cluster, which it must apply.
fn apply_warnings(cluster: &str) -> Vec<String> {
    let out = kubeplace(&["apply", "-f", "-"], Some(cluster));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    stderr.lines().map(str::to_string).collect()
}

/// `[1..n]`.
fn numbers(n: usize) -> String {
    let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

#[test]
fn a_device_class_past_its_time_budget_selects_nothing_and_is_warned_about() {
    // Each selector three loops over 45 numbers (about 850,000 of cost, under the 1,000,000
    // kube-apiserver admits each); 32 of them took 48 s a device.
    let l = numbers(45);
    let selector = format!("{l}.all(a, {l}.all(b, {l}.all(c, a + b + c > 0)))");
    let cluster = cluster_with_classes(
        &[
            ("hostile", vec![selector; 32]),
            (
                "z-gpu",
                vec![r#"device.driver == "gpu.example.com""#.into()],
            ),
        ],
        8,
    );
    let started = std::time::Instant::now();
    let warnings = apply_warnings(&cluster);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        warnings,
        [
            "Warning: DeviceClass hostile: its selectors took longer than the time budget of 100ms on device gpu.example.com/node1/gpu-0: where they do, the class does not select the device"
        ]
    );
    assert_eq!(
        providers_of(&cluster, "CUSTOM_HOSTILE"),
        Vec::<String>::new()
    );
    assert_eq!(providers_of(&cluster, "CUSTOM_Z_GPU").len(), 8);
}

#[test]
fn a_selector_that_doubles_a_list_costs_no_memory_and_one_that_doubles_a_string_is_stopped() {
    // 40 doublings: a list of 2^40 elements, or a string of a terabyte, if it were built.
    let lists = format!("[[0]]{}.all(l, size(l) > 0)", ".map(l, l + l)".repeat(40));
    let strings = format!(
        r#"["x"]{}.all(s, size(s) > 0)"#,
        ".map(s, s + s)".repeat(40)
    );
    // Classes are tried by name: `doubled-string` first.
    let cluster = cluster_with_classes(
        &[("doubled-string", vec![strings]), ("lists", vec![lists])],
        1,
    );
    let started = std::time::Instant::now();
    let warnings = apply_warnings(&cluster);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        providers_of(&cluster, "CUSTOM_LISTS").len(),
        1,
        "as cel-go joins lists"
    );
    assert_eq!(
        warnings,
        [
            "Warning: DeviceClass doubled-string: selector 0 exceeded its cost budget of 1000000 on device gpu.example.com/node1/gpu-0: where it does, the class does not select the device (as kube-scheduler treats a cost limit exceeded)"
        ]
    );
}

#[test]
fn selectors_nested_as_deep_as_kube_apiserver_admits_select_and_deeper_ones_are_warned_about() {
    let nested = |depth: usize| {
        let mut e = r#"device.driver == "gpu.example.com""#.to_string();
        for i in 0..depth {
            e = format!("[{i}].all(x{i}, {e})");
        }
        e
    };
    for depth in [96, 250] {
        let cluster = cluster_with_classes(&[("deep", vec![nested(depth)])], 2);
        assert_eq!(apply_warnings(&cluster), Vec::<String>::new(), "{depth}");
        assert_eq!(providers_of(&cluster, "CUSTOM_DEEP").len(), 2, "{depth}");
    }
    let cluster = cluster_with_classes(&[("deeper", vec![nested(260)])], 2);
    let warnings = apply_warnings(&cluster);
    assert!(
        warnings[0].starts_with("Warning: DeviceClass deeper: selector 0 does not compile, so the class selects no device: ")
            && warnings[0].contains("nested deeper than the 250 levels cel-go parses"),
        "{warnings:?}"
    );
    assert_eq!(providers_of(&cluster, "CUSTOM_GPU_EXAMPLE_COM").len(), 2);
}

#[test]
fn a_device_class_that_does_not_compile_is_warned_about() {
    let cluster = cluster_with_classes(
        &[
            ("broken", vec!["device.driver ==".into()]),
            ("empty", vec![]),
        ],
        1,
    );
    let warnings = apply_warnings(&cluster);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        warnings,
        [
            "Warning: DeviceClass broken: selector 0 does not compile, so the class selects no device: at 1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
        ]
    );
    assert_eq!(providers_of(&cluster, "CUSTOM_GPU_EXAMPLE_COM").len(), 1);
}
/// A kubelet may label its own Node: the label trait.kubeplace.io/MISC_SHARES_VIA_AGGREGATE
/// must not make it a provider that lends its cores to every tree of its aggregate.
#[test]
fn a_node_cannot_label_itself_a_sharing_provider() {
    let cloud = "\
apiVersion: v1
kind: Node
metadata: {name: small, labels: {rack: a}}
status: {capacity: {cpu: '1', memory: 16Gi}}
---
apiVersion: v1
kind: Node
metadata:
  name: lender
  labels:
    rack: a
    trait.kubeplace.io/MISC_SHARES_VIA_AGGREGATE: 'true'
    trait.kubeplace.io/HW_NUMA_ROOT: 'true'
    trait.kubeplace.io/COMPUTE_STATUS_DISABLED: 'true'
    trait.kubeplace.io/HW_CPU_X86_AVX2: 'true'
    trait.kubeplace.io/CUSTOM_GOLD: 'true'
status: {capacity: {cpu: '16'}}
---
# A pool reaching both Nodes puts them in one aggregate.
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric-a}
spec:
  driver: nic.example.com
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: rack, operator: In, values: [a]}]
  pool: {name: fabric-a, generation: 1, resourceSliceCount: 1}
  devices: [{name: vf-0}]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata: {name: big}
spec: {vcpus: 8, memoryMb: 1024}
";
    let report = applied("-", Some(cloud));
    let status = &item(&report, "Flavor", "big")["status"];
    // small has the memory but one core; lender has cores but no memory and shares nothing.
    assert_eq!(status["candidateCount"], 0, "{status}");

    let providers = |query: &str| {
        let out = kubeplace(
            &[
                "placement",
                "providers",
                "-f",
                "-",
                "--query",
                query,
                "--microversion",
                "1.39",
                "-o",
                "json",
            ],
            Some(cloud),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        names(&json(&out), "resource_providers")
    };
    assert_eq!(
        providers("required=MISC_SHARES_VIA_AGGREGATE"),
        ["nic.example.com.fabric-a.vf-0"]
    );
    assert_eq!(providers("required=CUSTOM_GOLD"), ["lender"]);
    for label_only in ["HW_NUMA_ROOT", "COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX2"] {
        assert_eq!(
            providers(&format!("required={label_only}")),
            Vec::<String>::new(),
            "{label_only}"
        );
    }
}

#[test]
fn an_operators_rule_giving_a_reserved_trait_is_refused() {
    let dir =
        std::env::temp_dir().join(format!("kubeplace-mirror-reserved-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.yaml");
    std::fs::write(
        &rules,
        "traits:\n- {label: example.com/storage, value: shared, trait: MISC_SHARES_VIA_AGGREGATE}\n",
    )
    .unwrap();
    let out = kubeplace(
        &[
            "apply",
            "-f",
            "-",
            "--mirror-traits",
            rules.to_str().unwrap(),
        ],
        Some(""),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rule 0 (label \"example.com/storage\"): trait \"MISC_SHARES_VIA_AGGREGATE\" is not given from a label"),
        "{err}"
    );
}

//! Placement's API served by `kubeplace run` over the real control plane: osc-placement as
//! the client, Kubernetes tokens and RBAC deciding who may read and write, writes that
//! become objects `kubectl get` shows and that survive a restart, and API clients racing
//! kubectl for the last capacity.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde_json::{Value, json};

use super::support::osc::{self, split};
use super::support::{self, exclusive_lock};
use super::{ControlPlane, Operator, crds_installed, eventually};

/// Service accounts with the chart's reader and writer rules.
pub(super) const ACCESS: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: placement-writer, namespace: default}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: placement-reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-placement-writer}
rules:
- apiGroups: [kubeplace.io]
  resources: [placement]
  verbs: [get, create, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-placement-reader}
rules:
- apiGroups: [kubeplace.io]
  resources: [placement]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-placement-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-placement-writer}
subjects: [{kind: ServiceAccount, name: placement-writer, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-placement-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-placement-reader}
subjects: [{kind: ServiceAccount, name: placement-reader, namespace: default}]
"#;

/// One HTTP request to the API; the status and the body.
pub(super) fn call(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nOpenStack-API-Version: placement 1.39\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = token {
        head.push_str(&format!("X-Auth-Token: {t}\r\n"));
    }
    head.push_str("\r\n");
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the API listens");
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    s.write_all(head.as_bytes()).expect("request sent");
    s.write_all(body.as_bytes()).expect("body sent");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("a reply");
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let text = reply.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(text).unwrap_or(Value::Null))
}

/// A token for a service account of the default namespace.
pub(super) fn token(cp: &ControlPlane, account: &str) -> String {
    cp.kubectl(&["create", "token", account, "-n", "default"])
        .ok()
        .trim()
        .to_string()
}

/// Waits until the API answers `GET /` (it serves once the store has synced).
pub(super) fn wait_for_api(port: u16, op: &Operator) {
    let up = (0..120).any(|_| {
        let ok = TcpStream::connect(("127.0.0.1", port)).is_ok()
            && call(port, "GET", "/", None, None).0 == 200;
        if !ok {
            std::thread::sleep(Duration::from_millis(500));
        }
        ok
    });
    assert!(
        up,
        "the Placement API never answered:\n{}",
        op.process.output()
    );
}

fn start(cp: &ControlPlane, port: u16) -> Operator {
    let op = Operator::start(
        cp,
        "kubeplace-placement-api",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port}"),
        ],
    );
    wait_for_api(port, &op);
    op
}

#[test]
fn the_placement_api_over_the_cluster() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(cp, "placement-writer");
    let reader = token(cp, "placement-reader");
    let port = support::free_port();
    let mut op = start(cp, port);
    let endpoint = format!("http://127.0.0.1:{port}");

    // Who may do what: no token, a token Kubernetes does not know, a reader writing.
    assert_eq!(call(port, "GET", "/resource_providers", None, None).0, 401);
    assert_eq!(
        call(
            port,
            "GET",
            "/resource_providers",
            Some("not-a-token"),
            None
        )
        .0,
        401
    );
    assert_eq!(
        call(port, "GET", "/resource_providers", Some(&reader), None).0,
        200
    );
    let (status, refused) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&reader),
        Some(&json!({"name": "cn-api-refused"})),
    );
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused.to_string().contains("may not create"),
        "the refusal names the verb: {refused}"
    );

    // osc-placement with the writer's token; every write is an object kubectl shows.
    let bin: PathBuf = osc::openstack_binary();
    let ok = |args: &[&str]| {
        osc::run(&bin, &endpoint, &writer, args)
            .unwrap_or_else(|e| panic!("openstack {}: {e}", args.join(" ")))
    };
    let created = ok(&split("resource provider create cn-api-1 -f json"));
    let cn1 = created["uuid"].as_str().expect("a uuid").to_string();
    assert_eq!(created["generation"], 0, "{created}");
    ok(&[
        &split("resource provider inventory set")[..],
        &[
            &cn1,
            "--resource",
            "VCPU=4",
            "--resource",
            "MEMORY_MB=4096",
            "-f",
            "json",
        ],
    ]
    .concat());
    ok(&split("trait create CUSTOM_API_GOLD"));
    ok(&split("trait create CUSTOM_API_UNUSED"));
    ok(&[
        &split("resource provider trait set")[..],
        &[&cn1, "--trait", "CUSTOM_API_GOLD", "-f", "json"],
    ]
    .concat());
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "cn-api-1",
            "-o",
            "jsonpath={.spec.inventories.VCPU.total} {.spec.traits[0]} {.spec.uuid}",
        ],
        &format!("4 CUSTOM_API_GOLD {cn1}"),
    );
    let gold = ok(&split(
        "allocation candidate list --resource VCPU=1 --required CUSTOM_API_GOLD -f json",
    ));
    let found: Vec<&str> = gold
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["resource provider"].as_str())
        .collect();
    assert_eq!(found, vec![cn1.as_str()], "{gold}");

    let consumer = "44444444-4444-4444-8444-444444444444";
    ok(&[
        &split("resource provider allocation set")[..],
        &[
            consumer,
            "--allocation",
            &format!("rp={cn1},VCPU=3"),
            "--project-id",
            "proj",
            "--user-id",
            "usr",
            "--consumer-type",
            "INSTANCE",
            "-f",
            "json",
        ],
    ]
    .concat());
    eventually(
        cp,
        &[
            "get",
            "allocation",
            consumer,
            "-o",
            "jsonpath={.spec.allocations[0].provider} {.spec.allocations[0].resources.VCPU} {.metadata.annotations.placement\\.kubeplace\\.io/project-id}",
        ],
        "cn-api-1 3 proj",
    );
    // The provider's status counts a claim made through the API, with nothing else changing.
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "cn-api-1",
            "-o",
            "jsonpath={.status.usages.VCPU}",
        ],
        "3",
    );
    let over = osc::run(
        &bin,
        &endpoint,
        &writer,
        &[
            &split("resource provider allocation set")[..],
            &[
                "55555555-5555-4555-8555-555555555555",
                "--allocation",
                &format!("rp={cn1},VCPU=2"),
                "--project-id",
                "proj",
                "--user-id",
                "usr",
                "--consumer-type",
                "INSTANCE",
            ],
        ]
        .concat(),
    );
    assert!(
        over.is_err(),
        "a claim above the free capacity was accepted"
    );

    // A Placement name that is not an object name (Nova's nested providers, Neutron's
    // agents) is stored under a derived object name and keeps its Placement name.
    let (status, numa) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&writer),
        Some(&json!({"name": "cn1_NUMA0", "parent_provider_uuid": cn1})),
    );
    assert_eq!(status, 200, "{numa}");
    assert_eq!(numa["name"], "cn1_NUMA0");
    let numa_uuid = numa["uuid"].as_str().expect("a uuid").to_string();
    let objects = cp
        .kubectl(&[
            "get",
            "resourceproviders",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.placement\.kubeplace\.io/name} {.spec.parent}{"\n"}{end}"#,
        ])
        .ok()
        .to_string();
    let line = objects
        .lines()
        .find(|l| l.contains(" cn1_NUMA0 "))
        .unwrap_or_else(|| panic!("no object keeps the name cn1_NUMA0:\n{objects}"));
    assert!(
        line.starts_with("cn1-numa0-") && line.ends_with(" cn-api-1"),
        "{line}"
    );
    let (_, listed) = call(
        port,
        "GET",
        "/resource_providers?name=cn1_NUMA0",
        Some(&writer),
        None,
    );
    assert_eq!(
        listed["resource_providers"][0]["uuid"],
        numa_uuid.as_str(),
        "{listed}"
    );

    // A write from a stale generation is Placement's concurrent update.
    let (_, inv) = call(
        port,
        "GET",
        &format!("/resource_providers/{cn1}/inventories"),
        Some(&writer),
        None,
    );
    let generation = inv["resource_provider_generation"]
        .as_i64()
        .expect("a generation");
    let body = json!({"resource_provider_generation": generation + 7,
                      "inventories": {"VCPU": {"total": 8}}});
    let (status, stale) = call(
        port,
        "PUT",
        &format!("/resource_providers/{cn1}/inventories"),
        Some(&writer),
        Some(&body),
    );
    assert_eq!(status, 409, "{stale}");
    assert_eq!(
        stale["errors"][0]["code"], "placement.concurrent_update",
        "{stale}"
    );

    // API clients and kubectl racing for the last capacity: exactly as many win as fit.
    let created = ok(&split("resource provider create cn-api-race -f json"));
    let race = created["uuid"].as_str().expect("a uuid").to_string();
    ok(&[
        &split("resource provider inventory set")[..],
        &[&race, "--resource", "VCPU=4", "-f", "json"],
    ]
    .concat());
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "cn-api-race",
            "-o",
            "jsonpath={.spec.inventories.VCPU.total}",
        ],
        "4",
    );
    let racers = 12;
    let barrier = Arc::new(Barrier::new(racers));
    let handles: Vec<_> = (0..racers)
        .map(|i| {
            let barrier = barrier.clone();
            let writer = writer.clone();
            let race = race.clone();
            let kubeconfig = cp.kubeconfig.clone();
            std::thread::spawn(move || {
                let consumer = format!("66666666-6666-4666-8666-{i:012}");
                barrier.wait();
                if i % 2 == 0 {
                    let body = json!({"allocations": {race: {"resources": {"VCPU": 1}}},
                                      "project_id": "p", "user_id": "u",
                                      "consumer_generation": null, "consumer_type": "INSTANCE"});
                    call(port, "PUT", &format!("/allocations/{consumer}"), Some(&writer), Some(&body)).0 == 204
                } else {
                    let manifest = format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: race-kubectl-{i}\nspec:\n  consumer: {consumer}\n  allocations:\n  - provider: cn-api-race\n    resources: {{VCPU: 1}}\n"
                    );
                    let mut child = std::process::Command::new(support::bin_dir().join("kubectl"))
                        .env("KUBECONFIG", &kubeconfig)
                        .args(["create", "-f", "-"])
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .expect("kubectl runs");
                    child.stdin.take().expect("stdin").write_all(manifest.as_bytes()).ok();
                    child.wait().expect("kubectl ends").success()
                }
            })
        })
        .collect();
    let won = handles
        .into_iter()
        .map(|h| h.join().expect("a racer"))
        .filter(|w| *w)
        .count();
    assert_eq!(won, 4, "exactly the capacity's worth of claims wins");
    let (_, usages) = call(
        port,
        "GET",
        &format!("/resource_providers/{race}/usages"),
        Some(&writer),
        None,
    );
    assert_eq!(usages["usages"]["VCPU"], 4, "{usages}");

    // A restart loses nothing: providers, allocations and the created traits are there.
    assert!(
        op.process.stop(Duration::from_secs(10)),
        "the operator did not stop"
    );
    op = start(cp, port);
    let (_, traits) = call(
        port,
        "GET",
        "/traits?name=startswith:CUSTOM_API_",
        Some(&reader),
        None,
    );
    assert_eq!(
        traits["traits"],
        json!(["CUSTOM_API_GOLD", "CUSTOM_API_UNUSED"]),
        "{traits}"
    );

    // Two replicas creating custom traits at the same instant: the ConfigMap keeps every
    // name, since each saves only its own change from the version it read.
    let port2 = support::free_port();
    let op2 = Operator::start_named(
        cp,
        "kubeplace-placement-api-2",
        "kubeplace-registry-race",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port2}"),
        ],
    );
    wait_for_api(port2, &op2);
    let racers = 8;
    let barrier = Arc::new(Barrier::new(racers));
    let created: Vec<u16> = (0..racers)
        .map(|i| {
            let barrier = barrier.clone();
            let writer = writer.clone();
            let replica = if i % 2 == 0 { port } else { port2 };
            std::thread::spawn(move || {
                barrier.wait();
                let path = format!("/traits/CUSTOM_REGISTRY_RACE_{i}");
                call(replica, "PUT", &path, Some(&writer), None).0
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().expect("a racer"))
        .collect();
    assert!(created.iter().all(|s| *s == 201), "{created:?}");
    let kept = cp
        .kubectl(&[
            "get",
            "configmap",
            "kubeplace-placement-registry",
            "-n",
            "default",
            "-o",
            "jsonpath={.data.traits}",
        ])
        .ok()
        .to_string();
    for i in 0..racers {
        let name = format!("CUSTOM_REGISTRY_RACE_{i}");
        assert!(kept.lines().any(|l| l == name), "{name} was lost:\n{kept}");
    }
    op2.stop_and_unregister(cp);
    let (_, alloc) = call(
        port,
        "GET",
        &format!("/allocations/{consumer}"),
        Some(&reader),
        None,
    );
    assert_eq!(
        alloc["allocations"][&cn1]["resources"]["VCPU"], 3,
        "{alloc}"
    );
    assert_eq!(alloc["project_id"], "proj", "{alloc}");

    // A reshape over the cluster: VCPU moves from cn1 to its child with the consumer's
    // allocation, whole.
    let generation = |uuid: &str| {
        call(
            port,
            "GET",
            &format!("/resource_providers/{uuid}"),
            Some(&writer),
            None,
        )
        .1["generation"]
            .as_i64()
            .expect("a generation")
    };
    let (_, current) = call(
        port,
        "GET",
        &format!("/allocations/{consumer}"),
        Some(&writer),
        None,
    );
    let body = json!({
        "inventories": {
            &cn1: {"resource_provider_generation": generation(&cn1),
                   "inventories": {"MEMORY_MB": {"total": 4096}}},
            &numa_uuid: {"resource_provider_generation": generation(&numa_uuid),
                         "inventories": {"VCPU": {"total": 4}}}
        },
        "allocations": {
            consumer: {"allocations": {&numa_uuid: {"resources": {"VCPU": 3}}},
                       "project_id": "proj", "user_id": "usr",
                       "consumer_generation": current["consumer_generation"],
                       "consumer_type": "INSTANCE"}
        }
    });
    let (status, answer) = call(port, "POST", "/reshaper", Some(&writer), Some(&body));
    assert_eq!(status, 204, "{answer}");
    let (_, moved) = call(
        port,
        "GET",
        &format!("/allocations/{consumer}"),
        Some(&writer),
        None,
    );
    assert_eq!(
        moved["allocations"][&numa_uuid]["resources"]["VCPU"], 3,
        "{moved}"
    );
    assert!(moved["allocations"].get(&cn1).is_none(), "{moved}");
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "cn-api-1",
            "-o",
            "jsonpath={.spec.inventories.MEMORY_MB.total}-{.spec.inventories.VCPU.total}",
        ],
        "4096-",
    );

    // Cleanup through the API and kubectl.
    ok(&split(&format!(
        "resource provider allocation delete {consumer}"
    )));
    for uuid in [&numa_uuid, &cn1] {
        let (status, body) = call(
            port,
            "DELETE",
            &format!("/resource_providers/{uuid}"),
            Some(&writer),
            None,
        );
        assert_eq!(status, 204, "{body}");
    }
    cp.kubectl(&["delete", "allocations", "--all"]).ok();
    cp.kubectl(&[
        "delete",
        "resourceprovider",
        "cn-api-race",
        "--ignore-not-found",
    ])
    .ok();
    cp.kubectl(&[
        "delete",
        "configmap",
        "kubeplace-placement-registry",
        "-n",
        "default",
        "--ignore-not-found",
    ])
    .ok();
    op.stop_and_unregister(cp);
}

//! Placement's API served by `kubeplace run` over the real control plane: osc-placement as
//! the client, Kubernetes tokens and RBAC deciding who may read and write, writes that
//! become objects `kubectl get` shows and that survive a restart, and API clients racing
//! kubectl for the last capacity.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

/// The audience the Placement API takes tokens for unless told otherwise.
pub(super) const AUDIENCE: &str = "kubeplace-placement";

/// A token for a service account of the default namespace, issued for the Placement API's
/// audience (as its callers get theirs).
pub(super) fn token(cp: &ControlPlane, account: &str) -> String {
    namespaced_token(cp, account, "default")
}

/// A token for `account` of `namespace`, for the Placement API's audience.
pub(super) fn namespaced_token(cp: &ControlPlane, account: &str, namespace: &str) -> String {
    cp.kubectl(&[
        "create",
        "token",
        account,
        "-n",
        namespace,
        "--audience",
        AUDIENCE,
    ])
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
    start_with(cp, port, &[])
}

/// The operator with the Placement API on `port` and `extra` arguments, once it answers.
fn start_with(cp: &ControlPlane, port: u16, extra: &[&str]) -> Operator {
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let mut args = vec!["--leader-elect=false", addr.as_str()];
    args.extend_from_slice(extra);
    let op = Operator::start(cp, "kubeplace-placement-api", &args);
    wait_for_api(port, &op);
    op
}

/// Where an HTTPS client reaches the API: the port on 127.0.0.1, the name it calls it by
/// (a Service's DNS name) and the CA (PEM file) it checks the certificate against.
pub(super) struct Tls<'a> {
    pub port: u16,
    pub name: &'a str,
    pub ca: &'a Path,
}

/// One HTTPS request with curl, which calls the API by `tls.name` as a client in the
/// cluster would (`--resolve` pins the name to 127.0.0.1) and checks the certificate
/// against `tls.ca` for that name: the status and the body, or curl's error when the
/// connection or the check fails.
pub(super) fn call_tls(
    tls: &Tls<'_>,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value), String> {
    let Tls { port, name, ca } = tls;
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--max-time", "30", "--resolve"])
        .arg(format!("{name}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(["-X", method, "-w", "\n%{http_code}"])
        .args(["-H", "OpenStack-API-Version: placement 1.39"])
        .args(["-H", "Content-Type: application/json"]);
    if let Some(t) = token {
        curl.arg("-H").arg(format!("X-Auth-Token: {t}"));
    }
    if matches!(method, "PUT" | "POST") {
        curl.args(["--data-binary", "@-"]);
    }
    curl.arg(format!("https://{name}:{port}{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = curl.spawn().expect("curl runs");
    let sent = body.map(Value::to_string).unwrap_or_default();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sent.as_bytes())
        .ok();
    let out = child.wait_with_output().expect("curl ends");
    if !out.status.success() {
        return Err(format!(
            "curl {method} https://{name}:{port}{path}: {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Ok((
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::Null),
    ))
}

/// Waits until the API answers `GET /` over TLS by its name.
pub(super) fn wait_for_api_tls(tls: &Tls<'_>, op: &Operator) {
    let up = (0..120).any(|_| {
        let ok = matches!(call_tls(tls, "GET", "/", None, None), Ok((200, _)));
        if !ok {
            std::thread::sleep(Duration::from_millis(500));
        }
        ok
    });
    assert!(
        up,
        "the Placement API never answered over TLS: {:?}\n{}",
        call_tls(tls, "GET", "/", None, None),
        op.process.output()
    );
}

/// The DNS names a DER certificate is for.
pub(super) fn dns_names(der: &[u8]) -> Vec<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
    let san = cert
        .subject_alternative_name()
        .expect("readable extensions")
        .expect("subject alternative names");
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
        .collect()
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
    // Created last and first by name: Placement lists custom traits as they were created.
    ok(&split("trait create CUSTOM_API_AFTER"));
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

    // The capacity page, of the cluster's state, for a reader's token; not without one.
    let page = |token: Option<&str>| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the API listens");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let auth = token
            .map(|t| format!("X-Auth-Token: {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET /kubeplace/capacity HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/html\r\n{auth}\r\n"
        )
        .expect("request sent");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("a reply");
        reply
    };
    let shown = page(Some(&reader));
    assert!(shown.starts_with("HTTP/1.0 200"), "{shown}");
    assert!(
        shown.contains("<td>cn-api-1</td>") && shown.contains(r#"data-class="VCPU" data-used=""#),
        "{shown}"
    );
    assert!(page(None).starts_with("HTTP/1.0 401"));

    // A restart loses nothing: providers, allocations and the created traits are there, in
    // the order they were created (the registry ConfigMap's lines).
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
        json!(["CUSTOM_API_GOLD", "CUSTOM_API_UNUSED", "CUSTOM_API_AFTER"]),
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

/// Tokens issued for the Placement API's audience are taken and open nothing else: a plain
/// `kubectl create token` (the API server's audience) is refused by the API, and the token
/// the API takes is refused by kube-apiserver itself. With the audience emptied (the
/// documented weaker setting) it is the other way round.
#[test]
fn only_tokens_for_the_placement_audience_are_taken_and_they_open_nothing_else() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let ours = token(cp, "placement-reader");
    let plain = cp
        .kubectl(&["create", "token", "placement-reader", "-n", "default"])
        .ok()
        .trim()
        .to_string();
    let port = support::free_port();
    let op = start(cp, port);
    let (status, body) = call(port, "GET", "/resource_providers", Some(&ours), None);
    assert_eq!(status, 200, "{body}");
    // The request log names the Kubernetes caller as its TokenReview did.
    let logged = (0..50).find_map(|_| {
        let lines = op.log_lines(&["placement_api::access"], usize::MAX);
        if lines.contains("user=\"system:serviceaccount:default:placement-reader\"") {
            return Some(lines);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        None
    });
    assert!(
        logged.is_some(),
        "no request log line naming the caller:\n{}",
        op.log_lines(&["placement_api::access"], 20)
    );
    let (status, refused) = call(port, "GET", "/resource_providers", Some(&plain), None);
    assert_eq!(status, 401, "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("kubeplace-placement")
            && said.contains("kubectl create token SERVICEACCOUNT --audience kubeplace-placement"),
        "the refusal says which token to send: {said}"
    );
    // Against the API server, each token alone: the plain one is the service account, the
    // one the Placement API took is no one.
    let whoami = |user: &str, token: &str| {
        let kubeconfig = super::rbac::token_kubeconfig(cp, user, token);
        cp.kubectl(&[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
    };
    let plain_user = whoami("e2e-plain-token", &plain);
    assert_eq!(
        plain_user.ok(),
        "system:serviceaccount:default:placement-reader"
    );
    let placement_user = whoami("e2e-placement-token", &ours);
    assert!(
        placement_user.fails().contains("Unauthorized"),
        "kube-apiserver took a token for the Placement API: {} {}",
        placement_user.stdout,
        placement_user.stderr
    );
    op.stop_and_unregister(cp);

    // --placement-token-audience= : the API server's own tokens, the weaker setting.
    let op = start_with(cp, port, &["--placement-token-audience="]);
    assert!(
        op.process
            .output()
            .contains("each token sent to it is also a credential for the Kubernetes API"),
        "no warning for the weaker setting:\n{}",
        op.process.output()
    );
    let (status, body) = call(port, "GET", "/resource_providers", Some(&plain), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(port, "GET", "/resource_providers", Some(&ours), None);
    assert_eq!(status, 401, "{body}");
    op.stop_and_unregister(cp);
}

/// `--placement-tls --placement-service`: a Secret made before (its certificate for the
/// webhook's names only) is made again for the Placement Service's names under the same
/// CA; the API serves that certificate; a client that trusts the Secret's ca.crt reaches
/// the API by the Service's name, and by another name, or in clear text, does not.
#[test]
fn the_placement_api_serves_https_for_its_services_names() {
    use kubeplace::serving::tls_secret::{self, Lifetimes, Material};
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let reader = token(cp, "placement-reader");
    let (secret_name, config) = ("e2e-placement-tls", "e2e-placement-tls");
    // The Secret as an operator without --placement-service made it.
    let mut webhook_names = tls_secret::service_names("kubeplace-webhook", "default");
    webhook_names.push("127.0.0.1".into());
    let before = tls_secret::issue(
        None,
        &webhook_names,
        Lifetimes::days(365),
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(secret_name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(before.to_data()),
        ..Default::default()
    };
    let mut secret = serde_json::to_value(&secret).unwrap();
    secret["apiVersion"] = json!("v1");
    secret["kind"] = json!("Secret");
    cp.kubectl_stdin(&["apply", "-f", "-"], &secret.to_string())
        .ok();

    let (webhook_port, metrics_port, port) = (
        support::free_port(),
        support::free_port(),
        support::free_port(),
    );
    super::chart::flavor_webhook_without_ca(cp, config, webhook_port);
    let args: Vec<String> = vec![
        "run".into(),
        format!("--kubeconfig={}", cp.kubeconfig.display()),
        format!("--tls-secret={secret_name}"),
        "--webhook-service=kubeplace-webhook".into(),
        "--webhook-host=127.0.0.1".into(),
        format!("--webhook-config-name={config}"),
        format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        "--namespace=default".into(),
        "--leader-elect=false".into(),
        format!("--placement-addr=127.0.0.1:{port}"),
        "--placement-tls".into(),
        "--placement-service=kubeplace-placement".into(),
    ];
    let op = Operator::launch(cp, "kubeplace-placement-tls", args, metrics_port, config);

    // Made again for the Placement Service, under the CA clients already trust.
    let after = Material::from_data(
        &super::chart::secret(cp, "default", secret_name)
            .into_iter()
            .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
            .collect(),
    )
    .unwrap();
    assert_eq!(after.ca_bundle, before.ca_bundle, "the CA changed");
    assert_ne!(after.cert, before.cert, "the certificate was kept");
    assert!(
        op.process
            .output()
            .contains("tls.crt is not for kubeplace-placement.default.svc"),
        "no reason given for the new certificate:\n{}",
        op.process.output()
    );
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &after.ca_bundle).unwrap();
    let name = "kubeplace-placement.default.svc";
    let tls = Tls {
        port,
        name,
        ca: &ca,
    };
    wait_for_api_tls(&tls, &op);

    // The certificate served on the Placement port, checked for the Service's name.
    let served = super::chart::served_certificate_for(port, &after.ca_bundle, name)
        .unwrap_or_else(|e| panic!("the certificate is not good for {name}: {e}"));
    let names = dns_names(&served);
    for want in [
        "kubeplace-placement",
        "kubeplace-placement.default",
        "kubeplace-placement.default.svc",
        "kubeplace-placement.default.svc.cluster.local",
        "kubeplace-webhook.default.svc",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    // A client by the Service's names, trusting the Secret's CA.
    for name in ["kubeplace-placement.default.svc", "kubeplace-placement"] {
        let by_name = Tls { name, ..tls };
        let (status, body) = call_tls(&by_name, "GET", "/resource_providers", Some(&reader), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status, 200, "{name}: {body}");
    }
    // What it answers with names it as it was reached: over TLS, by the Service's name.
    let writer = token(cp, "placement-writer");
    let put = Command::new("curl")
        .args(["-sS", "--max-time", "30", "--resolve"])
        .arg(format!("{name}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(&ca)
        .args(["-X", "PUT", "-D", "-", "-o", "/dev/null"])
        .args(["-H", "OpenStack-API-Version: placement 1.39"])
        .arg("-H")
        .arg(format!("X-Auth-Token: {writer}"))
        .arg(format!(
            "https://{name}:{port}/traits/CUSTOM_E2E_TLS_LOCATION"
        ))
        .output()
        .expect("curl runs");
    let head = String::from_utf8_lossy(&put.stdout).to_ascii_lowercase();
    assert!(
        head.contains(&format!(
            "location: https://{name}:{port}/traits/custom_e2e_tls_location"
        )),
        "{head}"
    );
    // By a name the certificate is not for, the check fails.
    let other = Tls {
        name: "kubeplace-metrics.default.svc",
        ..tls
    };
    let refused = call_tls(&other, "GET", "/", None, None);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("Some(60)") && e.contains("kubeplace-metrics.default.svc")),
        "{refused:?}"
    );
    // In clear text there is no HTTP answer.
    let clear = (|| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        Some(reply)
    })();
    assert!(
        !clear.is_some_and(|r| r.starts_with(b"HTTP/")),
        "the TLS port answered plain HTTP"
    );

    op.stop_and_unregister(cp);
    cp.kubectl(&["delete", "secret", secret_name, "-n", "default"])
        .ok();
}

/// A custom trait or resource class created through one replica is known to another within
/// the watch's latency: each replica watches the registry ConfigMap and re-reads it at every
/// change, instead of at its next periodic re-read (10 s). Three rounds, alternating which
/// replica creates: a replica learning names only by the periodic re-read would pass a round
/// by chance about one time in five.
#[test]
fn a_custom_name_created_through_one_replica_is_known_to_another_at_once() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(cp, "placement-writer");
    let registry = [
        "delete",
        "configmap",
        "kubeplace-placement-registry",
        "-n",
        "default",
        "--ignore-not-found",
    ];
    cp.kubectl(&registry).ok();
    let port1 = support::free_port();
    let op1 = start(cp, port1);
    let port2 = support::free_port();
    let op2 = Operator::start_named(
        cp,
        "kubeplace-registry-watch-2",
        "kubeplace-registry-watch",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port2}"),
        ],
    );
    wait_for_api(port2, &op2);
    // How long until `path` answers `want` on `port` (2 s at most, asked every 20 ms).
    let known_within = |port: u16, path: &str, want: u16| {
        let started = std::time::Instant::now();
        loop {
            let status = call(port, "GET", path, Some(&writer), None).0;
            if status == want {
                return Some(started.elapsed());
            }
            if started.elapsed() > Duration::from_secs(2) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut names = Vec::new();
    for round in 0..3 {
        let (creator, other) = if round % 2 == 0 {
            (port1, port2)
        } else {
            (port2, port1)
        };
        for (kind, absent, present) in [("traits", 404, 204), ("resource_classes", 404, 200)] {
            let path = format!("/{kind}/CUSTOM_E2E_WATCHED_{round}");
            assert_eq!(
                call(other, "GET", &path, Some(&writer), None).0,
                absent,
                "{path} before"
            );
            let (status, body) = call(creator, "PUT", &path, Some(&writer), None);
            assert_eq!(status, 201, "{path}: {body}");
            let took = known_within(other, &path, present);
            assert!(
                took.is_some(),
                "{path}, created through one replica, was not known to the other within 2 s:\n{}",
                if other == port1 { &op1 } else { &op2 }.process.output()
            );
            names.push(path);
        }
    }
    // Deleted through one replica: gone from the other as quickly.
    for path in &names {
        let (status, body) = call(port1, "DELETE", path, Some(&writer), None);
        assert_eq!(status, 204, "{path}: {body}");
    }
    for path in &names {
        assert!(
            known_within(port2, path, 404).is_some(),
            "{path} deleted through one replica was still known to the other after 2 s"
        );
    }
    op2.stop_and_unregister(cp);
    op1.stop_and_unregister(cp);
    cp.kubectl(&registry).ok();
}

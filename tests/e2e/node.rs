//! kubeplace in pods on a real node: `helm install` with the image built here,
//! the webhook reached through its Service, statuses written by the leader pod,
//! the leader's pod deleted, a rollout under a stream of writes, a CRD upgrade,
//! `helm test`, and the cluster mirror turned on by `helm upgrade` (a Server's device held
//! against pods under the chart's own RBAC). The cluster is `hack/local-cluster.sh`'s, the one README
//! offers users; it needs root and Debian's containerd, runc, CNI plugins,
//! buildah, iptables and conntrack, which `.ci/run` installs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::chart::{NEW_FIELD, chart_with_a_new_field};
use crate::support::{ControlPlane, Node};

const NS: &str = "kubeplace-system";
/// Clients writing during the rollout, and the Flavors each apply carries.
const WRITERS: usize = 3;
const BATCH: usize = 10;

/// Retries `check` every half second for up to `seconds`; panics with `what`
/// and the last value otherwise.
fn eventually<T: std::fmt::Debug>(
    seconds: u64,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        match check() {
            Ok(value) => return value,
            Err(last) if Instant::now() > deadline => {
                panic!("{what} not within {seconds}s; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The Lease's holder: the leader pod's name (identities are `<pod>_<…>`).
fn leader(cp: &ControlPlane) -> Option<String> {
    let holder = cp.kubectl(&[
        "get",
        "lease",
        "kubeplace-leader",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    let holder = holder.stdout.trim();
    (holder.starts_with("kubeplace-")).then(|| holder.split('_').next().unwrap().to_string())
}

/// The kubeplace pods that are Ready, by name.
fn ready_pods(cp: &ControlPlane) -> Vec<String> {
    let out = cp.kubectl(&[
        "get",
        "pods",
        "-n",
        NS,
        "-l",
        "app.kubernetes.io/name=kubeplace",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}"#,
    ]);
    out.stdout
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            (fields.len() == 2 && fields[1] == "True").then(|| fields[0].to_string())
        })
        .collect()
}

/// A Flavor the webhook admits; `n` varies its name, `label` its labels.
fn flavor(name: &str, label: usize) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\n  \
         labels:\n    e2e-iteration: \"{label}\"\nspec:\n  vcpus: 1\n  memoryMb: 512\n  diskGb: 1\n"
    )
}

/// A Flavor's candidate count, once its status has one.
fn candidates(cp: &ControlPlane, name: &str) -> Result<String, String> {
    let out = cp.kubectl(&[
        "get",
        "flavor",
        name,
        "-o",
        "jsonpath={.status.candidateCount}",
    ]);
    let got = out.stdout.trim().to_string();
    if out.success && !got.is_empty() {
        Ok(got)
    } else {
        Err(format!("{got:?} {}", out.stderr))
    }
}

#[test]
fn the_chart_runs_kubeplace_in_pods_on_a_real_node() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;

    // helm install with the image built here: two Ready pods.
    cp.helm(&[
        "install",
        "kubeplace",
        "charts/kubeplace",
        "--namespace",
        NS,
        "--create-namespace",
        "--set",
        "image.pullPolicy=Never",
        "--wait",
        "--timeout",
        "5m",
    ])
    .ok();
    let ready = cp.kubectl(&[
        "get",
        "deployment",
        "kubeplace",
        "-n",
        NS,
        "-o",
        "jsonpath={.status.readyReplicas}",
    ]);
    assert_eq!(ready.ok().trim(), "2", "ready replicas");

    // The webhook is registered by Service, and the API server reaches it there:
    // the example cloud is admitted and every rejected example refused by it.
    let service = cp.kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "-o",
        "jsonpath={.items[*].webhooks[*].clientConfig.service.name}",
    ]);
    assert!(
        service
            .ok()
            .split_whitespace()
            .all(|s| s == "kubeplace-webhook"),
        "{}",
        service.stdout
    );
    // On a fresh install the first leader has no predecessor whose claims it must wait
    // for: the example's Allocation is admitted at once, not refused with "the leader
    // changed a moment ago". Only a moment with no leader at all may be retried, and a
    // Service kube-proxy has not yet given the ready pods' endpoints (it rejects
    // connections to a Service without endpoints), as in any cluster right after install.
    eventually(60, "examples/cloud/ admitted", || {
        let out = cp.kubectl(&["apply", "-f", "examples/cloud/"]);
        let not_routed_yet = out
            .stderr
            .contains("kubeplace-webhook.kubeplace-system.svc:443")
            && out.stderr.contains("connect: connection refused");
        match out.success {
            true => Ok(()),
            false if out.stderr.contains("no kubeplace replica leads") || not_routed_yet => {
                Err(out.stderr)
            }
            false => panic!("examples/cloud/ refused:\n{}", out.stderr),
        }
    });
    let mut refused = 0;
    for entry in std::fs::read_dir(format!("{}/examples/rejected", crate::ROOT)).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.contains("apiVersion: kubeplace.io/v1alpha1") {
            continue; // refused by the API server itself (unknown version or kind)
        }
        let out = cp.kubectl(&["apply", "-f", path.to_str().unwrap()]);
        let err = out.fails();
        if err.contains("admission webhook") && err.contains("denied the request") {
            refused += 1;
        }
    }
    assert!(
        refused >= 5,
        "only {refused} examples refused by the webhook"
    );

    // The leader pod writes statuses.
    let first = eventually(60, "a leader pod", || leader(cp).ok_or_else(String::new));
    assert!(
        ready_pods(cp).contains(&first),
        "{first} is not a Ready pod"
    );
    eventually(60, "m1.small's status", || candidates(cp, "m1.small"));
    let host = eventually(60, "web-2 placed", || {
        let out = cp.kubectl(&[
            "get",
            "server",
            "web-2",
            "-n",
            "shop",
            "-o",
            "jsonpath={.status.host}",
        ]);
        let host = out.stdout.trim().to_string();
        if host.is_empty() {
            Err(out.stderr)
        } else {
            Ok(host)
        }
    });
    eprintln!("leader {first}; web-2 on {host}");

    // The leader's pod is deleted: the other pod leads and writes statuses.
    cp.kubectl(&["delete", "pod", &first, "-n", NS, "--wait=false"])
        .ok();
    let second = eventually(90, "another leader", || match leader(cp) {
        Some(l) if l != first => Ok(l),
        other => Err(format!("{other:?}")),
    });
    cp.kubectl_stdin(&["apply", "-f", "-"], &flavor("e2e-after-failover", 0))
        .ok();
    eventually(60, "a status from the new leader", || {
        candidates(cp, "e2e-after-failover")
    });
    eprintln!("after deleting {first}, {second} leads");

    // A rollout while a client creates and updates Flavors without pause: no
    // admission fails (readiness, preStop, drain on SIGTERM).
    eventually(120, "two Ready pods again", || {
        let ready = ready_pods(cp);
        if ready.len() == 2 {
            Ok(ready)
        } else {
            Err(format!("{ready:?}"))
        }
    });
    let done = AtomicBool::new(false);
    let requests = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for client in 0..WRITERS {
            let (done, requests, failures) = (&done, &requests, &failures);
            s.spawn(move || {
                let mut i = 0;
                while !done.load(Ordering::SeqCst) {
                    i += 1;
                    // Each apply creates or updates a batch of Flavors (a new label
                    // value each time): every one is an admission request.
                    let batch: Vec<String> = (0..BATCH)
                        .map(|n| flavor(&format!("e2e-rollout-{client}-{n}"), i))
                        .collect();
                    let out = cp.kubectl_stdin(&["apply", "-f", "-"], &batch.join("---\n"));
                    requests.fetch_add(BATCH, Ordering::SeqCst);
                    if !out.success {
                        failures.lock().unwrap().push(out.stderr.clone());
                    }
                }
            });
        }
        cp.kubectl(&["rollout", "restart", "deployment/kubeplace", "-n", NS])
            .ok();
        let status = cp.kubectl(&[
            "rollout",
            "status",
            "deployment/kubeplace",
            "-n",
            NS,
            "--timeout=300s",
        ]);
        // Writes go on a little after the rollout, while the old pods drain.
        std::thread::sleep(Duration::from_secs(10));
        done.store(true, Ordering::SeqCst);
        status.ok();
    });
    let failures = failures.into_inner().unwrap();
    let requests = requests.load(Ordering::SeqCst);
    eprintln!(
        "rollout: {requests} admissions requested, {} failed",
        failures.len()
    );
    assert!(
        requests >= 20,
        "only {requests} requests during the rollout"
    );
    assert!(failures.is_empty(), "admissions failed: {failures:#?}");

    // helm upgrade to a chart whose Flavor CRD gained a field: the field is served.
    let dir = tempfile::tempdir().unwrap();
    let chart = chart_with_a_new_field(dir.path());
    cp.helm(&[
        "upgrade",
        "kubeplace",
        chart.to_str().unwrap(),
        "--namespace",
        NS,
        "--reuse-values",
        "--wait",
        "--timeout",
        "5m",
    ])
    .ok();
    eventually(60, "the new field in kubectl explain", || {
        let out = cp.kubectl(&["explain", &format!("flavor.spec.{NEW_FIELD}")]);
        if out.success { Ok(()) } else { Err(out.stderr) }
    });

    // helm test: a pod probes the release through its Services.
    let tested = cp.helm(&["test", "kubeplace", "--namespace", NS, "--timeout", "3m"]);
    assert!(
        tested.ok().contains("Phase:          Succeeded"),
        "{}",
        tested.stdout
    );

    // The cluster mirror turned on with helm, under the chart's own RBAC and webhook
    // registration: a Server placed on the Node's one device holds it with a reservation
    // claim, and kube-scheduler gives that device to no pod.
    cp.helm(&[
        "upgrade",
        "kubeplace",
        chart.to_str().unwrap(),
        "--namespace",
        NS,
        "--reuse-values",
        "--set",
        "mirrorCluster=true",
        "--set",
        "reservationImage=localhost/kubeplace-pause:1",
        "--wait",
        "--timeout",
        "5m",
    ])
    .ok();
    let rules = cp
        .kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            "-o",
            "jsonpath={.items[*].webhooks[*].name}",
        ])
        .ok()
        .to_string();
    assert!(rules.contains("resourceclaims.kubeplace.io"), "{rules}");
    let node_name = cp
        .kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
        .ok()
        .trim()
        .to_string();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: chart-mirror}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: chart-gpu}}\n\
             spec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"gpu.chart.kubeplace.io\"'}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node_name}-chart}}\n\
             spec:\n  driver: gpu.chart.kubeplace.io\n  nodeName: {node_name}\n  pool: {{name: {node_name}, generation: 1, resourceSliceCount: 1}}\n\
             \x20 devices: [{{name: gpu-0}}]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: chart.gpu}}\n\
             spec: {{vcpus: 1, memoryMb: 1, extraSpecs: {{'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:CUSTOM_CHART_GPU': '1'}}}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: chart-image}}\nspec: {{properties: {{os_distro: ubuntu}}}}\n"
        ),
    )
    .ok();
    eventually(
        90,
        "chart.gpu's candidate: the mirrored device",
        || match candidates(cp, "chart.gpu") {
            Ok(n) if n == "1" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: gpu-user, namespace: chart-mirror}\nspec: {flavor: chart.gpu, image: chart-image}\n",
    )
    .ok();
    eventually(90, "the Server's reservation claim allocated", || {
        let device = cp
            .kubectl(&[
                "get",
                "resourceclaim",
                "kubeplace-reservation-gpu-user",
                "-n",
                "chart-mirror",
                "-o",
                "jsonpath={.status.allocation.devices.results[0].device}",
            ])
            .stdout;
        (device.trim() == "gpu-0").then_some(()).ok_or(device)
    });
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: wants-gpu, namespace: chart-mirror}\n\
         spec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: chart-gpu}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: wants-gpu, namespace: chart-mirror}\n\
         spec:\n  resourceClaims: [{name: gpu, resourceClaimName: wants-gpu}]\n\
         \x20 containers:\n  - {name: c, image: localhost/kubeplace-pause:1, resources: {claims: [{name: gpu}]}}\n",
    )
    .ok();
    eventually(60, "the pod told it cannot be scheduled", || {
        let status = cp
            .kubectl(&[
                "get",
                "pod",
                "wants-gpu",
                "-n",
                "chart-mirror",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].status}",
            ])
            .stdout;
        (status.trim() == "False").then_some(()).ok_or(status)
    });
    std::thread::sleep(Duration::from_secs(5));
    let taken = cp
        .kubectl(&[
            "get",
            "resourceclaim",
            "wants-gpu",
            "-n",
            "chart-mirror",
            "-o",
            "jsonpath={.status.allocation.devices.results[*].device}",
        ])
        .stdout;
    assert_eq!(
        taken.trim(),
        "",
        "the pod's claim was given the Server's device"
    );
}

//! End to end against a real kube-apiserver (tests/support): what a user sees
//! from `kubectl` and `helm` with kubeplace's CRDs, chart and manifests.
//!
//! The control plane is built on first use when it is missing (see
//! hack/controlplane/README.md) and started once for all tests here.

#[path = "../support/keystone.rs"]
mod keystone_support;
#[path = "../support/real_placement.rs"]
mod real_placement;
#[path = "../support/mod.rs"]
mod support;

mod chart;
mod claims;
mod client_auth;
mod cores;
mod devices;
mod failover;
mod faults;
mod gabbi;
mod keystone;
mod mirror;
mod node;
mod nova;
mod numa;
mod observability;
mod placement_api;
mod placement_crashes;
mod placement_import;
mod placement_writes;
mod pools;
mod provider_config;
mod quotas;
mod rbac;
mod servers;
mod shares;
mod upgrade_check;
mod zones;

use std::sync::Once;
use std::time::Duration;

use support::{ControlPlane, ROOT, cluster, exclusive_lock, objects_lock};

/// Every CRD in crds/kubeplace.yaml, by name.
const CRDS: [&str; 13] = [
    "resourceproviders.kubeplace.io",
    "allocations.kubeplace.io",
    "providerconfigs.kubeplace.io",
    "extraspecdefinitions.kubeplace.io",
    "flavors.kubeplace.io",
    "images.kubeplace.io",
    "serviceprofiles.kubeplace.io",
    "servers.kubeplace.io",
    "aggregates.kubeplace.io",
    "servergroups.kubeplace.io",
    "placementwrites.kubeplace.io",
    "projectquotas.kubeplace.io",
    "defaultprojectquotas.kubeplace.io",
];

static CRDS_APPLIED: Once = Once::new();

/// `kubectl apply -f crds/` and wait until every CRD is Established.
fn install_crds(cp: &ControlPlane) {
    let out = cp.kubectl(&["apply", "-f", "crds/"]);
    let applied = out.ok();
    for crd in CRDS {
        assert!(
            applied.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io/{crd}"
            )),
            "kubectl apply did not mention {crd}:\n{applied}"
        );
    }
    let mut args = vec!["wait", "--for", "condition=established", "--timeout=60s"];
    let names: Vec<String> = CRDS.iter().map(|c| format!("crd/{c}")).collect();
    args.extend(names.iter().map(String::as_str));
    let waited = cp.kubectl(&args);
    for crd in CRDS {
        assert!(
            waited.ok().contains(&format!("{crd} condition met")),
            "{crd} is not Established:\n{}",
            waited.stdout
        );
    }
}

/// The shared control plane with the CRDs installed (once).
fn crds_installed() -> &'static ControlPlane {
    let cp = cluster();
    CRDS_APPLIED.call_once(|| install_crds(cp));
    cp
}

/// A control plane of the caller's own with the CRDs installed, for a test that needs
/// an empty cluster or restarts its servers.
fn private_with_crds() -> ControlPlane {
    let cp = ControlPlane::private();
    install_crds(&cp);
    cp
}

#[test]
fn crds_apply_and_become_established() {
    let _objects = objects_lock();
    let cp = crds_installed();
    let listed = cp.kubectl(&["get", "crds", "-o", "name"]);
    for crd in CRDS {
        assert!(
            listed.ok().contains(crd),
            "{crd} missing:\n{}",
            listed.stdout
        );
    }
    // Every kind answers a list, cluster-scoped or (Server) namespaced.
    let resources = cp.kubectl(&["api-resources", "--api-group=kubeplace.io", "--no-headers"]);
    let resources = resources.ok();
    assert_eq!(resources.lines().count(), CRDS.len(), "{resources}");
    let server = resources
        .lines()
        .find(|l| l.starts_with("servers "))
        .expect("servers");
    assert!(server.contains(" true "), "Server is namespaced: {server}");
}

#[test]
fn kubectl_explain_documents_the_fields() {
    let _objects = objects_lock();
    let cp = crds_installed();
    // Discovery can lag the Established condition by a moment.
    let mut explained = cp.kubectl(&["explain", "flavor.spec.extraSpecs"]);
    for _ in 0..20 {
        if explained.success {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        explained = cp.kubectl(&["explain", "flavor.spec.extraSpecs"]);
    }
    let text = explained.ok();
    assert!(text.contains("KIND:       Flavor"), "{text}");
    assert!(
        text.contains("FIELD: extraSpecs <map[string]string>"),
        "{text}"
    );
    assert!(
        text.contains("Extra specs, key to value"),
        "no description:\n{text}"
    );
    let provider = cp.kubectl(&["explain", "resourceprovider.spec.inventories"]);
    assert!(
        provider.ok().contains("DESCRIPTION:"),
        "{}",
        provider.stdout
    );
}

#[test]
fn kubectl_get_flavors_shows_the_printer_columns() {
    let _objects = objects_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e.columns\n\
         spec:\n  vcpus: 4\n  memoryMb: 8192\n  diskGb: 80\n",
    )
    .ok();
    let table = cp.kubectl(&["get", "flavors", "e2e.columns"]);
    let table = table.ok();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "VCPUS",
            "RAM",
            "DISK",
            "CANDIDATES",
            "HEADROOM",
            "VALID",
            "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["e2e.columns", "4", "8192", "80"], "{table}");

    // The wide view adds the Schedulable reason; the short name works.
    let wide = cp.kubectl(&["get", "flv", "e2e.columns", "-o", "wide"]);
    assert!(wide.ok().contains("SCHEDULABLE"), "{}", wide.stdout);
    cp.kubectl(&["delete", "flavor", "e2e.columns"]).ok();
}

#[test]
fn kubectl_watch_shows_flavors_as_they_are_created() {
    let _objects = objects_lock();
    let cp = crds_installed();
    let mut cmd = std::process::Command::new(cp.bin.join("kubectl"));
    cmd.args(["get", "flavors", "--watch", "--output-watch-events"]);
    let watch = cp.spawn(cmd, "kubectl-watch-flavors");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e.watched\n\
         spec:\n  vcpus: 2\n  memoryMb: 4096\n  diskGb: 40\n",
    )
    .ok();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !watch.output().contains("e2e.watched") {
        assert!(watch.running(), "kubectl exited: {}", watch.output());
        assert!(
            std::time::Instant::now() < deadline,
            "no watch event: {}",
            watch.output()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let event = watch
        .output()
        .lines()
        .find(|l| l.contains("e2e.watched"))
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert_eq!(&event[..5], ["ADDED", "e2e.watched", "2", "4096", "40"]);
    assert!(
        watch.stop(std::time::Duration::from_secs(10)),
        "kubectl ignored SIGTERM"
    );
    assert!(!watch.running());
    cp.kubectl(&["delete", "flavor", "e2e.watched"]).ok();
}

#[test]
fn cel_rules_reject_bad_objects_with_their_message() {
    let _objects = objects_lock();
    let cp = crds_installed();
    let cases = [
        (
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-overreserved\n\
             spec:\n  inventories:\n    MEMORY_MB:\n      total: 4096\n      reserved: 8192\n",
            "reserved must not exceed total",
        ),
        (
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-units\n\
             spec:\n  inventories:\n    VCPU:\n      total: 8\n      minUnit: 4\n      maxUnit: 2\n",
            "minUnit must not exceed maxUnit",
        ),
        (
            "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: e2e-both\n\
             spec:\n  meta:\n    schemaVersion: \"1.0\"\n  providers:\n  - identification:\n\
             \x20     name: cn1\n      uuid: 5c8ed9b0-7a1f-4a3e-9a59-3f4c1f6e2b11\n",
            "set exactly one of uuid or name",
        ),
    ];
    for (manifest, message) in cases {
        let out = cp.kubectl_stdin(&["apply", "-f", "-"], manifest);
        let stderr = out.fails();
        assert!(
            stderr.contains("is invalid") && stderr.contains(message),
            "expected the API server to refuse with {message:?}:\n{stderr}"
        );
    }
    // The same object within the rules is stored.
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-fine\n\
         spec:\n  inventories:\n    MEMORY_MB:\n      total: 8192\n      reserved: 512\n",
    )
    .ok();
    cp.kubectl(&["delete", "resourceprovider", "e2e-fine"]).ok();
}

#[test]
fn helm_lint_passes() {
    let cp = cluster();
    for set in ["certManager.enabled=false", "certManager.enabled=true"] {
        let out = cp.helm(&["lint", "--strict", "charts/kubeplace", "--set", set]);
        assert!(
            out.ok().contains("0 chart(s) failed"),
            "{}\n{}",
            out.stdout,
            out.stderr
        );
    }
    // values.schema.json is enforced: a wrong type is refused.
    let bad = cp.helm(&["lint", "charts/kubeplace", "--set", "logFormat=xml"]);
    let bad = format!("{}{}", bad.stdout, bad.fails());
    assert!(bad.contains("logFormat"), "{bad}");
}

#[test]
fn helm_template_is_accepted_by_the_api_server() {
    let _objects = objects_lock();
    let cp = crds_installed();
    // The helm test Pod needs the namespace's default ServiceAccount, which no
    // controller-manager makes here; tests/e2e/chart.rs checks it on its own.
    let rendered = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--namespace",
        "default",
        "--skip-tests",
    ]);
    let rendered = rendered.ok().to_string();
    let applied = cp.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered);
    let applied = applied.ok();
    for object in [
        "serviceaccount/kubeplace",
        "clusterrole.rbac.authorization.k8s.io/kubeplace",
        "clusterrolebinding.rbac.authorization.k8s.io/kubeplace",
        "role.rbac.authorization.k8s.io/kubeplace",
        "rolebinding.rbac.authorization.k8s.io/kubeplace",
        "service/kubeplace-webhook",
        "service/kubeplace-metrics",
        "deployment.apps/kubeplace",
        "poddisruptionbudget.policy/kubeplace",
        "networkpolicy.networking.k8s.io/kubeplace",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/kubeplace",
    ] {
        assert!(
            applied.contains(&format!("{object} created (server dry run)")),
            "{object} not accepted:\n{applied}"
        );
    }

    // With cert-manager, the chart asks it for the certificate and the CA.
    let with_cm = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--namespace",
        "kubeplace-system",
        "--set",
        "certManager.enabled=true",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    ]);
    let with_cm = with_cm.ok();
    for expected in [
        "kind: Certificate",
        "kind: Issuer",
        "kind: ServiceMonitor",
        "cert-manager.io/inject-ca-from: kubeplace-system/kubeplace-webhook",
        "secretName: kubeplace-webhook-tls",
    ] {
        assert!(with_cm.contains(expected), "no {expected:?}:\n{with_cm}");
    }
    assert!(!with_cm.contains("caBundle"), "{with_cm}");
    assert!(!with_cm.contains("kind: Secret"), "{with_cm}");

    // One replica: no PodDisruptionBudget (it would only block drains).
    let single = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--set",
        "replicaCount=1",
    ]);
    assert!(!single.ok().contains("kind: PodDisruptionBudget"));
}

#[test]
fn manifests_are_accepted_by_the_api_server() {
    let _objects = objects_lock();
    let cp = crds_installed();
    // The namespace for real (namespaced objects need it even in a dry run),
    // everything else as a server-side dry run.
    cp.kubectl(&["apply", "-f", "manifests/00-namespace.yaml"])
        .ok();
    let mut files: Vec<String> = std::fs::read_dir(format!("{ROOT}/manifests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    files.sort();
    let mut args = vec!["apply", "--dry-run=server"];
    let paths: Vec<String> = files.iter().map(|f| format!("manifests/{f}")).collect();
    for p in &paths {
        args.extend(["-f", p.as_str()]);
    }
    let applied = cp.kubectl(&args);
    let applied = applied.ok();
    for object in [
        "serviceaccount/kubeplace",
        "clusterrole.rbac.authorization.k8s.io/kubeplace",
        "role.rbac.authorization.k8s.io/kubeplace",
        "deployment.apps/kubeplace",
        "service/kubeplace-webhook",
        "service/kubeplace-metrics",
        "poddisruptionbudget.policy/kubeplace",
        "networkpolicy.networking.k8s.io/kubeplace",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/kubeplace",
    ] {
        assert!(
            applied.contains(&format!("{object} created (server dry run)")),
            "{object} not accepted:\n{applied}"
        );
    }
}

#[test]
fn helm_install_creates_the_objects_and_uninstall_removes_them() {
    // The release registers a webhook with failurePolicy Fail whose backend
    // cannot run here (no kubelet): no other test may create kubeplace
    // objects meanwhile.
    let _exclusive = exclusive_lock();
    let cp = cluster();
    let (release, ns) = ("kubeplace-e2e", "kubeplace-e2e");
    // The CRDs are templates of the release; other tests applied them with kubectl, so
    // the release takes them over, as an install over an earlier one would.
    let installed = cp.helm(&[
        "install",
        release,
        "charts/kubeplace",
        "--namespace",
        ns,
        "--create-namespace",
        "--take-ownership",
    ]);
    assert!(
        installed.ok().contains("STATUS: deployed"),
        "{}",
        installed.stdout
    );
    assert!(
        installed
            .stdout
            .contains("kubeplace 0.1.0 is installed in namespace kubeplace-e2e"),
        "NOTES.txt not shown:\n{}",
        installed.stdout
    );

    let namespaced = [
        "deployment/kubeplace-e2e",
        "service/kubeplace-e2e-webhook",
        "service/kubeplace-e2e-metrics",
        "serviceaccount/kubeplace-e2e",
        "role/kubeplace-e2e",
        "rolebinding/kubeplace-e2e",
        "poddisruptionbudget/kubeplace-e2e",
    ];
    let cluster_scoped = [
        "clusterrole/kubeplace-e2e",
        "clusterrolebinding/kubeplace-e2e",
        "validatingwebhookconfiguration/kubeplace-e2e",
    ];
    for object in namespaced {
        cp.kubectl(&["get", "-n", ns, object]).ok();
    }
    for object in cluster_scoped {
        cp.kubectl(&["get", object]).ok();
    }
    for crd in CRDS {
        cp.kubectl(&["get", "crd", crd]).ok();
    }

    // The webhook points at the Service; the chart renders no CA (the operator sets it,
    // and no pod runs here), and the Deployment runs `kubeplace run` keeping its
    // certificate in the Secret.
    let webhook = cp.kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "kubeplace-e2e",
        "-o",
        "jsonpath={range .webhooks[*]}{.name} {.failurePolicy} {.clientConfig.service.name} \
         {.clientConfig.service.path} {.clientConfig.caBundle}{\"\\n\"}{end}",
    ]);
    let webhook = webhook.ok();
    assert_eq!(webhook.lines().count(), CRDS.len(), "{webhook}");
    for line in webhook.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let plural = f[0].trim_end_matches(".kubeplace.io");
        assert_eq!(f[1], "Fail", "{line}");
        assert_eq!(f[2], "kubeplace-e2e-webhook", "{line}");
        assert_eq!(f[3], format!("/validate/{plural}"), "{line}");
        assert_eq!(f[4], "", "the chart rendered a caBundle: {line}");
    }
    let secret = cp.kubectl(&["get", "-n", ns, "secret/kubeplace-e2e-webhook-tls"]);
    assert!(
        secret.fails().contains("NotFound"),
        "the chart made the Secret"
    );
    let args = cp.kubectl(&[
        "get",
        "-n",
        ns,
        "deployment/kubeplace-e2e",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].args}",
    ]);
    let args = args.ok();
    assert!(args.starts_with("2 "), "{args}");
    for arg in [
        "\"run\"",
        "--tls-secret=kubeplace-e2e-webhook-tls",
        "--webhook-service=kubeplace-e2e-webhook",
        "--webhook-config-name=kubeplace-e2e",
        "--drain-seconds=10",
        "--leader-elect=true",
    ] {
        assert!(args.contains(arg), "no {arg}: {args}");
    }

    // An upgrade applies the new values.
    let upgraded = cp.helm(&[
        "upgrade",
        release,
        "charts/kubeplace",
        "--namespace",
        ns,
        "--set",
        "replicaCount=3",
        "--set",
        "leaderElection.enabled=false",
    ]);
    assert!(
        upgraded.ok().contains("STATUS: deployed"),
        "{}",
        upgraded.stdout
    );
    let args = cp.kubectl(&[
        "get",
        "-n",
        ns,
        "deployment/kubeplace-e2e",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].args}",
    ]);
    let args = args.ok();
    assert!(args.starts_with("3 "), "{args}");
    assert!(args.contains("--leader-elect=false"), "{args}");

    // While the release's webhook has no backend, failurePolicy Fail refuses
    // kubeplace objects: the API server calls the webhook.
    let refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e.refused\n\
         spec:\n  vcpus: 1\n  memoryMb: 512\n  diskGb: 1\n",
    );
    let refused = refused.fails();
    assert!(
        refused.contains("failed calling webhook \"flavors.kubeplace.io\""),
        "{refused}"
    );

    let uninstalled = cp.helm(&["uninstall", release, "--namespace", ns]);
    assert!(
        uninstalled.ok().contains("uninstalled"),
        "{}",
        uninstalled.stdout
    );
    for object in namespaced {
        let gone = cp.kubectl(&["get", "-n", ns, object]);
        assert!(gone.fails().contains("NotFound"), "{object} is still there");
    }
    for object in cluster_scoped {
        let gone = cp.kubectl(&["get", object]);
        assert!(gone.fails().contains("NotFound"), "{object} is still there");
    }
    // The CRDs are kept (helm.sh/resource-policy: keep): deleting them would delete
    // every kubeplace object.
    for crd in CRDS {
        cp.kubectl(&["get", "crd", crd]).ok();
    }
}

/// Polls `kubectl get … -o jsonpath=…` until it prints `want` (60 s at most).
fn eventually(cp: &ControlPlane, args: &[&str], want: &str) -> String {
    polled(cp, args, want)
        .unwrap_or_else(|last| panic!("kubectl {args:?} never printed {want:?}; last: {last}"))
}

/// What `kubectl ARGS` printed once it printed `want`, or, after 60 s of polling, what
/// it printed last.
fn polled(cp: &ControlPlane, args: &[&str], want: &str) -> Result<String, String> {
    let mut last = String::new();
    for _ in 0..120 {
        let out = cp.kubectl(args);
        last = format!("{}{}", out.stdout, out.stderr);
        if out.success && out.stdout.trim() == want {
            return Ok(last);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Err(last)
}

/// Waits until a Flavor's field (a jsonpath without braces) prints `want`.
fn eventually_flavor(cp: &ControlPlane, flavor: &str, field: &str, want: &str) -> String {
    eventually(
        cp,
        &[
            "get",
            "flavor",
            flavor,
            "-o",
            &format!("jsonpath={{{field}}}"),
        ],
        want,
    )
}

/// A Flavor's `status.headroom.servers` as `kubeplace apply -f examples/cloud` counts it.
fn offline_headroom(flavor: &str) -> i64 {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .current_dir(ROOT)
        .args(["apply", "-f", "examples/cloud", "-o", "json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "Flavor" && i["name"] == flavor)
        .and_then(|i| i["status"]["headroom"]["servers"].as_i64())
        .unwrap_or_else(|| panic!("no headroom for {flavor} offline"))
}

/// `kubeplace run` out of cluster against the test control plane, with its own webhook
/// configuration (`--self-signed`) and ports.
pub struct Operator {
    pub process: support::Process,
    pub metrics_port: u16,
    args: Vec<String>,
    webhook_config: String,
}

impl Operator {
    /// The first `most` lines of its log that contain any of `words`: where a test's time
    /// went, printed when it fails.
    pub fn log_lines(&self, words: &[&str], most: usize) -> String {
        std::fs::read_to_string(&self.process.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| words.iter().any(|w| l.contains(w)))
            .take(most)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Starts it and waits until its webhook is registered and it reports ready.
    pub fn start(cp: &ControlPlane, name: &str, extra: &[&str]) -> Operator {
        Operator::start_named(cp, name, "kubeplace", extra)
    }

    /// As [`Operator::start`], with the webhook configuration named `webhook_config`.
    pub fn start_named(
        cp: &ControlPlane,
        name: &str,
        webhook_config: &str,
        extra: &[&str],
    ) -> Operator {
        let webhook_port = support::free_port();
        let metrics_port = support::free_port();
        let mut args: Vec<String> = [
            "run",
            "--kubeconfig",
            cp.kubeconfig.to_str().unwrap(),
            "--self-signed",
            "--webhook-host",
            "127.0.0.1",
            "--webhook-config-name",
            webhook_config,
            "--namespace",
            "default",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--webhook-addr=127.0.0.1:{webhook_port}"));
        args.push(format!("--metrics-addr=127.0.0.1:{metrics_port}"));
        args.extend(extra.iter().map(|s| s.to_string()));
        Operator::launch(cp, name, args, metrics_port, webhook_config)
    }

    /// Starts `kubeplace run ARGS` (with no drain on SIGTERM unless ARGS give one) and
    /// waits until `webhook_config` exists and it reports ready.
    fn launch(
        cp: &ControlPlane,
        name: &str,
        mut args: Vec<String>,
        metrics_port: u16,
        webhook_config: &str,
    ) -> Operator {
        if !args.iter().any(|a| a.starts_with("--drain-seconds")) {
            args.push("--drain-seconds=0".into());
        }
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
        cmd.current_dir(ROOT).args(&args);
        let process = cp.spawn(cmd, name);
        let operator = Operator {
            process,
            metrics_port,
            args,
            webhook_config: webhook_config.to_string(),
        };
        let registered = polled(
            cp,
            &[
                "get",
                "validatingwebhookconfiguration",
                webhook_config,
                "-o",
                "jsonpath={.metadata.name}",
            ],
            webhook_config,
        );
        assert!(
            registered.is_ok(),
            "the operator never registered {webhook_config} in 60 s:\n{}",
            operator.process.output()
        );
        let ready = (0..120).any(|_| {
            let ok = operator
                .http_get("/readyz")
                .is_some_and(|r| r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200"));
            if !ok {
                std::thread::sleep(Duration::from_millis(500));
            }
            ok
        });
        assert!(
            ready,
            "the operator never became ready:\n{}",
            operator.process.output()
        );
        operator
    }

    /// The ValidatingWebhookConfiguration it registered.
    pub fn webhook_config(&self) -> &str {
        &self.webhook_config
    }

    /// The reply to a plain HTTP GET on the metrics address, headers included.
    pub fn http_get(&self, path: &str) -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        Some(reply)
    }

    /// The value of one metric line (`name{labels}`), or `None` when it is not exported.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let text = self.http_get("/metrics")?;
        text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Stops it (SIGTERM) and starts it again with the same arguments and ports.
    pub fn restart(self, cp: &ControlPlane, name: &str) -> Operator {
        assert!(
            self.process.stop(Duration::from_secs(10)),
            "the operator did not stop on SIGTERM"
        );
        Operator::launch(cp, name, self.args, self.metrics_port, &self.webhook_config)
    }

    /// Stops it and removes its webhook configuration, so that no webhook is left without
    /// a backend for the other tests.
    pub fn stop_and_unregister(self, cp: &ControlPlane) {
        assert!(
            self.process.stop(Duration::from_secs(10)),
            "the operator did not stop on SIGTERM:\n{}",
            self.process.output()
        );
        cp.kubectl(&[
            "delete",
            "validatingwebhookconfiguration",
            &self.webhook_config,
            "--ignore-not-found",
        ])
        .ok();
    }
}

#[test]
fn the_operator_admits_the_cloud_denies_bad_objects_and_writes_status() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let operator = Operator::start(
        cp,
        "kubeplace-run",
        &["--leader-elect=false", "--headroom-interval=2"],
    );
    // The example cloud is admitted into a fresh cluster, its namespaces with it (the
    // example creates them); the permissive flavor prints kubectl's Warning line.
    let applied = cp.kubectl(&["apply", "-f", "examples/cloud/"]);
    let out = applied.ok();
    for ns in ["shop", "security", "research"] {
        assert!(out.contains(&format!("namespace/{ns} created")), "{out}");
    }
    assert!(
        applied
            .stderr
            .contains("Warning: spec.extraSpecs[\"lab:gpu_partition\"]"),
        "no warning for the permissive flavor:\n{}",
        applied.stderr
    );
    // A rejected example is denied by kubeplace's webhook with its message.
    let denied = cp.kubectl(&[
        "apply",
        "-f",
        "examples/rejected/flavor-bad-trait-value.yaml",
    ]);
    let text = denied.fails().to_string() + &denied.stderr;
    assert!(
        text.contains("admission webhook \"flavors.kubeplace.io\" denied the request"),
        "{text}"
    );
    assert!(
        text.contains("\"preferred\" is not an accepted value"),
        "{text}"
    );
    // A server-side dry run is denied the same way but leaves no Event (sideEffects: None);
    // checked below, once the real denials' Events have appeared.
    let dry = cp.kubectl_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        &std::fs::read_to_string(
            std::path::Path::new(ROOT).join("examples/rejected/flavor-bad-trait-value.yaml"),
        )
        .unwrap()
        .replace("c1.preferred-avx", "e2e.dry-run-denied"),
    );
    let text = dry.fails().to_string();
    assert!(
        text.contains("admission webhook \"flavors.kubeplace.io\" denied the request"),
        "{text}"
    );
    // Every rejected example is refused through kubectl: by kubeplace's webhook, or by the
    // API server's own schema and CEL rules before the webhook is asked.
    let mut by_webhook = 0;
    for entry in std::fs::read_dir(std::path::Path::new(ROOT).join("examples/rejected")).unwrap() {
        let path = entry.unwrap().path();
        let out = cp.kubectl(&["apply", "-f", path.to_str().unwrap()]);
        let text = out.fails().to_string() + &out.stderr;
        assert!(
            !text.trim().is_empty(),
            "{path:?} was refused without a message"
        );
        // As `kubeplace apply` says offline, in the API server's words.
        if path.ends_with("flavor-unknown-field.yaml") {
            assert!(
                text.contains("strict decoding error: unknown field \"spec.diskGB\""),
                "{path:?}: {text}"
            );
        }
        if path.ends_with("server-missing-namespace.yaml") {
            assert!(
                text.contains("namespaces \"staging\" not found"),
                "{path:?}: {text}"
            );
        }
        if text.contains("denied the request") {
            by_webhook += 1;
            assert!(
                text.contains(".kubeplace.io\" denied the request: "),
                "{path:?}: {text}"
            );
        }
    }
    assert!(
        by_webhook >= 12,
        "only {by_webhook} rejections came from kubeplace's webhook"
    );
    // kubectl's escape hatch, as `kubeplace apply --validate=false` has it: the API server
    // drops the unknown field before admission, and the Flavor is stored without it.
    let lax = cp.kubectl(&[
        "apply",
        "--validate=false",
        "-f",
        "examples/rejected/flavor-unknown-field.yaml",
    ]);
    assert!(
        lax.ok()
            .contains("flavor.kubeplace.io/m1.typo-field created")
    );
    let spec = cp.kubectl(&["get", "flavor", "m1.typo-field", "-o", "jsonpath={.spec}"]);
    assert!(!spec.ok().contains("diskGB"), "{}", spec.stdout);
    cp.kubectl(&["delete", "flavor", "m1.typo-field"]).ok();
    // The rejection is also a Warning Event on the object.
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
        let found = out.success && out.stdout.contains("c1.preferred-avx");
        if !found {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        found
    });
    assert!(evented, "no Rejected event for c1.preferred-avx");
    let rejected = cp.kubectl(&[
        "get",
        "events",
        "-A",
        "--field-selector",
        "reason=Rejected",
        "-o",
        "jsonpath={.items[*].involvedObject.name}",
    ]);
    assert!(
        !rejected.ok().contains("e2e.dry-run-denied"),
        "a dry run left an Event: {}",
        rejected.stdout
    );
    // Status converges to what `kubeplace apply` computes offline.
    eventually_flavor(cp, "c1.avx2", ".status.candidateCount", "4");
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            "cn1-numa1-pf0",
            "-o",
            "jsonpath={.status.root}",
        ],
        "cn1",
    );
    // The leader places servers: each gets an Allocation and a host; the huge one waits.
    eventually(
        cp,
        &[
            "get",
            "server",
            "vault-1",
            "-n",
            "security",
            "-o",
            "jsonpath={.status.host}",
        ],
        "cn1",
    );
    eventually(
        cp,
        &[
            "get",
            "allocation",
            "server.security.vault-1",
            "-o",
            "jsonpath={.spec.allocations[0].provider}",
        ],
        "cn1",
    );
    eventually(
        cp,
        &[
            "get",
            "server",
            "batch-1",
            "-n",
            "research",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ],
        "NoValidHost",
    );
    // Headroom is counted in the background and converges to what `kubeplace apply`
    // counts offline: c1.avx2 fits only on cn1, beside vault-1.
    let offline = offline_headroom("c1.avx2");
    assert!(offline > 0, "c1.avx2 has room offline");
    eventually_flavor(
        cp,
        "c1.avx2",
        ".status.headroom.servers",
        &offline.to_string(),
    );
    eventually_flavor(cp, "x1.huge", ".status.headroom.servers", "0");
    // The rounds that counted them show in the metrics.
    assert!(
        operator
            .metric("kubeplace_headroom_rounds_total")
            .is_some_and(|n| n >= 1.0),
        "no headroom round counted in the metrics"
    );
    assert!(
        operator
            .metric("kubeplace_headroom_counting")
            .is_some_and(|n| n == 0.0 || n == 1.0)
    );
    let table = cp.kubectl(&["get", "flavors"]);
    assert!(table.ok().contains("c1.avx2"), "{}", table.stdout);
    assert!(table.stdout.contains("HEADROOM"), "{}", table.stdout);
    // Adding a provider with the forbidden trait changes nothing; a plain one adds candidates.
    let gold = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn9\nspec:\n  inventories:\n    VCPU: {total: 64}\n    MEMORY_MB: {total: 65536}\n    DISK_GB: {total: 1000}\n  traits: [COMPUTE_NODE, HW_CPU_X86_AVX2, CUSTOM_GOLD]\n";
    cp.kubectl_stdin(&["apply", "-f", "-"], gold).ok();
    std::thread::sleep(std::time::Duration::from_secs(2));
    eventually_flavor(cp, "c1.avx2", ".status.candidateCount", "4");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &gold.replace("cn9", "cn8").replace(", CUSTOM_GOLD", ""),
    )
    .ok();
    eventually_flavor(cp, "c1.avx2", ".status.candidateCount", "5");
    cp.kubectl(&["delete", "resourceprovider", "cn8"]).ok();
    eventually_flavor(cp, "c1.avx2", ".status.candidateCount", "4");
    // A restart changes no status: what was computed is computed again, nothing is lost.
    let statuses = |cp: &ControlPlane| {
        let out = cp.kubectl(&["get", "flavors,images,resourceproviders,providerconfigs", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.candidateCount}/{.status.conditions[*].reason}/{.status.usages}{\"\\n\"}{end}"]);
        out.ok().to_string()
    };
    let before = statuses(cp);
    let operator = operator.restart(cp, "kubeplace-run-2");
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(statuses(cp), before, "statuses changed across a restart");
    // Leave the cluster as the other tests expect it: no webhook without a backend.
    operator.stop_and_unregister(cp);
}

//! Packaging on the real control plane: `helm template` renders nothing random, the
//! operator makes and shares its webhook certificate in a Secret, and SIGTERM drains.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::support::{self, ControlPlane, exclusive_lock};
use super::{Operator, crds_installed};

/// A Secret's data, decoded.
pub fn secret(cp: &ControlPlane, namespace: &str, name: &str) -> BTreeMap<String, String> {
    let out = cp.kubectl(&["get", "secret", name, "-n", namespace, "-o", "json"]);
    let secret: Secret = serde_json::from_str(out.ok()).expect("a Secret");
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).expect("PEM text")))
        .collect()
}

/// The caBundles of a webhook configuration's webhooks, decoded.
fn ca_bundles(cp: &ControlPlane, config: &str) -> Vec<String> {
    let out = cp.kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        config,
        "-o",
        "json",
    ]);
    let config: ValidatingWebhookConfiguration = serde_json::from_str(out.ok()).unwrap();
    config
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| String::from_utf8(w.client_config.ca_bundle.unwrap_or_default().0).unwrap())
        .collect()
}

/// Waits (30 s at most) until every webhook of `config` trusts `ca_pem`.
pub fn eventually_ca_bundle(cp: &ControlPlane, config: &str, ca_pem: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let bundles = ca_bundles(cp, config);
        if !bundles.is_empty() && bundles.iter().all(|b| b == ca_pem) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the caBundles of {config} never became the Secret's ca.crt: {bundles:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The certificate the server at 127.0.0.1:`port` serves, after checking it against
/// `ca_pem` for the name 127.0.0.1.
fn served_certificate(port: u16, ca_pem: &str) -> Result<Vec<u8>, String> {
    served_certificate_for(port, ca_pem, "127.0.0.1")
}

/// The certificate the server at 127.0.0.1:`port` serves to a client that calls it `name`
/// (sent as SNI), after checking it against `ca_pem` for that name.
pub fn served_certificate_for(port: u16, ca_pem: &str, name: &str) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).ok();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| e.to_string())?;
    }
    Ok(conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default())
}

/// The DER of the first certificate of a PEM text.
fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[test]
fn helm_template_renders_the_same_every_time_and_no_secret() {
    let cp = support::cluster();
    for set in ["certManager.enabled=false", "certManager.enabled=true"] {
        let render = || {
            cp.helm(&["template", "kubeplace", "charts/kubeplace", "--set", set])
                .ok()
                .to_string()
        };
        let (first, second) = (render(), render());
        assert!(first == second, "two renders differ ({set})");
        assert!(
            !first.contains("caBundle:"),
            "a caBundle is rendered ({set})"
        );
        assert!(
            !first.contains("kind: Secret"),
            "a Secret is rendered ({set})"
        );
        assert!(!first.contains("PRIVATE KEY"), "a key is rendered ({set})");
    }
}

const BAD_FLAVOR: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  \
                          name: e2e-chart-typo\nspec:\n  vcpus: 1\n  memoryMb: 512\n  \
                          extraSpecs:\n    hw:cpu_polcy: dedicated\n";

/// `kubectl apply` of a Flavor the webhook refuses: proves the API server reached the
/// webhook over TLS it trusted.
fn webhook_refuses_a_bad_flavor(cp: &ControlPlane) {
    let refused = cp.kubectl_stdin(&["apply", "-f", "-"], BAD_FLAVOR);
    assert!(
        refused.fails().contains("denied the request"),
        "{}",
        refused.stderr
    );
}

/// Registers the ValidatingWebhookConfiguration `name` for flavors at
/// https://127.0.0.1:`port` (by URL: no Service has endpoints here), with no caBundle:
/// the operator's `--tls-secret` sets it. Flavors only, so that a Server applied with its
/// Flavor in one stream cannot reach the webhook before the watch has the Flavor.
pub fn flavor_webhook_without_ca(cp: &ControlPlane, name: &str, port: u16) {
    let mut config = kubeplace::webhook::config::webhook_configuration(
        name,
        &kubeplace::webhook::config::base_url("127.0.0.1", port),
        "",
    );
    let hooks = config.webhooks.get_or_insert_with(Vec::new);
    hooks.retain(|w| w.name == "flavors.kubeplace.io");
    for hook in hooks.iter_mut() {
        hook.client_config.ca_bundle = None;
    }
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &serde_json::to_string(&config).unwrap(),
    )
    .ok();
}

#[test]
fn replicas_make_one_certificate_in_the_secret_and_follow_its_renewal() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let (config_name, secret_name) = ("e2e-tls-secret", "e2e-webhook-tls");
    let ports: Vec<(u16, u16)> = (0..2)
        .map(|_| (support::free_port(), support::free_port()))
        .collect();
    flavor_webhook_without_ca(cp, config_name, ports[0].0);
    // Two replicas start at the same moment; both find no Secret.
    let operators: Vec<Operator> = std::thread::scope(|s| {
        let started: Vec<_> = ports
            .iter()
            .enumerate()
            .map(|(i, (webhook, metrics))| {
                let args: Vec<String> = vec![
                    "run".into(),
                    format!("--kubeconfig={}", cp.kubeconfig.display()),
                    format!("--tls-secret={secret_name}"),
                    "--webhook-host=127.0.0.1".into(),
                    format!("--webhook-config-name={config_name}"),
                    format!("--webhook-addr=127.0.0.1:{webhook}"),
                    format!("--metrics-addr=127.0.0.1:{metrics}"),
                    "--namespace=default".into(),
                    "--leader-elect=false".into(),
                ];
                let metrics = *metrics;
                s.spawn(move || {
                    Operator::launch(
                        cp,
                        &format!("kubeplace-tls-{i}"),
                        args,
                        metrics,
                        config_name,
                    )
                })
            })
            .collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let logs = || -> String { operators.iter().map(|o| o.process.output()).collect() };
    let made = logs()
        .matches("created the webhook's CA and serving certificate")
        .count();
    assert_eq!(
        made,
        1,
        "not exactly one replica created the Secret:\n{}",
        logs()
    );

    // Both serve the Secret's certificate, and the webhook trusts its CA.
    let first = secret(cp, "default", secret_name);
    for (webhook, _) in &ports {
        assert_eq!(
            served_certificate(*webhook, &first["ca.crt"]).unwrap(),
            der(&first["tls.crt"]),
            "a replica serves another certificate"
        );
    }
    eventually_ca_bundle(cp, config_name, &first["ca.crt"]);
    webhook_refuses_a_bad_flavor(cp);
    // `kubeplace probe`, what `helm test` runs, checks the webhook against the Secret's CA.
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &first["ca.crt"]).unwrap();
    let probe = |ca: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .arg("probe")
            .arg(format!("--ca-file={}", ca.display()))
            .arg(format!("https://127.0.0.1:{}/healthz", ports[1].0))
            .arg(format!("http://127.0.0.1:{}/readyz", ports[1].1))
            .output()
            .unwrap()
    };
    let out = probe(&ca_file);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(said.matches(": 200 OK").count(), 2, "{said}");
    let stranger = dir.path().join("other-ca.crt");
    std::fs::write(
        &stranger,
        kubeplace::serving::certs::self_signed("127.0.0.1")
            .unwrap()
            .ca_pem,
    )
    .unwrap();
    let out = probe(&stranger);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("TLS failed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A lost or broken Secret is made again by one replica, and both serve the new
    // certificate, with no restart, once they have read it (every 10 s).
    cp.kubectl(&["delete", "secret", secret_name, "-n", "default"])
        .ok();
    let deadline = Instant::now() + Duration::from_secs(40);
    let second = loop {
        let out = cp.kubectl(&["get", "secret", secret_name, "-n", "default"]);
        if out.success {
            let now = secret(cp, "default", secret_name);
            let served: Vec<_> = ports
                .iter()
                .map(|(w, _)| served_certificate(*w, &now["ca.crt"]).ok())
                .collect();
            if served
                .iter()
                .all(|s| s.as_deref() == Some(&der(&now["tls.crt"])[..]))
            {
                break now;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the replicas never served a new Secret's certificate:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_ne!(second["ca.crt"], first["ca.crt"]);
    eventually_ca_bundle(cp, config_name, &second["ca.crt"]);
    webhook_refuses_a_bad_flavor(cp);

    for operator in operators {
        operator.stop_and_unregister(cp);
    }
    cp.kubectl(&["delete", "secret", secret_name, "-n", "default"])
        .ok();
}

#[test]
fn sigterm_makes_the_operator_unready_while_it_still_admits_then_it_exits() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let drain = Duration::from_secs(8);
    let placement_port = support::free_port();
    let placement = format!("--placement-addr=127.0.0.1:{placement_port}");
    let operator = Operator::start_named(
        cp,
        "kubeplace-drain",
        "e2e-drain",
        &["--leader-elect=false", "--drain-seconds=8", &placement],
    );
    // The Placement API's version document, which needs no token.
    let placement_status = || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", placement_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        reply.split(' ').nth(1).map(str::to_string)
    };
    let serving = (0..60).any(|_| {
        let up = placement_status().as_deref() == Some("200");
        if !up {
            std::thread::sleep(Duration::from_millis(250));
        }
        up
    });
    assert!(serving, "the Placement API never answered");
    let status = |o: &Operator| {
        o.http_get("/readyz")
            .and_then(|r| r.split(' ').nth(1).map(str::to_string))
    };
    assert_eq!(status(&operator).as_deref(), Some("200"));
    let term = Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &operator.process.pid.to_string()])
        .status()
        .unwrap();
    // Not ready at once (the kubelet's probe takes it out of the Service's endpoints)…
    let unready = (0..20).any(|_| {
        let s = status(&operator);
        if s.as_deref() != Some("503") {
            std::thread::sleep(Duration::from_millis(50));
        }
        s.as_deref() == Some("503")
    });
    assert!(unready, "/readyz did not fail after SIGTERM");
    assert!(term.elapsed() < Duration::from_secs(2));
    // …while the webhook still answers what reaches it during the drain.
    webhook_refuses_a_bad_flavor(cp);
    let good = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e-drain-ok\n\
         spec:\n  vcpus: 1\n  memoryMb: 512\n",
    );
    good.ok();
    assert_eq!(
        placement_status().as_deref(),
        Some("200"),
        "the Placement API stopped answering during the drain"
    );
    assert!(
        term.elapsed() < drain,
        "the admissions took the whole drain"
    );
    assert!(
        operator.process.running(),
        "it stopped before the drain ended"
    );
    // Then it stops on its own, once the drain is over.
    while operator.process.running() && term.elapsed() < drain + Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let stopped = term.elapsed();
    assert!(
        !operator.process.running(),
        "still running {stopped:?} after SIGTERM"
    );
    assert!(
        stopped >= drain,
        "stopped after {stopped:?}, before the drain"
    );
    assert_eq!(placement_status(), None, "the Placement API still answers");
    cp.kubectl(&["delete", "flavor", "e2e-drain-ok", "--ignore-not-found"])
        .ok();
    operator.stop_and_unregister(cp);
}

/// The CustomResourceDefinitions of a YAML stream.
fn crd_documents(yaml: &str) -> Vec<serde_json::Value> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
    docs.into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect()
}

#[test]
fn the_chart_renders_the_crds_of_the_crds_folder_kept_on_uninstall() {
    let cp = support::cluster();
    let want = crd_documents(
        &std::fs::read_to_string(format!("{}/crds/kubeplace.yaml", super::ROOT)).unwrap(),
    );
    assert_eq!(want.len(), super::CRDS.len());
    let rendered = cp.helm(&["template", "kubeplace", "charts/kubeplace"]);
    let mut got = crd_documents(rendered.ok());
    for crd in &mut got {
        let annotations = crd["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations")
            .unwrap_or_default();
        assert_eq!(
            annotations,
            serde_json::json!({"helm.sh/resource-policy": "keep"}),
            "{}",
            crd["metadata"]["name"]
        );
    }
    assert_eq!(got, want, "the chart's CRDs are not crds/kubeplace.yaml");
    let unkept = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--set",
        "crds.keep=false",
    ]);
    assert_eq!(crd_documents(unkept.ok()), want);
    let none = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--set",
        "crds.enabled=false",
    ]);
    assert!(crd_documents(none.ok()).is_empty());
}

#[test]
fn helm_test_probes_the_release_through_its_services() {
    let _objects = super::objects_lock();
    let cp = crds_installed();
    let rendered = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--namespace",
        "e2e-helm-test",
        "--show-only",
        "templates/tests/probe.yaml",
    ]);
    let pod: serde_json::Value = serde_saphyr::from_str(rendered.ok()).unwrap();
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "kubeplace:0.1.0", "the release's image");
    assert_eq!(
        container["args"],
        serde_json::json!([
            "probe",
            "--ca-file=/tls/ca.crt",
            "http://kubeplace-metrics.e2e-helm-test.svc:8080/readyz",
            "https://kubeplace-webhook.e2e-helm-test.svc/healthz",
            "https://kubeplace-placement.e2e-helm-test.svc:8778/"
        ])
    );
    assert_eq!(
        pod["spec"]["volumes"][0]["secret"]["secretName"],
        "kubeplace-webhook-tls"
    );
    // Every argument parses: `kubeplace probe` refuses bad input with exit 2 before it
    // connects anywhere, and these fail only to connect (exit 1).
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| !a.starts_with("--ca-file"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(
        &ca,
        kubeplace::serving::certs::self_signed("x").unwrap().ca_pem,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(&args)
        .arg(format!("--ca-file={}", ca.display()))
        .arg("--timeout-seconds=2")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The API server accepts the Pod.
    // (No controller-manager runs here to make the namespace's default ServiceAccount.)
    cp.kubectl(&["create", "namespace", "e2e-helm-test"]);
    cp.kubectl(&["create", "serviceaccount", "default", "-n", "e2e-helm-test"]);
    let applied = cp.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], rendered.ok());
    assert!(
        applied
            .ok()
            .contains("pod/kubeplace-test created (server dry run)")
    );
}

pub const NEW_FIELD: &str = "e2eUpgradedField";

/// A copy of the chart in `dir` whose Flavor CRD has the spec field [`NEW_FIELD`].
pub fn chart_with_a_new_field(dir: &std::path::Path) -> std::path::PathBuf {
    let chart = dir.join("kubeplace");
    let copied = std::process::Command::new("cp")
        .args(["-r", &format!("{}/charts/kubeplace", super::ROOT)])
        .arg(&chart)
        .status()
        .unwrap();
    assert!(copied.success());
    let path = chart.join("files/crds.yaml");
    let mut docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let flavor = docs
        .iter_mut()
        .find(|d| d["metadata"]["name"] == "flavors.kubeplace.io")
        .unwrap();
    flavor["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .as_object_mut()
        .unwrap()
        .insert(
            NEW_FIELD.into(),
            serde_json::json!({"type": "string", "description": "A field the upgraded chart adds."}),
        );
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap()))
        .collect();
    std::fs::write(&path, text).unwrap();
    chart
}

#[test]
fn helm_upgrade_upgrades_the_crds() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let (release, ns) = ("kubeplace-crds", "kubeplace-crds");
    // No pod runs here: the webhook is set to Ignore so that objects can be tried.
    let common = [
        "--namespace",
        ns,
        "--set",
        "webhook.failurePolicy=Ignore",
        "--set",
        "replicaCount=1",
    ];
    let mut install = vec![
        "install",
        release,
        "charts/kubeplace",
        "--create-namespace",
        "--take-ownership",
    ];
    install.extend(common);
    assert!(cp.helm(&install).ok().contains("STATUS: deployed"));
    let flavor = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e-upgraded\n\
         spec:\n  vcpus: 1\n  memoryMb: 512\n  {NEW_FIELD}: x\n"
    );
    let try_flavor = || {
        cp.kubectl_stdin(
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            &flavor,
        )
    };
    // Before the upgrade the API server does not know the field.
    assert!(
        try_flavor()
            .fails()
            .contains(&format!("unknown field \"spec.{NEW_FIELD}\""))
    );

    let dir = tempfile::tempdir().unwrap();
    let chart = chart_with_a_new_field(dir.path());
    // The CRDs were applied with kubectl before this release took them over: kubectl's
    // field manager still owns their fields, so the first upgrade forces Helm's.
    let mut upgrade = vec![
        "upgrade",
        release,
        chart.to_str().unwrap(),
        "--force-conflicts",
    ];
    upgrade.extend(common);
    assert!(cp.helm(&upgrade).ok().contains("STATUS: deployed"));
    // The API server serves the new schema a moment after the CRD changes.
    let served = (0..60).any(|_| {
        let explained = cp.kubectl(&["explain", &format!("flavor.spec.{NEW_FIELD}")]);
        let accepted = try_flavor();
        let yes = explained
            .stdout
            .contains("A field the upgraded chart adds.")
            && accepted.stdout.contains("created (server dry run)");
        if !yes {
            std::thread::sleep(Duration::from_millis(500));
        }
        yes
    });
    assert!(
        served,
        "the upgraded CRD's field is not served: {:?}",
        try_flavor().stderr
    );
    // Uninstalling leaves the CRDs (and so every object) in place.
    cp.helm(&["uninstall", release, "--namespace", ns]).ok();
    for crd in super::CRDS {
        cp.kubectl(&["get", "crd", crd]).ok();
    }
    // The other tests expect the CRDs of crds/.
    cp.kubectl(&["replace", "-f", "crds/"]).ok();
    cp.kubectl(&["delete", "namespace", ns, "--wait=false"])
        .ok();
}

#[test]
fn helm_upgrade_keeps_the_ca_bundle_the_operator_set() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let (release, ns) = ("kubeplace-ca", "kubeplace-ca");
    // No pod runs here (Ignore: nothing is refused meanwhile); the CRDs stay kubectl's.
    let values = [
        "--namespace",
        ns,
        "--set",
        "webhook.failurePolicy=Ignore",
        "--set",
        "crds.enabled=false",
    ];
    let mut install = vec!["install", release, "charts/kubeplace", "--create-namespace"];
    install.extend(values);
    assert!(cp.helm(&install).ok().contains("STATUS: deployed"));
    // The operator, run as the chart runs it, for this release.
    let (webhook, metrics) = (support::free_port(), support::free_port());
    let args: Vec<String> = vec![
        "run".into(),
        format!("--kubeconfig={}", cp.kubeconfig.display()),
        format!("--tls-secret={release}-webhook-tls"),
        format!("--webhook-service={release}-webhook"),
        format!("--webhook-config-name={release}"),
        format!("--namespace={ns}"),
        format!("--webhook-addr=127.0.0.1:{webhook}"),
        format!("--metrics-addr=127.0.0.1:{metrics}"),
        "--leader-elect=false".into(),
    ];
    let operator = Operator::launch(cp, "kubeplace-ca", args, metrics, release);
    let made = secret(cp, ns, &format!("{release}-webhook-tls"));
    eventually_ca_bundle(cp, release, &made["ca.crt"]);
    assert!(operator.process.stop(Duration::from_secs(10)));
    // An upgrade (the chart renders no caBundle) leaves the one the operator set: with the
    // operator stopped, nothing could set it again.
    let mut upgrade = vec![
        "upgrade",
        release,
        "charts/kubeplace",
        "--set",
        "logFormat=text",
    ];
    upgrade.extend(values);
    assert!(cp.helm(&upgrade).ok().contains("STATUS: deployed"));
    let bundles = ca_bundles(cp, release);
    assert!(
        !bundles.is_empty() && bundles.iter().all(|b| *b == made["ca.crt"]),
        "the upgrade changed the caBundles: {bundles:?}"
    );
    cp.helm(&["uninstall", release, "--namespace", ns]).ok();
    cp.kubectl(&["delete", "namespace", ns, "--wait=false"])
        .ok();
}

/// The documents of `kind` in `helm template kubeplace charts/kubeplace ARGS…`.
fn rendered_of_kind(cp: &ControlPlane, args: &[&str], kind: &str) -> Vec<serde_json::Value> {
    let mut command = vec!["template", "kubeplace", "charts/kubeplace"];
    command.extend_from_slice(args);
    let rendered = cp.helm(&command);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(rendered.ok()).expect("YAML");
    docs.into_iter().filter(|d| d["kind"] == kind).collect()
}

/// The chart's NetworkPolicy lets in each port from its own peers and nothing else: the
/// webhook from `networkPolicy.webhook.from` (kube-apiserver; any source by default) and from
/// the other replicas (claims passed to the leader), metrics from Prometheus' pods and the
/// Placement API from pods labelled as its clients by default (and from the release's test
/// pod), each from the peers given instead; `[]` opens a port to any source.
#[test]
fn the_network_policy_lets_in_each_port_from_its_own_peers() {
    use serde_json::json;
    let cp = support::cluster();
    let replicas = json!([{"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "kubeplace", "app.kubernetes.io/instance": "kubeplace"}}}]);
    let rule = |port: u16, from: Option<serde_json::Value>| {
        let mut rule = json!({"ports": [{"port": port, "protocol": "TCP"}]});
        if let Some(from) = from {
            rule["from"] = from;
        }
        rule
    };
    let test_pod = json!([{"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "kubeplace", "app.kubernetes.io/instance": "kubeplace",
        "app.kubernetes.io/component": "test"}}}]);
    // On by default: the webhook from any source, metrics from Prometheus, Placement from
    // its labelled clients.
    let prometheus = json!([{"namespaceSelector": {},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]);
    let clients = json!([{"namespaceSelector": {},
        "podSelector": {"matchLabels": {"kubeplace.io/placement-client": "true"}}}]);
    let policies = rendered_of_kind(cp, &[], "NetworkPolicy");
    assert_eq!(policies.len(), 1, "{policies:?}");
    let spec = &policies[0]["spec"];
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    assert_eq!(spec["podSelector"], replicas[0]["podSelector"]);
    assert_eq!(
        spec["ingress"],
        json!([
            rule(8443, None),
            rule(8443, Some(replicas.clone())),
            rule(8080, Some(prometheus)),
            rule(8080, Some(test_pod.clone())),
            rule(8778, Some(clients)),
            rule(8778, Some(test_pod.clone()))
        ])
    );
    // `[]` opens a port to any source.
    let open = rendered_of_kind(
        cp,
        &[
            "--set-json",
            "networkPolicy.metrics.from=[]",
            "--set-json",
            "networkPolicy.placement.from=[]",
        ],
        "NetworkPolicy",
    );
    assert_eq!(
        open[0]["spec"]["ingress"],
        json!([
            rule(8443, None),
            rule(8443, Some(replicas.clone())),
            rule(8080, None),
            rule(8778, None)
        ])
    );

    // Peers given per port, on other ports.
    let api_server =
        json!([{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}]);
    let monitoring = json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]);
    let nova = json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openstack"}},
                       "podSelector": {"matchLabels": {"app": "nova"}}}]);
    let sets = [
        format!("networkPolicy.webhook.from={api_server}"),
        format!("networkPolicy.metrics.from={monitoring}"),
        format!("networkPolicy.placement.from={nova}"),
    ];
    let mut args = vec![
        "--set",
        "webhook.port=9443",
        "--set",
        "metrics.port=9090",
        "--set",
        "placement.port=9778",
    ];
    for set in &sets {
        args.extend(["--set-json", set.as_str()]);
    }
    let policies = rendered_of_kind(cp, &args, "NetworkPolicy");
    assert_eq!(
        policies[0]["spec"]["ingress"],
        json!([
            rule(9443, Some(api_server)),
            rule(9443, Some(replicas.clone())),
            rule(9090, Some(monitoring)),
            rule(9090, Some(test_pod.clone())),
            rule(9778, Some(nova)),
            rule(9778, Some(test_pod.clone()))
        ])
    );
    // The API server takes it as rendered.
    let applied = cp.kubectl_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        &policies[0].to_string(),
    );
    assert!(
        applied
            .ok()
            .contains("networkpolicy.networking.k8s.io/kubeplace created (server dry run)"),
        "{}",
        applied.stdout
    );
    // The ports are the pod's.
    let deployment = &rendered_of_kind(cp, &args, "Deployment")[0];
    let ports: Vec<i64> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [9443, 9090, 9778]);

    // No Placement API, no rule for it; disabled, no policy.
    let policies = rendered_of_kind(cp, &["--set", "placement.enabled=false"], "NetworkPolicy");
    assert_eq!(policies[0]["spec"]["ingress"].as_array().unwrap().len(), 4);
    assert!(
        rendered_of_kind(
            cp,
            &["--set", "networkPolicy.enabled=false"],
            "NetworkPolicy"
        )
        .is_empty()
    );
    // A peer that is not one is refused by the values' schema.
    let bad = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--set-json",
        r#"networkPolicy.webhook.from=[{"cidr":"192.0.2.10/32"}]"#,
    ]);
    let said = bad.fails();
    assert!(said.contains("networkPolicy"), "{said}");
}

/// `webhook.clientCA` puts the CA where `kubeplace run --webhook-client-ca` reads it, from a
/// ConfigMap the chart makes (pem) or one that exists (configMap); `helm test` then leaves
/// out the webhook, whose handshake it could not pass.
#[test]
fn the_webhook_client_ca_reaches_kubeplace_run() {
    let cp = support::cluster();
    let ca = kubeplace::serving::certs::self_signed("x").unwrap().ca_pem;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("apiserver-client-ca.crt");
    std::fs::write(&ca_file, &ca).unwrap();
    let pem = format!("webhook.clientCA.pem={}", ca_file.display());
    let pem = ["--set-file", pem.as_str()];
    let container = |deployment: &serde_json::Value| {
        deployment["spec"]["template"]["spec"]["containers"][0].clone()
    };
    let args_of = |deployment: &serde_json::Value| -> Vec<String> {
        container(deployment)["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    for (set, config_map) in [
        (pem, "kubeplace-webhook-client-ca"),
        (
            ["--set", "webhook.clientCA.configMap=apiserver-ca"],
            "apiserver-ca",
        ),
    ] {
        let deployment = &rendered_of_kind(cp, &set, "Deployment")[0];
        assert!(
            args_of(deployment).contains(&"--webhook-client-ca=/webhook-client-ca/ca.crt".into()),
            "{:?}",
            args_of(deployment)
        );
        let volumes = &deployment["spec"]["template"]["spec"]["volumes"];
        assert_eq!(
            volumes,
            &serde_json::json!([{"name": "webhook-client-ca", "configMap": {
                "name": config_map, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}])
        );
        assert_eq!(
            container(deployment)["volumeMounts"],
            serde_json::json!([{"name": "webhook-client-ca",
                                "mountPath": "/webhook-client-ca", "readOnly": true}])
        );
        let probe = &rendered_of_kind(cp, &set, "Pod")[0];
        // The webhook's handshake needs the API server's certificate: helm test leaves it
        // out, and still probes the Placement API over TLS.
        let probed = probe["spec"]["containers"][0]["args"].to_string();
        assert!(!probed.contains("kubeplace-webhook"), "{probed}");
        assert!(
            probed.contains("https://kubeplace-placement.default.svc:8778/"),
            "{probed}"
        );
    }
    let maps = rendered_of_kind(cp, &pem, "ConfigMap");
    assert_eq!(maps.len(), 1);
    let mounted = maps[0]["data"]["ca.crt"].as_str().unwrap();
    assert_eq!(mounted.trim(), ca.trim());
    // What is mounted is a bundle kubeplace run reads.
    kubeplace::serving::client_auth::ca_certificates(mounted).unwrap();
    // Without it, no flag, no volume, and helm test probes the webhook.
    let deployment = &rendered_of_kind(cp, &[], "Deployment")[0];
    assert!(!args_of(deployment).iter().any(|a| a.contains("client-ca")));
    assert!(rendered_of_kind(cp, &[], "ConfigMap").is_empty());
    // cert-manager's certificate is a client certificate too (replicas present it).
    let certificate =
        &rendered_of_kind(cp, &["--set", "certManager.enabled=true"], "Certificate")[0];
    let usages = certificate["spec"]["usages"].to_string();
    assert!(
        usages.contains("client auth") && usages.contains("server auth"),
        "{usages}"
    );
    // Both at once is refused, naming the values.
    let both = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        pem[0],
        pem[1],
        "--set",
        "webhook.clientCA.configMap=apiserver-ca",
    ]);
    let said = both.fails();
    assert!(
        said.contains("webhook.clientCA: give pem or configMap, not both"),
        "{said}"
    );
}

/// The operator's arguments in `helm template` with `set`.
fn operator_args(cp: &ControlPlane, set: &[&str]) -> Vec<String> {
    let mut args = vec!["--namespace", "ops"];
    for s in set {
        args.extend(["--set", s]);
    }
    let deployments = rendered_of_kind(cp, &args, "Deployment");
    deployments[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// By default the chart serves the Placement API over HTTPS with a certificate for its
/// Service's names (kubeplace's own, or cert-manager's) and takes tokens for the audience
/// kubeplace-placement only; each can be turned back, as documented, and is then plain.
#[test]
fn the_chart_serves_placement_over_tls_for_its_service_and_audience() {
    use serde_json::json;
    let cp = support::cluster();
    let services = rendered_of_kind(cp, &["--namespace", "ops"], "Service");
    let service = services
        .iter()
        .find(|s| s["spec"]["ports"][0]["name"] == "placement")
        .expect("the Placement Service");
    assert_eq!(service["metadata"]["name"], "kubeplace-placement");
    let has = |args: &[String], arg: &str| args.iter().any(|a| a == arg);
    let default = operator_args(cp, &[]);
    for arg in [
        "--placement-addr=0.0.0.0:8778",
        "--placement-tls",
        "--placement-service=kubeplace-placement",
        "--placement-token-audience=kubeplace-placement",
        "--tls-secret=kubeplace-webhook-tls",
    ] {
        assert!(has(&default, arg), "no {arg} in {default:?}");
    }
    // cert-manager makes the certificate: the Placement Service's names are in its request,
    // and the operator (which reads files) is not given them.
    let managed = operator_args(cp, &["certManager.enabled=true"]);
    assert!(has(&managed, "--placement-tls"), "{managed:?}");
    assert!(
        !managed.iter().any(|a| a.starts_with("--placement-service")),
        "{managed:?}"
    );
    let certificates = rendered_of_kind(
        cp,
        &["--namespace", "ops", "--set", "certManager.enabled=true"],
        "Certificate",
    );
    let names = &certificates[0]["spec"]["dnsNames"];
    for name in [
        "kubeplace-placement",
        "kubeplace-placement.ops",
        "kubeplace-placement.ops.svc",
        "kubeplace-placement.ops.svc.cluster.local",
        "kubeplace-webhook.ops.svc",
    ] {
        assert!(
            names.as_array().unwrap().contains(&json!(name)),
            "{name} not in {names}"
        );
    }
    // Plain HTTP and the API server's audience, when asked for: no TLS flags, no names.
    let plain = operator_args(cp, &["placement.tls=false", "placement.tokenAudience="]);
    assert!(has(&plain, "--placement-token-audience="), "{plain:?}");
    assert!(
        !plain
            .iter()
            .any(|a| a == "--placement-tls" || a.starts_with("--placement-service")),
        "{plain:?}"
    );
    let plain_certificates = rendered_of_kind(
        cp,
        &[
            "--set",
            "certManager.enabled=true",
            "--set",
            "placement.tls=false",
        ],
        "Certificate",
    );
    assert!(
        !plain_certificates[0]["spec"]["dnsNames"]
            .to_string()
            .contains("placement"),
        "{}",
        plain_certificates[0]["spec"]["dnsNames"]
    );
    // `kubeplace run` takes each set of arguments: it refuses bad input with exit 2 before
    // it looks for a cluster, and here it only finds none (exit 1).
    let home = tempfile::tempdir().unwrap();
    for args in [&default, &managed, &plain] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .args(args)
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("no kubeconfig"), "{args:?}: {stderr}");
    }
}

/// `placement.keystone.secretName` mounts the Secret's INI file and passes it to `kubeplace
/// run` as `--keystone-authtoken`; without it, or without the Placement API, nothing of it.
#[test]
fn the_keystone_secret_reaches_kubeplace_run() {
    let cp = support::cluster();
    let set = [
        "--set",
        "placement.keystone.secretName=placement-keystone",
        "--set",
        "placement.keystone.key=placement.conf",
    ];
    let deployment = &rendered_of_kind(cp, &set, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--keystone-authtoken=/keystone/placement.conf"),
        "{args:?}"
    );
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "keystone")
        .expect("the keystone mount")
        .clone();
    assert_eq!(mount["mountPath"], "/keystone");
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "keystone")
        .expect("the keystone volume")
        .clone();
    assert_eq!(volume["secret"]["secretName"], "placement-keystone");
    assert_eq!(volume["secret"]["items"][0]["key"], "placement.conf");
    // An empty key: the whole Secret, passed as a directory of *.conf files.
    let whole = [
        "--set",
        "placement.keystone.secretName=placement-keystone",
        "--set",
        "placement.keystone.key=",
    ];
    let deployment = &rendered_of_kind(cp, &whole, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    assert!(
        pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("--keystone-authtoken=/keystone/")),
        "{pod}"
    );
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "keystone")
        .expect("the keystone volume")
        .clone();
    assert_eq!(
        volume["secret"],
        serde_json::json!({"secretName": "placement-keystone"}),
        "every key mounted"
    );
    for off in [
        &[][..],
        &[
            "--set",
            "placement.keystone.secretName=placement-keystone",
            "--set",
            "placement.enabled=false",
        ][..],
    ] {
        let text = serde_json::to_string(&rendered_of_kind(cp, off, "Deployment")).unwrap();
        assert!(!text.contains("keystone"), "{off:?}: {text}");
    }
    let bad = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--set",
        "placement.keystone.secretName=Placement_Keystone",
    ]);
    let said = bad.fails();
    assert!(said.contains("secretName"), "{said}");
}

/// The chart's Keystone registration Job: helm renders it as a post-install and
/// post-upgrade hook, the API server accepts it, and its arguments, run with an admin's
/// `OS_*` (as its Secret gives them), register Placement in a real Keystone: the
/// public URL given, the internal and admin ones the Placement Service's, and the service
/// user.
#[test]
fn the_charts_registration_job_registers_placement_in_keystone() {
    use super::keystone_support::{Keystone, http};
    let cp = support::cluster();
    let rendered = cp.helm(&[
        "template",
        "kubeplace",
        "charts/kubeplace",
        "--namespace",
        "e2e-register",
        "--show-only",
        "templates/keystone-register-job.yaml",
        "--set",
        "placement.register.enabled=true",
        "--set",
        "placement.register.adminSecretName=openstack-admin",
        "--set",
        "placement.register.publicUrl=https://placement.example.com",
        "--set",
        "placement.register.serviceUserSecretName=placement-user",
    ]);
    let job: serde_json::Value = serde_saphyr::from_str(rendered.ok()).unwrap();
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "post-install,post-upgrade"
    );
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["envFrom"][0]["secretRef"]["name"],
        "openstack-admin"
    );
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert!(
        args.contains(&"--internal-url=https://kubeplace-placement.e2e-register.svc:8778".into()),
        "{args:?}"
    );

    // The arguments as the Job runs them, the password file where the test keeps it.
    let ks = Keystone::start();
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "from-the-secret\n").unwrap();
    let args: Vec<String> = args
        .into_iter()
        .map(|a| match a.strip_prefix("--service-password-file=") {
            Some(_) => format!("--service-password-file={}", password.display()),
            None => a,
        })
        .collect();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(&args)
        .env("OS_AUTH_URL", format!("{}/v3", ks.url))
        .env("OS_USERNAME", "admin")
        .env("OS_PASSWORD", &ks.admin_password)
        .env("OS_PROJECT_NAME", "admin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, _, body) = http(
        "POST",
        &format!("{}/v3/auth/tokens", ks.url),
        &[],
        Some(&serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "placement", "domain": {"name": "Default"},
                "password": "from-the-secret"}}},
            "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}}})),
    );
    assert_eq!(status, 201, "the service user logs in: {body}");
    let mut urls: Vec<(String, String)> = body["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "placement")
        .flat_map(|s| s["endpoints"].as_array().unwrap().clone())
        .map(|e| {
            (
                e["interface"].as_str().unwrap().to_string(),
                e["url"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        [
            (
                "admin".to_string(),
                "https://kubeplace-placement.e2e-register.svc:8778".to_string()
            ),
            (
                "internal".to_string(),
                "https://kubeplace-placement.e2e-register.svc:8778".to_string()
            ),
            (
                "public".to_string(),
                "https://placement.example.com".to_string()
            ),
        ]
    );

    // The API server accepts the Job.
    cp.kubectl(&["create", "namespace", "e2e-register"]);
    let applied = cp.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], rendered.ok());
    assert!(
        applied
            .ok()
            .contains("job.batch/kubeplace-keystone-register created (server dry run)"),
        "{}",
        applied.ok()
    );
}

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
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
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

#[test]
fn replicas_make_one_certificate_in_the_secret_and_follow_its_renewal() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let (config_name, secret_name) = ("e2e-tls-secret", "e2e-webhook-tls");
    let ports: Vec<(u16, u16)> = (0..2)
        .map(|_| (support::free_port(), support::free_port()))
        .collect();
    // A configuration by URL (no Service endpoints here) with no caBundle, for flavors.
    let mut config = kubeplace::webhook::config::webhook_configuration(
        config_name,
        &kubeplace::webhook::config::base_url("127.0.0.1", ports[0].0),
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
    let operator = Operator::start_named(
        cp,
        "kubeplace-drain",
        "e2e-drain",
        &["--leader-elect=false", "--drain-seconds=8"],
    );
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
    cp.kubectl(&["delete", "flavor", "e2e-drain-ok", "--ignore-not-found"])
        .ok();
    operator.stop_and_unregister(cp);
}

//! The webhook answering only the API server (`kubeplace run --webhook-client-ca`), against
//! a kube-apiserver that presents a client certificate to webhooks: objects created with
//! kubectl are reviewed as usual, the follower passes claims to the leader over mutual TLS,
//! and a client without the API server's certificate is refused at the TLS handshake, so a
//! forged review holds no capacity.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::json;

use super::support::{self, ControlPlane};
use super::{Operator, eventually, install_crds};

const CONFIG: &str = "e2e-client-auth";
const HOST: &str = "e2e-mtls-host";

/// Points every kubeplace webhook at https://127.0.0.1:`port`, trusting `ca_pem`.
fn register(cp: &ControlPlane, port: u16, ca_pem: &str) {
    let config = kubeplace::webhook::config::webhook_configuration(
        CONFIG,
        &kubeplace::webhook::config::base_url("127.0.0.1", port),
        ca_pem,
    );
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &serde_json::to_string(&config).unwrap(),
    )
    .ok();
}

/// A replica serving the shared certificate on `webhook_port`, answering only clients whose
/// certificate the API server's webhook client CA (or the replicas' CA) signed.
fn replica(
    cp: &ControlPlane,
    name: &str,
    (cert, key, ca): (&Path, &Path, &Path),
    webhook_port: u16,
) -> Operator {
    let metrics_port = support::free_port();
    let args: Vec<String> = vec![
        "run".into(),
        format!("--kubeconfig={}", cp.kubeconfig.display()),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-key-file={}", key.display()),
        format!("--ca-file={}", ca.display()),
        format!("--webhook-client-ca={}", cp.webhook_client_ca().display()),
        format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        "--namespace=default".into(),
        "--lease-name=e2e-client-auth".into(),
        format!("--claims-address=127.0.0.1:{webhook_port}"),
        "--claims-server-name=127.0.0.1".into(),
    ];
    Operator::launch(cp, name, args, metrics_port, CONFIG)
}

/// An AdmissionReview of `object` (kind `kind`, resource `plural`) being created.
fn review(kind: &str, plural: &str, object: serde_json::Value, dry_run: bool) -> String {
    let gvk = json!({"group": "kubeplace.io", "version": "v1alpha1", "kind": kind});
    let gvr = json!({"group": "kubeplace.io", "version": "v1alpha1", "resource": plural});
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "e2e-forged-1", "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr,
            "name": object["metadata"]["name"], "operation": "CREATE",
            "userInfo": {"username": "nobody"},
            "object": object, "oldObject": null, "dryRun": dry_run, "options": null,
        }
    })
    .to_string()
}

/// POSTs `body` to https://127.0.0.1:`port`/validate/`plural`, checking the server against
/// `server_ca` and presenting `client` (certificate and key files) when given; the raw
/// response, or why there is none.
fn post(
    port: u16,
    server_ca: &str,
    client: Option<(PathBuf, PathBuf)>,
    plural: &str,
    body: &str,
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(server_ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(&cert)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(&key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("handshake: {e}"))?;
    }
    // In TLS 1.3 the server judges the client's certificate once the client's side of the
    // handshake is done, and a refusal arrives before any request is sent; an accepted
    // client hears nothing until it asks.
    tls.sock
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .ok();
    match tls.read(&mut [0u8; 1]) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        Err(e) => return Err(format!("handshake: {e}")),
        Ok(n) => return Err(format!("the server spoke first ({n} bytes)")),
    }
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok();
    let request = format!(
        "POST /validate/{plural} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes())
        .and_then(|_| tls.flush())
        .map_err(|e| format!("sending: {e}"))?;
    let mut reply = Vec::new();
    let read = tls.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply).into_owned();
    match read {
        Ok(_) => Ok(reply),
        // A server that closes without close_notify still answered.
        Err(_) if reply.starts_with("HTTP/1.1 ") => Ok(reply),
        Err(e) => Err(format!("reading: {e}")),
    }
}

fn allocation(name: &str, n: usize, vcpus: i64) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\nspec:\n  consumer: 00000000-0000-4000-8000-{n:012}\n  allocations:\n  - provider: {HOST}\n    resources: {{VCPU: {vcpus}}}\n"
    )
}

#[test]
fn with_a_client_ca_the_webhook_answers_the_api_server_and_its_replicas_only() {
    let cp = ControlPlane::private_with_webhook_client_cert();
    install_crds(&cp);
    // Two replicas sharing one serving certificate, as pods of the chart do.
    let made = kubeplace::serving::certs::self_signed("127.0.0.1").unwrap();
    let (cert, key, ca) = (
        cp.dir.join("mtls-webhook.crt"),
        cp.dir.join("mtls-webhook.key"),
        cp.dir.join("mtls-ca.crt"),
    );
    std::fs::write(&cert, &made.cert_pem).unwrap();
    std::fs::write(&key, &made.key_pem).unwrap();
    std::fs::write(&ca, &made.ca_pem).unwrap();
    let ports = [support::free_port(), support::free_port()];
    register(&cp, ports[0], &made.ca_pem);
    let a = replica(&cp, "kubeplace-mtls-a", (&cert, &key, &ca), ports[0]);
    let b = replica(&cp, "kubeplace-mtls-b", (&cert, &key, &ca), ports[1]);
    let leader = super::claims::deciding_leader(&[&a, &b]);
    let (leader_port, follower_port) = (ports[leader], ports[1 - leader]);
    // Every review goes to the follower, so a claim reaches the leader only through it.
    register(&cp, follower_port, &made.ca_pem);

    // Reviewed as usual: objects through kubectl are admitted and denied.
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {HOST}\nspec:\n  inventories:\n    VCPU: {{total: 2}}\n"
        ),
    )
    .ok();
    eventually(
        &cp,
        &[
            "get",
            "resourceprovider",
            HOST,
            "-o",
            "jsonpath={.status.root}",
        ],
        HOST,
    );
    let denied = cp.kubectl(&[
        "apply",
        "-f",
        "examples/rejected/flavor-bad-trait-value.yaml",
    ]);
    let said = denied.fails().to_string();
    assert!(
        said.contains("admission webhook \"flavors.kubeplace.io\" denied the request")
            && said.contains("\"preferred\" is not an accepted value"),
        "{said}"
    );
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: e2e.mtls\n\
         spec:\n  vcpus: 1\n  memoryMb: 512\n",
    )
    .ok();

    // A review sent straight to a replica without the API server's certificate is refused
    // at the handshake: a claim of the whole provider, which would otherwise be held.
    let forged = review(
        "Allocation",
        "allocations",
        json!({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
            "metadata": {"name": "e2e-forged", "uid": "forged-uid"},
            "spec": {"consumer": "00000000-0000-4000-8000-000000009999",
                     "allocations": [{"provider": HOST, "resources": {"VCPU": 2}}]},
        }),
        false,
    );
    for port in [leader_port, follower_port] {
        let refused = post(port, &made.ca_pem, None, "allocations", &forged)
            .expect_err("answered a client without a certificate");
        assert!(
            refused.starts_with("handshake: ") && refused.contains("CertificateRequired"),
            "{refused}"
        );
    }
    // A certificate of another CA (the cluster's, which kubectl's user holds) is refused too.
    let admin = Some((cp.dir.join("admin.crt"), cp.dir.join("admin.key")));
    let refused = post(leader_port, &made.ca_pem, admin, "allocations", &forged)
        .expect_err("answered a client certificate of another CA");
    assert!(
        refused.starts_with("handshake: ") && refused.contains("alert"),
        "{refused}"
    );
    // The API server's certificate is answered (a dry run, which holds nothing).
    let flavor = review(
        "Flavor",
        "flavors",
        json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
               "metadata": {"name": "e2e.direct"}, "spec": {"vcpus": 1, "memoryMb": 512}}),
        true,
    );
    let answered = post(
        follower_port,
        &made.ca_pem,
        Some(cp.webhook_client_cert()),
        "flavors",
        &flavor,
    )
    .unwrap();
    assert!(
        answered.starts_with("HTTP/1.1 200") && answered.contains("\"allowed\":true"),
        "{answered}"
    );

    // Nothing was held: both VCPUs are claimed through kubectl, each passed by the follower
    // to the leader over mutual TLS; a third does not fit.
    for n in 0..2 {
        cp.kubectl_stdin(
            &["create", "-f", "-"],
            &allocation(&format!("e2e-mtls-{n}"), n, 1),
        )
        .ok();
    }
    let third = cp.kubectl_stdin(&["create", "-f", "-"], &allocation("e2e-mtls-2", 2, 1));
    let said = third.fails();
    assert!(said.contains("capacity"), "{said}");

    a.stop_and_unregister(&cp);
    b.process.stop(Duration::from_secs(10));
    cp.shutdown();
}

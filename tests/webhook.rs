//! The admission webhook over real HTTPS on 127.0.0.1: AdmissionReview v1 fixtures for
//! every kind (the objects of examples/cloud and examples/rejected), allowed, denied and
//! warned, and requests that cannot be read.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use kubeplace::cache::SharedStore;
use kubeplace::cli::apply::{Validate, apply_documents};
use kubeplace::metrics::Metrics;
use kubeplace::serving::{certs, http as server};
use kubeplace::webhook::{Webhook, endpoint};
use kubeplace_api::manifest::read_paths;
use kubeplace_api::{Kind, Object};
use kubeplace_policy::admission::{Operation, admit};
use kubeplace_policy::store::Store;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct TestServer {
    addr: SocketAddr,
    connector: TlsConnector,
    store: SharedStore,
    webhook: Arc<Webhook>,
    ready: watch::Sender<bool>,
    cancel: CancellationToken,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn connector(ca_pem: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

async fn start(store: Store, ready: bool) -> TestServer {
    let generated = certs::self_signed("127.0.0.1").unwrap();
    let resolver = certs::CertResolver::new(generated.certified_key().unwrap());
    let tls = tokio_rustls::TlsAcceptor::from(certs::server_config(resolver).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let store: SharedStore = Arc::new(std::sync::RwLock::new(store));
    let (ready_tx, ready_rx) = watch::channel(ready);
    let mut webhook = Webhook::new(store.clone(), ready_rx, Arc::new(Metrics::new()));
    webhook.recheck_after = Duration::from_millis(5);
    webhook.sync_wait = Duration::from_millis(200);
    let webhook = Arc::new(webhook);
    let cancel = CancellationToken::new();
    let served = webhook.clone();
    tokio::spawn(server::serve(
        listener,
        Some(tls),
        move |req| endpoint::handle(served.clone(), req),
        server::Lifecycle::stop_at(cancel.clone()),
    ));
    TestServer {
        addr,
        connector: connector(&generated.ca_pem),
        store,
        webhook,
        ready: ready_tx,
        cancel,
    }
}

impl TestServer {
    /// Sends one request over a fresh TLS connection; the status and body.
    async fn send<B>(
        &self,
        method: Method,
        path: &str,
        body: B,
        length: Option<usize>,
    ) -> (StatusCode, Bytes)
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .expect("TLS handshake");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json");
        if let Some(n) = length {
            request = request.header("content-length", n);
        }
        let response = sender
            .send_request(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response.into_body().collect().await.unwrap().to_bytes(),
        )
    }

    /// POSTs a body to `/validate/<plural>` and returns the AdmissionReview's response.
    async fn post(&self, plural: &str, body: Vec<u8>) -> Value {
        let n = body.len();
        let (status, body) = self
            .send(
                Method::POST,
                &format!("/validate/{plural}"),
                Full::new(Bytes::from(body)),
                Some(n),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        review["response"].clone()
    }

    async fn review(&self, op: &str, object: &Value, old: Option<&Value>) -> Value {
        let kind = object["kind"].as_str().unwrap_or("");
        let plural = Kind::from_name(kind)
            .map(|k| k.plural())
            .unwrap_or("flavors");
        let body = review(op, object, old);
        let response = self.post(plural, serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(response["uid"], body["request"]["uid"], "the uid is echoed");
        response
    }
}

/// An AdmissionReview v1 request as kube-apiserver sends it.
fn review(op: &str, object: &Value, old: Option<&Value>) -> Value {
    let kind = object["kind"].as_str().unwrap_or("");
    let (group, version) = object["apiVersion"]
        .as_str()
        .unwrap_or("")
        .split_once('/')
        .unwrap_or(("", ""));
    let plural = Kind::from_name(kind)
        .map(|k| k.plural())
        .unwrap_or_default();
    let name = json!(object["metadata"]["name"].as_str().unwrap_or(""));
    let (object, old) = match op {
        "DELETE" => (Value::Null, Some(object)),
        _ => (object.clone(), old),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{op}-{}", name.as_str().unwrap_or("")),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": name,
            "operation": op,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": object,
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": false,
            "options": null,
        }
    })
}

/// Every document of the files under `dir` that the API server sends to kubeplace's
/// webhook, as JSON, in `kubeplace apply` order: core Namespaces are left out, as the
/// webhook's rules name only kubeplace's resources.
fn documents(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for file in kubeplace_api::manifest::files_under(&Path::new(ROOT).join(dir)).unwrap() {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let core_namespace = |d: &Value| d["apiVersion"] == "v1" && d["kind"] == "Namespace";
        for d in docs
            .into_iter()
            .filter(|d| !d.is_null() && !core_namespace(d))
        {
            out.push((file.file_name().unwrap().to_string_lossy().into_owned(), d));
        }
    }
    out
}

/// The store after `kubeplace apply -f examples/cloud`.
fn cloud() -> Store {
    let docs = read_paths(
        &[Path::new(ROOT).join("examples/cloud")],
        &mut std::io::empty(),
    )
    .unwrap();
    apply_documents(docs, Validate::Strict).1
}

fn allowed(r: &Value) -> bool {
    r["allowed"].as_bool().expect("allowed is a bool")
}

fn message(r: &Value) -> &str {
    r["status"]["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn every_example_is_admitted_in_the_order_kubectl_applies_them() {
    let server = start(Store::default(), true).await;
    let docs = documents("examples/cloud");
    assert!(docs.len() >= 26, "{}", docs.len());
    let mut kinds_seen = std::collections::BTreeSet::new();
    for (file, doc) in docs {
        let response = server.review("CREATE", &doc, None).await;
        assert!(allowed(&response), "{file}: {response}");
        kinds_seen.insert(doc["kind"].as_str().unwrap().to_string());
        // What the watch does once the API server stored it.
        let kind = doc["kind"].as_str().unwrap();
        let object = Object::from_value(Kind::from_name(kind).unwrap(), doc.clone()).unwrap();
        server.store.write().unwrap().apply(object);
        // Applying the same manifest again is an UPDATE with the stored object as old.
        let again = server.review("UPDATE", &doc, Some(&doc)).await;
        assert!(allowed(&again), "{file} (update): {again}");
    }
    // A PlacementWrite is the operator's own record of a Placement write, never written by
    // hand: no example has one.
    let by_hand = Kind::ALL
        .iter()
        .filter(|k| **k != Kind::PlacementWrite)
        .count();
    assert_eq!(kinds_seen.len(), by_hand, "every kind: {kinds_seen:?}");
}

#[tokio::test]
async fn every_rejected_example_is_denied_with_kubeplaces_message() {
    let store = cloud();
    let server = start(store.clone(), true).await;
    let docs = documents("examples/rejected");
    assert!(docs.len() >= 19);
    let mut before_admission = Vec::new();
    for (file, doc) in docs {
        let response = server.review("CREATE", &doc, None).await;
        // The API server refuses these itself before any webhook is called, and
        // `kubeplace apply` does as the API server does; the object as such is fine.
        if BEFORE_ADMISSION.contains(&file.as_str()) {
            assert!(allowed(&response), "{file}: {response}");
            before_admission.push(file);
            continue;
        }
        assert!(!allowed(&response), "{file} was allowed: {response}");
        // Each denial says its kind: 422 Invalid for an object that is wrong, 403 with
        // kubeplace's reason for a claim that does not fit or is over quota.
        let status = (
            response["status"]["code"].as_u64().unwrap_or(0),
            response["status"]["reason"].as_str().unwrap_or(""),
        );
        assert!(
            matches!(
                status,
                (422, "Invalid") | (403, "NoRoom") | (403, "OverQuota") | (403, "Mirrored")
            ),
            "{file}: {response}"
        );
        let text = message(&response);
        assert!(!text.is_empty(), "{file}: no message");
        // Where the document is a kubeplace object, the message is admission's own, as
        // `kubeplace apply` prints it.
        let kind = doc["kind"].as_str().unwrap_or("");
        if doc["apiVersion"] == "kubeplace.io/v1alpha1"
            && let Some(kind) = Kind::from_name(kind)
            && let Ok(object) = Object::from_value(kind, doc.clone())
            && !object.name().is_empty()
        {
            let verdict = admit(Operation::Create, &object, None, &store);
            assert_eq!(text, verdict.message, "{file}");
        }
        let expected = match file.as_str() {
            "flavor-bad-trait-value.yaml" => {
                "accepted values (exact, case-sensitive): required, forbidden"
            }
            "flavor-wrong-field-type.yaml" => "field spec.vcpus: invalid type: string \"two\"",
            "missing-name.yaml" => "every object needs a name",
            "unknown-api-version.yaml" => "kubeplace serves kubeplace.io/v1alpha1",
            "unknown-kind.yaml" => "the request is for \"Flavour\"",
            "provider-own-parent.yaml" => "names the provider itself",
            "allocation-unknown-provider.yaml" => "does not exist",
            "provider-config-duplicate-identification.yaml" => "is already identified",
            _ => "",
        };
        assert!(text.contains(expected), "{file}: {text}");
    }
    assert_eq!(before_admission, BEFORE_ADMISSION, "every such file exists");
}

/// The rejected examples that the API server refuses before admission webhooks run, and
/// `kubeplace apply` with it: an unknown field (strict decoding; without strict validation
/// the API server drops the field, so a webhook never sees one) and a namespace that does
/// not exist (its NamespaceLifecycle plugin). tests/e2e checks the API server's messages.
const BEFORE_ADMISSION: [&str; 2] = ["flavor-unknown-field.yaml", "server-missing-namespace.yaml"];

#[tokio::test]
async fn warnings_pass_through_on_an_allowed_object() {
    let server = start(cloud(), true).await;
    // A flavor naming a ServiceProfile that does not exist yet, and a provider whose
    // parent does not exist yet: both admitted, with a warning each.
    let flavor = json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
        "metadata": {"name": "m1.early-profile"},
        "spec": {"vcpus": 1, "memoryMb": 512, "serviceProfiles": ["no-such-profile"]},
    });
    let provider = json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
        "metadata": {"name": "cn9-numa0"}, "spec": {"parent": "cn9"},
    });
    for (object, expected) in [
        (flavor, "\"no-such-profile\" does not exist yet"),
        (provider, "\"cn9\" does not exist yet"),
    ] {
        let response = server.review("CREATE", &object, None).await;
        assert!(allowed(&response), "{response}");
        let warnings: Vec<&str> = response["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            warnings.iter().any(|w| w.contains(expected)),
            "{warnings:?}"
        );
    }
    // A denial carries its warnings too.
    let both = json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
        "metadata": {"name": "m1.both"},
        "spec": {"vcpus": 1, "memoryMb": 512, "serviceProfiles": ["no-such-profile"],
                 "extraSpecs": {"trait:HW_CPU_X86_AVX2": "preferred"}},
    });
    let response = server.review("CREATE", &both, None).await;
    assert!(!allowed(&response));
    assert_eq!(
        response["warnings"].as_array().map(Vec::len),
        Some(1),
        "{response}"
    );
}

#[tokio::test]
async fn deletion_and_updates_see_the_rest_of_the_cluster() {
    let store = cloud();
    let server = start(store.clone(), true).await;
    let value = |kind: Kind, name: &str| store.get_cluster(kind, name).unwrap().to_value();
    // cn1-numa0 holds web-1's allocation: it cannot be deleted.
    let in_use = server
        .review("DELETE", &value(Kind::ResourceProvider, "cn1-numa0"), None)
        .await;
    assert!(!allowed(&in_use), "{in_use}");
    assert!(
        message(&in_use).contains("web-1") || message(&in_use).contains("allocation"),
        "{}",
        message(&in_use)
    );
    // A provider nothing uses can go.
    let unused = json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
                        "metadata": {"name": "spare"}, "spec": {}});
    server
        .store
        .write()
        .unwrap()
        .apply(Object::from_value(Kind::ResourceProvider, unused.clone()).unwrap());
    assert!(allowed(&server.review("DELETE", &unused, None).await));
    // Re-parenting a child is allowed (Placement allows it from 1.37); a cycle is not.
    let old = value(Kind::ResourceProvider, "cn1-numa0");
    let mut moved = old.clone();
    moved["spec"]["parent"] = json!("cn2");
    let r = server.review("UPDATE", &moved, Some(&old)).await;
    assert!(allowed(&r), "{r}");
    let root = value(Kind::ResourceProvider, "cn1");
    let mut looped = root.clone();
    looped["spec"]["parent"] = json!("cn1-numa0");
    let r = server.review("UPDATE", &looped, Some(&root)).await;
    assert!(
        !allowed(&r) && message(&r).contains("would make a cycle"),
        "{r}"
    );
    // An allocation beyond capacity is Placement's 409, here a denial.
    let greedy = json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                        "metadata": {"name": "greedy"},
                        "spec": {"consumer": "0b7e0f43-3c0e-4d52-9d5e-111111111111",
                                 "allocations": [{"provider": "cn1-numa0", "resources": {"VCPU": 100000}}]}});
    let r = server.review("CREATE", &greedy, None).await;
    assert!(!allowed(&r), "{r}");
}

#[tokio::test]
async fn requests_that_cannot_be_read_are_denied_with_a_message() {
    let server = start(cloud(), true).await;
    // Not JSON.
    let r = server.post("flavors", b"{not json".to_vec()).await;
    assert!(!allowed(&r));
    assert!(message(&r).contains("not an AdmissionReview"), "{r}");
    assert_eq!(r["status"]["code"], 400);
    // JSON, but not an AdmissionReview.
    let r = server.post("flavors", b"[1, 2, 3]".to_vec()).await;
    assert!(
        !allowed(&r) && message(&r).contains("not an AdmissionReview"),
        "{r}"
    );
    // The wrong apiVersion.
    let flavor = json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                        "metadata": {"name": "m1.ok"}, "spec": {"vcpus": 1, "memoryMb": 512}});
    let mut old_version = review("CREATE", &flavor, None);
    old_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let r = server
        .post("flavors", serde_json::to_vec(&old_version).unwrap())
        .await;
    assert!(
        !allowed(&r) && message(&r).contains("admission.k8s.io/v1beta1"),
        "{r}"
    );
    assert_eq!(r["uid"], "uid-CREATE-m1.ok");
    // A review that does not parse still gets its uid back.
    let mut odd = review("CREATE", &flavor, None);
    odd["request"]["operation"] = json!("EXPLODE");
    let r = server
        .post("flavors", serde_json::to_vec(&odd).unwrap())
        .await;
    assert!(
        !allowed(&r) && message(&r).contains("unknown variant"),
        "{r}"
    );
    assert_eq!(r["uid"], "uid-CREATE-m1.ok");
    // No request in the review.
    let r = server
        .post(
            "flavors",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
        )
        .await;
    assert!(!allowed(&r) && message(&r).contains("no request"), "{r}");
    // A Flavor sent to the images webhook.
    let r = server
        .post(
            "images",
            serde_json::to_vec(&review("CREATE", &flavor, None)).unwrap(),
        )
        .await;
    assert!(
        !allowed(&r) && message(&r).contains("reviews Image.kubeplace.io"),
        "{r}"
    );
    // A CREATE with no object.
    let mut empty = review("CREATE", &flavor, None);
    empty["request"]["object"] = Value::Null;
    let r = server
        .post("flavors", serde_json::to_vec(&empty).unwrap())
        .await;
    assert!(
        !allowed(&r) && message(&r).contains("carries no object"),
        "{r}"
    );
    // Oversized, declared in Content-Length.
    let big = vec![b' '; 4 * 1024 * 1024];
    let r = server.post("flavors", big).await;
    assert!(
        !allowed(&r) && message(&r).contains("larger than 3 MiB"),
        "{r}"
    );
    // Oversized, streamed in chunks with no length.
    let chunks =
        (0..64).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![b' '; 64 * 1024]))));
    let (status, body) = server
        .send(
            Method::POST,
            "/validate/flavors",
            StreamBody::new(futures::stream::iter(chunks)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let r: Value = serde_json::from_slice(&body).unwrap();
    assert!(message(&r["response"]).contains("larger than 3 MiB"), "{r}");
    // Unknown paths and methods.
    let (status, _) = server
        .send(
            Method::POST,
            "/validate/widgets",
            Full::new(Bytes::new()),
            Some(0),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .send(
            Method::GET,
            "/validate/flavors",
            Full::new(Bytes::new()),
            Some(0),
        )
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = server
        .send(Method::GET, "/healthz", Full::new(Bytes::new()), Some(0))
        .await;
    assert_eq!(status, StatusCode::OK);
    // Every request was counted.
    let metrics = server.webhook.metrics().encode();
    assert!(
        metrics.contains(r#"kubeplace_admission_requests_total{kind="Flavor",verdict="invalid"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kubeplace_admission_requests_total{kind="Image",verdict="denied"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn before_the_store_is_synced_requests_are_refused_then_answered() {
    let server = start(cloud(), false).await;
    let flavor = json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                        "metadata": {"name": "m1.early"}, "spec": {"vcpus": 1, "memoryMb": 512}});
    let r = server.review("CREATE", &flavor, None).await;
    assert!(
        !allowed(&r) && message(&r).contains("has not listed every object yet"),
        "{r}"
    );
    server.ready.send_replace(true);
    assert!(allowed(&server.review("CREATE", &flavor, None).await));
}

#[tokio::test]
async fn certificate_files_are_reloaded_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let first = certs::self_signed("127.0.0.1").unwrap();
    std::fs::write(&cert, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();
    let resolver = certs::CertResolver::new(certs::load_files(&cert, &key).unwrap());
    let cancel = CancellationToken::new();
    tokio::spawn(certs::reload_on_change(
        resolver.clone(),
        cert.clone(),
        key.clone(),
        Duration::from_millis(50),
        cancel.clone(),
    ));
    let served = |r: &certs::CertResolver| r.current().cert[0].to_vec();
    let before = served(&resolver);
    // A broken pair is not taken.
    std::fs::write(&key, "not a key").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(served(&resolver), before);
    // A new good pair is.
    let second = certs::self_signed("127.0.0.1").unwrap();
    std::fs::write(&cert, &second.cert_pem).unwrap();
    std::fs::write(&key, &second.key_pem).unwrap();
    let mut changed = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if served(&resolver) != before {
            changed = true;
            break;
        }
    }
    assert!(changed, "the new certificate is served");
    // And a TLS client that trusts only the second CA now connects.
    let tls = tokio_rustls::TlsAcceptor::from(certs::server_config(resolver).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let _ = tls.accept(tcp).await;
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    connector(&second.ca_pem)
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .expect("handshake with the reloaded certificate");
    cancel.cancel();
}

/// With client certificates required (`kubeplace run --webhook-client-ca`), a follower still
/// passes a claim to the leader: it presents its own serving certificate, which the CA the
/// replicas share signed, and the leader trusts that CA besides the API server's. A
/// follower presenting nothing is refused at the handshake.
#[tokio::test]
async fn a_leader_requiring_client_certificates_takes_claims_from_replicas() {
    use kubeplace::serving::client_auth::{ClientCas, ca_certificates};
    use kubeplace::webhook::claims_route::{ClaimsRoute, Endpoint};
    let replicas = certs::self_signed("127.0.0.1").unwrap();
    let api_server_ca = certs::self_signed("kube-apiserver").unwrap().ca_pem;
    let clients = ClientCas::new(ca_certificates(&api_server_ca).unwrap()).unwrap();
    clients.trust_own(&replicas.ca_pem).unwrap();
    let certificate = certs::CertResolver::new(replicas.certified_key().unwrap());
    let tls = tokio_rustls::TlsAcceptor::from(
        certs::server_config_checking(certificate.clone(), clients).unwrap(),
    );
    // The leader: it decides every claim it receives.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let store: SharedStore = Arc::new(std::sync::RwLock::new(cloud()));
    let (_ready, ready) = watch::channel(true);
    let leader = Arc::new(Webhook::new(store, ready, Arc::new(Metrics::new())));
    let cancel = CancellationToken::new();
    tokio::spawn(server::serve(
        listener,
        Some(tls),
        move |req| endpoint::handle(leader.clone(), req),
        server::Lifecycle::stop_at(cancel.clone()),
    ));
    let at_leader = Endpoint {
        address: addr.to_string(),
        server_name: "127.0.0.1".into(),
        ca_pem: replicas.ca_pem.clone(),
    };
    let follower = |presenting| {
        ClaimsRoute::new(
            watch::channel(false).1,
            watch::channel(false).1,
            watch::channel(Some(at_leader.annotations())).1,
            presenting,
        )
    };
    let claim = json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
        "metadata": {"name": "forwarded-1"},
        "spec": {"consumer": "00000000-0000-4000-8000-000000000777",
                 "allocations": [{"provider": "cn1", "resources": {"DISK_GB": 10}}]},
    });
    let body = Bytes::from(serde_json::to_vec(&review("CREATE", &claim, None)).unwrap());
    let answer = follower(Some(certificate))
        .forward(&at_leader, "allocations", body.clone())
        .await
        .expect("the leader answers a replica");
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert!(allowed(&answer["response"]), "{answer}");
    let refused = follower(None)
        .forward(&at_leader, "allocations", body)
        .await
        .expect_err("the leader answered a replica without a certificate");
    assert!(
        refused.contains("the leader at") && refused.contains("CertificateRequired"),
        "{refused}"
    );
    cancel.cancel();
}

/// A Flavor of 60,000 extra specs of the wrong form: denied within the webhook's own
/// deadline, in a message of kilobytes that says how many problems there were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_of_many_problems_is_bounded_and_in_time() {
    let s = start(cloud(), true).await;
    let specs: serde_json::Map<String, Value> = (0..60_000)
        .map(|i| (format!("hw:numa_cpus.{i}"), json!(format!("x{i}"))))
        .collect();
    let flavor = json!({
        "apiVersion": "kubeplace.io/v1alpha1",
        "kind": "Flavor",
        "metadata": {"name": "bad"},
        "spec": {"vcpus": 1, "memoryMb": 1, "extraSpecs": specs},
    });
    let started = std::time::Instant::now();
    let r = s.review("CREATE", &flavor, None).await;
    let took = started.elapsed();
    assert!(!allowed(&r));
    let m = message(&r);
    assert!(
        m.len() <= kubeplace_policy::admission::MAX_LISTED_BYTES,
        "{} bytes",
        m.len()
    );
    assert!(
        m.starts_with("Flavor \"bad\" has 60000 problems: spec.extraSpecs[\"hw:numa_cpus.0\"]"),
        "{m:.300}"
    );
    assert!(
        m.contains(" more problems (only the first "),
        "{}",
        &m[m.len() - 200..]
    );
    // The webhook's deadline is 9 s; the API server's, 10 s.
    assert!(took < Duration::from_secs(9), "{took:?}");
}

/// A review that cannot finish in time (here: the store held by a write for longer than the
/// deadline) is answered at the webhook's deadline, not when the review ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_ends_a_review_that_takes_too_long() {
    let s = start(cloud(), true).await;
    let store = s.store.clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let _write = store.write().unwrap();
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(12));
    });
    held_rx.recv().unwrap();
    let flavor = json!({
        "apiVersion": "kubeplace.io/v1alpha1",
        "kind": "Flavor",
        "metadata": {"name": "late"},
        "spec": {"vcpus": 1, "memoryMb": 512},
    });
    let started = std::time::Instant::now();
    let body = serde_json::to_vec(&review("CREATE", &flavor, None)).unwrap();
    let r = s.post("flavors", body).await;
    let took = started.elapsed();
    assert!(!allowed(&r));
    assert_eq!(message(&r), "the request took longer than 9 s");
    assert!(took < Duration::from_secs(11), "{took:?}");
    tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
}

//! `kubeplace run --placement-addr --keystone-authtoken` over the real control plane with a
//! real Keystone: Keystone tokens judged by Placement's default policies and Kubernetes
//! tokens judged by RBAC, side by side on one API, each kind of token sent only to its own
//! issuer.

use serde_json::json;

use super::keystone_support::{Keystone, Scope, http};
use super::placement_api::{ACCESS, call, token, wait_for_api};
use super::support::{self, exclusive_lock};
use super::{Operator, crds_installed};

#[test]
fn keystone_and_kubernetes_tokens_side_by_side() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let ks = Keystone::start();
    let ini = ks.authtoken_file("placement.conf", &ks.url, "");
    let port = support::free_port();
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let section = format!("--keystone-authtoken={}", ini.display());
    let op = Operator::start(
        cp,
        "kubeplace-placement-keystone",
        &["--leader-elect=false", &addr, &section],
    );
    wait_for_api(port, &op);
    let url = format!("http://127.0.0.1:{port}");

    // A Kubernetes token (a JWT) goes to TokenReview and RBAC, as without Keystone.
    let writer = token(cp, "placement-writer");
    let reader = token(cp, "placement-reader");
    let (s, body) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&writer),
        Some(&json!({"name": "e2e-keystone-k8s"})),
    );
    assert_eq!(s, 200, "{body}");
    let (s, body) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&reader),
        Some(&json!({"name": "e2e-keystone-no"})),
    );
    assert_eq!(s, 403, "{body}");
    // A Keystone token goes to Keystone and Placement's policies: the service role writes,
    // a project admin reads, a reader does neither.
    let service = ks.token("nova", Scope::Project("service"));
    let (s, body) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&service),
        Some(&json!({"name": "e2e-keystone-ks"})),
    );
    assert_eq!(s, 200, "{body}");
    let admin = ks.token("demo-admin", Scope::Project("demo"));
    let (s, body) = call(port, "GET", "/resource_providers", Some(&admin), None);
    assert_eq!(s, 200, "{body}");
    let names: Vec<&str> = body["resource_providers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"e2e-keystone-k8s") && names.contains(&"e2e-keystone-ks"),
        "{names:?}"
    );
    let ks_reader = ks.token("demo-reader", Scope::Project("demo"));
    let (s, body) = call(port, "GET", "/resource_providers", Some(&ks_reader), None);
    assert_eq!(s, 403, "{body}");
    // Both writes are objects in the cluster.
    let listed = cp.kubectl(&["get", "resourceproviders", "-o", "json"]);
    for name in ["e2e-keystone-k8s", "e2e-keystone-ks"] {
        assert!(listed.ok().contains(name), "no ResourceProvider for {name}");
    }
    // A bad token of either shape is refused by its own issuer: a non-JWT by Keystone
    // (WWW-Authenticate names it), a JWT-shaped one by Kubernetes.
    let (s, headers, body) = http(
        "GET",
        &format!("{url}/resource_providers"),
        &[("X-Auth-Token", "gAAAAABnot-a-keystone-token")],
        None,
    );
    assert_eq!(s, 401, "{body}");
    assert_eq!(
        headers.get("www-authenticate").map(String::as_str),
        Some(format!("Keystone uri=\"{}\"", ks.url).as_str())
    );
    let forged_jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.c2ln";
    let (s, headers, body) = http(
        "GET",
        &format!("{url}/resource_providers"),
        &[("X-Auth-Token", forged_jwt)],
        None,
    );
    assert_eq!(s, 401, "{body}");
    assert!(!headers.contains_key("www-authenticate"), "{headers:?}");
    assert!(body.to_string().contains("Kubernetes"), "{body}");
    for name in ["e2e-keystone-k8s", "e2e-keystone-ks"] {
        let (s, body) = call(
            port,
            "GET",
            &format!("/resource_providers?name={name}"),
            Some(&writer),
            None,
        );
        assert_eq!(s, 200);
        if let Some(uuid) = body["resource_providers"][0]["uuid"].as_str() {
            call(
                port,
                "DELETE",
                &format!("/resource_providers/{uuid}"),
                Some(&writer),
                None,
            );
        }
    }
    op.stop_and_unregister(cp);
}

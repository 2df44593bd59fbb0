//! `kubeplace placement register` against a real Keystone (`hack/keystone-venv.sh`, started
//! by tests/support/keystone.rs): the `placement` service, its endpoints and the service
//! user made once and then left alone, changed URLs and passwords mended, `--dry-run`
//! changing nothing, and each bad input refused with nothing registered.
//!
//! Needs the Keystone virtualenv (`hack/keystone-venv.sh`; CI makes it before `cargo test`).

#[path = "support/keystone.rs"]
mod keystone;

use std::path::Path;
use std::process::Command;

use keystone::{Keystone, http};
use serde_json::{Value, json};

/// `kubeplace placement register ARGS` as `admin` of `ks` (through `OS_*`); exit code,
/// stdout, stderr.
fn register(ks: &Keystone, user: &str, password: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["placement", "register"])
        .args(args)
        .env("OS_AUTH_URL", format!("{}/v3", ks.url))
        .env("OS_USERNAME", user)
        .env("OS_PASSWORD", password)
        .env(
            "OS_PROJECT_NAME",
            if user == "admin" { "admin" } else { "demo" },
        )
        .env("OS_REGION_NAME", "RegionOne")
        .env_remove("OS_CACERT")
        .output()
        .expect("kubeplace runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn as_admin(ks: &Keystone, args: &[&str]) -> (i32, String, String) {
    register(ks, "admin", &ks.admin_password.clone(), args)
}

/// `GET /v3{path}` as the admin.
fn get(ks: &Keystone, path: &str) -> Value {
    let token = ks.admin_token();
    let (status, _, body) = http(
        "GET",
        &format!("{}/v3{path}", ks.url),
        &[("X-Auth-Token", &token)],
        None,
    );
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

fn delete(ks: &Keystone, path: &str) {
    let token = ks.admin_token();
    let (status, _, body) = http(
        "DELETE",
        &format!("{}/v3{path}", ks.url),
        &[("X-Auth-Token", &token)],
        None,
    );
    assert_eq!(status, 204, "DELETE {path}: {body}");
}

/// A Keystone as a fresh cloud has it: no placement service, no placement user.
fn without_placement(ks: &Keystone) {
    delete(ks, &format!("/services/{}", ks.placement_service));
    delete(ks, &format!("/users/{}", ks.users["placement"]));
}

fn placement_services(ks: &Keystone) -> Vec<Value> {
    get(ks, "/services?type=placement")["services"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The placement endpoints of the catalog a login of `user` (in `project`) with
/// `password` gets: interface → URL, in RegionOne.
fn catalog_as(ks: &Keystone, user: &str, password: &str, project: &str) -> Option<Value> {
    let (status, _, body) = http(
        "POST",
        &format!("{}/v3/auth/tokens", ks.url),
        &[],
        Some(&json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "domain": {"name": "Default"}, "password": password}}},
            "scope": {"project": {"name": project, "domain": {"name": "Default"}}}}})),
    );
    if status != 201 {
        return None;
    }
    let mut endpoints = serde_json::Map::new();
    for service in body["token"]["catalog"].as_array().into_iter().flatten() {
        if service["type"] == "placement" {
            for e in service["endpoints"].as_array().into_iter().flatten() {
                if e["region_id"] == "RegionOne" {
                    endpoints.insert(e["interface"].as_str().unwrap().into(), e["url"].clone());
                }
            }
        }
    }
    Some(Value::Object(endpoints))
}

fn password_file(dir: &Path, name: &str, password: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{password}\n")).unwrap();
    path.to_str().unwrap().to_string()
}

fn kinds(json_out: &str) -> Vec<String> {
    let v: Value =
        serde_json::from_str(json_out).unwrap_or_else(|e| panic!("not JSON ({e}): {json_out}"));
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {} {}", c["action"], c["kind"], c["name"]).replace('"', ""))
        .collect()
}

#[test]
fn register_makes_the_catalog_entry_and_the_service_user_once_and_mends_what_differs() {
    let ks = Keystone::start();
    without_placement(&ks);
    let dir = tempfile::tempdir().unwrap();
    let secret = password_file(dir.path(), "password", "first-secret");
    let args = [
        "--public-url",
        "https://placement.example.com",
        "--internal-url",
        "http://placement.internal:8778/",
        "--service-password-file",
        &secret,
        "--service-project",
        "placement-services",
        "-o",
        "json",
    ];

    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let (code, out, err) = as_admin(&ks, &dry);
    assert_eq!(code, 0, "{err}");
    let planned = kinds(&out);
    assert_eq!(
        planned,
        [
            "create service placement (type placement)",
            "create endpoint public in RegionOne",
            "create endpoint internal in RegionOne",
            "create endpoint admin in RegionOne",
            "create project placement-services (domain Default)",
            "create user placement (domain Default)",
            "grant roleAssignment service to placement (domain Default) in project placement-services",
        ],
        "the service role exists already: it is not created"
    );
    assert!(
        placement_services(&ks).is_empty(),
        "--dry-run changed Keystone"
    );

    let (code, out, err) = as_admin(&ks, &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        kinds(&out),
        planned,
        "what the dry run said is what was done"
    );
    assert_eq!(
        catalog_as(&ks, "placement", "first-secret", "placement-services"),
        Some(json!({"public": "https://placement.example.com",
                    "internal": "http://placement.internal:8778",
                    "admin": "http://placement.internal:8778"})),
        "the service user logs in to its project and finds the endpoints"
    );
    let services = placement_services(&ks);
    assert_eq!(services.len(), 1);
    assert_eq!(services[0]["name"], "placement");

    // Again: nothing to change, in either output.
    let (code, out, err) = as_admin(&ks, &args);
    assert_eq!(code, 0, "{err}");
    assert!(kinds(&out).is_empty(), "{out}");
    let text: Vec<&str> = args.iter().take(args.len() - 2).copied().collect();
    let (code, out, _) = as_admin(&ks, &text);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "Keystone already holds the placement service in RegionOne as asked: nothing to change"
    );

    // A moved internal endpoint and a new password: exactly those change.
    let secret = password_file(dir.path(), "password2", "second-secret");
    let moved = [
        "--public-url",
        "https://placement.example.com",
        "--internal-url",
        "http://kubeplace-placement.openstack.svc:8778",
        "--admin-url",
        "http://placement.internal:8778",
        "--service-password-file",
        &secret,
        "--service-project",
        "placement-services",
    ];
    let mut moved_dry = moved.to_vec();
    moved_dry.push("--dry-run");
    let (code, out, err) = as_admin(&ks, &moved_dry);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "would update endpoint internal in RegionOne: http://placement.internal:8778 -> http://kubeplace-placement.openstack.svc:8778",
            "would update password placement (domain Default)",
        ]
    );
    let (code, _, err) = as_admin(&ks, &moved);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        catalog_as(&ks, "placement", "first-secret", "placement-services"),
        None,
        "the old password no longer logs in"
    );
    assert_eq!(
        catalog_as(&ks, "placement", "second-secret", "placement-services"),
        Some(json!({"public": "https://placement.example.com",
                    "internal": "http://kubeplace-placement.openstack.svc:8778",
                    "admin": "http://placement.internal:8778"}))
    );
    assert_eq!(
        get(&ks, "/endpoints?interface=internal")["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["url"].as_str().unwrap().contains("placement"))
            .count(),
        1,
        "the endpoint was changed in place, not added"
    );
}

#[test]
fn bad_inputs_are_refused_naming_what_is_wrong_and_nothing_is_registered() {
    let ks = Keystone::start();
    without_placement(&ks);
    let dir = tempfile::tempdir().unwrap();
    let secret = password_file(dir.path(), "password", "a-secret");
    let url = ["--public-url", "https://placement.example.com"];

    // A region that does not exist: refused before anything is written.
    let mut args = url.to_vec();
    args.extend(["--region", "RegionTwo", "--service-password-file", &secret]);
    let (code, _, err) = as_admin(&ks, &args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("region \"RegionTwo\" does not exist in Keystone (its regions: RegionOne)"),
        "{err}"
    );
    assert!(placement_services(&ks).is_empty(), "half registered");
    assert!(
        get(&ks, "/users?name=placement")["users"]
            .as_array()
            .unwrap()
            .is_empty(),
        "half registered"
    );

    // The admin's password wrong, and credentials that are not an admin's.
    let (code, _, err) = register(&ks, "admin", "wrong", &url);
    assert_eq!(code, 1);
    assert!(
        err.contains("Keystone refused the login of") && err.contains("check OS_USERNAME"),
        "{err}"
    );
    let password = ks.password.clone();
    let (code, _, err) = register(&ks, "demo-member", &password, &url);
    assert_eq!(code, 1);
    assert!(
        err.contains("the credentials given are not an admin's"),
        "{err}"
    );
    assert!(placement_services(&ks).is_empty());

    // Arguments that cannot work: exit 2, naming the argument.
    for (args, said) in [
        (
            vec!["--public-url", "placement.example.com"],
            "--public-url \"placement.example.com\" is not an endpoint URL",
        ),
        (
            vec![
                "--public-url",
                "https://p.example",
                "--admin-url",
                "ftp://p.example",
            ],
            "--admin-url \"ftp://p.example\" is not an endpoint URL",
        ),
    ] {
        let (code, _, err) = as_admin(&ks, &args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(said), "{err}");
    }
    let empty = password_file(dir.path(), "empty", "");
    let mut args = url.to_vec();
    args.extend(["--service-password-file", &empty]);
    let (code, _, err) = as_admin(&ks, &args);
    assert_eq!(code, 2);
    assert!(err.contains("the file is empty"), "{err}");

    // Two placement services, none of them named as asked: which to use is not guessed.
    let token = ks.admin_token();
    for name in ["placement-a", "placement-b"] {
        let (status, _, body) = http(
            "POST",
            &format!("{}/v3/services", ks.url),
            &[("X-Auth-Token", &token)],
            Some(&json!({"service": {"name": name, "type": "placement"}})),
        );
        assert_eq!(status, 201, "{body}");
    }
    let (code, _, err) = as_admin(&ks, &url);
    assert_eq!(code, 1);
    assert!(
        err.contains("Keystone has 2 services of type placement and none named \"placement\""),
        "{err}"
    );
    let mut named = url.to_vec();
    named.extend(["--service-name", "placement-b"]);
    let (code, out, err) = as_admin(&ks, &named);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().count(),
        3,
        "three endpoints of placement-b: {out}"
    );
}

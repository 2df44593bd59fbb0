//! `kubeplace placement upgrade-check` against the real control plane and a real Keystone:
//! every check passes while a replica leads, the leader check fails once it is gone (exit
//! 2), and Keystone's login and catalog are judged against the URL served.

use serde_json::Value;

use super::keystone_support::Keystone;
use super::support::objects_lock;
use super::{Operator, crds_installed};

const LEASE: &str = "e2e-upgrade-check";

/// Runs the check as JSON: exit code and the verdict of each check by name.
fn check(
    cp: &super::support::ControlPlane,
    extra: &[&str],
) -> (i32, Vec<(String, String, String)>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args([
            "placement",
            "upgrade-check",
            "-o",
            "json",
            "--namespace",
            "default",
        ])
        .args(["--lease-name", LEASE, "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["check"].as_str().unwrap().to_string(),
                c["result"].as_str().unwrap().to_string(),
                c["details"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (out.status.code().unwrap_or(-1), checks)
}

fn verdict<'a>(checks: &'a [(String, String, String)], name: &str) -> (&'a str, &'a str) {
    checks
        .iter()
        .find(|(c, _, _)| c == name)
        .map(|(_, r, d)| (r.as_str(), d.as_str()))
        .unwrap_or_else(|| panic!("no check {name}: {checks:?}"))
}

#[test]
fn upgrade_check_judges_the_cluster_and_keystone_as_placement_status_does() {
    let _objects = objects_lock();
    let cp = crds_installed();
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    let operator = Operator::start_named(
        cp,
        "kubeplace-upgrade-check",
        "kubeplace-upgrade-check",
        &[&format!("--lease-name={LEASE}")],
    );
    let (code, checks) = check(cp, &[]);
    assert_eq!(
        verdict(&checks, "CustomResourceDefinitions").0,
        "Success",
        "{checks:?}"
    );
    assert_eq!(
        verdict(&checks, "Admission webhook").0,
        "Success",
        "{checks:?}"
    );
    let (leader, details) = verdict(&checks, "Leader");
    assert_eq!(leader, "Success", "{checks:?}");
    assert!(details.ends_with(" leads"), "{details}");
    // Other tests' Allocations may lack a project: a warning at most.
    assert!(code == 0 || code == 1, "{code}: {checks:?}");
    assert_eq!(
        code == 1,
        verdict(&checks, "Incomplete Consumers").0 == "Warning",
        "the exit code is the worst verdict: {checks:?}"
    );

    // Keystone: the service user logs in; the catalog has no placement endpoint yet, then
    // one elsewhere than the URL served, then this one.
    let ks = Keystone::start();
    let section = ks.authtoken_file("authtoken.ini", &ks.url, "region_name = UpgradeRegion");
    let section = section.to_str().unwrap();
    let ours = "https://kubeplace-placement.kubeplace-system.svc:8778";
    let with_keystone = ["--keystone-authtoken", section, "--placement-url", ours];
    let (code, checks) = check(cp, &with_keystone);
    assert_eq!(verdict(&checks, "Keystone").0, "Success", "{checks:?}");
    let (catalog, details) = verdict(&checks, "Catalog");
    assert_eq!(catalog, "Failure", "{checks:?}");
    assert!(details.contains("no placement endpoint"), "{details}");
    assert_eq!(code, 2);
    ks.add_placement_endpoint("UpgradeRegion", "http://old-placement:8778");
    let (code, checks) = check(cp, &with_keystone);
    let (catalog, details) = verdict(&checks, "Catalog");
    assert_eq!(catalog, "Warning", "{checks:?}");
    assert!(
        details.contains("http://old-placement:8778") && details.contains(ours),
        "{details}"
    );
    assert!(code >= 1);
    let (_, checks) = check(
        cp,
        &[
            "--keystone-authtoken",
            section,
            "--placement-url",
            "http://old-placement:8778/",
        ],
    );
    assert_eq!(verdict(&checks, "Catalog").0, "Success", "{checks:?}");
    let wrong = ks
        .authtoken_file("wrong.ini", &ks.url, "")
        .to_str()
        .unwrap()
        .to_string();
    std::fs::write(
        &wrong,
        std::fs::read_to_string(&wrong)
            .unwrap()
            .replace(&format!("password = {}", ks.password), "password = wrong"),
    )
    .unwrap();
    let (code, checks) = check(cp, &["--keystone-authtoken", &wrong]);
    let (keystone, details) = verdict(&checks, "Keystone");
    assert_eq!(keystone, "Failure", "{checks:?}");
    assert!(details.contains("refused the login"), "{details}");
    assert_eq!(code, 2);

    // The replica gone: nothing leads.
    operator.stop_and_unregister(cp);
    let (code, checks) = check(cp, &[]);
    let (leader, details) = verdict(&checks, "Leader");
    assert_eq!(leader, "Failure", "{checks:?}");
    assert!(
        details.contains("no holder") || details.contains("not renewed"),
        "{details}"
    );
    assert_eq!(code, 2);

    // An API server that cannot be reached: the checks cannot be made.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args([
            "placement",
            "upgrade-check",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(255),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ]);
}

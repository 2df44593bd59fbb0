//! `kubeplace top` over manifest files, the real binary: hosts ranked by the share of a
//! class they use, Flavors by headroom, projects by quota use; table, JSON and YAML; bad
//! input refused with what would be accepted. Over a cluster: tests/e2e/observability.rs.

use std::process::{Command, Output};

use serde_json::Value;

const CLOUD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cloud");

fn top(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .arg("top")
        .args(args)
        .output()
        .expect("kubeplace runs")
}

fn json(args: &[&str]) -> Value {
    let out = top(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn names(rows: &Value) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect()
}

#[test]
fn hosts_flavors_and_projects_ranked_from_files() {
    let report = json(&["-f", CLOUD, "-o", "json"]);
    // cn1 holds 12 % of its memory, cn2 5 %, the pool 1 %, cn3 nothing.
    assert_eq!(
        names(&report["hosts"]),
        ["cn1", "cn2", "ceph-pool-ssd", "cn3"]
    );
    let cn1 = &report["hosts"][0];
    assert_eq!(cn1["zone"], "zone-a");
    let vcpu = &cn1["classes"]["VCPU"];
    // 32 VCPU at 4.0 over its two NUMA cells, 11 of them claimed.
    assert_eq!(
        (
            &vcpu["total"],
            &vcpu["capacity"],
            &vcpu["used"],
            &vcpu["free"]
        ),
        (&32.into(), &128.into(), &11.into(), &117.into())
    );
    let fractions: Vec<f64> = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["usedFraction"].as_f64().unwrap())
        .collect();
    assert!(fractions.windows(2).all(|w| w[0] >= w[1]), "{fractions:?}");
    // The fewest servers that still fit first.
    let flavors = &report["flavors"];
    assert_eq!(flavors[0]["name"], "x1.huge");
    assert_eq!(flavors[0]["headroom"], 0);
    assert!(
        flavors[0]["stoppedBy"]
            .as_str()
            .unwrap()
            .starts_with("NoValidHost")
    );
    let headrooms: Vec<i64> = flavors
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["headroom"].as_i64().unwrap())
        .collect();
    assert!(headrooms.windows(2).all(|w| w[0] <= w[1]), "{headrooms:?}");
    assert_eq!(flavors[7]["capped"], true);
    // The most used limit first.
    let projects = &report["projects"];
    assert_eq!(
        (
            &projects[0]["limit"],
            &projects[0]["used"],
            &projects[0]["max"]
        ),
        (&"class:VCPU".into(), &7.into(), &16.into())
    );
    assert_eq!(report["summary"]["hosts"], 4);
    assert_eq!(report["summary"]["flavors"], 8);
    assert_eq!(report["rankedBy"], "any");
}

#[test]
fn by_one_class_per_provider_and_at_most_n() {
    let report = json(&[
        "hosts", "-f", CLOUD, "-o", "json", "--class", "VCPU", "-n", "2",
    ]);
    assert!(report.get("flavors").is_none() && report.get("projects").is_none());
    // By VCPU: cn1 (11 of 128) before cn2 (6 of 128); the pool has none and is left out.
    assert_eq!(names(&report["hosts"]), ["cn1", "cn2"]);
    assert_eq!(report["summary"]["hosts"], 4);
    assert_eq!(report["summary"]["hostsShown"], 2);
    assert_eq!(report["rankedBy"], "VCPU");
    let per_provider = json(&["hosts", "-f", CLOUD, "-o", "json", "--providers", "-n", "0"]);
    let providers = names(&per_provider["hosts"]);
    assert!(providers.contains(&"cn1-numa0"), "{providers:?}");
    assert!(providers.len() > 4, "{providers:?}");
}

#[test]
fn a_table_with_bars_and_yaml() {
    let out = top(&["-f", CLOUD]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "HOSTS by the largest share of any class used (4 of 4)",
        "FLAVORS by servers that still fit, the fewest first (8 of 8)",
        "PROJECTS by the share of a limit used (3 of 3 limits)",
        "22528/190464",
        "≥100",
        "[████████▊           ]    44%  7/16",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    let yaml = top(&["flavors", "-f", CLOUD, "-o", "yaml"]);
    assert!(yaml.status.success());
    let value: Value = serde_saphyr::from_slice(&yaml.stdout).expect("YAML");
    assert_eq!(value["flavors"][0]["name"], "x1.huge");
}

#[test]
fn bad_input_is_refused_with_what_would_be_accepted() {
    let out = top(&["-f", CLOUD, "--class", "VCPUS"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--class VCPUS: no host has inventory of VCPUS")
            && err.contains("DISK_GB, MEMORY_MB, PCPU, SRIOV_NET_VF, VCPU"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = top(&["-f", "/nonexistent/cloud.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cloud.yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = top(&["-f", CLOUD, "-n", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("\"-1\" is not a number of rows; give a whole number, 0 (every row) or more"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An object kubectl would refuse is left out, named with why.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn9}\nspec: {inventories: {VCPU: {total: -4}}}\n",
    )
    .unwrap();
    let out = top(&["hosts", "-f", bad.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ResourceProvider cn9")
            && err.contains("rejected and left out")
            && err.contains("total"),
        "{err}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["hosts"], serde_json::json!([]));
    let out = top(&["everything", "-f", CLOUD]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("[possible values: all, hosts, flavors, projects]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `-o html` writes the capacity page (its figures are checked in a browser by
/// tests/capacity_page.rs); `-n` bounds its rows; unreadable input is refused as for the
/// other formats, and an unknown format names the ones there are.
#[test]
fn the_capacity_page_as_html() {
    let out = top(&["-o", "html", "-n", "1", "-f", CLOUD]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert_eq!(page.matches(r#"class="hot-host""#).count(), 1, "{page}");
    assert!(page.contains("(1 of 4, by the largest share"), "{page}");
    let missing = top(&["-o", "html", "-f", "/nonexistent/cloud.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/cloud.yaml"),
        "{missing:?}"
    );
    let unknown = top(&["-o", "pdf", "-f", CLOUD]);
    assert_eq!(unknown.status.code(), Some(2));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("pdf") && said.contains("html"), "{said}");
}

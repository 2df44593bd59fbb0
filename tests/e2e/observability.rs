//! `/metrics` of `kubeplace run` on the real control plane, as the chart's monitoring
//! reads it: every metric a PrometheusRule alert or a dashboard panel queries is exposed,
//! and the figures follow what happens: capacity per host under openstack-exporter's names,
//! a Flavor's headroom, a project's quota, claims decided and refused by reason, the
//! Placement API's requests and its writes through the API server, the certificate's expiry.

#[path = "../monitoring/mod.rs"]
mod monitoring;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::placement_api::{ACCESS, call, token, wait_for_api};
use super::support::{self, exclusive_lock};
use super::{Operator, crds_installed, eventually};

const HOST: &str = "e2e-obs-host";
const NS: &str = "e2e-obs";

fn cloud() -> String {
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: {HOST}
spec:
  inventories:
    VCPU: {{total: 16, reserved: 2, allocationRatio: 2.0}}
    MEMORY_MB: {{total: 8192}}
  traits: [COMPUTE_NODE, CUSTOM_E2E_OBS]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: e2e.obs
spec:
  vcpus: 4
  memoryMb: 1024
  extraSpecs:
    trait:CUSTOM_E2E_OBS: required
---
apiVersion: kubeplace.io/v1alpha1
kind: ProjectQuota
metadata: {{name: limits, namespace: {NS}}}
spec:
  projectId: e2e-obs-project
  limits:
    class:VCPU: 20
"#
    )
}

/// The value of `series` (exactly as exposed) on `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// `/metrics` once `ok` holds of it (60 s at most).
fn scraped_once(op: &Operator, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = op.http_get("/metrics").unwrap_or_default();
        if ok(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never showed {what}:\n{text}\n{}",
            op.process.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn every_metric_the_charts_alerts_and_dashboard_read_is_on_a_real_operators_metrics() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let port = support::free_port();
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let op = Operator::start(
        cp,
        "kubeplace-observability",
        &["--leader-elect=false", &addr, "--headroom-interval=1"],
    );
    wait_for_api(port, &op);
    cp.kubectl_stdin(&["apply", "-f", "-"], &cloud()).ok();
    let writer = token(cp, "placement-writer");
    let uuid = |i: u32| format!("0b500000-0000-4000-8000-{i:012}");
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            HOST,
            "-o",
            "jsonpath={.status.root}",
        ],
        HOST,
    );
    let host_uuid = cp
        .kubectl(&[
            "get",
            "resourceprovider",
            HOST,
            "-o",
            "jsonpath={.status.uuid}",
        ])
        .ok()
        .trim()
        .to_string();
    let claim = |who: &str, vcpu: u64| {
        let body = json!({"allocations": {&host_uuid: {"resources": {"VCPU": vcpu}}},
                          "project_id": "e2e-obs-project", "user_id": "e2e-obs-user",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        call(
            port,
            "PUT",
            &format!("/allocations/{who}"),
            Some(&writer),
            Some(&body),
        )
        .0
    };
    // 8 of the 28 VCPU the host may give; then one more than is left is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    while claim(&uuid(1), 8) != 204 {
        assert!(Instant::now() < deadline, "{}", op.process.output());
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(claim(&uuid(2), 21), 409);

    // One written with kubectl is refused by the webhook, and counted there.
    let refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: e2e-obs-too-big}}\n\
             spec:\n  consumer: {}\n  allocations:\n  - provider: {HOST}\n    resources: {{VCPU: 40}}\n",
            uuid(3)
        ),
    );
    assert!(!refused.success, "{}", refused.stdout);

    let host = |family: &str, class: &str| {
        format!(r#"{family}{{hostname="{HOST}",resourcetype="{class}"}}"#)
    };
    let text = scraped_once(&op, "the claim, the headroom and the quota", |t| {
        value(t, &host("openstack_placement_resource_usage", "VCPU")) == Some(8.0)
            // Counted again after the claim: (28 - 8) / 4 VCPU, (8192 - 1024) / 1024 MEMORY_MB.
            && value(t, r#"kubeplace_flavor_headroom{flavor="e2e.obs"}"#) == Some(5.0)
            && value(
                t,
                &format!(
                    r#"kubeplace_quota_usage{{namespace="{NS}",project="e2e-obs-project",limit="class:VCPU"}}"#
                ),
            ) == Some(8.0)
    });
    for (series, want) in [
        (host("openstack_placement_resource_total", "VCPU"), 16.0),
        (host("openstack_placement_resource_reserved", "VCPU"), 2.0),
        (
            host("openstack_placement_resource_allocation_ratio", "VCPU"),
            2.0,
        ),
        (
            host("openstack_placement_resource_total", "MEMORY_MB"),
            8192.0,
        ),
        // (28 - 8) / 4 VCPU, (8192 - 1024) / 1024 MEMORY_MB: five more fit.
        (
            r#"kubeplace_flavor_headroom{flavor="e2e.obs"}"#.to_string(),
            5.0,
        ),
        (
            format!(
                r#"kubeplace_quota_limit{{namespace="{NS}",project="e2e-obs-project",limit="class:VCPU"}}"#
            ),
            20.0,
        ),
        ("kubeplace_leader".to_string(), 1.0),
    ] {
        assert_eq!(value(&text, &series), Some(want), "{series}\n{text}");
    }
    let at_least = |series: &str, least: f64| {
        let got = value(&text, series);
        assert!(got.is_some_and(|v| v >= least), "{series}: {got:?}\n{text}");
    };
    // The API's claim and its refusal, and the webhook's refusal.
    at_least(r#"kubeplace_claims_decided_total{kind="Allocation"}"#, 3.0);
    at_least(
        r#"kubeplace_claims_refused_total{kind="Allocation",reason="no_room"}"#,
        2.0,
    );
    at_least(
        r#"kubeplace_cluster_writes_total{outcome="written",refusal="none"}"#,
        1.0,
    );
    at_least(
        r#"kubeplace_placement_requests_total{route="/allocations/{consumer_uuid}",method="PUT",status="409",microversion="1.39"}"#,
        1.0,
    );
    // --self-signed makes a certificate of a year.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let expiry = value(
        &text,
        "kubeplace_serving_certificate_expiry_timestamp_seconds",
    )
    .expect("the certificate's expiry");
    assert!(
        expiry > now + 360.0 * 86400.0 && expiry < now + 367.0 * 86400.0,
        "{expiry} against {now}"
    );

    // What kubectl shows at a glance: a provider's usages, and with -o wide its totals; a
    // Flavor's headroom, and with -o wide why one more would not fit.
    let deadline = Instant::now() + Duration::from_secs(60);
    let providers = loop {
        let out = cp.kubectl(&["get", "resourceprovider", HOST, "-o", "wide"]);
        if out.stdout.contains(r#"{"VCPU":8}"#) {
            break out.stdout;
        }
        assert!(Instant::now() < deadline, "{}{}", out.stdout, out.stderr);
        std::thread::sleep(Duration::from_millis(500));
    };
    // kubectl aligns each cell under its column's header; an empty cell is blanks.
    let header = providers.lines().next().unwrap();
    let row = providers.lines().nth(1).unwrap();
    let at = |column: &str| {
        let start = header
            .find(&format!(" {column} "))
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("no column {column}: {providers}"));
        let end = header[start..]
            .find(char::is_whitespace)
            .map(|n| start + n)
            .and_then(|e| {
                header[e..]
                    .find(|c: char| !c.is_whitespace())
                    .map(|n| e + n)
            })
            .unwrap_or(row.len());
        row.get(start..end.min(row.len()))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    assert_eq!(at("USAGES"), r#"{"VCPU":8}"#, "{providers}");
    assert_eq!(
        (at("VCPU"), at("RAM"), at("DISK")),
        ("16".into(), "8192".into(), String::new()),
        "{providers}"
    );
    let flavors = cp
        .kubectl(&["get", "flavor", "e2e.obs", "-o", "wide"])
        .ok()
        .to_string();
    assert!(
        flavors.lines().next().unwrap().contains("HEADROOM")
            && flavors.lines().next().unwrap().contains("STOPPED BY"),
        "{flavors}"
    );
    assert!(
        flavors.contains(" 5 ") && flavors.contains("VCPU"),
        "{flavors}"
    );

    // `kubeplace top` over the cluster: the statuses the operator wrote.
    let top = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["top", "--kubeconfig", cp.kubeconfig.to_str().unwrap()])
        .args(["-o", "json", "-n", "0", "--class", "VCPU"])
        .output()
        .unwrap();
    assert!(
        top.status.success(),
        "{}",
        String::from_utf8_lossy(&top.stderr)
    );
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).unwrap();
    let host = top["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == HOST)
        .unwrap_or_else(|| panic!("{top:#}"));
    assert_eq!(
        (
            &host["classes"]["VCPU"]["used"],
            &host["classes"]["VCPU"]["capacity"]
        ),
        (&json!(8), &json!(28)),
        "{top:#}"
    );
    let flavor = top["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "e2e.obs")
        .unwrap_or_else(|| panic!("{top:#}"));
    assert_eq!(flavor["headroom"], 5, "{top:#}");
    assert!(
        top["projects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["namespace"] == NS && p["limit"] == "class:VCPU" && p["used"] == 8),
        "{top:#}"
    );

    let exposed = monitoring::exposed_families(&text);
    let queried = monitoring::queried_families(&monitoring::rendered(monitoring::ALL_ON));
    let missing: Vec<_> = queried
        .iter()
        .filter(|(_, family)| !exposed.contains(family))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not exposed: {missing:?}\n{text}"
    );

    cp.kubectl(&["delete", "allocations", "--all", "-A"]).ok();
    op.stop_and_unregister(cp);
    cp.kubectl(&["delete", "namespace", NS, "--wait=false"])
        .ok();
    cp.kubectl(&["delete", "flavor", "e2e.obs"]).ok();
    cp.kubectl(&["delete", "resourceprovider", HOST]).ok();
}

//! The chart's monitoring: its PrometheusRule passes `promtool check rules` and the unit
//! tests of tests/data/alerts/rules-test.yaml (`promtool test rules`, series of our own);
//! its Grafana dashboard is a ConfigMap Grafana's sidecar loads, made for Grafana 11
//! (schema 39): the type Grafana 11.6 publishes for a dashboard (`@grafana/schema`, checked
//! by TypeScript) takes it, and each query is PromQL that promtool parses; every metric a
//! rule or panel reads is documented. That each exists on a real operator's /metrics: tests/e2e/observability.rs.

mod monitoring;
#[path = "support/npm.rs"]
mod npm;

use std::collections::BTreeSet;
use std::process::Command;

use monitoring::{ALL_ON, ROOT, dashboard, dashboard_exprs, of_kind, promtool, rendered};

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn alerts_pass_promtool_check_and_their_unit_tests() {
    let docs = rendered(ALL_ON);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), monitoring::rule_file(&docs)).unwrap();
    std::fs::copy(
        format!("{ROOT}/tests/data/alerts/rules-test.yaml"),
        dir.path().join("rules-test.yaml"),
    )
    .unwrap();
    let promtool = promtool();
    let (ok, out) =
        run(Command::new(&promtool)
            .current_dir(dir.path())
            .args(["check", "rules", "rules.yaml"]));
    assert!(ok, "{out}");
    let alerts: BTreeSet<String> = monitoring::rule_exprs(&docs)
        .into_iter()
        .map(|(alert, _)| alert)
        .collect();
    for alert in [
        "KubeplaceClassUsageHigh",
        "KubeplaceFlavorNoHeadroom",
        "KubeplaceClaimRefusalsRising",
        "KubeplaceNoLeader",
        "KubeplaceServingCertificateExpiring",
        "KubeplacePlacementApiErrors",
    ] {
        assert!(alerts.contains(alert), "{alert} missing: {alerts:?}");
    }
    let (ok, out) = run(Command::new(&promtool).current_dir(dir.path()).args([
        "test",
        "rules",
        "rules-test.yaml",
    ]));
    assert!(ok, "{out}");
    // Every alert has a unit test of its own.
    let tests = std::fs::read_to_string(dir.path().join("rules-test.yaml")).unwrap();
    for alert in &alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "{alert} has no test in tests/data/alerts/rules-test.yaml"
        );
    }
}

#[test]
fn thresholds_come_from_the_values() {
    let docs = monitoring::rendered_with(&[
        "--set",
        &format!("{ALL_ON},metrics.prometheusRule.labels.release=prom"),
        "--set-json",
        "metrics.prometheusRule.classUsageThreshold=0.75",
        "--set-json",
        "metrics.prometheusRule.certificateExpiryDays=3",
    ]);
    let rule = of_kind(&docs, "PrometheusRule").unwrap();
    assert_eq!(rule["metadata"]["labels"]["release"], "prom");
    let exprs = monitoring::rule_exprs(&docs);
    let expr = |alert: &str| &exprs.iter().find(|(a, _)| a == alert).unwrap().1;
    assert!(
        expr("KubeplaceClassUsageHigh").ends_with("> 0.75"),
        "{exprs:?}"
    );
    assert!(
        expr("KubeplaceServingCertificateExpiring").contains("< 3 * 86400"),
        "{exprs:?}"
    );
}

#[test]
fn nothing_of_it_is_rendered_unless_asked_and_monitors_scrape_the_metrics_port() {
    let docs = rendered("metrics.serviceMonitor.enabled=false");
    for kind in ["PrometheusRule", "PodMonitor", "ServiceMonitor"] {
        assert!(of_kind(&docs, kind).is_none(), "{kind} rendered by default");
    }
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "kubeplace-dashboard"),
        "the dashboard rendered by default"
    );
    let deployment = of_kind(&docs, "Deployment").unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--capacity-metrics=hosts"), "{args}");
    assert!(
        args.contains("--capacity-metrics-max-hosts=20000"),
        "{args}"
    );

    let docs = rendered(&format!("{ALL_ON},metrics.capacity.per=off"));
    let pod_monitor = of_kind(&docs, "PodMonitor").unwrap();
    assert_eq!(
        pod_monitor["spec"]["podMetricsEndpoints"][0]["port"],
        "metrics"
    );
    let deployment = of_kind(&docs, "Deployment").unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--capacity-metrics=off"), "{args}");
}

#[test]
fn dashboard_is_for_grafanas_sidecar_and_each_query_parses() {
    let docs = rendered(&format!(
        "{ALL_ON},metrics.grafanaDashboard.annotations.grafana_folder=OpenStack"
    ));
    let cm = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "kubeplace-dashboard")
        .unwrap();
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "OpenStack");
    let dash = dashboard(&docs);
    // Grafana 11's dashboard schema.
    assert_eq!(dash["schemaVersion"], 39);
    assert_eq!(dash["uid"], "kubeplace-capacity");
    let variables: BTreeSet<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let mut ids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for panel in dash["panels"].as_array().unwrap() {
        let id = panel["id"].as_i64().expect("a panel id");
        assert!(ids.insert(id), "panel id {id} twice");
        let kind = panel["type"].as_str().unwrap();
        assert!(
            ["row", "timeseries", "bargauge", "stat", "table", "gauge"].contains(&kind),
            "{kind}"
        );
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_i64().unwrap(), grid["w"].as_i64().unwrap());
        assert!(x >= 0 && w > 0 && x + w <= 24, "{panel}");
        titles.insert(panel["title"].as_str().unwrap().to_string());
        if kind == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{panel}");
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')) {
                if let Some(var) = word.strip_prefix('$')
                    && !var.starts_with("__")
                {
                    assert!(variables.contains(var), "${var} is no variable: {expr}");
                }
            }
        }
    }
    for title in [
        "Usage by class and zone",
        "Hottest hosts",
        "Headroom per Flavor",
        "Claims refused",
        "Latency",
    ] {
        assert!(titles.contains(title), "no panel {title}: {titles:?}");
    }
    // Each query as a recording rule: promtool parses its PromQL.
    let mut rules = Vec::new();
    for (i, (_, expr)) in dashboard_exprs(&dash).into_iter().enumerate() {
        rules.push(serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr}));
    }
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard-queries.yaml");
    std::fs::write(&path, file.to_string()).unwrap();
    let (ok, out) = run(Command::new(promtool())
        .arg("check")
        .arg("rules")
        .arg(&path));
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("{} rules found", rules.len())),
        "{out}"
    );
}

#[test]
fn every_metric_a_rule_or_panel_reads_is_documented() {
    let docs = rendered(ALL_ON);
    let documented = std::fs::read_to_string(format!("{ROOT}/docs/observability.md")).unwrap();
    let queried = monitoring::queried_families(&docs);
    assert!(queried.len() > 20, "{queried:?}");
    for (what, family) in queried {
        assert!(
            documented.contains(&format!("`{family}"))
                || documented.contains(&format!("{family}_total`")),
            "{what} reads {family}, which docs/observability.md does not name"
        );
    }
}

/// The dashboard as the chart renders it, checked against the `Dashboard` type of
/// `@grafana/schema` 11.6.16 (Grafana's own, generated from its schema) by TypeScript: every
/// field known to it, of its type (enums as the strings and numbers JSON holds). A field
/// Grafana 11.6 does not know, or one of the wrong type, fails here.
#[test]
fn the_dashboard_is_a_grafana_11_6_dashboard() {
    let docs = rendered(ALL_ON);
    let dash = dashboard(&docs);
    let modules = npm::node_modules();
    let dir = tempfile::tempdir().unwrap();
    let check = format!(
        "import type {{ Dashboard }} from '@grafana/schema';\n\
         // Grafana's enums as the strings and numbers a dashboard's JSON holds.\n\
         type Json<T> = T extends string ? `${{T}}` : T extends number | boolean | null | undefined ? T\n\
           : T extends Array<infer U> ? Array<Json<U>> : T extends object ? {{ [K in keyof T]: Json<T[K]> }} : T;\n\
         export const dashboard: Json<Dashboard> = {};\n",
        serde_json::to_string_pretty(&dash).unwrap()
    );
    std::fs::write(dir.path().join("dashboard.ts"), check).unwrap();
    let config = serde_json::json!({
        "compilerOptions": {
            "strict": true, "noEmit": true, "skipLibCheck": true,
            "module": "esnext", "moduleResolution": "bundler", "target": "es2022",
            "baseUrl": ".",
            "paths": {"@grafana/schema": [modules.join("@grafana/schema")]},
        },
        "files": ["dashboard.ts"],
    });
    std::fs::write(dir.path().join("tsconfig.json"), config.to_string()).unwrap();
    let (ok, out) = run(Command::new("node")
        .arg(modules.join("typescript/bin/tsc"))
        .args(["-p", "tsconfig.json"])
        .current_dir(dir.path()));
    assert!(
        ok,
        "Grafana 11.6's Dashboard type refuses the dashboard:\n{out}"
    );
}

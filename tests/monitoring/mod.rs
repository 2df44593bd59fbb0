//! The chart's monitoring objects as tests read them: the PrometheusRule's rules and the
//! Grafana dashboard's queries rendered by the real `helm template`, checked with the real
//! `promtool` (hack/build-promtool.sh), and the metric names each PromQL expression reads.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every monitoring object of the chart turned on.
pub const ALL_ON: &str = "metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true,metrics.podMonitor.enabled=true";

/// The last line a build script prints: the path of what it built or found cached.
fn built_by(script: &str) -> PathBuf {
    let out = Command::new(format!("{ROOT}/{script}"))
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(out.status.success(), "{script} failed ({})", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or("").trim())
}

/// promtool, built once from Prometheus' Go module and cached.
pub fn promtool() -> PathBuf {
    let bin = built_by("hack/build-promtool.sh");
    assert!(bin.is_file(), "hack/build-promtool.sh printed {bin:?}");
    bin
}

/// helm, from the test control plane's binaries.
pub fn helm() -> PathBuf {
    let bin = built_by("hack/build-control-plane.sh").join("helm");
    assert!(bin.is_file(), "no helm at {bin:?}");
    bin
}

/// `helm template` of the chart with `--set SET`, as its documents.
pub fn rendered(set: &str) -> Vec<Value> {
    rendered_with(&["--set", set])
}

/// `helm template` of the chart with `args` (`--set`, `--set-json`), as its documents.
pub fn rendered_with(args: &[&str]) -> Vec<Value> {
    let out = Command::new(helm())
        .current_dir(ROOT)
        .args(["template", "kubeplace", "charts/kubeplace", "--namespace"])
        .args(["kubeplace-system", "--skip-tests"])
        .args(args)
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm template {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|doc| doc.is_object())
        .collect()
}

/// The rendered document of `kind`, if there is one.
pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"] == kind)
}

/// The PrometheusRule's groups, as a rule file promtool reads (JSON is YAML).
pub fn rule_file(docs: &[Value]) -> String {
    let rule = of_kind(docs, "PrometheusRule").expect("a PrometheusRule");
    serde_json::json!({ "groups": rule["spec"]["groups"] }).to_string()
}

/// Every rule's alert name and expression.
pub fn rule_exprs(docs: &[Value]) -> Vec<(String, String)> {
    let rule = of_kind(docs, "PrometheusRule").expect("a PrometheusRule");
    let mut out = Vec::new();
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            out.push((
                r["alert"].as_str().unwrap().to_string(),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// The dashboard the ConfigMap carries.
pub fn dashboard(docs: &[Value]) -> Value {
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "kubeplace-dashboard")
        .expect("the dashboard's ConfigMap");
    let text = cm["data"]["kubeplace.json"]
        .as_str()
        .expect("kubeplace.json");
    serde_json::from_str(text).expect("the dashboard is JSON")
}

/// Every query of the dashboard: its panels' targets and its variables', with Grafana's
/// variables replaced by what Prometheus would get (`$__rate_interval` a duration, a
/// multi-value variable a regex).
pub fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            out.push((
                panel["title"].as_str().unwrap().to_string(),
                expr.replace("$__rate_interval", "5m")
                    .replace("$zone", ".*")
                    .replace("$class", ".*"),
            ));
        }
    }
    out
}

/// The metric names a PromQL expression reads: identifiers that are not functions,
/// keywords, label names (inside `{}` or a `by (…)`-like list), strings or durations.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
    ];
    // Aggregation operators, whose `by (…)` may come before their parentheses.
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "limitk",
        "limit_ratio",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Whether the last word was a keyword taking a list of labels in parentheses.
    let mut labels_follow = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '{' || c == '[' {
            let close = if c == '{' { '}' } else { ']' };
            while i < chars.len() && chars[i] != close {
                if chars[i] == '"' {
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        i += if chars[i] == '\\' { 2 } else { 1 };
                    }
                }
                i += 1;
            }
            i += 1;
        } else if c == '(' && labels_follow {
            while i < chars.len() && chars[i] != ')' {
                i += 1;
            }
            i += 1;
            labels_follow = false;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let lower = word.to_ascii_lowercase();
            if KEYWORDS.contains(&lower.as_str()) {
                labels_follow = matches!(
                    lower.as_str(),
                    "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
                );
            } else if chars.get(j) != Some(&'(') && !AGGREGATIONS.contains(&lower.as_str()) {
                names.insert(word);
            }
        } else if c.is_ascii_digit() || c == '.' {
            // A number, or a duration such as 5m: its letters are not a name.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The family a sample's name belongs to: a histogram's `_bucket`, `_count`, `_sum` and a
/// counter's `_total` folded in.
pub fn family(name: &str) -> &str {
    for suffix in ["_bucket", "_count", "_sum", "_total", "_created"] {
        if let Some(base) = name.strip_suffix(suffix) {
            return base;
        }
    }
    name
}

/// The families a `/metrics` text exposes: declared by `# TYPE` or with samples.
pub fn exposed_families(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.split_whitespace().next() {
                out.insert(family(name).to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            out.insert(family(name).to_string());
        }
    }
    out
}

/// Every metric a rule or a panel of the chart reads, with the rule or panel.
pub fn queried_families(docs: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let exprs = rule_exprs(docs)
        .into_iter()
        .chain(dashboard_exprs(&dashboard(docs)));
    for (what, expr) in exprs {
        for name in metric_names(&expr) {
            out.push((what.clone(), family(&name).to_string()));
        }
    }
    out
}

#[test]
fn metric_names_leave_out_functions_labels_strings_and_durations() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"x|y", b="}"}[5m]))) / on(zone) group_left(pod) b_total offset 1h > bool 0.5 and absent(c == 1) - time() < 14 * 86400"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["a_bucket", "b_total", "c"]
    );
}

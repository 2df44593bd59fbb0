//! The capacity page in a real browser: Debian's headless Chromium, driven by playwright-core
//! (`hack/npm-deps.sh` installs it; `.ci/run` installs both). The page `kubeplace top -o
//! html` writes of the example cloud, and the page `placement serve` answers at
//! `/kubeplace/capacity`, open without errors, fetch nothing but themselves, and show the
//! figures `kubeplace top -o json` prints of the same files, as text and as bars drawn to
//! their share.

#[path = "support/npm.rs"]
mod npm;
mod placement_server;

use std::path::Path;
use std::process::Command;

use placement_server::Server;
use serde_json::Value;

const CHROMIUM: &str = "/usr/bin/chromium";

fn kubeplace(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kubeplace runs");
    assert!(out.status.success(), "kubeplace {args:?}: {out:?}");
    out.stdout
}

/// What the browser saw of `url` (see `hack/npm/capacity-page.cjs`).
fn seen_in_browser(url: &str, token: Option<&str>, screenshot: Option<&Path>) -> Value {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    );
    let root = env!("CARGO_MANIFEST_DIR");
    let playwright = npm::node_modules().join("playwright-core");
    let mut cmd = Command::new("node");
    cmd.arg(format!("{root}/hack/npm/capacity-page.cjs"))
        .arg(url)
        .env("KUBEPLACE_PLAYWRIGHT", playwright)
        .env("KUBEPLACE_CHROMIUM", CHROMIUM);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    if let Some(s) = screenshot {
        cmd.arg("--screenshot").arg(s);
    }
    let out = cmd.output().expect("node runs");
    assert!(
        out.status.success(),
        "the browser could not open {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the browser's report is JSON")
}

/// A share as the page writes it.
fn percent(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// The page shows what `top -o json` says: every host's classes (text, and a bar drawn to
/// the share), every flavor's headroom and every project limit.
fn assert_shows(seen: &Value, top: &Value) {
    assert_eq!(seen["title"], "kubeplace capacity");
    assert_eq!(seen["hosts"], top["summary"]["hosts"], "{seen}");
    let hosts = top["hosts"].as_array().unwrap();
    let hottest = seen["hottest"].as_array().unwrap();
    assert_eq!(hottest.len(), hosts.len(), "{seen}");
    for (shown, want) in hottest.iter().zip(hosts) {
        assert_eq!(
            shown["host"], want["name"],
            "hosts ranked as top ranks them"
        );
        let classes = want["classes"].as_object().unwrap();
        let bars = shown["bars"].as_array().unwrap();
        assert_eq!(bars.len(), classes.len(), "{shown}");
        for bar in bars {
            let c = &classes[bar["class"].as_str().unwrap()];
            let share = c["usedFraction"].as_f64().unwrap();
            assert_eq!(
                bar["text"],
                format!("{} / {} · {}", c["used"], c["capacity"], percent(share)),
                "{}: {bar}",
                want["name"]
            );
            let drawn = bar["drawn"].as_f64().expect("a drawn bar");
            assert!(
                (drawn - share.min(1.0)).abs() < 0.01,
                "{} {}: drawn {drawn}, share {share}",
                want["name"],
                bar["class"]
            );
        }
    }
    let flavors = top["flavors"].as_array().unwrap();
    let shown: Vec<(String, String)> = seen["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["flavor"].as_str().unwrap().into(),
                f["headroom"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = flavors
        .iter()
        .map(|f| {
            let headroom = match (f["headroom"].as_i64(), f["capped"].as_bool()) {
                (None, _) => "not counted".to_string(),
                (Some(h), Some(true)) => format!("≥ {h}"),
                (Some(h), _) => h.to_string(),
            };
            (f["name"].as_str().unwrap().into(), headroom)
        })
        .collect();
    assert_eq!(shown, want);
    let projects: Vec<(String, String)> = top["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (used, max) = (p["used"].as_i64().unwrap(), p["max"].as_i64().unwrap());
            let share = p["usedFraction"].as_f64().unwrap();
            (
                p["limit"].as_str().unwrap().into(),
                format!("{used} / {max} · {}", percent(share)),
            )
        })
        .collect();
    let shown: Vec<(String, String)> = seen["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["limit"].as_str().unwrap().into(),
                p["shown"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(shown, projects);
}

#[test]
fn the_page_of_the_example_cloud_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("capacity.html");
    std::fs::write(
        &page,
        kubeplace(&["top", "-o", "html", "-n", "0", "-f", "examples/cloud"]),
    )
    .unwrap();
    let top: Value = serde_json::from_slice(&kubeplace(&[
        "top",
        "-o",
        "json",
        "-n",
        "0",
        "-f",
        "examples/cloud",
    ]))
    .unwrap();
    let shot = dir.path().join("capacity.png");
    let url = format!("file://{}", page.display());
    let report = seen_in_browser(&url, None, Some(&shot));
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(
        report["fetched"],
        serde_json::json!([url]),
        "it fetches nothing else"
    );
    let seen = &report["seen"];
    assert_shows(seen, &top);
    // The servers the example leaves waiting, with why.
    let waiting: Vec<(&str, &str)> = seen["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["server"].as_str().unwrap(), w["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        waiting,
        [
            ("research/batch-1", "NoValidHost"),
            ("research/licensed-1", "TraitConflict")
        ]
    );
    let zones: Vec<&str> = seen["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zone"].as_str().unwrap())
        .collect();
    assert_eq!(zones, ["nova", "zone-a", "zone-b"]);
    // A screenshot of a drawn page, not of an empty one.
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
}

#[test]
fn the_served_page_opens_with_the_token_and_not_without() {
    let s = Server::start(&["-f", "examples/cloud"]);
    let url = format!("{}/kubeplace/capacity?rows=0", s.url());
    let report = seen_in_browser(&url, Some("admin"), None);
    assert_eq!(report["status"], 200, "{report}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(report["fetched"], serde_json::json!([url]), "{report}");
    // `serve` runs no controllers: its figures are the files' as they are, which a claim
    // through the API changes; the page shows every host with a bar drawn to its share.
    let seen = &report["seen"];
    assert_eq!(seen["hosts"], 4, "{seen}");
    for host in seen["hottest"].as_array().unwrap() {
        for bar in host["bars"].as_array().unwrap() {
            assert!(bar["drawn"].as_f64().is_some(), "{host}");
        }
    }
    // Without a token the answer is Placement's 401, not the page.
    let refused = seen_in_browser(&url, None, None);
    assert_eq!(refused["status"], 401, "{refused}");
    assert_eq!(refused["seen"], Value::Null, "{refused}");
}

//! Nova's own Placement client (`hack/nova-report-client.py`), from the virtualenv
//! `hack/nova-venv.sh` makes.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The venv's python, or a failure that says how to make it.
pub fn nova_python() -> PathBuf {
    let venv = std::env::var_os("KUBEPLACE_NOVA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/kubeplace/nova-venv")
        });
    let python = venv.join("bin/python");
    let has_nova = python.is_file()
        && Command::new(&python)
            .args(["-c", "import nova.scheduler.client.report"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    assert!(
        has_nova,
        "{} cannot import Nova: run hack/nova-venv.sh to create the Nova virtualenv (python3 and PyPI needed)",
        python.display()
    );
    python
}

/// Runs the client against the Placement endpoint `url` with `token`: whether it exited 0,
/// each step's line by name in order, and its standard error.
pub fn run_client(
    python: &PathBuf,
    url: &str,
    token: &str,
) -> (bool, Vec<(String, Value)>, String) {
    run_with(python, &[url, token])
}

/// How the client logs in to Keystone in its Keystone mode: as nova-compute does with
/// `[placement] auth_type = password`, finding Placement in the catalog of `region`.
pub struct KeystoneLogin<'a> {
    pub auth_url: &'a str,
    pub username: &'a str,
    pub password: &'a str,
    pub project: &'a str,
    pub region: &'a str,
}

/// [`run_client`] logging in to Keystone with a password instead of a static token.
pub fn run_client_keystone(
    python: &PathBuf,
    login: &KeystoneLogin<'_>,
) -> (bool, Vec<(String, Value)>, String) {
    run_with(
        python,
        &[
            "--keystone",
            login.auth_url,
            login.username,
            login.password,
            login.project,
            login.region,
        ],
    )
}

/// Runs `hack/nova-reshape.py` (Nova's test_update_from_provider_tree_reshape through its
/// report client) against `url` with `token`; as [`run_client`].
pub fn run_reshape(
    python: &PathBuf,
    url: &str,
    token: &str,
) -> (bool, Vec<(String, Value)>, String) {
    run_script(python, "nova-reshape.py", &[url, token])
}

fn run_with(python: &PathBuf, args: &[&str]) -> (bool, Vec<(String, Value)>, String) {
    run_script(python, "nova-report-client.py", args)
}

fn run_script(
    python: &PathBuf,
    script: &str,
    args: &[&str],
) -> (bool, Vec<(String, Value)>, String) {
    let script = format!("{}/hack/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("the Nova client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let steps = stdout
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            (v["step"].as_str().expect("a step name").to_string(), v)
        })
        .collect();
    (
        out.status.success(),
        steps,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

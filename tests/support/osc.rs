//! osc-placement (the `openstack resource provider …` commands), a real Placement client,
//! from the virtualenv `hack/osc-venv.sh` makes.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The venv's `openstack`, or a failure that says how to make it.
pub fn openstack_binary() -> PathBuf {
    let venv = std::env::var_os("KUBEPLACE_OSC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/kubeplace/osc-venv")
        });
    let bin = venv.join("bin/openstack");
    assert!(
        bin.is_file(),
        "{} is missing: run hack/osc-venv.sh to create the osc-placement virtualenv (python3 and PyPI needed)",
        bin.display()
    );
    bin
}

/// Runs `openstack …` against `endpoint` with `token` at microversion 1.39; the parsed
/// JSON output (null when it printed nothing), or the failure's standard error.
pub fn run(bin: &PathBuf, endpoint: &str, token: &str, args: &[&str]) -> Result<Value, String> {
    let out = Command::new(bin)
        .args([
            "--os-auth-type",
            "admin_token",
            "--os-token",
            token,
            "--os-endpoint",
            endpoint,
            "--os-placement-api-version",
            "1.39",
        ])
        .args(args)
        .output()
        .expect("openstack runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))
}

/// Runs `openstack …` logged in to Keystone with a password (`--os-auth-url`, user and
/// project in the domain Default), Placement found in the catalog of `region`, at
/// microversion 1.39; the parsed JSON output, or the failure's standard error.
pub fn run_keystone(
    bin: &PathBuf,
    auth_url: &str,
    (username, password, project, region): (&str, &str, &str, &str),
    args: &[&str],
) -> Result<Value, String> {
    let out = Command::new(bin)
        .args([
            "--os-auth-type",
            "password",
            "--os-auth-url",
            auth_url,
            "--os-identity-api-version",
            "3",
            "--os-username",
            username,
            "--os-password",
            password,
            "--os-project-name",
            project,
            "--os-user-domain-name",
            "Default",
            "--os-project-domain-name",
            "Default",
            "--os-region-name",
            region,
            "--os-interface",
            "public",
            "--os-placement-api-version",
            "1.39",
        ])
        .args(args)
        .env_remove("OS_CLOUD")
        .output()
        .expect("openstack runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))
}

/// `words` split on spaces.
pub fn split(words: &str) -> Vec<&str> {
    words.split(' ').collect()
}

//! `kubeplace placement import` and `export` with `--keystone-authtoken` against a real
//! Keystone and real Placement 16 behind keystonemiddleware (`hack/keystone-venv.sh`,
//! `hack/placement-venv.sh`): kubeplace logs in as the section's service user, finds
//! Placement in the token's service catalog when no URL is given, and renews its token when
//! Placement stops taking it and before it expires. Bad inputs: a catalog without
//! Placement (or none for the region or interface asked), a wrong password, Keystone down
//! or not answering, and `--token` given beside the section.

#[path = "support/keystone.rs"]
mod keystone;
#[path = "support/real_placement.rs"]
mod real_placement;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keystone::Keystone;
use real_placement::{RealPlacement, call_as, proxy};
use serde_json::{Value, json};

const ROOT: &str = "c0a80001-0000-4000-8000-00000000a001";
const CHILD: &str = "c0a80001-0000-4000-8000-00000000a002";
const CONSUMER: &str = "9a000000-0000-4000-8000-00000000a001";

/// Runs `kubeplace ARGS` with no token or OpenStack login in the environment.
fn kubeplace(args: &[&str]) -> Output {
    kubeplace_with(args, &[])
}

/// Runs `kubeplace ARGS` with `env` alone of the OpenStack variables.
fn kubeplace_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubeplace"));
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("OS_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("kubeplace runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A request with `token` that must answer 2xx; the body.
#[track_caller]
fn ok(url: &str, token: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let (status, answer) = call_as(url, token, method, path, body);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {answer}"
    );
    answer
}

/// A small cloud: a root with a child, inventories, standard and custom traits and a custom
/// class, and one consumer's allocations on both.
fn seed(url: &str, token: &str) {
    ok(url, token, "PUT", "/traits/CUSTOM_KS_GOLD", None);
    ok(url, token, "PUT", "/resource_classes/CUSTOM_KS_FPGA", None);
    ok(
        url,
        token,
        "POST",
        "/resource_providers",
        Some(&json!({"name": "ks-cn1", "uuid": ROOT})),
    );
    ok(
        url,
        token,
        "POST",
        "/resource_providers",
        Some(&json!({"name": "ks-cn1_NUMA0", "uuid": CHILD, "parent_provider_uuid": ROOT})),
    );
    ok(
        url,
        token,
        "PUT",
        &format!("/resource_providers/{ROOT}/inventories"),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"MEMORY_MB": {"total": 4096}, "CUSTOM_KS_FPGA": {"total": 2}}})),
    );
    ok(
        url,
        token,
        "PUT",
        &format!("/resource_providers/{CHILD}/inventories"),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": 8, "allocation_ratio": 2.0}}})),
    );
    ok(
        url,
        token,
        "PUT",
        &format!("/resource_providers/{ROOT}/traits"),
        Some(&json!({"resource_provider_generation": 1,
                     "traits": ["COMPUTE_NODE", "CUSTOM_KS_GOLD"]})),
    );
    ok(
        url,
        token,
        "PUT",
        &format!("/allocations/{CONSUMER}"),
        Some(
            &json!({"allocations": {ROOT: {"resources": {"MEMORY_MB": 512, "CUSTOM_KS_FPGA": 1}},
                                     CHILD: {"resources": {"VCPU": 2}}},
                     "project_id": "p-ks", "user_id": "u-ks", "consumer_generation": null,
                     "consumer_type": "INSTANCE"}),
        ),
    );
}

/// What the seeded cloud reads as, without generations and list order.
fn reads(url: &str, token: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let providers = ok(url, token, "GET", "/resource_providers", None);
    let mut listed: Vec<Value> = providers["resource_providers"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| {
            json!([
                p["uuid"],
                p["name"],
                p["parent_provider_uuid"],
                p["root_provider_uuid"]
            ])
        })
        .collect();
    listed.sort_by_key(Value::to_string);
    out.insert("providers".into(), Value::Array(listed));
    for rp in [ROOT, CHILD] {
        let inv = ok(
            url,
            token,
            "GET",
            &format!("/resource_providers/{rp}/inventories"),
            None,
        );
        out.insert(format!("{rp} inventories"), inv["inventories"].clone());
        let traits = ok(
            url,
            token,
            "GET",
            &format!("/resource_providers/{rp}/traits"),
            None,
        );
        let mut t: Vec<String> = serde_json::from_value(traits["traits"].clone()).unwrap();
        t.sort();
        out.insert(format!("{rp} traits"), json!(t));
    }
    let custom = ok(url, token, "GET", "/traits?name=startswith:CUSTOM_", None);
    let mut custom: Vec<String> = serde_json::from_value(custom["traits"].clone()).unwrap();
    custom.sort();
    out.insert("custom traits".into(), json!(custom));
    let alloc = ok(url, token, "GET", &format!("/allocations/{CONSUMER}"), None);
    out.insert(
        "allocations".into(),
        json!([
            alloc["allocations"][ROOT]["resources"],
            alloc["allocations"][CHILD]["resources"],
            alloc["project_id"],
            alloc["user_id"],
            alloc["consumer_type"]
        ]),
    );
    out
}

/// `kubeplace placement serve -f FILE` on a free port, killed when dropped; its URL.
struct Serve(std::process::Child, String);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(file: &Path) -> Serve {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["placement", "serve", "--listen", "127.0.0.1:0", "-f"])
        .arg(file)
        .env_remove("KUBEPLACE_PLACEMENT_TOKEN")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.trim().rsplit("http://").next().unwrap_or_default()
    );
    Serve(child, url)
}

/// A section for the service user `placement` (role service in project service) with a
/// password other than its own.
fn with_password(ks: &Keystone, name: &str, password: &str) -> PathBuf {
    let good = ks.authtoken_file(name, &ks.url, "");
    let text = std::fs::read_to_string(&good).unwrap();
    let bad = text.replace(
        &format!("password = {}", ks.password),
        &format!("password = {password}"),
    );
    assert_ne!(text, bad);
    std::fs::write(&good, bad).unwrap();
    good
}

#[test]
fn import_and_export_log_in_to_keystone_and_find_placement_in_the_catalog() {
    let ks = Keystone::start();
    let placement_ini = ks.authtoken_file("placement.ini", &ks.url, "");
    let source = RealPlacement::start_with_keystone(&placement_ini);
    let admin = ks.admin_token();
    seed(&source.url, &admin);
    let want = reads(&source.url, &admin);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let m = path(&manifest);

    // The noauth2 token is not a Keystone token: keystonemiddleware refuses it.
    let out = kubeplace(&["placement", "import", "--from", &source.url, "--to-file", m]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused the token") && err.contains("401"),
        "{err}"
    );
    assert!(!manifest.exists());

    // No URL: the endpoint is the catalog's (public, since no internal one is registered).
    ks.add_placement_endpoint("SourceRegion", &source.url);
    let any_region = ks.authtoken_file("import.ini", &ks.url, "");
    let out = kubeplace(&[
        "placement",
        "import",
        "--keystone-authtoken",
        path(&any_region),
        "--to-file",
        m,
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "Placement's endpoint in Keystone's catalog: {}",
            source.url
        )) && err.contains("read 2 providers and 1 consumers"),
        "{err}"
    );
    let kube = serve(&manifest);
    assert_eq!(reads(&kube.1, "admin"), want, "kubeplace serve -f");
    drop(kube);

    // With the URL given, the section's user logs in the same way; nothing left to change.
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &source.url,
        "--keystone-authtoken",
        path(&any_region),
        "--to-file",
        m,
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("up to date") && !err.contains("Keystone's catalog"),
        "{err}"
    );

    // Back into an empty Placement, found in the catalog by its region.
    let target = RealPlacement::start_with_keystone(&placement_ini);
    ks.add_placement_endpoint("TargetRegion", &target.url);
    let target_region = ks.authtoken_file("export.ini", &ks.url, "region_name = TargetRegion");
    let out = kubeplace(&[
        "placement",
        "export",
        "--keystone-authtoken",
        path(&target_region),
        "-f",
        m,
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "Placement's endpoint in Keystone's catalog: {}",
            target.url
        )),
        "{err}"
    );
    assert_eq!(
        reads(&target.url, &admin),
        want,
        "the Placement exported into"
    );
    let out = kubeplace(&[
        "placement",
        "export",
        "--to",
        &target.url,
        "--keystone-authtoken",
        path(&target_region),
        "-f",
        m,
    ]);
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.contains("0 writes to make"),
        "{err}"
    );
}

/// The `X-Auth-Token` of a request's head.
fn token_of(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-auth-token")
            .then(|| v.trim().to_string())
    })
}

#[test]
fn a_token_placement_stops_taking_is_replaced_and_the_request_sent_again() {
    let ks = Keystone::start();
    // Placement asks Keystone about every request (no cache), so a revoked token is refused
    // at once.
    let placement_ini = ks.authtoken_file("placement.ini", &ks.url, "token_cache_time = -1");
    let source = RealPlacement::start_with_keystone(&placement_ini);
    seed(&source.url, &ks.admin_token());
    // The proxy revokes the token of the fifth request before forwarding it.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let hook = {
        let seen = seen.clone();
        let ks_url = ks.url.clone();
        let admin = ks.admin_token();
        move |head: &str, n: usize| {
            let token = token_of(head).unwrap_or_default();
            if n == 4 {
                let (status, _, body) = keystone::http(
                    "DELETE",
                    &format!("{ks_url}/v3/auth/tokens"),
                    &[("X-Auth-Token", &admin), ("X-Subject-Token", &token)],
                    None,
                );
                assert_eq!(status, 204, "revoke: {body}");
            }
            seen.lock().unwrap().push(token);
            true
        }
    };
    let proxied = proxy(&source.url, Arc::new(hook));
    let ini = ks.authtoken_file("import.ini", &ks.url, "");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &proxied,
        "--keystone-authtoken",
        path(&ini),
        "--connections",
        "1",
        "--to-file",
        path(&manifest),
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("read 2 providers and 1 consumers"), "{err}");
    let seen = seen.lock().unwrap();
    let first = &seen[0];
    assert!(
        seen[..5].iter().all(|t| t == first),
        "one token until it was revoked"
    );
    // The refused request went again with a new token, and every later one carried it.
    assert_ne!(
        &seen[5], first,
        "the refused request was not sent again anew"
    );
    assert!(seen[5..].iter().all(|t| *t == seen[5]), "{seen:?}");
    let kube = serve(&manifest);
    assert_eq!(
        reads(&kube.1, "admin"),
        reads(&source.url, &ks.admin_token())
    );
}

#[test]
fn a_token_is_renewed_before_it_expires_during_a_long_import() {
    // Tokens live 20 s: renewed after three quarters of that. (Shorter lives make the test
    // depend on the machine's load: Placement's own service token, which keystonemiddleware
    // validates callers' tokens with, lives as short.)
    let ks = Keystone::start_with(Some(Duration::from_secs(20)));
    let placement_ini = ks.authtoken_file("placement.ini", &ks.url, "");
    let source = RealPlacement::start_with_keystone(&placement_ini);
    let admin = ks.admin_token();
    seed(&source.url, &admin);
    for i in 0..4 {
        ok(
            &source.url,
            &admin,
            "POST",
            "/resource_providers",
            Some(&json!({"name": format!("ks-extra-{i}")})),
        );
    }
    // Each request waits 1 s at the proxy: the import outlives its first token. When each
    // token was first seen, and how long after that each later use of it came.
    let first_seen: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let late: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let hook = {
        let first_seen = first_seen.clone();
        let late = late.clone();
        move |head: &str, _: usize| {
            std::thread::sleep(Duration::from_secs(1));
            let token = token_of(head).unwrap_or_default();
            let mut seen = first_seen.lock().unwrap();
            match seen.iter().find(|(t, _)| *t == token) {
                Some((_, at)) => late.lock().unwrap().push(at.elapsed()),
                None => seen.push((token, Instant::now())),
            }
            true
        }
    };
    let proxied = proxy(&source.url, Arc::new(hook));
    let ini = ks.authtoken_file("import.ini", &ks.url, "");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let started = Instant::now();
    let out = kubeplace(&[
        "placement",
        "import",
        "--from",
        &proxied,
        "--keystone-authtoken",
        path(&ini),
        "--connections",
        "1",
        "--to-file",
        path(&manifest),
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        started.elapsed() > Duration::from_secs(22),
        "too short a run to outlive a token: {:?}",
        started.elapsed()
    );
    let tokens = first_seen.lock().unwrap().len();
    assert!(tokens >= 2, "one token for {:?}", started.elapsed());
    // No token was used more than 15 s after it was issued (its renewal; it was issued
    // before it was first seen here), with some slack: renewed ahead of its expiry at 20 s,
    // not after Placement refused it.
    let oldest = late.lock().unwrap().iter().max().copied().unwrap();
    assert!(oldest < Duration::from_secs(17), "{oldest:?}");
}

#[test]
fn a_catalog_without_placement_is_an_input_error_naming_what_it_has() {
    let ks = Keystone::start();
    let ini = ks.authtoken_file("import.ini", &ks.url, "");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let m = path(&manifest);
    let out = kubeplace(&[
        "placement",
        "import",
        "--keystone-authtoken",
        path(&ini),
        "--to-file",
        m,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no placement endpoint (looked for interface internal or public)")
            && err.contains(
                "the catalog lists the service placement without endpoints (its service types: identity, placement)"
            )
            && err.contains("give --from URL")
            && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!manifest.exists());
    std::fs::write(&manifest, "").unwrap();
    let out = kubeplace(&[
        "placement",
        "export",
        "--keystone-authtoken",
        path(&ini),
        "-f",
        m,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no placement endpoint") && err.contains("give --to URL"),
        "{err}"
    );

    // An endpoint, but not in the region or for the interface the section asks.
    ks.add_placement_endpoint("RegionX", "http://127.0.0.1:9");
    for (extra, said) in [
        (
            "region_name = Elsewhere",
            "interface internal or public in region Elsewhere",
        ),
        (
            "valid_interfaces = admin,internal",
            "interface admin or internal;",
        ),
    ] {
        let ini = ks.authtoken_file("narrow.ini", &ks.url, extra);
        let out = kubeplace(&[
            "placement",
            "import",
            "--keystone-authtoken",
            path(&ini),
            "--to-file",
            "-",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
        assert!(
            err.contains(said) && err.contains("placement endpoints for public in RegionX"),
            "{extra}: {err}"
        );
        assert_eq!(text(&out.stdout), "", "{extra}");
    }
}

#[test]
fn bad_credentials_keystone_down_or_silent_are_clear_errors_and_nothing_is_written() {
    let ks = Keystone::start();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let m = path(&manifest);
    let import = |ini: &Path| {
        let started = Instant::now();
        let out = kubeplace(&[
            "placement",
            "import",
            "--keystone-authtoken",
            path(ini),
            "--to-file",
            m,
        ]);
        (out, started.elapsed())
    };

    // A wrong password: Keystone refuses the login.
    let wrong = with_password(&ks, "wrong.ini", "not-the-password");
    let (out, _) = import(&wrong);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("Keystone at {}/v3 (auth_url)", ks.url))
            && err.contains("refused the login of user \"placement\" (domain Default) in project \"service\" (domain Default) (401)")
            && err.contains("check username, password")
            && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!manifest.exists());

    // Nothing listens at auth_url.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let down = ks.authtoken_file("down.ini", &down_url, "http_request_max_retries = 1");
    let (out, took) = import(&down);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "Keystone at {down_url}/v3 (auth_url) cannot be reached"
        )) && err.contains("Connection refused")
            && err.contains("nothing was written"),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(!manifest.exists());
    let target = tempfile::NamedTempFile::new().unwrap();
    let out = kubeplace(&[
        "placement",
        "export",
        "--keystone-authtoken",
        path(&down),
        "-f",
        path(target.path()),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot be reached"), "{err}");

    // Keystone takes the connection and never answers: the section's timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    // Connections are accepted and kept, never answered (the thread ends with the test).
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for c in silent.incoming() {
            kept.push(c);
        }
    });
    let slow = ks.authtoken_file(
        "slow.ini",
        &silent_url,
        "timeout = 1\nhttp_request_max_retries = 0",
    );
    let (out, took) = import(&slow);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "Keystone at {silent_url}/v3 (auth_url) cannot be reached"
        )) && err.contains("no answer within 1s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(!manifest.exists());
}

#[test]
fn a_token_and_a_keystone_section_exclude_each_other_and_a_url_or_section_is_needed() {
    let out = kubeplace(&[
        "placement",
        "import",
        "--token",
        "admin",
        "--keystone-authtoken",
        "/dev/null",
        "--to-file",
        "-",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("'--token <TOKEN>' cannot be used with '--keystone-authtoken <FILE|DIR>'"),
        "{err}"
    );
    let out = kubeplace(&["placement", "export", "-f", "/dev/null"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("give --to URL, or --keystone-authtoken FILE"),
        "{err}"
    );
    // A section that cannot be used is an input error before any request.
    let dir = tempfile::tempdir().unwrap();
    let ini = dir.path().join("bad.ini");
    std::fs::write(&ini, "[keystone_authtoken]\nauth_type = v3token\n").unwrap();
    let out = kubeplace(&[
        "placement",
        "import",
        "--keystone-authtoken",
        path(&ini),
        "--to-file",
        "-",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("auth_type = \"v3token\""), "{err}");
}

/// `import` and `export` log in as openstackclient does: an openrc file's `OS_*`
/// variables, or a cloud of clouds.yaml (`--os-cloud`, `OS_CLOUD`) with its password in
/// secure.yaml; Placement found in the catalog either way.
#[test]
fn an_openrc_files_variables_and_a_cloud_of_clouds_yaml_log_in() {
    let ks = Keystone::start();
    let placement_ini = ks.authtoken_file("placement.ini", &ks.url, "");
    let source = RealPlacement::start_with_keystone(&placement_ini);
    let admin = ks.admin_token();
    seed(&source.url, &admin);
    let want = reads(&source.url, &admin);
    ks.add_placement_endpoint("RegionOfSource", &source.url);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cloud.yaml");
    let m = path(&manifest);

    let auth_url = format!("{}/v3", ks.url);
    let openrc = [
        ("OS_AUTH_URL", auth_url.as_str()),
        ("OS_USERNAME", "placement"),
        ("OS_PASSWORD", ks.password.as_str()),
        ("OS_PROJECT_NAME", "service"),
        ("OS_USER_DOMAIN_NAME", "Default"),
        ("OS_PROJECT_DOMAIN_NAME", "Default"),
        ("OS_REGION_NAME", "RegionOfSource"),
    ];
    let out = kubeplace_with(&["placement", "import", "--to-file", m], &openrc);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "Placement's endpoint in Keystone's catalog: {}",
            source.url
        )),
        "{err}"
    );
    let kube = serve(&manifest);
    assert_eq!(
        reads(&kube.1, "admin"),
        want,
        "imported with the OS_* variables"
    );
    drop(kube);

    // clouds.yaml names the cloud; its password is in secure.yaml under HOME.
    let clouds = dir.path().join("clouds.yaml");
    std::fs::write(
        &clouds,
        format!(
            "clouds:\n  kubeplace-test:\n    region_name: RegionOfSource\n    auth:\n      auth_url: {}\n      username: placement\n      project_name: service\n      user_domain_name: Default\n      project_domain_name: Default\n",
            ks.url
        ),
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/openstack")).unwrap();
    std::fs::write(
        home.join(".config/openstack/secure.yaml"),
        format!(
            "clouds:\n  kubeplace-test:\n    auth:\n      password: {}\n",
            ks.password
        ),
    )
    .unwrap();
    let cloud_env = [
        ("OS_CLIENT_CONFIG_FILE", path(&clouds)),
        ("HOME", path(&home)),
    ];
    let out = kubeplace_with(
        &[
            "placement",
            "export",
            "--os-cloud",
            "kubeplace-test",
            "-f",
            m,
        ],
        &cloud_env,
    );
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.contains("0 writes to make"),
        "exported back where it came from, nothing to change: {err}"
    );

    // OS_CLOUD names it too; a wrong password in secure.yaml is a login refused.
    std::fs::write(
        home.join(".config/openstack/secure.yaml"),
        "clouds:\n  kubeplace-test:\n    auth:\n      password: wrong\n",
    )
    .unwrap();
    let mut env = cloud_env.to_vec();
    env.push(("OS_CLOUD", "kubeplace-test"));
    let out = kubeplace_with(&["placement", "import", "--to-file", "-"], &env);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused the login") && err.contains("401"),
        "{err}"
    );
    // A flag wins over OS_CLOUD: the token given is sent (and refused by keystonemiddleware).
    let out = kubeplace_with(
        &[
            "placement",
            "import",
            "--from",
            &source.url,
            "--token",
            "not-a-keystone-token",
            "--to-file",
            "-",
        ],
        &env,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused the token"), "{err}");
    let out = kubeplace_with(
        &[
            "placement",
            "import",
            "--os-cloud",
            "nowhere",
            "--to-file",
            "-",
        ],
        &cloud_env,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has no cloud \"nowhere\""), "{err}");
}

//! `kubeplace placement serve --keystone-authtoken` against a real Keystone
//! (`hack/keystone-venv.sh`, started by tests/support/keystone.rs): every endpoint for every
//! kind of caller answers with the status real Placement 16 behind keystonemiddleware gives
//! with the same Keystone in the same run; Nova's report client and osc-placement log in with
//! passwords and find kubeplace in the catalog; revoked, expired and missing tokens; Keystone
//! down or slow (503, nothing written).
//!
//! Needs the Keystone, Placement, Nova and osc-placement virtualenvs (`hack/*-venv.sh`; CI
//! makes them before `cargo test`); without one a test fails and says how to make it.

#[path = "support/keystone.rs"]
mod keystone;
#[path = "support/nova.rs"]
mod nova;
#[path = "support/osc.rs"]
mod osc_client;
mod placement_server;
#[path = "support/real_placement.rs"]
mod real_placement;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use keystone::{Keystone, Scope, http};
use placement_server::Server;
use real_placement::RealPlacement;
use serde_json::{Value, json};

const RP: &str = "c0a80001-0000-4000-8000-0000000000e1";
const GONE: &str = "c0a80001-0000-4000-8000-0000000000ff";
const CONSUMER: &str = "9a000000-0000-4000-8000-0000000000e1";

/// `kubeplace placement serve` with the section of `authtoken`.
fn kubeplace(authtoken: &Path) -> Server {
    Server::start(&[
        "--keystone-authtoken",
        authtoken.to_str().expect("a UTF-8 path"),
    ])
}

/// A request at 1.39 with `token` (none: no X-Auth-Token) and `extra` headers.
fn call(
    url: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&Value>,
    extra: &[(&str, &str)],
) -> (u16, std::collections::HashMap<String, String>, Value) {
    let mut headers = vec![("OpenStack-API-Version", "placement 1.39")];
    if let Some(t) = token {
        headers.push(("X-Auth-Token", t));
    }
    headers.extend_from_slice(extra);
    http(method, &format!("{url}{path}"), &headers, body)
}

fn status(url: &str, token: &str, method: &str, path: &str, body: Option<&Value>) -> u16 {
    call(url, Some(token), method, path, body, &[]).0
}

/// The kinds of caller the role table asks with: a label, the user and the scope.
const CALLERS: &[(&str, &str, Scope<'static>)] = &[
    ("admin", "demo-admin", Scope::Project("demo")),
    ("service", "nova", Scope::Project("service")),
    ("member", "demo-member", Scope::Project("demo")),
    ("reader", "demo-reader", Scope::Project("demo")),
    ("no role", "demo-observer", Scope::Project("demo")),
    ("other project", "other-member", Scope::Project("other")),
    ("system", "admin", Scope::System),
    ("unscoped", "no-role", Scope::Unscoped),
];

/// The same few objects in a Placement, as its admin.
fn seed(url: &str, token: &str, project: &str) {
    let ok = |method: &str, path: &str, body: Option<&Value>| {
        let (s, _, b) = call(url, Some(token), method, path, body, &[]);
        assert!((200..300).contains(&s), "{method} {path}: {s} {b}");
        b
    };
    ok(
        "POST",
        "/resource_providers",
        Some(&json!({"name": "cn1", "uuid": RP})),
    );
    ok(
        "PUT",
        &format!("/resource_providers/{RP}/inventories"),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}})),
    );
    ok("PUT", "/traits/CUSTOM_SEEDED", None);
    ok("PUT", "/resource_classes/CUSTOM_SEEDED", None);
    ok(
        "PUT",
        &format!("/allocations/{CONSUMER}"),
        Some(&json!({"allocations": {RP: {"resources": {"VCPU": 2}}},
                     "project_id": project, "user_id": "u1", "consumer_generation": null,
                     "consumer_type": "INSTANCE"})),
    );
}

/// Every endpoint Placement serves, as a request that passes its policy and its handler's
/// checks for an allowed caller without changing what later rows read (bodies an allowed
/// caller gets a 400 for, targets that do not exist, or writes that change nothing).
fn endpoints(demo: &str, other: &str) -> Vec<(String, String, Option<Value>)> {
    let rp = format!("/resource_providers/{RP}");
    let gone = format!("/resource_providers/{GONE}");
    let e = |m: &str, p: String, b: Option<Value>| (m.to_string(), p, b);
    vec![
        e("GET", "/resource_providers".into(), None),
        e("POST", "/resource_providers".into(), Some(json!({}))),
        e("GET", rp.clone(), None),
        e("PUT", rp.clone(), Some(json!({}))),
        e("DELETE", gone.clone(), None),
        e("GET", format!("{rp}/inventories"), None),
        e("POST", format!("{rp}/inventories"), Some(json!({}))),
        e("PUT", format!("{rp}/inventories"), Some(json!({}))),
        e("DELETE", format!("{gone}/inventories"), None),
        e("GET", format!("{rp}/inventories/VCPU"), None),
        e("PUT", format!("{rp}/inventories/VCPU"), Some(json!({}))),
        e("DELETE", format!("{gone}/inventories/VCPU"), None),
        e("GET", format!("{rp}/aggregates"), None),
        e("PUT", format!("{rp}/aggregates"), Some(json!({}))),
        e("GET", format!("{rp}/traits"), None),
        e("PUT", format!("{rp}/traits"), Some(json!({}))),
        e("DELETE", format!("{gone}/traits"), None),
        e("GET", format!("{rp}/usages"), None),
        e("GET", format!("{rp}/allocations"), None),
        e("GET", "/resource_classes".into(), None),
        e("POST", "/resource_classes".into(), Some(json!({}))),
        e("GET", "/resource_classes/CUSTOM_SEEDED".into(), None),
        e("PUT", "/resource_classes/CUSTOM_SEEDED".into(), None),
        e("DELETE", "/resource_classes/CUSTOM_NOT_THERE".into(), None),
        e("GET", "/traits".into(), None),
        e("GET", "/traits/CUSTOM_SEEDED".into(), None),
        e("PUT", "/traits/CUSTOM_SEEDED".into(), None),
        e("DELETE", "/traits/CUSTOM_NOT_THERE".into(), None),
        e("POST", "/allocations".into(), Some(json!({}))),
        e("GET", format!("/allocations/{CONSUMER}"), None),
        e("PUT", format!("/allocations/{CONSUMER}"), Some(json!({}))),
        e("DELETE", format!("/allocations/{GONE}"), None),
        e(
            "GET",
            "/allocation_candidates?resources=VCPU:1".into(),
            None,
        ),
        e("GET", format!("/usages?project_id={demo}"), None),
        e("GET", format!("/usages?project_id={other}"), None),
        e("GET", "/usages".into(), None),
        e("POST", "/reshaper".into(), Some(json!({}))),
    ]
}

#[test]
fn every_endpoint_answers_every_role_as_placement_16_behind_keystone() {
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let real = RealPlacement::start_with_keystone(&ini);
    let ours = kubeplace(&ini);
    let admin = ks.token("demo-admin", Scope::Project("demo"));
    let (demo, other) = (ks.project("demo"), ks.project("other"));
    seed(&real.url, &admin, demo);
    seed(&ours.url(), &admin, demo);

    let tokens: Vec<(&str, String)> = CALLERS
        .iter()
        .map(|(label, user, scope)| (*label, ks.token(user, *scope)))
        .collect();
    let mut table: BTreeMap<usize, (String, Vec<(u16, u16)>)> = BTreeMap::new();
    let mut differ = Vec::new();
    for (i, (method, path, body)) in endpoints(demo, other).iter().enumerate() {
        let mut row = Vec::new();
        for (label, token) in &tokens {
            let theirs = status(&real.url, token, method, path, body.as_ref());
            let mine = status(&ours.url(), token, method, path, body.as_ref());
            if theirs != mine {
                differ.push(format!(
                    "{method} {path} as {label}: Placement {theirs}, kubeplace {mine}"
                ));
            }
            row.push((theirs, mine));
        }
        let shown = path
            .replace(RP, "{uuid}")
            .replace(GONE, "{uuid}")
            .replace(CONSUMER, "{consumer}")
            .replace(demo, "{own project}")
            .replace(other, "{another project}");
        table.insert(i, (format!("{method} {shown}"), row));
    }
    // The table, for the docs: Placement's status, and kubeplace's where it differs.
    let mut text = format!(
        "| endpoint | {} |\n|---|{}\n",
        CALLERS.iter().map(|c| c.0).collect::<Vec<_>>().join(" | "),
        "---|".repeat(CALLERS.len())
    );
    for (name, row) in table.values() {
        let cells: Vec<String> = row
            .iter()
            .map(|(t, m)| {
                if t == m {
                    t.to_string()
                } else {
                    format!("{t} (kubeplace {m})")
                }
            })
            .collect();
        text.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
    }
    eprintln!("{text}");
    assert!(
        differ.is_empty(),
        "kubeplace answers otherwise than Placement:\n{}\n{text}",
        differ.join("\n")
    );

    // What the table must show, whoever answers: admin and service pass every policy but
    // the reshaper's (service only); a reader only its own project's usages; no role, a
    // system or unscoped token, nothing.
    let allowed = |label: &str| -> Vec<String> {
        let col = CALLERS.iter().position(|c| c.0 == label).unwrap();
        table
            .values()
            .filter(|(_, row)| row[col].0 != 403)
            .map(|(name, _)| name.clone())
            .collect()
    };
    let every = table.len();
    assert_eq!(allowed("admin").len(), every - 1, "{text}");
    assert!(!allowed("admin").contains(&"POST /reshaper".to_string()));
    assert_eq!(allowed("service").len(), every, "{text}");
    assert_eq!(allowed("reader"), ["GET /usages?project_id={own project}"]);
    assert_eq!(allowed("member"), ["GET /usages?project_id={own project}"]);
    assert_eq!(
        allowed("other project"),
        ["GET /usages?project_id={another project}"]
    );
    for nobody in ["no role", "system", "unscoped"] {
        assert!(
            allowed(nobody).is_empty(),
            "{nobody}: {:?}",
            allowed(nobody)
        );
    }
}

#[test]
fn missing_bad_and_forged_credentials_are_refused_as_placement_refuses_them() {
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let real = RealPlacement::start_with_keystone(&ini);
    let ours = kubeplace(&ini);
    let reader = ks.token("demo-reader", Scope::Project("demo"));
    let challenge = format!("Keystone uri=\"{}\"", ks.url);
    for url in [real.url.as_str(), &ours.url()] {
        // No token, or one Keystone never issued: 401 naming Keystone.
        for token in [None, Some("gAAAAABnot-a-token")] {
            let (s, headers, body) = call(url, token, "GET", "/resource_providers", None, &[]);
            assert_eq!(s, 401, "{url} {token:?}: {body}");
            assert_eq!(headers.get("www-authenticate"), Some(&challenge), "{url}");
            assert_eq!(body["error"]["code"], 401, "{url}: {body}");
        }
        // Version discovery needs none.
        assert_eq!(call(url, None, "GET", "/", None, &[]).0, 200);
        // A reader claiming roles and another project in headers is still a reader.
        let forged = [
            ("X-Roles", "admin,service"),
            ("X-Project-Id", "someone-else"),
            ("X-Service-Roles", "service"),
            ("OpenStack-System-Scope", ""),
        ];
        let (s, _, body) = call(
            url,
            Some(&reader),
            "GET",
            "/resource_providers",
            None,
            &forged,
        );
        assert_eq!(s, 403, "{url}: {body}");
        assert!(
            body["errors"][0]["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("placement:resource_providers:list"),
            "{url}: {body}"
        );
        let (s, _, _) = call(
            url,
            Some(&reader),
            "POST",
            "/resource_providers",
            Some(&json!({"name": "x"})),
            &forged,
        );
        assert_eq!(s, 403, "{url}");
    }
}

#[test]
fn a_revoked_token_passes_no_longer_than_token_cache_time() {
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "token_cache_time = 3");
    let ours = kubeplace(&ini);
    let token = ks.token("demo-admin", Scope::Project("demo"));
    assert_eq!(
        status(&ours.url(), &token, "GET", "/resource_providers", None),
        200
    );
    ks.revoke(&token);
    let revoked = Instant::now();
    // Keystone refuses it at once.
    assert_eq!(
        http(
            "GET",
            &format!("{}/v3/auth/tokens", ks.url),
            &[
                ("X-Auth-Token", &ks.admin_token()),
                ("X-Subject-Token", &token)
            ],
            None
        )
        .0,
        404
    );
    // kubeplace's answer is kept for token_cache_time: it may still pass until then...
    let mut last = 200;
    while revoked.elapsed() < Duration::from_secs(6) {
        last = status(&ours.url(), &token, "GET", "/resource_providers", None);
        if last == 401 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // ...and not after.
    assert_eq!(
        last,
        401,
        "the revoked token still passed {:?} after",
        revoked.elapsed()
    );
    assert!(
        revoked.elapsed() <= Duration::from_secs(4),
        "{:?}",
        revoked.elapsed()
    );
    // Nothing it sends is written.
    assert_eq!(
        status(
            &ours.url(),
            &token,
            "POST",
            "/resource_providers",
            Some(&json!({"name": "x"}))
        ),
        401
    );
}

#[test]
fn an_expired_token_is_refused_and_the_service_token_is_renewed() {
    // Tokens live 6 s: kubeplace's own service token expires too, and must be renewed.
    let ks = Keystone::start_with(Some(Duration::from_secs(6)));
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let ours = kubeplace(&ini);
    let token = ks.token("nova", Scope::Project("service"));
    let issued = Instant::now();
    assert_eq!(
        status(&ours.url(), &token, "GET", "/resource_providers", None),
        200
    );
    std::thread::sleep(Duration::from_secs(7).saturating_sub(issued.elapsed()));
    assert_eq!(
        status(&ours.url(), &token, "GET", "/resource_providers", None),
        401
    );
    // A fresh token is validated with a renewed service token.
    let fresh = ks.token("nova", Scope::Project("service"));
    assert_eq!(
        status(&ours.url(), &fresh, "GET", "/resource_providers", None),
        200
    );
}

/// What the proxy in front of Keystone does: 0 forwards, 1 drops connections, 2 waits 30 s.
fn switchable_keystone(ks: &Keystone) -> (String, Arc<AtomicU8>) {
    let mode = Arc::new(AtomicU8::new(0));
    let m = mode.clone();
    let url = real_placement::proxy(
        &ks.url,
        Arc::new(move |_line, _n| match m.load(Ordering::SeqCst) {
            0 => true,
            1 => false,
            _ => {
                std::thread::sleep(Duration::from_secs(30));
                false
            }
        }),
    );
    (url, mode)
}

#[test]
fn keystone_down_or_slow_is_a_503_within_the_timeouts_and_nothing_is_written() {
    let ks = Keystone::start();
    let (proxied, mode) = switchable_keystone(&ks);
    let ini = ks.authtoken_file(
        "authtoken.ini",
        &proxied,
        "http_connect_timeout = 1\ntimeout = 2\nhttp_request_max_retries = 1",
    );
    let ours = kubeplace(&ini);
    let admin = ks.token("demo-admin", Scope::Project("demo"));
    assert_eq!(
        status(&ours.url(), &admin, "GET", "/resource_providers", None),
        200
    );
    let body = json!({"name": "written-while-keystone-was-away"});

    for (what, m) in [("down", 1), ("slow", 2)] {
        let fresh = ks.token("demo-admin", Scope::Project("demo"));
        mode.store(m, Ordering::SeqCst);
        let started = Instant::now();
        let (s, _, answer) = call(
            &ours.url(),
            Some(&fresh),
            "POST",
            "/resource_providers",
            Some(&body),
            &[],
        );
        let took = started.elapsed();
        mode.store(0, Ordering::SeqCst);
        assert_eq!(s, 503, "Keystone {what}: {answer}");
        assert!(
            took < Duration::from_secs(10),
            "Keystone {what}: answered after {took:?}"
        );
        // Several callers at once each get their 503 within the bound (twice `timeout`),
        // not one after another.
        mode.store(m, Ordering::SeqCst);
        let started = Instant::now();
        let answers: Vec<u16> = std::thread::scope(|scope| {
            let callers: Vec<_> = (0..4)
                .map(|_| {
                    let token = ks.token("demo-admin", Scope::Project("demo"));
                    let url = ours.url();
                    let body = &body;
                    scope.spawn(move || {
                        call(
                            &url,
                            Some(&token),
                            "POST",
                            "/resource_providers",
                            Some(body),
                            &[],
                        )
                        .0
                    })
                })
                .collect();
            callers.into_iter().map(|c| c.join().unwrap()).collect()
        });
        let took = started.elapsed();
        mode.store(0, Ordering::SeqCst);
        assert_eq!(answers, [503; 4], "Keystone {what}");
        assert!(
            took < Duration::from_secs(10),
            "Keystone {what}: four callers took {took:?}"
        );
        // A token validated before still passes while its answer is kept.
        assert_eq!(
            status(&ours.url(), &admin, "GET", "/resource_providers", None),
            200
        );
    }
    // Nothing was written.
    let (s, _, list) = call(
        &ours.url(),
        Some(&admin),
        "GET",
        "/resource_providers",
        None,
        &[],
    );
    assert_eq!(s, 200);
    assert_eq!(list["resource_providers"], json!([]), "{list}");

    // A Keystone nobody listens at: 503 too.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let ini = ks.authtoken_file("closed.ini", &closed, "http_request_max_retries = 0");
    let lonely = kubeplace(&ini);
    let (s, _, answer) = call(
        &lonely.url(),
        Some(&admin),
        "POST",
        "/resource_providers",
        Some(&body),
        &[],
    );
    assert_eq!(s, 503, "{answer}");
    assert_eq!(answer["error"]["code"], 503, "{answer}");
    // What failed is for the log: an unauthenticated caller learns neither Keystone's
    // address nor how kubeplace's own login went.
    let text = answer.to_string();
    let address = closed.trim_start_matches("http://");
    assert!(!text.contains(address), "{text}");
    for detail in ["connect", "service user", "log in"] {
        assert!(!text.contains(detail), "{detail:?} in {text}");
    }
    assert!(text.contains("retry"), "{text}");
}

#[test]
fn nova_logs_in_to_keystone_and_finds_kubeplace_in_the_catalog() {
    let python = nova::nova_python();
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let ours = kubeplace(&ini);
    ks.add_placement_endpoint("kubeplace-nova", &ours.url());
    let login = nova::KeystoneLogin {
        auth_url: &format!("{}/v3", ks.url),
        username: "nova",
        password: &ks.password,
        project: "service",
        region: "kubeplace-nova",
    };
    let (success, steps, stderr) = nova::run_client_keystone(&python, &login);
    let failed: Vec<&Value> = steps
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["ok"] != true)
        .collect();
    assert!(
        failed.is_empty(),
        "steps where Nova got other than Placement 16 gives: {failed:#?}\nstderr: {stderr}"
    );
    assert!(success, "the client failed: {stderr}");
    assert_eq!(steps.len(), 47, "{steps:#?}");
    // The same client as a reader gets nowhere: its first write is refused.
    let login = nova::KeystoneLogin {
        username: "demo-reader",
        project: "demo",
        ..login
    };
    let (success, steps, _) = nova::run_client_keystone(&python, &login);
    assert!(!success);
    assert!(
        steps.iter().all(|(_, v)| v["ok"] != true) || steps.len() < 47,
        "{steps:#?}"
    );
}

#[test]
fn osc_placement_as_an_admin_and_as_a_reader() {
    let bin = osc_client::openstack_binary();
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let ours = kubeplace(&ini);
    ks.add_placement_endpoint("kubeplace-osc", &ours.url());
    let auth_url = format!("{}/v3", ks.url);
    let osc = |user: &str, project: &str, args: &str| {
        osc_client::run_keystone(
            &bin,
            &auth_url,
            (user, &ks.password, project, "kubeplace-osc"),
            &osc_client::split(args),
        )
    };
    let created = osc("demo-admin", "demo", "resource provider create cn1 -f json")
        .expect("the admin creates a provider");
    let uuid = created["uuid"].as_str().expect("a uuid").to_string();
    osc(
        "demo-admin",
        "demo",
        &format!("resource provider inventory set {uuid} --resource VCPU=4 -f json"),
    )
    .expect("the admin sets inventory");
    let list =
        osc("demo-admin", "demo", "resource provider list -f json").expect("the admin lists");
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");

    // A reader may not list providers: osc shows Placement's refusal.
    let refused = osc("demo-reader", "demo", "resource provider list -f json").unwrap_err();
    assert!(
        refused.contains("403")
            || refused.contains("Forbidden")
            || refused.contains("Policy does not allow"),
        "{refused}"
    );
    let refused = osc(
        "demo-reader",
        "demo",
        "resource provider create cn2 -f json",
    )
    .unwrap_err();
    assert!(
        refused.contains("placement:resource_providers:create"),
        "{refused}"
    );
    // It may read its own project's usages, and not another's.
    let demo = ks.project("demo");
    let usages = osc(
        "demo-reader",
        "demo",
        &format!("resource usage show {demo} -f json"),
    )
    .expect("the reader reads its usages");
    assert_eq!(usages, json!([]), "{usages}");
    let other = ks.project("other");
    assert!(
        osc(
            "demo-reader",
            "demo",
            &format!("resource usage show {other} -f json")
        )
        .is_err()
    );
    // Nothing the reader tried was written.
    let list = osc("demo-admin", "demo", "resource provider list -f json").unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
}

#[test]
fn a_section_that_cannot_be_honoured_stops_serve_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let section = "[keystone_authtoken]\nauth_url = http://127.0.0.1:1/v3\nauth_type = password\nusername = placement\npassword = p\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n";
    for (extra, said) in [
        ("auth_type = v3token\n", "auth_type = \"v3token\""),
        ("insecure = true\n", "insecure = \"true\""),
        (
            "token_cache_time = forever\n",
            "token_cache_time = \"forever\"",
        ),
        (
            "memcache_servers_typo = x\n",
            "memcache_servers_typo is not a key",
        ),
    ] {
        let path = dir.path().join("placement.conf");
        std::fs::write(&path, format!("{section}{extra}")).unwrap();
        let (status, stderr) = placement_server::serve_exits(
            &["--keystone-authtoken", path.to_str().unwrap()],
            Duration::from_secs(10),
        )
        .expect("serve exits");
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("placement.conf") && stderr.contains(said),
            "{stderr}"
        );
    }
    let (status, stderr) = placement_server::serve_exits(
        &["--keystone-authtoken", "/nonexistent/placement.conf"],
        Duration::from_secs(10),
    )
    .expect("serve exits");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/placement.conf"), "{stderr}");
    // The test mode that trusts headers is for loopback only.
    let (status, stderr) = placement_server::serve_exits(
        &["--test-roles-from-headers", "--listen", "0.0.0.0:0"],
        Duration::from_secs(10),
    )
    .expect("serve exits");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("loopback"), "{stderr}");
}

/// The request log names a Keystone caller: the user its token was issued to and the
/// project it is scoped to, as Keystone knows them.
#[test]
fn the_request_log_names_a_keystone_caller() {
    let ks = Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let ours = Server::start_logging(
        &["--keystone-authtoken", ini.to_str().expect("a UTF-8 path")],
        &[("RUST_LOG", "warn,kubeplace::placement_api::access=info")],
        &log,
    );
    let token = ks.token("nova", Scope::Project("service"));
    assert_eq!(
        status(&ours.url(), &token, "GET", "/resource_providers", None),
        200
    );
    drop(ours);
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("kubeplace::placement_api::access") && l.contains("status=200"))
        .unwrap_or_else(|| panic!("no request line in:\n{text}"));
    let (user, project) = (&ks.users["nova"], ks.project("service"));
    assert!(
        line.contains(&format!("user=\"{user}\""))
            && line.contains(&format!("project=\"{project}\"")),
        "{line}"
    );
}

/// kubeplace logs in with an application credential (`auth_type = v3applicationcredential`)
/// and validates callers' tokens with it; the section split over a file and a directory of
/// `*.conf` files, as deployers keep placement.conf and placement.conf.d. A deleted
/// application credential is refused at the next login, with what to check.
#[test]
fn an_application_credential_over_a_config_directory_logs_in_and_a_deleted_one_is_named() {
    let ks = Keystone::start();
    let placement_token = ks.token("placement", Scope::Project("service"));
    let user = &ks.users["placement"];
    let (made_status, _, made) = http(
        "POST",
        &format!("{}/v3/users/{user}/application_credentials", ks.url),
        &[("X-Auth-Token", &placement_token)],
        Some(&json!({"application_credential": {"name": "kubeplace",
            "roles": [{"name": "service"}]}})),
    );
    assert_eq!(made_status, 201, "{made}");
    let id = made["application_credential"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let secret = made["application_credential"]["secret"].as_str().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("placement.conf");
    std::fs::write(
        &main,
        format!(
            "[DEFAULT]\ndebug = false\n[keystone_authtoken]\nauth_url = {}\nauth_type = password\nusername = placement\npassword = wrong\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n",
            ks.url
        ),
    )
    .unwrap();
    let conf_d = dir.path().join("placement.conf.d");
    std::fs::create_dir(&conf_d).unwrap();
    std::fs::write(
        conf_d.join("50-application-credential.conf"),
        format!(
            "[keystone_authtoken]\nauth_type = v3applicationcredential\napplication_credential_id = {id}\napplication_credential_secret = {secret}\n"
        ),
    )
    .unwrap();
    let ours = Server::start(&[
        "--keystone-authtoken",
        main.to_str().unwrap(),
        "--keystone-authtoken",
        conf_d.to_str().unwrap(),
    ]);
    let admin = ks.token("demo-admin", Scope::Project("demo"));
    let (s, _, body) = call(
        &ours.url(),
        Some(&admin),
        "GET",
        "/resource_providers",
        None,
        &[],
    );
    assert_eq!(
        s, 200,
        "a caller's token validated by the application credential's login: {body}"
    );
    let reader = ks.token("demo-reader", Scope::Project("demo"));
    assert_eq!(
        status(
            &ours.url(),
            &reader,
            "POST",
            "/resource_providers",
            Some(&json!({"name": "x"}))
        ),
        403,
        "the caller's roles still decide"
    );

    // The application credential deleted: a client that logs in with it is told what to check.
    let (s, _, body) = http(
        "DELETE",
        &format!("{}/v3/users/{user}/application_credentials/{id}", ks.url),
        &[("X-Auth-Token", &placement_token)],
        None,
    );
    assert_eq!(s, 204, "{body}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args([
            "placement",
            "import",
            "--to-file",
            "-",
            "--keystone-authtoken",
        ])
        .arg(&main)
        .arg("--keystone-authtoken")
        .arg(&conf_d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "refused the login of application credential id {id}"
        )) && err.contains("may have expired or been deleted"),
        "{err}"
    );
}

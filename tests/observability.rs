//! What kubeplace shows of itself without a cluster: `kubeplace placement serve
//! --metrics-addr` counts its requests, searches and Keystone checks and reports the
//! capacity it serves under openstack-exporter's names (a real Keystone for the checks);
//! `kubeplace top` over files. The operator's `/metrics` on the real control plane, and the
//! chart's rules and dashboard against it: tests/e2e/observability.rs.

#[path = "support/keystone.rs"]
mod keystone;
mod placement_server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use placement_server::{
    CLOUD, CN1, CN2, LIGHT_SEARCH, Server, accelerator_cloud, heavy_search_running,
};
use serde_json::json;

/// A port free at the moment it is asked for.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The text of `/metrics` on `port`.
fn scrape(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the metrics port answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
        "{reply}"
    );
    reply
}

/// The value of one series (`name{labels}` exactly as exposed), if exposed.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// `placement serve ARGS` with metrics on a port of its own.
fn serve_with_metrics(args: &[&str]) -> (Server, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut all = vec!["--metrics-addr", addr.as_str()];
    all.extend_from_slice(args);
    (Server::start(&all), port)
}

#[test]
fn placement_requests_are_counted_by_route_template_status_and_microversion() {
    let (s, port) = serve_with_metrics(&["-f", CLOUD]);
    s.call(
        "GET",
        &format!("/resource_providers/{CN1}"),
        Some("1.14"),
        None,
    )
    .expect(200);
    s.call(
        "GET",
        &format!("/resource_providers/{CN1}"),
        Some("1.14"),
        None,
    )
    .expect(200);
    s.call(
        "GET",
        "/resource_providers/c0a80001-0000-4000-8000-0000000000ff",
        Some("1.39"),
        None,
    )
    .expect(404);
    s.raw("GET", "/resource_providers", &[], None).expect(401);
    s.raw(
        "BREW",
        "/no/such/path",
        &[("X-Auth-Token", "admin".into())],
        None,
    );
    let text = scrape(port);
    let route = "/resource_providers/{uuid}";
    assert_eq!(
        value(
            &text,
            &format!(
                r#"kubeplace_placement_requests_total{{route="{route}",method="GET",status="200",microversion="1.14"}}"#
            )
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!(
                r#"kubeplace_placement_requests_total{{route="{route}",method="GET",status="404",microversion="1.39"}}"#
            )
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!(
                r#"kubeplace_placement_request_duration_seconds_count{{route="{route}",method="GET"}}"#
            )
        ),
        Some(3.0),
        "{text}"
    );
    // Refused before any version was read: no microversion. A method and path no route
    // serves are one bounded label each, not what the caller sent.
    assert!(
        text.contains(
            r#"route="/resource_providers",method="GET",status="401",microversion="none""#
        ),
        "{text}"
    );
    assert!(text.contains(r#"route="unknown",method="other""#), "{text}");
    assert!(
        !text.contains("BREW") && !text.contains("0000000000ff"),
        "{text}"
    );
    // The cloud it serves, per host under openstack-exporter's names: cn1's tree summed.
    for (series, want) in [
        (
            r#"openstack_placement_resource_total{hostname="cn1",resourcetype="VCPU"}"#,
            8.0,
        ),
        (
            r#"openstack_placement_resource_usage{hostname="cn1",resourcetype="VCPU"}"#,
            2.0,
        ),
        (
            r#"openstack_placement_resource_total{hostname="cn1",resourcetype="DISK_GB"}"#,
            100.0,
        ),
        (
            r#"openstack_placement_resource_total{hostname="cn2",resourcetype="VCPU"}"#,
            4.0,
        ),
        (
            r#"openstack_placement_resource_allocation_ratio{hostname="cn2",resourcetype="VCPU"}"#,
            1.0,
        ),
        (
            r#"kubeplace_zone_capacity{zone="nova",resourcetype="VCPU"}"#,
            12.0,
        ),
        (
            r#"kubeplace_zone_usage{zone="nova",resourcetype="MEMORY_MB"}"#,
            512.0,
        ),
    ] {
        assert_eq!(value(&text, series), Some(want), "{series}\n{text}");
    }
    // A write shows in the next scrape: nothing is kept from before.
    s.call(
        "DELETE",
        "/allocations/9a000000-0000-4000-8000-00000000000a",
        Some("1.39"),
        None,
    )
    .expect(204);
    let text = scrape(port);
    assert_eq!(
        value(
            &text,
            r#"openstack_placement_resource_usage{hostname="cn1",resourcetype="VCPU"}"#
        ),
        Some(0.0),
        "{text}"
    );
}

#[test]
fn claims_the_api_decides_are_counted_and_its_refusals_by_reason() {
    let (s, port) = serve_with_metrics(&["-f", CLOUD]);
    let claim = |consumer: &str, vcpu: u64| {
        let body = json!({"allocations": {CN2: {"resources": {"VCPU": vcpu}}},
                          "project_id": "p", "user_id": "u",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        s.call(
            "PUT",
            &format!("/allocations/{consumer}"),
            Some("1.39"),
            Some(&body),
        )
        .status
    };
    assert_eq!(claim("9a000000-0000-4000-8000-0000000000b1", 3), 204);
    // cn2 has 4 VCPU: 3 taken, 2 more do not fit.
    assert_eq!(claim("9a000000-0000-4000-8000-0000000000b2", 2), 409);
    // Deleting a claim claims nothing.
    s.call(
        "DELETE",
        "/allocations/9a000000-0000-4000-8000-0000000000b1",
        Some("1.39"),
        None,
    )
    .expect(204);
    let text = scrape(port);
    for (series, want) in [
        (r#"kubeplace_claims_decided_total{kind="Allocation"}"#, 2.0),
        (
            r#"kubeplace_claims_refused_total{kind="Allocation",reason="no_room"}"#,
            1.0,
        ),
        (
            r#"kubeplace_claims_refused_total{kind="Allocation",reason="over_quota"}"#,
            0.0,
        ),
    ] {
        assert_eq!(value(&text, series), Some(want), "{series}\n{text}");
    }
}

#[test]
fn searches_refused_and_queued_are_counted() {
    let cloud = accelerator_cloud("observability", 4, 32);
    let (s, port) = serve_with_metrics(&[
        "-f",
        cloud.to_str().unwrap(),
        "--max-searches=1",
        "--max-queued-searches=0",
        "--search-deadline=3",
    ]);
    let before = value(&scrape(port), "kubeplace_placement_searches_refused_total")
        .expect("the counter is exposed from the start");
    let _heavy = heavy_search_running(&s);
    s.call("GET", LIGHT_SEARCH, Some("1.39"), None).expect(503);
    let text = scrape(port);
    // heavy_search_running's own probes are refused too: at least the one above.
    let refused = value(&text, "kubeplace_placement_searches_refused_total").unwrap();
    assert!(refused >= before + 1.0, "{text}");
    assert!(
        text.contains(r#"route="/allocation_candidates",method="GET",status="503""#),
        "{text}"
    );
}

#[test]
fn keystone_validations_are_counted_by_outcome_and_cache_hits_apart() {
    let ks = keystone::Keystone::start();
    let ini = ks.authtoken_file("authtoken.ini", &ks.url, "");
    let (s, port) = serve_with_metrics(&["--keystone-authtoken", ini.to_str().unwrap()]);
    let token = ks.token("demo-admin", keystone::Scope::Project("demo"));
    let with = |token: &str| {
        s.raw(
            "GET",
            "/resource_providers",
            &[("X-Auth-Token", token.to_string())],
            None,
        )
        .status
    };
    assert_eq!(with(&token), 200);
    assert_eq!(with(&token), 200, "the second is answered from the cache");
    assert_eq!(with("not-a-token-keystone-knows"), 401);
    let text = scrape(port);
    for (series, want) in [
        (
            r#"kubeplace_keystone_validations_total{outcome="valid"}"#,
            1.0,
        ),
        (
            r#"kubeplace_keystone_validations_total{outcome="invalid"}"#,
            1.0,
        ),
        ("kubeplace_keystone_token_cache_hits_total", 1.0),
    ] {
        assert_eq!(value(&text, series), Some(want), "{series}\n{text}");
    }
    // Keystone gone: a token not yet known cannot be checked.
    drop(ks);
    assert_eq!(with("another-token"), 503);
    let text = scrape(port);
    assert_eq!(
        value(
            &text,
            r#"kubeplace_keystone_validations_total{outcome="unavailable"}"#
        ),
        Some(1.0),
        "{text}"
    );
}

//! `kubeplace placement serve` against hostile clients: the limits of the Placement API hold
//! for every way a client can reach them. Searches are bounded however their path is spelled;
//! a caller the policy refuses is refused before its body is read; bodies cost the bytes that
//! arrive, whatever the frames they come in; idle connections, from one peer or many, never
//! keep a new client out; tokens are refused from their headers when too long or doubled.

mod placement_server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use placement_server::{CN1, Server, Slow, accelerator_cloud, heavy_search_running};

/// Every spelling the router answers of the three search routes waits for a search turn:
/// with the one turn held and no queue, each is refused at once with a 503.
#[test]
fn every_spelling_of_a_search_path_waits_for_a_turn() {
    let cloud = accelerator_cloud("spellings", 4, 32);
    let s = Server::start(&[
        "-f",
        cloud.to_str().unwrap(),
        "--max-searches=1",
        "--max-queued-searches=0",
        "--search-deadline=30",
    ]);
    let _heavy = heavy_search_running(&s);
    let candidates = "?resources=VCPU:1&limit=1";
    for path in [
        format!("/allocation_candidates{candidates}"),
        format!("//allocation_candidates{candidates}"),
        format!("///allocation_candidates//{candidates}"),
        format!("/allocation_candidates/{candidates}"),
        format!("//kubeplace/explain{candidates}"),
        format!("/kubeplace//explain{candidates}"),
        "//kubeplace/headroom?flavor=any".to_string(),
        "/kubeplace//headroom?flavor=any".to_string(),
        "/kubeplace/headroom/?flavor=any".to_string(),
        "//kubeplace//headroom//?flavor=any".to_string(),
    ] {
        let a = s.call("GET", &path, Some("1.39"), None);
        assert_eq!(a.status, 503, "{path} was not limited: {}", a.body);
        assert!(
            a.error().0.contains("1 searches are running and 0 waiting"),
            "{path}: {}",
            a.body
        );
    }
    let _ = std::fs::remove_file(cloud);
}

/// A caller Placement's policy does not allow to write is refused from the request's
/// headers: a reader announcing a megabyte body gets its 403 before sending it, and the
/// connection is closed.
#[test]
fn a_caller_the_policy_refuses_is_refused_before_the_body() {
    let s = Server::start(&["-f", placement_server::CLOUD, "--test-roles-from-headers"]);
    for (what, framing) in [
        ("announced", "Content-Length: 1000000"),
        ("chunked", "Transfer-Encoding: chunked"),
    ] {
        let mut slow = Slow::open(
            &s,
            &format!(
                "PUT /resource_providers/{CN1}/traits HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: reader:demo\r\nX-Roles: reader\r\nOpenStack-API-Version: placement 1.39\r\nContent-Type: application/json\r\n{framing}\r\n\r\n",
                s.addr
            ),
        );
        let started = Instant::now();
        slow.send(if what == "chunked" {
            b"1\r\n{\r\n"
        } else {
            b"{"
        });
        let a = slow
            .answer_within(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{what}: no answer before the body was sent"));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{what}: answered after {:?}",
            started.elapsed()
        );
        a.expect(403);
        assert!(
            a.error()
                .0
                .contains("placement:resource_providers:traits:update"),
            "{what}: {}",
            a.body
        );
        assert_eq!(a.header("connection"), Some("close"), "{what}");
        assert!(
            slow.closed_within(Duration::from_secs(3)),
            "{what}: the server kept the connection open for the body"
        );
    }
    // An admin sending the same request whole is answered.
    let a = s.raw(
        "PUT",
        &format!("/resource_providers/{CN1}/traits"),
        &[
            ("X-Auth-Token", "admin".into()),
            ("OpenStack-API-Version", "placement 1.39".into()),
            ("Content-Type", "application/json".into()),
        ],
        Some(r#"{"traits": [], "resource_provider_generation": 0}"#),
    );
    assert_ne!(a.status, 403, "{}", a.body);
}

/// Fifteen callers dripping their bodies one byte a frame, for four seconds: the server
/// holds the bytes sent, not a network buffer for each frame.
#[test]
fn bodies_dripped_a_byte_a_frame_cost_their_bytes() {
    let s = Server::seeded();
    // Answered once, so that the server's own memory is warm.
    s.call("GET", "/resource_providers", Some("1.39"), None)
        .expect(200);
    let before = s.peak_rss_kib();
    let mut senders: Vec<TcpStream> = (0..15)
        .map(|_| {
            let mut c = TcpStream::connect(&s.addr).expect("connect");
            c.set_nodelay(true).unwrap();
            c.write_all(
                format!(
                    "PUT /resource_providers/{CN1}/traits HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: admin\r\nOpenStack-API-Version: placement 1.39\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                    s.addr
                )
                .as_bytes(),
            )
            .unwrap();
            c
        })
        .collect();
    let started = Instant::now();
    let mut frames = 0u64;
    while started.elapsed() < Duration::from_secs(4) {
        for c in &mut senders {
            let _ = c.write_all(b"1\r\n \r\n");
        }
        frames += 1;
        std::thread::sleep(Duration::from_micros(500));
    }
    let grown_mib = (s.peak_rss_kib().saturating_sub(before)) / 1024;
    // Before bodies were copied as they arrived, each frame kept about 8 KiB: over 1 GB.
    assert!(
        grown_mib < 64,
        "15 bodies of {frames} one-byte frames grew the server by {grown_mib} MiB"
    );
    // The server still answers.
    s.call("GET", "/resource_providers", Some("1.39"), None)
        .expect(200);
}

/// Connects from `source`, any address of 127.0.0.0/8 (all this host's loopback).
fn connect_from(source: &str, to: &str) -> TcpStream {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket
        .bind(
            &format!("{source}:0")
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .expect("bind the source address");
    socket
        .connect(&to.parse::<std::net::SocketAddr>().unwrap().into())
        .expect("connect");
    socket.into()
}

/// One version discovery on `c`, kept alive; whether it was answered within `wait`.
fn discovery(c: &mut TcpStream, wait: Duration) -> bool {
    c.set_read_timeout(Some(wait)).unwrap();
    if c.write_all(b"GET / HTTP/1.1\r\nHost: kubeplace\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"}]}") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got.starts_with(b"HTTP/1.1 200")
}

/// 1,024 keep-alive connections, as many as the server holds, each answered once and then
/// idle: from four peers, or all from one. A new client is answered at once either way.
#[test]
fn idle_connections_never_keep_a_new_client_out() {
    let s = Server::seeded();
    for peers in [
        &["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"][..],
        &["127.0.0.6"][..],
    ] {
        let mut held = Vec::new();
        for i in 0..1024 {
            let mut c = connect_from(peers[i % peers.len()], &s.addr);
            // Answered while there is room; once the server is full, each new one takes
            // the place of an older idle one.
            assert!(
                discovery(&mut c, Duration::from_secs(5)),
                "connection {i} from {:?} was not answered",
                peers[i % peers.len()]
            );
            held.push(c);
        }
        let started = Instant::now();
        let mut newcomer = connect_from("127.0.0.9", &s.addr);
        assert!(
            discovery(&mut newcomer, Duration::from_secs(5)),
            "a new client was kept out by {} idle connections from {peers:?}",
            held.len()
        );
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_secs(2),
            "a new client waited {waited:?} behind idle connections from {peers:?}"
        );
    }
}

/// A token is refused from the headers when two are sent or it is longer than any
/// token this server takes, before it is compared or sent anywhere.
#[test]
fn tokens_doubled_or_too_long_are_refused() {
    let s = Server::start(&["--token", "sesame"]);
    let twice = s.raw(
        "GET",
        "/resource_providers",
        &[
            ("X-Auth-Token", "sesame".into()),
            ("X-Auth-Token", "other".into()),
        ],
        None,
    );
    twice.expect(401);
    assert!(twice.body.contains("More than one token"), "{}", twice.body);
    let long = s.raw(
        "GET",
        "/resource_providers",
        &[("X-Auth-Token", "x".repeat(9000))],
        None,
    );
    long.expect(401);
    assert!(long.body.contains("9000 bytes"), "{}", long.body);
    // One token of the right kind still passes.
    s.raw(
        "GET",
        "/resource_providers",
        &[("X-Auth-Token", "sesame".into())],
        None,
    )
    .expect(200);
}

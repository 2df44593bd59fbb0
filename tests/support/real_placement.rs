//! Real OpenStack Placement 16 (the virtualenv of `hack/placement-venv.sh`) on SQLite on
//! 127.0.0.1, started by `hack/placement-serve.py`, and a small blocking client for any
//! Placement endpoint (real or kubeplace's), plus a proxy that can change Placement between
//! two requests or stop answering.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

/// The venv's python, or a failure that says how to make it.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("KUBEPLACE_PLACEMENT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/kubeplace/placement-venv")
        });
    let manage = venv.join("bin/placement-manage");
    assert!(
        manage.is_file(),
        "{} is missing: run hack/placement-venv.sh to create the Placement virtualenv (python3 and PyPI needed)",
        manage.display()
    );
    venv.join("bin/python")
}

/// A running Placement, killed when dropped.
pub struct RealPlacement {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for RealPlacement {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RealPlacement {
    /// A fresh, empty Placement.
    pub fn start() -> RealPlacement {
        RealPlacement::start_with(&[])
    }

    /// A fresh Placement on the empty database at `database_url` (an SQLAlchemy URL), or
    /// on SQLite in a directory of its own.
    pub fn start_on(database_url: Option<&str>) -> RealPlacement {
        match database_url {
            Some(url) => RealPlacement::start_with(&["--database-url", url]),
            None => RealPlacement::start(),
        }
    }

    /// A fresh, empty Placement behind keystonemiddleware, configured by the
    /// `[keystone_authtoken]` section of `authtoken`, with its default policies.
    pub fn start_with_keystone(authtoken: &std::path::Path) -> RealPlacement {
        RealPlacement::start_with(&[
            "--keystone-authtoken",
            authtoken.to_str().expect("a UTF-8 path"),
        ])
    }

    /// A fresh, empty Placement that believes a proxy's `Forwarded` and `X-Forwarded-*`
    /// headers (`[oslo_middleware] enable_proxy_headers_parsing`).
    pub fn start_with_proxy_headers() -> RealPlacement {
        RealPlacement::start_with(&["--proxy-headers"])
    }

    /// A fresh, empty Placement with these `[placement]` options (`KEY=VALUE`).
    pub fn start_with_options(options: &[&str]) -> RealPlacement {
        let args: Vec<String> = options
            .iter()
            .map(|o| format!("--placement-option={o}"))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RealPlacement::start_with(&args)
    }

    fn start_with(args: &[&str]) -> RealPlacement {
        let python = python();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/placement-serve.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(dir.path())
            .args(args)
            .env("PYTHONHASHSEED", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("placement-serve.py starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("a line from placement-serve.py");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("placement-serve.py said {line:?}"))
            .to_string();
        RealPlacement {
            child,
            url,
            _dir: dir,
        }
    }
}

/// A request to `url` (http://HOST:PORT) with the admin token at 1.39; status and body.
pub fn call(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    call_as(url, "admin", method, path, body)
}

/// [`call`] with another token.
pub fn call_as(
    url: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nX-Auth-Token: {token}\r\nOpenStack-API-Version: placement 1.39\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        request.push_str("Content-Type: application/json\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let value = if body.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string()))
    };
    (status, value)
}

/// [`call`] that must answer 2xx; the body.
#[track_caller]
pub fn ok(url: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let (status, answer) = call(url, method, path, body);
    assert!(
        (200..300).contains(&status),
        "{method} {path} {}: {status} {answer}",
        body.map(|b| b.to_string()).unwrap_or_default()
    );
    answer
}

/// What the proxy does before forwarding a request: given the request's head (its line,
/// then its headers) and how many requests came before it; `false` stops it answering
/// (the connection is dropped).
pub type Hook = dyn Fn(&str, usize) -> bool + Send + Sync;

/// A proxy in front of a Placement: each request is forwarded (one connection each) after
/// the hook has run. Listens until the test ends.
pub fn proxy(upstream: &str, hook: Arc<Hook>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let upstream = upstream.trim_start_matches("http://").to_string();
    let count = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let upstream = upstream.clone();
            let hook = hook.clone();
            let count = count.clone();
            std::thread::spawn(move || {
                let Some((head, request)) = read_request(&mut conn) else {
                    return;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                if !hook(&head, n) {
                    return;
                }
                let Ok(mut up) = TcpStream::connect(&upstream) else {
                    return;
                };
                let _ = up.write_all(&request);
                let mut answer = Vec::new();
                let _ = up.read_to_end(&mut answer);
                let _ = conn.write_all(&answer);
            });
        }
    });
    url
}

/// One request from a connection, rewritten to close the connection after its answer; its
/// head and the bytes to forward.
fn read_request(conn: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let end = loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while got.len() < end + 4 + length {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let mut request = String::new();
    for l in head.lines() {
        let lower = l.to_ascii_lowercase();
        if lower.starts_with("connection:") {
            continue;
        }
        request.push_str(l);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\n\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(&got[end + 4..end + 4 + length]);
    Some((head, bytes))
}

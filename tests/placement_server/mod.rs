//! `kubeplace placement serve` as a real process on a free 127.0.0.1 port, and a small
//! blocking HTTP/1.1 client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The seed manifest of the tests.
pub const CLOUD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/placement-api/cloud.yaml"
);

/// Uuids of the seeded providers.
pub const CN1: &str = "c0a80001-0000-4000-8000-000000000001";
pub const CN1_NUMA0: &str = "c0a80001-0000-4000-8000-000000000011";
pub const CN2: &str = "c0a80001-0000-4000-8000-000000000002";
/// The seeded consumer.
pub const VM_A: &str = "9a000000-0000-4000-8000-00000000000a";

/// A running server, killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `kubeplace placement serve --listen 127.0.0.1:0` with `args`, and waits for
    /// its `listening on` line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .args(["placement", "serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kubeplace placement serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("a line from the server");
        let addr = line
            .trim()
            .rsplit("http://")
            .next()
            .filter(|a| a.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// Seeded with tests/data/placement-api/cloud.yaml.
    pub fn seeded() -> Server {
        Server::start(&["-f", CLOUD])
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A request with the token and a microversion (`None`: no version header).
    pub fn call(&self, method: &str, path: &str, mv: Option<&str>, body: Option<&Value>) -> Answer {
        let mut headers = vec![("X-Auth-Token", "admin".to_string())];
        if let Some(mv) = mv {
            headers.push(("OpenStack-API-Version", format!("placement {mv}")));
        }
        let body = body.map(|b| b.to_string());
        if body.is_some() {
            headers.push(("Content-Type", "application/json".to_string()));
        }
        self.raw(method, path, &headers, body.as_deref())
    }

    /// A request with exactly these headers.
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Option<&str>,
    ) -> Answer {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let body = body.unwrap_or("");
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read");
        Answer::parse(&raw)
    }
}

/// A response: status, headers (lower-case names) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    fn parse(raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_string(),
        }
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// Asserts the status, showing the body when it differs.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Answer {
        assert_eq!(self.status, status, "body: {}", self.body);
        self
    }

    /// The first error's detail and code.
    pub fn error(&self) -> (String, Option<String>) {
        let v = self.json();
        let e = &v["errors"][0];
        (
            e["detail"].as_str().unwrap_or_default().to_string(),
            e["code"].as_str().map(str::to_string),
        )
    }
}

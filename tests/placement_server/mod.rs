//! `kubeplace placement serve` as a real process on a free 127.0.0.1 port, and a small
//! blocking HTTP/1.1 client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
        Server::spawn(args, &[], Stdio::inherit())
    }

    /// [`Server::start`] with `env` set and its standard error written to `log`.
    pub fn start_logging(args: &[&str], env: &[(&str, &str)], log: &std::path::Path) -> Server {
        let file = std::fs::File::create(log).expect("the log file");
        Server::spawn(args, env, Stdio::from(file))
    }

    fn spawn(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .args(["placement", "serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("KUBEPLACE_PLACEMENT_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
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

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's peak resident memory so far, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmHWM line")
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

/// `kubeplace placement serve ARGS` expected to refuse to start: its exit status and
/// standard error, or `Err` with what it printed when it was still running after `wait`
/// (it is killed then).
pub fn serve_exits(args: &[&str], wait: Duration) -> Result<(ExitStatus, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["placement", "serve"])
        .args(args)
        .env_remove("KUBEPLACE_PLACEMENT_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeplace placement serve starts");
    let deadline = Instant::now() + wait;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err)
                .expect("stderr");
            return Ok((status, err));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let mut out = String::new();
            let _ = child
                .stdout
                .take()
                .expect("stdout")
                .read_to_string(&mut out);
            return Err(out);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A connection that sends a request piece by piece and reads the answer as it comes.
pub struct Slow {
    pub stream: TcpStream,
    got: Vec<u8>,
}

impl Slow {
    /// Connects and sends `head` (request line and headers, ending in an empty line).
    pub fn open(server: &Server, head: &str) -> Slow {
        let mut stream = TcpStream::connect(&server.addr).expect("connect");
        stream.write_all(head.as_bytes()).expect("send the head");
        Slow {
            stream,
            got: Vec::new(),
        }
    }

    /// Sends part of the body; false once the server no longer takes it.
    pub fn send(&mut self, part: &[u8]) -> bool {
        self.stream
            .write_all(part)
            .and_then(|_| self.stream.flush())
            .is_ok()
    }

    /// Reads until a whole response head is in, for at most `wait`; the response when it
    /// came (its body as far as it arrived).
    pub fn answer_within(&mut self, wait: Duration) -> Option<Answer> {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = find(&self.got, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.got[..end]).to_string();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if self.got.len() >= end + 4 + length {
                    return Some(Answer::parse(&self.got));
                }
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("timeout");
            match self.stream.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
                Err(_) => return None,
            }
        }
    }

    /// Whether the server closes the connection within `wait` (reading whatever else it
    /// sends).
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 4096];
        loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("timeout");
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
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

/// A cloud of `trees` compute nodes with `accelerators` one-FPGA children each, written to
/// a file of its own.
pub fn accelerator_cloud(name: &str, trees: usize, accelerators: usize) -> std::path::PathBuf {
    let mut docs = Vec::new();
    for t in 0..trees {
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: cn{t}}}\nspec:\n  inventories:\n    VCPU: {{total: 64}}\n    MEMORY_MB: {{total: 65536}}\n"
        ));
        for a in 0..accelerators {
            docs.push(format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: cn{t}-fpga{a}}}\nspec:\n  parent: cn{t}\n  inventories:\n    FPGA: {{total: 1}}\n"
            ));
        }
    }
    let path = std::env::temp_dir().join(format!(
        "kubeplace-{name}-{}-{trees}x{accelerators}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, docs.join("---\n")).expect("write the cloud");
    path
}

/// Eight one-FPGA groups on distinct providers over four trees of 32 FPGAs: billions of
/// combinations. Asked below 1.29 with `limit=1`, the search still walks them all (Placement
/// summarises every provider any candidate uses), keeping next to nothing: it runs to its
/// whole budget of steps, longer than 10 s in a test build.
pub fn heavy_search() -> String {
    let groups: String = (1..=8).map(|i| format!("&resources{i}=FPGA:1")).collect();
    format!("/allocation_candidates?resources=VCPU:1{groups}&group_policy=isolate&limit=1")
}

/// The microversion [`heavy_search`] is asked at.
pub const HEAVY_MV: &str = "1.28";

/// A search that ends at once.
pub const LIGHT_SEARCH: &str = "/allocation_candidates?resources=VCPU:1&limit=1";

/// Sends the heavy search on a connection of its own and returns once it holds the server's
/// one search turn (a light search is refused): sent again when a light search held the turn
/// at the moment it arrived.
pub fn heavy_search_running(s: &Server) -> Slow {
    let started = Instant::now();
    'send: loop {
        let mut heavy = Slow::open(
            s,
            &format!(
                "GET {} HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: admin\r\nOpenStack-API-Version: placement {HEAVY_MV}\r\n\r\n",
                heavy_search(),
                s.addr
            ),
        );
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the heavy search never took the turn"
            );
            std::thread::sleep(Duration::from_millis(20));
            let a = s.call("GET", LIGHT_SEARCH, Some("1.39"), None);
            if a.status == 503 {
                return heavy;
            }
            a.expect(200);
            if let Some(refused) = heavy.answer_within(Duration::from_millis(1)) {
                refused.expect(503);
                continue 'send;
            }
        }
    }
}

//! `kubeplace placement import` and `export` against a Placement that is not to be trusted:
//! answers far larger than any real one (declared, undeclared, or dripped one byte a
//! chunk), more providers than the limit, uuids no Placement holds, a Placement that never
//! answers. Each run is the real binary; its peak resident memory is read from
//! /proc/PID/status (VmHWM) while it runs, and it is killed past 1.5 GiB so that a run that
//! would fill the machine fails the test instead.
//!
//! The hostile answers come from a small server in this file: real Placement cannot be made
//! to send them. The temporary file of `--to-file` is checked against real Placement 16
//! (`hack/placement-venv.sh`) through a proxy that holds the first request while a link is
//! planted.

#[path = "support/real_placement.rs"]
mod real_placement;

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use real_placement::{RealPlacement, ok, proxy};
use serde_json::json;

const MIB: usize = 1 << 20;
/// A run past this much resident memory is killed (and fails its test).
const KILL_ABOVE_KIB: u64 = 1536 * 1024;

/// How a large answer's length is told.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// `Content-Length`.
    Length,
    /// `Transfer-Encoding: chunked`, chunks of this many bytes.
    Chunks(usize),
    /// Neither: the answer ends when the connection closes.
    Close,
}

/// What the fake Placement answers to one path.
#[derive(Clone, Debug)]
enum Answer {
    /// 200 with this JSON body.
    Json(String),
    /// 200 with `{"KEY": [ENTRY, ENTRY, …]}` of `bytes` bytes.
    Large {
        key: &'static str,
        entry: &'static str,
        bytes: usize,
        framing: Framing,
    },
    /// Nothing: the request is read and never answered.
    Silent,
}

/// What an empty Placement 16 answers.
fn empty(path: &str) -> Answer {
    let key = path
        .split('?')
        .next()
        .unwrap_or_default()
        .trim_start_matches('/');
    Answer::Json(format!("{{\"{key}\": []}}"))
}

const CLASS: &str = r#"{"name":"VCPU","links":[{"rel":"self","href":"/resource_classes/VCPU"}]}"#;
const PROVIDER: &str = r#"{"uuid":"a0000000-0000-4000-8000-000000000001","name":"cn1","generation":1,"parent_provider_uuid":null,"root_provider_uuid":"a0000000-0000-4000-8000-000000000001","links":[]}"#;

/// A fake Placement on 127.0.0.1 answering each request's path (query included) as
/// `answer` says, on kept-alive connections, until the test ends. Its URL.
fn fake(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || serve_connection(conn, &*answer));
        }
    });
    url
}

fn serve_connection(conn: TcpStream, answer: &dyn Fn(&str) -> Answer) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut out = BufWriter::with_capacity(4 * MIB, conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        match answer(&path) {
            Answer::Json(body) => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                if out.write_all(head.as_bytes()).is_err()
                    || out.write_all(body.as_bytes()).is_err()
                    || out.flush().is_err()
                {
                    return;
                }
            }
            Answer::Large {
                key,
                entry,
                bytes,
                framing,
            } => {
                // The client stopping midway is what is tested: a failed write ends it.
                let _ = send_large(&mut out, key, entry, bytes, framing);
                return;
            }
            Answer::Silent => {
                // Until the client goes.
                let _ = reader.read(&mut [0; 1]);
                return;
            }
        }
    }
}

fn send_large(
    out: &mut impl Write,
    key: &str,
    entry: &str,
    bytes: usize,
    framing: Framing,
) -> std::io::Result<()> {
    let head = format!("{{\"{key}\": [");
    let unit = format!("{entry},");
    let room = bytes - head.len() - entry.len() - 2;
    let count = room / unit.len();
    let tail = format!("{entry}{}]}}", " ".repeat(room - count * unit.len()));
    let framing_header = match framing {
        Framing::Length => format!("Content-Length: {bytes}\r\n"),
        Framing::Chunks(_) => "Transfer-Encoding: chunked\r\n".to_string(),
        Framing::Close => "Connection: close\r\n".to_string(),
    };
    out.write_all(
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing_header}\r\n")
            .as_bytes(),
    )?;
    let wire = |data: &[u8]| -> Vec<u8> {
        match framing {
            Framing::Chunks(n) => {
                let mut w = Vec::with_capacity(data.len() * 2 + 16);
                for piece in data.chunks(n) {
                    w.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    w.extend_from_slice(piece);
                    w.extend_from_slice(b"\r\n");
                }
                w
            }
            _ => data.to_vec(),
        }
    };
    const BLOCK: usize = 4096;
    out.write_all(&wire(head.as_bytes()))?;
    let block = wire(unit.repeat(BLOCK).as_bytes());
    for _ in 0..count / BLOCK {
        out.write_all(&block)?;
    }
    out.write_all(&wire(
        format!("{}{tail}", unit.repeat(count % BLOCK)).as_bytes(),
    ))?;
    if let Framing::Chunks(_) = framing {
        out.write_all(b"0\r\n\r\n")?;
    }
    out.flush()
}

/// One run of the binary and what it took.
struct Run {
    code: Option<i32>,
    stderr: String,
    /// Peak resident memory (VmHWM), KiB.
    peak_kib: u64,
    /// Killed for passing [`KILL_ABOVE_KIB`].
    killed: bool,
    took: Duration,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}{}, peak {} MiB, {:.1} s: {}",
            self.code,
            if self.killed { " (killed)" } else { "" },
            self.peak_kib / 1024,
            self.took.as_secs_f64(),
            self.stderr
        )
    }
}

fn binary() -> String {
    // KUBEPLACE_BIN runs these tests against another build (the one before a change).
    std::env::var("KUBEPLACE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kubeplace").into())
}

/// Runs `kubeplace ARGS`, reading its peak resident memory while it runs.
fn run(args: &[&str]) -> Run {
    let started = Instant::now();
    let mut child = Command::new(binary())
        .args(args)
        .env_remove("OS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeplace runs");
    let mut pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    let status_file = format!("/proc/{}/status", child.id());
    let (mut peak_kib, mut killed) = (0, false);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        let status = std::fs::read_to_string(&status_file).unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        };
        peak_kib = peak_kib.max(kib("VmHWM:").unwrap_or(0));
        if kib("VmRSS:").unwrap_or(0) > KILL_ABOVE_KIB {
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        code,
        stderr: reader.join().expect("stderr read"),
        peak_kib,
        killed,
        took: started.elapsed(),
    }
}

/// `import --from URL --to-file FILE ARGS`.
fn import(url: &str, file: &Path, args: &[&str]) -> Run {
    let mut all = vec![
        "placement",
        "import",
        "--from",
        url,
        "--to-file",
        file.to_str().expect("a UTF-8 path"),
    ];
    all.extend_from_slice(args);
    run(&all)
}

/// The fake Placement with one large answer at `at`, every other answer an empty one's.
fn with_large(at: &'static str, answer: Answer) -> String {
    fake(move |path| {
        if path == at {
            answer.clone()
        } else {
            empty(path)
        }
    })
}

#[test]
fn an_answer_past_the_default_limit_is_refused_before_memory_grows() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    // 300 MiB, past the default 256 MiB: declared (refused unread), and undeclared in 1 MiB
    // chunks (refused at 256 MiB received).
    for framing in [Framing::Length, Framing::Chunks(MIB)] {
        let url = with_large(
            "/resource_classes",
            Answer::Large {
                key: "resource_classes",
                entry: CLASS,
                bytes: 300 * MIB,
                framing,
            },
        );
        let r = import(&url, &file, &[]);
        eprintln!("{framing:?}: {r}");
        assert_eq!(r.code, Some(1), "{framing:?}: {r}");
        assert!(
            r.stderr.contains("GET /resource_classes")
                && r.stderr.contains("256 MiB")
                && r.stderr.contains("--max-answer-bytes")
                && r.stderr.contains("nothing was written"),
            "{framing:?}: {r}"
        );
        // The answer's buffer (256 MiB at most) and the program.
        assert!(r.peak_kib < 400 * 1024, "{framing:?}: {r}");
        assert!(!file.exists(), "{framing:?}");
    }
}

#[test]
fn an_answer_past_a_lower_limit_is_refused_however_it_is_framed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    // 50 MiB against a limit of 4 MiB: declared, undeclared (the connection's end), in
    // 64 KiB chunks, and dripped a byte a chunk (frames that must not each cost more than
    // their byte).
    for (framing, limit, said) in [
        (Framing::Length, "4MiB", "4 MiB"),
        (Framing::Close, "4MiB", "4 MiB"),
        (Framing::Chunks(64 << 10), "4MiB", "4 MiB"),
        (Framing::Chunks(1), "64KiB", "64 KiB"),
    ] {
        let url = with_large(
            "/resource_providers",
            Answer::Large {
                key: "resource_providers",
                entry: PROVIDER,
                bytes: 50 * MIB,
                framing,
            },
        );
        let r = import(&url, &file, &["--max-answer-bytes", limit]);
        eprintln!("{framing:?}: {r}");
        assert_eq!(r.code, Some(1), "{framing:?}: {r}");
        assert!(
            r.stderr.contains("GET /resource_providers")
                && r.stderr.contains(said)
                && r.stderr.contains("--max-answer-bytes")
                && r.stderr.contains("nothing was written"),
            "{framing:?}: {r}"
        );
        assert!(r.peak_kib < 120 * 1024, "{framing:?}: {r}");
        // A drip of 64 KiB is read in well under the request's own 60 s deadline.
        assert!(r.took < Duration::from_secs(40), "{framing:?}: {r}");
        assert!(!file.exists(), "{framing:?}");
    }

    // Export reads its target with the same client and limits, and writes nothing.
    let manifest = dir.path().join("source.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU: {total: 4}\n",
    )
    .unwrap();
    let url = with_large(
        "/resource_providers",
        Answer::Large {
            key: "resource_providers",
            entry: PROVIDER,
            bytes: 50 * MIB,
            framing: Framing::Chunks(64 << 10),
        },
    );
    let r = run(&[
        "placement",
        "export",
        "--to",
        &url,
        "-f",
        manifest.to_str().unwrap(),
        "--max-answer-bytes",
        "4MiB",
    ]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains("GET /resource_providers")
            && r.stderr.contains("--max-answer-bytes")
            && r.stderr.contains("nothing was written"),
        "{r}"
    );
    assert!(r.peak_kib < 120 * 1024, "{r}");

    // A limit that is not a size is refused, saying what is taken.
    let r = import(&url, &file, &["--max-answer-bytes", "lots"]);
    assert_eq!(r.code, Some(2), "{r}");
    assert!(
        r.stderr.contains("\"lots\" is not a size") && r.stderr.contains("MiB"),
        "{r}"
    );
}

#[test]
fn a_large_answer_within_the_limit_is_read_in_bounded_memory() {
    // 50 MiB of resource classes (about 700,000 entries, none custom): typed, kept as the
    // names it has, not as a tree of JSON values. The run completes and writes its (empty)
    // manifest.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let url = with_large(
        "/resource_classes",
        Answer::Large {
            key: "resource_classes",
            entry: CLASS,
            bytes: 50 * MIB,
            framing: Framing::Length,
        },
    );
    let r = import(&url, &file, &[]);
    eprintln!("{r}");
    assert_eq!(r.code, Some(0), "{r}");
    assert!(r.peak_kib < 300 * 1024, "{r}");
    assert!(file.exists());
}

#[test]
fn more_providers_than_the_limit_are_refused_while_the_list_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    // 50 MiB of providers: about 270,000 entries, past the default 100,000.
    let url = with_large(
        "/resource_providers",
        Answer::Large {
            key: "resource_providers",
            entry: PROVIDER,
            bytes: 50 * MIB,
            framing: Framing::Length,
        },
    );
    let r = import(&url, &file, &[]);
    eprintln!("{r}");
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains("more than 100000 providers")
            && r.stderr.contains("--max-providers")
            && r.stderr.contains("nothing was written"),
        "{r}"
    );
    assert!(r.peak_kib < 300 * 1024, "{r}");
    assert!(r.took < Duration::from_secs(30), "{r}");
    assert!(!file.exists());

    // A lower limit, on a small Placement.
    let url = fake(|path| match path {
        "/resource_providers" => Answer::Json(
            json!({"resource_providers": [
                provider_entry("a0000000-0000-4000-8000-000000000001", "cn1"),
                provider_entry("a0000000-0000-4000-8000-000000000002", "cn2"),
                provider_entry("a0000000-0000-4000-8000-000000000003", "cn3"),
            ]})
            .to_string(),
        ),
        _ => empty(path),
    });
    let r = import(&url, &file, &["--max-providers", "2"]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(r.stderr.contains("more than 2 providers"), "{r}");
    assert!(!file.exists());
}

#[test]
fn more_allocations_than_the_limit_are_refused_as_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    // Two providers, each with the allocations of two consumers.
    let url = fake(|path| {
        let consumers = json!({
            "c0000000-0000-4000-8000-000000000001": {"resources": {"VCPU": 1}},
            "c0000000-0000-4000-8000-000000000002": {"resources": {"VCPU": 1}},
        });
        if path == "/resource_providers" {
            Answer::Json(
                json!({"resource_providers": [
                    provider_entry("a0000000-0000-4000-8000-000000000001", "cn1"),
                    provider_entry("a0000000-0000-4000-8000-000000000002", "cn2"),
                ]})
                .to_string(),
            )
        } else if path.ends_with("/inventories") {
            Answer::Json(
                json!({"resource_provider_generation": 1,
                       "inventories": {"VCPU": {"total": 8}}})
                .to_string(),
            )
        } else if path.ends_with("/allocations") && path.starts_with("/resource_providers/") {
            Answer::Json(
                json!({"resource_provider_generation": 1, "allocations": consumers}).to_string(),
            )
        } else if path.ends_with("/traits") {
            Answer::Json(r#"{"resource_provider_generation": 1, "traits": []}"#.into())
        } else if path.ends_with("/aggregates") {
            Answer::Json(r#"{"resource_provider_generation": 1, "aggregates": []}"#.into())
        } else {
            empty(path)
        }
    });
    let r = import(&url, &file, &["--max-allocations", "3"]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains("more than 3 allocations")
            && r.stderr.contains("--max-allocations")
            && r.stderr.contains("nothing was written"),
        "{r}"
    );
    assert!(!file.exists());
}

fn provider_entry(uuid: &str, name: &str) -> serde_json::Value {
    json!({"uuid": uuid, "name": name, "generation": 1, "parent_provider_uuid": null,
           "root_provider_uuid": uuid, "links": []})
}

/// A fake Placement of these providers, each with no inventories, traits, aggregates or
/// allocations (generation 1), uuids in its paths matched as given.
fn placement_of(providers: Vec<serde_json::Value>) -> String {
    let list = json!({"resource_providers": providers}).to_string();
    fake(move |path| {
        let sub = |what: &str| {
            path.strip_prefix("/resource_providers/")
                .and_then(|rest| rest.strip_suffix(what))
                .is_some()
        };
        if path == "/resource_providers" {
            Answer::Json(list.clone())
        } else if sub("/inventories") {
            Answer::Json(r#"{"resource_provider_generation": 1, "inventories": {}}"#.into())
        } else if sub("/traits") {
            Answer::Json(r#"{"resource_provider_generation": 1, "traits": []}"#.into())
        } else if sub("/aggregates") {
            Answer::Json(r#"{"resource_provider_generation": 1, "aggregates": []}"#.into())
        } else if sub("/allocations") {
            Answer::Json(r#"{"resource_provider_generation": 1, "allocations": {}}"#.into())
        } else {
            empty(path)
        }
    })
}

#[test]
fn provider_uuids_differing_only_in_case_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let lower = "a0000000-0000-4000-8000-00000000abcd";
    let upper = "A0000000-0000-4000-8000-00000000ABCD";
    let url = placement_of(vec![
        provider_entry(lower, "cn-lower"),
        provider_entry(upper, "cn-upper"),
    ]);
    let r = import(&url, &file, &[]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr
            .contains(&format!("provider \"cn-lower\" ({lower})"))
            && r.stderr
                .contains(&format!("provider \"cn-upper\" ({upper})"))
            && r.stderr.contains("differ only in case")
            && r.stderr.contains("nothing was written"),
        "{r}"
    );
    assert!(!file.exists());

    // Either alone is imported.
    let url = placement_of(vec![provider_entry(upper, "cn-upper")]);
    let r = import(&url, &file, &[]);
    assert_eq!(r.code, Some(0), "{r}");
    assert!(std::fs::read_to_string(&file).unwrap().contains(upper));
}

#[test]
fn uuids_and_generations_that_are_not_are_refused_naming_the_provider_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let good = "a0000000-0000-4000-8000-000000000001";
    let cases = [
        (
            json!({"uuid": "not-a-uuid", "name": "cn1", "generation": 1}),
            "provider \"cn1\" (the 1st listed): its uuid is \"not-a-uuid\", not a uuid",
        ),
        (
            json!({"uuid": 7, "name": "cn1", "generation": 1}),
            "provider \"cn1\" (the 1st listed): its uuid is 7, not a uuid",
        ),
        (
            json!({"uuid": good, "name": "cn1", "generation": "1"}),
            "provider \"cn1\" (a0000000-0000-4000-8000-000000000001): its generation is \"1\", not a generation",
        ),
        (
            json!({"uuid": good, "name": "cn1", "generation": -1}),
            "its generation is -1, not a generation",
        ),
        (
            json!({"uuid": good, "name": "cn1", "generation": 1, "parent_provider_uuid": "x"}),
            "provider \"cn1\" (a0000000-0000-4000-8000-000000000001): its parent_provider_uuid is \"x\", not a uuid",
        ),
    ];
    for (entry, said) in cases {
        let url = placement_of(vec![entry.clone()]);
        let r = import(&url, &file, &[]);
        assert_eq!(r.code, Some(1), "{entry}: {r}");
        assert!(
            r.stderr.contains("GET /resource_providers")
                && r.stderr.contains(said)
                && r.stderr.contains("nothing was written"),
            "{entry}: {r}"
        );
        assert!(!file.exists(), "{entry}");
    }

    // A provider's own answer with a generation that is not one.
    let url = fake(move |path| {
        if path == "/resource_providers" {
            Answer::Json(json!({"resource_providers": [provider_entry(good, "cn1")]}).to_string())
        } else if path.ends_with("/inventories") {
            Answer::Json(r#"{"resource_provider_generation": null, "inventories": {}}"#.into())
        } else {
            empty(path)
        }
    });
    let r = import(&url, &file, &[]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains(&format!("GET /resource_providers/{good}/inventories"))
            && r.stderr.contains(
                "provider \"cn1\" (a0000000-0000-4000-8000-000000000001): its resource_provider_generation is null, not a generation"
            ),
        "{r}"
    );
}

#[test]
fn a_run_past_its_timeout_stops_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    // The provider list never comes.
    let url = fake(|path| match path {
        "/resource_providers" => Answer::Silent,
        _ => empty(path),
    });
    let r = import(&url, &file, &["--timeout", "2"]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains("--timeout (2 s)")
            && r.stderr.contains("GET /resource_providers")
            && r.stderr.contains("nothing was written"),
        "{r}"
    );
    assert!(r.took < Duration::from_secs(10), "{r}");
    assert!(!file.exists());
}

#[test]
fn the_temporary_file_is_new_and_no_planted_link_is_followed() {
    let placement = RealPlacement::start();
    ok(
        &placement.url,
        "POST",
        "/resource_providers",
        Some(&json!({"uuid": "a0000000-0000-4000-8000-000000000001", "name": "cn1"})),
    );
    // The first request waits until the link is planted (the name has the run's pid).
    let planted = Arc::new(AtomicBool::new(false));
    let hook = {
        let planted = planted.clone();
        move |_: &str, _: usize| {
            while !planted.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            true
        }
    };
    let url = proxy(&placement.url, Arc::new(hook));
    let outside = tempfile::tempdir().unwrap();

    // A link to a file of someone else's, and a dangling link.
    for dangling in [false, true] {
        planted.store(false, Ordering::SeqCst);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cloud.yaml");
        std::fs::write(&file, "# an earlier import\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let victim = outside
            .path()
            .join(if dangling { "absent" } else { "precious" });
        if !dangling {
            std::fs::write(&victim, "precious\n").unwrap();
        }
        let child = Command::new(binary())
            .args(["placement", "import", "--from", &url, "--to-file"])
            .arg(&file)
            .env_remove("OS_TOKEN")
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubeplace runs");
        let link = dir.path().join(format!(".cloud.yaml.{}.tmp", child.id()));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        planted.store(true, Ordering::SeqCst);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");

        let what = std::fs::symlink_metadata(&file).unwrap();
        assert!(
            what.file_type().is_file(),
            "the target is a file of its own"
        );
        assert_eq!(
            what.permissions().mode() & 0o777,
            0o640,
            "its permissions kept"
        );
        assert!(
            std::fs::read_to_string(&file)
                .unwrap()
                .contains("name: cn1")
        );
        if dangling {
            assert!(!victim.exists(), "the dangling link's target was made");
        } else {
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        }
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "the planted link is left as it was"
        );
        // Nothing else is left beside the target.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                link.file_name().unwrap().to_string_lossy().into_owned(),
                "cloud.yaml".to_string()
            ]
        );
    }
}

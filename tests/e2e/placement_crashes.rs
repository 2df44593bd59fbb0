//! Placement writes over a cluster, all or nothing across crashes (issue 39): API clients
//! move allocations between consumers (`POST /allocations`, Nova's migrations), reshape a
//! provider tree (`POST /reshaper`) and race claims (`PUT`/`DELETE /allocations/{c}`)
//! while the only replica is SIGKILLed again and again, at random moments and right after
//! a move or reshape was sent. Black box: only the Placement API (and kubectl at the end)
//! is asked, so the test does not depend on how the writes are made whole.
//!
//! What must hold:
//! - a sampler reading through the API every 20 ms (a project's usages, one read spanning
//!   every provider; the reshaped tree's candidates; each mover provider's usages) never
//!   sees a write half done: a move conserves the project's totals, a reshape its class;
//! - a client re-reading its consumers (before each write, so after one without an answer
//!   too) finds them whole: before or after a write, never a mix. A mover that finds its
//!   pair half moved for [`SETTLE`] leaves it so and goes on with a new pair; the reshaper
//!   stops;
//! - at the end every consumer holds exactly its last acknowledged state or one of the
//!   unacknowledged attempts after it; every provider's usages are the sum of its
//!   consumers' allocations (read by consumer and by provider), are within capacity, and
//!   are what kubectl shows (the Allocations' sums and the ResourceProviders' status).
//!
//! `KUBEPLACE_CRASH_KILLS` sets the number of kills (default 100); with 0 the clients run
//! for `KUBEPLACE_CRASH_SECONDS` (default 60) with no kill. `KUBEPLACE_CRASH_SEED` repeats
//! a run's random choices (each run prints its seed). The second test runs the same
//! clients, sampler and final checks against `kubeplace placement serve` (writes whole
//! under one lock, no kill): they must find nothing there.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::placement_api::{ACCESS, token};
use super::support::{self, ControlPlane};
use super::{Operator, private_with_crds};

/// Resources per provider uuid, amounts per class.
type Allocs = BTreeMap<String, BTreeMap<String, u64>>;

const MOVERS: usize = 3;
const CLAIMERS: usize = 2;
const P_MOVE: &str = "crash-move-project";
const P_RESHAPE: &str = "crash-reshape-project";
const P_CLAIM: &str = "crash-claim-project";
const USER: &str = "crash-user";
/// What each mover's instance (or its migration record) holds.
const MOVER_VCPU: u64 = 2;
const MOVER_MEMORY: u64 = 512;
/// Pairs a mover may use: room for all of them, both consumers holding, on its provider.
const PAIRS: usize = 4;
/// The reshaped class: its inventory and the reshaper consumer's share of it move between
/// the root and its child.
const RESHAPED: &str = "VGPU";
const RESHAPED_TOTAL: u64 = 4;
const RESHAPED_USED: u64 = 2;
/// The reshaper consumer's share of the root that never moves.
const ROOT_MEMORY: u64 = 256;
/// Claim providers: VCPU total 4, 1 reserved, ratio 1: room for 3.
const CLAIM_TOTAL: u64 = 4;
const CLAIM_RESERVED: u64 = 1;

fn uuid(kind: u32, n: usize) -> String {
    format!("c7a5{kind:04x}-0000-4000-8000-{n:012x}")
}

fn mover_provider(i: usize) -> String {
    uuid(0x10, i)
}
/// Mover `i`'s `k`th instance (a mover starts a new pair when it finds one left half
/// moved, leaving that one as it is for the final checks).
fn instance(i: usize, k: usize) -> String {
    uuid(0x11, i * 16 + k)
}
fn migration(i: usize, k: usize) -> String {
    uuid(0x12, i * 16 + k)
}
fn root() -> String {
    uuid(0x20, 0)
}
fn child() -> String {
    uuid(0x20, 1)
}
fn reshaped_consumer() -> String {
    uuid(0x21, 0)
}
fn claim_provider(i: usize) -> String {
    uuid(0x30, i)
}

/// A small xorshift generator: no dependency, and a seed to print.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One request; `None` when no answer came (refused, reset, closed before a status line:
/// the replica died or is restarting).
fn try_call(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nOpenStack-API-Version: placement 1.39\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-Auth-Token: {token}\r\n\r\n",
        body.len()
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body.as_bytes()).ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let status: u16 = reply.split_whitespace().nth(1)?.parse().ok()?;
    let (head, text) = reply.split_once("\r\n\r\n")?;
    // A reply cut short by the replica's death is no answer.
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    if length.is_some_and(|n| text.len() < n) {
        return None;
    }
    Some((status, serde_json::from_str(text).unwrap_or(Value::Null)))
}

/// How many unexpected answers are kept and printed.
const KEPT: u64 = 40;
/// A client's wait after a 409 or an unexpected answer before it reads again.
const BACKOFF: Duration = Duration::from_millis(20);

/// What the run shares: the stop flag, counters and what went wrong.
struct Shared {
    port: u16,
    token: String,
    started: Instant,
    stop: AtomicBool,
    /// Multi-object writes (moves and reshapes) sent so far, for the killer's aim.
    sent: AtomicU64,
    moves: AtomicU64,
    reshapes: AtomicU64,
    claims: AtomicU64,
    claims_refused: AtomicU64,
    deletes: AtomicU64,
    unknown: AtomicU64,
    /// 409s answered to moves, reshapes and claim deletions.
    conflicts: [AtomicU64; 3],
    /// Unexpected answers in all (only the first [`KEPT`] are kept).
    error_count: AtomicU64,
    unavailable: AtomicU64,
    sampler_reads: AtomicU64,
    sampler_skipped: AtomicU64,
    /// Sampler reads that showed a total not conserved (an episode of them is one
    /// violation).
    sampler_bad_reads: AtomicU64,
    /// Movers and the reshaper still writing (one that finds its consumers left half done
    /// stops, so that the damage stays for the final checks).
    writing: AtomicU64,
    /// What each mover's provider is expected to hold, for the sampler.
    expect: Mutex<Vec<MoverExpect>>,
    /// Half-done writes seen through the API: by the sampler or by a client's re-read.
    violations: Mutex<Vec<String>>,
    /// Answers a sound test never gets (a 400, an unexpected status): test bugs.
    errors: Mutex<Vec<String>>,
}

impl Shared {
    fn new(port: u16, token: &str) -> Shared {
        let zero = || AtomicU64::new(0);
        Shared {
            port,
            token: token.to_string(),
            started: Instant::now(),
            stop: AtomicBool::new(false),
            sent: zero(),
            moves: zero(),
            reshapes: zero(),
            claims: zero(),
            claims_refused: zero(),
            deletes: zero(),
            unknown: zero(),
            conflicts: [zero(), zero(), zero()],
            error_count: zero(),
            unavailable: zero(),
            sampler_reads: zero(),
            sampler_skipped: zero(),
            sampler_bad_reads: zero(),
            writing: zero(),
            expect: Mutex::new(vec![MoverExpect::default(); MOVERS]),
            violations: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        }
    }

    fn violation(&self, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        eprintln!("VIOLATION at {at:.3}s: {what}");
        self.violations
            .lock()
            .unwrap()
            .push(format!("at {at:.3}s: {what}"));
    }

    /// An answer Placement would not give to these requests; the client waits a moment
    /// and goes on.
    fn error(&self, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        if self.error_count.fetch_add(1, Ordering::SeqCst) < KEPT {
            eprintln!("UNEXPECTED at {at:.3}s: {what}");
            self.errors
                .lock()
                .unwrap()
                .push(format!("at {at:.3}s: {what}"));
        }
        std::thread::sleep(BACKOFF);
    }

    /// A 409 of kind `k` (0 moves, 1 reshapes, 2 deletions): counted, and a moment's wait
    /// before the client reads again and retries.
    fn conflict(&self, k: usize) {
        self.conflicts[k].fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(BACKOFF);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        try_call(self.port, method, path, &self.token, body)
    }

    /// A read retried until it answers 200 (the replica may be down for a while).
    fn read(&self, path: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match self.call("GET", path, None) {
                Some((200, v)) => return v,
                Some((503, _)) | None => {}
                Some((status, v)) => panic!("GET {path}: {status} {v}"),
            }
            assert!(
                Instant::now() < deadline,
                "GET {path} had no answer for 120 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `{"RP": {"resources": {...}, ...}}` → resources per provider (empty classes dropped).
fn allocs_of(v: &Value) -> Allocs {
    let mut out = Allocs::new();
    if let Some(map) = v.as_object() {
        for (rp, entry) in map {
            let res: BTreeMap<String, u64> = entry["resources"]
                .as_object()
                .map(|r| {
                    r.iter()
                        .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                        .filter(|(_, n)| *n > 0)
                        .collect()
                })
                .unwrap_or_default();
            if !res.is_empty() {
                out.insert(rp.clone(), res);
            }
        }
    }
    out
}

fn res(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(c, n)| (c.to_string(), *n)).collect()
}

fn on(rp: &str, resources: BTreeMap<String, u64>) -> Allocs {
    BTreeMap::from([(rp.to_string(), resources)])
}

fn body_allocs(a: &Allocs) -> Value {
    Value::Object(
        a.iter()
            .map(|(rp, r)| (rp.clone(), json!({"resources": r})))
            .collect(),
    )
}

/// What a write's author knows of its consumers' state: the last acknowledged state and
/// every attempt without an answer since.
#[derive(Clone, Debug)]
struct Track<S> {
    acked: S,
    attempts: Vec<S>,
}

impl<S: Clone + PartialEq + std::fmt::Debug> Track<S> {
    fn new(s: S) -> Self {
        Track {
            acked: s,
            attempts: Vec::new(),
        }
    }
    fn ack(&mut self, s: S) {
        self.acked = s;
        self.attempts.clear();
    }
    fn allows(&self, s: &S) -> bool {
        &self.acked == s || self.attempts.contains(s)
    }
}

/// A mover's pair: (instance's allocations, migration record's allocations).
type Pair = (Allocs, Allocs);

/// Sums every group of a 1.38 `GET /usages` answer: per class, and `consumer_count`.
fn project_totals(v: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Some(groups) = v["usages"].as_object() {
        for group in groups.values() {
            if let Some(g) = group.as_object() {
                for (k, n) in g {
                    *out.entry(k.clone()).or_insert(0) += n.as_u64().unwrap_or(0);
                }
            }
        }
    }
    out.retain(|_, n| *n > 0);
    out
}

/// How long a client re-reads a mix before calling it left half done (a mix that goes away
/// was still seen by a reader: a violation too, but the client goes on).
const SETTLE: Duration = Duration::from_secs(5);

/// What a client's read found: whole, a mix seen for a moment, or a mix that stays.
enum Found<S> {
    Whole(S),
    Passing(S, String),
    Stays(S, String),
}

/// Reads with `read` until it gives one of `whole`, for up to [`SETTLE`] once a mix shows.
fn whole_or_mix<S: PartialEq + std::fmt::Debug, G>(
    whole: &[&S],
    mut read: impl FnMut() -> (S, G, String),
) -> (Found<S>, G) {
    let (mut now, mut gens, mut body) = read();
    if whole.contains(&&now) {
        return (Found::Whole(now), gens);
    }
    let first = format!("{now:?}: {body}");
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        (now, gens, body) = read();
        if whole.contains(&&now) {
            return (Found::Passing(now, first), gens);
        }
    }
    let mix = format!("{now:?}: {body}");
    (Found::Stays(now, mix), gens)
}

/// What the sampler expects of a mover: the pairs it left half moved (as they were left)
/// and whether its current pair holds (`Some(true)`), may or may not yet (`None`: being
/// created) or does not exist (`Some(false)`).
#[derive(Clone, Debug)]
struct MoverExpect {
    left: Vec<Pair>,
    live: Option<bool>,
}

impl Default for MoverExpect {
    fn default() -> Self {
        MoverExpect {
            left: Vec::new(),
            live: Some(true),
        }
    }
}

/// The mover's holding on its provider.
fn holding(i: usize) -> Allocs {
    on(
        &mover_provider(i),
        res(&[("VCPU", MOVER_VCPU), ("MEMORY_MB", MOVER_MEMORY)]),
    )
}

/// Amounts per class (and `consumer_count`).
type Totals = BTreeMap<String, u64>;

/// Every total the sampler may read: for the project (with `consumer_count`) and for each
/// mover's provider, one per combination of the pairs being created holding or not.
fn expected_totals(expect: &[MoverExpect]) -> (Vec<Totals>, Vec<Vec<Totals>>) {
    let per_mover: Vec<Vec<BTreeMap<String, u64>>> = expect
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut base = BTreeMap::new();
            let add = |a: &Allocs, m: &mut BTreeMap<String, u64>| {
                for r in a.values() {
                    for (c, n) in r {
                        *m.entry(c.clone()).or_insert(0) += n;
                    }
                }
                if !a.is_empty() {
                    *m.entry("consumer_count".to_string()).or_insert(0) += 1;
                }
            };
            for (x, y) in &e.left {
                add(x, &mut base);
                add(y, &mut base);
            }
            let mut with = base.clone();
            add(&holding(i), &mut with);
            match e.live {
                Some(true) => vec![with],
                Some(false) => vec![base],
                None => vec![base, with],
            }
        })
        .collect();
    let mut project = vec![BTreeMap::new()];
    for options in &per_mover {
        project = project
            .iter()
            .flat_map(|p: &BTreeMap<String, u64>| {
                options.iter().map(move |o| {
                    let mut sum = p.clone();
                    for (c, n) in o {
                        *sum.entry(c.clone()).or_insert(0) += n;
                    }
                    sum
                })
            })
            .collect();
    }
    let per_provider = per_mover
        .into_iter()
        .map(|options| {
            options
                .into_iter()
                .map(|mut o| {
                    o.remove("consumer_count");
                    o
                })
                .collect()
        })
        .collect();
    (project, per_provider)
}

/// Why a mover's pair stopped being moved.
enum PairEnd {
    Stopped,
    LeftHalfMoved(Pair),
}

/// Moves pair `k` of mover `i` until the run stops or the pair is found left half moved.
fn move_pair(shared: &Shared, i: usize, k: usize) -> (Track<Pair>, PairEnd) {
    let (mp, inst, mig) = (mover_provider(i), instance(i, k), migration(i, k));
    let a: Pair = (holding(i), Allocs::new());
    let b: Pair = (Allocs::new(), holding(i));
    let mut track = Track::new(a.clone());
    let mut unanswered = false;
    // One read of the provider shows both consumers at once, with their generations.
    let read = || {
        let v = shared.read(&format!("/resource_providers/{mp}/allocations"));
        let (ai, am) = (&v["allocations"][&inst], &v["allocations"][&mig]);
        let now: Pair = (allocs_of(&json!({&mp: ai})), allocs_of(&json!({&mp: am})));
        let gens = (
            ai.get("consumer_generation")
                .cloned()
                .unwrap_or(Value::Null),
            am.get("consumer_generation")
                .cloned()
                .unwrap_or(Value::Null),
        );
        (now, gens, v.to_string())
    };
    while !shared.stopped() {
        let context = |track: &Track<Pair>, unanswered: bool| {
            format!(
                "acknowledged {:?}, unanswered attempts since {:?}{}",
                track.acked,
                track.attempts,
                if unanswered {
                    "; the last write had no answer"
                } else {
                    ""
                }
            )
        };
        let (found, (gi, gm)) = whole_or_mix(&[&a, &b], read);
        let now = match found {
            Found::Whole(now) => now,
            Found::Passing(now, mix) => {
                shared.violation(format!(
                    "mover {i}: instance {inst} and migration {mig} read as a mix for a \
                     moment ({}): {mix}",
                    context(&track, unanswered)
                ));
                now
            }
            Found::Stays(now, mix) => {
                shared.violation(format!(
                    "mover {i}: instance {inst} and migration {mig} left half moved for \
                     {SETTLE:?} and more ({}); left so for the final checks: {mix}",
                    context(&track, unanswered)
                ));
                return (track, PairEnd::LeftHalfMoved(now));
            }
        };
        let target = if now == a { b.clone() } else { a.clone() };
        let body = json!({
            &inst: {"allocations": body_allocs(&target.0), "project_id": P_MOVE,
                    "user_id": USER, "consumer_generation": gi, "consumer_type": "INSTANCE"},
            &mig: {"allocations": body_allocs(&target.1), "project_id": P_MOVE,
                   "user_id": USER, "consumer_generation": gm, "consumer_type": "MIGRATION"},
        });
        shared.sent.fetch_add(1, Ordering::SeqCst);
        match shared.call("POST", "/allocations", Some(&body)) {
            Some((204, _)) => {
                shared.moves.fetch_add(1, Ordering::Relaxed);
                track.ack(target);
                unanswered = false;
            }
            Some((409, _)) => {
                shared.conflict(0);
            }
            Some((503, _)) => {
                shared.unavailable.fetch_add(1, Ordering::Relaxed);
                track.attempts.push(target);
                unanswered = true;
            }
            None => {
                shared.unknown.fetch_add(1, Ordering::Relaxed);
                track.attempts.push(target);
                unanswered = true;
            }
            Some((status, answer)) => {
                shared.error(format!("mover {i}: POST /allocations: {status} {answer}"))
            }
        }
    }
    (track, PairEnd::Stopped)
}

/// Creates pair `k`'s instance holding (a plain claim), retried across kills.
fn new_pair(shared: &Shared, i: usize, k: usize) {
    let inst = instance(i, k);
    let body = json!({"allocations": body_allocs(&holding(i)), "project_id": P_MOVE,
                      "user_id": USER, "consumer_generation": null,
                      "consumer_type": "INSTANCE"});
    loop {
        match shared.call("PUT", &format!("/allocations/{inst}"), Some(&body)) {
            Some((204, _)) => return,
            Some((409, _)) | Some((503, _)) | None => {
                let now = allocs_of(&shared.read(&format!("/allocations/{inst}"))["allocations"]);
                if now == holding(i) {
                    return;
                }
            }
            Some((status, answer)) => {
                panic!("mover {i}: PUT /allocations/{inst}: {status} {answer}")
            }
        }
    }
}

/// Mover `i`: its pairs, each with what it knows of it.
fn mover(shared: &Shared, i: usize) -> Vec<Track<Pair>> {
    let mut tracks = Vec::new();
    for k in 0..PAIRS {
        if k > 0 {
            new_pair(shared, i, k);
            shared.expect.lock().unwrap()[i].live = Some(true);
        }
        let (track, end) = move_pair(shared, i, k);
        tracks.push(track);
        match end {
            PairEnd::Stopped => break,
            PairEnd::LeftHalfMoved(now) => {
                let mut expect = shared.expect.lock().unwrap();
                expect[i].left.push(now);
                expect[i].live = if k + 1 < PAIRS { None } else { Some(false) };
            }
        }
    }
    shared.writing.fetch_sub(1, Ordering::SeqCst);
    tracks
}

/// The reshaped tree's state: the consumer's allocations, the root's and the child's
/// inventory of the reshaped class.
type Shape = (Allocs, Option<u64>, Option<u64>);

fn reshaped_total(inventories: &Value) -> Option<u64> {
    inventories["inventories"][RESHAPED]["total"].as_u64()
}

/// The tree read as whole (three reads, repeated until two in a row agree, generations
/// included): the state, the generations of the consumer, the root and the child, and
/// what was read.
fn read_shape(shared: &Shared) -> (Shape, (Value, Value, Value), String) {
    let (r, c, x) = (root(), child(), reshaped_consumer());
    let read = || {
        let xa = shared.read(&format!("/allocations/{x}"));
        let ri = shared.read(&format!("/resource_providers/{r}/inventories"));
        let ci = shared.read(&format!("/resource_providers/{c}/inventories"));
        (xa, ri, ci)
    };
    let mut last = read();
    loop {
        let again = read();
        if again == last {
            let (xa, ri, ci) = again;
            let shape = (
                allocs_of(&xa["allocations"]),
                reshaped_total(&ri),
                reshaped_total(&ci),
            );
            let body = format!("consumer {xa}, root {ri}, child {ci}");
            return (
                shape,
                (
                    xa["consumer_generation"].clone(),
                    ri["resource_provider_generation"].clone(),
                    ci["resource_provider_generation"].clone(),
                ),
                body,
            );
        }
        last = again;
    }
}

fn shape_on_root() -> Shape {
    (
        on(
            &root(),
            res(&[("MEMORY_MB", ROOT_MEMORY), (RESHAPED, RESHAPED_USED)]),
        ),
        Some(RESHAPED_TOTAL),
        None,
    )
}

fn shape_on_child() -> Shape {
    let mut a = on(&root(), res(&[("MEMORY_MB", ROOT_MEMORY)]));
    a.insert(child(), res(&[(RESHAPED, RESHAPED_USED)]));
    (a, None, Some(RESHAPED_TOTAL))
}

fn inventories_body(with_reshaped: bool, fixed: (&str, u64)) -> Value {
    let mut inv = serde_json::Map::new();
    inv.insert(fixed.0.into(), json!({"total": fixed.1}));
    if with_reshaped {
        inv.insert(RESHAPED.into(), json!({"total": RESHAPED_TOTAL}));
    }
    Value::Object(inv)
}

fn reshaper(shared: &Shared) -> Track<Shape> {
    let (on_root, on_child) = (shape_on_root(), shape_on_child());
    let mut track = Track::new(on_root.clone());
    let mut unanswered = false;
    let what = format!(
        "consumer {} and the {RESHAPED} inventories of root {} and child {}",
        reshaped_consumer(),
        root(),
        child()
    );
    while !shared.stopped() {
        let context = format!(
            "acknowledged {:?}, unanswered attempts since {:?}{}",
            track.acked,
            track.attempts,
            if unanswered {
                "; the last write had no answer"
            } else {
                ""
            }
        );
        let (found, (gx, gr, gc)) = whole_or_mix(&[&on_root, &on_child], || read_shape(shared));
        let now = match found {
            Found::Whole(now) => now,
            Found::Passing(now, mix) => {
                shared.violation(format!(
                    "reshaper: {what} read as a mix for a moment ({context}): {mix}"
                ));
                now
            }
            Found::Stays(_, mix) => {
                shared.violation(format!(
                    "reshaper: {what} left half reshaped for {SETTLE:?} and more \
                     ({context}); the reshaper stops, leaving them so: {mix}"
                ));
                break;
            }
        };
        let target = if now == on_root {
            on_child.clone()
        } else {
            on_root.clone()
        };
        let body = json!({
            "inventories": {
                root(): {"resource_provider_generation": gr,
                         "inventories": inventories_body(target.1.is_some(), ("MEMORY_MB", 1024))},
                child(): {"resource_provider_generation": gc,
                          "inventories": inventories_body(target.2.is_some(), ("DISK_GB", 100))},
            },
            "allocations": {
                reshaped_consumer(): {"allocations": body_allocs(&target.0),
                                      "project_id": P_RESHAPE, "user_id": USER,
                                      "consumer_generation": gx, "consumer_type": "INSTANCE"},
            },
        });
        shared.sent.fetch_add(1, Ordering::SeqCst);
        match shared.call("POST", "/reshaper", Some(&body)) {
            Some((204, _)) => {
                shared.reshapes.fetch_add(1, Ordering::Relaxed);
                track.ack(target);
                unanswered = false;
            }
            Some((409, _)) => {
                shared.conflict(1);
            }
            Some((503, _)) => {
                shared.unavailable.fetch_add(1, Ordering::Relaxed);
                track.attempts.push(target);
                unanswered = true;
            }
            None => {
                shared.unknown.fetch_add(1, Ordering::Relaxed);
                track.attempts.push(target);
                unanswered = true;
            }
            Some((status, answer)) => {
                shared.error(format!("reshaper: POST /reshaper: {status} {answer}"))
            }
        }
    }
    shared.writing.fetch_sub(1, Ordering::SeqCst);
    track
}

/// Claims a VCPU or two on a claim provider with new consumers, holds up to three and
/// deletes the oldest; returns every consumer it used with what it knows of it.
fn claimer(shared: &Shared, n: usize, seed: u64) -> HashMap<String, Track<Allocs>> {
    let mut rng = Rng(seed | 1);
    let mut tracks: HashMap<String, Track<Allocs>> = HashMap::new();
    let mut held: VecDeque<String> = VecDeque::new();
    let mut next = 0;
    while !shared.stopped() {
        if held.len() >= 3 || (!held.is_empty() && rng.below(3) == 0) {
            let c = held.pop_front().expect("a held claim");
            loop {
                match shared.call("DELETE", &format!("/allocations/{c}"), None) {
                    Some((204, _)) => {
                        shared.deletes.fetch_add(1, Ordering::Relaxed);
                        tracks.get_mut(&c).unwrap().ack(Allocs::new());
                        break;
                    }
                    Some((404, _)) => {
                        let t = tracks.get_mut(&c).unwrap();
                        if !t.allows(&Allocs::new()) {
                            shared.violation(format!(
                                "claimer {n}: consumer {c} was lost: acknowledged {:?}, \
                                 DELETE answers 404",
                                t.acked
                            ));
                        }
                        t.ack(Allocs::new());
                        break;
                    }
                    Some((409, _)) => {
                        shared.conflict(2);
                    }
                    answer => {
                        if let Some((503, _)) = answer {
                            shared.unavailable.fetch_add(1, Ordering::Relaxed);
                        } else if let Some((status, v)) = answer {
                            shared.error(format!("claimer {n}: DELETE {c}: {status} {v}"));
                            break;
                        } else {
                            shared.unknown.fetch_add(1, Ordering::Relaxed);
                        }
                        tracks.get_mut(&c).unwrap().attempts.push(Allocs::new());
                        let now =
                            allocs_of(&shared.read(&format!("/allocations/{c}"))["allocations"]);
                        if now.is_empty() {
                            break;
                        }
                    }
                }
                if shared.stopped() {
                    break;
                }
            }
            continue;
        }
        let c = uuid(0x31 + n as u32, next);
        next += 1;
        let rp = claim_provider(rng.below(2) as usize);
        let want = on(&rp, res(&[("VCPU", 1 + rng.below(2))]));
        let mut track = Track::new(Allocs::new());
        let body = json!({"allocations": body_allocs(&want), "project_id": P_CLAIM,
                          "user_id": USER, "consumer_generation": null,
                          "consumer_type": "INSTANCE"});
        match shared.call("PUT", &format!("/allocations/{c}"), Some(&body)) {
            Some((204, _)) => {
                shared.claims.fetch_add(1, Ordering::Relaxed);
                track.ack(want);
                held.push_back(c.clone());
            }
            Some((409, _)) => {
                shared.claims_refused.fetch_add(1, Ordering::Relaxed);
            }
            answer => {
                if let Some((503, _)) = answer {
                    shared.unavailable.fetch_add(1, Ordering::Relaxed);
                } else if let Some((status, v)) = &answer {
                    shared.error(format!("claimer {n}: PUT {c}: {status} {v}"));
                } else {
                    shared.unknown.fetch_add(1, Ordering::Relaxed);
                }
                track.attempts.push(want.clone());
                let now = allocs_of(&shared.read(&format!("/allocations/{c}"))["allocations"]);
                if !track.allows(&now) {
                    shared.violation(format!(
                        "claimer {n}: consumer {c} reads {now:?} after an unanswered claim \
                         of {want:?}"
                    ));
                }
                if !now.is_empty() {
                    held.push_back(c.clone());
                }
            }
        }
        tracks.insert(c, track);
    }
    tracks
}

/// Reads through the API every 20 ms; any 200 must show every conserved total.
fn sampler(shared: &Shared) {
    let expect_reshape = res(&[
        (RESHAPED, RESHAPED_USED),
        ("MEMORY_MB", ROOT_MEMORY),
        ("consumer_count", 1),
    ]);
    let mut paths = vec![
        format!("/usages?project_id={P_MOVE}"),
        format!("/usages?project_id={P_RESHAPE}"),
        format!("/allocation_candidates?resources={RESHAPED}:1"),
    ];
    paths.extend((0..MOVERS).map(|i| format!("/resource_providers/{}/usages", mover_provider(i))));
    // Per path: whether the last read showed a total not conserved. A run of such reads is
    // one episode, recorded once with its first body.
    let mut bad = vec![false; paths.len()];
    while !shared.stopped() {
        let round = Instant::now();
        for (n, path) in paths.iter().enumerate() {
            // What the movers left half moved (once they found it so) counts as it is; what
            // was expected before the read or after it.
            let before = expected_totals(&shared.expect.lock().unwrap());
            let v = match shared.call("GET", path, None) {
                Some((200, v)) => v,
                Some((503, _)) | None => {
                    shared.sampler_skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Some((status, v)) => {
                    shared.error(format!("sampler: GET {path}: {status} {v}"));
                    continue;
                }
            };
            shared.sampler_reads.fetch_add(1, Ordering::Relaxed);
            let after = expected_totals(&shared.expect.lock().unwrap());
            let union = |a: &[Totals], b: &[Totals]| -> Vec<Totals> {
                let set: BTreeSet<Totals> = a.iter().chain(b).cloned().collect();
                set.into_iter().collect()
            };
            let project = union(&before.0, &after.0);
            let provider = |i: usize| union(&before.1[i], &after.1[i]);
            let (got, want) = if path.contains(P_MOVE) {
                (project_totals(&v), project)
            } else if path.contains(P_RESHAPE) {
                (project_totals(&v), vec![expect_reshape.clone()])
            } else if path.starts_with("/allocation_candidates") {
                // Every provider of the tree the candidates come from, each once: the
                // class's capacity and use across the tree.
                let mut sums = BTreeMap::new();
                if let Some(ps) = v["provider_summaries"].as_object() {
                    for summary in ps.values() {
                        let r = &summary["resources"][RESHAPED];
                        for k in ["capacity", "used"] {
                            *sums.entry(k.to_string()).or_insert(0) += r[k].as_u64().unwrap_or(0);
                        }
                    }
                }
                (
                    sums,
                    vec![res(&[
                        ("capacity", RESHAPED_TOTAL),
                        ("used", RESHAPED_USED),
                    ])],
                )
            } else {
                let mut u: BTreeMap<String, u64> = v["usages"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                            .collect()
                    })
                    .unwrap_or_default();
                u.retain(|_, n| *n > 0);
                (u, provider(n - 3))
            };
            if !want.contains(&got) {
                shared.sampler_bad_reads.fetch_add(1, Ordering::Relaxed);
                if !bad[n] {
                    shared.violation(format!(
                        "sampler: GET {path} shows {got:?}, conserved {}: {v}",
                        want.iter()
                            .map(|w| format!("{w:?}"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ));
                }
            }
            bad[n] = !want.contains(&got);
        }
        if let Some(rest) = Duration::from_millis(20).checked_sub(round.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

/// Waits until the Placement API answers `GET /` on `port`; `log` says why not.
fn api_ready(port: u16, within: Duration, log: impl Fn() -> String) {
    let deadline = Instant::now() + within;
    while !matches!(try_call(port, "GET", "/", "", None), Some((200, _))) {
        assert!(
            Instant::now() < deadline,
            "the Placement API did not answer within {within:?}:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGKILLs the replica and starts it again with the same arguments and ports.
fn kill_and_restart(cp: &ControlPlane, op: Operator, port: u16, n: usize) -> Operator {
    op.process.kill();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
    cmd.current_dir(super::ROOT).args(&op.args);
    let process = cp.spawn(cmd, &format!("kubeplace-crash-{n}"));
    let op = Operator {
        process,
        metrics_port: op.metrics_port,
        args: op.args,
        webhook_config: op.webhook_config,
    };
    api_ready(port, Duration::from_secs(90), || op.process.output());
    op
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Usages per provider from `GET /resource_providers/{u}/usages`, zeros dropped.
fn usages(shared: &Shared, rp: &str) -> BTreeMap<String, u64> {
    let v = shared.read(&format!("/resource_providers/{rp}/usages"));
    let mut u: BTreeMap<String, u64> = v["usages"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    u.retain(|_, n| *n > 0);
    u
}

fn add_into(
    sum: &mut BTreeMap<String, BTreeMap<String, u64>>,
    rp: &str,
    r: &BTreeMap<String, u64>,
) {
    let e = sum.entry(rp.to_string()).or_default();
    for (c, n) in r {
        *e.entry(c.clone()).or_insert(0) += n;
    }
}

/// Per provider uuid: amounts per class.
type Usages = BTreeMap<String, BTreeMap<String, u64>>;

/// The providers (uuid → name), inventories and starting allocations, through the API.
fn set_up(shared: &Shared) -> BTreeMap<String, String> {
    let setup = |method: &str, path: &str, body: Value| {
        let answer = shared.call(method, path, Some(&body));
        assert!(
            matches!(answer, Some((200..=204, _))),
            "setup {method} {path}: {answer:?}"
        );
    };
    let provider = |uuid: &str, name: &str, parent: Option<&str>, inventories: Value| {
        let mut body = json!({"name": name, "uuid": uuid});
        if let Some(p) = parent {
            body["parent_provider_uuid"] = json!(p);
        }
        setup("POST", "/resource_providers", body);
        setup(
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            json!({"resource_provider_generation": 0, "inventories": inventories}),
        );
    };
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for i in 0..MOVERS {
        let name = format!("crash-mover-{i}");
        // Room for both consumers of every pair: a move left with both holding is not hidden
        // by a refusal.
        provider(
            &mover_provider(i),
            &name,
            None,
            json!({"VCPU": {"total": 2 * MOVER_VCPU * PAIRS as u64},
                   "MEMORY_MB": {"total": 2 * MOVER_MEMORY * PAIRS as u64}}),
        );
        names.insert(mover_provider(i), name);
        setup(
            "PUT",
            &format!("/allocations/{}", instance(i, 0)),
            json!({"allocations": {mover_provider(i): {"resources":
                       {"VCPU": MOVER_VCPU, "MEMORY_MB": MOVER_MEMORY}}},
                   "project_id": P_MOVE, "user_id": USER, "consumer_generation": null,
                   "consumer_type": "INSTANCE"}),
        );
    }
    provider(
        &root(),
        "crash-root",
        None,
        inventories_body(true, ("MEMORY_MB", 1024)),
    );
    provider(
        &child(),
        "crash-child",
        Some(&root()),
        inventories_body(false, ("DISK_GB", 100)),
    );
    names.insert(root(), "crash-root".into());
    names.insert(child(), "crash-child".into());
    setup(
        "PUT",
        &format!("/allocations/{}", reshaped_consumer()),
        json!({"allocations": body_allocs(&shape_on_root().0),
               "project_id": P_RESHAPE, "user_id": USER, "consumer_generation": null,
               "consumer_type": "INSTANCE"}),
    );
    for i in 0..2 {
        let name = format!("crash-claims-{i}");
        provider(
            &claim_provider(i),
            &name,
            None,
            json!({"VCPU": {"total": CLAIM_TOTAL, "reserved": CLAIM_RESERVED,
                            "allocation_ratio": 1.0}}),
        );
        names.insert(claim_provider(i), name);
    }
    names
}

/// The client threads and the sampler, running.
struct Clients {
    movers: Vec<std::thread::JoinHandle<Vec<Track<Pair>>>>,
    reshaper: std::thread::JoinHandle<Track<Shape>>,
    claimers: Vec<std::thread::JoinHandle<HashMap<String, Track<Allocs>>>>,
    sampler: std::thread::JoinHandle<()>,
}

/// What the clients know when they stop.
struct Tracks {
    movers: Vec<Vec<Track<Pair>>>,
    shape: Track<Shape>,
    claims: Vec<HashMap<String, Track<Allocs>>>,
}

impl Clients {
    fn start(shared: &Arc<Shared>, seed: u64) -> Clients {
        shared.writing.store(MOVERS as u64 + 1, Ordering::SeqCst);
        let movers = (0..MOVERS)
            .map(|i| {
                let s = shared.clone();
                std::thread::spawn(move || mover(&s, i))
            })
            .collect();
        let s = shared.clone();
        let reshaper = std::thread::spawn(move || reshaper(&s));
        let claimers = (0..CLAIMERS)
            .map(|n| {
                let s = shared.clone();
                let seed = seed.wrapping_add(n as u64 * 7919);
                std::thread::spawn(move || claimer(&s, n, seed))
            })
            .collect();
        let s = shared.clone();
        let sampler = std::thread::spawn(move || sampler(&s));
        Clients {
            movers,
            reshaper,
            claimers,
            sampler,
        }
    }

    fn stop(self, shared: &Shared) -> Tracks {
        shared.stop.store(true, Ordering::SeqCst);
        let tracks = Tracks {
            movers: self
                .movers
                .into_iter()
                .map(|h| h.join().expect("a mover"))
                .collect(),
            shape: self.reshaper.join().expect("the reshaper"),
            claims: self
                .claimers
                .into_iter()
                .map(|h| h.join().expect("a claimer"))
                .collect(),
        };
        self.sampler.join().expect("the sampler");
        tracks
    }
}

/// After the clients stopped: every consumer whole (its acknowledged state or an attempt
/// since), every provider's usages the sum of its consumers' allocations by consumer and
/// by provider, within capacity. The failures, and the usages by provider name.
fn final_checks(
    shared: &Shared,
    tracks: &Tracks,
    names: &BTreeMap<String, String>,
) -> (Vec<String>, Usages) {
    let mut failures: Vec<String> = Vec::new();
    let mut consumers: BTreeMap<String, Allocs> = BTreeMap::new();
    let read_consumer =
        |c: &str| allocs_of(&shared.read(&format!("/allocations/{c}"))["allocations"]);
    for (i, pairs) in tracks.movers.iter().enumerate() {
        for (k, t) in pairs.iter().enumerate() {
            let (inst, mig) = (instance(i, k), migration(i, k));
            let now: Pair = (read_consumer(&inst), read_consumer(&mig));
            if !t.allows(&now) {
                failures.push(format!(
                    "mover {i}: instance {inst} holds {:?} and migration {mig} holds {:?}; \
                     expected the acknowledged {:?} or one of the unanswered attempts since \
                     {:?}",
                    now.0, now.1, t.acked, t.attempts
                ));
            }
            consumers.insert(inst, now.0);
            consumers.insert(mig, now.1);
        }
    }
    let (shape, ..) = read_shape(shared);
    if !tracks.shape.allows(&shape) {
        failures.push(format!(
            "reshaper: consumer {} and the {RESHAPED} inventories of root and child are \
             {shape:?}; expected the acknowledged {:?} or one of the unanswered attempts \
             since {:?}",
            reshaped_consumer(),
            tracks.shape.acked,
            tracks.shape.attempts
        ));
    }
    consumers.insert(reshaped_consumer(), shape.0.clone());
    // Claim consumers are many: each one that may hold something, or that a provider
    // lists, is read; one that may not and is listed nowhere holds nothing.
    let mut listed: BTreeSet<String> = BTreeSet::new();
    for rp in names.keys() {
        let v = shared.read(&format!("/resource_providers/{rp}/allocations"));
        listed.extend(
            v["allocations"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(c, _)| c.clone()),
        );
    }
    for tracks in &tracks.claims {
        for (c, t) in tracks {
            let may_hold = !t.acked.is_empty() || t.attempts.iter().any(|a| !a.is_empty());
            let now = if may_hold || listed.contains(c) {
                read_consumer(c)
            } else {
                Allocs::new()
            };
            if !t.allows(&now) {
                failures.push(format!(
                    "claim consumer {c} holds {now:?}; expected the acknowledged {:?} or one \
                     of the unanswered attempts since {:?}",
                    t.acked, t.attempts
                ));
            }
            consumers.insert(c.clone(), now);
        }
    }
    for c in &listed {
        if !consumers.contains_key(c) {
            failures.push(format!(
                "consumer {c} holds {:?}, which no client wrote",
                read_consumer(c)
            ));
        }
    }
    let mut by_consumer = Usages::new();
    for a in consumers.values() {
        for (rp, r) in a {
            add_into(&mut by_consumer, rp, r);
        }
    }
    let mut api_usages = Usages::new();
    for (rp, name) in names {
        let used = usages(shared, rp);
        let listed = shared.read(&format!("/resource_providers/{rp}/allocations"));
        let mut by_provider = BTreeMap::new();
        for entry in listed["allocations"].as_object().into_iter().flatten() {
            for (c, n) in entry.1["resources"].as_object().into_iter().flatten() {
                *by_provider.entry(c.clone()).or_insert(0) += n.as_u64().unwrap_or(0);
            }
        }
        by_provider.retain(|_, n| *n > 0);
        let counted = by_consumer.get(rp).cloned().unwrap_or_default();
        if used != counted || used != by_provider {
            failures.push(format!(
                "provider {rp} ({name}): usages {used:?}; its consumers' allocations sum to \
                 {counted:?}; its allocations list sums to {by_provider:?}: {listed}"
            ));
        }
        let inv = shared.read(&format!("/resource_providers/{rp}/inventories"));
        for (class, n) in &used {
            let i = &inv["inventories"][class];
            let capacity = (i["total"].as_u64().unwrap_or(0) as f64
                - i["reserved"].as_u64().unwrap_or(0) as f64)
                * i["allocation_ratio"].as_f64().unwrap_or(1.0);
            if *n as f64 > capacity {
                failures.push(format!(
                    "provider {rp} ({name}) is over capacity: {class} used {n}, capacity \
                     {capacity} (inventory {i})"
                ));
            }
        }
        api_usages.insert(name.clone(), used);
    }
    (failures, api_usages)
}

/// The figures of a run, for the report.
fn summary(shared: &Shared, tracks: &Tracks, kills: &str, failures: usize) -> String {
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let violations = shared.violations.lock().unwrap();
    let of = |what: &str| violations.iter().filter(|v| v.contains(what)).count();
    format!(
        "{kills}; acknowledged: {} moves, {} reshapes, {} claims ({} refused: capacity or \
         conflict), {} claim deletions; {} writes without an answer, {} answered 503, 409s to \
         {} moves, {} reshapes and {} claim deletions; sampler: {} reads ({} showing a total not conserved, in {} episodes), \
         {} skipped while down; clients' re-reads: {} mixes seen for a moment, {} left half \
         done; {} claim consumers; final check failures: {failures}; unexpected answers: {}; \
         {:.1}s of writes",
        c(&shared.moves),
        c(&shared.reshapes),
        c(&shared.claims),
        c(&shared.claims_refused),
        c(&shared.deletes),
        c(&shared.unknown),
        c(&shared.unavailable),
        c(&shared.conflicts[0]),
        c(&shared.conflicts[1]),
        c(&shared.conflicts[2]),
        c(&shared.sampler_reads),
        c(&shared.sampler_bad_reads),
        of("sampler:"),
        c(&shared.sampler_skipped),
        of("for a moment"),
        of("left half"),
        tracks.claims.iter().map(HashMap::len).sum::<usize>(),
        c(&shared.error_count),
        shared.started.elapsed().as_secs_f64()
    )
}

/// Fails the test with every violation, final check failure and unexpected answer.
fn verdict(shared: &Shared, failures: Vec<String>) {
    let violations = shared.violations.lock().unwrap().clone();
    let errors = shared.errors.lock().unwrap().clone();
    let error_count = shared.error_count.load(Ordering::SeqCst);
    let mut report = String::new();
    if !violations.is_empty() {
        report += &format!(
            "{} half-done writes seen through the API:\n{}\n",
            violations.len(),
            violations.join("\n")
        );
    }
    if !failures.is_empty() {
        report += &format!(
            "{} final check failures:\n{}\n",
            failures.len(),
            failures.join("\n")
        );
    }
    if error_count > 0 {
        report += &format!(
            "{error_count} answers Placement would not give to these requests (the first \
             {}):\n{}\n",
            errors.len(),
            errors.join("\n")
        );
    }
    assert!(report.is_empty(), "{report}");
    assert!(
        shared.moves.load(Ordering::Relaxed) > 0 && shared.reshapes.load(Ordering::Relaxed) > 0,
        "no move or no reshape was acknowledged"
    );
}

fn seed() -> u64 {
    env_number(
        "KUBEPLACE_CRASH_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    )
}

#[test]
fn multi_object_writes_are_whole_across_sigkills() {
    let kills_wanted = env_number("KUBEPLACE_CRASH_KILLS", 100) as usize;
    let quiet_seconds = env_number("KUBEPLACE_CRASH_SECONDS", 60);
    let seed = seed();
    eprintln!("placement_crashes: seed {seed}, kills {kills_wanted}");
    let begun = Instant::now();
    let cp = private_with_crds();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(&cp, "placement-writer");
    let port = support::free_port();
    let mut op = Operator::start(
        &cp,
        "kubeplace-crash-0",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port}"),
        ],
    );
    api_ready(port, Duration::from_secs(60), || op.process.output());
    let shared = Arc::new(Shared::new(port, &writer));
    let names = set_up(&shared);
    eprintln!(
        "placement_crashes: set up after {:.1}s",
        begun.elapsed().as_secs_f64()
    );
    let clients = Clients::start(&shared, seed);

    // The killer: a random wait (0–1.5 s) once the API answers again, or (two kills in
    // three) right after a move or reshape was sent (0–12 ms later: a commit of several
    // objects takes a few ms each), then SIGKILL and a restart on the same ports.
    let mut rng = Rng(seed | 1);
    let (mut kills, mut aimed, mut random) = (0, 0, 0);
    let mut restart_ms: Vec<u128> = Vec::new();
    if kills_wanted == 0 {
        std::thread::sleep(Duration::from_secs(quiet_seconds));
    }
    while kills < kills_wanted {
        let before = shared.sent.load(Ordering::SeqCst);
        if rng.below(3) == 0 || shared.writing.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(1500)));
            random += 1;
        } else {
            let deadline = Instant::now() + Duration::from_secs(3);
            while shared.sent.load(Ordering::SeqCst) == before && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(rng.below(13)));
            aimed += 1;
        }
        kills += 1;
        eprintln!(
            "placement_crashes: SIGKILL {kills} at {:.3}s",
            shared.started.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        op = kill_and_restart(&cp, op, port, kills);
        restart_ms.push(t.elapsed().as_millis());
    }
    // A last moment of writes on the last replica, then the clients stop.
    std::thread::sleep(Duration::from_secs(2));
    let tracks = clients.stop(&shared);

    // A final restart: what follows is read from a fresh store.
    op = kill_and_restart(&cp, op, port, kills + 1);
    let (mut failures, api_usages) = final_checks(&shared, &tracks, &names);

    // kubectl's view, once settled: the Allocations' sums per provider and the
    // ResourceProviders' status.usages equal the API's usages.
    let ours = |p: &str| names.values().any(|n| n == p);
    let kubectl_sums = || -> Usages {
        let out = cp.kubectl(&["get", "allocations.kubeplace.io", "-o", "json"]);
        let list: Value = serde_json::from_str(out.ok()).expect("a list");
        let mut sums: Usages = names
            .values()
            .map(|n| (n.clone(), BTreeMap::new()))
            .collect();
        for item in list["items"].as_array().into_iter().flatten() {
            for a in item["spec"]["allocations"].as_array().into_iter().flatten() {
                let Some(p) = a["provider"].as_str() else {
                    continue;
                };
                let r: BTreeMap<String, u64> = a["resources"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                add_into(&mut sums, p, &r);
            }
        }
        sums.retain(|p, _| ours(p));
        sums
    };
    let statuses = || -> Usages {
        let out = cp.kubectl(&["get", "resourceproviders.kubeplace.io", "-o", "json"]);
        let list: Value = serde_json::from_str(out.ok()).expect("a list");
        let mut got = Usages::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["metadata"]["name"].as_str().unwrap_or("");
            if !ours(name) {
                continue;
            }
            let u: BTreeMap<String, u64> = item["status"]["usages"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                .filter(|(_, n)| *n > 0)
                .collect();
            got.insert(name.to_string(), u);
        }
        got
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut sums, mut status) = (kubectl_sums(), statuses());
    while (sums != api_usages || status != api_usages) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        (sums, status) = (kubectl_sums(), statuses());
    }
    if sums != api_usages {
        failures.push(format!(
            "kubectl's Allocations sum per provider to {sums:?}; the API's usages are \
             {api_usages:?}"
        ));
    }
    if status != api_usages {
        failures.push(format!(
            "the ResourceProviders' status.usages are {status:?}; the API's usages are \
             {api_usages:?}"
        ));
    }

    restart_ms.sort_unstable();
    let kills = format!(
        "{kills} SIGKILLs ({aimed} right after a move or reshape was sent, {random} at a \
         random moment), restart to the API answering: median {} ms, max {} ms",
        restart_ms.get(restart_ms.len() / 2).copied().unwrap_or(0),
        restart_ms.last().copied().unwrap_or(0),
    );
    eprintln!(
        "placement_crashes summary (cluster): {}; run {:.1}s",
        summary(&shared, &tracks, &kills, failures.len()),
        begun.elapsed().as_secs_f64()
    );
    op.stop_and_unregister(&cp);
    cp.shutdown();
    verdict(&shared, failures);
}

/// The control: the same clients, sampler and final checks against `kubeplace placement
/// serve`, whose writes are whole under one lock (and which is never killed), find nothing.
/// A failure of the test above is then a fault of the cluster's writes, not of the checks.
#[test]
fn the_same_checks_find_nothing_on_a_placement_whose_writes_are_whole() {
    let seed = seed();
    let port = support::free_port();
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args([
            "placement",
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubeplace placement serve");
    api_ready(port, Duration::from_secs(30), String::new);
    let shared = Arc::new(Shared::new(port, "admin"));
    let names = set_up(&shared);
    let clients = Clients::start(&shared, seed);
    std::thread::sleep(Duration::from_secs(env_number(
        "KUBEPLACE_CRASH_CONTROL_SECONDS",
        15,
    )));
    let tracks = clients.stop(&shared);
    let (failures, _) = final_checks(&shared, &tracks, &names);
    eprintln!(
        "placement_crashes summary (placement serve, seed {seed}): {}",
        summary(&shared, &tracks, "no kill", failures.len())
    );
    let _ = serve.kill();
    let _ = serve.wait();
    verdict(&shared, failures);
}

//! Two operator replicas: one leads and writes status; when it dies without a word
//! (SIGKILL, no lease release), the other takes the lease over and writes instead.

use std::time::{Duration, Instant};

use super::support::exclusive_lock;
use super::{Operator, crds_installed, eventually_flavor};

const LEASE: &str = "e2e-failover";

fn flavor(name: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\nspec:\n  vcpus: 1\n  memoryMb: 512\n"
    )
}

fn holder(cp: &super::ControlPlane) -> String {
    cp.kubectl(&[
        "get",
        "lease",
        LEASE,
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .stdout
    .trim()
    .to_string()
}

/// Waits until exactly one of the replicas reports `kubeplace_leader 1`, and returns it.
fn leader_of<'a>(replicas: &[&'a Operator], within: Duration) -> &'a Operator {
    let deadline = Instant::now() + within;
    loop {
        let leading: Vec<&&Operator> = replicas
            .iter()
            .filter(|r| r.metric("kubeplace_leader") == Some(1.0))
            .collect();
        if leading.len() == 1 {
            return leading[0];
        }
        assert!(
            Instant::now() < deadline,
            "{} replicas lead after {within:?}",
            leading.len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until some replica has written the flavor's status.
fn status_written(cp: &super::ControlPlane, flavor: &str) {
    eventually_flavor(cp, flavor, ".status.observedGeneration", "1");
}

fn status_writes(replica: &Operator) -> f64 {
    replica
        .metric(r#"kubeplace_status_writes_total{kind="Flavor"}"#)
        .unwrap_or(0.0)
}

#[test]
fn a_second_replica_takes_over_when_the_leader_dies() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    let lease = format!("--lease-name={LEASE}");
    let a = Operator::start_named(cp, "kubeplace-replica-a", "kubeplace-replica-a", &[&lease]);
    let b = Operator::start_named(cp, "kubeplace-replica-b", "kubeplace-replica-b", &[&lease]);
    let first = leader_of(&[&a, &b], Duration::from_secs(30));
    let (leader, follower) = if std::ptr::eq(first, &a) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(follower.metric("kubeplace_leader"), Some(0.0));
    let leader_identity = holder(cp);
    assert!(!leader_identity.is_empty(), "nobody holds the lease");
    // The leader writes the status of a new flavor; the follower writes nothing.
    cp.kubectl_stdin(&["apply", "-f", "-"], &flavor("e2e-failover-1"))
        .ok();
    status_written(cp, "e2e-failover-1");
    assert!(status_writes(&leader) >= 1.0);
    assert_eq!(status_writes(&follower), 0.0, "a follower wrote status");
    // The leader dies without releasing the lease. Its webhook goes with it; in a cluster
    // both replicas sit behind one Service, here each registered its own configuration.
    leader.process.kill();
    cp.kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        leader.webhook_config(),
    ])
    .ok();
    // The follower takes over once the lease has gone unrenewed for its duration (15 s).
    let took_over = leader_of(&[&follower], Duration::from_secs(60));
    assert!(std::ptr::eq(took_over, &follower));
    let new_identity = holder(cp);
    assert!(
        !new_identity.is_empty() && new_identity != leader_identity,
        "the lease is still held by {new_identity:?}"
    );
    cp.kubectl_stdin(&["apply", "-f", "-"], &flavor("e2e-failover-2"))
        .ok();
    status_written(cp, "e2e-failover-2");
    assert!(
        status_writes(&follower) >= 1.0,
        "the new leader wrote nothing"
    );
    cp.kubectl(&["delete", "flavor", "e2e-failover-1", "e2e-failover-2"])
        .ok();
    follower.stop_and_unregister(cp);
    cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ])
    .ok();
}

/// One write as a client saw it: when it was sent and answered, and whether it was taken (or
/// why not: the status code and the reason, or Placement's error code and detail).
struct Write {
    sent: Instant,
    answered: Instant,
    outcome: Result<(), (u16, String)>,
}

/// Between one writer's writes: a few hundred writes in all, each wait still seen.
const PACE: Duration = Duration::from_millis(50);

/// Writers of claims through the API server (as kubectl and client-go write them), each
/// creating Allocations labelled `e2e-gap=1` one after another until `stop`.
fn api_server_writers(
    runtime: &tokio::runtime::Runtime,
    allocations: &kube::Api<kube::api::DynamicObject>,
    loss: Loss,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Write>>> {
    (0..3)
        .map(|w| {
            let (allocations, stop) = (allocations.clone(), stop.clone());
            let (tag, provider, series) = (loss.tag(), loss.provider(), loss.series());
            runtime.spawn(async move {
                let mut writes = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                        "metadata": {"name": format!("{tag}-k{w}-{n}"), "labels": {"e2e-gap": tag}},
                        "spec": {"consumer": format!("00000000-0000-4000-8000-{:06}{n:06}", series + w),
                                 "allocations": [{"provider": provider, "resources": {"VCPU": 1}}]}
                    }))
                    .unwrap();
                    let sent = Instant::now();
                    let outcome = match allocations
                        .create(&kube::api::PostParams::default(), &object)
                        .await
                    {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(s)) => Err((s.code, s.reason.clone())),
                        Err(e) => Err((0, e.to_string())),
                    };
                    writes.push(Write {
                        sent,
                        answered: Instant::now(),
                        outcome,
                    });
                    tokio::time::sleep(PACE).await;
                }
                writes
            })
        })
        .collect()
}

/// Writers of claims through a replica's Placement API, each putting a new consumer's
/// allocations one after another until `stop`; the consumers written too.
fn placement_writers(
    port: u16,
    token: &str,
    provider: &str,
    loss: Loss,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<(Vec<Write>, Vec<String>)>> {
    (0..2)
        .map(|w| {
            let (stop, token, provider) = (stop.clone(), token.to_string(), provider.to_string());
            let series = loss.series();
            std::thread::spawn(move || {
                let (mut writes, mut consumers) = (Vec::new(), Vec::new());
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let consumer = format!("00000000-0000-4000-9000-{:06}{n:06}", series + w);
                    let body = serde_json::json!({
                        "allocations": {provider.as_str(): {"resources": {"VCPU": 1}}},
                        "project_id": "e2e-gap", "user_id": "e2e-gap",
                        "consumer_generation": null, "consumer_type": "INSTANCE"
                    });
                    let sent = Instant::now();
                    let path = format!("/allocations/{consumer}");
                    let (status, answer) =
                        super::placement_api::call(port, "PUT", &path, Some(&token), Some(&body));
                    let error = &answer["errors"][0];
                    let outcome = if status == 204 {
                        Ok(())
                    } else {
                        Err((
                            status,
                            format!(
                                "{} {}",
                                error["code"].as_str().unwrap_or(""),
                                error["detail"].as_str().unwrap_or("")
                            ),
                        ))
                    };
                    writes.push(Write {
                        sent,
                        answered: Instant::now(),
                        outcome,
                    });
                    consumers.push(consumer);
                    std::thread::sleep(PACE);
                }
                (writes, consumers)
            })
        })
        .collect()
}

/// How the leader is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loss {
    /// SIGKILL: no word, no lease released; its webhook gone a moment before.
    Killed,
    /// SIGTERM, as a rollout, `helm upgrade` or a drain stops a pod: the lease released at
    /// once, the webhook served through the drain (passing reviews on to the new leader)
    /// until the Service drops it.
    Handover,
}

impl Loss {
    /// The Allocations' names and label, the Lease's name.
    fn tag(self) -> &'static str {
        match self {
            Loss::Killed => "e2e-gap",
            Loss::Handover => "e2e-handover",
        }
    }

    fn provider(self) -> &'static str {
        match self {
            Loss::Killed => "e2e-gap-cn",
            Loss::Handover => "e2e-handover-cn",
        }
    }

    /// Where the writers' consumer numbers start, apart for each loss.
    fn series(self) -> u32 {
        match self {
            Loss::Killed => 900,
            Loss::Handover => 800,
        }
    }

    /// The most a write may wait at the 99th percentile: 3 s after a kill; after a handover
    /// twice the second it takes on a quiet machine, which still catches a handover that
    /// waits out a review's whole deadline (5 s and more).
    fn bound(self) -> Duration {
        match self {
            Loss::Killed => Duration::from_secs(3),
            Loss::Handover => Duration::from_secs(2),
        }
    }
}

/// Two replicas of one lease with a provider of `loss.provider()`, each serving the Placement
/// API; returns (leader, follower, the follower's Placement API port, the provider's uuid).
fn two_replicas(
    cp: &super::ControlPlane,
    loss: Loss,
    extra: &[&str],
) -> (Operator, Operator, u16, String) {
    use super::placement_api::{ACCESS, call, token, wait_for_api};
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        loss.tag(),
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {}}}\nspec: {{inventories: {{VCPU: {{total: 100000}}}}}}\n",
            loss.provider()
        ),
    )
    .ok();
    let lease = format!("--lease-name={}", loss.tag());
    let (port_a, port_b) = (super::support::free_port(), super::support::free_port());
    let (api_a, api_b) = (
        format!("--placement-addr=127.0.0.1:{port_a}"),
        format!("--placement-addr=127.0.0.1:{port_b}"),
    );
    let (name_a, name_b) = (
        format!("kubeplace-{}-a", loss.tag()),
        format!("kubeplace-{}-b", loss.tag()),
    );
    let mut args_a = vec![lease.as_str(), api_a.as_str()];
    let mut args_b = vec![lease.as_str(), api_b.as_str()];
    args_a.extend(extra);
    args_b.extend(extra);
    let a = Operator::start_named(cp, &name_a, &name_a, &args_a);
    let b = Operator::start_named(cp, &name_b, &name_b, &args_b);
    wait_for_api(port_a, &a);
    wait_for_api(port_b, &b);
    let first = leader_of(&[&a, &b], Duration::from_secs(30));
    let (leader, follower, follower_port) = if std::ptr::eq(first, &a) {
        (a, b, port_b)
    } else {
        (b, a, port_a)
    };
    let writer = token(cp, "placement-writer");
    let (s, list) = call(
        follower_port,
        "GET",
        &format!("/resource_providers?name={}", loss.provider()),
        Some(&writer),
        None,
    );
    assert_eq!(s, 200, "{list}");
    let provider = list["resource_providers"][0]["uuid"]
        .as_str()
        .expect("the provider's uuid")
        .to_string();
    (leader, follower, follower_port, provider)
}

/// With KUBEPLACE_E2E_FAILOVER_LOGS set, copies both replicas' logs to
/// /tmp/failover-old.log and /tmp/failover-new.log before the control plane's folder goes.
fn keep_logs(leader: &Operator, follower: &Operator) {
    if std::env::var_os("KUBEPLACE_E2E_FAILOVER_LOGS").is_some() {
        for (who, p) in [("old", &leader.process), ("new", &follower.process)] {
            let _ = std::fs::copy(&p.log, format!("/tmp/failover-{who}.log"));
        }
    }
}

/// A replica's log lines of leading, the fence, shutting down and warnings: where a
/// handover's time went.
fn timeline(replica: &Operator) -> String {
    replica.log_lines(&["lease", "fence", "shutting", "WARN", "drain"], usize::MAX)
}

/// Takes the leader away as `loss` says; returns when it went.
fn lose(cp: &super::ControlPlane, leader: &Operator, loss: Loss) -> Instant {
    match loss {
        Loss::Killed => {
            // The leader dies without a word. Its webhook goes with it: in a cluster the
            // Service stops sending it reviews, here its configuration is taken away (and the
            // API server sees that a moment later, as it sees an endpoint gone).
            cp.kubectl(&[
                "delete",
                "validatingwebhookconfiguration",
                leader.webhook_config(),
            ])
            .ok();
            std::thread::sleep(Duration::from_secs(1));
            let killed = Instant::now();
            leader.process.kill();
            killed
        }
        Loss::Handover => {
            // SIGTERM: not ready at once, the lease released, reviews still served (and passed
            // on) through the drain. A second later the Service would have dropped it: its
            // configuration is taken away then, well before the drain ends.
            let asked = Instant::now();
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &leader.process.pid.to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(1));
            cp.kubectl(&[
                "delete",
                "validatingwebhookconfiguration",
                leader.webhook_config(),
            ])
            .ok();
            asked
        }
    }
}

/// Writers of claims keep writing, through the API server (its webhook) and through the
/// Placement API of the replica that survives, while the leader is lost: every write is
/// taken, none is refused as if the host were full, and they wait no more than
/// `loss.bound()` (p99) whichever replica they reach.
fn writers_ride_through(loss: Loss) {
    use super::placement_api::token;

    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    // The handover drains for 4 s: the webhook configuration goes after 1 s.
    let extra: &[&str] = match loss {
        Loss::Killed => &[],
        Loss::Handover => &["--drain-seconds=4"],
    };
    let (leader, follower, follower_port, provider) = two_replicas(cp, loss, extra);
    let writer = token(cp, "placement-writer");

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let allocations: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        cp.kube_client(runtime.handle()),
        &kubeplace_api::Kind::Allocation.api_resource(),
    );
    let through_api_server = api_server_writers(&runtime, &allocations, loss, &stop);
    let through_placement = placement_writers(follower_port, &writer, &provider, loss, &stop);

    std::thread::sleep(Duration::from_secs(3));
    let lost = lose(cp, &leader, loss);
    let _ = leader_of(&[&follower], Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);

    let mut all: Vec<(String, Write)> = Vec::new();
    for (i, w) in through_api_server.into_iter().enumerate() {
        for write in runtime.block_on(w).unwrap() {
            all.push((format!("API server writer {i}"), write));
        }
    }
    let mut consumers = Vec::new();
    for (i, w) in through_placement.into_iter().enumerate() {
        let (writes, theirs) = w.join().unwrap();
        for write in writes {
            all.push((format!("Placement writer {i}"), write));
        }
        consumers.extend(theirs);
    }
    let refused: Vec<String> = all
        .iter()
        .filter_map(|(who, w)| w.outcome.as_ref().err().map(|e| format!("{who}: {e:?}")))
        .take(10)
        .collect();
    // A write around the loss waits for the new leader; one that waited too long would be
    // refused as one to retry, never as if the host were full. The API server's own 500,
    // when it still calls the dead replica's endpoint, reaches kubectl's writers as it is
    // (the Placement API answers it as a conflict to retry).
    let retryable = |e: &(u16, String)| {
        (matches!(e.0, 409 | 429) && !e.1.contains("Unable to allocate") && !e.1.contains("NoRoom"))
            || *e == (500, "InternalError".to_string())
    };
    assert!(
        all.iter()
            .all(|(_, w)| w.outcome.as_ref().err().is_none_or(retryable)),
        "refusals other than to retry: {refused:?}"
    );
    // How long each write that was on its way when the leader went, or sent after, took.
    let mut waits: Vec<Duration> = all
        .iter()
        .filter(|(_, w)| w.answered >= lost)
        .map(|(_, w)| w.answered - w.sent)
        .collect();
    waits.sort();
    let p99 = waits[(waits.len() * 99 / 100).min(waits.len() - 1)];
    let taken_after = all
        .iter()
        .filter(|(_, w)| w.sent > lost && w.outcome.is_ok())
        .count();
    eprintln!(
        "{loss:?}: {} writes, {} refused ({refused:?}); after the loss: {} answered, p50 {:?}, p99 {p99:?}, max {:?}",
        all.len(),
        all.iter().filter(|(_, w)| w.outcome.is_err()).count(),
        waits.len(),
        waits[waits.len() / 2],
        waits.last().unwrap()
    );
    let slow: Vec<String> = all
        .iter()
        .filter(|(_, w)| w.answered >= lost && w.answered - w.sent > Duration::from_millis(500))
        .map(|(who, w)| {
            format!(
                "{who} sent {:+.2}s waited {:.2}s",
                w.sent.saturating_duration_since(lost).as_secs_f64()
                    - lost.saturating_duration_since(w.sent).as_secs_f64(),
                (w.answered - w.sent).as_secs_f64()
            )
        })
        .collect();
    eprintln!("waited over 0.5 s: {slow:?}");
    keep_logs(&leader, &follower);
    assert!(taken_after > 0, "no write was taken after the leader went");
    // The new leader counted its predecessor's claims from the point the lease recorded,
    // without listing every Allocation.
    let opened = follower.log_lines(&["deciding claims"], usize::MAX);
    assert!(
        opened.contains("AtPredecessorsPoint"),
        "the new leader did not take over from its predecessor's point:\n{opened}\n{}",
        timeline(&follower)
    );
    assert!(
        p99 <= loss.bound(),
        "writes waited {p99:?} (p99) after the leader went ({loss:?}); the old leader:\n{}\nthe new one:\n{}",
        timeline(&leader),
        timeline(&follower)
    );

    if loss == Loss::Handover {
        assert!(
            leader.process.stop(Duration::from_secs(10)),
            "the old leader did not end its drain:\n{}",
            leader.process.output()
        );
    }
    follower.stop_and_unregister(cp);
    cp.kubectl(&[
        "delete",
        "allocations",
        "-l",
        &format!("e2e-gap={}", loss.tag()),
        "--wait=false",
    ])
    .ok();
    // The Placement API names a consumer's Allocation after the consumer.
    for names in consumers.chunks(200) {
        let mut args = vec!["delete", "allocation", "--wait=false", "--ignore-not-found"];
        args.extend(names.iter().map(String::as_str));
        cp.kubectl(&args).ok();
    }
    cp.kubectl(&[
        "delete",
        "resourceprovider",
        loss.provider(),
        "--wait=false",
    ])
    .ok();
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        loss.tag(),
        "-n",
        "default",
        "--ignore-not-found",
    ]);
}

/// The leader SIGKILLed mid-burst: writers wait at most 3 s (p99), none is refused as if the
/// host were full.
#[test]
fn the_leader_killed_mid_burst_costs_writers_seconds_not_wrong_answers() {
    writers_ride_through(Loss::Killed);
}

/// The leader stopped as a rollout stops it (SIGTERM): the lease released at once, reviews
/// the old leader still gets passed on to the new one as soon as it holds the lease.
#[test]
fn a_graceful_handover_costs_writers_under_a_second() {
    writers_ride_through(Loss::Handover);
}

/// Nova's own report client (the real one, from its wheel) boots, migrates and deletes
/// servers through the Placement API of the replica that survives while the leader is
/// SIGKILLed: every candidates read, claim, move and delete succeeds after Nova's own retries,
/// and no claim comes back as "no valid host".
#[test]
fn novas_report_client_rides_through_a_leader_kill() {
    use std::io::BufRead;

    use super::placement_api::token;
    use super::support::nova;

    let python = nova::nova_python();
    let _exclusive = exclusive_lock();
    // Nova's compute and servers stay behind: a control plane of its own.
    let cp = &super::private_with_crds();
    let (leader, follower, follower_port, _) = two_replicas(cp, Loss::Killed, &[]);
    let writer = token(cp, "placement-writer");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/nova-ride-through.py");
    let mut nova = std::process::Command::new(&python)
        .args([
            script,
            &format!("http://127.0.0.1:{follower_port}"),
            &writer,
            "20",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("Nova's client runs");
    let mut lines = std::io::BufReader::new(nova.stdout.take().unwrap()).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        ready.contains("\"ready\": true"),
        "Nova's compute did not report: {ready}"
    );
    std::thread::sleep(Duration::from_secs(4));
    let lost = lose(cp, &leader, Loss::Killed);
    let lost_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - lost.elapsed().as_secs_f64();
    let ops: Vec<serde_json::Value> = lines
        .map_while(Result::ok)
        .map(|l| serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let status = nova.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut nova.stderr.take().unwrap(), &mut stderr).ok();
    keep_logs(&leader, &follower);
    let failed: Vec<&serde_json::Value> = ops.iter().filter(|o| o["ok"] != true).collect();
    let mut by_op: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    let mut slowest_after = 0f64;
    for o in &ops {
        let after = o["ended"].as_f64().unwrap() >= lost_at;
        let e = by_op
            .entry(o["op"].as_str().unwrap().to_string())
            .or_default();
        e.0 += 1;
        if after {
            e.1 += 1;
            slowest_after =
                slowest_after.max(o["ended"].as_f64().unwrap() - o["started"].as_f64().unwrap());
        }
    }
    eprintln!(
        "Nova through a leader kill: {} operations (by kind: total, answered after the kill) {by_op:?}, {} failed, slowest after the kill {slowest_after:.2} s",
        ops.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "operations Nova saw fail: {failed:#?}\nstderr: {stderr}"
    );
    assert!(status.success(), "Nova's client failed: {stderr}");
    for op in ["candidates", "claim", "move", "delete", "delete migration"] {
        assert!(
            by_op.get(op).is_some_and(|&(_, after)| after > 0),
            "no {op} was answered after the kill: {by_op:?}"
        );
    }

    follower.process.stop(Duration::from_secs(10));
    cp.shutdown();
}

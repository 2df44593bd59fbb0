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
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Write>>> {
    (0..3)
        .map(|w| {
            let (allocations, stop) = (allocations.clone(), stop.clone());
            runtime.spawn(async move {
                let mut writes = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                        "metadata": {"name": format!("e2e-gap-k{w}-{n}"), "labels": {"e2e-gap": "1"}},
                        "spec": {"consumer": format!("00000000-0000-4000-8000-{:06}{n:06}", 900 + w),
                                 "allocations": [{"provider": "e2e-gap-cn", "resources": {"VCPU": 1}}]}
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
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<(Vec<Write>, Vec<String>)>> {
    (0..2)
        .map(|w| {
            let (stop, token, provider) = (stop.clone(), token.to_string(), provider.to_string());
            std::thread::spawn(move || {
                let (mut writes, mut consumers) = (Vec::new(), Vec::new());
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let consumer = format!("00000000-0000-4000-9000-{:06}{n:06}", 900 + w);
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

/// Writers of claims keep writing, through the API server (its webhook) and through the
/// Placement API of the replica that survives, while the leader is killed: every write is
/// taken, none is refused as if the host were full, and they wait no more than 3 s (p99)
/// whichever replica they reach.
#[test]
fn the_leader_killed_mid_burst_costs_writers_seconds_not_wrong_answers() {
    use super::placement_api::{ACCESS, call, token, wait_for_api};

    const GAP_LEASE: &str = "e2e-gap";
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let delete_lease = || {
        let _ = cp.kubectl(&[
            "delete",
            "lease",
            GAP_LEASE,
            "-n",
            "default",
            "--ignore-not-found",
        ]);
    };
    delete_lease();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: e2e-gap-cn}\nspec: {inventories: {VCPU: {total: 100000}}}\n",
    )
    .ok();
    let lease = format!("--lease-name={GAP_LEASE}");
    let (port_a, port_b) = (super::support::free_port(), super::support::free_port());
    let (api_a, api_b) = (
        format!("--placement-addr=127.0.0.1:{port_a}"),
        format!("--placement-addr=127.0.0.1:{port_b}"),
    );
    let a = Operator::start_named(cp, "kubeplace-gap-a", "kubeplace-gap-a", &[&lease, &api_a]);
    let b = Operator::start_named(cp, "kubeplace-gap-b", "kubeplace-gap-b", &[&lease, &api_b]);
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
        "/resource_providers?name=e2e-gap-cn",
        Some(&writer),
        None,
    );
    assert_eq!(s, 200, "{list}");
    let provider = list["resource_providers"][0]["uuid"]
        .as_str()
        .expect("the provider's uuid")
        .to_string();

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
    let through_api_server = api_server_writers(&runtime, &allocations, &stop);
    let through_placement = placement_writers(follower_port, &writer, &provider, &stop);

    std::thread::sleep(Duration::from_secs(3));
    // The leader dies without a word. Its webhook goes with it: in a cluster the Service
    // stops sending it reviews, here its configuration is taken away (and the API server
    // sees that a moment later, as it sees an endpoint gone).
    cp.kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        leader.webhook_config(),
    ])
    .ok();
    std::thread::sleep(Duration::from_secs(1));
    let killed = Instant::now();
    leader.process.kill();
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
    // A write around the kill waits for the new leader; one that waited too long would be
    // refused as one to retry, never as if the host were full.
    let retryable = |e: &(u16, String)| {
        matches!(e.0, 409 | 429) && !e.1.contains("Unable to allocate") && !e.1.contains("NoRoom")
    };
    assert!(
        all.iter()
            .all(|(_, w)| w.outcome.as_ref().err().is_none_or(retryable)),
        "refusals other than to retry: {refused:?}"
    );
    // How long each write that was on its way when the leader died, or sent after, took.
    let mut waits: Vec<Duration> = all
        .iter()
        .filter(|(_, w)| w.answered >= killed)
        .map(|(_, w)| w.answered - w.sent)
        .collect();
    waits.sort();
    let p99 = waits[(waits.len() * 99 / 100).min(waits.len() - 1)];
    let taken_after = all
        .iter()
        .filter(|(_, w)| w.sent > killed && w.outcome.is_ok())
        .count();
    eprintln!(
        "failover: {} writes, {} refused ({refused:?}); after the kill: {} answered, p50 {:?}, p99 {p99:?}, max {:?}",
        all.len(),
        all.iter().filter(|(_, w)| w.outcome.is_err()).count(),
        waits.len(),
        waits[waits.len() / 2],
        waits.last().unwrap()
    );
    assert!(taken_after > 0, "no write was taken after the leader died");
    assert!(
        p99 <= Duration::from_secs(3),
        "writes waited {p99:?} (p99) after the leader died"
    );

    follower.stop_and_unregister(cp);
    cp.kubectl(&["delete", "allocations", "-l", "e2e-gap=1", "--wait=false"])
        .ok();
    // The Placement API names a consumer's Allocation after the consumer.
    for names in consumers.chunks(200) {
        let mut args = vec!["delete", "allocation", "--wait=false", "--ignore-not-found"];
        args.extend(names.iter().map(String::as_str));
        cp.kubectl(&args).ok();
    }
    cp.kubectl(&["delete", "resourceprovider", "e2e-gap-cn", "--wait=false"])
        .ok();
    delete_lease();
}

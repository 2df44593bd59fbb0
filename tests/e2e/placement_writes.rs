//! Writes through the Placement API over a cluster, raced by many clients at once on the
//! real control plane: claims on a provider and moves of allocations between consumers
//! (Nova's migrations) are decided one at a time and committed side by side, never
//! oversubscribe, and move the provider's generation exactly once each, as Placement's do.

use std::sync::{Arc, Barrier};

use serde_json::{Value, json};

use super::placement_api::{ACCESS, call, token, wait_for_api};
use super::support;
use super::{Operator, private_with_crds};

const CAPACITY: usize = 24;
const CLAIMERS: usize = 40;
const MOVERS: usize = 8;
const MOVES_EACH: usize = 6;

fn consumer(kind: u32, n: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

/// Moves an instance's VCPU to its migration record (even `step`) or back (odd), as Nova
/// does on a resize, through `POST /allocations` on `port`; the answer's status and body.
fn move_once(
    port: u16,
    token: &str,
    (instance, migration): (&str, &str),
    step: usize,
    (rp, vcpus, project): (&str, u64, &str),
) -> (u16, Value) {
    let (from, to) = if step % 2 == 0 {
        (instance, migration)
    } else {
        (migration, instance)
    };
    let generation = |c: &str| -> Value {
        call(port, "GET", &format!("/allocations/{c}"), Some(token), None).1["consumer_generation"]
            .clone()
    };
    let body = json!({
        from: {"allocations": {}, "project_id": project, "user_id": "u",
               "consumer_generation": generation(from), "consumer_type": "INSTANCE"},
        to: {"allocations": {rp: {"resources": {"VCPU": vcpus}}},
             "project_id": project, "user_id": "u",
             "consumer_generation": generation(to), "consumer_type": "MIGRATION"},
    });
    call(port, "POST", "/allocations", Some(token), Some(&body))
}

#[test]
fn racing_claims_and_moves_never_oversubscribe_and_move_generations_once_each() {
    let cp = private_with_crds();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(&cp, "placement-writer");
    let port = support::free_port();
    let op = Operator::start(
        &cp,
        "kubeplace-placement-writes",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port}"),
        ],
    );
    wait_for_api(port, &op);
    let rp = "5a5a5a5a-0000-4000-8000-000000000001";
    let (status, _) = call(
        port,
        "POST",
        "/resource_providers",
        Some(&writer),
        Some(&json!({"name": "cn-writes", "uuid": rp})),
    );
    assert_eq!(status, 200);
    let (status, inv) = call(
        port,
        "PUT",
        &format!("/resource_providers/{rp}/inventories"),
        Some(&writer),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": CAPACITY}}})),
    );
    assert_eq!(status, 200, "{inv}");
    let start = inv["resource_provider_generation"]
        .as_u64()
        .expect("a generation");

    // Claims: more clients than fit, all at once.
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let claims: Vec<_> = (0..CLAIMERS)
        .map(|i| {
            let (barrier, writer) = (barrier.clone(), writer.clone());
            std::thread::spawn(move || {
                let body = json!({"allocations": {rp: {"resources": {"VCPU": 1}}},
                                  "project_id": "p", "user_id": "u",
                                  "consumer_generation": null, "consumer_type": "INSTANCE"});
                barrier.wait();
                let (status, answer) = call(
                    port,
                    "PUT",
                    &format!("/allocations/{}", consumer(0x1, i)),
                    Some(&writer),
                    Some(&body),
                );
                assert!(matches!(status, 204 | 409), "{status} {answer}");
                (i, status == 204)
            })
        })
        .collect();
    let won: Vec<usize> = claims
        .into_iter()
        .map(|h| h.join().expect("a claimer"))
        .filter_map(|(i, won)| won.then_some(i))
        .collect();
    assert_eq!(
        won.len(),
        CAPACITY,
        "exactly the capacity's worth of claims wins"
    );
    let generation = || -> u64 {
        let (_, v) = call(
            port,
            "GET",
            &format!("/resource_providers/{rp}"),
            Some(&writer),
            None,
        );
        v["generation"].as_u64().expect("a generation")
    };
    assert_eq!(
        generation(),
        start + CAPACITY as u64,
        "each claim moved the generation once, the refused ones not at all"
    );

    // Moves: each of MOVERS instances moves its allocation to its migration record and back,
    // while late claimers try for the room a move seems to leave.
    let barrier = Arc::new(Barrier::new(MOVERS * 2));
    let movers: Vec<_> = won
        .iter()
        .take(MOVERS)
        .copied()
        .map(|i| {
            let (barrier, writer) = (barrier.clone(), writer.clone());
            std::thread::spawn(move || {
                let (instance, migration) = (consumer(0x1, i), consumer(0x2, i));
                barrier.wait();
                let mut moved = 0;
                for step in 0..MOVES_EACH * 2 {
                    let (status, answer) =
                        move_once(port, &writer, (&instance, &migration), step, (rp, 1, "p"));
                    assert_eq!(status, 204, "move {step} of {i}: {answer}");
                    moved += 1;
                }
                moved
            })
        })
        .collect();
    let late: Vec<_> = (0..MOVERS)
        .map(|i| {
            let (barrier, writer) = (barrier.clone(), writer.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut won = 0;
                for attempt in 0..MOVES_EACH {
                    let body = json!({"allocations": {rp: {"resources": {"VCPU": 1}}},
                                      "project_id": "p", "user_id": "u",
                                      "consumer_generation": null, "consumer_type": "INSTANCE"});
                    let c = consumer(0x3, i * MOVES_EACH + attempt);
                    let (status, _) = call(
                        port,
                        "PUT",
                        &format!("/allocations/{c}"),
                        Some(&writer),
                        Some(&body),
                    );
                    if status == 204 {
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let moves: usize = movers.into_iter().map(|h| h.join().expect("a mover")).sum();
    let late_won: usize = late.into_iter().map(|h| h.join().expect("a claimer")).sum();
    assert_eq!(moves, MOVERS * MOVES_EACH * 2);
    assert_eq!(
        late_won, 0,
        "a move between consumers never leaves room for another"
    );

    // Every instance ends holding its VCPU, no migration record holds any, the provider is
    // full and not over, and its generation moved once for each move.
    for &i in won.iter().take(MOVERS) {
        let (_, a) = call(
            port,
            "GET",
            &format!("/allocations/{}", consumer(0x1, i)),
            Some(&writer),
            None,
        );
        assert_eq!(a["allocations"][rp]["resources"]["VCPU"], 1, "{a}");
        let (_, m) = call(
            port,
            "GET",
            &format!("/allocations/{}", consumer(0x2, i)),
            Some(&writer),
            None,
        );
        assert_eq!(m["allocations"], json!({}), "{m}");
    }
    let (_, usages) = call(
        port,
        "GET",
        &format!("/resource_providers/{rp}/usages"),
        Some(&writer),
        None,
    );
    assert_eq!(usages["usages"]["VCPU"], CAPACITY, "{usages}");
    assert_eq!(generation(), start + (CAPACITY + moves) as u64);
    // What the API answers is what the cluster holds: the Allocations kubectl lists.
    let listed = cp.kubectl(&["get", "allocations", "-o", "name"]);
    assert_eq!(listed.ok().lines().count(), CAPACITY, "{}", listed.stdout);

    // After a restart (a fresh store, from the API server) the same generation is read.
    let before = generation();
    assert!(op.process.stop(std::time::Duration::from_secs(10)));
    let op = Operator::start(
        &cp,
        "kubeplace-placement-writes-2",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port}"),
        ],
    );
    wait_for_api(port, &op);
    assert_eq!(
        generation(),
        before,
        "the generation is kept by the objects"
    );
    op.stop_and_unregister(&cp);
    cp.shutdown();
}

/// Moves made through one replica, read through another all the while: the reader's store
/// follows the writer through the API server's watches, each kind on its own stream, yet it
/// never shows a move half made (the instance's allocation gone and the migration's not yet
/// there, or both), and neither do the providers' statuses (kubectl's view of usages).
#[test]
fn another_replica_never_shows_a_move_half_made() {
    const READERS_RP: &str = "5a5a5a5a-0000-4000-8000-000000000002";
    const INSTANCES: usize = 4;
    const MOVES: usize = 10;
    let cp = private_with_crds();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(&cp, "placement-writer");
    let (port_a, port_b) = (support::free_port(), support::free_port());
    let a = Operator::start(
        &cp,
        "kubeplace-writes-a",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port_a}"),
        ],
    );
    let b = Operator::start_named(
        &cp,
        "kubeplace-writes-b",
        "kubeplace-b",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port_b}"),
        ],
    );
    wait_for_api(port_a, &a);
    wait_for_api(port_b, &b);
    let rp = READERS_RP;
    let (status, _) = call(
        port_a,
        "POST",
        "/resource_providers",
        Some(&writer),
        Some(&json!({"name": "cn-readers", "uuid": rp})),
    );
    assert_eq!(status, 200);
    let (status, inv) = call(
        port_a,
        "PUT",
        &format!("/resource_providers/{rp}/inventories"),
        Some(&writer),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": 16}}})),
    );
    assert_eq!(status, 200, "{inv}");
    for i in 0..INSTANCES {
        let body = json!({"allocations": {rp: {"resources": {"VCPU": 2}}},
                          "project_id": "p-readers", "user_id": "u",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        let (status, answer) = call(
            port_a,
            "PUT",
            &format!("/allocations/{}", consumer(0x5, i)),
            Some(&writer),
            Some(&body),
        );
        assert_eq!(status, 204, "{answer}");
    }
    let held = (INSTANCES * 2) as u64;
    let usage_at_b = || -> Option<u64> {
        let (status, v) = call(
            port_b,
            "GET",
            &format!("/resource_providers/{rp}/usages"),
            Some(&writer),
            None,
        );
        (status == 200).then(|| v["usages"]["VCPU"].as_u64().unwrap_or(0))
    };
    assert!(
        (0..100).any(|_| {
            let seen = usage_at_b() == Some(held);
            if !seen {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            seen
        }),
        "replica b never showed the claims"
    );

    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (done, writer) = (done.clone(), writer.clone());
        std::thread::spawn(move || {
            let (mut reads, mut wrong) = (0usize, Vec::new());
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let (status, v) = call(
                    port_b,
                    "GET",
                    &format!("/resource_providers/{rp}/usages"),
                    Some(&writer),
                    None,
                );
                if status == 200 {
                    reads += 1;
                    if v["usages"]["VCPU"].as_u64() != Some(held) {
                        wrong.push(v.to_string());
                    }
                }
                let (status, v) = call(
                    port_b,
                    "GET",
                    "/usages?project_id=p-readers",
                    Some(&writer),
                    None,
                );
                if status == 200 {
                    reads += 1;
                    // At 1.38, by consumer type: the instances' and migrations' together.
                    let total: u64 = v["usages"]
                        .as_object()
                        .map(|types| types.values().filter_map(|t| t["VCPU"].as_u64()).sum())
                        .unwrap_or(0);
                    if total != held {
                        wrong.push(format!("project: {v}"));
                    }
                }
            }
            (reads, wrong)
        })
    };
    let statuses = {
        let done = done.clone();
        let kubeconfig = cp.kubeconfig.clone();
        let kubectl = support::bin_dir().join("kubectl");
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let out = std::process::Command::new(&kubectl)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args([
                        "get",
                        "resourceprovider",
                        "cn-readers",
                        "-o",
                        "jsonpath={.status.usages.VCPU}",
                    ])
                    .output()
                    .expect("kubectl runs");
                seen.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
            }
            seen
        })
    };
    let movers: Vec<_> = (0..INSTANCES)
        .map(|i| {
            let writer = writer.clone();
            std::thread::spawn(move || {
                let (instance, migration) = (consumer(0x5, i), consumer(0x6, i));
                for step in 0..MOVES * 2 {
                    let (status, answer) = move_once(
                        port_a,
                        &writer,
                        (&instance, &migration),
                        step,
                        (rp, 2, "p-readers"),
                    );
                    assert_eq!(status, 204, "move {step} of {i}: {answer}");
                }
            })
        })
        .collect();
    for m in movers {
        m.join().expect("a mover");
    }
    // The statuses follow a little behind the store: let them settle before stopping.
    std::thread::sleep(std::time::Duration::from_secs(2));
    done.store(true, std::sync::atomic::Ordering::Release);
    let (reads, wrong) = sampler.join().expect("the sampler");
    let seen = statuses.join().expect("the status reader");
    eprintln!(
        "replica b answered {reads} usage reads during {} moves; kubectl read the status {} times",
        INSTANCES * MOVES * 2,
        seen.len()
    );
    assert!(reads > 100, "too few reads to tell: {reads}");
    assert!(
        wrong.is_empty(),
        "replica b showed a move half made {} times in {reads} reads: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let off: Vec<&String> = seen
        .iter()
        .filter(|s| !s.is_empty() && s.as_str() != held.to_string())
        .collect();
    assert!(
        off.is_empty(),
        "the provider's status showed usages of a move half made: {off:?}"
    );
    a.stop_and_unregister(&cp);
    b.stop_and_unregister(&cp);
    cp.shutdown();
}

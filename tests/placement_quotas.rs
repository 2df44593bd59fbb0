//! Quotas through `kubeplace placement serve`: 64 Placement API clients racing for one
//! project's quota get exactly its limit, whatever capacity allows; the quota and what a
//! project may still create are readable under `/kubeplace/`; bad questions get 400s.

mod placement_server;

use placement_server::Server;
use serde_json::{Value, json};

const CLOUD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/quotas/cloud.yaml");
const SHOP: &str = "5b0b0000-0000-4000-8000-000000000001";
const CN1: &str = "0e000000-0000-4000-8000-000000000001";
const CN2: &str = "0e000000-0000-4000-8000-000000000002";
const LATEST: Option<&str> = Some("1.39");

fn claim(project: &str, host: &str, vcpu: i64, consumer_type: &str) -> Value {
    json!({"allocations": {host: {"resources": {"VCPU": vcpu}}},
           "project_id": project, "user_id": "u1",
           "consumer_generation": null, "consumer_type": consumer_type})
}

fn consumer(n: usize) -> String {
    format!("c0000000-0000-4000-8000-{n:012}")
}

#[test]
fn sixty_four_racing_clients_of_one_project_get_exactly_its_limit() {
    let s = Server::start(&["-f", CLOUD]);
    let results: Vec<(u16, String)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..64)
            .map(|i| {
                let s = &s;
                scope.spawn(move || {
                    let host = if i % 2 == 0 { CN1 } else { CN2 };
                    let a = s.call(
                        "PUT",
                        &format!("/allocations/{}", consumer(i)),
                        LATEST,
                        Some(&claim(SHOP, host, 1, "INSTANCE")),
                    );
                    (a.status, a.body)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let won = results.iter().filter(|(st, _)| *st == 204).count();
    assert_eq!(won, 10, "exactly class:VCPU 10 won");
    for (status, body) in results.iter().filter(|(st, _)| *st != 204) {
        assert_eq!(*status, 409, "{body}");
        assert!(
            body.contains("class:VCPU is limited to 10; 10 in use, 1 more asked")
                && body.contains("ProjectQuota shop/limits"),
            "{body}"
        );
    }
    // Placement's usages count every consumer; kubeplace's path says what the quota holds.
    let usages = s.call("GET", &format!("/usages?project_id={SHOP}"), LATEST, None);
    assert_eq!(usages.json()["usages"]["INSTANCE"]["VCPU"], 10);
    let q = s.call(
        "GET",
        &format!("/kubeplace/quotas?project_id={SHOP}"),
        LATEST,
        None,
    );
    q.expect(200);
    let q = q.json();
    assert_eq!(q["quota"], "ProjectQuota shop/limits");
    assert_eq!(q["limits"]["class:VCPU"], json!({"limit": 10, "used": 10}));
    assert_eq!(
        q["limits"]["servers"],
        json!({"limit": -1, "used": 10}),
        "{q}"
    );
    // A migration consumer is not charged: a move at the limit goes through.
    let moved = s.call(
        "PUT",
        &format!("/allocations/{}", consumer(1000)),
        LATEST,
        Some(&claim(SHOP, CN1, 4, "MIGRATION")),
    );
    moved.expect(204);
    // Released: room again.
    let (first, _) = results
        .iter()
        .enumerate()
        .find(|(_, (st, _))| *st == 204)
        .map(|(i, r)| (i, r.clone()))
        .unwrap();
    s.call(
        "DELETE",
        &format!("/allocations/{}", consumer(first)),
        LATEST,
        None,
    )
    .expect(204);
    s.call(
        "PUT",
        &format!("/allocations/{}", consumer(2000)),
        LATEST,
        Some(&claim(SHOP, CN2, 1, "INSTANCE")),
    )
    .expect(204);
}

#[test]
fn the_default_quota_governs_projects_without_their_own() {
    let s = Server::start(&["-f", CLOUD]);
    for i in 0..3 {
        s.call(
            "PUT",
            &format!("/allocations/{}", consumer(i)),
            LATEST,
            Some(&claim("other-project", CN1, 100, "INSTANCE")),
        )
        .expect(204);
    }
    let a = s.call(
        "PUT",
        &format!("/allocations/{}", consumer(3)),
        LATEST,
        Some(&claim("other-project", CN1, 1, "INSTANCE")),
    );
    a.expect(409);
    assert!(
        a.body.clone().contains("DefaultProjectQuota default"),
        "{}",
        a.body.clone()
    );
    assert!(
        a.body.clone().contains("servers is limited to 3"),
        "{}",
        a.body.clone()
    );
    // A consumer's claim replaced is not a new server.
    s.call(
        "PUT",
        &format!("/allocations/{}", consumer(0)),
        LATEST,
        Some(&json!({"allocations": {CN1: {"resources": {"VCPU": 1}}},
                     "project_id": "other-project", "user_id": "u1",
                     "consumer_generation": 1, "consumer_type": "INSTANCE"})),
    )
    .expect(204);
}

#[test]
fn headroom_says_what_a_projects_quota_allows_and_bad_questions_are_400s() {
    let s = Server::start(&["-f", CLOUD]);
    for i in 0..3 {
        s.call(
            "PUT",
            &format!("/allocations/{}", consumer(i)),
            LATEST,
            Some(&claim("shop", CN1, 2, "INSTANCE")),
        )
        .expect(204);
    }
    let h = s.call(
        "GET",
        "/kubeplace/headroom?flavor=q.small&project=shop",
        LATEST,
        None,
    );
    h.expect(200);
    let h = h.json();
    assert!(h["fits"].as_u64().unwrap() >= 500, "{h}");
    // 10 VCPU, 6 used by shop's three claims of 2: two more small servers.
    assert_eq!(
        h["withinQuota"],
        json!({"project": "shop", "quota": "ProjectQuota shop/limits", "servers": 2, "limitedBy": "class:VCPU"})
    );
    let bad = s.call("GET", "/kubeplace/quotas", LATEST, None);
    bad.expect(400);
    assert!(bad.body.clone().contains("project_id is required"));
    let bad = s.call("GET", "/kubeplace/quotas?project=shop", LATEST, None);
    bad.expect(400);
    assert!(
        bad.body.clone().contains("\\\"project\\\""),
        "{}",
        bad.body.clone()
    );
    // A project without a ProjectQuota: the default governs it.
    let other = s
        .call("GET", "/kubeplace/quotas?project_id=nobody", LATEST, None)
        .json();
    assert_eq!(other["quota"], "DefaultProjectQuota default");
    assert_eq!(other["limits"], json!({"servers": {"limit": 3, "used": 0}}));
}

//! Availability zones, tenant isolation, isolated aggregates, a cordoned host and an
//! anti-affinity server group through kubectl: `examples/zones/` applied to a control
//! plane of the test's own, every Server placed where the Aggregates and its group allow,
//! and the ones that cannot be placed saying why in `kubectl describe`.

use std::time::Duration;

use super::support::ControlPlane;
use super::{Operator, eventually, private_with_crds};

fn host(cp: &ControlPlane, ns: &str, server: &str) -> String {
    cp.kubectl(&[
        "get",
        "server",
        server,
        "-n",
        ns,
        "-o",
        "jsonpath={.status.host}",
    ])
    .stdout
    .trim()
    .to_string()
}

#[test]
fn zones_tenants_and_isolated_hosts_decide_where_servers_land() {
    let cp = private_with_crds();
    let op = Operator::start(&cp, "kubeplace-zones", &["--leader-elect=false"]);
    let applied = cp.kubectl(&["apply", "-f", "examples/zones/"]);
    assert!(
        applied
            .ok()
            .contains("aggregate.kubeplace.io/z-east created"),
        "{}",
        applied.stdout
    );
    for (ns, server, want) in [
        ("lab", "web-east", "z-cn1"),
        ("bank", "ledger", "z-cn2"),
        ("lab", "render", "z-cn4"),
        ("lab", "web-west", "z-cn3"),
    ] {
        eventually(
            &cp,
            &[
                "get",
                "server",
                server,
                "-n",
                ns,
                "-o",
                "jsonpath={.status.host}",
            ],
            want,
        );
    }
    for (server, reason) in [
        ("wide-east", "NoValidHost"),
        ("nowhere", "AvailabilityZoneNotFound"),
    ] {
        eventually(
            &cp,
            &[
                "get",
                "server",
                server,
                "-n",
                "lab",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Scheduled\")].reason}",
            ],
            reason,
        );
        assert_eq!(host(&cp, "lab", server), "");
    }
    // The explanation names the zone's aggregate, in the condition and the Event.
    let mut described = String::new();
    for _ in 0..60 {
        described = cp
            .kubectl(&["describe", "server", "wide-east", "-n", "lab"])
            .ok()
            .to_string();
        if described.matches("(z-east, zone east)").count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        described.matches("(z-east, zone east)").count() >= 2,
        "{described}"
    );
    let nowhere = cp
        .kubectl(&["describe", "server", "nowhere", "-n", "lab"])
        .ok()
        .to_string();
    assert!(
        nowhere.contains("the zones are east, nova, west"),
        "{nowhere}"
    );
    // The anti-affinity group: two members on the two hosts the lab namespace may use,
    // the third refused with the hosts the group rules out.
    eventually(
        &cp,
        &[
            "get",
            "server",
            "web-c",
            "-n",
            "lab",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Scheduled\")].message}",
        ],
        "every candidate for z.small is on a host that server group web (anti-affinity, at most 1 per host) rules out: z-cn1, z-cn3",
    );
    let mut pair = vec![host(&cp, "lab", "web-a"), host(&cp, "lab", "web-b")];
    pair.sort();
    assert_eq!(pair, ["z-cn1", "z-cn3"]);
    eventually(
        &cp,
        &[
            "get",
            "servergroup",
            "web",
            "-n",
            "lab",
            "-o",
            "jsonpath={.status.memberCount}",
        ],
        "3",
    );
    // kubectl lists the aggregates with their zone and hosts.
    eventually(
        &cp,
        &[
            "get",
            "aggregate",
            "z-west",
            "-o",
            "jsonpath={.status.hosts} {.status.hostNames}",
        ],
        r#"3 ["z-cn3","z-cn4","z-cn5"]"#,
    );
    // An Aggregate taking another's uuid is refused, with the other named.
    let refused = cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {name: z-bad}\nspec: {uuid: 7a000000-0000-4000-8000-0000000000e1}\n",
    );
    assert!(
        refused
            .fails()
            .contains("is already the uuid of Aggregate \"z-east\""),
        "{}",
        refused.stderr
    );
    op.process.stop(Duration::from_secs(10));
    cp.shutdown();
}

//! `kubeplace placement export` into a Placement that already holds another state, against
//! real Placement 16 (the virtualenv of `hack/placement-venv.sh`): the writes go in an
//! order Placement takes, where taken in the plain order they would be refused. Providers
//! that trade names (a name is taken until its holder lets it go), a consumer that leaves a
//! class its provider's inventory loses (an inventory in use cannot be removed), a consumer
//! that moves into room another frees after it by uuid, and two consumers that trade full
//! providers. Each state is loaded into a Placement through its API; the source is imported
//! into a manifest and exported over the target, which must then read as the source.

#[path = "support/real_placement.rs"]
mod real_placement;

use std::collections::BTreeMap;
use std::process::{Command, Output};

use real_placement::{RealPlacement, ok};
use serde_json::{Value, json};

fn kubeplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .env_remove("OS_TOKEN")
        .output()
        .expect("kubeplace runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn rp(n: u32) -> String {
    format!("a0000000-0000-4000-8000-{n:012}")
}

fn consumer(n: u32) -> String {
    format!("c0000000-0000-4000-8000-{n:012}")
}

/// A state: providers (number, name, inventories) and consumers (number, allocations by
/// provider number).
struct State<'a> {
    providers: &'a [(u32, &'a str, Value)],
    consumers: &'a [(u32, Value)],
}

fn load(url: &str, state: &State<'_>) {
    for (n, name, inventories) in state.providers {
        ok(
            url,
            "POST",
            "/resource_providers",
            Some(&json!({"uuid": rp(*n), "name": name})),
        );
        ok(
            url,
            "PUT",
            &format!("/resource_providers/{}/inventories", rp(*n)),
            Some(&json!({"resource_provider_generation": 0, "inventories": inventories})),
        );
    }
    for (n, allocations) in state.consumers {
        let allocations: serde_json::Map<String, Value> = allocations
            .as_object()
            .unwrap()
            .iter()
            .map(|(p, r)| (rp(p.parse().unwrap()), json!({"resources": r})))
            .collect();
        ok(
            url,
            "PUT",
            &format!("/allocations/{}", consumer(*n)),
            Some(&json!({
                "allocations": allocations,
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": null,
                "consumer_type": "INSTANCE",
            })),
        );
    }
}

/// What Placement shows of the providers (name, totals) and of `consumers` (allocations).
fn reads(url: &str, consumers: &[u32]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let list = ok(url, "GET", "/resource_providers", None);
    for p in list["resource_providers"].as_array().unwrap() {
        let uuid = p["uuid"].as_str().unwrap();
        let inventories = ok(
            url,
            "GET",
            &format!("/resource_providers/{uuid}/inventories"),
            None,
        );
        let totals: BTreeMap<&str, &Value> = inventories["inventories"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(c, i)| (c.as_str(), &i["total"]))
            .collect();
        out.insert(
            format!("provider {uuid}"),
            json!({"name": p["name"], "inventories": totals}),
        );
    }
    for c in consumers {
        let a = ok(url, "GET", &format!("/allocations/{}", consumer(*c)), None);
        let held: BTreeMap<&str, &Value> = a["allocations"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(p, r)| (p.as_str(), &r["resources"]))
            .collect();
        out.insert(format!("consumer {c}"), json!(held));
    }
    out
}

/// Loads `source` and `target` into two Placements, imports the source into a manifest and
/// exports it over the target, which must then read as the source; a second export has
/// nothing left to write.
fn export_over(source: &State<'_>, target: &State<'_>) {
    let (from, over) = (RealPlacement::start(), RealPlacement::start());
    load(&from.url, source);
    load(&over.url, target);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("source.yaml");
    let m = manifest.to_str().unwrap();
    let out = kubeplace(&["placement", "import", "--from", &from.url, "--to-file", m]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = kubeplace(&["placement", "export", "--to", &over.url, "-f", m, "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let consumers: Vec<u32> = source.consumers.iter().map(|(n, _)| *n).collect();
    assert_eq!(reads(&over.url, &consumers), reads(&from.url, &consumers));
    let out = kubeplace(&[
        "placement",
        "export",
        "--to",
        &over.url,
        "-f",
        m,
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
}

fn vcpu(n: u32) -> Value {
    json!({"VCPU": {"total": n}})
}

#[test]
fn providers_that_trade_names() {
    export_over(
        &State {
            providers: &[(1, "b", vcpu(4)), (2, "a", vcpu(4))],
            consumers: &[],
        },
        &State {
            providers: &[(1, "a", vcpu(4)), (2, "b", vcpu(4))],
            consumers: &[],
        },
    );
}

#[test]
fn a_consumer_leaves_a_class_its_provider_loses() {
    export_over(
        &State {
            providers: &[(1, "cn1", vcpu(4))],
            consumers: &[(1, json!({"1": {"VCPU": 2}}))],
        },
        &State {
            providers: &[(
                1,
                "cn1",
                json!({"VCPU": {"total": 4}, "MEMORY_MB": {"total": 1024}}),
            )],
            consumers: &[(1, json!({"1": {"VCPU": 1, "MEMORY_MB": 512}}))],
        },
    );
}

#[test]
fn a_consumer_moves_into_room_another_frees_after_it() {
    let providers = [(1, "cn1", vcpu(4)), (2, "cn2", vcpu(4))];
    export_over(
        &State {
            providers: &providers,
            consumers: &[
                (1, json!({"2": {"VCPU": 4}})),
                (2, json!({"1": {"VCPU": 1}})),
            ],
        },
        &State {
            providers: &providers,
            consumers: &[
                (1, json!({"1": {"VCPU": 1}})),
                (2, json!({"2": {"VCPU": 4}})),
            ],
        },
    );
}

#[test]
fn consumers_that_trade_full_providers() {
    let providers = [(1, "cn1", vcpu(4)), (2, "cn2", vcpu(4))];
    export_over(
        &State {
            providers: &providers,
            consumers: &[
                (1, json!({"2": {"VCPU": 4}})),
                (2, json!({"1": {"VCPU": 4}})),
            ],
        },
        &State {
            providers: &providers,
            consumers: &[
                (1, json!({"1": {"VCPU": 4}})),
                (2, json!({"2": {"VCPU": 4}})),
            ],
        },
    );
}

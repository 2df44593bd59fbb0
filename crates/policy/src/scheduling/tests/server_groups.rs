//! Server groups on three hosts of 8 VCPU, servers of 2 VCPU placed in name order.

use crate::admission::admit_and_store;
use crate::scheduling::plan::plan;
use crate::scheduling::schedule_pending;
use crate::scheduling::server_groups::*;
use crate::store::Store;
use kubeplace_api::manifest::parse_stream;
use kubeplace_api::{Kind, Object, Server, allocation_name};
use kubeplace_core::placement::weighers::Weighers;

fn put(store: &mut Store, yaml: &str) {
    for doc in parse_stream("t.yaml", yaml).unwrap() {
        store.put(doc.object().unwrap().unwrap());
    }
}

fn cloud(group: &str) -> Store {
    let mut store = Store::default();
    for h in ["h1", "h2", "h3"] {
        put(
            &mut store,
            &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {h}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n    MEMORY_MB: {{total: 8192}}\n"
            ),
        );
    }
    put(
        &mut store,
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: f2}}\nspec: {{vcpus: 2, memoryMb: 512}}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: img}}\nspec: {{}}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: ServerGroup\nmetadata: {{name: g, namespace: app}}\nspec: {group}\n"
        ),
    );
    store
}

fn add_servers(store: &mut Store, names: &[&str], group: Option<&str>) {
    for n in names {
        let g = group.map(|g| format!("\n  group: {g}")).unwrap_or_default();
        put(
            store,
            &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: {n}, namespace: app}}\nspec:\n  flavor: f2\n  image: img{g}\n"
            ),
        );
    }
}

fn server(store: &Store, name: &str) -> Server {
    match store.get(&crate::store::ObjectKey {
        kind: Kind::Server,
        namespace: "app".into(),
        name: name.into(),
    }) {
        Some(Object::Server(s)) => s.clone(),
        _ => panic!("no server {name}"),
    }
}

/// Each server's host after placing them all, in name order ("" for none).
fn hosts(store: &mut Store, names: &[&str]) -> Vec<String> {
    schedule_pending(store, &Weighers::default());
    names
        .iter()
        .map(|n| {
            let s = server(store, n);
            match store.get_cluster(Kind::Allocation, &allocation_name(&s)) {
                Some(Object::Allocation(a)) => host_of(
                    store.index(),
                    a.spec.allocations.iter().map(|pa| pa.provider.as_str()),
                )
                .unwrap_or_default(),
                _ => String::new(),
            }
        })
        .collect()
}

const NAMES: [&str; 4] = ["s1", "s2", "s3", "s4"];

#[test]
fn anti_affinity_puts_members_on_different_hosts_and_refuses_a_fourth() {
    let mut store = cloud("{policy: anti-affinity}");
    add_servers(&mut store, &NAMES, Some("g"));
    let placed = hosts(&mut store, &NAMES);
    let mut used: Vec<&String> = placed[..3].iter().collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 3, "{placed:?}");
    assert_eq!(placed[3], "", "{placed:?}");
    let why = plan(&store, &Weighers::default(), &server(&store, "s4")).unwrap_err();
    assert_eq!(why.reason, "NoValidHost");
    assert_eq!(
        why.message,
        "every candidate for f2 is on a host that server group g (anti-affinity, at most 1 per host) rules out: h1, h2, h3"
    );
    // A server outside the group still goes anywhere.
    add_servers(&mut store, &["t1"], None);
    assert_ne!(hosts(&mut store, &["t1"])[0], "");
}

#[test]
fn max_server_per_host_lets_a_host_take_that_many() {
    let six = ["s1", "s2", "s3", "s4", "s5", "s6"];
    let mut store = cloud("{policy: anti-affinity, maxServerPerHost: 2}");
    add_servers(&mut store, &six, Some("g"));
    let placed = hosts(&mut store, &six);
    for h in ["h1", "h2", "h3"] {
        assert_eq!(placed.iter().filter(|p| *p == h).count(), 2, "{placed:?}");
    }
}

#[test]
fn affinity_keeps_members_on_the_first_ones_host_until_it_is_full() {
    let five = ["s1", "s2", "s3", "s4", "s5"];
    let mut store = cloud("{policy: affinity}");
    add_servers(&mut store, &five, Some("g"));
    let placed = hosts(&mut store, &five);
    // 8 VCPU: four 2-VCPU members on the first host, the fifth nowhere.
    assert!(
        placed[..4].iter().all(|h| *h == placed[0] && !h.is_empty()),
        "{placed:?}"
    );
    assert_eq!(placed[4], "");
    let why = plan(&store, &Weighers::default(), &server(&store, "s5")).unwrap_err();
    assert_eq!(why.reason, "NoValidHost");
    assert!(why.message.contains("in_tree="), "{}", why.message);
}

#[test]
fn soft_affinity_packs_and_soft_anti_affinity_spreads() {
    let mut store = cloud("{policy: soft-affinity}");
    add_servers(&mut store, &NAMES, Some("g"));
    let packed = hosts(&mut store, &NAMES);
    assert!(packed.iter().all(|h| *h == packed[0]), "{packed:?}");
    // A fifth member still finds a host when the group's is full.
    add_servers(&mut store, &["s5"], Some("g"));
    let fifth = hosts(&mut store, &["s5"]);
    assert!(!fifth[0].is_empty() && fifth[0] != packed[0], "{fifth:?}");

    let mut store = cloud("{policy: soft-anti-affinity}");
    add_servers(&mut store, &NAMES, Some("g"));
    let spread = hosts(&mut store, &NAMES);
    let mut used: Vec<&String> = spread[..3].iter().collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 3, "{spread:?}");
    assert_ne!(spread[3], "", "soft: a fourth is placed anyway");
}

#[test]
fn a_missing_group_is_said_and_groups_are_checked_at_admission() {
    let mut store = cloud("{policy: affinity}");
    add_servers(&mut store, &["s1"], Some("nope"));
    let why = plan(&store, &Weighers::default(), &server(&store, "s1")).unwrap_err();
    assert_eq!(why.reason, "ServerGroupNotFound");
    assert_eq!(
        why.message,
        "ServerGroup \"nope\" does not exist in namespace \"app\""
    );
    let group = |spec: &str| {
        parse_stream(
            "g.yaml",
            &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ServerGroup\nmetadata: {{name: h, namespace: app}}\nspec: {spec}\n"
            ),
        )
        .unwrap()
        .remove(0)
        .object()
        .unwrap()
        .unwrap()
    };
    let v = admit_and_store(&mut store, group("{policy: affinity, maxServerPerHost: 2}"));
    assert!(!v.allowed);
    assert!(
        v.message.contains("applies to anti-affinity only"),
        "{}",
        v.message
    );
    let v = admit_and_store(
        &mut store,
        group("{policy: anti-affinity, maxServerPerHost: 0}"),
    );
    assert!(
        v.message
            .contains("spec.maxServerPerHost is 0; it must be at least 1"),
        "{}",
        v.message
    );
    assert!(admit_and_store(&mut store, group("{policy: anti-affinity}")).allowed);
    let v = admit_and_store(&mut store, group("{policy: affinity}"));
    assert!(v.message.contains("spec cannot change"), "{}", v.message);
    // A bad policy is refused when the manifest is read, naming what is accepted.
    let bad = parse_stream(
        "g.yaml",
        "apiVersion: kubeplace.io/v1alpha1\nkind: ServerGroup\nmetadata: {name: x, namespace: app}\nspec: {policy: clustered}\n",
    )
    .unwrap()
    .remove(0)
    .object()
    .unwrap();
    let e = format!("{:?}", bad.unwrap_err());
    assert!(e.contains("anti-affinity"), "{e}");
    // A server cannot change its group.
    let mut moved = server(&store, "s1");
    moved.spec.group = Some("g".into());
    let v = admit_and_store(&mut store, Object::Server(moved));
    assert!(
        v.message
            .contains("spec.group cannot change (from \"nope\" to \"g\")"),
        "{}",
        v.message
    );
}

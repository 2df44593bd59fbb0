//! Headroom on small clouds whose answers can be worked out by hand.

use super::*;
use kubeplace_api::manifest::parse_stream;

fn store(yaml: &str) -> Store {
    let mut store = Store::default();
    for doc in parse_stream("t.yaml", yaml).unwrap() {
        store.put(doc.object().unwrap().unwrap());
    }
    store
}

/// A compute node with its VCPU inventory written out (`{total: 8}`, …) and 64 GiB.
fn node(name: &str, vcpu: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n  inventories:\n    VCPU: {vcpu}\n    MEMORY_MB: {{total: 65536}}\n---\n"
    )
}

fn flavor(name: &str, vcpus: i64, memory_mb: i64) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: {name}}}\nspec: {{vcpus: {vcpus}, memoryMb: {memory_mb}}}\n---\n"
    )
}

fn fits(yaml: &str, f: &str, without: &[&str]) -> Headroom {
    let without: Vec<String> = without.iter().map(|s| s.to_string()).collect();
    headroom(&store(yaml), &Weighers::default(), f, &without, DEFAULT_CAP).unwrap()
}

#[test]
fn eight_vcpus_hold_four_two_vcpu_servers() {
    let h = fits(
        &(node("cn1", "{total: 8}") + &flavor("f2", 2, 512)),
        "f2",
        &[],
    );
    assert_eq!(h.fits, 4);
    assert!(!h.capped);
    assert!(
        h.stopped_by.as_deref().unwrap().starts_with("NoValidHost"),
        "{h:?}"
    );
    assert_eq!(h.per_tree, BTreeMap::from([("cn1".to_string(), 4)]));
}

#[test]
fn ratio_reserved_and_max_unit_count() {
    // (8 - 2) * 1.5 = 9 VCPU: four 2-VCPU servers.
    let h = fits(
        &(node("cn1", "{total: 8, reserved: 2, allocationRatio: 1.5}") + &flavor("f2", 2, 512)),
        "f2",
        &[],
    );
    assert_eq!(h.fits, 4);
    // max_unit 1 refuses a 2-VCPU server outright, whatever is free.
    let h = fits(
        &(node("cn1", "{total: 8, maxUnit: 1}") + &flavor("f2", 2, 512)),
        "f2",
        &[],
    );
    assert_eq!(h.fits, 0);
    // Memory runs out before VCPU: 64 GiB hold three 20 GiB servers.
    let h = fits(
        &(node("cn1", "{total: 64}") + &flavor("big", 1, 20480)),
        "big",
        &[],
    );
    assert_eq!(h.fits, 3);
}

#[test]
fn existing_usage_and_the_cap() {
    let used = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: a}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5a\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 5}\n---\n";
    let h = fits(
        &(node("cn1", "{total: 8}") + used + &flavor("f1", 1, 512)),
        "f1",
        &[],
    );
    assert_eq!(h.fits, 3);
    let capped = headroom(
        &store(&(node("cn1", "{total: 64}") + &flavor("f1", 1, 512))),
        &Weighers::default(),
        "f1",
        &[],
        10,
    )
    .unwrap();
    assert_eq!(
        (capped.fits, capped.capped, capped.stopped_by),
        (10, true, None)
    );
}

#[test]
fn draining_a_host_takes_its_room_and_moves_its_servers() {
    let cloud = node("cn1", "{total: 8}")
        + &node("cn2", "{total: 8}")
        + &flavor("f2", 2, 512)
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: i}\nspec: {properties: {}}\n---\n";
    let mut s = store(&cloud);
    for i in 0..3 {
        let server = format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: s{i}, namespace: ns}}\nspec: {{flavor: f2, image: i}}\n---\n"
        );
        for doc in parse_stream("s.yaml", &server).unwrap() {
            s.put(doc.object().unwrap().unwrap());
        }
    }
    schedule_pending(&mut s, &Weighers::default());
    // 16 VCPU, 6 used: five more.
    let before = headroom(&s, &Weighers::default(), "f2", &[], DEFAULT_CAP).unwrap();
    assert_eq!(before.fits, 5);
    // Without cn1 its servers move to cn2 first: 8 - 6 = 2 VCPU, one more.
    let after = headroom(
        &s,
        &Weighers::default(),
        "f2",
        &["cn1".to_string()],
        DEFAULT_CAP,
    )
    .unwrap();
    assert_eq!(after.drained, ["cn1"]);
    assert_eq!(after.fits, 1, "{after:?}");
    assert_eq!(after.per_tree, BTreeMap::from([("cn2".to_string(), 1)]));
    let on_cn1 = 3 - s.index().used("cn2", "VCPU") as usize / 2;
    assert_eq!((after.displaced, after.displaced_unplaced), (on_cn1, 0));
    // Draining both leaves nothing, and the servers nowhere to go.
    let both = headroom(
        &s,
        &Weighers::default(),
        "f2",
        &["cn1".into(), "cn2".into()],
        DEFAULT_CAP,
    )
    .unwrap();
    assert_eq!(
        (both.fits, both.displaced, both.displaced_unplaced),
        (0, 3, 3)
    );
    // The store itself is untouched.
    assert_eq!(
        s.index().used("cn1", "VCPU") + s.index().used("cn2", "VCPU"),
        6
    );
}

#[test]
fn bad_questions_name_the_value_and_what_is_accepted() {
    let s = store(&(node("cn1", "{total: 8}") + &flavor("f2", 2, 512)));
    let e = headroom(&s, &Weighers::default(), "f3", &[], DEFAULT_CAP).unwrap_err();
    assert_eq!(e.to_string(), "flavor \"f3\" does not exist; flavors: f2");
    let e = headroom(&s, &Weighers::default(), "f2", &["cn9".into()], DEFAULT_CAP).unwrap_err();
    assert_eq!(
        e.to_string(),
        "provider \"cn9\" (to drain) does not exist; give a ResourceProvider's name, e.g. one of: cn1"
    );
    assert_eq!(
        headroom(&s, &Weighers::default(), "f2", &[], 0).unwrap_err(),
        HeadroomError::ZeroCap
    );
}

#[test]
fn a_round_counts_each_flavor_as_if_alone() {
    // Two hosts, one with usage; three flavors of different sizes. Counted one after the
    // other in one round, each count equals the headroom asked alone: a count's claims
    // are taken back before the next.
    let used = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: a}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5a\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 3}\n---\n";
    let yaml = node("cn1", "{total: 8}")
        + &node("cn2", "{total: 16, allocationRatio: 2.0}")
        + used
        + &flavor("small", 1, 512)
        + &flavor("medium", 4, 8192)
        + &flavor("large", 8, 40000);
    let original = store(&yaml);
    let mut round = HeadroomRound::new(&original, &Weighers::default());
    assert_eq!(round.flavors(), vec!["large", "medium", "small"]);
    for f in ["large", "small", "medium", "small"] {
        let counted = round.count(f, 40).unwrap();
        let alone = headroom(&original, &Weighers::default(), f, &[], 40).unwrap();
        assert_eq!(counted.servers as usize, alone.fits, "{f}");
        assert_eq!(counted.capped, alone.capped, "{f}");
        assert_eq!(counted.stopped_by, alone.stopped_by, "{f}");
    }
    // 5 + 32 VCPU free: 37 one-VCPU servers, under the cap; capped at 10.
    assert_eq!(round.count("small", 100).unwrap().servers, 37);
    let capped = round.count("small", 10).unwrap();
    assert_eq!(
        (capped.servers, capped.capped, capped.stopped_by),
        (10, true, None)
    );
    // cn1 has 5 VCPU free, too few for 8; cn2's 64 GiB hold one 40000 MiB server.
    assert_eq!(round.count("large", 100).unwrap().servers, 1);
    // Unknown flavors and a cap of 0 count nothing.
    assert_eq!(round.count("nope", 10), None);
    assert_eq!(round.count("small", 0), None);
    // The store the round was made from is untouched.
    assert!(
        original
            .get_cluster(Kind::Allocation, "headroom-0")
            .is_none()
    );
}

#[test]
fn recorded_headroom_is_forgotten_with_the_flavor() {
    let mut s = store(&(node("cn1", "{total: 8}") + &flavor("f2", 2, 512)));
    let mut figures = HeadroomFigures::default();
    record_headroom(&mut figures, &s, &Weighers::default(), 100);
    let h = figures.of("f2", &s).cloned().unwrap();
    assert_eq!((h.servers, h.capped), (4, false));
    assert!(h.stopped_by.unwrap().starts_with("NoValidHost"));
    // Recording again after the flavor is gone forgets it.
    s.delete(&crate::store::ObjectKey::cluster(Kind::Flavor, "f2"));
    record_headroom(&mut figures, &s, &Weighers::default(), 100);
    assert_eq!(figures.of("f2", &s), None);
    assert_eq!(figures, HeadroomFigures::default());
}

#[test]
fn before_its_first_count_a_flavor_keeps_the_headroom_its_status_shows() {
    let mut s = store(&(node("cn1", "{total: 8}") + &flavor("f2", 2, 512)));
    let key = crate::store::ObjectKey::cluster(Kind::Flavor, "f2");
    let shown = kubeplace_api::HeadroomStatus {
        servers: 7,
        capped: true,
        stopped_by: None,
        within_quota: Vec::new(),
    };
    s.set_status(
        &key,
        kubeplace_api::Status::Flavor(kubeplace_api::FlavorStatus {
            headroom: Some(shown.clone()),
            ..Default::default()
        }),
    );
    // A new leader has counted nothing yet: the status keeps what it shows.
    let mut figures = HeadroomFigures::default();
    assert_eq!(figures.of("f2", &s), Some(&shown));
    // Its first count replaces it.
    record_headroom(&mut figures, &s, &Weighers::default(), 100);
    assert_eq!(figures.of("f2", &s).unwrap().servers, 4);
    // With counting off, statuses show none.
    figures.turn_off();
    assert_eq!(figures.of("f2", &s), None);
}

#[test]
fn recording_says_whether_a_figure_changed() {
    let s = store(&(node("cn1", "{total: 8}") + &flavor("f2", 2, 512)));
    let counted = HeadroomRound::new(&s, &Weighers::default()).count("f2", 100);
    assert!(counted.is_some());
    let mut figures = HeadroomFigures::default();
    assert!(figures.set("f2", counted.clone()));
    assert!(!figures.set("f2", counted), "the same count again");
    assert!(figures.set("f2", None), "forgotten");
    assert!(!figures.set("f2", None), "nothing left to forget");
}

/// Two aggregates through which disk providers share their disk.
const AGGREGATES: [&str; 2] = [
    "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01",
    "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02",
];

/// The aggregates of `AGGREGATES` whose bit is set in `mask`, as a YAML line.
fn aggregates_line(mask: u8) -> String {
    let names: Vec<&str> = (0..2)
        .filter(|b| mask & (1 << b) != 0)
        .map(|b| AGGREGATES[b])
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!("  aggregates: [{}]\n", names.join(", "))
    }
}

/// A compute node with memory, VCPU and disk of its own when above 0, in the aggregates
/// of `mask`.
fn node_with(name: &str, vcpu: i64, disk: i64, mask: u8) -> String {
    let vcpu = if vcpu > 0 {
        format!("    VCPU: {{total: {vcpu}}}\n")
    } else {
        String::new()
    };
    let disk = if disk > 0 {
        format!("    DISK_GB: {{total: {disk}}}\n")
    } else {
        String::new()
    };
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n  inventories:\n{vcpu}    MEMORY_MB: {{total: 65536}}\n{disk}{}---\n",
        aggregates_line(mask)
    )
}

/// A provider of disk that shares it with the trees of the aggregates of `mask`, under
/// `parent` or a root.
fn pool(name: &str, parent: Option<&str>, disk: i64, mask: u8) -> String {
    let parent = parent.map_or(String::new(), |p| format!("  parent: {p}\n"));
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n{parent}  inventories:\n    DISK_GB: {{total: {disk}}}\n  traits: [MISC_SHARES_VIA_AGGREGATE]\n{}---\n",
        aggregates_line(mask)
    )
}

fn flavor_with_disk(name: &str, vcpus: i64, disk_gb: i64) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: {name}}}\nspec: {{vcpus: {vcpus}, memoryMb: 512, diskGb: {disk_gb}}}\n---\n"
    )
}

/// Where enough trees can each take a server on their own, a round answers "capped"
/// without placing any, and that is what placing them one at a time answers too.
#[test]
fn many_trees_that_each_fit_one_cap_the_count_without_placing() {
    let mut yaml = pool("pool", None, 1000, 1);
    for i in 0..12 {
        // Every third node has no disk of its own: it fits only through the pool.
        yaml += &node_with(&format!("cn{i:02}"), 4, if i % 3 == 0 { 0 } else { 50 }, 1);
    }
    yaml += &flavor_with_disk("f", 2, 20);
    let s = store(&yaml);
    let request = headroom_request(&s, "f").unwrap();
    // Eight nodes have disk of their own.
    assert!(trees_each_take_one(&s, &request, 8));
    assert!(!trees_each_take_one(&s, &request, 9));
    let mut round = HeadroomRound::new(&s, &Weighers::default());
    let quick = round.count("f", 8).unwrap();
    assert_eq!((quick.servers, quick.capped), (8, true));
    // Nothing was claimed in the round's copy.
    assert!(round.copy.list(Kind::Allocation).next().is_none());
    let long = headroom(&s, &Weighers::default(), "f", &[], 8).unwrap();
    assert_eq!((long.fits, long.capped), (8, true));
    // Beyond them the count is placed one at a time, and agrees with the long way:
    // 8 nodes hold two each on their own disk; the pool's 1000 GiB serve the four others.
    let counted = round.count("f", 30).unwrap();
    let long = headroom(&s, &Weighers::default(), "f", &[], 30).unwrap();
    assert_eq!(counted.servers as usize, long.fits);
    assert_eq!(counted.stopped_by, long.stopped_by);
    assert_eq!(long.fits, 24);
}

/// A tree whose only disk shares it is not one that fits "on its own": a server anchored
/// elsewhere can take that disk. Here hx's disk is in the first aggregate and hy's (a-disk)
/// in the second; hx is in both, hy in the second only. Each tree could take one server
/// with its own providers, but every candidate leaves no VCPU, so the tie goes to the
/// providers whose names sort first: hx with hy's disk, after which hy has VCPU and no disk.
#[test]
fn a_tree_whose_disk_shares_does_not_fit_on_its_own() {
    let yaml = node_with("hx", 2, 0, 0b11)
        + &pool("hx-disk", Some("hx"), 10, 0b01)
        + &node_with("hy", 2, 0, 0b10)
        + &pool("a-disk", Some("hy"), 10, 0b10)
        + &flavor_with_disk("f", 2, 10);
    let s = store(&yaml);
    let request = headroom_request(&s, "f").unwrap();
    assert!(!trees_each_take_one(&s, &request, 1));
    let long = headroom(&s, &Weighers::default(), "f", &[], 2).unwrap();
    assert_eq!(long.per_tree, BTreeMap::from([("hx".to_string(), 1)]));
    assert!(!long.capped);
    let counted = HeadroomRound::new(&s, &Weighers::default())
        .count("f", 2)
        .unwrap();
    assert_eq!((counted.servers, counted.capped), (1, false));
}

mod random_clouds {
    use super::*;
    use proptest::prelude::*;

    /// One tree: VCPU on the root or in a NUMA cell, disk of its own (or none), in some
    /// of the two aggregates, perhaps a sharing disk provider inside it, and some usage.
    #[derive(Debug, Clone)]
    struct Tree {
        vcpu: i64,
        numa: bool,
        disk: i64,
        aggregates: u8,
        shared_inside: Option<(i64, u8)>,
        used_vcpu: i64,
    }

    fn tree() -> impl Strategy<Value = Tree> {
        (
            1i64..9,
            any::<bool>(),
            prop_oneof![Just(0i64), 10i64..80],
            0u8..4,
            proptest::option::weighted(0.4, (10i64..40, 1u8..4)),
            0i64..5,
        )
            .prop_map(
                |(vcpu, numa, disk, aggregates, shared_inside, used_vcpu)| Tree {
                    vcpu,
                    numa,
                    disk,
                    aggregates,
                    shared_inside,
                    used_vcpu,
                },
            )
    }

    fn cloud(trees: &[Tree], pools: &[(i64, u8)]) -> String {
        let mut yaml = String::new();
        for (i, (disk, mask)) in pools.iter().enumerate() {
            yaml += &pool(&format!("pool{i}"), None, *disk, *mask);
        }
        for (i, t) in trees.iter().enumerate() {
            let root = format!("cn{i}");
            let vcpu_on = if t.numa {
                yaml += &node_with(&root, 0, t.disk, t.aggregates);
                let cell = format!("{root}-numa0");
                yaml += &format!(
                    "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {cell}}}\nspec:\n  parent: {root}\n  inventories:\n    VCPU: {{total: {}}}\n---\n",
                    t.vcpu
                );
                cell
            } else {
                yaml += &node_with(&root, t.vcpu, t.disk, t.aggregates);
                root.clone()
            };
            if let Some((disk, mask)) = t.shared_inside {
                yaml += &pool(&format!("{root}-disk"), Some(&root), disk, mask);
            }
            if t.used_vcpu > 0 && t.used_vcpu <= t.vcpu {
                yaml += &format!(
                    "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: used-{i}}}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-{i:012}\n  allocations:\n  - provider: {vcpu_on}\n    resources: {{VCPU: {}}}\n---\n",
                    t.used_vcpu
                );
            }
        }
        yaml
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// A round's count, stopped early where enough trees each fit one on their own,
        /// is always the count of placing servers one at a time with the scheduler's
        /// choice.
        #[test]
        fn a_rounds_count_is_the_count_of_placing_one_at_a_time(
            trees in proptest::collection::vec(tree(), 1..7),
            pools in proptest::collection::vec((10i64..60, 0u8..4), 0..3),
            vcpus in 1i64..4,
            disk_gb in prop_oneof![Just(0i64), 5i64..30],
            cap in 1usize..6,
        ) {
            let yaml = cloud(&trees, &pools) + &flavor_with_disk("f", vcpus, disk_gb);
            let s = store(&yaml);
            let mut round = HeadroomRound::new(&s, &Weighers::default());
            let counted = round.count("f", cap).unwrap();
            let long = headroom(&s, &Weighers::default(), "f", &[], cap).unwrap();
            prop_assert_eq!(counted.servers as usize, long.fits);
            prop_assert_eq!(counted.capped, long.capped);
            let stopped_by = long
                .stopped_by
                .map(|s| kubeplace_core::text::truncated(&s, STOPPED_BY_MAX));
            prop_assert_eq!(counted.stopped_by, stopped_by);
        }
    }
}

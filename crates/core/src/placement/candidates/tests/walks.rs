//! The ways of walking (pruning, closed-form counts, backtracking, several threads) give the
//! answer of walking every tree and combination; the budget bounds them.

use super::{AGG, AGG2, Cloud, numa_node};
use crate::placement::candidates::gather::{gathered_in_parallel, trees_of};
use crate::placement::candidates::search::prepare;
use crate::placement::candidates::visit::{Found, Visit};
use crate::placement::candidates::{
    Candidate, CandidateSet, STOP_CHECK_EVERY, SpareCandidates, Stop, Walk,
    allocation_candidates_within, count_candidates, counted_candidates_walking,
    counted_candidates_with, try_allocation_candidates, try_allocation_candidates_until,
    try_counted_candidates, try_counted_candidates_with,
};
use crate::placement::ids::ProviderId;
use crate::placement::microversion::Microversion;
use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::{CandidatesQuery, parse_candidates_query};
use crate::placement::tree_shapes::Lookup;

#[test]
fn pruning_keeps_every_tree_that_can_serve() {
    // Six trees, traits on roots and cells, one sharing DISK_GB pool linked through a cell's
    // aggregate of one tree and a root's aggregate of another.
    let mut c = Cloud::new();
    for (i, cn) in ["cn1", "cn2", "cn3", "cn4", "cn5", "cn6"]
        .iter()
        .enumerate()
    {
        let traits: &[&str] = if i % 2 == 0 { &["CUSTOM_GOLD"] } else { &[] };
        c = numa_node(c, cn, traits);
    }
    let c = c
        .disk_pool()
        .rp(
            "cn2-numa1",
            Some("cn2"),
            &[("VCPU", 4), ("SRIOV_NET_VF", 2)],
            &["CUSTOM_GOLD"],
            &[AGG],
        )
        .rp("cn5", None, &[], &["CUSTOM_GOLD"], &[AGG])
        .rp("cn5-numa0", Some("cn5"), &[("PCPU", 2)], &[], &[]);
    let queries = [
        ("resources=VCPU:1&required=CUSTOM_GOLD", 39),
        ("resources=VCPU:1,DISK_GB:10&required=CUSTOM_GOLD", 39),
        ("resources=VCPU:1,DISK_GB:10&required=!CUSTOM_GOLD", 39),
        ("resources=DISK_GB:10&root_required=CUSTOM_GOLD", 39),
        ("resources=PCPU:1&root_required=CUSTOM_GOLD", 39),
        (&format!("resources=VCPU:1,DISK_GB:10&member_of={AGG}"), 39),
        (
            "resources=VCPU:1&resources1=SRIOV_NET_VF:1&required1=CUSTOM_GOLD",
            39,
        ),
        (
            "resources=MEMORY_MB:1&resources1=DISK_GB:5&group_policy=isolate",
            39,
        ),
        ("resources=VCPU:1,DISK_GB:10&limit=2", 39),
        ("resources=VCPU:1", 28),
    ];
    for (q, mv) in queries {
        let query = parse_candidates_query(q, Microversion(mv)).unwrap();
        let (all_count, all) =
            counted_candidates_walking(&c.0, &query, usize::MAX, false, 0, false);
        assert!(all_count > 0, "{q} has candidates");
        for walk_first in [0, 1, 3] {
            let (count, pruned) =
                counted_candidates_walking(&c.0, &query, usize::MAX, true, walk_first, true);
            assert_eq!(count, all_count, "{q}");
            assert_eq!(pruned.candidates, all.candidates, "{q}");
            assert_eq!(pruned.summary_only, all.summary_only, "{q}");
            // Only counting: trees are counted in closed form where that is exact.
            let (count, _) = counted_candidates_walking(&c.0, &query, 0, true, walk_first, true);
            assert_eq!(count, all_count, "{q}");
        }
    }
}

/// `nodes` compute nodes of `cells` NUMA cells (VCPU, HW_NUMA_ROOT) with `devices`
/// one-unit CUSTOM_ACCEL providers each; device 0 of each cell has CUSTOM_FAST.
fn wide(nodes: usize, cells: usize, devices: usize) -> Cloud {
    let mut c = Cloud::new();
    for n in 0..nodes {
        let cn = format!("cn{n}");
        c = c.rp(&cn, None, &[("DISK_GB", 100)], &["COMPUTE_NODE"], &[]);
        for cell in 0..cells {
            let numa = format!("{cn}-numa{cell}");
            c = c.rp(&numa, Some(&cn), &[("VCPU", 16)], &["HW_NUMA_ROOT"], &[]);
            for d in 0..devices {
                let traits: &[&str] = if d == 0 { &["CUSTOM_FAST"] } else { &[] };
                let dev = format!("{numa}-dev{d:02}");
                c = c.rp(&dev, Some(&numa), &[("CUSTOM_ACCEL", 1)], traits, &[]);
            }
        }
    }
    c
}

/// `resources=VCPU:1` and `groups` numbered groups of one CUSTOM_ACCEL.
fn accel_query(groups: usize, extra: &str) -> String {
    let mut q = "resources=VCPU:1".to_string();
    for i in 1..=groups {
        q.push_str(&format!("&resources{i}=CUSTOM_ACCEL:1"));
    }
    q + extra
}

fn walked(c: &Cloud, q: &str, keep: usize, walk: Walk) -> (usize, CandidateSet) {
    let query = parse_candidates_query(q, Microversion(39)).unwrap();
    counted_candidates_with(&c.0, &query, keep, walk)
}

#[test]
fn backtracking_gives_the_candidates_of_trying_every_combination_in_order() {
    let c = wide(2, 2, 3);
    let every = Walk {
        backtrack: false,
        budget: u64::MAX,
        ..Walk::default()
    };
    let subtree = "&required_N=HW_NUMA_ROOT&same_subtree=_N,1,2,3";
    for extra in [
        "&group_policy=isolate",
        "&group_policy=none",
        "&group_policy=isolate&required3=CUSTOM_FAST",
        "&group_policy=none&required2=CUSTOM_FAST&required3=CUSTOM_FAST",
        &format!("&group_policy=isolate{subtree}"),
        &format!("&group_policy=none{subtree}"),
    ] {
        let q = accel_query(3, extra);
        let (all_count, all) = walked(&c, &q, usize::MAX, every);
        let (count, got) = walked(&c, &q, usize::MAX, Walk::default());
        assert_eq!(count, all_count, "{q}");
        assert_eq!(got.candidates, all.candidates, "{q}");
        // Under a limit, the first candidates of the whole answer.
        let limited = format!("{q}&limit=7");
        let (_, first) = walked(&c, &limited, usize::MAX, Walk::default());
        assert_eq!(first.candidates, all.candidates[..7.min(all_count)], "{q}");
    }
    // Six devices in two trees, three isolated groups: 6·5·4 per tree, times the two cells
    // giving VCPU; same_subtree keeps the three devices in one cell: 3·2·1 per cell.
    assert_eq!(
        walked(&c, &accel_query(3, "&group_policy=isolate"), 0, every).0,
        480
    );
    let q = accel_query(3, &format!("&group_policy=isolate{subtree}"));
    assert_eq!(walked(&c, &q, 0, Walk::default()).0, 48);
}

#[test]
fn a_group_only_one_device_can_serve_does_not_stall_the_others() {
    // Seven groups take any device, the eighth only a CUSTOM_FAST one, which the first
    // group takes first: without looking ahead, 63·62·…·57 prefixes would fail in turn.
    let c = wide(1, 2, 32);
    let q = accel_query(8, "&group_policy=isolate&required8=CUSTOM_FAST&limit=5");
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let set = try_allocation_candidates(&c.0, &query).unwrap();
    assert_eq!(set.candidates.len(), 5);
    assert_eq!(set.exhausted, None);
    let fast = [
        c.0.id("cn0-numa0-dev00").unwrap(),
        c.0.id("cn0-numa1-dev00").unwrap(),
    ];
    for cand in &set.candidates {
        let eighth = set.mappings(cand).find(|(s, _)| *s == "8").unwrap().1;
        assert_eq!(eighth.len(), 1);
        assert!(fast.contains(&eighth[0]), "{eighth:?}");
    }
    // Two groups both needing the one fast device of a cell cannot both have it.
    let q = accel_query(
        8,
        "&group_policy=isolate&required7=CUSTOM_FAST&required8=CUSTOM_FAST",
    );
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let wide_one = wide(1, 1, 32);
    let (count, set) = try_counted_candidates(&wide_one.0, &query, 0).unwrap();
    assert_eq!((count, set.exhausted), (0, None));
}

#[test]
fn a_search_that_runs_out_of_budget_says_so() {
    let c = wide(4, 2, 32);
    let q = accel_query(8, "&group_policy=isolate");
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let small = Walk {
        budget: 20_000,
        ..Walk::default()
    };
    // Without a limit, listing the answer (4·2·64!/56! candidates) is out of reach: an
    // error naming the budget.
    let err = try_counted_candidates_with(&c.0, &query, usize::MAX, small).unwrap_err();
    assert_eq!(err.budget, 20_000);
    assert!(err.found > 0);
    assert!(err.to_string().contains("budget of 20000 steps"), "{err}");
    // With Nova's limit, the first thousand, found long before the budget runs out.
    let limited = parse_candidates_query(&format!("{q}&limit=1000"), Microversion(39)).unwrap();
    let set = try_allocation_candidates(&c.0, &limited).unwrap();
    assert_eq!((set.candidates.len(), set.exhausted), (1000, None));
    // A budget too small for the limit: what was found, marked, and the same candidates
    // as the start of the unhurried answer.
    let tiny = Walk {
        budget: 5_000,
        ..Walk::default()
    };
    let (count, few) = try_counted_candidates_with(&c.0, &limited, usize::MAX, tiny).unwrap();
    let exhausted = few.exhausted.expect("ran out");
    assert_eq!((exhausted.budget, exhausted.found), (5_000, count));
    assert!(count > 0 && count < 1000, "{count}");
    assert_eq!(few.candidates, set.candidates[..count]);
}

#[test]
fn numbered_groups_are_counted_without_trying_every_combination() {
    let c = wide(4, 2, 32);
    let small = Walk {
        budget: 20_000,
        ..Walk::default()
    };
    let walking = Walk {
        closed_form: false,
        ..small
    };
    // Per tree: 2 cells for VCPU, times 8 isolated groups on distinct devices of 64.
    let isolated: usize = (57..=64).product();
    let q = accel_query(8, "&group_policy=isolate");
    assert_eq!(walked(&c, &q, 0, small).0, 4 * 2 * isolated);
    assert!(walked(&c, &q, 0, small).1.exhausted.is_none());
    assert!(walked(&c, &q, 0, walking).1.exhausted.is_some());
    // No one-unit device takes two units.
    let q = accel_query(
        0,
        "&resources1=CUSTOM_ACCEL:2&resources2=CUSTOM_ACCEL:1&group_policy=none",
    );
    assert_eq!(walked(&c, &q, 0, small).0, 0);
    // Without isolate, several groups may land on one device, whose one unit then decides:
    // the count walks, and agrees with trying every combination.
    let few = wide(1, 1, 3);
    let every = Walk {
        backtrack: false,
        closed_form: false,
        budget: u64::MAX,
        ..Walk::default()
    };
    for extra in ["&group_policy=none", "&group_policy=isolate"] {
        let q = accel_query(2, extra);
        let (count, _) = walked(&few, &q, 0, Walk::default());
        assert_eq!(count, walked(&few, &q, usize::MAX, every).0, "{q}");
        assert_eq!(count, 3 * 2, "{q}");
    }
    // Two-unit devices take two groups of one unit each, isolate aside.
    let roomy = Cloud::new()
        .rp("cn0", None, &[("VCPU", 4)], &[], &[])
        .rp("cn0-dev0", Some("cn0"), &[("CUSTOM_ACCEL", 2)], &[], &[])
        .rp("cn0-dev1", Some("cn0"), &[("CUSTOM_ACCEL", 2)], &[], &[]);
    let q = accel_query(3, "&group_policy=none");
    assert_eq!(walked(&roomy, &q, 0, Walk::default()).0, 2 * 2 * 2 - 2);
    assert_eq!(walked(&roomy, &q, usize::MAX, every).0, 6);
}

#[test]
fn same_subtree_over_numa_cells_under_a_limit() {
    let c = wide(4, 2, 32);
    let q = accel_query(
        8,
        "&required_N=HW_NUMA_ROOT&same_subtree=_N,1,2,3,4,5,6,7,8&group_policy=isolate&limit=1000",
    );
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let set = try_allocation_candidates(&c.0, &query).unwrap();
    assert_eq!((set.candidates.len(), set.exhausted), (1000, None));
    for cand in &set.candidates {
        let numa = set.mappings(cand).find(|(s, _)| *s == "_N").unwrap().1;
        assert_eq!(numa.len(), 1);
        for (s, ps) in set.mappings(cand) {
            if !s.is_empty() && s != "_N" {
                assert_eq!(c.0.get(ps[0]).parent, Some(numa[0]), "{s} outside its cell");
            }
        }
    }
}

/// What sets compute node `i` (named `cn`) apart from the others of its kind: every
/// seventh at another usage of its first cell, each from `unlike_from` on at a usage of its
/// own of its second cell, and every fiftieth with a sharing provider inside the tree.
fn usages_apart(mut c: Cloud, i: usize, cn: &str, unlike_from: usize) -> Cloud {
    if i % 7 == 0 {
        c = c.used(&format!("{cn}-numa0"), "VCPU", 3);
    }
    if i >= unlike_from {
        c = c.used(&format!("{cn}-numa1"), "MEMORY_MB", i as i64);
    }
    if i % 50 == 1 {
        c = c.rp(
            &format!("{cn}-nfs"),
            Some(cn),
            &[("DISK_GB", 10 * (i as i64 + 1))],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG2],
        );
    }
    c
}

#[test]
fn trees_alike_are_counted_alike_and_only_those() {
    // 400 compute nodes of a few kinds: most alike, every seventh at a different usage,
    // every fifth in the pool's aggregate, a few with a sharing pool of their own inside
    // the tree, and the last 150 each at a usage of their own (few alike: remembering
    // counts stops, and the count must not change).
    let mut c = Cloud::new().disk_pool();
    for i in 0..400 {
        let cn = format!("cn{i:03}");
        let traits: &[&str] = if i % 3 == 0 { &["CUSTOM_GOLD"] } else { &[] };
        let aggs: &[&str] = if i % 5 == 0 { &[AGG] } else { &[AGG2] };
        c = c
            .rp(&cn, None, &[("DISK_GB", 100)], traits, aggs)
            .rp(
                &format!("{cn}-numa0"),
                Some(&cn),
                &[("VCPU", 4), ("MEMORY_MB", 1024)],
                &[],
                &[],
            )
            .rp(
                &format!("{cn}-numa1"),
                Some(&cn),
                &[("VCPU", 4), ("MEMORY_MB", 1024)],
                &[],
                &[],
            );
        c = usages_apart(c, i, &cn, 250);
    }
    let queries = [
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&required=CUSTOM_GOLD",
        "resources=VCPU:2,MEMORY_MB:512,DISK_GB:10",
        "resources=VCPU:2,MEMORY_MB:900&required=!CUSTOM_GOLD",
        "resources=VCPU:1,DISK_GB:200",
        "resources=VCPU:1,MEMORY_MB:700,DISK_GB:150",
    ];
    for q in queries {
        let query = parse_candidates_query(q, Microversion(39)).unwrap();
        let (walked, _) = counted_candidates_walking(&c.0, &query, usize::MAX, true, 0, false);
        let (counted, _) = counted_candidates_walking(&c.0, &query, 0, true, 0, true);
        assert!(walked > 0, "{q} has candidates");
        assert_eq!(counted, walked, "{q}");
        assert_eq!(count_candidates(&c.0, &query), walked, "{q}");
    }
}

/// Gathered on `threads` threads in vectors kept from one search to the next, the answer is
/// `whole` (with `count`) every time; from the second search on, the answer is gathered in
/// the vector the one before gave back, without growing it.
fn gathered_again_in_kept_room(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    threads: usize,
    count: usize,
    whole: &[Candidate],
) {
    let spare = SpareCandidates::new(1 << 20);
    let mut room_before = None;
    for round in 0..3 {
        let mut search = prepare(index, query);
        search.threads = threads;
        search.walk_apart_from = 0;
        search.budget = u64::MAX;
        search.spare = Some(&spare);
        let (n, _, got) = gathered_in_parallel(index, query, &search, usize::MAX).unwrap();
        assert_eq!((n, &got[..]), (count, whole), "round {round} on {threads}");
        // The same memory, not grown: the vector given back, in the first run.
        let room = (got.as_ptr(), got.capacity());
        if let Some(before) = room_before {
            assert_eq!(room, before, "round {round} on {threads}");
        }
        room_before = Some(room);
        spare.give_back(got);
        assert!(spare.bytes() >= std::mem::size_of_val(whole));
    }
}

#[test]
fn trees_walked_on_several_threads_give_the_answer_of_one_walk() {
    let c = wide(40, 2, 3);
    let one = Walk {
        budget: u64::MAX,
        ..Walk::default()
    };
    let queries = [
        ("resources=VCPU:1,DISK_GB:10", 39),
        ("resources=VCPU:1&required=!CUSTOM_FAST", 39),
        (&accel_query(2, "&group_policy=isolate") as &str, 39),
        (
            &accel_query(3, "&group_policy=none&required3=CUSTOM_FAST"),
            39,
        ),
        (
            "resources=VCPU:1&resources1=CUSTOM_ACCEL:1&required1=CUSTOM_FAST&group_policy=none&root_required=COMPUTE_NODE",
            36,
        ),
        ("resources=VCPU:1", 28),
        ("resources=DISK_GB:10", 20),
    ];
    for (q, mv) in queries {
        let query = parse_candidates_query(q, Microversion(mv)).unwrap();
        let (count, whole) = counted_candidates_with(&c.0, &query, usize::MAX, one);
        assert!(count > 0, "{q} at {mv}");
        for threads in [2, 3, 7] {
            let apart = Walk {
                threads,
                walk_apart_from: 0,
                ..one
            };
            let mut search = prepare(&c.0, &query);
            search.threads = threads;
            search.walk_apart_from = 0;
            search.budget = u64::MAX;
            assert!(
                gathered_in_parallel(&c.0, &query, &search, usize::MAX).is_some(),
                "{q} at {mv}: walked apart"
            );
            let (n, got) = counted_candidates_with(&c.0, &query, usize::MAX, apart);
            assert_eq!(n, count, "{q} at {mv} on {threads} threads");
            assert_eq!(got.candidates, whole.candidates, "{q} at {mv} on {threads}");
            assert_eq!(got.summary_trees, whole.summary_trees, "{q} at {mv}");
            assert_eq!(got.summary_only, whole.summary_only, "{q} at {mv}");
            assert_eq!(got.exhausted, None);
            gathered_again_in_kept_room(&c.0, &query, threads, count, &whole.candidates);
        }
    }
    // A budget that runs out: the error names what one walk found, not what the threads did.
    let query =
        parse_candidates_query(&accel_query(3, "&group_policy=isolate"), Microversion(39)).unwrap();
    let tight = Walk {
        budget: 3_000,
        ..Walk::default()
    };
    let alone = try_counted_candidates_with(&c.0, &query, usize::MAX, tight).unwrap_err();
    let apart = Walk {
        threads: 2,
        walk_apart_from: 0,
        ..tight
    };
    assert_eq!(
        try_counted_candidates_with(&c.0, &query, usize::MAX, apart).unwrap_err(),
        alone
    );
    // Sharing providers: a candidate made only of them counts once, whichever run of trees
    // finds it first.
    let mut shared = Cloud::new();
    for n in 0..40 {
        let cn = format!("cn{n:02}");
        let aggs: &[&str] = if n % 2 == 0 { &[AGG, AGG2] } else { &[AGG] };
        shared = shared.rp(&cn, None, &[("VCPU", 8)], &[], aggs);
        shared = shared.rp(
            &format!("{cn}-disk"),
            Some(&cn),
            &[("DISK_GB", 20)],
            &[],
            &[],
        );
    }
    shared = shared
        .rp(
            "ss1",
            None,
            &[("DISK_GB", 100)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        )
        .rp(
            "ss2",
            None,
            &[("DISK_GB", 100), ("IPV4_ADDRESS", 8)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG2],
        );
    for (q, mv) in [
        ("resources=DISK_GB:10", 39),
        ("resources=VCPU:1,DISK_GB:10", 39),
        (
            "resources=DISK_GB:10&resources1=IPV4_ADDRESS:1&group_policy=none",
            39,
        ),
        ("resources=DISK_GB:10", 28),
        ("resources=VCPU:1,DISK_GB:10", 20),
    ] {
        let query = parse_candidates_query(q, Microversion(mv)).unwrap();
        let (count, whole) = counted_candidates_with(&shared.0, &query, usize::MAX, one);
        let mut search = prepare(&shared.0, &query);
        search.threads = 2;
        search.walk_apart_from = 0;
        assert!(gathered_in_parallel(&shared.0, &query, &search, usize::MAX).is_some());
        for threads in [2, 3, 7] {
            let apart = Walk {
                threads,
                walk_apart_from: 0,
                ..one
            };
            let (n, got) = counted_candidates_with(&shared.0, &query, usize::MAX, apart);
            assert_eq!(n, count, "{q} at {mv} on {threads} threads");
            assert_eq!(got.candidates, whole.candidates, "{q} at {mv} on {threads}");
            assert_eq!(got.summary_only, whole.summary_only, "{q} at {mv}");
            gathered_again_in_kept_room(&shared.0, &query, threads, count, &whole.candidates);
        }
    }
    assert_eq!(
        shared
            .ask("resources=DISK_GB:10")
            .iter()
            .filter(|c| c.starts_with("ss"))
            .count(),
        2
    );
    // A limit, or keeping only some, walks once.
    let mut search = prepare(&c.0, &query);
    search.threads = 2;
    search.walk_apart_from = 0;
    assert!(gathered_in_parallel(&c.0, &query, &search, 10).is_none());
    for mv in [28, 39] {
        let limited = parse_candidates_query("resources=VCPU:1&limit=5", Microversion(mv)).unwrap();
        let mut search = prepare(&c.0, &limited);
        search.threads = 2;
        search.walk_apart_from = 0;
        assert!(gathered_in_parallel(&c.0, &limited, &search, usize::MAX).is_none());
        let apart = Walk {
            threads: 2,
            walk_apart_from: 0,
            ..one
        };
        let (n, got) = counted_candidates_with(&c.0, &limited, usize::MAX, apart);
        assert_eq!((n, got.candidates.len()), (5, 5), "at {mv}");
    }
}

#[test]
fn a_stopped_search_ends_as_one_out_of_budget() {
    let c = wide(4, 2, 32);
    let q = accel_query(8, "&group_policy=isolate");
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    // Asked to stop before it starts: it ends within one look's worth of steps, having
    // found next to nothing, where its budget would have let it run for millions.
    let stop = Stop::new();
    stop.stop();
    let spare = SpareCandidates::new(1 << 20);
    let err = try_allocation_candidates_until(&c.0, &query, &stop, &spare).unwrap_err();
    assert!(err.found as u64 <= STOP_CHECK_EVERY, "{err:?}");
    // With a limit, what was found by then, marked as cut short.
    let limited = parse_candidates_query(&format!("{q}&limit=1000"), Microversion(39)).unwrap();
    let few = try_allocation_candidates_until(&c.0, &limited, &stop, &spare).unwrap();
    assert!(few.exhausted.is_some());
    assert!(few.candidates.len() < 1000, "{}", few.candidates.len());
    // A stop never asked for changes nothing.
    let unasked = Stop::new();
    let whole = try_allocation_candidates_until(&c.0, &limited, &unasked, &spare).unwrap();
    assert_eq!(
        whole.candidates,
        try_allocation_candidates(&c.0, &limited)
            .unwrap()
            .candidates
    );
    assert_eq!(whole.exhausted, None);
    assert!(!unasked.is_stopped());
}

#[test]
fn a_search_within_its_steps_answers_as_one_with_the_whole_budget() {
    let c = wide(3, 2, 4);
    let spare = SpareCandidates::new(1 << 20);
    let unasked = Stop::new();
    for q in [
        "resources=VCPU:1,DISK_GB:10".to_string(),
        "resources=VCPU:1,DISK_GB:10&limit=2".to_string(),
        accel_query(2, "&group_policy=isolate"),
        accel_query(3, "&group_policy=none&limit=5"),
        "resources=VCPU:1&required=CUSTOM_MISSING".to_string(),
    ] {
        let query = parse_candidates_query(&q, Microversion(39)).unwrap();
        let whole = try_allocation_candidates_until(&c.0, &query, &unasked, &spare).unwrap();
        // The fewest steps it answers within, found by halving: from there on it is the
        // answer of the whole budget; one step fewer and it asks for more.
        let (mut short, mut enough) = (0u64, 1u64 << 24);
        while enough - short > 1 {
            let mid = (short + enough) / 2;
            match allocation_candidates_within(&c.0, &query, &unasked, &spare, mid) {
                Some(_) => enough = mid,
                None => short = mid,
            }
        }
        for steps in [enough, enough * 2, u64::MAX] {
            let within = allocation_candidates_within(&c.0, &query, &unasked, &spare, steps)
                .unwrap_or_else(|| panic!("{q}: none within {steps} steps"));
            assert_eq!(within.candidates, whole.candidates, "{q} within {steps}");
            assert_eq!(within.exhausted, None, "{q}");
        }
        if enough > 1 {
            assert!(
                allocation_candidates_within(&c.0, &query, &unasked, &spare, enough - 1).is_none(),
                "{q}"
            );
        }
    }
    // Pruning that would look at more providers than the steps allow is left to the walk,
    // which spends them: 64 trees none of which has the disk asked for.
    let trees = wide(64, 1, 1);
    let none_fit =
        parse_candidates_query("resources=VCPU:1,DISK_GB:1000", Microversion(39)).unwrap();
    assert!(allocation_candidates_within(&trees.0, &none_fit, &unasked, &spare, 2).is_none());
    let settled = allocation_candidates_within(&trees.0, &none_fit, &unasked, &spare, 8).unwrap();
    assert!(settled.candidates.is_empty());
    // A stopped search is not answered, however many steps it may take.
    let big = wide(4, 2, 32);
    let query = parse_candidates_query(
        &accel_query(8, "&group_policy=isolate&limit=1000"),
        Microversion(39),
    )
    .unwrap();
    let stop = Stop::new();
    stop.stop();
    assert!(allocation_candidates_within(&big.0, &query, &stop, &spare, u64::MAX).is_none());
    assert!(allocation_candidates_within(&big.0, &query, &unasked, &spare, u64::MAX).is_some());
}

#[test]
fn a_search_stopped_from_another_thread_ends() {
    let c = wide(4, 2, 32);
    let q = accel_query(8, "&group_policy=isolate");
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let stop = Stop::new();
    let spare = SpareCandidates::new(1 << 20);
    let asker = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        asker.stop();
    });
    // The whole budget is ten million steps; stopped after 20 ms, the search gives up
    // with the error a budget gives, and the caller tells the two apart by the stop.
    let stopped = try_allocation_candidates_until(&c.0, &query, &stop, &spare).unwrap_err();
    stopper.join().unwrap();
    assert!(stop.is_stopped());
    let spent = try_allocation_candidates(&c.0, &query).unwrap_err();
    assert!(stopped.found < spent.found, "{stopped:?} {spent:?}");
}

#[test]
fn a_search_whose_candidates_outgrow_its_memory_stops() {
    let c = wide(4, 2, 32);
    let q = accel_query(2, "&group_policy=isolate");
    let query = parse_candidates_query(&q, Microversion(39)).unwrap();
    let whole = try_counted_candidates_with(&c.0, &query, usize::MAX, Walk::default())
        .expect("fits the default budget");
    let per_candidate = whole.1.candidates[0].bytes();
    assert!(whole.0 > 100, "{}", whole.0);
    // Room for 100 candidates: the search stops at about that many, out of budget.
    let tight = Walk {
        max_kept_bytes: per_candidate * 100,
        ..Walk::default()
    };
    let err = try_counted_candidates_with(&c.0, &query, usize::MAX, tight).unwrap_err();
    assert!((95..=105).contains(&err.found), "{err:?}");
    assert!(err.to_string().contains("MiB of candidates"), "{err}");
    // With a limit under the room, the limit's candidates, as without the bound.
    let limited = parse_candidates_query(&format!("{q}&limit=50"), Microversion(39)).unwrap();
    let (_, set) = try_counted_candidates_with(&c.0, &limited, usize::MAX, tight).unwrap();
    assert_eq!((set.candidates.len(), set.exhausted), (50, None));
    assert_eq!(set.candidates, whole.1.candidates[..50]);
}

#[test]
fn mappings_hold_each_group_once_in_group_order_with_its_providers_sorted_and_distinct() {
    use crate::placement::candidates::Mappings;
    let p = ProviderId;
    let mut pairs = [
        (2, p(7)),
        (0, p(5)),
        (2, p(3)),
        (0, p(1)),
        (2, p(7)),
        (1, p(9)),
    ];
    let m = Mappings::from_pairs(&mut pairs);
    let groups: Vec<(usize, Vec<ProviderId>)> = m.iter().map(|(g, ps)| (g, ps.to_vec())).collect();
    assert_eq!(
        groups,
        [
            (0, vec![p(1), p(5)]),
            (1, vec![p(9)]),
            (2, vec![p(3), p(7)])
        ]
    );
    assert_eq!(m.providers(), 5);
    assert_eq!(Mappings::from_pairs(&mut []).iter().count(), 0);
    // The same pairs in another order make equal mappings; another provider does not.
    let mut shuffled = [(1, p(9)), (2, p(3)), (0, p(1)), (2, p(7)), (0, p(5))];
    assert_eq!(Mappings::from_pairs(&mut shuffled), m);
    let mut other = [(1, p(9)), (2, p(3)), (0, p(1)), (2, p(8)), (0, p(5))];
    assert_ne!(Mappings::from_pairs(&mut other), m);
    // Added group by group: in order, a group again, and one out of order.
    let mut added = Mappings::default();
    added.add(0, &[p(5), p(1), p(5)]);
    added.add(2, &[p(7)]);
    added.add(2, &[p(3), p(7)]);
    assert_eq!(added.providers(), 4);
    added.add(1, &[p(9)]);
    assert_eq!(added, m);
}

#[test]
fn a_candidate_counts_the_heap_it_spills_to_and_not_what_it_holds_in_place() {
    use crate::placement::candidates::{Candidate, Mappings};
    use crate::placement::ids::ClassId;
    let item = |i: u32| (ProviderId(i), ClassId(i), 1);
    let pairs = |groups: &[u32], per_group: u32| -> Vec<(u32, ProviderId)> {
        groups
            .iter()
            .flat_map(|g| (0..per_group).map(move |p| (*g, ProviderId(p))))
            .collect()
    };
    // Four providers of one group, or one each of three groups: all in place.
    for mut in_place in [pairs(&[0], 4), pairs(&[0, 1, 2], 1)] {
        let c = Candidate {
            allocations: (0..4).map(item).collect(),
            mappings: Mappings::from_pairs(&mut in_place),
        };
        assert_eq!(c.bytes(), std::mem::size_of::<Candidate>());
    }
    // Five allocations, with six providers of two groups, then with four groups.
    let six_providers = (0..5)
        .map(|p| (0, ProviderId(p)))
        .chain([(1, ProviderId(9))])
        .collect();
    for mut spilling in [six_providers, pairs(&[0, 1, 2, 3], 1)] {
        let c = Candidate {
            allocations: (0..5).map(item).collect(),
            mappings: Mappings::from_pairs(&mut spilling),
        };
        let (providers, groups) = c.mappings.capacities();
        let block = |room: usize, inline: usize, size: usize| {
            if room > inline {
                (room * size).max(16)
            } else {
                0
            }
        };
        let heap = c.allocations.capacity() * 16 + block(providers, 4, 4) + block(groups, 3, 8);
        assert!(heap > c.allocations.capacity() * 16, "something spilled");
        assert_eq!(c.bytes(), std::mem::size_of::<Candidate>() + heap);
    }
}

#[test]
fn the_trees_summarised_are_those_the_candidates_take_from_by_root_name() {
    // Roots made in an order other than their names', and a shared disk pool.
    let mut c = Cloud::new().disk_pool();
    for n in 0..40 {
        let cn = format!("cn{:02}", (n * 7) % 40);
        let disk: &[(&str, i64)] = if n % 3 == 0 { &[] } else { &[("DISK_GB", 100)] };
        c = c.rp(&cn, None, disk, &[], &[AGG]);
        c = c.rp(&format!("{cn}-numa0"), Some(&cn), &[("VCPU", 8)], &[], &[]);
    }
    let (_, all) = walked(
        &c,
        "resources=VCPU:1,DISK_GB:1",
        usize::MAX,
        Walk::default(),
    );
    assert!(all.candidates.len() > 40, "{}", all.candidates.len());
    for keep in [0, 1, 2, 5, 30, all.candidates.len()] {
        let candidates = &all.candidates[..keep];
        let mut expected: Vec<ProviderId> = candidates
            .iter()
            .flat_map(|cand| cand.allocations.iter())
            .filter_map(|(p, _, _)| c.0.get(*p).root)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        expected.sort_by(|a, b| c.0.get(*a).name.cmp(&c.0.get(*b).name));
        assert_eq!(
            trees_of(&c.0, candidates),
            expected,
            "first {keep} candidates"
        );
    }
    assert_eq!(all.summary_trees, trees_of(&c.0, &all.candidates));
}

/// 260 compute nodes of a few kinds, each with two NUMA cells and an SR-IOV function under
/// each: most alike, some at a usage of their own, in one of two aggregates (each with a
/// sharing DISK_GB pool), a few with a sharing provider inside the tree, some whose
/// providers took their slots in another order (children first, or a slot freed by an
/// earlier tree), and the last 61 each unlike every other.
fn alike_with_slots_in_other_orders() -> Cloud {
    let mut c = Cloud::new().disk_pool().rp(
        "pool2",
        None,
        &[("DISK_GB", 50)],
        &["MISC_SHARES_VIA_AGGREGATE"],
        &[AGG2],
    );
    // From 1: the first tree in the pool's aggregate (cn005) has trees alike after it.
    for i in 1..=260 {
        let cn = format!("cn{i:03}");
        let traits: &[&str] = if i % 3 == 0 { &["CUSTOM_GOLD"] } else { &[] };
        let aggs: &[&str] = if i % 5 == 0 { &[AGG] } else { &[AGG2] };
        let cells: Vec<(String, String)> = (0..2)
            .map(|k| (format!("{cn}-numa{k}"), format!("{cn}-numa{k}-pf")))
            .collect();
        let root = |c: Cloud| c.rp(&cn, None, &[("DISK_GB", 100)], traits, aggs);
        let cell = |c: Cloud, (numa, pf): &(String, String)| {
            c.rp(
                numa,
                Some(&cn),
                &[("VCPU", 4), ("MEMORY_MB", 1024)],
                &[],
                &[],
            )
            .rp(pf, Some(numa), &[("SRIOV_NET_VF", 2)], &[], &[])
        };
        c = match i % 4 {
            // The children first, the second cell before the first, the root last.
            2 => root(cells.iter().rev().fold(c, cell)),
            // A provider made and removed first: the tree's root takes its freed slot
            // after the cells have taken theirs.
            3 => {
                let spare = format!("{cn}-spare");
                let c = c.rp(&spare, None, &[], &[], &[]);
                let mut c = cells.iter().fold(c, cell);
                c.0.remove_provider(&spare);
                root(c)
            }
            _ => cells.iter().fold(root(c), cell),
        };
        if i % 11 == 0 {
            c = c.used(&format!("{cn}-numa1-pf"), "SRIOV_NET_VF", 1);
        }
        c = usages_apart(c, i, &cn, 200);
    }
    c
}

const REPLAYED_QUERIES: [&str; 8] = [
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&required=CUSTOM_GOLD",
    "resources=VCPU:2,DISK_GB:20&required=!CUSTOM_GOLD&member_of=6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02",
    "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate",
    "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=none",
    "resources1=VCPU:1,MEMORY_MB:256&resources2=SRIOV_NET_VF:1&group_policy=none",
    // Candidates made only of the sharing pools: they count once, never replayed.
    "resources=DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:512,SRIOV_NET_VF:1",
];

/// Records every candidate reported, at one step each.
struct Reported(Vec<Candidate>);

impl Visit for Reported {
    fn wants_each(&self) -> bool {
        true
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        self.0.push(found.candidate());
        Some(1)
    }

    fn many(&mut self, _n: usize) -> bool {
        unreachable!("every candidate is wanted")
    }
}

#[test]
fn a_tree_alike_one_walked_replays_the_candidates_its_own_walk_finds() {
    let c = alike_with_slots_in_other_orders();
    for q in REPLAYED_QUERIES {
        let query = parse_candidates_query(q, Microversion(39)).unwrap();
        let search = prepare(&c.0, &query);
        assert!(search.replay, "{q}");
        let (mut replaying, mut walking) = (search.scratch(), search.scratch());
        let (mut replayed, mut walked) = (Reported(Vec::new()), Reported(Vec::new()));
        let mut trees_replayed = 0;
        for &anchor in &c.0.root_order().roots {
            let kept =
                c.0.shape(anchor)
                    .is_some_and(|s| replaying.walks.get(s.0).is_some());
            let (a, b) = (replayed.0.len(), walked.0.len());
            assert!(search.visit_replayed(anchor, &mut replaying, &mut replayed));
            assert!(search.walk_tree(anchor, Lookup::Off, &mut walking, &mut walked));
            // The same candidates in the same order, for the same steps.
            assert_eq!(replayed.0[a..], walked.0[b..], "{q} under {anchor:?}");
            assert_eq!(
                replaying.steps.left, walking.steps.left,
                "{q} under {anchor:?}"
            );
            trees_replayed += usize::from(kept && replayed.0.len() > a);
        }
        if q == "resources=DISK_GB:10" {
            assert_eq!(trees_replayed, 0, "{q}");
        } else {
            assert!(trees_replayed >= 40, "{q}: {trees_replayed} trees replayed");
        }
    }
}

#[test]
fn searches_that_replay_trees_answer_as_those_that_walk_every_tree() {
    let c = alike_with_slots_in_other_orders();
    let every = Walk {
        replay: false,
        budget: u64::MAX,
        ..Walk::default()
    };
    let mut found_below_29 = 0;
    for q in REPLAYED_QUERIES {
        for mv in [25, 28, 39] {
            let query = parse_candidates_query(q, Microversion(mv)).unwrap();
            let (count, whole) = counted_candidates_with(&c.0, &query, usize::MAX, every);
            // (Below 1.29 only candidates of one provider per tree count.)
            assert!(count > 0 || mv < 29, "{q} at {mv}");
            found_below_29 += usize::from(mv < 29 && count > 0);
            for threads in [1, 2] {
                let replaying = Walk {
                    threads,
                    walk_apart_from: 0,
                    ..every
                };
                let (n, got) = counted_candidates_with(
                    &c.0,
                    &query,
                    usize::MAX,
                    Walk {
                        replay: true,
                        ..replaying
                    },
                );
                assert_eq!(n, count, "{q} at {mv} on {threads}");
                assert_eq!(got.candidates, whole.candidates, "{q} at {mv} on {threads}");
                assert_eq!(got.summary_trees, whole.summary_trees, "{q} at {mv}");
                assert_eq!(got.summary_only, whole.summary_only, "{q} at {mv}");
            }
            // Out of budget at every point of the walk: where it ends and what it found are
            // the same. (Below 1.29 a limit keeps the first few and the walk goes on.)
            for budget in [7, 60, 333, 1_000, 2_500, 6_000] {
                let q = if mv < 29 {
                    format!("{q}&limit=3")
                } else {
                    q.to_string()
                };
                let query = parse_candidates_query(&q, Microversion(mv)).unwrap();
                let tight = Walk { budget, ..every };
                let (n, walked) = counted_candidates_with(&c.0, &query, usize::MAX, tight);
                let (m, replayed) = counted_candidates_with(
                    &c.0,
                    &query,
                    usize::MAX,
                    Walk {
                        replay: true,
                        ..tight
                    },
                );
                assert_eq!(
                    (m, replayed.exhausted),
                    (n, walked.exhausted),
                    "{q} at {mv}, {budget}"
                );
                assert_eq!(
                    replayed.candidates, walked.candidates,
                    "{q} at {mv}, {budget}"
                );
            }
        }
    }
    assert!(
        found_below_29 >= 6,
        "{found_below_29} queries below 1.29 found candidates"
    );
}

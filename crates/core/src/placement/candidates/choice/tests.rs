use super::*;
use crate::placement::Inventory;
use crate::placement::candidates::allocation_candidates;
use crate::placement::microversion::Microversion;
use crate::placement::provider_tree::ProviderRecord;
use crate::placement::query::parse_candidates_query;

fn record(name: &str, parent: Option<&str>, vcpu: i64) -> ProviderRecord {
    ProviderRecord {
        name: name.into(),
        uuid: format!("uuid-{name}"),
        parent: parent.map(Into::into),
        inventories: [("VCPU".to_string(), Inventory::with_total(vcpu))]
            .into_iter()
            .filter(|_| vcpu > 0)
            .collect(),
        ..Default::default()
    }
}

/// Three hosts, each with two cells of VCPU: six candidates for one VCPU, two a host.
fn cloud() -> ProviderIndex {
    let mut index = ProviderIndex::default();
    for host in ["a", "b", "c"] {
        index.upsert_provider(record(host, None, 0));
        for cell in ["0", "1"] {
            index.upsert_provider(record(&format!("{host}{cell}"), Some(host), 4));
        }
    }
    index
}

fn searched(index: &ProviderIndex, limit: Option<usize>) -> CandidateSet {
    let mut q = parse_candidates_query("resources=VCPU:1", Microversion(39)).unwrap();
    q.limit = limit;
    allocation_candidates(index, &q)
}

/// Each candidate's host, by the name of its provider's root.
fn hosts(index: &ProviderIndex, set: &CandidateSet) -> Vec<String> {
    set.candidates
        .iter()
        .map(|c| {
            let root = anchor(index, c).unwrap();
            index.get(root).name.to_string()
        })
        .collect()
}

fn summarised_hosts(index: &ProviderIndex, set: &CandidateSet) -> Vec<String> {
    let mut names: Vec<String> = set
        .summary_trees
        .iter()
        .map(|t| index.get(*t).name.to_string())
        .collect();
    names.sort();
    names
}

/// A fixed sequence standing in for randomness: always the last place.
fn last(n: usize) -> usize {
    n - 1
}

#[test]
fn plain_choosing_changes_nothing() {
    let index = cloud();
    let mut set = searched(&index, None);
    let before = hosts(&index, &set);
    assert_eq!(before.len(), 6);
    choose(&index, &mut set, None, &Choosing::default(), &mut last);
    assert_eq!(hosts(&index, &set), before);
    assert_eq!(summarised_hosts(&index, &set), ["a", "b", "c"]);
}

#[test]
fn a_cap_depth_first_takes_the_first_trees_and_breadth_first_one_of_each() {
    let index = cloud();
    let depth = Choosing {
        max: Some(3),
        ..Choosing::default()
    };
    let mut set = searched(&index, None);
    let first_two_hosts = hosts(&index, &set)[..3].to_vec();
    choose(&index, &mut set, None, &depth, &mut last);
    assert_eq!(hosts(&index, &set), first_two_hosts);
    assert_eq!(
        summarised_hosts(&index, &set).len(),
        2,
        "only the trees chosen"
    );
    let breadth = Choosing {
        strategy: Strategy::BreadthFirst,
        ..depth
    };
    let mut set = searched(&index, None);
    choose(&index, &mut set, None, &breadth, &mut last);
    let mut got = hosts(&index, &set);
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
    assert_eq!(summarised_hosts(&index, &set), ["a", "b", "c"]);
    // A cap above what is found takes everything.
    let mut set = searched(&index, None);
    choose(
        &index,
        &mut set,
        None,
        &Choosing {
            max: Some(100),
            ..breadth
        },
        &mut last,
    );
    assert_eq!(set.candidates.len(), 6);
}

#[test]
fn randomized_a_limit_is_a_sample_and_no_limit_a_shuffle() {
    let index = cloud();
    let random = Choosing {
        randomize: true,
        ..Choosing::default()
    };
    assert_eq!(
        random.search_limit(Some(1)),
        None,
        "every candidate is needed"
    );
    let mut set = searched(&index, None);
    let all = hosts(&index, &set);
    // "Always the last place" takes the last candidate first.
    choose(&index, &mut set, Some(1), &random, &mut last);
    assert_eq!(hosts(&index, &set), [all[5].clone()]);
    assert_eq!(summarised_hosts(&index, &set), [all[5].clone()]);
    let mut set = searched(&index, None);
    let mut picks = [0, 0, 0, 0, 0, 0].into_iter();
    choose(&index, &mut set, None, &random, &mut |_| {
        picks.next().unwrap()
    });
    let mut shuffled = hosts(&index, &set);
    assert_ne!(shuffled, all, "shuffled");
    shuffled.sort();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(shuffled, sorted, "the same candidates");
    assert_eq!(summarised_hosts(&index, &set), ["a", "b", "c"]);
}

#[test]
fn the_search_stops_early_only_where_the_first_candidates_are_the_chosen_ones() {
    let plain = Choosing::default();
    assert_eq!(plain.search_limit(Some(5)), Some(5));
    assert_eq!(plain.search_limit(None), None);
    let capped = Choosing {
        max: Some(3),
        ..plain
    };
    assert_eq!(capped.search_limit(Some(5)), Some(3));
    assert_eq!(capped.search_limit(Some(2)), Some(2));
    assert_eq!(capped.search_limit(None), Some(3));
    let random = Choosing {
        randomize: true,
        ..capped
    };
    assert_eq!(random.search_limit(Some(1)), Some(3));
    let breadth = Choosing {
        strategy: Strategy::BreadthFirst,
        ..capped
    };
    assert_eq!(breadth.search_limit(Some(1)), None);
    assert_eq!("breadth-first".parse(), Ok(Strategy::BreadthFirst));
    assert!(
        "widest-first"
            .parse::<Strategy>()
            .unwrap_err()
            .contains("depth-first or breadth-first")
    );
}

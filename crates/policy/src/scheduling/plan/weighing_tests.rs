//! Choosing among three hosts (weighing, and the image-type pre-filter): h1 has the most
//! free RAM and the fewest free VCPU, h3 the reverse; h2 is in between on both. Each test
//! places one server of 1 VCPU, 512 MB.

use super::*;
use crate::scheduling::schedule_pending;
use kubeplace_api::manifest::parse_stream;

fn put(store: &mut Store, yaml: &str) {
    for doc in parse_stream("t.yaml", yaml).unwrap() {
        store.put(doc.object().unwrap().unwrap());
    }
}

/// The host the one server lands on under `weighers`.
fn host_under(weighers: &str) -> String {
    host_with(weighers, "")
}

/// The host the one server lands on under `weighers`, with more objects (`extra`, YAML)
/// in the store; h1 and h2 are in aggregate 11111111-1111-1111-1111-111111111111.
fn host_with(weighers: &str, extra: &str) -> String {
    let mut store = Store::default();
    for (h, vcpu, ram) in [("h1", 4, 65536), ("h2", 8, 32768), ("h3", 16, 16384)] {
        put(
            &mut store,
            &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {h}}}\nspec:\n  inventories:\n    VCPU: {{total: {vcpu}}}\n    MEMORY_MB: {{total: {ram}}}\n{}",
                if h == "h3" {
                    ""
                } else {
                    "  aggregates: [11111111-1111-1111-1111-111111111111]\n"
                }
            ),
        );
    }
    put(
        &mut store,
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f1}\nspec: {vcpus: 1, memoryMb: 512}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: img}\nspec: {}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: s1, namespace: app}\nspec: {flavor: f1, image: img}\n",
    );
    if !extra.is_empty() {
        put(&mut store, extra); // after the defaults, to replace any of them
    }
    let placed = schedule_pending(&mut store, &weighers.parse().unwrap());
    assert_eq!(placed.len(), 1, "the server is placed under {weighers}");
    host(store.index(), &placed[0].spec.allocations).unwrap()
}

#[test]
fn the_default_spreads_by_the_smallest_share_left_free() {
    // VCPU is the scarcer share everywhere: h3 keeps 15/16 of it free.
    assert_eq!(host_under("spread=1"), "h3");
    assert_eq!(host_under(""), "h3");
}

#[test]
fn ram_and_cpu_weighers_spread_and_pack_as_novas_do() {
    assert_eq!(host_under("spread=0,ram=1"), "h1", "most free RAM");
    assert_eq!(host_under("spread=0,ram=-1"), "h3", "packs RAM");
    assert_eq!(host_under("spread=0,cpu=1"), "h3", "most free VCPU");
    assert_eq!(host_under("spread=0,cpu=-1"), "h1", "packs VCPU");
}

#[test]
fn multipliers_trade_weighers_against_each_other() {
    // Normalized, RAM gives h1 1, h2 1/3, h3 0, and VCPU h1 0, h2 1/3, h3 1: the
    // weigher counted twice wins; equal multipliers tie h1 and h3 (h2 has 2/3), and the
    // tie goes to the provider name that sorts first.
    assert_eq!(host_under("spread=0,ram=2,cpu=1"), "h1");
    assert_eq!(host_under("spread=0,ram=1,cpu=2"), "h3");
    assert_eq!(host_under("spread=0,ram=1,cpu=1"), "h1");
}

#[test]
fn with_every_weigher_off_the_tie_break_alone_decides() {
    assert_eq!(host_under("spread=0"), "h1");
}

/// An aggregate over h1 and h2 with these weigher multipliers.
fn aggregate(name: &str, multipliers: &str) -> String {
    format!(
        "---\napiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {{name: {name}}}\nspec:\n  uuid: 11111111-1111-1111-1111-111111111111\n  weigherMultipliers: {multipliers}\n"
    )
}

#[test]
fn an_aggregates_multipliers_replace_the_operators_for_its_hosts() {
    // Spreading RAM, h1 wins (RAM normalized: h1 1, h2 1/3, h3 0).
    assert_eq!(host_with("spread=0,ram=1", ""), "h1");
    // The aggregate packs RAM on h1 and h2 (-1, -1/3): h3's 0 is now the most.
    let packing = aggregate("packing", "{ram: -1}");
    assert_eq!(host_with("spread=0,ram=1", &packing), "h3");
    // An aggregate that triples RAM's weight keeps h1 first.
    let tripling = aggregate("tripling", "{ram: 3}");
    assert_eq!(host_with("spread=0,ram=1", &tripling), "h1");
    // In both, a host takes the smaller multiplier, as Nova does: it packs.
    let both = format!("{packing}{tripling}");
    assert_eq!(host_with("spread=0,ram=1", &both), "h3");
    // A weigher the setting leaves off counts on the aggregate's hosts alone: VCPU at 5
    // lifts h2 (5 x 1/3, plus its spread of 2/3) over h3 (spread 1, no VCPU weight there).
    assert_eq!(host_with("spread=1", &aggregate("cpu", "{cpu: 5}")), "h2");
}

#[test]
fn weigher_overrides_are_per_host_and_take_the_smallest() {
    let mut store = Store::default();
    put(
        &mut store,
        &format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: h1}}\nspec:\n  inventories: {{VCPU: {{total: 4}}}}\n  aggregates: [11111111-1111-1111-1111-111111111111]\n{}{}",
            aggregate("a", "{spread: 0, ram: -1}"),
            aggregate("b", "{ram: 3, disk: 2}")
        ),
    );
    let overrides = crate::scheduling::aggregates::weigher_overrides(&store);
    assert_eq!(overrides.len(), 1);
    assert_eq!(
        overrides["h1"],
        [Some(0.0), Some(-1.0), None, Some(2.0), None]
    );
}

#[test]
fn an_image_that_names_its_disk_format_goes_to_hosts_that_support_it() {
    // h1 and h2 are in the aggregate only; h2 alone says it boots qcow2 images.
    let supported = "---\napiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: h2}\nspec:\n  inventories:\n    VCPU: {total: 8}\n    MEMORY_MB: {total: 32768}\n  traits: [COMPUTE_IMAGE_TYPE_QCOW2]\n";
    let qcow2 = "---\napiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: img}\nspec: {diskFormat: qcow2}\n";
    assert_eq!(host_with("", &format!("{supported}{qcow2}")), "h2");
    // The trait is asked of the root provider, as Nova's pre-filter does.
    let mut store = Store::default();
    put(
        &mut store,
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: h1}\nspec:\n  inventories: {VCPU: {total: 8}, MEMORY_MB: {total: 8192}}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f1}\nspec: {vcpus: 1, memoryMb: 512}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: raw-img}\nspec: {diskFormat: raw}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: s1, namespace: app}\nspec: {flavor: f1, image: raw-img}\n",
    );
    let server = match store.list(Kind::Server).next() {
        Some(Object::Server(s)) => s.clone(),
        _ => unreachable!(),
    };
    let why = plan(&store, &Weighers::default(), &server).unwrap_err();
    assert_eq!(why.reason, "NoValidHost");
    assert!(
        why.message.contains("root_required=COMPUTE_IMAGE_TYPE_RAW"),
        "{}",
        why.message
    );
}

/// Allocations of `n` consumers (1 VCPU each) on `host`.
fn instances_on(host: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: {host}-i{i}}}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b{i:02}\n  allocations:\n  - provider: {host}\n    resources: {{VCPU: 1}}\n"
            )
        })
        .collect()
}

#[test]
fn the_instances_weigher_packs_when_positive_and_spreads_when_negative_as_novas() {
    // h2 holds two consumers, h3 one, h1 none.
    let busy = instances_on("h2", 2) + &instances_on("h3", 1);
    assert_eq!(host_with("spread=0,instances=1", &busy), "h2", "busiest");
    assert_eq!(host_with("spread=0,instances=-1", &busy), "h1", "idlest");
    // With no instances anywhere every host is alike on it: the tie-break decides.
    assert_eq!(host_with("spread=0,instances=-1", ""), "h1");
    assert_eq!(host_with("spread=0,instances=1", ""), "h1");
    // An aggregate over h1 and h2 packs while the setting spreads: h2 weighs 1, h1 0, and
    // h3 (one instance of two, normalized 1/2) -1/2.
    let packing = aggregate("pack", "{instances: 1}");
    assert_eq!(
        host_with("spread=0,instances=-1", &(busy.clone() + &packing)),
        "h2"
    );
}

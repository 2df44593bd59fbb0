//! The store under a watch's changes: one provider applied to a store of 10,000 compute-node
//! trees (each a root with COMPUTE_NODE and two NUMA cells), with and without a
//! ProviderConfig whose `$COMPUTE_NODE` entry reaches every compute node, as a watch batch
//! of one change applies it (`Store::apply_changes`, provider config merge included).
//!
//! Run: `cargo bench -p kubeplace-policy --bench store`.

use std::hint::black_box;

use criterion::Criterion;
use kubeplace_api::Object;
use kubeplace_api::manifest::parse_stream;
use kubeplace_policy::store::{Change, Store};

const TREES: usize = 10_000;

fn objects(yaml: &str) -> Vec<Object> {
    parse_stream("bench.yaml", yaml)
        .expect("bench YAML parses")
        .into_iter()
        .filter_map(|d| d.object().and_then(Result::ok))
        .collect()
}

fn node(i: usize, vcpu: i64) -> String {
    let disk = 2000 + vcpu;
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: cn{i:06}}}\nspec:\n  traits: [COMPUTE_NODE]\n  inventories:\n    DISK_GB: {{total: {disk}}}\n---\n\
         apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: cn{i:06}-numa0}}\nspec:\n  parent: cn{i:06}\n  inventories:\n    VCPU: {{total: {vcpu}}}\n    MEMORY_MB: {{total: 131072}}\n---\n\
         apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: cn{i:06}-numa1}}\nspec:\n  parent: cn{i:06}\n  inventories:\n    VCPU: {{total: {vcpu}}}\n    MEMORY_MB: {{total: 131072}}\n---\n"
    )
}

const CONFIG: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata: {name: compute-defaults}\nspec:\n  meta: {schemaVersion: \"1.0\"}\n  providers:\n  - identification: {uuid: $COMPUTE_NODE}\n    inventories:\n      additional:\n      - CUSTOM_LLC: {total: 22}\n    traits:\n      additional: [CUSTOM_P_STATE_ENABLED]\n---\n";

fn main() {
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    let cloud: String = (0..TREES).map(|i| node(i, 32)).collect();
    for (label, config) in [("no config", ""), ("$COMPUTE_NODE config", CONFIG)] {
        let mut store = Store::default();
        store.apply_changes(
            objects(&(cloud.clone() + config))
                .into_iter()
                .map(|o| Change::Put(Box::new(o))),
        );
        // A compute node's inventory changed, and a NUMA cell's, each back and forth.
        let root = [objects(&node(7, 32)), objects(&node(7, 48))];
        let cell = [objects(&node(8, 32)), objects(&node(8, 48))];
        let mut turn = 0;
        c.bench_function(&format!("store/10k/{label}/a compute node changed"), |b| {
            b.iter(|| {
                turn ^= 1;
                black_box(store.apply_changes([Change::Put(Box::new(root[turn][0].clone()))]))
            })
        });
        c.bench_function(&format!("store/10k/{label}/a NUMA cell changed"), |b| {
            b.iter(|| {
                turn ^= 1;
                black_box(store.apply_changes([Change::Put(Box::new(cell[turn][1].clone()))]))
            })
        });
    }
    c.final_summary();
}

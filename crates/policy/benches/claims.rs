//! The claim decision point offline: one Allocation decided by the ledger against a store of
//! 1,000 providers, with claims pending that the store does not show yet.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use kubeplace_api::Object;
use kubeplace_api::manifest::parse_stream;
use kubeplace_policy::admission::Operation;
use kubeplace_policy::claims::Ledger;
use kubeplace_policy::store::{Change, Store};

fn object(yaml: &str) -> Object {
    parse_stream("bench.yaml", yaml).unwrap()[0]
        .clone()
        .object()
        .unwrap()
        .unwrap()
}

fn provider(n: usize) -> Object {
    object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn{n}\nspec:\n  inventories:\n    VCPU: {{total: 64}}\n    MEMORY_MB: {{total: 262144}}\n"
    ))
}

fn claim(n: usize, host: usize) -> Object {
    object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: claim-{n}\n  uid: uid-{n}\nspec:\n  consumer: 00000000-0000-4000-8000-{n:012}\n  allocations:\n  - provider: cn{host}\n    resources: {{VCPU: 1, MEMORY_MB: 512}}\n"
    ))
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut store = Store::default();
    store.apply_changes((0..1000).map(|n| Change::Put(Box::new(provider(n)))));
    let candidate = claim(1_000_000, 7);
    for pending in [0usize, 100] {
        let mut ledger = Ledger::new(Duration::from_secs(3600));
        let now = Instant::now();
        for n in 0..pending {
            let c = claim(n, n % 1000);
            assert!(
                ledger
                    .decide(Operation::Create, &c, None, &store, now, false)
                    .allowed
            );
        }
        c.bench_function(&format!("claims/decide, {pending} pending"), |b| {
            b.iter(|| {
                // A dry run: decided like any claim, but leaves the ledger as it was.
                black_box(ledger.decide(
                    Operation::Create,
                    black_box(&candidate),
                    None,
                    &store,
                    now,
                    true,
                ))
            })
        });
    }
    c.final_summary();
}

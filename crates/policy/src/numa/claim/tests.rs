use super::*;
use crate::store::Store;
use kubeplace_core::numa::{FittedCell, GuestCell, HostCell, HostTopology, Limits, PagePool};

fn host() -> HostCells {
    let cell = |id: u32, cpus: std::ops::Range<u32>| HostCell {
        id,
        cpuset: cpus.clone().collect(),
        pcpuset: cpus.clone().collect(),
        siblings: cpus
            .clone()
            .step_by(2)
            .map(|c| CpuSet::from([c, c + 1]))
            .collect(),
        memory_mib: 4096,
        pages: vec![PagePool {
            size_kib: 4,
            total: 4096 * 256,
            used: 0,
            reserved: 0,
        }],
        pinned: CpuSet::new(),
        cpu_usage: 0,
        memory_usage_mib: 0,
        socket: None,
    };
    HostCells {
        topology: HostTopology {
            cells: vec![cell(0, 0..4), cell(1, 4..8)],
        },
        providers: [(0, "cn-n0".to_string()), (1, "cn-n1".to_string())].into(),
        limits: Limits {
            cpu_allocation_ratio: 1.0,
            ram_allocation_ratio: 1.0,
        },
    }
}

#[test]
fn an_isolated_cell_holds_its_cores_and_counts_its_pinned_cpus() {
    let guest = GuestTopology {
        cells: vec![GuestCell {
            cpuset: CpuSet::new(),
            pcpuset: CpuSet::from([0]),
            memory_mib: 512,
            page_size: None,
            cpu_policy: Some(CpuPolicy::Dedicated),
            thread_policy: Some(ThreadPolicy::Isolate),
        }],
        emulator_threads: None,
    };
    let fit = NumaFit {
        cells: vec![FittedCell {
            host_cell: 1,
            pinning: [(0, 6)].into(),
            emulator_cpus: CpuSet::new(),
            page_size_kib: None,
        }],
    };
    let claim = claim_of(&guest, &fit, &host());
    assert_eq!(claim.cells[0].provider, "cn-n1");
    assert_eq!(claim.cells[0].held_cpus.as_deref(), Some("6-7"));
    let amounts = counted_amounts(&claim);
    assert_eq!(amounts.get(&("cn-n1".to_string(), "PCPU")), Some(&1));
    assert_eq!(amounts.get(&("cn-n1".to_string(), "MEMORY_MB")), Some(&512));
    assert_eq!(amounts.get(&("cn-n1".to_string(), "VCPU")), None);
}

#[test]
fn an_unpinned_cell_holds_no_cpu() {
    let guest = GuestTopology {
        cells: vec![GuestCell {
            cpuset: CpuSet::from([0, 1]),
            pcpuset: CpuSet::new(),
            memory_mib: 1024,
            page_size: None,
            cpu_policy: None,
            thread_policy: None,
        }],
        emulator_threads: None,
    };
    let fit = NumaFit {
        cells: vec![FittedCell {
            host_cell: 0,
            pinning: Default::default(),
            emulator_cpus: CpuSet::new(),
            page_size_kib: None,
        }],
    };
    let claim = claim_of(&guest, &fit, &host());
    assert_eq!(claim.cells[0].held_cpus, None);
    assert_eq!(claim.cells[0].shared_vcpus, 2);
}

/// A store with host `cn1` (cell `cn1-n0`: dedicated CPUs 0-3, 1 GiB pages) and host `cn2`
/// with no cells described, and the record judged for an Allocation on `cn1-n0`.
fn judged(cells: &str, allocation_provider: &str) -> RecordVerdict {
    use crate::test_objects::object;
    let mut store = Store::default();
    for yaml in [
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec: {traits: [COMPUTE_NODE]}\n",
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1-n0}\nspec:\n  parent: cn1\n  inventories: {PCPU: {total: 4}, MEMORY_MB: {total: 8192}}\n  traits: [HW_NUMA_ROOT]\n  numaCell: {dedicatedCpus: 0-3, sharedCpus: 4-7, memoryMib: 8192, pages: [{sizeKiB: 1048576, total: 2}]}\n",
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn2}\nspec: {inventories: {PCPU: {total: 4}}}\n",
    ] {
        store.put(object(yaml));
    }
    let a = object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: a}}\nspec:\n  consumer: 7b0a4c5e-1f7e-4d8e-9a57-0c6a1b2f9d10\n  allocations:\n  - provider: {allocation_provider}\n    resources: {{PCPU: 1}}\n  numa:\n    cells:\n{cells}"
    ));
    let kubeplace_api::Object::Allocation(a) = a else {
        panic!("an Allocation")
    };
    judge_record(&a, &store, |_, _| 0)
}

#[test]
fn a_record_that_names_no_cell_of_its_host_or_cpus_it_cannot_hold_is_refused() {
    let cell = |fields: &str| format!("    - {{guestCell: 0, memoryMiB: 1024, {fields}}}\n");
    let cases = [
        (
            cell("provider: cn2, hostCell: 0, heldCpus: \"0\""),
            "cn1-n0",
            "spec.numa.cells[0].provider \"cn2\" is in the tree of \"cn2\", which no entry of spec.allocations is",
        ),
        (
            cell("provider: cn1, hostCell: 0, heldCpus: \"0\""),
            "cn1-n0",
            "spec.numa.cells[0].provider \"cn1\" is not one of host \"cn1\"'s NUMA cells (cn1-n0)",
        ),
        (
            cell("provider: cn1-n0, hostCell: 3, heldCpus: \"0\""),
            "cn1-n0",
            "spec.numa.cells[0].hostCell is 3 and provider \"cn1-n0\" is cell 0",
        ),
        (
            cell("provider: cn1-n0, hostCell: 0, heldCpus: \"5\""),
            "cn1-n0",
            "spec.numa.cells[0].heldCpus: CPUs 5 are not dedicated CPUs of cell 0 (\"cn1-n0\"), whose dedicated CPUs are 0-3",
        ),
        (
            cell("provider: cn1-n0, hostCell: 0, pinning: {\"0\": 1}, heldCpus: \"2\""),
            "cn1-n0",
            "spec.numa.cells[0].pinning pins vCPUs to CPUs 1 that heldCpus does not list",
        ),
        (
            cell("provider: cn1-n0, hostCell: 0, heldCpus: \"0-x\""),
            "cn1-n0",
            "spec.numa.cells[0].heldCpus:",
        ),
        (
            cell("provider: cn1-n0, hostCell: 0, pageSizeKiB: 2048"),
            "cn1-n0",
            "spec.numa.cells[0].pageSizeKiB is 2048 and cell 0 (\"cn1-n0\") has no pages of that size; it has 4 KiB, 1048576 KiB",
        ),
        (
            "      []\n".to_string(),
            "cn1-n0",
            "spec.numa.cells is empty",
        ),
    ];
    for (cells, provider, expected) in cases {
        let verdict = judged(&cells, provider);
        assert!(
            verdict.problems.iter().any(|p| p.contains(expected)),
            "{cells}: {verdict:?}"
        );
        assert!(verdict.no_room.is_empty(), "{cells}: {verdict:?}");
    }
    // Two guest cells of one record may not share a CPU, nor take more pages than the pool.
    let twice = cell("provider: cn1-n0, hostCell: 0, heldCpus: \"1\"")
        + &cell("provider: cn1-n0, hostCell: 0, heldCpus: \"1-2\"")
            .replace("guestCell: 0", "guestCell: 1");
    let verdict = judged(&twice, "cn1-n0");
    assert!(
        verdict
            .no_room
            .iter()
            .any(|r| r.contains("spec.numa.cells[1]: CPUs 1 of NUMA cell 0")),
        "{verdict:?}"
    );
    let pages = cell("provider: cn1-n0, hostCell: 0, memoryMiB: 2048, pageSizeKiB: 1048576")
        .replace("memoryMiB: 1024, ", "");
    let pages = pages.clone() + &pages.replace("guestCell: 0", "guestCell: 1");
    let verdict = judged(&pages, "cn1-n0");
    assert!(
        verdict.no_room.iter().any(|r| r.contains("spec.numa.cells[1]: 2 pages of 1048576 KiB on NUMA cell 0 (\"cn1-n0\"), which has 0 free")),
        "{verdict:?}"
    );
    // A record the cell can hold passes.
    let fine = cell("provider: cn1-n0, hostCell: 0, pinning: {\"0\": 1}, heldCpus: \"1\"");
    assert_eq!(judged(&fine, "cn1-n0"), RecordVerdict::default());
}

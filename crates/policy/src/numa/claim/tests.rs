use super::*;
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

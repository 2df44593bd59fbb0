use super::*;

fn detail(yaml: &str) -> NumaCell {
    serde_saphyr::from_str(yaml).unwrap()
}

#[test]
fn counts_alone_give_numbered_cpus_and_small_pages() {
    let counts = CellCounts {
        pcpu: 2,
        vcpu: 3,
        memory_mib: 1024,
    };
    let cell = host_cell(1, &NumaCell::default(), &counts, 10).unwrap();
    assert_eq!(cell.pcpuset, CpuSet::from([10, 11]));
    assert_eq!(cell.cpuset, CpuSet::from([12, 13, 14]));
    assert_eq!(cell.siblings.len(), 5, "each CPU a core of its own");
    assert_eq!(cell.pages.len(), 1);
    assert_eq!(cell.pages[0].size_kib, 4);
    assert_eq!(cell.pages[0].total, 1024 * 256);
}

#[test]
fn hugepages_leave_the_rest_of_the_memory_as_small_pages() {
    let d = detail("memoryMib: 4096\npages:\n- sizeKiB: 1048576\n  total: 2\n  reserved: 1\n");
    let cell = host_cell(0, &d, &CellCounts::default(), 0).unwrap();
    let sizes: Vec<(u64, u64, u64)> = cell
        .pages
        .iter()
        .map(|p| (p.size_kib, p.total, p.reserved))
        .collect();
    assert_eq!(sizes, vec![(4, 2048 * 256, 0), (1048576, 2, 1)]);
}

#[test]
fn cpus_alone_are_both_shared_and_dedicated_and_lists_set_them_apart() {
    let both = host_cell(0, &detail("cpus: 0-3"), &CellCounts::default(), 0).unwrap();
    assert_eq!(both.cpuset, both.pcpuset);
    let apart = host_cell(
        0,
        &detail("sharedCpus: 0-1\ndedicatedCpus: 2-3\nsiblings: [\"0,1\", \"2,3\"]"),
        &CellCounts::default(),
        0,
    )
    .unwrap();
    assert_eq!(apart.cpuset, CpuSet::from([0, 1]));
    assert_eq!(apart.pcpuset, CpuSet::from([2, 3]));
    assert_eq!(apart.threads_per_core(), 2);
}

#[test]
fn a_core_naming_no_cpu_is_refused() {
    let e = host_cell(
        0,
        &detail("cpus: 0-1\nsiblings: [\"\"]"),
        &CellCounts::default(),
        0,
    )
    .unwrap_err();
    assert_eq!(e.field, "siblings[0]");
}

//! A host's NUMA cells as its ResourceProviders describe them: the providers of a tree with
//! the trait `HW_NUMA_ROOT`, each cell's CPUs, siblings, memory and pages from its
//! `spec.numaCell` (or its inventories where that says nothing), and what the counted
//! claims' NUMA records already hold of them.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::{Kind, NumaCell, NumaCellClaim, Object, ResourceProvider};
use kubeplace_core::numa::{CpuSet, HostCell, HostTopology, Limits, PagePool, parse_cpu_set};

use crate::store::Store;

/// The trait that marks a provider as a NUMA cell (os-traits' name).
pub const NUMA_ROOT: &str = "HW_NUMA_ROOT";

/// The ordinary page size, KiB.
const SMALL_PAGE_KIB: u64 = 4;

/// A host's cells, ready for the fit.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCells {
    /// The cells in id order, with the usage the counted claims' records give them.
    pub topology: HostTopology,
    /// Each cell's provider, by cell id.
    pub providers: BTreeMap<u32, String>,
    /// The host's overcommit ratios for unpinned guests, from its `VCPU` and `MEMORY_MB`
    /// inventories (Nova's `cpu_allocation_ratio` and `ram_allocation_ratio`).
    pub limits: Limits,
}

impl HostCells {
    /// The cell a provider is, if it is one of this host's.
    pub fn cell_id(&self, provider: &str) -> Option<u32> {
        self.providers
            .iter()
            .find_map(|(id, p)| (p == provider).then_some(*id))
    }
}

/// Why a cell's detail cannot be read: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.numaCell.{field}: {message}")]
pub struct DetailError {
    pub field: String,
    pub message: String,
}

fn detail_error(field: impl Into<String>, message: impl Into<String>) -> DetailError {
    DetailError {
        field: field.into(),
        message: message.into(),
    }
}

/// Cell detail for a cell that gives none.
static NO_DETAIL: NumaCell = NumaCell {
    id: None,
    shared_cpus: None,
    dedicated_cpus: None,
    cpus: None,
    siblings: Vec::new(),
    socket: None,
    memory_mib: None,
    pages: Vec::new(),
};

/// The NUMA-cell providers among a tree's `members`, ordered by name.
fn cell_providers<'s>(store: &'s Store, members: &[String]) -> Vec<&'s ResourceProvider> {
    let index = store.index();
    let mut cells: Vec<&ResourceProvider> = members
        .iter()
        .filter(|name| index.has_trait(name, NUMA_ROOT))
        .filter_map(
            |name| match store.get_cluster(Kind::ResourceProvider, name) {
                Some(Object::ResourceProvider(rp)) => Some(rp),
                _ => None,
            },
        )
        .collect();
    cells.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    cells
}

/// The NUMA records of the counted claims, by cell provider: read once for a choice among
/// many hosts.
#[derive(Debug, Default)]
pub struct Records<'s> {
    by_provider: HashMap<&'s str, Vec<&'s NumaCellClaim>>,
}

impl<'s> Records<'s> {
    /// Every counted claim's record but `excluding`'s.
    pub fn of(store: &'s Store, excluding: Option<&str>) -> Records<'s> {
        let index = store.index();
        let mut by_provider: HashMap<&str, Vec<&NumaCellClaim>> = HashMap::new();
        let claims = store
            .list(Kind::Allocation)
            .filter_map(|o| match o {
                Object::Allocation(a) if a.spec.numa.is_some() => Some(a),
                _ => None,
            })
            .filter(|a| {
                let name = a.metadata.name.as_deref().unwrap_or("");
                Some(name) != excluding && index.allocations(name).is_some()
            });
        for cell in claims.flat_map(|a| a.spec.numa.iter().flat_map(|n| &n.cells)) {
            by_provider.entry(&cell.provider).or_default().push(cell);
        }
        Records { by_provider }
    }

    fn on(&self, provider: &str) -> &[&'s NumaCellClaim] {
        self.by_provider.get(provider).map_or(&[], Vec::as_slice)
    }
}

/// The host's cells with the usage the claims' `records` give them (read once for a
/// choice among many hosts, without the claim of a server placed again). A tree that describes no cells is
/// one cell, its root, with what the whole tree counts, as a host with a single NUMA node
/// reports; `None` for a provider that is not a root. A cell whose detail cannot be read is
/// left out.
pub fn host_cells(store: &Store, root: &str, records: &Records<'_>) -> Option<HostCells> {
    let index = store.index();
    if index.root_of(root).ok()? != root {
        return None;
    }
    let members = index.tree_members(root);
    let providers = cell_providers(store, &members);
    let mut cells: Vec<(u32, String, HostCell)> = Vec::new();
    if providers.is_empty() {
        let mut counts = CellCounts::default();
        for member in &members {
            let total = |class: &str| {
                index
                    .inventory(member, class)
                    .map_or(0, |i| i.total.max(0) as u64)
            };
            counts.pcpu += total("PCPU");
            counts.vcpu += total("VCPU");
            counts.memory_mib += total("MEMORY_MB");
        }
        let cell = host_cell(0, &NumaCell::default(), &counts, 0).ok()?;
        cells.push((0, root.to_string(), cell));
    }
    let mut next_cpu = 0u32;
    for (position, rp) in providers.iter().enumerate() {
        let name = rp.metadata.name.clone().unwrap_or_default();
        let detail = rp.spec.numa_cell.as_ref().unwrap_or(&NO_DETAIL);
        let id = detail.id.unwrap_or(position as u32);
        let total = |class: &str| {
            index
                .inventory(&name, class)
                .map_or(0, |i| i.total.max(0) as u64)
        };
        let counts = CellCounts {
            pcpu: total("PCPU"),
            vcpu: total("VCPU"),
            memory_mib: total("MEMORY_MB"),
        };
        if let Ok(cell) = host_cell(id, detail, &counts, next_cpu) {
            next_cpu = cell
                .cpuset
                .iter()
                .chain(&cell.pcpuset)
                .max()
                .map_or(next_cpu, |c| c.saturating_add(1).max(next_cpu));
            cells.push((id, name, cell));
        }
    }
    cells.sort_by_key(|(id, _, _)| *id);
    cells.dedup_by_key(|(id, _, _)| *id);
    let mut providers: BTreeMap<u32, String> = BTreeMap::new();
    let mut topology = HostTopology {
        cells: Vec::with_capacity(cells.len()),
    };
    for (id, name, cell) in cells {
        providers.insert(id, name);
        topology.cells.push(cell);
    }
    for cell in &mut topology.cells {
        let Some(provider) = providers.get(&cell.id) else {
            continue;
        };
        for claim in records.on(provider) {
            if claim.host_cell == cell.id {
                add_usage(cell, claim);
            }
        }
    }
    let limits = limits(store, root, providers.values(), &members);
    Some(HostCells {
        topology,
        providers,
        limits,
    })
}

/// What a guest cell's record takes from its host cell.
pub(crate) fn add_usage(cell: &mut HostCell, claim: &NumaCellClaim) {
    cell.add_use(
        claim.memory_mib,
        claim.shared_vcpus,
        claim.page_size_kib,
        false,
    );
    if let Some(held) = claim
        .held_cpus
        .as_deref()
        .and_then(|h| parse_cpu_set(h).ok())
    {
        cell.pinned.extend(held);
    }
}

/// The counts a cell's inventories give, for what its detail leaves out.
#[derive(Debug, Clone, Copy, Default)]
pub struct CellCounts {
    pub pcpu: u64,
    pub vcpu: u64,
    pub memory_mib: u64,
}

/// One cell from its detail and counts; CPUs it has only counts for are numbered from
/// `first_cpu`.
pub fn host_cell(
    id: u32,
    detail: &NumaCell,
    counts: &CellCounts,
    first_cpu: u32,
) -> Result<HostCell, DetailError> {
    let list = |field: &str, text: &Option<String>| -> Result<Option<CpuSet>, DetailError> {
        text.as_deref()
            .map(|t| parse_cpu_set(t).map_err(|e| detail_error(field, e.to_string())))
            .transpose()
    };
    let all = list("cpus", &detail.cpus)?;
    let shared = list("sharedCpus", &detail.shared_cpus)?;
    let dedicated = list("dedicatedCpus", &detail.dedicated_cpus)?;
    let (cpuset, pcpuset) = match (all, shared, dedicated) {
        (None, None, None) => {
            let count = |n: u64| u32::try_from(n.min(4096)).unwrap_or(4096);
            let p_end = first_cpu.saturating_add(count(counts.pcpu));
            let v_end = p_end.saturating_add(count(counts.vcpu));
            ((p_end..v_end).collect(), (first_cpu..p_end).collect())
        }
        (Some(all), None, None) => (all.clone(), all),
        (all, shared, dedicated) => {
            let shared = shared.unwrap_or_default();
            let dedicated = dedicated.unwrap_or_default();
            if let Some(all) = all {
                for (field, set) in [("sharedCpus", &shared), ("dedicatedCpus", &dedicated)] {
                    let outside: CpuSet = set - &all;
                    if !outside.is_empty() {
                        return Err(detail_error(
                            field,
                            format!(
                                "CPUs {} are not among the cell's cpus {}; list only CPUs of the cell",
                                kubeplace_core::numa::format_cpu_set(&outside),
                                kubeplace_core::numa::format_cpu_set(&all)
                            ),
                        ));
                    }
                }
            }
            (shared, dedicated)
        }
    };
    let every: CpuSet = &cpuset | &pcpuset;
    let siblings = if detail.siblings.is_empty() {
        every.iter().map(|c| CpuSet::from([*c])).collect()
    } else {
        let mut seen = CpuSet::new();
        let mut cores = Vec::new();
        for (i, text) in detail.siblings.iter().enumerate() {
            let field = format!("siblings[{i}]");
            let core = parse_cpu_set(text).map_err(|e| detail_error(&field, e.to_string()))?;
            if core.is_empty() {
                return Err(detail_error(
                    field,
                    "names no CPU; list each core's CPUs, such as \"0,8\"",
                ));
            }
            let twice: CpuSet = &core & &seen;
            if !twice.is_empty() {
                return Err(detail_error(
                    field,
                    format!(
                        "CPUs {} are already in an earlier core; each CPU is in one core",
                        kubeplace_core::numa::format_cpu_set(&twice)
                    ),
                ));
            }
            seen.extend(&core);
            cores.push(core);
        }
        // CPUs no core lists are cores of their own.
        cores.extend((&every - &seen).into_iter().map(|c| CpuSet::from([c])));
        cores
    };
    let memory_mib = detail.memory_mib.unwrap_or(counts.memory_mib);
    let pages = page_pools(detail, memory_mib)?;
    Ok(HostCell {
        id,
        cpuset,
        pcpuset,
        siblings,
        memory_mib,
        pages,
        pinned: CpuSet::new(),
        cpu_usage: 0,
        memory_usage_mib: 0,
        socket: detail.socket,
    })
}

/// The cell's page pools: those listed, and the memory they leave as 4 KiB pages when the
/// 4 KiB pool is not listed.
fn page_pools(detail: &NumaCell, memory_mib: u64) -> Result<Vec<PagePool>, DetailError> {
    let mut pools: Vec<PagePool> = Vec::new();
    for (i, pool) in detail.pages.iter().enumerate() {
        let field = |f: &str| format!("pages[{i}].{f}");
        if pool.size_kib < SMALL_PAGE_KIB || !pool.size_kib.is_power_of_two() {
            return Err(detail_error(
                field("sizeKiB"),
                format!(
                    "{} is not a page size; accepted: a power of two of at least 4 (4, 2048, 1048576)",
                    pool.size_kib
                ),
            ));
        }
        if pools.iter().any(|p| p.size_kib == pool.size_kib) {
            return Err(detail_error(
                field("sizeKiB"),
                format!(
                    "{} KiB pages are listed twice; list each size once",
                    pool.size_kib
                ),
            ));
        }
        if pool.reserved > pool.total {
            return Err(detail_error(
                field("reserved"),
                format!(
                    "{} is more than the {} pages of the pool; at most total",
                    pool.reserved, pool.total
                ),
            ));
        }
        pools.push(PagePool {
            size_kib: pool.size_kib,
            total: pool.total,
            used: 0,
            reserved: pool.reserved,
        });
    }
    let memory_kib = u128::from(memory_mib) * 1024;
    let listed_kib: u128 = pools
        .iter()
        .map(|p| u128::from(p.total) * u128::from(p.size_kib))
        .sum();
    if listed_kib > memory_kib {
        return Err(detail_error(
            "pages",
            format!(
                "the pools hold {} MiB and the cell has {memory_mib} MiB of memory; the pages must fit in memoryMiB",
                listed_kib / 1024
            ),
        ));
    }
    if !pools.iter().any(|p| p.size_kib == SMALL_PAGE_KIB) {
        let left = (memory_kib - listed_kib) / u128::from(SMALL_PAGE_KIB);
        pools.push(PagePool {
            size_kib: SMALL_PAGE_KIB,
            total: u64::try_from(left).unwrap_or(u64::MAX),
            used: 0,
            reserved: 0,
        });
    }
    pools.sort_by_key(|p| p.size_kib);
    Ok(pools)
}

/// The host's ratios: the first `VCPU` and `MEMORY_MB` inventory of its cells, else of its
/// root, else of the rest of its tree; 1.0 where it has none.
fn limits<'a>(
    store: &Store,
    root: &'a str,
    cells: impl Iterator<Item = &'a String> + Clone,
    members: &'a [String],
) -> Limits {
    let index = store.index();
    let ratio = |class: &str| {
        cells
            .clone()
            .map(String::as_str)
            .chain([root])
            .chain(members.iter().map(String::as_str))
            .find_map(|p| index.inventory(p, class))
            .map_or(1.0, |i| i.allocation_ratio)
    };
    Limits {
        cpu_allocation_ratio: ratio("VCPU"),
        ram_allocation_ratio: ratio("MEMORY_MB"),
    }
}

/// What a provider's own spec says against its cell detail, for admission: the detail
/// read, its inventories checked against it, and the trait that makes it a cell.
pub fn check_detail(rp: &ResourceProvider) -> Vec<String> {
    let Some(detail) = &rp.spec.numa_cell else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    if !rp.spec.traits.iter().any(|t| t == NUMA_ROOT) {
        problems.push(format!(
            "spec.numaCell describes a NUMA cell, and spec.traits lacks {NUMA_ROOT}; add the trait {NUMA_ROOT}"
        ));
    }
    let total = |class: &str| {
        rp.spec
            .inventories
            .get(class)
            .map(|i| i.total.max(0) as u64)
    };
    let counts = CellCounts {
        pcpu: total("PCPU").unwrap_or(0),
        vcpu: total("VCPU").unwrap_or(0),
        memory_mib: total("MEMORY_MB").unwrap_or(0),
    };
    match host_cell(detail.id.unwrap_or(0), detail, &counts, 0) {
        Err(e) => problems.push(e.to_string()),
        Ok(cell) => {
            let described = detail.cpus.is_some()
                || detail.shared_cpus.is_some()
                || detail.dedicated_cpus.is_some();
            let against = [
                (
                    "PCPU",
                    "dedicated CPUs",
                    cell.pcpuset.len() as u64,
                    described,
                ),
                ("VCPU", "shared CPUs", cell.cpuset.len() as u64, described),
                (
                    "MEMORY_MB",
                    "MiB of memory",
                    cell.memory_mib,
                    detail.memory_mib.is_some(),
                ),
            ];
            for (class, what, has, said) in against {
                if let (true, Some(inventory)) = (said, total(class))
                    && inventory > has
                {
                    problems.push(format!(
                        "spec.inventories.{class}.total is {inventory} and spec.numaCell gives the cell {has} {what}; an inventory may not count more than the cell has"
                    ));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests;

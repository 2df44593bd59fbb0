//! A guest's NUMA record on its Allocation (`spec.numa`): made from the fit the scheduler
//! chose, and judged where every claim is decided, so no host CPU is pinned by two claims
//! and no cell's pages are held past its pools.

use std::collections::BTreeMap;

use kubeplace_api::{Allocation, NumaCellClaim, NumaClaim};
use kubeplace_core::numa::{
    CpuPolicy, CpuSet, GuestTopology, HostTopology, NumaFit, ThreadPolicy, format_cpu_set,
    parse_cpu_set,
};

use super::cells::{HostCells, Records, host_cells};
use crate::store::Store;
use crate::translate::{numa_cpu_key, numa_pages_key};

/// The record of a guest placed on a host's cells by `fit`.
pub fn claim_of(guest: &GuestTopology, fit: &NumaFit, host: &HostCells) -> NumaClaim {
    let cells = guest
        .cells
        .iter()
        .zip(&fit.cells)
        .enumerate()
        .map(|(i, (guest_cell, fitted))| {
            let cell = host
                .topology
                .cells
                .iter()
                .find(|c| c.id == fitted.host_cell);
            let mut held: CpuSet = fitted.pinning.values().copied().collect();
            held.extend(&fitted.emulator_cpus);
            if guest_cell.thread_policy == Some(ThreadPolicy::Isolate)
                && let Some(cell) = cell
            {
                held = cell.with_siblings(&held);
            }
            if !CpuPolicy::pins(guest_cell.cpu_policy) {
                held.clear();
            }
            NumaCellClaim {
                guest_cell: i as u32,
                provider: host
                    .providers
                    .get(&fitted.host_cell)
                    .cloned()
                    .unwrap_or_default(),
                host_cell: fitted.host_cell,
                memory_mib: guest_cell.memory_mib,
                page_size_kib: fitted.page_size_kib,
                shared_vcpus: guest_cell.cpuset.len() as u64,
                pinning: fitted.pinning.clone(),
                emulator_cpus: (!fitted.emulator_cpus.is_empty())
                    .then(|| format_cpu_set(&fitted.emulator_cpus)),
                held_cpus: (!held.is_empty()).then(|| format_cpu_set(&held)),
            }
        })
        .collect();
    NumaClaim { cells }
}

/// The host's cells after a guest's record is added to them: what every later fit on the
/// host sees of it (the same as `kubeplace_core::numa::usage::with_guest` for the fit the
/// record was made from).
pub fn cells_after(host: &HostCells, claim: &NumaClaim) -> HostTopology {
    let mut after = host.topology.clone();
    for cell in &claim.cells {
        if let Some(at) = after.cells.iter_mut().find(|c| c.id == cell.host_cell) {
            super::cells::add_usage(at, cell);
        }
    }
    after
}

/// What each cell of a record asks of Placement's counts: dedicated CPUs pinned (the
/// emulator's among them), unpinned vCPUs and memory, by cell provider and class.
pub fn counted_amounts(claim: &NumaClaim) -> BTreeMap<(String, &'static str), i64> {
    let mut out = BTreeMap::new();
    for cell in &claim.cells {
        let emulator = cell
            .emulator_cpus
            .as_deref()
            .and_then(|e| parse_cpu_set(e).ok())
            .map_or(0, |s| s.len());
        let amounts = [
            ("PCPU", (cell.pinning.len() + emulator) as i64),
            ("VCPU", cell.shared_vcpus as i64),
            ("MEMORY_MB", cell.memory_mib as i64),
        ];
        for (class, amount) in amounts {
            if amount > 0 {
                *out.entry((cell.provider.clone(), class)).or_default() += amount;
            }
        }
    }
    out
}

/// What is wrong with a claim's NUMA record, in two kinds: problems of the record itself
/// (it names no cell, CPUs the cell does not dedicate) and refusals for room (a CPU another
/// claim pins, pages past a pool), against the counted claims and those in `pending`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RecordVerdict {
    pub problems: Vec<String>,
    pub no_room: Vec<String>,
}

/// Judges `a`'s NUMA record; nothing to say for a claim without one. `pending` gives what
/// claims admitted a moment ago and not yet counted hold, by provider and key (see
/// `translate::takes`).
pub fn judge_record(
    a: &Allocation,
    store: &Store,
    pending: impl Fn(&str, &str) -> i64,
) -> RecordVerdict {
    let mut verdict = RecordVerdict::default();
    let Some(numa) = &a.spec.numa else {
        return verdict;
    };
    let name = a.metadata.name.as_deref().unwrap_or("");
    let index = store.index();
    if numa.cells.is_empty() {
        verdict
            .problems
            .push("spec.numa.cells is empty; list each guest cell's host cell".to_string());
    }
    let roots: Vec<String> = a
        .spec
        .allocations
        .iter()
        .filter_map(|pa| index.root_of(&pa.provider).ok())
        .collect();
    let records = Records::of(store, Some(name));
    let mut hosts: BTreeMap<String, Option<HostCells>> = BTreeMap::new();
    // What this record itself takes, so that two of its cells do not share a CPU or pages.
    let mut taken_here: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut pages_here: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for (i, claim) in numa.cells.iter().enumerate() {
        let at = format!("spec.numa.cells[{i}]");
        let Ok(root) = index.root_of(&claim.provider) else {
            verdict.problems.push(format!(
                "{at}.provider {:?} is not a ResourceProvider",
                claim.provider
            ));
            continue;
        };
        if !roots.contains(&root) {
            verdict.problems.push(format!(
                "{at}.provider {:?} is in the tree of {root:?}, which no entry of spec.allocations is; a guest's cells are on the host it is placed on",
                claim.provider
            ));
            continue;
        }
        let host = hosts
            .entry(root.clone())
            .or_insert_with(|| host_cells(store, &root, &records));
        let Some(host) = host.as_ref() else {
            verdict.problems.push(format!(
                "{at}.provider {:?}: the cells of host {root:?} cannot be read",
                claim.provider
            ));
            continue;
        };
        let Some(id) = host.cell_id(&claim.provider) else {
            verdict.problems.push(format!(
                "{at}.provider {:?} is not one of host {root:?}'s NUMA cells ({}); a cell is a provider with the trait {} (a host with none is one cell, its root)",
                claim.provider,
                host.providers.values().cloned().collect::<Vec<_>>().join(", "),
                super::cells::NUMA_ROOT
            ));
            continue;
        };
        if id != claim.host_cell {
            verdict.problems.push(format!(
                "{at}.hostCell is {} and provider {:?} is cell {id}; give the cell's number",
                claim.host_cell, claim.provider
            ));
            continue;
        }
        let cell = host
            .topology
            .cells
            .iter()
            .find(|c| c.id == id)
            .expect("the cell of an id the host lists");
        let held = match claim.held_cpus.as_deref().map(parse_cpu_set).transpose() {
            Ok(held) => held.unwrap_or_default(),
            Err(e) => {
                verdict.problems.push(format!("{at}.heldCpus: {e}"));
                continue;
            }
        };
        let pinned: CpuSet = claim.pinning.values().copied().collect();
        let unheld: CpuSet = &pinned - &held;
        if !unheld.is_empty() {
            verdict.problems.push(format!(
                "{at}.pinning pins vCPUs to CPUs {} that heldCpus does not list; heldCpus lists every CPU the cell holds",
                format_cpu_set(&unheld)
            ));
        }
        let foreign: CpuSet = &held - &cell.pcpuset;
        if !foreign.is_empty() {
            verdict.problems.push(format!(
                "{at}.heldCpus: CPUs {} are not dedicated CPUs of cell {id} ({:?}), whose dedicated CPUs are {}",
                format_cpu_set(&foreign),
                claim.provider,
                if cell.pcpuset.is_empty() { "none".to_string() } else { format_cpu_set(&cell.pcpuset) }
            ));
            continue;
        }
        let here = taken_here.entry(claim.provider.clone()).or_default();
        let pending_cpus: CpuSet = held
            .iter()
            .copied()
            .filter(|cpu| pending(&claim.provider, &numa_cpu_key(*cpu)) > 0)
            .collect();
        let twice: CpuSet = &(&held & &cell.pinned) | &(&(&held & here) | &pending_cpus);
        if !twice.is_empty() {
            verdict.no_room.push(format!(
                "{at}: CPUs {} of NUMA cell {id} ({:?}) are already held by another server's claim",
                format_cpu_set(&twice),
                claim.provider
            ));
        }
        here.extend(&held);
        if let Some(size) = claim.page_size_kib {
            let Some(pool) = cell.pages.iter().find(|p| p.size_kib == size) else {
                verdict.problems.push(format!(
                    "{at}.pageSizeKiB is {size} and cell {id} ({:?}) has no pages of that size; it has {}",
                    claim.provider,
                    cell.pages
                        .iter()
                        .map(|p| format!("{} KiB", p.size_kib))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            };
            let wanted = claim.memory_mib * 1024 / size.max(1);
            let mine = pages_here
                .entry((claim.provider.clone(), size))
                .or_default();
            let others = pending(&claim.provider, &numa_pages_key(size)).max(0) as u64;
            let free = pool.free() - i128::from(*mine) - i128::from(others);
            if i128::from(wanted) > free {
                verdict.no_room.push(format!(
                    "{at}: {wanted} pages of {size} KiB on NUMA cell {id} ({:?}), which has {} free",
                    claim.provider,
                    free.max(0)
                ));
            }
            *mine += wanted;
        }
    }
    verdict
}

#[cfg(test)]
mod tests;

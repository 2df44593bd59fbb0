//! Whether a guest's topology fits a host's cells, and how: which host cell takes each
//! guest cell, which host CPU each pinned vCPU gets, where the emulator threads run and
//! which page size backs the memory. The rules and the order of the choices are Nova's
//! NUMATopologyFilter's (`numa_fit_instance_to_host`), so a host is a candidate exactly
//! where Nova would pass it, and the CPUs chosen are the ones Nova would pin.
//!
//! - Host cells are tried in Nova's order: when the host has more cells than the guest,
//!   emptier cells first (memory, then shared CPU use or free dedicated CPUs), or fuller
//!   first when packing; then every ordered choice of host cells, the first that fits wins.
//! - A cell fits when its page size has room (hugepages and pinned guests never overcommit
//!   memory; an unpinned guest may, up to the RAM ratio, but never past the cell's own
//!   memory), its dedicated CPUs can be pinned under the thread policy (whole cores for
//!   `isolate`, siblings for `require`, siblings first for `prefer`), and its shared CPUs
//!   stay within the CPU ratio.
//! - With `hw:emulator_threads_policy=isolate`, one more dedicated CPU is taken in the host
//!   cell of guest cell 0.
//! - As in Nova, once a page size has been chosen for a guest cell (`large` and `any` name
//!   several), that size is the one tried on the other host cells.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::cpu_set::{CpuSet, format_cpu_set};
use super::guest::{CpuPolicy, GuestCell, GuestTopology, ThreadPolicy};
use super::host::{HostCell, HostTopology};
use super::page_size::PageSize;

/// The host's overcommit ratios for unpinned guests (Nova's `cpu_allocation_ratio` and
/// `ram_allocation_ratio`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub cpu_allocation_ratio: f64,
    pub ram_allocation_ratio: f64,
}

/// Which host cells are tried first when a host has more cells than a guest (Nova's
/// `packing_host_numa_cells_allocation_strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CellOrder {
    /// The emptiest first, so guests spread over cells (Nova's default).
    #[default]
    Spread,
    /// The fullest first.
    Pack,
}

/// Where one guest cell landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FittedCell {
    /// The host cell's id.
    pub host_cell: u32,
    /// Each pinned vCPU's host CPU.
    pub pinning: BTreeMap<u32, u32>,
    /// The host CPU the emulator threads run on (with `isolate`; guest cell 0's host cell).
    pub emulator_cpus: CpuSet,
    /// The page size chosen, KiB, when the guest asked for one.
    pub page_size_kib: Option<u64>,
}

/// A guest's cells on a host, in guest cell order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaFit {
    pub cells: Vec<FittedCell>,
}

/// Why a guest cell does not fit a host cell: the first check it failed, as Nova checks.
#[derive(Debug, Clone, PartialEq)]
pub enum CellMisfit {
    /// The host cell has no pages of the size asked for (or, for `large`, none but its
    /// smallest; or none listed at all).
    NoSuchPages { asked: PageSize },
    /// Pages of the size asked for, but not enough free (or not a whole number of them).
    NotEnoughPages { asked: PageSize, memory_mib: u64 },
    /// Not enough memory of the cell's ordinary pages.
    NotEnoughMemory {
        memory_mib: u64,
        available_mib: i128,
    },
    /// The cell has fewer dedicated CPUs in all than the guest cell pins.
    TooFewDedicatedCpus { needed: usize, has: usize },
    /// The cell has fewer shared CPUs in all than the guest cell's unpinned vCPUs.
    TooFewSharedCpus { needed: usize, has: usize },
    /// Not enough of the cell's dedicated CPUs are free.
    TooFewFreeDedicatedCpus { needed: usize, free: usize },
    /// The free dedicated CPUs cannot be pinned under the thread policy.
    ThreadPolicyUnmet { policy: Option<ThreadPolicy> },
    /// The guest cell's unpinned vCPUs would take the shared CPUs past their ratio.
    SharedCpusFull { usage: u64, limit: f64 },
    /// The guest cell's memory would take the cell past its RAM ratio.
    MemoryFull { usage: u64, limit: f64 },
}

impl fmt::Display for CellMisfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellMisfit::NoSuchPages { asked } => write!(f, "has no {asked} pages"),
            CellMisfit::NotEnoughPages { asked, memory_mib } => {
                write!(f, "has not {memory_mib} MiB free in {asked} pages")
            }
            CellMisfit::NotEnoughMemory {
                memory_mib,
                available_mib,
            } => write!(f, "has {available_mib} MiB of memory for {memory_mib} MiB"),
            CellMisfit::TooFewDedicatedCpus { needed, has } => {
                write!(f, "has {has} dedicated CPUs for {needed} pinned")
            }
            CellMisfit::TooFewSharedCpus { needed, has } => {
                write!(f, "has {has} shared CPUs for {needed} unpinned vCPUs")
            }
            CellMisfit::TooFewFreeDedicatedCpus { needed, free } => {
                write!(f, "has {free} free dedicated CPUs, {needed} needed")
            }
            CellMisfit::ThreadPolicyUnmet { policy } => match policy {
                Some(ThreadPolicy::Isolate) => {
                    f.write_str("has not enough whole free cores for thread policy isolate")
                }
                Some(ThreadPolicy::Require) => {
                    f.write_str("has not enough free thread siblings for thread policy require")
                }
                _ => f.write_str("cannot pin its free dedicated CPUs"),
            },
            CellMisfit::SharedCpusFull { usage, limit } => {
                write!(f, "shared CPUs would be used {usage} times of {limit}")
            }
            CellMisfit::MemoryFull { usage, limit } => {
                write!(f, "memory would be {usage} MiB of {limit}")
            }
        }
    }
}

/// Why a guest does not fit a host.
#[derive(Debug, Clone, PartialEq)]
pub enum Misfit {
    /// The host lists no cells.
    NoCells,
    /// The host has fewer cells than the guest.
    TooFewCells { host: usize, guest: usize },
    /// Thread policy `require` on a host without thread siblings.
    NoThreads,
    /// No ordered choice of host cells fits; each pair of guest cell and host cell tried
    /// that did not fit, with why.
    Cells(Vec<(usize, u32, CellMisfit)>),
    /// Cells fit, and the devices the guest asks for are not on any choice of them.
    Devices,
    /// Cells fit, but every choice puts the emulator threads on a core another guest half
    /// uses, which cannot be pinned whole.
    Unclaimable,
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misfit::NoCells => f.write_str("the host has no NUMA cells described"),
            Misfit::TooFewCells { host, guest } => {
                write!(f, "the guest has {guest} NUMA cells and the host {host}")
            }
            Misfit::NoThreads => f.write_str(
                "thread policy require needs thread siblings and the host has none",
            ),
            Misfit::Cells(pairs) => {
                let parts: Vec<String> = pairs
                    .iter()
                    .map(|(guest, host, why)| format!("guest cell {guest} on host cell {host}: {why}"))
                    .collect();
                if parts.is_empty() {
                    f.write_str("no choice of host cells fits")
                } else {
                    f.write_str(&parts.join("; "))
                }
            }
            Misfit::Devices => f.write_str(
                "no choice of cells that fits has the PCI devices asked for where the NUMA policy needs them",
            ),
            Misfit::Unclaimable => f.write_str(
                "every choice of cells that fits puts the emulator threads on a core another guest half uses",
            ),
        }
    }
}

/// Fits a guest onto a host. `accept` is asked, for each choice of cells that fits,
/// whether the rest of the guest fits it too (its PCI devices, say); the last refusal is the
/// answer when none is accepted.
pub fn fit_guest(
    host: &HostTopology,
    guest: &GuestTopology,
    limits: Option<&Limits>,
    order: CellOrder,
    mut accept: impl FnMut(&[&HostCell], &[FittedCell]) -> Result<(), Misfit>,
) -> Result<NumaFit, Misfit> {
    if host.cells.is_empty() || guest.cells.is_empty() {
        return Err(Misfit::NoCells);
    }
    if host.cells.len() < guest.cells.len() {
        return Err(Misfit::TooFewCells {
            host: host.cells.len(),
            guest: guest.cells.len(),
        });
    }
    let cells = ordered_cells(host, guest, order);
    let mut page_sizes: Vec<Option<PageSize>> =
        guest.cells.iter().map(|c| c.page_size.clone()).collect();
    let mut tried: HashMap<(usize, usize), Result<FittedCell, CellMisfit>> = HashMap::new();
    let mut refused: Option<Misfit> = None;
    let mut permutation = Permutations::new(cells.len(), guest.cells.len());
    while let Some(choice) = permutation.next_choice() {
        let mut fitted = Vec::with_capacity(guest.cells.len());
        let mut whole = true;
        for (g, &h) in choice.iter().enumerate() {
            let outcome = tried.entry((h, g)).or_insert_with(|| {
                let reserved = usize::from(g == 0 && guest.emulator_threads_isolated());
                fit_cell(
                    cells[h],
                    &guest.cells[g],
                    &mut page_sizes[g],
                    limits,
                    reserved,
                )
            });
            match outcome {
                Ok(cell) => fitted.push(cell.clone()),
                Err(_) => {
                    whole = false;
                    break;
                }
            }
        }
        if !whole {
            continue;
        }
        let chosen: Vec<&HostCell> = choice.iter().map(|&h| cells[h]).collect();
        match accept(&chosen, &fitted) {
            Ok(()) => return Ok(NumaFit { cells: fitted }),
            Err(why) => refused = Some(why),
        }
    }
    if let Some(why) = refused {
        return Err(why);
    }
    let mut pairs: Vec<(usize, u32, CellMisfit)> = tried
        .into_iter()
        .filter_map(|((h, g), outcome)| outcome.err().map(|why| (g, cells[h].id, why)))
        .collect();
    pairs.sort_by_key(|(g, h, _)| (*g, *h));
    Err(Misfit::Cells(pairs))
}

/// The host's cells in the order Nova tries them.
fn ordered_cells<'a>(
    host: &'a HostTopology,
    guest: &GuestTopology,
    order: CellOrder,
) -> Vec<&'a HostCell> {
    let mut cells: Vec<&HostCell> = host.cells.iter().collect();
    if host.cells.len() == guest.cells.len() {
        return cells;
    }
    let pack = order == CellOrder::Pack;
    // Stable sorts, one after the other: the last decides, earlier ones break its ties.
    sort_cells(&mut cells, !pack, |c| c.avail_memory());
    if CpuPolicy::pins(guest.cells[0].cpu_policy) {
        sort_cells(&mut cells, !pack, |c| c.free_pcpus().len() as i128);
    } else {
        sort_cells(&mut cells, pack, |c| i128::from(c.cpu_usage));
    }
    cells
}

fn sort_cells(cells: &mut [&HostCell], descending: bool, key: impl Fn(&HostCell) -> i128) {
    if descending {
        cells.sort_by_key(|c| std::cmp::Reverse(key(c)));
    } else {
        cells.sort_by_key(|c| key(c));
    }
}

/// Every ordered choice of `k` of `n` items, in `itertools.permutations` order.
struct Permutations {
    n: usize,
    k: usize,
    indices: Vec<usize>,
    cycles: Vec<usize>,
    started: bool,
    done: bool,
}

impl Permutations {
    fn new(n: usize, k: usize) -> Permutations {
        Permutations {
            n,
            k,
            indices: (0..n).collect(),
            cycles: (n - k + 1..=n).rev().collect(),
            started: false,
            done: k > n,
        }
    }

    fn next_choice(&mut self) -> Option<Vec<usize>> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(self.indices[..self.k].to_vec());
        }
        for i in (0..self.k).rev() {
            self.cycles[i] -= 1;
            if self.cycles[i] == 0 {
                let moved = self.indices.remove(i);
                self.indices.push(moved);
                self.cycles[i] = self.n - i;
            } else {
                let j = self.n - self.cycles[i];
                self.indices.swap(i, j);
                return Some(self.indices[..self.k].to_vec());
            }
        }
        self.done = true;
        None
    }
}

/// Whether one guest cell fits one host cell, and how. `page_size` is the guest cell's
/// page size request, made the size chosen once one is (as Nova does).
pub fn fit_cell(
    host: &HostCell,
    guest: &GuestCell,
    page_size: &mut Option<PageSize>,
    limits: Option<&Limits>,
    emulator_cpus: usize,
) -> Result<FittedCell, CellMisfit> {
    let mut chosen_page = None;
    match page_size.clone() {
        Some(asked) => {
            let size = pages_for(host, guest.memory_mib, &asked)?;
            *page_size = Some(PageSize::Kib(size));
            chosen_page = Some(size);
        }
        None => memory_fits(host, guest)?,
    }
    let pins = CpuPolicy::pins(guest.cpu_policy);
    let floats = CpuPolicy::floats(guest.cpu_policy);
    let needed = guest.pcpuset.len() + emulator_cpus;
    if pins && needed > host.pcpuset.len() {
        return Err(CellMisfit::TooFewDedicatedCpus {
            needed,
            has: host.pcpuset.len(),
        });
    }
    if floats && guest.cpuset.len() > host.cpuset.len() {
        return Err(CellMisfit::TooFewSharedCpus {
            needed: guest.cpuset.len(),
            has: host.cpuset.len(),
        });
    }
    let mut pinning = BTreeMap::new();
    let mut emulator = CpuSet::new();
    if pins {
        let free = host.free_pcpus().len();
        if needed > free {
            return Err(CellMisfit::TooFewFreeDedicatedCpus { needed, free });
        }
        let (pins, reserved) =
            pack_onto_cores(host, guest, emulator_cpus).ok_or(CellMisfit::ThreadPolicyUnmet {
                policy: guest.thread_policy,
            })?;
        pinning = pins;
        emulator = reserved;
    }
    if floats && let Some(limits) = limits {
        let usage = host.cpu_usage + guest.cpuset.len() as u64;
        let limit = host.cpuset.len() as f64 * limits.cpu_allocation_ratio;
        if usage as f64 > limit {
            return Err(CellMisfit::SharedCpusFull { usage, limit });
        }
        let usage = host.memory_usage_mib + guest.memory_mib;
        let limit = host.memory_mib as f64 * limits.ram_allocation_ratio;
        if usage as f64 > limit {
            return Err(CellMisfit::MemoryFull { usage, limit });
        }
    }
    Ok(FittedCell {
        host_cell: host.id,
        pinning,
        emulator_cpus: emulator,
        page_size_kib: chosen_page,
    })
}

/// The page size that backs the guest cell's memory, from what it asked for: the largest
/// size of those it names that has room.
fn pages_for(host: &HostCell, memory_mib: u64, asked: &PageSize) -> Result<u64, CellMisfit> {
    let mut sizes: Vec<u64> = host.pages.iter().map(|p| p.size_kib).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let candidates: Vec<u64> = match asked {
        PageSize::Small => sizes.last().copied().into_iter().collect(),
        PageSize::Large => sizes
            .split_last()
            .map(|(_, rest)| rest.to_vec())
            .unwrap_or_default(),
        PageSize::Any => sizes,
        PageSize::Kib(size) => vec![*size],
        PageSize::Uneven(_) => Vec::new(),
    };
    let memory_kib = u128::from(memory_mib) * 1024;
    let mut absent = candidates.is_empty();
    for size in candidates {
        match host.fits_in_pages(size, memory_kib, true) {
            Some(true) => return Ok(size),
            Some(false) => {}
            None => absent = true,
        }
    }
    Err(if absent {
        CellMisfit::NoSuchPages {
            asked: asked.clone(),
        }
    } else {
        CellMisfit::NotEnoughPages {
            asked: asked.clone(),
            memory_mib,
        }
    })
}

/// Whether the guest cell's memory fits the host cell when no page size was asked for: in
/// the smallest pages (free ones for a pinned guest, all of them otherwise, the RAM ratio
/// judging the rest), or in the cell's memory when it lists no pages.
fn memory_fits(host: &HostCell, guest: &GuestCell) -> Result<(), CellMisfit> {
    let pins = CpuPolicy::pins(guest.cpu_policy);
    match host.smallest_page() {
        Some(size) => {
            let memory_kib = u128::from(guest.memory_mib) * 1024;
            if host.fits_in_pages(size, memory_kib, pins) == Some(true) {
                Ok(())
            } else {
                Err(CellMisfit::NotEnoughMemory {
                    memory_mib: guest.memory_mib,
                    available_mib: if pins {
                        host.avail_memory()
                    } else {
                        i128::from(host.memory_mib)
                    },
                })
            }
        }
        None => {
            let available = if pins {
                host.avail_memory()
            } else {
                i128::from(host.memory_mib)
            };
            if available < i128::from(guest.memory_mib) {
                Err(CellMisfit::NotEnoughMemory {
                    memory_mib: guest.memory_mib,
                    available_mib: available,
                })
            } else {
                Ok(())
            }
        }
    }
}

/// Pins the guest cell's dedicated vCPUs to the host cell's free dedicated CPUs under its
/// thread policy, and picks `emulator_cpus` more for the emulator threads. Cores with the
/// most free threads are used first, vCPUs in order; `prefer` falls back to any free CPUs,
/// `require` never does, and `isolate` takes one thread of each whole free core (and only
/// on a host that offers the same CPUs as shared and dedicated, as Nova does: elsewhere
/// Placement keeps such guests off hosts with threads).
fn pack_onto_cores(
    host: &HostCell,
    guest: &GuestCell,
    emulator_cpus: usize,
) -> Option<(BTreeMap<u32, u32>, CpuSet)> {
    let threads_per_core = host.threads_per_core();
    // Free cores by how many threads they can give: a core with 2 free threads is listed
    // under 1 and 2. Each core's threads in the order Nova takes them.
    let mut by_threads: BTreeMap<usize, Vec<Vec<u32>>> = BTreeMap::new();
    for core in host.free_cores_in_nova_order() {
        for threads in 1..=core.len() {
            by_threads.entry(threads).or_default().push(core.clone());
        }
    }
    let singles = by_threads.get(&1).cloned().unwrap_or_default();
    let vcpus = &guest.pcpuset;
    let (pinning, reserved) = if guest.thread_policy == Some(ThreadPolicy::Isolate) {
        let whole = by_threads.get(&threads_per_core)?;
        if threads_per_core != 1 && host.pcpuset != host.cpuset {
            return None;
        }
        let pinning = pin(1, whole, vcpus);
        let reserved = reserve(&singles, pinning.as_ref(), emulator_cpus, true);
        match pinning {
            Some(p) if !p.is_empty() && (emulator_cpus == 0 || reserved.is_some()) => {
                (Some(p), reserved)
            }
            _ => (None, None),
        }
    } else {
        let require = guest.thread_policy == Some(ThreadPolicy::Require);
        if require && threads_per_core <= 1 {
            return None;
        }
        let mut pinning = None;
        let mut reserved = None;
        for (&threads, cores) in by_threads.iter().rev() {
            if require && threads <= 1 {
                continue;
            }
            pinning = pin(threads, cores, vcpus);
            reserved = reserve(&singles, pinning.as_ref(), emulator_cpus, false);
            if pinning.is_none() || (emulator_cpus > 0 && reserved.is_none()) {
                continue;
            }
            break;
        }
        if !require && pinning.as_ref().is_none_or(Vec::is_empty) {
            let each_alone: Vec<Vec<u32>> = singles
                .iter()
                .flat_map(|core| core.iter().map(|&cpu| vec![cpu]))
                .collect();
            pinning = pin(1, &each_alone, vcpus);
            reserved = reserve(&each_alone, pinning.as_ref(), emulator_cpus, false);
        }
        (pinning, reserved)
    };
    let pinning = pinning?;
    if emulator_cpus > 0 && reserved.is_none() {
        return None;
    }
    Some((pinning.into_iter().collect(), reserved.unwrap_or_default()))
}

/// vCPUs in order onto the first `threads` free threads of each core in turn; `None` when
/// the cores cannot take them all.
fn pin(threads: usize, cores: &[Vec<u32>], vcpus: &CpuSet) -> Option<Vec<(u32, u32)>> {
    if threads * cores.len() < vcpus.len() {
        return None;
    }
    let usable = cores
        .iter()
        .flat_map(|core| core.iter().take(threads).copied());
    Some(vcpus.iter().copied().zip(usable).collect())
}

/// The `count` CPUs for the emulator threads: the first free ones left once the vCPUs are
/// pinned (with `isolate`, on cores none of whose threads were pinned). `None` when none
/// are asked for, none are pinned, or too few are left.
fn reserve(
    cores: &[Vec<u32>],
    pinning: Option<&Vec<(u32, u32)>>,
    count: usize,
    isolate: bool,
) -> Option<CpuSet> {
    let pinning = pinning.filter(|p| !p.is_empty())?;
    if count == 0 {
        return None;
    }
    let pinned: CpuSet = pinning.iter().map(|&(_, cpu)| cpu).collect();
    let left: Vec<u32> = cores
        .iter()
        .filter(|core| !(isolate && core.iter().any(|cpu| pinned.contains(cpu))))
        .flat_map(|core| core.iter().copied().filter(|cpu| !pinned.contains(cpu)))
        .collect();
    let reserved: CpuSet = left.into_iter().take(count).collect();
    (!reserved.is_empty()).then_some(reserved)
}

/// A fit as a line for people: `guest cell 0 → host cell 1 (vCPUs 0-3 on 8-11, emulator
/// 12, 1048576 KiB pages)`.
pub fn describe(fit: &NumaFit) -> String {
    fit.cells
        .iter()
        .enumerate()
        .map(|(g, cell)| {
            let mut parts = Vec::new();
            if !cell.pinning.is_empty() {
                let vcpus: CpuSet = cell.pinning.keys().copied().collect();
                let cpus: CpuSet = cell.pinning.values().copied().collect();
                parts.push(format!(
                    "vCPUs {} on {}",
                    format_cpu_set(&vcpus),
                    format_cpu_set(&cpus)
                ));
            }
            if !cell.emulator_cpus.is_empty() {
                parts.push(format!("emulator {}", format_cpu_set(&cell.emulator_cpus)));
            }
            if let Some(size) = cell.page_size_kib {
                parts.push(format!("{size} KiB pages"));
            }
            if parts.is_empty() {
                format!("guest cell {g} → host cell {}", cell.host_cell)
            } else {
                format!(
                    "guest cell {g} → host cell {} ({})",
                    cell.host_cell,
                    parts.join(", ")
                )
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

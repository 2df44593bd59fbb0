//! A host's NUMA cells as the fit sees them: CPUs shared and dedicated, thread siblings,
//! memory and its page pools, and what the guests already on the host use of each.

use serde::{Deserialize, Serialize};

use super::cpu_set::CpuSet;
use super::set_order::PySet;

/// The pages of one size in a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePool {
    /// The page size, KiB (4, 2048, 1048576).
    pub size_kib: u64,
    pub total: u64,
    #[serde(default)]
    pub used: u64,
    /// Pages the host keeps for itself (Nova's `reserved_huge_pages`).
    #[serde(default)]
    pub reserved: u64,
}

impl PagePool {
    /// Pages neither used nor reserved; below zero when usage ran past the total.
    pub fn free(&self) -> i128 {
        i128::from(self.total) - i128::from(self.used) - i128::from(self.reserved)
    }

    fn free_kib(&self) -> i128 {
        self.free() * i128::from(self.size_kib)
    }

    fn total_kib(&self) -> i128 {
        i128::from(self.total) * i128::from(self.size_kib)
    }
}

/// One NUMA cell of a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCell {
    pub id: u32,
    /// CPUs for unpinned guests (Nova's `cpu_shared_set` in this cell).
    pub cpuset: CpuSet,
    /// CPUs for pinned guests (`cpu_dedicated_set`). A host that names neither set offers
    /// every CPU as both, and so do these two fields.
    pub pcpuset: CpuSet,
    /// Thread siblings: the CPUs of each core.
    pub siblings: Vec<CpuSet>,
    pub memory_mib: u64,
    /// Page pools by size; the smallest is the host's ordinary pages.
    #[serde(default)]
    pub pages: Vec<PagePool>,
    /// Dedicated CPUs pinned by guests (and their emulator threads).
    #[serde(default)]
    pub pinned: CpuSet,
    /// Shared CPUs' use: the unpinned vCPUs of the guests on the cell.
    #[serde(default)]
    pub cpu_usage: u64,
    #[serde(default)]
    pub memory_usage_mib: u64,
    #[serde(default)]
    pub socket: Option<u32>,
}

impl HostCell {
    /// Dedicated CPUs no guest has pinned.
    pub fn free_pcpus(&self) -> CpuSet {
        &self.pcpuset - &self.pinned
    }

    /// Each core's dedicated CPUs no guest has pinned, core by core (empty for a core with
    /// none).
    pub fn free_siblings(&self) -> Vec<CpuSet> {
        let free = self.free_pcpus();
        self.siblings.iter().map(|core| core & &free).collect()
    }

    /// Each core's free dedicated CPUs, each in the order Nova walks them (see
    /// `set_order.rs`): the order in which its threads are taken.
    pub fn free_cores_in_nova_order(&self) -> Vec<Vec<u32>> {
        let dedicated = PySet::as_nova_holds(&self.pcpuset);
        let pinned = PySet::as_nova_holds(&self.pinned);
        let free = dedicated.difference(&pinned);
        self.siblings
            .iter()
            .map(|core| {
                PySet::as_nova_holds(core)
                    .intersection(&free)
                    .walk()
                    .collect()
            })
            .collect()
    }

    /// Memory no guest on the cell uses, MiB (below zero when overcommitted).
    pub fn avail_memory(&self) -> i128 {
        i128::from(self.memory_mib) - i128::from(self.memory_usage_mib)
    }

    /// Adds what a guest cell uses of this cell besides its pinned CPUs (or, `leaving`,
    /// takes it back): its memory, in pages of `page_size_kib` (the cell's smallest when the
    /// guest asked for no size), and its unpinned vCPUs on the shared CPUs.
    pub fn add_use(
        &mut self,
        memory_mib: u64,
        shared_vcpus: u64,
        page_size_kib: Option<u64>,
        leaving: bool,
    ) {
        if let Some(size) = page_size_kib.or_else(|| self.smallest_page())
            && let Some(pool) = self.pages.iter_mut().find(|p| p.size_kib == size)
        {
            let pages = memory_mib * 1024 / size.max(1);
            pool.used = if leaving {
                pool.used.saturating_sub(pages)
            } else {
                pool.used + pages
            };
        }
        if leaving {
            self.memory_usage_mib = self.memory_usage_mib.saturating_sub(memory_mib);
            self.cpu_usage = self.cpu_usage.saturating_sub(shared_vcpus);
        } else {
            self.memory_usage_mib += memory_mib;
            self.cpu_usage += shared_vcpus;
        }
    }

    /// The CPUs and every thread sibling of theirs: what a guest with thread policy
    /// `isolate` holds.
    pub fn with_siblings(&self, cpus: &CpuSet) -> CpuSet {
        let mut all = CpuSet::new();
        for core in &self.siblings {
            if core.iter().any(|c| cpus.contains(c)) {
                all.extend(core);
            }
        }
        all
    }

    /// Whether any core has more than one thread.
    pub fn has_threads(&self) -> bool {
        self.siblings.iter().any(|core| core.len() > 1)
    }

    /// Threads a core has, at most (1 when no core is known).
    pub fn threads_per_core(&self) -> usize {
        self.siblings
            .iter()
            .map(|c| c.len())
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// The smallest page size of the cell, if it lists any.
    pub fn smallest_page(&self) -> Option<u64> {
        self.pages.iter().map(|p| p.size_kib).min()
    }

    /// Whether `memory_kib` fits in the cell's pages of `size_kib` (free ones when
    /// `use_free`, else all of them) as whole pages; `None` when the cell has no pages of
    /// that size.
    pub fn fits_in_pages(&self, size_kib: u64, memory_kib: u128, use_free: bool) -> Option<bool> {
        let pool = self.pages.iter().find(|p| p.size_kib == size_kib)?;
        let room = if use_free {
            pool.free_kib()
        } else {
            pool.total_kib()
        };
        let memory = i128::try_from(memory_kib).unwrap_or(i128::MAX);
        Some(memory <= room && memory_kib % u128::from(size_kib) == 0)
    }
}

/// A host's cells.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTopology {
    pub cells: Vec<HostCell>,
}

impl HostTopology {
    /// Whether any cell has cores of several threads.
    pub fn has_threads(&self) -> bool {
        self.cells.iter().any(HostCell::has_threads)
    }
}

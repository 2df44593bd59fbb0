//! What a guest placed on a host takes from its cells, and gives back when it leaves: its
//! pages, memory and shared CPU use, and its pinned CPUs (whole cores with `isolate`).
//! Applied to the cells one guest after another, this is how every later fit sees the
//! guests already there.

use super::cpu_set::{CpuSet, format_cpu_set};
use super::fit::NumaFit;
use super::guest::{CpuPolicy, GuestTopology, ThreadPolicy};
use super::host::{HostCell, HostTopology};

/// A guest's use that cannot be applied to the host as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("host cell {cell} has no CPUs {cpus} among its dedicated CPUs")]
    UnknownCpus { cell: u32, cpus: String },
    #[error("CPUs {cpus} of host cell {cell} are already pinned by another guest")]
    AlreadyPinned { cell: u32, cpus: String },
    #[error("CPUs {cpus} of host cell {cell} are not pinned")]
    NotPinned { cell: u32, cpus: String },
    #[error("the host has no cell {0}")]
    NoSuchCell(u32),
    #[error("the fit has {fit} cells and the guest {guest}")]
    CellCount { fit: usize, guest: usize },
}

/// The host's cells with a guest added (`leaving` false) or taken away (`leaving` true).
pub fn with_guest(
    host: &HostTopology,
    guest: &GuestTopology,
    fit: &NumaFit,
    leaving: bool,
) -> Result<HostTopology, UsageError> {
    if fit.cells.len() != guest.cells.len() {
        return Err(UsageError::CellCount {
            fit: fit.cells.len(),
            guest: guest.cells.len(),
        });
    }
    let mut cells = host.cells.clone();
    for (guest_cell, fitted) in guest.cells.iter().zip(&fit.cells) {
        let cell = cells
            .iter_mut()
            .find(|c| c.id == fitted.host_cell)
            .ok_or(UsageError::NoSuchCell(fitted.host_cell))?;
        cell.add_use(
            guest_cell.memory_mib,
            guest_cell.cpuset.len() as u64,
            fitted.page_size_kib,
            leaving,
        );
        if !CpuPolicy::pins(guest_cell.cpu_policy) {
            continue;
        }
        let mut cpus: CpuSet = fitted.pinning.values().copied().collect();
        cpus.extend(&fitted.emulator_cpus);
        if guest_cell.thread_policy == Some(ThreadPolicy::Isolate) {
            cpus = cell.with_siblings(&cpus);
        }
        if leaving {
            unpin(cell, &cpus)?;
        } else {
            pin(cell, &cpus)?;
        }
    }
    Ok(HostTopology { cells })
}

fn pin(cell: &mut HostCell, cpus: &CpuSet) -> Result<(), UsageError> {
    let unknown: CpuSet = cpus - &cell.pcpuset;
    if !unknown.is_empty() {
        return Err(UsageError::UnknownCpus {
            cell: cell.id,
            cpus: format_cpu_set(&unknown),
        });
    }
    let taken: CpuSet = cpus & &cell.pinned;
    if !taken.is_empty() {
        return Err(UsageError::AlreadyPinned {
            cell: cell.id,
            cpus: format_cpu_set(&taken),
        });
    }
    cell.pinned.extend(cpus);
    Ok(())
}

fn unpin(cell: &mut HostCell, cpus: &CpuSet) -> Result<(), UsageError> {
    let unknown: CpuSet = cpus - &cell.pcpuset;
    if !unknown.is_empty() {
        return Err(UsageError::UnknownCpus {
            cell: cell.id,
            cpus: format_cpu_set(&unknown),
        });
    }
    let free: CpuSet = cpus - &cell.pinned;
    if !free.is_empty() {
        return Err(UsageError::NotPinned {
            cell: cell.id,
            cpus: format_cpu_set(&free),
        });
    }
    cell.pinned = &cell.pinned - cpus;
    Ok(())
}

//! Nova's NUMA fit, decided inside kubeplace's search: a guest's cells, pinned CPUs,
//! emulator threads and memory pages against a host's NUMA cells, with Nova's rules and
//! Nova's choices.
//!
//! - `request.rs`: the guest topology a flavor and an image ask for (Nova's
//!   `numa_get_constraints`), and why a pair is refused.
//! - `guest.rs`, `host.rs`: the two topologies.
//! - `fit.rs`: whether and how a guest fits a host (the NUMATopologyFilter's
//!   `numa_fit_instance_to_host`), with the reason per cell when it does not.
//! - `filter.rs`: the verdict on one host, as Nova's filter gives it.
//! - `usage.rs`: what a placed guest takes from the host's cells.
//! - `cpu_set.rs`, `page_size.rs`: CPU masks and page sizes as Nova reads them;
//!   `set_order.rs` the order Nova walks a set of CPUs in, which decides the CPUs it pins.

pub mod cpu_set;
pub mod filter;
pub mod fit;
pub mod guest;
pub mod host;
pub mod page_size;
pub mod request;
mod set_order;
pub mod usage;

pub use cpu_set::{CpuSet, format_cpu_set, parse_cpu_set};
pub use filter::numa_filter;
pub use fit::{CellOrder, FittedCell, Limits, Misfit, NumaFit, fit_guest};
pub use guest::{CpuPolicy, EmulatorThreadsPolicy, GuestCell, GuestTopology, ThreadPolicy};
pub use host::{HostCell, HostTopology, PagePool};
pub use page_size::PageSize;
pub use request::{GuestSource, RequestError, guest_topology};

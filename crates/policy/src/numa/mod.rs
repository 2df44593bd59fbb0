//! Nova's NUMA fit over the store: a host's cells read from its ResourceProviders
//! (`cells.rs`), the fit of a server on a candidate host as the scheduler asks it
//! (`host_fit.rs`), and the record a placed server's Allocation keeps of its cells, CPUs and
//! pages, judged where every claim is decided (`claim.rs`). The fit itself is the core's
//! (`kubeplace_core::numa`).

pub mod cells;
pub mod claim;
pub mod host_fit;

pub use cells::{HostCells, NUMA_ROOT, Records, check_detail, host_cells};
pub use claim::{RecordVerdict, cells_after, claim_of, judge_record};
pub use host_fit::{Named, NumaJudge};

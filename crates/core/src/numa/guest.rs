//! A guest's NUMA topology as Nova builds it from a flavor and an image: its cells, the
//! vCPUs and memory of each, and the policies that say how they are backed.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::cpu_set::CpuSet;
use super::page_size::PageSize;

/// `hw:cpu_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPolicy {
    Shared,
    Dedicated,
    Mixed,
}

impl CpuPolicy {
    pub const ALL: [&'static str; 3] = ["shared", "dedicated", "mixed"];

    pub fn parse(text: &str) -> Option<CpuPolicy> {
        match text {
            "shared" => Some(CpuPolicy::Shared),
            "dedicated" => Some(CpuPolicy::Dedicated),
            "mixed" => Some(CpuPolicy::Mixed),
            _ => None,
        }
    }

    /// Whether some vCPUs are pinned to host CPUs of their own.
    pub fn pins(policy: Option<CpuPolicy>) -> bool {
        matches!(policy, Some(CpuPolicy::Dedicated | CpuPolicy::Mixed))
    }

    /// Whether some vCPUs float over the shared CPUs.
    pub fn floats(policy: Option<CpuPolicy>) -> bool {
        matches!(policy, None | Some(CpuPolicy::Shared | CpuPolicy::Mixed))
    }
}

impl fmt::Display for CpuPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuPolicy::Shared => "shared",
            CpuPolicy::Dedicated => "dedicated",
            CpuPolicy::Mixed => "mixed",
        })
    }
}

/// `hw:cpu_thread_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadPolicy {
    Prefer,
    Isolate,
    Require,
}

impl ThreadPolicy {
    pub const ALL: [&'static str; 3] = ["prefer", "isolate", "require"];

    pub fn parse(text: &str) -> Option<ThreadPolicy> {
        match text {
            "prefer" => Some(ThreadPolicy::Prefer),
            "isolate" => Some(ThreadPolicy::Isolate),
            "require" => Some(ThreadPolicy::Require),
            _ => None,
        }
    }
}

impl fmt::Display for ThreadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadPolicy::Prefer => "prefer",
            ThreadPolicy::Isolate => "isolate",
            ThreadPolicy::Require => "require",
        })
    }
}

/// `hw:emulator_threads_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmulatorThreadsPolicy {
    /// On the host's shared CPUs.
    Share,
    /// On a dedicated CPU of their own, in the host cell of guest cell 0.
    Isolate,
}

impl EmulatorThreadsPolicy {
    pub const ALL: [&'static str; 2] = ["share", "isolate"];

    pub fn parse(text: &str) -> Option<EmulatorThreadsPolicy> {
        match text {
            "share" => Some(EmulatorThreadsPolicy::Share),
            "isolate" => Some(EmulatorThreadsPolicy::Isolate),
            _ => None,
        }
    }
}

/// One guest cell.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestCell {
    /// vCPUs that float over the host's shared CPUs.
    pub cpuset: CpuSet,
    /// vCPUs pinned one to one to dedicated host CPUs.
    pub pcpuset: CpuSet,
    pub memory_mib: u64,
    pub page_size: Option<PageSize>,
    pub cpu_policy: Option<CpuPolicy>,
    pub thread_policy: Option<ThreadPolicy>,
}

impl GuestCell {
    /// Every vCPU of the cell.
    pub fn vcpus(&self) -> CpuSet {
        &self.cpuset | &self.pcpuset
    }
}

/// A guest's cells and its emulator threads' policy.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestTopology {
    pub cells: Vec<GuestCell>,
    pub emulator_threads: Option<EmulatorThreadsPolicy>,
}

impl GuestTopology {
    pub fn emulator_threads_isolated(&self) -> bool {
        self.emulator_threads == Some(EmulatorThreadsPolicy::Isolate)
    }
}

//! The guest topology a flavor and an image ask for, built as Nova's `numa_get_constraints`
//! builds it, with the same checks in the same order, so a flavor and image pair Nova would
//! refuse when a server is created is refused here with the same reason.
//!
//! A guest has a NUMA topology when it asks for cells (`hw:numa_nodes`), pinned CPUs
//! (`hw:cpu_policy` dedicated or mixed, or `resources:PCPU`), a page size
//! (`hw:mem_page_size`) or persistent memory (`hw:pmem`); otherwise it has none and any host
//! whose Placement inventory fits takes it.

use std::collections::BTreeMap;

use super::cpu_set::{CpuSet, CpuSetError, parse_cpu_set};
use super::guest::{CpuPolicy, EmulatorThreadsPolicy, GuestCell, GuestTopology, ThreadPolicy};
use super::page_size::{PageSize, PageSizeError, parse_page_size};
use crate::text::{parse_bool, parse_int, py_trim};

/// The most cells a guest may list (`hw:numa_cpus.N` for N below this).
pub const MAX_GUEST_CELLS: u32 = 128;

/// What a guest's topology is built from.
#[derive(Debug, Clone, Copy)]
pub struct GuestSource<'a> {
    pub vcpus: u32,
    pub memory_mib: u64,
    pub extra_specs: &'a BTreeMap<String, String>,
    /// The image's properties, as Glance keeps them (strings).
    pub image: &'a BTreeMap<String, String>,
}

/// Why a flavor and image cannot make a guest. Each names Nova's exception for the same
/// case ([`RequestError::nova_name`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("{source_name} {key} is {value:?}; accepted: shared, dedicated, mixed")]
    CpuPolicyUnknown {
        source_name: &'static str,
        key: &'static str,
        value: String,
    },
    #[error("{source_name} {key} is {value:?}; accepted: prefer, isolate, require")]
    ThreadPolicyUnknown {
        source_name: &'static str,
        key: &'static str,
        value: String,
    },
    #[error("hw:emulator_threads_policy is {0:?}; accepted: share, isolate")]
    EmulatorThreadsPolicyUnknown(String),
    #[error(
        "the image's hw_cpu_policy {image} asks for more pinning than the flavor's hw:cpu_policy {flavor} allows"
    )]
    ImageCpuPolicyForbidden { flavor: CpuPolicy, image: String },
    #[error(
        "the image's hw_cpu_thread_policy {image:?} differs from the flavor's hw:cpu_thread_policy {flavor}, which only prefer lets an image change"
    )]
    ImageThreadPolicyForbidden { flavor: ThreadPolicy, image: String },
    #[error("{key} {value:?}: {reason}")]
    CpuMask {
        key: &'static str,
        value: String,
        reason: CpuSetError,
    },
    #[error("{0}")]
    RealtimeMask(String),
    #[error("{0}")]
    DedicatedMask(String),
    #[error("{0}")]
    Conflict(String),
    #[error(
        "hw:cpu_thread_policy (or hw_cpu_thread_policy) needs hw:cpu_policy=dedicated or mixed"
    )]
    ThreadPolicyWithoutPinning,
    #[error("hw:emulator_threads_policy=isolate needs hw:cpu_policy=dedicated or mixed")]
    EmulatorIsolateWithoutPinning,
    #[error("hw:cpu_dedicated_mask needs hw:cpu_policy=mixed")]
    DedicatedMaskWithoutMixed,
    #[error("hw:cpu_realtime needs hw:cpu_policy=dedicated or mixed")]
    RealtimeWithoutPinning,
    #[error(
        "hw:cpu_policy=mixed needs exactly one of hw:cpu_dedicated_mask and hw:cpu_realtime_mask (with hw:cpu_realtime)"
    )]
    MixedNeedsOneMask,
    #[error("{key} is set on both the flavor and the image; only one may say it")]
    ImageNumaForbidden { key: &'static str },
    #[error(
        "hw:numa_nodes (or hw_numa_nodes) is {0:?}; accepted: a whole number of 1 or more, written without leading zeros or a sign"
    )]
    NodesNumber(String),
    #[error("{0}")]
    PageSize(PageSizeError),
    #[error(
        "the image's hw_mem_page_size {image:?} is not allowed: the flavor's hw:mem_page_size is {flavor}, and only large or any lets an image choose"
    )]
    PageSizeForbidden { image: String, flavor: String },
    #[error("hw:locked_memory (or hw_locked_memory) needs a page size: set hw:mem_page_size")]
    LockedMemoryWithoutPageSize,
    #[error("the flavor's hw:locked_memory and the image's hw_locked_memory disagree")]
    LockedMemoryConflict,
    #[error(
        "{vcpus} vCPUs and {memory_mib} MiB cannot be split evenly over {nodes} cells; give hw:numa_cpus.N and hw:numa_mem.N for each cell"
    )]
    Asymmetric {
        nodes: u32,
        vcpus: u32,
        memory_mib: u64,
    },
    #[error(
        "hw:numa_cpus.N and hw:numa_mem.N must both be given, for every cell 0 to hw:numa_nodes - 1 ({nodes} cells)"
    )]
    Incomplete { nodes: u32 },
    #[error("hw:numa_cpus names vCPU {cpu}; the guest's vCPUs are 0 to {max}")]
    CpuOutOfRange { cpu: u32, max: i64 },
    #[error("hw:numa_cpus names vCPU {0} in two cells")]
    CpuInTwoCells(u32),
    #[error("hw:numa_cpus leaves vCPUs {0} in no cell")]
    CpusUnassigned(String),
    #[error("hw:numa_mem.N adds up to {total} MiB; the flavor has {memory_mib} MiB")]
    MemoryMismatch { total: u64, memory_mib: u64 },
    #[error("{key} is {value:?}, not a whole number of MiB")]
    CellMemory { key: String, value: String },
}

impl RequestError {
    /// Whether the flavor's own extra specs cause this, so that no image's properties can
    /// make the flavor boot (an image may complete a flavor's CPU policy, realtime mask or
    /// page size, never its dedicated mask, page size text, NUMA node count or cells).
    pub fn no_image_helps(&self) -> bool {
        self.flavor_key().is_some()
    }

    /// The flavor's extra spec that causes an error no image helps, `None` for an error an
    /// image may mend; for the cells' errors `hw:numa_nodes`, which the `hw:numa_cpus.N` and
    /// `hw:numa_mem.N` divide.
    pub fn flavor_key(&self) -> Option<&'static str> {
        use RequestError as E;
        match self {
            E::CpuMask { key, .. } => Some(key),
            E::DedicatedMask(_) => Some("hw:cpu_dedicated_mask"),
            E::PageSize(_) => Some("hw:mem_page_size"),
            E::NodesNumber(_)
            | E::Asymmetric { .. }
            | E::Incomplete { .. }
            | E::CpuOutOfRange { .. }
            | E::CpuInTwoCells(_)
            | E::CpusUnassigned(_)
            | E::MemoryMismatch { .. }
            | E::CellMemory { .. } => Some("hw:numa_nodes"),
            _ => None,
        }
    }

    /// The name of the exception Nova raises for the same case.
    pub fn nova_name(&self) -> &'static str {
        use RequestError as E;
        match self {
            E::CpuPolicyUnknown { .. } => "InvalidCPUAllocationPolicy",
            E::ThreadPolicyUnknown { .. } => "InvalidCPUThreadAllocationPolicy",
            E::EmulatorThreadsPolicyUnknown(_) => "InvalidEmulatorThreadsPolicy",
            E::ImageCpuPolicyForbidden { .. } => "ImageCPUPinningForbidden",
            E::ImageThreadPolicyForbidden { .. } => "ImageCPUThreadPolicyForbidden",
            E::CpuMask { .. } => "Invalid",
            E::RealtimeMask(_) => "RealtimeMaskNotFoundOrInvalid",
            E::DedicatedMask(_) => "InvalidMixedInstanceDedicatedMask",
            E::Conflict(_) => "InvalidRequest",
            E::ThreadPolicyWithoutPinning => "CPUThreadPolicyConfigurationInvalid",
            E::EmulatorIsolateWithoutPinning => "BadRequirementEmulatorThreadsPolicy",
            E::DedicatedMaskWithoutMixed => "RequiredMixedInstancePolicy",
            E::RealtimeWithoutPinning => "RealtimeConfigurationInvalid",
            E::MixedNeedsOneMask => "RequiredMixedOrRealtimeCPUMask",
            E::ImageNumaForbidden { .. } => "ImageNUMATopologyForbidden",
            E::NodesNumber(_) => "InvalidNUMANodesNumber",
            E::PageSize(_) => "MemoryPageSizeInvalid",
            E::PageSizeForbidden { .. } => "MemoryPageSizeForbidden",
            E::LockedMemoryWithoutPageSize => "LockMemoryForbidden",
            E::LockedMemoryConflict => "FlavorImageLockedMemoryConflict",
            E::Asymmetric { .. } => "ImageNUMATopologyAsymmetric",
            E::Incomplete { .. } => "ImageNUMATopologyIncomplete",
            E::CpuOutOfRange { .. } => "ImageNUMATopologyCPUOutOfRange",
            E::CpuInTwoCells(_) => "ImageNUMATopologyCPUDuplicates",
            E::CpusUnassigned(_) => "ImageNUMATopologyCPUsUnassigned",
            E::MemoryMismatch { .. } => "ImageNUMATopologyMemoryOutOfRange",
            E::CellMemory { .. } => "ValueError",
        }
    }
}

/// The guest's NUMA topology, `None` when it asks for none.
pub fn guest_topology(source: GuestSource<'_>) -> Result<Option<GuestTopology>, RequestError> {
    let spec = |key: &str| source.extra_specs.get(key).map(String::as_str);
    let image = |key: &str| source.image.get(key).map(String::as_str);

    let mut cpu_policy = cpu_policy(spec("hw:cpu_policy"), image("hw_cpu_policy"))?;
    let mut thread_policy =
        thread_policy(spec("hw:cpu_thread_policy"), image("hw_cpu_thread_policy"))?;
    let realtime_cpus = realtime_cpus(&source)?;
    let dedicated_mask = dedicated_mask(&source)?;
    let emulator = emulator_threads(spec("hw:emulator_threads_policy"))?;

    let (vcpu_amount, pcpu_amount) = cpu_resources(source.extra_specs);
    if cpu_policy.is_some() && (vcpu_amount != 0 || pcpu_amount != 0) {
        return Err(RequestError::Conflict(
            "resources:VCPU and resources:PCPU cannot be combined with hw:cpu_policy (or hw_cpu_policy): use one or the other".into(),
        ));
    }
    if vcpu_amount != 0 && pcpu_amount != 0 {
        return Err(RequestError::Conflict(
            "resources:VCPU and resources:PCPU cannot both be given: use one or the other".into(),
        ));
    }
    if pcpu_amount != 0 {
        let vcpus = i128::from(source.vcpus);
        if emulator == Some(EmulatorThreadsPolicy::Isolate) && vcpus + 1 != pcpu_amount {
            return Err(RequestError::Conflict(format!(
                "hw:emulator_threads_policy=isolate with resources:PCPU needs exactly the flavor's vCPUs plus one PCPU ({}); {pcpu_amount} asked",
                vcpus + 1
            )));
        }
        if emulator != Some(EmulatorThreadsPolicy::Isolate) && vcpus != pcpu_amount {
            return Err(RequestError::Conflict(format!(
                "resources:PCPU must be the flavor's vCPUs ({vcpus}); {pcpu_amount} asked"
            )));
        }
        cpu_policy = Some(CpuPolicy::Dedicated);
    }
    if vcpu_amount != 0 {
        cpu_policy = Some(CpuPolicy::Shared);
    }

    let hyperthreading = hyperthreading_trait(&source).filter(|v| !v.is_empty());
    if thread_policy.is_some() && hyperthreading.is_some() {
        return Err(RequestError::Conflict(
            "trait:HW_CPU_HYPERTHREADING cannot be combined with hw:cpu_thread_policy (or hw_cpu_thread_policy): use one or the other".into(),
        ));
    }
    match hyperthreading.as_deref() {
        Some("forbidden") => thread_policy = Some(ThreadPolicy::Isolate),
        Some("required") => thread_policy = Some(ThreadPolicy::Require),
        _ => {}
    }

    let mut dedicated = dedicated_mask;
    match cpu_policy {
        None | Some(CpuPolicy::Shared) => {
            if thread_policy.is_some() {
                return Err(RequestError::ThreadPolicyWithoutPinning);
            }
            if emulator == Some(EmulatorThreadsPolicy::Isolate) {
                return Err(RequestError::EmulatorIsolateWithoutPinning);
            }
            if dedicated.is_some() {
                return Err(RequestError::DedicatedMaskWithoutMixed);
            }
            if realtime_cpus.is_some() {
                return Err(RequestError::RealtimeWithoutPinning);
            }
        }
        Some(CpuPolicy::Dedicated) => {
            if dedicated.is_some() {
                return Err(RequestError::DedicatedMaskWithoutMixed);
            }
        }
        Some(CpuPolicy::Mixed) => {
            if realtime_cpus.is_some() == dedicated.is_some() {
                return Err(RequestError::MixedNeedsOneMask);
            }
            dedicated = dedicated.or(realtime_cpus);
        }
    }

    let nodes = node_count(spec("hw:numa_nodes"), image("hw_numa_nodes"))?;
    let page_size = page_size(spec("hw:mem_page_size"), image("hw_mem_page_size"))?;
    let pmem = spec("hw:pmem").is_some_and(|v| v.split(',').any(|l| !py_trim(l).is_empty()));
    locked_memory(&source)?;

    let all: CpuSet = (0..source.vcpus).collect();
    let pinned: CpuSet = if cpu_policy == Some(CpuPolicy::Dedicated) {
        all.clone()
    } else {
        dedicated.unwrap_or_default()
    };

    if nodes.is_none() && page_size.is_none() && !pmem && !CpuPolicy::pins(cpu_policy) {
        return Ok(None);
    }
    let floating: CpuSet = &all - &pinned;
    let nodes = nodes.unwrap_or(1);
    let cpu_lists = cell_cpus(&source)?;
    let mem_lists = cell_memory(&source)?;
    let mut cells = match (cpu_lists, mem_lists) {
        (None, None) => cells_evenly(nodes, &source, &floating, &pinned)?,
        (Some(cpus), Some(mems)) => {
            if cpus.len() != nodes as usize || mems.len() != nodes as usize {
                return Err(RequestError::Incomplete { nodes });
            }
            cells_as_given(&source, &floating, &pinned, &cpus, &mems)?
        }
        _ => return Err(RequestError::Incomplete { nodes }),
    };
    for cell in &mut cells {
        cell.page_size = page_size.clone();
        cell.cpu_policy = cpu_policy;
        cell.thread_policy = thread_policy;
    }
    Ok(Some(GuestTopology {
        cells,
        emulator_threads: emulator,
    }))
}

fn cpu_policy(
    flavor: Option<&str>,
    image: Option<&str>,
) -> Result<Option<CpuPolicy>, RequestError> {
    // An empty value counts as none, as Python reads an empty string as false.
    let flavor = flavor.filter(|v| !v.is_empty());
    let image = image.filter(|v| !v.is_empty());
    let read = |source_name, key, value: Option<&str>| match value {
        None => Ok(None),
        Some(v) => CpuPolicy::parse(v)
            .map(Some)
            .ok_or(RequestError::CpuPolicyUnknown {
                source_name,
                key,
                value: v.to_string(),
            }),
    };
    let flavor_policy = read("the flavor's", "hw:cpu_policy", flavor)?;
    let image_policy = read("the image's", "hw_cpu_policy", image)?;
    let forbidden = |flavor: CpuPolicy| RequestError::ImageCpuPolicyForbidden {
        flavor,
        image: image.unwrap_or_default().to_string(),
    };
    Ok(match flavor_policy {
        Some(CpuPolicy::Dedicated) => flavor_policy,
        Some(CpuPolicy::Mixed) => {
            if image_policy == Some(CpuPolicy::Dedicated) {
                return Err(forbidden(CpuPolicy::Mixed));
            }
            flavor_policy
        }
        Some(CpuPolicy::Shared) => {
            if matches!(image_policy, Some(CpuPolicy::Mixed | CpuPolicy::Dedicated)) {
                return Err(forbidden(CpuPolicy::Shared));
            }
            flavor_policy
        }
        None => image_policy,
    })
}

fn thread_policy(
    flavor: Option<&str>,
    image: Option<&str>,
) -> Result<Option<ThreadPolicy>, RequestError> {
    let flavor = flavor.filter(|v| !v.is_empty());
    let image = image.filter(|v| !v.is_empty());
    let read = |source_name, key, value: Option<&str>| match value {
        None => Ok(None),
        Some(v) => ThreadPolicy::parse(v)
            .map(Some)
            .ok_or(RequestError::ThreadPolicyUnknown {
                source_name,
                key,
                value: v.to_string(),
            }),
    };
    let flavor_policy = read("the flavor's", "hw:cpu_thread_policy", flavor)?;
    let image_policy = read("the image's", "hw_cpu_thread_policy", image)?;
    match flavor_policy {
        None | Some(ThreadPolicy::Prefer) => Ok(flavor_policy.or(image_policy)),
        Some(f) => {
            if image_policy.is_some_and(|i| i != f) {
                return Err(RequestError::ImageThreadPolicyForbidden {
                    flavor: f,
                    image: image.unwrap_or_default().to_string(),
                });
            }
            Ok(Some(f))
        }
    }
}

fn emulator_threads(value: Option<&str>) -> Result<Option<EmulatorThreadsPolicy>, RequestError> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => EmulatorThreadsPolicy::parse(v)
            .map(Some)
            .ok_or_else(|| RequestError::EmulatorThreadsPolicyUnknown(v.to_string())),
    }
}

/// A mask over the guest's vCPUs: `^`-led masks leave CPUs out of all of them.
fn vcpu_mask(key: &'static str, mask: &str, vcpus: u32) -> Result<CpuSet, RequestError> {
    let text = if py_trim(mask).starts_with('^') {
        format!("0-{},{mask}", i64::from(vcpus) - 1)
    } else {
        mask.to_string()
    };
    parse_cpu_set(&text).map_err(|reason| RequestError::CpuMask {
        key,
        value: mask.to_string(),
        reason,
    })
}

fn realtime_cpus(source: &GuestSource<'_>) -> Result<Option<CpuSet>, RequestError> {
    let realtime = source
        .extra_specs
        .get("hw:cpu_realtime")
        .and_then(|v| parse_bool(v))
        .unwrap_or(false);
    if !realtime {
        return Ok(None);
    }
    let flavor_mask = source
        .extra_specs
        .get("hw:cpu_realtime_mask")
        .filter(|m| !m.is_empty());
    let image_mask = source
        .image
        .get("hw_cpu_realtime_mask")
        .filter(|m| !m.is_empty());
    // The image's mask is the more specific one, and wins.
    let all: CpuSet = (0..source.vcpus).collect();
    let realtime_cpus = match image_mask.or(flavor_mask) {
        Some(mask) => vcpu_mask("hw:cpu_realtime_mask", mask, source.vcpus)?,
        None => all.clone(),
    };
    if realtime_cpus.is_empty() {
        return Err(RequestError::RealtimeMask(
            "hw:cpu_realtime_mask leaves no realtime vCPU".into(),
        ));
    }
    let emulator = emulator_threads(
        source
            .extra_specs
            .get("hw:emulator_threads_policy")
            .map(String::as_str),
    )?;
    if realtime_cpus == all && emulator.is_none() {
        return Err(RequestError::RealtimeMask(
            "hw:cpu_realtime_mask makes every vCPU realtime: leave at least one out (e.g. ^0) for the emulator threads, or set hw:emulator_threads_policy".into(),
        ));
    }
    if !realtime_cpus.is_subset(&all) {
        return Err(RequestError::RealtimeMask(format!(
            "hw:cpu_realtime_mask names vCPUs the flavor does not have; its vCPUs are 0 to {}",
            i64::from(source.vcpus) - 1
        )));
    }
    Ok(Some(realtime_cpus))
}

fn dedicated_mask(source: &GuestSource<'_>) -> Result<Option<CpuSet>, RequestError> {
    let Some(mask) = source
        .extra_specs
        .get("hw:cpu_dedicated_mask")
        .filter(|m| !m.is_empty())
    else {
        return Ok(None);
    };
    let pinned = vcpu_mask("hw:cpu_dedicated_mask", mask, source.vcpus)?;
    let all: CpuSet = (0..source.vcpus).collect();
    let floating = &all - &pinned;
    if pinned.is_empty() || floating.is_empty() {
        return Err(RequestError::DedicatedMask(
            "hw:cpu_dedicated_mask must pin some vCPUs and leave some unpinned".into(),
        ));
    }
    if !pinned.is_subset(&all) {
        return Err(RequestError::DedicatedMask(format!(
            "hw:cpu_dedicated_mask names vCPUs the flavor does not have; its vCPUs are 0 to {}",
            i64::from(source.vcpus) - 1
        )));
    }
    Ok(Some(pinned))
}

/// The VCPU and PCPU amounts the flavor's `resources*:` extra specs ask for directly. The
/// keys are matched from their start, as Nova matches them; amounts that are not numbers
/// are left to the extra specs' own validation.
fn cpu_resources(extra_specs: &BTreeMap<String, String>) -> (i128, i128) {
    let mut vcpu = 0;
    let mut pcpu = 0;
    for (key, value) in extra_specs {
        let Some(rest) = key.strip_prefix("resources") else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (group, class) = rest.split_at(digits);
        if group.starts_with('0') {
            continue;
        }
        let amount = parse_int(value).map_or(0, |n| n.0);
        if class.starts_with(":VCPU") {
            vcpu += amount;
        }
        if class.starts_with(":PCPU") {
            pcpu += amount;
        }
    }
    (vcpu, pcpu)
}

/// `trait*:HW_CPU_HYPERTHREADING`'s value, or `required` when the image requires the trait.
fn hyperthreading_trait(source: &GuestSource<'_>) -> Option<String> {
    for (key, value) in source.extra_specs {
        let Some(rest) = key.strip_prefix("trait") else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (group, name) = rest.split_at(digits);
        if !group.starts_with('0') && name.starts_with(":HW_CPU_HYPERTHREADING") {
            return Some(value.clone());
        }
    }
    (source
        .image
        .get("trait:HW_CPU_HYPERTHREADING")
        .map(String::as_str)
        == Some("required"))
    .then(|| "required".to_string())
}

fn node_count(flavor: Option<&str>, image: Option<&str>) -> Result<Option<u32>, RequestError> {
    // The image's value is an integer once Glance's properties are read; `0` counts as unset
    // on that side, as Python reads 0 as false.
    let image_nodes = match image {
        None => None,
        Some(v) => match parse_int(v) {
            Some(n) if n.0 == 0 => Some(None),
            Some(n) => Some(Some(n.0)),
            None => return Err(RequestError::NodesNumber(v.to_string())),
        },
    };
    let flavor = flavor.filter(|v| !v.is_empty());
    if flavor.is_some() && matches!(image_nodes, Some(Some(_))) {
        return Err(RequestError::ImageNumaForbidden {
            key: "hw_numa_nodes",
        });
    }
    match (flavor, image_nodes) {
        (Some(text), _) => {
            // Nova takes the value only as Python would write the integer back.
            let n = parse_int(text).map(|n| n.0);
            match n {
                Some(n) if n >= 1 && n.to_string() == text => u32::try_from(n)
                    .map(Some)
                    .map_err(|_| RequestError::NodesNumber(text.to_string())),
                _ => Err(RequestError::NodesNumber(text.to_string())),
            }
        }
        (None, Some(Some(n))) if n >= 1 => u32::try_from(n)
            .map(Some)
            .map_err(|_| RequestError::NodesNumber(n.to_string())),
        (None, Some(Some(n))) => Err(RequestError::NodesNumber(n.to_string())),
        (None, Some(None)) => Err(RequestError::NodesNumber("0".to_string())),
        (None, None) => Ok(None),
    }
}

fn page_size(flavor: Option<&str>, image: Option<&str>) -> Result<Option<PageSize>, RequestError> {
    let flavor = flavor.filter(|v| !v.is_empty());
    let image = image.filter(|v| !v.is_empty());
    let Some(flavor_text) = flavor else {
        if let Some(image_text) = image {
            return Err(RequestError::PageSizeForbidden {
                image: image_text.to_string(),
                flavor: "not set".to_string(),
            });
        }
        return Ok(None);
    };
    let chosen = parse_page_size(flavor_text).map_err(RequestError::PageSize)?;
    match image {
        Some(image_text) if matches!(chosen, Some(PageSize::Any | PageSize::Large)) => {
            parse_page_size(image_text).map_err(RequestError::PageSize)
        }
        Some(image_text) => Err(RequestError::PageSizeForbidden {
            image: image_text.to_string(),
            flavor: flavor_text.to_string(),
        }),
        None => Ok(chosen),
    }
}

fn locked_memory(source: &GuestSource<'_>) -> Result<(), RequestError> {
    let page_size_given = source
        .extra_specs
        .get("hw:mem_page_size")
        .is_some_and(|v| !v.is_empty())
        || source
            .image
            .get("hw_mem_page_size")
            .is_some_and(|v| !v.is_empty());
    let flavor = source
        .extra_specs
        .get("hw:locked_memory")
        .map(|v| parse_bool(v).unwrap_or(false));
    let image = source
        .image
        .get("hw_locked_memory")
        .and_then(|v| parse_bool(v));
    let locked = match flavor {
        Some(f) => {
            if image.is_some_and(|i| i != f) {
                return Err(RequestError::LockedMemoryConflict);
            }
            f
        }
        None => image.unwrap_or(false),
    };
    if locked && !page_size_given {
        return Err(RequestError::LockedMemoryWithoutPageSize);
    }
    Ok(())
}

/// `hw:numa_cpus.N` (or the image's `hw_numa_cpus.N`) for N = 0, 1, … until one is missing.
fn cell_cpus(source: &GuestSource<'_>) -> Result<Option<Vec<CpuSet>>, RequestError> {
    let flavor = numbered(source.extra_specs, "hw:numa_cpus.");
    let image = numbered(source.image, "hw_numa_cpus.");
    let (list, key) = match (flavor, image) {
        (Some(_), Some(_)) => {
            return Err(RequestError::ImageNumaForbidden {
                key: "hw_numa_cpus",
            });
        }
        (Some(f), None) => (f, "hw:numa_cpus"),
        (None, Some(i)) => (i, "hw_numa_cpus"),
        (None, None) => return Ok(None),
    };
    list.into_iter()
        .map(|text| {
            parse_cpu_set(text).map_err(|reason| RequestError::CpuMask {
                key,
                value: text.to_string(),
                reason,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn cell_memory(source: &GuestSource<'_>) -> Result<Option<Vec<u64>>, RequestError> {
    let flavor = numbered(source.extra_specs, "hw:numa_mem.");
    let image = numbered(source.image, "hw_numa_mem.");
    let (list, key) = match (flavor, image) {
        (Some(_), Some(_)) => return Err(RequestError::ImageNumaForbidden { key: "hw_numa_mem" }),
        (Some(f), None) => (f, "hw:numa_mem"),
        (None, Some(i)) => (i, "hw_numa_mem"),
        (None, None) => return Ok(None),
    };
    list.into_iter()
        .enumerate()
        .map(|(n, text)| {
            parse_int(text)
                .and_then(|v| u64::try_from(v.0).ok())
                .ok_or_else(|| RequestError::CellMemory {
                    key: format!("{key}.{n}"),
                    value: text.to_string(),
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn numbered<'a>(map: &'a BTreeMap<String, String>, prefix: &str) -> Option<Vec<&'a str>> {
    let mut list = Vec::new();
    for n in 0..MAX_GUEST_CELLS {
        match map.get(&format!("{prefix}{n}")) {
            Some(v) => list.push(v.as_str()),
            None => break,
        }
    }
    (!list.is_empty()).then_some(list)
}

fn empty_cell(cpus: &CpuSet, floating: &CpuSet, pinned: &CpuSet, memory_mib: u64) -> GuestCell {
    GuestCell {
        cpuset: cpus & floating,
        pcpuset: cpus & pinned,
        memory_mib,
        page_size: None,
        cpu_policy: None,
        thread_policy: None,
    }
}

fn cells_evenly(
    nodes: u32,
    source: &GuestSource<'_>,
    floating: &CpuSet,
    pinned: &CpuSet,
) -> Result<Vec<GuestCell>, RequestError> {
    if source.vcpus % nodes != 0 || source.memory_mib % u64::from(nodes) != 0 {
        return Err(RequestError::Asymmetric {
            nodes,
            vcpus: source.vcpus,
            memory_mib: source.memory_mib,
        });
    }
    let per_cell = source.vcpus / nodes;
    let memory = source.memory_mib / u64::from(nodes);
    Ok((0..nodes)
        .map(|node| {
            let cpus: CpuSet = (node * per_cell..(node + 1) * per_cell).collect();
            empty_cell(&cpus, floating, pinned, memory)
        })
        .collect())
}

fn cells_as_given(
    source: &GuestSource<'_>,
    floating: &CpuSet,
    pinned: &CpuSet,
    cpus: &[CpuSet],
    mems: &[u64],
) -> Result<Vec<GuestCell>, RequestError> {
    let mut left: CpuSet = (0..source.vcpus).collect();
    let mut total = 0u64;
    let mut cells = Vec::new();
    for (cell_cpus, &memory) in cpus.iter().zip(mems) {
        for &cpu in cell_cpus {
            if i64::from(cpu) > i64::from(source.vcpus) - 1 {
                return Err(RequestError::CpuOutOfRange {
                    cpu,
                    max: i64::from(source.vcpus) - 1,
                });
            }
            if !left.remove(&cpu) {
                return Err(RequestError::CpuInTwoCells(cpu));
            }
        }
        cells.push(empty_cell(cell_cpus, floating, pinned, memory));
        total = total.saturating_add(memory);
    }
    if !left.is_empty() {
        return Err(RequestError::CpusUnassigned(
            super::cpu_set::format_cpu_set(&left),
        ));
    }
    if total != source.memory_mib {
        return Err(RequestError::MemoryMismatch {
            total,
            memory_mib: source.memory_mib,
        });
    }
    Ok(cells)
}

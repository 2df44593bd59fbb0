//! Glance image properties that Nova reads (its `ImageMetaProps`), with their types.
//!
//! Glance accepts any property, so an unknown one is allowed; a near miss of a known one
//! draws a warning. A known property with a bad value rejects the image. Nova's older
//! names (`architecture`, `hypervisor_type`, …) are accepted with a warning naming the
//! current one. `trait:NAME` takes only `required` and a standard or CUSTOM_ trait.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Serialize;

use super::registry::CPU_SET;
use super::value::{ValueType, nearest_member, parse_bool, parse_int, py_trim};
use crate::placement::{check_trait, closest};

/// What an image property accepts.
#[derive(Debug, Clone)]
pub enum ImageValue {
    /// Any string.
    String,
    /// A whole number (any sign).
    Int,
    /// A boolean in Nova's spellings.
    Bool,
    /// One of the members; `fold` lower-cases first, `aliases` map older spellings.
    Enum {
        members: &'static [&'static str],
        fold: bool,
        aliases: &'static [(&'static str, &'static str)],
    },
    /// A UUID.
    Uuid,
    /// Comma-separated version conditions such as `>=2.6, <3`.
    VersionPredicate,
    /// A CPU set (`0-3,^2`) as Nova's CPU set parser reads it.
    CpuSet,
    /// A JSON list of objects with string or null values.
    JsonListOfDicts,
}

/// One known image property.
#[derive(Debug, Clone)]
pub struct ImageProperty {
    /// The name, or a template with `{num}` for the per-NUMA-node properties.
    pub name: &'static str,
    pub description: &'static str,
    pub value: ImageValue,
    /// For an older name, the current property it sets.
    pub replaced_by: Option<&'static str>,
}

const DISK_BUS: &[&str] = &[
    "fdc", "ide", "sata", "scsi", "usb", "virtio", "xen", "lxc", "uml",
];
const ARCH: &[&str] = &[
    "alpha",
    "armv6",
    "armv7l",
    "armv7b",
    "aarch64",
    "cris",
    "i686",
    "ia64",
    "lm32",
    "m68k",
    "microblaze",
    "microblazeel",
    "mips",
    "mipsel",
    "mips64",
    "mips64el",
    "openrisc",
    "parisc",
    "parisc64",
    "ppc",
    "ppcle",
    "ppc64",
    "ppc64le",
    "ppcemb",
    "s390",
    "s390x",
    "sh4",
    "sh4eb",
    "sparc",
    "sparc64",
    "unicore32",
    "x86_64",
    "xtensa",
    "xtensaeb",
];
const ARCH_ALIASES: &[(&str, &str)] = &[
    ("i386", "i686"),
    ("i486", "i686"),
    ("i586", "i686"),
    ("x86_32", "i686"),
    ("x86_32p", "i686"),
    ("amd64", "x86_64"),
];
const HV_TYPE: &[&str] = &[
    "baremetal",
    "bhyve",
    "docker",
    "fake",
    "hyperv",
    "ironic",
    "kqemu",
    "kvm",
    "lxc",
    "lxd",
    "openvz",
    "parallels",
    "phyp",
    "qemu",
    "test",
    "uml",
    "vbox",
    "vz",
    "vmware",
    "xen",
    "zvm",
    "prsm",
];
const SCSI: &[&str] = &[
    "buslogic",
    "ibmvscsi",
    "lsilogic",
    "lsisas1068",
    "lsisas1078",
    "virtio-scsi",
    "vmpvscsi",
];
const SCSI_ALIASES: &[(&str, &str)] = &[("lsilogicsas", "lsisas1068"), ("paravirtual", "vmpvscsi")];
const ADAPTER: &[&str] = &[
    "ide",
    "buslogic",
    "ibmvscsi",
    "lsilogic",
    "lsisas1068",
    "lsisas1078",
    "virtio-scsi",
    "vmpvscsi",
];
const VIF: &[&str] = &[
    "virtio",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "e1000",
    "e1000e",
    "netfront",
    "spapr-vlan",
    "lan9118",
    "sriov",
    "vmxnet",
    "vmxnet3",
    "igb",
];
const VIF_ALIASES: &[(&str, &str)] = &[
    ("virtuale1000", "e1000"),
    ("virtuale1000e", "e1000e"),
    ("virtualpcnet32", "pcnet"),
    ("virtualsriovethernetcard", "sriov"),
    ("virtualvmxnet", "vmxnet"),
    ("virtualvmxnet3", "vmxnet3"),
];
const VM_MODE: &[&str] = &["hvm", "xen", "uml", "exe"];
const VM_MODE_ALIASES: &[(&str, &str)] = &[("pv", "xen"), ("hv", "hvm"), ("baremetal", "hvm")];

const fn exact(members: &'static [&'static str]) -> ImageValue {
    ImageValue::Enum {
        members,
        fold: false,
        aliases: &[],
    }
}

const fn folded(
    members: &'static [&'static str],
    aliases: &'static [(&'static str, &'static str)],
) -> ImageValue {
    ImageValue::Enum {
        members,
        fold: true,
        aliases,
    }
}

const fn p(name: &'static str, value: ImageValue, description: &'static str) -> ImageProperty {
    ImageProperty {
        name,
        description,
        value,
        replaced_by: None,
    }
}

const fn legacy(name: &'static str, value: ImageValue, current: &'static str) -> ImageProperty {
    ImageProperty {
        name,
        description: "An older name Nova still reads; use the current name instead.",
        value,
        replaced_by: Some(current),
    }
}

use ImageValue::{Bool, CpuSet, Int, JsonListOfDicts, String as Str, Uuid, VersionPredicate};

/// Every image property Nova reads, current names first, then the older names.
pub fn image_properties() -> &'static [ImageProperty] {
    static LIST: OnceLock<Vec<ImageProperty>> = OnceLock::new();
    LIST.get_or_init(|| {
        vec![
            p("hw_architecture", folded(ARCH, ARCH_ALIASES), "The CPU architecture the image needs; the scheduler keeps it to hosts of that architecture."),
            p("hw_emulation_architecture", folded(ARCH, ARCH_ALIASES), "A CPU architecture to emulate for the guest, on hosts that can."),
            p("hw_auto_disk_config", Str, "Whether the root partition is grown to fill the root disk (`auto` or `manual`)."),
            p("hw_boot_menu", Bool, "Shows the firmware boot menu when the guest starts (like hw:boot_menu)."),
            p("hw_cdrom_bus", exact(DISK_BUS), "The bus CD-ROM drives attach to."),
            p("hw_cpu_cores", Int, "Cores per socket the image prefers, within the flavor's hw:cpu_max_cores."),
            p("hw_cpu_sockets", Int, "Sockets the image prefers, within the flavor's hw:cpu_max_sockets."),
            p("hw_cpu_max_cores", Int, "The most cores per socket the guest may be given."),
            p("hw_cpu_max_sockets", Int, "The most sockets the guest may be given."),
            p("hw_cpu_max_threads", Int, "The most threads per core the guest may be given."),
            p("hw_cpu_policy", exact(&["dedicated", "shared", "mixed"]), "The CPU allocation policy (like hw:cpu_policy); it must not contradict the flavor's."),
            p("hw_cpu_thread_policy", exact(&["prefer", "isolate", "require"]), "The thread allocation policy for pinned guests (like hw:cpu_thread_policy)."),
            p("hw_cpu_realtime_mask", Str, "The vCPUs left out of real-time priority (like hw:cpu_realtime_mask)."),
            p("hw_cpu_threads", Int, "Threads per core the image prefers, within the flavor's hw:cpu_max_threads."),
            p("hw_device_id", Int, "A device identifier handed to the guest by hypervisors that use one."),
            p("hw_disk_bus", exact(DISK_BUS), "The bus disks attach to."),
            p("hw_disk_type", Str, "The VMware disk type of the image (such as `thin`, `sparse`, `preallocated`)."),
            p("hw_floppy_bus", exact(DISK_BUS), "The bus floppy drives attach to."),
            p("hw_firmware_type", exact(&["uefi", "bios"]), "The firmware the guest boots with."),
            p("hw_firmware_stateless", Bool, "Boots UEFI guests with firmware that keeps no variable store."),
            p("hw_input_bus", exact(&["usb", "virtio"]), "The bus of the guest's pointer and keyboard devices."),
            p("hw_ipxe_boot", Bool, "Boots the guest through iPXE, with drivers that support it."),
            p("hw_locked_memory", Bool, "Locks guest memory in host RAM (like hw:locked_memory)."),
            p("hw_machine_type", Str, "The QEMU machine type of the guest, such as `q35`."),
            p("hw_mem_encryption", Bool, "Encrypts guest memory (like hw:mem_encryption)."),
            p("hw_mem_encryption_model", exact(&["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"]), "The memory encryption technology (like hw:mem_encryption_model)."),
            p("hw_mem_page_size", Str, "The page size for guest memory (like hw:mem_page_size), within what the flavor allows."),
            p("hw_numa_nodes", Int, "How many guest NUMA nodes (like hw:numa_nodes)."),
            p("hw_numa_cpus.{num}", CpuSet, "The guest vCPUs of guest NUMA node {num} (like hw:numa_cpus.{num})."),
            p("hw_numa_mem.{num}", Int, "The guest memory, in MiB, of guest NUMA node {num} (like hw:numa_mem.{num})."),
            p("hw_pci_numa_affinity_policy", exact(&["required", "legacy", "preferred", "socket"]), "The PCI NUMA affinity policy (like hw:pci_numa_affinity_policy)."),
            p("hw_pointer_model", exact(&["usbtablet"]), "The pointer device given to the guest."),
            p("hw_pmu", Bool, "Switches the virtual performance monitoring unit on or off (like hw:pmu)."),
            p("hw_qemu_guest_agent", Bool, "Adds the channel the QEMU guest agent talks over."),
            p("hw_rescue_bus", exact(DISK_BUS), "The bus of the rescue disk when the image rescues a server."),
            p("hw_rescue_device", exact(&["cdrom", "disk", "floppy", "fs", "lun"]), "The kind of device the rescue image is attached as."),
            p("hw_rng_model", exact(&["virtio"]), "The model of random number generator given to the guest."),
            p("hw_time_hpet", Bool, "Gives the guest a High Precision Event Timer."),
            p("hw_serial_port_count", Int, "How many serial ports (like hw:serial_port_count)."),
            p("hw_scsi_model", folded(SCSI, SCSI_ALIASES), "The SCSI controller model."),
            p("hw_video_model", exact(&["cirrus", "qxl", "vga", "vmvga", "xen", "virtio", "gop", "none", "bochs"]), "The video device model."),
            p("hw_video_ram", Int, "Video memory in MiB, within the flavor's hw_video:ram_max_mb."),
            p("hw_vif_model", folded(VIF, VIF_ALIASES), "The model of the guest's network interfaces."),
            p("hw_viommu_model", exact(&["intel", "smmuv3", "virtio", "auto"]), "The virtual IOMMU model (like hw:viommu_model)."),
            p("hw_vm_mode", folded(VM_MODE, VM_MODE_ALIASES), "The virtualisation mode (ABI) the image needs."),
            p("hw_watchdog_action", exact(&["none", "pause", "poweroff", "reset", "disabled"]), "The watchdog action (like hw:watchdog_action)."),
            p("hw_vif_multiqueue_enabled", Bool, "One queue per vCPU on virtio network interfaces (like hw:vif_multiqueue_enabled)."),
            p("hw_tpm_model", exact(&["tpm-tis", "tpm-crb"]), "The virtual TPM model (like hw:tpm_model)."),
            p("hw_tpm_version", exact(&["1.2", "2.0"]), "The virtual TPM version (like hw:tpm_version)."),
            p("hw_ephemeral_encryption", Bool, "Encrypts ephemeral disks (like hw:ephemeral_encryption)."),
            p("hw_ephemeral_encryption_format", exact(&["plain", "luks", "luksv2"]), "The ephemeral disk encryption format (like hw:ephemeral_encryption_format)."),
            p("hw_ephemeral_encryption_secret_uuid", Uuid, "The key manager secret used to encrypt ephemeral disks."),
            p("hw_virtio_packed_ring", Bool, "Allows packed virtqueues (like hw:virtio_packed_ring)."),
            p("hw_maxphysaddr_mode", exact(&["passthrough", "emulate"]), "How the guest's physical address width is set: the host's, or an emulated one."),
            p("hw_maxphysaddr_bits", Int, "The physical address width, in bits, when it is emulated."),
            p("hw_sound_model", exact(&["sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio"]), "The sound card model (like hw:sound_model)."),
            p("hw_usb_model", exact(&["none", "nec-xhci", "qemu-xhci"]), "The USB controller model (like hw:usb_model)."),
            p("hw_redirected_usb_ports", Int, "How many USB redirection ports (like hw:redirected_usb_ports)."),
            p("img_bittorrent", Bool, "Downloads the image over BitTorrent, with drivers that can."),
            p("img_bdm_v2", Bool, "Whether img_block_device_mapping uses the second block device mapping format."),
            p("img_block_device_mapping", JsonListOfDicts, "Block device mappings stored with the image, as a JSON list."),
            p("img_cache_in_nova", Bool, "Keeps a copy of the image in the compute host's cache."),
            p("img_compression_level", Int, "The compression level used when the image is uploaded from a server."),
            p("img_hv_requested_version", VersionPredicate, "The hypervisor versions the image runs on, such as `>=6000, <7000`."),
            p("img_hv_type", folded(HV_TYPE, &[("xapi", "xen")]), "The hypervisor type the image needs."),
            p("img_config_drive", exact(&["optional", "mandatory"]), "Whether servers booted from the image must have a config drive."),
            p("img_linked_clone", Bool, "Uses linked clones of the image on VMware hosts."),
            p("img_mappings", JsonListOfDicts, "Device name mappings stored with the image, as a JSON list."),
            p("img_owner_id", Str, "The project that owns the image."),
            p("img_root_device_name", Str, "The device name of the root disk, such as /dev/vda."),
            p("img_use_agent", Bool, "Whether the guest runs an agent the hypervisor talks to."),
            p("img_version", Int, "A version number of the image for VMware hosts."),
            p("img_signature", Str, "The image's signature, for signature verification."),
            p("img_signature_hash_method", exact(&["SHA-224", "SHA-256", "SHA-384", "SHA-512"]), "The hash the signature was made over."),
            p("img_signature_certificate_uuid", Uuid, "The key manager certificate that verifies the signature."),
            p("img_signature_key_type", exact(&["DSA", "ECC_SECP384R1", "ECC_SECP521R1", "ECC_SECT409K1", "ECC_SECT409R1", "ECC_SECT571K1", "ECC_SECT571R1", "RSA-PSS"]), "The kind of key that made the signature."),
            p("img_hide_hypervisor_id", Bool, "Hides the hypervisor signature from the guest (like hw:hide_hypervisor_id)."),
            p("os_admin_user", Str, "The guest's administrator account, whose password Nova may set."),
            p("os_command_line", Str, "The kernel command line for images booted with a separate kernel."),
            p("os_distro", Str, "The guest operating system distribution, lower case, such as `ubuntu` or `windows`."),
            p("os_require_quiesce", Bool, "Snapshots must quiesce the guest's file systems first, or fail."),
            p("os_secure_boot", exact(&["required", "disabled", "optional"]), "UEFI Secure Boot: `required`, `disabled`, or `optional` (on where the host can)."),
            p("os_skip_agent_inject_files_at_boot", Bool, "Skips injecting files through the guest agent at boot."),
            p("os_skip_agent_inject_ssh", Bool, "Skips injecting SSH keys through the guest agent."),
            p("os_type", folded(&["linux", "windows"], &[]), "The guest operating system family, which sets defaults such as the clock."),
            legacy("architecture", folded(ARCH, ARCH_ALIASES), "hw_architecture"),
            legacy("owner_id", Str, "img_owner_id"),
            legacy("vmware_disktype", Str, "hw_disk_type"),
            legacy("vmware_image_version", Int, "img_version"),
            legacy("vmware_ostype", Str, "os_distro"),
            legacy("auto_disk_config", Str, "hw_auto_disk_config"),
            legacy("ipxe_boot", Bool, "hw_ipxe_boot"),
            legacy("xenapi_device_id", Int, "hw_device_id"),
            legacy("xenapi_image_compression_level", Int, "img_compression_level"),
            legacy("vmware_linked_clone", Bool, "img_linked_clone"),
            legacy("xenapi_use_agent", Bool, "img_use_agent"),
            legacy("xenapi_skip_agent_inject_ssh", Bool, "os_skip_agent_inject_ssh"),
            legacy("xenapi_skip_agent_inject_files_at_boot", Bool, "os_skip_agent_inject_files_at_boot"),
            legacy("cache_in_nova", Bool, "img_cache_in_nova"),
            legacy("vm_mode", folded(VM_MODE, VM_MODE_ALIASES), "hw_vm_mode"),
            legacy("bittorrent", Bool, "img_bittorrent"),
            legacy("mappings", JsonListOfDicts, "img_mappings"),
            legacy("block_device_mapping", JsonListOfDicts, "img_block_device_mapping"),
            legacy("bdm_v2", Bool, "img_bdm_v2"),
            legacy("root_device_name", Str, "img_root_device_name"),
            legacy("hypervisor_version_requires", VersionPredicate, "img_hv_requested_version"),
            legacy("hypervisor_type", folded(HV_TYPE, &[("xapi", "xen")]), "img_hv_type"),
            legacy("vmware_adaptertype", folded(ADAPTER, SCSI_ALIASES), "hw_disk_bus and hw_scsi_model"),
        ]
    })
}

/// Properties Glance itself defines or sets, which are never warned about.
const GLANCE_OWN: &[&str] = &[
    "os_version",
    "os_hash_algo",
    "os_hash_value",
    "os_hidden",
    "os_glance_importing_to_stores",
    "os_glance_failed_import",
    "description",
];

struct Index {
    by_name: HashMap<&'static str, &'static ImageProperty>,
    names: Vec<&'static str>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| Index {
        by_name: image_properties()
            .iter()
            .filter(|p| !p.name.contains('{'))
            .map(|p| (p.name, p))
            .collect(),
        names: image_properties()
            .iter()
            .map(|p| {
                p.name
                    .split('{')
                    .next()
                    .unwrap_or(p.name)
                    .trim_end_matches('.')
            })
            .collect(),
    })
}

/// The property definition for a property name, if Nova reads it.
pub(crate) fn find_image_property(name: &str) -> Option<&'static ImageProperty> {
    if let Some(p) = index().by_name.get(name) {
        return Some(p);
    }
    for prefix in ["hw_numa_cpus.", "hw_numa_mem."] {
        if let Some(n) = name.strip_prefix(prefix)
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
        {
            return image_properties()
                .iter()
                .find(|p| p.name.starts_with(prefix));
        }
    }
    None
}

/// Nova's CPU set parser, on ordinary input: comma-separated rules, each `N`, `A-B` or
/// `^N`/`^A-B`, with spaces around numbers; empty rules are skipped; a range must not run
/// backwards.
pub(crate) fn parse_cpu_set(spec: &str) -> Result<(), String> {
    for rule in spec.split(',') {
        let rule = py_trim(rule);
        if rule.is_empty() {
            continue;
        }
        let body = rule.strip_prefix('^').unwrap_or(rule);
        if let Some((a, b)) = body.split_once('-') {
            match (parse_int(a), parse_int(b)) {
                (Some(a), Some(b)) if a <= b => {}
                _ => {
                    return Err(format!(
                        "{rule:?} is not a range of CPU numbers such as 2-5"
                    ));
                }
            }
        } else if parse_int(body).is_none() {
            return Err(format!("{rule:?} is not a CPU number"));
        }
    }
    Ok(())
}

fn is_version(v: &str) -> bool {
    // PEP 440 public versions in their common forms, with an optional local part.
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"(?i)^v?([0-9]+!)?[0-9]+(\.[0-9]+)*([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?((-[0-9]+)|([-_.]?(post|rev|r)[-_.]?[0-9]*))?([-_.]?dev[-_.]?[0-9]*)?(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$",
        )
        .expect("version pattern compiles")
    })
    .is_match(v)
}

fn is_version_predicate(s: &str) -> bool {
    s.split(',').all(|cond| {
        let c = py_trim(cond);
        let rest = ["<=", ">=", "!=", "==", "<", ">"]
            .iter()
            .find_map(|op| c.strip_prefix(op));
        rest.map(py_trim)
            .is_some_and(|v| !v.is_empty() && !v.contains(is_space) && is_version(v))
    })
}

fn is_space(c: char) -> bool {
    super::value::is_py_space(c)
}

impl ImageValue {
    /// Checks a value; the error says what is wrong and what is accepted.
    pub fn check(&self, value: &str) -> Result<(), String> {
        match self {
            ImageValue::String => Ok(()),
            ImageValue::Int => ValueType::Int { min: None, max: None }
                .check(value)
                .map_err(|p| p.to_string()),
            ImageValue::Bool => parse_bool(value).map(|_| ()).ok_or_else(|| {
                ValueType::Bool.check(value).map_err(|p| p.to_string()).err().unwrap_or_default()
            }),
            ImageValue::Enum { members, fold, aliases } => {
                let v = if *fold { value.to_lowercase() } else { value.to_string() };
                let v = aliases.iter().find(|(a, _)| *a == v).map_or(v.as_str(), |(_, c)| c);
                if members.contains(&v) {
                    return Ok(());
                }
                let mut msg = format!(
                    "{value:?} is not an accepted value; accepted values ({}): {}",
                    if *fold { "any case" } else { "exact, case-sensitive" },
                    members.join(", ")
                );
                if !aliases.is_empty() {
                    let a: Vec<String> = aliases.iter().map(|(a, c)| format!("{a} for {c}")).collect();
                    msg.push_str(&format!(", and the older spellings {}", a.join(", ")));
                }
                if let Some(s) = nearest_member(value, members.iter().copied()) {
                    msg.push_str(&format!(" (did you mean {s:?}?)"));
                }
                Err(msg)
            }
            ImageValue::Uuid => {
                if crate::placement::is_uuid(py_trim(value)) || uuid::Uuid::try_parse(value).is_ok() {
                    Ok(())
                } else {
                    Err(format!("{value:?} is not a UUID; expected 8-4-4-4-12 hexadecimal digits"))
                }
            }
            ImageValue::VersionPredicate => {
                if is_version_predicate(value) {
                    Ok(())
                } else {
                    Err(format!(
                        "{value:?} is not a version condition; expected comma-separated conditions such as \">=2.6, <3\", each an operator (<, <=, ==, !=, >=, >) and a version"
                    ))
                }
            }
            ImageValue::CpuSet => parse_cpu_set(value).map_err(|e| {
                format!("{e}; expected CPU numbers and ranges separated by commas, ^N excluding a CPU, e.g. 0-3,^2")
            }),
            ImageValue::JsonListOfDicts => {
                let ok = serde_json::from_str::<serde_json::Value>(value).is_ok_and(|v| {
                    v.as_array().is_some_and(|items| {
                        items.iter().all(|i| {
                            i.as_object()
                                .is_some_and(|o| o.values().all(|x| x.is_string() || x.is_null()))
                        })
                    })
                });
                if ok {
                    Ok(())
                } else {
                    Err(format!(
                        "{value:?} is not a JSON list of objects whose values are strings or null"
                    ))
                }
            }
        }
    }

    /// A short type name for documentation and metadefs.
    pub fn type_name(&self) -> &'static str {
        match self {
            ImageValue::Int => "integer",
            ImageValue::Bool => "boolean",
            _ => "string",
        }
    }

    /// One line on what is accepted, for documentation.
    pub(crate) fn describe(&self) -> String {
        match self {
            ImageValue::String => "any string".into(),
            ImageValue::Int => "a whole number".into(),
            ImageValue::Bool => ValueType::Bool.describe(),
            ImageValue::Enum {
                members,
                fold,
                aliases,
            } => {
                let mut s = format!(
                    "one of {}{}",
                    members
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if *fold { " (any case)" } else { "" }
                );
                if !aliases.is_empty() {
                    let a: Vec<String> = aliases
                        .iter()
                        .map(|(a, c)| format!("`{a}` for `{c}`"))
                        .collect();
                    s.push_str(&format!("; older spellings {}", a.join(", ")));
                }
                s
            }
            ImageValue::Uuid => "a UUID".into(),
            ImageValue::VersionPredicate => "version conditions such as `>=2.6, <3`".into(),
            ImageValue::CpuSet => {
                format!("a CPU set such as `0-3,^2` (like `{CPU_SET}`, spaces allowed)")
            }
            ImageValue::JsonListOfDicts => {
                "a JSON list of objects with string or null values".into()
            }
        }
    }
}

/// How one image property fared.
#[derive(Debug, Clone, Serialize)]
pub struct PropertyOutcome {
    pub key: String,
    pub value: String,
    /// `valid`, `invalid`, `unknown`, `legacy`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Checks one image property.
pub fn check_image_property(key: &str, value: &str) -> PropertyOutcome {
    let mut out = PropertyOutcome {
        key: key.to_string(),
        value: value.to_string(),
        status: "valid",
        problem: None,
        warning: None,
    };
    let field = format!("properties[{key:?}]");
    if let Some(name) = key.strip_prefix("trait:") {
        let mut problems = Vec::new();
        if let Err(e) = check_trait(name) {
            problems.push(e.to_string());
        }
        if value != "required" {
            problems.push(format!(
                "{field} is {value:?}; an image can only require a trait, so the value must be \"required\""
            ));
        }
        if !problems.is_empty() {
            out.status = "invalid";
            out.problem = Some(format!("{field}: {}", problems.join("; ")));
        }
        return out;
    }
    match find_image_property(key) {
        Some(prop) => {
            if let Err(e) = prop.value.check(value) {
                out.status = "invalid";
                out.problem = Some(format!("{field}={value:?}: {e}"));
            } else if let Some(current) = prop.replaced_by {
                out.status = "legacy";
                out.warning = Some(format!(
                    "{field} is an older name that Nova still reads; use {current} instead"
                ));
            }
        }
        None => {
            out.status = "unknown";
            if !GLANCE_OWN.contains(&key)
                && let Some(near) = closest(key, index().names.iter())
            {
                out.warning = Some(format!(
                    "{field} is not a property Nova reads, so it has no effect on scheduling or the guest; did you mean {near}?"
                ));
            }
        }
    }
    out
}

/// Problems (rejecting) and warnings for a whole set of image properties.
pub fn check_image_properties<'a>(
    properties: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    for (k, v) in properties {
        let o = check_image_property(k, v);
        problems.extend(o.problem);
        warnings.extend(o.warning);
    }
    (problems, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(k: &str, v: &str) -> &'static str {
        check_image_property(k, v).status
    }

    #[test]
    fn registry_covers_nova_fields() {
        let current = image_properties()
            .iter()
            .filter(|p| p.replaced_by.is_none())
            .count();
        // ImageMetaProps 1.44 has 86 fields; traits_required is written as trait:NAME.
        assert_eq!(current, 85);
        assert!(find_image_property("hw_numa_cpus.0").is_some());
        assert!(find_image_property("hw_numa_mem.12").is_some());
        assert!(find_image_property("hw_numa_mem.").is_none());
        assert!(find_image_property("hw_numa_memX0").is_none());
    }

    #[test]
    fn values_by_type() {
        assert_eq!(status("hw_cpu_cores", " 3 "), "valid");
        assert_eq!(status("hw_cpu_cores", "-3"), "valid");
        assert_eq!(status("hw_cpu_cores", "x"), "invalid");
        assert_eq!(status("hw_boot_menu", "yes"), "valid");
        assert_eq!(status("hw_boot_menu", "banana"), "invalid");
        assert_eq!(status("hw_disk_bus", "virtio"), "valid");
        assert_eq!(status("hw_disk_bus", "VIRTIO"), "invalid");
        assert_eq!(status("hw_architecture", "AMD64"), "valid");
        assert_eq!(status("hw_architecture", "x86-64"), "invalid");
        assert_eq!(status("os_type", "Windows"), "valid");
        assert_eq!(status("hw_vif_model", "VirtualE1000"), "valid");
        assert_eq!(status("hw_scsi_model", "LSILogicSAS"), "valid");
        assert_eq!(status("img_config_drive", "Mandatory"), "invalid");
        assert_eq!(status("hw_numa_cpus.0", "0-3,^2"), "valid");
        assert_eq!(status("hw_numa_cpus.0", " 0 - 3 "), "valid");
        assert_eq!(status("hw_numa_cpus.0", "3-1"), "invalid");
        assert_eq!(status("hw_numa_cpus.0", "x"), "invalid");
        assert_eq!(status("img_hv_requested_version", ">= 6.0"), "valid");
        assert_eq!(status("img_hv_requested_version", ">=6.0, <7"), "valid");
        assert_eq!(status("img_hv_requested_version", "banana"), "invalid");
        assert_eq!(
            status("img_mappings", r#"[{"device": "vda", "virtual": null}]"#),
            "valid"
        );
        assert_eq!(status("img_mappings", "x"), "invalid");
        assert_eq!(
            status(
                "img_signature_certificate_uuid",
                "0a1b2c3d-0000-4000-8000-000000000000"
            ),
            "valid"
        );
        assert_eq!(status("img_signature_certificate_uuid", "nope"), "invalid");
    }

    #[test]
    fn legacy_names_warn_and_unknown_near_misses_warn() {
        let o = check_image_property("architecture", "x86_64");
        assert_eq!(o.status, "legacy");
        assert!(o.warning.unwrap().contains("use hw_architecture instead"));
        let o = check_image_property("hw_cpu_polcy", "dedicated");
        assert_eq!(o.status, "unknown");
        assert!(o.warning.unwrap().contains("did you mean hw_cpu_policy?"));
        let o = check_image_property("os_version", "24.04");
        assert_eq!(o.warning, None);
        let o = check_image_property("my_team", "blue");
        assert_eq!(o.warning, None);
    }

    #[test]
    fn image_traits() {
        assert_eq!(status("trait:HW_CPU_X86_AVX2", "required"), "valid");
        assert_eq!(status("trait:CUSTOM_GOLD", "required"), "valid");
        let o = check_image_property("trait:CUSTOM_GOLD", "forbidden");
        assert!(
            o.problem
                .unwrap()
                .contains("the value must be \"required\"")
        );
        let o = check_image_property("trait:HW_CPU_X86_AVX3", "required");
        assert!(o.problem.unwrap().contains("did you mean HW_CPU_X86_AVX"));
    }
}

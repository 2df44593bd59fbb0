//! `hw:` — guest hardware: CPU pinning and topology, NUMA, memory, devices.

use super::{LIBVIRT, boolean, enumeration, int_min, int_range, pattern};
use crate::extra_specs::definition::DefinitionSpec as D;

/// A CPU set: numbers and ranges separated by commas, `^N` excluding a CPU.
pub(crate) const CPU_SET: &str = r"\^?[0-9]+((-[0-9]+)?(,\^?[0-9]+(-[0-9]+)?)?)*";

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "hw:cpu_realtime",
            "Gives the guest's vCPUs a real-time scheduling priority on the host. Real-time guests need pinned CPUs.",
            boolean(),
        )
        .value_doc("true to run the vCPUs with real-time priority")
        .drivers(LIBVIRT)
        .needs(&["hw:cpu_policy"]),
        D::new(
            "hw:cpu_realtime_mask",
            "Selects the vCPUs that are left out of real-time priority, written as a CPU set such as ^0-1.",
            pattern(r"(\^)?[0-9]+((-[0-9]+)?(,\^?[0-9]+(-[0-9]+)?)?)*"),
        )
        .value_doc("a CPU set of guest vCPUs")
        .drivers(LIBVIRT)
        .needs(&["hw:cpu_realtime"]),
        D::new(
            "hw:hide_hypervisor_id",
            "Stops the hypervisor from announcing itself to the guest, which some guest drivers (GPU drivers among them) refuse to run under.",
            boolean(),
        )
        .value_doc("true to hide the hypervisor signature")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_policy",
            "How guest vCPUs map to host CPUs: `shared` (the default) lets them float over host CPUs that other guests also use, `dedicated` pins each vCPU to a host CPU of its own (requested from placement as PCPU), and `mixed` pins some vCPUs and lets the rest float.",
            enumeration(&["dedicated", "shared", "mixed"]),
        )
        .value_doc("the CPU allocation policy")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_thread_policy",
            "For pinned guests, how host hyper-threads are used: `prefer` (the default) places vCPUs on sibling threads when the host has them, `require` needs a host with hyper-threads, `isolate` needs a host without them (or keeps siblings unused).",
            enumeration(&["prefer", "isolate", "require"]),
        )
        .value_doc("the thread allocation policy")
        .drivers(LIBVIRT)
        .needs(&["hw:cpu_policy"]),
        D::new(
            "hw:emulator_threads_policy",
            "For pinned guests, where the hypervisor's own emulator threads run: `share` puts them on the host's shared CPU pool, `isolate` gives them an extra dedicated host CPU.",
            enumeration(&["isolate", "share"]),
        )
        .value_doc("the emulator thread placement")
        .drivers(LIBVIRT)
        .needs(&["hw:cpu_policy"]),
        D::new(
            "hw:cpu_dedicated_mask",
            "With the `mixed` CPU policy, the guest vCPUs that are pinned to dedicated host CPUs; the others float over shared CPUs.",
            pattern(CPU_SET),
        )
        .value_doc("a CPU set of guest vCPUs")
        .drivers(LIBVIRT)
        .needs(&["hw:cpu_policy"]),
        D::new(
            "hw:mem_page_size",
            "The page size backing guest memory: `small`, `large`, `any`, or an explicit size such as 2048, 2MB or 1GiB (a bare number is KiB).",
            pattern(r"(large|small|any|[0-9]+([kKMGT]i?)?(b|bit|B)?)"),
        )
        .value_doc("a page size or one of the aliases")
        .drivers(LIBVIRT),
        D::new(
            "hw:locked_memory",
            "Locks guest memory in host RAM so that it is never swapped out, as some devices doing DMA need. Only allowed together with a page size.",
            boolean(),
        )
        .value_doc("true to lock guest memory")
        .drivers(LIBVIRT)
        .needs(&["hw:mem_page_size"]),
        D::new(
            "hw:numa_nodes",
            "How many virtual NUMA nodes the guest sees; each is placed on a distinct host NUMA node.",
            int_min(1),
        )
        .value_doc("the number of guest NUMA nodes")
        .drivers(LIBVIRT),
        D::new(
            "hw:numa_cpus.{num}",
            "The guest vCPUs that belong to guest NUMA node {num}, for guests whose vCPUs are not split evenly over their nodes.",
            pattern(CPU_SET),
        )
        .param("num", "[0-9]+", "the guest NUMA node, counted from 0")
        .value_doc("a CPU set of guest vCPUs")
        .drivers(LIBVIRT)
        .needs(&["hw:numa_nodes"]),
        D::new(
            "hw:numa_mem.{num}",
            "The guest memory, in MiB, that belongs to guest NUMA node {num}, for guests whose memory is not split evenly over their nodes.",
            int_min(1),
        )
        .param("num", "[0-9]+", "the guest NUMA node, counted from 0")
        .value_doc("memory in MiB")
        .drivers(LIBVIRT)
        .needs(&["hw:numa_nodes"]),
        D::new(
            "hw:pci_numa_affinity_policy",
            "How strictly PCI and SR-IOV devices must share a host NUMA node with the guest: `required` insists on it, `preferred` favours it, `legacy` (the default) insists only when the device reports its NUMA node, and `socket` accepts any NUMA node on the same socket.",
            enumeration(&["required", "preferred", "legacy", "socket"]),
        )
        .value_doc("the PCI NUMA affinity policy")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_sockets",
            "How many CPU sockets the guest's CPU topology has; by default one per vCPU.",
            int_min(1),
        )
        .value_doc("a number of sockets")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_cores",
            "How many cores each guest CPU socket has; 1 by default.",
            int_min(1),
        )
        .value_doc("a number of cores")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_threads",
            "How many threads each guest CPU core has; 1 by default.",
            int_min(1),
        )
        .value_doc("a number of threads")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_max_sockets",
            "The most sockets an image may ask for through hw_cpu_sockets.",
            int_min(1),
        )
        .value_doc("a number of sockets")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_max_cores",
            "The most cores per socket an image may ask for through hw_cpu_cores.",
            int_min(1),
        )
        .value_doc("a number of cores")
        .drivers(LIBVIRT),
        D::new(
            "hw:cpu_max_threads",
            "The most threads per core an image may ask for through hw_cpu_threads.",
            int_min(1),
        )
        .value_doc("a number of threads")
        .drivers(LIBVIRT),
        D::new(
            "hw:boot_menu",
            "Shows the firmware's boot menu when the guest starts.",
            boolean(),
        )
        .value_doc("true to show the boot menu")
        .drivers(LIBVIRT),
        D::new(
            "hw:vif_multiqueue_enabled",
            "Gives virtio network interfaces one queue per vCPU so that network throughput scales with the vCPUs; the guest must support it.",
            boolean(),
        )
        .value_doc("true to enable multiqueue")
        .drivers(LIBVIRT),
        D::new(
            "hw:mem_encryption",
            "Encrypts guest memory with the host CPU's memory encryption (such as AMD SEV); the host must support it.",
            boolean(),
        )
        .value_doc("true to encrypt guest memory")
        .drivers(LIBVIRT),
        D::new(
            "hw:mem_encryption_model",
            "Which CPU memory encryption technology protects the guest; it matters only when memory encryption is switched on.",
            enumeration(&["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"]),
        )
        .value_doc("a memory encryption technology")
        .drivers(LIBVIRT)
        .needs(&["hw:mem_encryption"]),
        D::new(
            "hw:pmem",
            "Virtual persistent memory devices for the guest, as a comma-separated list of the labels the host's configuration defines.",
            pattern("([a-zA-Z0-9_]+(,)?)+"),
        )
        .value_doc("comma-separated persistent memory labels")
        .drivers(LIBVIRT),
        D::new(
            "hw:pmu",
            "Switches the guest's virtual performance monitoring unit on or off; left unset, the hypervisor decides. Real-time guests may want it off to avoid its overhead.",
            boolean(),
        )
        .value_doc("true for a vPMU, false for none")
        .drivers(LIBVIRT),
        D::new(
            "hw:serial_port_count",
            "How many serial ports the guest gets.",
            int_min(0),
        )
        .value_doc("a number of serial ports")
        .drivers(LIBVIRT),
        D::new(
            "hw:tpm_model",
            "The model of virtual TPM device given to the guest.",
            enumeration(&["tpm-tis", "tpm-crb"]),
        )
        .value_doc("a TPM device model")
        .drivers(LIBVIRT)
        .needs(&["hw:tpm_version"]),
        D::new(
            "hw:tpm_version",
            "The version of the TPM standard the virtual TPM implements; asking for this gives the guest a vTPM.",
            enumeration(&["1.2", "2.0"]),
        )
        .value_doc("a TPM version")
        .drivers(LIBVIRT),
        D::new(
            "hw:tpm_secret_security",
            "Who holds the secret protecting the virtual TPM's state: the `user`, the `host`, or the `deployment` as a whole; this decides which operations such as live migration are possible.",
            enumeration(&["user", "host", "deployment"]),
        )
        .value_doc("the vTPM secret policy")
        .drivers(LIBVIRT)
        .needs(&["hw:tpm_version"]),
        D::new(
            "hw:watchdog_action",
            "What happens when the guest's emulated watchdog device (an i6300esb) fires because the guest stopped responding.",
            enumeration(&["none", "pause", "poweroff", "reset", "disabled"]),
        )
        .value_doc("the watchdog action")
        .drivers(LIBVIRT),
        D::new(
            "hw:viommu_model",
            "The model of virtual IOMMU device given to the guest.",
            enumeration(&["intel", "smmuv3", "virtio", "auto"]),
        )
        .value_doc("a vIOMMU model")
        .drivers(LIBVIRT),
        D::new(
            "hw:virtio_packed_ring",
            "Lets the guest use the packed virtqueue layout for virtio devices; the guest must support it.",
            boolean(),
        )
        .value_doc("true to allow packed rings")
        .drivers(LIBVIRT),
        D::new(
            "hw:sound_model",
            "The emulated sound card given to the guest; without it the guest has none.",
            enumeration(&["sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio"]),
        )
        .value_doc("a sound card model")
        .drivers(LIBVIRT),
        D::new(
            "hw:usb_model",
            "The USB controller given to the guest; without it the guest has none.",
            enumeration(&["none", "nec-xhci", "qemu-xhci"]),
        )
        .value_doc("a USB controller model")
        .drivers(LIBVIRT),
        D::new(
            "hw:redirected_usb_ports",
            "How many USB redirection ports the guest gets, at most 15; without it none.",
            int_range(0, 15),
        )
        .value_doc("a number of ports")
        .drivers(LIBVIRT),
        D::new(
            "hw:ephemeral_encryption",
            "Encrypts the guest's ephemeral disks.",
            boolean(),
        )
        .value_doc("true to encrypt ephemeral storage"),
        D::new(
            "hw:ephemeral_encryption_format",
            "The on-disk encryption format used for ephemeral disks when their encryption is switched on.",
            enumeration(&["plain", "luks", "luksv2"]),
        )
        .value_doc("an encryption format")
        .needs(&["hw:ephemeral_encryption"]),
    ]
}

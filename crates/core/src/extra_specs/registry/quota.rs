//! `quota:` — limits, reservations and shares of CPU, memory, disk and network.

use super::{LIBVIRT, enumeration, int_any, int_min};
use crate::extra_specs::definition::DefinitionSpec as D;

const VMWARE: &[&str] = &["vmware"];

pub(super) fn definitions() -> Vec<D> {
    let mut defs = Vec::new();
    for (key, what, unit) in [
        ("cpu", "CPU", "MHz"),
        ("memory", "memory", "MiB"),
        ("disk_io", "disk I/O", "I/O operations per second"),
        ("vif", "network interface bandwidth", "Mbit/s"),
    ] {
        let shares_level = format!("quota:{key}_shares_level");
        defs.push(
            D::new(
                &format!("quota:{key}_limit"),
                &format!(
                    "A ceiling on the guest's {what}, in {unit}, that holds even when the host has more to spare; 0 means no ceiling."
                ),
                int_min(0),
            )
            .value_doc(unit)
            .drivers(VMWARE),
        );
        defs.push(
            D::new(
                &format!("quota:{key}_reservation"),
                &format!(
                    "The {what}, in {unit}, set aside for the guest whatever else the host runs."
                ),
                int_any(),
            )
            .value_doc(unit)
            .drivers(VMWARE),
        );
        defs.push(
            D::new(
                &shares_level,
                &format!(
                    "The guest's priority for {what} when the host is contended; with `custom`, quota:{key}_shares_share gives the number of shares."
                ),
                enumeration(&["custom", "high", "normal", "low"]),
            )
            .value_doc("a shares level")
            .drivers(VMWARE),
        );
        defs.push(
            D::new(
                &format!("quota:{key}_shares_share"),
                &format!(
                    "The number of {what} shares the guest holds when its shares level is `custom`."
                ),
                int_min(0),
            )
            .value_doc("a number of shares")
            .drivers(VMWARE)
            .needs(&[&shares_level]),
        );
    }
    defs.push(
        D::new(
            "quota:cpu_shares",
            "The guest's relative weight when host CPUs are contended: a guest with twice the value of another gets twice its CPU time. Unset, the host's default applies.",
            int_min(0),
        )
        .value_doc("a relative weight")
        .drivers(LIBVIRT),
    );
    defs.push(
        D::new(
            "quota:cpu_period",
            "The accounting period, in microseconds, over which quota:cpu_quota is enforced for each vCPU; useful values lie between 1000 and 1000000, and 0 means unset.",
            int_min(0),
        )
        .value_doc("microseconds")
        .drivers(LIBVIRT),
    );
    defs.push(
        D::new(
            "quota:cpu_quota",
            "How many microseconds of CPU time each vCPU may use per quota:cpu_period; a negative value means no limit. Together they cap the guest at a fraction of a host CPU.",
            int_any(),
        )
        .value_doc("microseconds, or negative for no limit")
        .drivers(LIBVIRT)
        .needs(&["quota:cpu_period"]),
    );
    for stat in ["read", "write", "total"] {
        for (metric, unit) in [("bytes", "bytes"), ("iops", "I/O operations")] {
            defs.push(
                D::new(
                    &format!("quota:disk_{stat}_{metric}_sec"),
                    &format!("A cap on the guest's disk {stat} throughput, in {unit} per second."),
                    int_min(0),
                )
                .value_doc(&format!("{unit} per second"))
                .drivers(LIBVIRT),
            );
        }
    }
    for direction in ["inbound", "outbound"] {
        for metric in ["average", "peak", "burst"] {
            defs.push(
                D::new(
                    &format!("quota:vif_{direction}_{metric}"),
                    &format!("The {metric} {direction} bandwidth allowed on the guest's network interfaces."),
                    int_min(0),
                )
                .value_doc(if metric == "burst" { "KiB" } else { "KiB/s" })
                .drivers(LIBVIRT),
            );
        }
    }
    defs
}

//! Validating a flavor of 64 mixed extra specs: literal keys, patterned keys, the trait and
//! resource-class families, custom definitions, a deprecated key and a few bad values.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubeplace_core::extra_specs::registry::Registry;
use kubeplace_core::extra_specs::{
    DefinitionSpec, ValidationMode, Validators, ValueSpec, check_extra_specs,
};

/// The bad specs of the mixed flavor: two typo'd keys and a value below its minimum.
const BAD: [(&str, &str); 3] = [
    ("hw:cpu_pollllicy", "dedicated"),
    ("hw:watchdog_actoin", "reset"),
    ("hw:serial_port_count", "-1"),
];

fn flavor() -> Vec<(String, String)> {
    let mut specs: Vec<(String, String)> = [
        ("hw:cpu_policy", "dedicated"),
        ("hw:cpu_thread_policy", "isolate"),
        ("hw:emulator_threads_policy", "share"),
        ("hw:cpu_realtime", "yes"),
        ("hw:cpu_realtime_mask", "^0-1"),
        ("hw:mem_page_size", "1GiB"),
        ("hw:numa_nodes", "2"),
        ("hw:numa_cpus.0", "0-3"),
        ("hw:numa_cpus.1", "4-7"),
        ("hw:numa_mem.0", "4096"),
        ("hw:numa_mem.1", "4096"),
        ("hw:pci_numa_affinity_policy", "preferred"),
        ("hw:cpu_sockets", "2"),
        ("hw:cpu_cores", "4"),
        ("hw:cpu_threads", "1"),
        ("hw:watchdog_action", "reset"),
        ("hw:tpm_version", "2.0"),
        ("hw:tpm_model", "tpm-crb"),
        ("hw:vif_multiqueue_enabled", "true"),
        ("hw:redirected_usb_ports", "3"),
        ("hw_rng:allowed", "True"),
        ("hw_rng:rate_bytes", "1024"),
        ("hw_rng:rate_period", "100"),
        ("hw_video:ram_max_mb", "64"),
        ("os:secure_boot", "required"),
        ("pci_passthrough:alias", "a1:2, b2:1"),
        ("accel:device_profile", "fpga-gzip"),
        ("quota:cpu_shares", "2048"),
        ("quota:cpu_period", "100000"),
        ("quota:cpu_quota", "-1"),
        ("quota:disk_read_bytes_sec", "10485760"),
        ("quota:vif_inbound_average", "10240"),
        ("vmware:hw_version", "vmx-13"),
        ("capabilities:hypervisor_type", "s== QEMU"),
        ("capabilities:cpu_info:features", "<in> avx2"),
        ("capabilities:stats:io", ">= 4"),
        ("aggregate_instance_extra_specs:ssd", "true"),
        ("group_policy", "isolate"),
        ("hide_hypervisor_id", "true"),
        ("resources:VCPU", "0"),
        ("resources:PCPU", "8"),
        ("resources1:SRIOV_NET_VF", "1"),
        ("resources2:SRIOV_NET_VF", "1"),
        ("resources:CUSTOM_LLC", "4"),
        ("trait:HW_CPU_X86_AVX2", "required"),
        ("trait:HW_CPU_X86_AVX512F", "required"),
        ("trait:CUSTOM_GOLD", "forbidden"),
        ("trait1:CUSTOM_PHYSNET_DATA", "required"),
        ("trait2:CUSTOM_PHYSNET_DATA", "required"),
        ("trait:COMPUTE_NODE", "required"),
        ("acme:cache_ways", "4"),
        ("acme:numa_cache.0", "shared"),
        ("acme:numa_cache.1", "dedicated"),
        ("hw:cpu_pollllicy", "dedicated"),
        ("hw:watchdog_actoin", "reset"),
        ("hw:serial_port_count", "-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut i = 3;
    while specs.len() < 64 {
        specs.push((format!("trait{i}:HW_NIC_SRIOV_TRUSTED"), "required".into()));
        specs.push((format!("resources{i}:SRIOV_NET_VF"), "1".into()));
        i += 1;
    }
    specs.truncate(64);
    specs
}

fn bench(c: &mut Criterion) {
    let (custom, _) = Registry::custom([
        (
            "acme-cache-ways".to_string(),
            DefinitionSpec::new(
                "acme:cache_ways",
                "d",
                ValueSpec::Int {
                    min: Some(1),
                    max: Some(11),
                },
            ),
        ),
        (
            "acme-numa-cache".to_string(),
            DefinitionSpec::new(
                "acme:numa_cache.{node}",
                "d",
                ValueSpec::Enum(vec!["shared".into(), "dedicated".into()]),
            )
            .param("node", "[0-9]+", "node"),
        ),
    ]);
    let validators = Validators::with_custom(&custom);
    let specs = flavor();
    assert_eq!(specs.len(), 64);
    let report = check_extra_specs(
        specs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ValidationMode::Strict,
        &validators,
    );
    assert_eq!(report.problems.len(), BAD.len(), "{:?}", report.problems);
    // Warm the in-tree registry outside the measurement.
    let _ = Registry::in_tree();
    let mut group = c.benchmark_group("extra_specs");
    group.throughput(Throughput::Elements(specs.len() as u64));
    group.bench_function("flavor_of_64_mixed_specs", |b| {
        b.iter(|| {
            let report = check_extra_specs(
                specs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ValidationMode::Strict,
                black_box(&validators),
            );
            black_box(report)
        })
    });
    // The same flavor without its three bad specs (two unknown keys, one bad value), so the
    // cost of the suggestions computed for rejections shows separately.
    let valid: Vec<(String, String)> = specs
        .iter()
        .filter(|(k, v)| !BAD.contains(&(k.as_str(), v.as_str())))
        .cloned()
        .collect();
    group.throughput(Throughput::Elements(valid.len() as u64));
    group.bench_function(format!("flavor_of_{}_valid_specs", valid.len()), |b| {
        b.iter(|| {
            let report = check_extra_specs(
                valid.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ValidationMode::Strict,
                black_box(&validators),
            );
            black_box(report)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

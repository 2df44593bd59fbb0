//! Servers with a NUMA topology placed on hosts whose cells are ResourceProviders: the fit
//! decides the host inside the scheduler's choice, the Allocation records the cells, CPUs
//! and pages, and no CPU or page is held by two claims. Through the same admission and
//! reconcile code `kubeplace apply` and the operator run.

use kubeplace::cli::apply::{Validate, apply_documents};
use kubeplace_api::manifest::parse_stream;
use kubeplace_api::{Kind, Object};
use kubeplace_core::numa::{CpuSet, parse_cpu_set};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::admission::{Operation, admit};
use kubeplace_policy::scheduling::{self as scheduler, HeadroomFigures, release};
use kubeplace_policy::status::reconcile_all;
use kubeplace_policy::store::{ObjectKey, Store};
use serde_json::Value;

fn run(yaml: &str) -> (kubeplace::cli::apply::Report, Store) {
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\n";
    let (mut report, store) = apply_documents(
        parse_stream("test.yaml", &format!("{namespace}{yaml}")).expect("test YAML parses"),
        Validate::Strict,
    );
    report.items.remove(0);
    (report, store)
}

/// A compute node with no inventory of its own: its cells hold it.
fn host(name: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  inventories:\n    DISK_GB:\n      total: 100\n  traits:\n  - COMPUTE_NODE\n---\n"
    )
}

/// A NUMA cell of `parent` with these inventories and `numaCell` detail (YAML lines under
/// `numaCell:`, indented by four).
fn cell(name: &str, parent: &str, inventories: &[(&str, i64)], detail: &str) -> String {
    let inventories: String = inventories
        .iter()
        .map(|(class, total)| format!("    {class}:\n      total: {total}\n"))
        .collect();
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!("  numaCell:\n{detail}")
    };
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  parent: {parent}\n  inventories:\n{inventories}  traits:\n  - HW_NUMA_ROOT\n{detail}---\n"
    )
}

fn flavor(name: &str, vcpus: i64, memory_mb: i64, extra_specs: &[(&str, &str)]) -> String {
    let specs: String = extra_specs
        .iter()
        .map(|(k, v)| format!("\n    {k}: {v:?}"))
        .collect();
    let specs = if specs.is_empty() {
        String::new()
    } else {
        format!("  extraSpecs:{specs}\n")
    };
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\nspec:\n  vcpus: {vcpus}\n  memoryMb: {memory_mb}\n{specs}---\n"
    )
}

const IMAGE: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata:\n  name: img\nspec:\n  properties: {}\n---\n";

fn server(name: &str, flavor: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: {name}\n  namespace: ns\nspec:\n  flavor: {flavor}\n  image: img\n---\n"
    )
}

fn server_status(store: &Store, name: &str) -> Value {
    let key = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: name.into(),
    };
    store.get(&key).expect("server stored").status_value()
}

fn scheduled(store: &Store, name: &str) -> (String, String) {
    let c = &server_status(store, name)["conditions"][0];
    (
        c["reason"].as_str().unwrap().to_string(),
        c["message"].as_str().unwrap_or("").to_string(),
    )
}

/// Every host CPU a server's cells hold.
fn held(store: &Store, name: &str) -> CpuSet {
    let status = server_status(store, name);
    let mut cpus = CpuSet::new();
    for cell in status["numa"]["cells"].as_array().expect("a NUMA record") {
        if let Some(h) = cell["heldCpus"].as_str() {
            cpus.extend(parse_cpu_set(h).unwrap());
        }
    }
    cpus
}

const DEDICATED: &[(&str, &str)] = &[("hw:cpu_policy", "dedicated")];

#[test]
fn a_pinned_guest_goes_only_where_one_cell_holds_its_cpus_and_memory() {
    // The host: cell 0 has the CPUs and too little memory, cell 1 the memory and
    // too few CPUs. Placement's counts alone take CPUs from one and memory from the other.
    let cn1 = host("cn1")
        + &cell(
            "cn1-numa0",
            "cn1",
            &[("PCPU", 8), ("MEMORY_MB", 4096)],
            "    cpus: 0-7\n",
        )
        + &cell(
            "cn1-numa1",
            "cn1",
            &[("PCPU", 2), ("MEMORY_MB", 65536)],
            "    cpus: 8-9\n",
        );
    let rest = flavor("pinned", 8, 32768, DEDICATED) + IMAGE + &server("s", "pinned");
    let yaml = cn1.clone() + &rest;
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0, "{:?}", report.items);
    let (reason, message) = scheduled(&store, "s");
    assert_eq!(reason, "NoValidHost", "{message}");
    assert!(
        message.contains("NUMA") && message.contains("cn1: ") && message.contains("guest cell 0"),
        "the reason names the host and the cell that failed: {message}"
    );
    assert_eq!(store.index().used("cn1-numa0", "PCPU"), 0);

    // A second host whose cell 1 has both: the server lands there, all of it on cell 1.
    let cn2 = host("cn2")
        + &cell(
            "cn2-numa0",
            "cn2",
            &[("PCPU", 4), ("MEMORY_MB", 65536)],
            "    id: 0\n    cpus: 0-3\n",
        )
        + &cell(
            "cn2-numa1",
            "cn2",
            &[("PCPU", 8), ("MEMORY_MB", 65536)],
            "    id: 1\n    cpus: 4-11\n",
        );
    let (_, store) = run(&(cn1 + &cn2 + &rest));
    let (reason, message) = scheduled(&store, "s");
    assert_eq!(reason, "Scheduled", "{message}");
    let status = server_status(&store, "s");
    assert_eq!(status["host"], "cn2");
    let cells = status["numa"]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0]["provider"], "cn2-numa1");
    assert_eq!(cells[0]["hostCell"], 1);
    assert_eq!(cells[0]["memoryMiB"], 32768);
    let pinning = cells[0]["pinning"].as_object().unwrap();
    assert_eq!(pinning.len(), 8, "every vCPU pinned: {pinning:?}");
    let pinned: CpuSet = pinning
        .values()
        .map(|c| c.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(pinned, (4..12).collect::<CpuSet>());
    // Placement's counts follow the fit: CPUs and memory both from cell 1.
    assert_eq!(store.index().used("cn2-numa1", "PCPU"), 8);
    assert_eq!(store.index().used("cn2-numa1", "MEMORY_MB"), 32768);
    assert_eq!(store.index().used("cn2-numa0", "MEMORY_MB"), 0);
}

#[test]
fn isolated_guests_take_whole_cores_and_never_share_a_cpu() {
    // Two cores of two threads: Placement counts 4 PCPU, the fit only two isolated guests.
    let yaml = host("cn1")
        + &cell(
            "cn1-numa0",
            "cn1",
            &[("PCPU", 4), ("MEMORY_MB", 8192)],
            "    cpus: 0-3\n    siblings: [\"0,2\", \"1,3\"]\n",
        )
        + &flavor(
            "iso",
            1,
            1024,
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", "isolate"),
            ],
        )
        + IMAGE
        + &server("a", "iso")
        + &server("b", "iso")
        + &server("c", "iso");
    let (report, mut store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0);
    assert_eq!(scheduled(&store, "a").0, "Scheduled");
    assert_eq!(scheduled(&store, "b").0, "Scheduled");
    let (reason, message) = scheduled(&store, "c");
    assert_eq!(reason, "NoValidHost");
    assert!(message.contains("free dedicated CPUs"), "{message}");
    let (a, b) = (held(&store, "a"), held(&store, "b"));
    assert_eq!(a.len(), 2, "a whole core: {a:?}");
    assert_eq!(b.len(), 2, "a whole core: {b:?}");
    assert!(a.is_disjoint(&b), "{a:?} and {b:?}");
    // Placement counts only the pinned vCPU.
    assert_eq!(store.index().used("cn1-numa0", "PCPU"), 2);

    // An Allocation written by hand that pins a CPU server a holds is refused, with the
    // CPU and the cell named.
    let taken = *a.iter().next().unwrap();
    let forged = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: forged\nspec:\n  consumer: 7b0a4c5e-1f7e-4d8e-9a57-0c6a1b2f9d10\n  allocations:\n  - provider: cn1-numa0\n    resources:\n      PCPU: 1\n  numa:\n    cells:\n    - guestCell: 0\n      provider: cn1-numa0\n      hostCell: 0\n      memoryMiB: 0\n      pinning:\n        \"0\": {taken}\n      heldCpus: \"{taken}\"\n"
    );
    let object = parse_stream("forged.yaml", &forged).unwrap()[0]
        .clone()
        .object()
        .unwrap()
        .unwrap();
    let verdict = admit(Operation::Create, &object, None, &store);
    assert!(!verdict.allowed);
    let message = verdict.message.clone();
    assert!(
        message.contains(&format!("CPUs {taken} of NUMA cell 0"))
            && message.contains("already held"),
        "{message}"
    );

    // Deleting a frees its core for c.
    let key_a = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: "a".into(),
    };
    let Some(Object::Server(mut server_a)) = store.get(&key_a).cloned() else {
        panic!("server a stored")
    };
    server_a.metadata.finalizers = Some(vec![release::ALLOCATION_FINALIZER.to_string()]);
    server_a.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-12-08T00:00:00Z".parse().unwrap(),
        ));
    store.put(Object::Server(server_a));
    let releases = release::releases(&store);
    release::forget_allocations(&mut store, &releases);
    let placed = scheduler::schedule_pending(&mut store, &Weighers::default());
    assert_eq!(placed.len(), 1);
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    assert_eq!(scheduled(&store, "c").0, "Scheduled");
    assert_eq!(held(&store, "c"), a, "c takes the core a gave back");
}

#[test]
fn headroom_counts_what_the_cells_fit_not_what_placement_counts() {
    // Four PCPU in two cores of two threads: four pinned guests, or two isolated ones.
    let yaml = host("cn1")
        + &cell(
            "cn1-numa0",
            "cn1",
            &[("PCPU", 4), ("MEMORY_MB", 8192)],
            "    cpus: 0-3\n    siblings: [\"0,2\", \"1,3\"]\n",
        )
        + &flavor("pinned", 1, 1024, DEDICATED)
        + &flavor(
            "iso",
            1,
            1024,
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", "isolate"),
            ],
        );
    let (_, store) = run(&yaml);
    let count = |flavor: &str| {
        scheduler::headroom(&store, &Weighers::default(), flavor, &[], 100)
            .unwrap()
            .fits
    };
    assert_eq!(count("pinned"), 4);
    assert_eq!(count("iso"), 2);
    // The operator's rounds do not take Placement's counts for the fit: three isolated
    // vCPUs fit the cell's 4 PCPU, and not its two cores.
    let wide = yaml
        + &flavor(
            "iso3",
            3,
            1024,
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", "isolate"),
            ],
        );
    let (_, store) = run(&wide);
    let mut round = scheduler::HeadroomRound::new(&store, &Weighers::default());
    assert_eq!(round.count("iso3", 1).unwrap().servers, 0);
    assert_eq!(round.count("pinned", 1).unwrap().servers, 1);
}

#[test]
fn hugepages_are_held_and_never_overcommitted() {
    // Four 1 GiB pages, one reserved: one 2 GiB guest fits, the second does not.
    let yaml = host("cn1")
        + &cell(
            "cn1-numa0",
            "cn1",
            &[("VCPU", 8), ("MEMORY_MB", 8192)],
            "    cpus: 0-7\n    memoryMib: 8192\n    pages:\n    - sizeKiB: 1048576\n      total: 4\n      reserved: 1\n",
        )
        + &flavor("huge", 2, 2048, &[("hw:mem_page_size", "1GB")])
        + IMAGE
        + &server("a", "huge")
        + &server("b", "huge");
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0, "{:?}", report.items);
    let (reason, message) = scheduled(&store, "a");
    assert_eq!(reason, "Scheduled", "{message}");
    let cells = server_status(&store, "a")["numa"]["cells"].clone();
    assert_eq!(cells[0]["pageSizeKiB"], 1048576);
    assert_eq!(cells[0]["sharedVcpus"], 2);
    let (reason, message) = scheduled(&store, "b");
    assert_eq!(reason, "NoValidHost");
    assert!(
        message.contains("1048576") || message.contains("1GB"),
        "{message}"
    );
    assert!(message.contains("pages"), "{message}");
}

#[test]
fn a_guest_without_numa_is_placed_as_before_and_holds_no_record() {
    let yaml = host("cn1")
        + &cell("cn1-numa0", "cn1", &[("VCPU", 4), ("MEMORY_MB", 4096)], "")
        + &flavor("plain", 2, 1024, &[])
        + IMAGE
        + &server("s", "plain");
    let (_, store) = run(&yaml);
    assert_eq!(scheduled(&store, "s").0, "Scheduled");
    assert!(server_status(&store, "s").get("numa").is_none());
}

#[test]
fn a_host_that_describes_no_cells_is_one_cell_of_everything_it_counts() {
    let flat = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: flat\nspec:\n  inventories:\n    PCPU:\n      total: 4\n    VCPU:\n      total: 8\n    MEMORY_MB:\n      total: 65536\n  traits:\n  - COMPUTE_NODE\n---\n";
    let yaml = flat.to_string()
        + &flavor("pinned", 2, 1024, DEDICATED)
        + &flavor("two-cells", 2, 1024, &[("hw:numa_nodes", "2")])
        + IMAGE
        + &server("a", "pinned")
        + &server("b", "pinned")
        + &server("split", "two-cells");
    let (_, store) = run(&yaml);
    assert_eq!(scheduled(&store, "a").0, "Scheduled");
    assert_eq!(scheduled(&store, "b").0, "Scheduled");
    let (a, b) = (held(&store, "a"), held(&store, "b"));
    assert!(a.is_disjoint(&b), "{a:?} {b:?}");
    assert_eq!(&a | &b, (0..4).collect::<CpuSet>());
    assert_eq!(
        server_status(&store, "a")["numa"]["cells"][0]["provider"],
        "flat"
    );
    let (reason, message) = scheduled(&store, "split");
    assert_eq!(reason, "NoValidHost");
    assert!(
        message.contains("flat: the guest has 2 NUMA cells and the host 1"),
        "{message}"
    );
    // Counted without cells (the cells' counts numbered one after another).
    let yaml = host("cn1")
        + &cell("cn1-numa0", "cn1", &[("PCPU", 2), ("MEMORY_MB", 2048)], "")
        + &cell("cn1-numa1", "cn1", &[("PCPU", 2), ("MEMORY_MB", 2048)], "")
        + &flavor("pinned", 2, 1024, DEDICATED)
        + IMAGE
        + &server("a", "pinned")
        + &server("b", "pinned");
    let (_, store) = run(&yaml);
    assert_eq!(scheduled(&store, "a").0, "Scheduled");
    assert_eq!(scheduled(&store, "b").0, "Scheduled");
    let (a, b) = (held(&store, "a"), held(&store, "b"));
    assert!(a.is_disjoint(&b));
    assert_eq!(
        &a | &b,
        (0..4).collect::<CpuSet>(),
        "spread over both cells"
    );
}

#[test]
fn cell_detail_that_cannot_be_read_is_refused_naming_the_field() {
    let cases = [
        ("    cpus: 0-x\n", "spec.numaCell.cpus"),
        (
            "    cpus: 0-3\n    dedicatedCpus: 2-5\n",
            "spec.numaCell.dedicatedCpus: CPUs 4-5 are not among the cell's cpus 0-3",
        ),
        (
            "    cpus: 0-3\n    siblings: [\"0,1\", \"1,2\"]\n",
            "spec.numaCell.siblings[1]: CPUs 1 are already in an earlier core",
        ),
        (
            "    memoryMib: 4096\n    pages:\n    - sizeKiB: 3\n      total: 1\n",
            "spec.numaCell.pages[0].sizeKiB: 3 is not a page size",
        ),
        (
            "    memoryMib: 4096\n    pages:\n    - sizeKiB: 2048\n      total: 4\n      reserved: 5\n",
            "spec.numaCell.pages[0].reserved: 5 is more than the 4 pages",
        ),
        (
            "    memoryMib: 1024\n    pages:\n    - sizeKiB: 1048576\n      total: 2\n",
            "spec.numaCell.pages: the pools hold 2048 MiB and the cell has 1024 MiB",
        ),
        (
            "    dedicatedCpus: 0-3\n",
            "spec.inventories.PCPU.total is 8 and spec.numaCell gives the cell 4 dedicated CPUs",
        ),
    ];
    for (detail, expected) in cases {
        let yaml = host("cn1") + &cell("cn1-numa0", "cn1", &[("PCPU", 8)], detail);
        let (report, _) = run(&yaml);
        let item = &report.items[1];
        assert!(!item.admission.allowed, "{detail} admitted");
        let message = item.admission.message.clone();
        assert!(message.contains(expected), "{detail}: {message}");
    }
    // Detail on a provider that is not a cell.
    let yaml = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  numaCell:\n    cpus: 0-3\n";
    let (report, _) = run(yaml);
    assert!(!report.items[0].admission.allowed);
    assert!(
        report.items[0]
            .admission
            .message
            .contains("spec.traits lacks HW_NUMA_ROOT"),
        "{}",
        report.items[0].admission.message
    );
}

#[test]
fn the_numa_example_cloud_places_each_kind_of_guest_and_one_waits_saying_why() {
    let documents =
        kubeplace_api::manifest::read_paths(&["examples/numa".into()], &mut std::io::empty())
            .expect("examples/numa reads");
    let (report, store) = apply_documents(documents, Validate::Strict);
    assert_eq!(report.summary.rejected, 0, "{:?}", report.items);
    let status = |name: &str| {
        let key = ObjectKey {
            kind: Kind::Server,
            namespace: "nfv".into(),
            name: name.into(),
        };
        store.get(&key).expect("server stored").status_value()
    };
    let cells = |name: &str| status(name)["numa"]["cells"].as_array().unwrap().clone();
    let pinned = cells("router-pinned");
    assert_eq!(pinned[0]["pinning"].as_object().unwrap().len(), 4);
    let split = cells("router-split");
    assert_eq!(split.len(), 2);
    assert_ne!(split[0]["hostCell"], split[1]["hostCell"]);
    assert_eq!(cells("router-huge")[0]["pageSizeKiB"], 1048576);
    let realtime = cells("router-realtime");
    assert!(realtime[0]["emulatorCpus"].is_string(), "{realtime:?}");
    // The emulator's CPU is counted as Placement's PCPU, as Nova asks for it.
    let provider = realtime[0]["provider"].as_str().unwrap();
    let pcpu = status("router-realtime")["allocation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["provider"] == provider)
        .map(|a| a["resources"]["PCPU"].clone());
    assert_eq!(pcpu, Some(serde_json::json!(3)));
    let waiting = &status("router-isolated-wide")["conditions"][0];
    assert_eq!(waiting["reason"], "NoValidHost");
    let message = waiting["message"].as_str().unwrap();
    assert!(
        message.contains("nfv1: guest cell 0 on host cell 0: has not enough whole free cores"),
        "{message}"
    );
}

#[test]
fn a_flavor_no_image_could_boot_is_refused_at_admission() {
    let cases = [
        (
            flavor("page-text", 2, 1024, &[("hw:mem_page_size", "2M")]),
            "hw:mem_page_size",
            "MemoryPageSizeInvalid",
        ),
        (
            flavor(
                "every-cpu-pinned",
                4,
                2048,
                &[("hw:cpu_policy", "mixed"), ("hw:cpu_dedicated_mask", "0-3")],
            ),
            "hw:cpu_dedicated_mask",
            "InvalidMixedInstanceDedicatedMask",
        ),
        (
            flavor("three-cells-two-cpus", 2, 6144, &[("hw:numa_nodes", "3")]),
            "hw:numa_nodes",
            "ImageNUMATopologyAsymmetric",
        ),
    ];
    for (yaml, key, nova) in cases {
        let (report, _) = run(&yaml);
        let item = &report.items[0];
        assert!(!item.admission.allowed, "{yaml} admitted");
        let message = &item.admission.message;
        assert!(
            message.contains("whatever the image")
                && message.contains(key)
                && message.contains(nova),
            "{message}"
        );
    }
    // A flavor an image may complete is admitted: the realtime mask's CPU policy can come
    // from the image, so only the pair is judged (at the Server).
    let completable = flavor(
        "realtime",
        2,
        1024,
        &[("hw:cpu_realtime", "yes"), ("hw:cpu_realtime_mask", "^0")],
    );
    let (report, _) = run(&completable);
    assert!(
        report.items[0].admission.allowed,
        "{}",
        report.items[0].admission.message
    );
}

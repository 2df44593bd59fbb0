//! kubeplace's NUMA fit against Nova's own: `hack/numa-differential/nova_numa.py` generates
//! hosts (one to four cells, with and without thread siblings, every layout of shared and
//! dedicated CPUs, 4K, 2M and 1G pages with some reserved) and places guests on each one
//! after another with Nova 34's code from its wheel: the guest topology from the flavor and
//! image (`numa_get_constraints`, or the exception it raises), NUMATopologyFilter's verdict
//! (`numa_fit_instance_to_host` with the host's ratios), and the host's cells after the
//! claim (`numa_usage_from_instance_numa`). Each step is compared with kubeplace's answer
//! from the same host: the error, the guest's cells, fit or not, each guest cell's host
//! cell, pinned CPUs, emulator CPU and page size, and the cells after (both as the core's
//! usage computes them and as the record a placed server's Allocation keeps reads back).
//! For every pair Nova accepts, the request for Placement is compared too: the unnumbered
//! group's VCPU, PCPU and HW_CPU_HYPERTHREADING as kubeplace's scheduler asks
//! (`translate::server_request`) and as Nova's does (`ResourceRequest.from_request_spec`).
//!
//! Every difference must be one docs/numa.md explains (Nova's fit accepting a guest cell
//! it never checked, or pinning CPUs already pinned), and at least 99.5% of the steps must
//! agree on everything. Nova lives in the virtualenv `hack/nova-venv.sh` makes.

#[path = "support/nova.rs"]
mod nova;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use kubeplace_core::numa::fit::CellOrder;
use kubeplace_core::numa::usage::with_guest;
use kubeplace_core::numa::{
    FittedCell, GuestSource, HostTopology, Limits, NumaFit, guest_topology, numa_filter,
};
use kubeplace_policy::numa::{HostCells, cells_after, claim_of};
use serde_json::Value;

/// What one step's answers differ on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Difference {
    /// kubeplace refuses the pair, or builds a topology, where Nova does otherwise.
    Request,
    /// The guest's cells differ.
    GuestCells,
    /// One fits and the other does not.
    FitOrNot,
    /// Both fit, on other cells or CPUs or pages.
    Placement,
    /// The host's cells after the guest differ.
    Usage,
    /// Nova's filter passed the host with a fit that cannot hold: a guest cell taken from
    /// its cache as fitting a host cell it was never checked against, so its claim fails
    /// (CPUs already pinned) or its dedicated CPUs are left unpinned. kubeplace's answer for
    /// the step is checked to be a fit the host can take, or none.
    NovaUncheckedCell,
    /// Nova's code raised.
    NovaCrashed,
    /// What the pair asks of Placement (VCPU, PCPU and the trait HW_CPU_HYPERTHREADING in
    /// the unnumbered group) differs from Nova's scheduler's request.
    PlacementRequest,
}

fn run_nova(seed: u64, hosts: u32, edges: bool) -> Vec<Value> {
    let python = nova::nova_python();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hack/numa-differential/nova_numa.py"
    );
    let mut args = vec![
        script.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--hosts".into(),
        hosts.to_string(),
    ];
    if edges {
        args.push("--edges".into());
    }
    let out = Command::new(&python)
        .args(&args)
        .output()
        .expect("the Nova harness runs");
    assert!(
        out.status.success(),
        "the Nova harness failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the harness prints JSON");
    v["steps"].as_array().expect("steps").clone()
}

fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn set(v: &Value) -> BTreeSet<u32> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap() as u32).collect())
        .unwrap_or_default()
}

fn nova_fit(v: &Value) -> NumaFit {
    NumaFit {
        cells: v
            .as_array()
            .unwrap()
            .iter()
            .map(|c| FittedCell {
                host_cell: c["host_cell"].as_u64().unwrap() as u32,
                pinning: c["pinning"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap() as u32))
                    .collect(),
                emulator_cpus: set(&c["emulator_cpus"]),
                page_size_kib: c["page_size_kib"].as_u64(),
            })
            .collect(),
    }
}

/// kubeplace's step against Nova's: the differences found.
fn compare(step: &Value) -> Vec<(Difference, String)> {
    let nova = &step["nova"];
    if let Some(crash) = nova.get("crash") {
        return vec![(Difference::NovaCrashed, crash.to_string())];
    }
    let mut found = Vec::new();
    if let Some(why) = compare_request(step) {
        found.push((Difference::PlacementRequest, why));
    }
    let host: HostTopology = serde_json::from_value(step["host"].clone()).expect("host");
    let limits = Limits {
        cpu_allocation_ratio: step["limits"]["cpu_allocation_ratio"].as_f64().unwrap(),
        ram_allocation_ratio: step["limits"]["ram_allocation_ratio"].as_f64().unwrap(),
    };
    let extra_specs = strings(&step["flavor"]["extra_specs"]);
    let image = strings(&step["image"]);
    let source = GuestSource {
        vcpus: step["flavor"]["vcpus"].as_u64().unwrap() as u32,
        memory_mib: step["flavor"]["memory_mib"].as_u64().unwrap(),
        extra_specs: &extra_specs,
        image: &image,
    };
    let ours = guest_topology(source);
    let guest = match (&ours, nova.get("error")) {
        (Err(e), Some(name)) if name == e.nova_name() => return found,
        (Err(e), _) => {
            found.push((
                Difference::Request,
                format!("kubeplace: {} ({e}); Nova: {nova}", e.nova_name()),
            ));
            return found;
        }
        (Ok(_), Some(name)) => {
            found.push((
                Difference::Request,
                format!("kubeplace builds a topology; Nova: {name}"),
            ));
            return found;
        }
        (Ok(None), None) if nova["topology"].is_null() => return found,
        (Ok(None), None) => {
            found.push((
                Difference::Request,
                "kubeplace: no topology; Nova: one".into(),
            ));
            return found;
        }
        (Ok(Some(_)), None) if nova["topology"].is_null() => {
            found.push((
                Difference::Request,
                "kubeplace: a topology; Nova: none".into(),
            ));
            return found;
        }
        (Ok(Some(g)), None) => g.clone(),
    };
    let nova_cells: Vec<(BTreeSet<u32>, BTreeSet<u32>, u64)> = nova["topology"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                set(&c["cpuset"]),
                set(&c["pcpuset"]),
                c["memory_mib"].as_u64().unwrap(),
            )
        })
        .collect();
    let our_cells: Vec<(BTreeSet<u32>, BTreeSet<u32>, u64)> = guest
        .cells
        .iter()
        .map(|c| (c.cpuset.clone(), c.pcpuset.clone(), c.memory_mib))
        .collect();
    if nova_cells != our_cells {
        found.push((
            Difference::GuestCells,
            format!("kubeplace {our_cells:?}; Nova {nova_cells:?}"),
        ));
        return found;
    }
    let verdict = numa_filter(
        Some(&host),
        Some(&guest),
        &source,
        &limits,
        CellOrder::Spread,
        |_, _| Ok(()),
    );
    match (verdict, nova["fit"].is_null()) {
        (Err(_), true) => {}
        (verdict, false) if nova.get("claim_failed").is_some() || leaves_unpinned(nova) => {
            let sound = match &verdict {
                Ok(Some(fit)) => with_guest(&host, &guest, fit, false).is_ok(),
                _ => true,
            };
            assert!(sound, "kubeplace's fit cannot be claimed: {verdict:?}");
            found.push((
                Difference::NovaUncheckedCell,
                format!(
                    "kubeplace {verdict:?}; Nova's fit {} cannot hold",
                    nova["fit"]
                ),
            ));
        }
        (Ok(fit), false) => {
            let theirs = nova_fit(&nova["fit"]);
            let fit = fit.expect("a topology has a fit");
            if fit != theirs {
                found.push((
                    Difference::Placement,
                    format!("kubeplace {fit:?}; Nova {theirs:?}"),
                ));
            }
            let after = with_guest(&host, &guest, &theirs, false);
            let nova_after: HostTopology =
                serde_json::from_value(step["host_after"].clone()).expect("host after");
            match after {
                Ok(after) if after == nova_after => {}
                other => found.push((
                    Difference::Usage,
                    format!("kubeplace {other:?}; Nova {nova_after:?}"),
                )),
            }
            // What the scheduler records on the Allocation, read back as every later fit
            // reads it, leaves the host as Nova's claim does.
            let cells = HostCells {
                topology: host.clone(),
                providers: host
                    .cells
                    .iter()
                    .map(|c| (c.id, format!("cell-{}", c.id)))
                    .collect(),
                limits,
            };
            let recorded = cells_after(&cells, &claim_of(&guest, &theirs, &cells));
            if recorded != nova_after {
                found.push((
                    Difference::Usage,
                    format!("kubeplace's record {recorded:?}; Nova {nova_after:?}"),
                ));
            }
        }
        (Ok(fit), true) => found.push((
            Difference::FitOrNot,
            format!("kubeplace fits {fit:?}; Nova does not"),
        )),
        (Err(why), false) => found.push((
            Difference::FitOrNot,
            format!("kubeplace does not fit ({why}); Nova {}", nova["fit"]),
        )),
    }
    found
}

/// kubeplace's request for the step's flavor and image (`server_request`, which the
/// scheduler searches with) against Nova's scheduler's, on what the CPU policies decide:
/// the unnumbered group's VCPU and PCPU and the trait HW_CPU_HYPERTHREADING. `None` when
/// they agree or Nova made no request.
fn compare_request(step: &Value) -> Option<String> {
    let nova = step["nova"]["placement"].as_object()?;
    let flavor: kubeplace_api::Flavor = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor", "metadata": {"name": "f"},
        "spec": {"vcpus": step["flavor"]["vcpus"], "memoryMb": step["flavor"]["memory_mib"],
                 "extraSpecs": step["flavor"]["extra_specs"]}
    }))
    .expect("a flavor");
    let image: kubeplace_api::Image = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "Image", "metadata": {"name": "i"},
        "spec": {"properties": step["image"]}
    }))
    .expect("an image");
    if let Some(error) = nova.get("error") {
        return Some(format!("Nova's scheduler refuses the pair ({error})"));
    }
    let ours = match kubeplace_policy::translate::server_request(&flavor, &image) {
        Ok(request) => {
            let group = request.groups.get("").cloned().unwrap_or_default();
            let class = |c: &str| group.resources.get(c).copied().unwrap_or(0);
            let ht = "HW_CPU_HYPERTHREADING";
            let trait_said = if group.required.contains(ht) {
                Value::from("required")
            } else if group.forbidden.contains(ht) {
                Value::from("forbidden")
            } else {
                Value::Null
            };
            serde_json::json!({"VCPU": class("VCPU"), "PCPU": class("PCPU"), "hyperthreading": trait_said})
        }
        Err(e) => serde_json::json!({"error": e.to_string()}),
    };
    let theirs = Value::Object(nova.clone());
    (ours != theirs).then(|| {
        format!(
            "flavor {} image {}: kubeplace {ours}; Nova {theirs}",
            step["flavor"], step["image"]
        )
    })
}

/// Whether Nova's fit pins fewer CPUs for a guest cell than the cell dedicates.
fn leaves_unpinned(nova: &Value) -> bool {
    let (Some(cells), Some(fit)) = (nova["topology"].as_array(), nova["fit"].as_array()) else {
        return false;
    };
    cells.iter().zip(fit).any(|(cell, fitted)| {
        let pinned = fitted["pinning"].as_object().map_or(0, |p| p.len());
        set(&cell["pcpuset"]).len() != pinned
    })
}

/// Differences Nova's own code makes: its fit caches what it learned by (host cell, guest
/// cell) after renaming the guest cell to the host cell it was tried on, so a later guest
/// cell can be taken as fitting a host cell it was never checked against (its pinning left
/// from another, or none). kubeplace checks every pair. docs/numa.md says so.
const EXPLAINED: &[Difference] = &[Difference::NovaUncheckedCell];

/// What a step that fits in Nova exercises, to say what the agreement covers.
fn features(step: &Value) -> Vec<&'static str> {
    let specs = &step["flavor"]["extra_specs"];
    let image = &step["image"];
    let said = |k: &str, v: &str| specs[k] == v;
    let fit = step["nova"]["fit"].as_array().cloned().unwrap_or_default();
    let mut f = Vec::new();
    if fit
        .iter()
        .any(|c| c["pinning"].as_object().is_some_and(|p| !p.is_empty()))
    {
        f.push("pinned CPUs");
    }
    if said("hw:cpu_policy", "mixed") {
        f.push("mixed policy");
    }
    if said("hw:cpu_thread_policy", "isolate")
        || specs["trait:HW_CPU_HYPERTHREADING"] == "forbidden"
    {
        f.push("thread policy isolate");
    }
    if said("hw:cpu_thread_policy", "require") || image["hw_cpu_thread_policy"] == "require" {
        f.push("thread policy require");
    }
    if fit
        .iter()
        .any(|c| c["emulator_cpus"].as_array().is_some_and(|e| !e.is_empty()))
    {
        f.push("emulator threads isolated");
    }
    if fit
        .iter()
        .any(|c| c["page_size_kib"].as_u64().is_some_and(|p| p > 4))
    {
        f.push("hugepages");
    }
    if fit.iter().any(|c| c["page_size_kib"] == 1048576) {
        f.push("1G pages");
    }
    if fit.len() > 1 {
        f.push("several guest cells");
    }
    if step["host"]["cells"]
        .as_array()
        .is_some_and(|c| c.len() > fit.len())
    {
        f.push("host cells ordered");
    }
    if specs["hw:cpu_realtime"].is_string() {
        f.push("realtime mask");
    }
    f
}

#[test]
fn numa_fit_agrees_with_novas_own_code() {
    let mut steps = Vec::new();
    for seed in 1..=4 {
        steps.extend(run_nova(seed, 300, seed == 1));
    }
    assert!(
        steps
            .iter()
            .filter(|s| s["host_number"].as_i64() < Some(0))
            .count()
            >= 14,
        "the edge cases ran"
    );
    let mut by_kind: BTreeMap<Difference, Vec<String>> = BTreeMap::new();
    let mut agreeing = 0usize;
    let mut fits = 0usize;
    let mut covered: BTreeMap<&str, usize> = BTreeMap::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for step in &steps {
        if step["nova"]["fit"].is_array() {
            fits += 1;
            for f in features(step) {
                *covered.entry(f).or_default() += 1;
            }
        }
        if let Some(e) = step["nova"]["error"].as_str() {
            *errors.entry(e.to_string()).or_default() += 1;
        }
        let found = compare(step);
        if found.is_empty() {
            agreeing += 1;
        }
        for (kind, text) in found {
            by_kind.entry(kind).or_default().push(text);
        }
    }
    if let Ok(path) = std::env::var("KUBEPLACE_NUMA_DIFFERENCES") {
        std::fs::write(path, format!("{by_kind:#?}")).ok();
    }
    // A flavor refused at admission alone (`no_image_helps`) is refused by Nova with every
    // image the differential pairs it with.
    let (mut alone_refused, mut alone_with_image) = (0usize, 0usize);
    for step in steps.iter().filter(|s| s["nova"].get("crash").is_none()) {
        let extra_specs = strings(&step["flavor"]["extra_specs"]);
        let no_image = BTreeMap::new();
        let alone = guest_topology(GuestSource {
            vcpus: step["flavor"]["vcpus"].as_u64().unwrap() as u32,
            memory_mib: step["flavor"]["memory_mib"].as_u64().unwrap(),
            extra_specs: &extra_specs,
            image: &no_image,
        });
        if let Err(e) = alone
            && e.no_image_helps()
        {
            alone_refused += 1;
            alone_with_image +=
                usize::from(step["image"].as_object().is_some_and(|i| !i.is_empty()));
            assert!(
                step["nova"]["error"].is_string(),
                "flavor {} is refused alone ({e}), and Nova boots it with image {}",
                step["flavor"],
                step["image"]
            );
        }
    }
    assert!(
        alone_refused > 100,
        "too few flavors refused alone: {alone_refused}"
    );
    let requests = steps
        .iter()
        .filter(|s| {
            s["nova"]["placement"]
                .as_object()
                .is_some_and(|p| !p.contains_key("error"))
        })
        .count();
    assert!(
        requests > steps.len() / 2,
        "too few pairs Nova accepts to judge the requests: {requests}"
    );
    let share = agreeing as f64 / steps.len() as f64;
    let summary: Vec<String> = by_kind
        .iter()
        .map(|(k, v)| format!("{k:?}: {} (first: {})", v.len(), v[0]))
        .collect();
    eprintln!(
        "{} steps ({fits} fit in Nova; {requests} with a request for Placement from Nova's scheduler; {alone_refused} with a flavor refused alone, {alone_with_image} of them with an image, each refused by Nova), {agreeing} agree ({:.2}%)\n{}\nfits by what they exercise: {covered:?}\nNova's errors: {errors:?}",
        steps.len(),
        share * 100.0,
        summary.join("\n")
    );
    assert!(
        fits > steps.len() / 10,
        "too few guests fit to judge placements: {fits}"
    );
    let unexplained: Vec<&String> = by_kind
        .iter()
        .filter(|(k, _)| !EXPLAINED.contains(k))
        .map(|(_, v)| &v[0])
        .collect();
    assert!(
        unexplained.is_empty(),
        "differences no document explains:\n{}",
        summary.join("\n")
    );
    assert!(
        share >= 0.995,
        "only {:.2}% of steps agree:\n{}",
        share * 100.0,
        summary.join("\n")
    );
}

//! A running pod's requests as an Allocation on its Node's provider, counted as
//! kube-scheduler counts them.

use std::collections::BTreeMap;

use kubeplace_api::cluster_source::{Pod, Quantity};
use kubeplace_api::{Allocation, AllocationSpec, ProviderAllocation};

use super::node::class_of;
use super::quantity::{COUNT, Rounding, in_thousandths, in_units};
use super::{Consumer, MirrorError, mirrored_allocation};

/// The consumer type of a pod's Allocation.
pub const POD_CONSUMER_TYPE: &str = "POD";

/// What the pod holds on its Node, or `None`: not bound yet, finished (`Succeeded` or
/// `Failed`), or asking for nothing kubeplace counts.
pub(super) fn allocation(pod: &Pod, from: &str) -> Result<Option<Allocation>, MirrorError> {
    let Some(spec) = &pod.spec else {
        return Ok(None);
    };
    let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    // A Server's reservation: the Server's own claim counts what it requests.
    if super::is_reservation(pod) {
        return Ok(None);
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Ok(None);
    }
    let requests = requests(pod)?;
    let mut resources = BTreeMap::new();
    for (resource, amount) in requests {
        let Some((class, unit)) = class_of(&resource) else {
            continue;
        };
        // Millicores and bytes summed exactly, then a part of a unit taken whole.
        let per = if resource == "cpu" { 1000 } else { unit.per };
        let whole = (amount as u128).div_ceil(per) as i64;
        if whole > 0 {
            resources.insert(class, whole);
        }
    }
    if resources.is_empty() {
        return Ok(None);
    }
    let consumer = Consumer::of(&pod.metadata, "Pod", POD_CONSUMER_TYPE);
    let spec = AllocationSpec {
        numa: None,
        consumer: consumer.uuid.clone(),
        allocations: vec![ProviderAllocation {
            provider: node.to_string(),
            resources,
        }],
    };
    Ok(Some(mirrored_allocation("pod", &consumer, from, spec)))
}

/// The pod's effective requests, in millicores for `cpu` and base units otherwise, as
/// kube-scheduler sums them: pod-level requests when the pod has them; else the larger of
/// the containers' sum (with sidecars: restartable init containers) and each init container
/// with the sidecars started before it; plus the pod's overhead. A container without a
/// request of a resource it limits requests its limit, as the API server defaults it.
fn requests(pod: &Pod) -> Result<BTreeMap<String, i64>, MirrorError> {
    let Some(spec) = &pod.spec else {
        return Ok(BTreeMap::new());
    };
    let mut total: BTreeMap<String, i64> = BTreeMap::new();
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        total = read_all(pod_level, "spec.resources.requests")?;
    } else {
        let mut sidecars: BTreeMap<String, i64> = BTreeMap::new();
        let mut init_peak: BTreeMap<String, i64> = BTreeMap::new();
        for (i, c) in spec.init_containers.iter().flatten().enumerate() {
            let own = container_requests(c, &format!("spec.initContainers[{i}]"))?;
            if c.restart_policy.as_deref() == Some("Always") {
                add(&mut sidecars, &own);
            } else {
                let mut with = sidecars.clone();
                add(&mut with, &own);
                for (r, v) in with {
                    let peak = init_peak.entry(r).or_default();
                    *peak = (*peak).max(v);
                }
            }
        }
        for (i, c) in spec.containers.iter().enumerate() {
            add(
                &mut total,
                &container_requests(c, &format!("spec.containers[{i}]"))?,
            );
        }
        add(&mut total, &sidecars);
        for (r, v) in init_peak {
            let sum = total.entry(r).or_default();
            *sum = (*sum).max(v);
        }
    }
    if let Some(overhead) = &spec.overhead {
        add(&mut total, &read_all(overhead, "spec.overhead")?);
    }
    Ok(total)
}

fn container_requests(
    c: &kubeplace_api::cluster_source::Container,
    at: &str,
) -> Result<BTreeMap<String, i64>, MirrorError> {
    let Some(resources) = &c.resources else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    if let Some(limits) = &resources.limits {
        out = read_all(limits, &format!("{at}.resources.limits"))?;
    }
    if let Some(requests) = &resources.requests {
        out.extend(read_all(requests, &format!("{at}.resources.requests"))?);
    }
    Ok(out)
}

/// Every quantity of a list, `cpu` in millicores, the rest in base units (rounded up).
fn read_all(
    list: &BTreeMap<String, Quantity>,
    at: &str,
) -> Result<BTreeMap<String, i64>, MirrorError> {
    list.iter()
        .map(|(resource, q)| {
            let amount = if resource == "cpu" {
                in_thousandths(&q.0)
            } else {
                in_units(&q.0, COUNT, Rounding::Up)
            };
            amount
                .map(|a| (resource.clone(), a))
                .map_err(|source| MirrorError::Quantity {
                    field: format!("{at}.{resource}"),
                    source,
                })
        })
        .collect()
}

fn add(to: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (r, v) in from {
        let sum = to.entry(r.clone()).or_default();
        *sum = sum.saturating_add(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::{CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION};

    fn pod(yaml: &str) -> Pod {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn resources(p: &Pod) -> Option<BTreeMap<String, i64>> {
        allocation(p, "Pod/x/y")
            .unwrap()
            .map(|a| a.spec.allocations[0].resources.clone())
    }

    #[test]
    fn a_running_pods_requests_are_its_allocation() {
        let p = pod("
metadata: {name: web, namespace: shop, uid: 0b6e3f1c-0000-4000-8000-000000000001}
spec:
  nodeName: node1
  containers:
  - {name: a, resources: {requests: {cpu: 250m, memory: 100Mi}}}
  - {name: b, resources: {requests: {cpu: 500m, memory: 1Mi, ephemeral-storage: 1Gi}}}
status: {phase: Running}
");
        let a = allocation(&p, "Pod/shop/web").unwrap().unwrap();
        assert_eq!(a.spec.consumer, "0b6e3f1c-0000-4000-8000-000000000001");
        assert_eq!(a.spec.allocations[0].provider, "node1");
        assert_eq!(
            a.spec.allocations[0].resources,
            BTreeMap::from([
                ("DISK_GB".to_string(), 1),
                ("MEMORY_MB".to_string(), 101),
                ("VCPU".to_string(), 1),
            ])
        );
        let annotations = a.metadata.annotations.unwrap();
        assert_eq!(annotations[PROJECT_ANNOTATION], "shop");
        assert_eq!(annotations[CONSUMER_TYPE_ANNOTATION], "POD");
        assert_eq!(
            a.metadata.name.as_deref(),
            Some("pod.0b6e3f1c-0000-4000-8000-000000000001")
        );
    }

    #[test]
    fn init_containers_count_as_kube_scheduler_counts_them() {
        // Containers 1 core; an init container 3 cores; a sidecar 1 core started before it.
        let p = pod("
metadata: {name: p, namespace: d}
spec:
  nodeName: n
  initContainers:
  - {name: side, restartPolicy: Always, resources: {requests: {cpu: '1'}}}
  - {name: setup, resources: {requests: {cpu: '3', memory: 1Gi}}}
  containers:
  - {name: main, resources: {requests: {cpu: '1', memory: 64Mi}, limits: {example.com/widget: '2'}}}
  overhead: {cpu: 100m}
");
        // max(1 + 1 sidecar, 3 + 1 sidecar) + 0.1 overhead = 4.1 cores: 5 taken whole.
        assert_eq!(
            resources(&p),
            Some(BTreeMap::from([
                ("CUSTOM_EXAMPLE_COM_WIDGET".to_string(), 2),
                ("MEMORY_MB".to_string(), 1024),
                ("VCPU".to_string(), 5),
            ]))
        );
    }

    #[test]
    fn unbound_finished_and_empty_pods_hold_nothing() {
        let c = "containers: [{name: a, resources: {requests: {cpu: '1'}}}]";
        assert_eq!(
            resources(&pod(&format!("metadata: {{name: p}}\nspec: {{{c}}}\n"))),
            None
        );
        for phase in ["Succeeded", "Failed"] {
            let p = pod(&format!(
                "metadata: {{name: p}}\nspec: {{nodeName: n, {c}}}\nstatus: {{phase: {phase}}}\n"
            ));
            assert_eq!(resources(&p), None, "{phase}");
        }
        let p = pod("metadata: {name: p}\nspec: {nodeName: n, containers: [{name: a}]}\n");
        assert_eq!(resources(&p), None);
        assert_eq!(resources(&pod("metadata: {name: p}\n")), None);
    }

    #[test]
    fn a_bad_quantity_names_its_field() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n, containers: [{name: a, resources: {requests: {cpu: two}}}]}\n",
        );
        let e = allocation(&p, "Pod/default/p").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("field spec.containers[0].resources.requests.cpu: \"two\" is not"),
            "{e}"
        );
    }
}

//! A Node as a root provider: its capacity as inventory, what the kubelet keeps for itself
//! as `reserved`, its labels as traits, and `COMPUTE_STATUS_DISABLED` while it takes no
//! new pods.

use std::collections::BTreeMap;

use kubeplace_api::cluster_source::Node;
use kubeplace_api::{Inventory, ResourceProvider, ResourceProviderSpec, SortedMap};

use super::quantity::{COUNT, GIB, MIB, Rounding, Unit, in_units};
use super::traits::TraitTable;
use super::{MirrorError, extended_class, mirrored_meta};

/// The trait of a provider that takes no new consumers.
pub const COMPUTE_STATUS_DISABLED: &str = "COMPUTE_STATUS_DISABLED";

/// The trait of a root provider that is a compute node (what `$COMPUTE_NODE` in a provider
/// config targets).
const COMPUTE_NODE: &str = "COMPUTE_NODE";

/// A Node resource and the class and unit it is inventoried in.
const NODE_RESOURCES: [(&str, &str, Unit); 3] = [
    ("cpu", "VCPU", COUNT),
    ("memory", "MEMORY_MB", MIB),
    ("ephemeral-storage", "DISK_GB", GIB),
];

/// The Node's root provider, named after the Node. Its uuid is derived from the name, so a
/// Node deleted and joined again is the same provider to Placement's clients.
pub(super) fn provider(
    node: &Node,
    from: &str,
    traits: &TraitTable,
) -> Result<ResourceProvider, MirrorError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.as_ref();
    let empty = BTreeMap::new();
    let capacity = status.and_then(|s| s.capacity.as_ref()).unwrap_or(&empty);
    let allocatable = status
        .and_then(|s| s.allocatable.as_ref())
        .unwrap_or(capacity);
    let mut inventories = SortedMap::default();
    let names: std::collections::BTreeSet<&String> =
        capacity.keys().chain(allocatable.keys()).collect();
    for resource in names {
        let Some((class, unit)) = class_of(resource) else {
            continue;
        };
        let read = |field: &str, q: Option<&kubeplace_api::cluster_source::Quantity>| {
            q.map(|q| {
                in_units(&q.0, unit, Rounding::Down).map_err(|source| MirrorError::Quantity {
                    field: format!("status.{field}.{resource}"),
                    source,
                })
            })
            .transpose()
        };
        let total = read("capacity", capacity.get(resource))?;
        let usable = read("allocatable", allocatable.get(resource))?;
        // Without a capacity, what is allocatable is all there is.
        let total = total.or(usable).unwrap_or(0);
        let usable = usable.unwrap_or(total).min(total);
        if total < 1 {
            continue;
        }
        let mut inventory = Inventory::with_total(total);
        inventory.reserved = total - usable;
        inventories.insert(class, inventory);
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let mut trait_set = traits.traits(&labels);
    trait_set.insert(COMPUTE_NODE.to_string());
    if takes_no_pods(node) {
        trait_set.insert(COMPUTE_STATUS_DISABLED.to_string());
    }
    Ok(ResourceProvider {
        metadata: mirrored_meta(&name, from),
        spec: ResourceProviderSpec {
            numa_cell: None,
            uuid: None,
            parent: None,
            inventories,
            traits: trait_set.into_iter().collect(),
            aggregates: Vec::new(),
        },
        status: None,
    })
}

/// The class and unit of a Node resource: the three of [`NODE_RESOURCES`], and extended
/// resources (`example.com/widget`) as `CUSTOM_*` counts. Hugepages, `pods` and the rest
/// of the kubelet's own figures are not inventory.
pub(super) fn class_of(resource: &str) -> Option<(String, Unit)> {
    if let Some((_, class, unit)) = NODE_RESOURCES.iter().find(|(r, _, _)| *r == resource) {
        return Some((class.to_string(), *unit));
    }
    extended_class(resource).map(|c| (c, COUNT))
}

/// The Node resource a Node provider's class stands for, and its unit: the way back of
/// [`class_of`] for the three of [`NODE_RESOURCES`].
pub(super) fn node_resource_of(class: &str) -> Option<(&'static str, Unit)> {
    NODE_RESOURCES
        .iter()
        .find(|(_, c, _)| *c == class)
        .map(|(resource, _, unit)| (*resource, *unit))
}

/// Whether kube-scheduler places no new pods on the Node: cordoned, or tainted `NoSchedule`
/// or `NoExecute`.
fn takes_no_pods(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).unwrap_or(false)
        || spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const NODE: &str = "
metadata:
  name: node1
  labels: {kubernetes.io/arch: amd64, feature.node.kubernetes.io/cpu-cpuid.AVX2: 'true'}
status:
  capacity: {cpu: '8', memory: 32Gi, ephemeral-storage: 100Gi, pods: '110', hugepages-2Mi: '0', example.com/widget: '4'}
  allocatable: {cpu: 7500m, memory: 31Gi, ephemeral-storage: '96636764160', pods: '110', example.com/widget: '4'}
";

    #[test]
    fn capacity_is_the_total_and_the_kubelets_share_is_reserved() {
        let rp = provider(&node(NODE), "Node/node1", &TraitTable::default()).unwrap();
        let inv = |c: &str| {
            let i = rp.spec.inventories.get(c).unwrap();
            (i.total, i.reserved, i.allocation_ratio)
        };
        assert_eq!(inv("VCPU"), (8, 1, 1.0), "7.5 cores allocatable: 7 whole");
        assert_eq!(inv("MEMORY_MB"), (32768, 1024, 1.0));
        assert_eq!(inv("DISK_GB"), (100, 10, 1.0));
        assert_eq!(inv("CUSTOM_EXAMPLE_COM_WIDGET"), (4, 0, 1.0));
        assert_eq!(rp.spec.inventories.len(), 4);
        assert_eq!(
            rp.spec.traits,
            [
                "COMPUTE_ARCH_X86_64",
                "COMPUTE_NODE",
                "HW_ARCH_X86_64",
                "HW_CPU_X86_AVX2"
            ]
        );
        assert_eq!(rp.spec.parent, None);
        assert_eq!(
            rp.metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(kubeplace_api::cluster_source::MIRRORED_FROM_ANNOTATION)
                .map(String::as_str),
            Some("Node/node1")
        );
    }

    #[test]
    fn a_cordoned_or_tainted_node_is_disabled() {
        for spec in [
            "spec: {unschedulable: true}",
            "spec: {taints: [{key: k, effect: NoSchedule}]}",
            "spec: {taints: [{key: node.kubernetes.io/not-ready, effect: NoExecute}]}",
        ] {
            let rp = provider(
                &node(&format!("metadata: {{name: n}}\n{spec}\n")),
                "Node/n",
                &TraitTable::default(),
            )
            .unwrap();
            assert!(
                rp.spec
                    .traits
                    .contains(&COMPUTE_STATUS_DISABLED.to_string()),
                "{spec}"
            );
        }
        let rp = provider(
            &node("metadata: {name: n}\nspec: {taints: [{key: k, effect: PreferNoSchedule}]}\n"),
            "Node/n",
            &TraitTable::default(),
        )
        .unwrap();
        assert_eq!(rp.spec.traits, ["COMPUTE_NODE"]);
    }

    #[test]
    fn missing_figures_leave_the_class_out_and_bad_ones_are_named() {
        let rp = provider(
            &node("metadata: {name: n}\nstatus: {allocatable: {cpu: '2'}}\n"),
            "Node/n",
            &TraitTable::default(),
        )
        .unwrap();
        assert_eq!(rp.spec.inventories.len(), 1);
        assert_eq!(rp.spec.inventories.get("VCPU").unwrap().total, 2);
        assert_eq!(rp.spec.inventories.get("VCPU").unwrap().reserved, 0);
        let bare = provider(
            &node("metadata: {name: n}\n"),
            "Node/n",
            &TraitTable::default(),
        );
        assert!(bare.unwrap().spec.inventories.is_empty());
        let e = provider(
            &node("metadata: {name: n}\nstatus: {capacity: {memory: lots}}\n"),
            "Node/n",
            &TraitTable::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "field status.capacity.memory: \"lots\" is not a Kubernetes quantity (a number with an optional suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
        );
    }
}

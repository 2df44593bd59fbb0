//! Which Nodes a device on no one Node can be used from: every Node (`allNodes`), or
//! those a node selector picks, read as kube-scheduler reads it.

use std::collections::BTreeMap;

use kubeplace_api::cluster_source::{Device, NodeSelector, NodeSelectorRequirement};
use kubeplace_core::placement::derived_provider_uuid;

/// Where a device of a slice is: on one Node, or reachable from several.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum DevicePlace {
    /// Under this Node's root provider.
    OnNode(String),
    /// A tree of its own, shared with the Nodes it reaches.
    Shared(Reach),
}

/// The Nodes a device on no one Node reaches.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    AllNodes,
    Selected(NodeSelector),
    /// A slice that says nowhere (neither a Node, `allNodes` nor a selector).
    NoNode,
}

impl Reach {
    /// Whether a Node with `name` and `labels` is reached.
    pub fn reaches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Reach::AllNodes => true,
            Reach::NoNode => false,
            // Terms are ORed; a selector without terms picks nothing.
            Reach::Selected(selector) => selector
                .node_selector_terms
                .iter()
                .any(|term| term_picks(term, name, labels)),
        }
    }

    /// The aggregate a pool's devices of this reach share with the Nodes it reaches: one
    /// uuid per driver, pool and reach, stable across restarts.
    pub fn aggregate(&self, driver: &str, pool: &str) -> String {
        let reach = match self {
            Reach::AllNodes => "allNodes".to_string(),
            Reach::NoNode => "noNode".to_string(),
            Reach::Selected(s) => serde_json::to_string(s).expect("a selector serializes"),
        };
        derived_provider_uuid(&format!("ResourcePool/{driver}/{pool}/{reach}"))
    }
}

/// Where a device is: its own `nodeName`, `allNodes` or `nodeSelector` (a slice with
/// `perDeviceNodeSelection`), else its slice's.
pub(super) fn place_of(
    slice: &kubeplace_api::cluster_source::ResourceSlice,
    device: &Device,
) -> DevicePlace {
    let spec = &slice.spec;
    let named = |n: &Option<String>| n.as_deref().filter(|n| !n.is_empty()).map(str::to_string);
    if let Some(node) = named(&device.node_name) {
        return DevicePlace::OnNode(node);
    }
    if device.all_nodes == Some(true) {
        return DevicePlace::Shared(Reach::AllNodes);
    }
    if let Some(selector) = &device.node_selector {
        return DevicePlace::Shared(Reach::Selected(selector.clone()));
    }
    if let Some(node) = named(&spec.node_name) {
        return DevicePlace::OnNode(node);
    }
    if spec.all_nodes == Some(true) {
        return DevicePlace::Shared(Reach::AllNodes);
    }
    match &spec.node_selector {
        Some(selector) => DevicePlace::Shared(Reach::Selected(selector.clone())),
        None => DevicePlace::Shared(Reach::NoNode),
    }
}

/// A term picks a Node when all its requirements hold; an empty term picks none.
fn term_picks(
    term: &kubeplace_api::cluster_source::NodeSelectorTerm,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name_field = BTreeMap::from([("metadata.name".to_string(), name.to_string())]);
    expressions.iter().all(|r| holds(r, labels)) && fields.iter().all(|r| holds(r, &name_field))
}

/// One requirement over a Node's labels (or its fields): `In`, `NotIn`, `Exists`,
/// `DoesNotExist`, `Gt`, `Lt`. An unknown operator holds for no Node.
fn holds(requirement: &NodeSelectorRequirement, values: &BTreeMap<String, String>) -> bool {
    let value = values.get(&requirement.key);
    let listed = requirement.values.as_deref().unwrap_or_default();
    let than = |compare: fn(i64, i64) -> bool| {
        let (Some(value), [bound]) = (value, listed) else {
            return false;
        };
        match (value.parse::<i64>(), bound.parse::<i64>()) {
            (Ok(v), Ok(b)) => compare(v, b),
            _ => false,
        }
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| listed.contains(v)),
        "NotIn" => value.is_none_or(|v| !listed.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => than(|v, b| v > b),
        "Lt" => than(|v, b| v < b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(yaml: &str) -> Reach {
        Reach::Selected(serde_saphyr::from_str(yaml).unwrap())
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_selector_reads_labels_and_the_nodes_name_as_kube_scheduler_does() {
        let rack = selector(
            "nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: [a, b]}, {key: gpu, operator: DoesNotExist}]}, {matchFields: [{key: metadata.name, operator: In, values: [n9]}]}]",
        );
        assert!(rack.reaches("n1", &labels(&[("rack", "a")])));
        assert!(rack.reaches("n9", &labels(&[])), "the second term picks n9");
        assert!(!rack.reaches("n1", &labels(&[("rack", "a"), ("gpu", "1")])));
        assert!(!rack.reaches("n1", &labels(&[("rack", "c")])));
        let numbers = selector(
            "nodeSelectorTerms: [{matchExpressions: [{key: cores, operator: Gt, values: ['8']}, {key: zone, operator: NotIn, values: [z2]}, {key: ssd, operator: Exists}]}]",
        );
        assert!(numbers.reaches("n", &labels(&[("cores", "16"), ("ssd", "")])));
        assert!(!numbers.reaches("n", &labels(&[("cores", "8"), ("ssd", "")])));
        assert!(!numbers.reaches("n", &labels(&[("cores", "x"), ("ssd", "")])));
        assert!(!numbers.reaches(
            "n",
            &labels(&[("cores", "16"), ("ssd", ""), ("zone", "z2")])
        ));
        assert!(selector("nodeSelectorTerms: [{matchExpressions: [{key: cores, operator: Lt, values: ['4']}]}]").reaches("n", &labels(&[("cores", "2")])));
        // An empty term, no terms, or an unknown operator pick nothing.
        assert!(!selector("nodeSelectorTerms: [{}]").reaches("n", &labels(&[])));
        assert!(!selector("nodeSelectorTerms: []").reaches("n", &labels(&[])));
        assert!(
            !selector("nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near}]}]")
                .reaches("n", &labels(&[("a", "1")]))
        );
        assert!(Reach::AllNodes.reaches("n", &labels(&[])));
        assert!(!Reach::NoNode.reaches("n", &labels(&[])));
    }

    #[test]
    fn each_reach_of_a_pool_is_its_own_aggregate() {
        let all = Reach::AllNodes.aggregate("nic.example.com", "fabric");
        assert_eq!(all, Reach::AllNodes.aggregate("nic.example.com", "fabric"));
        assert_ne!(all, Reach::AllNodes.aggregate("nic.example.com", "other"));
        assert_ne!(
            all,
            selector("nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]")
                .aggregate("nic.example.com", "fabric")
        );
    }
}

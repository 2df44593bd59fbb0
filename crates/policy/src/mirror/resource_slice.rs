//! A ResourceSlice's devices as providers under their Node's root: one a device, with one
//! of its driver's resource class and its true bool attributes as traits.

use kubeplace_api::cluster_source::ResourceSlice;
use kubeplace_api::{Inventory, ResourceProvider, ResourceProviderSpec, SortedMap};
use kubeplace_core::placement::{check_trait, derived_provider_uuid};

use super::device_class::DeviceClasses;
use super::traits::trait_part;
use super::{MirrorError, mirrored_meta};

/// The annotations a device's provider carries: which device it is, and the DeviceClass its
/// resource class is named after (none: named after the driver).
pub const DEVICE_DRIVER_ANNOTATION: &str = "kubeplace.io/device-driver";
pub const DEVICE_POOL_ANNOTATION: &str = "kubeplace.io/device-pool";
pub const DEVICE_NAME_ANNOTATION: &str = "kubeplace.io/device-name";
pub const DEVICE_CLASS_ANNOTATION: &str = "kubeplace.io/device-class";

/// The provider of a device: `DRIVER.POOL.DEVICE`, made a valid object name (lower case,
/// `/` as `.`, other characters `-`; a name too long keeps its start and a hash of the whole).
pub fn device_provider_name(driver: &str, pool: &str, device: &str) -> String {
    object_name(&format!("{driver}.{pool}.{device}"))
}

/// The root provider of a pool whose slices are on no one Node: `DRIVER.POOL`.
pub fn pool_provider_name(driver: &str, pool: &str) -> String {
    object_name(&format!("{driver}.{pool}"))
}

fn object_name(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '.' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            '/' => '.',
            _ => '-',
        })
        .collect();
    let trim = |s: &str| s.trim_matches(|c: char| c == '.' || c == '-').to_string();
    name = trim(&name);
    if name.len() > 253 {
        let hash = &derived_provider_uuid(text)[..8];
        name = format!("{}-{hash}", trim(&name[..240]));
    }
    name
}

/// The slice's providers: a device's provider for each device, and for a slice on no one
/// Node (`allNodes`, a node selector) the pool's root above them.
pub(super) fn providers(
    slice: &ResourceSlice,
    classes: &DeviceClasses,
    from: &str,
) -> Result<Vec<ResourceProvider>, MirrorError> {
    let spec = &slice.spec;
    let driver = &spec.driver;
    let pool = &spec.pool.name;
    if driver.is_empty() {
        return Err(MirrorError::Missing("spec.driver".into()));
    }
    if pool.is_empty() {
        return Err(MirrorError::Missing("spec.pool.name".into()));
    }
    let class = classes.resource_class(driver);
    let slice_node = spec.node_name.as_deref().filter(|n| !n.is_empty());
    let mut out = Vec::new();
    let mut pool_root = None;
    for (i, device) in spec.devices.iter().flatten().enumerate() {
        if device.name.is_empty() {
            return Err(MirrorError::Missing(format!("spec.devices[{i}].name")));
        }
        let parent = match device
            .node_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .or(slice_node)
        {
            Some(node) => node.to_string(),
            None => pool_root
                .get_or_insert_with(|| pool_provider_name(driver, pool))
                .clone(),
        };
        let mut traits: Vec<String> = device
            .attributes
            .iter()
            .flatten()
            .filter(|(_, a)| a.bool == Some(true))
            .map(|(name, _)| format!("CUSTOM_{}", trait_part(name)))
            .filter(|t| check_trait(t).is_ok())
            .collect();
        traits.sort();
        traits.dedup();
        let mut inventories = SortedMap::default();
        inventories.insert(class.clone(), Inventory::with_total(1));
        let name = device_provider_name(driver, pool, &device.name);
        let mut metadata = mirrored_meta(&name, from);
        let annotations = metadata.annotations.get_or_insert_with(Default::default);
        for (key, value) in [
            (DEVICE_DRIVER_ANNOTATION, driver),
            (DEVICE_POOL_ANNOTATION, pool),
            (DEVICE_NAME_ANNOTATION, &device.name),
        ] {
            annotations.insert(key.to_string(), value.clone());
        }
        if let Some(class) = classes.class_name(driver) {
            annotations.insert(DEVICE_CLASS_ANNOTATION.to_string(), class.to_string());
        }
        out.push(ResourceProvider {
            metadata,
            spec: ResourceProviderSpec {
                uuid: None,
                parent: Some(parent),
                inventories,
                traits,
                aggregates: Vec::new(),
            },
            status: None,
        });
    }
    if let Some(root) = pool_root {
        out.push(ResourceProvider {
            metadata: mirrored_meta(&root, &format!("ResourcePool/{driver}/{pool}")),
            spec: ResourceProviderSpec {
                uuid: None,
                parent: None,
                inventories: SortedMap::default(),
                traits: Vec::new(),
                aggregates: Vec::new(),
            },
            status: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(yaml: &str) -> ResourceSlice {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn each_device_is_a_child_of_its_node_with_its_class_and_traits() {
        let s = slice("
metadata: {name: node1-gpu}
spec:
  driver: gpu.example.com
  nodeName: node1
  pool: {name: node1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {mig-capable: {bool: true}, gpu.example.com/ecc: {bool: false}, model: {string: a100}}
  - name: gpu-1
");
        let rps = providers(&s, &DeviceClasses::default(), "ResourceSlice/node1-gpu").unwrap();
        assert_eq!(rps.len(), 2);
        let rp = &rps[0];
        assert_eq!(
            rp.metadata.name.as_deref(),
            Some("gpu.example.com.node1.gpu-0")
        );
        assert_eq!(rp.spec.parent.as_deref(), Some("node1"));
        assert_eq!(
            rp.spec
                .inventories
                .get("CUSTOM_GPU_EXAMPLE_COM")
                .unwrap()
                .total,
            1
        );
        assert_eq!(rp.spec.traits, ["CUSTOM_MIG_CAPABLE"]);
        assert!(rps[1].spec.traits.is_empty());
    }

    #[test]
    fn a_pool_on_no_one_node_has_a_root_of_its_own() {
        let s = slice(
            "
metadata: {name: net}
spec:
  driver: nic.example.com
  allNodes: true
  pool: {name: fabric/a, generation: 1, resourceSliceCount: 1}
  devices: [{name: vf-0}]
",
        );
        let rps = providers(&s, &DeviceClasses::default(), "ResourceSlice/net").unwrap();
        assert_eq!(
            rps[0].spec.parent.as_deref(),
            Some("nic.example.com.fabric.a")
        );
        assert_eq!(
            rps[1].metadata.name.as_deref(),
            Some("nic.example.com.fabric.a")
        );
        assert_eq!(rps[1].spec.parent, None);
    }

    #[test]
    fn names_are_made_valid_and_bounded() {
        assert_eq!(device_provider_name("D.io", "P_1/x", "d"), "d.io.p-1.x.d");
        let long = device_provider_name("d.io", &"p".repeat(300), "dev");
        assert!(long.len() <= 253, "{}", long.len());
        let missing = slice(
            "metadata: {name: s}\nspec: {driver: d, pool: {name: '', generation: 1, resourceSliceCount: 1}}\n",
        );
        assert_eq!(
            providers(&missing, &DeviceClasses::default(), "x")
                .unwrap_err()
                .to_string(),
            "field spec.pool.name is missing"
        );
    }
}

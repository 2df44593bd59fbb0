//! A ResourceSlice's devices as providers: one a device, under its Node's root (or a root
//! shared through an aggregate with the Nodes it reaches, for a device on no one Node), with
//! one of its resource class (a device given whole) or its capacity (a device DRA shares
//! among claims), and its true bool attributes as traits. Partitions are left out.

use std::collections::BTreeMap;

use kubeplace_api::cluster_source::ResourceSlice;
use kubeplace_api::{Inventory, ResourceProvider, ResourceProviderSpec, SortedMap};
use kubeplace_core::placement::{check_trait, derived_provider_uuid};

use super::device_class::{SlicePicks, is_partition};
use super::node_reach::{DevicePlace, Reach, place_of};
use super::quantity::{COUNT, MIB, QuantityError, Rounding, Unit, in_units};
use super::traits::trait_part;
use super::{MirrorError, mirrored_meta};

/// Placement's largest inventory total.
const MAX_TOTAL: i64 = i32::MAX as i64;

/// The annotations a device's provider carries: which device it is, and the DeviceClass its
/// resource class is named after (none: named after the driver).
pub const DEVICE_DRIVER_ANNOTATION: &str = "kubeplace.io/device-driver";
pub const DEVICE_POOL_ANNOTATION: &str = "kubeplace.io/device-pool";
pub const DEVICE_NAME_ANNOTATION: &str = "kubeplace.io/device-name";
pub const DEVICE_CLASS_ANNOTATION: &str = "kubeplace.io/device-class";
/// On a shared device's provider: which capacity each of its resource classes counts, as
/// JSON (`{"CUSTOM_GPU_MEMORY_MB": ["memory", "Mi"], "CUSTOM_GPU_CORES": ["cores", ""]}`),
/// so a claim's consumed capacity and a Server's amounts translate both ways.
pub const DEVICE_CAPACITY_ANNOTATION: &str = "kubeplace.io/device-capacity";

/// How a capacity of a shared device is counted: bytes (a value written with a binary
/// suffix, `40Gi`) in MiB, anything else (`108`, `4k`) in whole units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CapacityUnit {
    Whole,
    Mebibytes,
}

impl CapacityUnit {
    /// The unit a device's capacity value is counted in.
    pub fn of(value: &str) -> CapacityUnit {
        let value = value.trim();
        if ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
            .iter()
            .any(|suffix| value.ends_with(suffix))
        {
            CapacityUnit::Mebibytes
        } else {
            CapacityUnit::Whole
        }
    }

    fn unit(self) -> Unit {
        match self {
            CapacityUnit::Whole => COUNT,
            CapacityUnit::Mebibytes => MIB,
        }
    }

    /// The suffix the annotation and a written quantity carry: `Mi` or nothing.
    pub fn suffix(self) -> &'static str {
        match self {
            CapacityUnit::Whole => "",
            CapacityUnit::Mebibytes => "Mi",
        }
    }

    fn from_suffix(suffix: &str) -> Option<CapacityUnit> {
        match suffix {
            "" => Some(CapacityUnit::Whole),
            "Mi" => Some(CapacityUnit::Mebibytes),
            _ => None,
        }
    }

    /// `amount` of this unit as a Kubernetes quantity (`10240Mi`, `4`).
    pub fn quantity(self, amount: i64) -> String {
        format!("{amount}{}", self.suffix())
    }

    /// A quantity in this unit: what a device offers rounds down, what a claim consumes up
    /// (a part of a unit taken is taken whole).
    pub fn amount(self, value: &str, rounding: Rounding) -> Result<i64, QuantityError> {
        in_units(value, self.unit(), rounding)
    }
}

/// The resource class counting one capacity of a shared device of `class`:
/// `<CLASS>_<CAPACITY>`, with `_MB` for bytes. A capacity named in the driver's own domain
/// (`gpu.example.com/memory` of driver `gpu.example.com`) is named as `memory` is.
pub fn capacity_class(class: &str, driver: &str, capacity: &str, unit: CapacityUnit) -> String {
    let name = capacity
        .strip_prefix(driver)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(capacity);
    let bytes = match unit {
        CapacityUnit::Whole => "",
        CapacityUnit::Mebibytes => "_MB",
    };
    format!("{class}_{}{bytes}", trait_part(name))
}

/// A shared device's capacities: the resource class of each capacity name and its unit.
pub type SharedCapacity = BTreeMap<String, (String, CapacityUnit)>;

/// How an allocation result holds a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holding {
    /// Given whole: one of this resource class.
    Whole(String),
    /// Shared: what the result consumes (`consumedCapacity`) of each counted capacity.
    Shared(SharedCapacity),
    /// A partition of a partitionable device: not inventoried, so a claim on it holds
    /// nothing kubeplace counts.
    LeftOut,
}

/// Reads a shared device's [`DEVICE_CAPACITY_ANNOTATION`] back (resource class → capacity
/// name and unit), as capacity name → resource class and unit.
pub fn shared_capacity_of(annotation: &str) -> Option<SharedCapacity> {
    let by_class: BTreeMap<String, (String, String)> = serde_json::from_str(annotation).ok()?;
    by_class
        .into_iter()
        .map(|(class, (name, suffix))| Some((name, (class, CapacityUnit::from_suffix(&suffix)?))))
        .collect()
}

/// The inventories of a device DRA may give to several claims at once
/// (`allowMultipleAllocations`): one per capacity that counts at least one unit and fits
/// Placement's bounds, with what each counts.
fn shared_inventories(
    device: &kubeplace_api::cluster_source::Device,
    class: &str,
    driver: &str,
    at: &str,
) -> Result<(SortedMap<String, Inventory>, SharedCapacity), MirrorError> {
    let mut inventories = SortedMap::default();
    let mut counted = SharedCapacity::new();
    for (name, capacity) in device.capacity.iter().flatten() {
        let unit = CapacityUnit::of(&capacity.value.0);
        let total = match unit.amount(&capacity.value.0, Rounding::Down) {
            Ok(total) if (1..=MAX_TOTAL).contains(&total) => total,
            // Below one unit or beyond Placement's bounds: nothing a claim could count.
            Ok(_) | Err(QuantityError::TooLarge(_)) => continue,
            Err(source) => {
                return Err(MirrorError::Quantity {
                    field: format!("{at}.capacity.{name}.value"),
                    source,
                });
            }
        };
        let resource_class = capacity_class(class, driver, name, unit);
        // `memory` and `<driver>/memory` are one class: the first (by name) counts.
        if inventories.contains_key(&resource_class) {
            continue;
        }
        let mut inventory = Inventory::with_total(total);
        if let Some(policy) = &capacity.request_policy {
            let field = format!("{at}.capacity.{name}.requestPolicy");
            share_bounds(&mut inventory, policy, unit, &field)?;
        }
        inventories.insert(resource_class.clone(), inventory);
        counted.insert(name.clone(), (resource_class, unit));
    }
    Ok((inventories, counted))
}

/// The shares a capacity's request policy allows, as the inventory's `min_unit`,
/// `max_unit` and `step_size`. A range's step becomes the step size when its minimum is a
/// multiple of it (DRA counts steps from the minimum, Placement from zero); a list of valid
/// values becomes its smallest and largest, in steps of their greatest common divisor.
fn share_bounds(
    inventory: &mut Inventory,
    policy: &kubeplace_api::cluster_source::CapacityRequestPolicy,
    unit: CapacityUnit,
    field: &str,
) -> Result<(), MirrorError> {
    let read = |value: &str, rounding: Rounding, at: String| {
        unit.amount(value, rounding)
            .map_err(|source| MirrorError::Quantity { field: at, source })
    };
    let total = inventory.total;
    if let Some(range) = &policy.valid_range {
        let min = read(
            &range.min.0,
            Rounding::Up,
            format!("{field}.validRange.min"),
        )?;
        let max = match &range.max {
            Some(q) => read(&q.0, Rounding::Down, format!("{field}.validRange.max"))?,
            None => total,
        };
        let step = match &range.step {
            Some(q) => read(&q.0, Rounding::Up, format!("{field}.validRange.step"))?,
            None => 1,
        };
        inventory.min_unit = min.clamp(1, total);
        inventory.max_unit = max.clamp(inventory.min_unit, total);
        if step >= 1 && inventory.min_unit % step == 0 {
            inventory.step_size = step;
        }
    } else if let Some(values) = policy.valid_values.as_ref().filter(|v| !v.is_empty()) {
        let amounts = values
            .iter()
            .enumerate()
            .map(|(i, q)| read(&q.0, Rounding::Up, format!("{field}.validValues[{i}]")))
            .collect::<Result<Vec<i64>, MirrorError>>()?;
        let fitting: Vec<i64> = amounts
            .into_iter()
            .filter(|a| (1..=total).contains(a))
            .collect();
        if let (Some(min), Some(max)) = (fitting.iter().min(), fitting.iter().max()) {
            inventory.min_unit = *min;
            inventory.max_unit = *max;
            inventory.step_size = fitting.iter().fold(0, |g, a| gcd(g, *a));
        }
    }
    Ok(())
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// How a claim holds each device of a slice, by provider name: one of its resource class
/// (a device given whole) or what it consumes of its counted capacities (a shared one).
/// A slice that cannot be mirrored names none.
pub(super) fn device_holdings(
    slice: &ResourceSlice,
    picks: &SlicePicks,
) -> BTreeMap<String, Holding> {
    let spec = &slice.spec;
    spec.devices
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, d)| {
            let holding = if is_partition(d) {
                Holding::LeftOut
            } else if d.allow_multiple_allocations == Some(true) {
                let (class, _) = picks.resource_class(i, &spec.driver);
                let at = format!("spec.devices[{i}]");
                let (_, counted) = shared_inventories(d, &class, &spec.driver, &at).ok()?;
                Holding::Shared(counted)
            } else {
                Holding::Whole(picks.resource_class(i, &spec.driver).0)
            };
            Some((
                device_provider_name(&spec.driver, &spec.pool.name, &d.name),
                holding,
            ))
        })
        .collect()
}

/// The provider of a device: `DRIVER.POOL.DEVICE`, made a valid object name (lower case,
/// `/` as `.`, other characters `-`; a name too long keeps its start and a hash of the whole).
pub fn device_provider_name(driver: &str, pool: &str, device: &str) -> String {
    object_name(&format!("{driver}.{pool}.{device}"))
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

/// The trait of a provider whose inventory the trees in its aggregates may use.
const MISC_SHARES_VIA_AGGREGATE: &str = "MISC_SHARES_VIA_AGGREGATE";

/// The slice's providers, one a device: under its Node's root, or, for a device on no one
/// Node (`allNodes`, a node selector), a root of its own that shares its inventory through
/// the aggregate of the Nodes it reaches (see [`Reach::aggregate`]).
pub(super) fn providers(
    slice: &ResourceSlice,
    picks: &SlicePicks,
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
    let mut out = Vec::new();
    for (i, device) in spec.devices.iter().flatten().enumerate() {
        if device.name.is_empty() {
            return Err(MirrorError::Missing(format!("spec.devices[{i}].name")));
        }
        if is_partition(device) {
            continue;
        }
        let (class, class_name) = picks.resource_class(i, driver);
        let (parent, aggregates) = match place_of(slice, device) {
            DevicePlace::OnNode(node) => (Some(node), Vec::new()),
            DevicePlace::Shared(reach) => (None, vec![reach.aggregate(driver, pool)]),
        };
        let mut traits: Vec<String> = device
            .attributes
            .iter()
            .flatten()
            .filter(|(_, a)| a.bool == Some(true))
            .map(|(name, _)| format!("CUSTOM_{}", trait_part(name)))
            .filter(|t| check_trait(t).is_ok())
            .collect();
        if parent.is_none() {
            traits.push(MISC_SHARES_VIA_AGGREGATE.to_string());
        }
        traits.sort();
        traits.dedup();
        let (inventories, shared) = if device.allow_multiple_allocations == Some(true) {
            let (inventories, counted) =
                shared_inventories(device, &class, driver, &format!("spec.devices[{i}]"))?;
            (inventories, Some(counted))
        } else {
            let mut inventories = SortedMap::default();
            inventories.insert(class.clone(), Inventory::with_total(1));
            (inventories, None)
        };
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
        if let Some(class) = class_name {
            annotations.insert(DEVICE_CLASS_ANNOTATION.to_string(), class);
        }
        if let Some(counted) = shared {
            let by_class: BTreeMap<&str, (&str, &str)> = counted
                .iter()
                .map(|(name, (class, unit))| (class.as_str(), (name.as_str(), unit.suffix())))
                .collect();
            annotations.insert(
                DEVICE_CAPACITY_ANNOTATION.to_string(),
                serde_json::to_string(&by_class).expect("a map of strings"),
            );
        }
        out.push(ResourceProvider {
            metadata,
            spec: ResourceProviderSpec {
                numa_cell: None,
                uuid: None,
                parent,
                inventories,
                traits,
                aggregates,
            },
            status: None,
        });
    }
    Ok(out)
}

/// The aggregates a slice's devices on no one Node share, with the Nodes each reaches.
pub(super) fn reaches(slice: &ResourceSlice) -> Vec<(String, Reach)> {
    let spec = &slice.spec;
    let mut found: Vec<(String, Reach)> = Vec::new();
    for device in spec.devices.iter().flatten().filter(|d| !is_partition(d)) {
        if let DevicePlace::Shared(reach) = place_of(slice, device) {
            let aggregate = reach.aggregate(&spec.driver, &spec.pool.name);
            if !found.iter().any(|(a, _)| *a == aggregate) {
                found.push((aggregate, reach));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::device_class::DeviceClasses;

    const NOT_A_QUANTITY: &str = " is not a Kubernetes quantity (a number with an optional suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)";

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
        let rps = providers(
            &s,
            &DeviceClasses::default().pick(&s),
            "ResourceSlice/node1-gpu",
        )
        .unwrap();
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
    fn a_device_on_no_one_node_is_a_root_shared_with_the_nodes_it_reaches() {
        let s = slice(
            "
metadata: {name: net}
spec:
  driver: nic.example.com
  allNodes: true
  pool: {name: fabric/a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: vf-0}
  - {name: vf-1, nodeName: node1}
  - {name: vf-2, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: [a]}]}]}}
",
        );
        let rps = providers(&s, &DeviceClasses::default().pick(&s), "ResourceSlice/net").unwrap();
        assert_eq!(rps.len(), 3, "no provider of the pool's own");
        let all = Reach::AllNodes.aggregate("nic.example.com", "fabric/a");
        assert_eq!(
            rps[0].metadata.name.as_deref(),
            Some("nic.example.com.fabric.a.vf-0")
        );
        assert_eq!(rps[0].spec.parent, None);
        assert_eq!(rps[0].spec.aggregates, std::slice::from_ref(&all));
        assert_eq!(rps[0].spec.traits, [MISC_SHARES_VIA_AGGREGATE]);
        // A device's own Node wins over its slice's reach.
        assert_eq!(rps[1].spec.parent.as_deref(), Some("node1"));
        assert!(rps[1].spec.aggregates.is_empty() && rps[1].spec.traits.is_empty());
        // A device's own selector is an aggregate of its own.
        assert_eq!(rps[2].spec.parent, None);
        assert_ne!(rps[2].spec.aggregates, std::slice::from_ref(&all));
        let reached = reaches(&s);
        assert_eq!(reached.len(), 2);
        assert_eq!(reached[0], (all, Reach::AllNodes));
        assert_eq!(reached[1].0, rps[2].spec.aggregates[0]);
    }

    #[test]
    fn a_shared_devices_capacity_is_its_inventory() {
        let s = slice(
            "
metadata: {name: node1-vgpu}
spec:
  driver: vgpu.example.com
  nodeName: node1
  pool: {name: node1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vgpu-0
    allowMultipleAllocations: true
    capacity:
      memory: {value: 40Gi}
      vgpu.example.com/cores: {value: '100'}
      other.example.com/slots: {value: 4k}
      vgpu.example.com/memory: {value: 80Gi}
      tiny: {value: 500m}
      huge: {value: 1Ei}
  - name: whole-0
    capacity: {memory: {value: 40Gi}}
",
        );
        let rps = providers(
            &s,
            &DeviceClasses::default().pick(&s),
            "ResourceSlice/node1-vgpu",
        )
        .unwrap();
        let totals = |rp: &ResourceProvider| -> Vec<(String, i64)> {
            rp.spec
                .inventories
                .iter()
                .map(|(class, inv)| (class.clone(), inv.total))
                .collect()
        };
        // Bytes in MiB, counts whole, the driver's own domain left out of the name; what is
        // below one unit or beyond Placement's bounds is not counted.
        assert_eq!(
            totals(&rps[0]),
            [
                ("CUSTOM_VGPU_EXAMPLE_COM_CORES".to_string(), 100),
                ("CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB".to_string(), 40960),
                (
                    "CUSTOM_VGPU_EXAMPLE_COM_OTHER_EXAMPLE_COM_SLOTS".to_string(),
                    4000
                ),
            ]
        );
        let annotation = &rps[0].metadata.annotations.as_ref().unwrap()[DEVICE_CAPACITY_ANNOTATION];
        let read = shared_capacity_of(annotation).unwrap();
        assert_eq!(
            read["memory"],
            (
                "CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB".to_string(),
                CapacityUnit::Mebibytes
            )
        );
        assert_eq!(
            read["vgpu.example.com/cores"],
            (
                "CUSTOM_VGPU_EXAMPLE_COM_CORES".to_string(),
                CapacityUnit::Whole
            )
        );
        assert_eq!(read.len(), 3);
        // A device given whole is one of its class, whatever capacity it publishes.
        assert_eq!(
            totals(&rps[1]),
            [("CUSTOM_VGPU_EXAMPLE_COM".to_string(), 1)]
        );
        let held = device_holdings(&s, &DeviceClasses::default().pick(&s));
        assert!(matches!(
            held.get("vgpu.example.com.node1.vgpu-0"),
            Some(Holding::Shared(counted)) if counted.len() == 3
        ));
        assert_eq!(
            held.get("vgpu.example.com.node1.whole-0"),
            Some(&Holding::Whole("CUSTOM_VGPU_EXAMPLE_COM".into()))
        );
        let bad = slice(
            "metadata: {name: b}\nspec: {driver: d, nodeName: n, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: x, allowMultipleAllocations: true, capacity: {memory: {value: lots}}}]}\n",
        );
        assert_eq!(
            providers(&bad, &DeviceClasses::default().pick(&bad), "x")
                .unwrap_err()
                .to_string(),
            format!("field spec.devices[0].capacity.memory.value: \"lots\"{NOT_A_QUANTITY}")
        );
    }

    #[test]
    fn a_capacitys_request_policy_bounds_the_shares() {
        let s = slice(
            "
metadata: {name: s}
spec:
  driver: vgpu.example.com
  nodeName: node1
  pool: {name: node1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vgpu-0
    allowMultipleAllocations: true
    capacity:
      memory: {value: 40Gi, requestPolicy: {validRange: {min: 1Gi, max: 20Gi, step: 1Gi}}}
      slots: {value: '16', requestPolicy: {validValues: ['2', '4', '8', '32']}}
      queues: {value: '10', requestPolicy: {validRange: {min: '3', step: '2'}}}
",
        );
        let rps = providers(&s, &DeviceClasses::default().pick(&s), "x").unwrap();
        let bounds = |class: &str| {
            let i = rps[0].spec.inventories.get(class).unwrap();
            (i.min_unit, i.max_unit, i.step_size)
        };
        assert_eq!(
            bounds("CUSTOM_VGPU_EXAMPLE_COM_MEMORY_MB"),
            (1024, 20480, 1024)
        );
        // 32 is more than the device has; the others are multiples of 2.
        assert_eq!(bounds("CUSTOM_VGPU_EXAMPLE_COM_SLOTS"), (2, 8, 2));
        // Steps from 3 (3, 5, 7, …) are not multiples of 2: any amount from 3 up.
        assert_eq!(bounds("CUSTOM_VGPU_EXAMPLE_COM_QUEUES"), (3, 10, 1));
        let bad = slice(&yaml_with_min_share("x"));
        assert_eq!(
            providers(&bad, &DeviceClasses::default().pick(&bad), "x")
                .unwrap_err()
                .to_string(),
            format!(
                "field spec.devices[0].capacity.memory.requestPolicy.validRange.min: \"x\"{NOT_A_QUANTITY}"
            )
        );
    }

    fn yaml_with_min_share(min: &str) -> String {
        format!(
            "metadata: {{name: b}}\nspec: {{driver: d, nodeName: n, pool: {{name: p, generation: 1, resourceSliceCount: 1}}, devices: [{{name: x, allowMultipleAllocations: true, capacity: {{memory: {{value: 40Gi, requestPolicy: {{validRange: {{min: {min}}}}}}}}}}}]}}\n"
        )
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
            providers(&missing, &DeviceClasses::default().pick(&missing), "x")
                .unwrap_err()
                .to_string(),
            "field spec.pool.name is missing"
        );
    }
}

//! An allocated ResourceClaim as an Allocation: one of its driver's resource class on each
//! device it got whole, and what it consumes of a shared device's capacity.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::cluster_source::ResourceClaim;
use kubeplace_api::{Allocation, AllocationSpec, Kind, Object, ProviderAllocation};

use super::device_class::DeviceClasses;
use super::quantity::Rounding;
use super::resource_slice::{
    DEVICE_CAPACITY_ANNOTATION, Holding, device_provider_name, shared_capacity_of,
};
use super::{Consumer, is_reservation_of_a_server, mirrored_allocation};
use crate::store::Store;

/// The consumer type of a ResourceClaim's Allocation.
pub const CLAIM_CONSUMER_TYPE: &str = "RESOURCE_CLAIM";

/// What the claim holds, or `None` while it is not allocated. Devices allocated for
/// admin access are not taken from anyone and are left out, and so is a Server's
/// reservation (the Server's own claim counts its devices).
pub(super) fn allocation(
    claim: &ResourceClaim,
    classes: &DeviceClasses,
    devices: &HashMap<String, Holding>,
    from: &str,
) -> Option<Allocation> {
    if is_reservation_of_a_server(&claim.metadata) {
        return None;
    }
    allocation_with(claim, from, |driver, provider| {
        // A device whose slice is not seen yet counts as a whole one of its driver.
        match devices.get(provider) {
            Some(Holding::LeftOut) => None,
            Some(holding) => Some(holding.clone()),
            None => Some(Holding::Whole(classes.resource_class(driver))),
        }
    })
}

/// What an allocation written to a claim would have the mirror hold, its devices' classes
/// read from their providers in `store`: how the claims ledger weighs an allocation
/// kube-scheduler writes. Devices the store has no provider for are left out (nothing
/// kubeplace decides can hold them); `None` when no device is left.
pub fn claim_allocation(claim: &ResourceClaim, store: &Store) -> Option<Allocation> {
    let from = format!(
        "ResourceClaim/{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    );
    allocation_with(claim, &from, |_, provider| {
        let Object::ResourceProvider(rp) = store.get_cluster(Kind::ResourceProvider, provider)?
        else {
            return None;
        };
        match rp
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEVICE_CAPACITY_ANNOTATION))
        {
            Some(annotation) => shared_capacity_of(annotation).map(Holding::Shared),
            None => rp
                .spec
                .inventories
                .keys()
                .next()
                .cloned()
                .map(Holding::Whole),
        }
    })
}

/// [`allocation`], how each device is held given by `holding_of(driver, provider)`.
fn allocation_with(
    claim: &ResourceClaim,
    from: &str,
    holding_of: impl Fn(&str, &str) -> Option<Holding>,
) -> Option<Allocation> {
    let mut by_provider: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for r in super::allocation_results(claim).filter(|r| r.admin_access != Some(true)) {
        let provider = device_provider_name(&r.driver, &r.pool, &r.device);
        match holding_of(&r.driver, &provider) {
            None | Some(Holding::LeftOut) => {}
            Some(Holding::Whole(class)) => {
                *by_provider
                    .entry(provider)
                    .or_default()
                    .entry(class)
                    .or_default() += 1;
            }
            Some(Holding::Shared(capacity)) => {
                for (name, consumed) in r.consumed_capacity.iter().flatten() {
                    let Some((class, unit)) = capacity.get(name) else {
                        continue;
                    };
                    // The API server checked the quantity; one it could not read holds nothing.
                    let Ok(amount) = unit.amount(&consumed.0, Rounding::Up) else {
                        continue;
                    };
                    if amount > 0 {
                        *by_provider
                            .entry(provider.clone())
                            .or_default()
                            .entry(class.clone())
                            .or_default() += amount;
                    }
                }
            }
        }
    }
    if by_provider.is_empty() {
        return None;
    }
    let consumer = Consumer::of(&claim.metadata, "ResourceClaim", CLAIM_CONSUMER_TYPE);
    let spec = AllocationSpec {
        numa: None,
        consumer: consumer.uuid.clone(),
        allocations: by_provider
            .into_iter()
            .map(|(provider, resources)| ProviderAllocation {
                provider,
                resources,
            })
            .collect(),
    };
    let mut allocation = mirrored_allocation("claim", &consumer, from, spec);
    // The claim's own uid: the claims ledger knows by it when the mirror has shown the
    // allocation, or shown it and taken it away again.
    allocation.metadata.uid = claim.metadata.uid.clone();
    Some(allocation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocated_claim_holds_its_devices() {
        let claim: ResourceClaim = serde_saphyr::from_str(
            "
metadata: {name: gpus, namespace: ml, uid: 9d1c4c52-0000-4000-8000-000000000002}
spec: {}
status:
  allocation:
    devices:
      results:
      - {request: r, driver: gpu.example.com, pool: node1, device: gpu-0}
      - {request: r, driver: gpu.example.com, pool: node1, device: gpu-1}
      - {request: watch, driver: gpu.example.com, pool: node1, device: gpu-2, adminAccess: true}
",
        )
        .unwrap();
        let a = allocation(
            &claim,
            &DeviceClasses::default(),
            &HashMap::new(),
            "ResourceClaim/ml/gpus",
        )
        .unwrap();
        assert_eq!(a.spec.consumer, "9d1c4c52-0000-4000-8000-000000000002");
        let held: Vec<(&str, i64)> = a
            .spec
            .allocations
            .iter()
            .map(|pa| (pa.provider.as_str(), pa.resources["CUSTOM_GPU_EXAMPLE_COM"]))
            .collect();
        assert_eq!(
            held,
            [
                ("gpu.example.com.node1.gpu-0", 1),
                ("gpu.example.com.node1.gpu-1", 1)
            ]
        );
        let pending: ResourceClaim =
            serde_saphyr::from_str("metadata: {name: c}\nspec: {}\n").unwrap();
        assert!(allocation(&pending, &DeviceClasses::default(), &HashMap::new(), "x").is_none());
    }
}

//! The NUMA fit of one server on one candidate host, as the scheduler asks it: Nova's
//! NUMATopologyFilter over the host's cells, and the candidate's amounts moved onto the
//! cells the fit chose, so that what Placement counts is where the guest runs.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::{Flavor, Image, NumaClaim};
use kubeplace_core::numa::{
    CellOrder, GuestSource, GuestTopology, Misfit, RequestError, guest_topology, numa_filter,
};
use kubeplace_core::placement::ProviderIndex;

use super::cells::{HostCells, Records, host_cells_with};
use super::claim::{claim_of, counted_amounts};
use crate::store::Store;

/// A candidate's amounts: provider, resource class, amount.
pub type Named = Vec<(String, String, i64)>;

/// What a server's guest is built from: its flavor's size and extra specs and its image's
/// properties (none when counting a flavor's headroom).
pub fn guest_source<'a>(
    flavor: &'a Flavor,
    image: &'a BTreeMap<String, String>,
) -> GuestSource<'a> {
    GuestSource {
        vcpus: u32::try_from(flavor.spec.vcpus).unwrap_or(0),
        memory_mib: u64::try_from(flavor.spec.memory_mb).unwrap_or(0),
        extra_specs: &flavor.spec.extra_specs,
        image,
    }
}

/// Judges hosts for one server with a NUMA topology, each host once.
pub struct NumaJudge<'s> {
    store: &'s Store,
    flavor: &'s Flavor,
    image: BTreeMap<String, String>,
    guest: GuestTopology,
    /// The counted claims' records, but the server's own (it does not compete with itself).
    records: Records<'s>,
    /// Each host judged: its cells and the fit's record, or why it does not fit.
    judged: HashMap<String, Result<(HostCells, NumaClaim), String>>,
}

impl<'s> NumaJudge<'s> {
    /// A judge for the server whose claim is `excluding`, when its flavor and image (none
    /// for a flavor alone) make a guest with a NUMA topology.
    pub fn new(
        store: &'s Store,
        flavor: &'s Flavor,
        image: Option<&Image>,
        excluding: &str,
    ) -> Result<Option<NumaJudge<'s>>, RequestError> {
        let image = image.map(|i| i.spec.properties.clone()).unwrap_or_default();
        let guest = guest_topology(guest_source(flavor, &image))?;
        Ok(guest.map(|guest| NumaJudge {
            store,
            flavor,
            image,
            guest,
            records: Records::of(store, Some(excluding)),
            judged: HashMap::new(),
        }))
    }

    /// The fit on `host`, with `named` (a candidate in that host's tree) moved onto the
    /// cells it chose; the record to claim, or why the host does not fit. A host that
    /// describes no cells is refused, as Nova refuses a host without a NUMA topology for a
    /// guest with one.
    pub fn fit(
        &mut self,
        index: &ProviderIndex,
        host: &str,
        named: &mut Named,
    ) -> Result<NumaClaim, String> {
        let (store, flavor, image, guest, records) = (
            self.store,
            self.flavor,
            &self.image,
            &self.guest,
            &self.records,
        );
        let judged = self.judged.entry(host.to_string()).or_insert_with(|| {
            judge_host(store, guest_source(flavor, image), guest, host, records)
        });
        let (cells, claim) = judged.as_ref().map_err(Clone::clone)?;
        move_onto_cells(index, host, cells, claim, named)?;
        Ok(claim.clone())
    }
}

fn judge_host(
    store: &Store,
    source: GuestSource<'_>,
    guest: &GuestTopology,
    host: &str,
    records: &Records<'_>,
) -> Result<(HostCells, NumaClaim), String> {
    let Some(cells) = host_cells_with(store, host, records) else {
        return Err(Misfit::NoCells.to_string());
    };
    let fit = numa_filter(
        Some(&cells.topology),
        Some(guest),
        &source,
        &cells.limits,
        CellOrder::Spread,
        |_, _| Ok(()),
    )
    .map_err(|m| m.to_string())?
    .expect("a guest with a topology has a fit or a misfit");
    let claim = claim_of(guest, &fit, &cells);
    Ok((cells, claim))
}

/// Moves the candidate's `PCPU`, `VCPU` and `MEMORY_MB` onto the cells the fit chose, for
/// each class the cells have inventory of and the candidate takes as much of in the host's
/// cells as the fit does; refuses the host when a cell lacks the room in Placement's counts.
fn move_onto_cells(
    index: &ProviderIndex,
    host: &str,
    cells: &HostCells,
    claim: &NumaClaim,
    named: &mut Named,
) -> Result<(), String> {
    let is_cell = |p: &str| cells.cell_id(p).is_some();
    let wanted = counted_amounts(claim);
    for class in ["PCPU", "VCPU", "MEMORY_MB"] {
        let cells_have = cells
            .providers
            .values()
            .any(|p| index.inventory(p, class).is_some());
        if !cells_have {
            continue;
        }
        let on_cells: i64 = named
            .iter()
            .filter(|(p, c, _)| c == class && is_cell(p))
            .map(|(_, _, n)| n)
            .sum();
        let fitted: i64 = wanted
            .iter()
            .filter(|((_, c), _)| *c == class)
            .map(|(_, n)| n)
            .sum();
        if on_cells != fitted {
            continue;
        }
        named.retain(|(p, c, _)| !(c == class && is_cell(p)));
        for ((provider, c), amount) in wanted.iter().filter(|((_, c), _)| *c == class) {
            named.push((provider.clone(), (*c).to_string(), *amount));
        }
    }
    let mut per: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for (p, c, n) in named.iter() {
        *per.entry((p, c)).or_default() += n;
    }
    for ((provider, class), amount) in per {
        if !is_cell(provider) {
            continue;
        }
        let Some(inventory) = index.inventory(provider, class) else {
            return Err(format!(
                "NUMA cell {provider:?} has no {class} inventory for the guest cell placed on it"
            ));
        };
        if let Err(e) = inventory.admits(index.used(provider, class), amount) {
            return Err(format!(
                "NUMA cell {provider:?} of {host:?}: {amount} {class}: {e}"
            ));
        }
    }
    Ok(())
}

//! The NUMA fit of one server on one candidate host, as the scheduler asks it: Nova's
//! NUMATopologyFilter over the host's cells, and the candidate's amounts moved onto the
//! cells the fit chose, so that what Placement counts is where the guest runs.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::{Flavor, Image, NumaClaim};
use kubeplace_core::numa::{
    CellOrder, GuestSource, GuestTopology, Misfit, RequestError, guest_topology, numa_filter,
};
use kubeplace_core::placement::ProviderIndex;

use super::cells::{HostCells, Records, host_cells};
use super::claim::{claim_of, counted_amounts};
use crate::store::Store;
use crate::translate::guest_source;

/// A candidate's amounts: provider, resource class, amount.
pub type Named = Vec<(String, String, i64)>;

/// Judges hosts for one server with a NUMA topology, each host once.
pub struct NumaJudge<'s> {
    store: &'s Store,
    flavor: &'s Flavor,
    image: BTreeMap<String, String>,
    guest: GuestTopology,
    /// The counted claims' records, but the server's own (it does not compete with itself).
    records: Records<'s>,
    /// Each host judged once: the fit's cells and record, or why it does not fit.
    judged: HashMap<String, Result<Judged, String>>,
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
            judge_host(
                index,
                store,
                guest_source(flavor, image),
                guest,
                host,
                records,
            )
        });
        let judged = judged.as_ref().map_err(Clone::clone)?;
        move_onto_cells(index, host, judged, named)?;
        Ok(judged.claim.clone())
    }
}

/// A host the guest fits, with what every candidate in its tree is moved onto.
struct Judged {
    cells: HostCells,
    claim: NumaClaim,
    /// What the record asks of Placement's counts, by cell provider and class.
    wanted: BTreeMap<(String, &'static str), i64>,
    /// The classes the host's cells have inventory of (the ones moved onto the cells).
    on_cells: Vec<&'static str>,
}

fn judge_host(
    index: &ProviderIndex,
    store: &Store,
    source: GuestSource<'_>,
    guest: &GuestTopology,
    host: &str,
    records: &Records<'_>,
) -> Result<Judged, String> {
    let Some(cells) = host_cells(store, host, records) else {
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
    let on_cells = ["PCPU", "VCPU", "MEMORY_MB"]
        .into_iter()
        .filter(|class| {
            cells
                .providers
                .values()
                .any(|p| index.inventory(p, class).is_some())
        })
        .collect();
    Ok(Judged {
        wanted: counted_amounts(&claim),
        cells,
        claim,
        on_cells,
    })
}

/// Moves the candidate's `PCPU`, `VCPU` and `MEMORY_MB` onto the cells the fit chose, for
/// each class the cells have inventory of and the candidate takes as much of in the host's
/// cells as the fit does; refuses the host when a cell lacks the room in Placement's counts.
fn move_onto_cells(
    index: &ProviderIndex,
    host: &str,
    judged: &Judged,
    named: &mut Named,
) -> Result<(), String> {
    let is_cell = |p: &str| judged.cells.cell_id(p).is_some();
    let wanted = &judged.wanted;
    for &class in &judged.on_cells {
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

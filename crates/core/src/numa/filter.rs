//! The NUMA verdict on one host, as Nova's NUMATopologyFilter gives it: a guest with no
//! topology passes any host; a guest with one needs a host with cells it fits; and a
//! flavor or image that says both `dedicated` and `require` needs a host with threads.

use super::fit::{CellOrder, FittedCell, Limits, Misfit, NumaFit, fit_guest};
use super::guest::GuestTopology;
use super::host::{HostCell, HostTopology};
use super::request::GuestSource;
use super::usage::with_guest;

/// Nova's verdict for a guest on a host: `Ok(None)` when the guest has no NUMA topology
/// (any host passes), `Ok(Some(fit))` where it fits, `Err` with why where it does not.
pub fn numa_filter(
    host: Option<&HostTopology>,
    guest: Option<&GuestTopology>,
    source: &GuestSource<'_>,
    limits: &Limits,
    order: CellOrder,
    devices_fit: impl FnMut(&[&HostCell], &[FittedCell]) -> Result<(), Misfit>,
) -> Result<Option<NumaFit>, Misfit> {
    let Some(guest) = guest else {
        return Ok(None);
    };
    let Some(host) = host.filter(|h| !h.cells.is_empty()) else {
        return Err(Misfit::NoCells);
    };
    // Read from the values as written, flavor's and image's, as Nova's filter reads them.
    let said = |flavor_key: &str, image_key: &str, value: &str| {
        source.extra_specs.get(flavor_key).map(String::as_str) == Some(value)
            || source.image.get(image_key).map(String::as_str) == Some(value)
    };
    if said("hw:cpu_policy", "hw_cpu_policy", "dedicated")
        && said("hw:cpu_thread_policy", "hw_cpu_thread_policy", "require")
        && !host.has_threads()
    {
        return Err(Misfit::NoThreads);
    }
    let mut devices_fit = devices_fit;
    fit_guest(host, guest, Some(limits), order, |cells, fitted| {
        devices_fit(cells, fitted)?;
        if claimable(host, guest, fitted) {
            Ok(())
        } else {
            Err(Misfit::Unclaimable)
        }
    })
    .map(Some)
}

/// Whether the host can take the fit: Nova's choice of an emulator CPU for `isolate` can
/// fall on a core another guest half uses, which its claim then refuses (the whole core
/// cannot be pinned). Such a choice is passed over here, as if it did not fit.
fn claimable(host: &HostTopology, guest: &GuestTopology, fitted: &[FittedCell]) -> bool {
    let fit = NumaFit {
        cells: fitted.to_vec(),
    };
    with_guest(host, guest, &fit, false).is_ok()
}

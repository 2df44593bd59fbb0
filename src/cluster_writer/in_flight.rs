//! Writes being committed to the cluster, side by side. Each write is decided alone, in
//! turn; its commit (a round trip to the API server for each object) then runs while the
//! next writes are decided. A write whose decision rests on one still in flight (the same
//! object, or room that one made on a provider it uses: see [`Footprint::rests_on`]) is
//! taken back, waits for it, and is decided again, so that an earlier write that fails
//! and is undone never leaves a later one standing on what it undid.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, PoisonError};

use kubeplace_policy::placement_records::Footprint;

/// The writes in flight, by number.
#[derive(Default)]
pub(crate) struct InFlight {
    writes: Mutex<Table>,
    settled: Condvar,
}

#[derive(Default)]
struct Table {
    next: u64,
    writes: BTreeMap<u64, Footprint>,
}

/// A write in flight; it leaves the table when dropped.
pub(crate) struct Ticket<'a> {
    table: &'a InFlight,
    number: u64,
}

impl InFlight {
    /// Enters a decided write, or names the writes in flight it rests on.
    pub(crate) fn enter(&self, footprint: Footprint) -> Result<Ticket<'_>, Vec<u64>> {
        let mut table = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let rests_on: Vec<u64> = table
            .writes
            .iter()
            .filter(|(_, earlier)| footprint.rests_on(earlier))
            .map(|(n, _)| *n)
            .collect();
        if !rests_on.is_empty() {
            return Err(rests_on);
        }
        let number = table.next;
        table.next += 1;
        table.writes.insert(number, footprint);
        Ok(Ticket {
            table: self,
            number,
        })
    }

    /// Waits until none of `numbers` is in flight.
    pub(crate) fn wait_for(&self, numbers: &[u64]) {
        let table = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let _settled = self
            .settled
            .wait_while(table, |t| numbers.iter().any(|n| t.writes.contains_key(n)))
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// How many writes are in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .writes
            .len()
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut table = self
            .table
            .writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        table.writes.remove(&self.number);
        drop(table);
        self.table.settled.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    fn on(provider: &str, releases: bool) -> Footprint {
        let set = BTreeSet::from([provider.to_string()]);
        Footprint {
            providers: set.clone(),
            releases: if releases { set } else { BTreeSet::new() },
            ..Footprint::default()
        }
    }

    #[test]
    fn a_write_resting_on_one_in_flight_waits_until_it_leaves() {
        let table = Arc::new(InFlight::default());
        let Ok(release) = table.enter(on("cn1", true)) else {
            panic!("nothing is in flight")
        };
        // Claims elsewhere go side by side with it.
        let Ok(elsewhere) = table.enter(on("cn2", false)) else {
            panic!("no overlap")
        };
        assert_eq!(table.len(), 2);
        // A claim where it made room names it.
        let waits = table
            .enter(on("cn1", false))
            .err()
            .expect("rests on the release");
        assert_eq!(waits, vec![release.number]);
        let waiter = {
            let table = table.clone();
            std::thread::spawn(move || {
                table.wait_for(&waits);
                table.enter(on("cn1", false)).is_ok()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "it waits while the release is in flight"
        );
        drop(release);
        assert!(waiter.join().unwrap(), "entered once the release left");
        drop(elsewhere);
        assert_eq!(table.len(), 0);
    }
}

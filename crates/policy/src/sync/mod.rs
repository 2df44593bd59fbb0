//! Placement sync: a live Placement's state and kubeplace's objects, each made from the
//! other. `kubeplace placement import` reads a Placement into a [`Snapshot`], makes the
//! objects it becomes ([`desired`]) and plans their writes against what is there
//! ([`import`]); `kubeplace placement export` reads kubeplace's state as a snapshot
//! ([`from_store`]) and plans the writes that make a target Placement show it ([`export`]).
//!
//! Every decision is here, as plain functions of snapshots, objects and a
//! [`Store`](crate::store::Store); the command keeps the HTTP, the files and the
//! cluster's writes. The property tests in `tests/`, over an in-memory Placement: an import
//! followed by an export gives back the Placement it read, generations excepted (Placement
//! counts its own); an export over any Placement leaves it showing the source.

pub mod desired;
pub mod export;
pub mod from_store;
pub mod import;
pub mod snapshot;

#[cfg(test)]
mod tests;

pub use desired::{Desired, Uncarried, desired};
pub use from_store::snapshot_of;
pub use snapshot::{Allocations, Consumer, Provider, Snapshot, parents_first};

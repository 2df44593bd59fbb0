//! The cluster writer: commits writes decided on a replica's store to the API server, where
//! every allocation passes the admission webhook and so the one point that decides claims.
//! The Placement API writes through it, `placement import` writes a whole Placement through
//! it, and the open-writes controller finishes through it the writes a dead writer left.
//!
//! - `writer.rs`: [`Cluster`], one object's create, replace or delete from the version it
//!   was decided on, and the registries of custom names in their ConfigMap.
//! - `whole_writes.rs`: a write of several objects, recorded whole first, all or nothing
//!   across crashes.
//! - `in_flight.rs`: writes being committed side by side, and which of them a new one
//!   rests on.
//! - `error.rs`: why a write did not happen, by kind.

mod error;
pub(crate) mod in_flight;
mod whole_writes;
mod writer;

pub(crate) use error::{WriteError, Written};
#[cfg(test)]
pub(crate) use writer::refused_by_api_server;
pub(crate) use writer::{Cluster, REGISTRY_CONFIGMAP};

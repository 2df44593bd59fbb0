//! The controllers: watches that keep the shared store (the index beside the API server),
//! leader election, the status writer around [`kubeplace_policy::status`], and the
//! headroom counter beside it, and the leader's finishing of Placement writes left open.
//!
//! Every replica watches and keeps its store, for the webhook; only the leader writes
//! status.

mod device_reservations;
pub mod finalizer;
pub(crate) mod headroom;
pub(crate) mod leading;
pub mod lease;
pub(crate) mod mirror;
pub(crate) mod open_writes;
pub mod reconciler;
pub(crate) mod reservations;
pub mod status;
pub(crate) mod trigger;
pub mod watch;

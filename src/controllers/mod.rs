//! The controllers: watches that keep the shared store (the index beside the API server),
//! leader election, and the status writer around [`kubeplace_policy::status`].
//!
//! Every replica watches and keeps its store, for the webhook; only the leader writes
//! status.

pub mod finalizer;
pub mod lease;
pub mod reconciler;
pub mod status;
pub(crate) mod trigger;
pub mod watch;

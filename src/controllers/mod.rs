//! The controllers: watches that keep the shared store (the index beside the API server),
//! leader election, the status writer around [`kubeplace_policy::status`], and the
//! headroom counter beside it.
//!
//! Every replica watches and keeps its store, for the webhook; only the leader writes
//! status.

pub mod finalizer;
pub(crate) mod headroom;
pub mod lease;
pub mod reconciler;
pub mod status;
pub(crate) mod trigger;
pub mod watch;

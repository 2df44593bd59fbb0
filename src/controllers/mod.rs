//! The controllers: watches that keep the shared store (the index beside the API server),
//! leader election, and the status writer around [`crate::reconcile`].
//!
//! Every replica watches and keeps its store, for the webhook; only the leader writes
//! status.

pub mod finalizer;
pub mod health;
pub mod kinds;
pub mod lease;
pub mod metrics;
pub mod reconciler;
pub mod status;
pub mod trigger;
pub mod watch;

//! kubeplace's policy: admission, statuses, scheduling and claims over an object store.
//!
//! Everything here is a plain function of a [`store::Store`]: the webhook, the controllers
//! and `kubeplace apply` all call it, with no Kubernetes client, async runtime or network
//! in between.

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod admission;
pub mod claims;
pub mod namespaces;
pub mod pass;
pub mod placement_records;
pub mod scheduling;
pub mod status;
pub mod store;
pub mod translate;

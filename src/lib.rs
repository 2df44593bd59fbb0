//! kubeplace: OpenStack's scheduling vocabulary as Kubernetes custom resources.
//!
//! The pure core (`extra_specs`, `placement`, `provider_config`) holds the semantics and
//! has no Kubernetes, network or async code. The seam (`admission`, `reconcile`) turns
//! objects in a `store` into verdicts and statuses. The shell (`api`, `manifest`, `cli`,
//! and the operator's `webhook` and `controllers`) speaks Kubernetes and files.

pub mod admission;
pub mod api;
pub mod cli;
pub mod controllers;
pub mod extra_specs;
pub mod manifest;
pub mod placement;
pub mod provider_config;
pub mod reconcile;
pub mod store;
pub mod templates;
pub mod webhook;

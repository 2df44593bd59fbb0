//! The `kubeplace` command: the CLI, and the operator around kubeplace's policy
//! (controllers, admission webhook).
//!
//! The semantics live below: `kubeplace-core` (pure rules), `kubeplace-api` (the custom
//! resource types) and `kubeplace-policy` (admission, statuses, claims over a store).
//! docs/architecture.md draws the map.

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod args;
pub mod cache;
pub mod capacity_page;
pub mod cli;
pub(crate) mod cluster_writer;
pub(crate) mod controllers;
pub(crate) mod health;
pub mod keystone;
pub(crate) mod locks;
pub mod metrics;
pub mod operator;
pub mod placement_api;
pub mod serving;
pub mod webhook;

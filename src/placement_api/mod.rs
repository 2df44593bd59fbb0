//! Placement's REST API (OpenStack Placement 16, microversions 1.0–1.39) served from
//! kubeplace's in-memory store: `kubeplace placement serve`.
//!
//! A request's token is checked from its headers first; only then is its body read (with a
//! size limit and a deadline), and the request answered synchronously under one lock around
//! the [`State`]: reads share it, writes take it alone, so every write (and every claim) is
//! decided at one serialized point that sees every earlier one. A request that fails on an
//! internal error (a panic) fails alone: what it changed is undone under the same lock, it
//! gets a 500 whose body says nothing of the fault, and the next request is answered as if it
//! had not been sent. Kubeplace objects are
//! written through `kubeplace_policy::admission`, so the API, `kubeplace apply` and the
//! webhook hold the same capacity and validity rules. docs/placement-api.md lists what is
//! served and every difference from Placement.

pub mod access;
mod answer;
mod api;
pub mod auth;
pub(crate) mod caller;
pub mod cors;
mod handlers;
mod kept_answers;
pub mod origin;
mod panics;
mod request;
mod router;
mod serve;

pub use api::{PlacementApi, Soundness};
pub use auth::keystone::KeystoneAuth;
pub use auth::{Auth, KubernetesAuth};
pub use kubeplace_policy::placement_records::{
    Backing, Book, CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, USER_ANNOTATION,
};
pub use request::searches::{DEFAULT_DEADLINE as DEFAULT_SEARCH_DEADLINE, SearchLimits};
pub use request::wire::ReplyBody;
pub use serve::{bind, serve};

#[cfg(test)]
mod panic_tests;

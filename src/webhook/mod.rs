//! The validating admission webhook: AdmissionReview v1 in and out, one path per kind
//! (`/validate/<plural>`), answered by [`kubeplace_policy::admission::admit`] over the operator's
//! shared store.

pub mod claims_route;
pub mod config;
mod device_claims;
mod dispatch;
pub mod endpoint;
pub mod event_budget;
mod read_through;
mod reservations;
mod review;

pub use review::{Webhook, claims_ledger, invalid};

//! Keystone as kubeplace's client of it: the `[keystone_authtoken]` section read (`config`),
//! requests to Keystone's identity API (`client`), the service user's login and token
//! (`service`), and an endpoint from a token's service catalog (`catalog`). The Placement API
//! validates callers' tokens with it (`placement_api::auth::keystone`); `placement import` and
//! `export` log in with it.

pub mod catalog;
pub mod client;
pub mod clouds;
pub mod config;
pub mod registration;
pub mod service;
pub(crate) mod time;

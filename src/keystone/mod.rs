//! Keystone as kubeplace's client of it: the `[keystone_authtoken]` section read (`config`),
//! requests to Keystone's identity API (`client`), the service user's login and token
//! (`service`), and an endpoint from a token's service catalog (`catalog`). The Placement API
//! validates callers' tokens with it (`placement_api::auth::keystone`); `placement import` and
//! `export` log in with it.

pub mod catalog;
pub mod client;
pub mod config;
pub mod service;

use std::time::{Duration, Instant};

/// The monotonic instant of a time Keystone wrote (`2026-11-28T10:00:00.000000Z`).
pub(crate) fn instant_of(text: &str) -> Option<Instant> {
    let at: jiff::Timestamp = text.parse().ok()?;
    let now = jiff::Timestamp::now();
    let now_instant = Instant::now();
    if at <= now {
        return Some(now_instant);
    }
    let ahead = now.duration_until(at);
    let ahead = Duration::try_from(ahead).ok()?;
    now_instant.checked_add(ahead)
}

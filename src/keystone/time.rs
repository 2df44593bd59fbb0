//! The times Keystone writes, read as instants of this process's monotonic clock.

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

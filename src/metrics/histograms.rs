//! Histograms of seconds, as every timed figure is kept.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// A family of histograms, one per label set.
pub(crate) type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// 100 µs to about 13 s.
pub(crate) fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

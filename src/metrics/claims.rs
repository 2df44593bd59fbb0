//! Claims decided and refused, by kind and kind of refusal.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::labels::{KindLabel, RefusalLabels, kind_label, refusal_label};
use kubeplace_policy::admission::Refusal;

/// Claims decided and refused, counted by the webhook and by the Placement API (which
/// refuses a claim that cannot be made before it reaches the cluster).
#[derive(Clone, Debug, Default)]
pub struct ClaimMetrics {
    /// Claims this replica decided (Allocations, writes of several objects, devices'
    /// claims), by kind.
    pub decided: Family<KindLabel, Counter>,
    /// Of those, the ones refused, by kind and kind of refusal.
    pub refused: Family<RefusalLabels, Counter>,
}

impl ClaimMetrics {
    /// Counts a claim decided; `refused` with its kind of refusal.
    pub fn claim(&self, kind: &str, refused: Option<Refusal>) {
        self.decided.get_or_create(&kind_label(kind)).inc();
        if let Some(refusal) = refused {
            self.refused
                .get_or_create(&RefusalLabels {
                    kind: kind.to_string(),
                    reason: refusal_label(refusal).to_string(),
                })
                .inc();
        }
    }
}

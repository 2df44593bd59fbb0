//! The label sets the metrics share: a kind, an admission outcome, a watch event, a refusal
//! (and how a kind of refusal is labelled).

use kubeplace_policy::admission::Refusal;
use prometheus_client::encoding::EncodeLabelSet;

/// A kind label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// An admission outcome: kind and `allowed`, `denied` or `invalid` (unreadable request).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    pub kind: String,
    pub verdict: String,
}

/// A watch event: kind and `apply`, `delete` or `relist`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    pub kind: String,
    pub event: String,
}

/// A claim refused: the kind of object and the kind of refusal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub kind: String,
    pub reason: String,
}

/// The label of a kind.
pub(crate) fn kind_label(kind: impl std::fmt::Display) -> KindLabel {
    KindLabel {
        kind: kind.to_string(),
    }
}

/// A kind of refusal as the metrics label it.
pub fn refusal_label(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::Invalid => "invalid",
        Refusal::NoRoom => "no_room",
        Refusal::OverQuota => "over_quota",
        Refusal::Busy => "busy",
        Refusal::Stale => "stale",
        Refusal::Unavailable => "unavailable",
        Refusal::Mirrored => "mirrored",
        Refusal::Denied => "denied",
    }
}

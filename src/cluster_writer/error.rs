//! Why a write to the cluster did not happen, by kind, so that each caller answers it in its
//! own terms: the Placement API as Placement's status and error code, `placement import` as
//! a line on the terminal, the open-writes controller as a log line.

use kubeplace_policy::admission::Refusal;

/// What a refused write was writing: Placement answers a claim it cannot make apart from a
/// provider it cannot write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Claim,
    Provider,
}

/// A write the cluster did not take.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum WriteError {
    /// Refused by kubeplace's admission (passed on by the API server) or by the API server
    /// itself: the kind of refusal, what was being written, and why.
    #[error("{detail}")]
    Refused {
        refusal: Refusal,
        written: Written,
        detail: String,
    },
    /// The object kept changing under the writer for every attempt: reading it again and
    /// retrying is the way on.
    #[error("{0}")]
    KeptChanging(String),
    /// The API server could not be reached, or refused for a reason of its own that no
    /// retry of the caller's mends (a missing grant, say).
    #[error("{0}")]
    Unavailable(String),
    /// An object could not be encoded for the API server or read back from it: a fault of
    /// kubeplace's, logged where it happened.
    #[error("the write could not be encoded for the cluster")]
    Internal,
}

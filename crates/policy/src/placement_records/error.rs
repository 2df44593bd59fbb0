//! Why a request's reading or writing of Placement's records failed, in Placement's terms;
//! the API maps each to its status and error code.

/// A failure of [`super::State`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("No resource provider with uuid {0} found")]
    NoProviderWithUuid(String),
    #[error("No resource provider named {0:?} found")]
    NoProviderNamed(String),
    /// A provider generation that is not the current one.
    #[error(
        "resource provider generation {sent} is not the current one ({current}); read it again and retry"
    )]
    StaleGeneration { sent: i64, current: u64 },
    /// Admission refused a provider write: why, and its message.
    #[error("{1}")]
    ProviderRefused(crate::admission::Refusal, String),
    /// Admission refused a claim: why, and its message.
    #[error("Unable to allocate inventory: {1}")]
    AllocationRefused(crate::admission::Refusal, String),
    /// The object is held by a write of several objects that is not finished yet.
    #[error("{}", crate::store::writes::held_message(key, write))]
    Busy {
        key: crate::store::ObjectKey,
        write: String,
    },
    /// The object is mirrored from the cluster: it changes with the cluster object, never
    /// through the API.
    #[error(
        "{} {} is mirrored from {from}: it changes with that object in the cluster, not through the Placement API",
        key.kind,
        key.name
    )]
    Mirrored {
        key: crate::store::ObjectKey,
        from: String,
    },
    /// A write under a read lock: a fault of the server, not of the request.
    #[error("a write was attempted under a read lock")]
    ReadOnly,
}

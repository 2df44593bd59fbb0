//! What kind of refusal a verdict is, decided where the refusal is made: what the writer
//! may do about it. Every surface maps the kind once — the webhook to the Status code and
//! reason the API server passes to kubectl and client-go, the Placement API to Placement's
//! status and error code — and reads it back the same way ([`Refusal::of_status`]): no
//! surface reads a refusal's words.

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Refusal {
    /// The object is wrong: change it.
    #[default]
    Invalid,
    /// A claim that does not fit what its providers have free.
    NoRoom,
    /// A claim over its project's quota.
    OverQuota,
    /// An object an unfinished write of several objects holds: retry once it is finished.
    Busy,
    /// Decided on a version of something that has changed since: read it again and retry.
    Stale,
    /// Nothing decides claims just now (a leader being elected, a new one catching up, the
    /// leader out of reach): retry in a moment.
    Unavailable,
    /// A name the cluster mirror holds: it changes with the cluster object it comes from.
    Mirrored,
    /// Not for this writer to write (objects only kubeplace makes).
    Denied,
}

impl Refusal {
    /// Every kind, for tests that walk them.
    pub const ALL: [Refusal; 8] = [
        Refusal::Invalid,
        Refusal::NoRoom,
        Refusal::OverQuota,
        Refusal::Busy,
        Refusal::Stale,
        Refusal::Unavailable,
        Refusal::Mirrored,
        Refusal::Denied,
    ];

    /// Whether the same write may succeed when sent again as it is, a moment later.
    pub fn is_retryable(self) -> bool {
        matches!(self, Refusal::Busy | Refusal::Stale | Refusal::Unavailable)
    }

    /// The HTTP status of the refusal as a Kubernetes Status: 422 for an invalid object (as
    /// the API server's own validation), 409 for a write to retry after reading again, 429
    /// (with a retry hint) while nothing decides, 403 for a write that cannot be made as it
    /// is.
    pub fn code(self) -> u16 {
        match self {
            Refusal::Invalid => 422,
            Refusal::Busy | Refusal::Stale => 409,
            Refusal::Unavailable => 429,
            Refusal::NoRoom | Refusal::OverQuota | Refusal::Mirrored | Refusal::Denied => 403,
        }
    }

    /// The Status reason: Kubernetes' own where one fits (`Invalid`, `Conflict`,
    /// `TooManyRequests`), kubeplace's where a client must tell two 403s or two 409s apart
    /// (a 403 `Forbidden` is the API server's RBAC, not a refusal of a write). A client that
    /// knows none of these still reads the code.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Invalid => "Invalid",
            Refusal::NoRoom => "NoRoom",
            Refusal::OverQuota => "OverQuota",
            Refusal::Busy => "Busy",
            Refusal::Stale => "Conflict",
            Refusal::Unavailable => "TooManyRequests",
            Refusal::Mirrored => "Mirrored",
            Refusal::Denied => "Denied",
        }
    }

    /// How many seconds a client waits before sending the write again, for a refusal that
    /// only time mends.
    pub fn retry_after_seconds(self) -> Option<u32> {
        (self == Refusal::Unavailable).then_some(1)
    }

    /// The kind of a Kubernetes Status, read back by its code and reason: a webhook's
    /// refusal as the API server passed it on, or the API server's own (409 on an object
    /// changed since it was read is [`Refusal::Stale`]; 500, 503 and 504, its own fault or a
    /// webhook it could not reach, such as a replica that has just died, are
    /// [`Refusal::Unavailable`]: nothing was stored, and the same write a moment later is
    /// judged afresh). `None` for a status no write refusal has (a missing RBAC grant).
    pub fn of_status(code: u16, reason: &str) -> Option<Refusal> {
        if let Some(kind) = Refusal::ALL
            .into_iter()
            .find(|k| k.code() == code && k.reason() == reason)
        {
            return Some(kind);
        }
        match code {
            409 => Some(Refusal::Stale),
            429 | 500 | 503 | 504 => Some(Refusal::Unavailable),
            422 | 400 => Some(Refusal::Invalid),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_read_back_from_its_code_and_reason() {
        for kind in Refusal::ALL {
            assert_eq!(
                Refusal::of_status(kind.code(), kind.reason()),
                Some(kind),
                "{kind:?}"
            );
        }
    }

    /// The API server's own faults, and a webhook it could not call (a replica killed while
    /// its endpoint was still listed), are retried; a missing grant is not.
    #[test]
    fn the_api_servers_own_faults_are_retried_and_a_missing_grant_is_not() {
        for code in [500, 503, 504] {
            assert_eq!(
                Refusal::of_status(code, "InternalError"),
                Some(Refusal::Unavailable),
                "{code}"
            );
        }
        assert_eq!(Refusal::of_status(403, "Forbidden"), None);
        assert_eq!(Refusal::of_status(401, "Unauthorized"), None);
    }

    #[test]
    fn only_what_time_mends_is_retried_and_only_then_is_a_4xx_asked_again() {
        for kind in Refusal::ALL {
            assert!((400..500).contains(&kind.code()), "{kind:?}");
            assert_eq!(
                kind.is_retryable(),
                matches!(kind.code(), 409 | 429),
                "{kind:?}"
            );
        }
        assert_eq!(Refusal::Unavailable.retry_after_seconds(), Some(1));
        assert_eq!(Refusal::NoRoom.retry_after_seconds(), None);
    }

    #[test]
    fn the_api_servers_own_refusals_are_read_too() {
        assert_eq!(Refusal::of_status(409, "Conflict"), Some(Refusal::Stale));
        assert_eq!(
            Refusal::of_status(409, "AlreadyExists"),
            Some(Refusal::Stale)
        );
        assert_eq!(
            Refusal::of_status(429, "TooManyRequests"),
            Some(Refusal::Unavailable)
        );
        assert_eq!(Refusal::of_status(422, "Invalid"), Some(Refusal::Invalid));
        assert_eq!(Refusal::of_status(403, "Denied"), Some(Refusal::Denied));
        assert_eq!(
            Refusal::of_status(403, "Forbidden"),
            None,
            "RBAC: a fault of the server's grants"
        );
    }
}

//! Parts of `GET /allocation_candidates` answers kept whole from one request to the next.
//!
//! A large answer is written in parts: its allocation requests a few thousand candidates a
//! part, its provider summaries a few thousand providers a part. A part asked for again is
//! sent from the bytes kept for it instead of being written anew:
//!
//! - a part of allocation requests, when it holds the same candidates at the same place of
//!   an answer at the same microversion with the same request groups, over an index whose
//!   slots hold the same providers (its slots' stamp): a request's bytes are its candidate's
//!   providers' uuids, its classes' names and amounts, and its groups' suffixes, nothing
//!   that changes with usage;
//! - a part of summaries, when it lists the same providers at the same place, each with the
//!   kept summary it was written from (compared by address, as list parts compare entries:
//!   the index drops a provider's kept summary whenever it changes the provider).

use std::sync::Arc;

use super::candidates::Candidate;
use super::ids::ProviderId;
use super::kept_parts::{self, KeptParts};
use super::microversion::Microversion;

/// Where a part of allocation requests is, and what its bytes are written against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestsKey {
    slots: u64,
    mv: Microversion,
    suffixes: Vec<String>,
    start: usize,
    count: usize,
}

/// What every part of requests of one answer is written against: the index's slots (their
/// stamp), the microversion and the request groups' suffixes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestsOf<'a> {
    pub(crate) slots: u64,
    pub(crate) mv: Microversion,
    pub(crate) suffixes: &'a [String],
}

impl RequestsOf<'_> {
    fn key(&self, start: usize, count: usize) -> RequestsKey {
        RequestsKey {
            slots: self.slots,
            mv: self.mv,
            suffixes: self.suffixes.to_vec(),
            start,
            count,
        }
    }
}

/// Where a part of provider summaries is, and in which shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SummariesKey {
    mv: Microversion,
    first: ProviderId,
    count: usize,
    /// Whether it is the first part (the others open with a comma).
    opens: bool,
}

/// What a part of summaries was written from: its providers and their kept summaries.
pub struct SummarisedFrom {
    providers: Vec<ProviderId>,
    summaries: Vec<Arc<[u8]>>,
}

/// A kept part of allocation requests.
pub type KeptRequests = kept_parts::KeptPart<Vec<Candidate>>;
/// A kept part of provider summaries.
pub type KeptSummaries = kept_parts::KeptPart<SummarisedFrom>;

/// The kept parts of a server's candidates answers, each kind within a number of bytes.
pub struct CandidatesParts {
    requests: KeptParts<RequestsKey, Vec<Candidate>>,
    summaries: KeptParts<SummariesKey, SummarisedFrom>,
}

impl CandidatesParts {
    /// Keeping at most `most_bytes` of each kind (the candidates a part of requests was
    /// written from counted with it).
    pub fn new(most_bytes: usize) -> CandidatesParts {
        CandidatesParts {
            requests: KeptParts::new(most_bytes),
            summaries: KeptParts::new(most_bytes),
        }
    }

    /// Keeping parts of any size (for tests of answers of a few candidates).
    #[cfg(test)]
    pub(crate) fn keeping_every_part(most_bytes: usize) -> CandidatesParts {
        CandidatesParts {
            requests: KeptParts::keeping_every_part(most_bytes),
            summaries: KeptParts::keeping_every_part(most_bytes),
        }
    }

    /// The part of requests kept for `candidates` from `start` of an answer written as `of`
    /// says.
    pub(crate) fn find_requests(
        &self,
        of: RequestsOf<'_>,
        start: usize,
        candidates: &[Candidate],
    ) -> Option<KeptRequests> {
        let key = of.key(start, candidates.len());
        self.requests
            .find(&key, |from| from.as_slice() == candidates)
    }

    /// Keeps `bytes`, the requests of `candidates` from `start`, when large enough and within
    /// the bound; the part to send either way.
    pub(crate) fn keep_requests(
        &self,
        of: RequestsOf<'_>,
        start: usize,
        candidates: &[Candidate],
        bytes: Vec<u8>,
    ) -> Result<KeptRequests, Vec<u8>> {
        let key = of.key(start, candidates.len());
        let besides = candidates.iter().map(Candidate::bytes).sum();
        self.requests.keep(key, candidates.to_vec(), besides, bytes)
    }

    /// The part of summaries kept for `providers` from `start` of an answer at `mv`, if
    /// written from the summaries `summary` gives now.
    pub(crate) fn find_summaries<'a>(
        &self,
        mv: Microversion,
        start: usize,
        providers: &[ProviderId],
        summary: impl Fn(ProviderId) -> Option<&'a Arc<[u8]>>,
    ) -> Option<KeptSummaries> {
        let key = SummariesKey {
            mv,
            first: *providers.first()?,
            count: providers.len(),
            opens: start == 0,
        };
        self.summaries.find(&key, |from| {
            from.providers == providers
                && kept_parts::same_entries(
                    from.providers.iter().copied(),
                    &from.summaries,
                    summary,
                )
        })
    }

    /// Keeps `bytes`, the summaries of `providers` from `start` written from `summaries`,
    /// when large enough and within the bound; the part to send either way.
    pub(crate) fn keep_summaries(
        &self,
        mv: Microversion,
        start: usize,
        providers: &[ProviderId],
        summaries: Vec<Arc<[u8]>>,
        bytes: Vec<u8>,
    ) -> Result<KeptSummaries, Vec<u8>> {
        let Some(&first) = providers.first() else {
            return Err(bytes);
        };
        let key = SummariesKey {
            mv,
            first,
            count: providers.len(),
            opens: start == 0,
        };
        let from = SummarisedFrom {
            providers: providers.to_vec(),
            summaries,
        };
        self.summaries.keep(key, from, 0, bytes)
    }
}

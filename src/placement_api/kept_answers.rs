//! The whole answers an API keeps for the index they were made from
//! ([`kubeplace_core::placement::kept_answers`]): candidates answers, and provider lists with
//! the mark of the provider generations they were written with. Asked again of the same
//! index (and generations), an answer is sent as it was, without searching or writing.

use std::sync::Arc;

use bytes::Bytes;

use kubeplace_core::placement::kept_answers::{Asked, KeptAnswers};
use kubeplace_core::placement::provider_tree::ProviderIndex;
use kubeplace_core::placement::response::{CandidatesPart, ListPart};

use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;

/// How many whole answers of each kind are kept, and of how many bytes in all: the bench
/// cloud's four unlimited searches (the largest 34 MB) and their limited forms, and its
/// largest lists (every provider, 35 MB). Their large parts are mostly the parts the
/// process keeps anyway (`KEPT_CANDIDATES_BYTES`, `KEPT_LIST_BYTES`), shared.
const KEPT: (usize, usize) = (64, 64 << 20);

/// What a request asks, as its kept answer is known by: its microversion and its query
/// string as sent.
pub(crate) fn asked(ctx: &Ctx, call: &Call) -> Asked {
    Asked {
        mv: ctx.mv,
        query: call.query.clone(),
    }
}

/// A provider list kept whole, with the generations' mark it was written at.
#[derive(Clone)]
pub(crate) struct KeptList {
    generations: u64,
    parts: Vec<Bytes>,
}

/// The answers one API keeps.
pub(crate) struct Answers {
    candidates: KeptAnswers<Asked, ProviderIndex, Vec<Bytes>>,
    lists: KeptAnswers<Asked, ProviderIndex, KeptList>,
}

impl Answers {
    pub(crate) fn new() -> Answers {
        Answers {
            candidates: KeptAnswers::new(KEPT.0, KEPT.1),
            lists: KeptAnswers::new(KEPT.0, KEPT.1),
        }
    }

    /// The candidates answer made for `asked` from `index` itself, in its parts.
    pub(crate) fn candidates(
        &self,
        asked: &Asked,
        index: &Arc<ProviderIndex>,
    ) -> Option<Vec<Bytes>> {
        self.candidates.find(asked, index)
    }

    /// Keeps the candidates answer made for `asked` from `index`.
    pub(crate) fn keep_candidates(
        &self,
        asked: Asked,
        index: &Arc<ProviderIndex>,
        parts: &[CandidatesPart],
    ) {
        let kept: Vec<Bytes> = parts.iter().map(KeptWhole::kept_whole).collect();
        let bytes = kept.iter().map(Bytes::len).sum();
        self.candidates.keep(asked, index, kept, bytes);
    }

    /// The list answered to `asked` from `index` itself with the generations at `mark`.
    pub(crate) fn list(
        &self,
        asked: &Asked,
        index: &Arc<ProviderIndex>,
        generations: u64,
    ) -> Option<Vec<Bytes>> {
        self.lists
            .find(asked, index)
            .filter(|kept| kept.generations == generations)
            .map(|kept| kept.parts)
    }
}

/// A part as kept with its whole answer: shared where the part is kept anyway, copied to its
/// own size where it was written for this answer alone (its buffer goes back to the spare
/// ones once sent).
trait KeptWhole {
    fn kept_whole(&self) -> Bytes;
}

impl KeptWhole for CandidatesPart {
    fn kept_whole(&self) -> Bytes {
        match self {
            CandidatesPart::Requests(kept) => Bytes::from_owner(kept.clone()),
            CandidatesPart::Summaries(kept) => Bytes::from_owner(kept.clone()),
            CandidatesPart::Written(written) => Bytes::copy_from_slice(written),
        }
    }
}

impl KeptWhole for ListPart {
    fn kept_whole(&self) -> Bytes {
        match self {
            ListPart::Kept(kept) => Bytes::from_owner(kept.clone()),
            ListPart::Written(written) => Bytes::copy_from_slice(written),
        }
    }
}

/// A list being sent, gathered to be kept once its last part is made.
pub(crate) struct ListKeeping {
    answers: Arc<Answers>,
    asked: Asked,
    index: Arc<ProviderIndex>,
    generations: u64,
    parts: Vec<Bytes>,
}

impl ListKeeping {
    pub(crate) fn new(
        answers: Arc<Answers>,
        asked: Asked,
        index: Arc<ProviderIndex>,
        generations: u64,
    ) -> ListKeeping {
        ListKeeping {
            answers,
            asked,
            index,
            generations,
            parts: Vec::new(),
        }
    }

    /// One more part of the list, in order.
    pub(crate) fn add(&mut self, part: &ListPart) {
        self.parts.push(part.kept_whole());
    }

    /// Keeps the list, every part made.
    pub(crate) fn keep(self) {
        let bytes = self.parts.iter().map(Bytes::len).sum();
        let list = KeptList {
            generations: self.generations,
            parts: self.parts,
        };
        self.answers
            .lists
            .keep(self.asked, &self.index, list, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_core::placement::microversion::Microversion;

    fn bytes(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|part| part.iter().copied()).collect()
    }

    #[test]
    fn a_list_is_sent_again_only_for_its_index_and_generations_and_once_whole() {
        let answers = Arc::new(Answers::new());
        let index = Arc::new(ProviderIndex::default());
        let asked = Asked {
            mv: Microversion(39),
            query: "member_of=a".into(),
        };
        let keeping = |generations| {
            let mut keeping = ListKeeping::new(
                Arc::clone(&answers),
                asked.clone(),
                Arc::clone(&index),
                generations,
            );
            keeping.add(&ListPart::Written(b"{\"resource_providers\": [".to_vec()));
            keeping.add(&ListPart::Written(b"]}".to_vec()));
            keeping
        };
        // A list whose last part was never made (its client went away) is not kept.
        drop(keeping(7));
        assert!(answers.list(&asked, &index, 7).is_none());

        keeping(7).keep();
        let kept = answers.list(&asked, &index, 7).expect("kept");
        assert_eq!(bytes(&kept), b"{\"resource_providers\": []}");
        assert!(
            answers.list(&asked, &index, 8).is_none(),
            "a generation moved since"
        );
        let other = Arc::new(ProviderIndex::default());
        assert!(answers.list(&asked, &other, 7).is_none(), "another index");
        let at_38 = Asked {
            mv: Microversion(38),
            ..asked.clone()
        };
        assert!(
            answers.list(&at_38, &index, 7).is_none(),
            "another microversion"
        );
    }
}

//! Whole answers kept with the index they were made from, within a number of answers and
//! of bytes. An answer asked again of the same index (no provider, inventory, usage, trait
//! or aggregate changed since) is the answer made before, byte for byte: it is sent again
//! without searching or writing anything.
//!
//! "The same index" is the same allocation. The store changes its index only through
//! `Arc::make_mut`, which, while a kept answer holds a weak pointer to the index, moves it
//! to a new allocation (or copies it, while a reader holds it) rather than changing it in
//! place; and an allocation a weak pointer still holds is never given to another value. So
//! the index found at a kept answer's address is the index the answer was made from.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::microversion::Microversion;
use crate::shelf::Shelf;

/// What an answer was asked: its microversion and its query string, as sent. Two query
/// strings that mean the same search are two answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Asked {
    pub mv: Microversion,
    pub query: String,
}

/// A kept answer and the index it was made from.
struct Kept<T, A> {
    from: Weak<T>,
    answer: A,
}

/// Answers kept by what was asked, each with the index it was made from (`T`). Room is
/// made first from the answers of an index no one holds any more, then from the least
/// recently sent.
pub struct KeptAnswers<K, T, A> {
    shelf: Mutex<Shelf<K, Kept<T, A>>>,
}

impl<K: Eq + Hash + Clone, T, A: Clone> KeptAnswers<K, T, A> {
    /// Keeping at most `most_answers` answers of at most `most_bytes` bytes in all.
    pub fn new(most_answers: usize, most_bytes: usize) -> Self {
        KeptAnswers {
            shelf: Mutex::new(Shelf::new(most_answers, most_bytes)),
        }
    }

    /// How many answers and bytes are kept.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (usize, usize) {
        let shelf = self.lock();
        (shelf.len(), shelf.bytes())
    }

    /// The answer kept for `asked`, if it was made from `index` itself.
    pub fn find<Q>(&self, asked: &Q, index: &Arc<T>) -> Option<A>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let mut shelf = self.lock();
        let kept = shelf.peek(asked)?;
        if std::ptr::eq(kept.from.as_ptr(), Arc::as_ptr(index)) {
            let answer = kept.answer.clone();
            shelf.touch(asked);
            return Some(answer);
        }
        // Made from an index no one holds any more: no request can be answered with it.
        if kept.from.strong_count() == 0 {
            shelf.remove(asked);
        }
        None
    }

    /// Keeps `answer` (of `bytes` bytes), made from `index`, for `asked`, in place of an
    /// answer kept for it before. An answer larger than every byte allowed is not kept.
    pub fn keep(&self, asked: K, index: &Arc<T>, answer: A, bytes: usize) {
        let kept = Kept {
            from: Arc::downgrade(index),
            answer,
        };
        // Handed back only when it could never fit: then it is not kept.
        let _ = self
            .lock()
            .keep(asked, kept, bytes, |k| k.from.strong_count() == 0);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shelf<K, Kept<T, A>>> {
        self.shelf.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(query: &str) -> Asked {
        Asked {
            mv: Microversion(39),
            query: query.to_string(),
        }
    }

    #[test]
    fn an_answer_is_found_only_for_the_index_it_was_made_from() {
        let answers: KeptAnswers<Asked, Vec<u32>, &str> = KeptAnswers::new(8, 1 << 20);
        // The store's index, changed as the store changes it.
        let mut index = Arc::new(vec![1, 2, 3]);
        answers.keep(asked("a"), &index, "first", 10);
        assert_eq!(answers.find(&asked("a"), &index), Some("first"));
        assert_eq!(answers.find(&asked("b"), &index), None);
        let other = Asked {
            mv: Microversion(38),
            query: "a".into(),
        };
        assert_eq!(answers.find(&other, &index), None, "another microversion");

        // Changed with no reader holding it: moved, not changed in place.
        Arc::make_mut(&mut index).push(4);
        assert_eq!(answers.find(&asked("a"), &index), None);
        assert_eq!(
            answers.kept(),
            (0, 0),
            "an answer of an index gone is dropped"
        );

        // Changed while a search holds it: copied; the search's index is not the store's.
        answers.keep(asked("a"), &index, "second", 10);
        let searched = Arc::clone(&index);
        Arc::make_mut(&mut index).push(5);
        assert_eq!(answers.find(&asked("a"), &index), None);
        assert_eq!(answers.find(&asked("a"), &searched), Some("second"));
        drop(searched);
        assert_eq!(answers.find(&asked("a"), &index), None);
        assert_eq!(answers.kept(), (0, 0));

        // Kept again for the index as it is now.
        answers.keep(asked("a"), &index, "third", 10);
        assert_eq!(answers.find(&asked("a"), &index), Some("third"));
        assert_eq!(
            *index,
            vec![1, 2, 3, 4, 5],
            "the index changed only where asked"
        );
    }

    #[test]
    fn answers_are_kept_within_their_number_and_bytes_the_least_recently_sent_going_first() {
        let answers: KeptAnswers<Asked, u8, u32> = KeptAnswers::new(3, 100);
        let index = Arc::new(0u8);
        answers.keep(asked("big"), &index, 0, 101);
        assert_eq!(answers.kept(), (0, 0), "larger than every byte allowed");

        answers.keep(asked("a"), &index, 1, 40);
        answers.keep(asked("b"), &index, 2, 40);
        assert_eq!(answers.find(&asked("a"), &index), Some(1));
        // 30 more bytes do not fit: "b", sent less recently than "a", goes.
        answers.keep(asked("c"), &index, 3, 30);
        assert_eq!(answers.find(&asked("b"), &index), None);
        assert_eq!(answers.kept(), (2, 70));

        answers.keep(asked("d"), &index, 4, 10);
        assert_eq!(answers.kept(), (3, 80));
        // A fourth answer: the least recently sent ("a", sent before "c" was kept) goes.
        answers.keep(asked("e"), &index, 5, 10);
        assert_eq!(answers.find(&asked("a"), &index), None);
        assert_eq!(answers.kept(), (3, 50));

        // Kept again: replaced, counted once.
        answers.keep(asked("c"), &index, 6, 20);
        assert_eq!(answers.find(&asked("c"), &index), Some(6));
        assert_eq!(answers.kept(), (3, 40));

        // Answers of an index gone make room before any of the index now.
        let older = Arc::new(1u8);
        answers.keep(asked("old"), &older, 7, 10);
        assert_eq!(answers.kept(), (3, 40), "the least recently sent made room");
        drop(older);
        answers.keep(asked("f"), &index, 8, 10);
        assert_eq!(answers.find(&asked("old"), &index), None);
        assert_eq!(answers.find(&asked("c"), &index), Some(6));
        assert_eq!(answers.find(&asked("e"), &index), Some(5));
        assert_eq!(answers.kept(), (3, 40));
    }
}

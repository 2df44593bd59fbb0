//! Room for candidates kept from one search to the next. An unlimited search over many
//! trees keeps tens of thousands of candidates (megabytes); gathered into fresh vectors,
//! each search has them grow by copying and the kernel map and zero their pages again once
//! the allocator has given the last search's back. A server that answers such searches one
//! after another hands each search the vectors the one before it used.

use std::sync::{Mutex, PoisonError};

use super::answer::Candidate;

/// Empty candidate vectors with room, kept for the searches to come.
pub struct SpareCandidates {
    kept: Mutex<Kept>,
    /// Bytes of room kept at most.
    max_bytes: usize,
}

struct Kept {
    vectors: Vec<Vec<Candidate>>,
    bytes: usize,
}

/// Room for a vector's candidates, in bytes.
fn room(v: &Vec<Candidate>) -> usize {
    v.capacity() * std::mem::size_of::<Candidate>()
}

impl SpareCandidates {
    /// Keeps up to `max_bytes` of room.
    pub const fn new(max_bytes: usize) -> Self {
        SpareCandidates {
            kept: Mutex::new(Kept {
                vectors: Vec::new(),
                bytes: 0,
            }),
            max_bytes,
        }
    }

    /// An empty vector: the one with the most room kept, else a new one.
    pub fn take(&self) -> Vec<Candidate> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((largest, _)) = kept
            .vectors
            .iter()
            .enumerate()
            .max_by_key(|(_, v)| v.capacity())
        else {
            return Vec::new();
        };
        let v = kept.vectors.swap_remove(largest);
        kept.bytes -= room(&v);
        v
    }

    /// Keeps `v`'s room for a later search (its candidates are dropped here), unless that
    /// would keep more than the bytes allowed: then the smallest vectors make way for a
    /// larger one, or it is dropped.
    pub fn give_back(&self, mut v: Vec<Candidate>) {
        v.clear();
        let size = room(&v);
        if size == 0 || size > self.max_bytes {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        while kept.bytes + size > self.max_bytes {
            let Some((smallest, _)) = kept
                .vectors
                .iter()
                .enumerate()
                .min_by_key(|(_, v)| v.capacity())
            else {
                break;
            };
            if kept.vectors[smallest].capacity() >= v.capacity() {
                return;
            }
            let dropped = kept.vectors.swap_remove(smallest);
            kept.bytes -= room(&dropped);
        }
        kept.bytes += size;
        kept.vectors.push(v);
    }

    /// Bytes of room kept now.
    pub fn bytes(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_room(n: usize) -> Vec<Candidate> {
        Vec::with_capacity(n)
    }

    /// A vector given back comes out empty with its room; the largest comes out first.
    #[test]
    fn the_largest_room_is_handed_out_first_and_empty() {
        let spare = SpareCandidates::new(1 << 20);
        let mut filled = with_room(100);
        filled.push(Candidate {
            allocations: Default::default(),
            mappings: Default::default(),
        });
        spare.give_back(with_room(10));
        spare.give_back(filled);
        spare.give_back(with_room(50));
        let first = spare.take();
        assert!(first.is_empty());
        assert_eq!(first.capacity(), 100);
        assert_eq!(spare.take().capacity(), 50);
        assert_eq!(spare.take().capacity(), 10);
        assert_eq!(spare.take().capacity(), 0, "nothing kept: a new vector");
        assert_eq!(spare.bytes(), 0);
    }

    /// The room kept never passes the bytes allowed: a larger vector pushes smaller ones
    /// out, one too large for the whole allowance or smaller than all kept is not kept.
    #[test]
    fn the_room_kept_stays_within_its_bytes() {
        let size = std::mem::size_of::<Candidate>();
        let spare = SpareCandidates::new(100 * size);
        let steps = [
            (40, 40, "kept"),
            (40, 80, "kept"),
            (30, 80, "no smaller one to make way: dropped"),
            (20, 100, "it fits: 40 + 40 + 20"),
            (5, 100, "smaller than every one kept: dropped"),
            (101, 100, "larger than the allowance: dropped"),
            (60, 100, "the 20 and a 40 made way: 60 + 40"),
        ];
        for (given, kept, why) in steps {
            spare.give_back(with_room(given));
            assert_eq!(spare.bytes(), kept * size, "after {given}: {why}");
        }
        let rooms: Vec<usize> = (0..3).map(|_| spare.take().capacity()).collect();
        assert_eq!(rooms, [60, 40, 0]);
    }
}

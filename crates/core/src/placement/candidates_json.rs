//! The `GET /allocation_candidates` body written straight into bytes: the same bytes
//! `serde_json` writes for the `CandidatesBody` of `response`, at a fraction of the cost
//! for the large answers (tens of megabytes) an unlimited query gets.
//!
//! Two costs dominate writing through serde: every string (each uuid and class name, tens
//! of thousands of times) is scanned for characters to escape as it is written, and every
//! candidate and summary sorts uuids, classes and traits by comparing strings. Here names
//! and uuids are checked once per answer and then copied, they are sorted by ranks (the
//! index keeps the providers' uuid order; classes and traits are ranked once per answer),
//! and a candidate's entries are gathered in buffers reused from one candidate to the next.

use std::sync::Arc;

use super::candidates::{Candidate, CandidateSet};
use super::ids::{ClassId, Id, ProviderId, TraitId};
use super::microversion::Microversion;
use super::provider_tree::{ProviderIndex, UuidOrder};

/// Each interned name's position in name order, so that sorting by name compares numbers,
/// and whether all of them are written as they are.
pub(crate) struct NameRanks {
    classes: Vec<u32>,
    traits: Vec<u32>,
    plain: bool,
}

impl NameRanks {
    pub(crate) fn of(index: &ProviderIndex) -> Self {
        fn ranks<'a, K: Ord>(
            names: impl Iterator<Item = (u32, &'a str)>,
            order: impl Fn(&'a str) -> K,
        ) -> Vec<u32> {
            let mut sorted: Vec<(u32, &str)> = names.collect();
            sorted.sort_unstable_by_key(|(_, name)| order(name));
            let mut rank = vec![0; sorted.len()];
            for (position, (raw, _)) in sorted.iter().enumerate() {
                rank[*raw as usize] = position as u32;
            }
            rank
        }
        let plain = index
            .classes
            .iter()
            .map(|(_, n)| n)
            .chain(index.traits.iter().map(|(_, n)| n))
            .all(is_plain);
        NameRanks {
            classes: ranks(index.classes.iter().map(|(id, n)| (id.raw(), n)), |n| n),
            // Placement's order of traits: the standard ones first, then the custom ones as
            // they were created.
            traits: ranks(index.traits.iter().map(|(id, n)| (id.raw(), n)), |n| {
                index.trait_rows().key(n)
            }),
            plain,
        }
    }

    fn class(&self, class: ClassId) -> u32 {
        self.classes[class.raw() as usize]
    }

    fn trait_rank(&self, t: TraitId) -> u32 {
        self.traits[t.raw() as usize]
    }
}

/// Whether `s` is written in JSON as it is: serde_json escapes control characters, the
/// quote and the backslash, nothing else.
pub(crate) fn is_plain(s: &str) -> bool {
    s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// Appends `s` as a JSON string, escaped exactly as `serde_json` escapes it.
pub(crate) fn push_str(out: &mut Vec<u8>, s: &str) {
    if is_plain(s) {
        push_quoted(out, s);
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Appends `s`, known to need no escaping, in quotes.
pub(crate) fn push_quoted(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

pub(crate) fn push_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Buffers one writer reuses from candidate to candidate.
#[derive(Default)]
pub(crate) struct Scratch<'a> {
    /// (uuid rank, class rank, provider, class name, amount) of one candidate.
    items: Vec<(u32, u32, ProviderId, &'a str, i64)>,
    /// (uuid rank, provider) of one mapping.
    uuids: Vec<(u32, ProviderId)>,
    resources: Vec<(u32, &'a str, i64, i64)>,
    traits: Vec<(u32, &'a str)>,
}

/// Writes allocation requests and provider summaries of one answer.
pub(crate) struct Writer<'a> {
    pub(crate) index: &'a ProviderIndex,
    pub(crate) set: &'a CandidateSet,
    pub(crate) mv: Microversion,
    pub(crate) ranks: &'a NameRanks,
    pub(crate) uuids: &'a UuidOrder,
}

impl<'a> Writer<'a> {
    fn uuid(&self, out: &mut Vec<u8>, uuid: &str) {
        if self.uuids.plain {
            push_quoted(out, uuid);
        } else {
            push_str(out, uuid);
        }
    }

    /// A provider's uuid: from the index's quoted uuids where it keeps them, so that an
    /// answer naming providers hundreds of thousands of times copies fixed-size entries of
    /// one table rather than reading each provider.
    fn provider_uuid(&self, out: &mut Vec<u8>, p: ProviderId) {
        match &self.uuids.quoted {
            Some(quoted) => out.extend_from_slice(&quoted[p.index()]),
            None => self.uuid(out, &self.index.get(p).uuid),
        }
    }

    fn name(&self, out: &mut Vec<u8>, name: &str) {
        if self.ranks.plain {
            push_quoted(out, name);
        } else {
            push_str(out, name);
        }
    }

    fn uuid_rank(&self, p: ProviderId) -> u32 {
        self.uuids.rank[p.index()]
    }

    /// One allocation request, as `Request`'s `Serialize` writes it: providers by uuid,
    /// each one's classes by name (providers sharing a uuid share an entry, a class named
    /// twice keeps its last amount), then from 1.34 the mappings.
    pub(crate) fn request(&self, out: &mut Vec<u8>, c: &Candidate, s: &mut Scratch<'a>) {
        let index = self.index;
        s.items.clear();
        s.items
            .extend(c.allocations.iter().map(|(p, class, amount)| {
                (
                    self.uuid_rank(*p),
                    self.ranks.class(*class),
                    *p,
                    index.classes.name(*class),
                    *amount,
                )
            }));
        // Stable: of two entries for one uuid and class, the later stays later.
        s.items.sort_by_key(|e| (e.0, e.1));
        out.extend_from_slice(b"{\"allocations\":");
        let dict = self.mv.at_least(12);
        out.push(if dict { b'{' } else { b'[' });
        let mut i = 0;
        while i < s.items.len() {
            let rank = s.items[i].0;
            let end = i + s.items[i..].iter().take_while(|e| e.0 == rank).count();
            if i > 0 {
                out.push(b',');
            }
            if dict {
                self.provider_uuid(out, s.items[i].2);
                out.extend_from_slice(b":{\"resources\":{");
            } else {
                out.extend_from_slice(b"{\"resource_provider\":{\"uuid\":");
                self.provider_uuid(out, s.items[i].2);
                out.extend_from_slice(b"},\"resources\":{");
            }
            let mut first = true;
            for j in i..end {
                let (_, class_rank, _, class, amount) = s.items[j];
                // A class named twice keeps its last amount.
                if j + 1 < end && s.items[j + 1].1 == class_rank {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                self.name(out, class);
                out.push(b':');
                push_int(out, amount);
            }
            out.extend_from_slice(b"}}");
            i = end;
        }
        out.push(if dict { b'}' } else { b']' });
        if self.mv.at_least(34) {
            out.extend_from_slice(b",\"mappings\":{");
            for (k, (suffix, providers)) in self.set.mappings(c).enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                push_str(out, suffix);
                out.extend_from_slice(b":[");
                s.uuids.clear();
                s.uuids
                    .extend(providers.iter().map(|p| (self.uuid_rank(*p), *p)));
                s.uuids.sort_unstable_by_key(|u| u.0);
                for (n, (_, p)) in s.uuids.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    self.provider_uuid(out, *p);
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.push(b'}');
    }

    /// `"uuid":{summary}`, as a member of `provider_summaries`: the provider's kept
    /// fragment at microversions that have one ([`super::fragments`]). The uuid is read only
    /// to render one, so a large answer of kept fragments reads no provider's uuid.
    pub(crate) fn summary_entry(&self, out: &mut Vec<u8>, p: ProviderId, s: &mut Scratch<'a>) {
        let index = self.index;
        let fragments = &index.get(p).fragments;
        fragments.summary(out, self.mv, |out| {
            self.summary_entry_fresh(out, &index.get(p).uuid, p, s)
        });
    }

    /// The provider's `"uuid":{summary}` member, when it is kept already.
    pub(crate) fn kept_summary_entry(&self, p: ProviderId) -> Option<&'a Arc<[u8]>> {
        self.index.get(p).fragments.kept_summary(self.mv)
    }

    /// [`Self::summary_entry`] rendered anew.
    pub(crate) fn summary_entry_fresh(
        &self,
        out: &mut Vec<u8>,
        uuid: &str,
        p: ProviderId,
        s: &mut Scratch<'a>,
    ) {
        self.uuid(out, uuid);
        out.push(b':');
        self.summary(out, p, s);
    }

    /// One provider summary, as `Summary`'s `Serialize` writes it.
    fn summary(&self, out: &mut Vec<u8>, p: ProviderId, s: &mut Scratch<'a>) {
        let Writer { index, set, mv, .. } = *self;
        let prov = index.get(p);
        out.push(b'{');
        if mv.at_least(29) {
            out.extend_from_slice(b"\"parent_provider_uuid\":");
            match prov.parent {
                Some(parent) => self.provider_uuid(out, parent),
                None => out.extend_from_slice(b"null"),
            }
            out.push(b',');
        }
        s.resources.clear();
        s.resources.extend(
            prov.inventories
                .iter()
                .filter(|(class, _)| mv.at_least(27) || set.requested_classes.contains(class))
                .map(|(class, inv)| {
                    (
                        self.ranks.class(*class),
                        index.classes.name(*class),
                        inv.capacity(),
                        prov.used(*class),
                    )
                }),
        );
        s.resources.sort_unstable_by_key(|r| r.0);
        out.extend_from_slice(b"\"resources\":{");
        for (n, (_, class, capacity, used)) in s.resources.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            self.name(out, class);
            out.extend_from_slice(b":{\"capacity\":");
            push_int(out, *capacity);
            out.extend_from_slice(b",\"used\":");
            push_int(out, *used);
            out.push(b'}');
        }
        out.push(b'}');
        if mv.at_least(29) {
            out.extend_from_slice(b",\"root_provider_uuid\":");
            self.provider_uuid(out, prov.root.unwrap_or(p));
        }
        if mv.at_least(17) {
            s.traits.clear();
            s.traits.extend(
                prov.traits()
                    .iter()
                    .map(|t| (self.ranks.trait_rank(t), index.traits.name(t))),
            );
            s.traits.sort_unstable_by_key(|t| t.0);
            out.extend_from_slice(b",\"traits\":[");
            for (n, (_, name)) in s.traits.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                self.name(out, name);
            }
            out.push(b']');
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for s in [
            "",
            "VCPU",
            "0c3b4a7e-8f7d-4b1e-9a55-2f1e6a0c9d11",
            "quote\"d",
            "back\\slash",
            "tab\there",
            "line\nfeed",
            "\u{7f}del",
            "ünïcödé ✓",
            "\u{1}\u{1f}",
        ] {
            let mut out = Vec::new();
            push_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        for n in [0, 1, -1, 512, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            push_int(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
    }
}

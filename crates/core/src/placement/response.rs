//! Placement-shaped JSON: `GET /allocation_candidates` and `GET /resource_providers`
//! responses at a microversion, and the error body.

use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};
use smallvec::SmallVec;

use super::candidates::{Candidate, CandidateSet};
use super::candidates_json::{NameRanks, Scratch, Writer, is_plain, push_quoted, push_str};
use super::candidates_parts::{CandidatesParts, KeptRequests, KeptSummaries, RequestsOf};
use super::ids::ProviderId;
use super::list_parts::{KeptPart, ListParts};
use super::microversion::Microversion;
use super::provider_tree::ProviderIndex;
use crate::runs::in_runs;

/// Placement's error body for a status and detail.
pub fn error_body(status: u16, detail: &str) -> Value {
    let title = match status {
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        _ => "Error",
    };
    json!({"errors": [{"status": status, "title": title, "detail": detail}]})
}

fn uuid(index: &ProviderIndex, p: ProviderId) -> Value {
    Value::String(index.get(p).uuid.to_string())
}

/// The root of a provider in a well-formed tree (the index keeps it).
fn root_of(index: &ProviderIndex, p: ProviderId) -> ProviderId {
    index.get(p).root.unwrap_or(p)
}

/// One inventory in Placement's JSON (its six fields).
pub fn inventory_json(i: &super::Inventory) -> Value {
    json!({
        "total": i.total,
        "reserved": i.reserved,
        "min_unit": i.min_unit,
        "max_unit": i.max_unit,
        "step_size": i.step_size,
        "allocation_ratio": i.allocation_ratio,
    })
}

/// The `GET /allocation_candidates` body, written straight to the serializer: a large answer
/// (tens of thousands of candidates, megabytes of JSON) is never built as a JSON tree first.
/// Objects list their keys in sorted order, as a JSON tree would.
pub fn candidates_body<'a>(
    index: &'a ProviderIndex,
    set: &'a CandidateSet,
    mv: Microversion,
) -> CandidatesBody<'a> {
    CandidatesBody { index, set, mv }
}

/// See [`candidates_body`].
pub struct CandidatesBody<'a> {
    index: &'a ProviderIndex,
    set: &'a CandidateSet,
    mv: Microversion,
}

/// A part of a candidates answer: kept from an earlier answer, or written now.
#[derive(Debug)]
pub enum CandidatesPart {
    /// Allocation requests kept, for this answer and later ones.
    Requests(KeptRequests),
    /// Provider summaries kept, for this answer and later ones.
    Summaries(KeptSummaries),
    /// Written in a buffer from the caller's [`Buffers`], not kept.
    Written(Vec<u8>),
}

impl AsRef<[u8]> for CandidatesPart {
    fn as_ref(&self) -> &[u8] {
        match self {
            CandidatesPart::Requests(part) => part.as_ref(),
            CandidatesPart::Summaries(part) => part.as_ref(),
            CandidatesPart::Written(bytes) => bytes,
        }
    }
}

/// Allocation requests, or provider summaries, a part of a candidates answer holds: about
/// 300 KiB of plain requests, well within a buffer of [`CHUNK`].
const PART_ENTRIES: usize = 1024;

/// Below this many candidates and summaries, [`CandidatesBody::to_json`] writes on one thread.
const WRITE_APART_FROM: usize = 4_096;

/// Providers whose kept summaries are looked up together before they are copied.
const SUMMARY_BATCH: usize = 16;

impl CandidatesBody<'_> {
    /// The body as JSON, in parts that joined in order are the same bytes as
    /// `serde_json::to_vec` gives (its summaries listed once). Written by hand
    /// ([`super::candidates_json`]) on up to `threads` threads: a large answer's allocation
    /// requests and provider summaries are cut into runs written apart, and each run is a
    /// part, so that a server can send them without copying them into one buffer.
    pub fn to_json_parts(&self, threads: usize) -> Vec<Vec<u8>> {
        // With nothing to keep them in, every part is written.
        self.to_json_parts_kept(threads, &FreshBuffers, None)
            .into_iter()
            .map(|part| match part {
                CandidatesPart::Written(bytes) => bytes,
                kept => kept.as_ref().to_vec(),
            })
            .collect()
    }

    /// [`Self::to_json_parts`], in buffers from `buffers`, in parts of [`PART_ENTRIES`] allocation requests or
    /// provider summaries (and what opens, joins and closes them), each sent from `kept`
    /// where it holds the part as it would be written now, else written and kept there when
    /// large enough.
    pub fn to_json_parts_kept(
        &self,
        threads: usize,
        buffers: &dyn Buffers,
        kept: Option<&CandidatesParts>,
    ) -> Vec<CandidatesPart> {
        let CandidatesBody { index, set, mv } = *self;
        let summaries = summarised(index, set);
        let ranks = NameRanks::of(index);
        let writer = Writer {
            index,
            set,
            mv,
            ranks: &ranks,
            uuids: index.uuid_order(),
        };
        let of = RequestsOf {
            slots: index.slots_stamp(),
            mv,
            suffixes: &set.suffixes,
        };
        let requests = |start: usize| {
            let run = &set.candidates[start..(start + PART_ENTRIES).min(set.candidates.len())];
            let found = kept.and_then(|k| k.find_requests(of, start, run));
            if let Some(found) = found {
                return CandidatesPart::Requests(found);
            }
            let mut out = buffers.take(CHUNK);
            let mut scratch = Scratch::default();
            for (i, candidate) in run.iter().enumerate() {
                if start + i > 0 {
                    out.push(b',');
                }
                writer.request(&mut out, candidate, &mut scratch);
            }
            let Some(kept) = kept else {
                return CandidatesPart::Written(out);
            };
            match kept.keep_requests(of, start, run, out) {
                Ok(part) => CandidatesPart::Requests(part),
                Err(out) => CandidatesPart::Written(out),
            }
        };
        let summaries_of = |start: usize| {
            let run = &summaries[start..(start + PART_ENTRIES).min(summaries.len())];
            let summary = |p: ProviderId| writer.kept_summary_entry(p);
            if let Some(found) = kept.and_then(|k| k.find_summaries(mv, start, run, summary)) {
                return CandidatesPart::Summaries(found);
            }
            let mut out = buffers.take(CHUNK);
            let mut scratch = Scratch::default();
            // The providers lie far apart in memory: finding a batch's kept members before
            // copying them lets those reads wait on memory together rather than in turn.
            for (b, batch) in run.chunks(SUMMARY_BATCH).enumerate() {
                let found: SmallVec<[_; SUMMARY_BATCH]> =
                    batch.iter().map(|p| summary(*p)).collect();
                for (i, (p, found)) in batch.iter().zip(found).enumerate() {
                    if start + b * SUMMARY_BATCH + i > 0 {
                        out.push(b',');
                    }
                    match found {
                        Some(entry) => out.extend_from_slice(entry),
                        None => writer.summary_entry(&mut out, *p, &mut scratch),
                    }
                }
            }
            let Some(kept) = kept else {
                return CandidatesPart::Written(out);
            };
            // Kept only when every summary written is kept (from 1.27).
            let written_from: Option<Vec<Arc<[u8]>>> =
                run.iter().map(|p| summary(*p).cloned()).collect();
            let Some(written_from) = written_from else {
                return CandidatesPart::Written(out);
            };
            match kept.keep_summaries(mv, start, run, written_from, out) {
                Ok(part) => CandidatesPart::Summaries(part),
                Err(out) => CandidatesPart::Written(out),
            }
        };
        let threads = if set.candidates.len() + summaries.len() < WRITE_APART_FROM {
            1
        } else {
            threads
        };
        let starts = |n: usize| (0..n).step_by(PART_ENTRIES).collect::<Vec<usize>>();
        let request_parts = in_runs(&starts(set.candidates.len()), threads, |run| {
            run.iter().map(|start| requests(*start)).collect::<Vec<_>>()
        });
        let summary_parts = in_runs(&starts(summaries.len()), threads, |run| {
            run.iter()
                .map(|start| summaries_of(*start))
                .collect::<Vec<_>>()
        });
        let written = |bytes: &[u8]| CandidatesPart::Written(bytes.to_vec());
        let mut parts = vec![written(b"{\"allocation_requests\":[")];
        parts.extend(request_parts.into_iter().flatten());
        parts.push(written(b"],\"provider_summaries\":{"));
        parts.extend(summary_parts.into_iter().flatten());
        parts.push(written(b"}}"));
        parts
    }

    /// [`Self::to_json_parts`] joined.
    pub fn to_json(&self, threads: usize) -> Vec<u8> {
        self.to_json_parts(threads).concat()
    }
}

impl Serialize for CandidatesBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut body = s.serialize_map(Some(2))?;
        body.serialize_entry("allocation_requests", &Requests(self))?;
        body.serialize_entry("provider_summaries", &Summaries(self))?;
        body.end()
    }
}

struct Requests<'b, 'a>(&'b CandidatesBody<'a>);

impl Serialize for Requests<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let CandidatesBody { index, set, mv } = self.0;
        s.collect_seq(set.candidates.iter().map(|c| Request {
            index,
            set,
            candidate: c,
            mv: *mv,
        }))
    }
}

struct Request<'a> {
    index: &'a ProviderIndex,
    set: &'a CandidateSet,
    candidate: &'a Candidate,
    mv: Microversion,
}

/// A candidate's allocations by provider uuid, sorted, each with its classes sorted by name;
/// providers that share a uuid share an entry, and a class named twice keeps its last amount.
fn allocations_by_uuid<'a>(
    index: &'a ProviderIndex,
    c: &Candidate,
) -> Vec<(&'a str, Vec<(&'a str, i64)>)> {
    // The allocations come sorted by provider then class: group by provider first, so
    // only a candidate's few providers, and each one's few classes, are sorted by name.
    let mut grouped: Vec<(&str, Vec<(&str, i64)>)> = Vec::with_capacity(4);
    let mut last: Option<ProviderId> = None;
    for (p, class, amount) in &c.allocations {
        let entry = (index.classes.name(*class), *amount);
        match grouped.last_mut() {
            Some((_, classes)) if last == Some(*p) => classes.push(entry),
            _ => grouped.push((&index.get(*p).uuid, vec![entry])),
        }
        last = Some(*p);
    }
    for (_, classes) in &mut grouped {
        classes.sort_by_key(|(name, _)| *name);
    }
    grouped.sort_by_key(|(uuid, _)| *uuid);
    // Providers sharing a uuid share an entry; a class named twice keeps its last amount.
    let mut merged: Vec<(&str, Vec<(&str, i64)>)> = Vec::with_capacity(grouped.len());
    for (uuid, classes) in grouped {
        match merged.last_mut() {
            Some((u, kept)) if *u == uuid => {
                for (class, amount) in classes {
                    match kept.iter_mut().find(|(c, _)| *c == class) {
                        Some(slot) => slot.1 = amount,
                        None => kept.push((class, amount)),
                    }
                }
                kept.sort_by_key(|(name, _)| *name);
            }
            _ => merged.push((uuid, classes)),
        }
    }
    merged
}

/// `{"CLASS": amount, …}`.
struct Resources<'b, 'a>(&'b [(&'a str, i64)]);

impl Serialize for Resources<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(class, amount)| (*class, *amount)))
    }
}

/// `{"resources": {…}}` (1.12+), or with the provider before 1.12.
struct ProviderAllocation<'b, 'a> {
    uuid: Option<&'a str>,
    resources: Resources<'b, 'a>,
}

impl Serialize for ProviderAllocation<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(uuid) = self.uuid {
            m.serialize_entry("resource_provider", &Uuid { uuid })?;
        }
        m.serialize_entry("resources", &self.resources)?;
        m.end()
    }
}

#[derive(Serialize)]
struct Uuid<'a> {
    uuid: &'a str,
}

impl Serialize for Request<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Request {
            index,
            set,
            candidate: c,
            mv,
        } = self;
        let grouped = allocations_by_uuid(index, c);
        let mut request = s.serialize_map(None)?;
        if mv.at_least(12) {
            let allocations = MapOf(|| {
                grouped.iter().map(|(uuid, classes)| {
                    (
                        *uuid,
                        ProviderAllocation {
                            uuid: None,
                            resources: Resources(classes),
                        },
                    )
                })
            });
            request.serialize_entry("allocations", &allocations)?;
        } else {
            // Before 1.12 a request lists its providers, each with its resources.
            let listed = SeqOf(|| {
                grouped.iter().map(|(uuid, classes)| ProviderAllocation {
                    uuid: Some(uuid),
                    resources: Resources(classes),
                })
            });
            request.serialize_entry("allocations", &listed)?;
        }
        if mv.at_least(34) {
            let mappings = MapOf(|| {
                set.mappings(c).map(|(suffix, ps)| {
                    let mut uuids: Vec<&str> = ps.iter().map(|p| &*index.get(*p).uuid).collect();
                    uuids.sort_unstable();
                    (suffix, uuids)
                })
            });
            request.serialize_entry("mappings", &mappings)?;
        }
        request.end()
    }
}

/// A closure that makes the same iterator again, serialized as a map (or a list) of what it
/// yields without collecting it first.
struct MapOf<F>(F);
struct SeqOf<F>(F);

impl<F, I, K, V> Serialize for MapOf<F>
where
    F: Fn() -> I,
    I: Iterator<Item = (K, V)>,
    K: Serialize,
    V: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map((self.0)())
    }
}

impl<F, I, T> Serialize for SeqOf<F>
where
    F: Fn() -> I,
    I: Iterator<Item = T>,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

struct Summaries<'b, 'a>(&'b CandidatesBody<'a>);

impl Serialize for Summaries<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let CandidatesBody { index, set, mv } = self.0;
        s.collect_map(summarised(index, set).into_iter().map(|p| {
            let uuid = &*index.get(p).uuid;
            (
                uuid,
                Summary {
                    index,
                    set,
                    p,
                    mv: *mv,
                },
            )
        }))
    }
}

/// The providers the summaries list, by uuid, sorted; of providers sharing a uuid, the last
/// listed is summarised.
fn summarised(index: &ProviderIndex, set: &CandidateSet) -> Vec<ProviderId> {
    let rank = &index.uuid_order().rank;
    let mut providers: Vec<(u32, ProviderId)> = Vec::new();
    let mut tree = Vec::new();
    for root in &set.summary_trees {
        // Read from the index's tree order when it has the tree, else walked.
        let members = match index.tree_in_order(*root) {
            Some(members) => members,
            None => {
                tree.clear();
                index.tree(*root, &mut tree);
                &tree
            }
        };
        for &p in members {
            if set
                .summary_only
                .as_ref()
                .is_some_and(|only| !only.contains(&p))
            {
                continue;
            }
            providers.push((rank[p.index()], p));
        }
    }
    last_of_each_rank(providers, rank.len())
}

/// Providers listed with their uuid ranks (below `ranks`), in rank order; of those sharing
/// a rank, the last listed. A list of an eighth of the ranks or more is placed by rank in
/// one pass, a shorter one sorted.
fn last_of_each_rank(mut listed: Vec<(u32, ProviderId)>, ranks: usize) -> Vec<ProviderId> {
    if listed.len() * 8 >= ranks {
        let mut by_rank: Vec<Option<ProviderId>> = vec![None; ranks];
        for (rank, p) in listed {
            by_rank[rank as usize] = Some(p);
        }
        return by_rank.into_iter().flatten().collect();
    }
    // Stable: providers sharing a rank keep the order they were listed in.
    listed.sort_by_key(|(rank, _)| *rank);
    let mut kept: Vec<(u32, ProviderId)> = Vec::with_capacity(listed.len());
    for entry in listed {
        match kept.last_mut() {
            Some(last) if last.0 == entry.0 => *last = entry,
            _ => kept.push(entry),
        }
    }
    kept.into_iter().map(|(_, p)| p).collect()
}

struct Summary<'a> {
    index: &'a ProviderIndex,
    set: &'a CandidateSet,
    p: ProviderId,
    mv: Microversion,
}

#[derive(Serialize)]
struct Usage {
    capacity: i64,
    used: i64,
}

impl Serialize for Summary<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Summary { index, set, p, mv } = self;
        let prov = index.get(*p);
        let mut summary = s.serialize_map(None)?;
        if mv.at_least(29) {
            summary.serialize_entry(
                "parent_provider_uuid",
                &prov.parent.map(|pp| &*index.get(pp).uuid),
            )?;
        }
        let mut resources: Vec<(&str, Usage)> = prov
            .inventories
            .iter()
            .filter(|(class, _)| mv.at_least(27) || set.requested_classes.contains(class))
            .map(|(class, inv)| {
                let usage = Usage {
                    capacity: inv.capacity(),
                    used: prov.used(*class),
                };
                (index.classes.name(*class), usage)
            })
            .collect();
        resources.sort_by_key(|(name, _)| *name);
        summary.serialize_entry(
            "resources",
            &MapOf(|| resources.iter().map(|(k, v)| (k, v))),
        )?;
        if mv.at_least(29) {
            summary.serialize_entry("root_provider_uuid", &*index.get(root_of(index, *p)).uuid)?;
        }
        if mv.at_least(17) {
            let mut traits: Vec<&str> =
                prov.traits().iter().map(|t| index.traits.name(t)).collect();
            index.trait_rows().sort(&mut traits);
            summary.serialize_entry("traits", &traits)?;
        }
        summary.end()
    }
}

/// The `GET /resource_providers` body for the given providers.
pub fn providers_body(index: &ProviderIndex, providers: &[ProviderId], mv: Microversion) -> Value {
    let list: Vec<Value> = providers
        .iter()
        .map(|p| {
            let prov = index.get(*p);
            let mut v = json!({"uuid": prov.uuid.to_string(), "name": prov.name.to_string()});
            if mv.at_least(14) {
                v["parent_provider_uuid"] =
                    prov.parent.map(|pp| uuid(index, pp)).unwrap_or(Value::Null);
                v["root_provider_uuid"] = uuid(index, root_of(index, *p));
            }
            v
        })
        .collect();
    let mut body = Map::new();
    body.insert("resource_providers".into(), Value::Array(list));
    Value::Object(body)
}

/// Appends the runs of a list written apart (each run its chunks) to `parts`, a comma
/// between runs.
fn listed(parts: &mut Vec<Vec<u8>>, runs: Vec<Vec<Vec<u8>>>) {
    for (i, run) in runs.into_iter().filter(|r| !r.is_empty()).enumerate() {
        if i > 0 {
            parts.push(b",".to_vec());
        }
        parts.extend(run);
    }
}

/// How large a buffer a large answer is written in: big enough that a body of tens of
/// megabytes is a few dozen parts, small enough that the allocator hands the same memory
/// back from one answer to the next, where buffers of the whole answer were fresh pages
/// (a tenth of an answer's time went to the kernel zeroing them).
const CHUNK: usize = 1 << 20;

/// Room kept for one entry (a candidate, a summary, a provider) in a chunk; a larger one
/// grows its chunk.
const ENTRY_ROOM: usize = 16 << 10;

/// Where the buffers of an answer written in parts come from: the allocator, or buffers a
/// server keeps from one answer to the next (a server that gives freed memory back to the
/// system at once would otherwise have the kernel map and zero every part's pages anew).
pub trait Buffers: Sync {
    /// An empty buffer with room for at least `capacity` bytes.
    fn take(&self, capacity: usize) -> Vec<u8>;
}

/// Fresh buffers from the allocator.
pub struct FreshBuffers;

impl Buffers for FreshBuffers {
    fn take(&self, capacity: usize) -> Vec<u8> {
        Vec::with_capacity(capacity)
    }
}

/// Output cut into [`CHUNK`]-sized buffers, each entry whole in one.
struct Chunks<'b> {
    buffers: &'b dyn Buffers,
    done: Vec<Vec<u8>>,
    current: Vec<u8>,
}

impl<'b> Chunks<'b> {
    /// For `entries` entries: a small answer gets a buffer of its size.
    fn for_entries(entries: usize, buffers: &'b dyn Buffers) -> Chunks<'b> {
        let first = entries.saturating_mul(1024).saturating_add(ENTRY_ROOM);
        Chunks {
            buffers,
            done: Vec::new(),
            current: buffers.take(first.min(CHUNK)),
        }
    }

    /// The buffer for the next entry: a new one when the current has no room for it.
    fn next(&mut self) -> &mut Vec<u8> {
        if self.current.capacity() - self.current.len() < ENTRY_ROOM {
            let full = std::mem::replace(&mut self.current, self.buffers.take(CHUNK));
            if !full.is_empty() {
                self.done.push(full);
            }
        }
        &mut self.current
    }

    /// Every buffer written, in order.
    fn done(mut self) -> Vec<Vec<u8>> {
        if !self.current.is_empty() {
            self.done.push(self.current);
        }
        self.done
    }
}

/// The links of a provider's `GET /resource_providers` entry: (path after the provider's,
/// relation, first microversion).
const LINKS: [(&str, &str, u16); 6] = [
    ("", "self", 0),
    ("/inventories", "inventories", 0),
    ("/usages", "usages", 0),
    ("/aggregates", "aggregates", 1),
    ("/traits", "traits", 6),
    ("/allocations", "allocations", 11),
];

/// The links Placement shows for the provider `uuid` at `mv`, in its order: (relation, href).
pub fn provider_links(
    uuid: &str,
    mv: Microversion,
) -> impl Iterator<Item = (&'static str, String)> {
    LINKS
        .into_iter()
        .filter(move |(_, _, from)| mv.at_least(*from))
        .map(move |(path, rel, _)| (rel, format!("/resource_providers/{uuid}{path}")))
}

/// The `GET /resource_providers` body of the Placement API: each provider with its
/// generation (which the index does not keep) and, as Placement shows them, its links,
/// Placement name and from 1.14 its parent and root, keys in sorted order as serde_json
/// writes a JSON object. Written in parts (in buffers from `buffers`) on up to `threads`
/// threads that joined are the body; a provider's entry is its kept fragment after the generation
/// ([`super::fragments`]) from 1.14.
pub fn providers_json_parts(
    index: &ProviderIndex,
    listed: &[(ProviderId, u64)],
    mv: Microversion,
    threads: usize,
    buffers: &dyn Buffers,
) -> Vec<Vec<u8>> {
    let entries = |run: &[(ProviderId, u64)]| {
        let mut out = Chunks::for_entries(run.len(), buffers);
        for (i, (p, generation)) in run.iter().enumerate() {
            let out = out.next();
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"generation\":");
            out.extend_from_slice(itoa::Buffer::new().format(*generation).as_bytes());
            let fragments = &index.get(*p).fragments;
            fragments.listed(out, mv, |out| listed_after_generation(out, index, *p, mv));
        }
        out.done()
    };
    let threads = if listed.len() < WRITE_APART_FROM {
        1
    } else {
        threads
    };
    let mut parts = vec![LIST_OPEN.to_vec()];
    self::listed(&mut parts, in_runs(listed, threads, entries));
    parts.push(LIST_CLOSE.to_vec());
    parts
}

/// The `GET /resource_providers` body of [`providers_json_parts`] made piece by piece: its
/// length is known first, and each part is made when asked for, so that a server sends one
/// while it makes the next. Only where every entry is kept (from 1.14): the length is the
/// kept fragments' lengths, and a part is copies of them.
pub struct ProvidersStream {
    index: Arc<ProviderIndex>,
    listed: Vec<(ProviderId, u64)>,
    mv: Microversion,
    /// Entries a part holds.
    entries_per_part: usize,
    /// The next part to make.
    next: Part,
    /// By part, the parts found kept when the length was worked out ([`Self::len`]).
    found: Vec<Option<KeptPart>>,
}

/// Providers to list with their generations, and the index they are in.
pub type Listed = (Arc<ProviderIndex>, Vec<(ProviderId, u64)>);

/// Where a [`ProvidersStream`] is.
#[derive(Clone, Copy)]
enum Part {
    /// The first part: what opens the list, then the first entries.
    Opening,
    /// The entries from this one on (and, in the last part, what closes the list).
    Entries(usize),
    Done,
}

/// What opens and closes the list body.
const LIST_OPEN: &[u8] = b"{\"resource_providers\":[";
const LIST_CLOSE: &[u8] = b"]}";

impl ProvidersStream {
    /// The body for `listed` at `mv`; below 1.14, where entries are not kept, `index` and
    /// `listed` are handed back.
    pub fn new(
        index: Arc<ProviderIndex>,
        listed: Vec<(ProviderId, u64)>,
        mv: Microversion,
    ) -> Result<ProvidersStream, Listed> {
        if !mv.at_least(14) {
            return Err((index, listed));
        }
        // About 1 MiB a part (an entry is at most a few hundred bytes but for odd names).
        let entries_per_part = 1024;
        Ok(ProvidersStream {
            index,
            listed,
            mv,
            entries_per_part,
            next: Part::Opening,
            found: Vec::new(),
        })
    }

    /// The index the list is written from.
    pub fn index(&self) -> &Arc<ProviderIndex> {
        &self.index
    }

    /// How many providers the list holds.
    pub fn entries(&self) -> usize {
        self.listed.len()
    }

    /// The whole body's length in bytes: of each part `kept` holds as it would be written
    /// now (found here once, and sent from there), else summed from the entries' kept
    /// fragments (rendered and kept for it where they are not yet). Only a body sent before
    /// it is made needs it, so it is worked out when asked for.
    pub fn len(&mut self, kept: &ListParts) -> u64 {
        let n = self.listed.len();
        let mut len = 0u64;
        self.found.clear();
        for start in (0..n.max(1)).step_by(self.entries_per_part) {
            let found = self.find_kept(kept, start);
            let (index, mv) = (&*self.index, self.mv);
            let (end, opens, closes) = self.part_from(start);
            let part = &self.listed[start..end];
            if let Some(found) = &found {
                len += found.as_ref().len() as u64;
            } else {
                let commas = part.len() - usize::from(opens && !part.is_empty());
                len += (commas
                    + if opens { LIST_OPEN.len() } else { 0 }
                    + if closes { LIST_CLOSE.len() } else { 0 }) as u64;
                for (p, generation) in part {
                    let kept = index
                        .get(*p)
                        .fragments
                        .listed_len(|out| listed_after_generation(out, index, *p, mv));
                    let digits = itoa::Buffer::new().format(*generation).len();
                    len += (b"{\"generation\":".len() + digits + kept) as u64;
                }
            }
            self.found.push(found);
        }
        len
    }

    /// Where the part from entry `start` ends, and whether it opens and closes the list.
    fn part_from(&self, start: usize) -> (usize, bool, bool) {
        let n = self.listed.len();
        let end = (start + self.entries_per_part).min(n);
        (end, start == 0, end == n)
    }

    /// The part from entry `start` as `kept` holds it, where it holds it as it would be
    /// written now.
    fn find_kept(&self, kept: &ListParts, start: usize) -> Option<KeptPart> {
        let (end, opens, closes) = self.part_from(start);
        let index = &*self.index;
        kept.find(&self.listed[start..end], opens, closes, |p| {
            index.get(p).fragments.kept_listed()
        })
    }

    /// Whether every part was found kept when the length was worked out: the body is then
    /// made of them at once.
    pub fn is_kept(&self) -> bool {
        !self.found.is_empty() && self.found.iter().all(Option::is_some)
    }

    /// Whether the body is empty (it never is: it has at least its brackets).
    pub fn is_empty(&self) -> bool {
        false
    }

    #[cfg(test)]
    pub(crate) fn with_entries_per_part(mut self, n: usize) -> Self {
        self.entries_per_part = n.max(1);
        self
    }
}

/// A part of a list: kept from an earlier answer, or written now.
#[derive(Debug)]
pub enum ListPart {
    /// Kept, for this answer and later ones.
    Kept(KeptPart),
    /// Written in a buffer from the caller's [`Buffers`], not kept.
    Written(Vec<u8>),
}

impl ProvidersStream {
    /// The next part, `None` once every part is made: sent from `kept` where it holds the
    /// part as it would be written now, else written in a buffer from `buffers` and kept
    /// there when it is large enough.
    pub fn next_part(&mut self, kept: &ListParts, buffers: &impl Buffers) -> Option<ListPart> {
        let start = match self.next {
            Part::Opening => 0,
            Part::Entries(start) => start,
            Part::Done => return None,
        };
        let (end, opens, closes) = self.part_from(start);
        // Looked for when the length was worked out, if it was.
        let found = match self.found.get_mut(start / self.entries_per_part) {
            Some(found) => found.take(),
            None => self.find_kept(kept, start),
        };
        if let Some(part) = found {
            self.next = if closes {
                Part::Done
            } else {
                Part::Entries(end)
            };
            return Some(ListPart::Kept(part));
        }
        let mut out = buffers.take(0);
        self.fill(&mut out);
        let index = &*self.index;
        let providers = &self.listed[start..end];
        let entries: Option<Vec<Arc<[u8]>>> = providers
            .iter()
            .map(|(p, _)| index.get(*p).fragments.kept_listed().cloned())
            .collect();
        let Some(entries) = entries else {
            return Some(ListPart::Written(out));
        };
        Some(match kept.keep(providers, entries, opens, closes, out) {
            Ok(part) => ListPart::Kept(part),
            Err(out) => ListPart::Written(out),
        })
    }

    /// Appends the next part to `out` (a buffer the caller may reuse from part to part);
    /// `false`, with nothing appended, once every part is made.
    pub fn fill(&mut self, out: &mut Vec<u8>) -> bool {
        // What opens and closes the list goes with the first and last entries, so that a
        // list of one part is one buffer and no part is a few bytes alone.
        let start = match self.next {
            Part::Opening => 0,
            Part::Entries(start) => start,
            Part::Done => return false,
        };
        let (end, _, closes) = self.part_from(start);
        out.reserve(LIST_OPEN.len() + (end - start) * 1024 + LIST_CLOSE.len());
        if start == 0 {
            out.extend_from_slice(LIST_OPEN);
        }
        for (i, (p, generation)) in self.listed[start..end].iter().enumerate() {
            if start + i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"generation\":");
            out.extend_from_slice(itoa::Buffer::new().format(*generation).as_bytes());
            let index = &*self.index;
            let mv = self.mv;
            index
                .get(*p)
                .fragments
                .listed(out, mv, |out| listed_after_generation(out, index, *p, mv));
        }
        if closes {
            out.extend_from_slice(LIST_CLOSE);
            self.next = Part::Done;
        } else {
            self.next = Part::Entries(end);
        }
        true
    }
}

/// A provider's `GET /resource_providers` entry after `{"generation":N`.
pub(crate) fn listed_after_generation(
    out: &mut Vec<u8>,
    index: &ProviderIndex,
    p: ProviderId,
    mv: Microversion,
) {
    let prov = index.get(p);
    let uuid = &*prov.uuid;
    out.extend_from_slice(b",\"links\":[");
    let mut first = true;
    for (path, rel, from) in LINKS {
        if !mv.at_least(from) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(b"{\"href\":");
        if is_plain(uuid) {
            out.extend_from_slice(b"\"/resource_providers/");
            out.extend_from_slice(uuid.as_bytes());
            out.extend_from_slice(path.as_bytes());
            out.push(b'"');
        } else {
            push_str(out, &format!("/resource_providers/{uuid}{path}"));
        }
        out.extend_from_slice(b",\"rel\":");
        push_quoted(out, rel);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"name\":");
    push_str(out, prov.shown_name());
    if mv.at_least(14) {
        out.extend_from_slice(b",\"parent_provider_uuid\":");
        match prov.parent {
            Some(parent) => push_str(out, &index.get(parent).uuid),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"root_provider_uuid\":");
        push_str(out, &index.get(root_of(index, p)).uuid);
    }
    out.extend_from_slice(b",\"uuid\":");
    push_str(out, uuid);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Inventory;
    use crate::placement::candidates::allocation_candidates;
    use crate::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
    use crate::placement::query::parse_candidates_query;

    #[test]
    fn summarised_providers_come_by_rank_the_last_listed_of_a_rank_kept() {
        // Ranks in a scrambled order, some shared (providers sharing a uuid).
        let listed: Vec<(u32, ProviderId)> = (0..200u32)
            .map(|i| ((i * 37 + 11) % 97, ProviderId(i)))
            .collect();
        let mut expected: std::collections::BTreeMap<u32, ProviderId> = Default::default();
        for (rank, p) in &listed {
            expected.insert(*rank, *p);
        }
        let expected: Vec<ProviderId> = expected.into_values().collect();
        // Placed by rank (200 listed of 97 ranks) and sorted (200 of a million).
        assert_eq!(last_of_each_rank(listed.clone(), 97), expected);
        assert_eq!(last_of_each_rank(listed, 1_000_000), expected);
    }

    /// Compute nodes of two NUMA cells with an SR-IOV function each, some of them used.
    fn cloud(trees: usize) -> ProviderIndex {
        let mut index = ProviderIndex::default();
        let record =
            |name: String, parent: Option<String>, classes: &[(&str, i64)], traits: &[&str]| {
                ProviderRecord {
                    uuid: String::new(),
                    placement_name: None,
                    name,
                    parent,
                    inventories: classes
                        .iter()
                        .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                        .collect(),
                    traits: traits.iter().map(|t| t.to_string()).collect(),
                    aggregates: Default::default(),
                }
            };
        for i in 0..trees {
            let cn = format!("cn{i:05}");
            let mut root = record(cn.clone(), None, &[("DISK_GB", 100)], &["COMPUTE_NODE"]);
            root.uuid = format!("00000000-0000-4000-8000-{i:012}");
            index.upsert_provider(root);
            for cell in 0..2 {
                let numa = format!("{cn}-numa{cell}");
                let mut r = record(
                    numa.clone(),
                    Some(cn.clone()),
                    &[("VCPU", 8), ("MEMORY_MB", 4096)],
                    &[],
                );
                r.uuid = format!("00000000-0000-4000-{:04}-{i:012}", 8100 + cell);
                index.upsert_provider(r);
                let mut pf = record(
                    format!("{numa}-pf"),
                    Some(numa),
                    &[("SRIOV_NET_VF", 4)],
                    &["HW_NIC_SRIOV"],
                );
                pf.uuid = format!("00000000-0000-4000-{:04}-{i:012}", 8200 + cell);
                index.upsert_provider(pf);
            }
            if i % 3 == 0 {
                index.upsert_allocations(
                    &format!("a{i}"),
                    ConsumerAllocations {
                        consumer: format!("c{i}"),
                        items: vec![(format!("{cn}-numa0"), "VCPU".to_string(), 2)],
                    },
                );
            }
        }
        index
    }

    /// Written apart on several threads, a large answer is the same bytes as written whole,
    /// at every microversion whose body differs and with numbered groups (mappings).
    #[test]
    fn odd_uuids_and_names_are_written_as_serde_writes_them() {
        let mut index = cloud(4);
        let odd = |name: &str, parent: Option<&str>, uuid: &str, traits: &[&str]| ProviderRecord {
            name: name.into(),
            uuid: uuid.into(),
            placement_name: None,
            parent: parent.map(Into::into),
            inventories: [("VCPU".to_string(), Inventory::with_total(4))].into(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
            aggregates: Default::default(),
        };
        // A quote, a backslash and a control character in uuids and in a trait's name;
        // two trees whose roots share a uuid.
        index.upsert_provider(odd("odd", None, "q\"u\\o\u{1}te", &["CUSTOM_\"ODD"]));
        index.upsert_provider(odd("odd-child", Some("odd"), "ünï-child", &[]));
        index.upsert_provider(odd("twin-a", None, "twin", &[]));
        index.upsert_provider(odd("twin-b", None, "twin", &["CUSTOM_B"]));
        let queries = ["resources=VCPU:1", "resources=VCPU:2&required=!CUSTOM_B"];
        each_answer(&index, &queries, |query, mv, set, body, whole| {
            assert!(set.candidates.len() > 4, "{query} at {mv:?}");
            let text = String::from_utf8_lossy(whole);
            assert!(text.contains(r#""q\"u\\o\u0001te""#), "{query} at {mv:?}");
            assert_eq!(
                String::from_utf8(body.to_json(1)).unwrap(),
                String::from_utf8(whole.to_vec()).unwrap(),
                "{query} at {mv:?}"
            );
        });
    }

    /// Calls `check` with each query's answer at each microversion that takes it, and the
    /// answer as serde_json writes it.
    fn each_answer(
        index: &ProviderIndex,
        queries: &[&str],
        mut check: impl FnMut(&str, Microversion, &CandidateSet, &CandidatesBody<'_>, &[u8]),
    ) {
        for query in queries {
            for mv in [10, 12, 17, 27, 29, 34, 39] {
                let mv = Microversion(mv);
                let Ok(q) = parse_candidates_query(query, mv) else {
                    continue;
                };
                let set = allocation_candidates(index, &q);
                let body = candidates_body(index, &set, mv);
                let whole = serde_json::to_vec(&body).unwrap();
                check(query, mv, &set, &body, &whole);
            }
        }
    }

    #[test]
    fn a_large_answer_written_apart_is_the_answer_written_whole() {
        let index = cloud(1_400);
        let queries = [
            "resources=VCPU:1,MEMORY_MB:512",
            "resources1=VCPU:1&resources2=SRIOV_NET_VF:1&group_policy=none",
        ];
        each_answer(&index, &queries, |query, mv, set, body, whole| {
            let items = set.candidates.len() + summarised(&index, set).len();
            // Numbered groups over nested providers are answered from 1.29.
            if query.starts_with("resources=") || mv.at_least(29) {
                assert!(
                    items >= WRITE_APART_FROM,
                    "{query} at {mv:?}: written apart"
                );
            }
            for threads in [1, 2, 3, 7] {
                assert!(
                    body.to_json(threads) == whole,
                    "{query} at {mv:?} on {threads} threads"
                );
                // A server sends the parts one after the other: the opening, middle and
                // end of the body, and parts of at most 1,024 requests or summaries (here
                // at least two of each).
                if items >= WRITE_APART_FROM && threads >= 2 && set.candidates.len() >= 2 {
                    assert!(body.to_json_parts(threads).len() >= 7, "{query} at {mv:?}");
                }
            }
            let parsed: Value = serde_json::from_slice(whole).unwrap();
            let requests = parsed["allocation_requests"].as_array().map(Vec::len);
            assert_eq!(requests, Some(set.candidates.len()));
        });
        // A small answer is written whole.
        let small = cloud(3);
        let q = parse_candidates_query("resources=VCPU:1", Microversion::LATEST).unwrap();
        let set = allocation_candidates(&small, &q);
        let body = candidates_body(&small, &set, Microversion::LATEST);
        assert_eq!(body.to_json(4), serde_json::to_vec(&body).unwrap());
    }

    /// The parts of an answer, as pointers to the bytes of those kept (a part found kept is
    /// the very bytes sent before), the answer they make joined, the answer as serde_json
    /// writes it, and the count of parts up to the last of requests.
    fn kept_parts_of(
        index: &ProviderIndex,
        query: &str,
        mv: Microversion,
        kept: &CandidatesParts,
    ) -> (Vec<Option<*const u8>>, Vec<u8>, Vec<u8>, usize) {
        let q = parse_candidates_query(query, mv).unwrap();
        let set = allocation_candidates(index, &q);
        let body = candidates_body(index, &set, mv);
        let parts = body.to_json_parts_kept(2, &FreshBuffers, Some(kept));
        let kinds = parts
            .iter()
            .map(|p| match p {
                CandidatesPart::Written(_) => None,
                kept => Some(kept.as_ref().as_ptr()),
            })
            .collect();
        let joined = parts.iter().flat_map(|p| p.as_ref().to_vec()).collect();
        let requests = 1 + set.candidates.len().div_ceil(PART_ENTRIES);
        (kinds, joined, serde_json::to_vec(&body).unwrap(), requests)
    }

    /// An answer from kept parts is the answer written whole: asked again, every part of
    /// requests (and from 1.27 of summaries) is the one kept; after a claim, only the part
    /// of summaries holding the claimed provider is written again; after a provider is put
    /// back with its uuid the requests are still found, after one takes a new uuid every
    /// part of requests is written again.
    #[test]
    fn an_answer_from_kept_parts_is_the_answer_written_whole() {
        let query = "resources=VCPU:1,MEMORY_MB:512";
        for mv in [12, 27, 29, 39].map(Microversion) {
            let mut index = cloud(1_400);
            let kept = CandidatesParts::keeping_every_part(1 << 30);
            let (first, joined, whole, requests) = kept_parts_of(&index, query, mv, &kept);
            assert!(joined == whole, "at {mv:?}");
            // The opening, at least three parts of requests (2,800 candidates or more),
            // then the summaries'.
            assert!(requests >= 4, "at {mv:?}");
            assert!(first[1..requests].iter().all(Option::is_some), "{mv:?}");
            let summaries = &first[requests + 1..first.len() - 1];
            assert!(summaries.len() >= 2);
            assert!(
                summaries.iter().all(|p| p.is_some() == mv.at_least(27)),
                "{mv:?} {first:?}"
            );
            let (again, joined, whole, _) = kept_parts_of(&index, query, mv, &kept);
            assert!(joined == whole && again == first, "at {mv:?}");

            // A claim on one NUMA node changes its summary, not the candidates.
            index.upsert_allocations(
                "vm",
                ConsumerAllocations {
                    consumer: "vm".into(),
                    items: vec![("cn00700-numa0".into(), "VCPU".into(), 1)],
                },
            );
            let (claimed, joined, whole, _) = kept_parts_of(&index, query, mv, &kept);
            assert!(joined == whole, "at {mv:?}");
            assert_eq!(claimed[..requests], first[..requests], "at {mv:?}");
            let changed = claimed
                .iter()
                .zip(&first)
                .filter(|(now, was)| now.is_some() && now != was)
                .count();
            assert_eq!(changed, usize::from(mv.at_least(27)), "at {mv:?}");

            // Put back with its uuid (a new trait): the requests are the same bytes.
            let mut root = ProviderRecord {
                uuid: "00000000-0000-4000-8000-000000000003".into(),
                placement_name: None,
                name: "cn00003".into(),
                parent: None,
                inventories: [("DISK_GB".to_string(), Inventory::with_total(100))].into(),
                traits: ["COMPUTE_NODE".to_string(), "CUSTOM_NEW".to_string()].into(),
                aggregates: Default::default(),
            };
            index.upsert_provider(root.clone());
            let (put_back, joined, whole, _) = kept_parts_of(&index, query, mv, &kept);
            assert!(joined == whole, "at {mv:?}");
            assert_eq!(put_back[..requests], first[..requests], "at {mv:?}");

            // A new uuid: every part of requests is written again.
            root.uuid = "00000000-0000-4000-8000-999999999999".into();
            index.upsert_provider(root);
            let (renamed, joined, whole, _) = kept_parts_of(&index, query, mv, &kept);
            assert!(joined == whole, "at {mv:?}");
            assert!(
                renamed[1..requests]
                    .iter()
                    .zip(&first[1..requests])
                    .all(|(now, was)| now.is_some() && now != was),
                "at {mv:?}"
            );
        }
    }
}

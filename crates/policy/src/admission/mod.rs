//! Admission: one function per kind deciding whether an object may be stored.
//!
//! The webhook and `kubeplace apply` both call [`admit`]; it reads the rest of the
//! cluster only through a [`Store`], never the network.

use kubeplace_api::Kind;

mod aggregate;
mod allocation;
mod extra_spec_definition;
mod flavor;
mod image;
mod placement_write;
mod project_quota;
mod provider_config;
mod refusal;
mod resource_provider;
mod server;
mod server_group;
mod service_profile;

pub use refusal::Refusal;

pub use allocation::PendingUsage;
pub use provider_config::{COMPUTE_NODE_ID, identification_key};

use serde::Serialize;

use crate::store::{ObjectKey, Store};
use kubeplace_api::Object;

/// What the API server is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// The answer: allowed or not, why, and warnings for the user either way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub allowed: bool,
    pub message: String,
    pub warnings: Vec<String>,
    /// What kind of refusal it is, when it is one ([`Refusal`]): each surface says it in
    /// its own terms, beside the message.
    #[serde(skip)]
    pub refusal: Refusal,
}

impl Verdict {
    /// Allowed, with no warnings.
    pub fn allowed() -> Verdict {
        Verdict {
            allowed: true,
            message: String::new(),
            warnings: Vec::new(),
            refusal: Refusal::default(),
        }
    }

    /// A rejection of an invalid object, with a message and no warnings.
    pub fn rejected(message: impl Into<String>) -> Verdict {
        Verdict::refused(Refusal::Invalid, message)
    }

    /// A refusal of this kind, with a message and no warnings.
    pub fn refused(refusal: Refusal, message: impl Into<String>) -> Verdict {
        Verdict {
            allowed: false,
            message: message.into(),
            warnings: Vec::new(),
            refusal,
        }
    }
}

/// The most bytes of problems a denial lists, and of warnings a verdict carries: past it the
/// rest are counted ("and 59,000 more problems"), not written. A Flavor of 60,000 bad extra
/// specs is then denied in a message of kilobytes, not megabytes, through the webhook
/// (whose answer the API server reads in full) as through `kubeplace apply`.
pub const MAX_LISTED_BYTES: usize = 64 * 1024;

/// Problems and warnings gathered while reviewing one object: every one counted, those that
/// fit in [`MAX_LISTED_BYTES`] kept in order.
#[derive(Debug, Default)]
pub(crate) struct Review {
    problems: Listed,
    warnings: Listed,
    /// The kind of the refusal, when every problem is of one that is not [`Refusal::Invalid`]
    /// (a claim that fits nowhere, or is over quota); an invalid object is invalid first.
    kind: Option<Refusal>,
}

/// Texts kept in order while they fit in [`MAX_LISTED_BYTES`], and how many did not.
#[derive(Debug, Default)]
struct Listed {
    kept: Vec<String>,
    /// Bytes of `kept` and the separators between them.
    bytes: usize,
    /// Texts that came after the list was full.
    more: usize,
}

/// How texts are joined in a message.
const SEPARATOR: &str = "; ";
/// Room left for the message's start (kind and name) and its end ("; and N more …").
const LISTED_ROOM: usize = 1024;

impl Listed {
    fn push(&mut self, text: String) {
        let budget = MAX_LISTED_BYTES - LISTED_ROOM;
        let separator = if self.kept.is_empty() {
            0
        } else {
            SEPARATOR.len()
        };
        if self.more > 0 || (!self.kept.is_empty() && self.bytes + separator + text.len() > budget)
        {
            self.more += 1;
            return;
        }
        // The first text is kept whatever its length, cut to fit.
        let text = if text.len() > budget {
            cut_to(text, budget)
        } else {
            text
        };
        self.bytes += separator + text.len();
        self.kept.push(text);
    }

    fn count(&self) -> usize {
        self.kept.len() + self.more
    }
}

/// `text` cut to at most `bytes` bytes, at a character's boundary, ending in `…`.
fn cut_to(mut text: String, bytes: usize) -> String {
    let ellipsis = '…';
    let mut end = bytes.saturating_sub(ellipsis.len_utf8()).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push(ellipsis);
    text
}

impl Review {
    /// A problem with the object itself.
    pub(crate) fn problem(&mut self, p: impl Into<String>) {
        self.refuse(Refusal::Invalid, p);
    }

    /// A problem of `kind`: the verdict is of the first kind found, unless some problem
    /// makes the object invalid.
    pub(crate) fn refuse(&mut self, kind: Refusal, p: impl Into<String>) {
        self.kind = match self.kind {
            _ if kind == Refusal::Invalid => Some(Refusal::Invalid),
            None => Some(kind),
            Some(first) => Some(first),
        };
        self.problems.push(p.into());
    }

    pub(crate) fn warn(&mut self, w: impl Into<String>) {
        self.warnings.push(w.into());
    }

    fn into_verdict(self, kind: Kind, name: &str) -> Verdict {
        let Review {
            problems,
            warnings,
            kind: refusal,
        } = self;
        let count = problems.count();
        let message = match count {
            0 => String::new(),
            1 => format!("{kind} {name:?} is invalid: {}", problems.kept[0]),
            n => {
                let mut message = format!(
                    "{kind} {name:?} has {n} problems: {}",
                    problems.kept.join(SEPARATOR)
                );
                if problems.more > 0 {
                    message += &format!(
                        "{SEPARATOR}and {} more problem{} (only the first {} are listed)",
                        problems.more,
                        if problems.more == 1 { "" } else { "s" },
                        problems.kept.len()
                    );
                }
                message
            }
        };
        let mut listed_warnings = warnings.kept;
        if warnings.more > 0 {
            listed_warnings.push(format!(
                "and {} more warning{}",
                warnings.more,
                if warnings.more == 1 { "" } else { "s" }
            ));
        }
        Verdict {
            allowed: message.is_empty(),
            message,
            warnings: listed_warnings,
            refusal: refusal.unwrap_or_default(),
        }
    }
}

/// Writes an object as the API server would: admitted as a create, or as an update of the
/// stored object of the same key, and stored when allowed.
pub fn admit_and_store(store: &mut Store, object: Object) -> Verdict {
    admit_and_store_beside(store, object, &PendingUsage::default())
}

/// [`admit_and_store`], with what claims admitted a moment ago hold although the store does
/// not show them yet (the claims ledger's pending claims).
pub fn admit_and_store_beside(
    store: &mut Store,
    object: Object,
    pending: &PendingUsage,
) -> Verdict {
    let key = ObjectKey::of(&object);
    let old = store.get_shared(&key);
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    let verdict = admit_with_pending(op, &object, old.as_deref(), store, pending);
    if verdict.allowed {
        match old {
            None => store.create(key, object),
            Some(_) => {
                store.apply(object);
            }
        }
    }
    verdict
}

/// [`admit_and_store`] for one of many objects written in order (a file applied): a run of
/// ResourceProviders is packed for the search once, after the run, not again as each child
/// joins. A provider's review reads provider records, never packed trees; any other review
/// may search (a server is placed, a claim weighed), so the packing is finished first. The
/// caller finishes it after the last object with [`Store::finish_repacks`].
pub fn admit_and_store_in_order(store: &mut Store, object: Object) -> Verdict {
    if object.kind() == Kind::ResourceProvider {
        store.defer_repacks();
    } else {
        store.finish_repacks();
    }
    admit_and_store(store, object)
}

/// A write of a name the cluster mirror holds: refused, since the mirrored object changes
/// with the cluster object it comes from and is never written.
fn mirrored_refusal(store: &Store, object: &Object) -> Option<Verdict> {
    if object.is_mirrored() {
        return Some(Verdict::refused(
            Refusal::Mirrored,
            format!(
                "{} {:?} carries {}, which only the cluster mirror sets",
                object.kind(),
                object.name(),
                kubeplace_api::cluster_source::MIRRORED_FROM_ANNOTATION
            ),
        ));
    }
    let from = store.get(&ObjectKey::of(object))?.mirrored_from()?;
    Some(Verdict::refused(
        Refusal::Mirrored,
        format!(
            "{} {:?} is mirrored from {from}: it changes with that object in the cluster and is not written; choose another name",
            object.kind(),
            object.name()
        ),
    ))
}

/// A change of an object an open PlacementWrite changes: allowed when it is that write's
/// own (marked by it, as the write leaves it), refused otherwise until the write is
/// finished: it was decided first.
fn held_by_write(store: &Store, write: &str, object: &Object) -> Verdict {
    let key = ObjectKey::of(object);
    let own = store
        .open_write(write)
        .and_then(|w| crate::store::writes::planned(w).ok())
        .into_iter()
        .flatten()
        .find(|c| c.key == key)
        .is_some_and(|c| crate::store::writes::is_own_change(write, &c, object, store.get(&key)));
    if own {
        Verdict::allowed()
    } else {
        Verdict::refused(
            Refusal::Busy,
            crate::store::writes::held_message(&key, write),
        )
    }
}

/// How a refusal of a write decided on an older version ends.
pub const READ_AGAIN: &str = "read it again and retry";

/// Whether a claim's change leaves what it charges, and to whom, alone (its project or
/// consumer type are annotations, outside the spec).
fn same_charge(old: &Object, new: &Object) -> bool {
    match (old, new) {
        (Object::Allocation(a), Object::Allocation(b)) => {
            crate::quota::charge_of(a) == crate::quota::charge_of(b)
        }
        _ => true,
    }
}

/// Decides on one request. For `Delete`, `object` is the object being deleted; for
/// `Update`, `old` is the stored object.
pub fn admit(
    operation: Operation,
    object: &Object,
    old: Option<&Object>,
    store: &Store,
) -> Verdict {
    admit_with_pending(operation, object, old, store, &PendingUsage::default())
}

/// A device allocation written to a ResourceClaim (by kube-scheduler), as the mirror will
/// hold it: judged for capacity against the store and what `pending` claims hold. Pods'
/// claims are charged to quotas, not refused by them, as pods' cores are.
pub fn admit_device_claim(
    a: &kubeplace_api::Allocation,
    store: &Store,
    pending: &PendingUsage,
) -> Verdict {
    let mut review = Review::default();
    allocation::review_capacity(a, store, pending, &mut review);
    review.into_verdict(Kind::Allocation, a.metadata.name.as_deref().unwrap_or(""))
}

/// [`admit`], with capacity that claims decided a moment ago hold although the store does
/// not show them yet (the claims ledger).
pub fn admit_with_pending(
    operation: Operation,
    object: &Object,
    old: Option<&Object>,
    store: &Store,
    pending: &PendingUsage,
) -> Verdict {
    // A change that leaves the spec alone (labels, annotations, finalizers) is not judged
    // again: objects admitted once stay editable, and a finalizer can always be removed.
    if operation == Operation::Update
        && old.is_some_and(|old| old.same_spec(object) && same_charge(old, object))
    {
        return Verdict::allowed();
    }
    if let Some(write) = store.write_on(&ObjectKey::of(object)) {
        return held_by_write(store, write, object);
    }
    if let Some(refusal) = mirrored_refusal(store, object) {
        return refusal;
    }
    let mut review = Review::default();
    match (operation, object) {
        (Operation::Delete, Object::ResourceProvider(rp)) => {
            resource_provider::review_delete(rp, store, &mut review)
        }
        (Operation::Delete, _) => {}
        (_, Object::ResourceProvider(rp)) => resource_provider::review(rp, store, &mut review),
        (_, Object::Allocation(a)) => {
            let old = match old {
                Some(Object::Allocation(o)) => Some(o),
                _ => None,
            };
            allocation::review(a, old, store, pending, &mut review)
        }
        (_, Object::ProviderConfig(pc)) => provider_config::review(pc, store, &mut review),
        (_, Object::ExtraSpecDefinition(d)) => extra_spec_definition::review(d, store, &mut review),
        (_, Object::Flavor(f)) => flavor::review(f, store, &mut review),
        (_, Object::Image(i)) => image::review(i, &mut review),
        (_, Object::ServiceProfile(sp)) => service_profile::review(sp, &mut review),
        (_, Object::Aggregate(a)) => aggregate::review(a, store, &mut review),
        (_, Object::ServerGroup(g)) => {
            let old = match old {
                Some(Object::ServerGroup(o)) => Some(o),
                _ => None,
            };
            server_group::review(g, old, &mut review)
        }
        (_, Object::PlacementWrite(w)) => placement_write::review(w, &mut review),
        (_, Object::ProjectQuota(q)) => project_quota::review(q, store, &mut review),
        (_, Object::DefaultProjectQuota(d)) => project_quota::review_default(d, &mut review),
        (_, Object::Server(s)) => {
            let old = match old {
                Some(Object::Server(o)) => Some(o),
                _ => None,
            };
            server::review(s, old, store, &mut review)
        }
    }
    review.into_verdict(object.kind(), object.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::object;

    /// A Flavor with `n` extra specs of the right key and a value of the wrong form.
    fn flavor_with_bad_specs(n: usize) -> Object {
        let mut o = object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: bad}\nspec: {vcpus: 1, memoryMb: 1}\n",
        );
        let Object::Flavor(f) = &mut o else {
            unreachable!()
        };
        for i in 0..n {
            f.spec
                .extra_specs
                .insert(format!("hw:numa_cpus.{i}"), format!("x{i}"));
        }
        o
    }

    /// The listed problems of a message, and the numbers its end gives.
    fn listed_and_more(message: &str) -> (usize, usize, usize) {
        let (list, tail) = message.rsplit_once("; and ").expect("a count of the rest");
        let (more, listed) = tail
            .strip_suffix(" are listed)")
            .and_then(|t| t.split_once(" more problems (only the first "))
            .expect(tail);
        (
            list.matches("spec.extraSpecs[").count(),
            more.parse().unwrap(),
            listed.parse().unwrap(),
        )
    }

    #[test]
    fn a_denial_of_many_problems_lists_the_first_and_counts_the_rest() {
        let v = admit(
            Operation::Create,
            &flavor_with_bad_specs(60_000),
            None,
            &Store::default(),
        );
        assert!(!v.allowed);
        assert!(v.message.len() <= MAX_LISTED_BYTES, "{}", v.message.len());
        assert!(
            v.message.starts_with(
                "Flavor \"bad\" has 60000 problems: spec.extraSpecs[\"hw:numa_cpus.0\"]=\"x0\": \"x0\" does not have the expected form"
            ),
            "{:.300}",
            v.message
        );
        let (written, more, listed) = listed_and_more(&v.message);
        assert_eq!(written, listed);
        assert_eq!(listed + more, 60_000);
        assert!(listed > 100, "{listed}");
        // A few problems are all listed, with no count of the rest.
        let v = admit(
            Operation::Create,
            &flavor_with_bad_specs(3),
            None,
            &Store::default(),
        );
        assert!(v.message.starts_with("Flavor \"bad\" has 3 problems: "));
        assert_eq!(v.message.matches("spec.extraSpecs[").count(), 3);
        assert!(!v.message.contains("more problem"), "{}", v.message);
    }

    #[test]
    fn one_long_problem_is_cut_and_warnings_are_bounded_too() {
        let mut review = Review::default();
        review.problem("é".repeat(MAX_LISTED_BYTES));
        for i in 0..100_000 {
            review.warn(format!("warning {i}"));
        }
        let v = review.into_verdict(Kind::Flavor, "f");
        assert!(v.message.len() <= MAX_LISTED_BYTES, "{}", v.message.len());
        assert!(v.message.starts_with("Flavor \"f\" is invalid: éé"));
        assert!(v.message.ends_with("é…"));
        let bytes: usize = v.warnings.iter().map(String::len).sum();
        assert!(bytes <= MAX_LISTED_BYTES, "{bytes}");
        assert_eq!(v.warnings[0], "warning 0");
        let last = v.warnings.last().unwrap();
        let more: usize = last
            .strip_prefix("and ")
            .and_then(|l| l.strip_suffix(" more warnings"))
            .expect(last)
            .parse()
            .unwrap();
        assert_eq!(v.warnings.len() - 1 + more, 100_000);
    }
}

//! A write of several objects over a cluster, all or nothing across crashes.
//!
//! Before any of its objects changes, the write is recorded whole as one PlacementWrite
//! object: every change, with the version it was decided on and the object as it leaves
//! it, each marked with the write's name. The leader's admission decides the record as
//! one claim (capacity, versions; kubeplace_policy::claims), and once the API server has
//! stored it the write has happened: every replica's store shows all of it from the moment
//! it sees the record (kubeplace_policy::store::writes). Its objects are then changed one
//! by one, and the record deleted. If the writer dies on the way, the leader finishes the
//! record from the cluster as it is ([`Cluster::finish`], run by
//! `controllers::open_writes`): each step is made from the version read now, so applying a
//! write twice, or from two places, changes each object once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use kube::api::{DeleteParams, PostParams, Preconditions};

use kubeplace_api::{Kind, Object, PlacementWrite};
use kubeplace_policy::admission::Refusal;
use kubeplace_policy::store::ObjectKey;
use kubeplace_policy::store::writes::{
    HELD_AT_MOST, PlannedChange, Step, next_step, record, write_name,
};

use super::error::{WriteError, Written};
use super::writer::{Cluster, Committed, FIELD_MANAGER, to_dynamic};

/// How many steps applying one change takes at most (each retried step read again).
const ATTEMPTS: u32 = 12;
/// How long a refused step waits before it is tried again: a replica whose store has not
/// seen the record yet refuses what only the record allows.
const REFUSED_BACKOFF: Duration = Duration::from_millis(100);

/// A change as the journal has it: key, the object before, the object after.
type JournalChange = (ObjectKey, Option<Object>, Option<Object>);

impl Cluster {
    /// Commits the changes of one write that touches several objects: records it, applies
    /// each change, deletes the record. Refused or failed before the record is stored,
    /// nothing changed; once it is stored, the write is made, here or by the leader, and the
    /// objects written here are returned.
    pub(crate) async fn commit_whole(
        &self,
        changes: &[JournalChange],
    ) -> Result<Committed, WriteError> {
        let name = write_name(SystemTime::now(), nonce());
        let (record, planned) = record(&name, &self.writer, changes);
        let records = self.api(Kind::PlacementWrite);
        let body = to_dynamic(&Object::PlacementWrite(record)).map_err(internal)?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..Default::default()
        };
        let stored = records
            .create(&params, &body)
            .await
            .map_err(record_refused)?;
        // The write has happened: from here on it is finished, whatever fails.
        let mut written = Vec::new();
        for (change, (_, before, _)) in planned.iter().zip(changes) {
            match self.apply(&name, change, Some(before.clone()), true).await {
                Ok(object) => written.extend(object),
                Err(e) => {
                    tracing::warn!(write = %name, kind = %change.key.kind, name = %change.key.name, error = %e,
                        "a change of a recorded Placement write could not be made now; the leader finishes it");
                    return Ok(Committed {
                        objects: written,
                        finished_write: None,
                    });
                }
            }
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: stored.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        let finished = match records.delete(&name, &params).await {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(e) => {
                tracing::warn!(write = %name, error = %e, "a finished Placement write's record could not be deleted; the leader deletes it");
                false
            }
        };
        Ok(Committed {
            objects: written,
            finished_write: finished.then_some(name),
        })
    }

    /// Finishes a write whose writer left it open: applies each change from the cluster as
    /// it is now, then deletes the record.
    pub(crate) async fn finish(&self, write: &PlacementWrite) -> Result<(), String> {
        let name = write.metadata.name.clone().unwrap_or_default();
        let changes = kubeplace_policy::store::writes::planned(write)?;
        // A reader that has not seen the record by now never will hold for it.
        let readers_behind = kubeplace_policy::store::writes::decided_at(&name)
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .is_none_or(|age| age < HELD_AT_MOST);
        for change in &changes {
            self.apply(&name, change, None, readers_behind)
                .await
                .map_err(|e| {
                    format!(
                        "the {} {} could not be written: {}",
                        change.key.kind, change.key.name, e
                    )
                })?;
        }
        let records = self.api(Kind::PlacementWrite);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: write.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match records.delete(&name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(format!("its record could not be deleted: {e}")),
        }
    }

    /// Applies one change of write `write` until it is made: from `known` first (the object
    /// the writer decided on, `Some(None)` for a creation), then from what is read.
    async fn apply(
        &self,
        write: &str,
        change: &PlannedChange,
        mut known: Option<Option<Object>>,
        mark_deletion: bool,
    ) -> Result<Option<Object>, WriteError> {
        let api = self.api(change.key.kind);
        let name = &change.key.name;
        let unavailable = |e: kube::Error| {
            WriteError::Unavailable(format!("the write could not be made in the cluster: {e}"))
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..Default::default()
        };
        for attempt in 0..ATTEMPTS {
            let current = match known.take() {
                Some(known) => known,
                None => self.read(&change.key).await.map_err(|e| {
                    WriteError::Unavailable(format!(
                        "the write could not be made in the cluster: {e}"
                    ))
                })?,
            };
            let step = next_step(write, change, current.as_ref(), mark_deletion);
            let sent = match step {
                Step::Done(object) => return Ok(object),
                Step::Create(object) => {
                    let body = to_dynamic(&object).map_err(internal)?;
                    api.create(&params, &body).await.map(Some)
                }
                Step::Replace(object) | Step::Mark(object) => {
                    let body = to_dynamic(&object).map_err(internal)?;
                    api.replace(name, &params, &body).await.map(Some)
                }
                Step::Delete {
                    uid,
                    resource_version,
                } => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid,
                            resource_version,
                        }),
                        ..Default::default()
                    };
                    api.delete(name, &params).await.map(|_| None)
                }
            };
            match sent {
                // Worked out again from the object as stored: done, or the next step.
                Ok(Some(stored)) => {
                    let object =
                        crate::cache::to_object(change.key.kind, &stored).map_err(internal)?;
                    known = Some(Some(object));
                }
                Ok(None) => return Ok(None),
                // Another version than the one read, or gone, or there already: read again.
                Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => {}
                // Refused by a replica that has not seen the record yet.
                Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 422) => {
                    tracing::debug!(write, kind = %change.key.kind, %name, attempt, reason = %s.message,
                        "a change of a recorded write was refused; trying again");
                    tokio::time::sleep(REFUSED_BACKOFF * (attempt + 1)).await;
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
        Err(WriteError::KeptChanging(format!(
            "the {} {name} kept changing while a recorded write was applied to it",
            change.key.kind
        )))
    }
}

/// A failure to encode or read an object: a fault of kubeplace's, answered as one.
fn internal(e: impl std::fmt::Display) -> WriteError {
    tracing::error!(error = %e, "a recorded Placement write could not be encoded or read");
    WriteError::Internal
}

/// A number no other write of this process has: the process id and a count.
fn nonce() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    (u64::from(std::process::id()) << 40) | (COUNT.fetch_add(1, Ordering::Relaxed) & 0xff_ffff_ffff)
}

/// What the refusal of a write's record means to a Placement client: someone else changed
/// what it was decided on, or holds it, or nothing decides claims just now (409
/// `placement.concurrent_update`, read again and retry); or the write does not fit (409, as a
/// claim that does not fit). Its kind is read from the Status' code and reason.
fn record_refused(e: kube::Error) -> WriteError {
    let kube::Error::Api(s) = e else {
        return WriteError::Unavailable(format!(
            "the write could not be recorded in the cluster: {e}"
        ));
    };
    match Refusal::of_status(s.code, &s.reason) {
        Some(refusal) => WriteError::Refused {
            refusal,
            written: Written::Claim,
            detail: if refusal.is_retryable() {
                format!(
                    "Another writer changed what this write reads first, or claims cannot be decided just now ({}); read it again and retry.",
                    s.message
                )
            } else {
                format!("Unable to allocate inventory: {}", s.message)
            },
        },
        None => WriteError::Unavailable(format!(
            "the write could not be recorded in the cluster: {}",
            s.message
        )),
    }
}

//! A consistent read of a live Placement's whole state, for `kubeplace placement import` (the
//! source) and `export` (the target it writes differences into).
//!
//! Read at microversion 1.39: the custom resource classes and traits, the providers, per
//! provider its inventories, traits, aggregates and allocations (each answer carries the
//! provider's generation), then each consumer's allocations with its project, user, type and
//! generation. Placement moves a provider's generation on every change of its inventories,
//! traits, aggregates and allocations, so when the list of providers read again at the end
//! gives every provider the generation (and name and parent, which a rename or a new parent
//! change without moving it) that its own reads gave, and the custom names are the same,
//! nothing changed in between: the snapshot is one state of Placement. Otherwise the providers
//! that moved, and the consumers on them, are read again, until a round sees no change
//! (at most [`MAX_ROUNDS`]).
//!
//! What Placement could not hold is refused, naming the provider or consumer: a uuid that is
//! not one, a generation that is not a whole number, two providers whose uuids differ only
//! in case (a uuid names one provider whatever its case). So is more than `--max-providers`
//! providers, or `--max-allocations` allocations (counted as they are read, on the
//! providers' side and on the consumers'). The answers are typed ([`answers`]); the snapshot
//! is the policy crate's ([`kubeplace_policy::sync::Snapshot`]).

mod answers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kubeplace_api::Inventory;
use kubeplace_policy::placement_records::CustomNameSet;
use kubeplace_policy::sync::{Consumer, Provider, Snapshot, parents_first};

pub(crate) use self::answers::Scalar;
use self::answers::{ListError, shortened};
use super::exit::Exit;
use super::placement_client::{ClientError, PlacementClient, RunLimits};

/// How many times the providers that moved are read again before giving up.
pub const MAX_ROUNDS: usize = 8;

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(
        "Placement kept changing while it was read: after {rounds} rounds, {moved} still moved between two reads ({example}); retry when it is quieter"
    )]
    KeptChanging {
        rounds: usize,
        moved: usize,
        example: String,
    },
    #[error(
        "Placement has more than {max} {what}, more than {flag} lets kubeplace read; raise {flag} for a Placement that large"
    )]
    TooMany {
        what: &'static str,
        max: usize,
        flag: &'static str,
    },
    #[error(
        "Placement lists {first} and {second}, whose uuids differ only in case: a uuid names one provider whatever its case, so Placement cannot hold both; delete one of them there first"
    )]
    SameUuid { first: String, second: String },
}

/// An answer that is not what Placement sends, naming what in it is wrong.
fn unexpected(path: &str, reason: String) -> ReadError {
    ReadError::Client(ClientError::Unexpected {
        method: http::Method::GET,
        path: path.to_string(),
        reason,
    })
}

/// `field` of `whose`, if it is a uuid; else why not.
fn uuid_of(
    got: &Scalar,
    whose: &dyn Fn() -> String,
    field: &str,
    path: &str,
) -> Result<String, ReadError> {
    got.uuid().map(str::to_string).ok_or_else(|| {
        unexpected(
            path,
            format!(
                "{}: its {field} is {got}, not a uuid (32 hexadecimal digits in groups of 8-4-4-4-12)",
                whose()
            ),
        )
    })
}

/// `field` of `whose`, if it is a generation; else why not.
fn generation_of(
    got: &Scalar,
    whose: &dyn Fn() -> String,
    field: &str,
    path: &str,
) -> Result<u64, ReadError> {
    got.whole().ok_or_else(|| {
        unexpected(
            path,
            format!(
                "{}: its {field} is {got}, not a generation (a whole number, 0 or more)",
                whose()
            ),
        )
    })
}

/// What the list of providers says of one.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    name: String,
    parent: Option<String>,
    generation: u64,
}

/// Progress lines on standard error, at most one every two seconds.
pub struct Progress {
    command: &'static str,
    last: Option<Instant>,
    quiet: bool,
}

impl Progress {
    pub fn new(command: &'static str, quiet: bool) -> Progress {
        Progress {
            command,
            last: None,
            quiet,
        }
    }

    /// A line now.
    pub fn say(&mut self, what: &str) {
        if !self.quiet {
            let _ = writeln!(
                std::io::stderr(),
                "kubeplace placement {}: {what}",
                self.command
            );
        }
        self.last = Some(Instant::now());
    }

    /// A line if the last was two seconds ago or more.
    pub fn tick(&mut self, what: impl FnOnce() -> String) {
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
        {
            self.say(&what());
        }
    }
}

/// Reads the whole of Placement, consistently (see the module's doc), over `connections`
/// connections side by side, within `limits`.
pub fn read(
    client: &mut PlacementClient,
    connections: usize,
    limits: &RunLimits,
    progress: &mut Progress,
) -> Result<Snapshot, ReadError> {
    let mut providers: HashMap<String, Provider> = HashMap::new();
    let mut on_provider: HashMap<String, BTreeMap<String, BTreeMap<String, i64>>> = HashMap::new();
    let mut consumers: HashMap<String, Consumer> = HashMap::new();
    let started = Instant::now();
    let mut last_moved = (0, String::new());
    for round in 1..=MAX_ROUNDS {
        let classes = custom_classes(client)?;
        let traits = custom_traits(client)?;
        let listing = list_providers(client, limits.max_providers)?;
        // Forget what was read of providers that moved (or went) since.
        providers.retain(|uuid, p| {
            listing.get(uuid).is_some_and(|l| {
                l.generation == p.generation && l.name == p.name && l.parent == p.parent
            })
        });
        let mut stale: BTreeSet<String> = BTreeSet::new();
        on_provider.retain(|uuid, allocations| {
            let keep = providers.contains_key(uuid);
            if !keep {
                stale.extend(allocations.keys().cloned());
            }
            keep
        });
        let mut moved: Vec<String> = Vec::new();
        let todo: Vec<(&String, &Listed)> = listing
            .iter()
            .filter(|(uuid, _)| !providers.contains_key(*uuid))
            .collect();
        // Allocations held, on the providers' side and on the consumers', each counted
        // against --max-allocations as they are read.
        let allowance = |held: usize| Allowance {
            held: AtomicUsize::new(held),
            max: limits.max_allocations,
        };
        let on_providers = allowance(on_provider.values().map(BTreeMap::len).sum());
        let read = side_by_side(client, connections, &todo, "providers", progress, |c, t| {
            read_provider(c, t.0, t.1, &on_providers)
        })?;
        for ((uuid, _), result) in todo.iter().zip(read) {
            match result {
                Some((p, allocations)) => {
                    stale.extend(allocations.keys().cloned());
                    on_provider.insert((*uuid).clone(), allocations);
                    providers.insert((*uuid).clone(), p);
                }
                None => moved.push(format!("provider {uuid}")),
            }
        }
        // The consumers the providers name; read again those on a provider read this round.
        let wanted: BTreeSet<String> = on_provider
            .values()
            .flat_map(|a| a.keys().cloned())
            .collect();
        consumers.retain(|c, _| wanted.contains(c) && !stale.contains(c));
        let on_consumers = allowance(consumers.values().map(|c| c.allocations.len()).sum());
        let todo: Vec<&String> = wanted
            .iter()
            .filter(|c| !consumers.contains_key(*c))
            .collect();
        let read = side_by_side(client, connections, &todo, "consumers", progress, |c, u| {
            read_consumer(c, u, &on_consumers)
        })?;
        for (uuid, result) in todo.iter().zip(read) {
            match result {
                Some(c) => {
                    consumers.insert((*uuid).clone(), c);
                }
                None => moved.push(format!("consumer {uuid}")),
            }
        }
        // Each consumer's own answer must agree with what its providers said of it.
        for (uuid, c) in &consumers {
            for (rp, resources) in &c.allocations {
                let seen = on_provider.get(rp).and_then(|a| a.get(uuid));
                if seen != Some(resources) {
                    moved.push(format!("consumer {uuid} on provider {rp}"));
                }
            }
        }
        for (rp, allocations) in &on_provider {
            for (uuid, resources) in allocations {
                let seen = consumers.get(uuid).and_then(|c| c.allocations.get(rp));
                if seen.is_some_and(|s| s != resources) {
                    moved.push(format!("consumer {uuid} on provider {rp}"));
                }
            }
        }
        // And the whole, read again, must be what was read.
        let again = list_providers(client, limits.max_providers)?;
        for (uuid, l) in &again {
            match providers.get(uuid) {
                Some(p)
                    if p.generation == l.generation && p.name == l.name && p.parent == l.parent => {
                }
                _ => moved.push(format!("provider {uuid}")),
            }
        }
        for uuid in providers.keys() {
            if !again.contains_key(uuid) {
                moved.push(format!("provider {uuid} (deleted)"));
            }
        }
        if custom_classes(client)? != classes || custom_traits(client)? != traits {
            moved.push("the custom resource classes or traits".to_string());
        }
        if moved.is_empty() {
            let snapshot = Snapshot {
                custom_classes: classes,
                custom_traits: traits,
                providers: parents_first(providers),
                consumers: consumers.into_iter().collect(),
            };
            progress.say(&format!(
                "read {} providers and {} consumers in {} requests ({:.1} s)",
                snapshot.providers.len(),
                snapshot.consumers.len(),
                client.requests,
                started.elapsed().as_secs_f64()
            ));
            return Ok(snapshot);
        }
        moved.sort();
        moved.dedup();
        progress.say(&format!(
            "Placement changed during round {round} of the read ({} changed, e.g. {}); reading what changed again",
            moved.len(),
            moved[0]
        ));
        // Whatever a mismatch named is read again.
        for m in &moved {
            let uuid = m.split_whitespace().nth(1).unwrap_or_default();
            providers.remove(uuid);
            consumers.remove(uuid);
            if let Some(rp) = m.split_whitespace().nth(4) {
                providers.remove(rp);
            }
        }
        last_moved = (moved.len(), moved[0].clone());
    }
    Err(ReadError::KeptChanging {
        rounds: MAX_ROUNDS,
        moved: last_moved.0,
        example: last_moved.1,
    })
}

/// The custom resource classes, in Placement's order: the order they were created.
fn custom_classes(client: &mut PlacementClient) -> Result<CustomNameSet, ClientError> {
    let body: answers::ResourceClasses = client.get("/resource_classes")?;
    Ok(body
        .resource_classes
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("CUSTOM_"))
        .collect())
}

/// The custom traits, in the order Placement lists every trait (its rows: the order they
/// were created); asked by prefix, it would list them by name.
fn custom_traits(client: &mut PlacementClient) -> Result<CustomNameSet, ClientError> {
    let body: answers::Traits = client.get("/traits")?;
    Ok(body
        .traits
        .into_iter()
        .filter(|t| t.starts_with("CUSTOM_"))
        .collect())
}

/// The providers Placement lists, by uuid: each uuid a uuid, each generation a whole
/// number, no two uuids the same whatever their case; at most `max` of them.
fn list_providers(
    client: &mut PlacementClient,
    max: usize,
) -> Result<BTreeMap<String, Listed>, ReadError> {
    let path = "/resource_providers";
    let body = client.get_bytes(path)?;
    let list = answers::provider_list(&body, max).map_err(|e| match e {
        ListError::TooMany => ReadError::TooMany {
            what: "providers",
            max,
            flag: "--max-providers",
        },
        ListError::Json(e) => unexpected(path, e.to_string()),
    })?;
    drop(body);
    let mut out = BTreeMap::new();
    // Each uuid in lowercase, and the uuid as listed.
    let mut seen: HashMap<String, String> = HashMap::with_capacity(list.len());
    for (i, p) in list.into_iter().enumerate() {
        let who = || {
            format!(
                "provider {:?} (the {} listed)",
                shortened(&p.name),
                ordinal(i + 1)
            )
        };
        let uuid = uuid_of(&p.uuid, &who, "uuid", path)?;
        let who = || format!("provider {:?} ({uuid})", shortened(&p.name));
        let parent = match &p.parent_provider_uuid {
            Some(parent) => Some(uuid_of(parent, &who, "parent_provider_uuid", path)?),
            None => None,
        };
        let generation = generation_of(&p.generation, &who, "generation", path)?;
        if let Some(other) = seen.insert(uuid.to_ascii_lowercase(), uuid.clone()) {
            let name = out.get(&other).map_or("", |l: &Listed| l.name.as_str());
            let first = format!("provider {:?} ({other})", shortened(name));
            if other == uuid {
                return Err(unexpected(
                    path,
                    format!("{first} and {} have the same uuid", who()),
                ));
            }
            return Err(ReadError::SameUuid {
                first,
                second: who(),
            });
        }
        out.insert(
            uuid,
            Listed {
                name: p.name,
                parent,
                generation,
            },
        );
    }
    Ok(out)
}

/// `1st`, `2nd`, `3rd`, `4th`, … `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

type OnProvider = BTreeMap<String, BTreeMap<String, i64>>;

/// Allocations (one consumer's resources on one provider) held so far, and how many may be.
struct Allowance {
    held: AtomicUsize,
    max: usize,
}

impl Allowance {
    /// `n` more, unless that passes the limit.
    fn take(&self, n: usize) -> Result<(), ReadError> {
        if self.held.fetch_add(n, Ordering::Relaxed) + n > self.max {
            return Err(ReadError::TooMany {
                what: "allocations",
                max: self.max,
                flag: "--max-allocations",
            });
        }
        Ok(())
    }
}

/// A provider's inventories, traits, aggregates and allocations (by consumer), or `None`
/// when it moved (or went) while they were read.
fn read_provider(
    client: &mut PlacementClient,
    uuid: &str,
    listed: &Listed,
    allowance: &Allowance,
) -> Result<Option<(Provider, OnProvider)>, ReadError> {
    let who = || format!("provider {:?} ({uuid})", shortened(&listed.name));
    let path = |what: &str| format!("/resource_providers/{uuid}/{what}");
    // Each answer's generation; a provider that went is one that moved.
    macro_rules! answer {
        ($what:literal, $ty:ty) => {{
            let p = path($what);
            let body: $ty = match client.get(&p) {
                Ok(body) => body,
                Err(e) if e.status() == Some(404) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let g = generation_of(
                &body.resource_provider_generation,
                &who,
                "resource_provider_generation",
                &p,
            )?;
            if g != listed.generation {
                return Ok(None);
            }
            body
        }};
    }
    let inventories = answer!("inventories", answers::Inventories);
    let traits = answer!("traits", answers::ProviderTraits);
    let aggregates = answer!("aggregates", answers::Aggregates);
    let allocations = answer!("allocations", answers::ProviderAllocations);
    let inventories = inventories
        .inventories
        .into_iter()
        .map(|(class, i)| (class, inventory(i)))
        .collect();
    let aggregates = aggregates
        .aggregates
        .iter()
        .map(|a| {
            a.aggregate().map(str::to_string).ok_or_else(|| {
                unexpected(
                    &path("aggregates"),
                    format!(
                        "{}: its aggregates lists {a}, not a uuid (32 hexadecimal digits, with or without hyphens)",
                        who()
                    ),
                )
            })
        })
        .collect::<Result<BTreeSet<String>, ReadError>>()?;
    allowance.take(allocations.allocations.len())?;
    let mut on_provider = BTreeMap::new();
    for (consumer, a) in allocations.allocations {
        if !kubeplace_core::placement::is_uuid(&consumer) {
            return Err(unexpected(
                &path("allocations"),
                format!(
                    "{}: it has allocations of consumer {:?}, which is not a uuid",
                    who(),
                    shortened(&consumer)
                ),
            ));
        }
        on_provider.insert(consumer, a.resources);
    }
    Ok(Some((
        Provider {
            uuid: uuid.to_string(),
            name: listed.name.clone(),
            parent: listed.parent.clone(),
            generation: listed.generation,
            inventories,
            traits: traits.traits,
            aggregates,
        },
        on_provider,
    )))
}

fn inventory(i: answers::Inventory) -> Inventory {
    Inventory {
        total: i.total,
        reserved: i.reserved,
        min_unit: i.min_unit,
        max_unit: i.max_unit,
        step_size: i.step_size,
        allocation_ratio: i.allocation_ratio,
    }
}

/// A consumer's allocations, project, user, type and generation; `None` when it has none
/// any more (it went while the providers were read).
fn read_consumer(
    client: &mut PlacementClient,
    uuid: &str,
    allowance: &Allowance,
) -> Result<Option<Consumer>, ReadError> {
    let path = format!("/allocations/{uuid}");
    let body: answers::ConsumerAllocations = client.get(&path)?;
    if body.allocations.is_empty() {
        return Ok(None);
    }
    allowance.take(body.allocations.len())?;
    let who = || format!("consumer {uuid}");
    let mut allocations = BTreeMap::new();
    for (rp, a) in body.allocations {
        if !kubeplace_core::placement::is_uuid(&rp) {
            return Err(unexpected(
                &path,
                format!(
                    "{}: it has allocations on provider {:?}, which is not a uuid",
                    who(),
                    shortened(&rp)
                ),
            ));
        }
        allocations.insert(rp, a.resources);
    }
    let generation = match &body.consumer_generation {
        None => None,
        Some(g) => Some(generation_of(g, &who, "consumer_generation", &path)?),
    };
    Ok(Some(Consumer {
        uuid: uuid.to_string(),
        project_id: body.project_id.unwrap_or_default(),
        user_id: body.user_id.unwrap_or_default(),
        consumer_type: body.consumer_type.unwrap_or_else(|| "INSTANCE".to_string()),
        generation,
        allocations,
    }))
}

/// Prints why an import or export refuses the whole of it, before anything is written, and
/// exits Failed.
pub(crate) fn refused_whole(
    command: &str,
    what: &str,
    refusals: &[impl std::fmt::Display],
) -> Exit {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{command}: refused: {what}, and nothing was written:");
    for r in refusals {
        let _ = writeln!(err, "  {r}");
    }
    Exit::Failed
}

/// `work` over every item, on `connections` connections of their own side by side (one
/// thread each), the results in the items' order; progress from this thread. The first
/// error ends it: no connection takes another item after it.
fn side_by_side<T: Sync, R: Send>(
    client: &mut PlacementClient,
    connections: usize,
    items: &[T],
    what: &str,
    progress: &mut Progress,
    work: impl Fn(&mut PlacementClient, &T) -> Result<R, ReadError> + Sync,
) -> Result<Vec<R>, ReadError> {
    let total = items.len();
    if connections <= 1 || total < 2 * connections {
        let mut out = Vec::with_capacity(total);
        for (done, item) in items.iter().enumerate() {
            progress.tick(|| format!("reading {what}: {done}/{total}"));
            out.push(work(client, item)?);
        }
        return Ok(out);
    }
    let mut workers = Vec::with_capacity(connections);
    for _ in 0..connections {
        workers.push(client.sibling()?);
    }
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Result<Vec<(usize, R)>, ReadError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(w, c)| {
                let (work, done, failed) = (&work, &done, &failed);
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for (i, item) in items.iter().enumerate().skip(w).step_by(connections) {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        match work(c, item) {
                            Ok(r) => out.push((i, r)),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(out)
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            progress.tick(|| format!("reading {what}: {}/{total}", done.load(Ordering::Relaxed)));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    client.requests += workers.iter().map(|w| w.requests).sum::<u64>();
    let mut all = Vec::with_capacity(total);
    for r in results {
        all.extend(r?);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

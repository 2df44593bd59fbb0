//! `kubeplace placement export --to URL`: kubeplace's state (manifest files, or the cluster)
//! written into a live Placement, empty or the one it was imported from, so an operator can
//! go back. Both sides are read as snapshots and only their differences are written:
//! custom names created, consumers that are gone deleted, providers created (parents first)
//! or renamed and moved, inventories, traits and aggregates set, consumers' allocations put,
//! providers that are gone deleted (children first). Every refusal (what Placement would not
//! take) is found before the first write.
//!
//! Generations are Placement's own: a provider's and a consumer's generation in the target
//! count the target's writes, not kubeplace's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use http::Method;
use kube::api::Api;
use serde_json::{Value, json};

use kubeplace_api::provider_name::placement_name;
use kubeplace_api::{Allocation, Kind, Object, ResourceProvider};
use kubeplace_policy::placement_records::{
    CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, UNKNOWN_PROJECT, USER_ANNOTATION,
};
use kubeplace_policy::store::{Change, ObjectKey, Store};
use kubeplace_policy::translate::resource_provider::{api_inventory, inventory};
use kubeplace_policy::translate::{APPLIED, OVER_CAPACITY};

use super::Exit;
use super::placement_client::{ClientError, Opening, PlacementClient, RunLimits, SourceAuth};
use super::placement_snapshot::{
    self, Consumer, Progress, Provider, Scalar, Snapshot, parents_first, refused_whole,
};
use crate::operator::flags::ClusterFlags;
use crate::placement_api::cluster::Cluster;
use kubeplace_core::placement::response::inventory_json;

/// Arguments of `kubeplace placement export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The Placement to write into: `http://HOST:PORT` or `https://HOST:PORT`, with its path
    /// prefix if it has one. Without it, with --keystone-authtoken: the placement endpoint of
    /// Keystone's service catalog.
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
    #[command(flatten)]
    pub auth: SourceAuth,
    #[command(flatten)]
    pub limits: RunLimits,
    /// Manifest files, folders or `-` with the ResourceProviders and Allocations to export;
    /// without them, the cluster's (kubeconfig or in-cluster) and its registry of custom names.
    #[arg(short = 'f', long = "filename", num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Say what would be written into Placement, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No progress lines on standard error.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// One write into Placement.
#[derive(Debug, Clone)]
struct Op {
    method: Method,
    path: String,
    body: Option<Value>,
    /// The provider whose generation the body carries (and the answer moves).
    generation_of: Option<String>,
    what: String,
}

/// Runs the export; 0 done, 1 refused or failed, 2 bad input.
pub fn main(args: &ExportArgs) -> Exit {
    let started = Instant::now();
    let mut progress = Progress::new("export", args.quiet);
    let source = if args.files.is_empty() {
        from_cluster(args)
    } else {
        super::placement::load_state(&args.files, &mut std::io::stdin().lock())
            .map(|store| snapshot_of(&store, &BTreeSet::new(), &BTreeSet::new()))
    };
    let source = match source {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kubeplace placement export: {e}");
            return Exit::BadInput;
        }
    };
    let mut client = match args.auth.open(args.to.as_deref(), "--to") {
        Ok((client, found)) => {
            if let Some(found) = found {
                progress.say(&found);
            }
            client
        }
        Err(Opening::BadInput(e)) => {
            eprintln!("kubeplace placement export: {e}; nothing was written");
            return Exit::BadInput;
        }
        Err(Opening::Failed(e)) => {
            eprintln!("kubeplace placement export: {e}; nothing was written");
            return Exit::Failed;
        }
    };
    client.bound(&args.limits, started);
    progress.say(&format!(
        "{} providers and {} consumers to export; reading {}",
        source.providers.len(),
        source.consumers.len(),
        client.url()
    ));
    let target = match placement_snapshot::read(
        &mut client,
        usize::from(args.auth.connections),
        &args.limits,
        &mut progress,
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kubeplace placement export: {e}; nothing was written");
            return Exit::Failed;
        }
    };
    let ops = match plan(&source, &target) {
        Ok(ops) => ops,
        Err(refusals) => {
            return refused_whole(
                "kubeplace placement export",
                &format!("Placement cannot take {} thing(s)", refusals.len()),
                &refusals,
            );
        }
    };
    progress.say(&format!("{} writes to make", ops.len()));
    if args.dry_run {
        let mut out = std::io::stdout().lock();
        for op in &ops {
            let _ = writeln!(out, "{} {}: {}", op.method, op.path, op.what);
        }
        return Exit::Ok;
    }
    let mut generations: HashMap<String, u64> = target
        .providers
        .iter()
        .map(|p| (p.uuid.clone(), p.generation))
        .collect();
    let total = ops.len();
    let writing = Instant::now();
    for (done, op) in ops.into_iter().enumerate() {
        progress.tick(|| format!("writing: {done}/{total}"));
        if let Err(e) = run(&mut client, &op, &mut generations) {
            eprintln!(
                "kubeplace placement export: {}: {e}; {done} of {total} writes were made, and running the export again makes the rest",
                op.what
            );
            return Exit::Failed;
        }
    }
    let seconds = writing.elapsed().as_secs_f64();
    progress.say(&format!(
        "done: {total} writes in {seconds:.1} s ({:.0} writes/s), {:.1} s in all; generations in Placement are its own",
        total as f64 / seconds.max(1e-6),
        started.elapsed().as_secs_f64()
    ));
    Exit::Ok
}

/// What export reads of a write's answer: the generation it gave the provider.
#[derive(Default, serde::Deserialize)]
struct WriteAnswer {
    /// Of a provider's inventories, traits or aggregates.
    resource_provider_generation: Option<Scalar>,
    /// Of a provider created, or read again.
    generation: Option<Scalar>,
}

fn run(
    client: &mut PlacementClient,
    op: &Op,
    generations: &mut HashMap<String, u64>,
) -> Result<(), ClientError> {
    // The generation a write's answer gives, if it is a whole number.
    let generation = |got: Option<&Scalar>, field: &str, uuid: &str| match got {
        None => Ok(None),
        Some(g) => g.whole().map(Some).ok_or_else(|| ClientError::Unexpected {
            method: op.method.clone(),
            path: op.path.clone(),
            reason: format!(
                "provider {uuid}: its {field} is {g}, not a generation (a whole number, 0 or more)"
            ),
        }),
    };
    for attempt in 0..2 {
        let mut body = op.body.clone();
        if let (Some(uuid), Some(b)) = (&op.generation_of, body.as_mut()) {
            b["resource_provider_generation"] = json!(generations.get(uuid).copied().unwrap_or(0));
        }
        match client.write::<WriteAnswer>(op.method.clone(), &op.path, body.as_ref()) {
            Ok(answer) => {
                if let Some(uuid) = &op.generation_of {
                    let field = "resource_provider_generation";
                    if let Some(g) =
                        generation(answer.resource_provider_generation.as_ref(), field, uuid)?
                    {
                        generations.insert(uuid.clone(), g);
                    }
                }
                if op.method == Method::POST && op.path == "/resource_providers" {
                    let uuid = op.body.as_ref().map(|b| b["uuid"].clone());
                    if let Some(Value::String(u)) = uuid {
                        let g = generation(answer.generation.as_ref(), "generation", &u)?;
                        generations.insert(u, g.unwrap_or(0));
                    }
                }
                return Ok(());
            }
            // A generation moved by another write (allocations move it): read it, once.
            Err(e) if e.status() == Some(409) && attempt == 0 && op.generation_of.is_some() => {
                let uuid = op.generation_of.clone().unwrap_or_default();
                let p: WriteAnswer = client.get(&format!("/resource_providers/{uuid}"))?;
                let g = generation(p.generation.as_ref(), "generation", &uuid)?;
                generations.insert(uuid, g.unwrap_or(0));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The cluster's state as a snapshot: its ResourceProviders and Allocations, and the
/// registry ConfigMap's custom names.
fn from_cluster(args: &ExportArgs) -> Result<Snapshot, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let client = runtime
        .block_on(crate::operator::client(&args.cluster))
        .map_err(|e| e.to_string())?;
    let rps: Api<ResourceProvider> = Api::all(client.clone());
    let allocs: Api<Allocation> = Api::all(client.clone());
    let (rps, allocs) = runtime
        .block_on(async {
            let r = rps.list(&Default::default()).await?;
            let a = allocs.list(&Default::default()).await?;
            Ok::<_, kube::Error>((r.items, a.items))
        })
        .map_err(|e| format!("cannot list ResourceProviders and Allocations: {e}"))?;
    let cluster = Cluster::new(
        client,
        runtime.handle().clone(),
        args.cluster.namespace.clone(),
    );
    let (traits, classes) = cluster.load_registries()?;
    let mut store = Store::default();
    store.apply_changes(
        rps.into_iter()
            .map(Object::ResourceProvider)
            .chain(allocs.into_iter().map(Object::Allocation))
            .map(|o| Change::Put(Box::new(o))),
    );
    Ok(snapshot_of(&store, &classes, &traits))
}

/// kubeplace's state as Placement would show it: each provider with its Placement name,
/// uuid, parent, effective inventories and traits, aggregates; each consumer's allocations
/// summed over its Allocation objects, with its project, user and type.
fn snapshot_of(store: &Store, classes: &BTreeSet<String>, traits: &BTreeSet<String>) -> Snapshot {
    let index = store.index();
    let records = index.providers();
    let uuid_of: HashMap<&str, &str> = records
        .iter()
        .map(|r| (r.name.as_str(), r.uuid.as_str()))
        .collect();
    let mut custom_classes = classes.clone();
    let mut custom_traits = traits.clone();
    let mut providers = Vec::new();
    for r in &records {
        let (inventories, effective_traits) = index
            .effective(&r.name)
            .unwrap_or_else(|| (r.inventories.clone(), r.traits.clone()));
        let name = match store.get(&ObjectKey::cluster(Kind::ResourceProvider, &r.name)) {
            Some(Object::ResourceProvider(rp)) => placement_name(rp),
            _ => r.name.clone(),
        };
        custom_classes.extend(
            inventories
                .keys()
                .filter(|c| c.starts_with("CUSTOM_"))
                .cloned(),
        );
        custom_traits.extend(
            effective_traits
                .iter()
                .filter(|t| t.starts_with("CUSTOM_"))
                .cloned(),
        );
        providers.push(Provider {
            uuid: r.uuid.clone(),
            name,
            parent: r
                .parent
                .as_deref()
                .and_then(|p| uuid_of.get(p))
                .map(|u| u.to_string()),
            generation: 0,
            inventories: inventories
                .into_iter()
                .map(|(c, i)| (c, api_inventory(&i)))
                .collect(),
            traits: effective_traits,
            aggregates: r.aggregates.clone(),
        });
    }
    let mut consumers: BTreeMap<String, Consumer> = BTreeMap::new();
    for o in store.list(Kind::Allocation) {
        let Object::Allocation(a) = o else { continue };
        // A claim kubeplace refused (it counts nowhere) is not one Placement has either.
        if refused(a)
            || store
                .refusal(a.metadata.name.as_deref().unwrap_or(""))
                .is_some()
        {
            continue;
        }
        let ann = |k: &str| {
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(k))
                .cloned()
        };
        let c = consumers
            .entry(a.spec.consumer.clone())
            .or_insert_with(|| Consumer {
                uuid: a.spec.consumer.clone(),
                project_id: ann(PROJECT_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
                user_id: ann(USER_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
                consumer_type: ann(CONSUMER_TYPE_ANNOTATION)
                    .unwrap_or_else(|| "INSTANCE".to_string()),
                generation: None,
                allocations: BTreeMap::new(),
            });
        for pa in &a.spec.allocations {
            let uuid = uuid_of
                .get(pa.provider.as_str())
                .map(|u| u.to_string())
                .unwrap_or_else(|| format!("provider {:?}", pa.provider));
            let on = c.allocations.entry(uuid).or_default();
            for (class, n) in &pa.resources {
                custom_classes.extend(class.starts_with("CUSTOM_").then(|| class.clone()));
                *on.entry(class.clone()).or_default() += n;
            }
        }
    }
    Snapshot {
        custom_classes,
        custom_traits,
        providers: parents_first(providers.into_iter().map(|p| (p.uuid.clone(), p)).collect()),
        consumers,
    }
}

/// Whether an Allocation's claim was refused after the fact (`Applied=False`,
/// `OverCapacity`).
fn refused(a: &Allocation) -> bool {
    a.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == APPLIED && c.status == "False" && c.reason == OVER_CAPACITY)
    })
}

fn inventories_body(p: &Provider) -> Value {
    let inventories: serde_json::Map<String, Value> = p
        .inventories
        .iter()
        .map(|(c, i)| (c.clone(), inventory_json(&inventory(i))))
        .collect();
    json!({"inventories": inventories})
}

/// The writes that make `target` into `source`, or what Placement would refuse.
fn plan(source: &Snapshot, target: &Snapshot) -> Result<Vec<Op>, Vec<String>> {
    let mut refusals = Vec::new();
    let there = target.by_uuid();
    let here = source.by_uuid();
    let target_names: HashMap<&str, &str> = target
        .providers
        .iter()
        .map(|p| (p.name.as_str(), p.uuid.as_str()))
        .collect();
    for p in &source.providers {
        if let Some(u) = target_names.get(p.name.as_str())
            && *u != p.uuid
            && here.get(u).is_none_or(|mine| mine.name == p.name)
        {
            refusals.push(format!(
                "provider {:?} ({}): Placement has a provider of that name with uuid {u}; delete or rename it there first",
                p.name, p.uuid
            ));
        }
        if p.name.chars().count() > 200 {
            refusals.push(format!(
                "provider {:?} ({}): Placement takes names of at most 200 characters",
                p.name, p.uuid
            ));
        }
    }
    for c in source.consumers.values() {
        if !kubeplace_core::placement::is_placement_name(&c.consumer_type) {
            refusals.push(format!(
                "consumer {}: consumer type {:?} is not one Placement takes (A-Z, 0-9 and _)",
                c.uuid, c.consumer_type
            ));
        }
        for id in [&c.project_id, &c.user_id] {
            if id.is_empty() || id.len() > 255 {
                refusals.push(format!(
                    "consumer {}: project or user id {id:?} is not 1-255 characters",
                    c.uuid
                ));
            }
        }
        for rp in c.allocations.keys() {
            if !here.contains_key(rp.as_str()) {
                refusals.push(format!(
                    "consumer {}: it has allocations on {rp}, which is not one of the providers exported",
                    c.uuid
                ));
            }
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let mut ops = Vec::new();
    for class in source.custom_classes.difference(&target.custom_classes) {
        ops.push(Op {
            method: Method::PUT,
            path: format!("/resource_classes/{class}"),
            body: None,
            generation_of: None,
            what: format!("create resource class {class}"),
        });
    }
    for t in source.custom_traits.difference(&target.custom_traits) {
        ops.push(Op {
            method: Method::PUT,
            path: format!("/traits/{t}"),
            body: None,
            generation_of: None,
            what: format!("create trait {t}"),
        });
    }
    // Consumers gone first: their allocations may hold what a provider change needs.
    for c in target.consumers.keys() {
        if !source.consumers.contains_key(c) {
            ops.push(Op {
                method: Method::DELETE,
                path: format!("/allocations/{c}"),
                body: None,
                generation_of: None,
                what: format!("delete the allocations of consumer {c}"),
            });
        }
    }
    // A provider whose name another provider will take is renamed out of the way first.
    for p in &source.providers {
        let Some(old) = there.get(p.uuid.as_str()) else {
            ops.push(Op {
                method: Method::POST,
                path: "/resource_providers".to_string(),
                body: Some(json!({
                    "name": p.name,
                    "uuid": p.uuid,
                    "parent_provider_uuid": p.parent,
                })),
                generation_of: None,
                what: format!("create provider {:?} ({})", p.name, p.uuid),
            });
            continue;
        };
        if old.name != p.name || old.parent != p.parent {
            ops.push(Op {
                method: Method::PUT,
                path: format!("/resource_providers/{}", p.uuid),
                body: Some(json!({"name": p.name, "parent_provider_uuid": p.parent})),
                generation_of: None,
                what: format!("rename or move provider {:?} ({})", p.name, p.uuid),
            });
        }
    }
    for p in &source.providers {
        let old = there.get(p.uuid.as_str());
        let who = format!("provider {:?} ({})", p.name, p.uuid);
        if old.map(|o| &o.inventories) != Some(&p.inventories)
            && !(old.is_none() && p.inventories.is_empty())
        {
            ops.push(Op {
                method: Method::PUT,
                path: format!("/resource_providers/{}/inventories", p.uuid),
                body: Some(inventories_body(p)),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the inventories of {who}"),
            });
        }
        if old.map(|o| &o.traits) != Some(&p.traits) && !(old.is_none() && p.traits.is_empty()) {
            ops.push(Op {
                method: Method::PUT,
                path: format!("/resource_providers/{}/traits", p.uuid),
                body: Some(json!({"traits": p.traits})),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the traits of {who}"),
            });
        }
        if old.map(|o| &o.aggregates) != Some(&p.aggregates)
            && !(old.is_none() && p.aggregates.is_empty())
        {
            ops.push(Op {
                method: Method::PUT,
                path: format!("/resource_providers/{}/aggregates", p.uuid),
                body: Some(json!({"aggregates": p.aggregates})),
                generation_of: Some(p.uuid.clone()),
                what: format!("set the aggregates of {who}"),
            });
        }
    }
    for c in source.consumers.values() {
        let old = target.consumers.get(&c.uuid);
        let same = old.is_some_and(|o| {
            o.allocations == c.allocations
                && o.project_id == c.project_id
                && o.user_id == c.user_id
                && o.consumer_type == c.consumer_type
        });
        if same {
            continue;
        }
        let allocations: serde_json::Map<String, Value> = c
            .allocations
            .iter()
            .map(|(rp, r)| (rp.clone(), json!({"resources": r})))
            .collect();
        ops.push(Op {
            method: Method::PUT,
            path: format!("/allocations/{}", c.uuid),
            body: Some(json!({
                "allocations": allocations,
                "project_id": c.project_id,
                "user_id": c.user_id,
                "consumer_generation": old.and_then(|o| o.generation),
                "consumer_type": c.consumer_type,
            })),
            generation_of: None,
            what: format!("put the allocations of consumer {}", c.uuid),
        });
    }
    // Providers gone last, children before their parents.
    for p in target.providers.iter().rev() {
        if !here.contains_key(p.uuid.as_str()) {
            ops.push(Op {
                method: Method::DELETE,
                path: format!("/resource_providers/{}", p.uuid),
                body: None,
                generation_of: None,
                what: format!("delete provider {:?} ({})", p.name, p.uuid),
            });
        }
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::placement_snapshot::tests::provider;

    fn consumer(uuid: &str, rp: &str, consumer_type: &str) -> Consumer {
        Consumer {
            uuid: uuid.to_string(),
            project_id: "p".to_string(),
            user_id: "u".to_string(),
            consumer_type: consumer_type.to_string(),
            generation: None,
            allocations: BTreeMap::from([(
                rp.to_string(),
                BTreeMap::from([("VCPU".to_string(), 1)]),
            )]),
        }
    }

    #[test]
    fn only_differences_are_written_in_order() {
        let mut cn1 = provider("u1", "cn1", None);
        cn1.inventories
            .insert("VCPU".to_string(), kubeplace_api::Inventory::with_total(4));
        let numa = provider("u2", "cn1_NUMA0", Some("u1"));
        let source = Snapshot {
            custom_traits: BTreeSet::from(["CUSTOM_X".to_string()]),
            providers: vec![cn1.clone(), numa],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u1", "INSTANCE"))]),
            ..Default::default()
        };
        let target = Snapshot {
            providers: vec![cn1, provider("u9", "gone", None)],
            consumers: BTreeMap::from([("c9".to_string(), consumer("c9", "u9", "INSTANCE"))]),
            ..Default::default()
        };
        let ops = plan(&source, &target).unwrap();
        let said: Vec<String> = ops
            .iter()
            .map(|o| format!("{} {}", o.method, o.path))
            .collect();
        assert_eq!(
            said,
            [
                "PUT /traits/CUSTOM_X",
                "DELETE /allocations/c9",
                "POST /resource_providers",
                "PUT /allocations/c1",
                "DELETE /resource_providers/u9",
            ]
        );
        // The same state on both sides: nothing.
        assert!(plan(&source, &source).unwrap().is_empty());
    }

    #[test]
    fn what_placement_would_refuse_is_named_before_any_write() {
        let source = Snapshot {
            providers: vec![provider("u1", "cn1", None)],
            consumers: BTreeMap::from([("c1".to_string(), consumer("c1", "u1", "vm-like"))]),
            ..Default::default()
        };
        let target = Snapshot {
            providers: vec![provider("u7", "cn1", None)],
            ..Default::default()
        };
        let refusals = plan(&source, &target).unwrap_err();
        assert!(
            refusals[0].contains("\"cn1\" (u1)") && refusals[0].contains("u7"),
            "{refusals:?}"
        );
        assert!(
            refusals[1].contains("consumer c1") && refusals[1].contains("vm-like"),
            "{refusals:?}"
        );
    }
}

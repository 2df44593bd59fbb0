//! `kubeplace placement export --to URL`: kubeplace's state (manifest files, or the cluster)
//! written into a live Placement, empty or the one it was imported from, so an operator can
//! go back. Both sides are read as snapshots and only their differences are written:
//! custom names created, consumers that are gone deleted, providers created (parents first)
//! or renamed and moved, inventories, traits and aggregates set, consumers' allocations put,
//! providers that are gone deleted (children first). Every refusal (what Placement would not
//! take) is found before the first write.
//!
//! Generations are Placement's own: a provider's and a consumer's generation in the target
//! count the target's writes, not kubeplace's. The snapshot of kubeplace's state and the
//! plan of writes are the policy crate's ([`kubeplace_policy::sync`]); here are the reads,
//! and the writes with the generations they carry.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use http::Method;
use kube::api::Api;
use serde_json::{Value, json};

use kubeplace_api::{Allocation, Object, ResourceProvider};
use kubeplace_policy::placement_records::CustomNameSet;
use kubeplace_policy::store::{Change, Store};
use kubeplace_policy::sync::export::{self, Op};
use kubeplace_policy::sync::{Snapshot, snapshot_of};

use super::exit::Exit;
use super::placement_client::{ClientError, Opening, PlacementClient, RunLimits, SourceAuth};
use super::placement_snapshot::{self, Progress, Scalar, refused_whole};
use crate::cluster_writer::Cluster;
use crate::operator::flags::ClusterFlags;

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

/// Runs the export; 0 done, 1 refused or failed, 2 bad input.
pub fn main(args: &ExportArgs) -> Exit {
    let started = Instant::now();
    let mut progress = Progress::new("export", args.quiet);
    let source = if args.files.is_empty() {
        from_cluster(args)
    } else {
        super::placement::load_state(&args.files, &mut std::io::stdin().lock())
            .map(|store| snapshot_of(&store, &CustomNameSet::new(), &CustomNameSet::new()))
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
    let ops = match export::plan(&source, &target) {
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

/// The HTTP method of a write.
fn method(op: &Op) -> Method {
    match op.method {
        export::Method::Put => Method::PUT,
        export::Method::Post => Method::POST,
        export::Method::Delete => Method::DELETE,
    }
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
            method: method(op),
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
        match client.write::<WriteAnswer>(method(op), &op.path, body.as_ref()) {
            Ok(answer) => {
                if let Some(uuid) = &op.generation_of {
                    let field = "resource_provider_generation";
                    if let Some(g) =
                        generation(answer.resource_provider_generation.as_ref(), field, uuid)?
                    {
                        generations.insert(uuid.clone(), g);
                    }
                }
                if op.creates_provider() {
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

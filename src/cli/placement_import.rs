//! `kubeplace placement import --from URL`: a live Placement's whole state as kubeplace's
//! objects, written into a manifest file (for `kubeplace placement serve -f`) or into the
//! cluster (through the API server, so admission runs; custom names into the registry
//! ConfigMap the Placement API over a cluster reads).
//!
//! The order of work: a consistent snapshot of Placement ([`super::placement_snapshot`]); the
//! objects it makes; every refusal (names kubeplace cannot carry, objects admission would
//! refuse, objects in the cluster that contradict Placement's) found before anything is
//! written; then only the differences with what is there (the file, or the cluster) are
//! written. A second run finds none; a run cut short is finished by the next. Every
//! decision is the policy crate's ([`kubeplace_policy::sync`]); here are the reads and the
//! writes, one sequence ([`import_into`]) over two sinks, the file and the cluster.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use kubeplace_api::manifest::{CONFIGMAP_API_VERSION, CONFIGMAP_KIND, REGISTRY_CONFIGMAP};
use kubeplace_api::{Allocation, Object, ResourceProvider};
use kubeplace_policy::placement_records::registry_lines;
use kubeplace_policy::store::ObjectKey;
use kubeplace_policy::sync::import::{self, Level, Plan, Registered, describe};
use kubeplace_policy::sync::{Desired, desired};

use super::exit::Exit;
use super::placement_client::{Opening, RunLimits, SourceAuth};
use super::placement_snapshot::{self, Progress, refused_whole};
use crate::cluster_writer::Cluster;
use crate::operator::flags::ClusterFlags;

/// The field manager of the import's writes.
const FIELD_MANAGER: &str = "kubeplace-placement-import";

/// Arguments of `kubeplace placement import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The Placement to copy: `http://HOST:PORT` or `https://HOST:PORT`, with its path
    /// prefix if it has one (`https://cloud.example/placement`). Without it, with
    /// --keystone-authtoken: the placement endpoint of Keystone's service catalog.
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    #[command(flatten)]
    pub auth: SourceAuth,
    #[command(flatten)]
    pub limits: RunLimits,
    /// Write a manifest file (`-` for standard output) for `kubeplace placement serve -f`
    /// instead of writing into the cluster. The file is replaced whole, through a new
    /// temporary file beside it, and only when something changed.
    #[arg(long, value_name = "PATH")]
    pub to_file: Option<PathBuf>,
    /// The manifest's format with `--to-file`.
    #[arg(short = 'o', long, value_enum, default_value_t = ManifestFormat::Yaml)]
    pub output: ManifestFormat,
    /// Say what would change (objects created, replaced, names registered) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No progress lines on standard error.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Writes to the API server in flight at once (1 to 64), within the order that puts
    /// every parent before its children and every provider before the Allocations.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub writes: u16,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// A manifest's format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestFormat {
    /// One YAML document an object.
    Yaml,
    /// A JSON `List`, as `kubectl get -o json` writes it.
    Json,
}

/// Runs the import; 0 done (or nothing to do), 1 refused or failed, 2 bad arguments.
pub fn main(args: &ImportArgs) -> Exit {
    let started = Instant::now();
    let mut progress = Progress::new("import", args.quiet);
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("kubeplace placement import: {e}");
        Exit::Failed
    };
    let mut client = match args.auth.open(args.from.as_deref(), "--from") {
        Ok((client, found)) => {
            if let Some(found) = found {
                progress.say(&found);
            }
            client
        }
        Err(Opening::BadInput(e)) => {
            eprintln!("kubeplace placement import: {e}; nothing was written");
            return Exit::BadInput;
        }
        Err(Opening::Failed(e)) => return fail(&format!("{e}; nothing was written")),
    };
    client.bound(&args.limits, started);
    progress.say(&format!("reading {}", client.url()));
    let snapshot = match placement_snapshot::read(
        &mut client,
        usize::from(args.auth.connections),
        &args.limits,
        &mut progress,
    ) {
        Ok(s) => s,
        Err(e) => return fail(&format!("{e}; nothing was written")),
    };
    let desired = match desired(&snapshot) {
        Ok(d) => d,
        Err(refusals) => return refuse(&refusals),
    };
    let exit = match &args.to_file {
        Some(path) => import_into(&mut IntoFile { args, path }, args, &desired, &mut progress),
        None => match IntoCluster::open(args, args.limits.deadline(started)) {
            Ok(mut sink) => import_into(&mut sink, args, &desired, &mut progress),
            Err(exit) => exit,
        },
    };
    if exit == Exit::Ok {
        progress.say(&format!("done in {:.1} s", started.elapsed().as_secs_f64()));
    }
    exit
}

fn refuse(refusals: &[impl Display]) -> Exit {
    refused_whole(
        "kubeplace placement import",
        &format!(
            "kubeplace cannot carry {} thing(s) of this Placement",
            refusals.len()
        ),
        refusals,
    )
}

/// What is where the objects go.
struct There {
    objects: HashMap<ObjectKey, Object>,
    /// The custom names kept there; `None` where nothing keeps names (a file).
    registered: Option<Registered>,
}

/// Where an import writes: a manifest file, or the cluster.
trait Sink {
    /// What is there now.
    fn read(&mut self) -> Result<There, Exit>;
    /// Whether the objects replace what is there whole (a file), rather than land among it
    /// (the cluster), which is then what refusals are found against.
    fn replaces_whole(&self) -> bool;
    /// What the summary adds of `n` objects there that Placement does not have.
    fn others(&self, n: usize) -> String;
    /// What to say before the summary.
    fn warn(&self, _desired: &Desired, _progress: &mut Progress) {}
    /// Writes the plan's changes.
    fn write(
        &mut self,
        desired: &Desired,
        plan: &Plan,
        there: &There,
        progress: &mut Progress,
    ) -> Exit;
}

/// The one sequence of an import: what is there read, refusals found, the plan made and
/// said, then written (or, with --dry-run, listed).
fn import_into(
    sink: &mut dyn Sink,
    args: &ImportArgs,
    desired: &Desired,
    progress: &mut Progress,
) -> Exit {
    let there = match sink.read() {
        Ok(t) => t,
        Err(exit) => return exit,
    };
    let nothing = HashMap::new();
    let among = if sink.replaces_whole() {
        &nothing
    } else {
        &there.objects
    };
    let refusals = import::refusals(desired, among);
    if !refusals.is_empty() {
        return refuse(&refusals);
    }
    sink.warn(desired, progress);
    let plan = import::plan(desired, &there.objects, there.registered.as_ref());
    let others = if plan.others.is_empty() {
        String::new()
    } else {
        sink.others(plan.others.len())
    };
    progress.say(&format!("{}{others}", plan.summary(desired)));
    if args.dry_run {
        print_dry_run(&plan, desired, &there, sink.replaces_whole());
        return Exit::Ok;
    }
    sink.write(desired, &plan, &there, progress)
}

/// The plan's writes on standard output: objects created and replaced, names registered,
/// and objects a file replaced whole no longer has.
fn print_dry_run(plan: &Plan, desired: &Desired, there: &There, removes_others: bool) {
    let mut out = std::io::stdout().lock();
    for (o, s) in desired.objects.iter().zip(&plan.steps) {
        let Some(verb) = s.verb() else { continue };
        let _ = writeln!(
            out,
            "{verb} {} {} ({})",
            o.kind().as_str(),
            o.meta().name.as_deref().unwrap_or(""),
            describe(o)
        );
    }
    for n in &plan.names {
        let _ = writeln!(out, "register {}", n.name);
    }
    if removes_others {
        for o in plan.others.iter().filter_map(|k| there.objects.get(k)) {
            let _ = writeln!(
                out,
                "remove {} {} ({})",
                o.kind().as_str(),
                o.meta().name.as_deref().unwrap_or(""),
                describe(o)
            );
        }
    }
}

// ---- into a file ----

/// A manifest file (`-`: standard output), replaced whole.
struct IntoFile<'a> {
    args: &'a ImportArgs,
    path: &'a Path,
}

impl IntoFile<'_> {
    fn stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

impl Sink for IntoFile<'_> {
    /// The objects of the file written before, if it can be read.
    fn read(&mut self) -> Result<There, Exit> {
        let objects = if self.stdout() || !self.path.exists() {
            HashMap::new()
        } else {
            match kubeplace_api::manifest::read_paths(
                &[self.path.to_path_buf()],
                &mut std::io::empty(),
            ) {
                Ok(docs) => docs
                    .into_iter()
                    .filter_map(|d| d.object().and_then(Result::ok))
                    .map(|o| (ObjectKey::of(&o), o))
                    .collect(),
                Err(_) => HashMap::new(),
            }
        };
        Ok(There {
            objects,
            registered: None,
        })
    }

    fn replaces_whole(&self) -> bool {
        true
    }

    fn others(&self, n: usize) -> String {
        format!("; {n} object(s) in the file that Placement no longer has go")
    }

    fn write(&mut self, desired: &Desired, _: &Plan, _: &There, progress: &mut Progress) -> Exit {
        let path = self.path;
        let text = render(desired, self.args.output);
        if self.stdout() {
            let mut out = std::io::stdout().lock();
            return match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Ok(()) => Exit::Ok,
                Err(e) => {
                    eprintln!("kubeplace placement import: writing standard output: {e}");
                    Exit::Failed
                }
            };
        }
        if std::fs::read_to_string(path).ok().as_deref() == Some(text.as_str()) {
            progress.say(&format!(
                "{} is up to date; nothing written",
                path.display()
            ));
            return Exit::Ok;
        }
        match write_atomically(path, &text) {
            Ok(()) => {
                progress.say(&format!(
                    "wrote {} objects to {}",
                    desired.objects.len(),
                    path.display()
                ));
                Exit::Ok
            }
            Err(e) => {
                eprintln!(
                    "kubeplace placement import: cannot write {}: {e}",
                    path.display()
                );
                Exit::Failed
            }
        }
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader
/// (or a run cut short) sees the old file or the new one, never part of one. The temporary
/// file has a random name and is made new (`O_EXCL`): whatever is planted beside the target,
/// a symbolic link included, is neither followed nor written. The file keeps the target's
/// permissions, or has the usual ones (0666 less the umask) when there is none.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "manifest".to_string());
    let before = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut file = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    if let Some(permissions) = before {
        file.as_file().set_permissions(permissions)?;
    }
    file.write_all(text.as_bytes())?;
    file.as_file().sync_all()?;
    // On failure the temporary file is removed when dropped.
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// An object as a manifest holds it: apiVersion, kind, name, annotations, spec.
fn manifest_value(o: &Object) -> Value {
    let meta = o.meta();
    let mut metadata = json!({"name": meta.name});
    if let Some(a) = meta.annotations.as_ref().filter(|a| !a.is_empty()) {
        metadata["annotations"] = json!(a);
    }
    let spec = match o {
        Object::ResourceProvider(rp) => serde_json::to_value(&rp.spec),
        Object::Allocation(a) => serde_json::to_value(&a.spec),
        _ => Ok(Value::Null),
    }
    .unwrap_or_default();
    json!({
        "apiVersion": "kubeplace.io/v1alpha1",
        "kind": o.kind().as_str(),
        "metadata": metadata,
        "spec": spec,
    })
}

/// The registry ConfigMap as the cluster keeps it (one name a line), holding every custom
/// trait and resource class of the Placement, so that a file carries the names no object
/// uses as a cluster import does; `None` when there are none.
fn registry_value(desired: &Desired) -> Option<Value> {
    if desired.custom_traits.is_empty() && desired.custom_classes.is_empty() {
        return None;
    }
    Some(json!({
        "apiVersion": CONFIGMAP_API_VERSION,
        "kind": CONFIGMAP_KIND,
        "metadata": {"name": REGISTRY_CONFIGMAP},
        "data": {
            "traits": registry_lines(&desired.custom_traits),
            "resourceClasses": registry_lines(&desired.custom_classes),
        },
    }))
}

fn render(desired: &Desired, format: ManifestFormat) -> String {
    let registry = registry_value(desired);
    match format {
        ManifestFormat::Json => {
            let items: Vec<Value> = registry
                .into_iter()
                .chain(desired.objects.iter().map(manifest_value))
                .collect();
            let mut text = serde_json::to_string_pretty(&json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": items,
            }))
            .unwrap_or_default();
            text.push('\n');
            text
        }
        ManifestFormat::Yaml => {
            let mut text = String::from(
                "# kubeplace placement import: a live Placement's providers and consumers\n",
            );
            for value in registry
                .into_iter()
                .chain(desired.objects.iter().map(manifest_value))
            {
                text.push_str("---\n");
                text.push_str(&serde_saphyr::to_string(&value).unwrap_or_default());
            }
            text
        }
    }
}

// ---- into the cluster ----

/// The cluster, through the API server; custom names into its registry ConfigMap.
struct IntoCluster<'a> {
    args: &'a ImportArgs,
    deadline: Instant,
    runtime: tokio::runtime::Runtime,
    client: Client,
    cluster: Cluster,
}

impl<'a> IntoCluster<'a> {
    /// The runtime and the client of the cluster the flags name.
    fn open(args: &'a ImportArgs, deadline: Instant) -> Result<IntoCluster<'a>, Exit> {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("kubeplace placement import: cannot start the runtime: {e}");
                return Err(Exit::Failed);
            }
        };
        let client = match runtime.block_on(crate::operator::client(&args.cluster)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("kubeplace placement import: {e}");
                return Err(Exit::BadInput);
            }
        };
        let cluster = Cluster::new(
            client.clone(),
            runtime.handle().clone(),
            args.cluster.namespace.clone(),
        );
        Ok(IntoCluster {
            args,
            deadline,
            runtime,
            client,
            cluster,
        })
    }
}

fn fail(what: String) -> Exit {
    eprintln!("kubeplace placement import: {what}");
    Exit::Failed
}

impl Sink for IntoCluster<'_> {
    /// The cluster's ResourceProviders and Allocations, and its registered custom names.
    fn read(&mut self) -> Result<There, Exit> {
        let rps: Api<ResourceProvider> = Api::all(self.client.clone());
        let allocs: Api<Allocation> = Api::all(self.client.clone());
        let listed = self.runtime.block_on(async {
            let r = rps.list(&Default::default()).await?;
            let a = allocs.list(&Default::default()).await?;
            Ok::<_, kube::Error>((r.items, a.items))
        });
        let (there_rps, there_allocs) = listed.map_err(|e| {
            fail(format!(
                "cannot list ResourceProviders and Allocations: {e}; nothing was written"
            ))
        })?;
        let (traits, classes) = self
            .cluster
            .load_registries()
            .map_err(|e| fail(format!("{e}; nothing was written")))?;
        let objects = there_rps
            .into_iter()
            .map(Object::ResourceProvider)
            .chain(there_allocs.into_iter().map(Object::Allocation))
            .map(|o| (ObjectKey::of(&o), o))
            .collect();
        Ok(There {
            objects,
            registered: Some(Registered { traits, classes }),
        })
    }

    fn replaces_whole(&self) -> bool {
        false
    }

    fn others(&self, n: usize) -> String {
        format!(
            "; {n} ResourceProvider(s) and Allocation(s) of the cluster that this Placement does not have are left as they are"
        )
    }

    fn write(
        &mut self,
        desired: &Desired,
        plan: &Plan,
        there: &There,
        progress: &mut Progress,
    ) -> Exit {
        if !plan.names.is_empty()
            && let Err(e) = self.cluster.save_registry_changes(&plan.names)
        {
            return fail(format!("{e}; run the import again to finish"));
        }
        let started = Instant::now();
        let written = self.runtime.block_on(write_objects(
            self.client.clone(),
            plan.writes(desired, &there.objects),
            usize::from(self.args.writes),
            (self.deadline, self.args.limits.timeout),
            progress,
        ));
        match written {
            Ok(Written {
                providers,
                providers_s,
                allocations,
                allocations_s,
            }) => {
                let n = providers + allocations;
                let seconds = started.elapsed().as_secs_f64();
                let rate = |n: usize, s: f64| n as f64 / s.max(1e-6);
                progress.say(&format!(
                    "wrote {n} objects in {seconds:.1} s ({:.0} objects/s): {providers} ResourceProviders in {providers_s:.1} s ({:.0}/s), {allocations} Allocations in {allocations_s:.1} s ({:.0}/s)",
                    rate(n, seconds),
                    rate(providers, providers_s),
                    rate(allocations, allocations_s),
                ));
                Exit::Ok
            }
            Err((n, e)) => fail(format!(
                "{e}; {n} objects were written before it, and running the import again writes the rest"
            )),
        }
    }
}

/// What [`write_objects`] wrote, and how long each kind took.
struct Written {
    providers: usize,
    providers_s: f64,
    allocations: usize,
    allocations_s: f64,
}

/// Writes the objects a level at a time (the plan's order: parents exist before their
/// children, every provider before the Allocations), several in flight. What was written,
/// or the count and the first failure.
async fn write_objects(
    client: Client,
    levels: BTreeMap<Level, Vec<Object>>,
    in_flight: usize,
    (deadline, timeout): (Instant, usize),
    progress: &mut Progress,
) -> Result<Written, (usize, String)> {
    let total: usize = levels.values().map(Vec::len).sum();
    let client = Arc::new(client);
    let mut written = 0;
    let mut done = Written {
        providers: 0,
        providers_s: 0.0,
        allocations: 0,
        allocations_s: 0.0,
    };
    for (level, batch) in levels {
        let started = Instant::now();
        let size = batch.len();
        let mut writes = futures::stream::iter(batch.into_iter().map(|o| {
            let client = client.clone();
            async move { write_one(&client, o).await }
        }))
        .buffer_unordered(in_flight);
        // A refusal ends the import after the rest of its level (no child is written
        // before its parent), so that the count written is what the cluster holds.
        let mut failed = None;
        loop {
            let next = tokio::time::timeout_at(deadline.into(), writes.next()).await;
            let Ok(next) = next else {
                return Err((
                    written,
                    format!(
                        "the import took longer than --timeout ({timeout} s) (up to {} writes in flight were stopped, and may have been made)",
                        in_flight.min(size)
                    ),
                ));
            };
            let Some(result) = next else { break };
            match result {
                Ok(()) => {
                    written += 1;
                    progress.tick(|| format!("writing objects: {written}/{total}"));
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err((written, e));
        }
        let seconds = started.elapsed().as_secs_f64();
        if level == Level::Allocations {
            done.allocations += size;
            done.allocations_s += seconds;
        } else {
            done.providers += size;
            done.providers_s += seconds;
        }
    }
    Ok(done)
}

async fn write_one(client: &Client, o: Object) -> Result<(), String> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    let name = o.meta().name.clone().unwrap_or_default();
    let what = describe(&o);
    let replace = o.meta().resource_version.is_some();
    let result = match o {
        Object::ResourceProvider(rp) => {
            let api: Api<ResourceProvider> = Api::all(client.clone());
            if replace {
                api.replace(&name, &params, &rp).await.map(drop)
            } else {
                api.create(&params, &rp).await.map(drop)
            }
        }
        Object::Allocation(a) => {
            let api: Api<Allocation> = Api::all(client.clone());
            if replace {
                api.replace(&name, &params, &a).await.map(drop)
            } else {
                api.create(&params, &a).await.map(drop)
            }
        }
        _ => Ok(()),
    };
    result.map_err(|e| match e {
        kube::Error::Api(s) => format!("the API server refused {what}: {}", s.message),
        e => format!("writing {what}: {e}"),
    })
}

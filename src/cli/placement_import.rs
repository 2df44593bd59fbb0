//! `kubeplace placement import --from URL`: a live Placement's whole state as kubeplace's
//! objects, written into a manifest file (for `kubeplace placement serve -f`) or into the
//! cluster (through the API server, so admission runs; custom names into the registry
//! ConfigMap the Placement API over a cluster reads).
//!
//! The order of work: a consistent snapshot of Placement ([`super::placement_snapshot`]); the
//! objects it makes; every refusal (names kubeplace cannot carry, objects admission would
//! refuse, objects in the cluster that contradict Placement's) found before anything is
//! written; then only the differences with what is there (the file, or the cluster) are
//! written. A second run finds none; a run cut short is finished by the next.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::{Value, json};

use kubeplace_api::provider_name::{NAME_ANNOTATION, name_provider, object_name, placement_name};
use kubeplace_api::{
    Allocation, AllocationSpec, Kind, Object, ProviderAllocation, ResourceProvider,
    ResourceProviderSpec, SortedMap,
};
use kubeplace_core::placement::{check_resource_class, check_trait};
use kubeplace_policy::admission::admit_and_store_in_order;
use kubeplace_policy::placement_records::{
    CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, Registry, RegistryChange, USER_ANNOTATION,
};
use kubeplace_policy::store::{Change, ObjectKey, Store};

use super::Exit;
use super::placement_client::{Opening, RunLimits, SourceAuth};
use super::placement_snapshot::{self, Progress, Snapshot, refused_whole};
use crate::operator::flags::ClusterFlags;
use crate::placement_api::cluster::Cluster;

/// The uuid a provider object goes by: its spec's, or the one derived from its name.
fn provider_uuid(rp: &ResourceProvider) -> String {
    rp.spec.uuid.clone().unwrap_or_else(|| {
        kubeplace_core::placement::derived_provider_uuid(rp.metadata.name.as_deref().unwrap_or(""))
    })
}

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

/// What kubeplace's objects for a Placement are.
pub struct Desired {
    /// Providers parents first, then Allocations by consumer.
    pub objects: Vec<Object>,
    pub custom_classes: BTreeSet<String>,
    pub custom_traits: BTreeSet<String>,
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
        Some(path) => into_file(args, path, &desired, &mut progress),
        None => into_cluster(args, &desired, args.limits.deadline(started), &mut progress),
    };
    if exit == Exit::Ok {
        progress.say(&format!("done in {:.1} s", started.elapsed().as_secs_f64()));
    }
    exit
}

fn refuse(refusals: &[String]) -> Exit {
    refused_whole(
        "kubeplace placement import",
        &format!(
            "kubeplace cannot carry {} thing(s) of this Placement",
            refusals.len()
        ),
        refusals,
    )
}

/// kubeplace's objects for a snapshot, or what kubeplace cannot carry of it (each naming
/// the provider, consumer or name).
pub fn desired(snapshot: &Snapshot) -> Result<Desired, Vec<String>> {
    let mut refusals = Vec::new();
    for class in &snapshot.custom_classes {
        if let Err(e) = check_resource_class(class) {
            refusals.push(format!("custom resource class {class}: {e}"));
        }
    }
    for t in &snapshot.custom_traits {
        if let Err(e) = check_trait(t) {
            refusals.push(format!("custom trait {t}: {e}"));
        }
    }
    let by_uuid = snapshot.by_uuid();
    // Two Placement names that one object name would stand for.
    let mut objects_named: HashMap<String, &str> = HashMap::new();
    for p in &snapshot.providers {
        let object = object_name(&p.name);
        if let Some(other) = objects_named.insert(object.clone(), &p.uuid)
            && let Some(o) = by_uuid.get(other)
        {
            refusals.push(format!(
                "provider {:?} ({}): its object name {object:?} is also the object name of provider {:?} ({}); rename one of them in Placement first",
                p.name, p.uuid, o.name, o.uuid
            ));
        }
    }
    let mut objects = Vec::with_capacity(snapshot.providers.len() + snapshot.consumers.len());
    for p in &snapshot.providers {
        let who = || format!("provider {:?} ({})", p.name, p.uuid);
        for class in p.inventories.keys() {
            if let Err(e) = check_resource_class(class) {
                refusals.push(format!("{}: inventory of {class}: {e}", who()));
            }
        }
        for t in &p.traits {
            if let Err(e) = check_trait(t) {
                refusals.push(format!("{}: trait {t}: {e}", who()));
            }
        }
        let parent = match &p.parent {
            Some(u) => match by_uuid.get(u.as_str()) {
                Some(parent) => Some(object_name(&parent.name)),
                None => {
                    refusals.push(format!("{}: its parent {u} was not read", who()));
                    None
                }
            },
            None => None,
        };
        let spec = ResourceProviderSpec {
            uuid: Some(p.uuid.clone()),
            parent,
            inventories: {
                let mut m = SortedMap::new();
                for (c, i) in &p.inventories {
                    m.insert(c.clone(), i.clone());
                }
                m
            },
            traits: p.traits.iter().cloned().collect(),
            aggregates: p.aggregates.iter().cloned().collect(),
        };
        let mut rp = ResourceProvider::new(&object_name(&p.name), spec);
        name_provider(&mut rp, &p.name);
        objects.push(Object::ResourceProvider(rp));
    }
    for c in snapshot.consumers.values() {
        let mut allocations = Vec::new();
        for (rp, resources) in &c.allocations {
            match by_uuid.get(rp.as_str()) {
                Some(p) => allocations.push(ProviderAllocation {
                    provider: object_name(&p.name),
                    resources: resources.clone(),
                }),
                None => refusals.push(format!(
                    "consumer {}: it has allocations on provider {rp}, which was not read",
                    c.uuid
                )),
            }
        }
        if !kubeplace_core::placement::is_uuid(&c.uuid) || c.uuid.to_lowercase() != c.uuid {
            refusals.push(format!(
                "consumer {:?}: its uuid cannot name an Allocation object (lowercase, with hyphens)",
                c.uuid
            ));
        }
        let mut a = Allocation::new(
            &c.uuid,
            AllocationSpec {
                consumer: c.uuid.clone(),
                allocations,
            },
        );
        a.metadata.annotations = Some(BTreeMap::from([
            (PROJECT_ANNOTATION.to_string(), c.project_id.clone()),
            (USER_ANNOTATION.to_string(), c.user_id.clone()),
            (
                CONSUMER_TYPE_ANNOTATION.to_string(),
                c.consumer_type.clone(),
            ),
        ]));
        objects.push(Object::Allocation(a));
    }
    if refusals.is_empty() {
        Ok(Desired {
            objects,
            custom_classes: snapshot.custom_classes.clone(),
            custom_traits: snapshot.custom_traits.clone(),
        })
    } else {
        Err(refusals)
    }
}

/// What a write does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Create,
    Replace,
    Same,
}

/// The managed part of an object: what import writes and compares.
fn managed(o: &Object) -> Value {
    match o {
        Object::ResourceProvider(rp) => {
            let mut spec = rp.spec.clone();
            spec.traits.sort();
            spec.aggregates.sort();
            json!({
                "name": placement_name(rp),
                "spec": serde_json::to_value(&spec).unwrap_or_default(),
            })
        }
        Object::Allocation(a) => {
            let ann = |k: &str| {
                a.metadata
                    .annotations
                    .as_ref()
                    .and_then(|m| m.get(k))
                    .cloned()
            };
            let mut spec = a.spec.clone();
            spec.allocations.sort_by(|x, y| x.provider.cmp(&y.provider));
            json!({
                "spec": serde_json::to_value(&spec).unwrap_or_default(),
                "project": ann(PROJECT_ANNOTATION),
                "user": ann(USER_ANNOTATION),
                "type": ann(CONSUMER_TYPE_ANNOTATION),
            })
        }
        _ => Value::Null,
    }
}

/// Each desired object's step against what is there.
fn plan(desired: &Desired, existing: &HashMap<ObjectKey, Object>) -> Vec<Step> {
    desired
        .objects
        .iter()
        .map(|o| match existing.get(&ObjectKey::of(o)) {
            None => Step::Create,
            Some(old) if managed(old) == managed(o) => Step::Same,
            Some(_) => Step::Replace,
        })
        .collect()
}

/// Objects admission would refuse, over `base` (what the cluster holds) with the desired
/// objects written in order.
fn admission_refusals(base: Vec<Object>, desired: &Desired) -> Vec<String> {
    let mut store = Store::default();
    store.apply_changes(base.into_iter().map(|o| Change::Put(Box::new(o))));
    let mut refusals = Vec::new();
    for o in &desired.objects {
        let verdict = admit_and_store_in_order(&mut store, o.clone());
        if !verdict.allowed {
            refusals.push(format!("{}: {}", describe(o), verdict.message));
        }
    }
    refusals
}

fn describe(o: &Object) -> String {
    match o {
        Object::ResourceProvider(rp) => format!(
            "provider {:?} ({})",
            placement_name(rp),
            rp.spec.uuid.as_deref().unwrap_or_default()
        ),
        Object::Allocation(a) => format!("consumer {}", a.spec.consumer),
        o => format!(
            "{} {}",
            o.kind().as_str(),
            o.meta().name.as_deref().unwrap_or("")
        ),
    }
}

/// The counts of a plan, for people.
fn summary(steps: &[Step], desired: &Desired, names: usize) -> String {
    let count = |kind: Kind, step: Step| {
        desired
            .objects
            .iter()
            .zip(steps)
            .filter(|(o, s)| o.kind() == kind && **s == step)
            .count()
    };
    format!(
        "providers: {} to create, {} to replace, {} unchanged; consumers: {} to create, {} to replace, {} unchanged; custom names to register: {names}",
        count(Kind::ResourceProvider, Step::Create),
        count(Kind::ResourceProvider, Step::Replace),
        count(Kind::ResourceProvider, Step::Same),
        count(Kind::Allocation, Step::Create),
        count(Kind::Allocation, Step::Replace),
        count(Kind::Allocation, Step::Same),
    )
}

fn print_dry_run(steps: &[Step], desired: &Desired, names: &[String]) {
    let mut out = std::io::stdout().lock();
    for (o, s) in desired.objects.iter().zip(steps) {
        let verb = match s {
            Step::Create => "create",
            Step::Replace => "replace",
            Step::Same => continue,
        };
        let _ = writeln!(
            out,
            "{verb} {} {} ({})",
            o.kind().as_str(),
            o.meta().name.as_deref().unwrap_or(""),
            describe(o)
        );
    }
    for n in names {
        let _ = writeln!(out, "register {n}");
    }
}

// ---- into a file ----

fn into_file(args: &ImportArgs, path: &Path, desired: &Desired, progress: &mut Progress) -> Exit {
    let refusals = admission_refusals(Vec::new(), desired);
    if !refusals.is_empty() {
        return refuse(&refusals);
    }
    // Custom names no object uses are known to `serve` only through the objects.
    let used = used_names(desired);
    let unused: Vec<&String> = desired
        .custom_classes
        .iter()
        .chain(&desired.custom_traits)
        .filter(|n| !used.contains(n.as_str()))
        .collect();
    if !unused.is_empty() {
        progress.say(&format!(
            "warning: a manifest cannot carry custom names no object uses ({}); `serve -f` will not know them until created again (importing into a cluster keeps them)",
            unused
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let text = render(&desired.objects, args.output);
    let stdout = path.as_os_str() == "-";
    let existing: HashMap<ObjectKey, Object> = if stdout || !path.exists() {
        HashMap::new()
    } else {
        match kubeplace_api::manifest::read_paths(&[path.to_path_buf()], &mut std::io::empty()) {
            Ok(docs) => docs
                .into_iter()
                .filter_map(|d| d.object().and_then(Result::ok))
                .map(|o| (ObjectKey::of(&o), o))
                .collect(),
            Err(_) => HashMap::new(),
        }
    };
    let steps = plan(desired, &existing);
    let wanted: BTreeSet<ObjectKey> = desired.objects.iter().map(ObjectKey::of).collect();
    let mut extra: Vec<&Object> = existing
        .iter()
        .filter(|(k, _)| !wanted.contains(*k))
        .map(|(_, o)| o)
        .collect();
    extra.sort_by_key(|o| ObjectKey::of(o));
    progress.say(&format!(
        "{}{}",
        summary(&steps, desired, 0),
        if extra.is_empty() {
            String::new()
        } else {
            format!(
                "; {} object(s) in the file that Placement no longer has go",
                extra.len()
            )
        }
    ));
    if args.dry_run {
        print_dry_run(&steps, desired, &[]);
        let mut out = std::io::stdout().lock();
        for o in extra {
            let _ = writeln!(
                out,
                "remove {} {} ({})",
                o.kind().as_str(),
                o.meta().name.as_deref().unwrap_or(""),
                describe(o)
            );
        }
        return Exit::Ok;
    }
    if stdout {
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

/// The custom names some object uses.
fn used_names(desired: &Desired) -> BTreeSet<&str> {
    let mut used = BTreeSet::new();
    for o in &desired.objects {
        match o {
            Object::ResourceProvider(rp) => {
                used.extend(rp.spec.inventories.keys().map(String::as_str));
                used.extend(rp.spec.traits.iter().map(String::as_str));
            }
            Object::Allocation(a) => {
                for pa in &a.spec.allocations {
                    used.extend(pa.resources.keys().map(String::as_str));
                }
            }
            _ => {}
        }
    }
    used
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

fn render(objects: &[Object], format: ManifestFormat) -> String {
    match format {
        ManifestFormat::Json => {
            let items: Vec<Value> = objects.iter().map(manifest_value).collect();
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
            for o in objects {
                text.push_str("---\n");
                text.push_str(&serde_saphyr::to_string(&manifest_value(o)).unwrap_or_default());
            }
            text
        }
    }
}

// ---- into the cluster ----

fn into_cluster(
    args: &ImportArgs,
    desired: &Desired,
    deadline: Instant,
    progress: &mut Progress,
) -> Exit {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeplace placement import: cannot start the runtime: {e}");
            return Exit::Failed;
        }
    };
    let client = match runtime.block_on(crate::operator::client(&args.cluster)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kubeplace placement import: {e}");
            return Exit::BadInput;
        }
    };
    let fail = |what: String| {
        eprintln!("kubeplace placement import: {what}");
        Exit::Failed
    };
    // What the cluster holds.
    let rps: Api<ResourceProvider> = Api::all(client.clone());
    let allocs: Api<Allocation> = Api::all(client.clone());
    let listed = runtime.block_on(async {
        let r = rps.list(&Default::default()).await?;
        let a = allocs.list(&Default::default()).await?;
        Ok::<_, kube::Error>((r.items, a.items))
    });
    let (there_rps, there_allocs) = match listed {
        Ok(l) => l,
        Err(e) => {
            return fail(format!(
                "cannot list ResourceProviders and Allocations: {e}; nothing was written"
            ));
        }
    };
    let cluster = Cluster::new(
        client.clone(),
        runtime.handle().clone(),
        args.cluster.namespace.clone(),
    );
    let (registered_traits, registered_classes) = match cluster.load_registries() {
        Ok(r) => r,
        Err(e) => return fail(format!("{e}; nothing was written")),
    };
    let mut existing: HashMap<ObjectKey, Object> = HashMap::new();
    for rp in there_rps {
        let o = Object::ResourceProvider(rp);
        existing.insert(ObjectKey::of(&o), o);
    }
    for a in there_allocs {
        let o = Object::Allocation(a);
        existing.insert(ObjectKey::of(&o), o);
    }
    let mut refusals = contradictions(desired, &existing);
    if refusals.is_empty() {
        // Admission over what the cluster holds, with what import replaces left out of it
        // (each is admitted again as an update).
        refusals = admission_refusals(existing.values().cloned().collect(), desired);
    }
    if !refusals.is_empty() {
        return refuse(&refusals);
    }
    let steps = plan(desired, &existing);
    let names: Vec<RegistryChange> = desired
        .custom_traits
        .iter()
        .filter(|t| !registered_traits.contains(*t))
        .map(|t| RegistryChange {
            registry: Registry::Traits,
            name: t.clone(),
            added: true,
        })
        .chain(
            desired
                .custom_classes
                .iter()
                .filter(|c| !registered_classes.contains(*c))
                .map(|c| RegistryChange {
                    registry: Registry::ResourceClasses,
                    name: c.clone(),
                    added: true,
                }),
        )
        .collect();
    let wanted: BTreeSet<ObjectKey> = desired.objects.iter().map(ObjectKey::of).collect();
    let others = existing.keys().filter(|k| !wanted.contains(*k)).count();
    progress.say(&format!(
        "{}{}",
        summary(&steps, desired, names.len()),
        if others > 0 {
            format!(
                "; {others} ResourceProvider(s) and Allocation(s) of the cluster that this Placement does not have are left as they are"
            )
        } else {
            String::new()
        }
    ));
    if args.dry_run {
        let listed: Vec<String> = names.iter().map(|n| n.name.clone()).collect();
        print_dry_run(&steps, desired, &listed);
        return Exit::Ok;
    }
    if !names.is_empty()
        && let Err(e) = cluster.save_registry_changes(&names)
    {
        return fail(format!("{}; run the import again to finish", e.detail));
    }
    let started = Instant::now();
    let written = runtime.block_on(write_objects(
        client,
        desired,
        &steps,
        &existing,
        usize::from(args.writes),
        (deadline, args.limits.timeout),
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

/// Objects in the cluster that say otherwise than Placement on something import does not
/// overwrite: a provider's uuid, a consumer whose allocations live in another object.
fn contradictions(desired: &Desired, existing: &HashMap<ObjectKey, Object>) -> Vec<String> {
    let mut refusals = Vec::new();
    let mut uuid_owner: HashMap<String, &str> = HashMap::new();
    let mut consumer_objects: HashMap<&str, Vec<&str>> = HashMap::new();
    for o in existing.values() {
        match o {
            Object::ResourceProvider(rp) => {
                let uuid = provider_uuid(rp);
                uuid_owner.insert(uuid, rp.metadata.name.as_deref().unwrap_or_default());
            }
            Object::Allocation(a) => consumer_objects
                .entry(a.spec.consumer.as_str())
                .or_default()
                .push(a.metadata.name.as_deref().unwrap_or_default()),
            _ => {}
        }
    }
    for o in &desired.objects {
        let name = o.meta().name.as_deref().unwrap_or_default();
        match o {
            Object::ResourceProvider(rp) => {
                let uuid = rp.spec.uuid.clone().unwrap_or_default();
                if let Some(owner) = uuid_owner.get(&uuid).filter(|n| **n != name) {
                    refusals.push(format!(
                        "{}: the cluster's ResourceProvider {owner:?} already has its uuid",
                        describe(o)
                    ));
                }
                if let Some(Object::ResourceProvider(old)) = existing.get(&ObjectKey::of(o)) {
                    let old_uuid = provider_uuid(old);
                    if old_uuid != uuid {
                        refusals.push(format!(
                            "{}: the cluster's ResourceProvider {name:?} has uuid {old_uuid}; delete or rename it first",
                            describe(o)
                        ));
                    }
                }
            }
            Object::Allocation(a) => {
                let others: Vec<&&str> = consumer_objects
                    .get(a.spec.consumer.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|n| **n != name)
                    .collect();
                if !others.is_empty() {
                    refusals.push(format!(
                        "{}: the cluster holds its allocations in other Allocation objects ({}); delete them first",
                        describe(o),
                        others.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            _ => {}
        }
    }
    refusals
}

/// What [`write_objects`] wrote, and how long each kind took.
struct Written {
    providers: usize,
    providers_s: f64,
    allocations: usize,
    allocations_s: f64,
}

/// Writes every object whose step is not `Same`: providers a tree level at a time (parents
/// exist before their children), then the Allocations; several in flight. What was
/// written, or the count and the first failure.
async fn write_objects(
    client: Client,
    desired: &Desired,
    steps: &[Step],
    existing: &HashMap<ObjectKey, Object>,
    in_flight: usize,
    (deadline, timeout): (Instant, usize),
    progress: &mut Progress,
) -> Result<Written, (usize, String)> {
    // Depth of each provider object, from its parent chain within the desired objects.
    let mut depth: HashMap<&str, usize> = HashMap::new();
    let mut batches: BTreeMap<usize, Vec<Object>> = BTreeMap::new();
    for (o, s) in desired.objects.iter().zip(steps) {
        let d = match o {
            Object::ResourceProvider(rp) => {
                let d = rp
                    .spec
                    .parent
                    .as_deref()
                    .and_then(|p| depth.get(p))
                    .map_or(0, |d| d + 1);
                depth.insert(o.meta().name.as_deref().unwrap_or_default(), d);
                d
            }
            // After every provider.
            _ => usize::MAX,
        };
        if *s == Step::Same {
            continue;
        }
        let mut o = o.clone();
        // A replace keeps the object's other metadata and carries its resourceVersion.
        if let Some(old) = existing.get(&ObjectKey::of(&o)) {
            merge_metadata(&mut o, old.meta());
        }
        batches.entry(d).or_default().push(o);
    }
    let total: usize = batches.values().map(Vec::len).sum();
    let client = Arc::new(client);
    let mut written = 0;
    let mut done = Written {
        providers: 0,
        providers_s: 0.0,
        allocations: 0,
        allocations_s: 0.0,
    };
    for (depth, batch) in batches {
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
        if depth == usize::MAX {
            done.allocations += size;
            done.allocations_s += seconds;
        } else {
            done.providers += size;
            done.providers_s += seconds;
        }
    }
    Ok(done)
}

fn merge_metadata(o: &mut Object, old: &ObjectMeta) {
    let managed = [
        NAME_ANNOTATION,
        PROJECT_ANNOTATION,
        USER_ANNOTATION,
        CONSUMER_TYPE_ANNOTATION,
    ];
    let new_annotations = o.meta().annotations.clone().unwrap_or_default();
    let mut annotations = old.annotations.clone().unwrap_or_default();
    annotations.retain(|k, _| !managed.contains(&k.as_str()));
    annotations.extend(new_annotations);
    let meta = o.meta_mut();
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
    meta.labels = old.labels.clone();
    meta.resource_version = old.resource_version.clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::placement_snapshot::tests::provider;

    #[test]
    fn names_kubernetes_refuses_are_stored_as_the_api_stores_them() {
        let snapshot = Snapshot {
            providers: vec![
                provider("a0000000-0000-4000-8000-000000000001", "cn1", None),
                provider(
                    "a0000000-0000-4000-8000-000000000002",
                    "cn1_NUMA0",
                    Some("a0000000-0000-4000-8000-000000000001"),
                ),
            ],
            ..Default::default()
        };
        let d = desired(&snapshot).unwrap();
        let Object::ResourceProvider(numa) = &d.objects[1] else {
            panic!("a provider")
        };
        assert_eq!(numa.metadata.name, Some(object_name("cn1_NUMA0")));
        assert_eq!(placement_name(numa), "cn1_NUMA0");
        assert_eq!(numa.spec.parent.as_deref(), Some("cn1"));
    }

    #[test]
    fn two_names_for_one_object_name_are_refused_naming_both() {
        let derived = object_name("CN1");
        let snapshot = Snapshot {
            providers: vec![
                provider("a0000000-0000-4000-8000-000000000001", "CN1", None),
                provider("a0000000-0000-4000-8000-000000000002", &derived, None),
            ],
            ..Default::default()
        };
        let refusals = desired(&snapshot).err().unwrap();
        assert_eq!(refusals.len(), 1, "{refusals:?}");
        assert!(
            refusals[0].contains("\"CN1\"") && refusals[0].contains(&derived),
            "{refusals:?}"
        );
    }
}

//! The resource class of each DRA device: named after the first DeviceClass (by name)
//! whose CEL selectors pick the device, evaluated as kube-scheduler evaluates them, else
//! after the device's driver.
//!
//! Selectors are parsed with the `cel` crate's parser, at cel-go's recursion limit
//! ([`compile::PARSE_DEPTH`], what kube-apiserver admits), and evaluated by an evaluator of
//! kubeplace's own over the parsed tree ([`eval`]), not by the crate's interpreter. The
//! interpreter has no hooks to count cost: a class kube-apiserver admits (up to 32
//! selectors, each within its estimated cost) could take seconds a device, and a selector
//! of a few hundred bytes that doubles a list at each `map()` could build gigabytes before
//! anything could stop it. Rewriting the tree to call a charging function at each node
//! would charge a value only once it was built; the evaluator charges each operation before
//! doing it, so a budget bounds memory as well as time. Its values are the interpreter's
//! (quantities as thousandths of their unit, versions as text), so classes select what
//! they selected before.
//!
//! Each selector's evaluation has [`COST_BUDGET`], DRA's `CELSelectorExpressionMaxCost`, the
//! runtime cost limit kube-scheduler gives each selector; each device's evaluation of a
//! class has [`TIME_BUDGET`] beside it. A budget exhausted means the class does not select
//! the device (kube-scheduler does not select a device whose selector exceeds its cost
//! limit), and is reported once for that version of the class, as a selector that does
//! not compile is ([`ClassProblem`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use kubeplace_api::cluster_source::{Device, DeviceClass, ResourceSlice};
use regex::Regex;

use super::quantity::in_thousandths;
use super::traits::trait_part;
use eval::{Budget, Halt};
use value::Value;

mod compile;
mod eval;
#[cfg(test)]
mod tests;
mod value;

/// The cost one selector's evaluation may take: DRA's `CELSelectorExpressionMaxCost`
/// (k8s.io/api/resource/v1), which kube-scheduler sets as each selector's cost limit.
pub const COST_BUDGET: u64 = 1_000_000;

/// How long one device's evaluation of one class's selectors may take.
pub const TIME_BUDGET: Duration = Duration::from_millis(100);

/// The stack selectors are compiled on: parsing a selector nested as deep as kube-apiserver
/// admits recurses deeply (reserved, not used unless needed).
const COMPILE_STACK: usize = 256 << 20;

/// Selectors whose tree is at most this deep are evaluated on the caller's thread.
const INLINE_DEPTH: usize = 64;

/// The stack a level of a selector's tree may take while evaluated, with room to spare.
const STACK_PER_LEVEL: usize = 16 << 10;

/// `device.driver == "gpu.example.com"`, the selector of a class of one driver's devices.
static DRIVER_SELECTOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^\s*device\.driver\s*==\s*["']([^"']+)["']\s*$"#).expect("a valid pattern")
});

/// Each change of any class set's content takes a new number, so that picks made with one
/// set are known for the set's.
static NEXT_SET: AtomicU64 = AtomicU64::new(1);

/// The driver a DeviceClass selects the devices of, when its only selector names one driver
/// (the common form): the class of a claimed device whose slice is not seen.
fn driver_of(class: &DeviceClass) -> Option<String> {
    let selectors = class.spec.selectors.as_deref().unwrap_or_default();
    let [only] = selectors else { return None };
    let expression = &only.cel.as_ref()?.expression;
    Some(DRIVER_SELECTOR.captures(expression)?[1].to_string())
}

/// What went wrong with a DeviceClass's selectors, reported once for each version of the
/// class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorProblem {
    #[error("selector {index} does not compile, so the class selects no device: {reason}")]
    DoesNotCompile { index: usize, reason: String },
    #[error("selector {index} has no CEL expression, so the class selects no device")]
    NoExpression { index: usize },
    #[error(
        "selector {index} calls {functions}, which kubeplace does not evaluate: where it is called it is an error, and the selector does not hold"
    )]
    UnknownFunctions { index: usize, functions: String },
    #[error(
        "selector {index} exceeded its cost budget of {budget} on device {device}: where it does, the class does not select the device (as kube-scheduler treats a cost limit exceeded)"
    )]
    CostExceeded {
        index: usize,
        budget: u64,
        device: String,
    },
    #[error(
        "its selectors took longer than the time budget of {budget:?} on device {device}: where they do, the class does not select the device"
    )]
    TimeExceeded { budget: Duration, device: String },
    #[error("its selectors could not be evaluated ({reason}), so the class selects no device")]
    NotEvaluated { reason: String },
}

/// A problem of one DeviceClass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DeviceClass {class:?}: {problem}")]
pub struct ClassProblem {
    pub class: String,
    pub problem: SelectorProblem,
}

/// What a class picks devices by.
#[derive(Debug)]
struct Selectors {
    /// Its selectors, compiled; all must hold. `None` when the class has none or one does
    /// not compile: such a class names no device (one without selectors would pick every
    /// device of every driver).
    compiled: Option<Vec<compile::Selector>>,
    /// The depth of its deepest selector.
    depth: usize,
    /// The driver its only selector names, in the plain form.
    driver: Option<String>,
    /// Its selectors as written, to tell a change from a resend.
    written: String,
    /// Whether a cost budget and a time budget exhausted were reported, for this version.
    cost_reported: AtomicBool,
    time_reported: AtomicBool,
}

impl Selectors {
    /// Compiles a class (on a thread with a stack deep enough); the problems found.
    fn compile(class: &DeviceClass, written: String) -> (Selectors, Vec<SelectorProblem>) {
        let selectors = class.spec.selectors.as_deref().unwrap_or_default();
        let expressions: Vec<Option<String>> = selectors
            .iter()
            .map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
            .collect();
        let mut problems = Vec::new();
        let compiled = on_stack(COMPILE_STACK, || {
            expressions
                .iter()
                .map(|e| e.as_deref().map(compile::compile))
                .collect::<Vec<_>>()
        });
        let mut selectors_ok = Some(Vec::new());
        match compiled {
            Ok(results) => {
                for (index, result) in results.into_iter().enumerate() {
                    match result {
                        None => problems.push(SelectorProblem::NoExpression { index }),
                        Some(Err(e)) => problems.push(SelectorProblem::DoesNotCompile {
                            index,
                            reason: bounded(e.to_string()),
                        }),
                        Some(Ok(selector)) => {
                            if !selector.unknown_functions.is_empty() {
                                problems.push(SelectorProblem::UnknownFunctions {
                                    index,
                                    functions: selector.unknown_functions.join(", "),
                                });
                            }
                            if let Some(ok) = selectors_ok.as_mut() {
                                ok.push(selector);
                            }
                            continue;
                        }
                    }
                    selectors_ok = None;
                }
            }
            Err(reason) => {
                problems.push(SelectorProblem::NotEvaluated { reason });
                selectors_ok = None;
            }
        }
        let compiled = selectors_ok.filter(|s| !s.is_empty());
        let depth = compiled
            .iter()
            .flatten()
            .map(|s| s.depth)
            .max()
            .unwrap_or(0);
        (
            Selectors {
                compiled,
                depth,
                driver: driver_of(class),
                written,
                cost_reported: AtomicBool::new(false),
                time_reported: AtomicBool::new(false),
            },
            problems,
        )
    }
}

/// A message cut to a length an Event or a log line takes.
fn bounded(mut text: String) -> String {
    const MAX: usize = 600;
    if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Runs `work` on a thread of its own with `stack` bytes of stack; a panic or a thread that
/// cannot be started is an error.
fn on_stack<T: Send>(stack: usize, work: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("kubeplace-cel".into())
            .stack_size(stack)
            .spawn_scoped(scope, work)
            .map_err(|e| format!("no thread to evaluate on: {e}"))?;
        handle
            .join()
            .map_err(|_| "the evaluation failed".to_string())
    })
}

/// The cluster's DeviceClasses, by name. Cheap to clone: the compiled classes are shared.
#[derive(Debug, Clone)]
pub struct DeviceClasses {
    classes: BTreeMap<String, Arc<Selectors>>,
    /// This content's number: picks made with it are for it.
    id: u64,
}

impl Default for DeviceClasses {
    fn default() -> Self {
        DeviceClasses {
            classes: BTreeMap::new(),
            id: NEXT_SET.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl DeviceClasses {
    /// Notes a class (again): `None` when it is as it was, else the problems of its
    /// selectors (compiled now).
    pub fn put(&mut self, class: &DeviceClass) -> Option<Vec<ClassProblem>> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let selectors = class.spec.selectors.as_deref().unwrap_or_default();
        let written = serde_json::to_string(selectors).unwrap_or_default();
        if self
            .classes
            .get(&name)
            .is_some_and(|s| s.written == written)
        {
            return None;
        }
        let (compiled, problems) = Selectors::compile(class, written);
        self.classes.insert(name.clone(), Arc::new(compiled));
        self.id = NEXT_SET.fetch_add(1, Ordering::Relaxed);
        Some(
            problems
                .into_iter()
                .map(|problem| ClassProblem {
                    class: name.clone(),
                    problem,
                })
                .collect(),
        )
    }

    /// Forgets a class; whether it was known.
    pub fn remove(&mut self, name: &str) -> bool {
        let known = self.classes.remove(name).is_some();
        if known {
            self.id = NEXT_SET.fetch_add(1, Ordering::Relaxed);
        }
        known
    }

    /// The classes' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    /// The number of this content (a change gives a new one).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The resource class of a driver's device not seen in any slice: after the first
    /// (by name) DeviceClass whose only selector is `device.driver == "<driver>"`, else
    /// after the driver.
    pub fn resource_class(&self, driver: &str) -> String {
        let named = self
            .classes
            .iter()
            .find(|(_, s)| s.driver.as_deref() == Some(driver))
            .map_or(driver, |(name, _)| name.as_str());
        format!("CUSTOM_{}", trait_part(named))
    }

    /// Picks the class of each device of a slice, on a thread with a stack deep enough for
    /// its deepest class's selectors when that is deeper than the caller's may be. Takes up
    /// to [`TIME_BUDGET`] a device and class.
    pub fn pick(&self, slice: &ResourceSlice) -> SlicePicks {
        let deepest = self.classes.values().map(|s| s.depth).max().unwrap_or(0);
        if deepest <= INLINE_DEPTH {
            return self.pick_here(slice, true);
        }
        let stack = (1 << 20) + deepest * STACK_PER_LEVEL;
        match on_stack(stack, || self.pick_here(slice, true)) {
            Ok(picks) => picks,
            Err(reason) => {
                // The shallow classes still pick; the deep ones are reported.
                let mut picks = self.pick_here(slice, false);
                for (name, s) in &self.classes {
                    if s.depth > INLINE_DEPTH {
                        picks.problems.push(ClassProblem {
                            class: name.clone(),
                            problem: SelectorProblem::NotEvaluated {
                                reason: reason.clone(),
                            },
                        });
                    }
                }
                picks
            }
        }
    }

    /// [`DeviceClasses::pick`] on this thread; classes deeper than [`INLINE_DEPTH`] only
    /// when `deep`.
    fn pick_here(&self, slice: &ResourceSlice, deep: bool) -> SlicePicks {
        let spec = &slice.spec;
        let mut problems = Vec::new();
        let picked = spec
            .devices
            .iter()
            .flatten()
            .map(|device| {
                if self.classes.is_empty() || is_partition(device) {
                    return None;
                }
                let value = device_value(&spec.driver, device);
                let at = format!("{}/{}/{}", spec.driver, spec.pool.name, device.name);
                self.classes
                    .iter()
                    .filter(|(_, s)| deep || s.depth <= INLINE_DEPTH)
                    .find(|(name, s)| holds(name, s, &value, &at, &mut problems))
                    .map(|(name, _)| Arc::<str>::from(name.as_str()))
            })
            .collect();
        SlicePicks {
            classes_id: self.id,
            picked,
            problems,
        }
    }
}

/// Whether a device is a partition of a partitionable device (it consumes a slice's
/// shared counters): left to kube-scheduler, which alone weighs partitions that overlap.
pub(in crate::mirror) fn is_partition(device: &kubeplace_api::cluster_source::Device) -> bool {
    device
        .consumes_counters
        .as_ref()
        .is_some_and(|c| !c.is_empty())
}

/// Whether every selector of a class holds for a device (`at` names it), each within
/// [`COST_BUDGET`] and all within [`TIME_BUDGET`]; a budget exhausted is a problem reported
/// once for the class's version.
fn holds(
    name: &str,
    selectors: &Selectors,
    device: &Value,
    at: &str,
    problems: &mut Vec<ClassProblem>,
) -> bool {
    let Some(compiled) = &selectors.compiled else {
        return false;
    };
    let budget = Budget {
        cost_limit: COST_BUDGET,
        deadline: Instant::now() + TIME_BUDGET,
    };
    let mut report = |flag: &AtomicBool, problem: SelectorProblem| {
        if !flag.swap(true, Ordering::Relaxed) {
            problems.push(ClassProblem {
                class: name.to_string(),
                problem,
            });
        }
    };
    for (index, selector) in compiled.iter().enumerate() {
        let mut spent = 0;
        match eval::evaluate(&selector.root, device, &budget, &mut spent) {
            Ok(Value::Bool(true)) => {}
            Ok(_) | Err(Halt::Error(_)) => return false,
            Err(Halt::Cost) => {
                report(
                    &selectors.cost_reported,
                    SelectorProblem::CostExceeded {
                        index,
                        budget: COST_BUDGET,
                        device: at.to_string(),
                    },
                );
                return false;
            }
            Err(Halt::Time) => {
                report(
                    &selectors.time_reported,
                    SelectorProblem::TimeExceeded {
                        budget: TIME_BUDGET,
                        device: at.to_string(),
                    },
                );
                return false;
            }
        }
    }
    true
}

/// The DeviceClass picked for each device of one slice (by its place in `spec.devices`),
/// with the classes of one content ([`DeviceClasses::id`]), and the problems found.
#[derive(Debug, Clone)]
pub struct SlicePicks {
    classes_id: u64,
    picked: Vec<Option<Arc<str>>>,
    pub problems: Vec<ClassProblem>,
}

impl SlicePicks {
    /// The number of the classes these were picked with.
    pub fn classes_id(&self) -> u64 {
        self.classes_id
    }

    /// The resource class of the slice's `index`th device: `CUSTOM_<CLASS>` after the class
    /// that picks it, else `CUSTOM_<DRIVER>`; and the class's name.
    pub(super) fn resource_class(&self, index: usize, driver: &str) -> (String, Option<String>) {
        let class = self.picked.get(index).cloned().flatten();
        let named = class.as_deref().unwrap_or(driver);
        (
            format!("CUSTOM_{}", trait_part(named)),
            class.map(|c| c.to_string()),
        )
    }
}

/// A device as DRA's CEL environment shows it: `device.driver`, `device.attributes` and
/// `device.capacity` by domain (an unqualified name is in the driver's domain), and
/// `device.allowMultipleAllocations`. Quantities are thousandths of their unit, so they
/// compare as numbers and with `quantity(...)`.
fn device_value(driver: &str, device: &Device) -> Value {
    let split = |name: &str| -> (String, String) {
        match name.rsplit_once('/') {
            Some((domain, id)) => (domain.to_string(), id.to_string()),
            None => (driver.to_string(), name.to_string()),
        }
    };
    let mut attributes: HashMap<String, value::Map> = HashMap::new();
    for (name, a) in device.attributes.iter().flatten() {
        let value = if let Some(b) = a.bool {
            Value::Bool(b)
        } else if let Some(i) = a.int {
            Value::Int(i)
        } else if let Some(s) = a.string.as_ref().or(a.version.as_ref()) {
            Value::String(Arc::from(s.as_str()))
        } else {
            continue;
        };
        let (domain, id) = split(name);
        attributes
            .entry(domain)
            .or_default()
            .insert(value::Key::String(Arc::from(id)), value);
    }
    let mut capacity: HashMap<String, value::Map> = HashMap::new();
    for (name, c) in device.capacity.iter().flatten() {
        let Ok(amount) = in_thousandths(&c.value.0) else {
            continue;
        };
        let (domain, id) = split(name);
        capacity
            .entry(domain)
            .or_default()
            .insert(value::Key::String(Arc::from(id)), Value::Int(amount));
    }
    let by_domain = |m: HashMap<String, value::Map>| -> Value {
        Value::Map(Arc::new(
            m.into_iter()
                .map(|(d, v)| (value::Key::String(Arc::from(d)), Value::Map(Arc::new(v))))
                .collect(),
        ))
    };
    let field = |name: &str, value: Value| (value::Key::String(Arc::from(name)), value);
    Value::Map(Arc::new(value::Map::from([
        field("driver", Value::String(Arc::from(driver))),
        field("attributes", by_domain(attributes)),
        field("capacity", by_domain(capacity)),
        field(
            "allowMultipleAllocations",
            Value::Bool(device.allow_multiple_allocations == Some(true)),
        ),
    ])))
}

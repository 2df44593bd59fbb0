//! The resource class of each DRA device: named after the first DeviceClass (by name)
//! whose CEL selectors pick the device, evaluated as kube-scheduler evaluates them, else
//! after the device's driver.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::{Context, ExecutionError, Program, Value};
use kubeplace_api::cluster_source::{Device, DeviceClass};
use regex::Regex;

use super::quantity::in_thousandths;
use super::traits::trait_part;

/// `device.driver == "gpu.example.com"`, the selector of a class of one driver's devices.
static DRIVER_SELECTOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^\s*device\.driver\s*==\s*["']([^"']+)["']\s*$"#).expect("a valid pattern")
});

/// The driver a DeviceClass selects the devices of, when its only selector names one driver
/// (the common form): the class of a claimed device whose slice is not seen.
fn driver_of(class: &DeviceClass) -> Option<String> {
    let selectors = class.spec.selectors.as_deref().unwrap_or_default();
    let [only] = selectors else { return None };
    let expression = &only.cel.as_ref()?.expression;
    Some(DRIVER_SELECTOR.captures(expression)?[1].to_string())
}

/// What a class picks devices by.
#[derive(Debug, Clone)]
struct Selectors {
    /// Its CEL expressions, compiled; all must hold. Empty when the class has none or one
    /// does not compile: such a class names no device (one without selectors would pick
    /// every device of every driver).
    programs: Vec<Arc<Program>>,
    /// The driver its only selector names, in the plain form.
    driver: Option<String>,
    /// Its selectors as written, to tell a change from a resend.
    written: String,
}

/// The cluster's DeviceClasses, by name.
#[derive(Debug, Clone, Default)]
pub(super) struct DeviceClasses {
    classes: BTreeMap<String, Selectors>,
}

impl DeviceClasses {
    /// Notes a class (again); whether what it picks may have changed.
    pub fn put(&mut self, class: &DeviceClass) -> bool {
        let name = class.metadata.name.clone().unwrap_or_default();
        let selectors = class.spec.selectors.as_deref().unwrap_or_default();
        let written = serde_json::to_string(selectors).unwrap_or_default();
        if self
            .classes
            .get(&name)
            .is_some_and(|s| s.written == written)
        {
            return false;
        }
        let compiled: Option<Vec<Arc<Program>>> = selectors
            .iter()
            .map(|s| {
                let expression = &s.cel.as_ref()?.expression;
                Program::compile(expression).ok().map(Arc::new)
            })
            .collect();
        self.classes.insert(
            name,
            Selectors {
                programs: compiled.unwrap_or_default(),
                driver: driver_of(class),
                written,
            },
        );
        true
    }

    /// Forgets a class; whether it was known.
    pub fn remove(&mut self, name: &str) -> bool {
        self.classes.remove(name).is_some()
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

    /// An evaluator of the classes' selectors, for the devices of one driver.
    pub fn picker<'c>(&'c self, driver: &str) -> ClassPicker<'c> {
        ClassPicker {
            classes: self,
            driver: driver.to_string(),
            context: selector_context(),
        }
    }
}

/// Picks each device's DeviceClass; holds one CEL context for many devices.
pub(super) struct ClassPicker<'c> {
    classes: &'c DeviceClasses,
    driver: String,
    context: Context<'static, 'static>,
}

impl ClassPicker<'_> {
    /// The first DeviceClass (by name) whose every selector holds for the device; a
    /// selector that fails on it (an attribute it lacks) does not hold.
    pub fn class_name(&self, device: &Device) -> Option<&str> {
        if self.classes.classes.is_empty() {
            return None;
        }
        let mut scope = self.context.new_inner_scope();
        scope.add_variable_from_value("device", device_value(&self.driver, device));
        self.classes
            .classes
            .iter()
            .find(|(_, s)| {
                !s.programs.is_empty()
                    && s.programs
                        .iter()
                        .all(|p| matches!(p.execute(&scope), Ok(Value::Bool(true))))
            })
            .map(|(name, _)| name.as_str())
    }

    /// The device's resource class: `CUSTOM_<CLASS>` after the class that picks it, else
    /// `CUSTOM_<DRIVER>`; and the class's name.
    pub fn resource_class(&self, device: &Device) -> (String, Option<String>) {
        let class = self.class_name(device).map(str::to_string);
        let named = class.as_deref().unwrap_or(&self.driver);
        (format!("CUSTOM_{}", trait_part(named)), class)
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
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, a) in device.attributes.iter().flatten() {
        let value = if let Some(b) = a.bool {
            Value::Bool(b)
        } else if let Some(i) = a.int {
            Value::Int(i)
        } else if let Some(s) = a.string.as_ref().or(a.version.as_ref()) {
            Value::String(Arc::new(s.clone()))
        } else {
            continue;
        };
        let (domain, id) = split(name);
        attributes.entry(domain).or_default().insert(id, value);
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, c) in device.capacity.iter().flatten() {
        let Ok(amount) = in_thousandths(&c.value.0) else {
            continue;
        };
        let (domain, id) = split(name);
        capacity
            .entry(domain)
            .or_default()
            .insert(id, Value::Int(amount));
    }
    let by_domain = |m: HashMap<String, HashMap<String, Value>>| -> Value {
        let m: HashMap<String, Value> = m.into_iter().map(|(d, v)| (d, v.into())).collect();
        m.into()
    };
    let fields: HashMap<String, Value> = HashMap::from([
        ("driver".to_string(), Value::String(Arc::new(driver.into()))),
        ("attributes".to_string(), by_domain(attributes)),
        ("capacity".to_string(), by_domain(capacity)),
        (
            "allowMultipleAllocations".to_string(),
            Value::Bool(device.allow_multiple_allocations == Some(true)),
        ),
    ]);
    fields.into()
}

/// The standard CEL environment with Kubernetes' quantity and semver functions as DRA
/// selectors use them: `quantity("40Gi")`, `semver("1.2.3")`, and on either
/// `compareTo`, `isGreaterThan`, `isLessThan`; on a quantity `asInteger`, `isInteger`
/// and `asApproximateFloat`.
fn selector_context() -> Context<'static, 'static> {
    let mut context = Context::default();
    let declared = [
        context.add_function("quantity", |text: Arc<String>| {
            in_thousandths(&text).map_err(|e| ExecutionError::function_error("quantity", e))
        }),
        context.add_function("semver", |text: Arc<String>| {
            semver::Version::parse(&text)
                .map(|v| Value::String(Arc::new(v.to_string())))
                .map_err(|e| ExecutionError::function_error("semver", e))
        }),
        context.add_function("compareTo", |This(a): This<Value>, b: Value| {
            compare("compareTo", &a, &b).map(|o| o as i64)
        }),
        context.add_function("isGreaterThan", |This(a): This<Value>, b: Value| {
            compare("isGreaterThan", &a, &b).map(|o| o.is_gt())
        }),
        context.add_function("isLessThan", |This(a): This<Value>, b: Value| {
            compare("isLessThan", &a, &b).map(|o| o.is_lt())
        }),
        context.add_function("asInteger", |This(q): This<i64>| {
            (q % 1000 == 0)
                .then_some(q / 1000)
                .ok_or_else(|| ExecutionError::function_error("asInteger", "not a whole number"))
        }),
        context.add_function("isInteger", |This(q): This<i64>| q % 1000 == 0),
        context.add_function("asApproximateFloat", |This(q): This<i64>| q as f64 / 1000.0),
    ];
    for result in declared {
        // The names are fixed and none is the standard library's: checked by the tests.
        debug_assert!(result.is_ok(), "{result:?}");
    }
    context
}

/// Two quantities, or two versions, in order.
fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Ok(a.cmp(b)),
        (Value::String(a), Value::String(b)) => {
            let read = |s: &str| {
                semver::Version::parse(s).map_err(|e| ExecutionError::function_error(function, e))
            };
            Ok(read(a)?.cmp(&read(b)?))
        }
        _ => Err(ExecutionError::function_error(
            function,
            "compares two quantities or two versions",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(yaml: &str) -> DeviceClass {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn device(yaml: &str) -> Device {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn selecting(name: &str, expression: &str) -> DeviceClass {
        class(&format!(
            "metadata: {{name: {name}}}\nspec: {{selectors: [{{cel: {{expression: '{}'}}}}]}}\n",
            expression.replace('\'', "''")
        ))
    }

    #[test]
    fn a_class_of_one_driver_names_its_devices() {
        let mut classes = DeviceClasses::default();
        assert_eq!(
            classes.resource_class("gpu.example.com"),
            "CUSTOM_GPU_EXAMPLE_COM"
        );
        let gpu = selecting("gpu", r#"device.driver == "gpu.example.com""#);
        assert!(classes.put(&gpu));
        assert!(!classes.put(&gpu), "the same class again changes nothing");
        assert_eq!(classes.resource_class("gpu.example.com"), "CUSTOM_GPU");
        let picker = classes.picker("gpu.example.com");
        assert_eq!(
            picker.resource_class(&device("name: gpu-0")),
            ("CUSTOM_GPU".to_string(), Some("gpu".to_string()))
        );
        assert_eq!(
            classes
                .picker("other.example.com")
                .resource_class(&device("name: x")),
            ("CUSTOM_OTHER_EXAMPLE_COM".to_string(), None)
        );
        assert!(classes.remove("gpu"));
        assert_eq!(
            classes.resource_class("gpu.example.com"),
            "CUSTOM_GPU_EXAMPLE_COM"
        );
    }

    #[test]
    fn selectors_read_attributes_capacity_quantities_and_versions() {
        let mut classes = DeviceClasses::default();
        classes.put(&selecting(
            "big-gpu",
            r#"device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        ));
        classes.put(&selecting("gpu", r#"device.driver == "gpu.example.com""#));
        classes.put(&selecting(
            "a100",
            r#"device.attributes["gpu.example.com"].model == "a100" && device.attributes["vendor.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#,
        ));
        let picker = classes.picker("gpu.example.com");
        let name = |yaml: &str| picker.class_name(&device(yaml)).map(str::to_string);
        // Unqualified names are in the driver's domain; classes are tried by name.
        assert_eq!(
            name(
                "{name: g, attributes: {model: {string: a100}, vendor.example.com/driverVersion: {version: 1.10.0}}, capacity: {memory: {value: 80Gi}}}"
            ),
            Some("a100".into())
        );
        assert_eq!(
            name(
                "{name: g, attributes: {model: {string: a100}, vendor.example.com/driverVersion: {version: 1.1.0}}, capacity: {memory: {value: 80Gi}}}"
            ),
            Some("big-gpu".into()),
            "1.1.0 is not above 1.2.0 (as versions, not as text)"
        );
        assert_eq!(
            name("{name: g, capacity: {gpu.example.com/memory: {value: 16Gi}}}"),
            Some("gpu".into()),
            "16Gi is below 40Gi; a selector naming a missing attribute does not hold"
        );
        // A class whose selector does not compile, or has none, names no device.
        classes.put(&selecting("aaa", "device.driver =="));
        classes.put(&class("metadata: {name: aab}\nspec: {}\n"));
        let picker = classes.picker("gpu.example.com");
        assert_eq!(picker.class_name(&device("name: g")), Some("gpu"));
    }

    #[test]
    fn the_quantity_and_semver_functions() {
        let context = selector_context();
        let run = |expression: &str| Program::compile(expression).unwrap().execute(&context);
        assert_eq!(
            run(r#"quantity("1Gi") == quantity("1024Mi")"#),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run(r#"quantity("500m").isLessThan(quantity("1"))"#),
            Ok(Value::Bool(true))
        );
        assert_eq!(run(r#"quantity("2k").asInteger()"#), Ok(Value::Int(2000)));
        assert_eq!(
            run(r#"quantity("1.5").isInteger()"#),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(r#"quantity("1.5").asApproximateFloat()"#),
            Ok(Value::Float(1.5))
        );
        assert_eq!(
            run(r#"semver("1.2.3").compareTo(semver("1.2.3"))"#),
            Ok(Value::Int(0))
        );
        assert!(run(r#"quantity("lots")"#).is_err());
        assert!(run(r#"semver("one")"#).is_err());
        assert!(run(r#"quantity("1").compareTo("1.0.0")"#).is_err());
    }
}

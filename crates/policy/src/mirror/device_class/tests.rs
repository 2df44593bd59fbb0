//! DeviceClass selectors: what they pick, the evaluator against the `cel` crate's
//! interpreter (what picked classes before), and the budgets.

use std::collections::HashMap;
use std::time::Instant;

use super::*;

fn class(yaml: &str) -> DeviceClass {
    serde_saphyr::from_str(yaml).unwrap()
}

fn device(yaml: &str) -> Device {
    serde_saphyr::from_str(yaml).unwrap()
}

fn selecting(name: &str, expressions: &[&str]) -> DeviceClass {
    let selectors: Vec<String> = expressions
        .iter()
        .map(|e| format!("{{cel: {{expression: '{}'}}}}", e.replace('\'', "''")))
        .collect();
    class(&format!(
        "metadata: {{name: {name}}}\nspec: {{selectors: [{}]}}\n",
        selectors.join(", ")
    ))
}

/// A slice of `driver` with the devices given as YAML flow mappings.
fn slice_of(driver: &str, devices: &[&str]) -> ResourceSlice {
    serde_saphyr::from_str(&format!(
        "spec: {{driver: {driver}, nodeName: n, pool: {{name: p, generation: 1, resourceSliceCount: 1}}, devices: [{}]}}\n",
        devices.join(", ")
    ))
    .unwrap()
}

/// The class picked for one device of `driver`.
fn picked(classes: &DeviceClasses, driver: &str, device: &str) -> Option<String> {
    classes
        .pick(&slice_of(driver, &[device]))
        .resource_class(0, driver)
        .1
}

#[test]
fn a_class_of_one_driver_names_its_devices() {
    let mut classes = DeviceClasses::default();
    assert_eq!(
        classes.resource_class("gpu.example.com"),
        "CUSTOM_GPU_EXAMPLE_COM"
    );
    let gpu = selecting("gpu", &[r#"device.driver == "gpu.example.com""#]);
    assert_eq!(classes.put(&gpu), Some(Vec::new()));
    assert_eq!(
        classes.put(&gpu),
        None,
        "the same class again changes nothing"
    );
    assert_eq!(classes.resource_class("gpu.example.com"), "CUSTOM_GPU");
    let picks = classes.pick(&slice_of("gpu.example.com", &["{name: gpu-0}"]));
    assert_eq!(
        picks.resource_class(0, "gpu.example.com"),
        ("CUSTOM_GPU".to_string(), Some("gpu".to_string()))
    );
    let other = classes.pick(&slice_of("other.example.com", &["{name: x}"]));
    assert_eq!(
        other.resource_class(0, "other.example.com"),
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
        &[
            r#"device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        ],
    ));
    classes.put(&selecting(
        "gpu",
        &[r#"device.driver == "gpu.example.com""#],
    ));
    classes.put(&selecting(
        "a100",
        &[
            r#"device.attributes["gpu.example.com"].model == "a100" && device.attributes["vendor.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#,
        ],
    ));
    let name = |yaml: &str| picked(&classes, "gpu.example.com", yaml);
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
    // A class whose selector does not compile, or has none, names no device, and says so.
    let problems = classes
        .put(&selecting("aaa", &["device.driver =="]))
        .unwrap();
    assert!(
        matches!(&problems[..], [ClassProblem { class, problem: SelectorProblem::DoesNotCompile { index: 0, .. } }] if class == "aaa"),
        "{problems:?}"
    );
    assert!(
        problems[0].to_string().starts_with(
            "DeviceClass \"aaa\": selector 0 does not compile, so the class selects no device: "
        ),
        "{}",
        problems[0]
    );
    assert_eq!(
        classes.put(&class("metadata: {name: aab}\nspec: {}\n")),
        Some(Vec::new())
    );
    assert_eq!(
        picked(&classes, "gpu.example.com", "{name: g}"),
        Some("gpu".into())
    );
}

/// A device for the evaluator's tests.
const DEVICE: &str = "{name: g, allowMultipleAllocations: true, attributes: {model: {string: a100}, mig-capable: {bool: true}, cores: {int: 108}, vendor.example.com/driverVersion: {version: 1.10.0}}, capacity: {memory: {value: 80Gi}, vendor.example.com/slots: {value: '4'}}}";

fn run(expression: &str) -> Result<Value, Halt> {
    run_within(expression, Duration::from_secs(60))
}

fn run_within(expression: &str, time: Duration) -> Result<Value, Halt> {
    let compiled = compile::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    let budget = Budget {
        cost_limit: COST_BUDGET,
        deadline: Instant::now() + time,
    };
    eval::evaluate(
        &compiled.root,
        &device_value("gpu.example.com", &device(DEVICE)),
        &budget,
        &mut 0,
    )
}

/// The same expression as the `cel` crate's interpreter evaluated it, with the device and
/// the functions the mirror gave it.
fn interpreted(expression: &str) -> Result<cel::Value, cel::ExecutionError> {
    use cel::extractors::This;
    use cel::{Context, ExecutionError, Program, Value as V};
    let mut context = Context::default();
    let declared = [
        context.add_function("quantity", |text: Arc<String>| {
            in_thousandths(&text).map_err(|e| ExecutionError::function_error("quantity", e))
        }),
        context.add_function("semver", |text: Arc<String>| {
            semver::Version::parse(&text)
                .map(|v| V::String(Arc::new(v.to_string())))
                .map_err(|e| ExecutionError::function_error("semver", e))
        }),
        context.add_function("compareTo", |This(a): This<V>, b: V| {
            old_compare(&a, &b).map(|o| o as i64)
        }),
        context.add_function("isGreaterThan", |This(a): This<V>, b: V| {
            old_compare(&a, &b).map(|o| o.is_gt())
        }),
        context.add_function("isLessThan", |This(a): This<V>, b: V| {
            old_compare(&a, &b).map(|o| o.is_lt())
        }),
        context.add_function("asInteger", |This(q): This<i64>| {
            (q % 1000 == 0)
                .then_some(q / 1000)
                .ok_or_else(|| ExecutionError::function_error("asInteger", "not whole"))
        }),
        context.add_function("isInteger", |This(q): This<i64>| q % 1000 == 0),
        context.add_function("asApproximateFloat", |This(q): This<i64>| q as f64 / 1000.0),
    ];
    assert!(declared.iter().all(Result::is_ok));
    let s = |t: &str| V::String(Arc::new(t.to_string()));
    let map = |entries: Vec<(&str, V)>| -> V {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<HashMap<String, V>>()
            .into()
    };
    let device = map(vec![
        ("driver", s("gpu.example.com")),
        (
            "attributes",
            map(vec![
                (
                    "gpu.example.com",
                    map(vec![
                        ("model", s("a100")),
                        ("mig-capable", V::Bool(true)),
                        ("cores", V::Int(108)),
                    ]),
                ),
                (
                    "vendor.example.com",
                    map(vec![("driverVersion", s("1.10.0"))]),
                ),
            ]),
        ),
        (
            "capacity",
            map(vec![
                (
                    "gpu.example.com",
                    map(vec![("memory", V::Int(85_899_345_920_000))]),
                ),
                ("vendor.example.com", map(vec![("slots", V::Int(4000))])),
            ]),
        ),
        ("allowMultipleAllocations", V::Bool(true)),
    ]);
    context.add_variable_from_value("device", device);
    Program::compile(expression).unwrap().execute(&context)
}

fn old_compare(a: &cel::Value, b: &cel::Value) -> Result<std::cmp::Ordering, cel::ExecutionError> {
    use cel::Value as V;
    match (a, b) {
        (V::Int(a), V::Int(b)) => Ok(a.cmp(b)),
        (V::String(a), V::String(b)) => {
            let read = |s: &str| {
                semver::Version::parse(s)
                    .map_err(|e| cel::ExecutionError::function_error("compareTo", e))
            };
            Ok(read(a)?.cmp(&read(b)?))
        }
        _ => Err(cel::ExecutionError::function_error(
            "compareTo",
            "two of a kind",
        )),
    }
}

/// What decides a selection: true, false, another value, or an error.
fn outcome_of_mine(v: Result<Value, Halt>) -> String {
    match v {
        Ok(Value::Bool(b)) => b.to_string(),
        Ok(other) => format!("a {}", value::type_name(&other)),
        Err(Halt::Error(_)) => "error".into(),
        Err(other) => format!("{other:?}"),
    }
}

fn outcome_of_cel(v: Result<cel::Value, cel::ExecutionError>) -> String {
    match v {
        Ok(cel::Value::Bool(b)) => b.to_string(),
        Ok(cel::Value::Int(_)) => "a int".into(),
        Ok(cel::Value::UInt(_)) => "a uint".into(),
        Ok(cel::Value::Float(_)) => "a double".into(),
        Ok(cel::Value::String(_)) => "a string".into(),
        Ok(cel::Value::List(_)) => "a list".into(),
        Ok(cel::Value::Map(_)) => "a map".into(),
        Ok(cel::Value::Null) => "a null".into(),
        Ok(other) => format!("{other:?}"),
        Err(_) => "error".into(),
    }
}

/// Every selector the mirror's tests, example and bench use, and the language around them:
/// the evaluator decides each as the `cel` crate's interpreter did.
#[test]
fn the_evaluator_decides_as_the_interpreter_did() {
    let expressions = [
        r#"device.driver == "gpu.example.com""#,
        r#"device.driver == "vgpu.example.com""#,
        r#"device.driver == "gpu.example.com" && device.attributes["gpu.example.com"]["mig-capable"]"#,
        r#"device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        r#"device.attributes["gpu.example.com"].model == "a100" && device.attributes["vendor.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#,
        r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("100Gi")) >= 0"#,
        r#"device.capacity["gpu.example.com"].memory >= quantity("40Gi")"#,
        r#"device.capacity["vendor.example.com"].slots.asInteger() == 4"#,
        r#"device.capacity["vendor.example.com"].slots.isInteger()"#,
        r#"device.capacity["vendor.example.com"].slots.asApproximateFloat() > 3.5"#,
        r#"quantity("500m").isLessThan(quantity("1"))"#,
        r#"quantity("1Gi") == quantity("1024Mi")"#,
        r#"quantity("1.5").asInteger() == 1"#,
        r#"quantity("lots") == 1"#,
        r#"semver("1.2.3").compareTo(semver("1.2.3")) == 0"#,
        r#"semver("one") == "one""#,
        r#"quantity("1").compareTo("1.0.0") == 0"#,
        r#"device.allowMultipleAllocations"#,
        r#"!device.allowMultipleAllocations"#,
        r#"device.attributes["gpu.example.com"].cores > 100 && device.attributes["gpu.example.com"].cores < 200u"#,
        r#"device.attributes["gpu.example.com"].cores == 108.0"#,
        r#"device.attributes["gpu.example.com"].cores + 1 == 109"#,
        r#"device.attributes["gpu.example.com"].cores * 2 - 16 == 200 && 7 / 2 == 3 && 7 % 2 == 1"#,
        r#"1 / 0 == 1"#,
        r#"9223372036854775807 + 1 > 0"#,
        r#"-device.attributes["gpu.example.com"].cores == -108"#,
        r#"1 + 1u == 2"#,
        r#"2.5 * 2.0 == 5.0 && 1.0 / 4.0 == 0.25"#,
        r#"device.attributes["gpu.example.com"].missing == 1"#,
        r#"device.attributes["gpu.example.com"].missing == 1 || true"#,
        r#"true || device.attributes["gpu.example.com"].missing == 1"#,
        r#"device.attributes["gpu.example.com"].missing == 1 && false"#,
        r#"device.attributes["gpu.example.com"].missing == 1 && true"#,
        r#"device.attributes["gpu.example.com"].missing == 1 || false"#,
        r#"device.attributes["nothing.example.com"].model == "a100""#,
        r#"has(device.attributes["gpu.example.com"].model)"#,
        r#"has(device.attributes["gpu.example.com"].missing)"#,
        r#""gpu.example.com" in device.attributes"#,
        r#""model" in device.attributes["gpu.example.com"]"#,
        r#"device.attributes["gpu.example.com"].model in ["a100", "h100"]"#,
        r#"3 in [1, 2]"#,
        r#"device.attributes["gpu.example.com"].model.startsWith("a1") && device.attributes["gpu.example.com"].model.endsWith("00") && device.attributes["gpu.example.com"].model.contains("10")"#,
        r#"size(device.attributes["gpu.example.com"].model) == 4 && device.attributes["gpu.example.com"].model.size() == 4"#,
        r#"size(device.attributes["gpu.example.com"]) == 3 && size([1, 2]) == 2 && size({"a": 1}) == 1"#,
        r#"device.attributes["gpu.example.com"].model + "-sxm" == "a100-sxm""#,
        r#"[1, 2] + [3] == [1, 2, 3]"#,
        r#"[1, 2, 3].all(x, x > 0) && [1, 2, 3].exists(x, x == 2) && [1, 2, 3].exists_one(x, x > 2)"#,
        r#"[1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x > 1) == [2, 3] && [1, 2, 3].map(x, x > 1, x) == [2, 3]"#,
        r#"[1, 0, 2].all(x, 4 / x > 0)"#,
        r#"[0, 1, 2].exists(x, 4 / x == 2)"#,
        r#"[1, 0, 2].all(x, 4 / x > 1)"#,
        r#"[0, 1].all(x, 4 / x > 10)"#,
        r#"{"a": 1, "b": 2}.all(k, k in ["a", "b"])"#,
        r#"{"a": 1}.a == 1 && {"a": {"b": true}}["a"].b"#,
        r#"[[1], [2, 3]][1][0] == 2"#,
        r#"[1][5] == 1"#,
        r#"int("12") == 12 && uint(3) == 3u && double(2) == 2.0 && string(12) == "12""#,
        r#"int("twelve") == 12"#,
        r#"true ? device.driver == "gpu.example.com" : false"#,
        r#"1 ? true : false"#,
        r#""a" < "b" && 1 < 2.5 && 2u > 1 && !(1 > 2)"#,
        r#"1 < "2""#,
        r#"[1, 2] == [1, 2.0] && {"a": 1} != {"a": 2}"#,
        r#"null == null"#,
        r#"device.attributes["gpu.example.com"].model"#,
        r#"device.attributes["gpu.example.com"].cores"#,
        r#"nothing == 1"#,
        r#"device.attributes["gpu.example.com"].model.unknownFunction()"#,
        r#"unknownFunction(1) || true"#,
        r#"@not_strictly_false(true)"#,
    ];
    let mut refused = 0;
    for expression in expressions {
        if compile::compile(expression).is_err() {
            assert!(
                cel::Program::compile(expression).is_err(),
                "{expression}: the interpreter's parser takes it"
            );
            refused += 1;
            continue;
        }
        assert_eq!(
            outcome_of_mine(run(expression)),
            outcome_of_cel(interpreted(expression)),
            "{expression}"
        );
    }
    assert_eq!(
        refused, 1,
        "only `@not_strictly_false`, which no one can write"
    );
}

#[test]
fn kubernetes_library_functions_beyond_the_interpreter() {
    let holds = |e: &str| outcome_of_mine(run(e));
    assert_eq!(
        holds(r#"isQuantity("40Gi") && !isQuantity("lots")"#),
        "true"
    );
    assert_eq!(holds(r#"isSemver("1.2.3") && !isSemver("one")"#), "true");
    assert_eq!(
        holds(
            r#"semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3"#
        ),
        "true"
    );
    assert_eq!(
        holds(r#"quantity("0").sign() == 0 && quantity("2").sign() == 1"#),
        "true"
    );
    assert_eq!(
        holds(r#""A100".lowerAscii() == "a100" && "a100".upperAscii() == "A100""#),
        "true"
    );
    assert_eq!(
        holds(
            r#"device.attributes["gpu.example.com"].model.matches("^a[0-9]+$") && matches("h100", "h.*")"#
        ),
        "true"
    );
    assert_eq!(holds(r#""x".matches("(")"#), "error");
    // A function kubeplace does not know is reported when the class is compiled.
    let mut classes = DeviceClasses::default();
    let problems = classes
        .put(&selecting(
            "c",
            &[r#"device.driver.split(".")[0] == "gpu""#],
        ))
        .unwrap();
    assert!(
        matches!(&problems[..], [ClassProblem { problem: SelectorProblem::UnknownFunctions { index: 0, functions }, .. }] if functions == "split"),
        "{problems:?}"
    );
}

/// `[1..n]`.
fn numbers(n: usize) -> String {
    let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// Three comprehensions nested over 45 numbers: kube-apiserver estimates its cost below
/// DRA's limit (about 850,000), and it costs as much to evaluate.
fn nested_loops(n: usize) -> String {
    let l = numbers(n);
    format!("{l}.all(a, {l}.all(b, {l}.all(c, a + b + c > 0)))")
}

#[test]
fn a_selector_costs_what_cel_go_counts_and_stops_at_the_budget() {
    let compiled = compile::compile(&nested_loops(45)).unwrap();
    let device = device_value("gpu.example.com", &device("{name: g}"));
    let budget = Budget {
        cost_limit: COST_BUDGET,
        deadline: Instant::now() + Duration::from_secs(600),
    };
    let mut spent = 0;
    let result = eval::evaluate(&compiled.root, &device, &budget, &mut spent);
    assert!(matches!(result, Ok(Value::Bool(true))), "{result:?}");
    // 45³ innermost items at 9 units each (condition 2, step 7), and the outer loops.
    assert!((820_000..900_000).contains(&spent), "{spent}");
    // A fourth loop passes the budget, and stops there.
    let l = numbers(45);
    let four = format!("{l}.all(d, {})", nested_loops(45));
    let compiled = compile::compile(&four).unwrap();
    let mut spent = 0;
    let result = eval::evaluate(&compiled.root, &device, &budget, &mut spent);
    assert_eq!(result.unwrap_err(), Halt::Cost);
    assert!(spent <= COST_BUDGET + 100, "{spent}");
    // Nothing absorbs an exhausted budget, not `||` nor an `exists()`'s error handling.
    let absorbed = format!("[1, 2].exists(x, {four}) || true");
    let compiled = compile::compile(&absorbed).unwrap();
    let result = eval::evaluate(&compiled.root, &device, &budget, &mut 0);
    assert_eq!(result.unwrap_err(), Halt::Cost);
}

/// Each level doubles what the one before built: 2^40 elements, or a string of a terabyte,
/// if nothing stopped it.
#[test]
fn doubling_lists_costs_no_memory_and_doubling_strings_is_charged_before_it_is_built() {
    let levels = ".map(l, l + l)".repeat(40);
    let lists = format!("[[0]]{levels}.all(l, size(l) > 0)");
    let started = Instant::now();
    assert_eq!(
        outcome_of_mine(run(&lists)),
        "true",
        "as cel-go joins lists"
    );
    let strings = format!(
        r#"["x"]{}.all(s, size(s) > 0)"#,
        ".map(s, s + s)".repeat(40)
    );
    assert_eq!(outcome_of_mine(run(&strings)), "Cost");
    // Walking the joined list is charged an item at a time.
    let walked = format!("[[0]]{levels}.all(l, l.all(x, x == 0))");
    assert_eq!(outcome_of_mine(run(&walked)), "Cost");
    // Comparing lists inside lists is charged for the outer ones; the deadline stops it.
    let compared = format!("[[0]]{levels}.all(l, [l] == [l])");
    let compared = run_within(&compared, Duration::from_millis(200));
    assert_eq!(outcome_of_mine(compared), "Time");
    // Where it took gigabytes and minutes.
    assert!(
        started.elapsed() < Duration::from_secs(5 * 60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_class_that_takes_too_long_selects_nothing_and_is_reported_once() {
    let mut classes = DeviceClasses::default();
    let selector = nested_loops(45);
    let hostile: Vec<&str> = vec![selector.as_str(); 32];
    classes.put(&selecting("hostile", &hostile));
    classes.put(&selecting(
        "zz-gpu",
        &[r#"device.driver == "gpu.example.com""#],
    ));
    let devices: Vec<String> = (0..8).map(|d| format!("{{name: gpu-{d}}}")).collect();
    let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
    let slice = slice_of("gpu.example.com", &devices);
    let started = Instant::now();
    let picks = classes.pick(&slice);
    let took = started.elapsed();
    for d in 0..8 {
        assert_eq!(
            picks.resource_class(d, "gpu.example.com").1.as_deref(),
            Some("zz-gpu"),
            "the next class picks it"
        );
    }
    assert!(
        matches!(&picks.problems[..], [ClassProblem { class, problem: SelectorProblem::TimeExceeded { budget, device } }]
            if class == "hostile" && *budget == TIME_BUDGET && device == "gpu.example.com/p/gpu-0"),
        "{:?}",
        picks.problems
    );
    assert!(
        picks.problems[0]
            .to_string()
            .contains("time budget of 100ms"),
        "{}",
        picks.problems[0]
    );
    // Eight devices at a tenth of a second each, where each took seconds.
    assert!(took < Duration::from_secs(8), "{took:?}");
    // Reported once for this version of the class.
    assert!(classes.pick(&slice).problems.is_empty());
}

/// `depth` `.all()`s nested, the innermost naming the driver.
fn nested(depth: usize) -> String {
    let mut e = r#"device.driver == "gpu.example.com""#.to_string();
    for i in 0..depth {
        e = format!("[{i}].all(x{i}, {e})");
    }
    e
}

#[test]
fn selectors_nested_as_deep_as_kube_apiserver_admits_compile_and_select() {
    for depth in [96, 250] {
        let mut classes = DeviceClasses::default();
        let problems = classes.put(&selecting("deep", &[&nested(depth)])).unwrap();
        assert!(problems.is_empty(), "{depth}: {problems:?}");
        assert_eq!(
            picked(&classes, "gpu.example.com", "{name: g}"),
            Some("deep".into()),
            "{depth}"
        );
        assert_eq!(picked(&classes, "other.example.com", "{name: g}"), None);
    }
    // Deeper than cel-go parses: reported.
    let mut classes = DeviceClasses::default();
    let problems = classes.put(&selecting("deeper", &[&nested(260)])).unwrap();
    assert!(
        matches!(&problems[..], [ClassProblem { problem: SelectorProblem::DoesNotCompile { reason, .. }, .. }] if reason.contains("nested deeper than the 250 levels cel-go parses")),
        "{problems:?}"
    );
    // A chain the parser does not count as nesting, as long as kube-apiserver takes one.
    let chain = format!("{}>0", vec!["1"; 5_000].join("+"));
    assert!(chain.len() <= compile::MAX_LENGTH);
    let problems = classes.put(&selecting("chain", &[&chain])).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        picked(&classes, "gpu.example.com", "{name: g}"),
        Some("chain".into())
    );
    // Longer than kube-apiserver takes: reported, not parsed.
    let long = format!("{}>0", vec!["1"; 6_000].join("+"));
    let problems = classes.put(&selecting("long", &[&long])).unwrap();
    assert!(
        problems[0].to_string().ends_with(
            "its expression is 12001 bytes long, beyond the 10240 kube-apiserver admits"
        ),
        "{problems:?}"
    );
}

//! Evaluating a compiled selector against a device, within a cost budget and a deadline.
//!
//! Costs are counted as cel-go counts them at run time (what kube-scheduler limits with
//! `CostLimit`): nothing for a literal, `&&`, `||` or `?:`; one for a name, a field or an
//! index; one for most calls; 10 for a list literal and 30 for a map literal; and for
//! operations on strings and lists a charge in proportion to their size (a tenth of a unit
//! a byte to join, compare or search strings; a unit an element to look through a list with
//! `in`). Each charge is made before the work, so a value is never built past the budget:
//! a string can grow by ten bytes a unit at most, a `map()`'s list by one element for 12
//! units. Lists are joined as cel-go joins them, without copying (a join refers to both
//! sides), so doubling a list costs one unit and no memory; a chain of joins deeper than
//! [`MAX_JOINS`] is copied into one list, for its elements' count in units.
//!
//! When the cost passes the budget or the deadline passes (checked every [`CLOCK_EVERY`]
//! units of cost, and every [`CLOCK_EVERY`] items walked or elements compared), evaluation
//! stops at once: nothing absorbs it as `&&` or `||` absorb an error.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::compile::{Fold, Function, Node, Step};
use super::value::{Key, List, Map, Value, type_name};
use crate::mirror::quantity::in_thousandths;

/// A chain of list joins deeper than this is copied into one list. Joins nest no deeper
/// than the selector's tree (a comprehension's accumulator is never joined), so this only
/// bounds the walk down to an element.
pub const MAX_JOINS: usize = 1_024;

/// How often, in units of cost or in steps of a walk, the deadline is checked.
const CLOCK_EVERY: u64 = 1_024;

/// Patterns compiled for `matches` kept during one evaluation.
const REGEX_CACHE: usize = 4;

/// The largest program a `matches` pattern may compile to.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Why an evaluation stopped short of a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Halt {
    /// A CEL error (a missing attribute, a type mismatch): the selector does not hold.
    Error(String),
    /// The cost passed the budget.
    Cost,
    /// The deadline passed.
    Time,
}

impl Halt {
    fn is_error(&self) -> bool {
        matches!(self, Halt::Error(_))
    }
}

fn error<T>(message: impl Into<String>) -> Result<T, Halt> {
    Err(Halt::Error(message.into()))
}

type Eval = Result<Value, Halt>;

/// What one evaluation may spend.
pub struct Budget {
    pub cost_limit: u64,
    pub deadline: Instant,
}

/// Evaluates `root` for `device`; the cost it took is in `spent` whatever the outcome.
pub fn evaluate(root: &Node, device: &Value, budget: &Budget, spent: &mut u64) -> Eval {
    let mut evaluator = Evaluator {
        device,
        locals: Vec::new(),
        cost: 0,
        next_clock: CLOCK_EVERY,
        steps: 0,
        budget,
        regexes: HashMap::new(),
    };
    let result = evaluator.eval(root);
    *spent = evaluator.cost;
    result
}

struct Evaluator<'a> {
    device: &'a Value,
    /// The comprehensions' variables, by slot.
    locals: Vec<Value>,
    cost: u64,
    next_clock: u64,
    steps: u64,
    budget: &'a Budget,
    regexes: HashMap<Arc<str>, regex::Regex>,
}

/// `units` a tenth of `size`, rounded up, as cel-go charges a traversal of a string.
fn tenth(size: usize) -> u64 {
    (size as u64).div_ceil(10)
}

/// The size cel-go charges by: a string's, a list's or a map's; one for anything else.
fn size_of(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        _ => 1,
    }
}

/// A string's or bytes' length; nothing for other values.
fn text_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 0,
    }
}

impl Evaluator<'_> {
    fn charge(&mut self, units: u64) -> Result<(), Halt> {
        self.cost = self.cost.saturating_add(units);
        if self.cost > self.budget.cost_limit {
            return Err(Halt::Cost);
        }
        if self.cost >= self.next_clock {
            self.next_clock = self.cost + CLOCK_EVERY;
            self.check_clock()?;
        }
        Ok(())
    }

    /// A step of a walk that need not charge anything (an item of a comprehension, an
    /// element compared): the deadline is checked every [`CLOCK_EVERY`] steps.
    fn tick(&mut self) -> Result<(), Halt> {
        self.steps += 1;
        if self.steps % CLOCK_EVERY == 0 {
            self.check_clock()?;
        }
        Ok(())
    }

    fn check_clock(&self) -> Result<(), Halt> {
        if Instant::now() >= self.budget.deadline {
            return Err(Halt::Time);
        }
        Ok(())
    }

    fn eval(&mut self, node: &Node) -> Eval {
        match node {
            Node::Literal(v) => Ok(v.clone()),
            Node::Device => {
                self.charge(1)?;
                Ok(self.device.clone())
            }
            Node::Local(slot) => {
                self.charge(1)?;
                Ok(self.locals[*slot].clone())
            }
            Node::Undeclared(name) => error(format!("undeclared reference to '{name}'")),
            Node::Select {
                operand,
                field,
                test,
            } => {
                let operand = self.eval(operand)?;
                self.charge(1)?;
                select(&operand, field, *test)
            }
            Node::Call { function, args } => self.call(function, args),
            Node::List(elements) => {
                let mut items = Vec::with_capacity(elements.len());
                for e in elements {
                    items.push(self.eval(e)?);
                }
                self.charge(10)?;
                Ok(Value::List(List::new(items)))
            }
            Node::Map(entries) => {
                let mut map = Map::new();
                for (k, v) in entries {
                    let key = key_of(&self.eval(k)?)?;
                    let value = self.eval(v)?;
                    if map.insert(key.clone(), value).is_some() {
                        return error(format!("repeated key {key:?} in a map"));
                    }
                }
                self.charge(30)?;
                Ok(Value::Map(Arc::new(map)))
            }
            Node::Fold(fold) => self.fold(fold),
        }
    }

    /// A value that must be a bool, as `&&`, `||`, `!` and `?:` take one.
    fn boolean(&mut self, node: &Node) -> Result<Result<bool, Halt>, Halt> {
        Ok(match self.eval(node) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(Halt::Error(format!(
                "expected a bool, got {}",
                type_name(&other)
            ))),
            Err(e) if e.is_error() => Err(e),
            Err(stop) => return Err(stop),
        })
    }

    fn call(&mut self, function: &Function, args: &[Node]) -> Eval {
        use Function::*;
        // The operators that do not evaluate every operand, or absorb errors.
        match (function, args) {
            (And | Or, [left, right]) => {
                let decisive = matches!(function, Or);
                let left = self.boolean(left)?;
                if left == Ok(decisive) {
                    return Ok(Value::Bool(decisive));
                }
                let right = self.eval(right)?;
                return match (left, right) {
                    (Ok(_), Value::Bool(r)) => Ok(Value::Bool(r)),
                    (Err(_), Value::Bool(r)) if r == decisive => Ok(Value::Bool(decisive)),
                    (Err(e), _) => Err(e),
                    (Ok(_), other) => error(format!(
                        "no such overload: bool {} {}",
                        if decisive { "||" } else { "&&" },
                        type_name(&other)
                    )),
                };
            }
            (Conditional, [cond, yes, no]) => {
                let cond = self.boolean(cond)??;
                return self.eval(if cond { yes } else { no });
            }
            (NotStrictlyFalse, [arg]) => {
                self.charge(1)?;
                return Ok(Value::Bool(self.boolean(arg)?.unwrap_or(true)));
            }
            _ => {}
        }
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.eval(a)?);
        }
        self.apply(function, values)
    }

    fn fold(&mut self, fold: &Fold) -> Eval {
        let range = self.eval(&fold.range)?;
        let init = self.eval(&fold.init)?;
        debug_assert_eq!(self.locals.len(), fold.slot);
        self.locals.push(Value::Null);
        self.locals.push(init);
        // The items are walked as they are needed: a list of many joins is never copied.
        let result = match &range {
            Value::List(l) => self.fold_items(fold, l.iter().cloned()),
            Value::Map(m) => self.fold_items(fold, m.keys().map(key_value)),
            other => error(format!("cannot iterate over {}", type_name(other))),
        };
        self.locals.truncate(fold.slot);
        result
    }

    fn fold_items(&mut self, fold: &Fold, items: impl Iterator<Item = Value>) -> Eval {
        let (iter, accu) = (fold.slot, fold.slot + 1);
        if let Step::Append { guard, items: item } = &fold.step {
            let mut built = Vec::new();
            for value in items {
                self.tick()?;
                self.locals[iter] = value;
                if let Some(guard) = guard {
                    // `guard ? @result + [item] : @result`
                    if !self.boolean(guard)?? {
                        self.charge(1)?;
                        continue;
                    }
                }
                // `@result + [item]`: the accumulator and the join (the list literal
                // charges itself).
                self.charge(2)?;
                let Value::List(list) = self.eval(item)? else {
                    unreachable!("an appended item is a list literal");
                };
                built.extend(list.iter().cloned());
            }
            return Ok(Value::List(List::new(built)));
        }
        let mut pending: Option<Halt> = None;
        for value in items {
            self.tick()?;
            self.locals[iter] = value;
            if !self.boolean(&fold.cond)?? {
                break;
            }
            match &fold.step {
                Step::Logical { and, step } => match self.eval(step) {
                    Ok(v) => {
                        // `false` for `&&`, `true` for `||`, decides beside a pending error.
                        let decides = matches!(v, Value::Bool(b) if b != *and);
                        if pending.is_none() || decides {
                            pending = None;
                            self.locals[accu] = v;
                        }
                    }
                    Err(e) if e.is_error() => pending = Some(e),
                    Err(stop) => return Err(stop),
                },
                Step::Plain(step) => self.locals[accu] = self.eval(step)?,
                Step::Append { .. } => unreachable!("handled above"),
            }
        }
        if let Some(e) = pending {
            return Err(e);
        }
        self.eval(&fold.result)
    }

    /// A function applied to its operands' values (a member call's receiver first). Kept
    /// apart from the recursion: its frame is large.
    #[inline(never)]
    fn apply(&mut self, function: &Function, mut args: Vec<Value>) -> Eval {
        use Function::*;
        use Value as V;
        let charged = match (function, args.as_slice()) {
            (Equals | NotEquals | Less | LessEquals | Greater | GreaterEquals, [a, b]) => {
                tenth(size_of(a).min(size_of(b))).max(1)
            }
            (Add, [V::String(a), V::String(b)]) => tenth(a.len() + b.len()).max(1),
            (Add, [V::Bytes(a), V::Bytes(b)]) => tenth(a.len() + b.len()).max(1),
            // A join deeper than MAX_JOINS copies both lists.
            (Add, [V::List(a), V::List(b)]) if a.depth().max(b.depth()) >= MAX_JOINS => {
                a.len().saturating_add(b.len()) as u64
            }
            (In, [_, V::List(l)]) => (l.len() as u64).max(1),
            (StartsWith | EndsWith, [s, _]) => tenth(size_of(s)).max(1),
            (Contains, [s, sub]) => (tenth(size_of(s)) * tenth(size_of(sub))).max(1),
            (Matches, [s, re]) => {
                ((1 + size_of(s) as u64).div_ceil(10) * (size_of(re) as u64).div_ceil(4)).max(1)
            }
            (LowerAscii | UpperAscii | Quantity | IsQuantity | Semver | IsSemver, [s]) => {
                tenth(size_of(s)).max(1)
            }
            // Work in proportion to a string's length that cel-go counts as one unit:
            // charged by length, so that no unit takes long.
            (Size | Int | Uint | Double | String | Bytes | Major | Minor | Patch, [s]) => {
                tenth(text_len(s)).max(1)
            }
            (CompareTo | IsGreaterThan | IsLessThan, [a, b]) => {
                tenth(text_len(a) + text_len(b)).max(1)
            }
            _ => 1,
        };
        self.charge(charged)?;
        match (function, args.as_mut_slice()) {
            (Equals, [a, b]) => Ok(V::Bool(self.equal(a, b)?)),
            (NotEquals, [a, b]) => Ok(V::Bool(!self.equal(a, b)?)),
            (Less, [a, b]) => Ok(V::Bool(compare(a, b)? == Ordering::Less)),
            (LessEquals, [a, b]) => Ok(V::Bool(compare(a, b)? != Ordering::Greater)),
            (Greater, [a, b]) => Ok(V::Bool(compare(a, b)? == Ordering::Greater)),
            (GreaterEquals, [a, b]) => Ok(V::Bool(compare(a, b)? != Ordering::Less)),
            (Not, [V::Bool(b)]) => Ok(V::Bool(!*b)),
            (Add, [a, b]) => add(a, b),
            (Subtract, [a, b]) => {
                arithmetic("-", a, b, i64::checked_sub, u64::checked_sub, |x, y| x - y)
            }
            (Multiply, [a, b]) => {
                arithmetic("*", a, b, i64::checked_mul, u64::checked_mul, |x, y| x * y)
            }
            (Divide | Modulo, [V::Int(_), V::Int(0)] | [V::Uint(_), V::Uint(0)]) => {
                error("division by zero")
            }
            (Divide, [a, b]) => {
                arithmetic("/", a, b, i64::checked_div, u64::checked_div, |x, y| x / y)
            }
            (Modulo, [a, b]) => arithmetic("%", a, b, i64::checked_rem, u64::checked_rem, |x, _| x),
            (Negate, [V::Int(i)]) => i
                .checked_neg()
                .map(V::Int)
                .map_or_else(|| error("integer overflow"), Ok),
            (Negate, [V::Double(d)]) => Ok(V::Double(-*d)),
            (In, [x, V::List(l)]) => {
                for e in l.iter() {
                    if self.equal(x, e)? {
                        return Ok(V::Bool(true));
                    }
                }
                Ok(V::Bool(false))
            }
            (In, [k, V::Map(m)]) => Ok(V::Bool(map_get(m, k).is_some())),
            (Index, [V::List(l), i]) => {
                let index = match i {
                    V::Int(i) => usize::try_from(*i).ok(),
                    V::Uint(u) => usize::try_from(*u).ok(),
                    V::Double(d) if d.fract() == 0.0 && *d >= 0.0 => Some(*d as usize),
                    other => {
                        return error(format!("cannot index a list with {}", type_name(other)));
                    }
                };
                index
                    .and_then(|i| l.get(i))
                    .cloned()
                    .map_or_else(|| error("index out of bounds"), Ok)
            }
            (Index, [V::Map(m), k]) => map_get(m, k)
                .cloned()
                .map_or_else(|| error(format!("no such key: {}", display_key(k))), Ok),
            (Size, [V::String(s)]) => Ok(V::Int(s.chars().count() as i64)),
            (Size, [V::Bytes(b)]) => Ok(V::Int(b.len() as i64)),
            (Size, [V::List(l)]) => Ok(V::Int(l.len() as i64)),
            (Size, [V::Map(m)]) => Ok(V::Int(m.len() as i64)),
            (Int, [v]) => to_int(v),
            (Uint, [v]) => to_uint(v),
            (Double, [v]) => to_double(v),
            (String, [v]) => to_string(v),
            (Bool, [V::Bool(b)]) => Ok(V::Bool(*b)),
            (Bool, [V::String(s)]) => match &**s {
                "1" | "t" | "true" | "TRUE" | "True" => Ok(V::Bool(true)),
                "0" | "f" | "false" | "FALSE" | "False" => Ok(V::Bool(false)),
                other => error(format!("cannot read {other:?} as a bool")),
            },
            (Bytes, [V::Bytes(b)]) => Ok(V::Bytes(b.clone())),
            (Bytes, [V::String(s)]) => Ok(V::Bytes(Arc::from(s.as_bytes()))),
            (Dyn, [v]) => Ok(std::mem::replace(v, V::Null)),
            (Contains, [V::String(s), V::String(sub)]) => Ok(V::Bool(s.contains(&**sub))),
            (StartsWith, [V::String(s), V::String(p)]) => Ok(V::Bool(s.starts_with(&**p))),
            (EndsWith, [V::String(s), V::String(p)]) => Ok(V::Bool(s.ends_with(&**p))),
            (Matches, [V::String(s), V::String(re)]) => {
                let s = s.clone();
                Ok(V::Bool(self.regex(re)?.is_match(&s)))
            }
            (LowerAscii, [V::String(s)]) => Ok(V::String(Arc::from(s.to_ascii_lowercase()))),
            (UpperAscii, [V::String(s)]) => Ok(V::String(Arc::from(s.to_ascii_uppercase()))),
            (Quantity, [V::String(s)]) => in_thousandths(s)
                .map(V::Int)
                .map_or_else(|e| error(format!("quantity: {e}")), Ok),
            (IsQuantity, [V::String(s)]) => Ok(V::Bool(in_thousandths(s).is_ok())),
            (Semver, [V::String(s)]) => semver::Version::parse(s)
                .map(|v| V::String(Arc::from(v.to_string())))
                .map_or_else(|e| error(format!("semver: {e}")), Ok),
            (IsSemver, [V::String(s)]) => Ok(V::Bool(semver::Version::parse(s).is_ok())),
            (CompareTo, [a, b]) => Ok(V::Int(order(a, b)? as i64)),
            (IsGreaterThan, [a, b]) => Ok(V::Bool(order(a, b)?.is_gt())),
            (IsLessThan, [a, b]) => Ok(V::Bool(order(a, b)?.is_lt())),
            (AsInteger, [V::Int(q)]) if *q % 1000 == 0 => Ok(V::Int(*q / 1000)),
            (AsInteger, [V::Int(_)]) => error("asInteger: not a whole number"),
            (IsInteger, [V::Int(q)]) => Ok(V::Bool(*q % 1000 == 0)),
            (AsApproximateFloat, [V::Int(q)]) => Ok(V::Double(*q as f64 / 1000.0)),
            (Sign, [V::Int(q)]) => Ok(V::Int(q.signum())),
            (Major | Minor | Patch, [V::String(s)]) => {
                let v =
                    semver::Version::parse(s).map_err(|e| Halt::Error(format!("semver: {e}")))?;
                let part = match function {
                    Major => v.major,
                    Minor => v.minor,
                    _ => v.patch,
                };
                i64::try_from(part)
                    .map(V::Int)
                    .map_or_else(|_| error("integer overflow"), Ok)
            }
            (Unknown(name), _) => error(format!("undeclared reference to '{name}'")),
            (f, values) => error(format!(
                "no such overload: {f:?}({})",
                values.iter().map(type_name).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// CEL's `==`. Lists and maps are compared element by element, the deadline checked
    /// as they are (`[l] == [l]` is charged as a comparison of one element).
    fn equal(&mut self, a: &Value, b: &Value) -> Result<bool, Halt> {
        use Value as V;
        match (a, b) {
            (V::List(a), V::List(b)) => {
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (x, y) in a.iter().zip(b.iter()) {
                    self.tick()?;
                    if !self.equal(x, y)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            (V::Map(a), V::Map(b)) => {
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (k, v) in a.iter() {
                    self.tick()?;
                    match map_get(b, &key_value(k)) {
                        Some(w) if self.equal(v, w)? => {}
                        _ => return Ok(false),
                    }
                }
                Ok(true)
            }
            _ => Ok(scalar_equal(a, b)),
        }
    }

    /// A `matches` pattern, compiled once an evaluation.
    fn regex(&mut self, pattern: &Arc<str>) -> Result<&regex::Regex, Halt> {
        if !self.regexes.contains_key(pattern) {
            let compiled = regex::RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| Halt::Error(format!("matches: {e}")))?;
            if self.regexes.len() >= REGEX_CACHE {
                self.regexes.clear();
            }
            self.regexes.insert(pattern.clone(), compiled);
        }
        Ok(&self.regexes[pattern])
    }
}

fn select(operand: &Value, field: &str, test: bool) -> Eval {
    let Value::Map(map) = operand else {
        return error(format!("no field {field:?} on a {}", type_name(operand)));
    };
    let found = map.get(&Key::String(Arc::from(field)));
    match (found, test) {
        (found, true) => Ok(Value::Bool(found.is_some())),
        (Some(v), false) => Ok(v.clone()),
        (None, false) => error(format!("no such key: {field}")),
    }
}

fn key_of(v: &Value) -> Result<Key, Halt> {
    match v {
        Value::Bool(b) => Ok(Key::Bool(*b)),
        Value::Int(i) => Ok(Key::Int(*i)),
        Value::Uint(u) => Ok(Key::Uint(*u)),
        Value::String(s) => Ok(Key::String(s.clone())),
        other => error(format!("a {} cannot be a map key", type_name(other))),
    }
}

fn key_value(k: &Key) -> Value {
    match k {
        Key::Bool(b) => Value::Bool(*b),
        Key::Int(i) => Value::Int(*i),
        Key::Uint(u) => Value::Uint(*u),
        Key::String(s) => Value::String(s.clone()),
    }
}

fn display_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

/// A map's value at `k`; numbers find each other across types, as CEL's keys do.
fn map_get<'m>(map: &'m Map, k: &Value) -> Option<&'m Value> {
    let candidates: Vec<Key> = match k {
        Value::Int(i) => {
            let mut keys = vec![Key::Int(*i)];
            keys.extend(u64::try_from(*i).ok().map(Key::Uint));
            keys
        }
        Value::Uint(u) => {
            let mut keys = vec![Key::Uint(*u)];
            keys.extend(i64::try_from(*u).ok().map(Key::Int));
            keys
        }
        Value::Double(d) if d.fract() == 0.0 => {
            let mut keys = Vec::new();
            if *d >= i64::MIN as f64 && *d < i64::MAX as f64 {
                keys.push(Key::Int(*d as i64));
            }
            if *d >= 0.0 && *d < u64::MAX as f64 {
                keys.push(Key::Uint(*d as u64));
            }
            keys
        }
        other => key_of(other).ok().into_iter().collect(),
    };
    candidates.iter().find_map(|key| map.get(key))
}

/// CEL's `==` on values that are not lists or maps: numbers compare across types; values
/// of other types differ.
fn scalar_equal(a: &Value, b: &Value) -> bool {
    use Value as V;
    match (a, b) {
        (V::Null, V::Null) => true,
        (V::Bool(a), V::Bool(b)) => a == b,
        (V::String(a), V::String(b)) => a == b,
        (V::Bytes(a), V::Bytes(b)) => a == b,
        (a, b) => numeric_order(a, b) == Some(Ordering::Equal),
    }
}

/// Two numbers in order, across types.
fn numeric_order(a: &Value, b: &Value) -> Option<Ordering> {
    use Value as V;
    match (a, b) {
        (V::Int(a), V::Int(b)) => Some(a.cmp(b)),
        (V::Uint(a), V::Uint(b)) => Some(a.cmp(b)),
        (V::Double(a), V::Double(b)) => a.partial_cmp(b),
        (V::Int(a), V::Uint(b)) => Some(match u64::try_from(*a) {
            Ok(a) => a.cmp(b),
            Err(_) => Ordering::Less,
        }),
        (V::Uint(_), V::Int(_)) => numeric_order(b, a).map(Ordering::reverse),
        (V::Int(a), V::Double(b)) => (*a as f64).partial_cmp(b),
        (V::Uint(a), V::Double(b)) => (*a as f64).partial_cmp(b),
        (V::Double(_), V::Int(_) | V::Uint(_)) => numeric_order(b, a).map(Ordering::reverse),
        _ => None,
    }
}

/// CEL's `<` and the others.
fn compare(a: &Value, b: &Value) -> Result<Ordering, Halt> {
    use Value as V;
    let ordered = match (a, b) {
        (V::String(a), V::String(b)) => Some(a.cmp(b)),
        (V::Bytes(a), V::Bytes(b)) => Some(a.cmp(b)),
        (V::Bool(a), V::Bool(b)) => Some(a.cmp(b)),
        (V::Null, V::Null) => Some(Ordering::Equal),
        _ => numeric_order(a, b),
    };
    ordered.map_or_else(
        || {
            error(format!(
                "{} and {} cannot be compared",
                type_name(a),
                type_name(b)
            ))
        },
        Ok,
    )
}

/// Two quantities (thousandths of their unit) or two versions in order, as `compareTo`,
/// `isGreaterThan` and `isLessThan` take them.
fn order(a: &Value, b: &Value) -> Result<Ordering, Halt> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Ok(a.cmp(b)),
        (Value::String(a), Value::String(b)) => {
            let read = |s: &str| {
                semver::Version::parse(s).map_err(|e| Halt::Error(format!("semver: {e}")))
            };
            Ok(read(a)?.cmp(&read(b)?))
        }
        _ => error("compares two quantities or two versions"),
    }
}

fn add(a: &Value, b: &Value) -> Eval {
    use Value as V;
    match (a, b) {
        (V::String(a), V::String(b)) => {
            let mut joined = String::with_capacity(a.len() + b.len());
            joined.push_str(a);
            joined.push_str(b);
            Ok(V::String(Arc::from(joined)))
        }
        (V::Bytes(a), V::Bytes(b)) => Ok(V::Bytes(Arc::from([&a[..], &b[..]].concat()))),
        (V::List(a), V::List(b)) => join(a, b).map(V::List),
        _ => arithmetic("+", a, b, i64::checked_add, u64::checked_add, |x, y| x + y),
    }
}

/// Two lists joined (see [`List::join`]); a list longer than an int counts is an error.
fn join(a: &List, b: &List) -> Result<List, Halt> {
    a.join(b, MAX_JOINS)
        .map_or_else(|| error("a list longer than an int counts"), Ok)
}

fn arithmetic(
    operator: &str,
    a: &Value,
    b: &Value,
    int: fn(i64, i64) -> Option<i64>,
    uint: fn(u64, u64) -> Option<u64>,
    double: fn(f64, f64) -> f64,
) -> Eval {
    use Value as V;
    match (a, b) {
        (V::Int(x), V::Int(y)) => int(*x, *y)
            .map(V::Int)
            .map_or_else(|| error("integer overflow"), Ok),
        (V::Uint(x), V::Uint(y)) => uint(*x, *y)
            .map(V::Uint)
            .map_or_else(|| error("unsigned integer overflow"), Ok),
        (V::Double(x), V::Double(y)) if operator != "%" => Ok(V::Double(double(*x, *y))),
        _ => error(format!(
            "no such overload: {} {operator} {}",
            type_name(a),
            type_name(b)
        )),
    }
}

fn to_int(v: &Value) -> Eval {
    match v {
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Uint(u) => i64::try_from(*u)
            .map(Value::Int)
            .map_or_else(|_| error("integer overflow"), Ok),
        Value::Double(d)
            if d.is_finite() && *d > -9.223_372_036_854_776e18 && *d < 9.223_372_036_854_776e18 =>
        {
            Ok(Value::Int(*d as i64))
        }
        Value::String(s) => s
            .parse()
            .map(Value::Int)
            .map_or_else(|_| error(format!("cannot read {s:?} as an int")), Ok),
        other => error(format!("cannot convert a {} to int", type_name(other))),
    }
}

fn to_uint(v: &Value) -> Eval {
    match v {
        Value::Uint(u) => Ok(Value::Uint(*u)),
        Value::Int(i) => u64::try_from(*i)
            .map(Value::Uint)
            .map_or_else(|_| error("unsigned integer overflow"), Ok),
        Value::Double(d) if d.is_finite() && *d > -1.0 && *d < 1.844_674_407_370_955_2e19 => {
            Ok(Value::Uint(*d as u64))
        }
        Value::String(s) => s
            .parse()
            .map(Value::Uint)
            .map_or_else(|_| error(format!("cannot read {s:?} as a uint")), Ok),
        other => error(format!("cannot convert a {} to uint", type_name(other))),
    }
}

fn to_double(v: &Value) -> Eval {
    match v {
        Value::Double(d) => Ok(Value::Double(*d)),
        Value::Int(i) => Ok(Value::Double(*i as f64)),
        Value::Uint(u) => Ok(Value::Double(*u as f64)),
        Value::String(s) => s
            .parse()
            .map(Value::Double)
            .map_or_else(|_| error(format!("cannot read {s:?} as a double")), Ok),
        other => error(format!("cannot convert a {} to double", type_name(other))),
    }
}

fn to_string(v: &Value) -> Eval {
    let text = match v {
        Value::String(s) => return Ok(Value::String(s.clone())),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_string(),
            Err(_) => return error("bytes are not UTF-8"),
        },
        other => return error(format!("cannot convert a {} to string", type_name(other))),
    };
    Ok(Value::String(Arc::from(text)))
}

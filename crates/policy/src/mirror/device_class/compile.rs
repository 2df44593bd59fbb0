//! A selector's CEL expression, parsed as kube-apiserver parses it (cel-go's parser recursion
//! limit, [`PARSE_DEPTH`]), turned into the tree the evaluator (`eval.rs`) walks: names resolved to
//! `device` or a comprehension's variable, functions to what they are, and the macros'
//! comprehensions to the shapes they have (a list built item by item, an `all`/`exists`
//! fold, or neither).

use std::sync::Arc;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::parser::Parser;

use super::value::Value;

/// How deep expressions may nest as the parser counts (`(`, calls, lists, maps): cel-go's
/// default `MaxRecursionDepth`, which kube-apiserver keeps for DRA selectors.
pub const PARSE_DEPTH: u16 = 250;

/// The longest selector expression kube-apiserver admits: DRA's
/// `CELSelectorExpressionMaxLength`. Longer ones are not parsed (what a parser's stack
/// needs grows with the length).
pub const MAX_LENGTH: usize = 10_240;

/// How deep the tree of one selector may be. The parser's limit counts nested expressions;
/// chains it does not count (`a + a + ...`, `x.map(..).map(..)`) make trees deeper, up to
/// what a selector kube-apiserver takes (10,240 characters) can spell. Deeper ones are not
/// evaluated (reported as not compiling), so that no stack is asked for more than it has.
pub const MAX_DEPTH: usize = 6_000;

/// A selector compiled.
#[derive(Debug)]
pub struct Selector {
    pub root: Node,
    /// The depth of `root`'s tree: how much stack evaluating it takes.
    pub depth: usize,
    /// Functions it calls that kubeplace does not evaluate (a call of one is an error
    /// where it is evaluated, as in a CEL environment without them).
    pub unknown_functions: Vec<String>,
}

/// Why a selector does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("{0}")]
    Parse(String),
    #[error("its expression is {length} bytes long, beyond the {MAX_LENGTH} kube-apiserver admits")]
    TooLong { length: usize },
    #[error("its expression nests {depth} deep, beyond the {MAX_DEPTH} kubeplace evaluates")]
    TooDeep { depth: usize },
    #[error("{0} is not supported in DRA selectors")]
    Unsupported(&'static str),
}

/// A node of a compiled selector.
#[derive(Debug)]
pub enum Node {
    Literal(Value),
    /// The variable `device`.
    Device,
    /// A comprehension's variable, by its slot (its comprehension's depth).
    Local(usize),
    /// A name nothing declares: an error where evaluated.
    Undeclared(Arc<str>),
    /// `operand.field`, or `has(operand.field)` when `test`.
    Select {
        operand: Box<Node>,
        field: Arc<str>,
        test: bool,
    },
    /// A function or operator; a member call's receiver is `args[0]`.
    Call {
        function: Function,
        args: Vec<Node>,
    },
    List(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Fold(Box<Fold>),
}

/// A comprehension (what `all`, `exists`, `exists_one`, `map` and `filter` expand to). Its
/// iteration variable is in slot `slot`, its accumulator in `slot + 1`.
#[derive(Debug)]
pub struct Fold {
    pub range: Node,
    pub init: Node,
    pub cond: Node,
    pub step: Step,
    pub result: Node,
    pub slot: usize,
}

/// What a comprehension does at each item.
#[derive(Debug)]
pub enum Step {
    /// `map`/`filter`: the accumulator, a list that starts empty, gets `items` appended
    /// (where `guard` holds); built in place rather than copied at each item.
    Append { guard: Option<Node>, items: Node },
    /// `all` (`&&`) or `exists` (`||`): an error at one item stands until an item decides
    /// the result without it (as cel-go's `&&` and `||` absorb errors).
    Logical { and: bool, step: Node },
    /// Anything else: the accumulator becomes the step's value.
    Plain(Node),
}

/// The functions and operators selectors may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Function {
    And,
    Or,
    Not,
    NotStrictlyFalse,
    Conditional,
    Equals,
    NotEquals,
    Less,
    LessEquals,
    Greater,
    GreaterEquals,
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Negate,
    In,
    Index,
    Size,
    Int,
    Uint,
    Double,
    String,
    Bool,
    Bytes,
    Dyn,
    Contains,
    StartsWith,
    EndsWith,
    Matches,
    LowerAscii,
    UpperAscii,
    Quantity,
    IsQuantity,
    Semver,
    IsSemver,
    CompareTo,
    IsGreaterThan,
    IsLessThan,
    AsInteger,
    IsInteger,
    AsApproximateFloat,
    Sign,
    Major,
    Minor,
    Patch,
    /// A function kubeplace does not evaluate.
    Unknown(Arc<str>),
}

impl Function {
    /// The function a call names, global (`size(x)`) or on a receiver (`x.size()`).
    fn of(name: &str, member: bool) -> Function {
        use Function::*;
        match (name, member) {
            (operators::LOGICAL_AND, false) => And,
            (operators::LOGICAL_OR, false) => Or,
            (operators::LOGICAL_NOT, false) => Not,
            (operators::NOT_STRICTLY_FALSE, false) => NotStrictlyFalse,
            (operators::CONDITIONAL, false) => Conditional,
            (operators::EQUALS, false) => Equals,
            (operators::NOT_EQUALS, false) => NotEquals,
            (operators::LESS, false) => Less,
            (operators::LESS_EQUALS, false) => LessEquals,
            (operators::GREATER, false) => Greater,
            (operators::GREATER_EQUALS, false) => GreaterEquals,
            (operators::ADD, false) => Add,
            (operators::SUBSTRACT, false) => Subtract,
            (operators::MULTIPLY, false) => Multiply,
            (operators::DIVIDE, false) => Divide,
            (operators::MODULO, false) => Modulo,
            (operators::NEGATE, false) => Negate,
            (operators::IN, false) => In,
            (operators::INDEX, false) => Index,
            ("size", _) => Size,
            ("int", false) => Int,
            ("uint", false) => Uint,
            ("double", false) => Double,
            ("string", false) => String,
            ("bool", false) => Bool,
            ("bytes", false) => Bytes,
            ("dyn", false) => Dyn,
            ("contains", true) => Contains,
            ("startsWith", true) => StartsWith,
            ("endsWith", true) => EndsWith,
            ("matches", _) => Matches,
            ("lowerAscii", true) => LowerAscii,
            ("upperAscii", true) => UpperAscii,
            ("quantity", false) => Quantity,
            ("isQuantity", false) => IsQuantity,
            ("semver", false) => Semver,
            ("isSemver", false) => IsSemver,
            ("compareTo", true) => CompareTo,
            ("isGreaterThan", true) => IsGreaterThan,
            ("isLessThan", true) => IsLessThan,
            ("asInteger", true) => AsInteger,
            ("isInteger", true) => IsInteger,
            ("asApproximateFloat", true) => AsApproximateFloat,
            ("sign", true) => Sign,
            ("major", true) => Major,
            ("minor", true) => Minor,
            ("patch", true) => Patch,
            _ => Unknown(Arc::from(name)),
        }
    }
}

/// Parses and compiles a selector. Deep expressions take a deep stack: call it on a thread
/// with [`super::COMPILE_STACK`].
pub fn compile(expression: &str) -> Result<Selector, CompileError> {
    if expression.len() > MAX_LENGTH {
        return Err(CompileError::TooLong {
            length: expression.len(),
        });
    }
    let parsed = Parser::new()
        .max_recursion_depth(PARSE_DEPTH)
        .parse(expression)
        .map_err(|e| CompileError::Parse(one_line(&e.to_string())))?;
    let mut compiler = Compiler::default();
    let (root, depth) = compiler.node(&parsed, 1)?;
    let mut unknown_functions = compiler.unknown;
    unknown_functions.sort();
    unknown_functions.dedup();
    Ok(Selector {
        root,
        depth,
        unknown_functions,
    })
}

/// The parser's errors on one line, without the lines that point into the expression
/// (an Event's note and a log line are read as one line).
fn one_line(errors: &str) -> String {
    errors
        .lines()
        .filter(|l| !l.starts_with('|'))
        .map(|l| match l.strip_prefix("ERROR: <input>:") {
            Some(rest) => format!("at {rest}"),
            None => l.to_string(),
        })
        // The parser counts from one past the limit it is given.
        .map(|l| {
            l.replace(
                &format!("Recursion limit of {} exceeded", PARSE_DEPTH + 1),
                &format!("nested deeper than the {PARSE_DEPTH} levels cel-go parses"),
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Default)]
struct Compiler {
    /// The comprehension variables in scope, outermost first: a name's slot is its index.
    scope: Vec<String>,
    unknown: Vec<String>,
}

impl Compiler {
    /// `expr` as a node, and the depth of its tree (`depth` is this node's own).
    fn node(&mut self, expr: &IdedExpr, depth: usize) -> Result<(Node, usize), CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep { depth });
        }
        let below = depth + 1;
        Ok(match &expr.expr {
            Expr::Literal(literal) => (Node::Literal(literal_value(literal)), depth),
            Expr::Ident(name) => (self.name(name), depth),
            Expr::Select(select) => {
                let (operand, d) = self.node(&select.operand, below)?;
                (
                    Node::Select {
                        operand: Box::new(operand),
                        field: Arc::from(select.field.as_str()),
                        test: select.test,
                    },
                    d,
                )
            }
            Expr::Call(call) => self.call(call, depth)?,
            Expr::List(list) => {
                if !list.optional_indices.is_empty() {
                    return Err(CompileError::Unsupported("an optional list element"));
                }
                let (elements, d) = self.nodes(&list.elements, depth)?;
                (Node::List(elements), d)
            }
            Expr::Map(map) => {
                let mut entries = Vec::with_capacity(map.entries.len());
                let mut deepest = depth;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return Err(CompileError::Unsupported("a message field"));
                    };
                    if entry.optional {
                        return Err(CompileError::Unsupported("an optional map entry"));
                    }
                    let (key, dk) = self.node(&entry.key, below)?;
                    let (value, dv) = self.node(&entry.value, below)?;
                    deepest = deepest.max(dk).max(dv);
                    entries.push((key, value));
                }
                (Node::Map(entries), deepest)
            }
            Expr::Comprehension(c) => {
                if c.iter_var2.is_some() {
                    return Err(CompileError::Unsupported(
                        "a comprehension of two variables",
                    ));
                }
                let (range, d_range) = self.node(&c.iter_range, below)?;
                let (init, d_init) = self.node(&c.accu_init, below)?;
                let slot = self.scope.len();
                self.scope.push(c.iter_var.clone());
                self.scope.push(c.accu_var.clone());
                let inner = self.fold_parts(c, below);
                self.scope.truncate(slot);
                let (cond, step, result, d_inner) = inner?;
                (
                    Node::Fold(Box::new(Fold {
                        range,
                        init,
                        cond,
                        step,
                        result,
                        slot,
                    })),
                    d_range.max(d_init).max(d_inner),
                )
            }
            Expr::Struct(_) => return Err(CompileError::Unsupported("a message")),
            Expr::Unspecified => return Err(CompileError::Parse("an empty expression".into())),
        })
    }

    fn nodes(
        &mut self,
        exprs: &[IdedExpr],
        depth: usize,
    ) -> Result<(Vec<Node>, usize), CompileError> {
        let mut nodes = Vec::with_capacity(exprs.len());
        let mut deepest = depth;
        for e in exprs {
            let (node, d) = self.node(e, depth + 1)?;
            deepest = deepest.max(d);
            nodes.push(node);
        }
        Ok((nodes, deepest))
    }

    fn name(&self, name: &str) -> Node {
        if let Some(slot) = self.scope.iter().rposition(|n| n == name) {
            Node::Local(slot)
        } else if name == "device" {
            Node::Device
        } else {
            Node::Undeclared(Arc::from(name))
        }
    }

    fn call(&mut self, call: &CallExpr, depth: usize) -> Result<(Node, usize), CompileError> {
        if call.func_name == operators::OPT_INDEX || call.func_name == operators::OPT_SELECT {
            return Err(CompileError::Unsupported("optional syntax"));
        }
        let function = Function::of(&call.func_name, call.target.is_some());
        if let Function::Unknown(name) = &function {
            self.unknown.push(name.to_string());
        }
        let mut args = Vec::with_capacity(call.args.len() + 1);
        let mut deepest = depth;
        if let Some(target) = &call.target {
            let (node, d) = self.node(target, depth + 1)?;
            deepest = d;
            args.push(node);
        }
        let (rest, d) = self.nodes(&call.args, depth)?;
        args.extend(rest);
        Ok((Node::Call { function, args }, deepest.max(d)))
    }

    /// A comprehension's condition, step and result, with its variables in scope.
    fn fold_parts(
        &mut self,
        c: &cel::common::ast::ComprehensionExpr,
        depth: usize,
    ) -> Result<(Node, Step, Node, usize), CompileError> {
        let (cond, d_cond) = self.node(&c.loop_cond, depth)?;
        let (result, d_result) = self.node(&c.result, depth)?;
        let accu = c.accu_var.as_str();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
        // `@result + [item]`: its `[item]`.
        let appended = |e: &'_ IdedExpr| -> Option<IdedExpr> {
            let Expr::Call(add) = &e.expr else {
                return None;
            };
            match (
                add.func_name.as_str(),
                add.target.as_ref(),
                add.args.as_slice(),
            ) {
                (operators::ADD, None, [lhs, rhs])
                    if is_accu(lhs)
                        && matches!(&rhs.expr, Expr::List(l) if l.optional_indices.is_empty()) =>
                {
                    Some(rhs.clone())
                }
                _ => None,
            }
        };
        let starts_empty = matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
        let appends = starts_empty
            && is_accu(&c.result)
            && matches!(c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(_)));
        let step_expr = &c.loop_step;
        let (step, d_step) = match &step_expr.expr {
            Expr::Call(call)
                if appends && appended(step_expr).is_some() && call.target.is_none() =>
            {
                let items = appended(step_expr).expect("checked");
                let (items, d) = self.node(&items, depth)?;
                (Step::Append { guard: None, items }, d)
            }
            Expr::Call(call)
                if appends
                    && call.func_name == operators::CONDITIONAL
                    && call.target.is_none()
                    && call.args.len() == 3
                    && is_accu(&call.args[2])
                    && appended(&call.args[1]).is_some() =>
            {
                let (guard, dg) = self.node(&call.args[0], depth + 1)?;
                let items = appended(&call.args[1]).expect("checked");
                let (items, di) = self.node(&items, depth + 1)?;
                (
                    Step::Append {
                        guard: Some(guard),
                        items,
                    },
                    dg.max(di),
                )
            }
            Expr::Call(call)
                if call.target.is_none()
                    && (call.func_name == operators::LOGICAL_AND
                        || call.func_name == operators::LOGICAL_OR)
                    && call.args.first().is_some_and(is_accu) =>
            {
                let and = call.func_name == operators::LOGICAL_AND;
                let (step, d) = self.node(step_expr, depth)?;
                (Step::Logical { and, step }, d)
            }
            _ => {
                let (step, d) = self.node(step_expr, depth)?;
                (Step::Plain(step), d)
            }
        };
        Ok((cond, step, result, d_cond.max(d_step).max(d_result)))
    }
}

fn literal_value(literal: &LiteralValue) -> Value {
    match literal {
        LiteralValue::Boolean(b) => Value::Bool(*b.inner()),
        LiteralValue::Bytes(b) => Value::Bytes(Arc::from(b.inner())),
        LiteralValue::Double(d) => Value::Double(*d.inner()),
        LiteralValue::Int(i) => Value::Int(*i.inner()),
        LiteralValue::Null => Value::Null,
        LiteralValue::String(s) => Value::String(Arc::from(s.inner())),
        LiteralValue::UInt(u) => Value::Uint(*u.inner()),
    }
}

/// A deep tree is taken apart a level at a time, so that dropping it takes no deeper stack
/// than building it did on the thread that happens to drop it.
impl Drop for Node {
    fn drop(&mut self) {
        let mut pending: Vec<Node> = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut node) = pending.pop() {
            take_children(&mut node, &mut pending);
        }
    }
}

fn take_children(node: &mut Node, into: &mut Vec<Node>) {
    let placeholder = || Node::Literal(Value::Null);
    match node {
        Node::Select { operand, .. } => into.push(std::mem::replace(&mut **operand, placeholder())),
        Node::Call { args, .. } | Node::List(args) => into.append(args),
        Node::Map(entries) => {
            for (k, v) in entries.drain(..) {
                into.push(k);
                into.push(v);
            }
        }
        Node::Fold(fold) => {
            let fold = &mut **fold;
            for part in [
                &mut fold.range,
                &mut fold.init,
                &mut fold.cond,
                &mut fold.result,
            ] {
                into.push(std::mem::replace(part, placeholder()));
            }
            match &mut fold.step {
                Step::Append { guard, items } => {
                    into.extend(guard.take());
                    into.push(std::mem::replace(items, placeholder()));
                }
                Step::Logical { step, .. } | Step::Plain(step) => {
                    into.push(std::mem::replace(step, placeholder()))
                }
            }
        }
        Node::Literal(_) | Node::Device | Node::Local(_) | Node::Undeclared(_) => {}
    }
}

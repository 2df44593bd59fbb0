//! Size bounds of a template's values, decided before it runs.
//!
//! Fuel bounds how many instructions a template executes, not how big its values get: one
//! `{% set s = s ~ s %}` per line doubles a string, so forty lines ask for a terabyte. So a
//! template is read once as a syntax tree and every value it can make gets an upper bound on
//! its size, from the sizes of the server's attributes and of the literals: `~` adds, `*` and
//! `join` multiply, `replace` multiplies by the replacement. A template whose values could
//! outgrow [`MAX_VALUE`] bytes, or whose variables together could outgrow [`MAX_VARIABLES`], is
//! refused before it renders, naming the line. Constructs whose size cannot be bounded this way
//! (macros, `set` blocks, calls other than `range` and `dict`, `namespace`, recursive loops,
//! `format`) are not available in service-profile templates.

use std::collections::HashMap;

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt};
use minijinja::value::{Value, ValueKind};

use super::TemplateError;

/// Largest value a template may build, in bytes: the rendered document's own limit.
pub(crate) const MAX_VALUE: u64 = super::MAX_OUTPUT as u64;
/// Largest total of the values a template keeps in variables at once, in bytes.
pub(crate) const MAX_VARIABLES: u64 = 1024 * 1024;
/// Most elements `range` makes (the template engine's own limit).
const MAX_RANGE: u64 = 100_000;

/// Filters available in templates. `map` may apply only those in [`LINEAR_FILTERS`].
pub(crate) const FILTERS: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
    "zip",
];

/// Filters whose result is at most a few times the size of their input, with that factor.
/// Case changes can lengthen a character (ß → SS); escapes take at most six bytes a character.
const LINEAR_FILTERS: [(&str, u64); 16] = [
    ("abs", 1),
    ("bool", 1),
    ("count", 1),
    ("float", 1),
    ("int", 1),
    ("length", 1),
    ("round", 1),
    ("safe", 1),
    ("capitalize", 3),
    ("lower", 3),
    ("title", 3),
    ("trim", 3),
    ("upper", 3),
    ("pprint", 4),
    ("string", 4),
    ("tojson", 6),
];

/// How many times larger than its input a filter's result can be, for filters that keep sizes.
fn growth(filter: &str) -> Option<u64> {
    match filter {
        "e" | "escape" => Some(6),
        _ => LINEAR_FILTERS
            .iter()
            .find(|(name, _)| *name == filter)
            .map(|(_, g)| *g),
    }
}

/// An upper bound on a value: its size when printed, its number of elements and the size of
/// its largest element. A string's elements are its characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    bytes: u64,
    len: u64,
    item: u64,
    shape: Shape,
}

/// What kind of value a bound is for, when the analysis can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Number,
    Text,
    Collection,
    Unknown,
}

impl Bound {
    const NUMBER: Bound = Bound {
        bytes: 24,
        len: 0,
        item: 0,
        shape: Shape::Number,
    };

    fn string(bytes: u64) -> Bound {
        Bound {
            bytes,
            len: bytes,
            item: 4,
            shape: Shape::Text,
        }
    }

    /// A sequence or mapping of `len` elements of at most `item` bytes each.
    fn collection(len: u64, item: u64) -> Bound {
        Bound {
            bytes: len.saturating_mul(item.saturating_add(4)).saturating_add(2),
            len,
            item,
            shape: Shape::Collection,
        }
    }

    /// A sequence printed in at most `bytes`, of `len` elements of at most `item` bytes.
    fn sequence(bytes: u64, len: u64, item: u64) -> Bound {
        Bound {
            bytes,
            len,
            item,
            shape: Shape::Collection,
        }
    }

    /// Any value no larger than `bytes`.
    fn any(bytes: u64) -> Bound {
        Bound {
            bytes,
            len: bytes,
            item: bytes,
            shape: Shape::Unknown,
        }
    }

    fn scaled(self, factor: u64) -> Bound {
        Bound {
            bytes: self.bytes.saturating_mul(factor).saturating_add(2),
            len: self.len,
            item: self.item.saturating_mul(factor),
            shape: self.shape,
        }
    }

    fn max(self, other: Bound) -> Bound {
        Bound {
            bytes: self.bytes.max(other.bytes),
            len: self.len.max(other.len),
            item: self.item.max(other.item),
            shape: if self.shape == other.shape {
                self.shape
            } else {
                Shape::Unknown
            },
        }
    }

    fn plus(self, other: Bound) -> Bound {
        if self.shape == Shape::Number && other.shape == Shape::Number {
            return Bound::NUMBER;
        }
        let shape = if self.shape == other.shape {
            self.shape
        } else {
            Shape::Unknown
        };
        Bound {
            bytes: self.bytes.saturating_add(other.bytes),
            len: self.len.saturating_add(other.len),
            item: self.item.max(other.item),
            shape,
        }
    }

    /// The bound of an element of this value.
    fn element(self) -> Bound {
        Bound::any(self.item)
    }

    /// The bound of an actual value (a server attribute or a literal).
    pub(crate) fn of(value: &Value) -> Bound {
        match value.kind() {
            ValueKind::Number => Bound::NUMBER,
            ValueKind::String | ValueKind::Bytes => Bound::string(value.to_string().len() as u64),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
                let Ok(iter) = value.try_iter() else {
                    return Bound::any(value.to_string().len() as u64);
                };
                let (mut bytes, mut len, mut item) = (2u64, 0u64, 0u64);
                for element in iter {
                    len += 1;
                    let mut size = Bound::of(&element).bytes;
                    bytes += size + 4;
                    if value.kind() == ValueKind::Map
                        && let Ok(v) = value.get_item(&element)
                    {
                        let value_size = Bound::of(&v).bytes;
                        bytes += value_size;
                        size = size.max(value_size);
                    }
                    item = item.max(size);
                }
                Bound::sequence(bytes, len, item)
            }
            _ => Bound::any(8),
        }
    }
}

/// What a template refers to by name, and what it has put into variables.
struct Analysis<'a> {
    scopes: Vec<HashMap<&'a str, Bound>>,
    globals: &'a HashMap<&'static str, Bound>,
    variables_total: u64,
}

type Refusal = (usize, String);

fn line_of(expr: &Expr<'_>) -> usize {
    usize::from(expr.span().start_line)
}

/// Checks that every value `template` can make stays within the limits, given upper bounds
/// of the attributes it may read (`globals`).
pub(crate) fn check(
    template: &str,
    globals: &HashMap<&'static str, Bound>,
) -> Result<(), TemplateError> {
    let syntax = minijinja::syntax::SyntaxConfig::default();
    let Ok(tree) = minijinja::machinery::parse(template, "<metadata>", syntax) else {
        // The compiler reports syntax errors with its own, better message.
        return Ok(());
    };
    let mut analysis = Analysis {
        scopes: vec![HashMap::new()],
        globals,
        variables_total: 0,
    };
    analysis
        .stmt(&tree)
        .map_err(|(line, reason)| TemplateError::Unbounded { line, reason })
}

impl<'a> Analysis<'a> {
    fn lookup(&self, name: &str) -> Bound {
        for scope in self.scopes.iter().rev() {
            if let Some(b) = scope.get(name) {
                return *b;
            }
        }
        if name == "loop" {
            // `loop.index`, `loop.length` and the like; `loop.cycle` is a call, refused.
            return Bound::collection(16, Bound::NUMBER.bytes);
        }
        self.globals.get(name).copied().unwrap_or(Bound::string(0))
    }

    fn assign(&mut self, target: &Expr<'a>, bound: Bound, line: usize) -> Result<(), Refusal> {
        match target {
            Expr::Var(v) => {
                self.variables_total = self.variables_total.saturating_add(bound.bytes);
                if self.variables_total > MAX_VARIABLES {
                    return Err((
                        line,
                        format!(
                            "the template's variables could hold {} bytes together; at most {MAX_VARIABLES} are allowed",
                            self.variables_total
                        ),
                    ));
                }
                self.scopes
                    .last_mut()
                    .expect("there is always a scope")
                    .insert(v.id, bound);
                Ok(())
            }
            Expr::Tuple(ast::Spanned { .. }) | Expr::List(_) => {
                let items = match target {
                    Expr::Tuple(t) => &t.items,
                    Expr::List(l) => &l.items,
                    _ => unreachable!("matched above"),
                };
                for item in items {
                    self.assign(item, bound.element(), line)?;
                }
                Ok(())
            }
            _ => Err((
                line,
                "only plain variables can be assigned (`namespace` objects are not available)"
                    .into(),
            )),
        }
    }

    fn body(&mut self, stmts: &[Stmt<'a>]) -> Result<(), Refusal> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt<'a>) -> Result<(), Refusal> {
        let line = |span: minijinja::machinery::Span| usize::from(span.start_line);
        match stmt {
            Stmt::Template(t) => self.body(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr).map(|_| ()),
            Stmt::EmitRaw(_) => Ok(()),
            Stmt::AutoEscape(a) => self.body(&a.body),
            Stmt::IfCond(c) => {
                self.expr(&c.expr)?;
                self.body(&c.true_body)?;
                self.body(&c.false_body)
            }
            Stmt::WithBlock(w) => {
                self.scopes.push(HashMap::new());
                for (target, value) in &w.assignments {
                    let b = self.expr(value)?;
                    self.assign(target, b, line_of(value))?;
                }
                let result = self.body(&w.body);
                self.scopes.pop();
                result
            }
            Stmt::Set(s) => {
                let b = self.expr(&s.expr)?;
                self.assign(&s.target, b, line(s.span()))
            }
            Stmt::ForLoop(f) => {
                if f.recursive {
                    return Err((line(f.span()), "recursive loops are not available".into()));
                }
                let items = self.expr(&f.iter)?;
                self.scopes.push(HashMap::new());
                let result = self.loop_body(f, items);
                self.scopes.pop();
                result?;
                self.body(&f.else_body)
            }
            Stmt::SetBlock(s) => Err(unavailable(
                line(s.span()),
                "`{% set %}…{% endset %}` blocks",
            )),
            Stmt::FilterBlock(s) => Err(unavailable(line(s.span()), "`{% filter %}` blocks")),
            Stmt::Do(s) => Err(unavailable(line(s.span()), "`{% do %}`")),
        }
    }

    /// A loop's body, twice: a variable it sets that is larger on the second pass could grow
    /// on every pass.
    fn loop_body(
        &mut self,
        f: &ast::Spanned<ast::ForLoop<'a>>,
        items: Bound,
    ) -> Result<(), Refusal> {
        let line = usize::from(f.span().start_line);
        self.assign(&f.target, items.element(), line)?;
        if let Some(filter) = &f.filter_expr {
            self.expr(filter)?;
        }
        self.body(&f.body)?;
        let first = self.scopes.last().cloned().unwrap_or_default();
        self.body(&f.body)?;
        let second = self.scopes.last().cloned().unwrap_or_default();
        for (name, bound) in &second {
            if first.get(name).is_some_and(|b| bound.bytes > b.bytes) {
                return Err((
                    line,
                    format!(
                        "`{name}` is set inside this loop from its own value, so it could grow on every pass"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn args(&mut self, args: &[CallArg<'a>]) -> Result<Vec<Bound>, Refusal> {
        args.iter()
            .map(|a| match a {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e),
            })
            .collect()
    }

    /// The bound of an expression; a value it makes larger than [`MAX_VALUE`] is refused.
    fn expr(&mut self, expr: &Expr<'a>) -> Result<Bound, Refusal> {
        let bound = match expr {
            // Existing values: reading them makes nothing new.
            Expr::Var(v) => return Ok(self.lookup(v.id)),
            Expr::GetAttr(g) => return self.member(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.subscript_expr)?;
                return self.member(&g.expr);
            }
            Expr::Const(c) => Bound::of(&c.value),
            Expr::Slice(s) => {
                for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(e)?;
                }
                self.expr(&s.expr)?
            }
            Expr::UnaryOp(u) => {
                self.expr(&u.expr)?;
                Bound::NUMBER
            }
            Expr::BinOp(b) => self.binop(b)?,
            Expr::Compare(c) => {
                self.expr(&c.expr)?;
                for op in &c.ops {
                    self.expr(&op.expr)?;
                }
                Bound::NUMBER
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr)?;
                let yes = self.expr(&i.true_expr)?;
                match &i.false_expr {
                    Some(e) => yes.max(self.expr(e)?),
                    None => yes,
                }
            }
            Expr::Test(t) => {
                self.expr(&t.expr)?;
                self.args(&t.args)?;
                Bound::NUMBER
            }
            Expr::Filter(f) => self.filter(f)?,
            // `range` is lazy: it holds three numbers, whatever its length.
            Expr::Call(c) if matches!(&c.expr, Expr::Var(f) if f.id == "range") => {
                return self.call(c);
            }
            Expr::Call(c) => self.call(c)?,
            Expr::List(l) => self.literal(&l.items)?,
            Expr::Tuple(t) => self.literal(&t.items)?,
            Expr::Map(m) => {
                let keys = self.literal(&m.keys)?;
                let values = self.literal(&m.values)?;
                keys.plus(values)
            }
        };
        if bound.bytes > MAX_VALUE {
            return Err((
                line_of(expr),
                format!(
                    "this {} could make a value of up to {} bytes; at most {MAX_VALUE} are allowed",
                    expr.description(),
                    bound.bytes
                ),
            ));
        }
        Ok(bound)
    }

    /// `x.name` or `x[…]`: an element of `x`.
    fn member(&mut self, of: &Expr<'a>) -> Result<Bound, Refusal> {
        Ok(self.expr(of)?.element())
    }

    fn literal(&mut self, items: &[Expr<'a>]) -> Result<Bound, Refusal> {
        let mut total = Bound::collection(0, 0);
        for item in items {
            let b = self.expr(item)?;
            total = Bound {
                bytes: total.bytes.saturating_add(b.bytes).saturating_add(4),
                len: total.len + 1,
                item: total.item.max(b.bytes),
                shape: Shape::Collection,
            };
        }
        Ok(total)
    }

    fn binop(&mut self, b: &ast::BinOp<'a>) -> Result<Bound, Refusal> {
        let left = self.expr(&b.left)?;
        let right = self.expr(&b.right)?;
        Ok(match b.op {
            BinOpKind::Concat => Bound::string(left.bytes.saturating_add(right.bytes)),
            BinOpKind::Add => left.plus(right),
            BinOpKind::ScAnd | BinOpKind::ScOr => left.max(right),
            BinOpKind::Mul => {
                if left.shape == Shape::Number && right.shape == Shape::Number {
                    Bound::NUMBER
                } else if let Some(n) = integer_literal(&b.right) {
                    left.scaled(n)
                } else if let Some(n) = integer_literal(&b.left) {
                    right.scaled(n)
                } else {
                    return Err((
                        line_of(&b.left),
                        "`*` repeats a string or list only by a literal count (e.g. `'-' * 8`)"
                            .into(),
                    ));
                }
            }
            BinOpKind::Sub
            | BinOpKind::Div
            | BinOpKind::FloorDiv
            | BinOpKind::Rem
            | BinOpKind::Pow
            | BinOpKind::Eq
            | BinOpKind::Ne
            | BinOpKind::Lt
            | BinOpKind::Lte
            | BinOpKind::Gt
            | BinOpKind::Gte
            | BinOpKind::In => Bound::NUMBER,
        })
    }

    fn call(&mut self, c: &ast::Spanned<ast::Call<'a>>) -> Result<Bound, Refusal> {
        let line = usize::from(c.span().start_line);
        let Expr::Var(function) = &c.expr else {
            return Err((
                line,
                "calling methods is not available; use filters (`x | upper`)".into(),
            ));
        };
        let parts = self.args(&c.args)?;
        match function.id {
            "range" => {
                let literals: Option<Vec<i128>> = c
                    .args
                    .iter()
                    .map(|a| match a {
                        CallArg::Pos(e) => integer_literal(e).map(i128::from),
                        _ => None,
                    })
                    .collect();
                let len = match literals.as_deref() {
                    Some([stop]) => (*stop).max(0) as u64,
                    Some([start, stop]) => (stop - start).max(0) as u64,
                    _ => MAX_RANGE,
                };
                Ok(Bound::collection(len.min(MAX_RANGE), 7))
            }
            "dict" => Ok(parts.into_iter().fold(Bound::collection(0, 0), |acc, b| {
                acc.plus(b).plus(Bound::string(4))
            })),
            other => Err((
                line,
                format!("the function `{other}` is not available; `range` and `dict` are"),
            )),
        }
    }

    fn filter(&mut self, f: &ast::Spanned<ast::Filter<'a>>) -> Result<Bound, Refusal> {
        let line = usize::from(f.span().start_line);
        let input = match &f.expr {
            Some(e) => self.expr(e)?,
            None => Bound::string(0),
        };
        let args = self.args(&f.args)?;
        let arg = |i: usize| args.get(i).copied().unwrap_or(Bound::string(0));
        let literal_arg = |i: usize| match f.args.get(i) {
            Some(CallArg::Pos(e)) | Some(CallArg::Kwarg(_, e)) => integer_literal(e),
            _ => None,
        };
        Ok(match f.name {
            "length" | "count" | "int" | "float" | "abs" | "round" | "bool" => Bound::NUMBER,
            "first" | "last" | "min" | "max" | "attr" => input.element(),
            "safe" | "reverse" | "sort" | "unique" | "select" | "reject" | "selectattr"
            | "rejectattr" => input,
            "sum" => input.plus(arg(0)),
            "default" | "d" => input.max(arg(0)),
            name if growth(name).is_some() => input.scaled(growth(name).unwrap_or(1)),
            "items" | "dictsort" | "groupby" => Bound::sequence(
                input.bytes.saturating_mul(2).saturating_add(2),
                input.len,
                input.item.saturating_mul(2).saturating_add(4),
            ),
            // A string becomes a list of its characters, each quoted.
            "list" if input.shape == Shape::Collection => input,
            "list" => Bound::sequence(
                input.bytes.saturating_mul(6).saturating_add(2),
                input.len,
                input.item,
            ),
            "split" | "lines" => Bound::sequence(
                input.bytes.saturating_mul(4).saturating_add(2),
                input.bytes.saturating_add(1),
                input.bytes,
            ),
            "join" => Bound::string(
                input
                    .bytes
                    .saturating_add(input.len.saturating_mul(arg(0).bytes)),
            ),
            "replace" => Bound::string(
                input
                    .bytes
                    .saturating_add(1)
                    .saturating_mul(arg(1).bytes.saturating_add(1)),
            ),
            "indent" => {
                let Some(width) = literal_arg(0) else {
                    return Err((line, "`indent` needs a literal width".into()));
                };
                Bound::string(
                    input
                        .bytes
                        .saturating_add(1)
                        .saturating_mul(width.saturating_add(1)),
                )
            }
            "batch" | "slice" => {
                if args.len() > 1 {
                    let Some(n) = literal_arg(0) else {
                        return Err((
                            line,
                            format!("`{}` with a fill value needs a literal size", f.name),
                        ));
                    };
                    input.scaled(2).plus(arg(1).scaled(n))
                } else {
                    input.scaled(2)
                }
            }
            "chain" | "zip" => args.iter().fold(input, |acc, b| acc.plus(*b)).scaled(2),
            "map" => {
                let applied = match f.args.first() {
                    Some(CallArg::Pos(Expr::Const(c))) => c.value.as_str().map(str::to_owned),
                    _ => None,
                };
                match applied.as_deref() {
                    None => input,
                    Some(name) if f.args.len() == 1 && growth(name).is_some() => {
                        input.scaled(growth(name).unwrap_or(1))
                    }
                    Some(name) => {
                        return Err((
                            line,
                            format!(
                                "`map` can apply only filters that keep sizes ({}), not `{name}` or filters with arguments",
                                LINEAR_FILTERS.map(|(name, _)| name).join(", ")
                            ),
                        ));
                    }
                }
            }
            other => {
                return Err((
                    line,
                    format!(
                        "the filter `{other}` is not available; available filters: {}",
                        FILTERS.join(", ")
                    ),
                ));
            }
        })
    }
}

fn unavailable(line: usize, what: &str) -> Refusal {
    (
        line,
        format!("{what}: not available in service-profile templates"),
    )
}

fn integer_literal(e: &Expr<'_>) -> Option<u64> {
    match e {
        Expr::Const(c) => c.value.as_i64().and_then(|n| u64::try_from(n).ok()),
        _ => None,
    }
}

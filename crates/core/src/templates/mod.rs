//! Service-profile metadata templates: Jinja templates rendered per server, sandboxed.
//!
//! Every value a template prints with `{{ … }}` is written as a JSON literal (a string
//! becomes `"…"`), which is also valid YAML. A value from a server's flavor metadata is
//! therefore always data: quotes, braces, newlines or YAML in it cannot change the shape of
//! the rendered document. Filters that produce markup on purpose (`tojson`) are written as
//! they are. There is no loader, so templates cannot read files or include others; fuel
//! bounds the work a template may do, [`bounds`] the size of every value it makes, and the
//! output stops at [`MAX_OUTPUT`] bytes.

mod bounds;

use std::collections::{BTreeMap, HashMap};
use std::io;

use minijinja::value::Value;
use minijinja::{Environment, Error, UndefinedBehavior};
use serde::Serialize;

/// Instructions a template may execute per render.
pub(crate) const FUEL: u64 = 50_000;
/// Largest rendered document, in bytes.
pub(crate) const MAX_OUTPUT: usize = 64 * 1024;

/// Why a template does not compile or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    #[error("rendering failed{}: {reason}", .line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Render { line: Option<usize>, reason: String },
    #[error("the rendered metadata passes {0} bytes, the most allowed")]
    TooLarge(usize),
    #[error("the rendered metadata is not a YAML or JSON mapping: {0}")]
    NotAMapping(String),
    #[error("line {line}: {reason}")]
    Unbounded { line: usize, reason: String },
}

/// What a template can see of a server.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerContext {
    pub name: String,
    pub namespace: String,
    pub flavor: String,
    pub image: String,
    /// The server's flavor metadata.
    pub meta: BTreeMap<String, String>,
    /// The allocation: provider name → resource class → amount.
    pub allocation: BTreeMap<String, BTreeMap<String, i64>>,
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(32);
    env.set_formatter(|out, _state, value| {
        if value.is_safe() {
            out.write_str(value.as_str().unwrap_or_default())
                .map_err(Error::from)
        } else {
            let json = serde_json::to_string(value).map_err(|e| {
                Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("cannot print this value: {e}"),
                )
            })?;
            out.write_str(&json).map_err(Error::from)
        }
    });
    env
}

fn reason(e: &Error) -> String {
    match e.detail() {
        Some(d) => format!("{} ({d})", e.kind()),
        None => e.kind().to_string(),
    }
}

/// Checks that a template compiles; the error names the line and what is wrong.
/// It also checks, for a server whose attributes have the largest sizes Nova allows (names of
/// 255 bytes, 64 flavor metadata entries of 255 bytes), that no value could outgrow the limits.
pub fn check(template: &str) -> Result<(), TemplateError> {
    let env = environment();
    env.template_from_str(template)
        .map_err(|e| TemplateError::Syntax {
            line: e.line().unwrap_or(1),
            reason: reason(&e),
        })?;
    bounds::check(template, &nominal_bounds())
}

fn template_value<T: Serialize>(value: &T) -> Value {
    Value::from(minijinja::value::Serde(value))
}

/// Bounds of a server's attributes when the template is checked without a server.
fn nominal_bounds() -> HashMap<&'static str, bounds::Bound> {
    let name = Value::from("n".repeat(255));
    let meta: BTreeMap<String, String> = (0..64)
        .map(|i| (format!("{i:0>255}"), "v".repeat(255)))
        .collect();
    let allocation: BTreeMap<String, BTreeMap<String, i64>> = (0..8)
        .map(|i| {
            let classes = (0..8).map(|c| (format!("{c:0>255}"), i64::MAX)).collect();
            (format!("{i:0>255}"), classes)
        })
        .collect();
    HashMap::from([
        ("name", bounds::Bound::of(&name)),
        ("namespace", bounds::Bound::of(&name)),
        ("flavor", bounds::Bound::of(&name)),
        ("image", bounds::Bound::of(&name)),
        ("meta", bounds::Bound::of(&template_value(&meta))),
        (
            "allocation",
            bounds::Bound::of(&template_value(&allocation)),
        ),
    ])
}

/// Bounds of this server's attributes.
fn server_bounds(server: &ServerContext) -> HashMap<&'static str, bounds::Bound> {
    let of = |v: Value| bounds::Bound::of(&v);
    HashMap::from([
        ("name", of(Value::from(server.name.as_str()))),
        ("namespace", of(Value::from(server.namespace.as_str()))),
        ("flavor", of(Value::from(server.flavor.as_str()))),
        ("image", of(Value::from(server.image.as_str()))),
        ("meta", of(template_value(&server.meta))),
        ("allocation", of(template_value(&server.allocation))),
    ])
}

/// Collects output and fails once it passes [`MAX_OUTPUT`], so a template cannot fill memory
/// by printing in a loop.
#[derive(Default)]
struct CappedOutput(Vec<u8>);

impl io::Write for CappedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > MAX_OUTPUT {
            return Err(io::Error::other("output limit"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Renders a template for a server and parses the result as a mapping.
pub fn render(template: &str, server: &ServerContext) -> Result<serde_json::Value, TemplateError> {
    let env = environment();
    let compiled = env
        .template_from_str(template)
        .map_err(|e| TemplateError::Syntax {
            line: e.line().unwrap_or(1),
            reason: reason(&e),
        })?;
    bounds::check(template, &server_bounds(server))?;
    let mut out = CappedOutput::default();
    let rendered =
        compiled.render_captured_to(Value::from(minijinja::value::Serde(server)), &mut out);
    if let Err(e) = rendered {
        if e.kind() == minijinja::ErrorKind::WriteFailure {
            return Err(TemplateError::TooLarge(MAX_OUTPUT));
        }
        return Err(TemplateError::Render {
            line: e.line(),
            reason: reason(&e),
        });
    }
    let text = String::from_utf8_lossy(&out.0);
    let parsed: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(&text)
            .map_err(|e| TemplateError::NotAMapping(crate::yaml::syntax_message(&e)))?
    };
    if !parsed.is_object() {
        return Err(TemplateError::NotAMapping(format!(
            "it renders to {}",
            kind_of(&parsed)
        )));
    }
    Ok(parsed)
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "nothing",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server(meta: &[(&str, &str)]) -> ServerContext {
        ServerContext {
            name: "lb-1".into(),
            namespace: "web".into(),
            flavor: "lb.ddos".into(),
            image: "haproxy".into(),
            meta: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            allocation: [("cn1".to_string(), [("VCPU".to_string(), 2)].into())].into(),
        }
    }

    const DDOS: &str = "vendor_z23_ddos_protection: true\nz23_funky_whitelist: {{ meta.whitelist | split(\",\") | map(\"trim\") | list | tojson }}\n";

    #[test]
    fn renders_the_seed_example() {
        let out = render(DDOS, &server(&[("whitelist", "1.2.3.4, 8.8.8.8")])).unwrap();
        assert_eq!(
            out,
            json!({"vendor_z23_ddos_protection": true, "z23_funky_whitelist": ["1.2.3.4", "8.8.8.8"]})
        );
    }

    #[test]
    fn server_attributes_are_available() {
        // Each printed value is one YAML scalar: join strings inside the expression.
        let out = render(
            "owner: {{ namespace ~ '/' ~ name }}\nhost: {{ allocation | list | first }}\n",
            &server(&[]),
        )
        .unwrap();
        assert_eq!(out, json!({"owner": "web/lb-1", "host": "cn1"}));
        assert!(matches!(
            render("owner: {{ namespace }}/{{ name }}\n", &server(&[])),
            Err(TemplateError::NotAMapping(_))
        ));
    }

    #[test]
    fn values_cannot_change_the_document_structure() {
        let template = "a: {{ meta.x }}\nb: fixed\n";
        for evil in [
            "}\nb: hacked",
            "\"\nb: hacked\nc: \"",
            "[1, 2]",
            "{b: hacked}",
            "x\n---\nb: hacked",
            "'; b: 'hacked",
        ] {
            let out = render(template, &server(&[("x", evil)])).unwrap();
            assert_eq!(out, json!({"a": evil, "b": "fixed"}), "value {evil:?}");
        }
        // Inside a flow mapping, too.
        let out = render(
            "{a: {{ meta.x }}, b: fixed}",
            &server(&[("x", "1}, b: {c: 2")]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": "1}, b: {c: 2", "b": "fixed"}));
    }

    #[test]
    fn strict_undefined_and_syntax_errors() {
        let err = render("a: {{ meta.missing }}\n", &server(&[])).unwrap_err();
        assert!(matches!(err, TemplateError::Render { .. }), "{err}");
        let err = check("a: 1\nb: {{ meta.x \n").unwrap_err();
        assert!(
            matches!(err, TemplateError::Syntax { line: 2, .. }),
            "{err}"
        );
        assert!(check(DDOS).is_ok());
    }

    #[test]
    fn bounded_work_and_output() {
        let err = render(
            "{% for i in range(100000) %}{{ i }}{% endfor %}",
            &server(&[]),
        )
        .unwrap_err();
        assert!(matches!(err, TemplateError::Render { .. }), "{err}");
        let err = render("a: {{ 'x' * 70000 }}", &server(&[])).unwrap_err();
        assert!(
            matches!(err, TemplateError::Unbounded { line: 1, .. }),
            "{err}"
        );
        assert!(matches!(
            render("- 1\n- 2\n", &server(&[])),
            Err(TemplateError::NotAMapping(_))
        ));
        assert!(matches!(
            render("a: [\n", &server(&[])),
            Err(TemplateError::NotAMapping(_))
        ));
    }

    #[test]
    fn no_file_access() {
        let err = render("{% include '/etc/passwd' %}", &server(&[])).unwrap_err();
        assert!(
            matches!(
                err,
                TemplateError::Render { .. } | TemplateError::Syntax { .. }
            ),
            "{err}"
        );
    }

    fn doubling(times: usize) -> String {
        let mut t = String::from("{% set s = \"xxxxxxxxxxxxxxxx\" %}");
        for _ in 0..times {
            t.push_str("{% set s = s ~ s %}");
        }
        t.push_str("a: {{ s|length }}\n");
        t
    }

    fn refusal(template: &str) -> (usize, String) {
        match check(template) {
            Err(TemplateError::Unbounded { line, reason }) => (line, reason),
            other => panic!("{template:?} was not refused for its size: {other:?}"),
        }
    }

    #[test]
    fn values_that_could_outgrow_the_limit_are_refused_before_rendering() {
        // Forty doublings would ask for 16 TiB; twelve stay under 64 KiB.
        let (line, reason) = refusal(&doubling(40));
        assert_eq!(line, 1);
        assert!(reason.contains("at most 65536"), "{reason}");
        assert!(matches!(
            render(&doubling(40), &server(&[])),
            Err(TemplateError::Unbounded { .. })
        ));
        assert_eq!(
            render(&doubling(11), &server(&[])).unwrap(),
            json!({"a": 32768})
        );
        assert!(check(&doubling(11)).is_ok());

        // Each line reads one way of building a huge value; the refusal names its line.
        for (template, line, says) in [
            ("a: 1\nb: {{ 'x' * 99999999 }}\n", 2, "at most 65536"),
            ("a: {{ meta.k * meta.n }}", 1, "literal count"),
            (
                "a: {{ ('x' * 4000) | replace('x', 'x' * 4000) }}",
                1,
                "at most 65536",
            ),
            (
                "a: {{ range(100000) | join('x' * 100) }}",
                1,
                "at most 65536",
            ),
            ("a: {{ name | indent(100000) }}", 1, "at most 65536"),
            ("a: {{ name | indent(meta.w) }}", 1, "literal width"),
            (
                "{% set ns = namespace(s='x') %}",
                1,
                "`namespace` is not available",
            ),
            (
                "a: {{ '%s' | format(name) }}",
                1,
                "`format` is not available",
            ),
            ("a: {{ name.upper() }}", 1, "calling methods"),
            ("{% set s %}x{% endset %}", 1, "`{% set %}…{% endset %}`"),
            ("{% filter upper %}x{% endfilter %}", 1, "`{% filter %}`"),
            (
                "{% set s = 'x' %}\n{% for i in range(3) %}{% set s = s ~ s %}{% endfor %}",
                2,
                "grow on every pass",
            ),
            (
                "{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}",
                1,
                "recursive",
            ),
            (
                "a: {{ meta | map('replace', 'a', 'bb') | list }}",
                1,
                "`map` can apply only",
            ),
        ] {
            let (at, reason) = refusal(template);
            assert!(reason.contains(says), "{template:?}: {reason}");
            assert_eq!(at, line, "{template:?}: {reason}");
        }
        let many: String = (0..20)
            .map(|i| format!("{{% set v{i} = 'x' * 60000 %}}"))
            .collect();
        assert!(refusal(&many).1.contains("variables could hold"));
    }

    #[test]
    fn a_servers_own_sizes_decide_at_render_time() {
        // Sixty-four flavor metadata values of 255 bytes could not be repeated 10 times; the
        // server's own short values can.
        let template = "a: {{ (meta.x * 10) | length }}\n";
        assert!(
            matches!(check(template), Err(TemplateError::Unbounded { .. }))
                || check(template).is_ok()
        );
        assert_eq!(
            render(template, &server(&[("x", "ab")])).unwrap(),
            json!({"a": 20})
        );
        let long = "y".repeat(10_000);
        assert!(matches!(
            render(template, &server(&[("x", &long)])),
            Err(TemplateError::Unbounded { .. })
        ));
    }

    #[test]
    fn printing_in_a_loop_stops_at_the_output_limit() {
        let err = render(
            "a: '{% for i in range(200) %}{{ name * 100 }}{% endfor %}'",
            &server(&[]),
        )
        .unwrap_err();
        assert_eq!(err, TemplateError::TooLarge(MAX_OUTPUT));
    }

    #[test]
    fn ordinary_templates_are_accepted() {
        for template in [
            DDOS,
            "owner: {{ namespace ~ '/' ~ name }}\n",
            "{% for host, classes in allocation | items %}{{ host }}: {{ classes | tojson }}\n{% endfor %}",
            "{% set cpus = allocation.cn1.VCPU %}cpus: {{ cpus * 2 }}\n",
            "sep: {{ '-' * 8 }}\nlist: {{ meta | list | join(',') }}\nw: {{ meta.whitelist | upper }}\n",
            "{% with w = meta.whitelist | default('none') %}w: {{ w }}{% endwith %}\n",
            "{% for i in range(3) %}{% set x = i %}k{{ x }}: {{ loop.index }}\n{% endfor %}",
        ] {
            assert!(
                check(template).is_ok(),
                "{template:?}: {:?}",
                check(template)
            );
            render(template, &server(&[("whitelist", "1.2.3.4")]))
                .unwrap_or_else(|e| panic!("{template:?}: {e}"));
        }
    }
}

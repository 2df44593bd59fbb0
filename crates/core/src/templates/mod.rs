//! Service-profile metadata templates: Jinja templates rendered per server, sandboxed.
//!
//! Every value a template prints with `{{ … }}` is written as a JSON literal (a string
//! becomes `"…"`), which is also valid YAML. A value from a server's flavor metadata is
//! therefore always data: quotes, braces, newlines or YAML in it cannot change the shape of
//! the rendered document. Filters that produce markup on purpose (`tojson`) are written as
//! they are. There is no loader, so templates cannot read files or include others; fuel
//! bounds the work a template may do, and the output size is capped.

use std::collections::BTreeMap;

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
    #[error("the rendered metadata is {0} bytes; at most 65536 are allowed")]
    TooLarge(usize),
    #[error("the rendered metadata is not a YAML or JSON mapping: {0}")]
    NotAMapping(String),
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
pub fn check(template: &str) -> Result<(), TemplateError> {
    let env = environment();
    env.template_from_str(template)
        .map(|_| ())
        .map_err(|e| TemplateError::Syntax {
            line: e.line().unwrap_or(1),
            reason: reason(&e),
        })
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
    let text = compiled
        .render(Value::from(minijinja::value::Serde(server)))
        .map_err(|e| TemplateError::Render {
            line: e.line(),
            reason: reason(&e),
        })?;
    if text.len() > MAX_OUTPUT {
        return Err(TemplateError::TooLarge(text.len()));
    }
    let parsed: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(&text).map_err(|e| {
            TemplateError::NotAMapping(e.to_string().lines().next().unwrap_or("").to_string())
        })?
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
            matches!(
                err,
                TemplateError::TooLarge(_) | TemplateError::Render { .. }
            ),
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
}

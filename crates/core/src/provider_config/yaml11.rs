//! Reading plain scalars as nova-compute's YAML library does (YAML 1.1's implicit types), so
//! that a file means the same to kubeplace as to Nova: `yes`, `on` and `off` are booleans,
//! `n` and `1e3` are strings, `1_000` and `0x1F` are integers, `1:30` is 90, and an unquoted
//! date is a date (which no field of the format accepts).

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Number, Value};

use crate::yaml::{Located, Node};

/// The key a date is kept under, so that every type check refuses it and messages can say so.
pub(crate) const TIMESTAMP_KEY: &str = "$yaml_timestamp";

struct Patterns {
    boolean: Regex,
    float: Regex,
    int: Regex,
    null: Regex,
    timestamp: Regex,
    block_header: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        boolean: Regex::new(
            r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
        )
        .expect("regex"),
        float: Regex::new(
            r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        )
        .expect("regex"),
        int: Regex::new(
            r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        )
        .expect("regex"),
        null: Regex::new(r"^(?:~|null|Null|NULL|)$").expect("regex"),
        timestamp: Regex::new(
            r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$",
        )
        .expect("regex"),
        block_header: Regex::new(r"[|>][0-9+-]*[ \t]*(?:#.*)?$").expect("regex"),
    })
}

/// Whether the scalar at `offset` is the content of a block scalar (`|` or `>`).
fn in_block(text: &str, offset: usize) -> bool {
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    if !before[line_start..].trim().is_empty() {
        return false;
    }
    let previous = before[..line_start.saturating_sub(1)]
        .rsplit('\n')
        .next()
        .unwrap_or("");
    patterns().block_header.is_match(previous.trim_end())
}

fn int_value(raw: &str) -> Option<Value> {
    let s = raw.replace('_', "");
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s.as_str()),
    };
    let magnitude: Option<i128> = if digits == "0" {
        Some(0)
    } else if let Some(b) = digits.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else if let Some(h) = digits.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(o) = digits.strip_prefix('0') {
        i128::from_str_radix(o, 8).ok()
    } else if digits.contains(':') {
        digits.split(':').try_fold(0i128, |acc, part| {
            part.parse::<i128>().ok().map(|p| acc * 60 + p)
        })
    } else {
        digits.parse::<i128>().ok()
    };
    let m = magnitude?;
    let v = if negative { -m } else { m };
    match i64::try_from(v) {
        Ok(i) => Some(Value::Number(i.into())),
        // Too large for JSON's integers: keep its size as a float (it breaks every bound anyway).
        Err(_) => Number::from_f64(v as f64).map(Value::Number),
    }
}

fn float_value(raw: &str) -> Option<Value> {
    let s = raw.replace('_', "").to_lowercase();
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s.as_str()),
    };
    let magnitude = if body == ".inf" {
        f64::INFINITY
    } else if body == ".nan" {
        f64::NAN
    } else if body.contains(':') {
        body.split(':').try_fold(0f64, |acc, part| {
            part.parse::<f64>().ok().map(|p| acc * 60.0 + p)
        })?
    } else {
        body.parse::<f64>().ok()?
    };
    let v = if negative { -magnitude } else { magnitude };
    // JSON has no infinity or NaN: such a value is kept as a string, which a number field refuses.
    Some(Number::from_f64(v).map_or_else(|| Value::String(raw.to_string()), Value::Number))
}

/// What a plain scalar means to YAML 1.1.
pub(crate) fn resolve_plain(raw: &str) -> Value {
    let p = patterns();
    if p.boolean.is_match(raw) {
        Value::Bool(
            matches!(raw.as_bytes()[0], b'y' | b'Y' | b't' | b'T')
                || raw.eq_ignore_ascii_case("on"),
        )
    } else if p.float.is_match(raw) {
        float_value(raw).unwrap_or_else(|| Value::String(raw.to_string()))
    } else if p.int.is_match(raw) {
        int_value(raw).unwrap_or_else(|| Value::String(raw.to_string()))
    } else if p.null.is_match(raw) {
        Value::Null
    } else if p.timestamp.is_match(raw) {
        Value::Object(
            [(TIMESTAMP_KEY.to_string(), Value::String(raw.to_string()))]
                .into_iter()
                .collect(),
        )
    } else {
        Value::String(raw.to_string())
    }
}

/// The value of a parsed document, with plain scalars read as YAML 1.1 reads them.
pub fn to_json(located: &Located, text: &str) -> Value {
    match &located.node {
        Node::Seq(items) => Value::Array(items.iter().map(|i| to_json(i, text)).collect()),
        Node::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v, text)))
                .collect(),
        ),
        _ => {
            let raw = located.bytes.and_then(|(offset, len)| {
                text.get(offset as usize..(offset + len) as usize)
                    .map(|r| (offset as usize, r))
            });
            match raw {
                Some((offset, raw))
                    if !raw.starts_with(['\'', '"', '!', '&', '*'])
                        && !raw.contains('\n')
                        && !in_block(text, offset) =>
                {
                    resolve_plain(raw)
                }
                _ => located.to_json(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Value {
        let roots: Vec<serde_saphyr::Spanned<Node>> = serde_saphyr::from_multiple(text).unwrap();
        to_json(&Located::from(roots.into_iter().next().unwrap()), text)
    }

    #[test]
    fn plain_scalars_mean_what_yaml_1_1_says() {
        let v = read(
            "a: n\nb: 'yes'\nc: yes\nd: [on, OFF, y, 1e3, 1_000, 0x1F, 017, '017', 1:30, 1.5, 1.]\ne: |-\n  yes\nf: 2020-01-01\ng: ~\nh:\ni: \"on\"\nj: True\nk: -0b11\n",
        );
        assert_eq!(
            v,
            json!({"a": "n", "b": "yes", "c": true,
                   "d": [true, false, "y", "1e3", 1000, 31, 15, "017", 90, 1.5, 1.0],
                   "e": "yes", "f": {TIMESTAMP_KEY: "2020-01-01"}, "g": null, "h": null, "i": "on",
                   "j": true, "k": -3})
        );
    }
}

//! Strings as Nova reads them: Python's `str.strip()`, `int()` and oslo's boolean
//! spellings. Extra spec values and placement extra specs both go through these.

use std::fmt;

/// Spellings of true, compared after trimming and lower-casing (oslo's `bool_from_string`).
pub const TRUE_SPELLINGS: [&str; 6] = ["1", "t", "true", "on", "y", "yes"];
/// Spellings of false.
pub const FALSE_SPELLINGS: [&str; 6] = ["0", "f", "false", "off", "n", "no"];

/// Python's `str.isspace`: Unicode White_Space plus the four ASCII separators 0x1c-0x1f.
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// The value with surrounding whitespace removed, as Python's `str.strip()` does.
pub fn py_trim(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// An integer as Python's `int()` reads ordinary input: surrounding whitespace, an optional
/// sign and ASCII digits. Values beyond ±10^38 saturate; they are outside every bound anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ParsedInt(pub i128);

impl fmt::Display for ParsedInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            i128::MAX => f.write_str("a number above 10^38"),
            i128::MIN => f.write_str("a number below -10^38"),
            n => write!(f, "{n}"),
        }
    }
}

/// Parses an integer the way [`ParsedInt`] describes; `None` when it is not one.
pub fn parse_int(value: &str) -> Option<ParsedInt> {
    let t = py_trim(value);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    let n = if significant.len() > 38 {
        i128::MAX
    } else {
        significant.parse::<i128>().unwrap_or(0)
    };
    Some(ParsedInt(if negative {
        if n == i128::MAX { i128::MIN } else { -n }
    } else {
        n
    }))
}

/// Parses a boolean in Nova's spellings; `None` when it is none of them.
pub fn parse_bool(value: &str) -> Option<bool> {
    let lowered = py_trim(value).to_lowercase();
    if TRUE_SPELLINGS.contains(&lowered.as_str()) {
        Some(true)
    } else if FALSE_SPELLINGS.contains(&lowered.as_str()) {
        Some(false)
    } else {
        None
    }
}

//! Strings as Nova reads them: Python's `str.strip()`, `int()` and oslo's boolean
//! spellings. Extra spec values and placement extra specs both go through these.

use std::fmt;

/// Spellings of true, compared after trimming and lower-casing (oslo's `bool_from_string`).
pub(crate) const TRUE_SPELLINGS: [&str; 6] = ["1", "t", "true", "on", "y", "yes"];
/// Spellings of false.
pub(crate) const FALSE_SPELLINGS: [&str; 6] = ["0", "f", "false", "off", "n", "no"];

/// `s` cut to at most `max` bytes (`max` ≥ 3) on a character boundary, ending in "..."
/// where it was cut: for messages that go where length is bounded (Events, statuses).
pub fn truncated(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Python's `str.isspace`: Unicode White_Space plus the four ASCII separators 0x1c-0x1f.
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// The value with surrounding whitespace removed, as Python's `str.strip()` does.
pub(crate) fn py_trim(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// An integer as Python's `int()` reads ordinary input: surrounding whitespace, an optional
/// sign and ASCII digits. Values beyond ±10^38 saturate; they are outside every bound anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ParsedInt(pub i128);

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
pub(crate) fn parse_int(value: &str) -> Option<ParsedInt> {
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
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    let lowered = py_trim(value).to_lowercase();
    if TRUE_SPELLINGS.contains(&lowered.as_str()) {
        Some(true)
    } else if FALSE_SPELLINGS.contains(&lowered.as_str()) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_cuts_on_a_char_boundary() {
        assert_eq!(truncated("short", 10), "short");
        let s = "é".repeat(600);
        let t = truncated(&s, 1024);
        assert!(t.len() <= 1024 && t.ends_with("..."));
        assert_eq!(truncated("abcdef", 5), "ab...");
    }

    #[test]
    fn integers_as_python_reads_ordinary_input() {
        assert_eq!(parse_int("5"), Some(ParsedInt(5)));
        assert_eq!(parse_int(" 07\n"), Some(ParsedInt(7)));
        assert_eq!(parse_int("+3"), Some(ParsedInt(3)));
        assert_eq!(parse_int("-0"), Some(ParsedInt(0)));
        assert_eq!(parse_int("-12"), Some(ParsedInt(-12)));
        assert_eq!(parse_int("\u{1c}4\u{a0}"), Some(ParsedInt(4)));
        assert_eq!(parse_int(&"9".repeat(60)), Some(ParsedInt(i128::MAX)));
        assert_eq!(
            parse_int(&format!("-{}", "9".repeat(60))),
            Some(ParsedInt(i128::MIN))
        );
        for bad in [
            "", " ", "1.0", "1_000", "0x10", "٣", "1 2", "--1", "+", "one",
        ] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn booleans_in_every_spelling() {
        for t in ["1", "t", "TRUE", " True ", "on", "Y", "yes\t"] {
            assert_eq!(parse_bool(t), Some(true), "{t:?}");
        }
        for f in ["0", "F", "false", "OFF", "n", "No"] {
            assert_eq!(parse_bool(f), Some(false), "{f:?}");
        }
        for bad in ["", "2", "yess", "enabled", "tru e"] {
            assert_eq!(parse_bool(bad), None, "{bad:?}");
        }
    }
}

//! Memory page sizes a guest asks for (`hw:mem_page_size`, `hw_mem_page_size`), read as
//! Nova reads them when it builds the guest's topology.

use std::fmt;

use crate::text::{parse_int, py_trim};

/// The page size a guest's memory is to be backed by.
#[derive(Debug, Clone, PartialEq)]
pub enum PageSize {
    /// The host's smallest pages.
    Small,
    /// Any size but the host's smallest, the largest that fits first.
    Large,
    /// Any size, the largest that fits first.
    Any,
    /// Exactly this size, in KiB.
    Kib(u64),
    /// A size that is not a whole number of KiB (`1000B`, `1Kb`): Nova takes it, and no
    /// host has pages of it.
    Uneven(f64),
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageSize::Small => f.write_str("small"),
            PageSize::Large => f.write_str("large"),
            PageSize::Any => f.write_str("any"),
            PageSize::Kib(kib) => write!(f, "{kib} KiB"),
            PageSize::Uneven(kib) => write!(f, "{kib} KiB"),
        }
    }
}

/// A page size Nova's parser refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a page size: use small, large, any, a number of KiB (2048), or a size with a unit and a B (2MB, 1GiB; K, M, G and T upper-case)"
)]
pub struct PageSizeError(pub String);

/// Reads a page size: `small`, `large`, `any`, digits (KiB), or a size in IEC units that
/// ends in `B` (bytes) or `b`/`bit` (bits), its prefix one of K, M, G, T (… Q), optionally
/// followed by `i`. `None` for a size of 0, which Nova reads as no request.
pub fn parse_page_size(text: &str) -> Result<Option<PageSize>, PageSizeError> {
    match text {
        "any" => return Ok(Some(PageSize::Any)),
        "large" => return Ok(Some(PageSize::Large)),
        "small" => return Ok(Some(PageSize::Small)),
        _ => {}
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let kib = parse_int(text)
            .and_then(|n| u64::try_from(n.0).ok())
            .ok_or_else(|| PageSizeError(text.to_string()))?;
        return Ok((kib > 0).then_some(PageSize::Kib(kib)));
    }
    let bytes = iec_bytes(text).ok_or_else(|| PageSizeError(text.to_string()))?;
    // Nova rounds the bytes up to a whole number, then divides by 1024 without rounding.
    let bytes = bytes.ceil();
    if bytes <= 0.0 {
        // Nova would carry a zero or negative size on: none fits any host, and zero is
        // no request at all.
        return Ok((bytes < 0.0).then_some(PageSize::Uneven(bytes / 1024.0)));
    }
    if bytes % 1024.0 == 0.0 && bytes / 1024.0 <= u64::MAX as f64 {
        Ok(Some(PageSize::Kib((bytes / 1024.0) as u64)))
    } else {
        Ok(Some(PageSize::Uneven(bytes / 1024.0)))
    }
}

/// oslo's `string_to_bytes` in its IEC system: `[-+]?\d*\.?\d+`, an optional prefix, then
/// `b`, `bit` or `B`; a trailing newline is allowed, as Python's `$` allows it.
fn iec_bytes(text: &str) -> Option<f64> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let (text, bits) = if let Some(t) = text.strip_suffix("bit") {
        (t, true)
    } else if let Some(t) = text.strip_suffix('b') {
        (t, true)
    } else {
        (text.strip_suffix('B')?, false)
    };
    let (number, exponent) = match text.strip_suffix('i') {
        Some(t) => {
            let (n, e) = split_prefix(t)?;
            (n, Some(e))
        }
        None => match split_prefix(text) {
            Some((n, e)) => (n, Some(e)),
            None => (text, None),
        },
    };
    let mut magnitude = decimal(number)?;
    if bits {
        magnitude /= 8.0;
    }
    Some(match exponent {
        Some(e) => magnitude * 1024f64.powi(e),
        None => magnitude,
    })
}

/// The number before an upper-case IEC prefix, and the prefix's power of 1024.
fn split_prefix(text: &str) -> Option<(&str, i32)> {
    let last = text.chars().last()?;
    let exponent = "KMGTPEZYRQ".find(last)? as i32 + 1;
    Some((&text[..text.len() - 1], exponent))
}

/// `[-+]?\d*\.?\d+` as a float.
fn decimal(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = match body.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (body, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let valid = match fraction {
        Some(f) => digits(whole) && !f.is_empty() && digits(f),
        None => !whole.is_empty() && digits(whole),
    };
    if !valid || py_trim(text) != text {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_digits_and_units_are_read_as_nova_reads_them() {
        assert_eq!(parse_page_size("small"), Ok(Some(PageSize::Small)));
        assert_eq!(parse_page_size("2048"), Ok(Some(PageSize::Kib(2048))));
        assert_eq!(parse_page_size("2MB"), Ok(Some(PageSize::Kib(2048))));
        assert_eq!(parse_page_size("2MiB"), Ok(Some(PageSize::Kib(2048))));
        assert_eq!(parse_page_size("1GB"), Ok(Some(PageSize::Kib(1_048_576))));
        assert_eq!(parse_page_size("4KB"), Ok(Some(PageSize::Kib(4))));
        // Bits: 2 Mb is 256 KiB.
        assert_eq!(parse_page_size("2Mb"), Ok(Some(PageSize::Kib(256))));
        assert_eq!(parse_page_size("2Mbit"), Ok(Some(PageSize::Kib(256))));
        assert_eq!(
            parse_page_size("1000B"),
            Ok(Some(PageSize::Uneven(1000.0 / 1024.0)))
        );
        assert_eq!(parse_page_size("0"), Ok(None));
    }

    #[test]
    fn what_the_extra_spec_pattern_passes_and_the_parser_refuses_is_an_error() {
        for bad in [
            "2M", "1G", "2k", "2kB", "2KiBs", "2 MB", "", "huge", "Large",
        ] {
            assert_eq!(
                parse_page_size(bad),
                Err(PageSizeError(bad.into())),
                "{bad}"
            );
        }
    }
}

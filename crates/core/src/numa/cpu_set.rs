//! CPU sets as Nova writes them (`0-3,^2,8`): the masks of flavors and images, a cell's CPUs.

use std::collections::BTreeSet;

use crate::text::{parse_int, py_trim};

/// A set of CPU numbers, host or guest.
pub type CpuSet = BTreeSet<u32>;

/// Why a CPU set could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    #[error(
        "{0:?} is not a range of CPU numbers such as 2-5 (the first number no larger than the second)"
    )]
    Range(String),
    #[error("{0:?} is not a CPU number to leave out, such as ^3")]
    Exclusion(String),
    #[error("{0:?} is not a CPU number")]
    Inclusion(String),
}

/// Reads a CPU set as Nova's `parse_cpu_spec` does: comma-separated rules, each `N`, `A-B`,
/// `^N` or `^A-B`; empty rules are skipped and exclusions apply to the whole set, wherever
/// they stand.
pub fn parse_cpu_set(spec: &str) -> Result<CpuSet, CpuSetError> {
    let mut cpus = CpuSet::new();
    let mut left_out = CpuSet::new();
    for rule in spec.split(',') {
        let rule = py_trim(rule);
        if rule.is_empty() {
            continue;
        }
        if let Some((first, last)) = rule.split_once('-') {
            let (reject, first) = match first.strip_prefix('^') {
                Some(rest) => (true, rest),
                None => (false, first),
            };
            let (Some(a), Some(b)) = (cpu_number(first), cpu_number(last)) else {
                return Err(CpuSetError::Range(rule.to_string()));
            };
            if a > b {
                return Err(CpuSetError::Range(rule.to_string()));
            }
            let target = if reject { &mut left_out } else { &mut cpus };
            target.extend(a..=b);
        } else if let Some(rest) = rule.strip_prefix('^') {
            left_out
                .insert(cpu_number(rest).ok_or_else(|| CpuSetError::Exclusion(rule.to_string()))?);
        } else {
            cpus.insert(cpu_number(rule).ok_or_else(|| CpuSetError::Inclusion(rule.to_string()))?);
        }
    }
    Ok(&cpus - &left_out)
}

/// A CPU number as Python's `int()` reads one; negative numbers and numbers past `u32` are
/// not CPUs (Nova would take a negative one and never find it on a host).
fn cpu_number(text: &str) -> Option<u32> {
    let n = parse_int(text)?.0;
    u32::try_from(n).ok()
}

/// Writes a CPU set compactly, as Nova's `format_cpu_spec` does without exclusions:
/// `0-3,8,10-11`.
pub fn format_cpu_set(cpus: &CpuSet) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u32, u32)> = None;
    for &cpu in cpus {
        run = match run {
            Some((start, end)) if end + 1 == cpu => Some((start, cpu)),
            Some(done) => {
                parts.push(range_text(done));
                Some((cpu, cpu))
            }
            None => Some((cpu, cpu)),
        };
    }
    if let Some(done) = run {
        parts.push(range_text(done));
    }
    parts.join(",")
}

fn range_text((start, end): (u32, u32)) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[u32]) -> CpuSet {
        cpus.iter().copied().collect()
    }

    #[test]
    fn rules_ranges_and_exclusions_are_read_as_nova_reads_them() {
        assert_eq!(parse_cpu_set("0-3,^2,8"), Ok(set(&[0, 1, 3, 8])));
        assert_eq!(parse_cpu_set("^2, 0-3"), Ok(set(&[0, 1, 3])));
        assert_eq!(parse_cpu_set(" 1 ,, 4 - 5 "), Ok(set(&[1, 4, 5])));
        assert_eq!(parse_cpu_set("0-5,^1-3"), Ok(set(&[0, 4, 5])));
        assert_eq!(parse_cpu_set(""), Ok(CpuSet::new()));
    }

    #[test]
    fn bad_rules_say_which_rule_and_why() {
        assert_eq!(parse_cpu_set("3-1"), Err(CpuSetError::Range("3-1".into())));
        assert_eq!(parse_cpu_set("a-2"), Err(CpuSetError::Range("a-2".into())));
        assert_eq!(parse_cpu_set("-1"), Err(CpuSetError::Range("-1".into())));
        assert_eq!(
            parse_cpu_set("^x"),
            Err(CpuSetError::Exclusion("^x".into()))
        );
        assert_eq!(
            parse_cpu_set("1,two"),
            Err(CpuSetError::Inclusion("two".into()))
        );
    }

    #[test]
    fn sets_are_written_in_runs() {
        assert_eq!(
            format_cpu_set(&set(&[0, 1, 2, 3, 8, 10, 11])),
            "0-3,8,10-11"
        );
        assert_eq!(format_cpu_set(&set(&[5])), "5");
        assert_eq!(format_cpu_set(&CpuSet::new()), "");
    }
}

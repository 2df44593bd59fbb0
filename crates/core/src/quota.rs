//! Project quotas in Nova's unified-limits names (`servers`, `class:VCPU`, …) and the
//! arithmetic of a claim against them: what a project uses, what a claim adds, and how many
//! more servers of a size a project may still create.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::placement::check_resource_class;

/// The value of a limit that does not limit.
pub const UNLIMITED: i64 = -1;

/// What a limit counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitKey {
    /// The project's consumers holding allocations (`servers`).
    Servers,
    /// The sum of one resource class over the project's allocations (`class:VCPU`).
    Class(String),
}

/// Why a limit's name or value is not one a quota takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "{key:?} is not a limit name; limits are \"servers\" or \"class:<RESOURCE_CLASS>\" (for example \"class:VCPU\", \"class:CUSTOM_GPU\")"
    )]
    UnknownKey { key: String },
    #[error("{key:?} names no resource class: {reason}")]
    BadClass { key: String, reason: String },
    #[error("{key:?} is {value}; a limit is an integer of at least 0, or -1 for no limit")]
    BadValue { key: String, value: i64 },
}

impl FromStr for LimitKey {
    type Err = LimitError;

    fn from_str(key: &str) -> Result<LimitKey, LimitError> {
        if key == "servers" {
            return Ok(LimitKey::Servers);
        }
        let Some(class) = key.strip_prefix("class:") else {
            return Err(LimitError::UnknownKey {
                key: key.to_string(),
            });
        };
        check_resource_class(class).map_err(|e| LimitError::BadClass {
            key: key.to_string(),
            reason: e.to_string(),
        })?;
        Ok(LimitKey::Class(class.to_string()))
    }
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitKey::Servers => f.write_str("servers"),
            LimitKey::Class(c) => write!(f, "class:{c}"),
        }
    }
}

/// Limits by key; a key absent, or [`UNLIMITED`], does not limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits(pub BTreeMap<LimitKey, i64>);

impl Limits {
    /// One limit of a quota's `spec.limits`, checked.
    fn entry(key: &str, value: i64) -> Result<(LimitKey, i64), LimitError> {
        let parsed: LimitKey = key.parse()?;
        if value < UNLIMITED {
            return Err(LimitError::BadValue {
                key: key.to_string(),
                value,
            });
        }
        Ok((parsed, value))
    }

    /// Limits from a quota's `spec.limits`: every key and value checked, the first
    /// problem returned (with the name and value at fault).
    pub fn parse(spec: &BTreeMap<String, i64>) -> Result<Limits, LimitError> {
        spec.iter()
            .map(|(k, v)| Limits::entry(k, *v))
            .collect::<Result<_, _>>()
            .map(Limits)
    }

    /// The well-formed limits of a quota's `spec.limits`, the others left out (admission
    /// refuses them; one written past it limits nothing).
    pub fn lenient(spec: &BTreeMap<String, i64>) -> Limits {
        Limits(
            spec.iter()
                .filter_map(|(k, v)| Limits::entry(k, *v).ok())
                .collect(),
        )
    }

    /// Every problem of a quota's `spec.limits`, for admission to list at once.
    pub fn problems(spec: &BTreeMap<String, i64>) -> Vec<LimitError> {
        spec.iter()
            .filter_map(|(k, v)| Limits::entry(k, *v).err())
            .collect()
    }

    /// These limits, with `fallback`'s for the keys these do not set.
    pub fn over(mut self, fallback: &Limits) -> Limits {
        for (key, value) in &fallback.0 {
            self.0.entry(key.clone()).or_insert(*value);
        }
        self
    }

    /// The limits that limit (at least 0).
    pub fn effective(&self) -> impl Iterator<Item = (&LimitKey, i64)> {
        self.0
            .iter()
            .filter(|(_, v)| **v >= 0)
            .map(|(k, v)| (k, *v))
    }
}

/// What a project uses, or what a claim adds: amounts per resource class and consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub resources: BTreeMap<String, i64>,
    pub servers: i64,
}

impl Usage {
    /// The amount counted against `key`.
    pub fn of(&self, key: &LimitKey) -> i64 {
        match key {
            LimitKey::Servers => self.servers,
            LimitKey::Class(c) => self.resources.get(c).copied().unwrap_or(0),
        }
    }

    /// Adds `other` to this usage.
    pub fn add(&mut self, other: &Usage) {
        for (class, n) in &other.resources {
            *self.resources.entry(class.clone()).or_insert(0) += n;
        }
        self.servers += other.servers;
    }
}

/// A claim a quota does not allow: the limit, what the project used before it, and what it
/// asked for beyond that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub key: LimitKey,
    pub limit: i64,
    pub used: i64,
    pub asked: i64,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is limited to {}; {} in use, {} more asked",
            self.key, self.limit, self.used, self.asked
        )
    }
}

/// Whether going from `before` to `after` stays within `limits`. Only what grows is judged:
/// a limit lowered below what a project already uses stops new claims, and lets usage
/// fall or stay.
pub fn within(limits: &Limits, before: &Usage, after: &Usage) -> Result<(), Exceeded> {
    for (key, limit) in limits.effective() {
        let (was, will) = (before.of(key), after.of(key));
        if will > was && will > limit {
            return Err(Exceeded {
                key: key.clone(),
                limit,
                used: was,
                asked: will - was,
            });
        }
    }
    Ok(())
}

/// How many more claims of `each` (one server each) `limits` allow beside `used`, and the
/// limit that stops the next one; none when nothing limits them.
pub fn servers_within(limits: &Limits, used: &Usage, each: &Usage) -> Option<(i64, LimitKey)> {
    limits
        .effective()
        .filter_map(|(key, limit)| {
            let per = match key {
                LimitKey::Servers => 1,
                _ => each.of(key),
            };
            (per > 0).then(|| (((limit - used.of(key)).max(0)) / per, key.clone()))
        })
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(vcpu: i64, servers: i64) -> Usage {
        Usage {
            resources: BTreeMap::from([("VCPU".to_string(), vcpu)]),
            servers,
        }
    }

    fn limits(pairs: &[(&str, i64)]) -> Limits {
        Limits::parse(&pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()).unwrap()
    }

    #[test]
    fn keys_parse_as_nova_names_them_and_bad_ones_say_what_is_accepted() {
        assert_eq!("servers".parse::<LimitKey>(), Ok(LimitKey::Servers));
        assert_eq!(
            "class:CUSTOM_GPU_A100".parse::<LimitKey>(),
            Ok(LimitKey::Class("CUSTOM_GPU_A100".into()))
        );
        let unknown = "cores".parse::<LimitKey>().unwrap_err().to_string();
        assert!(unknown.contains("\"cores\"") && unknown.contains("class:<RESOURCE_CLASS>"));
        let bad = "class:VCPUS".parse::<LimitKey>().unwrap_err().to_string();
        assert!(bad.contains("\"class:VCPUS\""), "{bad}");
        let value = Limits::parse(&BTreeMap::from([("servers".to_string(), -2)]))
            .unwrap_err()
            .to_string();
        assert!(
            value.contains("-2") && value.contains("-1 for no limit"),
            "{value}"
        );
        assert_eq!(
            Limits::problems(&BTreeMap::from([
                ("servers".to_string(), -5),
                ("class:VCPU".to_string(), 3),
                ("ram".to_string(), 1)
            ]))
            .len(),
            2
        );
    }

    #[test]
    fn only_growth_past_a_limit_is_refused() {
        let l = limits(&[("class:VCPU", 10), ("servers", 2)]);
        assert!(within(&l, &usage(8, 1), &usage(10, 2)).is_ok());
        let e = within(&l, &usage(8, 1), &usage(11, 2)).unwrap_err();
        assert_eq!((e.limit, e.used, e.asked), (10, 8, 3));
        assert!(e.to_string().contains("class:VCPU is limited to 10"));
        // Lowered below usage: shrinking and staying are allowed, growing is not.
        let low = limits(&[("class:VCPU", 4)]);
        assert!(within(&low, &usage(8, 1), &usage(6, 1)).is_ok());
        assert!(within(&low, &usage(8, 1), &usage(8, 1)).is_ok());
        assert!(within(&low, &usage(8, 1), &usage(9, 1)).is_err());
        assert!(within(&limits(&[("class:VCPU", -1)]), &usage(0, 0), &usage(99, 9)).is_ok());
        let e = within(&l, &usage(0, 2), &usage(1, 3)).unwrap_err();
        assert_eq!(e.key, LimitKey::Servers);
    }

    #[test]
    fn servers_within_takes_the_tightest_limit() {
        let l = limits(&[("class:VCPU", 10), ("servers", 5), ("class:MEMORY_MB", -1)]);
        assert_eq!(
            servers_within(&l, &usage(4, 1), &usage(2, 1)),
            Some((3, LimitKey::Class("VCPU".into())))
        );
        assert_eq!(
            servers_within(&l, &usage(0, 4), &usage(2, 1)),
            Some((1, LimitKey::Servers))
        );
        assert_eq!(
            servers_within(&Limits::default(), &usage(0, 0), &usage(2, 1)),
            None
        );
        // Over the limit already: none more.
        assert_eq!(
            servers_within(&l, &usage(12, 1), &usage(2, 1)).unwrap().0,
            0
        );
        let fallback = limits(&[("servers", 1), ("class:VCPU", 99)]);
        assert_eq!(l.clone().over(&fallback).0[&LimitKey::Servers], 5);
        assert_eq!(
            limits(&[("class:VCPU", 3)]).over(&fallback).0[&LimitKey::Servers],
            1
        );
    }
}

//! Weighers: how the scheduler orders the candidates a server could be placed on, the way
//! Nova's filter scheduler weighs hosts. Each weigher gives every candidate a raw value;
//! the values are normalized to 0..1 over the candidates being weighed (the smallest 0, the
//! largest 1, all 0 when they are equal), multiplied by the weigher's multiplier and summed.
//! The highest sum wins. A positive multiplier prefers more free capacity (spread), a
//! negative one less (pack), zero turns the weigher off; the instances weigher, as Nova's,
//! weighs instances rather than free capacity, so there a positive multiplier packs.

use std::fmt;
use std::str::FromStr;

/// One weigher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Weigher {
    /// The smallest share of capacity left free, after the allocation, on any provider and
    /// class the candidate uses: kubeplace's own, and its default.
    Spread,
    /// Free MEMORY_MB on the candidate's host tree (Nova's RAMWeigher).
    Ram,
    /// Free VCPU on the candidate's host tree (Nova's CPUWeigher).
    Cpu,
    /// Free DISK_GB on the candidate's host tree (Nova's DiskWeigher).
    Disk,
    /// Consumers holding allocations on the candidate's host tree (Nova's
    /// NumInstancesWeigher): positive prefers busier hosts (pack), negative idler ones.
    Instances,
}

/// How many weighers there are: the columns of raw values and multipliers.
pub const WEIGHERS: usize = 5;

impl Weigher {
    /// Every weigher, in the order raw values are given.
    pub const ALL: [Weigher; WEIGHERS] = [
        Weigher::Spread,
        Weigher::Ram,
        Weigher::Cpu,
        Weigher::Disk,
        Weigher::Instances,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Weigher::Spread => "spread",
            Weigher::Ram => "ram",
            Weigher::Cpu => "cpu",
            Weigher::Disk => "disk",
            Weigher::Instances => "instances",
        }
    }

    /// The resource class whose free amount on the host it weighs, if it weighs one.
    pub fn resource_class(self) -> Option<&'static str> {
        match self {
            Weigher::Spread | Weigher::Instances => None,
            Weigher::Ram => Some("MEMORY_MB"),
            Weigher::Cpu => Some("VCPU"),
            Weigher::Disk => Some("DISK_GB"),
        }
    }

    /// Its column in the raw values [`Weighers::weigh`] takes.
    pub fn column(self) -> usize {
        self as usize
    }
}

/// Why a weigher setting was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WeigherError {
    #[error("unknown weigher {name:?}; the weighers are spread, ram, cpu, disk and instances")]
    Unknown { name: String },
    #[error("{item:?} is not NAME=MULTIPLIER (for example ram=1.0 or cpu=-1)")]
    NotAnAssignment { item: String },
    #[error(
        "weigher {name}: multiplier {value:?} is not a finite number (for example 1.0, -2 or 0)"
    )]
    BadMultiplier { name: String, value: String },
    #[error("weigher {name} is given twice")]
    Repeated { name: String },
}

/// A multiplier for each weigher.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighers {
    multipliers: [f64; WEIGHERS],
}

impl Default for Weighers {
    /// Spread alone, with multiplier 1.
    fn default() -> Weighers {
        Weighers {
            multipliers: [1.0, 0.0, 0.0, 0.0, 0.0],
        }
    }
}

impl Weighers {
    /// The multiplier of one weigher.
    pub fn multiplier(&self, weigher: Weigher) -> f64 {
        self.multipliers[weigher.column()]
    }

    /// Sets the multiplier of one weigher.
    pub fn set(&mut self, weigher: Weigher, multiplier: f64) {
        self.multipliers[weigher.column()] = multiplier;
    }

    /// The weigher of each nonzero multiplier.
    pub fn active(&self) -> impl Iterator<Item = Weigher> + '_ {
        Weigher::ALL
            .into_iter()
            .filter(|w| self.multiplier(*w) != 0.0)
    }

    /// Each candidate's weight from its raw values (one row per candidate, one column per
    /// weigher in [`Weigher::ALL`] order).
    pub fn weigh(&self, raw: &[[f64; WEIGHERS]]) -> Vec<f64> {
        weigh_each(raw, &vec![self.multipliers; raw.len()])
    }

    /// The multipliers for a host with these overrides (from its aggregates), in
    /// [`Weigher::ALL`] order: each override replaces this setting's multiplier.
    pub fn overridden(&self, overrides: [Option<f64>; WEIGHERS]) -> [f64; WEIGHERS] {
        let mut row = self.multipliers;
        for (m, o) in row.iter_mut().zip(overrides) {
            if let Some(o) = o {
                *m = o;
            }
        }
        row
    }
}

/// Each candidate's weight from its raw values and its own multipliers (a row each, in
/// [`Weigher::ALL`] order): Nova's per-aggregate multipliers give hosts different ones.
/// Normalization is over every candidate, whatever its multipliers.
pub fn weigh_each(raw: &[[f64; WEIGHERS]], multipliers: &[[f64; WEIGHERS]]) -> Vec<f64> {
    let mut weights = vec![0.0; raw.len()];
    for weigher in Weigher::ALL {
        let column = weigher.column();
        if multipliers.iter().all(|m| m[column] == 0.0) {
            continue;
        }
        let (low, high) = raw
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| {
                (l.min(r[column]), h.max(r[column]))
            });
        let span = high - low;
        if !span.is_finite() || span <= 0.0 {
            continue; // every candidate alike: this weigher decides nothing
        }
        for ((weight, row), m) in weights.iter_mut().zip(raw).zip(multipliers) {
            *weight += m[column] * (row[column] - low) / span;
        }
    }
    weights
}

impl FromStr for Weighers {
    type Err = WeigherError;

    /// `NAME=MULTIPLIER` items separated by commas, over the default (spread=1): `ram=1,
    /// spread=0` weighs free RAM only. An empty string is the default.
    fn from_str(s: &str) -> Result<Weighers, WeigherError> {
        let mut weighers = Weighers::default();
        let mut seen = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                return Err(WeigherError::NotAnAssignment { item: item.into() });
            };
            let (name, value) = (name.trim(), value.trim());
            let weigher = Weigher::ALL
                .into_iter()
                .find(|w| w.name() == name)
                .ok_or_else(|| WeigherError::Unknown { name: name.into() })?;
            if seen.contains(&weigher) {
                return Err(WeigherError::Repeated { name: name.into() });
            }
            seen.push(weigher);
            let multiplier = value
                .parse::<f64>()
                .ok()
                .filter(|m| m.is_finite())
                .ok_or_else(|| WeigherError::BadMultiplier {
                    name: name.into(),
                    value: value.into(),
                })?;
            weighers.set(weigher, multiplier);
        }
        Ok(weighers)
    }
}

impl fmt::Display for Weighers {
    /// Every weigher with its multiplier, as [`FromStr`] reads them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = Weigher::ALL
            .iter()
            .map(|w| format!("{}={}", w.name(), self.multiplier(*w)))
            .collect();
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_spread_alone() {
        let w = Weighers::default();
        assert_eq!(w.to_string(), "spread=1,ram=0,cpu=0,disk=0,instances=0");
        assert_eq!(w, "".parse().unwrap());
        assert_eq!(w.active().collect::<Vec<_>>(), [Weigher::Spread]);
    }

    #[test]
    fn settings_read_over_the_default_and_print_back() {
        let w: Weighers = "ram=1.5, cpu=-1,spread=0".parse().unwrap();
        assert_eq!(w.to_string(), "spread=0,ram=1.5,cpu=-1,disk=0,instances=0");
        assert_eq!(w, w.to_string().parse().unwrap());
    }

    #[test]
    fn bad_settings_name_what_is_wrong_and_what_is_accepted() {
        let err = |s: &str| s.parse::<Weighers>().unwrap_err().to_string();
        assert_eq!(
            err("ram=1,gpu=2"),
            "unknown weigher \"gpu\"; the weighers are spread, ram, cpu, disk and instances"
        );
        assert_eq!(
            err("ram"),
            "\"ram\" is not NAME=MULTIPLIER (for example ram=1.0 or cpu=-1)"
        );
        assert_eq!(
            err("cpu=lots"),
            "weigher cpu: multiplier \"lots\" is not a finite number (for example 1.0, -2 or 0)"
        );
        assert!(err("cpu=inf").contains("not a finite number"));
        assert!(err("cpu=NaN").contains("not a finite number"));
        assert_eq!(err("ram=1,ram=2"), "weigher ram is given twice");
    }

    #[test]
    fn values_are_normalized_over_the_candidates_then_multiplied_and_summed() {
        let w: Weighers = "spread=0,ram=1,cpu=-2".parse().unwrap();
        // RAM 1000/3000/2000 normalizes to 0, 1, 0.5; CPU 4/8/8 to 0, 1, 1.
        let raw = [
            [0.9, 1000.0, 4.0, 0.0, 0.0],
            [0.1, 3000.0, 8.0, 0.0, 0.0],
            [0.5, 2000.0, 8.0, 0.0, 0.0],
        ];
        assert_eq!(w.weigh(&raw), [0.0, 1.0 - 2.0, 0.5 - 2.0]);
    }

    #[test]
    fn a_weigher_on_which_every_candidate_is_alike_decides_nothing() {
        let w: Weighers = "ram=-1".parse().unwrap();
        let raw = [[0.25, 512.0, 0.0, 0.0, 0.0], [0.75, 512.0, 0.0, 0.0, 0.0]];
        assert_eq!(w.weigh(&raw), [0.0, 1.0], "spread decides alone");
        assert_eq!(w.weigh(&[]), Vec::<f64>::new());
    }

    #[test]
    fn a_host_with_its_own_multiplier_is_weighed_with_it() {
        let w: Weighers = "spread=0,ram=1".parse().unwrap();
        let raw = [[0.0, 100.0, 0.0, 0.0, 0.0], [0.0, 300.0, 0.0, 0.0, 0.0]];
        // The second host's aggregate packs RAM: its 1.0 normalized counts -1.
        let rows = [
            w.overridden([None; WEIGHERS]),
            w.overridden([None, Some(-1.0), None, None, None]),
        ];
        assert_eq!(rows[1], [0.0, -1.0, 0.0, 0.0, 0.0]);
        assert_eq!(weigh_each(&raw, &rows), [0.0, -1.0]);
        // An override turns on a weigher the setting leaves off, for that host alone.
        let off = Weighers::default();
        let rows = [
            off.overridden([None; WEIGHERS]),
            off.overridden([None, None, Some(2.0), None, None]),
        ];
        let raw = [[0.5, 0.0, 8.0, 0.0, 0.0], [0.5, 0.0, 16.0, 0.0, 0.0]];
        assert_eq!(weigh_each(&raw, &rows), [0.0, 2.0]);
    }

    #[test]
    fn packing_reverses_the_order_spreading_gives() {
        let raw = [
            [0.0, 100.0, 0.0, 0.0, 0.0],
            [0.0, 300.0, 0.0, 0.0, 0.0],
            [0.0, 200.0, 0.0, 0.0, 0.0],
        ];
        let best = |w: &Weighers| {
            let weights = w.weigh(&raw);
            (0..raw.len())
                .max_by(|a, b| weights[*a].total_cmp(&weights[*b]))
                .unwrap()
        };
        assert_eq!(best(&"spread=0,ram=1".parse().unwrap()), 1);
        assert_eq!(best(&"spread=0,ram=-1".parse().unwrap()), 0);
    }
}

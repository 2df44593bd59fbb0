//! Placement API microversions: which query features each version allows.

use std::fmt;
use std::str::FromStr;

/// A `1.N` microversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion(pub u16);

impl Microversion {
    /// The newest microversion kubeplace speaks (Placement 16.x).
    pub const LATEST: Microversion = Microversion(39);
    /// The oldest microversion kubeplace answers allocation candidate queries at.
    pub(crate) const OLDEST: Microversion = Microversion(10);

    /// Whether this version is at least `1.minor`.
    pub(crate) fn at_least(self, minor: u16) -> bool {
        self.0 >= minor
    }
}

impl fmt::Display for Microversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

/// A microversion string kubeplace does not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("microversion {0:?} is not served; use 1.10 to 1.39, or latest")]
pub struct MicroversionError(pub String);

impl FromStr for Microversion {
    type Err = MicroversionError;

    fn from_str(s: &str) -> Result<Self, MicroversionError> {
        if s == "latest" {
            return Ok(Microversion::LATEST);
        }
        let err = || MicroversionError(s.to_string());
        let (major, minor) = s.split_once('.').ok_or_else(err)?;
        let minor: u16 = minor.parse().map_err(|_| err())?;
        if major != "1" || !(Self::OLDEST.0..=Self::LATEST.0).contains(&minor) || s.starts_with('+')
        {
            return Err(err());
        }
        Ok(Microversion(minor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_served_versions() {
        assert_eq!("1.39".parse(), Ok(Microversion(39)));
        assert_eq!("1.16".parse(), Ok(Microversion(16)));
        assert_eq!("latest".parse(), Ok(Microversion::LATEST));
        assert!("1.40".parse::<Microversion>().is_err());
        assert!("1.9".parse::<Microversion>().is_err());
        assert_eq!("1.10".parse(), Ok(Microversion(10)));
        assert!("2.0".parse::<Microversion>().is_err());
        assert!("1.x".parse::<Microversion>().is_err());
    }
}

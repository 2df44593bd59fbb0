//! The three validation modes of a flavor's extra specs.

use std::fmt;
use std::str::FromStr;

/// How strictly a flavor's extra specs are checked (annotation `kubeplace.io/extra-spec-validation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValidationMode {
    /// Unknown keys and bad values reject the flavor.
    #[default]
    Strict,
    /// Bad values of known keys reject; unknown keys are admitted with a warning.
    Permissive,
    /// Nothing is checked.
    Off,
}

/// A mode value that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("validation mode {0:?} is not one of strict, permissive, off")]
pub struct ModeError(pub String);

impl FromStr for ValidationMode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Self, ModeError> {
        match s {
            "strict" => Ok(ValidationMode::Strict),
            "permissive" => Ok(ValidationMode::Permissive),
            "off" => Ok(ValidationMode::Off),
            other => Err(ModeError(other.to_string())),
        }
    }
}

impl fmt::Display for ValidationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValidationMode::Strict => "strict",
            ValidationMode::Permissive => "permissive",
            ValidationMode::Off => "off",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exactly_the_three_modes() {
        assert_eq!("strict".parse(), Ok(ValidationMode::Strict));
        assert_eq!("permissive".parse(), Ok(ValidationMode::Permissive));
        assert_eq!("off".parse(), Ok(ValidationMode::Off));
        assert_eq!(
            "Strict".parse::<ValidationMode>(),
            Err(ModeError("Strict".into()))
        );
        assert_eq!("".parse::<ValidationMode>(), Err(ModeError("".into())));
    }
}

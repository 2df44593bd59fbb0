//! Nova's API schema for extra specs, before any per-key validation.

/// Longest key Nova accepts.
pub(crate) const MAX_KEY_LEN: usize = 255;
/// Longest value Nova accepts.
pub(crate) const MAX_VALUE_LEN: usize = 255;

/// Why a key or value fails Nova's API schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaProblem {
    #[error(
        "the key is empty; keys are 1 to 255 characters of a-z, A-Z, 0-9, '-', '_', ':', '.' and ' '"
    )]
    EmptyKey,
    #[error("the key is {0} characters long; at most 255 are allowed")]
    KeyTooLong(usize),
    #[error("the key has {0:?}; keys use only a-z, A-Z, 0-9, '-', '_', ':', '.' and ' '")]
    KeyCharacter(char),
    #[error("the value is {0} characters long; at most 255 are allowed")]
    ValueTooLong(usize),
}

/// Keys are `[a-zA-Z0-9-_:. ]{1,255}`.
pub fn check_key_syntax(key: &str) -> Result<(), SchemaProblem> {
    if key.is_empty() {
        return Err(SchemaProblem::EmptyKey);
    }
    let len = key.chars().count();
    if len > MAX_KEY_LEN {
        return Err(SchemaProblem::KeyTooLong(len));
    }
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | ' ')))
    {
        return Err(SchemaProblem::KeyCharacter(c));
    }
    Ok(())
}

/// Values are strings of at most 255 characters.
pub(crate) fn check_value_length(value: &str) -> Result<(), SchemaProblem> {
    let len = value.chars().count();
    if len > MAX_VALUE_LEN {
        return Err(SchemaProblem::ValueTooLong(len));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_rules() {
        assert!(check_key_syntax("hw:cpu_policy").is_ok());
        assert!(check_key_syntax("a b.c-d_e:f").is_ok());
        assert_eq!(check_key_syntax(""), Err(SchemaProblem::EmptyKey));
        assert_eq!(
            check_key_syntax("hw/cpu"),
            Err(SchemaProblem::KeyCharacter('/'))
        );
        assert_eq!(
            check_key_syntax(&"k".repeat(256)),
            Err(SchemaProblem::KeyTooLong(256))
        );
        assert!(check_key_syntax(&"k".repeat(255)).is_ok());
    }

    #[test]
    fn value_rules() {
        assert!(check_value_length("").is_ok());
        assert!(check_value_length(&"é".repeat(255)).is_ok());
        assert_eq!(
            check_value_length(&"v".repeat(256)),
            Err(SchemaProblem::ValueTooLong(256))
        );
    }
}

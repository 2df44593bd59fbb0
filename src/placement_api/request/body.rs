//! Request bodies: the media type, the JSON, and fields checked one by one with errors
//! that name the field, the value and what is accepted.

use std::collections::BTreeMap;

use http::StatusCode;
use serde_json::{Map, Value};

use super::call::Call;
use super::wire::ApiError;

/// Placement's largest integer (a signed 32-bit column).
pub(crate) const MAX_INT: i64 = i32::MAX as i64;

/// The body as JSON: 415 unless sent as `application/json`, 400 when it is not JSON.
pub(crate) fn json(call: &Call) -> Result<Value, ApiError> {
    json_sent(call)?;
    serde_json::from_slice::<Value>(&call.body)
        .map_err(|e| ApiError::bad_request(format!("Malformed JSON: {e}")))
}

/// Whether the request says its body is JSON, as a request that must carry one must: a
/// body without a `Content-Type` is a 400, any other type (or none, without a body) a 415.
pub(crate) fn json_sent(call: &Call) -> Result<(), ApiError> {
    let media = call
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let Some(media) = media else {
        // What the headers announce, so that the answer is the same before the body is read.
        if super::intake::has_body(&call.headers) || !call.body.is_empty() {
            return Err(ApiError::bad_request(
                "a body was sent without a Content-Type header; send it as application/json",
            ));
        }
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "no body and no Content-Type were sent; send a body as application/json",
        ));
    };
    let essence = media.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("The media type {media} is not supported, use application/json"),
        ));
    }
    Ok(())
}

/// The body as a JSON object.
pub(crate) fn object(call: &Call) -> Result<Map<String, Value>, ApiError> {
    match json(call)? {
        Value::Object(m) => Ok(m),
        other => Err(invalid(format!("{other} is not of type 'object'"))),
    }
}

/// A body that does not fit the schema.
pub(crate) fn invalid(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("JSON does not validate: {detail}"))
}

/// Refuses fields other than `allowed`.
pub(crate) fn only(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match body.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid(format!(
            "Additional properties are not allowed ({k:?} was unexpected); allowed: {}",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A required field.
pub(crate) fn required<'a>(
    body: &'a Map<String, Value>,
    field: &str,
) -> Result<&'a Value, ApiError> {
    body.get(field)
        .ok_or_else(|| invalid(format!("{field:?} is a required property")))
}

/// An integer field in `min..=MAX_INT`, or its default when absent.
pub(crate) fn int(
    body: &Map<String, Value>,
    field: &str,
    min: i64,
    default: Option<i64>,
) -> Result<i64, ApiError> {
    let value = match (body.get(field), default) {
        (None, Some(d)) => return Ok(d),
        (None, None) => return Err(invalid(format!("{field:?} is a required property"))),
        (Some(v), _) => v,
    };
    match value.as_i64() {
        Some(n) if (min..=MAX_INT).contains(&n) => Ok(n),
        Some(n) => Err(invalid(format!(
            "{field} is {n}; it must be between {min} and {MAX_INT}"
        ))),
        None => Err(invalid(format!("{field} is {value}, not an integer"))),
    }
}

/// A string field of at most `max` characters, when present.
pub(crate) fn string(
    body: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= max => Ok(Some(s.clone())),
        Some(v) => Err(invalid(format!(
            "{field} is {v}; it must be a string of 1 to {max} characters"
        ))),
    }
}

/// A uuid field (null counts as absent when `nullable`).
pub(crate) fn uuid(
    body: &Map<String, Value>,
    field: &str,
    nullable: bool,
) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None => Ok(None),
        Some(Value::Null) if nullable => Ok(None),
        Some(Value::String(s)) if is_uuid(s) => Ok(Some(normalize_uuid(s))),
        Some(v) => Err(invalid(format!("{field} is {v}, not a uuid"))),
    }
}

/// Whether a string is a uuid Placement accepts (with or without hyphens): 32 ASCII hex
/// digits once hyphens are left out.
pub(crate) fn is_uuid(s: &str) -> bool {
    let mut digits = 0usize;
    for c in s.chars().filter(|c| *c != '-') {
        if !c.is_ascii_hexdigit() {
            return false;
        }
        digits += 1;
    }
    digits == 32
}

/// The hyphenated lower-case form Placement stores; anything that is not a uuid is returned
/// as it is (it then matches nothing, which the caller answers with its own 404 or 400).
pub(crate) fn normalize_uuid(s: &str) -> String {
    if !is_uuid(s) {
        return s.to_string();
    }
    // Built character by character: a string from a request may hold multi-byte characters,
    // and no byte index into it is taken.
    let mut out = String::with_capacity(36);
    for (i, c) in s.chars().filter(|c| *c != '-').enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The generation a write sends: `resource_provider_generation`, required.
pub(crate) fn provider_generation(body: &Map<String, Value>) -> Result<i64, ApiError> {
    let v = required(body, "resource_provider_generation")?;
    v.as_i64().ok_or_else(|| {
        invalid(format!(
            "resource_provider_generation is {v}, not an integer"
        ))
    })
}

/// A body's objects with their keys in the order the body wrote them, read beside its JSON
/// (whose maps sort their keys): where Placement lists back what it was given (a consumer's
/// providers), it lists it in the order it was written.
#[derive(Debug, Default, PartialEq)]
pub(crate) enum KeyOrder {
    /// Each key with its place among the keys; a key written twice keeps its first place
    /// (and, as in the JSON, its last value). Keyed by name so that looking keys up stays
    /// cheap in an object of many thousands.
    Object(BTreeMap<String, (usize, KeyOrder)>),
    #[default]
    Other,
}

impl KeyOrder {
    /// The body's order; nothing when it is not JSON (the JSON reader says why).
    pub(crate) fn of(call: &Call) -> KeyOrder {
        serde_json::from_slice(&call.body).unwrap_or_default()
    }

    /// The value of `key` in this object (nothing for a missing key or another value).
    pub(crate) fn get(&self, key: &str) -> &KeyOrder {
        static NOTHING: KeyOrder = KeyOrder::Other;
        match self {
            KeyOrder::Object(fields) => fields.get(key).map_or(&NOTHING, |(_, v)| v),
            KeyOrder::Other => &NOTHING,
        }
    }

    /// Where `key` was written among this object's keys.
    pub(crate) fn place(&self, key: &str) -> Option<usize> {
        match self {
            KeyOrder::Object(fields) => fields.get(key).map(|(at, _)| *at),
            KeyOrder::Other => None,
        }
    }

    /// `keys` in the order written; keys this object does not have follow, in their own
    /// order.
    pub(crate) fn in_order<'k>(&self, keys: impl Iterator<Item = &'k str>) -> Vec<&'k str> {
        let mut keys: Vec<&str> = keys.collect();
        keys.sort_by_key(|k| self.place(k).unwrap_or(usize::MAX));
        keys
    }
}

impl<'de> serde::Deserialize<'de> for KeyOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Order;
        impl<'de> serde::de::Visitor<'de> for Order {
            type Value = KeyOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<KeyOrder, A::Error> {
                let mut fields: BTreeMap<String, (usize, KeyOrder)> = BTreeMap::new();
                while let Some((k, v)) = m.next_entry::<String, KeyOrder>()? {
                    let place = fields.len();
                    fields.entry(k).or_insert((place, KeyOrder::Other)).1 = v;
                }
                Ok(KeyOrder::Object(fields))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<KeyOrder, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(KeyOrder::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
            fn visit_unit<E>(self) -> Result<KeyOrder, E> {
                Ok(KeyOrder::Other)
            }
        }
        d.deserialize_any(Order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn written_keeps_the_order_of_keys() {
        let w: KeyOrder = serde_json::from_str(
            r#"{"b": {"z": 1, "a": [{"q": 2}], "m": null}, "a": 2, "b": {"y": {}}}"#,
        )
        .unwrap();
        assert_eq!(w.in_order(["a", "b", "c"].into_iter()), ["b", "a", "c"]);
        assert_eq!(w.get("b").in_order(["z", "y"].into_iter()), ["y", "z"]);
        assert_eq!(w.get("missing").place("y"), None);
        assert_eq!(w.get("a"), &KeyOrder::Other);
    }

    #[test]
    fn a_uuid_is_hyphenated_and_lower_case() {
        let want = "c0a80001-0000-4000-8000-00000000000a";
        assert_eq!(normalize_uuid("C0A80001000040008000-00000000000A"), want);
        assert_eq!(normalize_uuid(want), want);
        assert_eq!(
            normalize_uuid("c0a80001-0000-4000-8000-00000000000a-"),
            want
        );
    }

    #[test]
    fn multi_byte_strings_are_left_as_they_are() {
        // 32 bytes without hyphens, cut at byte 8 inside the fourth 'é'.
        let s = format!("a{}b", "é".repeat(15));
        assert_eq!(s.len(), 32);
        assert!(!is_uuid(&s));
        assert_eq!(normalize_uuid(&s), s);
        // 32 characters, one of them not ASCII.
        let s = format!("{}é", "a".repeat(31));
        assert!(!is_uuid(&s));
        assert_eq!(normalize_uuid(&s), s);
        // Digits that are hex elsewhere (fullwidth 'Ａ') are not hex here.
        let s = format!("{}Ａ", "a".repeat(31));
        assert!(!is_uuid(&s));
        assert_eq!(normalize_uuid(&s), s);
        assert_eq!(normalize_uuid("-é-"), "-é-");
        assert_eq!(normalize_uuid(""), "");
    }

    proptest! {
        #[test]
        fn normalize_uuid_never_panics(s in any::<String>()) {
            let n = normalize_uuid(&s);
            if is_uuid(&s) {
                prop_assert_eq!(n.len(), 36);
                prop_assert!(is_uuid(&n));
                prop_assert_eq!(normalize_uuid(&n), n.clone());
            } else {
                prop_assert_eq!(n, s);
            }
        }

        #[test]
        fn normalize_uuid_never_panics_near_uuids(
            s in "[0-9a-fA-F\\-é€\\u{1F600}Ａ]{0,40}"
        ) {
            let _ = normalize_uuid(&s);
        }
    }
}

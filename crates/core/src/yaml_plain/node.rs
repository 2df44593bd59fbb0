//! A document's values as the plain readers give them: the tree of a JSON value, whose
//! strings borrow the stream's text where they can and whose mappings are vectors sorted by
//! key. A clean manifest of thousands of objects is turned into typed objects straight from
//! it: a `serde_json::Value` would cost an allocation for every key, string and mapping
//! node, then the same again to free them.
//!
//! `&PlainNode` is a serde `Deserializer` that gives a type what `&serde_json::Value` gives
//! it, call for call: mappings in key order (a `serde_json::Map` is sorted), numbers as
//! `serde_json::Number` hands them over, the same answer to each `deserialize_*` method. So
//! an object read from a node is the object `serde_json::from_value` reads from the node's
//! [`PlainNode::to_value`], and fails where that fails.

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde_json::{Error, Map, Number, Value};

/// One value of a plain document.
#[derive(Debug, Clone, PartialEq)]
pub enum PlainNode<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Seq(Vec<PlainNode<'a>>),
    /// Entries sorted by key, each key once.
    Map(Vec<(Cow<'a, str>, PlainNode<'a>)>),
}

/// A mapping written with the same key twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateKey;

impl<'a> PlainNode<'a> {
    /// A mapping of these entries, in any order; refused when a key comes twice (YAML
    /// parsers differ on which value such a key keeps).
    pub fn map(mut entries: Vec<(Cow<'a, str>, PlainNode<'a>)>) -> Result<Self, DuplicateKey> {
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if entries.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(DuplicateKey);
        }
        Ok(PlainNode::Map(entries))
    }

    /// The value of a mapping's key.
    pub fn get(&self, key: &str) -> Option<&PlainNode<'a>> {
        match self {
            PlainNode::Map(entries) => entries
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|i| &entries[i].1),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PlainNode::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, PlainNode::Null)
    }

    /// The same value as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            PlainNode::Null => Value::Null,
            PlainNode::Bool(b) => Value::Bool(*b),
            PlainNode::Number(n) => Value::Number(n.clone()),
            PlainNode::String(s) => Value::String(s.to_string()),
            PlainNode::Seq(items) => Value::Array(items.iter().map(PlainNode::to_value).collect()),
            PlainNode::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    /// The same value with every string owned, free of the text it was read from.
    pub fn into_owned(self) -> PlainNode<'static> {
        let own = |s: Cow<'a, str>| Cow::Owned(s.into_owned());
        match self {
            PlainNode::Null => PlainNode::Null,
            PlainNode::Bool(b) => PlainNode::Bool(b),
            PlainNode::Number(n) => PlainNode::Number(n),
            PlainNode::String(s) => PlainNode::String(own(s)),
            PlainNode::Seq(items) => {
                PlainNode::Seq(items.into_iter().map(PlainNode::into_owned).collect())
            }
            PlainNode::Map(entries) => PlainNode::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (own(k), v.into_owned()))
                    .collect(),
            ),
        }
    }

    fn unexpected(&self) -> Unexpected<'_> {
        match self {
            PlainNode::Null => Unexpected::Unit,
            PlainNode::Bool(b) => Unexpected::Bool(*b),
            PlainNode::Number(n) => {
                if let Some(u) = n.as_u64() {
                    Unexpected::Unsigned(u)
                } else if let Some(i) = n.as_i64() {
                    Unexpected::Signed(i)
                } else {
                    Unexpected::Float(n.as_f64().unwrap_or(0.0))
                }
            }
            PlainNode::String(s) => Unexpected::Str(s),
            PlainNode::Seq(_) => Unexpected::Seq,
            PlainNode::Map(_) => Unexpected::Map,
        }
    }

    fn invalid_type<E: de::Error>(&self, expected: &dyn de::Expected) -> E {
        E::invalid_type(self.unexpected(), expected)
    }
}

/// Read from JSON as `serde_json::Value` reads it: a key written twice keeps its last value.
impl<'de> serde::Deserialize<'de> for PlainNode<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = PlainNode<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(PlainNode::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(PlainNode::Number(i.into()))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(PlainNode::Number(u.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
        Ok(Number::from_f64(f).map_or(PlainNode::Null, PlainNode::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(PlainNode::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(PlainNode::String(Cow::Owned(s.to_string())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(PlainNode::String(Cow::Owned(s)))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(PlainNode::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        serde::Deserialize::deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(PlainNode::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(PlainNode::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries: Vec<(Cow<'de, str>, PlainNode<'de>)> = Vec::new();
        while let Some(key) = map.next_key::<CowKey<'de>>()? {
            entries.push((key.0, map.next_value()?));
        }
        // A key written twice is refused, as the YAML readers refuse it, rather than one of
        // its values kept without a word (serde_json's own values keep the last).
        PlainNode::map(entries)
            .map_err(|DuplicateKey| serde::de::Error::custom("a mapping key written twice"))
    }
}

/// A mapping's key, borrowed when the text holds it as it is.
struct CowKey<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for CowKey<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = CowKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(CowKey(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(CowKey(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(CowKey(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

fn visit_seq<'t, 'a, V: Visitor<'t>>(
    items: &'t [PlainNode<'a>],
    visitor: V,
) -> Result<V::Value, Error> {
    let len = items.len();
    let mut seq = SeqDeserializer { iter: items.iter() };
    let value = visitor.visit_seq(&mut seq)?;
    if seq.iter.len() == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

fn visit_map<'t, 'a, V: Visitor<'t>>(
    entries: &'t [(Cow<'a, str>, PlainNode<'a>)],
    visitor: V,
) -> Result<V::Value, Error> {
    let len = entries.len();
    let mut map = MapDeserializer {
        iter: entries.iter(),
        value: None,
    };
    let value = visitor.visit_map(&mut map)?;
    if map.iter.len() == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

impl<'t, 'a> Deserializer<'t> for &'t PlainNode<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Null => visitor.visit_unit(),
            PlainNode::Bool(b) => visitor.visit_bool(*b),
            PlainNode::Number(n) => n.deserialize_any(visitor),
            PlainNode::String(s) => visitor.visit_borrowed_str(s),
            PlainNode::Seq(items) => visit_seq(items, visitor),
            PlainNode::Map(entries) => visit_map(entries, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let (variant, value) = match self {
            PlainNode::Map(entries) => {
                let mut iter = entries.iter();
                let Some((variant, value)) = iter.next() else {
                    return Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                };
                if iter.next().is_some() {
                    return Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                }
                (&**variant, Some(value))
            }
            PlainNode::String(variant) => (&**variant, None),
            other => {
                return Err(de::Error::invalid_type(
                    other.unexpected(),
                    &"string or map",
                ));
            }
        };
        visitor.visit_enum(EnumDeserializer { variant, value })
    }

    fn deserialize_newtype_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_i8<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_i16<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_i32<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_i64<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_i128<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_u8<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_u16<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_u32<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_u64<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_u128<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_f32<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }
    fn deserialize_f64<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_number(visitor)
    }

    fn deserialize_char<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::String(s) => visitor.visit_borrowed_str(s),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::String(s) => visitor.visit_borrowed_str(s),
            PlainNode::Seq(items) => visit_seq(items, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Seq(items) => visit_seq(items, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'t>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Map(entries) => visit_map(entries, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self {
            PlainNode::Seq(items) => visit_seq(items, visitor),
            PlainNode::Map(entries) => visit_map(entries, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

impl<'a> PlainNode<'a> {
    fn deserialize_number<'t, V: Visitor<'t>>(&'t self, visitor: V) -> Result<V::Value, Error> {
        match self {
            PlainNode::Number(n) => n.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
}

struct SeqDeserializer<'t, 'a> {
    iter: std::slice::Iter<'t, PlainNode<'a>>,
}

impl<'t, 'a> SeqAccess<'t> for SeqDeserializer<'t, 'a> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'t>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.iter
            .next()
            .map(|item| seed.deserialize(item))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct MapDeserializer<'t, 'a> {
    iter: std::slice::Iter<'t, (Cow<'a, str>, PlainNode<'a>)>,
    value: Option<&'t PlainNode<'a>>,
}

impl<'t, 'a> MapAccess<'t> for MapDeserializer<'t, 'a> {
    type Error = Error;

    fn next_key_seed<T: DeserializeSeed<'t>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(KeyDeserializer { key }).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'t>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct EnumDeserializer<'t, 'a> {
    variant: &'t str,
    value: Option<&'t PlainNode<'a>>,
}

impl<'t, 'a> EnumAccess<'t> for EnumDeserializer<'t, 'a> {
    type Error = Error;
    type Variant = VariantDeserializer<'t, 'a>;

    fn variant_seed<V: DeserializeSeed<'t>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), Error> {
        let variant: de::value::BorrowedStrDeserializer<'t, Error> =
            de::value::BorrowedStrDeserializer::new(self.variant);
        seed.deserialize(variant)
            .map(|v| (v, VariantDeserializer { value: self.value }))
    }
}

struct VariantDeserializer<'t, 'a> {
    value: Option<&'t PlainNode<'a>>,
}

impl<'t, 'a> VariantAccess<'t> for VariantDeserializer<'t, 'a> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            Some(value) => serde::Deserialize::deserialize(value),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'t>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'t>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(PlainNode::Seq(items)) if items.is_empty() => visitor.visit_unit(),
            Some(PlainNode::Seq(items)) => visit_seq(items, visitor),
            Some(other) => Err(de::Error::invalid_type(
                other.unexpected(),
                &"tuple variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'t>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Some(PlainNode::Map(entries)) => visit_map(entries, visitor),
            Some(other) => Err(de::Error::invalid_type(
                other.unexpected(),
                &"struct variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

/// A mapping's key, given as `serde_json` gives a `Map`'s keys: a string, or a number or a
/// boolean for a type whose keys are numbers or booleans.
struct KeyDeserializer<'de> {
    key: &'de str,
}

impl<'de> KeyDeserializer<'de> {
    fn numeric<V: Visitor<'de>>(
        self,
        visitor: V,
        read: impl FnOnce(
            &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
            V,
        ) -> Result<V::Value, Error>,
    ) -> Result<V::Value, Error> {
        // A number and nothing else, not even a space around it.
        let numeric = self
            .key
            .starts_with(|c: char| c.is_ascii_digit() || c == '-')
            && !self.key.contains([' ', '\t', '\n', '\r']);
        if !numeric {
            return Err(de::Error::custom("expected numeric key"));
        }
        let mut de = serde_json::Deserializer::from_str(self.key);
        let value = read(&mut de, visitor)?;
        de.end()?;
        Ok(value)
    }
}

macro_rules! numeric_key {
    ($($method:ident)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.numeric(visitor, |de, v| de.$method(v))
        })*
    };
}

impl<'de> Deserializer<'de> for KeyDeserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.key)
    }

    numeric_key! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.key {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            other => Err(de::Error::invalid_type(Unexpected::Str(other), &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::value::BorrowedStrDeserializer::<Error>::new(self.key)
            .deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        name: String,
        #[serde(default)]
        count: Option<i64>,
        #[serde(default)]
        small: Option<u8>,
        #[serde(default)]
        ratio: Option<f64>,
        #[serde(default)]
        on: Option<bool>,
        #[serde(default)]
        letter: Option<char>,
        #[serde(default)]
        items: Vec<Item>,
        #[serde(default)]
        labels: BTreeMap<String, String>,
        #[serde(default)]
        by_number: BTreeMap<u32, String>,
        #[serde(default)]
        by_flag: BTreeMap<bool, i64>,
        #[serde(default)]
        shape: Option<Shape>,
        #[serde(default)]
        wrapped: Option<Wrapped>,
        #[serde(default)]
        pair: Option<(String, i64)>,
        #[serde(default)]
        free: Option<Value>,
        #[serde(default)]
        nothing: Option<()>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Item {
        total: i64,
        #[serde(default)]
        note: Option<String>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Shape {
        Round,
        Square(i64),
        Box { w: i64, h: i64 },
        Pair(i64, i64),
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Wrapped(String);

    /// Values shaped like [`Spec`], with every kind of mistake in them now and then.
    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (0u64..300).prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z1]{0,3}".prop_map(Value::from),
            prop::sample::select(vec![
                "round", "square", "box", "pair", "true", "7", "-2", "x"
            ])
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 32, 4, |inner| {
            let keys = prop::sample::select(vec![
                "name", "count", "small", "ratio", "on", "letter", "items", "labels", "byNumber",
                "byFlag", "shape", "wrapped", "pair", "free", "nothing", "total", "note", "w", "h",
                "round", "square", "box", "pair", "1", "-1", "01", " 2", "true", "false", "other",
            ]);
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(keys, inner, 0..6).prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    /// A [`Spec`] that reads, with one field changed to a value of any kind.
    fn specs() -> impl Strategy<Value = Value> {
        let field = prop::sample::select(vec![
            "count", "small", "ratio", "on", "letter", "items", "labels", "byNumber", "byFlag",
            "shape", "wrapped", "pair", "free", "nothing", "name", "extra",
        ]);
        (field, values()).prop_map(|(field, value)| {
            let mut spec = json!({
                "name": "n", "count": -3, "small": 7, "ratio": 1.5, "on": true, "letter": "x",
                "items": [{"total": 4}, {"total": 5, "note": "a"}], "labels": {"a": "b"},
                "byNumber": {"1": "one", "20": "twenty"}, "byFlag": {"true": 1},
                "shape": {"box": {"w": 1, "h": 2}}, "wrapped": "w", "pair": ["p", 2],
                "free": {"any": [1, "thing"]}, "nothing": null,
            });
            spec[field] = value;
            spec
        })
    }

    proptest! {
        /// A node gives a type what the same value as JSON gives it: the same object, or a
        /// failure where that fails.
        #[test]
        fn a_node_reads_as_its_json_value_reads(value in prop_oneof![specs(), values()]) {
            let text = value.to_string();
            let node: PlainNode<'_> = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(node.to_value(), value.clone());
            let typed = Spec::deserialize(&node).ok();
            let from_value = serde_json::from_value::<Spec>(value.clone()).ok();
            prop_assert_eq!(typed, from_value, "{}", text);
            let any = Value::deserialize(&node).unwrap();
            prop_assert_eq!(any, value.clone());
            // Straight from the node as the readers build it (strings borrowed).
            let borrowed = Item::deserialize(&node).ok();
            prop_assert_eq!(borrowed, serde_json::from_value::<Item>(value).ok());
        }
    }

    #[test]
    fn json_reads_as_serde_json_reads_it_but_refuses_a_repeated_key() {
        let text = r#"{"b": 1, "a": {"x": 1}, "c": "\u00e9"}"#;
        let node: PlainNode<'_> = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(node.to_value(), value);
        assert_eq!(node.get("b"), Some(&PlainNode::Number(1.into())));
        assert_eq!(node.get("c").and_then(PlainNode::as_str), Some("é"));
        assert_eq!(node.get("d"), None);
        let repeated = r#"{"a": {"x": 1, "y": 2}, "b": [{"k": 1, "k": 2}]}"#;
        let err = serde_json::from_str::<PlainNode<'_>>(repeated).unwrap_err();
        assert!(err.to_string().contains("written twice"), "{err}");
        // Unescaped strings borrow the text.
        let node: PlainNode<'_> = serde_json::from_str(r#"{"k": "plain"}"#).unwrap();
        assert!(matches!(
            node.get("k"),
            Some(PlainNode::String(Cow::Borrowed("plain")))
        ));
    }

    #[test]
    fn a_mapping_with_a_repeated_key_is_refused() {
        let entry = |k: &'static str| (Cow::Borrowed(k), PlainNode::Null);
        assert_eq!(
            PlainNode::map(vec![entry("b"), entry("a"), entry("b")]),
            Err(DuplicateKey)
        );
        let map = PlainNode::map(vec![entry("b"), entry("a")]).unwrap();
        assert_eq!(map.to_value(), json!({"a": null, "b": null}));
        assert!(map.get("a").is_some_and(PlainNode::is_null));
        assert_eq!(map.clone().into_owned(), map);
    }
}

//! Placement 16's answers, as the snapshot reads them: typed structures of the fields
//! kubeplace uses (others, which a newer Placement may add, are skipped), every list and map
//! bounded while it is parsed, so that what one answer makes in memory is bounded by its
//! entries' count and not by what a server chose to send.
//!
//! Uuids and generations are read as [`Scalar`]s and checked by the snapshot, so that one
//! that is not a uuid or a whole number is named with the provider or consumer it belongs
//! to; a parse error could only say where in the answer it was.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Entries of a list of the whole cloud's names (the custom resource classes, the custom
/// traits).
pub const MAX_ENTRIES: usize = 1_000_000;
/// Consumers on one provider: a sharing provider (a storage pool) may hold most of a
/// cloud's; the default `--max-allocations`.
pub const MAX_CONSUMERS_OF_ONE: usize = 4_000_000;
/// Entries of a list or map of one provider or consumer (its inventories, traits,
/// aggregates; a consumer's providers; the resource classes of one allocation). Placement
/// has fewer than 500 standard traits and 50 standard classes.
pub const MAX_OF_ONE: usize = 10_000;

/// A JSON value where kubeplace expects a uuid or a generation, kept as it came so that a
/// wrong one can be named with its provider. Lists and objects are skipped, not kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Text(String),
    Whole(u64),
    /// Anything else, described (`-1`, `1.5`, `true`, `null`, `a list`, `an object`).
    Other(String),
}

impl Scalar {
    /// The text, if it is a uuid (36 characters, hexadecimal digits and hyphens).
    pub fn uuid(&self) -> Option<&str> {
        match self {
            Scalar::Text(s) if kubeplace_core::placement::is_uuid(s) => Some(s),
            _ => None,
        }
    }

    /// The text, if Placement takes it as an aggregate's uuid (32 hexadecimal digits, with
    /// or without hyphens, braces or `urn:uuid:`), kept as Placement keeps it: as given.
    pub fn aggregate(&self) -> Option<&str> {
        match self {
            Scalar::Text(s) if kubeplace_core::placement::is_uuid_like(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if it is a whole one, 0 or more.
    pub fn whole(&self) -> Option<u64> {
        match self {
            Scalar::Whole(n) => Some(*n),
            _ => None,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Text(s) => write!(f, "{:?}", shortened(s)),
            Scalar::Whole(n) => write!(f, "{n}"),
            Scalar::Other(what) => f.write_str(what),
        }
    }
}

/// At most 80 characters of `s`, for messages.
pub fn shortened(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Text(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Text(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Whole(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(match u64::try_from(v) {
            Ok(n) => Scalar::Whole(n),
            Err(_) => Scalar::Other(v.to_string()),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::Other(v.to_string()))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Other(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("null".to_string()))
    }
    fn visit_none<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("null".to_string()))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("a list".to_string()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("an object".to_string()))
    }
}

/// A list read into `C`, refused past `max` entries (`over` is set when it was).
struct AtMost<'a, C, T> {
    max: usize,
    over: Option<&'a Cell<bool>>,
    kind: PhantomData<(C, T)>,
}

impl<'a, C, T> AtMost<'a, C, T> {
    fn new(max: usize, over: Option<&'a Cell<bool>>) -> Self {
        AtMost {
            max,
            over,
            kind: PhantomData,
        }
    }

    fn too_many<E: de::Error>(&self) -> E {
        if let Some(over) = self.over {
            over.set(true);
        }
        E::custom(format_args!("more than {} entries in one list", self.max))
    }
}

impl<'de, C, T> Visitor<'de> for AtMost<'_, C, T>
where
    C: Default + Extend<T>,
    T: Deserialize<'de>,
{
    type Value = C;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {} entries", self.max)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<C, A::Error> {
        let mut out = C::default();
        let mut n = 0;
        while let Some(x) = seq.next_element()? {
            if n == self.max {
                return Err(self.too_many());
            }
            n += 1;
            out.extend(std::iter::once(x));
        }
        Ok(out)
    }
}

impl<'de, C, T> DeserializeSeed<'de> for AtMost<'_, C, T>
where
    C: Default + Extend<T>,
    T: Deserialize<'de>,
{
    type Value = C;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<C, D::Error> {
        d.deserialize_seq(self)
    }
}

/// A map of names to `V`, refused past `max` entries.
struct MapAtMost<V> {
    max: usize,
    kind: PhantomData<V>,
}

impl<'de, V: Deserialize<'de>> Visitor<'de> for MapAtMost<V> {
    type Value = BTreeMap<String, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object of at most {} entries", self.max)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        let mut n = 0;
        while let Some((k, v)) = map.next_entry::<String, V>()? {
            if n == self.max {
                return Err(de::Error::custom(format_args!(
                    "more than {} entries in one object",
                    self.max
                )));
            }
            n += 1;
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// `deserialize_with`: a list into `C`, at most `N` entries.
fn list<'de, D, C, T, const N: usize>(d: D) -> Result<C, D::Error>
where
    D: Deserializer<'de>,
    C: Default + Extend<T>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(AtMost::<C, T>::new(N, None))
}

/// `deserialize_with`: a map of names, at most `N` entries.
fn map<'de, D, V, const N: usize>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    d.deserialize_map(MapAtMost {
        max: N,
        kind: PhantomData,
    })
}

/// `GET /resource_classes`.
#[derive(Deserialize)]
pub struct ResourceClasses {
    #[serde(deserialize_with = "list::<_, _, _, MAX_ENTRIES>")]
    pub resource_classes: Vec<Named>,
}

/// An entry with a name.
#[derive(Deserialize)]
pub struct Named {
    pub name: String,
}

/// `GET /traits` (and `GET /resource_providers/{uuid}/traits`).
#[derive(Deserialize)]
pub struct Traits {
    #[serde(deserialize_with = "list::<_, _, _, MAX_ENTRIES>")]
    pub traits: Vec<String>,
}

/// One entry of `GET /resource_providers`.
#[derive(Deserialize)]
pub struct Listed {
    pub uuid: Scalar,
    pub name: String,
    #[serde(default)]
    pub parent_provider_uuid: Option<Scalar>,
    pub generation: Scalar,
}

/// Why `GET /resource_providers` could not be read.
pub enum ListError {
    /// More providers than the limit.
    TooMany,
    Json(serde_json::Error),
}

/// `GET /resource_providers`: its entries, refused past `max` of them while it is parsed
/// (so that a list of millions of tiny entries is not made before it is refused).
pub fn provider_list(body: &[u8], max: usize) -> Result<Vec<Listed>, ListError> {
    let over = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(body);
    let read = ProviderList { max, over: &over }
        .deserialize(&mut de)
        .and_then(|list| de.end().map(|()| list));
    read.map_err(|e| {
        if over.get() {
            ListError::TooMany
        } else {
            ListError::Json(e)
        }
    })
}

struct ProviderList<'a> {
    max: usize,
    over: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for ProviderList<'_> {
    type Value = Vec<Listed>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Listed>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ProviderList<'_> {
    type Value = Vec<Listed>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a resource_providers list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Listed>, A::Error> {
        let mut list = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "resource_providers" && list.is_none() {
                list = Some(map.next_value_seed(AtMost::new(self.max, Some(self.over)))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        list.ok_or_else(|| de::Error::missing_field("resource_providers"))
    }
}

/// `GET /resource_providers/{uuid}/inventories`.
#[derive(Deserialize)]
pub struct Inventories {
    pub resource_provider_generation: Scalar,
    #[serde(deserialize_with = "map::<_, _, MAX_OF_ONE>")]
    pub inventories: BTreeMap<String, Inventory>,
}

/// One inventory; what Placement defaults when a field is left out.
#[derive(Deserialize)]
pub struct Inventory {
    pub total: i64,
    #[serde(default)]
    pub reserved: i64,
    #[serde(default = "one")]
    pub min_unit: i64,
    #[serde(default = "max_unit")]
    pub max_unit: i64,
    #[serde(default = "one")]
    pub step_size: i64,
    #[serde(default = "ratio")]
    pub allocation_ratio: f64,
}

fn one() -> i64 {
    1
}
fn max_unit() -> i64 {
    i64::from(i32::MAX)
}
fn ratio() -> f64 {
    1.0
}

/// `GET /resource_providers/{uuid}/traits`.
#[derive(Deserialize)]
pub struct ProviderTraits {
    pub resource_provider_generation: Scalar,
    #[serde(deserialize_with = "list::<_, _, _, MAX_OF_ONE>")]
    pub traits: BTreeSet<String>,
}

/// `GET /resource_providers/{uuid}/aggregates`.
#[derive(Deserialize)]
pub struct Aggregates {
    pub resource_provider_generation: Scalar,
    #[serde(deserialize_with = "list::<_, _, _, MAX_OF_ONE>")]
    pub aggregates: Vec<Scalar>,
}

/// `GET /resource_providers/{uuid}/allocations`: by consumer.
#[derive(Deserialize)]
pub struct ProviderAllocations {
    pub resource_provider_generation: Scalar,
    #[serde(deserialize_with = "map::<_, _, MAX_CONSUMERS_OF_ONE>")]
    pub allocations: BTreeMap<String, Resources>,
}

/// One allocation's resources.
#[derive(Deserialize)]
pub struct Resources {
    #[serde(deserialize_with = "map::<_, _, MAX_OF_ONE>")]
    pub resources: BTreeMap<String, i64>,
}

/// `GET /allocations/{consumer}`: by provider.
#[derive(Deserialize)]
pub struct ConsumerAllocations {
    #[serde(deserialize_with = "map::<_, _, MAX_OF_ONE>")]
    pub allocations: BTreeMap<String, Resources>,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub consumer_type: Option<String>,
    #[serde(default)]
    pub consumer_generation: Option<Scalar>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_kubeplace_does_not_read_are_skipped() {
        let body = br#"{"resource_providers": [{"uuid": "a0000000-0000-4000-8000-000000000001",
            "name": "cn1", "generation": 3, "parent_provider_uuid": null,
            "links": [{"rel": "self", "href": "/x"}], "new_in_1_99": {"a": [1, 2]}}],
            "also_new": true}"#;
        let Ok(list) = provider_list(body, 10) else {
            panic!("a list")
        };
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].generation.whole(), Some(3));
        assert_eq!(list[0].parent_provider_uuid, None);
        assert!(list[0].uuid.uuid().is_some());
    }

    #[test]
    fn a_list_past_its_limit_is_refused_while_it_is_read() {
        let entry = r#"{"uuid": "x", "name": "n", "generation": 0}"#;
        let body = format!(r#"{{"resource_providers": [{entry},{entry},{entry}]}}"#);
        assert!(matches!(
            provider_list(body.as_bytes(), 2),
            Err(ListError::TooMany)
        ));
        assert!(provider_list(body.as_bytes(), 3).is_ok());
        // Any other list: the parse fails, saying so.
        let traits = format!(
            r#"{{"resource_provider_generation": 1, "traits": [{}]}}"#,
            vec!["\"A\""; MAX_OF_ONE + 1].join(",")
        );
        let e = serde_json::from_str::<ProviderTraits>(&traits)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("more than 10000 entries"), "{e}");
    }

    #[test]
    fn scalars_keep_what_came_for_the_message() {
        let read = |s: &str| serde_json::from_str::<Scalar>(s).unwrap();
        assert_eq!(read("7").whole(), Some(7));
        assert_eq!(read("-1").to_string(), "-1");
        assert_eq!(read("1.5").to_string(), "1.5");
        assert_eq!(read("[1, [2]]").to_string(), "a list");
        assert_eq!(read(r#"{"a": 1}"#).to_string(), "an object");
        assert_eq!(read(r#""7""#).whole(), None);
        assert_eq!(read(r#""not-a-uuid""#).uuid(), None);
        assert_eq!(
            read(&format!("\"{}\"", "x".repeat(100))).to_string().len(),
            85
        );
    }
}

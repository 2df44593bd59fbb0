//! A map kept as a vector sorted by key, for the maps every ResourceProvider carries
//! (inventories, effective inventories, usages): a provider has a few resource classes, and a
//! B-tree allocates a node sized for eleven entries for even one of them, which for a cloud
//! of tens of thousands of providers was most of what their objects took in memory.
//!
//! It reads and writes JSON as a map (a JSON object), describes itself in a schema as
//! `BTreeMap` does, iterates in key order, and keeps the last value of a key given twice, so
//! it can stand in for `BTreeMap` in a custom resource's fields.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map kept as a vector of entries sorted by key, each key once.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SortedMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        SortedMap::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`, if any.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &self.entries[i].1)
    }

    /// The value of `key`, mutable, if any.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).is_ok()
    }

    /// Sets `key`'s value; the value it had, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; the value it had, if any.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// `key`'s entry, to read or fill in place.
    pub fn entry(&mut self, key: K) -> Entry<'_, K, V> {
        let at = self.position(&key);
        Entry { map: self, key, at }
    }

    /// Keeps only the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }
}

impl<K, V> SortedMap<K, V> {
    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter {
            entries: self.entries.iter(),
        }
    }

    /// The entries in key order, values mutable.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&K, &mut V)> + ExactSizeIterator {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The values in key order, mutable.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// The keys in order, taken.
    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator {
        self.entries.into_iter().map(|(k, _)| k)
    }

    /// The values in key order, taken.
    pub fn into_values(self) -> impl DoubleEndedIterator<Item = V> + ExactSizeIterator {
        self.entries.into_iter().map(|(_, v)| v)
    }
}

/// A key's place in a [`SortedMap`], from [`SortedMap::entry`].
pub struct Entry<'a, K, V> {
    map: &'a mut SortedMap<K, V>,
    key: K,
    /// Where the key is, or where it would go.
    at: Result<usize, usize>,
}

impl<'a, K, V> Entry<'a, K, V> {
    /// The value, set to `default` first when the key has none.
    pub fn or_insert(self, default: V) -> &'a mut V {
        self.or_insert_with(|| default)
    }

    /// The value, set to `default()` first when the key has none.
    pub fn or_insert_with(self, default: impl FnOnce() -> V) -> &'a mut V {
        let i = match self.at {
            Ok(i) => i,
            Err(i) => {
                self.map.entries.insert(i, (self.key, default()));
                i
            }
        };
        &mut self.map.entries[i].1
    }

    /// The value, set to `V::default()` first when the key has none.
    pub fn or_default(self) -> &'a mut V
    where
        V: Default,
    {
        self.or_insert_with(V::default)
    }

    /// Changes the value in place when the key has one.
    pub fn and_modify(self, change: impl FnOnce(&mut V)) -> Self {
        if let Ok(i) = self.at {
            change(&mut self.map.entries[i].1);
        }
        self
    }

    /// The key.
    pub fn key(&self) -> &K {
        &self.key
    }
}

/// The entries of a [`SortedMap`] in key order.
#[derive(Clone)]
pub struct Iter<'a, K, V> {
    entries: std::slice::Iter<'a, (K, V)>,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.entries.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.entries.next_back().map(|(k, v)| (k, v))
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

impl<'a, K, V> IntoIterator for &'a SortedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Iter<'a, K, V> {
        self.iter()
    }
}

impl<K, V> IntoIterator for SortedMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    /// As `BTreeMap` collects: a key given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // A stable sort keeps a repeated key's values in the order given; `dedup_by`
            // keeps the first of a run, so the later value is swapped into it first.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        entries.shrink_to_fit();
        SortedMap { entries }
    }
}

impl<K: Ord, V> Extend<(K, V)> for SortedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for SortedMap<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for SortedMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Serialize, V: Serialize> Serialize for SortedMap<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K, V> Deserialize<'de> for SortedMap<K, V>
where
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K, V> Visitor<'de> for MapVisitor<K, V>
        where
            K: Deserialize<'de> + Ord,
            V: Deserialize<'de>,
        {
            type Value = SortedMap<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                // The hint is exact for JSON values; a bound keeps a false one from costing.
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(entries.into_iter().collect())
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

impl<K: JsonSchema, V: JsonSchema> JsonSchema for SortedMap<K, V> {
    fn inline_schema() -> bool {
        <std::collections::BTreeMap<K, V> as JsonSchema>::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        <std::collections::BTreeMap<K, V> as JsonSchema>::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        <std::collections::BTreeMap<K, V> as JsonSchema>::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <std::collections::BTreeMap<K, V> as JsonSchema>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Whatever is inserted and removed, in any order, the map answers as a `BTreeMap` does.
    fn same_as_btree(map: &SortedMap<String, i64>, tree: &BTreeMap<String, i64>) {
        assert_eq!(map.len(), tree.len());
        assert!(map.iter().eq(tree.iter()));
        assert!(map.keys().eq(tree.keys()));
        assert!(map.values().eq(tree.values()));
        for key in tree.keys() {
            assert_eq!(map.get(key.as_str()), tree.get(key));
            assert!(map.contains_key(key.as_str()));
        }
        assert_eq!(
            serde_json::to_string(map).unwrap(),
            serde_json::to_string(tree).unwrap()
        );
    }

    proptest! {
        #[test]
        fn answers_as_a_btree_map(
            steps in prop::collection::vec((0u8..3, "[A-E]{1,2}", -5i64..5), 0..40)
        ) {
            let (mut map, mut tree) = (SortedMap::new(), BTreeMap::new());
            for (step, key, value) in steps {
                match step {
                    0 => prop_assert_eq!(map.insert(key.clone(), value), tree.insert(key, value)),
                    1 => prop_assert_eq!(map.remove(key.as_str()), tree.remove(key.as_str())),
                    _ => {
                        *map.entry(key.clone()).or_insert(0) += value;
                        *tree.entry(key).or_insert(0) += value;
                    }
                }
                same_as_btree(&map, &tree);
            }
        }

        #[test]
        fn collects_as_a_btree_map(entries in prop::collection::vec(("[A-D]", 0i64..9), 0..12)) {
            let map: SortedMap<String, i64> = entries.iter().cloned().collect();
            let tree: BTreeMap<String, i64> = entries.into_iter().collect();
            same_as_btree(&map, &tree);
        }
    }

    /// JSON objects read in any order, a key given twice keeping its last value as serde's
    /// `BTreeMap` does; anything but an object is refused saying a map was expected.
    #[test]
    fn reads_json_objects_as_a_btree_map_does() {
        let text = r#"{"VCPU": 4, "DISK_GB": 10, "MEMORY_MB": 512, "VCPU": 8}"#;
        let map: SortedMap<String, i64> = serde_json::from_str(text).unwrap();
        let tree: BTreeMap<String, i64> = serde_json::from_str(text).unwrap();
        same_as_btree(&map, &tree);
        assert_eq!(map.get("VCPU"), Some(&8));

        for bad in [r#"[["VCPU", 1]]"#, "3", r#""VCPU""#] {
            let ours = serde_json::from_str::<SortedMap<String, i64>>(bad).unwrap_err();
            let theirs = serde_json::from_str::<BTreeMap<String, i64>>(bad).unwrap_err();
            assert_eq!(ours.to_string(), theirs.to_string(), "{bad}");
        }
        let empty: SortedMap<String, i64> = serde_json::from_str("{}").unwrap();
        assert!(empty.is_empty());
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    /// The schema is `BTreeMap`'s, so the CRDs do not change.
    #[test]
    fn describes_itself_as_a_btree_map() {
        let ours = schemars::schema_for!(SortedMap<String, i64>);
        let theirs = schemars::schema_for!(BTreeMap<String, i64>);
        assert_eq!(ours, theirs);
    }

    /// One entry takes room for one, not a B-tree node's eleven.
    #[test]
    fn a_collected_map_holds_no_spare_room() {
        let map: SortedMap<String, i64> = [("VCPU".to_string(), 1)].into_iter().collect();
        assert_eq!(map.entries.capacity(), 1);
        let read: SortedMap<String, i64> = serde_json::from_str(r#"{"VCPU": 1}"#).unwrap();
        assert_eq!(read.entries.capacity(), 1);
    }
}

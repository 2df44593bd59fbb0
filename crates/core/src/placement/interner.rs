//! Interning of resource class, trait and aggregate names to small integers, so the
//! index stores and compares numbers rather than strings.

/// A hash map keyed by names: the index looks names up by the hundred thousand, and a fast
/// seeded hash (foldhash) costs a fraction of the standard one's.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::ids::Id;

/// Names to dense ids of type `I` and back; ids are never reused.
#[derive(Debug, Clone)]
pub(crate) struct Interner<I> {
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, I>,
}

impl<I> Default for Interner<I> {
    fn default() -> Self {
        Interner {
            names: Vec::new(),
            ids: HashMap::default(),
        }
    }
}

impl<I: Id> Interner<I> {
    /// The id of a name, adding it when new.
    pub(crate) fn intern(&mut self, name: &str) -> I {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = I::from_raw(self.names.len() as u32);
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    /// The id of a name already seen.
    pub(crate) fn get(&self, name: &str) -> Option<I> {
        self.ids.get(name).copied()
    }

    /// The name of an id.
    pub(crate) fn name(&self, id: I) -> &str {
        &self.names[id.raw() as usize]
    }

    /// Every name with its id, in the order they were first seen.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (I, &str)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (I::from_raw(i as u32), &**n))
    }

    /// The ids of the names equal to `name` but for ASCII case.
    pub(crate) fn get_ignoring_case(&self, name: &str) -> Vec<I> {
        (0..self.names.len())
            .filter(|i| self.names[*i].eq_ignore_ascii_case(name))
            .map(|i| I::from_raw(i as u32))
            .collect()
    }
}

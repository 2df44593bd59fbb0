//! Interning of resource class, trait and aggregate names to small integers, so the
//! index stores and compares numbers rather than strings.

use std::collections::HashMap;

/// Names to dense ids and back; ids are never reused.
#[derive(Debug, Clone, Default)]
pub struct Interner {
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
}

impl Interner {
    /// The id of a name, adding it when new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    /// The id of a name already seen.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The name of an id.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name was interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

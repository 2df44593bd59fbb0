//! Trees read back: a provider's root, its children, every member of its tree, and why
//! a provider is not part of a well-formed tree (a missing parent, a cycle, a uuid that
//! another provider has too).

use super::{ProviderIndex, TreeError};
use crate::placement::ids::ProviderId;

impl ProviderIndex {
    /// Names of the providers in the tree `name` is in, each once: its root's tree, or,
    /// for a provider with no root (its parent missing, or a cycle), the tree under its
    /// highest ancestor that exists. None for a name the index does not hold.
    pub fn tree_members(&self, name: &str) -> Vec<String> {
        let Some(id) = self.id(name) else {
            return Vec::new();
        };
        let mut top = id;
        for _ in 0..self.slots.len() {
            match self.get(top).parent {
                Some(p) if p != id => top = p,
                _ => break,
            }
        }
        // Walked with the providers already seen, since a cycle's children lead back.
        let mut seen = std::collections::HashSet::from([top]);
        let mut stack = vec![top];
        let mut names = Vec::new();
        while let Some(p) = stack.pop() {
            names.push(self.get(p).name.to_string());
            stack.extend(self.get(p).children.iter().filter(|c| seen.insert(**c)));
        }
        names
    }

    /// Names of a provider's direct children, sorted.
    pub fn children(&self, name: &str) -> Vec<String> {
        self.id(name)
            .map(|id| {
                self.get(id)
                    .children
                    .iter()
                    .map(|c| self.get(*c).name.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The root slot of a provider's tree, or why it has none.
    pub(crate) fn root_id(&self, id: ProviderId) -> Result<ProviderId, TreeError> {
        let mut current = id;
        for _ in 0..=self.slots.len() {
            let p = self.get(current);
            match (&p.parent_name, p.parent) {
                (None, _) => return Ok(current),
                (Some(_), Some(pid)) => current = pid,
                (Some(name), None) => {
                    return Err(TreeError::ParentNotFound {
                        parent: name.to_string(),
                    });
                }
            }
            if current == id {
                break;
            }
        }
        // Walked more steps than there are providers, or back to the start: a cycle. The
        // chain is named up to the first provider met twice, so that a provider under a
        // cycle names the same chain however many providers the index holds.
        let mut cycle = vec![self.get(id).name.to_string()];
        let mut seen = vec![id];
        let mut c = self.get(id).parent;
        while let Some(pid) = c {
            cycle.push(self.get(pid).name.to_string());
            if seen.contains(&pid) || seen.len() > self.slots.len() {
                break;
            }
            seen.push(pid);
            c = self.get(pid).parent;
        }
        Err(TreeError::Cycle { cycle })
    }

    /// The root of a provider's tree, or why it has none.
    pub fn root_of(&self, name: &str) -> Result<String, TreeError> {
        let id = self.id(name).ok_or_else(|| TreeError::ParentNotFound {
            parent: name.to_string(),
        })?;
        self.root_id(id).map(|r| self.get(r).name.to_string())
    }

    /// Every reason the provider is not part of a well-formed tree.
    pub fn tree_errors(&self, name: &str) -> Vec<TreeError> {
        let mut errors = Vec::new();
        if let Some(id) = self.id(name) {
            let p = self.get(id);
            // The other named is the first by name, whatever order they were stored in.
            if let Some(other) = self
                .by_uuid
                .get(&p.uuid)
                .into_iter()
                .flatten()
                .filter(|o| **o != id)
                .min_by_key(|o| &self.get(**o).name)
            {
                errors.push(TreeError::DuplicateUuid {
                    uuid: p.uuid.to_string(),
                    other: self.get(*other).name.to_string(),
                });
            }
            if let Err(e) = self.root_id(id) {
                errors.push(e);
            }
        }
        errors
    }

    /// Whether setting `parent` as the parent of `name` would close a cycle.
    pub fn would_cycle(&self, name: &str, parent: &str) -> Option<Vec<String>> {
        let mut chain = vec![name.to_string(), parent.to_string()];
        let mut current = parent.to_string();
        for _ in 0..=self.len() {
            if current == name {
                return Some(chain);
            }
            let next = self
                .id(&current)
                .and_then(|id| self.get(id).parent_name.as_deref().map(str::to_string))?;
            chain.push(next.clone());
            current = next;
        }
        None
    }

    /// Every provider of a tree, root first, depth-first with children in name order.
    pub(crate) fn tree(&self, root: ProviderId, out: &mut Vec<ProviderId>) {
        let start = out.len();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            out.push(id);
            if out.len() - start > self.slots.len() {
                break; // never loop forever, whatever the links say
            }
            stack.extend(self.get(id).children.iter().rev().copied());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::provider_tree::ProviderRecord;
    use crate::placement::provider_tree::tests::rp;

    #[test]
    fn roots_and_children() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("cn1", None));
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        idx.upsert_provider(rp("cn1-numa0-pf0", Some("cn1-numa0")));
        assert_eq!(idx.root_of("cn1-numa0-pf0").unwrap(), "cn1");
        assert_eq!(idx.children("cn1"), vec!["cn1-numa0"]);
        idx.remove_provider("cn1-numa0");
        assert_eq!(
            idx.root_of("cn1-numa0-pf0"),
            Err(TreeError::ParentNotFound {
                parent: "cn1-numa0".into()
            })
        );
        assert!(idx.children("cn1").is_empty());
        // The parent coming back relinks the waiting child.
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        assert_eq!(idx.root_of("cn1-numa0-pf0").unwrap(), "cn1");
    }

    #[test]
    fn children_may_arrive_before_parents() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("b", Some("a")));
        idx.upsert_provider(rp("c", Some("b")));
        assert!(idx.root_of("c").is_err());
        idx.upsert_provider(rp("a", None));
        assert_eq!(idx.root_of("c").unwrap(), "a");
        let mut tree = Vec::new();
        idx.tree(idx.id("a").unwrap(), &mut tree);
        let names: Vec<&str> = tree.iter().map(|id| &*idx.get(*id).name).collect();
        assert_eq!(names, vec!["a", "b", "c"]);
    }

    #[test]
    fn tree_members_are_the_whole_tree_from_any_member() {
        let mut idx = ProviderIndex::default();
        let rp = |name: &str, parent: Option<&str>| ProviderRecord {
            name: name.into(),
            uuid: crate::placement::derived_provider_uuid(name),
            parent: parent.map(Into::into),
            ..Default::default()
        };
        idx.upsert_provider(rp("cn1", None));
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        idx.upsert_provider(rp("cn1-numa0-pf0", Some("cn1-numa0")));
        idx.upsert_provider(rp("cn2", None));
        // An orphan whose parent does not exist, with a child; and a cycle.
        idx.upsert_provider(rp("lost", Some("gone")));
        idx.upsert_provider(rp("lost-child", Some("lost")));
        idx.upsert_provider(rp("a", Some("b")));
        idx.upsert_provider(rp("b", Some("a")));
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        for member in ["cn1", "cn1-numa0", "cn1-numa0-pf0"] {
            assert_eq!(
                sorted(idx.tree_members(member)),
                ["cn1", "cn1-numa0", "cn1-numa0-pf0"],
                "{member}"
            );
        }
        assert_eq!(idx.tree_members("cn2"), ["cn2"]);
        assert_eq!(
            sorted(idx.tree_members("lost-child")),
            ["lost", "lost-child"]
        );
        assert_eq!(sorted(idx.tree_members("a")), ["a", "b"]);
        assert!(idx.tree_members("gone").is_empty());
    }

    #[test]
    fn cycles_and_duplicate_uuids_are_reported() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("a", Some("b")));
        idx.upsert_provider(rp("b", Some("a")));
        assert!(matches!(idx.root_of("a"), Err(TreeError::Cycle { .. })));
        // Under a cycle, the chain up to where it closes, whatever else the index holds.
        idx.upsert_provider(rp("under", Some("a")));
        let chain = |idx: &ProviderIndex| idx.root_of("under").unwrap_err().to_string();
        assert_eq!(
            chain(&idx),
            "parent chain forms a cycle: under -> a -> b -> a"
        );
        idx.upsert_provider(rp("unrelated", None));
        assert_eq!(
            chain(&idx),
            "parent chain forms a cycle: under -> a -> b -> a"
        );
        let mut dup = rp("c", None);
        dup.uuid = "uuid-a".into();
        idx.upsert_provider(dup);
        assert!(idx.tree_errors("c").contains(&TreeError::DuplicateUuid {
            uuid: "uuid-a".into(),
            other: "a".into()
        }));
        assert_eq!(idx.would_cycle("c", "a"), None);
        idx.upsert_provider(rp("d", None));
        idx.upsert_provider(rp("e", Some("d")));
        assert_eq!(
            idx.would_cycle("d", "e"),
            Some(vec!["d".into(), "e".into(), "d".into()])
        );
        assert_eq!(
            idx.would_cycle("d", "d"),
            Some(vec!["d".into(), "d".into()])
        );
    }
}

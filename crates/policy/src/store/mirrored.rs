//! Mirrored objects beside written ones of the same name: a written ResourceProvider or
//! Allocation stands in place of the mirrored one while it exists (it was there first, or
//! an operator wrote it on purpose), and the mirrored one comes back when it is deleted.

use super::{Change, ObjectKey, Store};

impl Store {
    /// A watch or mirror change as the store takes it: `None` when it only moves what is set
    /// aside. A mirrored put over a written object is set aside; a written put over a
    /// mirrored object sets that one aside; an unmirror of an object set aside forgets it.
    pub(super) fn mirror_change(&mut self, change: Change) -> Option<Change> {
        match change {
            Change::Put(object) => {
                let key = ObjectKey::of(&object);
                let held = self.objects.get(&key);
                match (object.is_mirrored(), held) {
                    (true, Some(held)) if !held.is_mirrored() => {
                        self.mirrored_aside.insert(key, *object);
                        None
                    }
                    (false, Some(held)) if held.is_mirrored() => {
                        let held = (**held).clone();
                        self.mirrored_aside.insert(key, held);
                        Some(Change::Put(object))
                    }
                    _ => Some(Change::Put(object)),
                }
            }
            Change::Unmirror(key) => {
                if self.mirrored_aside.remove(&key).is_some() {
                    return None;
                }
                let mirrored = self.objects.get(&key).is_some_and(|o| o.is_mirrored());
                mirrored.then_some(Change::Unmirror(key))
            }
            delete => Some(delete),
        }
    }

    /// The mirrored object set aside under a written one's name, if any.
    pub fn mirrored_aside(&self, key: &ObjectKey) -> Option<&kubeplace_api::Object> {
        self.mirrored_aside.get(key)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Change, ObjectKey, Store};
    use crate::test_objects::object;
    use kubeplace_api::Kind;

    fn provider(vcpu: i64, mirrored: bool) -> Change {
        let annotation = if mirrored {
            "annotations: {kubeplace.io/mirrored-from: Node/n1}"
        } else {
            "{}"
        };
        let meta = if mirrored {
            format!("{{name: n1, {annotation}}}")
        } else {
            "{name: n1}".to_string()
        };
        Change::Put(Box::new(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {meta}\nspec: {{inventories: {{VCPU: {{total: {vcpu}}}}}}}\n"
        ))))
    }

    fn total(store: &Store) -> Option<i64> {
        store.index().inventory("n1", "VCPU").map(|i| i.total)
    }

    #[test]
    fn a_written_provider_stands_in_place_of_the_mirrored_one_in_either_order() {
        let key = ObjectKey::cluster(Kind::ResourceProvider, "n1");
        // Written first: the Node's provider waits aside.
        let mut store = Store::default();
        store.apply_changes([provider(4, false), provider(8, true)]);
        assert_eq!(total(&store), Some(4));
        // The Node changes meanwhile; its deletion of the written one brings it back as it is now.
        store.apply_changes([provider(16, true)]);
        store.apply_changes([Change::Delete(key.clone())]);
        assert_eq!(total(&store), Some(16));
        assert!(store.get(&key).unwrap().is_mirrored());
        // Mirrored first: a written one takes its place; the Node goes meanwhile.
        store.apply_changes([provider(2, false)]);
        assert_eq!(total(&store), Some(2));
        store.apply_changes([Change::Unmirror(key.clone())]);
        assert_eq!(total(&store), Some(2), "the written one stays");
        store.apply_changes([Change::Delete(key.clone())]);
        assert_eq!(total(&store), None, "nothing comes back");
        // An unmirror never takes a written object.
        store.apply_changes([provider(2, false), Change::Unmirror(key.clone())]);
        assert_eq!(total(&store), Some(2));
        // Deleted directly (the Placement API, offline), the mirrored one comes back too.
        store.apply_changes([provider(8, true)]);
        store.delete(&key);
        assert_eq!(total(&store), Some(8));
    }
}

//! The orders answers list providers in, built on first use after the providers change:
//! the roots in name order, every provider in tree order, and every provider's rank in uuid
//! order. A provider put back with its uuid and parent (its inventories, traits or
//! aggregates changed) leaves them as they were (`upsert_provider`).

use super::{ProviderIndex, QuotedUuid, RootOrder, TreeOrder, UuidOrder};
use crate::placement::ids::ProviderId;

impl ProviderIndex {
    /// The roots in name order, with their ranks.
    pub(crate) fn root_order(&self) -> &RootOrder {
        self.root_order.get_or_init(|| {
            let roots: Vec<ProviderId> = self.roots.values().copied().collect();
            let mut rank = vec![u32::MAX; self.slots.len()];
            for (i, &r) in roots.iter().enumerate() {
                rank[r.index()] = i as u32;
            }
            RootOrder { roots, rank }
        })
    }

    /// Every provider of a tree in tree order, with its position.
    pub(crate) fn tree_order(&self) -> &TreeOrder {
        self.tree_order.get_or_init(|| {
            let mut providers = Vec::with_capacity(self.len());
            for &root in &self.root_order().roots {
                self.tree(root, &mut providers);
            }
            let mut rank = vec![u32::MAX; self.slots.len()];
            let mut once = true;
            for (i, p) in providers.iter().enumerate() {
                if rank[p.index()] == u32::MAX {
                    rank[p.index()] = i as u32;
                } else {
                    once = false;
                }
            }
            let root = self
                .slots
                .iter()
                .map(|p| p.as_ref().and_then(|p| p.root))
                .collect();
            TreeOrder {
                providers,
                rank,
                once,
                root,
            }
        })
    }

    /// A root's tree as [`ProviderIndex::tree`] walks it, read from the tree order: `None`
    /// when `root` is not a root, or when the order lists a provider twice.
    pub(crate) fn tree_in_order(&self, root: ProviderId) -> Option<&[ProviderId]> {
        let order = self.tree_order();
        let roots = self.root_order();
        let at = *roots.rank.get(root.index())?;
        if !order.once || at == u32::MAX {
            return None;
        }
        let start = order.rank[root.index()] as usize;
        let end = match roots.roots.get(at as usize + 1) {
            Some(next) => order.rank[next.index()] as usize,
            None => order.providers.len(),
        };
        order.providers.get(start..end)
    }

    /// Every provider's rank in uuid order.
    pub(crate) fn uuid_order(&self) -> &UuidOrder {
        self.uuid_order.get_or_init(|| {
            let mut by_uuid: Vec<(&str, usize)> = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.as_ref().map(|p| (&*p.uuid, i)))
                .collect();
            by_uuid.sort_unstable();
            let mut rank = vec![u32::MAX; self.slots.len()];
            let mut distinct = 0u32;
            for (n, (uuid, slot)) in by_uuid.iter().enumerate() {
                if n > 0 && by_uuid[n - 1].0 != *uuid {
                    distinct += 1;
                }
                rank[*slot] = distinct;
            }
            let plain = by_uuid
                .iter()
                .all(|(uuid, _)| uuid.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'));
            let fixed = by_uuid.iter().all(|(uuid, _)| uuid.len() == 36);
            let quoted = (plain && fixed).then(|| {
                self.slots
                    .iter()
                    .map(|p| {
                        let mut q: QuotedUuid = [0; 38];
                        if let Some(p) = p {
                            q[0] = b'"';
                            q[1..37].copy_from_slice(p.uuid.as_bytes());
                            q[37] = b'"';
                        }
                        q
                    })
                    .collect()
            });
            UuidOrder {
                rank,
                plain,
                quoted,
            }
        })
    }
}

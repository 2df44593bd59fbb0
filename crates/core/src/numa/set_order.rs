//! The order Nova walks a set of CPU numbers in. Nova keeps CPUs in Python sets and takes
//! "the first threads of a core" and "the first free CPUs" in the order the set iterates,
//! which is the order of its hash table's slots: ascending for small numbers, but not
//! always (the core {2, 8} gives 8 first). To pin the CPUs Nova would pin, the sets Nova
//! builds on the way (`pcpuset - pinned_cpus`, then each core `& free`) are laid out here
//! as CPython lays out a set of integers (an integer is its own hash; a table of 8 slots
//! to start with, probed 9 slots at a time and then by perturbation, grown four-fold when
//! three fifths full).

/// One slot of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    /// A removed entry: skipped by walks, but not free for a clean insert.
    Removed,
    Cpu(u32),
}

const MIN_SIZE: usize = 8;
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;

/// A set of CPU numbers with CPython's table layout.
#[derive(Debug, Clone)]
pub(crate) struct PySet {
    slots: Vec<Slot>,
    fill: usize,
    used: usize,
}

impl PySet {
    fn empty() -> PySet {
        PySet {
            slots: vec![Slot::Empty; MIN_SIZE],
            fill: 0,
            used: 0,
        }
    }

    /// A set built by adding the CPUs one by one, as `set(iterable)` does.
    pub(crate) fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> PySet {
        let mut set = PySet::empty();
        for cpu in cpus {
            set.add(cpu);
        }
        set
    }

    /// The set a Nova cell object holds for these CPUs: built from them in ascending order,
    /// then copied CPU by CPU as the object's field takes it (which can change the order).
    pub(crate) fn as_nova_holds(cpus: &std::collections::BTreeSet<u32>) -> PySet {
        PySet::from_cpus(
            PySet::from_cpus(cpus.iter().copied())
                .walk()
                .collect::<Vec<_>>(),
        )
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The CPUs in the order Python iterates them.
    pub(crate) fn walk(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().filter_map(|s| match s {
            Slot::Cpu(c) => Some(*c),
            _ => None,
        })
    }

    pub(crate) fn contains(&self, cpu: u32) -> bool {
        self.walk().any(|c| c == cpu)
    }

    fn add(&mut self, cpu: u32) {
        if self.contains(cpu) {
            return;
        }
        let mask = self.mask();
        let mut perturb = cpu as usize;
        let mut i = cpu as usize & mask;
        let mut removed: Option<usize> = None;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for j in i..=i + probes {
                match self.slots[j] {
                    Slot::Empty => {
                        if let Some(r) = removed {
                            self.slots[r] = Slot::Cpu(cpu);
                            self.used += 1;
                            return;
                        }
                        self.slots[j] = Slot::Cpu(cpu);
                        self.fill += 1;
                        self.used += 1;
                        if self.fill * 5 >= mask * 3 {
                            self.resize(self.used * 4);
                        }
                        return;
                    }
                    Slot::Removed => {
                        removed.get_or_insert(j);
                    }
                    Slot::Cpu(_) => {}
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i * 5 + 1 + perturb) & mask;
        }
    }

    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        let old = std::mem::replace(&mut self.slots, vec![Slot::Empty; size]);
        self.fill = self.used;
        for slot in old {
            if let Slot::Cpu(c) = slot {
                insert_clean(&mut self.slots, c);
            }
        }
    }

    /// A copy, as `set(s)` of a set makes it: one table sized for it, filled in the
    /// original's slot order.
    fn copy(&self) -> PySet {
        let mut copy = PySet::empty();
        if self.used == 0 {
            return copy;
        }
        if self.used * 5 >= copy.mask() * 3 {
            copy.resize(self.used * 2);
        }
        if copy.slots.len() == self.slots.len() && self.fill == self.used {
            copy.slots = self.slots.clone();
        } else {
            for cpu in self.walk() {
                insert_clean(&mut copy.slots, cpu);
            }
        }
        copy.fill = self.used;
        copy.used = self.used;
        copy
    }

    fn discard(&mut self, cpu: u32) {
        if let Some(slot) = self.slots.iter_mut().find(|s| **s == Slot::Cpu(cpu)) {
            *slot = Slot::Removed;
            self.used -= 1;
        }
    }

    /// `self - other`.
    pub(crate) fn difference(&self, other: &PySet) -> PySet {
        if (self.used >> 2) > other.used {
            let mut result = self.copy();
            for cpu in other.walk() {
                result.discard(cpu);
            }
            return result;
        }
        PySet::from_cpus(self.walk().filter(|c| !other.contains(*c)))
    }

    /// `self & other`: the smaller set walked, each CPU the other has added in turn.
    pub(crate) fn intersection(&self, other: &PySet) -> PySet {
        let (walked, looked_up) = if other.used > self.used {
            (self, other)
        } else {
            (other, self)
        };
        PySet::from_cpus(walked.walk().filter(|c| looked_up.contains(*c)))
    }
}

/// Puts a CPU in the first free slot of its probe sequence, in a table with no removed
/// slots (a table being rebuilt).
fn insert_clean(slots: &mut [Slot], cpu: u32) {
    let mask = slots.len() - 1;
    let mut perturb = cpu as usize;
    let mut i = cpu as usize & mask;
    loop {
        if slots[i] == Slot::Empty {
            slots[i] = Slot::Cpu(cpu);
            return;
        }
        if i + LINEAR_PROBES <= mask {
            let probed = &mut slots[i + 1..=i + LINEAR_PROBES];
            if let Some(slot) = probed.iter_mut().find(|s| **s == Slot::Empty) {
                *slot = Slot::Cpu(cpu);
                return;
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(set: &PySet) -> Vec<u32> {
        set.walk().collect()
    }

    /// Orders Python 3 prints for the same sets (`list({...})`, `list(a - b)`,
    /// `list(a & b)`), written down from the interpreter.
    #[test]
    fn sets_walk_in_pythons_order() {
        assert_eq!(walk(&PySet::from_cpus([2, 8])), [8, 2]);
        assert_eq!(walk(&PySet::from_cpus([0, 8])), [0, 8]);
        assert_eq!(walk(&PySet::from_cpus([3, 11])), [11, 3]);
        assert_eq!(walk(&PySet::from_cpus([11, 3])), [3, 11]);
        assert_eq!(walk(&PySet::from_cpus(0..20)), (0..20).collect::<Vec<_>>());
        assert_eq!(walk(&PySet::from_cpus([5, 13, 21])), [13, 21, 5]);
        let all = PySet::from_cpus(0..16);
        let some = PySet::from_cpus([1, 9]);
        assert_eq!(
            walk(&all.difference(&some)),
            [0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]
        );
        assert_eq!(walk(&PySet::from_cpus([4, 12]).intersection(&all)), [4, 12]);
    }
}

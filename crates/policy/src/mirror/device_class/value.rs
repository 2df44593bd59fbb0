//! The values of a selector's expressions: CEL's, with lists that join without copying
//! (as cel-go's do).

use std::collections::BTreeMap;
use std::sync::Arc;

/// A value of a selector's expression.
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(List),
    Map(Arc<Map>),
}

/// A map's entries.
pub type Map = BTreeMap<Key, Value>;

/// A map's key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Arc<str>),
}

/// A list: its elements, or two lists joined (as cel-go joins them, without a copy).
#[derive(Clone, Debug)]
pub struct List(Arc<ListNode>);

#[derive(Debug)]
enum ListNode {
    Flat(Vec<Value>),
    Joined {
        left: List,
        right: List,
        len: usize,
        depth: usize,
    },
}

impl List {
    pub fn new(items: Vec<Value>) -> List {
        List(Arc::new(ListNode::Flat(items)))
    }

    pub fn len(&self) -> usize {
        match &*self.0 {
            ListNode::Flat(items) => items.len(),
            ListNode::Joined { len, .. } => *len,
        }
    }

    /// How many joins deep it is.
    pub fn depth(&self) -> usize {
        match &*self.0 {
            ListNode::Flat(_) => 0,
            ListNode::Joined { depth, .. } => *depth,
        }
    }

    /// The element at `index`, walking down the joins.
    pub fn get(&self, mut index: usize) -> Option<&Value> {
        let mut list = self;
        loop {
            match &*list.0 {
                ListNode::Flat(items) => return items.get(index),
                ListNode::Joined { left, right, .. } => {
                    if index < left.len() {
                        list = left;
                    } else {
                        index -= left.len();
                        list = right;
                    }
                }
            }
        }
    }

    /// `self` and `other` joined: without a copy, unless the chain of joins would be
    /// deeper than `max_joins` (then the caller charged the copy). `None` when the list
    /// would be longer than an int counts.
    pub fn join(&self, other: &List, max_joins: usize) -> Option<List> {
        if self.len() == 0 {
            return Some(other.clone());
        }
        if other.len() == 0 {
            return Some(self.clone());
        }
        let len = self
            .len()
            .checked_add(other.len())
            .filter(|l| i64::try_from(*l).is_ok())?;
        let depth = self.depth().max(other.depth()) + 1;
        if depth > max_joins {
            return Some(List::new(
                self.iter().chain(other.iter()).cloned().collect(),
            ));
        }
        Some(List(Arc::new(ListNode::Joined {
            left: self.clone(),
            right: other.clone(),
            len,
            depth,
        })))
    }

    /// The elements in order.
    pub fn iter(&self) -> ListIter<'_> {
        ListIter {
            pending: vec![self],
            current: [].iter(),
        }
    }
}

/// The elements of a [`List`], in order, the joins walked without recursion.
pub struct ListIter<'a> {
    pending: Vec<&'a List>,
    current: std::slice::Iter<'a, Value>,
}

impl<'a> Iterator for ListIter<'a> {
    type Item = &'a Value;

    fn next(&mut self) -> Option<&'a Value> {
        loop {
            if let Some(v) = self.current.next() {
                return Some(v);
            }
            let list = self.pending.pop()?;
            match &*list.0 {
                ListNode::Flat(items) => self.current = items.iter(),
                ListNode::Joined { left, right, .. } => {
                    self.pending.push(right);
                    self.pending.push(left);
                }
            }
        }
    }
}

/// The name of a value's type, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Uint(_) => "uint",
        Value::Double(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
    }
}

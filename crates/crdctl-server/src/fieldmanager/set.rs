//! Field sets: which fields of an object a manager owns, as a trie of path elements, and their
//! `FieldsV1` encoding (`{"f:spec":{"f:replicas":{}}}`). Upstream: structured-merge-diff's
//! `fieldpath` package.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step of a field path, spelled as in `FieldsV1`: `f:<field>`, `k:<key fields as JSON>`
/// (an item of a `map` list), `v:<value as JSON>` (an item of a `set` list), `i:<index>`.
pub type Element = String;

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set(BTreeMap<Element, Node>);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    /// Whether the path ending here is in the set (not just a prefix of paths that are).
    member: bool,
    children: Set,
}

impl Node {
    /// Adds the path `rest` below this node (this node itself when it is empty).
    fn add(&mut self, rest: &[Element]) {
        if rest.is_empty() {
            self.member = true;
        } else {
            self.children.insert(rest);
        }
    }
}

impl Set {
    /// Adds a path.
    pub fn insert(&mut self, path: &[Element]) {
        let Some((first, rest)) = path.split_first() else { return };
        // Looked up before it is cloned: most paths share their first elements.
        match self.0.get_mut(first) {
            Some(node) => node.add(rest),
            None => {
                let mut node = Node::default();
                node.add(rest);
                self.0.insert(first.clone(), node);
            }
        }
    }

    /// Adds `path` and every path of `below` under it.
    pub fn graft(&mut self, path: &[Element], below: Set) {
        let Some((first, rest)) = path.split_first() else { return self.add_all(&below) };
        let node = match self.0.get_mut(first) {
            Some(node) => node,
            None => self.0.entry(first.clone()).or_default(),
        };
        if rest.is_empty() {
            node.member = true;
            node.children = std::mem::take(&mut node.children).joined(below);
        } else {
            node.children.graft(rest, below);
        }
    }

    /// Adds `element`, not in the set yet, as a member with `below` under it (the elements of
    /// an object or list are distinct).
    pub fn put(&mut self, element: Element, below: Set) {
        self.0.insert(element, Node { member: true, children: below });
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.add_all(other);
        out
    }

    /// Paths in either set, taking both: nothing is copied when one of them is empty, as on a
    /// create, where everything is added and nothing modified.
    pub fn joined(mut self, other: Set) -> Set {
        if self.is_empty() {
            return other;
        }
        self.add_all(&other);
        self
    }

    /// Adds every path of `other`, in place.
    fn add_all(&mut self, other: &Set) {
        for (element, node) in &other.0 {
            match self.0.get_mut(element) {
                Some(mine) => {
                    mine.member |= node.member;
                    mine.children.add_all(&node.children);
                }
                None => {
                    self.0.insert(element.clone(), node.clone());
                }
            }
        }
    }

    /// Paths in `self` and not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        self.combine(other, |a, b| a && !b, true)
    }

    /// Paths in both.
    pub fn intersection(&self, other: &Set) -> Set {
        self.combine(other, |a, b| a && b, false)
    }

    fn combine(&self, other: &Set, member: fn(bool, bool) -> bool, keep_unmatched: bool) -> Set {
        let empty = Node::default();
        let mut out = BTreeMap::new();
        for (element, node) in &self.0 {
            let theirs = other.0.get(element);
            if theirs.is_none() && !keep_unmatched {
                continue;
            }
            let theirs = theirs.unwrap_or(&empty);
            let combined = Node {
                member: member(node.member, theirs.member),
                children: node.children.combine(&theirs.children, member, keep_unmatched),
            };
            if combined.member || !combined.children.is_empty() {
                out.insert(element.clone(), combined);
            }
        }
        Set(out)
    }

    /// Every path in the set, in order.
    pub fn paths(&self) -> Vec<Vec<Element>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Element>, out: &mut Vec<Vec<Element>>) {
        for (element, node) in &self.0 {
            prefix.push(element.clone());
            if node.member {
                out.push(prefix.clone());
            }
            node.children.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The node under `element`: whether it is a member, and the set below it.
    pub fn child(&self, element: &str) -> Option<(bool, &Set)> {
        self.0.get(element).map(|node| (node.member, &node.children))
    }

    /// The elements at the top level, with whether each is a member and what lies below.
    pub fn entries(&self) -> impl Iterator<Item = (&Element, bool, &Set)> {
        self.0.iter().map(|(element, node)| (element, node.member, &node.children))
    }

    /// Removes everything under `prefix` (the `status` of a main resource, say), in place.
    pub fn remove(&mut self, prefix: &[&str]) {
        let Some((&first, rest)) = prefix.split_first() else { return };
        if rest.is_empty() {
            self.0.remove(first);
        } else if let Some(node) = self.0.get_mut(first) {
            node.children.remove(rest);
            if !node.member && node.children.is_empty() {
                self.0.remove(first);
            }
        }
    }

    /// Takes `element` itself and its elements `children` (with what lies below them) out of
    /// the set, keeping its other paths.
    pub fn unmark(&mut self, element: &str, children: &[&str]) {
        if let Some(node) = self.0.get_mut(element) {
            node.member = false;
            for child in children {
                node.children.0.remove(*child);
            }
            if node.children.is_empty() {
                self.0.remove(element);
            }
        }
    }

    /// Only what lies under `prefix`.
    pub fn only(&self, prefix: &[&str]) -> Set {
        let Some((&first, rest)) = prefix.split_first() else { return self.clone() };
        let Some(node) = self.0.get(first) else { return Set::default() };
        let inner =
            if rest.is_empty() { node.clone() } else { Node { member: false, children: node.children.only(rest) } };
        if !inner.member && inner.children.is_empty() {
            return Set::default();
        }
        Set(BTreeMap::from([(first.to_string(), inner)]))
    }

    /// The `FieldsV1` JSON, keys in upstream's order: `.` first, then by bytes, as the
    /// elements are kept (`.` sorts before every `f:`, `i:`, `k:` and `v:`).
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1())
    }

    fn fields_v1(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (element, node) in &self.0 {
            let mut inner = Map::new();
            if node.member && !node.children.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            inner.extend(node.children.fields_v1());
            out.insert(element.clone(), Value::Object(inner));
        }
        out
    }

    /// Reads `FieldsV1` JSON; anything else is an empty set.
    pub fn from_fields_v1(value: &Value) -> Set {
        let mut out = BTreeMap::new();
        if let Some(fields) = value.as_object() {
            for (element, inner) in fields.iter().filter(|(e, _)| e.as_str() != ".") {
                let children = Set::from_fields_v1(inner);
                let has_dot = inner.get(".").is_some();
                let is_leaf = inner.as_object().is_none_or(Map::is_empty);
                out.insert(element.clone(), Node { member: has_dot || is_leaf, children });
            }
        }
        Set(out)
    }
}

/// A path as structured-merge-diff prints it in conflicts: `.spec.ports[name="http"].port`.
pub fn display(path: &[Element]) -> String {
    let mut out = String::new();
    for element in path {
        match element.split_at(2) {
            ("f:", name) => {
                out.push('.');
                out.push_str(name);
            }
            ("k:", key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            ("v:", value) => out.push_str(&format!("[={value}]")),
            (_, index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(elements: &[&str]) -> Vec<Element> {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_members_and_prefixes() {
        let fields = json!({"f:spec": {"f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}}, "f:replicas": {}}});
        let set = Set::from_fields_v1(&fields);
        assert_eq!(set.to_fields_v1(), fields);
        assert_eq!(
            set.paths().iter().map(|p| display(p)).collect::<Vec<_>>(),
            [
                ".spec.ports[name=\"http\"]",
                ".spec.ports[name=\"http\"].name",
                ".spec.ports[name=\"http\"].port",
                ".spec.replicas"
            ]
        );
    }

    #[test]
    fn set_algebra_works_on_members_not_prefixes() {
        let mut a = Set::default();
        a.insert(&path(&["f:spec", "f:a"]));
        a.insert(&path(&["f:spec", "f:b"]));
        let mut b = Set::default();
        b.insert(&path(&["f:spec", "f:b"]));
        b.insert(&path(&["f:spec", "f:c"]));
        assert_eq!(a.difference(&b).paths(), [path(&["f:spec", "f:a"])]);
        assert_eq!(a.intersection(&b).paths(), [path(&["f:spec", "f:b"])]);
        assert_eq!(a.union(&b).paths().len(), 3);
        let mut emptied = a.clone();
        emptied.remove(&["f:spec"]);
        assert_eq!(emptied, Set::default());
        assert_eq!(b.only(&["f:spec", "f:c"]).paths(), [path(&["f:spec", "f:c"])]);
    }
}

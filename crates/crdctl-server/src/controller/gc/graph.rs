//! The garbage collector's dependency graph, as upstream's `GraphBuilder` keeps it: a node per
//! object (by uid) with its owner references and its dependents, and "virtual" nodes for
//! owners referred to but not (yet) seen, to be verified against the store. Built from the
//! store's change feed; each change says which nodes the workers must look at again.
//!
//! Unlike upstream's, it holds only what garbage collection is about — objects with owner
//! references, the owners they name, and objects a finalizer of the collector holds — so a
//! store of a million objects that own nothing costs it nothing.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use crate::registry::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};

/// Which object a node is: what an owner reference names, and the namespace it is in (a
/// virtual node takes its dependent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// The namespace, if namespaced.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

impl Identity {
    /// upstream's `objectReference.String()`, as its events print it.
    pub fn describe(&self) -> String {
        format!(
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version,
            self.kind,
            self.namespace.as_deref().unwrap_or_default(),
            self.name,
            self.uid
        )
    }
}

/// One owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `blockOwnerDeletion`.
    pub block: bool,
}

/// An object in the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Which object.
    pub identity: Identity,
    /// Where it is stored; `None` for a virtual node.
    pub key: Option<String>,
    /// Its owner references.
    pub owners: Vec<OwnerRef>,
    /// The uids of the objects that name it as an owner.
    pub dependents: HashSet<String>,
    /// It has a `deletionTimestamp`.
    pub being_deleted: bool,
    /// It is being deleted in the foreground: it waits for its blocking dependents.
    pub deleting_dependents: bool,
    /// The listing it was last seen in.
    seen: u64,
}

/// What a change asks the workers to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Nodes (uids) to look at for deletion: `attemptToDelete`.
    pub delete: Vec<String>,
    /// Nodes (uids) whose dependents are to be orphaned: `attemptToOrphan`.
    pub orphan: Vec<String>,
}

/// The graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    /// Store key → uid of the observed object there.
    by_key: HashMap<String, String>,
    /// Owners verified absent: (uid, the namespace they were looked up in).
    absent: HashSet<(String, Option<String>)>,
    /// Owners absent where their dependents look that live in another namespace, by uid.
    elsewhere: HashMap<String, Elsewhere>,
    /// Which listing of the store this is: an observed node not seen since it began is gone.
    listing: u64,
}

/// An owner living in another namespace than the dependents that name it.
#[derive(Debug)]
struct Elsewhere {
    /// Its store key, by which its deletion is known.
    key: String,
    /// The dependents its references hold.
    dependents: HashSet<String>,
}

impl Graph {
    /// The node of `uid`.
    pub fn node(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Whether the owner `uid` was verified absent from `namespace`.
    pub fn is_absent(&self, uid: &str, namespace: Option<&str>) -> bool {
        self.absent.contains(&(uid.to_string(), namespace.map(str::to_string)))
    }

    /// Whether the owner `uid` was found in another namespace than `dependent`'s; if so, the
    /// dependent is looked at again when that owner is deleted.
    pub fn holds_elsewhere(&mut self, uid: &str, dependent: &str) -> bool {
        let Some(owner) = self.elsewhere.get_mut(uid) else { return false };
        owner.dependents.insert(dependent.to_string());
        true
    }

    /// Records that the owner `uid`, stored under `key`, lives in another namespace than its
    /// dependents'.
    pub fn record_elsewhere(&mut self, uid: &str, key: &str) {
        let owner = Elsewhere { key: key.to_string(), dependents: HashSet::new() };
        self.elsewhere.entry(uid.to_string()).or_insert(owner);
    }

    /// Records that the owner `uid` is not in `namespace`.
    pub fn record_absent(&mut self, uid: &str, namespace: Option<&str>) {
        self.absent.insert((uid.to_string(), namespace.map(str::to_string)));
    }

    /// The store is listed again: what is not seen before [`Graph::listed`] is gone.
    pub fn listing(&mut self) {
        self.listing = self.listing.wrapping_add(1);
    }

    /// The listing is done: observed nodes it did not see were deleted while the feed was down.
    pub fn listed(&mut self) -> Work {
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, node)| node.key.is_some() && node.seen != self.listing)
            .map(|(uid, _)| uid.clone())
            .collect();
        let mut work = Work::default();
        for uid in gone {
            if let Some(key) = self.nodes.get(&uid).and_then(|node| node.key.clone()) {
                self.by_key.remove(&key);
            }
            let removed = self.remove(&uid);
            work.delete.extend(removed.delete);
        }
        work
    }

    /// An object was created or changed (or listed, or looked up as an owner).
    pub fn put(&mut self, key: &str, object: &Object, namespaced: bool) -> Work {
        let mut work = Work::default();
        let Some((identity, owners)) = object.read(namespaced) else { return work };
        let being_deleted = object.metadata.deletion_timestamp.is_some();
        let finalizers = object.finalizers();
        let has = |finalizer: &str| finalizers.iter().any(|f| f == finalizer);
        let held = being_deleted && (has(ORPHAN_FINALIZER) || has(FOREGROUND_FINALIZER));
        let known = self.by_key.contains_key(key) || self.nodes.contains_key(&identity.uid);
        if !known && owners.is_empty() && !held {
            return work;
        }
        if let Some(replaced) = self.by_key.get(key).filter(|uid| **uid != identity.uid).cloned() {
            work = self.remove(&replaced);
        }
        self.by_key.insert(key.to_string(), identity.uid.clone());
        let uid = identity.uid.clone();
        let deleting_dependents = being_deleted && has(FOREGROUND_FINALIZER);
        let before = self.nodes.get(&uid).filter(|node| node.key.is_some()).map(|node| node.owners.clone());
        let node = self.nodes.entry(uid.clone()).or_insert_with(|| Node {
            identity: identity.clone(),
            key: None,
            owners: Vec::new(),
            dependents: HashSet::new(),
            being_deleted: false,
            deleting_dependents: false,
            seen: 0,
        });
        node.identity = identity;
        node.seen = self.listing;
        node.key = Some(key.to_string());
        node.owners = owners.clone();
        node.being_deleted = being_deleted;
        node.deleting_dependents = deleting_dependents;
        let before = before.unwrap_or_default();
        for gone in before.iter().filter(|old| !owners.iter().any(|new| new.uid == old.uid)) {
            self.unlink(&uid, &gone.uid, &mut work);
        }
        for unblocked in before.iter().filter(|old| old.block && owners.iter().any(|n| n.uid == old.uid && !n.block)) {
            self.wake_waiting_owner(&unblocked.uid, &mut work);
        }
        for added in owners.iter().filter(|new| !before.iter().any(|old| old.uid == new.uid)) {
            self.link(&uid, added, &mut work);
        }
        if being_deleted && has(ORPHAN_FINALIZER) {
            work.orphan.push(uid.clone());
        }
        if deleting_dependents {
            work.delete.extend(self.nodes.get(&uid).into_iter().flat_map(|node| node.dependents.iter().cloned()));
            work.delete.push(uid);
        }
        work
    }

    /// The object under `key` was deleted (`uid`, when the feed said what it was: an owner only
    /// looked up so far is known by its uid alone).
    pub fn delete(&mut self, key: &str, uid: Option<&str>) -> Work {
        let mut work = match self.by_key.remove(key).or_else(|| uid.map(str::to_string)) {
            Some(uid) => self.remove(&uid),
            None => Work::default(),
        };
        // The dependents it held from other namespaces now name an owner that is nowhere.
        let elsewhere = self.elsewhere.iter().find(|(_, owner)| owner.key == key).map(|(uid, _)| uid.clone());
        if let Some(owner) = elsewhere.and_then(|uid| self.elsewhere.remove(&uid)) {
            work.delete.extend(owner.dependents);
        }
        work
    }

    /// A virtual node's owner was verified absent from `namespace`: the node goes, and its
    /// dependents are looked at again.
    pub fn virtual_absent(&mut self, uid: &str, namespace: Option<&str>) -> Work {
        let mut work = Work::default();
        if self.nodes.get(uid).is_some_and(|node| node.key.is_none()) {
            self.record_absent(uid, namespace);
            if let Some(node) = self.nodes.remove(uid) {
                work.delete.extend(node.dependents);
            }
        }
        work
    }

    /// Removes the observed node `uid`: its owners lose it as a dependent (an owner waiting for
    /// it looks again), and its dependents are looked at again.
    fn remove(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else { return work };
        if !node.dependents.is_empty() {
            self.record_absent(uid, node.identity.namespace.as_deref());
        }
        for owner in &node.owners {
            self.unlink(uid, &owner.uid, &mut work);
        }
        work.delete.extend(node.dependents);
        work
    }

    /// `dependent` names `owner`: a virtual node is made for an owner not seen, and verified.
    fn link(&mut self, dependent: &str, owner: &OwnerRef, work: &mut Work) {
        let namespace = self.nodes.get(dependent).and_then(|node| node.identity.namespace.clone());
        match self.nodes.get_mut(&owner.uid) {
            Some(node) => {
                node.dependents.insert(dependent.to_string());
                // A namespaced owner seen in another namespace: the dependent's reference is
                // invalid, which the worker reports.
                let elsewhere =
                    node.key.is_some() && node.identity.namespace.is_some() && node.identity.namespace != namespace;
                if elsewhere {
                    work.delete.push(dependent.to_string());
                }
            }
            None => {
                let identity = Identity {
                    api_version: owner.api_version.clone(),
                    kind: owner.kind.clone(),
                    namespace,
                    name: owner.name.clone(),
                    uid: owner.uid.clone(),
                };
                let dependents = HashSet::from([dependent.to_string()]);
                let node = Node {
                    identity,
                    key: None,
                    owners: Vec::new(),
                    dependents,
                    being_deleted: false,
                    deleting_dependents: false,
                    seen: 0,
                };
                self.nodes.insert(owner.uid.clone(), node);
                work.delete.push(owner.uid.clone());
            }
        }
    }

    /// `dependent` no longer names `owner`.
    fn unlink(&mut self, dependent: &str, owner: &str, work: &mut Work) {
        let Some(node) = self.nodes.get_mut(owner) else { return };
        node.dependents.remove(dependent);
        if node.key.is_none() && node.dependents.is_empty() {
            self.nodes.remove(owner);
            return;
        }
        self.wake_waiting_owner(owner, work);
    }

    /// An owner deleted in the foreground looks at its blocking dependents again.
    fn wake_waiting_owner(&self, owner: &str, work: &mut Work) {
        if self.nodes.get(owner).is_some_and(|node| node.deleting_dependents) {
            work.delete.push(owner.to_string());
        }
    }

    /// The dependents of `owner` that block its deletion (`blockOwnerDeletion`).
    pub fn blocking_dependents(&self, owner: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(owner) else { return Vec::new() };
        node.dependents
            .iter()
            .filter_map(|uid| self.nodes.get(uid))
            .filter(|dependent| dependent.owners.iter().any(|o| o.uid == owner && o.block))
            .collect()
    }
}

/// What the collector reads of an object — upstream's metadata-only informers'
/// `PartialObjectMetadata`: decoded from the stored bytes without building the rest.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Metadata,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    #[serde(default)]
    uid: String,
    owner_references: Option<Vec<Reference>>,
    finalizers: Option<Vec<String>>,
    deletion_timestamp: Option<String>,
}

/// An owner reference as written; one without a uid names nothing.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reference {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    block_owner_deletion: Option<bool>,
}

impl Object {
    /// `object`'s metadata; an object of another shape reads as one without a uid.
    pub fn of(object: &Value) -> Object {
        Object::deserialize(object).unwrap_or_default()
    }

    /// `apiVersion` and `kind`.
    pub fn type_meta(&self) -> (&str, &str) {
        (&self.api_version, &self.kind)
    }

    /// The uid, if the object has one.
    pub fn uid(&self) -> Option<&str> {
        Some(self.metadata.uid.as_str()).filter(|uid| !uid.is_empty())
    }

    /// The object's finalizers.
    pub fn finalizers(&self) -> &[String] {
        self.metadata.finalizers.as_deref().unwrap_or_default()
    }

    /// The owner references that name an owner.
    pub fn owner_references(&self) -> Vec<OwnerRef> {
        let references = self.metadata.owner_references.iter().flatten();
        references
            .filter_map(|reference| {
                Some(OwnerRef {
                    api_version: reference.api_version.clone()?,
                    kind: reference.kind.clone()?,
                    name: reference.name.clone()?,
                    uid: reference.uid.clone().filter(|uid| !uid.is_empty())?,
                    block: reference.block_owner_deletion.unwrap_or(false),
                })
            })
            .collect()
    }

    /// Its identity and owner references; `None` for what is not an object with a uid.
    fn read(&self, namespaced: bool) -> Option<(Identity, Vec<OwnerRef>)> {
        let non_empty = |text: &str| Some(text.to_string()).filter(|text| !text.is_empty());
        let identity = Identity {
            api_version: non_empty(&self.api_version)?,
            kind: non_empty(&self.kind)?,
            namespace: namespaced.then(|| self.metadata.namespace.clone()).flatten(),
            name: non_empty(&self.metadata.name)?,
            uid: self.uid()?.to_string(),
        };
        Some((identity, self.owner_references()))
    }
}

impl crate::informer::Decode for Object {
    fn decode(bytes: &[u8], _revision: crdctl_storage::Revision) -> Option<Object> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Graph, Object};

    fn object(name: &str, uid: &str, owners: &[(&str, bool)], finalizers: &[&str], deleting: bool) -> Object {
        let references: Vec<serde_json::Value> = owners
            .iter()
            .map(|(uid, block)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": uid, "uid": uid, "blockOwnerDeletion": block}))
            .collect();
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": uid, "ownerReferences": references, "finalizers": finalizers}});
        if deleting {
            object["metadata"]["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
        }
        Object::of(&object)
    }

    #[test]
    fn an_owner_not_seen_is_a_virtual_node_to_verify_and_becomes_real_when_seen() {
        let mut graph = Graph::default();
        let work = graph.put("/d", &object("d", "D", &[("O", false)], &[], false), true);
        assert_eq!(work.delete, ["O"]);
        assert!(graph.node("O").is_some_and(|o| o.key.is_none() && o.dependents.contains("D")));
        let work = graph.put("/o", &object("o", "O", &[], &[], false), true);
        assert!(work.delete.is_empty() && work.orphan.is_empty());
        assert!(graph.node("O").is_some_and(|o| o.key.is_some() && o.dependents.contains("D")));
    }

    #[test]
    fn a_deleted_owner_sends_its_dependents_to_be_looked_at_and_is_recorded_absent() {
        let mut graph = Graph::default();
        graph.put("/d", &object("d", "D", &[("O", false)], &[], false), true);
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        let work = graph.delete("/o", None);
        assert_eq!(work.delete, ["D"]);
        assert!(graph.is_absent("O", Some("default")));
        assert!(graph.node("O").is_none());
    }

    #[test]
    fn foreground_deletion_looks_at_the_dependents_and_a_blocking_one_going_wakes_the_owner() {
        let mut graph = Graph::default();
        graph.put("/d", &object("d", "D", &[("O", true)], &[], false), true);
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        let work = graph.put("/o", &object("o", "O", &[], &["foregroundDeletion"], true), true);
        assert_eq!(work.delete, ["D", "O"]);
        assert_eq!(graph.blocking_dependents("O").len(), 1);
        let work = graph.delete("/d", None);
        assert_eq!(work.delete, ["O"]);
        assert!(graph.blocking_dependents("O").is_empty());
    }

    #[test]
    fn an_object_that_owns_nothing_and_is_named_by_nothing_is_not_kept() {
        let mut graph = Graph::default();
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        assert!(graph.node("O").is_none());
        graph.put("/d", &object("d", "D", &[("O", false)], &[], false), true);
        // The owner, looked up in the store when the dependent named it, is kept from then on.
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        assert!(graph.node("O").is_some_and(|o| o.key.is_some()));
    }

    #[test]
    fn what_a_new_listing_does_not_see_is_gone() {
        let mut graph = Graph::default();
        graph.listing();
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        graph.put("/d", &object("d", "D", &[("O", false)], &[], false), true);
        graph.put("/o", &object("o", "O", &[], &[], false), true);
        assert!(graph.listed().delete.is_empty());
        graph.listing();
        graph.put("/d", &object("d", "D", &[("O", false)], &[], false), true);
        let work = graph.listed();
        assert_eq!(work.delete, ["D"]);
        assert!(graph.node("O").is_none());
    }

    #[test]
    fn an_owner_deleted_with_the_orphan_finalizer_is_to_be_orphaned() {
        let mut graph = Graph::default();
        let work = graph.put("/o", &object("o", "O", &[], &["orphan"], true), true);
        assert_eq!(work.orphan, ["O"]);
    }

    #[test]
    fn a_dependent_unblocking_its_owner_wakes_the_owner_waiting_for_it() {
        let mut graph = Graph::default();
        graph.put("/o", &object("o", "O", &[], &["foregroundDeletion"], true), true);
        graph.put("/d", &object("d", "D", &[("O", true)], &["x"], false), true);
        let work = graph.put("/d", &object("d", "D", &[("O", false)], &["x"], false), true);
        assert_eq!(work.delete, ["O"]);
    }
}

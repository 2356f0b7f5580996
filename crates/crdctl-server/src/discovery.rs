//! Discovery: legacy (`/api`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`) and aggregated
//! (`apidiscovery.k8s.io/v2`), both rendered from one model built from the Established CRDs,
//! versions in Kubernetes priority order (preferred first).
//!
//! Upstream: apiextensions' `customresource_discovery_controller.go`, apiserver's
//! `endpoints/discovery/aggregated`.

use base64::Engine;
use crdctl_model::version;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::registry::Registry;

/// What `/version` reports; a 1.33 server, so kubectl prints no skew warning.
pub struct Version {
    /// `gitVersion`.
    pub git_version: &'static str,
    /// `major`.
    pub major: &'static str,
    /// `minor`.
    pub minor: &'static str,
}

/// The Kubernetes version this server emulates.
pub const VERSION: Version = Version { git_version: "v1.33.0-crdctl", major: "1", minor: "33" };

/// One resource (or subresource) of a group version.
#[derive(Debug, Clone)]
pub struct Resource {
    /// Plural, or `<plural>/status`.
    pub name: String,
    /// Singular; empty for subresources.
    pub singular: String,
    /// Whether namespaced.
    pub namespaced: bool,
    /// The kind; `(group, version, kind)` of the response.
    pub kind: (String, String, String),
    /// Verbs.
    pub verbs: Vec<&'static str>,
    /// Short names.
    pub short_names: Vec<String>,
    /// Categories.
    pub categories: Vec<String>,
    /// `storageVersionHash`, main resources only.
    pub storage_version_hash: Option<String>,
}

/// A group version and its resources.
#[derive(Debug, Clone)]
pub struct GroupVersion {
    /// The version.
    pub version: String,
    /// Resources, sorted by name.
    pub resources: Vec<Resource>,
}

/// A group and its versions, preferred first.
#[derive(Debug, Clone)]
pub struct Group {
    /// The group name; empty for core.
    pub name: String,
    /// Versions in priority order.
    pub versions: Vec<GroupVersion>,
}

const ALL_VERBS: [&str; 8] = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];
const TERMINATING_VERBS: [&str; 5] = ["delete", "deletecollection", "get", "list", "watch"];
const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// `base64(sha256("<group>/<version>/<kind>")[:8])`.
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest.get(..8).unwrap_or_default())
}

/// The rows of the built-in table in `group`/`version`, each followed by its subresources.
fn built_in_resources(group: &str, version: &str) -> Vec<Resource> {
    let rows = crate::registry::builtin::RESOURCES.iter().filter(|r| r.group == group && r.version == version);
    let mut resources = Vec::new();
    for r in rows {
        let kind = (r.group.to_string(), r.version.to_string(), r.kind.to_string());
        resources.push(Resource {
            name: r.resource.into(),
            singular: r.singular.into(),
            namespaced: r.namespaced,
            kind: kind.clone(),
            verbs: r.verbs.to_vec(),
            short_names: r.short_names.iter().map(|s| s.to_string()).collect(),
            categories: r.categories.iter().map(|s| s.to_string()).collect(),
            storage_version_hash: r.stored().then(|| storage_version_hash(r.group, r.storage_version(), r.kind)),
        });
        for sub in r.subresources {
            let (group, version, sub_kind) = sub.kind().unwrap_or((r.group, r.version, r.kind));
            resources.push(Resource {
                name: format!("{}/{}", r.resource, sub.name()),
                singular: String::new(),
                namespaced: r.namespaced,
                kind: (group.into(), version.into(), sub_kind.into()),
                verbs: sub.verbs().to_vec(),
                short_names: vec![],
                categories: vec![],
                storage_version_hash: None,
            });
        }
    }
    resources
}

/// The groups of the built-in table other than core, in table order, each with its versions.
fn built_in_groups() -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for row in crate::registry::builtin::RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if groups.iter().any(|g| g.name == row.group) {
            continue;
        }
        let mut versions: Vec<&str> =
            crate::registry::builtin::RESOURCES.iter().filter(|r| r.group == row.group).map(|r| r.version).collect();
        versions.dedup();
        let versions = versions
            .into_iter()
            .map(|v| GroupVersion { version: v.into(), resources: built_in_resources(row.group, v) })
            .collect();
        groups.push(Group { name: row.group.into(), versions });
    }
    groups
}

fn core_group() -> Group {
    let mut resources = built_in_resources("", "v1");
    resources.sort_by(|a, b| a.name.cmp(&b.name));
    Group { name: String::new(), versions: vec![GroupVersion { version: "v1".into(), resources }] }
}

/// The groups of `/apis`: the built-in table's, then every group with an Established CRD.
pub fn groups(registry: &Registry) -> Vec<Group> {
    let mut groups = built_in_groups();
    let crds = registry.all();
    let mut names: Vec<&str> = crds.values().filter(|c| c.established()).map(|c| c.group()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let mut versions: Vec<String> = crds
            .values()
            .filter(|c| c.established() && c.group() == name)
            .flat_map(|c| c.crd.definition.spec.versions.iter().filter(|v| v.served).map(|v| v.name.clone()))
            .collect();
        version::sort_by_priority(&mut versions);
        versions.dedup();
        let versions = versions
            .into_iter()
            .map(|v| {
                let mut resources = Vec::new();
                for crd in
                    crds.values().filter(|c| c.established() && c.group() == name && c.served_version(&v).is_some())
                {
                    let accepted = &crd.crd.definition.status.accepted_names;
                    let kind = (name.to_string(), v.clone(), accepted.kind.clone());
                    let storage = crd.storage_version();
                    let storage_served = crd.served_version(storage).is_some();
                    resources.push(Resource {
                        name: crd.plural().to_string(),
                        singular: accepted.singular.clone(),
                        namespaced: crd.namespaced(),
                        kind: kind.clone(),
                        verbs: if crd.terminating() { TERMINATING_VERBS.to_vec() } else { ALL_VERBS.to_vec() },
                        short_names: accepted.short_names.clone(),
                        categories: accepted.categories.clone(),
                        storage_version_hash: storage_served
                            .then(|| storage_version_hash(name, storage, &accepted.kind)),
                    });
                    if crd.has_status(&v) {
                        resources.push(Resource {
                            name: format!("{}/status", crd.plural()),
                            singular: String::new(),
                            namespaced: crd.namespaced(),
                            kind: kind.clone(),
                            verbs: SUBRESOURCE_VERBS.to_vec(),
                            short_names: vec![],
                            categories: vec![],
                            storage_version_hash: None,
                        });
                    }
                    if crd.has_scale(&v) {
                        resources.push(Resource {
                            name: format!("{}/scale", crd.plural()),
                            singular: String::new(),
                            namespaced: crd.namespaced(),
                            kind: ("autoscaling".into(), "v1".into(), "Scale".into()),
                            verbs: SUBRESOURCE_VERBS.to_vec(),
                            short_names: vec![],
                            categories: vec![],
                            storage_version_hash: None,
                        });
                    }
                }
                resources.sort_by(|a, b| a.name.cmp(&b.name));
                GroupVersion { version: v, resources }
            })
            .collect();
        groups.push(Group { name: name.to_string(), versions });
    }
    groups
}

/// The core group alone, for `/api`.
pub fn core_groups() -> Vec<Group> {
    vec![core_group()]
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
}

/// `APIVersions` for `/api`.
pub fn api_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}

fn api_group(group: &Group) -> Value {
    let versions: Vec<Value> = group
        .versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(&group.name, &v.version), "version": v.version}))
        .collect();
    json!({"name": group.name, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

/// `APIGroupList` for `/apis`.
pub fn api_group_list(groups: &[Group]) -> Value {
    let groups: Vec<Value> = groups.iter().map(api_group).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `APIGroup` for `/apis/<group>`.
pub fn api_group_document(group: &Group) -> Value {
    let mut document = api_group(group);
    crate::object::set(&mut document, "kind", json!("APIGroup"));
    crate::object::set(&mut document, "apiVersion", json!("v1"));
    document
}

/// `APIResourceList` for `/apis/<group>/<version>`.
pub fn api_resource_list(group: &str, version: &GroupVersion) -> Value {
    let resources: Vec<Value> = version
        .resources
        .iter()
        .map(|r| {
            let mut resource = json!({
                "name": r.name, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind.2, "verbs": r.verbs,
            });
            if r.kind.0 != group || r.kind.1 != version.version {
                crate::object::set(&mut resource, "group", json!(r.kind.0));
                crate::object::set(&mut resource, "version", json!(r.kind.1));
            }
            if !r.short_names.is_empty() {
                crate::object::set(&mut resource, "shortNames", json!(r.short_names));
            }
            if !r.categories.is_empty() {
                crate::object::set(&mut resource, "categories", json!(r.categories));
            }
            if let Some(hash) = &r.storage_version_hash {
                crate::object::set(&mut resource, "storageVersionHash", json!(hash));
            }
            resource
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, &version.version), "resources": resources})
}

/// `APIGroupDiscoveryList` (aggregated discovery v2).
pub fn aggregated(groups: &[Group]) -> Value {
    let items: Vec<Value> = groups
        .iter()
        .map(|group| {
            let versions: Vec<Value> = group
                .versions
                .iter()
                .map(|v| {
                    let mut resources: Vec<Value> = Vec::new();
                    for r in v.resources.iter().filter(|r| !r.name.contains('/')) {
                        let response_kind = json!({"group": r.kind.0, "version": r.kind.1, "kind": r.kind.2});
                        let subresources: Vec<Value> = v
                            .resources
                            .iter()
                            .filter_map(|s| {
                                let sub = s.name.strip_prefix(&format!("{}/", r.name))?;
                                Some(json!({"subresource": sub, "responseKind": {"group": s.kind.0, "version": s.kind.1, "kind": s.kind.2}, "verbs": s.verbs}))
                            })
                            .collect();
                        let mut resource = json!({
                            "resource": r.name,
                            "responseKind": response_kind,
                            "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": r.singular,
                            "verbs": r.verbs,
                        });
                        if !r.short_names.is_empty() {
                            crate::object::set(&mut resource, "shortNames", json!(r.short_names));
                        }
                        if !r.categories.is_empty() {
                            crate::object::set(&mut resource, "categories", json!(r.categories));
                        }
                        if !subresources.is_empty() {
                            crate::object::set(&mut resource, "subresources", json!(subresources));
                        }
                        resources.push(resource);
                    }
                    json!({"version": v.version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group.name, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

/// The aggregated-discovery media type, when the client's `Accept` offers it before plain JSON.
pub const AGGREGATED_CONTENT_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client asked for aggregated discovery v2 before anything else it accepts.
pub fn wants_aggregated(ranges: &[crate::negotiate::MediaRange]) -> bool {
    for range in ranges {
        let aggregated = range.param("g") == Some("apidiscovery.k8s.io")
            && range.param("v") == Some("v2")
            && range.param("as") == Some("APIGroupDiscoveryList");
        if aggregated && range.essence == "application/json" {
            return true;
        }
        if range.param("as").is_none() && matches!(range.essence.as_str(), "application/json" | "*/*") {
            return false;
        }
    }
    false
}

/// A quoted ETag for a document.
pub fn etag(document: &Value) -> String {
    let digest = Sha256::digest(serde_json::to_vec(document).unwrap_or_default());
    format!("\"{}\"", digest.iter().take(16).map(|b| format!("{b:02X}")).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_matches_kube_apiserver() {
        // Hashes a real kube-apiserver advertises in its discovery documents.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
        assert_eq!(storage_version_hash("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"), "48tpQ8gZHFc=");
    }
}

//! Which version each stored object is encoded in, read straight from the store: the way to see
//! that a storage migration is needed, and to verify it finished (`crdctl store stats`).
//!
//! The API cannot show this: every read converts to the requested version. Only the stored
//! bytes keep the `apiVersion` they were written in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::registry::builtin;

/// Stored objects per resource and `apiVersion`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredVersions {
    /// The store revision the counts were read at.
    pub revision: u64,
    /// One row per resource, by name.
    pub resources: Vec<ResourceVersions>,
}

/// How the objects of one resource are stored.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceVersions {
    /// `plural.group` (`namespaces` for the core group).
    pub resource: String,
    /// Objects stored.
    pub objects: u64,
    /// Objects per stored `apiVersion` (`group/version`), in order.
    pub api_versions: BTreeMap<String, u64>,
}

/// Counts entries as they are read, one at a time.
#[derive(Debug, Default)]
pub struct Tally {
    resources: BTreeMap<String, BTreeMap<String, u64>>,
}

/// What the count needs of a stored object; the rest of it is skipped unparsed.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Option<std::borrow::Cow<'a, str>>,
}

impl Tally {
    /// Counts one stored entry.
    pub fn add(&mut self, key: &str, value: &[u8]) {
        let Some(resource) = resource_of(key) else { return };
        let api_version = match serde_json::from_slice::<Head<'_>>(value) {
            Ok(Head { api_version: Some(api_version) }) => api_version.into_owned(),
            Ok(Head { api_version: None }) => "(no apiVersion)".to_string(),
            Err(_) => "(not JSON)".to_string(),
        };
        *self.resources.entry(resource).or_default().entry(api_version).or_default() += 1;
    }

    /// The counts, read at `revision`.
    pub fn finish(self, revision: u64) -> StoredVersions {
        let resources = self
            .resources
            .into_iter()
            .map(|(resource, api_versions)| ResourceVersions {
                resource,
                objects: api_versions.values().sum(),
                api_versions,
            })
            .collect();
        StoredVersions { revision, resources }
    }
}

/// The resource a store key belongs to, named `<plural>.<group>` (`<plural>` in the core
/// group) whatever version its objects are served in: a built-in resource by the table's store
/// prefixes (`/registry/minions/` holds `nodes`, `/registry/deployments/` `deployments.apps`);
/// otherwise `/registry/<group>/<plural>/…` (a CRD's group always has a dot), or the key's
/// first segment for what the server keeps beside the resources (`servicenodeports`).
pub fn resource_of(key: &str) -> Option<String> {
    let built_in = builtin::RESOURCES
        .iter()
        .filter(|resource| !resource.prefix.is_empty() && key.starts_with(resource.prefix))
        .max_by_key(|resource| resource.prefix.len());
    if let Some(resource) = built_in {
        return Some(match resource.group {
            "" => resource.resource.to_string(),
            group => format!("{}.{group}", resource.resource),
        });
    }
    let mut parts = key.strip_prefix("/registry/")?.split('/');
    let first = parts.next().filter(|first| !first.is_empty())?;
    match parts.next() {
        Some(plural) if first.contains('.') => Some(format!("{plural}.{first}")),
        _ => Some(first.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_objects_per_resource_and_stored_version() {
        let mut tally = Tally::default();
        tally.add("/registry/namespaces/default", br#"{"apiVersion":"v1","kind":"Namespace"}"#);
        tally.add("/registry/example.com/crontabs/default/a", br#"{"apiVersion":"example.com/v1beta1"}"#);
        tally.add("/registry/example.com/crontabs/default/b", br#"{"apiVersion":"example.com/v1"}"#);
        tally.add("/registry/example.com/crontabs/other/c", br#"{"kind":"CronTab","apiVersion":"example.com/v1"}"#);
        tally.add("/registry/example.com/crontabs/other/d", b"\xff not json");
        tally.add("/elsewhere", b"{}");
        tally.add("/registry/configmaps/default/x", br#"{"apiVersion":"v1"}"#);
        tally.add("/registry/minions/node-1", br#"{"apiVersion":"v1"}"#);
        tally.add("/registry/deployments/default/web", br#"{"apiVersion":"apps/v1"}"#);
        tally.add("/registry/services/endpoints/default/kubernetes", br#"{"apiVersion":"v1"}"#);
        tally.add("/registry/services/specs/default/kubernetes", br#"{"apiVersion":"v1"}"#);
        tally.add("/registry/horizontalpodautoscalers/default/h", br#"{"apiVersion":"autoscaling/v2"}"#);
        tally.add(
            "/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.example.com",
            br#"{"apiVersion":"apiextensions.k8s.io/v1"}"#,
        );
        tally.add("/registry/servicenodeports/30080", br#"{"namespace":"default"}"#);
        let stats = tally.finish(7);
        assert_eq!(stats.revision, 7);
        let names: Vec<&str> = stats.resources.iter().map(|r| r.resource.as_str()).collect();
        assert_eq!(
            names,
            [
                "configmaps",
                "crontabs.example.com",
                "customresourcedefinitions.apiextensions.k8s.io",
                "deployments.apps",
                "endpoints",
                "horizontalpodautoscalers.autoscaling",
                "namespaces",
                "nodes",
                "servicenodeports",
                "services"
            ]
        );
        let crontabs = &stats.resources[1];
        assert_eq!(crontabs.objects, 4);
        let versions: Vec<(&str, u64)> = crontabs.api_versions.iter().map(|(v, n)| (v.as_str(), *n)).collect();
        assert_eq!(versions, [("(not JSON)", 1), ("example.com/v1", 2), ("example.com/v1beta1", 1)]);
    }
}

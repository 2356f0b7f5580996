//! Which version each stored object is encoded in, read straight from the store: the way to see
//! that a storage migration is needed, and to verify it finished (`crdctl store stats`).
//!
//! The API cannot show this: every read converts to the requested version. Only the stored
//! bytes keep the `apiVersion` they were written in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::registry::namespace;

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

/// The resource a store key belongs to: `/registry/namespaces/<name>` is `namespaces`,
/// `/registry/<group>/<plural>/…` is `<plural>.<group>` (a CRD group always has a dot, so it
/// is never `namespaces`).
pub fn resource_of(key: &str) -> Option<String> {
    if key.starts_with(namespace::PREFIX) {
        return Some("namespaces".to_string());
    }
    let mut parts = key.strip_prefix("/registry/")?.split('/');
    let (group, plural) = (parts.next()?, parts.next()?);
    Some(format!("{plural}.{group}"))
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
        let stats = tally.finish(7);
        assert_eq!(stats.revision, 7);
        let names: Vec<&str> = stats.resources.iter().map(|r| r.resource.as_str()).collect();
        assert_eq!(names, ["crontabs.example.com", "namespaces"]);
        let crontabs = &stats.resources[0];
        assert_eq!(crontabs.objects, 4);
        let versions: Vec<(&str, u64)> = crontabs.api_versions.iter().map(|(v, n)| (v.as_str(), *n)).collect();
        assert_eq!(versions, [("(not JSON)", 1), ("example.com/v1", 2), ("example.com/v1beta1", 1)]);
    }
}

//! Data-aware upgrade safety: what the API server would do to each stored object once the new
//! CRD is installed, and which static findings the stored objects confirm.
//!
//! For every object, at its stored `apiVersion`, and for every version the new CRD serves:
//! convert (the `None` strategy; an object that needs a conversion webhook is reported as not
//! judged, never passed), prune (a field set in the object that the new schema does not know is
//! data the next write drops), default, and validate as the API server does on create (OpenAPI,
//! list types, CEL within the cost limits), noting which failures validation ratcheting lets
//! through an update that leaves the field unchanged. An object stored in a version the new CRD
//! no longer lists cannot be read after the upgrade at all.
//!
//! [`join`] then ties each static finding with a schema path to the objects whose data
//! findings fall at or under that path; what no static finding names is listed on its own.

use std::collections::BTreeMap;

use crdctl_model::load::Crd;
use crdctl_schema::Schema;
use serde_json::Value;

use crate::finding::{Location, Report};
use crate::schema::{SchemaPath, Segment};

/// A stored object to judge, and where it was read from.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// The object, at its stored `apiVersion`.
    pub value: Value,
    /// Where it starts in its file, when read from one.
    pub location: Option<Location>,
}

/// What the upgrade does to one stored object.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFinding {
    /// The CRD.
    pub crd: String,
    /// `namespace/name`, or `name`.
    pub object: String,
    /// Where the object was read from.
    pub location: Option<Location>,
    /// The served version of the new CRD it was judged at (none for an unlisted version).
    pub version: Option<String>,
    /// Where in the object, as a JSON pointer (empty for the whole object).
    pub pointer: String,
    /// What happens.
    pub problem: Problem,
}

/// What happens to a stored object.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// Stored in this version, which the new CRD no longer lists: unreadable after the upgrade.
    UnlistedVersion(String),
    /// Set in the object, unknown to the new schema: the next write silently drops it.
    Pruned(String),
    /// Fails the new schema with the API server's message; `ratcheted`: an update that leaves
    /// the field unchanged still passes (Kubernetes ≥ 1.30), a create or a change does not.
    Invalid {
        /// The API server's text for the field (`spec.mode: Unsupported value: …`).
        message: String,
        /// Whether validation ratcheting lets unchanged updates through.
        ratcheted: bool,
    },
    /// Needs a conversion webhook to reach this version, and none was available.
    NotJudged(String),
}

/// Judges every object of `crd` (matched by group and kind) against it; how many it judged.
pub fn judge(crd: &Crd, objects: &[StoredObject]) -> (Vec<DataFinding>, usize) {
    let spec = &crd.definition.spec;
    let schemas: BTreeMap<&str, Schema> = spec
        .versions
        .iter()
        .enumerate()
        .filter(|(_, v)| v.served)
        .filter_map(|(index, v)| Some((v.name.as_str(), Schema::new(crd.schema(index)?))))
        .collect();
    let webhook = spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook");
    let mut judged = 0;
    let mut findings = Vec::new();
    for stored in objects {
        let Some(version) = version_of(&stored.value, &spec.group, &spec.names.kind) else { continue };
        judged += 1;
        let finding = |version: Option<&str>, pointer: String, problem: Problem| DataFinding {
            crd: crd.name().to_string(),
            object: object_name(&stored.value),
            location: stored.location.clone(),
            version: version.map(str::to_string),
            pointer,
            problem,
        };
        if !spec.versions.iter().any(|v| v.name == version) {
            findings.push(finding(None, String::new(), Problem::UnlistedVersion(version.to_string())));
            continue;
        }
        for (target, schema) in &schemas {
            if webhook && *target != version {
                let why = format!("reading it at {target} needs the conversion webhook");
                findings.push(finding(Some(target), String::new(), Problem::NotJudged(why)));
                continue;
            }
            let mut object = stored.value.clone();
            if let Some(fields) = object.as_object_mut() {
                fields.insert("apiVersion".into(), Value::String(format!("{}/{target}", spec.group)));
            }
            for pruned in crdctl_schema::prune_fields(&mut object, schema) {
                findings.push(finding(Some(target), pruned.pointer, Problem::Pruned(pruned.path)));
            }
            crdctl_schema::default(&mut object, schema);
            let ratcheted = crdctl_schema::check(&object, Some(&object), schema).errors;
            for error in crdctl_schema::check(&object, None, schema).errors {
                // (An error of the whole object says rules went unchecked: nothing to ratchet.)
                let ratcheted =
                    !error.pointer.is_empty() && !ratcheted.iter().any(|kept| kept.to_string() == error.to_string());
                let problem = Problem::Invalid { message: error.to_string(), ratcheted };
                findings.push(finding(Some(target), error.pointer.clone(), problem));
            }
        }
    }
    (findings, judged)
}

/// The version of `kind` in `group` an object is stored as.
fn version_of<'a>(object: &'a Value, group: &str, kind: &str) -> Option<&'a str> {
    if object.get("kind").and_then(Value::as_str) != Some(kind) {
        return None;
    }
    let api_version = object.get("apiVersion").and_then(Value::as_str)?;
    api_version.strip_prefix(group)?.strip_prefix('/')
}

fn object_name(object: &Value) -> String {
    let meta = object.get("metadata");
    let field = |name: &str| meta.and_then(|m| m.get(name)).and_then(Value::as_str).unwrap_or_default();
    match field("namespace") {
        "" => field("name").to_string(),
        namespace => format!("{namespace}/{}", field("name")),
    }
}

/// The static findings and the data joined.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Joined {
    /// Objects judged, per CRD.
    pub judged: BTreeMap<String, usize>,
    /// For each static finding (by index in the report) with a schema path: the objects whose
    /// data findings fall at or under it, in order, once each.
    pub affected: BTreeMap<usize, Vec<String>>,
    /// The data findings (by index) no static finding names.
    pub unmatched: Vec<usize>,
}

/// Ties the static `report` and the `data` findings together; `judged` is how many objects
/// of each CRD were judged.
pub fn join(report: &Report, data: &[DataFinding], judged: BTreeMap<String, usize>) -> Joined {
    let mut joined = Joined { judged, ..Joined::default() };
    let mut matched = std::collections::BTreeSet::new();
    for (index, finding) in report.findings.iter().enumerate() {
        let Some(path) = &finding.path else { continue };
        let mut objects: Vec<String> = Vec::new();
        for (at, datum) in data.iter().enumerate() {
            if datum.crd == finding.crd && !datum.pointer.is_empty() && covers(path, &datum.pointer) {
                matched.insert(at);
                if !objects.contains(&datum.object) {
                    objects.push(datum.object.clone());
                }
            }
        }
        joined.affected.insert(index, objects);
    }
    joined.unmatched = (0..data.len()).filter(|at| !matched.contains(at)).collect();
    joined
}

/// Whether the object node at `pointer` is the schema node at `path` or under it.
fn covers(path: &SchemaPath, pointer: &str) -> bool {
    let mut steps = pointer.split('/').skip(1);
    for segment in &path.0 {
        let matches = match segment {
            Segment::Property(name) => steps.next().is_some_and(|step| unescape(step) == *name),
            Segment::Items => steps.next().is_some_and(|step| step.bytes().all(|b| b.is_ascii_digit())),
            Segment::AdditionalProperties => steps.next().is_some(),
            // Combinators and the like name no step of the object.
            _ => true,
        };
        if !matches {
            return false;
        }
    }
    true
}

fn unescape(step: &str) -> String {
    step.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_path_covers_the_object_nodes_at_and_under_it() {
        let path = SchemaPath::from_pointer("/properties/spec/properties/items/items/properties/name");
        assert!(covers(&path, "/spec/items/3/name"));
        assert!(covers(&path, "/spec/items/0/name/first"));
        assert!(!covers(&path, "/spec/items/x/name"));
        assert!(!covers(&path, "/spec/items"));
        let map = SchemaPath::from_pointer("/properties/spec/properties/labels/additionalProperties");
        assert!(covers(&map, "/spec/labels/a~1b"));
    }
}

//! Data-aware upgrade safety: what the API server would do to each stored object once the new
//! CRD is installed, and which static findings the stored objects confirm.
//!
//! For every object, at its stored `apiVersion`, and for every version the new CRD serves:
//! convert (the `None` strategy; an object that needs a conversion webhook is reported as not
//! judged, never passed), prune (a field set in the object that the new schema does not know,
//! and the installed one did, is data the next write drops), default, and validate as the API server does on create (OpenAPI,
//! list types, CEL within the cost limits), noting which failures validation ratcheting lets
//! through an update that leaves the field unchanged. An object stored in a version the new CRD
//! no longer lists cannot be read after the upgrade at all.
//!
//! [`Judge`] does it a page of objects at a time. [`join`] then ties each static finding with a schema path to the objects whose data
//! findings fall at or under that path; what no static finding names is listed on its own.

use std::collections::BTreeMap;

use crdctl_model::field::escape_pointer_segment;
use crdctl_model::load::Crd;
use crdctl_schema::Schema;
use serde_json::Value;

use crate::finding::{Location, Report, Scope};
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
    /// Could not be converted to this version (why): not judged there.
    NotJudged(String),
    /// Converted to this version and back to the one it is stored in (named here), it differs
    /// at the finding's pointer: the conversion loses data.
    Lossy(String),
}

/// Converts objects to an `apiVersion` as the API server's converter for the new CRD would
/// (the objects may be in several versions); an error means they cannot be judged there.
/// Asynchronous, since a webhook is I/O; this crate does none itself.
pub trait Convert: Send {
    /// `objects` at `api_version`, in order.
    fn convert(
        &mut self,
        objects: Vec<Value>,
        api_version: &str,
    ) -> impl Future<Output = Result<Vec<Value>, String>> + Send;

    /// Whether converting cannot lose data (no round trip needs checking).
    fn lossless(&self) -> bool {
        false
    }

    /// Whether converting only sets `apiVersion` (the `None` strategy), so that the objects can
    /// be judged where they are rather than converted copies.
    fn sets_api_version_only(&self) -> bool {
        false
    }
}

/// The `None` strategy: only `apiVersion` changes. A webhook that is not reachable says why
/// (`Unavailable`).
pub enum Conversion {
    /// `None`.
    None,
    /// A webhook this check cannot call: objects that need it are not judged.
    Unavailable(String),
}

impl Convert for Conversion {
    async fn convert(&mut self, mut objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>, String> {
        if let Conversion::Unavailable(why) = self {
            let converted = objects.iter().all(|o| o.get("apiVersion").and_then(Value::as_str) == Some(api_version));
            return if converted { Ok(objects) } else { Err(why.clone()) };
        }
        for object in &mut objects {
            if let Some(fields) = object.as_object_mut() {
                fields.insert("apiVersion".into(), Value::String(api_version.to_string()));
            }
        }
        Ok(objects)
    }

    fn lossless(&self) -> bool {
        // `None` changes only `apiVersion`; an unavailable webhook converts nothing.
        true
    }

    fn sets_api_version_only(&self) -> bool {
        matches!(self, Conversion::None)
    }
}

/// A new CRD made ready to judge stored objects, page after page: each served version's schema
/// compiled once, and the installed CRD's, so that a field is reported as pruned only where the
/// installed schema of that version kept it.
pub struct Judge<'a> {
    crd: &'a Crd,
    schemas: BTreeMap<&'a str, Schema>,
    before: BTreeMap<&'a str, Schema>,
}

impl<'a> Judge<'a> {
    /// Judges objects against `crd`, which replaces `installed`.
    pub fn new(crd: &'a Crd, installed: Option<&'a Crd>) -> Judge<'a> {
        let before = installed.map(|installed| compiled_schemas(installed, |_| true)).unwrap_or_default();
        Judge { crd, schemas: compiled_schemas(crd, |v| v.served), before }
    }

    /// The new CRD.
    pub fn crd(&self) -> &'a Crd {
        self.crd
    }

    /// Judges every object of the CRD among `objects` (matched by group and kind), converting
    /// with `convert`; how many objects it judged. With a conversion that only sets
    /// `apiVersion`, each object is judged in place at each version (with its `apiVersion` set
    /// there, then restored), and copied only where pruning or defaulting would change it.
    pub async fn judge(&self, objects: &mut [StoredObject], convert: &mut impl Convert) -> (Vec<DataFinding>, usize) {
        let spec = &self.crd.definition.spec;
        let mut findings = Findings { crd: self.crd.name(), found: Vec::new() };
        // The objects of this CRD, with their stored versions; those in an unlisted version stop here.
        let mut listed: Vec<Listed<'_, 'a>> = Vec::new();
        let mut judged = 0;
        for (at, stored) in objects.iter_mut().enumerate() {
            let Some(version) = version_of(&stored.value, &spec.group, &spec.names.kind) else { continue };
            judged += 1;
            match spec.versions.iter().find(|v| v.name == version) {
                Some(listed_version) => listed.push(Listed { at, stored, version: &listed_version.name }),
                None => {
                    let problem = Problem::UnlistedVersion(version.to_string());
                    findings.add(at, stored, None, String::new(), problem);
                }
            }
        }
        for (target, schema) in &self.schemas {
            let admit = |object: &mut Value| admit(object, schema, self.before.get(target));
            let mut api_version = format!("{}/{target}", spec.group);
            if !convert.sets_api_version_only() {
                self.judge_converted(&listed, target, &api_version, convert, &mut findings, admit).await;
                continue;
            }
            for Listed { at, stored, .. } in &mut listed {
                let problems = in_version(&mut stored.value, &mut api_version, |object| {
                    match crdctl_schema::prune_and_default_change(object, schema) {
                        true => admit(&mut object.clone()),
                        false => validate(object, schema),
                    }
                });
                findings.extend(*at, stored, target, problems);
            }
        }
        // Object by object, in the order they were read; each one's versions in order.
        findings.found.sort_by_key(|(at, _)| *at);
        (findings.found.into_iter().map(|(_, finding)| finding).collect(), judged)
    }

    /// Judges `listed` at `target` through a conversion that makes new objects (a webhook).
    async fn judge_converted(
        &self,
        listed: &[Listed<'_, 'a>],
        target: &str,
        api_version: &str,
        convert: &mut impl Convert,
        findings: &mut Findings<'_>,
        admit: impl Fn(&mut Value) -> Vec<(String, Problem)>,
    ) {
        let batch: Vec<Value> = listed.iter().map(|listed| listed.stored.value.clone()).collect();
        let not_judged = |findings: &mut Findings<'_>, listed: &Listed<'_, '_>, why: &str| {
            findings.add(listed.at, listed.stored, Some(target), String::new(), Problem::NotJudged(why.to_string()));
        };
        let converted = match convert.convert(batch, api_version).await {
            Ok(converted) if converted.len() == listed.len() => converted,
            Ok(_) => {
                let why = "the conversion returned another number of objects";
                listed.iter().for_each(|listed| not_judged(findings, listed, why));
                return;
            }
            Err(why) => {
                // Objects already at this version need no conversion: judge those alone.
                let why = format!("converting it to {target}: {why}");
                for listed in listed {
                    match listed.version == target {
                        true => {
                            findings.extend(listed.at, listed.stored, target, admit(&mut listed.stored.value.clone()))
                        }
                        false => not_judged(findings, listed, &why),
                    }
                }
                return;
            }
        };
        if !convert.lossless() {
            for (at, pointer) in round_trip(convert, listed, &converted, target, &self.crd.definition.spec.group).await
            {
                if let Some(listed) = listed.get(at) {
                    let problem = Problem::Lossy(listed.version.to_string());
                    findings.add(listed.at, listed.stored, Some(target), pointer, problem);
                }
            }
        }
        for (listed, mut object) in listed.iter().zip(converted) {
            findings.extend(listed.at, listed.stored, target, admit(&mut object));
        }
    }

    /// [`Judge::judge`] with a conversion that never waits (`None`, or a webhook out of
    /// reach): no runtime needed.
    pub fn judge_locally(
        &self,
        objects: &mut [StoredObject],
        conversion: &mut Conversion,
    ) -> (Vec<DataFinding>, usize) {
        // Nothing in a local conversion waits, so the future is done on its first poll.
        poll_once(self.judge(objects, conversion)).unwrap_or_default()
    }
}

/// An object of the CRD judged, in a version the new CRD lists.
struct Listed<'o, 'a> {
    /// Its index among the objects judged.
    at: usize,
    stored: &'o mut StoredObject,
    /// The version it is stored in.
    version: &'a str,
}

/// The findings of one page, each with the index of its object.
struct Findings<'a> {
    crd: &'a str,
    found: Vec<(usize, DataFinding)>,
}

impl Findings<'_> {
    fn add(&mut self, at: usize, stored: &StoredObject, version: Option<&str>, pointer: String, problem: Problem) {
        let finding = DataFinding {
            crd: self.crd.to_string(),
            object: object_name(&stored.value),
            location: stored.location.clone(),
            version: version.map(str::to_string),
            pointer,
            problem,
        };
        self.found.push((at, finding));
    }

    fn extend(&mut self, at: usize, stored: &StoredObject, version: &str, problems: Vec<(String, Problem)>) {
        for (pointer, problem) in problems {
            self.add(at, stored, Some(version), pointer, problem);
        }
    }
}

/// A future's output if it is ready on the first poll.
fn poll_once<T>(future: impl Future<Output = T>) -> Option<T> {
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(value) => Some(value),
        std::task::Poll::Pending => None,
    }
}

/// `judge` of `object` with its `apiVersion` swapped for `api_version` (and back after).
fn in_version<T>(object: &mut Value, api_version: &mut String, judge: impl FnOnce(&mut Value) -> T) -> T {
    let Some(Value::String(stored_as)) = object.get_mut("apiVersion") else { return judge(object) };
    std::mem::swap(stored_as, api_version);
    let judged = judge(object);
    if let Some(Value::String(stored_as)) = object.get_mut("apiVersion") {
        std::mem::swap(stored_as, api_version);
    }
    judged
}

/// What the API server does to an object at a version once it is read or written: prune,
/// default, then [`validate`]. A field the installed CRD's schema of this version (`before`)
/// prunes too is no finding: reads there drop it before and after the upgrade alike.
fn admit(object: &mut Value, schema: &Schema, before: Option<&Schema>) -> Vec<(String, Problem)> {
    let mut pruned = crdctl_schema::prune_fields(object, schema);
    if let Some(before) = before {
        pruned.retain(|p| crdctl_schema::keeps(before, &p.pointer));
    }
    let mut problems: Vec<(String, Problem)> =
        pruned.into_iter().map(|pruned| (pruned.pointer, Problem::Pruned(pruned.path))).collect();
    crdctl_schema::default(object, schema);
    problems.extend(validate(object, schema));
    problems
}

/// Validates a pruned and defaulted object as on create, and an invalid one again as an update
/// leaving it unchanged, to tell what ratcheting lets through.
fn validate(object: &Value, schema: &Schema) -> Vec<(String, Problem)> {
    let errors = crdctl_schema::check(object, None, schema).errors;
    // Only an invalid object is checked again as an unchanged update.
    let kept = if errors.is_empty() { Vec::new() } else { crdctl_schema::check(object, Some(object), schema).errors };
    // That rules went unchecked beside the errors named is no failure of its own.
    let failed = errors.into_iter().filter(|e| e.detail != crdctl_schema::RULES_NOT_CHECKED);
    failed
        .map(|error| {
            let ratcheted = !kept.iter().any(|k| k.to_string() == error.to_string());
            (error.pointer.clone(), Problem::Invalid { message: error.to_string(), ratcheted })
        })
        .collect()
}

/// Each version's compiled schema, of the versions `keep` keeps.
fn compiled_schemas(crd: &Crd, keep: impl Fn(&crdctl_model::crd::Version) -> bool) -> BTreeMap<&str, Schema> {
    let versions = crd.definition.spec.versions.iter().enumerate().filter(|(_, v)| keep(v));
    versions.filter_map(|(index, v)| Some((v.name.as_str(), Schema::new(crd.schema(index)?)))).collect()
}

/// Converts each converted object back to the version it is stored in and compares: the first
/// place each one differs, by index into `listed` (a conversion that failed on the way back is
/// no finding of its own: the way there worked).
async fn round_trip(
    convert: &mut impl Convert,
    listed: &[Listed<'_, '_>],
    converted: &[Value],
    target: &str,
    group: &str,
) -> Vec<(usize, String)> {
    let mut by_version: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (at, listed) in listed.iter().enumerate() {
        if listed.version != target {
            by_version.entry(listed.version).or_default().push(at);
        }
    }
    let mut lossy = Vec::new();
    for (version, indices) in by_version {
        let batch: Vec<Value> = indices.iter().filter_map(|at| converted.get(*at).cloned()).collect();
        let Ok(back) = convert.convert(batch, &format!("{group}/{version}")).await else { continue };
        for (at, back) in indices.into_iter().zip(back) {
            if let Some(pointer) = listed.get(at).and_then(|listed| first_difference(&listed.stored.value, &back, "")) {
                lossy.push((at, pointer));
            }
        }
    }
    lossy
}

/// The first place (JSON pointer) two values differ, `metadata` aside (the API server keeps its
/// own), in document order.
fn first_difference(before: &Value, after: &Value, at: &str) -> Option<String> {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                if at.is_empty() && key == "metadata" {
                    continue;
                }
                let here = format!("{at}/{}", escape_pointer_segment(key));
                match b.get(key) {
                    Some(other) => {
                        if let Some(found) = first_difference(value, other, &here) {
                            return Some(found);
                        }
                    }
                    None => return Some(here),
                }
            }
            let added = b.keys().find(|k| !(a.contains_key(*k) || at.is_empty() && *k == "metadata"));
            added.map(|k| format!("{at}/{}", escape_pointer_segment(k)))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| first_difference(x, y, &format!("{at}/{i}")))
        }
        _ if before == after => None,
        _ => Some(at.to_string()),
    }
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
    /// For each static finding (by index in the report) with a schema path that stored objects
    /// can show ([`crate::Change::judged_by_data`]): the objects whose data findings fall at or
    /// under it, in order, once each.
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
        let Some(path) = finding.path.as_ref().filter(|_| finding.change.judged_by_data()) else { continue };
        let mut objects: Vec<String> = Vec::new();
        for (at, datum) in data.iter().enumerate() {
            let placed = matches!(datum.problem, Problem::Pruned(_) | Problem::Invalid { .. } | Problem::Lossy(_));
            if datum.crd == finding.crd
                && placed
                && in_scope(&finding.scope, datum.version.as_deref())
                && covers(path, &datum.pointer)
            {
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

/// Whether a data finding at `version` is about what a static finding of `scope` compares.
fn in_scope(scope: &Scope, version: Option<&str>) -> bool {
    match scope {
        Scope::Crd => true,
        Scope::Version(v) => version == Some(v.as_str()),
        Scope::ServedPair(a, b) => version == Some(a.as_str()) || version == Some(b.as_str()),
    }
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
    use serde_json::json;

    use super::*;

    /// The converters here never wait, so a future finishes on its first poll.
    fn block_on<T>(future: impl Future<Output = T>) -> T {
        poll_once(future).expect("the converters here never wait")
    }

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {url: 'https://127.0.0.1:9/'}}}
  versions:
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, properties: {host: {type: string}, port: {type: string}}}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, properties: {hostPort: {type: string, pattern: '^[a-z]+:[0-9]+$'}}}}}
";

    /// The example webhook's conversion (host and port ↔ hostPort) with a bug: the way back
    /// drops the port.
    struct DropsThePort;

    impl Convert for DropsThePort {
        async fn convert(&mut self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>, String> {
            Ok(objects
                .into_iter()
                .map(|mut o| {
                    let fields = o.as_object_mut().unwrap();
                    if api_version.ends_with("/v1") && fields["apiVersion"] != api_version {
                        let host_port =
                            format!("{}:{}", fields["host"].as_str().unwrap(), fields["port"].as_str().unwrap());
                        fields.remove("host");
                        fields.remove("port");
                        fields.insert("hostPort".into(), json!(host_port));
                    } else if api_version.ends_with("/v1beta1") && fields["apiVersion"] != api_version {
                        let host_port = fields.remove("hostPort").unwrap();
                        let host = host_port.as_str().unwrap().split(':').next().unwrap().to_string();
                        fields.insert("host".into(), json!(host));
                    }
                    fields.insert("apiVersion".into(), json!(api_version));
                    o
                })
                .collect())
        }
    }

    fn stored(host: &str, port: &str) -> StoredObject {
        let value = json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab",
            "metadata": {"name": host, "namespace": "default"}, "host": host, "port": port});
        StoredObject { value, location: None }
    }

    #[test]
    fn a_conversion_that_loses_a_field_on_the_way_back_is_found() {
        let crd = crdctl_model::load::load_str("crd.yaml", CRD).unwrap().remove(0);
        let mut objects = [stored("a", "80"), stored("b", "http")];
        let (findings, judged) = block_on(Judge::new(&crd, None).judge(&mut objects, &mut DropsThePort));
        assert_eq!(judged, 2);
        let found: Vec<(&str, Option<&str>, &str, &Problem)> = findings
            .iter()
            .map(|f| (f.object.as_str(), f.version.as_deref(), f.pointer.as_str(), &f.problem))
            .collect();
        assert_eq!(
            found,
            [
                ("default/a", Some("v1"), "/port", &Problem::Lossy("v1beta1".into())),
                ("default/b", Some("v1"), "/port", &Problem::Lossy("v1beta1".into())),
                (
                    "default/b",
                    Some("v1"),
                    "/hostPort",
                    &Problem::Invalid {
                        message:
                            r#"hostPort: Invalid value: "b:http": hostPort in body should match '^[a-z]+:[0-9]+$'"#
                                .into(),
                        ratcheted: true
                    }
                ),
            ]
        );
    }

    #[test]
    fn without_the_webhook_objects_that_need_it_are_not_judged() {
        let crd = crdctl_model::load::load_str("crd.yaml", CRD).unwrap().remove(0);
        let mut unavailable = Conversion::Unavailable("no webhook".into());
        let (findings, _) = block_on(Judge::new(&crd, None).judge(&mut [stored("a", "80")], &mut unavailable));
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            (findings[0].version.as_deref(), &findings[0].problem),
            (Some("v1"), &Problem::NotJudged("converting it to v1: no webhook".into()))
        );
    }

    /// The `None` strategy as a webhook would do it, on copies: what judging in place matches.
    struct CopiesToo;

    impl Convert for CopiesToo {
        async fn convert(&mut self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>, String> {
            Conversion::None.convert(objects, api_version).await
        }

        fn lossless(&self) -> bool {
            true
        }
    }

    #[test]
    fn judging_in_place_finds_what_judging_copies_finds_and_leaves_the_objects_as_they_were() {
        let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {host: {type: string}, port: {type: string, default: '80'}}}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations: [{rule: \"self.apiVersion == 'example.com/v1'\", message: judged as v1}]
        properties: {host: {type: string, maxLength: 3}, port: {type: string, pattern: '^[0-9]+$'}}
";
        let crd = crdctl_model::load::load_str("crd.yaml", crd).unwrap().remove(0);
        let object = |version: &str, fields: Value| {
            let mut value = json!({"apiVersion": format!("example.com/{version}"), "kind": "CronTab",
                "metadata": {"name": format!("o{fields}"), "namespace": "default"}});
            value.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            StoredObject { value, location: None }
        };
        let mut objects = vec![
            object("v1", json!({"host": "a", "port": "80"})),
            object("v1beta1", json!({"host": "a", "port": "80"})),
            object("v1beta1", json!({"host": "long", "port": "http"})),
            object("v1", json!({"host": "a"})),
            object("v1", json!({"host": "a", "port": "80", "extra": 1})),
            object("v1beta1", json!({"port": null})),
        ];
        let stored: Vec<Value> = objects.iter().map(|o| o.value.clone()).collect();
        let judge = Judge::new(&crd, None);
        let (in_place, judged) = judge.judge_locally(&mut objects, &mut Conversion::None);
        assert_eq!(judged, 6);
        assert_eq!(objects.iter().map(|o| &o.value).collect::<Vec<_>>(), stored.iter().collect::<Vec<_>>());
        let (copied, _) = block_on(judge.judge(&mut objects, &mut CopiesToo));
        assert_eq!(in_place, copied);
        // The rule reading `apiVersion` holds for each object judged at v1, wherever it is stored.
        let problems: Vec<(&str, &str, &str)> =
            in_place.iter().map(|f| (f.object.as_str(), f.version.as_deref().unwrap(), f.pointer.as_str())).collect();
        assert_eq!(
            problems,
            [
                (r#"default/o{"host":"long","port":"http"}"#, "v1", "/host"),
                (r#"default/o{"host":"long","port":"http"}"#, "v1", "/port"),
                (r#"default/o{"host":"a","port":"80","extra":1}"#, "v1", "/extra"),
                (r#"default/o{"host":"a","port":"80","extra":1}"#, "v1beta1", "/extra"),
            ],
            "{in_place:#?}"
        );
    }

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

//! Conversion fuzzing: objects made from each served version's schema are converted through
//! the other versions and back, and every field that does not come back as it went is reported
//! with the smallest object that still shows it.
//!
//! For each served version A, [`run`] makes objects with [`crdctl_schema::generate`] and keeps
//! those the version's own validation accepts (schema and CEL rules, as the API server would
//! store them; the rest are counted as rejected). Each goes A → B → A for every other served
//! version B and A → B → C → A for every pair of them. A difference is judged `lost` (the field
//! is gone), `defaulted` (a field appeared), `reordered` (a list holds the same items in
//! another order) or `changed`. The object is then shrunk: optional fields and list items are
//! taken away one at a time while the object stays valid and the same difference stays. Beside
//! the findings, the report lists the fields a version cannot represent (in A's schema, not in
//! B's), which only a lossless design — annotations, as upstream advises — can carry through.
//!
//! The conversion itself is anything that implements [`Convert`]: the webhook client, or an
//! in-process conversion function ([`InProcess`]), so an operator's Rust tests can fuzz the
//! function they deploy without a server.

use std::collections::BTreeSet;

use crdctl_model::Crd;
use crdctl_schema::Schema;
use crdctl_schema::generate::Generator;
use serde::Serialize;
use serde_json::Value;

pub use crate::difference::Verdict;
use crate::difference::{Difference, differences, generic};

/// Converts one object to `api_version`.
pub trait Convert {
    /// The converted object, or why the conversion failed.
    fn convert(&self, object: Value, api_version: &str) -> impl Future<Output = Result<Value, Failure>>;
}

/// Why a conversion gave no object.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The conversion answered with an error (or an answer the API server refuses): a finding.
    Refused(String),
    /// No answer at all (the webhook is down or times out): the run stops.
    Unreachable(String),
}

/// A conversion function run in process (the one the framework's `serve` would serve), with
/// `apiVersion` set afterwards as the framework sets it.
pub struct InProcess<F>(pub F);

impl<F: Fn(Value, &str) -> Result<Value, String>> Convert for InProcess<F> {
    async fn convert(&self, object: Value, api_version: &str) -> Result<Value, Failure> {
        let mut converted = (self.0)(object, api_version).map_err(Failure::Refused)?;
        if let Some(fields) = converted.as_object_mut() {
            fields.insert("apiVersion".into(), Value::String(api_version.into()));
        }
        Ok(converted)
    }
}

#[cfg(feature = "client")]
impl Convert for crate::webhook::WebhookClient {
    async fn convert(&self, object: Value, api_version: &str) -> Result<Value, Failure> {
        let converted = crate::webhook::WebhookClient::convert(self, vec![object], api_version, crate::Shape::Object);
        let mut converted = converted.await.map_err(|err| match err.answered {
            true => Failure::Refused(err.message),
            false => Failure::Unreachable(err.message),
        })?;
        converted.pop().ok_or_else(|| Failure::Refused("the webhook returned no object".into()))
    }
}

/// How much to make.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The seed every object is made from.
    pub seed: u64,
    /// Objects made per served version.
    pub objects: usize,
    /// The most items a generated list or map holds.
    pub size: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { seed: 0, objects: 50, size: 3 }
    }
}

/// What a fuzzing run found.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The CRD.
    pub crd: String,
    /// Per served version: objects made, and those its validation refused.
    pub versions: Vec<VersionCount>,
    /// Round trips made.
    pub round_trips: usize,
    /// Each difference a round trip showed, once per route, path and verdict.
    pub findings: Vec<Finding>,
    /// Fields of one version another cannot represent.
    pub unrepresentable: Vec<Unrepresentable>,
}

/// Objects made for one version.
#[derive(Debug, Serialize)]
pub struct VersionCount {
    /// The version.
    pub version: String,
    /// Objects kept (valid) and sent.
    pub kept: usize,
    /// Objects its validation refused.
    pub rejected: usize,
}

/// One field a round trip did not bring back as it went.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The versions, first and last the same: `[v1, v2, v1]`.
    pub route: Vec<String>,
    /// Where in the object, `.spec.items[0].name`.
    pub path: String,
    /// `lost`, `defaulted`, `reordered`, `changed` or `refused`.
    pub verdict: Verdict,
    /// The value before (absent: `None`).
    pub before: Option<Value>,
    /// The value after.
    pub after: Option<Value>,
    /// The smallest object found that shows it.
    pub object: Value,
}

/// A field of `from` that `to` has no place for.
#[derive(Debug, Serialize)]
pub struct Unrepresentable {
    /// The version with the field.
    pub from: String,
    /// The version without it.
    pub to: String,
    /// The field, `.spec.port`.
    pub path: String,
}

/// The most conversions shrinking one finding may cost.
const SHRINK_BUDGET: usize = 300;

/// Fuzzes `converter` with objects made from `crd`'s served versions, and `seeds` (objects in
/// any served version, e.g. the stored ones) besides.
pub async fn run(crd: &Crd, converter: &impl Convert, options: Options, seeds: &[Value]) -> Result<Report, String> {
    let spec = &crd.definition.spec;
    let served: Vec<(String, Schema)> = crd
        .definition
        .served_versions_by_priority()
        .into_iter()
        .map(|version| {
            let index = spec.versions.iter().position(|v| v.name == version.name).unwrap_or_default();
            (format!("{}/{}", spec.group, version.name), Schema::new(crd.schema(index).unwrap_or(&Value::Null)))
        })
        .collect();
    let namespace = (spec.scope == "Namespaced").then_some("default");
    let mut report = Report { crd: crd.name().to_string(), ..Report::default() };
    let mut seen = BTreeSet::new();
    for (at, (api_version, schema)) in served.iter().enumerate() {
        let mut generator = Generator::new(options.seed.wrapping_add(at as u64), options.size);
        let made = (0..options.objects)
            .map(|n| generator.resource(schema, api_version, &spec.names.kind, &format!("fuzz-{n}"), namespace));
        let given = seeds.iter().filter(|object| object.get("apiVersion").and_then(Value::as_str) == Some(api_version));
        let (valid, rejected): (Vec<Value>, Vec<Value>) =
            made.chain(given.cloned()).partition(|object| crdctl_schema::check(object, None, schema).errors.is_empty());
        report.versions.push(VersionCount {
            version: api_version.clone(),
            kept: valid.len(),
            rejected: rejected.len(),
        });
        let fuzz = Fuzz { converter, schema };
        for object in &valid {
            for route in routes(api_version, &served) {
                report.round_trips += 1;
                for difference in fuzz.outcome(object, &route).await? {
                    let key = (route.clone(), generic(&difference.path), difference.verdict);
                    if !seen.insert(key) {
                        continue;
                    }
                    let finding = fuzz.shrink(object, &route, difference).await?;
                    report.findings.push(finding);
                }
            }
        }
        for (other, other_schema) in served.iter().filter(|(other, _)| other != api_version) {
            for path in missing_fields(schema, other_schema, "") {
                report.unrepresentable.push(Unrepresentable { from: api_version.clone(), to: other.clone(), path });
            }
        }
    }
    Ok(report)
}

/// The routes from `start`: through each other version and back, and through each ordered pair.
fn routes(start: &str, served: &[(String, Schema)]) -> Vec<Vec<String>> {
    let others: Vec<&String> = served.iter().map(|(v, _)| v).filter(|v| *v != start).collect();
    let mut routes: Vec<Vec<String>> = others.iter().map(|b| vec![start.into(), (*b).clone(), start.into()]).collect();
    for b in &others {
        for c in others.iter().filter(|c| *c != b) {
            routes.push(vec![start.into(), (*b).clone(), (*c).clone(), start.into()]);
        }
    }
    routes
}

struct Fuzz<'a, C> {
    converter: &'a C,
    schema: &'a Schema,
}

impl<C: Convert> Fuzz<'_, C> {
    /// What a round trip along `route` (its first stop is where `object` is) does to `object`:
    /// its differences, or the one refusal that stopped it. An unreachable converter is an error.
    async fn outcome(&self, object: &Value, route: &[String]) -> Result<Vec<Difference>, String> {
        let mut current = object.clone();
        for stop in route.iter().skip(1) {
            current = match self.converter.convert(current, stop).await {
                Ok(converted) => converted,
                Err(Failure::Refused(message)) => {
                    let after = Some(Value::String(format!("converting to {stop}: {message}")));
                    return Ok(vec![Difference { path: ".".into(), verdict: Verdict::Refused, before: None, after }]);
                }
                Err(Failure::Unreachable(message)) => return Err(format!("converting to {stop}: {message}")),
            };
        }
        Ok(differences(object, &current))
    }

    /// The smallest object found that still shows `difference` on `route`: optional fields and
    /// list items go one at a time while the object stays valid and the difference stays.
    async fn shrink(&self, object: &Value, route: &[String], difference: Difference) -> Result<Finding, String> {
        let mut smallest = object.clone();
        let mut shown = difference;
        let mut budget = SHRINK_BUDGET;
        'smaller: loop {
            for candidate in smaller(&smallest) {
                if budget == 0 {
                    break 'smaller;
                }
                if !crdctl_schema::check(&candidate, None, self.schema).errors.is_empty() {
                    continue;
                }
                budget -= 1;
                let same = self
                    .outcome(&candidate, route)
                    .await?
                    .into_iter()
                    .find(|d| generic(&d.path) == generic(&shown.path) && d.verdict == shown.verdict);
                if let Some(same) = same {
                    smallest = candidate;
                    shown = same;
                    continue 'smaller;
                }
            }
            break;
        }
        Ok(Finding {
            route: route.to_vec(),
            path: shown.path,
            verdict: shown.verdict,
            before: shown.before,
            after: shown.after,
            object: smallest,
        })
    }
}

/// Each object one step smaller than `object`: one field (outside `apiVersion`, `kind` and
/// `metadata`) or one list item fewer.
fn smaller(object: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pointers = Vec::new();
    removable(object, String::new(), true, &mut pointers);
    for pointer in pointers {
        let mut candidate = object.clone();
        let Some((parent, last)) = pointer.rsplit_once('/') else { continue };
        match candidate.pointer_mut(parent) {
            Some(Value::Object(fields)) => {
                fields.remove(&last.replace("~1", "/").replace("~0", "~"));
            }
            Some(Value::Array(items)) => {
                if let Some(at) = last.parse::<usize>().ok().filter(|at| *at < items.len()) {
                    items.remove(at);
                }
            }
            _ => continue,
        }
        out.push(candidate);
    }
    out
}

/// The pointers of every field and list item under `value`, outermost first.
fn removable(value: &Value, pointer: String, root: bool, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (name, child) in fields {
                if root && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_pointer = format!("{pointer}/{}", name.replace('~', "~0").replace('/', "~1"));
                out.push(child_pointer.clone());
                removable(child, child_pointer, false, out);
            }
        }
        Value::Array(items) => {
            for (at, child) in items.iter().enumerate() {
                let child_pointer = format!("{pointer}/{at}");
                out.push(child_pointer.clone());
                removable(child, child_pointer, false, out);
            }
        }
        _ => {}
    }
}

/// The fields under `from` that `to` has no place for (a property `from` declares where `to`
/// neither declares it nor keeps unknown fields), as `.spec.port` paths.
fn missing_fields(from: &Schema, to: &Schema, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (name, child) in &from.properties {
        let here = format!("{path}.{name}");
        if path.is_empty() && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match to.properties.get(name) {
            Some(other) => out.extend(missing_fields(child, other, &here)),
            None if to.preserve_unknown_fields
                || matches!(to.additional_properties, Some(crdctl_schema::Additional::Schema(_))) => {}
            None => out.push(here),
        }
    }
    if let (Some(items), Some(other)) = (&from.items, &to.items) {
        out.extend(missing_fields(items, other, &format!("{path}[*]")));
    }
    out
}

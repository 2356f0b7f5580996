//! The data-aware check over the corpus's real upgrade pairs, with generated objects. For each
//! kind of static finding the pairs hold that stored objects can show, the first finding an
//! object confirms: one object with data at the finding's path that the new CRD refuses or
//! drops (found by trying the removed enum values, values just past the new bound, and a value
//! of every JSON type), and one object without; the report lines of both are a reviewed
//! snapshot, and every kind listed in [`CONFIRMED`] must be confirmed.

#![cfg(test)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crdctl_model::Crd;
use crdctl_safety::data::{self, Conversion, DataFinding, Joined, Problem, StoredObject};
use crdctl_safety::finding::Bound;
use crdctl_safety::schema::Segment;
use crdctl_safety::{Change, Config, Dialect, Finding, Report, Scope, Severity, dialect};
use serde_json::{Map, Value, json};

/// The kinds of static finding (crdify's check names) the corpus pairs must confirm with an
/// object. Not `maxItems`: the pairs' only one bounds a list of conditions, whose items no
/// generated value makes valid.
const CONFIRMED: &[&str] = &[
    "enum",
    "existingFieldRemoval",
    "maxLength",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "pattern",
    "required",
    "type",
];

/// Data findings shown per object.
const SHOWN: usize = 3;

fn pairs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/pairs");
    let mut pairs: Vec<PathBuf> =
        std::fs::read_dir(&root).expect("the corpus is beside the repository").map(|e| e.unwrap().path()).collect();
    pairs.retain(|p| p.is_dir());
    pairs.sort();
    assert_eq!(pairs.len(), 27);
    pairs
}

fn load(path: &Path) -> Crd {
    crdctl_model::load::load_file(path).unwrap_or_else(|e| panic!("{e}")).remove(0)
}

fn judge(old: &Crd, new: &Crd, report: &Report, objects: Vec<Value>) -> (Vec<DataFinding>, Joined) {
    let mut objects: Vec<StoredObject> =
        objects.into_iter().map(|value| StoredObject { value, location: None }).collect();
    let (found, judged) = data::Judge::new(new, Some(old)).judge_locally(&mut objects, &mut Conversion::None);
    let joined = data::join(report, &found, [(new.name().to_string(), judged)].into());
    (found, joined)
}

/// Values that may break the finding: its removed enum values, values just past its new bound,
/// then one of each JSON type.
fn candidates(change: &Change) -> Vec<Value> {
    let mut values = match change {
        Change::EnumValuesRemoved { values } => values.clone(),
        Change::RequiredAdded { .. } => vec![json!({})],
        Change::PatternAdded { .. } | Change::PatternChanged { .. } => vec![json!("!")],
        Change::BoundAdded { bound, value: limit } | Change::BoundTightened { bound, new: limit, .. } => {
            past(*bound, limit.as_f64().unwrap_or_default())
        }
        _ => Vec::new(),
    };
    values.extend([json!("not-a-listed-value"), json!(""), json!("!"), json!(-1), json!(1.5), json!(true)]);
    values.extend([json!({}), json!([]), json!(["x"]), json!([{}]), Value::Null]);
    values
}

/// Values just past a bound of `limit`.
fn past(bound: Bound, limit: f64) -> Vec<Value> {
    let count = limit as usize + 1;
    match bound {
        Bound::Maximum => vec![json!(limit + 1.0), json!((limit as i64) + 1)],
        Bound::Minimum => vec![json!(limit - 1.0), json!((limit as i64) - 1)],
        Bound::MaxLength => vec![json!("x".repeat(count))],
        Bound::MinLength => vec![json!("")],
        Bound::MaxItems => vec![json!(vec!["x"; count]), json!(vec![json!({}); count])],
        Bound::MinItems => vec![json!([])],
        Bound::MaxProperties => vec![Value::Object((0..count).map(|n| (format!("k{n}"), json!("x"))).collect())],
        Bound::MinProperties => vec![json!({})],
    }
}

/// A stored object of `crd` at `version` with `leaf` at `path`; `None` where the path cannot
/// be written into an object.
fn object_with(crd: &Crd, version: &str, name: &str, path: &[Segment], leaf: Value) -> Option<Value> {
    let mut value = leaf;
    for segment in path.iter().rev() {
        value = match segment {
            Segment::Property(property) => Value::Object(Map::from_iter([(property.clone(), value)])),
            Segment::Items => json!([value]),
            Segment::AdditionalProperties => json!({"key": value}),
            Segment::Combinator(..) | Segment::Not => value,
            _ => return None,
        };
    }
    let Value::Object(mut fields) = value else { return None };
    if ["apiVersion", "kind", "metadata"].iter().any(|k| fields.contains_key(*k)) {
        return None;
    }
    fields.extend(skeleton(crd, version, name));
    Some(Value::Object(fields))
}

/// `apiVersion`, `kind` and `metadata` of an object named `name`.
fn skeleton(crd: &Crd, version: &str, name: &str) -> Map<String, Value> {
    let spec = &crd.definition.spec;
    let metadata = match spec.scope.as_str() {
        "Namespaced" => json!({"name": name, "namespace": "default"}),
        _ => json!({"name": name}),
    };
    let object =
        json!({"apiVersion": format!("{}/{version}", spec.group), "kind": spec.names.kind, "metadata": metadata});
    object.as_object().cloned().unwrap_or_default()
}

/// The version a stored object showing `finding` is stored in: the version compared, or the
/// older of two served versions (it is read at the newer one).
fn version_of(finding: &Finding) -> Option<&str> {
    match &finding.scope {
        Scope::Version(version) | Scope::ServedPair(version, _) => Some(version),
        Scope::Crd => None,
    }
}

/// The first finding of each kind an object confirms in one pair: (index, the object's leaf).
fn confirmed_in(old: &Crd, new: &Crd, report: &Report, wanted: &[&str]) -> BTreeMap<&'static str, (usize, Value)> {
    let mut objects = Vec::new();
    let mut tried: Vec<(usize, Vec<Value>)> = Vec::new();
    for (index, finding) in report.findings.iter().enumerate() {
        let kind = finding.change.check();
        let (Some(path), Some(version)) = (&finding.path, version_of(finding)) else { continue };
        let shown = dialect::message(finding, Dialect::Olm).is_some();
        if !shown || finding.severity != Severity::Error || !finding.change.judged_by_data() || !wanted.contains(&kind)
        {
            continue;
        }
        let values = candidates(&finding.change);
        for (at, value) in values.iter().enumerate() {
            objects.extend(object_with(new, version, &format!("f{index}-c{at}"), &path.0, value.clone()));
        }
        tried.push((index, values));
    }
    // An object with no data at all, of each version: findings it shows (a field required at
    // the root) cannot be cleared by an object without the data.
    for version in &new.definition.spec.versions {
        objects.push(Value::Object(skeleton(new, &version.name, &format!("clear-{}", version.name))));
    }
    // A stored object was valid when it was written: values refused in the version it is
    // stored in do not count (by the installed CRD; by the new one for two served versions).
    let (installed, _) = judge(old, old, &Report::default(), objects.clone());
    let (in_new, _) = judge(old, new, &Report::default(), objects.clone());
    let (found, joined) = judge(old, new, report, objects);
    let mut confirmed = BTreeMap::new();
    for (index, values) in tried {
        let kind = report.findings[index].change.check();
        let affected = joined.affected.get(&index).cloned().unwrap_or_default();
        if confirmed.contains_key(kind) || affected.iter().any(|o| o.contains("clear-")) {
            continue;
        }
        // Of the values that confirm it, the one with the fewest data findings: the plainest
        // case of the finding (an empty object for a new required field, not a string).
        let finding = &report.findings[index];
        let pointer = pointer_of(&finding.path.as_ref().unwrap().0);
        let stored_in = version_of(finding);
        let before = if matches!(finding.scope, Scope::ServedPair(..)) { &in_new } else { &installed };
        let plainest = (0..values.len())
            .filter_map(|at| {
                let name = format!("f{index}-c{at}");
                let mine = |object: &String| object.ends_with(&name);
                let under = |f: &&DataFinding| mine(&f.object) && f.pointer.starts_with(&pointer);
                let refused = |f: &&DataFinding| {
                    under(f) && f.version.as_deref() == stored_in && matches!(f.problem, Problem::Invalid { .. })
                };
                let valid_before = !before.iter().any(|f| refused(&f));
                let count = found.iter().filter(under).count();
                (valid_before && affected.iter().any(mine)).then_some((count, at))
            })
            .min();
        if let Some((_, at)) = plainest {
            confirmed.insert(kind, (index, values[at].clone()));
        }
    }
    confirmed
}

/// The report line of static finding `index` when `object` is the one stored object, and the
/// lines of its data findings at or under `pointer`.
fn lines_of(
    old: &Crd,
    new: &Crd,
    report: &Report,
    (index, pointer): (usize, &str),
    object: Value,
) -> (String, Vec<String>) {
    let (found, joined) = judge(old, new, report, vec![object]);
    let finding = &report.findings[index];
    let text = dialect::message(finding, Dialect::Olm).unwrap();
    let prefix = format!("{}: {text} — ", finding.crd);
    let lines = dialect::data::lines(report, &found, &joined, Dialect::Olm);
    let line = lines.iter().find(|l| l.starts_with(&prefix)).cloned().unwrap_or_else(|| panic!("{prefix}: {lines:#?}"));
    let under = found.iter().filter(|f| f.pointer.starts_with(pointer)).map(dialect::data::line).collect();
    (line, under)
}

/// The object's JSON pointer [`object_with`] writes `path` at.
fn pointer_of(path: &[Segment]) -> String {
    let steps = path.iter().filter_map(|segment| match segment {
        Segment::Property(property) => Some(format!("/{}", property.replace('~', "~0").replace('/', "~1"))),
        Segment::Items => Some("/0".into()),
        Segment::AdditionalProperties => Some("/key".into()),
        _ => None,
    });
    steps.collect()
}

#[test]
fn each_kind_of_static_finding_is_confirmed_by_one_object_and_cleared_by_another() {
    let mut table = String::new();
    let mut confirmed: Vec<&str> = Vec::new();
    for pair in pairs() {
        let (old, new) = (load(&pair.join("old.yaml")), load(&pair.join("new.yaml")));
        let report = crdctl_safety::check(&old, &new, &Config::default());
        let wanted: Vec<&str> = CONFIRMED.iter().copied().filter(|k| !confirmed.contains(k)).collect();
        for (kind, (index, leaf)) in confirmed_in(&old, &new, &report, &wanted) {
            let finding = &report.findings[index];
            let (version, path) = (version_of(finding).unwrap(), &finding.path.as_ref().unwrap().0);
            let confirm = object_with(&new, version, "confirm", path, leaf).unwrap();
            let pointer = pointer_of(path);
            let (line, data) = lines_of(&old, &new, &report, (index, &pointer), confirm.clone());
            let named = if new.definition.spec.scope == "Namespaced" { "default/confirm" } else { "confirm" };
            assert!(line.ends_with(&format!("— 1 of 1 objects use it: {named}")), "{line}");
            let clear = Value::Object(skeleton(&new, version, "clear"));
            let (cleared, _) = lines_of(&old, &new, &report, (index, &pointer), clear);
            assert!(cleared.ends_with("— no stored object uses it"), "{cleared}");
            let name = pair.file_name().unwrap().to_string_lossy();
            table.push_str(&format!("## {kind} — {name}\nobject: {confirm}\n{line}\n"));
            for data in data.iter().take(SHOWN) {
                table.push_str(&format!("  {data}\n"));
            }
            if data.len() > SHOWN {
                table.push_str(&format!("  … and {} more\n", data.len() - SHOWN));
            }
            table.push_str(&format!("{cleared}\n\n"));
            confirmed.push(kind);
        }
    }
    confirmed.sort();
    assert_eq!(confirmed, CONFIRMED, "every kind is confirmed by an object");
    insta::assert_snapshot!("corpus-data-table", table);
}

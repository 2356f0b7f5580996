//! Upstream test tables for the schema machinery, run as data (`tests/upstream/*.yaml`).

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::collections::BTreeSet;

use crdctl_model::field::ErrorType;
use crdctl_schema::{Schema, validate, validate_list_types, validate_rules};
use serde::Deserialize;
use serde_json::Value;

fn table<T: for<'de> Deserialize<'de>>(name: &str) -> Vec<T> {
    let path = format!("{}/tests/upstream/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

#[derive(Deserialize)]
struct ValidationCase {
    name: String,
    schema: Value,
    #[serde(default)]
    objects: Vec<Value>,
    #[serde(default)]
    old_objects: Vec<Value>,
    #[serde(default)]
    failing: Vec<Failing>,
}

#[derive(Deserialize)]
struct Failing {
    object: Value,
    old: Option<Value>,
    #[serde(default)]
    errors: Vec<String>,
    /// For messages that quote a regex engine's own error text.
    error_prefix: Option<String>,
}

/// What upstream's test collects: the OpenAPI errors and the CEL errors.
fn messages(object: &Value, old: Option<&Value>, schema: &Schema) -> BTreeSet<String> {
    let mut errors = validate(object, schema);
    errors.extend(validate_rules(object, old, schema).errors);
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn validate_custom_resource_table() {
    let cases: Vec<ValidationCase> = table("validate_custom_resource.yaml");
    assert!(cases.len() >= 15, "the table lost cases");
    let mut problems = Vec::new();
    for case in &cases {
        let schema = Schema::new(&case.schema);
        for (idx, object) in case.objects.iter().enumerate() {
            let seen = messages(object, case.old_objects.get(idx), &schema);
            if !seen.is_empty() {
                problems.push(format!("{}: {object} should be valid, got {seen:#?}", case.name));
            }
        }
        for failing in &case.failing {
            let seen = messages(&failing.object, failing.old.as_ref(), &schema);
            match &failing.error_prefix {
                Some(prefix) => {
                    if seen.len() != 1 || !seen.iter().all(|m| m.starts_with(prefix)) {
                        problems.push(format!(
                            "{}: {}: expected one error starting {prefix:?}, got {seen:#?}",
                            case.name, failing.object
                        ));
                    }
                }
                None => {
                    let expected: BTreeSet<String> = failing.errors.iter().cloned().collect();
                    if seen != expected {
                        problems.push(format!(
                            "{}: {}:\n  missing {:#?}\n  unexpected {:#?}",
                            case.name,
                            failing.object,
                            expected.difference(&seen).collect::<Vec<_>>(),
                            seen.difference(&expected).collect::<Vec<_>>()
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[derive(Deserialize)]
struct ListCase {
    name: String,
    #[serde(default)]
    schema: Option<Value>,
    object: Value,
    #[serde(default)]
    errors: Vec<(String, String)>,
}

fn error_type(kind: &ErrorType) -> &'static str {
    match kind {
        ErrorType::Duplicate(_) => "Duplicate",
        ErrorType::Invalid(_) => "Invalid",
        _ => "other",
    }
}

#[test]
fn list_sets_and_maps_table() {
    let cases: Vec<ListCase> = table("list_sets_and_maps.yaml");
    assert!(cases.len() >= 15, "the table lost cases");
    let mut problems = Vec::new();
    for case in &cases {
        let schema = case.schema.as_ref().map(Schema::new).unwrap_or_default();
        let mut seen: Vec<(String, String)> = validate_list_types(&case.object, &schema)
            .iter()
            .map(|v| (error_type(&v.error_type).to_string(), v.field.clone()))
            .collect();
        let mut expected = case.errors.clone();
        seen.sort();
        expected.sort();
        if seen != expected {
            problems.push(format!("{}: expected {expected:?}, got {seen:?}", case.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[derive(Deserialize)]
struct CelCase {
    name: String,
    #[serde(default)]
    vals: Vec<(Value, Value)>,
    schema: Option<Value>,
    object: Option<Value>,
    old: Option<Value>,
    #[serde(default)]
    valid: Vec<String>,
    #[serde(default)]
    errors: Vec<String>,
    #[serde(default)]
    gaps: std::collections::BTreeMap<String, String>,
}

/// Upstream's test schemas by name (`integerType`, `int32Type`, `durationFormat`, …).
fn shorthand(kind: &Value) -> Value {
    let Some(name) = kind.as_str() else { return kind.clone() };
    let (kind, format) = match name {
        "int32" | "int64" => ("integer", name),
        "float" | "double" => ("number", name),
        "byte" | "duration" | "date" | "date-time" => ("string", name),
        other => (other, ""),
    };
    if format.is_empty() {
        serde_json::json!({"type": kind})
    } else {
        serde_json::json!({"type": kind, "format": format})
    }
}

impl CelCase {
    /// The schema with `rule` at its root, and the object.
    fn with_rule(&self, rule: &str) -> (Schema, Value) {
        let (mut schema, object) = if self.vals.is_empty() {
            (self.schema.clone().expect("schema or vals"), self.object.clone().expect("object or vals"))
        } else {
            let mut properties = serde_json::Map::new();
            let mut object = serde_json::Map::new();
            for (idx, (kind, value)) in self.vals.iter().enumerate() {
                properties.insert(format!("val{}", idx + 1), shorthand(kind));
                object.insert(format!("val{}", idx + 1), value.clone());
            }
            (serde_json::json!({"type": "object", "properties": properties}), Value::Object(object))
        };
        schema["x-kubernetes-validations"] = serde_json::json!([{"rule": rule}]);
        (Schema::new(&schema), object)
    }

    /// What checking the rule against its schema finds, as on CRD create (upstream compiles
    /// every rule of this table).
    fn compile_errors(&self, rule: &str) -> Vec<String> {
        let (schema, _) = self.with_rule(rule);
        let ([rule], Some(decl)) = (schema.rules.as_slice(), &schema.rule_type) else { panic!("one typed rule") };
        match &rule.compiled {
            Ok(compiled) => compiled.check(&rule.source, decl).errors,
            Err(err) => vec![err.detail().to_string()],
        }
    }

    fn errors_for(&self, rule: &str) -> Vec<String> {
        let (schema, object) = self.with_rule(rule);
        validate_rules(&object, self.old.as_ref(), &schema).errors.iter().map(ToString::to_string).collect()
    }
}

#[test]
fn cel_validation_expressions_table() {
    let cases: Vec<CelCase> = table("cel_validation_expressions.yaml");
    assert!(cases.len() >= 20, "the table lost cases");
    let mut problems = Vec::new();
    for case in &cases {
        for rule in case.valid.iter().chain(case.gaps.keys()) {
            let errors = case.compile_errors(rule);
            if !errors.is_empty() {
                problems.push(format!("{}: `{rule}` should compile, got {errors:?}", case.name));
            }
        }
        for rule in &case.valid {
            let errors = case.errors_for(rule);
            if !errors.is_empty() {
                problems.push(format!("{}: `{rule}` should pass, got {errors:?}", case.name));
            }
        }
        for rule in &case.errors {
            if case.errors_for(rule).is_empty() {
                problems.push(format!("{}: `{rule}` should fail", case.name));
            }
        }
        for (rule, why) in &case.gaps {
            if case.errors_for(rule).is_empty() {
                problems.push(format!("{}: `{rule}` now passes ({why}): move it to `valid`", case.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[derive(Deserialize)]
struct RatchetCase {
    name: String,
    schema: Value,
    new: Value,
    old: Value,
    valid: bool,
}

#[test]
fn ratcheting_table() {
    let cases: Vec<RatchetCase> = table("ratcheting.yaml");
    assert!(cases.len() >= 10, "the table lost cases");
    let problems: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let schema = Schema::new(&case.schema);
            let errors = crdctl_schema::validate_update(&case.new, &case.old, &schema);
            // Without the old object the same value must fail, or the case shows nothing.
            let unratcheted = validate(&case.new, &schema);
            let ok = errors.is_empty() == case.valid && (!case.valid || !unratcheted.is_empty());
            (!ok).then(|| format!("{}: errors {errors:?}, without ratcheting {unratcheted:?}", case.name))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Upstream's CEL ratcheting (cel/validation.go `shouldRatchetError`): a rule that fails on a
/// value the update left alone becomes a warning; transition rules are never ratcheted.
#[test]
fn cel_rules_ratchet_unchanged_values() {
    let schema = Schema::new(&serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3", "message": "too long"}]},
        "other": {"type": "string"},
        "fixed": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}
    }}));
    let old = serde_json::json!({"name": "abcd", "other": "a", "fixed": "x"});
    let unchanged = serde_json::json!({"name": "abcd", "other": "b", "fixed": "x"});
    let outcome = validate_rules(&unchanged, Some(&old), &schema);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.warnings, [r#"name: Invalid value: "string": too long"#]);
    let changed = serde_json::json!({"name": "abcde", "other": "b", "fixed": "y"});
    let outcome = validate_rules(&changed, Some(&old), &schema);
    let errors: Vec<String> = outcome.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors, [r#"name: Invalid value: "string": too long"#, r#"fixed: Invalid value: "string": immutable"#]);
    assert!(outcome.warnings.is_empty());
}

/// Upstream's TestCELValidationLimit: with no budget left, or no cost allowed per call, the
/// first rule is refused with upstream's error and no other rule runs.
#[test]
fn cel_validation_limit() {
    use crdctl_schema::{Limits, validate_rules_within};
    let schema = Schema::new(&serde_json::json!({"type": "object", "properties": {"val1": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.val1 > 0"}, {"rule": "self.val1 < 0", "message": "never checked"}]}));
    let object = serde_json::json!({"val1": i64::MAX});
    let run = |limits: Limits| -> Vec<String> {
        validate_rules_within(&object, None, &schema, limits).errors.iter().map(ToString::to_string).collect()
    };
    assert_eq!(
        run(Limits { per_object: 0, ..Limits::UPSTREAM }),
        [
            r#"<nil>: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run"#
        ]
    );
    assert_eq!(
        run(Limits { per_call: 0, ..Limits::UPSTREAM }),
        [
            r#"<nil>: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.val1 > 0"#
        ]
    );
    assert_eq!(run(Limits::UPSTREAM), [r#"<nil>: Invalid value: "object": never checked"#]);
}

/// A rule over an unbounded list costs what the object's list makes it cost: a quadratic
/// rule passes on ten items and is stopped on two thousand, before it runs.
#[test]
fn a_rule_is_charged_for_the_sizes_of_the_object_it_runs_on() {
    let schema = Schema::new(&serde_json::json!({"type": "object", "properties": {"names": {"type": "array",
        "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "self.all(a, self.exists_one(b, a == b))"}]}}}));
    let names = |n: usize| serde_json::json!({"names": (0..n).map(|i| format!("n{i}")).collect::<Vec<_>>()});
    assert!(validate_rules(&names(10), None, &schema).errors.is_empty());
    let errors: Vec<String> =
        validate_rules(&names(2000), None, &schema).errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            r#"names: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(a, self.exists_one(b, a == b))"#
        ]
    );
}

//! kube-openapi's schema validator, as the API server runs it on every custom resource, and
//! apiextensions' translation of its results into field errors
//! (`kubeOpenAPIResultToFieldErrors`), at the versions Kubernetes 1.33 ships.
//!
//! The validators run in kube-openapi's order for each node: type, `allOf`/`anyOf`/`oneOf`/
//! `not`, string, format, number, array, `enum`, object. Like kube-openapi, a failed type does
//! not stop the others, and `anyOf`/`oneOf` report the failures of the branch that matched
//! most (its "match count"). Properties are visited in the object's order; upstream visits Go
//! maps, so its order is random.

use serde_json::{Map, Number, Value};

use super::{Additional, Format, Schema, correlate};
use crdctl_model::field::{self, ErrorType, Path, Raw};
use crdctl_model::go::{self, bad_value};

/// Validates `object` against `schema`; every error, in the order the validators found them.
pub fn validate(object: &Value, schema: &Schema) -> field::ErrorList {
    node(schema, object, None, &Path::Root).errors
}

/// Validates an update with ratcheting (on by default since Kubernetes 1.30): a value equal to
/// the value it corresponds to in `old` passes whatever it holds, so a tightened schema does
/// not block updates that leave old values alone. Values correspond through properties, map
/// keys and the items of `set` and `map` lists (upstream's `CorrelatedObject`).
pub fn validate_update(object: &Value, old: &Value, schema: &Schema) -> field::ErrorList {
    node(schema, object, Some(old), &Path::Root).errors
}

/// A validator's result: errors, and how many checks applied (kube-openapi's `MatchCount`).
#[derive(Default)]
struct Outcome {
    errors: field::ErrorList,
    matches: usize,
}

impl Outcome {
    fn error(error: field::Error) -> Outcome {
        Outcome { errors: vec![error], matches: 0 }
    }

    fn merge(&mut self, other: Outcome) {
        self.errors.extend(other.errors);
        self.matches += other.matches;
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// kube-openapi's `%s in body …` messages name the node by its path.
fn in_body(loc: &Path, rest: &str) -> String {
    format!("{} in body {rest}", loc.path())
}

/// `field.Invalid(path, value, message)`: the translation of every kube-openapi error without
/// a dedicated field-error type.
fn invalid(loc: &Path, value: String, message: String) -> field::Error {
    loc.invalid(Raw(value), message)
}

/// kube-openapi's errors that are not `*Validation` (composite and range errors) become
/// `field.Invalid(nil, "", message)`: no field, an empty value.
fn unplaced(message: String) -> field::Error {
    Path::Root.invalid("", message)
}

fn type_invalid(loc: &Path, expected: &str, actual: &str) -> field::Error {
    let value = crdctl_model::go::quote(actual);
    let detail = in_body(loc, &format!("must be of type {expected}: {value}"));
    loc.type_invalid(Raw(value), detail)
}

/// A JSON number as Go's unstructured decoding holds it.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) if !n.is_f64() => Num::Int(i),
            _ => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn render(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go::float(f),
        }
    }
}

/// The type name and data format kube-openapi's type validator infers from a value.
fn value_type(value: &Value) -> (&'static str, &'static str) {
    match value {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// swag's `IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    f.is_finite() && f.abs() <= (1u64 << 53) as f64 && (f - f.trunc()).abs() < 1e-9
}

fn node(schema: &Schema, value: &Value, old: Option<&Value>, loc: &Path) -> Outcome {
    let mut outcome = Outcome::default();
    if old == Some(value) {
        return outcome;
    }
    if value.is_null() {
        if !schema.types.is_empty() && !schema.has_type("null") && !schema.nullable {
            outcome.merge(Outcome::error(type_invalid(loc, &schema.types.join(","), "null")));
        }
        outcome.merge(enumeration(schema, value, loc));
        return outcome;
    }
    let mut run = |result: Outcome| {
        outcome.merge(result);
        outcome.matches += 1;
    };
    if !schema.types.is_empty() || schema.format.is_some() {
        run(type_check(schema, value, loc));
    }
    run(composition(schema, value, old, loc));
    match value {
        Value::String(s) => {
            run(string(schema, s, loc));
            if let Some(Format::String(format)) = schema.format {
                run(if format.validates(s) {
                    Outcome::default()
                } else {
                    Outcome::error(type_invalid(loc, &schema.format_name, s))
                });
            }
        }
        Value::Number(n) => run(number(schema, Num::of(n), loc)),
        Value::Array(items) => run(array(schema, items, old.and_then(Value::as_array), loc)),
        _ => {}
    }
    run(enumeration(schema, value, loc));
    if let Value::Object(fields) = value {
        run(object(schema, fields, old.and_then(Value::as_object), loc));
    }
    outcome.matches += 1;
    outcome
}

fn type_check(schema: &Schema, value: &Value, loc: &Path) -> Outcome {
    let (actual, data_format) = value_type(value);
    let format = if schema.format.is_some() { schema.format_name.as_str() } else { "" };
    let string_or_array = value.is_string() || value.is_array();
    let float_int = matches!(value, Value::Number(n) if matches!(Num::of(n), Num::Float(f) if is_json_integer(f)))
        && schema.has_type("integer");
    let int_float = actual == "integer" && schema.has_type("number");
    let typed = schema.has_type(actual) || data_format == format || float_int || int_float;
    if !(string_or_array || format.is_empty() || typed) {
        return Outcome::error(type_invalid(loc, format, data_format));
    }
    let numeric = schema.has_type("number") || schema.has_type("integer");
    if string_or_array && !(numeric || format.is_empty()) {
        return Outcome { errors: vec![], matches: 1 };
    }
    if !(schema.has_type(actual) || float_int || int_float) {
        return Outcome::error(type_invalid(loc, &schema.types.join(","), actual));
    }
    Outcome { errors: vec![], matches: 1 }
}

fn composition(schema: &Schema, value: &Value, old: Option<&Value>, loc: &Path) -> Outcome {
    let mut main = Outcome::default();
    if !schema.any_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success = None;
        for branch in &schema.any_of {
            let result = node(branch, value, old, loc);
            if result.is_valid() {
                first_success = Some(result);
                best = None;
                break;
            }
            if best.as_ref().is_none_or(|b| result.matches > b.matches) {
                best = Some(result);
            }
        }
        if first_success.is_none() {
            main.errors.push(unplaced(format!("{:?} must validate at least one schema (anyOf)", loc.path())));
        }
        if let Some(result) = best.or(first_success) {
            main.merge(result);
        }
    }
    if !schema.one_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success = None;
        let mut validated = 0;
        for branch in &schema.one_of {
            let result = node(branch, value, old, loc);
            if result.is_valid() {
                validated += 1;
                best = None;
                first_success.get_or_insert(result);
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| result.matches > b.matches) {
                best = Some(result);
            }
        }
        if validated != 1 {
            let detail = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.errors
                .push(unplaced(format!("{:?} must validate one and only one schema (oneOf). {detail}", loc.path())));
            if let Some(result) = best {
                main.merge(result);
            }
        } else if let Some(result) = first_success {
            main.merge(result);
        }
    }
    if !schema.all_of.is_empty() {
        let mut validated = 0;
        for branch in &schema.all_of {
            let result = node(branch, value, old, loc);
            if result.is_valid() {
                validated += 1;
            }
            main.merge(result);
        }
        if validated != schema.all_of.len() {
            let detail = if validated == 0 { ". None validated" } else { "" };
            main.errors.push(unplaced(format!("{:?} must validate all the schemas (allOf){detail}", loc.path())));
        }
    }
    if let Some(not) = &schema.not
        && node(not, value, old, loc).is_valid()
    {
        main.errors.push(unplaced(format!("{:?} must not validate the schema (not)", loc.path())));
    }
    main.matches += 1;
    main
}

fn string(schema: &Schema, s: &str, loc: &Path) -> Outcome {
    let length = || s.chars().count() as i64;
    if let Some(max) = schema.max_length
        && length() > max
    {
        return Outcome::error(loc.too_long(format!("may not be more than {max} bytes")));
    }
    if let Some(min) = schema.min_length
        && length() < min
    {
        let message = in_body(loc, &format!("should be at least {min} chars long"));
        return Outcome::error(invalid(loc, bad_value(&Value::String(s.into())), message));
    }
    if let Some(pattern) = &schema.pattern {
        let shown = match pattern.matcher() {
            Ok(re) if re.is_match(s) => return Outcome::default(),
            Ok(_) => pattern.source.clone(),
            Err(err) => format!("{}, but pattern is invalid: {err}", pattern.source),
        };
        let message = in_body(loc, &format!("should match '{shown}'"));
        return Outcome::error(invalid(loc, bad_value(&Value::String(s.into())), message));
    }
    Outcome::default()
}

/// kube-openapi's number validator as Kubernetes 1.33 runs it: bounds and `multipleOf`, in
/// integer arithmetic for integer values (a bound is truncated to an integer there) and in
/// floating point otherwise. That version checks no `int32`/`float` ranges.
fn number(schema: &Schema, n: Num, loc: &Path) -> Outcome {
    let mut outcome = Outcome::default();
    let value = n.render();
    if let Some(factor) = schema.multiple_of {
        let failure = match n {
            Num::Int(i) => {
                let factor = factor as i64;
                if factor <= 0 {
                    Some((factor.to_string(), true))
                } else {
                    (i % factor != 0).then(|| (factor.to_string(), false))
                }
            }
            Num::Float(_) if factor <= 0.0 => Some((go::float(factor), true)),
            Num::Float(data) => {
                let multiple = if factor < 1.0 { 1.0 / factor * data } else { data / factor };
                (!is_json_integer(multiple)).then(|| (go::float(factor), false))
            }
        };
        if let Some((factor, not_positive)) = failure {
            outcome.errors.push(if not_positive {
                invalid(
                    loc,
                    factor.clone(),
                    format!("factor MultipleOf declared for {} must be positive: {factor}", loc.path()),
                )
            } else {
                invalid(loc, value.clone(), in_body(loc, &format!("should be a multiple of {factor}")))
            });
        }
    }
    let bound = |limit: f64, exclusive: bool, above: bool| -> Option<field::Error> {
        let (fails, shown) = match n {
            Num::Int(i) => {
                let limit = limit as i64;
                let fails =
                    if above { i > limit || (exclusive && i == limit) } else { i < limit || (exclusive && i == limit) };
                (fails, limit.to_string())
            }
            Num::Float(data) => {
                let fails = if above {
                    data > limit || (exclusive && data == limit)
                } else {
                    data < limit || (exclusive && data == limit)
                };
                (fails, go::float(limit))
            }
        };
        let relation = match (above, exclusive) {
            (true, false) => "less than or equal to",
            (true, true) => "less than",
            (false, false) => "greater than or equal to",
            (false, true) => "greater than",
        };
        fails.then(|| invalid(loc, value.clone(), in_body(loc, &format!("should be {relation} {shown}"))))
    };
    if let Some(minimum) = schema.minimum {
        outcome.errors.extend(bound(minimum, schema.exclusive_minimum, false));
    }
    if let Some(maximum) = schema.maximum {
        outcome.errors.extend(bound(maximum, schema.exclusive_maximum, true));
    }
    outcome.matches += 1;
    outcome
}

fn array(schema: &Schema, items: &[Value], old: Option<&Vec<Value>>, loc: &Path) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(item_schema) = &schema.items {
        for (idx, item) in items.iter().enumerate() {
            let old_item = old.and_then(|old| correlate(schema, item, old));
            outcome.merge(node(item_schema, item, old_item, &loc.index(idx)));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = schema.min_items
        && size < min
    {
        outcome.errors.push(invalid(loc, size.to_string(), in_body(loc, &format!("should have at least {min} items"))));
    }
    if let Some(max) = schema.max_items
        && size > max
    {
        outcome.errors.push(too_many(loc, size, max));
    }
    if schema.unique_items && items.iter().enumerate().any(|(i, a)| items.iter().take(i).any(|b| b == a)) {
        outcome.errors.push(invalid(loc, "\"\"".into(), in_body(loc, "shouldn't contain duplicates")));
    }
    outcome.matches += 1;
    outcome
}

/// `field.TooMany`, which upstream also uses for `maxProperties`.
fn too_many(loc: &Path, actual: i64, max: i64) -> field::Error {
    let unit = if max == 1 { "item" } else { "items" };
    loc.too_many(actual, format!("must have at most {max} {unit}"))
}

/// Whether a value equals an `enum` entry as kube-openapi compares them: the entry was decoded
/// by `encoding/json` (numbers are `float64`), the value by the API server (integers are
/// `int64`), and the value is converted to the entry's Go type when Go allows it.
fn enum_matches(value: &Value, entry: &Value) -> bool {
    match (value, entry) {
        (Value::String(a), Value::String(b)) => a == b,
        // Go converts an integer to a string as a rune.
        (Value::Number(n), Value::String(b)) => match Num::of(n) {
            Num::Int(i) => u32::try_from(i).ok().and_then(char::from_u32).unwrap_or('\u{fffd}').to_string() == *b,
            Num::Float(_) => false,
        },
        (Value::Number(a), Value::Number(b)) => Num::of(a).as_f64() == Num::of(b).as_f64(),
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Array(_) | Value::Object(_), _) => deep_equal(value, entry),
        _ => false,
    }
}

/// `reflect.DeepEqual` between decoded data and a decoded `enum` entry: an integer in the
/// data is never equal to the entry's `float64`.
fn deep_equal(value: &Value, entry: &Value) -> bool {
    match (value, entry) {
        (Value::Number(a), Value::Number(b)) => a.is_f64() && a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| deep_equal(x, y)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| deep_equal(x, y)))
        }
        _ => value == entry,
    }
}

fn enumeration(schema: &Schema, value: &Value, loc: &Path) -> Outcome {
    let Some(entries) = schema.enumeration.as_ref().filter(|e| !e.is_empty()) else { return Outcome::default() };
    if !value.is_null() && entries.iter().any(|entry| !entry.is_null() && enum_matches(value, entry)) {
        return Outcome::default();
    }
    let supported = entries.iter().map(|e| e.as_str().map_or_else(|| go::json(e), str::to_string)).collect();
    Outcome::error(loc.error(ErrorType::NotSupported(bad_value(value), supported), String::new()))
}

fn object(schema: &Schema, fields: &Map<String, Value>, old: Option<&Map<String, Value>>, loc: &Path) -> Outcome {
    let mut outcome = Outcome::default();
    let count = fields.len() as i64;
    if let Some(min) = schema.min_properties
        && count < min
    {
        outcome.errors.push(invalid(
            loc,
            count.to_string(),
            in_body(loc, &format!("should have at least {min} properties")),
        ));
    }
    if let Some(max) = schema.max_properties
        && count > max
    {
        outcome.errors.push(too_many(loc, count, max));
    }
    // A node that names no properties and has no `additionalProperties` says nothing of its fields.
    let described = fields.iter().filter(|_| !schema.properties.is_empty() || schema.additional_properties.is_some());
    for (name, child) in described {
        let property = schema.properties.get(name);
        let old_child = old.and_then(|old| old.get(name));
        match (&schema.additional_properties, property) {
            (_, Some(property)) => outcome.merge(node(property, child, old_child, &loc.child(name))),
            (Some(Additional::Schema(additional)), None) => {
                outcome.merge(node(additional, child, old_child, &loc.child(name)))
            }
            (Some(Additional::Forbidden), None) => {
                let message = format!("{}.{name} in body is a forbidden property", loc.path());
                outcome.errors.push(invalid(loc, bad_value(&Value::String(name.clone())), message));
            }
            (None, None) => {}
        }
    }
    for name in &schema.required {
        if !fields.contains_key(name) {
            outcome.errors.push(loc.child(name).required(""));
        }
    }
    outcome
}

//! Objects made from a structural schema, for fuzzing what handles them — a conversion webhook
//! above all. A [`Generator`] fills every property (required ones always, optional ones often)
//! with values inside each keyword's bounds: `enum`, the `format`s the API server checks,
//! `pattern` (strings generated from the regular expression), lengths, ranges and
//! `multipleOf`, `x-kubernetes-int-or-string`, unknown fields where they are preserved, unique
//! items of `set` lists and unique keys of `map` lists, and `x-kubernetes-embedded-resource`
//! objects with their type and name. It is deterministic from its seed; `size` bounds how long
//! lists and maps grow.
//!
//! What the keywords cannot say — CEL rules, `allOf`/`anyOf`/`oneOf`/`not` — is not aimed at:
//! a caller keeps the objects [`crate::check`] accepts, as the API server would keep them.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use regex_syntax::hir::{Capture, Hir, HirKind, Repetition};
use serde_json::{Map, Number, Value, json};

use crate::{Additional, Format, Schema, StringFormat};

/// Makes values for schemas, from one seeded random stream.
pub struct Generator {
    rng: Pcg64Mcg,
    size: usize,
    /// Each pattern's generator, compiled once (`None`: the pattern cannot be generated from).
    patterns: HashMap<String, Option<rand_regex::Regex>>,
}

/// How many tries a value that must differ from the others (a set item, a map key) gets.
const UNIQUE_TRIES: usize = 8;

impl Generator {
    /// A generator whose lists and maps hold at most `size` items (at least one).
    pub fn new(seed: u64, size: usize) -> Generator {
        Generator { rng: Pcg64Mcg::seed_from_u64(seed), size: size.max(1), patterns: HashMap::new() }
    }

    /// A custom resource of `api_version`/`kind` named `name` for the version's schema (its
    /// root), with `metadata.namespace` when `namespace` is given.
    pub fn resource(
        &mut self,
        schema: &Schema,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Value {
        let mut object = match self.value(schema, 0) {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        let mut metadata = json!({"name": name});
        if let (Some(namespace), Some(fields)) = (namespace, metadata.as_object_mut()) {
            fields.insert("namespace".into(), Value::String(namespace.into()));
        }
        object.insert("apiVersion".into(), Value::String(api_version.into()));
        object.insert("kind".into(), Value::String(kind.into()));
        object.insert("metadata".into(), metadata);
        Value::Object(object)
    }

    /// A value for `schema` at `depth` below the root.
    pub fn value(&mut self, schema: &Schema, depth: usize) -> Value {
        if let Some(values) = schema.enumeration.as_ref().filter(|values| !values.is_empty()) {
            return self.pick(values).cloned().unwrap_or(Value::Null);
        }
        if schema.nullable && self.chance(1, 10) {
            return Value::Null;
        }
        let kind = match (schema.int_or_string, schema.types.first().map(String::as_str)) {
            (true, _) => {
                if self.rng.random() {
                    "integer"
                } else {
                    "string"
                }
            }
            (false, Some(kind)) => kind,
            (false, None) if schema.preserve_unknown_fields => return self.unknown(depth),
            (false, None) => "object",
        };
        match kind {
            "object" => self.object(schema, depth),
            "array" => self.array(schema, depth),
            "string" => Value::String(self.string(schema)),
            "integer" => self.integer(schema),
            "number" => self.number(schema),
            "boolean" => Value::Bool(self.rng.random()),
            _ => Value::Null,
        }
    }

    fn object(&mut self, schema: &Schema, depth: usize) -> Value {
        let mut fields = Map::new();
        if schema.embedded_resource {
            fields.insert("apiVersion".into(), json!("v1"));
            fields.insert("kind".into(), json!("ConfigMap"));
            fields.insert("metadata".into(), json!({"name": format!("embedded-{}", self.rng.random_range(0..1000))}));
        }
        for (name, property) in &schema.properties {
            // Optional fields thin out with depth, so deep schemas stay finite in practice.
            let keep = schema.required.contains(name) || self.chance(4, 5 + depth as u32);
            if keep && !fields.contains_key(name) {
                let value = self.value(property, depth + 1);
                fields.insert(name.clone(), value);
            }
        }
        if let Some(Additional::Schema(values)) = &schema.additional_properties {
            let at_least = usize::try_from(schema.min_properties.unwrap_or(0)).unwrap_or(0);
            for at in 0..self.length(at_least, schema.max_properties) {
                let value = self.value(values, depth + 1);
                fields.insert(format!("key-{at}"), value);
            }
        }
        if schema.preserve_unknown_fields && schema.properties.is_empty() && self.chance(1, 2) {
            let value = self.unknown(depth + 1);
            fields.insert("x-unknown".into(), value);
        }
        // `minProperties`/`maxProperties` count every field: add optional ones, or drop them.
        let at_least = usize::try_from(schema.min_properties.unwrap_or(0)).unwrap_or(0);
        for (name, property) in &schema.properties {
            if fields.len() >= at_least {
                break;
            }
            if !fields.contains_key(name) {
                let value = self.value(property, depth + 1);
                fields.insert(name.clone(), value);
            }
        }
        let at_most = schema.max_properties.and_then(|max| usize::try_from(max).ok()).unwrap_or(usize::MAX);
        while fields.len() > at_most {
            let Some(optional) = fields.keys().rev().find(|name| !schema.required.contains(*name)).cloned() else {
                break;
            };
            fields.remove(&optional);
        }
        Value::Object(fields)
    }

    fn array(&mut self, schema: &Schema, depth: usize) -> Value {
        let Some(items) = &schema.items else { return Value::Array(Vec::new()) };
        let at_least = usize::try_from(schema.min_items.unwrap_or(0)).unwrap_or(0);
        let length = self.length(at_least, schema.max_items);
        let mut list: Vec<Value> = Vec::with_capacity(length);
        let unique = schema.unique_items || schema.list_type.as_deref() == Some("set");
        for _ in 0..length {
            for _ in 0..UNIQUE_TRIES {
                let mut item = self.value(items, depth + 1);
                if schema.list_type.as_deref() == Some("map") {
                    self.fill_keys(&mut item, items, &schema.list_map_keys, depth);
                }
                let clashes = |other: &Value| match schema.list_type.as_deref() {
                    Some("map") => schema.list_map_keys.iter().all(|key| other.get(key) == item.get(key)),
                    _ => unique && *other == item,
                };
                if !list.iter().any(clashes) {
                    list.push(item);
                    break;
                }
            }
        }
        Value::Array(list)
    }

    /// A map list's item has every key field (they identify it).
    fn fill_keys(&mut self, item: &mut Value, schema: &Schema, keys: &[String], depth: usize) {
        let Some(fields) = item.as_object_mut() else { return };
        for key in keys {
            if !fields.contains_key(key) {
                let value = match schema.properties.get(key) {
                    Some(property) => property.default.clone().unwrap_or_else(|| self.value(property, depth + 2)),
                    None => Value::String(format!("k{}", self.rng.random_range(0..100))),
                };
                fields.insert(key.clone(), value);
            }
        }
    }

    fn string(&mut self, schema: &Schema) -> String {
        if let Some(Format::String(format)) = schema.format {
            return self.formatted(format);
        }
        let (min, max) = (schema.min_length.unwrap_or(0), schema.max_length);
        let fits = |text: &str| {
            let length = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
            length >= min && max.is_none_or(|max| length <= max)
        };
        if let Some((pattern, Ok(matcher))) = schema.pattern.as_ref().map(|p| (&p.source, p.matcher())) {
            let bound = u32::try_from(self.size).unwrap_or(u32::MAX).max(1);
            let compiled = self.patterns.entry(pattern.clone()).or_insert_with(|| {
                let parsed = regex_syntax::Parser::new().parse(pattern).ok().map(without_anchors);
                parsed.and_then(|hir| rand_regex::Regex::with_hir(hir, bound).ok())
            });
            if let Some(compiled) = compiled {
                for _ in 0..UNIQUE_TRIES {
                    let text: Result<String, _> = self.rng.sample(&*compiled);
                    if let Some(text) = text.ok().filter(|text| fits(text) && matcher.is_match(text)) {
                        return text;
                    }
                }
            }
        }
        let upper = max.unwrap_or(i64::MAX).min(min.max(0) + i64::try_from(self.size).unwrap_or(0) * 2);
        let length = if upper > min.max(0) { self.rng.random_range(min.max(0)..=upper) } else { min.max(0) };
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789-";
        (0..length).map(|_| self.pick(alphabet).map_or('a', |byte| char::from(*byte))).collect()
    }

    /// A valid value of each string format the API server checks.
    fn formatted(&mut self, format: StringFormat) -> String {
        let n = self.rng.random_range(0..250u32);
        match format {
            StringFormat::DateTime => format!("2024-0{}-1{}T0{}:1{}:2{}Z", 1 + n % 9, n % 10, n % 10, n % 6, n % 10),
            StringFormat::Date => format!("2024-0{}-1{}", 1 + n % 9, n % 10),
            StringFormat::Duration => format!("{}h{}m", n % 48, n % 60),
            StringFormat::Uuid | StringFormat::Uuid4 => format!("6f1c2b0e-{n:04x}-4a8b-9c3d-1e2f3a4b5c6d"),
            StringFormat::Uuid3 => format!("6f1c2b0e-{n:04x}-3a8b-9c3d-1e2f3a4b5c6d"),
            StringFormat::Uuid5 => format!("6f1c2b0e-{n:04x}-5a8b-9c3d-1e2f3a4b5c6d"),
            StringFormat::Ipv4 => format!("10.{}.{}.{}", n % 256, (n * 7) % 256, (n * 13) % 256),
            StringFormat::Ipv6 => format!("fd00::{n:x}"),
            StringFormat::Cidr => format!("10.{}.0.0/16", n % 256),
            StringFormat::Mac => format!("02:00:00:00:00:{:02x}", n % 256),
            StringFormat::Hostname => format!("host-{n}.example.com"),
            StringFormat::Email => format!("user{n}@example.com"),
            StringFormat::Uri => format!("https://example.com/{n}"),
            StringFormat::Byte => base64::Engine::encode(&base64::engine::general_purpose::STANDARD, n.to_be_bytes()),
            StringFormat::BsonObjectId => format!("507f1f77bcf86cd799{n:06x}"),
            StringFormat::HexColor => format!("#{:06x}", n * 65_793),
            StringFormat::RgbColor => format!("rgb({}, {}, {})", n % 256, (n * 3) % 256, (n * 5) % 256),
            StringFormat::Isbn | StringFormat::Isbn10 => "0306406152".into(),
            StringFormat::Isbn13 => "9780306406157".into(),
            StringFormat::CreditCard => "4111111111111111".into(),
            StringFormat::Ssn => format!("123-45-{:04}", n),
            StringFormat::Password => format!("secret-{n}"),
        }
    }

    fn integer(&mut self, schema: &Schema) -> Value {
        let (mut low, mut high) = (-1_000_i64, 1_000_i64);
        if matches!(schema.format, Some(Format::Int32)) {
            (low, high) = (low.max(i64::from(i32::MIN)), high.min(i64::from(i32::MAX)));
        }
        if let Some(minimum) = schema.minimum {
            low = minimum.ceil() as i64 + i64::from(schema.exclusive_minimum && minimum.fract() == 0.0);
            high = high.max(low.saturating_add(1_000));
        }
        if let Some(maximum) = schema.maximum {
            high = maximum.floor() as i64 - i64::from(schema.exclusive_maximum && maximum.fract() == 0.0);
            low = low.min(high);
        }
        let mut value = if high > low { self.rng.random_range(low..=high) } else { low };
        if let Some(step) = schema.multiple_of.filter(|step| *step >= 1.0 && step.fract() == 0.0) {
            let step = step as i64;
            value = value.div_euclid(step) * step;
            if value < low {
                value += step;
            }
        }
        Value::Number(value.into())
    }

    fn number(&mut self, schema: &Schema) -> Value {
        let low = schema.minimum.unwrap_or(-1_000.0);
        let high = schema.maximum.unwrap_or(low.max(0.0) + 1_000.0);
        // Halves survive every float format exactly, and show a webhook that rounds them.
        let value = if high > low { (self.rng.random_range(low..high) * 2.0).ceil() / 2.0 } else { low };
        let value = match schema.multiple_of.filter(|step| *step > 0.0) {
            Some(step) => (value / step).ceil() * step,
            None => value,
        };
        let value = value.clamp(low, high);
        // An excluded bound gets the middle of the range instead.
        let excluded = (schema.exclusive_maximum && value >= high) || (schema.exclusive_minimum && value <= low);
        let value = if excluded { (low + high) / 2.0 } else { value };
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }

    /// A small value of any JSON type, where unknown fields are preserved.
    fn unknown(&mut self, depth: usize) -> Value {
        match self.rng.random_range(0..if depth > 3 { 4 } else { 6 }) {
            0 => Value::Bool(self.rng.random()),
            1 => Value::Number(self.rng.random_range(-100..100_i64).into()),
            2 => Value::String(format!("free-{}", self.rng.random_range(0..100))),
            3 => Value::Null,
            4 => json!({"nested": self.unknown(depth + 1)}),
            _ => Value::Array(vec![self.unknown(depth + 1), self.unknown(depth + 1)]),
        }
    }

    /// A collection length from `at_least` up to `size` (more when `at_least` asks), within `at_most`.
    fn length(&mut self, at_least: usize, at_most: Option<i64>) -> usize {
        let cap = at_most.and_then(|max| usize::try_from(max).ok()).unwrap_or(usize::MAX);
        let upper = self.size.max(at_least).min(cap);
        if upper > at_least { self.rng.random_range(at_least..=upper) } else { upper }
    }

    fn chance(&mut self, numerator: u32, denominator: u32) -> bool {
        self.rng.random_range(0..denominator.max(1)) < numerator
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.rng.random_range(0..items.len().max(1)))
    }
}

/// `hir` without its anchors and boundaries, which a generator cannot aim at: a string made
/// whole from what is left matches the anchored pattern, as `^` and `$` then hold at its ends
/// (where a boundary does not, the caller's check of the pattern refuses the string).
fn without_anchors(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Concat(parts) => Hir::concat(parts.into_iter().map(without_anchors).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.into_iter().map(without_anchors).collect()),
        HirKind::Repetition(repetition) => {
            Hir::repetition(Repetition { sub: Box::new(without_anchors(*repetition.sub)), ..repetition })
        }
        HirKind::Capture(capture) => Hir::capture(Capture { sub: Box::new(without_anchors(*capture.sub)), ..capture }),
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(literal) => Hir::literal(literal.0),
        HirKind::Class(class) => Hir::class(class),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A schema with every keyword the generator aims at.
    fn schema() -> Schema {
        Schema::new(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {
                "type": "object",
                "required": ["mode", "replicas"],
                "properties": {
                    "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                    "replicas": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 9},
                    "step": {"type": "integer", "multipleOf": 5, "minimum": 3},
                    "ratio": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true},
                    "name": {"type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 12},
                    "short": {"type": "string", "minLength": 2, "maxLength": 4},
                    "when": {"type": "string", "format": "date-time"},
                    "id": {"type": "string", "format": "uuid"},
                    "address": {"type": "string", "format": "ipv4"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "maybe": {"type": "string", "nullable": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 3},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "enum": ["a", "b", "c"]}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "minItems": 1, "maxItems": 4,
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "enum": ["http", "https", "grpc"]},
                            "number": {"type": "integer", "minimum": 1, "maximum": 65535}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "x-kubernetes-preserve-unknown-fields": true},
                },
            }},
        }))
    }

    #[test]
    fn every_object_satisfies_the_keywords_it_was_made_from() {
        let schema = schema();
        for seed in 0..300 {
            let object = Generator::new(seed, 4).resource(&schema, "example.com/v1", "Widget", "w", Some("default"));
            let checked = crate::check(&object, None, &schema);
            assert!(checked.errors.is_empty(), "seed {seed}: {object}: {:?}", checked.errors);
        }
    }

    #[test]
    fn the_seed_decides_the_objects() {
        let schema = schema();
        let make = |seed| Generator::new(seed, 4).resource(&schema, "example.com/v1", "Widget", "w", None);
        assert_eq!(make(7), make(7));
        let distinct: std::collections::HashSet<String> = (0..20).map(|seed| make(seed).to_string()).collect();
        assert!(distinct.len() > 15, "{distinct:?}");
    }

    #[test]
    fn optional_fields_and_each_enum_value_all_appear() {
        let schema = schema();
        let objects: Vec<Value> = (0..100).map(|seed| Generator::new(seed, 4).value(&schema, 0)).collect();
        let spec = schema.property("spec").unwrap();
        for (name, _) in &spec.properties {
            assert!(objects.iter().any(|o| o["spec"].get(name).is_some()), "{name} never generated");
        }
        for mode in ["Fast", "Slow"] {
            assert!(objects.iter().any(|o| o["spec"]["mode"] == mode), "{mode}");
        }
        assert!(
            objects.iter().any(|o| o["spec"]["port"].is_string()) && objects.iter().any(|o| o["spec"]["port"].is_i64())
        );
    }

    /// On the corpus' real schemas, the keywords (CEL rules aside) accept everything made.
    #[test]
    fn corpus_schemas_accept_what_is_made_from_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");
        let (mut made, mut refused) = (0, Vec::new());
        for project in std::fs::read_dir(&root).unwrap() {
            for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                let crd: Value = serde_saphyr::from_str(&text).unwrap();
                for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
                    let schema = Schema::new(&version["schema"]["openAPIV3Schema"]);
                    for seed in 0..5 {
                        let object = Generator::new(seed, 3).value(&schema, 0);
                        let mut errors = crate::validate(&object, &schema);
                        errors.extend(crate::validate_embedded(&object, &schema));
                        errors.extend(crate::validate_list_types(&object, &schema));
                        made += 1;
                        if let Some(error) = errors.first() {
                            refused.push(format!("{} {} seed {seed}: {error}", path.display(), version["name"]));
                        }
                    }
                }
            }
        }
        assert!(made > 200, "{made} objects made");
        assert!(refused.is_empty(), "{} of {made} refused:\n{}", refused.len(), refused.join("\n"));
    }
}

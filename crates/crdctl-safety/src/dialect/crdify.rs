//! Today's OLM preflight text: crdify's messages under OLM's line assembly.

use serde_json::Value;

use super::go::{json_text, list_v, number_v, quote};
use super::olm::values_v;
use crate::finding::{Change, Finding, KeywordChange, Scope};
use crate::schema::PathStyle;

pub(super) fn lines(findings: &[&Finding]) -> Vec<String> {
    let mut lines = Vec::new();
    // Each CRD once, in order of first appearance (its findings need not be adjacent).
    let mut crds: Vec<&str> = Vec::new();
    for finding in findings {
        if !crds.contains(&finding.crd.as_str()) {
            crds.push(&finding.crd);
        }
    }
    for crd in crds {
        let of_crd: Vec<&Finding> = findings.iter().copied().filter(|f| f.crd == crd).collect();
        // CRD-wide lines first (removed fields included, as crdify runs them CRD-wide).
        let is_crd_wide = |f: &Finding| {
            matches!(f.scope, Scope::Crd) || (matches!(f.scope, Scope::Version(_)) && f.change == Change::FieldRemoved)
        };
        let mut block: Vec<String> = Vec::new();
        let stored: Vec<&str> = of_crd
            .iter()
            .filter_map(|f| match &f.change {
                Change::StoredVersionRemoved { version } => Some(version.as_str()),
                _ => None,
            })
            .collect();
        for finding in of_crd.iter().filter(|f| is_crd_wide(f)) {
            match &finding.change {
                Change::StoredVersionRemoved { version } if stored.first() == Some(&version.as_str()) => {
                    block.push(format!("storedVersionRemoval: stored versions removed : {}", list_v(&stored)));
                }
                Change::StoredVersionRemoved { .. } => {}
                _ => block.extend(message(finding).map(|m| format!("{}: {m}", finding.change.check()))),
            }
        }
        for finding in of_crd.iter().filter(|f| !is_crd_wide(f)) {
            if let (Some(label), Some(text)) = (label(&finding.scope), message(finding)) {
                let path = finding.path.as_ref().map(|p| p.render(PathStyle::Verbose)).unwrap_or_else(|| "^".into());
                block.push(format!("{label}: {path}: {}: {text}", finding.change.check()));
            }
        }
        if let Some(first) = block.first_mut() {
            *first = format!("validating upgrade for CRD {}: {first}", quote(crd));
            lines.extend(block);
        }
    }
    lines
}

fn label(scope: &Scope) -> Option<String> {
    match scope {
        Scope::Crd => None,
        Scope::Version(version) => Some(version.clone()),
        Scope::ServedPair(older, newer) => Some(format!("{older} -> {newer}")),
    }
}

pub(super) fn message(finding: &Finding) -> Option<String> {
    Some(match &finding.change {
        Change::ScopeChanged { old, new } => {
            format!("scope changed : {} -> {}", quote(old), quote(new))
        }
        Change::StoredVersionRemoved { version } => {
            format!("stored versions removed : {}", list_v(&[version]))
        }
        // crdify has no removal check between served versions; it diffs against an empty schema.
        Change::FieldRemoved if matches!(finding.scope, Scope::ServedPair(..)) => return None,
        Change::FieldRemoved => {
            let version = label(&finding.scope).unwrap_or_default();
            let path = finding.path.as_ref().map(|p| p.render(PathStyle::Verbose)).unwrap_or_default();
            format!("removed field : {version}.{path}")
        }
        Change::EnumRestricted { values } => {
            format!("enum constraint added when there was none previously : {}", values_v(values))
        }
        Change::EnumValuesRemoved { values } => {
            format!("allowed enum values removed : {}", values_v(values))
        }
        Change::EnumValuesAdded { values } => {
            format!("allowed enum values added : {}", values_v(values))
        }
        Change::DefaultAdded { value } => {
            format!("default added when there was none previously : {}", quote(&json_text(value)))
        }
        Change::DefaultRemoved { value } => {
            format!("default value removed : {}", quote(&json_text(value)))
        }
        Change::DefaultChanged { old, new } => {
            format!("default value changed : {} -> {}", quote(&json_text(old)), quote(&json_text(new)))
        }
        Change::BoundAdded { bound, value } => {
            let family = if bound.is_lower_bound() { "minimum" } else { "maximum" };
            format!("{family} constraint added when there was none previously : {}", number_v(value, bound.is_float()))
        }
        Change::BoundTightened { bound, old, new } => {
            let what = if bound.is_lower_bound() { "minimum increased" } else { "maximum decreased" };
            format!("{what} : {} -> {}", number_v(old, bound.is_float()), number_v(new, bound.is_float()))
        }
        Change::RequiredAdded { fields } => format!("new required fields: {}", list_v(fields)),
        Change::TypeChanged { old, new } => {
            format!("type changed : {} -> {}", quote(old), quote(new))
        }
        Change::DescriptionChanged { old, new } => {
            format!("description changed : {} -> {}", quote(old), quote(new))
        }
        Change::PatternAdded { new } => format!("pattern added : \"\" -> {}", quote(new)),
        Change::PatternRemoved { old } => format!("pattern removed : {} -> \"\"", quote(old)),
        Change::PatternChanged { old, new } => {
            format!("pattern changed : {} -> {}", quote(old), quote(new))
        }
        Change::NullableChanged { now_nullable: true } => "nullable added : false -> true".into(),
        Change::NullableChanged { now_nullable: false } => "nullable removed : true -> false".into(),
        Change::OneOfAdded { schemas, old_schema_lost: false } => {
            format!("oneOf constraint added when there was none previously: {}", one_of_v(schemas))
        }
        Change::OneOfAdded { schemas, old_schema_lost: true } => {
            format!(
                "oneOf constraint added and pre-existing property schema is not preserved in the new oneOf entries: {}",
                one_of_v(schemas)
            )
        }
        Change::OneOfSchemasRemoved { schemas } => format!("allowed oneOf schemas removed: {}", one_of_v(schemas)),
        Change::OneOfSchemasAdded { schemas } => format!("allowed oneOf schemas added: {}", one_of_v(schemas)),
        Change::Unknown { keywords } => unhandled_text(keywords),
        // Written as the API server writes it, by `dialect::message`.
        Change::ApiServerRefusal { .. } => return None,
    })
}

/// oneOf subschemas as crdify lists them: each as the Go `String()` of its `JSONSchemaProps`,
/// sorted. Subschemas with nested schemas, enums or CEL rules print as compact JSON instead: Go
/// prints those with memory addresses, which no two runs share.
fn one_of_v(schemas: &[String]) -> String {
    let mut rendered: Vec<String> = schemas
        .iter()
        .map(|text| {
            serde_json::from_str::<Value>(text)
                .ok()
                .as_ref()
                .and_then(Value::as_object)
                .and_then(go_schema_string)
                .unwrap_or_else(|| text.clone())
        })
        .collect();
    rendered.sort();
    list_v(&rendered)
}

/// The gogo-protobuf `String()` of a JSONSchemaProps made only of scalar fields and string lists.
fn go_schema_string(schema: &serde_json::Map<String, Value>) -> Option<String> {
    const SIMPLE: [&str; 26] = [
        "id",
        "$schema",
        "$ref",
        "description",
        "type",
        "format",
        "title",
        "pattern",
        "required",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "uniqueItems",
        "multipleOf",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-map-type",
    ];
    const ALSO_SIMPLE: [&str; 2] = ["x-kubernetes-list-map-keys", "x-kubernetes-list-type"];
    if !schema.keys().all(|k| SIMPLE.contains(&k.as_str()) || ALSO_SIMPLE.contains(&k.as_str())) {
        return None;
    }
    let text = |key: &str| schema.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool).unwrap_or(false).to_string();
    let pointer = |key: &str, float: bool| match schema.get(key) {
        None | Some(Value::Null) => "nil".to_string(),
        Some(Value::String(s)) => format!("*{s}"),
        Some(Value::Bool(b)) => format!("*{b}"),
        Some(value) => format!("*{}", number_v(value, float)),
    };
    let list = |key: &str| {
        let items: Vec<&str> =
            schema.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        list_v(&items)
    };
    Some(format!(
        "&JSONSchemaProps{{ID:{},Schema:{},Ref:{},Description:{},Type:{},Format:{},Title:{},Default:nil,Maximum:{},ExclusiveMaximum:{},Minimum:{},ExclusiveMinimum:{},MaxLength:{},MinLength:{},Pattern:{},MaxItems:{},MinItems:{},UniqueItems:{},MultipleOf:{},Enum:[]JSON{{}},MaxProperties:{},MinProperties:{},Required:{},Items:nil,AllOf:[]JSONSchemaProps{{}},OneOf:[]JSONSchemaProps{{}},AnyOf:[]JSONSchemaProps{{}},Not:nil,Properties:map[string]JSONSchemaProps{{}},AdditionalProperties:nil,PatternProperties:map[string]JSONSchemaProps{{}},Dependencies:JSONSchemaDependencies{{}},AdditionalItems:nil,Definitions:JSONSchemaDefinitions{{}},ExternalDocs:nil,Example:nil,Nullable:{},XPreserveUnknownFields:{},XEmbeddedResource:{},XIntOrString:{},XListMapKeys:{},XListType:{},XMapType:{},XValidations:[]ValidationRule{{}},}}",
        text("id"),
        text("$schema"),
        pointer("$ref", false),
        text("description"),
        text("type"),
        text("format"),
        text("title"),
        pointer("maximum", true),
        flag("exclusiveMaximum"),
        pointer("minimum", true),
        flag("exclusiveMinimum"),
        pointer("maxLength", false),
        pointer("minLength", false),
        text("pattern"),
        pointer("maxItems", false),
        pointer("minItems", false),
        flag("uniqueItems"),
        pointer("multipleOf", true),
        pointer("maxProperties", false),
        pointer("minProperties", false),
        list("required"),
        flag("nullable"),
        pointer("x-kubernetes-preserve-unknown-fields", false),
        flag("x-kubernetes-embedded-resource"),
        flag("x-kubernetes-int-or-string"),
        list("x-kubernetes-list-map-keys"),
        pointer("x-kubernetes-list-type", false),
        pointer("x-kubernetes-map-type", false),
    ))
}

/// OLM's concise summary of unhandled keywords: `unhandled changes found (Format "" -> "email")`.
///
/// OLM builds it from go-cmp's diff of the two schemas (operator-controller's
/// `conciseUnhandledMessage`), so this writes the `-`/`+` lines go-cmp would write for each
/// keyword, Go field names in struct order, and reads them back the way OLM does.
fn unhandled_text(keywords: &[KeywordChange]) -> String {
    let go_field = |keyword: &str| GO_FIELDS.iter().position(|(json, _, _)| *json == keyword);
    let mut keywords: Vec<&KeywordChange> = keywords.iter().collect();
    keywords.sort_by_key(|k| go_field(&k.keyword).unwrap_or(GO_FIELDS.len()));
    let mut lines = Vec::new();
    for k in keywords {
        let (field, kind) = GO_FIELDS
            .iter()
            .find(|(json, _, _)| *json == k.keyword)
            .map_or((k.keyword.as_str(), GoValue::Complex), |(_, go, kind)| (*go, *kind));
        if k.keyword == "x-kubernetes-validations" {
            rule_list_lines(k.old.as_ref(), k.new.as_ref(), &mut lines);
        } else {
            lines.push(format!("-\t{field}: {},", kind.render_cmp(k.old.as_ref())));
            lines.push(format!("+\t{field}: {},", kind.render_cmp(k.new.as_ref())));
        }
    }
    concise_unhandled(&lines)
}

/// `ValidationRule`'s fields in Go struct order: JSON name, Go name, kind.
const RULE_FIELDS: [(&str, &str, GoValue); 6] = [
    ("rule", "Rule", GoValue::String),
    ("message", "Message", GoValue::String),
    ("messageExpression", "MessageExpression", GoValue::String),
    ("reason", "Reason", GoValue::StringPointer),
    ("fieldPath", "FieldPath", GoValue::String),
    ("optionalOldSelf", "OptionalOldSelf", GoValue::BoolPointer),
];

/// go-cmp's widest single-line rendering of a value before it breaks it into lines.
const MAX_LINE: usize = 80;

/// A rule's fields as go-cmp prints them: zero fields left out.
fn rule_fields(rule: &Value) -> Vec<String> {
    RULE_FIELDS
        .iter()
        .filter(|(json, _, _)| rule.get(*json).is_some_and(|v| !v.is_null() && v != "" && v != false))
        .map(|(json, go, kind)| format!("{go}: {}", kind.render_cmp(rule.get(*json))))
        .collect()
}

/// A rule on one line, when go-cmp keeps it on one: its fields fit in 80 columns.
fn compact_rule(rule: &Value) -> Option<String> {
    let inner = rule_fields(rule).join(", ");
    (inner.len() <= MAX_LINE).then(|| format!("{{{inner}}}"))
}

/// One rule as go-cmp prints an inserted or removed element: on one line if it fits, else one
/// field per line.
fn rule_element_lines(rule: &Value, sign: char, out: &mut Vec<String>) {
    match compact_rule(rule) {
        Some(single) => out.push(format!("{sign}\t\t{single},")),
        None => {
            out.push(format!("{sign}\t\t{{"));
            out.extend(rule_fields(rule).iter().map(|f| format!("{sign}\t\t\t{f},")));
            out.push(format!("{sign}\t\t}},"));
        }
    }
}

/// The whole `XValidations` field as go-cmp prints it when one side is nil (it does not diff
/// a nil slice element by element): `nil`, or `v1.ValidationRules{…}` on one line if it fits.
fn rules_value_lines(rules: Option<&Value>, sign: char, out: &mut Vec<String>) {
    let Some(rules) = rules.and_then(Value::as_array) else {
        out.push(format!("{sign}\tXValidations: nil,"));
        return;
    };
    let compact: Option<Vec<String>> = rules.iter().map(compact_rule).collect();
    match compact.map(|c| c.join(", ")).filter(|inner| inner.len() <= MAX_LINE) {
        Some(inner) => out.push(format!("{sign}\tXValidations: v1.ValidationRules{{{inner}}},")),
        None => {
            out.push(format!("{sign}\tXValidations: v1.ValidationRules{{"));
            rules.iter().for_each(|rule| rule_element_lines(rule, sign, out));
            out.push(format!("{sign}\t}},"));
        }
    }
}

/// go-cmp's diff of two rule lists: equal rules are context; in each gap between them, rules
/// that keep their expression or message are shown field by field, the others whole.
fn rule_list_lines(old: Option<&Value>, new: Option<&Value>, out: &mut Vec<String>) {
    if old.is_none() || new.is_none() {
        rules_value_lines(old, '-', out);
        rules_value_lines(new, '+', out);
        return;
    }
    let empty = Vec::new();
    let old = old.and_then(Value::as_array).unwrap_or(&empty);
    let new = new.and_then(Value::as_array).unwrap_or(&empty);
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let (old_rest, new_rest) = (old.get(i..).unwrap_or_default(), new.get(j..).unwrap_or_default());
        if old_rest.first().is_some_and(|a| new_rest.first() == Some(a)) {
            i += 1;
            j += 1;
            continue;
        }
        let next_old = old_rest.iter().position(|a| new_rest.contains(a)).map_or(old.len(), |k| i + k);
        let next_new = new_rest.iter().position(|b| old_rest.contains(b)).map_or(new.len(), |k| j + k);
        let (removed, inserted) = (old.get(i..next_old).unwrap_or_default(), new.get(j..next_new).unwrap_or_default());
        let similar =
            |a: &Value, b: &Value| ["rule", "message"].iter().any(|k| a.get(*k).is_some() && a.get(*k) == b.get(*k));
        let paired = removed.len().min(inserted.len());
        for (a, b) in removed.iter().zip(inserted) {
            if similar(a, b) {
                for (json, go, kind) in RULE_FIELDS {
                    if a.get(json) != b.get(json) {
                        out.push(format!("-\t\t\t{go}: {},", kind.render_cmp(a.get(json))));
                        out.push(format!("+\t\t\t{go}: {},", kind.render_cmp(b.get(json))));
                    }
                }
            } else {
                rule_element_lines(a, '-', out);
                rule_element_lines(b, '+', out);
            }
        }
        removed.iter().skip(paired).for_each(|rule| rule_element_lines(rule, '-', out));
        inserted.iter().skip(paired).for_each(|rule| rule_element_lines(rule, '+', out));
        (i, j) = (next_old.max(i + removed.len()), next_new.max(j + inserted.len()));
        if removed.is_empty() && inserted.is_empty() {
            i += 1;
            j += 1;
        }
    }
}

/// operator-controller's `conciseUnhandledMessage` over go-cmp diff lines.
fn concise_unhandled(lines: &[String]) -> String {
    struct Field {
        name: String,
        before: Option<(String, String)>,
        after: Option<(String, String)>,
    }
    let normalize = |raw: &str| -> String {
        let value = raw.trim().trim_end_matches(',').trim();
        if value.is_empty() {
            return "<empty>".into();
        }
        if value == "\"\"" {
            return value.into();
        }
        let value = value.replace("v1.", "");
        if value.contains("JSONSchemaProps") { "<complex value>".into() } else { value }
    };
    let mut fields: Vec<Field> = Vec::new();
    for line in lines {
        let line = line.trim_matches(|c: char| c.is_whitespace());
        let Some(sign) = line.chars().next().filter(|c| *c == '-' || *c == '+') else { continue };
        let Some(rest) = line.strip_prefix(sign).filter(|rest| !rest.is_empty()) else { continue };
        let rest = rest.trim().trim_start_matches('\t').trim();
        let rest = rest.strip_suffix(',').unwrap_or(rest);
        let Some((name, raw)) = rest.split_once(':') else { continue };
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let raw = raw.trim().to_string();
        let side = Some((normalize(&raw), raw));
        let field = match fields.iter().position(|f| f.name == name) {
            Some(index) => fields.get_mut(index),
            None => {
                fields.push(Field { name: name.to_string(), before: None, after: None });
                fields.last_mut()
            }
        };
        let Some(field) = field else { continue };
        if sign == '-' {
            field.before = side;
        } else {
            field.after = side;
        }
    }
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|f| {
            let (before, raw_before) = f.before.clone().unwrap_or(("<empty>".into(), String::new()));
            let (after, raw_after) = f.after.clone().unwrap_or(("<empty>".into(), String::new()));
            if (f.before.is_none() && f.after.is_none()) || (before == after && raw_before == raw_after) {
                return None;
            }
            let changed = if before == after { " (changed)" } else { "" };
            Some(format!("{} {before} -> {after}{changed}", f.name))
        })
        .collect();
    if parts.is_empty() {
        "unhandled changes found".into()
    } else {
        format!("unhandled changes found ({})", parts.join("; "))
    }
}

/// How go-cmp prints a JSONSchemaProps field.
#[derive(Debug, Clone, Copy)]
enum GoValue {
    /// `string`: `"x"`, unset `""`.
    String,
    /// `*string`: `&"x"`, unset `nil`.
    StringPointer,
    /// `bool`: `true`/`false`.
    Bool,
    /// `*bool`: `&true`, unset `nil`.
    BoolPointer,
    /// `*float64`: `&2`, unset `nil`.
    FloatPointer,
    /// `[]string`: `[]string{"a"}`, unset `nil`.
    Strings,
    /// Structs, schemas and raw JSON: summarised.
    Complex,
}

impl GoValue {
    /// The value as go-cmp writes it in a diff line; schemas and raw JSON as Go structs, which
    /// OLM's summary reads as `<complex value>`.
    fn render_cmp(self, value: Option<&Value>) -> String {
        match (self, value) {
            (GoValue::Complex, Some(value @ (Value::Object(_) | Value::Array(_)))) => {
                format!("&v1.JSONSchemaProps{{{value}}}")
            }
            _ => self.render(value),
        }
    }

    fn render(self, value: Option<&Value>) -> String {
        match (self, value) {
            (GoValue::String, v) => quote(v.and_then(Value::as_str).unwrap_or_default()),
            (GoValue::Bool, v) => v.and_then(Value::as_bool).unwrap_or(false).to_string(),
            (_, None) => "nil".into(),
            (GoValue::StringPointer, Some(v)) => {
                format!("&{}", quote(v.as_str().unwrap_or_default()))
            }
            (GoValue::BoolPointer, Some(v)) => format!("&{}", v.as_bool().unwrap_or(false)),
            (GoValue::FloatPointer, Some(v)) => format!("&{}", number_v(v, true)),
            (GoValue::Strings, Some(v)) => {
                let items: Vec<String> =
                    v.as_array().into_iter().flatten().map(|s| quote(s.as_str().unwrap_or_default())).collect();
                format!("[]string{{{}}}", items.join(", "))
            }
            (GoValue::Complex, Some(_)) => "<complex value>".into(),
        }
    }
}

/// JSONSchemaProps fields that no check owns, in Go struct order: JSON name, Go name, kind.
const GO_FIELDS: [(&str, &str, GoValue); 26] = [
    ("id", "ID", GoValue::String),
    ("$schema", "Schema", GoValue::String),
    ("$ref", "Ref", GoValue::StringPointer),
    ("format", "Format", GoValue::String),
    ("title", "Title", GoValue::String),
    ("exclusiveMaximum", "ExclusiveMaximum", GoValue::Bool),
    ("exclusiveMinimum", "ExclusiveMinimum", GoValue::Bool),
    ("uniqueItems", "UniqueItems", GoValue::Bool),
    ("multipleOf", "MultipleOf", GoValue::FloatPointer),
    ("allOf", "AllOf", GoValue::Complex),
    ("anyOf", "AnyOf", GoValue::Complex),
    ("not", "Not", GoValue::Complex),
    ("additionalProperties", "AdditionalProperties", GoValue::Complex),
    ("patternProperties", "PatternProperties", GoValue::Complex),
    ("dependencies", "Dependencies", GoValue::Complex),
    ("additionalItems", "AdditionalItems", GoValue::Complex),
    ("definitions", "Definitions", GoValue::Complex),
    ("externalDocs", "ExternalDocs", GoValue::Complex),
    ("example", "Example", GoValue::Complex),
    ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields", GoValue::BoolPointer),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource", GoValue::Bool),
    ("x-kubernetes-int-or-string", "XIntOrString", GoValue::Bool),
    ("x-kubernetes-list-map-keys", "XListMapKeys", GoValue::Strings),
    ("x-kubernetes-list-type", "XListType", GoValue::StringPointer),
    ("x-kubernetes-map-type", "XMapType", GoValue::StringPointer),
    ("x-kubernetes-validations", "XValidations", GoValue::Complex),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The spec's worked example: `{"required":["httpsRedirect"]}` as Go prints it.
    #[test]
    fn one_of_subschemas_print_as_go_structs() {
        let expected = "&JSONSchemaProps{ID:,Schema:,Ref:nil,Description:,Type:,Format:,Title:,Default:nil,Maximum:nil,ExclusiveMaximum:false,Minimum:nil,ExclusiveMinimum:false,MaxLength:nil,MinLength:nil,Pattern:,MaxItems:nil,MinItems:nil,UniqueItems:false,MultipleOf:nil,Enum:[]JSON{},MaxProperties:nil,MinProperties:nil,Required:[httpsRedirect],Items:nil,AllOf:[]JSONSchemaProps{},OneOf:[]JSONSchemaProps{},AnyOf:[]JSONSchemaProps{},Not:nil,Properties:map[string]JSONSchemaProps{},AdditionalProperties:nil,PatternProperties:map[string]JSONSchemaProps{},Dependencies:JSONSchemaDependencies{},AdditionalItems:nil,Definitions:JSONSchemaDefinitions{},ExternalDocs:nil,Example:nil,Nullable:false,XPreserveUnknownFields:nil,XEmbeddedResource:false,XIntOrString:false,XListMapKeys:[],XListType:nil,XMapType:nil,XValidations:[]ValidationRule{},}";
        let schema = json!({"required": ["httpsRedirect"]});
        assert_eq!(go_schema_string(schema.as_object().unwrap()).unwrap(), expected);
        let both =
            one_of_v(&[r#"{"required":["mode","credentialName"]}"#.into(), r#"{"required":["httpsRedirect"]}"#.into()]);
        assert!(
            both.starts_with("[&JSONSchemaProps{")
                && both.contains("Required:[httpsRedirect]")
                && both.find("Required:[httpsRedirect]") < both.find("Required:[mode credentialName]"),
            "{both}"
        );
        let typed = json!({"type": "integer", "maximum": 10, "x-kubernetes-list-type": "map"});
        let typed = go_schema_string(typed.as_object().unwrap()).unwrap();
        assert!(
            typed.contains(",Type:integer,") && typed.contains(",Maximum:*10,") && typed.contains(",XListType:*map,"),
            "{typed}"
        );
        let nested = json!({"properties": {"a": {"type": "string"}}});
        assert_eq!(go_schema_string(nested.as_object().unwrap()), None, "nested schemas stay JSON");
    }

    /// operator-controller `unhandled_message_test.go`, on the parts that map to JSON keywords.
    #[test]
    fn concise_unhandled_messages() {
        let change =
            |keyword: &str, old: Option<Value>, new: Option<Value>| KeywordChange { keyword: keyword.into(), old, new };
        assert_eq!(
            unhandled_text(&[change("format", None, Some(json!("email")))]),
            r#"unhandled changes found (Format "" -> "email")"#
        );
        assert_eq!(
            unhandled_text(&[
                change("x-kubernetes-list-type", None, Some(json!("map"))),
                change("x-kubernetes-list-map-keys", None, Some(json!(["name"])))
            ]),
            r#"unhandled changes found (XListMapKeys nil -> []string{"name"}; XListType nil -> &"map")"#
        );
        assert_eq!(
            unhandled_text(&[change("example", Some(json!({})), Some(json!({"type": "string"})))]),
            "unhandled changes found (Example <complex value> -> <complex value> (changed))"
        );
        assert_eq!(unhandled_text(&[]), "unhandled changes found");
    }

    /// Issue 11, defect 8: a CRD whose findings are not adjacent is still one block.
    #[test]
    fn each_crd_is_reported_once_whatever_the_order_of_its_findings() {
        use crate::finding::{Finding, Scope, Severity};
        let finding = |crd: &str| Finding {
            crd: crd.into(),
            scope: Scope::Crd,
            path: None,
            change: Change::ScopeChanged { old: "Namespaced".into(), new: "Cluster".into() },
            severity: Severity::Error,
            implied_by_removal: false,
            location: None,
        };
        let (a, b, a_again) = (finding("a.example.com"), finding("b.example.com"), finding("a.example.com"));
        let printed = lines(&[&a, &b, &a_again]);
        let headers = |crd: &str| {
            printed.iter().filter(|l| l.starts_with(&format!("validating upgrade for CRD {crd:?}"))).count()
        };
        assert_eq!((headers("a.example.com"), headers("b.example.com")), (1, 1), "{printed:?}");
        assert!(
            printed[0].contains("a.example.com") && !printed[1].contains("CRD"),
            "a's findings together: {printed:?}"
        );
    }

    /// Issue 11, defect 10: rule lists read as go-cmp's diff of them.
    #[test]
    fn validation_rules_read_as_go_cmp_reports_them() {
        let change =
            |keyword: &str, old: Option<Value>, new: Option<Value>| KeywordChange { keyword: keyword.into(), old, new };
        let cors = json!({"rule": "!(!has(self.cors) && self.type == 'CORS')", "message": "filter.cors must be specified for CORS filter.type"});
        let kept = json!({"rule": "self.type != ''"});
        assert_eq!(
            unhandled_text(&[change("x-kubernetes-validations", Some(json!([kept])), Some(json!([kept, cors])))]),
            r#"unhandled changes found (Rule <empty> -> "!(!has(self.cors) && self.type == 'CORS')"; Message <empty> -> "filter.cors must be specified for CORS filter.type")"#
        );
        // A short element stays on one line, which OLM's summary splits at its first colon.
        assert_eq!(
            unhandled_text(&[change("x-kubernetes-validations", Some(json!([])), Some(json!([kept])))]),
            r#"unhandled changes found ({Rule <empty> -> "self.type != ''"})"#
        );
        // A changed rule shows its changed fields only.
        let reworded = json!({"rule": "self.type != ''", "message": "type is required"});
        assert_eq!(
            unhandled_text(&[change("x-kubernetes-validations", Some(json!([kept])), Some(json!([reworded])))]),
            r#"unhandled changes found (Message "" -> "type is required")"#
        );
        // go-cmp does not diff a nil slice element by element: the whole field changes.
        assert_eq!(
            unhandled_text(&[change("x-kubernetes-validations", None, Some(json!([kept])))]),
            r#"unhandled changes found (XValidations nil -> ValidationRules{{Rule: "self.type != ''"}})"#
        );
    }
}

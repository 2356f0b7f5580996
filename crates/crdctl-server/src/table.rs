//! Server-side `Table` output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): the
//! CRD's `additionalPrinterColumns` for the requested version, after apiextensions'
//! `tableconvertor`, so `kubectl get` prints the CRD's columns; built-in kinds have the columns
//! of upstream's printers (`pkg/printers/internalversion`).

use std::borrow::Cow;

use serde_json::{Value, json};

/// One printer column.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header, e.g. `Spec`.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format, e.g. `name`.
    pub format: String,
    /// Shown with `-o wide` when > 0.
    pub priority: i64,
    /// Description.
    pub description: String,
    /// Where the value comes from.
    pub source: Source,
}

/// Where a cell's value comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `metadata.name`.
    Name,
    /// `metadata.creationTimestamp` as it is (the `Created At` column).
    Created,
    /// A JSONPath (`.spec.cronSpec`), read as the column's type says.
    Path(Cow<'static, str>),
    /// How many entries the top-level fields at these names hold together (map keys or list
    /// items): a ConfigMap's `Data`.
    Count(&'static [&'static str]),
    /// `<first>/<second>` of two JSONPaths: a binding's `Role`.
    Pair(&'static str, &'static str),
    /// Computed from the object by a kind's printer: a Service's `Port(s)`.
    Computed(fn(&Value) -> Value),
    /// The time since the timestamp a kind's printer picks, as upstream's
    /// `translateTimestampSince` (`<unknown>` without one): an Event's `Last Seen`.
    Since(fn(&Value) -> Option<String>),
}

impl Column {
    /// A column of a built-in kind.
    pub fn new(name: &str, type_: &str, priority: i64, description: &str, source: Source) -> Column {
        Column {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            priority,
            description: description.into(),
            source,
        }
    }

    /// `Age`, from `metadata.creationTimestamp`.
    pub fn age() -> Column {
        Column::new(
            "Age",
            "date",
            0,
            CREATION_TIMESTAMP_DESCRIPTION,
            Source::Path(".metadata.creationTimestamp".into()),
        )
    }

    /// `Name`, first in every table.
    pub fn name() -> Column {
        name_column()
    }
}

const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn name_column() -> Column {
    Column {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        priority: 0,
        description: "Name must be unique within a namespace. It is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
        source: Source::Name,
    }
}

/// The columns for a version's `additionalPrinterColumns` (an `Age` column when there are none).
pub fn custom_resource_columns(printer_columns: Option<&Value>) -> Vec<Column> {
    let mut columns = vec![name_column()];
    let defined: Vec<&Value> =
        printer_columns.and_then(Value::as_array).map(|c| c.iter().collect()).unwrap_or_default();
    if defined.is_empty() {
        columns.push(Column::age());
    }
    for column in defined {
        let text = |key: &str| column.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let json_path = text("jsonPath");
        let description = column.get("description").and_then(Value::as_str).map_or_else(
            || format!("Custom resource definition column (in JSONPath format): {json_path}"),
            str::to_string,
        );
        columns.push(Column {
            name: text("name"),
            type_: text("type"),
            format: text("format"),
            priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
            description,
            source: Source::Path(json_path.into()),
        });
    }
    columns
}

/// `NAME` and `CREATED AT`, the default table of built-in-like resources (CRDs).
pub fn created_at_columns() -> Vec<Column> {
    vec![
        name_column(),
        Column {
            name: "Created At".into(),
            type_: "date".into(),
            format: String::new(),
            priority: 0,
            description: CREATION_TIMESTAMP_DESCRIPTION.into(),
            source: Source::Created,
        },
    ]
}

/// A `meta.k8s.io/v1` `Table` of `objects` with `columns`; `include_object` is `None`,
/// `Metadata` (the default) or `Object`.
pub fn table(columns: &[Column], objects: &[Value], list_meta: Value, include_object: &str, now: i64) -> Value {
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> = columns.iter().map(|column| cell(column, object, now)).collect();
            let mut row = json!({"cells": cells});
            match include_object {
                "None" => {}
                "Object" => crate::object::set(&mut row, "object", object.clone()),
                _ => {
                    let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
                    let partial =
                        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata});
                    crate::object::set(&mut row, "object", partial);
                }
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": definitions, "rows": rows})
}

fn cell(column: &Column, object: &Value, now: i64) -> Value {
    let path = match &column.source {
        Source::Name => return crate::object::meta_field(object, "name").cloned().unwrap_or(Value::Null),
        Source::Created => {
            return crate::object::meta_field(object, "creationTimestamp").cloned().unwrap_or(Value::Null);
        }
        Source::Count(fields) => {
            let count = |field: &&str| match object.get(*field) {
                Some(Value::Object(map)) => map.len(),
                Some(Value::Array(items)) => items.len(),
                _ => 0,
            };
            return Value::from(fields.iter().map(count).sum::<usize>());
        }
        Source::Pair(first, second) => {
            let text = |path: &str| crate::jsonpath::first(object, path).and_then(Value::as_str).unwrap_or_default();
            return Value::String(format!("{}/{}", text(first), text(second)));
        }
        Source::Computed(print) => return print(object),
        Source::Since(pick) => {
            let then = pick(object).and_then(|text| crate::object::parse_timestamp(&text));
            return Value::String(then.map_or_else(|| "<unknown>".into(), |then| human_duration(now - then)));
        }
        Source::Path(path) => path,
    };
    let Some(value) = crate::jsonpath::first(object, path) else { return Value::Null };
    match column.type_.as_str() {
        "string" => Value::String(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        "integer" => value.as_i64().map_or(Value::Null, Value::from),
        "number" => value.as_f64().map_or(Value::Null, Value::from),
        "boolean" => value.as_bool().map_or(Value::Null, Value::from),
        "date" => match value.as_str() {
            Some(text) => Value::String(match crate::object::parse_timestamp(text) {
                Some(then) => human_duration(now - then),
                None => "<invalid>".into(),
            }),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// apimachinery's `duration.HumanDuration`: `5s`, `3m20s`, `4h`, `2d3h`, `3y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_apimachinery() {
        for (seconds, text) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn columns_are_read_with_their_types() {
        let columns = custom_resource_columns(Some(&json!([
            {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ])));
        let object = json!({"metadata": {"name": "a", "creationTimestamp": "2026-12-01T10:00:00Z"},
                            "spec": {"cronSpec": "* * * * */5", "replicas": 2}});
        let now = crate::object::parse_timestamp("2026-12-01T10:05:00Z").unwrap();
        let table = table(&columns, &[object], json!({}), "None", now);
        assert_eq!(table["rows"][0]["cells"], json!(["a", "* * * * */5", 2, "5m"]));
        assert_eq!(
            table["columnDefinitions"][1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.cronSpec"
        );
    }

    #[test]
    fn computed_cells_count_entries_and_pair_paths() {
        let columns = [
            Column::name(),
            Column::new("Data", "string", 0, "", Source::Count(&["data", "binaryData"])),
            Column::new("Role", "string", 0, "", Source::Pair(".roleRef.kind", ".roleRef.name")),
        ];
        let object = json!({"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}, "binaryData": {"z": ""},
                            "roleRef": {"kind": "ClusterRole", "name": "view"}});
        let table = table(&columns, &[object], json!({}), "None", 0);
        assert_eq!(table["rows"][0]["cells"], json!(["a", 3, "ClusterRole/view"]));
    }
}

//! Events, so controllers' event recorders work: core `v1` Events and `events.k8s.io/v1`
//! Events are one resource in two shapes, as upstream. They are stored once, in the core shape
//! (upstream's storage version), under `/registry/events/<namespace>/<name>`, and converted
//! field by field for `events.k8s.io/v1` (upstream `pkg/apis/events/v1/conversion.go`).

use serde_json::{Map, Value};

use crate::error::{ApiError, Subject};
use crate::selector::{SelectableFields, field_value};

/// Where events are stored.
pub const PREFIX: &str = "/registry/events/";

/// The API group of the newer shape.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// Which shape a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Core `v1`.
    Core,
    /// `events.k8s.io/v1`.
    Events,
}

impl Shape {
    /// The `apiVersion` of the shape.
    pub fn api_version(self) -> &'static str {
        match self {
            Shape::Core => "v1",
            Shape::Events => "events.k8s.io/v1",
        }
    }
}

/// `events.k8s.io/v1` field → core `v1` field; the others have the same name in both.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The store key of event `name` in `namespace`.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}{name}", prefix(namespace))
}

/// The prefix of the events of a namespace, or of all.
pub fn prefix(namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{PREFIX}{namespace}/"),
        None => PREFIX.to_string(),
    }
}

fn renamed(fields: Map<String, Value>, to_core: bool) -> Map<String, Value> {
    fields
        .into_iter()
        .map(|(field, value)| {
            let target = RENAMED
                .iter()
                .find(|(events, core)| field == if to_core { *events } else { *core })
                .map_or(field.clone(), |(events, core)| if to_core { core.to_string() } else { events.to_string() });
            (target, value)
        })
        .collect()
}

/// A stored (core) event in the shape asked for.
pub fn present(object: Value, shape: Shape) -> Value {
    match (shape, object) {
        (Shape::Events, Value::Object(fields)) => {
            let mut fields = renamed(fields, false);
            fields.insert("apiVersion".into(), Value::String(Shape::Events.api_version().into()));
            Value::Object(fields)
        }
        (_, object) => object,
    }
}

/// Checks a written event's `apiVersion` and `kind` (taken from the URL when the body has none)
/// and returns it in the stored (core) shape.
pub fn to_storage(mut object: Value, shape: Shape) -> Result<Value, ApiError> {
    crate::object::check_type(&mut object, shape.api_version(), "Event")?;
    let Value::Object(fields) = object else { return Err(ApiError::bad_request("an Event must be an object")) };
    let mut fields = if shape == Shape::Events { renamed(fields, true) } else { fields };
    fields.insert("apiVersion".into(), Value::String(Shape::Core.api_version().into()));
    Ok(Value::Object(fields))
}

/// The fields an event list can select on, as upstream's event `GetAttrs`: the involved
/// object's, `reason`, `reportingComponent`, `source` (the source component, else the reporting
/// controller) and `type`, read from the stored (core) shape.
pub const SELECTABLE_FIELDS: SelectableFields = SelectableFields {
    labels: &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ],
    value: |event, label| match label {
        "source" => Some(field_value(event, "source.component"))
            .filter(|component| !component.is_empty())
            .unwrap_or_else(|| field_value(event, "reportingComponent")),
        label => field_value(event, label),
    },
};

/// What errors about event `name` name.
pub fn subject<'a>(group: &'a str, name: &'a str) -> Subject<'a> {
    Subject { group, resource: "events", name }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_two_shapes_convert_into_each_other() {
        let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "CronTab", "name": "c"}, "note": "reconciled", "reason": "Ready",
            "reportingController": "crontab-controller", "reportingInstance": "pod-1", "type": "Normal",
            "eventTime": "2026-12-01T10:00:00.000000Z", "action": "Reconcile"});
        let core = to_storage(events.clone(), Shape::Events).unwrap();
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "reconciled");
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["reportingComponent"], "crontab-controller");
        assert_eq!(core["reportingInstance"], "pod-1");
        assert!(core.get("note").is_none());
        assert_eq!(present(core.clone(), Shape::Events), events);
        assert_eq!(present(core.clone(), Shape::Core), core);
        let wrong = to_storage(json!({"apiVersion": "v1", "kind": "Event"}), Shape::Events).unwrap_err();
        assert!(wrong.message.contains("does not match the expected API version (events.k8s.io/v1)"));
    }
}

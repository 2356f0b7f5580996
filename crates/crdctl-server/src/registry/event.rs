//! Events, so controllers' event recorders work: core `v1` Events and `events.k8s.io/v1`
//! Events are one resource in two shapes, as upstream: two rows of the built-in table, the
//! second stored as the first (upstream's storage version), under
//! `/registry/events/<namespace>/<name>`, converted field by field (upstream
//! `pkg/apis/events/v1/conversion.go`).

use serde_json::{Map, Value};

use crate::selector::{SelectableFields, field_value};
use crate::table::{Column, Source};

/// Where events are stored.
pub const PREFIX: &str = "/registry/events/";

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

/// A stored (core) event in the `events.k8s.io/v1` shape.
pub fn to_events(object: Value) -> Value {
    shaped(object, false, "events.k8s.io/v1")
}

/// An `events.k8s.io/v1` event in the stored (core) shape.
pub fn to_core(object: Value) -> Value {
    shaped(object, true, "v1")
}

fn shaped(object: Value, to_core: bool, api_version: &str) -> Value {
    let Value::Object(fields) = object else { return object };
    let mut fields = renamed(fields, to_core);
    fields.insert("apiVersion".into(), Value::String(api_version.into()));
    Value::Object(fields)
}

/// `involvedObject.fieldPath`'s description, the `Subobject` column's.
const FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";

/// Upstream's event printer (`printEvent`), its column descriptions the fields' in upstream's
/// OpenAPI document: `Last Seen`, `Type`, `Reason`, `Object`, `Message`,
/// and with `-o wide` `Subobject`, `Source`, `First Seen`, `Count`, `Name`; of either shape.
pub fn columns() -> Vec<Column> {
    let text = |name: &str, priority: i64, description: &str, source: Source| {
        Column::new(name, "string", priority, description, source)
    };
    vec![
        text(
            "Last Seen",
            0,
            "The time at which the most recent occurrence of this event was recorded.",
            Source::Since(last_seen),
        ),
        text(
            "Type",
            0,
            "Type of this event (Normal, Warning), new types could be added in the future",
            Source::Computed(|e| core_text(e, "type")),
        ),
        text(
            "Reason",
            0,
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            Source::Computed(|e| core_text(e, "reason")),
        ),
        text("Object", 0, "The object that this event is about.", Source::Computed(object)),
        text("Subobject", 1, FIELD_PATH, Source::Computed(|e| core_text(e, "involvedObject.fieldPath"))),
        text(
            "Source",
            1,
            "The component reporting this event. Should be a short machine understandable string.",
            Source::Computed(source),
        ),
        text("Message", 0, "A human-readable description of the status of this operation.", Source::Computed(message)),
        text(
            "First Seen",
            1,
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            Source::Since(first_seen),
        ),
        text("Count", 1, "The number of times this event has occurred.", Source::Computed(count)),
        Column { priority: 1, ..Column::name() },
    ]
}

/// An event in the stored (core) shape, whichever shape it is presented in.
fn core(event: &Value) -> std::borrow::Cow<'_, Value> {
    match event.get("apiVersion").and_then(Value::as_str) {
        Some("events.k8s.io/v1") => std::borrow::Cow::Owned(to_core(event.clone())),
        _ => std::borrow::Cow::Borrowed(event),
    }
}

fn core_text(event: &Value, field: &str) -> Value {
    Value::String(field_value(&core(event), field))
}

/// A timestamp field, unless unset (upstream prints zero times as `<unknown>`).
fn timestamp(event: &Value, field: &str) -> Option<String> {
    Some(field_value(event, field)).filter(|text| !text.is_empty())
}

fn first_seen(event: &Value) -> Option<String> {
    let event = core(event);
    timestamp(&event, "firstTimestamp").or_else(|| timestamp(&event, "eventTime"))
}

fn last_seen(event: &Value) -> Option<String> {
    let core = core(event);
    if core.get("series").is_some_and(Value::is_object) {
        return timestamp(&core, "series.lastObservedTime");
    }
    timestamp(&core, "lastTimestamp").or_else(|| first_seen(&core))
}

/// `<kind>/<name>` of the involved object, the kind in lower case.
fn object(event: &Value) -> Value {
    let event = core(event);
    let kind = field_value(&event, "involvedObject.kind").to_lowercase();
    Value::String(match field_value(&event, "involvedObject.name") {
        name if name.is_empty() => kind,
        name => format!("{kind}/{name}"),
    })
}

/// The source component (else the reporting controller), with its host (else the reporting
/// instance) after a comma.
fn source(event: &Value) -> Value {
    let event = core(event);
    let either = |first: &str, second: &str| {
        Some(field_value(&event, first)).filter(|text| !text.is_empty()).unwrap_or_else(|| field_value(&event, second))
    };
    let (component, instance) =
        (either("source.component", "reportingComponent"), either("source.host", "reportingInstance"));
    Value::String(match (component.is_empty(), instance.is_empty()) {
        (true, _) => String::new(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    })
}

fn message(event: &Value) -> Value {
    Value::String(field_value(&core(event), "message").trim().to_string())
}

/// The series' count, else `count`, at least 1.
fn count(event: &Value) -> Value {
    let event = core(event);
    let count = match event.get("series").filter(|series| series.is_object()) {
        Some(series) => series.get("count").and_then(Value::as_i64).unwrap_or(0),
        None => event.get("count").and_then(Value::as_i64).filter(|count| *count != 0).unwrap_or(1),
    };
    Value::from(count)
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
        let core = to_core(events.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "reconciled");
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["reportingComponent"], "crontab-controller");
        assert_eq!(core["reportingInstance"], "pod-1");
        assert!(core.get("note").is_none());
        assert_eq!(to_events(core), events);
    }

    /// Upstream's `printEvent` cells, from either shape.
    #[test]
    fn the_printer_columns_are_upstreams() {
        let now = crate::object::parse_timestamp("2026-12-01T10:05:00Z").unwrap();
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Deployment", "name": "web", "fieldPath": "spec"}, "reason": "ScalingReplicaSet",
            "message": " Scaled up to 3 \n", "type": "Normal", "source": {"component": "deployment-controller"},
            "firstTimestamp": "2026-12-01T10:00:00Z", "lastTimestamp": "2026-12-01T10:04:00Z", "count": 2});
        let table = crate::table::table(&columns(), &[core], json!({}), "None", now);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(
            cells,
            &json!([
                "60s",
                "Normal",
                "ScalingReplicaSet",
                "deployment/web",
                "spec",
                "deployment-controller",
                "Scaled up to 3",
                "5m",
                2,
                "web.1"
            ])
        );
        let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.2"},
            "regarding": {"kind": "CronTab"}, "reason": "Synced", "type": "Warning", "note": "ok",
            "eventTime": "2026-12-01T10:04:30.000000Z", "reportingController": "crontab-controller",
            "reportingInstance": "pod-1", "series": {"count": 4, "lastObservedTime": "2026-12-01T10:04:50.000000Z"}});
        let table = crate::table::table(&columns(), &[events], json!({}), "None", now);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(
            cells,
            &json!(["10s", "Warning", "Synced", "crontab", "", "crontab-controller, pod-1", "ok", "30s", 4, "web.2"])
        );
        let never = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}});
        let table = crate::table::table(&columns(), &[never], json!({}), "None", now);
        assert_eq!(table["rows"][0]["cells"][0], "<unknown>");
        assert_eq!(table["rows"][0]["cells"][8], 1);
    }
}

//! Events, so controllers' event recorders work: core `v1` Events and `events.k8s.io/v1`
//! Events are one resource in two shapes, as upstream: two rows of the built-in table, the
//! second stored as the first (upstream's storage version), under
//! `/registry/events/<namespace>/<name>`, converted field by field (upstream
//! `pkg/apis/events/v1/conversion.go`).

use serde_json::{Map, Value};

use crate::selector::{SelectableFields, field_value};

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
}

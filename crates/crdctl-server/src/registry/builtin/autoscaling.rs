//! HorizontalPodAutoscalers: `autoscaling/v2`'s defaults, and `autoscaling/v1` served from
//! objects stored in v2, as upstream stores them (`pkg/apis/autoscaling/v1/conversion.go`).
//!
//! v1 says one thing v2 says as a metric: `targetCPUUtilizationPercentage` is v2's `Resource`
//! metric on `cpu` with an `Utilization` target (and `currentCPUUtilizationPercentage` its
//! current value). What v1 cannot say travels in upstream's annotations, in v1's older metric
//! shapes (`targetAverageValue`, `metricName`, …): the other metrics, every current metric,
//! the conditions and the scaling behavior. A v1 object without metrics gets v2's default, CPU
//! at 80%.

use serde_json::{Map, Value, json};

/// v2's other metrics, as v1 `MetricSpec`s.
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// v2's current metrics, as v1 `MetricStatus`es.
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// v2's conditions.
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// v2's `spec.behavior`.
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.DefaultCPUUtilization`.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// `SetDefaults_HorizontalPodAutoscaler` of `version`: `minReplicas` 1; in v2 also CPU at 80%
/// without metrics, and a given `behavior`'s rules filled in (v1 gets those from the conversion).
pub fn default(version: &str, object: &mut Value) {
    let spec = crate::object::object_mut(object, "spec");
    spec.entry("minReplicas").or_insert(json!(1));
    if version != "v2" {
        return;
    }
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("metrics".into(), json!([cpu_target(DEFAULT_CPU_UTILIZATION)]));
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        let scale_up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]});
        let scale_down = json!({"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]});
        for (direction, defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
            let rules = crate::object::fields_mut(behavior.entry(direction).or_insert_with(|| json!({})));
            if let Value::Object(defaults) = defaults {
                for (field, value) in defaults {
                    rules.entry(field).or_insert(value);
                }
            }
        }
    }
}

/// The `Targets` column of upstream's printer (`formatHPAMetrics`): each metric's current value
/// and target (`cpu: 55%/70%`, `memory: <unknown>/100Mi`, `<unknown>/10`), the first two, then
/// `+ N more...`; a v1 object is read as the v2 object it is stored as.
pub fn targets(object: &Value) -> Value {
    let stored;
    let object = match object.get("apiVersion").and_then(Value::as_str) {
        Some("autoscaling/v1") => {
            stored = from_v1(object.clone());
            &stored
        }
        _ => object,
    };
    let specs = object.pointer("/spec/metrics").and_then(Value::as_array).cloned().unwrap_or_default();
    if specs.is_empty() {
        return json!("<none>");
    }
    let statuses = object.pointer("/status/currentMetrics").and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |value: Option<&Value>| match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<unknown>".into(),
    };
    let shown: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default();
            let field = SOURCES.iter().find(|(name, _)| *name == kind).map(|(_, field)| *field).unwrap_or_default();
            let source = spec.get(field).cloned().unwrap_or_default();
            let current = statuses.get(i).and_then(|status| status.get(field)).and_then(|s| s.get("current"));
            let target = source.get("target").cloned().unwrap_or_default();
            let averaged = target.get("averageValue").is_some();
            match kind {
                "Resource" | "ContainerResource" => {
                    let name = text(source.get("name"));
                    if averaged {
                        let now = text(current.and_then(|c| c.get("averageValue")));
                        format!("{name}: {now}/{}", text(target.get("averageValue")))
                    } else {
                        let percent = |v: Option<&Value>| v.and_then(Value::as_i64).map(|p| format!("{p}%"));
                        let now = percent(current.and_then(|c| c.get("averageUtilization")));
                        let goal = percent(target.get("averageUtilization")).unwrap_or_else(|| "<auto>".into());
                        format!("{name}: {}/{goal}", now.unwrap_or_else(|| "<unknown>".into()))
                    }
                }
                "Pods" => {
                    format!(
                        "{}/{}",
                        text(current.and_then(|c| c.get("averageValue"))),
                        text(target.get("averageValue"))
                    )
                }
                "Object" | "External" if averaged => format!(
                    "{}/{} (avg)",
                    text(current.and_then(|c| c.get("averageValue"))),
                    text(target.get("averageValue"))
                ),
                "Object" | "External" => {
                    format!("{}/{}", text(current.and_then(|c| c.get("value"))), text(target.get("value")))
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    const SHOWN: usize = 2;
    let first: Vec<&str> = shown.iter().take(SHOWN).map(String::as_str).collect();
    match shown.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => json!(format!("{} + {more} more...", first.join(", "))),
        _ => json!(first.join(", ")),
    }
}

/// The v2 metric of a CPU utilization target.
fn cpu_target(utilization: i64) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// A v1 HorizontalPodAutoscaler, as it is stored (v2).
pub fn from_v1(mut object: Value) -> Value {
    crate::object::set(&mut object, "apiVersion", json!("autoscaling/v2"));
    let mut annotations = take_annotations(&mut object);
    let carried = |annotations: &mut Map<String, Value>, key: &str| {
        let text = annotations.remove(key)?;
        serde_json::from_str::<Value>(text.as_str()?).ok()
    };
    let other_metrics = carried(&mut annotations, METRICS);
    let current_metrics = carried(&mut annotations, CURRENT_METRICS);
    let conditions = carried(&mut annotations, CONDITIONS);
    let behavior = carried(&mut annotations, BEHAVIOR);
    put_annotations(&mut object, annotations);

    let spec = crate::object::object_mut(&mut object, "spec");
    let cpu = spec.remove("targetCPUUtilizationPercentage").and_then(|v| v.as_i64());
    let mut metrics: Vec<Value> = list(other_metrics).iter().map(|m| metric_to_v2(m, false)).collect();
    metrics.extend(cpu.map(cpu_target));
    if metrics.is_empty() {
        metrics.push(cpu_target(DEFAULT_CPU_UTILIZATION));
    }
    spec.insert("metrics".into(), Value::Array(metrics));
    if let Some(behavior) = behavior {
        spec.insert("behavior".into(), behavior);
    }

    let status = object.get_mut("status").and_then(Value::as_object_mut);
    if let Some(status) = status {
        let current_cpu = status.remove("currentCPUUtilizationPercentage");
        let current: Vec<Value> = match current_metrics {
            Some(current) => list(Some(current)).iter().map(|m| metric_to_v2(m, true)).collect(),
            None => current_cpu
                .map(|cpu| json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": cpu}}}))
                .into_iter()
                .collect(),
        };
        if !current.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(conditions) = conditions {
            status.insert("conditions".into(), conditions);
        }
    }
    object
}

/// A stored (v2) HorizontalPodAutoscaler, as v1 reads it.
pub fn to_v1(mut object: Value) -> Value {
    crate::object::set(&mut object, "apiVersion", json!("autoscaling/v1"));
    let mut annotations = take_annotations(&mut object);
    let spec = crate::object::object_mut(&mut object, "spec");
    let metrics = list(spec.remove("metrics"));
    let behavior = spec.remove("behavior");
    let is_cpu =
        |metric: &Value| metric["type"] == "Resource" && metric.pointer("/resource/name") == Some(&json!("cpu"));
    if let Some(cpu) = metrics.iter().find(|m| is_cpu(m)).and_then(|m| m.pointer("/resource/target/averageUtilization"))
    {
        spec.insert("targetCPUUtilizationPercentage".into(), cpu.clone());
    }
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| !(is_cpu(m) && m.pointer("/resource/target/averageUtilization").is_some()))
        .map(|m| metric_to_v1(m, false))
        .collect();

    let status = crate::object::object_mut(&mut object, "status");
    let current = list(status.remove("currentMetrics"));
    let conditions = list(status.remove("conditions"));
    if let Some(cpu) =
        current.iter().rev().filter(|m| is_cpu(m)).find_map(|m| m.pointer("/resource/current/averageUtilization"))
    {
        status.insert("currentCPUUtilizationPercentage".into(), cpu.clone());
    }
    // v1's replica counts are plain integers, always written.
    for count in ["currentReplicas", "desiredReplicas"] {
        status.entry(count).or_insert(json!(0));
    }

    let carry = |annotations: &mut Map<String, Value>, key: &str, values: Value| {
        annotations.insert(key.into(), Value::String(values.to_string()));
    };
    if !other.is_empty() {
        carry(&mut annotations, METRICS, Value::Array(other));
    }
    if !current.is_empty() {
        carry(&mut annotations, CURRENT_METRICS, Value::Array(current.iter().map(|m| metric_to_v1(m, true)).collect()));
    }
    if !conditions.is_empty() {
        carry(&mut annotations, CONDITIONS, Value::Array(conditions));
    }
    if let Some(behavior) = behavior {
        carry(&mut annotations, BEHAVIOR, behavior);
    }
    put_annotations(&mut object, annotations);
    object
}

fn list(value: Option<Value>) -> Vec<Value> {
    match value {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

fn take_annotations(object: &mut Value) -> Map<String, Value> {
    match crate::object::meta_mut(object).remove("annotations") {
        Some(Value::Object(annotations)) => annotations,
        _ => Map::new(),
    }
}

fn put_annotations(object: &mut Value, annotations: Map<String, Value>) {
    if !annotations.is_empty() {
        crate::object::meta_mut(object).insert("annotations".into(), Value::Object(annotations));
    }
}

/// The source (or, with `status`, the current value) of each metric type, by its v2 field name.
const SOURCES: [(&str, &str); 5] = [
    ("Object", "object"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
    ("External", "external"),
];

/// A v1 `MetricSpec` (or, with `status`, `MetricStatus`) in v2's shape.
fn metric_to_v2(metric: &Value, status: bool) -> Value {
    convert_metric(metric, |kind, source| {
        let mut out = Map::new();
        let zero = || json!("0");
        let get = |field: &str| source.get(field).cloned();
        let identifier = |name: &str, selector: &str| {
            let mut identifier = Map::new();
            identifier.insert("name".into(), get(name).unwrap_or_else(|| json!("")));
            if let Some(selector) = get(selector) {
                identifier.insert("selector".into(), selector);
            }
            Value::Object(identifier)
        };
        let mut value = Map::new();
        let mut put = |field: &str, v: Option<Value>| {
            if let Some(v) = v {
                value.insert(field.into(), v);
            }
        };
        match (kind, status) {
            ("Resource" | "ContainerResource", false) => {
                let utilization = get("targetAverageUtilization");
                put("type", Some(json!(if utilization.is_some() { "Utilization" } else { "AverageValue" })));
                put("averageValue", get("targetAverageValue"));
                put("averageUtilization", utilization);
            }
            ("Resource" | "ContainerResource", true) => {
                put("averageValue", Some(get("currentAverageValue").unwrap_or_else(zero)));
                put("averageUtilization", get("currentAverageUtilization"));
            }
            ("Pods", false) => {
                put("type", Some(json!("AverageValue")));
                put("averageValue", Some(get("targetAverageValue").unwrap_or_else(zero)));
            }
            ("Pods", true) => put("averageValue", Some(get("currentAverageValue").unwrap_or_else(zero))),
            ("Object", false) => {
                let average = get("averageValue");
                put("type", Some(json!(if average.is_none() { "Value" } else { "AverageValue" })));
                put("value", Some(get("targetValue").unwrap_or_else(zero)));
                put("averageValue", average);
            }
            ("Object", true) => {
                put("value", Some(get("currentValue").unwrap_or_else(zero)));
                put("averageValue", get("averageValue"));
            }
            ("External", false) => {
                let target = get("targetValue");
                put("type", Some(json!(if target.is_none() { "AverageValue" } else { "Value" })));
                put("value", target);
                put("averageValue", get("targetAverageValue"));
            }
            (_, _) => {
                put("value", Some(get("currentValue").unwrap_or_else(zero)));
                put("averageValue", get("currentAverageValue"));
            }
        }
        let value = Value::Object(value);
        let measured = if status { "current" } else { "target" };
        match kind {
            "Resource" | "ContainerResource" => {
                out.insert("name".into(), get("name").unwrap_or_else(|| json!("")));
                out.insert(measured.into(), value);
                if let Some(container) = get("container") {
                    out.insert("container".into(), container);
                }
            }
            "Pods" => {
                out.insert("metric".into(), identifier("metricName", "selector"));
                out.insert(measured.into(), value);
            }
            "Object" => {
                out.insert("describedObject".into(), get("target").unwrap_or_else(|| json!({})));
                out.insert(measured.into(), value);
                out.insert("metric".into(), identifier("metricName", "selector"));
            }
            _ => {
                out.insert("metric".into(), identifier("metricName", "metricSelector"));
                out.insert(measured.into(), value);
            }
        }
        Value::Object(out)
    })
}

/// A v2 `MetricSpec` (or, with `status`, `MetricStatus`) in v1's shape.
fn metric_to_v1(metric: &Value, status: bool) -> Value {
    convert_metric(metric, |kind, source| {
        let measured = source.get(if status { "current" } else { "target" }).cloned().unwrap_or_default();
        let of = |field: &str| measured.get(field).cloned();
        let zero = || json!("0");
        let metric_name = source.pointer("/metric/name").cloned().unwrap_or_else(|| json!(""));
        let selector = source.pointer("/metric/selector").cloned();
        let mut out = Map::new();
        let mut put = |field: &str, v: Option<Value>| {
            if let Some(v) = v {
                out.insert(field.into(), v);
            }
        };
        match (kind, status) {
            ("Resource" | "ContainerResource", false) => {
                put("name", source.get("name").cloned());
                put("targetAverageUtilization", of("averageUtilization"));
                put("targetAverageValue", of("averageValue"));
                put("container", source.get("container").cloned());
            }
            ("Resource" | "ContainerResource", true) => {
                put("name", source.get("name").cloned());
                put("currentAverageUtilization", of("averageUtilization"));
                put("currentAverageValue", Some(of("averageValue").unwrap_or_else(zero)));
                put("container", source.get("container").cloned());
            }
            ("Pods", _) => {
                put("metricName", Some(metric_name));
                let field = if status { "currentAverageValue" } else { "targetAverageValue" };
                put(field, Some(of("averageValue").unwrap_or_else(zero)));
                put("selector", selector);
            }
            ("Object", _) => {
                put("target", source.get("describedObject").cloned());
                put("metricName", Some(metric_name));
                put(if status { "currentValue" } else { "targetValue" }, Some(of("value").unwrap_or_else(zero)));
                put("selector", selector);
                put("averageValue", of("averageValue"));
            }
            (_, false) => {
                put("metricName", Some(metric_name));
                put("metricSelector", selector);
                put("targetValue", of("value"));
                put("targetAverageValue", of("averageValue"));
            }
            (_, true) => {
                put("metricName", Some(metric_name));
                put("metricSelector", selector);
                put("currentValue", Some(of("value").unwrap_or_else(zero)));
                put("currentAverageValue", of("averageValue"));
            }
        }
        Value::Object(out)
    })
}

/// `metric` with its source converted by `convert` (given the type and the source); a metric of
/// a type neither version knows is kept as it is.
fn convert_metric(metric: &Value, convert: impl Fn(&str, &Value) -> Value) -> Value {
    let kind = metric.get("type").and_then(Value::as_str).unwrap_or_default();
    let Some((kind, field)) = SOURCES.iter().find(|(name, _)| *name == kind) else { return metric.clone() };
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    if let Some(source) = metric.get(*field) {
        out.insert((*field).into(), convert(kind, source));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's v1 object of `kubectl autoscale`, and the v2 object it is stored as.
    #[test]
    fn a_cpu_target_is_the_v2_cpu_metric_and_back() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70},
            "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 55}});
        let v2 = from_v1(v1.clone());
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(v2["spec"]["metrics"], json!([cpu_target(70)]));
        assert_eq!(
            v2["status"]["currentMetrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55}}}])
        );
        let back = to_v1(v2);
        assert_eq!(back["spec"], v1["spec"]);
        assert_eq!(back["status"]["currentCPUUtilizationPercentage"], 55);
        // The current metric is carried whole, as upstream does, beside the percentage.
        assert_eq!(
            back["metadata"]["annotations"][CURRENT_METRICS],
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":55,"currentAverageValue":"0"}}]"#
        );
    }

    #[test]
    fn what_v1_cannot_say_travels_in_annotations_and_comes_back() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}}, "target": {"type": "Value", "value": "30"}}},
                    cpu_target(60)],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 1, "desiredReplicas": 1,
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}});
        let v1 = to_v1(v2.clone());
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert!(v1["spec"].get("metrics").is_none() && v1["spec"].get("behavior").is_none());
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        assert_eq!(
            annotations[METRICS],
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}},{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}},{"type":"External","external":{"metricName":"queue","metricSelector":{"matchLabels":{"q":"a"}},"targetValue":"30"}}]"#
        );
        assert_eq!(annotations[BEHAVIOR], r#"{"scaleDown":{"stabilizationWindowSeconds":60}}"#);
        assert_eq!(annotations[CONDITIONS], r#"[{"type":"AbleToScale","status":"True","reason":"ReadyForNewScale"}]"#);
        let back = from_v1(v1);
        // The carried metrics come first, then the CPU target, as upstream orders them.
        let mut metrics = v2["spec"]["metrics"].as_array().unwrap().clone();
        let cpu = metrics.pop().unwrap();
        metrics.push(cpu);
        assert_eq!(back["spec"]["metrics"], Value::Array(metrics));
        assert_eq!(back["spec"]["behavior"], v2["spec"]["behavior"]);
        assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
        assert_eq!(back["metadata"]["annotations"], json!({"team": "a"}));
    }

    #[test]
    fn the_targets_column_reads_as_upstreams_printer() {
        let hpa = json!({"apiVersion": "autoscaling/v2", "spec": {"metrics": [cpu_target(70),
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}]},
            "status": {"currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55}}}]}});
        assert_eq!(targets(&hpa), "cpu: 55%/70%, memory: <unknown>/100Mi + 1 more...");
        let v1 = json!({"apiVersion": "autoscaling/v1", "spec": {"targetCPUUtilizationPercentage": 70}});
        assert_eq!(targets(&v1), "cpu: <unknown>/70%");
    }

    #[test]
    fn v2_defaults_cpu_at_80_percent_and_fills_a_given_behavior() {
        let mut v1 = json!({"spec": {"maxReplicas": 3}});
        default("v1", &mut v1);
        assert_eq!(v1, json!({"spec": {"maxReplicas": 3, "minReplicas": 1}}));
        let mut hpa =
            json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}});
        default("v2", &mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(hpa["spec"]["metrics"], json!([cpu_target(80)]));
        assert_eq!(hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 30);
        assert_eq!(
            hpa["spec"]["behavior"]["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
    }
}

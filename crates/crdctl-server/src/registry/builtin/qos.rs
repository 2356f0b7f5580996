//! A Pod's resources as upstream reads them when it is created: `SetDefaults_Pod` (a container's
//! requests default to its limits) and `ComputePodQOS` (`pkg/apis/core/helper/qos`), the
//! `status.qosClass` upstream's strategy records: `BestEffort` without CPU or memory requests or
//! limits, `Guaranteed` when every container limits both and requests what it limits, else
//! `Burstable`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The resources the QoS class counts.
const COMPUTE: [&str; 2] = ["cpu", "memory"];

/// Each container's requests default to its limits (Pods only, not templates).
pub fn default_requests(pod_spec: &mut Map<String, Value>) {
    for list in ["containers", "initContainers"] {
        let containers = pod_spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten();
        for resources in containers.filter_map(|c| c.get_mut("resources").and_then(Value::as_object_mut)) {
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else { continue };
            let requests = resources.entry("requests").or_insert_with(|| json!({}));
            if let Some(requests) = requests.as_object_mut() {
                for (name, quantity) in limits {
                    requests.entry(name).or_insert(quantity);
                }
            }
        }
    }
}

/// The QoS class of a Pod with `pod_spec` (its requests already defaulted).
pub fn class(pod_spec: &Value) -> &'static str {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|list| pod_spec.get(list).and_then(Value::as_array).into_iter().flatten());
    for container in containers {
        let positive = |kind: &str| {
            let listed = container.pointer(&format!("/resources/{kind}")).and_then(Value::as_object);
            listed
                .into_iter()
                .flatten()
                .filter(|(name, _)| COMPUTE.contains(&name.as_str()))
                .filter_map(|(name, quantity)| Some((name.as_str(), nano_units(quantity)?)))
                .filter(|(_, amount)| *amount > 0)
                .collect::<Vec<_>>()
        };
        for (name, amount) in positive("requests") {
            *requests.entry(name).or_default() += amount;
        }
        let limited = positive("limits");
        if !COMPUTE.iter().all(|resource| limited.iter().any(|(name, _)| name == resource)) {
            guaranteed = false;
        }
        for (name, amount) in limited {
            *limits.entry(name).or_default() += amount;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let matched = requests.iter().all(|(name, amount)| limits.get(name) == Some(amount));
    if guaranteed && matched && requests.len() == limits.len() { "Guaranteed" } else { "Burstable" }
}

/// A quantity (`100m`, `1.5`, `512Mi`, `1e3`) in billionths, exact enough to add and compare
/// requests and limits; `None` when it does not parse.
fn nano_units(quantity: &Value) -> Option<i128> {
    let text = match quantity {
        Value::String(text) => text.trim().to_string(),
        Value::Number(number) => number.to_string(),
        _ => return None,
    };
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let negative = whole.starts_with('-');
    let whole: i128 = whole.trim_start_matches(['+', '-']).parse().ok().filter(|_| !number.is_empty())?;
    // Nine fraction digits are billionths; more are below what this compares.
    let digits: String = fraction.chars().chain(std::iter::repeat('0')).take(9).collect();
    let mut amount = whole.checked_mul(1_000_000_000)?.checked_add(digits.parse::<i128>().ok()?)?;
    let (multiplier, divisor): (i128, i128) = match suffix {
        "" => (1, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        exponent => {
            let power: u32 = exponent.strip_prefix(['e', 'E'])?.parse().ok()?;
            (10_i128.checked_pow(power)?, 1)
        }
    };
    amount = amount.checked_mul(multiplier)? / divisor;
    Some(if negative { -amount } else { amount })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: Value) -> Value {
        let mut spec = json!({"containers": containers});
        if let Some(spec) = spec.as_object_mut() {
            default_requests(spec);
        }
        spec
    }

    /// Cases after upstream's `TestComputePodQOS` (`pkg/apis/core/helper/qos/qos_test.go`).
    #[test]
    fn qos_classes_are_upstreams() {
        let resources = |requests: Value, limits: Value| json!({"name": "c", "resources": {"requests": requests, "limits": limits}});
        let cases = [
            (json!([{"name": "c"}]), "BestEffort"),
            (json!([resources(json!({"nvidia.com/gpu": "1"}), json!({}))]), "BestEffort"),
            (
                json!([resources(
                    json!({"cpu": "100m", "memory": "100Mi"}),
                    json!({"cpu": "100m", "memory": "100Mi"})
                )]),
                "Guaranteed",
            ),
            // Requests default to limits.
            (json!([resources(json!({}), json!({"cpu": "0.1", "memory": "100Mi"}))]), "Guaranteed"),
            (json!([resources(json!({"cpu": "100m"}), json!({"cpu": "200m", "memory": "100Mi"}))]), "Burstable"),
            (json!([resources(json!({}), json!({"cpu": "100m"}))]), "Burstable"),
            (
                json!([resources(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1000m", "memory": "1024Mi"})), {"name": "d"}]),
                "Burstable",
            ),
            (json!([resources(json!({"cpu": "0"}), json!({"cpu": "0"}))]), "BestEffort"),
        ];
        for (containers, expected) in cases {
            assert_eq!(class(&pod(containers.clone())), expected, "{containers}");
        }
        assert_eq!(nano_units(&json!("1.5Gi")), Some(1_610_612_736_000_000_000));
        assert_eq!(nano_units(&json!("2e3")), Some(2_000_000_000_000));
        assert_eq!(nano_units(&json!("abc")), None);
    }
}

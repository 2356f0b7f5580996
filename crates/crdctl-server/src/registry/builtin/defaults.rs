//! Upstream's defaulting functions (`SetDefaults_*` in `pkg/apis/<group>/v1/defaults.go`) for
//! the kinds with no strategy of their own here; workloads, pods and Services have theirs in
//! [`super::workload`], HorizontalPodAutoscalers in [`super::autoscaling`], admission objects
//! in [`super::admissionregistration`]. `docs/server.md` lists what is left out and why.

use serde_json::{Map, Value, json};

/// Sets `key` to `value` where it is missing.
pub(super) fn or_insert(fields: &mut Map<String, Value>, key: &str, value: Value) {
    fields.entry(key.to_string()).or_insert(value);
}

/// The object at `path`, created (as `{}`) where missing.
pub(super) fn object_at<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut node = object;
    for key in path {
        node = node.as_object_mut()?.entry(key.to_string()).or_insert_with(|| json!({}));
    }
    node.as_object_mut()
}

/// Every object in the list at `key`, if it is one.
pub(super) fn each<'a>(
    fields: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    fields.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// The defaults of a `kind` object.
pub fn default(kind: &str, object: &mut Value) {
    match kind {
        "PriorityClass" => {
            if let Some(class) = object.as_object_mut() {
                or_insert(class, "preemptionPolicy", json!("PreemptLowerPriority"));
            }
        }
        "StorageClass" => {
            if let Some(class) = object.as_object_mut() {
                or_insert(class, "reclaimPolicy", json!("Delete"));
                or_insert(class, "volumeBindingMode", json!("Immediate"));
            }
        }
        "CSIDriver" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                or_insert(spec, "attachRequired", json!(true));
                or_insert(spec, "podInfoOnMount", json!(false));
                or_insert(spec, "storageCapacity", json!(false));
                or_insert(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
                or_insert(spec, "requiresRepublish", json!(false));
                or_insert(spec, "seLinuxMount", json!(false));
                or_insert(spec, "volumeLifecycleModes", json!(["Persistent"]));
            }
        }
        "EndpointSlice" => {
            if let Some(slice) = object.as_object_mut() {
                for port in each(slice, "ports") {
                    or_insert(port, "name", json!(""));
                    or_insert(port, "protocol", json!("TCP"));
                }
            }
        }
        "Endpoints" => {
            if let Some(endpoints) = object.as_object_mut() {
                for subset in each(endpoints, "subsets") {
                    each(subset, "ports").for_each(|port| or_insert(port, "protocol", json!("TCP")));
                }
            }
        }
        "PersistentVolume" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                or_insert(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                or_insert(spec, "volumeMode", json!("Filesystem"));
                default_volume_source(spec);
            }
            if let Some(status) = object_at(object, &["status"]) {
                or_insert(status, "phase", json!("Pending"));
            }
        }
        "PersistentVolumeClaim" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                or_insert(spec, "volumeMode", json!("Filesystem"));
            }
            if let Some(status) = object_at(object, &["status"]) {
                or_insert(status, "phase", json!("Pending"));
            }
        }
        "NetworkPolicy" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                default_network_policy(spec);
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            if let Some(binding) = object.as_object_mut() {
                default_binding(binding);
            }
        }
        "FlowSchema" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                or_insert(spec, "matchingPrecedence", json!(1000));
            }
        }
        "PriorityLevelConfiguration" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                default_priority_level(spec);
            }
        }
        "LimitRange" => {
            if let Some(spec) = object_at(object, &["spec"]) {
                each(spec, "limits").for_each(default_limit_range_item);
            }
        }
        "Node" => {
            let capacity = object.pointer("/status/capacity").cloned();
            if let (Some(capacity), Some(status)) = (capacity, object_at(object, &["status"])) {
                or_insert(status, "allocatable", capacity);
            }
        }
        "CertificateSigningRequest" => {
            if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
                each(status, "conditions").for_each(|condition| or_insert(condition, "status", json!("True")));
            }
        }
        _ => {}
    }
}

/// `SetDefaults_NetworkPolicySpec` and `_NetworkPolicyPort`: `Ingress` always, `Egress` when
/// there are egress rules; ports' protocol `TCP`.
fn default_network_policy(spec: &mut Map<String, Value>) {
    if spec.get("policyTypes").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        let egress = spec.get("egress").and_then(Value::as_array).is_some_and(|rules| !rules.is_empty());
        let types = if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        for rule in each(spec, direction) {
            each(rule, "ports").for_each(|port| or_insert(port, "protocol", json!("TCP")));
        }
    }
}

/// `SetDefaults_RoleBinding`/`_ClusterRoleBinding` and `_Subject`: the RBAC group for the role
/// and for users and groups, the core group for service accounts.
fn default_binding(binding: &mut Map<String, Value>) {
    const RBAC: &str = "rbac.authorization.k8s.io";
    if let Some(role) = binding.get_mut("roleRef").and_then(Value::as_object_mut)
        && role.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty)
    {
        role.insert("apiGroup".into(), json!(RBAC));
    }
    for subject in each(binding, "subjects") {
        if subject.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty) {
            let group = match subject.get("kind").and_then(Value::as_str) {
                Some("ServiceAccount") => "",
                Some("User" | "Group") => RBAC,
                _ => continue,
            };
            subject.insert("apiGroup".into(), json!(group));
        }
    }
}

/// `SetDefaults_PriorityLevelConfiguration` (flowcontrol v1): shares and lending, and a queuing
/// response's queues.
fn default_priority_level(spec: &mut Map<String, Value>) {
    if let Some(limited) = spec.get_mut("limited").and_then(Value::as_object_mut) {
        or_insert(limited, "nominalConcurrencyShares", json!(30));
        or_insert(limited, "lendablePercent", json!(0));
        let queuing = limited.get_mut("limitResponse").and_then(|r| r.get_mut("queuing"));
        if let Some(queuing) = queuing.and_then(Value::as_object_mut) {
            or_insert(queuing, "queues", json!(64));
            or_insert(queuing, "handSize", json!(8));
            or_insert(queuing, "queueLengthLimit", json!(50));
        }
    }
    if let Some(exempt) = spec.get_mut("exempt").and_then(Value::as_object_mut) {
        or_insert(exempt, "nominalConcurrencyShares", json!(0));
        or_insert(exempt, "lendablePercent", json!(0));
    }
}

/// `SetDefaults_LimitRangeItem`: a container's default limit from its max, its default request
/// from the default limit, then from its min.
fn default_limit_range_item(item: &mut Map<String, Value>) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let resources = |item: &Map<String, Value>, key: &str| item.get(key).and_then(Value::as_object).cloned();
    let mut default = resources(item, "default").unwrap_or_default();
    for (name, value) in resources(item, "max").unwrap_or_default() {
        default.entry(name).or_insert(value);
    }
    let mut request = resources(item, "defaultRequest").unwrap_or_default();
    for (name, value) in default.iter().chain(resources(item, "min").unwrap_or_default().iter()) {
        request.entry(name.clone()).or_insert(value.clone());
    }
    // Empty maps are left out, as Go's encoder leaves them.
    for (key, map) in [("default", default), ("defaultRequest", request)] {
        if !map.is_empty() {
            item.insert(key.into(), Value::Object(map));
        }
    }
}

/// The defaults of a volume source wherever one is (a Pod's volume, a PersistentVolume's
/// spec): `SetDefaults_HostPathVolumeSource`, `_ISCSIVolumeSource`, `_RBDVolumeSource`,
/// `_AzureDiskVolumeSource`, `_ScaleIOVolumeSource`, `_SecretVolumeSource`,
/// `_ConfigMapVolumeSource`, `_DownwardAPIVolumeSource`, `_ProjectedVolumeSource` and
/// `_ServiceAccountTokenProjection`.
pub fn default_volume_source(source: &mut Map<String, Value>) {
    let mut at = |key: &str, defaults: &[(&str, Value)]| {
        if let Some(source) = source.get_mut(key).and_then(Value::as_object_mut) {
            for (field, value) in defaults {
                or_insert(source, field, value.clone());
            }
        }
    };
    at("hostPath", &[("type", json!(""))]);
    at("iscsi", &[("iscsiInterface", json!("default"))]);
    at("rbd", &[("pool", json!("rbd")), ("user", json!("admin")), ("keyring", json!("/etc/ceph/keyring"))]);
    at(
        "azureDisk",
        &[
            ("cachingMode", json!("ReadWrite")),
            ("fsType", json!("ext4")),
            ("readOnly", json!(false)),
            ("kind", json!("Shared")),
        ],
    );
    at("scaleIO", &[("storageMode", json!("ThinProvisioned")), ("fsType", json!("xfs"))]);
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        at(key, &[("defaultMode", json!(420))]);
    }
    // `SetDefaults_ObjectFieldSelector` in downward API items, alone or projected.
    let field_refs = |downward: &mut Map<String, Value>| {
        for item in each(downward, "items") {
            if let Some(field) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
                or_insert(field, "apiVersion", json!("v1"));
            }
        }
    };
    if let Some(downward) = source.get_mut("downwardAPI").and_then(Value::as_object_mut) {
        field_refs(downward);
    }
    let projected = source.get_mut("projected").and_then(Value::as_object_mut);
    for projection in projected.into_iter().flat_map(|projected| each(projected, "sources")) {
        if let Some(token) = projection.get_mut("serviceAccountToken").and_then(Value::as_object_mut) {
            or_insert(token, "expirationSeconds", json!(3600));
        }
        if let Some(downward) = projection.get_mut("downwardAPI").and_then(Value::as_object_mut) {
            field_refs(downward);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind's object before and after upstream's defaulting.
    #[test]
    fn defaults_are_upstreams() {
        let cases = [
            ("PriorityClass", json!({"value": 5}), json!({"value": 5, "preemptionPolicy": "PreemptLowerPriority"})),
            (
                "StorageClass",
                json!({"provisioner": "p"}),
                json!({"provisioner": "p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
            ),
            (
                "CSIDriver",
                json!({}),
                json!({"spec": {"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                    "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false, "seLinuxMount": false,
                    "volumeLifecycleModes": ["Persistent"]}}),
            ),
            (
                "EndpointSlice",
                json!({"ports": [{"port": 80}]}),
                json!({"ports": [{"port": 80, "name": "", "protocol": "TCP"}]}),
            ),
            (
                "Endpoints",
                json!({"subsets": [{"ports": [{"port": 80}]}]}),
                json!({"subsets": [{"ports": [{"port": 80, "protocol": "TCP"}]}]}),
            ),
            (
                "PersistentVolume",
                json!({"spec": {"hostPath": {"path": "/d"}}}),
                json!({"spec": {"hostPath": {"path": "/d", "type": ""}, "persistentVolumeReclaimPolicy": "Retain",
                    "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}),
            ),
            (
                "PersistentVolumeClaim",
                json!({"spec": {}}),
                json!({"spec": {"volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}),
            ),
            (
                "NetworkPolicy",
                json!({"spec": {"egress": [{"ports": [{"port": 53}]}]}}),
                json!({"spec": {"egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}], "policyTypes": ["Ingress", "Egress"]}}),
            ),
            ("NetworkPolicy", json!({"spec": {}}), json!({"spec": {"policyTypes": ["Ingress"]}})),
            (
                "RoleBinding",
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
                json!({"roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
                    "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}, {"kind": "ServiceAccount", "name": "s", "apiGroup": ""}]}),
            ),
            ("FlowSchema", json!({"spec": {}}), json!({"spec": {"matchingPrecedence": 1000}})),
            (
                "PriorityLevelConfiguration",
                json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}),
                json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 30, "lendablePercent": 0,
                    "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}}}),
            ),
            (
                "LimitRange",
                json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}}]}}),
                json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"},
                    "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "1Mi"}}]}}),
            ),
            (
                "Node",
                json!({"status": {"capacity": {"cpu": "4"}}}),
                json!({"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}),
            ),
        ];
        for (kind, mut object, expected) in cases {
            default(kind, &mut object);
            assert_eq!(object, expected, "{kind}");
        }
    }

    #[test]
    fn volume_sources_get_their_defaults() {
        let mut source = json!({"projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
            {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]},
            "rbd": {"monitors": ["m"], "image": "i"}});
        default_volume_source(source.as_object_mut().unwrap());
        assert_eq!(source["projected"]["defaultMode"], 420);
        assert_eq!(source["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
        assert_eq!(source["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            source["rbd"],
            json!({"monitors": ["m"], "image": "i", "pool": "rbd", "user": "admin", "keyring": "/etc/ceph/keyring"})
        );
    }
}

//! What an update may not change, kind by kind, as upstream's `ValidateXUpdate` functions say
//! (`pkg/apis/<group>/validation`): fields fixed once created (`field is immutable`), a
//! StatefulSet's spec beyond the fields it lists, a Pod's beyond images, deadlines and new
//! tolerations, a bound claim's beyond its requests, a volume's source, a binding's role.
//!
//! The checks run on the defaulted object against the stored one. Scalars, string lists and
//! label selectors are shown as Go shows them; other structures (a pod template, a volume source)
//! are shown in Go's syntax for their JSON, and the diffs upstream appends to its `Forbidden`
//! messages as a list of the fields that differ, since Go's `%#v` of an internal type and
//! `cmp.Diff` have no equivalent here.
//!
//! A Service's addresses are checked where they are allocated (`super::service`), and Secrets'
//! and ConfigMaps' `immutable` data with their other rules (`super::data`).

use crdctl_model::field::{self, Path, Raw};
use serde_json::{Map, Value};

/// The errors of updating `old` to `new`, both defaulted `kind` objects.
pub fn errors(kind: &str, new: &Value, old: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let fixed = |pointer: &str| {
        (new.pointer(pointer) != old.pointer(pointer)).then(|| immutable(pointer, new.pointer(pointer)))
    };
    match kind {
        "Deployment" | "ReplicaSet" | "DaemonSet" => errors.extend(fixed("/spec/selector")),
        "Job" => {
            for pointer in [
                "/spec/selector",
                "/spec/completionMode",
                "/spec/podFailurePolicy",
                "/spec/backoffLimitPerIndex",
                "/spec/managedBy",
            ] {
                errors.extend(fixed(pointer));
            }
            // An indexed Job scales by changing completions and parallelism together.
            let elastic = new.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed")
                && new.pointer("/spec/completions") == new.pointer("/spec/parallelism");
            if !elastic {
                errors.extend(fixed("/spec/completions"));
            }
            if !mutable_job_template(new, old) {
                errors.extend(fixed("/spec/template"));
            }
        }
        "ControllerRevision" => errors.extend(fixed("/data")),
        "EndpointSlice" => errors.extend(fixed("/addressType")),
        "RuntimeClass" => errors.extend(fixed("/handler")),
        "IngressClass" => errors.extend(fixed("/spec/controller")),
        "IPAddress" => errors.extend(fixed("/spec/parentRef")),
        "VolumeAttachment" => errors.extend(fixed("/spec")),
        "ResourceQuota" => {
            errors.extend(fixed("/spec/scopes"));
            errors.extend(fixed("/spec/scopeSelector"));
        }
        "StorageClass" => {
            for field in ["parameters", "provisioner", "reclaimPolicy"] {
                if new.get(field) != old.get(field) {
                    errors.push(Path::new(field).forbidden(format!("updates to {field} are forbidden.")));
                }
            }
            errors.extend(fixed("/volumeBindingMode"));
        }
        "CSIDriver" => {
            // Upstream names the first field `attachedRequired`.
            if new.pointer("/spec/attachRequired") != old.pointer("/spec/attachRequired") {
                let spec = Path::new("spec");
                let at = spec.child("attachedRequired");
                errors.push(at.invalid(shown(new.pointer("/spec/attachRequired")), "field is immutable"));
            }
            errors.extend(fixed("/spec/fsGroupPolicy"));
            errors.extend(fixed("/spec/volumeLifecycleModes"));
        }
        "PriorityClass" => {
            if new.get("value") != old.get("value") {
                errors.push(Path::new("value").forbidden("may not be changed in an update."));
            }
            errors.extend(fixed("/preemptionPolicy"));
        }
        "RoleBinding" | "ClusterRoleBinding" if new.get("roleRef") != old.get("roleRef") => {
            errors.push(Path::new("roleRef").invalid(role_ref(new.get("roleRef")), "cannot change roleRef"));
        }
        "Node" => {
            for (field, path) in [("podCIDR", "/spec/podCIDR"), ("providerID", "/spec/providerID")] {
                let was = old.pointer(path).and_then(Value::as_str).unwrap_or_default();
                if !was.is_empty() && new.pointer(path) != old.pointer(path) {
                    let spec = Path::new("spec");
                    let detail = format!("node updates may not change {field} except from \"\" to valid");
                    errors.push(spec.child(if field == "podCIDR" { "podCIDRs" } else { field }).forbidden(detail));
                }
            }
        }
        "StatefulSet" => errors.extend(stateful_set(new, old)),
        "Pod" => errors.extend(pod(new, old)),
        "PersistentVolumeClaim" => errors.extend(claim(new, old)),
        "PersistentVolume" => errors.extend(volume(new, old)),
        _ => {}
    }
    errors
}

/// `ValidateImmutableField` at `pointer`, showing the new value.
fn immutable(pointer: &str, value: Option<&Value>) -> field::Error {
    let shown = if pointer.ends_with("/selector") { label_selector(value) } else { shown(value) };
    Path::new(&dotted(pointer)).invalid(shown, "field is immutable")
}

/// A JSON pointer as a field path: `/spec/selector` is `spec.selector`.
fn dotted(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// A value as `field.Error` shows it: `"null"` for an absent pointer, scalars as Go prints
/// them, string lists as `[]string{…}`, other structures in Go's syntax for their JSON.
pub(super) fn shown(value: Option<&Value>) -> Raw {
    Raw(match value {
        None | Some(Value::Null) => crdctl_model::go::quote("null"),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            let quoted: Vec<String> =
                items.iter().map(|i| crdctl_model::go::quote(i.as_str().unwrap_or_default())).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
        Some(value) => crdctl_model::go::bad_value(value),
    })
}

/// A `*metav1.LabelSelector` as Go's `%#v` shows it.
fn label_selector(value: Option<&Value>) -> Raw {
    let Some(selector) = value.filter(|v| !v.is_null()) else { return shown(None) };
    let labels = match selector.get("matchLabels").and_then(Value::as_object) {
        Some(labels) => super::workload::go_string_map(labels),
        None => "map[string]string(nil)".into(),
    };
    let requirements: Vec<String> = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|requirement| {
            let text =
                |key: &str| crdctl_model::go::quote(requirement.get(key).and_then(Value::as_str).unwrap_or_default());
            let values = match requirement.get("values") {
                Some(values @ Value::Array(_)) => shown(Some(values)).0,
                _ => "[]string(nil)".into(),
            };
            format!(
                "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                text("key"),
                text("operator")
            )
        })
        .collect();
    let expressions = if requirements.is_empty() {
        "[]v1.LabelSelectorRequirement(nil)".to_string()
    } else {
        format!("[]v1.LabelSelectorRequirement{{{}}}", requirements.join(", "))
    };
    Raw(format!("&v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}"))
}

/// A binding's `roleRef` as Go's `%#v` of `rbac.RoleRef` shows it.
fn role_ref(value: Option<&Value>) -> Raw {
    let text =
        |key: &str| crdctl_model::go::quote(value.and_then(|v| v.get(key)).and_then(Value::as_str).unwrap_or_default());
    Raw(format!("rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}", text("apiGroup"), text("kind"), text("name")))
}

/// A suspended Job that never started may change its template's scheduling directives, labels
/// and annotations (upstream's `AllowMutableSchedulingDirectives`).
fn mutable_job_template(new: &Value, old: &Value) -> bool {
    let never_started =
        old.pointer("/spec/suspend") == Some(&Value::Bool(true)) && old.pointer("/status/startTime").is_none();
    never_started
        && without(new.pointer("/spec/template"), &MUTABLE_WHEN_SUSPENDED)
            == without(old.pointer("/spec/template"), &MUTABLE_WHEN_SUSPENDED)
}

const MUTABLE_WHEN_SUSPENDED: [&str; 6] = [
    "/metadata/labels",
    "/metadata/annotations",
    "/spec/nodeSelector",
    "/spec/affinity",
    "/spec/tolerations",
    "/spec/schedulingGates",
];

/// `value` without the fields at `pointers`.
fn without(value: Option<&Value>, pointers: &[&str]) -> Option<Value> {
    let mut value = value?.clone();
    for pointer in pointers {
        if let Some((parent, field)) = pointer.rsplit_once('/')
            && let Some(parent) = value.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            parent.remove(field);
        }
    }
    Some(value)
}

/// The fields in which two values differ, as `<path>: <old> -> <new>` lines.
fn differences(old: Option<&Value>, new: Option<&Value>, at: &str, lines: &mut Vec<String>) {
    match (old, new) {
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                differences(old.get(key), new.get(key), &format!("{at}.{key}"), lines);
            }
        }
        (Some(Value::Array(old)), Some(Value::Array(new))) if old.len() == new.len() => {
            for (index, (old, new)) in old.iter().zip(new).enumerate() {
                differences(Some(old), Some(new), &format!("{at}[{index}]"), lines);
            }
        }
        (old, new) if old != new => {
            let show = |v: Option<&Value>| v.map_or_else(|| "<none>".to_string(), crdctl_model::go::json);
            lines.push(format!("  {at}: {} -> {}", show(old), show(new)));
        }
        _ => {}
    }
}

/// `Forbidden` at `path` with upstream's `message`, then the differing fields.
fn forbidden_with_differences(path: &str, message: &str, old: Option<&Value>, new: Option<&Value>) -> field::Error {
    let mut lines = Vec::new();
    differences(old, new, path, &mut lines);
    Path::new(path).forbidden(format!("{message}\n{}", lines.join("\n")))
}

/// `ValidateStatefulSetUpdate`: only the fields it names may change.
fn stateful_set(new: &Value, old: &Value) -> field::ErrorList {
    const MUTABLE: [&str; 7] = [
        "/replicas",
        "/ordinals",
        "/template",
        "/updateStrategy",
        "/revisionHistoryLimit",
        "/persistentVolumeClaimRetentionPolicy",
        "/minReadySeconds",
    ];
    if without(new.get("spec"), &MUTABLE) == without(old.get("spec"), &MUTABLE) {
        return field::ErrorList::new();
    }
    vec![Path::new("spec").forbidden(
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    )]
}

/// `ValidatePodUpdate`: images, `activeDeadlineSeconds` (set or lowered), tolerations (added),
/// and a negative grace period raised to 1 may change; nothing else of the spec.
fn pod(new: &Value, old: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let (Some(new_spec), Some(old_spec)) = (new.get("spec"), old.get("spec")) else { return errors };
    let mut allowed = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let old_images: Vec<Option<&Value>> =
            old_spec.get(list).and_then(Value::as_array).into_iter().flatten().map(|c| c.get("image")).collect();
        if let Some(containers) = allowed.get_mut(list).and_then(Value::as_array_mut) {
            for (container, image) in containers.iter_mut().zip(old_images) {
                if let (Some(container), Some(image)) = (container.as_object_mut(), image) {
                    container.insert("image".into(), image.clone());
                }
            }
        }
    }
    let deadline = |spec: &Value| spec.get("activeDeadlineSeconds").and_then(Value::as_i64);
    if let (Some(new_deadline), old_deadline) = (deadline(new_spec), deadline(old_spec))
        && old_deadline.is_none_or(|old| new_deadline <= old)
        && let Some(spec) = allowed.as_object_mut()
    {
        copy_field(spec, old_spec, "activeDeadlineSeconds");
    }
    let tolerations = |spec: &Value| spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let (new_tolerations, old_tolerations) = (tolerations(new_spec), tolerations(old_spec));
    if old_tolerations.iter().all(|t| new_tolerations.contains(t))
        && let Some(spec) = allowed.as_object_mut()
    {
        copy_field(spec, old_spec, "tolerations");
    }
    let grace = |spec: &Value| spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if grace(old_spec).is_some_and(|g| g < 0)
        && grace(new_spec) == Some(1)
        && let Some(spec) = allowed.as_object_mut()
    {
        copy_field(spec, old_spec, "terminationGracePeriodSeconds");
    }
    if &allowed != old_spec {
        errors.push(forbidden_with_differences(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            Some(old_spec),
            Some(new_spec),
        ));
    }
    errors
}

fn copy_field(spec: &mut Map<String, Value>, from: &Value, field: &str) {
    match from.get(field) {
        Some(value) => spec.insert(field.into(), value.clone()),
        None => spec.remove(field),
    };
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is fixed but for `volumeName` (set once),
/// a bound claim's storage request, and `volumeAttributesClassName`; `volumeMode` never changes.
fn claim(new: &Value, old: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let mut ignored = vec!["/volumeAttributesClassName"];
    if old.pointer("/spec/volumeName").and_then(Value::as_str).is_none_or(str::is_empty) {
        ignored.push("/volumeName");
    }
    if new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound") {
        ignored.push("/resources/requests/storage");
    }
    if without(new.get("spec"), &ignored) != without(old.get("spec"), &ignored) {
        errors.push(forbidden_with_differences(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            old.get("spec"),
            new.get("spec"),
        ));
    }
    if new.pointer("/spec/volumeMode") != old.pointer("/spec/volumeMode") {
        errors.push(Path::new("volumeMode").invalid(shown(new.pointer("/spec/volumeMode")), "field is immutable"));
    }
    errors
}

/// The fields of a PersistentVolume's spec that are not its source.
const VOLUME_SPEC: [&str; 8] = [
    "/capacity",
    "/accessModes",
    "/claimRef",
    "/persistentVolumeReclaimPolicy",
    "/storageClassName",
    "/mountOptions",
    "/volumeMode",
    "/nodeAffinity",
];

/// `ValidatePersistentVolumeUpdate`: the source, `volumeMode`, and node affinity once set.
fn volume(new: &Value, old: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let (new_source, old_source) = (without(new.get("spec"), &VOLUME_SPEC), without(old.get("spec"), &VOLUME_SPEC));
    if new_source != old_source {
        errors.push(forbidden_with_differences(
            "spec.persistentvolumesource",
            "spec.persistentvolumesource is immutable after creation",
            old_source.as_ref(),
            new_source.as_ref(),
        ));
    }
    if new.pointer("/spec/volumeMode") != old.pointer("/spec/volumeMode") {
        errors.push(Path::new("volumeMode").invalid(shown(new.pointer("/spec/volumeMode")), "field is immutable"));
    }
    if old.pointer("/spec/nodeAffinity").is_some()
        && new.pointer("/spec/nodeAffinity") != old.pointer("/spec/nodeAffinity")
    {
        errors.push(Path::new("nodeAffinity").invalid(shown(new.pointer("/spec/nodeAffinity")), "field is immutable"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(kind: &str, new: Value, old: Value) -> Vec<String> {
        errors(kind, &new, &old).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fixed_fields_are_refused_as_upstream_words_it() {
        let selector = |app: &str| json!({"spec": {"selector": {"matchLabels": {"app": app}}}});
        assert_eq!(
            messages("Deployment", selector("b"), selector("a")),
            [
                r#"spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string{"app":"b"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#
            ]
        );
        assert!(messages("Deployment", selector("a"), selector("a")).is_empty());
        let job = |completions: i64, mode: &str| json!({"spec": {"completions": completions, "parallelism": completions, "completionMode": mode}});
        assert_eq!(
            messages("Job", job(3, "NonIndexed"), job(2, "NonIndexed")),
            ["spec.completions: Invalid value: 3: field is immutable"]
        );
        assert!(messages("Job", job(3, "Indexed"), job(2, "Indexed")).is_empty(), "an indexed Job scales");
        let template = |image: &str, suspend: bool| json!({"spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "c", "image": image}], "nodeSelector": {"zone": image}}}}});
        assert_eq!(messages("Job", template("b", false), template("a", false)).len(), 1);
        let mut suspended = template("a", true);
        suspended["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "z"});
        assert!(messages("Job", suspended, template("a", true)).is_empty(), "a suspended Job's scheduling may change");
        let binding = |role: &str| json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}});
        assert_eq!(
            messages("RoleBinding", binding("edit"), binding("view")),
            [
                r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#
            ]
        );
        assert_eq!(
            messages("PriorityClass", json!({"value": 2}), json!({"value": 1})),
            ["value: Forbidden: may not be changed in an update."]
        );
        assert_eq!(
            messages(
                "StorageClass",
                json!({"provisioner": "b", "volumeBindingMode": "WaitForFirstConsumer"}),
                json!({"provisioner": "a", "volumeBindingMode": "Immediate"})
            ),
            [
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                r#"volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable"#
            ]
        );
        assert_eq!(
            messages("EndpointSlice", json!({"addressType": "IPv6"}), json!({"addressType": "IPv4"})),
            [r#"addressType: Invalid value: "IPv6": field is immutable"#]
        );
    }

    #[test]
    fn specs_that_may_change_only_in_part() {
        let set = |replicas: i64, service: &str| json!({"spec": {"replicas": replicas, "serviceName": service}});
        assert!(messages("StatefulSet", set(3, "a"), set(1, "a")).is_empty());
        assert_eq!(
            messages("StatefulSet", set(1, "b"), set(1, "a")),
            [
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ]
        );
        let pod = |image: &str, restart: &str| json!({"spec": {"containers": [{"name": "c", "image": image}], "restartPolicy": restart}});
        assert!(messages("Pod", pod("b", "Always"), pod("a", "Always")).is_empty(), "an image may change");
        let refused = messages("Pod", pod("a", "Never"), pod("a", "Always"));
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].starts_with(
                "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
            ),
            "{refused:?}"
        );
        assert!(refused[0].ends_with("\n  spec.restartPolicy: \"Always\" -> \"Never\""), "{refused:?}");
        let claim = |storage: &str, phase: &str| json!({"spec": {"resources": {"requests": {"storage": storage}}, "volumeMode": "Filesystem"}, "status": {"phase": phase}});
        assert!(messages("PersistentVolumeClaim", claim("2Gi", "Bound"), claim("1Gi", "Bound")).is_empty());
        assert_eq!(messages("PersistentVolumeClaim", claim("2Gi", "Pending"), claim("1Gi", "Pending")).len(), 1);
        let volume = |path: &str| json!({"spec": {"hostPath": {"path": path}, "capacity": {"storage": "1Gi"}}});
        assert!(messages("PersistentVolume", volume("/a"), volume("/b"))[0].starts_with(
            "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
        ));
    }
}

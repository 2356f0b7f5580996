//! Upstream's defaulting functions for what controllers and tests read (`pkg/apis/core/v1`,
//! `apps/v1`, `batch/v1` `defaults.go`), and the workload checks a wrong object would mislead a
//! test without (`pkg/apis/apps/validation`: the selector must select the template).

use crdctl_model::field::{self, Path, Raw};
use serde_json::{Map, Value, json};

use super::defaults::{each, object_at, or_insert};

/// The defaults of a workload of `kind` whose pod spec is at `pod_spec` (and a Pod's status:
/// the first one when created, `old`'s QoS class kept after), then the checks of its selector.
pub fn default(kind: &str, pod_spec: &[&str], object: &mut Value, old: Option<&Value>) -> field::ErrorList {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        default_spec(kind, spec);
    }
    if kind == "Job" && old.is_none() && object.pointer("/spec/manualSelector") != Some(&json!(true)) {
        generate_job_selector(object);
    }
    if let Some(pod) = object_at(object, pod_spec) {
        default_pod_spec(pod);
    }
    if kind == "Pod" {
        // What the ServiceAccount and Priority admission plugins and `SetDefaults_Pod` add.
        if let Some(spec) = object_at(object, &["spec"]) {
            super::qos::default_requests(spec);
            or_insert(spec, "enableServiceLinks", json!(true));
            or_insert(spec, "serviceAccountName", json!("default"));
            let account = spec.get("serviceAccountName").cloned().unwrap_or_default();
            or_insert(spec, "serviceAccount", account);
            or_insert(spec, "priority", json!(0));
            or_insert(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        // A new Pod is `Pending`, of its QoS class (the strategy's `PrepareForCreate`); later
        // writes of its status say what they say, but the QoS class never changes.
        let qos_class = match old {
            None => Some(json!(super::qos::class(object.get("spec").unwrap_or(&Value::Null)))),
            Some(old) => old.pointer("/status/qosClass").cloned(),
        };
        if let Some(status) = object_at(object, &["status"]) {
            if old.is_none() {
                or_insert(status, "phase", json!("Pending"));
            }
            if let Some(qos_class) = qos_class {
                or_insert(status, "qosClass", qos_class);
            }
        }
    }
    selector_errors(kind, object)
}

/// The Job strategy's `generateSelector`: the template labelled with the Job's name and uid
/// (in the current and the legacy labels), and the selector selecting the uid. Labels the
/// client set stay, and validation refuses what they break.
fn generate_job_selector(job: &mut Value) {
    let name = crate::object::name(job).to_string();
    let uid = crate::object::meta_str(job, "uid").unwrap_or_default().to_string();
    if let Some(labels) = object_at(job, &["spec", "template", "metadata", "labels"]) {
        for (label, value) in [
            ("job-name", &name),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("batch.kubernetes.io/controller-uid", &uid),
        ] {
            or_insert(labels, label, json!(value));
        }
    }
    if let Some(selector) = object_at(job, &["spec", "selector", "matchLabels"]) {
        or_insert(selector, "batch.kubernetes.io/controller-uid", json!(uid));
    }
}

/// `SetDefaults_Deployment`, `_ReplicaSet`, `_StatefulSet`, `_DaemonSet`, `_Job`, `_CronJob`,
/// `_ReplicationController`.
fn default_spec(kind: &str, spec: &mut Map<String, Value>) {
    match kind {
        "Deployment" => {
            or_insert(spec, "replicas", json!(1));
            or_insert(spec, "revisionHistoryLimit", json!(10));
            or_insert(spec, "progressDeadlineSeconds", json!(600));
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(strategy) = strategy.as_object_mut() {
                or_insert(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate")) {
                    let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(rolling) = rolling.as_object_mut() {
                        or_insert(rolling, "maxUnavailable", json!("25%"));
                        or_insert(rolling, "maxSurge", json!("25%"));
                    }
                }
            }
        }
        "ReplicaSet" => or_insert(spec, "replicas", json!(1)),
        "ReplicationController" => {
            or_insert(spec, "replicas", json!(1));
            let labels = spec.get("template").and_then(|t| t.pointer("/metadata/labels")).cloned();
            if let Some(labels) = labels.filter(|_| spec.get("selector").is_none_or(|s| s == &json!({}))) {
                spec.insert("selector".into(), labels);
            }
        }
        "StatefulSet" => {
            or_insert(spec, "replicas", json!(1));
            or_insert(spec, "podManagementPolicy", json!("OrderedReady"));
            or_insert(spec, "revisionHistoryLimit", json!(10));
            or_insert(spec, "updateStrategy", json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
            let retention = json!({"whenDeleted": "Retain", "whenScaled": "Retain"});
            or_insert(spec, "persistentVolumeClaimRetentionPolicy", retention);
        }
        "DaemonSet" => {
            or_insert(spec, "revisionHistoryLimit", json!(10));
            let update = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}});
            or_insert(spec, "updateStrategy", update);
        }
        "Job" => {
            if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
                spec.insert("completions".into(), json!(1));
            }
            or_insert(spec, "parallelism", json!(1));
            or_insert(spec, "backoffLimit", json!(6));
            or_insert(spec, "completionMode", json!("NonIndexed"));
            or_insert(spec, "suspend", json!(false));
            or_insert(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
        }
        "CronJob" => {
            or_insert(spec, "concurrencyPolicy", json!("Allow"));
            or_insert(spec, "suspend", json!(false));
            or_insert(spec, "successfulJobsHistoryLimit", json!(3));
            or_insert(spec, "failedJobsHistoryLimit", json!(1));
        }
        _ => {}
    }
}

/// `SetDefaults_PodSpec`, `_Container` (and init containers), `_Probe`, the volume sources'.
fn default_pod_spec(pod: &mut Map<String, Value>) {
    or_insert(pod, "restartPolicy", json!("Always"));
    or_insert(pod, "dnsPolicy", json!("ClusterFirst"));
    or_insert(pod, "terminationGracePeriodSeconds", json!(30));
    or_insert(pod, "securityContext", json!({}));
    or_insert(pod, "schedulerName", json!("default-scheduler"));
    let host_network = pod.get("hostNetwork") == Some(&json!(true));
    for list in ["containers", "initContainers"] {
        for container in each(pod, list) {
            default_container(container);
            // `SetDefaults_PodSpec` for host-networked pods: each port is its host port.
            if host_network {
                for port in each(container, "ports") {
                    if port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(number) = port.get("containerPort").cloned()
                    {
                        port.insert("hostPort".into(), number);
                    }
                }
            }
        }
    }
    for volume in each(pod, "volumes") {
        // `SetDefaults_Volume`: a volume that names no source is an empty directory.
        if volume.iter().all(|(key, value)| key == "name" || value.is_null()) {
            volume.insert("emptyDir".into(), json!({}));
        }
        super::defaults::default_volume_source(volume);
    }
}

fn default_container(container: &mut Map<String, Value>) {
    or_insert(container, "terminationMessagePath", json!("/dev/termination-log"));
    or_insert(container, "terminationMessagePolicy", json!("File"));
    or_insert(container, "resources", json!({}));
    let image = container.get("image").and_then(Value::as_str).unwrap_or_default();
    or_insert(container, "imagePullPolicy", json!(pull_policy(image)));
    each(container, "ports").for_each(|port| or_insert(port, "protocol", json!("TCP")));
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = container.get_mut(probe).and_then(Value::as_object_mut) {
            or_insert(probe, "timeoutSeconds", json!(1));
            or_insert(probe, "periodSeconds", json!(10));
            or_insert(probe, "successThreshold", json!(1));
            or_insert(probe, "failureThreshold", json!(3));
            default_handler(probe);
        }
    }
    if let Some(lifecycle) = container.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            lifecycle.get_mut(hook).and_then(Value::as_object_mut).map(default_handler);
        }
    }
    for env in each(container, "env") {
        if let Some(field) = env.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef")).and_then(Value::as_object_mut)
        {
            or_insert(field, "apiVersion", json!("v1"));
        }
    }
}

/// `SetDefaults_HTTPGetAction` in a probe or lifecycle handler: path `/`, scheme `HTTP`.
fn default_handler(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        or_insert(get, "path", json!("/"));
        or_insert(get, "scheme", json!("HTTP"));
    }
}

/// `Always` for an image at `:latest` or with no tag (and no digest), else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let name = image.rsplit('/').next().unwrap_or(image);
    match name.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

/// `SetDefaults_Service` and `_ServicePort`: `type`, `sessionAffinity`, port protocols and
/// target ports, `internalTrafficPolicy`, and `externalTrafficPolicy` for externally reached
/// types.
pub fn default_service(object: &mut Value) -> field::ErrorList {
    let Some(spec) = object_at(object, &["spec"]) else { return field::ErrorList::new() };
    or_insert(spec, "type", json!("ClusterIP"));
    or_insert(spec, "sessionAffinity", json!("None"));
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    if kind != "ExternalName" {
        or_insert(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        or_insert(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        or_insert(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        let config = json!({"clientIP": {"timeoutSeconds": 10800}});
        or_insert(spec, "sessionAffinityConfig", config);
    }
    for port in each(spec, "ports") {
        or_insert(port, "protocol", json!("TCP"));
        if let Some(number) = port.get("port").cloned() {
            or_insert(port, "targetPort", number);
        }
    }
    field::ErrorList::new()
}

/// Go's `%#v` of a `map[string]string` (keys sorted), as upstream's messages print label maps.
pub(super) fn go_string_map(map: &Map<String, Value>) -> String {
    let mut pairs: Vec<(&String, &Value)> = map.iter().collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let text = |value: &Value| crdctl_model::go::quote(value.as_str().unwrap_or_default());
    let entries: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}:{}", crdctl_model::go::quote(k), text(v))).collect();
    format!("map[string]string{{{}}}", entries.join(", "))
}

/// `ValidateDeploymentSpec` and its siblings: a non-empty selector that selects the template's
/// labels.
fn selector_errors(kind: &str, object: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    if !matches!(kind, "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job") {
        return errors;
    }
    let Some(selector) = object.pointer("/spec/selector") else { return errors };
    let spec = Path::new("spec");
    let empty = selector.get("matchLabels").and_then(Value::as_object).is_none_or(Map::is_empty)
        && selector.get("matchExpressions").and_then(Value::as_array).is_none_or(Vec::is_empty);
    if empty {
        let shown = Raw(
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
                .into(),
        );
        errors.push(
            spec.child("selector").invalid(shown, format!("empty selector is invalid for {}", kind.to_lowercase())),
        );
        return errors;
    }
    let labels =
        object.pointer("/spec/template/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
    if !crate::selector::selects(selector, &labels) {
        let template = spec.child("template");
        let metadata = template.child("metadata");
        let at = metadata.child("labels");
        errors.push(at.invalid(Raw(go_string_map(&labels)), "`selector` does not match template `labels`"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases from upstream's `TestSetDefaultDeployment`, `TestSetDefaultPodSpec` and
    /// `TestSetDefaultServiceSessionAffinity`.
    #[test]
    fn defaults_are_upstreams() {
        let mut deployment = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
        assert!(default("Deployment", &["spec", "template", "spec"], &mut deployment, None).is_empty());
        let spec = &deployment["spec"];
        assert_eq!(
            (spec["replicas"].clone(), spec["revisionHistoryLimit"].clone(), spec["progressDeadlineSeconds"].clone()),
            (json!(1), json!(10), json!(600))
        );
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(
            (pod["restartPolicy"].as_str(), pod["dnsPolicy"].as_str(), pod["schedulerName"].as_str()),
            (Some("Always"), Some("ClusterFirst"), Some("default-scheduler"))
        );
        assert_eq!(
            (pod["terminationGracePeriodSeconds"].clone(), pod["securityContext"].clone()),
            (json!(30), json!({}))
        );
        let container = &pod["containers"][0];
        assert_eq!(
            (container["imagePullPolicy"].as_str(), container["terminationMessagePath"].as_str()),
            (Some("Always"), Some("/dev/termination-log"))
        );
        assert_eq!(container["ports"][0]["protocol"], "TCP");
        // `SetDefaults_Volume`: a volume with no source is an empty directory.
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "readinessProbe": {"httpGet": {"port": 80}}}], "volumes": [{"name": "scratch"}, {"name": "h", "hostPath": {"path": "/d"}}]}});
        default("Pod", &["spec"], &mut pod, None);
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/d", "type": ""}}])
        );
        assert_eq!(
            pod["spec"]["containers"][0]["readinessProbe"]["httpGet"],
            json!({"port": 80, "path": "/", "scheme": "HTTP"})
        );
        // A Job selects its pods by its uid, which its template's labels carry.
        let mut job = json!({"metadata": {"name": "once", "uid": "u-1"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert!(default("Job", &["spec", "template", "spec"], &mut job, None).is_empty());
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}));
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({"job-name": "once", "batch.kubernetes.io/job-name": "once", "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"})
        );
        let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}}});
        default("Deployment", &["spec", "template", "spec"], &mut recreate, None);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));

        let mut service = json!({"spec": {"ports": [{"port": 80}]}});
        default_service(&mut service);
        assert_eq!(
            service["spec"],
            json!({"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"})
        );
    }

    /// `TestPullPolicy`'s cases.
    #[test]
    fn the_pull_policy_follows_the_tag() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            ("nginx@sha256:0123", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn a_selector_must_select_the_template() {
        let mut deployment = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "b", "tier": "x"}}}}});
        let errors = default("Deployment", &["spec", "template", "spec"], &mut deployment, None);
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                r#"spec.template.metadata.labels: Invalid value: map[string]string{"app":"b", "tier":"x"}: `selector` does not match template `labels`"#
            ]
        );
        let mut empty = json!({"spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "b"}}}}});
        let errors = default("ReplicaSet", &["spec", "template", "spec"], &mut empty, None);
        assert!(errors[0].to_string().ends_with("empty selector is invalid for replicaset"), "{}", errors[0]);
    }
}

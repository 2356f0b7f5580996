//! The objects kube-apiserver makes itself when it starts, which tools look for: the
//! `kubernetes` Service in `default` with its Endpoints, EndpointSlice and ServiceCIDR (its
//! endpoint reconciler), the `extension-apiserver-authentication` ConfigMap in `kube-system`
//! (the client-CA post-start hook; it names no CA, as the server has no client CA), and the
//! priority classes `system-node-critical` and `system-cluster-critical` (the scheduling
//! post-start hook), and RBAC's bootstrap policy ([`crate::auth::policy`]: an existing role or
//! binding gets back what it lacks of it unless annotated `autoupdate: "false"`). The built-in namespaces come first ([`crate::registry::builtin::namespace::BUILT_IN`]).
//!
//! Each is created through the create path, as upstream's loopback client creates them —
//! defaulted, validated and owned by the `kube-apiserver` field manager — and only if absent,
//! so a user's changes survive restarts and replicas do not fight.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::builtin;
use crate::rest::{self, Endpoint, Params};

/// What upstream's post-start hooks write as.
const MANAGER: &str = "kube-apiserver";

/// Creates what is missing of the objects above, for a server listening on `port`.
pub async fn ensure(cx: rest::Context<'_>, port: u16) {
    builtin::service::create_kubernetes_service(&**cx.store, cx.resources.service_ranges, port).await;
    let policy = crate::auth::policy::objects().into_iter().map(|object| {
        let resource = match object.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => "clusterroles",
            _ => "clusterrolebindings",
        };
        (("rbac.authorization.k8s.io", resource), None, object)
    });
    let objects = [
        (("discovery.k8s.io", "endpointslices"), Some("default"), kubernetes_endpoint_slice(port)),
        (
            ("", "configmaps"),
            Some("kube-system"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extension-apiserver-authentication"}}),
        ),
        (("scheduling.k8s.io", "priorityclasses"), None, priority_class("system-node-critical")),
        (("scheduling.k8s.io", "priorityclasses"), None, priority_class("system-cluster-critical")),
    ];
    let params = Params { field_manager: Some(MANAGER.into()), ..Params::default() };
    for ((group, resource), namespace, object) in objects.into_iter().chain(policy) {
        let Some(resource) = builtin::find(group, "v1", resource) else { continue };
        let endpoint = Endpoint::built_in(resource, namespace.map(str::to_string));
        let name = crate::object::name(&object).to_string();
        let wanted = (group == "rbac.authorization.k8s.io").then(|| object.clone());
        match rest::create(cx, &endpoint, object, &params, rest::Managed::Record).await {
            Ok(_) => {}
            Err(err) if err.code == StatusCode::CONFLICT => {
                if let Some(wanted) = wanted {
                    reconcile(&**cx.store, &endpoint.key(&name), &wanted).await;
                }
            }
            Err(err) => tracing::warn!(resource = endpoint.resource, name, error = %err.message, "cannot create"),
        }
    }
}

/// Puts back what a bootstrap role or binding is missing of `wanted` (rules, subjects, labels,
/// annotations), unless it is annotated `rbac.authorization.kubernetes.io/autoupdate: "false"`,
/// as upstream's RBAC post-start hook reconciles (adding, never removing).
async fn reconcile(store: &dyn crdctl_storage::Store, key: &str, wanted: &Value) {
    let reconciled = crate::controller::guaranteed_update(store, key, |current| {
        let autoupdate = current.pointer("/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate");
        if autoupdate.and_then(Value::as_str) == Some("false") {
            return;
        }
        for list in ["rules", "subjects"] {
            let Some(wanted) = wanted.get(list).and_then(Value::as_array) else { continue };
            let fields = crate::object::fields_mut(current);
            let held = fields.entry(list).or_insert_with(|| json!([]));
            if let Some(held) = held.as_array_mut() {
                for item in wanted.iter().filter(|item| !held.contains(item)).collect::<Vec<_>>() {
                    held.push(item.clone());
                }
            }
        }
        for map in ["labels", "annotations"] {
            let Some(wanted) = wanted.pointer(&format!("/metadata/{map}")).and_then(Value::as_object) else { continue };
            let held = crate::object::meta_mut(current).entry(map).or_insert_with(|| json!({}));
            if let Some(held) = held.as_object_mut() {
                for (key, value) in wanted {
                    held.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    });
    if let Err(err) = reconciled.await {
        tracing::warn!(key, error = %err, "cannot reconcile the bootstrap policy");
    }
}

/// The EndpointSlice upstream's endpoint reconciler mirrors from the `kubernetes` Endpoints:
/// this server, ready, on its port.
fn kubernetes_endpoint_slice(port: u16) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    })
}

/// One of upstream's system priority classes (`SystemPriorityClasses`).
fn priority_class(name: &str) -> Value {
    // `SystemCriticalPriority`, twice the highest a user may set; a node's pods a little more.
    let (value, description) = match name {
        "system-node-critical" => {
            (2_000_001_000, "Used for system critical pods that must not be moved from their current node.")
        }
        _ => (
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    };
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
        "value": value, "description": description})
}

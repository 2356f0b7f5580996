//! A real kube-rs client (kube 5, k8s-openapi 0.29) against the server: a typed CRD create,
//! waiting for Established, dynamic objects at two versions, list, a runtime watcher, and a
//! status patch; and each built-in kind of the table through its typed client — on every store
//! backend.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

mod backends;

use std::time::Duration;

use backends::Backend;
use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition, watcher};
use kube::{Api, Client};
use serde_json::json;

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]}
    }))
    .unwrap()
}

fn crontabs(client: &Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "CronTab");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "crontabs"))
}

on_each_backend!(kube_rs_client_round_trip, typed_clients_round_trip_every_built_in_kind);

/// One typed object through create, get, list, watch, replace and delete, with the typed
/// client of its kind: what an operator does to the objects it owns.
async fn round_trip<K>(api: Api<K>, object: serde_json::Value)
where
    K: kube::Resource<DynamicType = ()>
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + 'static,
{
    let kind = K::kind(&());
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let typed: K = serde_json::from_value(object).unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let created = api.create(&PostParams::default(), &typed).await.unwrap_or_else(|err| panic!("{kind}: {err}"));
    assert!(created.metadata().uid.is_some(), "{kind}");
    let got = api.get(&name).await.unwrap();
    assert_eq!(got.metadata().resource_version, created.metadata().resource_version, "{kind}");
    let listed = api.list(&ListParams::default().labels("round-trip=yes")).await.unwrap();
    assert_eq!(listed.items.len(), 1, "{kind}");
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.next()).await.unwrap().unwrap().unwrap();
        if let watcher::Event::Apply(seen) | watcher::Event::InitApply(seen) = event {
            assert_eq!(seen.metadata().name.as_deref(), Some(name.as_str()), "{kind}");
            break;
        }
    }
    let mut changed = got.clone();
    changed.metadata_mut().annotations = Some([("changed".to_string(), "yes".to_string())].into());
    let replaced = api.replace(&name, &PostParams::default(), &changed).await.unwrap();
    assert_ne!(replaced.metadata().resource_version, got.metadata().resource_version, "{kind}");
    api.delete(&name, &Default::default()).await.unwrap();
    assert!(api.get_opt(&name).await.unwrap().is_none(), "{kind}");
}

async fn typed_clients_round_trip_every_built_in_kind(backend: Backend) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let (server, _keep) = backend.start().await;
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let metadata = |name: &str, namespaced: bool| {
        let mut metadata = json!({"name": name, "labels": {"round-trip": "yes"}});
        if namespaced {
            metadata["namespace"] = json!("default");
        }
        metadata
    };
    let subjects = json!([{"kind": "ServiceAccount", "name": "crontab-controller", "namespace": "default"}]);
    round_trip::<ConfigMap>(
        Api::namespaced(client.clone(), "default"),
        json!({"metadata": metadata("settings", true), "data": {"a": "1"}}),
    )
    .await;
    round_trip::<Secret>(
        Api::namespaced(client.clone(), "default"),
        json!({"metadata": metadata("token", true), "data": {"t": "eA=="}}),
    )
    .await;
    round_trip::<ServiceAccount>(
        Api::namespaced(client.clone(), "default"),
        json!({"metadata": metadata("crontab-controller", true)}),
    )
    .await;
    round_trip::<Lease>(
        Api::namespaced(client.clone(), "default"),
        json!({"metadata": metadata("leader", true), "spec": {"holderIdentity": "a"}}),
    )
    .await;
    let rules = json!([{"apiGroups": ["example.com"], "resources": ["crontabs"], "verbs": ["get"]}]);
    round_trip::<Role>(
        Api::namespaced(client.clone(), "default"),
        json!({"metadata": metadata("reader", true), "rules": rules}),
    )
    .await;
    round_trip::<ClusterRole>(
        Api::all(client.clone()),
        json!({"metadata": metadata("system:reader", false), "rules": rules}),
    )
    .await;
    let role_ref = |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "reader"});
    let binding = json!({"metadata": metadata("reader", true), "roleRef": role_ref("Role"), "subjects": subjects});
    round_trip::<RoleBinding>(Api::namespaced(client.clone(), "default"), binding).await;
    let binding =
        json!({"metadata": metadata("reader", false), "roleRef": role_ref("ClusterRole"), "subjects": subjects});
    round_trip::<ClusterRoleBinding>(Api::all(client.clone()), binding).await;
}

async fn kube_rs_client_round_trip(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &crd()).await.unwrap();
    assert_eq!(created.status.unwrap().stored_versions.unwrap(), ["v1"]);
    let established = await_condition(crds.clone(), "crontabs.example.com", conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(10), established).await.unwrap().unwrap();

    let v1 = crontabs(&client, "v1");
    let v1beta1 = crontabs(&client, "v1beta1");
    let mut events = watcher(v1.clone(), watcher::Config::default()).boxed();
    for name in ["a", "b"] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"n": name}
        }))
        .unwrap();
        v1beta1.create(&PostParams::default(), &object).await.unwrap();
    }
    let listed = v1.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    assert!(listed.items.iter().all(|o| o.types.as_ref().unwrap().api_version == "example.com/v1"));

    let patched =
        v1.patch_status("a", &PatchParams::default(), &Patch::Merge(json!({"status": {"ready": true}}))).await.unwrap();
    assert_eq!(patched.data["status"]["ready"], true);
    assert_eq!(v1beta1.get("a").await.unwrap().data["status"]["ready"], true);

    // The watcher lists, then watches: it sees both objects and the status change.
    let mut seen_ready = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen_ready {
        let event = tokio::time::timeout_at(deadline, events.next()).await.unwrap().unwrap().unwrap();
        let objects = match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => vec![object],
            _ => vec![],
        };
        seen_ready =
            objects.iter().any(|o| o.metadata.name.as_deref() == Some("a") && o.data["status"]["ready"] == true);
    }
    v1.delete("b", &Default::default()).await.unwrap();
    assert!(v1.get_opt("b").await.unwrap().is_none());
}

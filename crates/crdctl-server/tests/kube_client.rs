//! A real kube-rs client (kube 5, k8s-openapi 0.29) against the server: a typed CRD create,
//! waiting for Established, dynamic objects at two versions, list, a runtime watcher, and a
//! status patch — on every store backend.

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

on_each_backend!(kube_rs_client_round_trip);

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

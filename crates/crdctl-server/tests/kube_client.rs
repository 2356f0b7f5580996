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
    let mut events = watcher(api.clone(), watcher::Config::default().labels("round-trip=yes")).boxed();
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
    // Namespaces and CRDs go once their lifecycle has emptied them.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.get_opt(&name).await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "{kind} is deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every kind of the built-in table (but the reviews, which are not stored), CRDs, Namespaces
/// and both Events included, each through its typed client with a minimal valid object.
async fn typed_clients_round_trip_every_built_in_kind(backend: Backend) {
    use k8s_openapi::api::admissionregistration::v1 as admission;
    use k8s_openapi::api::{
        apps, autoscaling, batch, certificates, coordination, core, discovery, events, flowcontrol, networking, node,
        policy, rbac, scheduling, storage,
    };
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let (server, _keep) = backend.start().await;
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    // Each kind, where it lives, and the fields that make a minimal valid object of it.
    macro_rules! round_trips {
        ($($kind:ty: $scope:ident $name:literal $fields:tt,)*) => {$({
            let namespaced = stringify!($scope) == "namespaced";
            let mut object = json!($fields);
            object["metadata"] = json!({"name": $name, "labels": {"round-trip": "yes"}});
            if namespaced {
                object["metadata"]["namespace"] = json!("default");
            }
            let api: Api<$kind> = scoped!($scope);
            round_trip(api, object).await;
        })*};
    }
    macro_rules! scoped {
        (namespaced) => {
            Api::namespaced(client.clone(), "default")
        };
        (cluster) => {
            Api::all(client.clone())
        };
    }
    let template =
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let job_template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
    let workload = json!({"selector": {"matchLabels": {"app": "a"}}, "template": template});
    let subjects = json!([{"kind": "ServiceAccount", "name": "crontab-controller", "namespace": "default"}]);
    let rules = json!([{"apiGroups": ["example.com"], "resources": ["crontabs"], "verbs": ["get"]}]);
    let role_ref = |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "reader"});
    let request = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==";
    let crd_spec = serde_json::to_value(crd()).unwrap()["spec"].clone();
    let regarding = json!({"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"});
    round_trips! {
        CustomResourceDefinition: cluster "crontabs.example.com" {"spec": crd_spec},
        core::v1::ConfigMap: namespaced "settings" {"data": {"a": "1"}},
        core::v1::Endpoints: namespaced "web" {"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
        core::v1::Event: namespaced "web.1" {"involvedObject": regarding, "reason": "ScalingReplicaSet", "type": "Normal"},
        core::v1::Namespace: cluster "team-round-trip" {},
        core::v1::LimitRange: namespaced "limits" {"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}},
        core::v1::Node: cluster "node-a" {"spec": {"unschedulable": true}},
        core::v1::PersistentVolume: cluster "pv" {"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}},
        core::v1::PersistentVolumeClaim: namespaced "claim" {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        core::v1::Pod: namespaced "pod" {"spec": template["spec"]},
        core::v1::PodTemplate: namespaced "template" {"template": template},
        core::v1::ReplicationController: namespaced "rc" {"spec": {"selector": {"app": "a"}, "template": template}},
        core::v1::ResourceQuota: namespaced "quota" {"spec": {"hard": {"pods": "10"}}},
        core::v1::Secret: namespaced "token" {"data": {"t": "eA=="}},
        core::v1::Service: namespaced "web" {"spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}},
        core::v1::ServiceAccount: namespaced "crontab-controller" {},
        admission::MutatingWebhookConfiguration: cluster "mutate" {},
        admission::ValidatingAdmissionPolicy: cluster "policy" {"spec": {"validations": [{"expression": "true"}]}},
        admission::ValidatingAdmissionPolicyBinding: cluster "binding" {"spec": {"policyName": "policy", "validationActions": ["Deny"]}},
        admission::ValidatingWebhookConfiguration: cluster "validate" {},
        APIService: cluster "v1.example.com" {"spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}},
        apps::v1::ControllerRevision: namespaced "revision" {"revision": 1},
        apps::v1::DaemonSet: namespaced "agent" {"spec": workload},
        apps::v1::Deployment: namespaced "web" {"spec": workload},
        apps::v1::ReplicaSet: namespaced "web" {"spec": workload},
        apps::v1::StatefulSet: namespaced "db" {"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template, "serviceName": "db"}},
        autoscaling::v2::HorizontalPodAutoscaler: namespaced "web" {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}},
        autoscaling::v1::HorizontalPodAutoscaler: namespaced "web-v1" {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3, "targetCPUUtilizationPercentage": 60}},
        batch::v1::CronJob: namespaced "nightly" {"spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": job_template}}}},
        batch::v1::Job: namespaced "once" {"spec": {"template": job_template}},
        certificates::v1::CertificateSigningRequest: cluster "csr" {"spec": {"request": request, "signerName": "example.com/signer", "usages": ["digital signature"]}},
        coordination::v1::Lease: namespaced "leader" {"spec": {"holderIdentity": "a"}},
        discovery::v1::EndpointSlice: namespaced "web-1" {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]},
        events::v1::Event: namespaced "web.2" {"regarding": regarding, "reason": "ScalingReplicaSet", "type": "Normal",
            "eventTime": "2026-12-04T10:00:00.000000Z", "reportingController": "deployment-controller",
            "reportingInstance": "controller-1", "action": "Scale", "note": "scaled up"},
        flowcontrol::v1::FlowSchema: cluster "flows" {"spec": {"priorityLevelConfiguration": {"name": "global-default"}}},
        flowcontrol::v1::PriorityLevelConfiguration: cluster "level" {"spec": {"type": "Exempt"}},
        networking::v1::Ingress: namespaced "web" {"spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}},
        networking::v1::IngressClass: cluster "nginx" {"spec": {"controller": "example.com/ingress"}},
        networking::v1::IPAddress: cluster "10.96.0.200" {"spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}},
        networking::v1::NetworkPolicy: namespaced "deny" {"spec": {"podSelector": {}}},
        networking::v1::ServiceCIDR: cluster "extra" {"spec": {"cidrs": ["10.200.0.0/16"]}},
        node::v1::RuntimeClass: cluster "gvisor" {"handler": "runsc"},
        policy::v1::PodDisruptionBudget: namespaced "web" {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}},
        rbac::v1::ClusterRole: cluster "system:reader" {"rules": rules},
        rbac::v1::ClusterRoleBinding: cluster "reader" {"roleRef": role_ref("ClusterRole"), "subjects": subjects},
        rbac::v1::Role: namespaced "reader" {"rules": rules},
        rbac::v1::RoleBinding: namespaced "reader" {"roleRef": role_ref("Role"), "subjects": subjects},
        scheduling::v1::PriorityClass: cluster "high" {"value": 1000},
        storage::v1::CSIDriver: cluster "csi.example.com" {"spec": {}},
        storage::v1::CSINode: cluster "node-a" {"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "a"}]}},
        storage::v1::CSIStorageCapacity: namespaced "capacity" {"storageClassName": "fast"},
        storage::v1::StorageClass: cluster "fast" {"provisioner": "csi.example.com"},
        storage::v1::VolumeAttachment: cluster "attach" {"spec": {"attacher": "csi.example.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv"}}},
    }
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

//! The controller against crdctl's in-process API server: no cluster, nothing downloaded.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::time::Duration;

use crdctl_server::testing::TestServer;
use crontab_controller::{CONTROLLER, CronTab, Election, FINALIZER};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

const CRD_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crd.yaml");
const RBAC_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/rbac.yaml");
const SERVICE_ACCOUNT: &str = "system:serviceaccount:default:crontab-controller";
const CRD: &str = "crontabs.stable.example.com";

/// Polls `check` until it returns `Some`, for up to ten seconds.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn at_version(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("stable.example.com", version, "CronTab");
    Api::default_namespaced_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "crontabs"))
}

async fn create_v1beta1(client: &kube::Client, name: &str) {
    let object = json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "*/5 * * * *", "image": "cron:1"}});
    at_version(client, "v1beta1")
        .create(&PostParams::default(), &serde_json::from_value(object).unwrap())
        .await
        .unwrap();
}

/// The `apiVersion` a CronTab in `default` is stored in.
async fn stored_as(server: &TestServer, name: &str) -> String {
    let stored = server.stored_api_version("stable.example.com", "crontabs", Some("default"), name).await.unwrap();
    stored.unwrap_or_else(|| panic!("{name} is not stored"))
}

/// One replica of the controller, running until [`Replica::stop`].
struct Replica {
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn start(client: &kube::Client, identity: &str, lease_seconds: u64) -> Replica {
        let election = Election {
            identity: identity.into(),
            namespace: "default".into(),
            lease_duration: Duration::from_secs(lease_seconds),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(crontab_controller::run(client.clone(), election, async {
            let _ = stopped.await;
        }));
        Replica { stop, running }
    }

    /// Stops it and waits until it has stopped.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.running).await.unwrap().unwrap();
    }
}

/// The ConfigMap the controller keeps for `name`, once its schedule is `cron_spec`.
async fn schedule(client: &kube::Client, name: &str, cron_spec: &str) -> ConfigMap {
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    eventually(&format!("{name}'s ConfigMap at {cron_spec}"), || async {
        let map = config_maps.get_opt(name).await.ok()??;
        (map.data.as_ref()?.get("cronSpec")? == cron_spec).then_some(map)
    })
    .await
}

/// Waits until the controller has marked `name` Ready at its current generation.
async fn ready(api: &Api<CronTab>, name: &str) -> CronTab {
    eventually(&format!("{name} to be Ready"), || async {
        let crontab = api.get(name).await.ok()?;
        let status = crontab.status.as_ref()?;
        let ready = status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        (ready && status.observed_generation == crontab.metadata.generation).then_some(crontab)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_through_a_storage_version_upgrade() {
    let server = TestServer::builder().crd_files([CRD_FILE]).start().await.unwrap();
    let client = server.client();
    let controller = Replica::start(&client, "replica-a", 15);
    let crontabs: Api<CronTab> = Api::default_namespaced(client.clone());

    // Written through v1beta1, stored as v1beta1; the controller works at v1.
    create_v1beta1(&client, "nightly").await;
    let nightly = ready(&crontabs, "nightly").await;
    assert!(nightly.finalizers().iter().any(|f| f == FINALIZER));
    assert_eq!(nightly.spec.replicas, Some(1), "defaulted by the CRD schema");
    assert_eq!(stored_as(&server, "nightly").await, "stable.example.com/v1beta1");

    // It owns a ConfigMap with the schedule, applied server-side under its own name.
    let map = schedule(&client, "nightly", "*/5 * * * *").await;
    let owner = &map.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("CronTab", "nightly", Some(true)));
    assert_eq!(owner.uid, nightly.metadata.uid.clone().unwrap());
    let managers: Vec<_> = map.metadata.managed_fields.unwrap().into_iter().map(|f| (f.manager, f.operation)).collect();
    assert_eq!(managers, [(Some(CONTROLLER.to_string()), Some("Apply".to_string()))]);

    // A spec change bumps the generation; the controller catches up, ConfigMap included.
    let patch = Patch::Merge(json!({"spec": {"cronSpec": "0 3 * * *"}}));
    crontabs.patch("nightly", &PatchParams::default(), &patch).await.unwrap();
    assert_eq!(ready(&crontabs, "nightly").await.status.unwrap().observed_generation, Some(2));
    schedule(&client, "nightly", "0 3 * * *").await;
    let lease = Api::<Lease>::default_namespaced(client.clone()).get(CONTROLLER).await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("replica-a"));

    // The operator's upgrade: v1 becomes the storage version while the controller runs.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let mut crd = crds.get(CRD).await.unwrap();
    for version in &mut crd.spec.versions {
        version.storage = version.name == "v1";
    }
    crds.replace(CRD, &PostParams::default(), &crd).await.unwrap();
    let stored_versions = eventually("storedVersions to list v1", || async {
        let versions = crds.get(CRD).await.ok()?.status?.stored_versions?;
        (versions.len() == 2).then_some(versions)
    })
    .await;
    assert_eq!(stored_versions, ["v1beta1", "v1"]);
    create_v1beta1(&client, "hourly").await;
    ready(&crontabs, "hourly").await;
    assert_eq!(stored_as(&server, "hourly").await, "stable.example.com/v1");
    // The old object, reconciled again after a change, is rewritten in the new storage version.
    crontabs.patch("nightly", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}}))).await.unwrap();
    assert_eq!(ready(&crontabs, "nightly").await.status.unwrap().observed_generation, Some(3));
    assert_eq!(stored_as(&server, "nightly").await, "stable.example.com/v1");

    // The controller talked v1 only; the test's writes used v1beta1.
    let requests = server.requests();
    let versions_used = |resource: &str| {
        requests
            .iter()
            .filter(|r| r.resource.as_deref() == Some(resource))
            .map(|r| r.version.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(versions_used("crontabs"), ["v1".to_string(), "v1beta1".to_string()].into());
    assert!(requests.iter().any(|r| r.resource.as_deref() == Some("crontabs") && r.watch && r.version == "v1"));
    assert!(requests.iter().any(|r| r.subresource.as_deref() == Some("status") && r.method == "PATCH"));

    // The recorder's Events are stored and listed.
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let recorded = events.list(&ListParams::default()).await.unwrap().items;
    let reconciled = |name: &str| {
        recorded.iter().find(|e| {
            e.reason.as_deref() == Some("Reconciled")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
    };
    assert!(reconciled("hourly").is_some(), "{recorded:?}");
    // The recorder folds repeats into a series, patching the Event it created.
    let series = reconciled("nightly").and_then(|e| e.series.as_ref()).map(|s| s.count);
    assert!(series.is_some_and(|count| count >= 2), "{recorded:?}");

    // Deleting waits for the finalizer; the controller removes it and the object goes, and the
    // garbage collector takes the ConfigMap it owned: the controller deletes nothing itself.
    crontabs.delete("nightly", &DeleteParams::default()).await.unwrap();
    eventually("nightly to be gone", || async { crontabs.get_opt("nightly").await.ok()?.is_none().then_some(()) })
        .await;
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    eventually("nightly's ConfigMap to be collected", || async {
        config_maps.get_opt("nightly").await.ok()?.is_none().then_some(())
    })
    .await;
    let reasons: Vec<String> =
        events.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|e| e.reason).collect();
    assert!(reasons.contains(&"Deleted".to_string()), "{reasons:?}");

    controller.stop().await;
}

/// Creates every object of a manifest file (ServiceAccounts and RBAC objects) as `client`.
async fn create_all(client: &kube::Client, file: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    for document in documents {
        let (group, version) = match document["apiVersion"].as_str().unwrap().split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), "v1".to_string()),
        };
        let kind = document["kind"].as_str().unwrap();
        let gvk = GroupVersionKind::gvk(&group, &version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
        let api: Api<DynamicObject> = match document["metadata"]["namespace"].as_str() {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &serde_json::from_value(document).unwrap()).await.unwrap();
    }
}

/// Under RBAC, the controller runs as its ServiceAccount with only the rules `rbac.yaml` ships:
/// it reconciles, elects, records and finalises with them (a missing rule stops it, and the
/// test with it), is refused what they do not grant, and the aggregated roles give CronTabs to
/// whoever may edit a namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_as_its_service_account_with_the_rbac_it_ships() {
    let server = TestServer::builder()
        .crd_files([CRD_FILE])
        .authorization(crdctl_server::auth::Mode::Rbac)
        .start()
        .await
        .unwrap();
    let admin = server.client();
    create_all(&admin, RBAC_FILE).await;
    let account = server.client_as(SERVICE_ACCOUNT, &[]);
    let controller = Replica::start(&account, "replica-a", 15);

    // A developer bound to `edit` in the namespace may write CronTabs: the shipped role is
    // aggregated into it.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "jane-edits"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]});
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "RoleBinding");
    let bindings: Api<DynamicObject> =
        Api::default_namespaced_with(admin.clone(), &ApiResource::from_gvk_with_plural(&gvk, "rolebindings"));
    bindings.create(&PostParams::default(), &serde_json::from_value(binding).unwrap()).await.unwrap();
    let jane = server.client_as("jane", &["dev"]);
    let jane_crontabs: Api<CronTab> = Api::default_namespaced(jane.clone());
    eventually("edit to hold the aggregated CronTab rules", || async {
        jane_crontabs.list(&ListParams::default()).await.ok()
    })
    .await;
    create_v1beta1(&jane, "nightly").await;

    let crontabs: Api<CronTab> = Api::default_namespaced(admin.clone());
    let nightly = ready(&crontabs, "nightly").await;
    assert!(nightly.finalizers().iter().any(|f| f == FINALIZER));
    schedule(&admin, "nightly", "*/5 * * * *").await;
    let lease = Api::<Lease>::default_namespaced(admin.clone()).get(CONTROLLER).await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("replica-a"));
    let events: Api<Event> = Api::default_namespaced(admin.clone());
    let reasons: Vec<String> =
        events.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|e| e.reason).collect();
    assert!(reasons.contains(&"Reconciled".to_string()), "{reasons:?}");

    // What the rules do not grant, the server refuses the account, in upstream's words.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(account.clone());
    let refused = secrets.list(&ListParams::default()).await.unwrap_err();
    let kube::Error::Api(status) = refused else { panic!("{refused}") };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        r#"secrets is forbidden: User "system:serviceaccount:default:crontab-controller" cannot list resource "secrets" in API group "" in the namespace "default""#
    );

    // Deleting: the controller removes its finalizer with the rights it has.
    jane_crontabs.delete("nightly", &DeleteParams::default()).await.unwrap();
    eventually("nightly to be gone", || async { crontabs.get_opt("nightly").await.ok()?.is_none().then_some(()) })
        .await;
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_and_events_api_events_are_one_resource() {
    let server = TestServer::builder().start().await.unwrap();
    let client = server.client();
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let event: Event = serde_json::from_value(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1"}, "eventTime": "2026-12-01T10:00:00.000000Z", "reason": "Started",
        "note": "it started", "type": "Normal", "action": "Start", "reportingController": "test", "reportingInstance": "t1",
        "regarding": {"kind": "CronTab", "name": "nightly", "namespace": "default"}}))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client);
    let seen = core.get("e1").await.unwrap();
    assert_eq!(seen.message.as_deref(), Some("it started"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("nightly"));
    assert_eq!(seen.reporting_component.as_deref(), Some("test"));
    let patched = events.patch("e1", &PatchParams::default(), &Patch::Merge(json!({"note": "changed"}))).await.unwrap();
    assert_eq!(patched.note.as_deref(), Some("changed"));
    assert_eq!(core.get("e1").await.unwrap().message.as_deref(), Some("changed"));
}

/// Two replicas: only the Lease's holder reconciles; when it stops, the other takes the Lease
/// once it expires and carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_and_another_takes_over() {
    let server = TestServer::builder().crd_files([CRD_FILE]).start().await.unwrap();
    let client = server.client();
    let a = Replica::start(&client, "replica-a", 2);
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let holder = || async { leases.get_opt(CONTROLLER).await.ok()??.spec?.holder_identity };
    eventually("replica-a to lead", || async { (holder().await? == "replica-a").then_some(()) }).await;
    let b = Replica::start(&client, "replica-b", 2);
    let crontabs: Api<CronTab> = Api::default_namespaced(client.clone());
    create_v1beta1(&client, "nightly").await;
    ready(&crontabs, "nightly").await;
    assert_eq!(holder().await.as_deref(), Some("replica-a"), "b waits while a renews");

    a.stop().await;
    eventually("replica-b to take the lease", || async { (holder().await? == "replica-b").then_some(()) }).await;
    let lease = leases.get(CONTROLLER).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_transitions, Some(1));
    crontabs
        .patch("nightly", &PatchParams::default(), &Patch::Merge(json!({"spec": {"cronSpec": "0 4 * * *"}})))
        .await
        .unwrap();
    assert_eq!(ready(&crontabs, "nightly").await.status.unwrap().observed_generation, Some(2));
    schedule(&client, "nightly", "0 4 * * *").await;
    b.stop().await;
}

/// The controller's own admission webhooks, served over TLS by the framework and called by
/// `TestServer` as kube-apiserver calls them: the image defaulted, too many replicas refused
/// with the webhook's message, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_admission_webhooks_default_and_refuse() {
    use crdctl_conversion::{certs, framework};
    let bundle = certs::generate(&["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = framework::Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, dir.path()).unwrap();
    let webhook = framework::start_app(options, crontab_controller::webhook::routes()).await.unwrap();
    let server = TestServer::builder().crd_files([CRD_FILE]).start().await.unwrap();
    let client = server.client();
    let hook = |name: &str, path: &str| {
        json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{}{path}", webhook.address.port()), "caBundle": bundle.ca_bundle()},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["stable.example.com"], "apiVersions": ["*"], "resources": ["crontabs"]}]})
    };
    let configure = |kind: &str, plural: &str, webhook: serde_json::Value| {
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural));
        let object = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "crontabs"}, "webhooks": [webhook]});
        async move { api.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.unwrap() }
    };
    configure(
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        hook("default.crontabs.stable.example.com", "/mutate"),
    )
    .await;
    configure(
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        hook("check.crontabs.stable.example.com", "/validate"),
    )
    .await;

    let crontabs: Api<CronTab> = Api::default_namespaced(client.clone());
    let crontab = |name: &str, replicas: i64| {
        serde_json::from_value::<CronTab>(json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name}, "spec": {"cronSpec": "*/5 * * * *", "replicas": replicas}}))
        .unwrap()
    };
    let created = crontabs.create(&PostParams::default(), &crontab("nightly", 2)).await.unwrap();
    assert_eq!(created.spec.image.as_deref(), Some("cron:latest"), "defaulted by the mutating webhook");
    let refused = crontabs.create(&PostParams::default(), &crontab("huge", 20)).await.unwrap_err();
    let kube::Error::Api(status) = refused else { panic!("{refused}") };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        r#"crontabs.stable.example.com "huge" is forbidden: admission webhook "check.crontabs.stable.example.com" denied the request: spec.replicas: 20 is more than 10"#
    );
    assert!(crontabs.get_opt("huge").await.unwrap().is_none());
    webhook.shutdown().await.unwrap();
}

//! The controllers, as a cluster runs them, on every store backend. The garbage collector:
//! background deletion across kinds and scopes, foreground deletion held by a blocking
//! dependent's finalizer, orphaning, dangling owner references, invalid cross-namespace
//! references, the deletion options' checks, and a restart in the middle of a foreground
//! deletion. The namespace controller: a deleted namespace empties itself, says what holds it
//! in its conditions, and goes. The CRD finalizer: a deleted CRD waits for its custom
//! resources to be really gone. Every namespace's `default` ServiceAccount and
//! `kube-root-ca.crt`, made again when deleted or changed.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

mod backends;
mod http;

use std::time::Duration;

use backends::Backend;
use crdctl_server::Config;
use crdctl_server::testing::TestServer;
use http::Http;
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const CRONTABS: &str = "/apis/example.com/v1/namespaces/default/crontabs";
const CLUSTER_ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
const DESCRIPTION: &str = "kubernetes.io/description";

/// How long the collector may take to act.
const PATIENCE: Duration = Duration::from_secs(20);

struct Client {
    http: Http,
}

impl Client {
    fn of(server: &TestServer) -> Client {
        Client { http: Http::to(server) }
    }

    /// A client of a server on HTTPS whose certificate `ca` (PEM) signed.
    fn trusting(server: &TestServer, ca: &str) -> Client {
        let ca = reqwest::Certificate::from_pem(ca.as_bytes()).unwrap();
        let client = reqwest::Client::builder().tls_certs_only([ca]).build().unwrap();
        Client { http: Http { url: server.url().replace("127.0.0.1", "localhost"), client } }
    }

    async fn send(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> (u16, Value) {
        self.http.send(method, path, content_type, body).await
    }

    async fn create(&self, collection: &str, object: Value) -> Value {
        let (code, body) = self.send("POST", collection, "application/json", Some(&object)).await;
        assert_eq!(code, 201, "{body}");
        body
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let (code, body) = self.send("GET", path, "application/json", None).await;
        match code {
            200 => Some(body),
            404 => None,
            _ => panic!("GET {path}: {code} {body}"),
        }
    }

    async fn delete(&self, path: &str, options: Option<Value>) -> Value {
        let (code, body) = self.send("DELETE", path, "application/json", options.as_ref()).await;
        assert_eq!(code, 200, "{body}");
        body
    }

    async fn patch(&self, path: &str, patch: Value) -> Value {
        let (code, body) = self.send("PATCH", path, "application/merge-patch+json", Some(&patch)).await;
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Waits until `path` is gone.
    async fn gone(&self, path: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.get(path).await.is_some() {
            assert!(tokio::time::Instant::now() < deadline, "{path} was never collected: {:?}", self.get(path).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `check` holds of the object at `path`.
    async fn until(&self, path: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let object = self.get(path).await.unwrap_or(Value::Null);
            if check(&object) {
                return object;
            }
            assert!(tokio::time::Instant::now() < deadline, "{path} never {what}: {object}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn owned_by(owner: &Value, block: bool) -> Value {
    json!([{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block,
    }])
}

fn configmap(name: &str, owners: Value, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers}})
}

async fn with_crontabs(client: &Client, server: &TestServer) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).await;
    server.wait_established("crontabs.example.com").await.unwrap();
}

/// Deleting an owner deletes its dependents afterwards, recursively, across kinds (a built-in
/// owning a custom resource owning a built-in), and a cluster-scoped owner's namespaced ones.
async fn background_deletion_collects_dependents_across_kinds_and_scopes(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    with_crontabs(&client, &server).await;
    let owner = client.create(CONFIGMAPS, configmap("owner", json!([]), &[])).await;
    let crontab = json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": "child", "ownerReferences": owned_by(&owner, false)}});
    let child = client.create(CRONTABS, crontab).await;
    client.create(CONFIGMAPS, configmap("grandchild", owned_by(&child, false), &[])).await;
    let role = client.create(CLUSTER_ROLES, json!({"metadata": {"name": "owner"}, "rules": []})).await;
    client.create(CONFIGMAPS, configmap("of-a-cluster-role", owned_by(&role, false), &[])).await;
    client.create(CONFIGMAPS, configmap("bystander", json!([]), &[])).await;

    client.delete(&format!("{CONFIGMAPS}/owner"), None).await;
    client.delete(&format!("{CLUSTER_ROLES}/owner"), None).await;
    client.gone(&format!("{CRONTABS}/child")).await;
    client.gone(&format!("{CONFIGMAPS}/grandchild")).await;
    client.gone(&format!("{CONFIGMAPS}/of-a-cluster-role")).await;
    assert!(client.get(&format!("{CONFIGMAPS}/bystander")).await.is_some());
}

/// A foreground deletion keeps the owner, marked, until its blocking dependent is gone — and
/// a dependent held by its own finalizer holds the owner until the finalizer goes.
async fn foreground_deletion_waits_for_blocking_dependents(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    let owner = client.create(CONFIGMAPS, configmap("owner", json!([]), &[])).await;
    client.create(CONFIGMAPS, configmap("held", owned_by(&owner, true), &["example.com/hold"])).await;
    client.create(CONFIGMAPS, configmap("free", owned_by(&owner, false), &[])).await;

    let answer = client.delete(&format!("{CONFIGMAPS}/owner"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(answer["metadata"]["finalizers"], json!(["foregroundDeletion"]), "{answer}");
    assert!(answer["metadata"]["deletionTimestamp"].is_string(), "{answer}");
    client
        .until(&format!("{CONFIGMAPS}/held"), "marked", |held| held["metadata"]["deletionTimestamp"].is_string())
        .await;
    client.gone(&format!("{CONFIGMAPS}/free")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = client.get(&format!("{CONFIGMAPS}/owner")).await.expect("the owner waits for its blocking dependent");
    assert_eq!(waiting["metadata"]["finalizers"], json!(["foregroundDeletion"]));

    client.patch(&format!("{CONFIGMAPS}/held"), json!({"metadata": {"finalizers": null}})).await;
    client.gone(&format!("{CONFIGMAPS}/held")).await;
    client.gone(&format!("{CONFIGMAPS}/owner")).await;
}

/// An orphaning deletion removes the owner and leaves its dependents without the reference,
/// with `propagationPolicy: Orphan` and with the deprecated `orphanDependents`.
async fn orphan_deletion_keeps_dependents(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    for (owner, options) in [("a", json!({"propagationPolicy": "Orphan"})), ("b", json!({"orphanDependents": true}))] {
        let owner_object = client.create(CONFIGMAPS, configmap(owner, json!([]), &[])).await;
        let other = client.create(CONFIGMAPS, configmap(&format!("other-{owner}"), json!([]), &[])).await;
        let mut references = owned_by(&owner_object, true);
        references.as_array_mut().unwrap().extend(owned_by(&other, false).as_array().unwrap().clone());
        client.create(CONFIGMAPS, configmap(&format!("{owner}-dependent"), references, &[])).await;
        client
            .create(CONFIGMAPS, configmap(&format!("{owner}-only-dependent"), owned_by(&owner_object, false), &[]))
            .await;

        let answer = client.delete(&format!("{CONFIGMAPS}/{owner}"), Some(options)).await;
        assert_eq!(answer["metadata"]["finalizers"], json!(["orphan"]), "{answer}");
        client.gone(&format!("{CONFIGMAPS}/{owner}")).await;
        let dependent = client.get(&format!("{CONFIGMAPS}/{owner}-dependent")).await.expect("orphaned, not deleted");
        let only = client.get(&format!("{CONFIGMAPS}/{owner}-only-dependent")).await.expect("orphaned, not deleted");
        assert!(only["metadata"].get("ownerReferences").is_none(), "no reference left, none written: {only}");
        let references = dependent["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(references.len(), 1, "{dependent}");
        assert_eq!(references[0]["uid"], other["metadata"]["uid"], "{dependent}");
    }
}

/// A dependent whose owner does not exist — no object of that name, or one with another uid —
/// is garbage; one with a live owner stays, and a reference to a dead owner beside a live one
/// is dropped.
async fn dangling_owner_references_are_collected(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    let live = client.create(CONFIGMAPS, configmap("live", json!([]), &[])).await;
    let mut wrong_uid = live.clone();
    wrong_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let mut missing = live.clone();
    missing["metadata"]["name"] = json!("missing");
    missing["metadata"]["uid"] = json!("11111111-1111-1111-1111-111111111111");
    client.create(CONFIGMAPS, configmap("of-a-missing-owner", owned_by(&missing, false), &[])).await;
    client.create(CONFIGMAPS, configmap("of-another-uid", owned_by(&wrong_uid, false), &[])).await;
    client.create(CONFIGMAPS, configmap("of-the-live-owner", owned_by(&live, false), &[])).await;
    let mut both = owned_by(&live, false);
    both.as_array_mut().unwrap().extend(owned_by(&missing, false).as_array().unwrap().clone());
    client.create(CONFIGMAPS, configmap("of-both", both, &[])).await;

    client.gone(&format!("{CONFIGMAPS}/of-a-missing-owner")).await;
    client.gone(&format!("{CONFIGMAPS}/of-another-uid")).await;
    let kept = client
        .until(&format!("{CONFIGMAPS}/of-both"), "lost its dangling reference", |object| {
            object["metadata"]["ownerReferences"].as_array().is_some_and(|r| r.len() == 1)
        })
        .await;
    assert_eq!(kept["metadata"]["ownerReferences"][0]["uid"], live["metadata"]["uid"]);
    assert!(client.get(&format!("{CONFIGMAPS}/of-the-live-owner")).await.is_some());
}

/// A reference to a namespaced owner in another namespace, and one from a cluster-scoped
/// object to a namespaced kind, are reported as upstream reports them and not acted on.
async fn invalid_namespace_references_are_reported(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    client.create("/api/v1/namespaces", json!({"metadata": {"name": "elsewhere"}})).await;
    let owner = client.create("/api/v1/namespaces/elsewhere/configmaps", configmap("owner", json!([]), &[])).await;
    let across = client.create(CONFIGMAPS, configmap("across", owned_by(&owner, false), &[])).await;
    let role = json!({"metadata": {"name": "cluster-scoped", "ownerReferences": owned_by(&owner, false)}, "rules": []});
    let role = client.create(CLUSTER_ROLES, role).await;

    let deadline = tokio::time::Instant::now() + PATIENCE;
    let reported = loop {
        let (_, events) = client.send("GET", "/api/v1/namespaces/default/events", "application/json", None).await;
        let invalid: Vec<Value> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "OwnerRefInvalidNamespace")
            .cloned()
            .collect();
        if invalid.len() == 2 || tokio::time::Instant::now() > deadline {
            break invalid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let on =
        |object: &Value| reported.iter().find(|e| e["involvedObject"]["uid"] == object["metadata"]["uid"]).cloned();
    let event = on(&across).unwrap_or_else(|| panic!("no event for the cross-namespace reference: {reported:?}"));
    let uid = owner["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        event["message"],
        format!(
            "ownerRef [v1/ConfigMap, namespace: default, name: owner, uid: {uid}] does not exist in namespace \"default\""
        )
    );
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["source"]["component"], "garbage-collector-controller");
    let event = on(&role).unwrap_or_else(|| panic!("no event for the cluster-scoped dependent: {reported:?}"));
    assert_eq!(
        event["message"],
        format!("ownerRef [v1/ConfigMap, namespace: , name: owner, uid: {uid}] does not exist in namespace \"\"")
    );
    // Neither reference is acted on. A dependent of a missing owner, made after the Events, is
    // collected: the collector has judged both by then.
    let mut missing = owner.clone();
    missing["metadata"]["uid"] = json!("11111111-1111-1111-1111-111111111111");
    client.create(CONFIGMAPS, configmap("of-a-missing-owner", owned_by(&missing, false), &[])).await;
    client.gone(&format!("{CONFIGMAPS}/of-a-missing-owner")).await;
    assert!(client.get(&format!("{CONFIGMAPS}/across")).await.is_some());
    assert!(client.get(&format!("{CLUSTER_ROLES}/cluster-scoped")).await.is_some());
    // With the owner deleted, the reference across namespaces is an ordinary dangling one.
    client.delete("/api/v1/namespaces/elsewhere/configmaps/owner", None).await;
    client.gone(&format!("{CONFIGMAPS}/across")).await;
}

/// `propagationPolicy` and `orphanDependents` are checked as upstream's `ValidateDeleteOptions`.
async fn deletion_options_are_checked(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    client.create(CONFIGMAPS, configmap("a", json!([]), &[])).await;
    let cases = [
        (
            json!({"propagationPolicy": "Foreground", "orphanDependents": true}),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            json!({"propagationPolicy": "Sideways"}),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        ),
    ];
    for (options, message) in cases {
        let (code, status) =
            client.send("DELETE", &format!("{CONFIGMAPS}/a"), "application/json", Some(&options)).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(status["message"], message);
    }
    let (code, status) = client.send("DELETE", &format!("{CONFIGMAPS}/a?propagationPolicy=Sideways"), "", None).await;
    assert_eq!(code, 422, "{status}");
    assert!(client.get(&format!("{CONFIGMAPS}/a")).await.is_some());
}

/// A foreground deletion that a server stopped in the middle of finishes on the next one (the
/// graph rebuilt from the store), and an owner removed while no server ran has its dependents
/// collected when one starts.
async fn a_restart_loses_no_collection(backend: Backend) {
    let (store, _keep, config) = backend.open(Config::default()).await;
    let server = TestServer::start_with(config.clone(), std::sync::Arc::clone(&store)).await.unwrap();
    let client = Client::of(&server);
    let owner = client.create(CONFIGMAPS, configmap("owner", json!([]), &[])).await;
    client.create(CONFIGMAPS, configmap("held", owned_by(&owner, true), &["example.com/hold"])).await;
    let vanishing = client.create(CONFIGMAPS, configmap("vanishing", json!([]), &[])).await;
    client.create(CONFIGMAPS, configmap("of-the-vanishing", owned_by(&vanishing, false), &[])).await;
    client.delete(&format!("{CONFIGMAPS}/owner"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    client
        .until(&format!("{CONFIGMAPS}/held"), "marked", |held| held["metadata"]["deletionTimestamp"].is_string())
        .await;
    server.shutdown().await;

    store.delete("/registry/configmaps/default/vanishing", None).await.unwrap();
    let server = TestServer::start_with(config, store).await.unwrap();
    let client = Client::of(&server);
    client.gone(&format!("{CONFIGMAPS}/of-the-vanishing")).await;
    assert!(client.get(&format!("{CONFIGMAPS}/owner")).await.is_some(), "the owner still waits");
    client.patch(&format!("{CONFIGMAPS}/held"), json!({"metadata": {"finalizers": null}})).await;
    client.gone(&format!("{CONFIGMAPS}/owner")).await;
}

/// With the collector switched off, deletions leave dependents and add no finalizers, as a
/// server started without `--enable-garbage-collector`.
async fn the_collector_can_be_switched_off(backend: Backend) {
    let controllers = crdctl_server::controller::Controllers { garbage_collector: false, ..Default::default() };
    let (server, _keep) = backend.start_with(Config { controllers, ..Config::default() }).await;
    let client = Client::of(&server);
    let owner = client.create(CONFIGMAPS, configmap("owner", json!([]), &[])).await;
    client.create(CONFIGMAPS, configmap("dependent", owned_by(&owner, true), &[])).await;
    let answer = client.delete(&format!("{CONFIGMAPS}/owner"), Some(json!({"propagationPolicy": "Foreground"}))).await;
    assert_eq!(answer["status"], "Success", "{answer}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(client.get(&format!("{CONFIGMAPS}/dependent")).await.is_some());
}

/// A deleted namespace deletes its content — custom resources and built-ins — reports what
/// finalizers hold in its conditions, and goes once they are removed.
async fn a_deleted_namespace_empties_itself_and_goes(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    with_crontabs(&client, &server).await;
    client.create("/api/v1/namespaces", json!({"metadata": {"name": "doomed"}})).await;
    let crontabs = "/apis/example.com/v1/namespaces/doomed/crontabs";
    let configmaps = "/api/v1/namespaces/doomed/configmaps";
    let held = json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    client.create(crontabs, held).await;
    client
        .create(crontabs, json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "free"}}))
        .await;
    client.create(configmaps, configmap("plain", json!([]), &[])).await;

    client.delete("/api/v1/namespaces/doomed", None).await;
    let namespace = client
        .until("/api/v1/namespaces/doomed", "reported what is left", |namespace| {
            namespace["status"]["conditions"].as_array().is_some_and(|c| c.len() == 5)
        })
        .await;
    assert_eq!(namespace["status"]["phase"], "Terminating");
    let condition = |kind: &str| {
        let conditions = namespace["status"]["conditions"].as_array().unwrap();
        conditions.iter().find(|c| c["type"] == kind).cloned().unwrap()
    };
    let remaining = condition("NamespaceContentRemaining");
    assert_eq!(remaining["status"], "True", "{namespace}");
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(remaining["message"], "Some resources are remaining: crontabs.example.com has 1 resource instances");
    let finalizers = condition("NamespaceFinalizersRemaining");
    assert_eq!(finalizers["reason"], "SomeFinalizersRemain");
    assert_eq!(
        finalizers["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let discovery = condition("NamespaceDeletionDiscoveryFailure");
    assert_eq!((&discovery["status"], &discovery["reason"]), (&json!("False"), &json!("ResourcesDiscovered")));
    client.gone(&format!("{configmaps}/plain")).await;
    client.gone(&format!("{crontabs}/free")).await;
    let held = client.get(&format!("{crontabs}/held")).await.expect("held by its finalizer");
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

    client.patch(&format!("{crontabs}/held"), json!({"metadata": {"finalizers": null}})).await;
    client.gone("/api/v1/namespaces/doomed").await;
}

/// A CRD being deleted deletes its custom resources and stays `Terminating` while one is held
/// by its own finalizer; then it goes.
async fn a_deleted_crd_waits_for_its_custom_resources(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    with_crontabs(&client, &server).await;
    let held = json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    client.create(CRONTABS, held).await;
    client
        .create(CRONTABS, json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "free"}}))
        .await;
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";

    client.delete(crd, None).await;
    client.gone(&format!("{CRONTABS}/free")).await;
    client.until(&format!("{CRONTABS}/held"), "marked", |held| held["metadata"]["deletionTimestamp"].is_string()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let terminating = client.get(crd).await.expect("the CRD waits for the held custom resource");
    let conditions = terminating["status"]["conditions"].as_array().unwrap();
    let condition = conditions.iter().find(|c| c["type"] == "Terminating").unwrap();
    assert_eq!(condition["status"], "True", "{terminating}");
    assert_eq!(condition["reason"], "InstanceDeletionInProgress");
    assert_eq!(condition["message"], "CustomResource deletion is in progress");

    client.patch(&format!("{CRONTABS}/held"), json!({"metadata": {"finalizers": null}})).await;
    client.gone(crd).await;
}

/// Every active namespace gets the `default` ServiceAccount and the `kube-root-ca.crt`
/// ConfigMap holding the server's CA; both come back when deleted, and the CA when changed.
async fn every_namespace_has_its_defaults(backend: Backend) {
    let bundle = crdctl_conversion::certs::generate(&["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    // The chain, as the kubeconfig `crdctl serve` writes trusts it: what the server publishes.
    let chain = format!("{}{}", bundle.cert_pem, bundle.ca_pem);
    std::fs::write(&cert, &chain).unwrap();
    std::fs::write(&key, &bundle.key_pem).unwrap();
    let (server, _keep) = backend.start_with(Config { tls: Some((cert, key)), ..Config::default() }).await;
    let client = Client::trusting(&server, &bundle.ca_pem);
    client.create("/api/v1/namespaces", json!({"metadata": {"name": "fresh"}})).await;
    let account = "/api/v1/namespaces/fresh/serviceaccounts/default";
    let root_ca = "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt";
    let published = |object: &Value| object["data"]["ca.crt"] == chain.as_str();
    for account in [account, "/api/v1/namespaces/kube-system/serviceaccounts/default"] {
        client.until(account, "made", |object| object["kind"] == "ServiceAccount").await;
    }
    client.until(root_ca, "made", published).await;
    client.until("/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt", "made", published).await;

    client.delete(account, None).await;
    client.until(account, "made again", |object| object["kind"] == "ServiceAccount").await;
    client.patch(root_ca, json!({"data": {"ca.crt": "forged"}})).await;
    client.until(root_ca, "put back", published).await;
    client.delete(root_ca, None).await;
    let made = client.until(root_ca, "made again", published).await;
    assert_eq!(
        made["metadata"]["annotations"][DESCRIPTION],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
    );
    client.patch(root_ca, json!({"metadata": {"annotations": {DESCRIPTION: null}}})).await;
    client.until(root_ca, "described again", |object| object["metadata"]["annotations"][DESCRIPTION].is_string()).await;
}

/// Without TLS the server has no CA: `kube-root-ca.crt` is still made, with an empty
/// `ca.crt`, as upstream publishes a client configuration without CA data.
async fn without_tls_the_root_ca_is_published_empty(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client::of(&server);
    let root_ca = "/api/v1/namespaces/default/configmaps/kube-root-ca.crt";
    let made = client.until(root_ca, "made", |object| object["kind"] == "ConfigMap").await;
    assert_eq!(made["data"], json!({"ca.crt": ""}));
    assert!(made["metadata"]["annotations"][DESCRIPTION].is_string(), "{made}");
}

on_each_backend!(
    every_namespace_has_its_defaults,
    without_tls_the_root_ca_is_published_empty,
    a_deleted_crd_waits_for_its_custom_resources,
    a_deleted_namespace_empties_itself_and_goes,
    background_deletion_collects_dependents_across_kinds_and_scopes,
    foreground_deletion_waits_for_blocking_dependents,
    orphan_deletion_keeps_dependents,
    dangling_owner_references_are_collected,
    invalid_namespace_references_are_reported,
    deletion_options_are_checked,
    a_restart_loses_no_collection,
    the_collector_can_be_switched_off,
);

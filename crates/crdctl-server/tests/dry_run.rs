//! A dry run never writes. Every write verb — create (and `generateName`), update, the four
//! patch types, apply (of an existing and of a new object), delete (the option in the query and
//! in a `DeleteOptions` body, kubectl's way), deletecollection, and the `status` and `scale`
//! subresources — with `dryRun=All`, on a custom resource and on built-in kinds with their own
//! lifecycles (a Deployment, a Service that takes addresses, a namespace whose deletion empties
//! it, the CRD whose deletion removes its objects), on every store backend. After each one the
//! store holds exactly what it held (every key, value and revision), and a watch over the whole
//! store has seen nothing; the answer is what the write would have answered.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

mod backends;
mod http;

use std::time::Duration;

use backends::Backend;
use crdctl_server::Config;
use crdctl_server::testing::TestServer;
use crdctl_storage::{Entry, ListOptions, Store};
use http::Http;
use serde_json::{Value, json};

const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRONTABS: &str = "/apis/example.com/v1/namespaces/default/crontabs";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const SERVICES: &str = "/api/v1/namespaces/default/services";
const NAMESPACES: &str = "/api/v1/namespaces";

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One dry run: the request (its query gets `dryRun=All` unless the body carries it) and what
/// its answer must show.
struct Case {
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Option<Value>,
    code: u16,
    answer: fn(&Value),
}

fn case(method: &'static str, path: &str, content_type: &'static str, body: Option<Value>, code: u16) -> Case {
    Case { method, path: path.to_string(), content_type, body, code, answer: |_| {} }
}

impl Case {
    fn answering(self, answer: fn(&Value)) -> Case {
        Case { answer, ..self }
    }
}

/// A created object as a dry run answers it: filled in, but never stored.
fn created(object: &Value) {
    assert!(object["metadata"]["uid"].is_string(), "{object}");
    assert!(object["metadata"]["creationTimestamp"].is_string(), "{object}");
    assert!(object["metadata"].get("resourceVersion").is_none(), "{object}");
}

/// An updated object as a dry run answers it: at the stored `resourceVersion`.
fn at_stored_version(object: &Value) {
    assert!(object["metadata"]["resourceVersion"].as_str().is_some_and(|rv| rv != "0"), "{object}");
}

/// An object that finalizers hold, as a dry run's delete answers it.
fn marked(object: &Value) {
    assert!(object["metadata"]["deletionTimestamp"].is_string(), "{object}");
}

fn deleted(status: &Value) {
    assert_eq!(status["status"], "Success", "{status}");
}

fn listed(list: &Value) {
    assert!(list["kind"].as_str().is_some_and(|kind| kind.ends_with("List")), "{list}");
    assert!(!list["items"].as_array().unwrap().is_empty(), "{list}");
}

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * */5", "replicas": 1}})
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 80}]}})
}

fn with_finalizer(mut object: Value) -> Value {
    object["metadata"]["finalizers"] = json!(["example.com/hold"]);
    object
}

struct Fixture {
    server: TestServer,
    http: Http,
    _keep: backends::Keep,
}

impl Fixture {
    async fn send(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> (u16, Value) {
        self.http.send(method, path, content_type, body).await
    }

    async fn create(&self, collection: &str, object: Value) -> Value {
        let (code, body) = self.send("POST", collection, JSON, Some(&object)).await;
        assert_eq!(code, 201, "{body}");
        body
    }

    fn store(&self) -> &dyn Store {
        &*self.server.server().state().store
    }

    /// Every key, value and revision in the store.
    async fn snapshot(&self) -> Vec<Entry> {
        self.store().list(ListOptions { prefix: "/", ..Default::default() }).await.unwrap().entries
    }
}

/// A server whose controllers renew their Lease no more than once an hour, so the store is
/// still between requests, with a CRD (status and scale subresources) and an object of each
/// kind the cases address.
async fn fixture(backend: Backend) -> Fixture {
    let hour = Duration::from_secs(3600);
    let still =
        crdctl_server::controller::lease::Timings { lease_duration: hour, renew_deadline: hour, retry_period: hour };
    let (server, keep) = backend.start_with(Config { leader_election: still, ..Config::default() }).await;
    let fixture = Fixture { http: Http::to(&server), server, _keep: keep };
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}});
    fixture.create(CRD, crd).await;
    fixture.server.wait_established("crontabs.example.com").await.unwrap();
    fixture.create(CRONTABS, crontab("a")).await;
    fixture.create(CRONTABS, with_finalizer(crontab("held"))).await;
    fixture.create(CONFIGMAPS, configmap("a")).await;
    fixture.create(CONFIGMAPS, with_finalizer(configmap("held"))).await;
    fixture.create(DEPLOYMENTS, deployment("a")).await;
    fixture.create(SERVICES, service("a")).await;
    fixture.create(NAMESPACES, json!({"metadata": {"name": "doomed"}})).await;
    fixture.create("/api/v1/namespaces/doomed/configmaps", configmap("inside")).await;
    // On a store other servers share, the controllers' Lease is taken once, at start.
    let lease = "/registry/leases/kube-system/crdctl-controller-manager";
    if !fixture.store().shared() {
        return fixture;
    }
    for _ in 0..100 {
        if fixture.store().get(lease).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fixture.store().get(lease).await.unwrap().is_some(), "the controllers never took their Lease");
    fixture
}

/// The rv of an object, for updates that must name it.
async fn resource_version(fixture: &Fixture, path: &str) -> String {
    let (code, object) = fixture.send("GET", path, JSON, None).await;
    assert_eq!(code, 200, "{object}");
    object["metadata"]["resourceVersion"].as_str().unwrap().to_string()
}

async fn cases(fixture: &Fixture) -> Vec<Case> {
    let with_rv = |mut object: Value, rv: String| {
        object["metadata"]["resourceVersion"] = json!(rv);
        object
    };
    let crontab_rv = resource_version(fixture, &format!("{CRONTABS}/a")).await;
    let configmap_rv = resource_version(fixture, &format!("{CONFIGMAPS}/a")).await;
    let deployment_rv = resource_version(fixture, &format!("{DEPLOYMENTS}/a")).await;
    let mut changed_crontab = with_rv(crontab("a"), crontab_rv.clone());
    changed_crontab["spec"]["cronSpec"] = json!("0 * * * *");
    let dry_delete_body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]});
    let mut generated = crontab("");
    generated["metadata"] = json!({"generateName": "gen-"});
    vec![
        // A custom resource.
        case("POST", CRONTABS, JSON, Some(crontab("new")), 201).answering(created),
        case("POST", CRONTABS, JSON, Some(generated), 201).answering(created),
        case("PUT", &format!("{CRONTABS}/a"), JSON, Some(changed_crontab), 200).answering(at_stored_version),
        case("PATCH", &format!("{CRONTABS}/a"), MERGE, Some(json!({"spec": {"replicas": 5}})), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{CRONTABS}/a"), JSON_PATCH, Some(json!([{"op": "replace", "path": "/spec/replicas", "value": 6}])), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{CRONTABS}/a?fieldManager=tester"), APPLY, Some(json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "a", "labels": {"applied": "yes"}}})), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{CRONTABS}/applied?fieldManager=tester"), APPLY, Some(crontab("applied")), 201)
            .answering(created),
        case("PATCH", &format!("{CRONTABS}/a/status"), MERGE, Some(json!({"status": {"replicas": 3}})), 200)
            .answering(at_stored_version),
        case("PUT", &format!("{CRONTABS}/a/scale"), JSON, Some(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "a", "namespace": "default"}, "spec": {"replicas": 9}})), 200),
        case("PATCH", &format!("{CRONTABS}/a/scale"), MERGE, Some(json!({"spec": {"replicas": 8}})), 200),
        case("DELETE", &format!("{CRONTABS}/a"), JSON, None, 200).answering(deleted),
        case("DELETE", &format!("{CRONTABS}/held"), JSON, None, 200).answering(marked),
        case("DELETE", CRONTABS, JSON, None, 200).answering(listed),
        // Built-in kinds.
        case("POST", CONFIGMAPS, JSON, Some(configmap("new")), 201).answering(created),
        case("PUT", &format!("{CONFIGMAPS}/a"), JSON, Some(with_rv(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"b": "2"}}), configmap_rv)), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{CONFIGMAPS}/a"), STRATEGIC, Some(json!({"data": {"c": "3"}})), 200).answering(at_stored_version),
        case("PATCH", &format!("{CONFIGMAPS}/a"), MERGE, Some(json!({"data": {"c": "3"}})), 200).answering(at_stored_version),
        case("PATCH", &format!("{CONFIGMAPS}/a"), JSON_PATCH, Some(json!([{"op": "add", "path": "/data/c", "value": "3"}])), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{CONFIGMAPS}/a?fieldManager=tester"), APPLY, Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"d": "4"}})), 200)
            .answering(at_stored_version),
        case("DELETE", &format!("{CONFIGMAPS}/a"), JSON, None, 200).answering(deleted),
        case("DELETE", &format!("{CONFIGMAPS}/held"), JSON, None, 200).answering(marked),
        case("DELETE", CONFIGMAPS, JSON, None, 200).answering(listed),
        case("POST", DEPLOYMENTS, JSON, Some(deployment("new")), 201).answering(created),
        case("PUT", &format!("{DEPLOYMENTS}/a"), JSON, Some(with_rv(deployment("a"), deployment_rv)), 200),
        case("PATCH", &format!("{DEPLOYMENTS}/a/status"), MERGE, Some(json!({"status": {"replicas": 2}})), 200)
            .answering(at_stored_version),
        case("PATCH", &format!("{DEPLOYMENTS}/a/scale"), MERGE, Some(json!({"spec": {"replicas": 4}})), 200),
        case("DELETE", &format!("{DEPLOYMENTS}/a"), JSON, None, 200).answering(deleted),
        case("POST", SERVICES, JSON, Some(service("new")), 201).answering(|service| {
            created(service);
            assert!(service["spec"]["clusterIP"].is_string(), "{service}");
            assert!(service["spec"]["ports"][0]["nodePort"].is_number(), "{service}");
        }),
        case("DELETE", &format!("{SERVICES}/a"), JSON, None, 200).answering(deleted),
        case("POST", NAMESPACES, JSON, Some(json!({"metadata": {"name": "fresh"}})), 201).answering(created),
        case("DELETE", &format!("{NAMESPACES}/doomed"), JSON, None, 200).answering(marked),
        case("DELETE", "/api/v1/namespaces/doomed/configmaps", JSON, None, 200).answering(listed),
        case("DELETE", &format!("{CRD}/crontabs.example.com"), JSON, None, 200).answering(marked),
        // kubectl's `delete --dry-run=server`: the option in a DeleteOptions body.
        case("DELETE", &format!("{CONFIGMAPS}/a"), JSON, Some(dry_delete_body.clone()), 200).answering(deleted),
        case("DELETE", &format!("{CRONTABS}/a"), JSON, Some(dry_delete_body.clone()), 200).answering(deleted),
        case("DELETE", CONFIGMAPS, JSON, Some(dry_delete_body), 200).answering(listed),
    ]
}

async fn dry_runs_write_nothing(backend: Backend) {
    let fixture = fixture(backend).await;
    let cases = cases(&fixture).await;
    let before = fixture.snapshot().await;
    let revision = fixture.store().revision().await.unwrap();
    let mut watch = fixture.store().watch("/", revision).await.unwrap();
    for case in cases {
        let path = match &case.body {
            Some(body) if body["kind"] == "DeleteOptions" => case.path.clone(),
            _ if case.path.contains('?') => format!("{}&dryRun=All", case.path),
            _ => format!("{}?dryRun=All", case.path),
        };
        let (code, answer) = fixture.send(case.method, &path, case.content_type, case.body.as_ref()).await;
        assert_eq!(code, case.code, "{} {path}: {answer}", case.method);
        (case.answer)(&answer);
        assert_eq!(fixture.store().revision().await.unwrap(), revision, "{} {path} spent a revision", case.method);
        assert!(fixture.snapshot().await == before, "{} {path} changed the store", case.method);
    }
    // The first event the watch delivers is a real write made after every dry run.
    fixture.create(CONFIGMAPS, configmap("sentinel")).await;
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(event.key, "/registry/configmaps/default/sentinel", "{event:?}");
    // Nothing a dry run deleted is gone later either: lifecycles did not start.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for path in [
        format!("{NAMESPACES}/doomed"),
        "/api/v1/namespaces/doomed/configmaps/inside".into(),
        format!("{CRD}/crontabs.example.com"),
        format!("{CRONTABS}/a"),
    ] {
        let (code, object) = fixture.send("GET", &path, JSON, None).await;
        assert_eq!(code, 200, "{path}: {object}");
        assert!(object["metadata"].get("deletionTimestamp").is_none(), "{path}: {object}");
    }
}

/// `dryRun` takes `All` only; anything else is refused as upstream's options validation refuses
/// it, before the request does anything.
async fn unknown_directives_are_refused(backend: Backend) {
    let (server, keep) = backend.start().await;
    let fixture = Fixture { http: Http::to(&server), server, _keep: keep };
    fixture.create(CONFIGMAPS, configmap("a")).await;
    let configmaps = || async {
        let options = ListOptions { prefix: "/registry/configmaps/", ..Default::default() };
        fixture.store().list(options).await.unwrap().entries
    };
    let before = configmaps().await;
    let requests = [
        ("POST", format!("{CONFIGMAPS}?dryRun=Some"), Some(configmap("new")), "CreateOptions", "Some"),
        ("PUT", format!("{CONFIGMAPS}/a?dryRun=all"), Some(configmap("a")), "UpdateOptions", "all"),
        ("PATCH", format!("{CONFIGMAPS}/a?dryRun=true"), Some(json!({"data": {}})), "PatchOptions", "true"),
        ("DELETE", format!("{CONFIGMAPS}/a?dryRun=Nope"), None, "DeleteOptions", "Nope"),
        (
            "DELETE",
            format!("{CONFIGMAPS}/a"),
            Some(json!({"kind": "DeleteOptions", "dryRun": ["Nope"]})),
            "DeleteOptions",
            "Nope",
        ),
        ("DELETE", format!("{CONFIGMAPS}?dryRun="), None, "DeleteOptions", ""),
    ];
    for (method, path, body, options, directive) in requests {
        let content_type = if method == "PATCH" { MERGE } else { JSON };
        let (code, status) = fixture.send(method, &path, content_type, body.as_ref()).await;
        assert_eq!(code, 422, "{method} {path}: {status}");
        assert_eq!(
            status["message"],
            format!(
                "{options}.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{{\"{directive}\"}}: supported values: \"All\""
            ),
            "{method} {path}"
        );
        assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    }
    // A DeleteOptions whose dryRun is not a list cannot be read: nothing is deleted.
    let body = json!({"kind": "DeleteOptions", "dryRun": "All"});
    let (code, status) = fixture.send("DELETE", &format!("{CONFIGMAPS}/a"), JSON, Some(&body)).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"
    );
    assert!(configmaps().await == before, "a refused request changed a ConfigMap");
}

on_each_backend!(dry_runs_write_nothing, unknown_directives_are_refused);

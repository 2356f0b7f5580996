//! `testing::TestServer` as an operator author uses it: the builder (CRD files, a k8s-openapi
//! CRD, a conversion webhook Service), the in-process kube-rs client, kube-runtime's streaming
//! watcher, the stored version and the request log.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;

use std::time::Duration;

use crdctl_server::testing::TestServer;
use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn crontabs(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "CronTab");
    Api::default_namespaced_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "crontabs"))
}

fn object(version: &str, name: &str, fields: serde_json::Value) -> DynamicObject {
    let mut object =
        json!({"apiVersion": format!("example.com/{version}"), "kind": "CronTab", "metadata": {"name": name}});
    object.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
    serde_json::from_value(object).unwrap()
}

/// A server with the seed's webhook CronTab CRD file (v1beta1 `hostPort`, v1 `host` and `port`),
/// converted by the example webhook on the framework with a certificate for its Service name.
async fn served_through_the_example_webhook() -> (TestServer, crdctl_conversion::framework::Server, tempfile::TempDir) {
    served_through_a_webhook(convert::convert_crontab).await
}

/// The same, converted by `convert`.
async fn served_through_a_webhook(
    convert: impl crdctl_conversion::framework::Convert,
) -> (TestServer, crdctl_conversion::framework::Server, tempfile::TempDir) {
    let names = vec!["example-conversion-webhook-server.default.svc".to_string()];
    let bundle = crdctl_conversion::certs::generate(&names).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &bundle.key_pem).unwrap();
    let options = crdctl_conversion::framework::Options::new(
        "127.0.0.1:0".parse().unwrap(),
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
    );
    let webhook = crdctl_conversion::framework::start(options, convert).await.unwrap();
    let crd = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/crontab/4-webhook.yaml"))
        .unwrap()
        .replace("caBundle: \"Cg==\"", &format!("caBundle: \"{}\"", bundle.ca_bundle()));
    std::fs::write(dir.path().join("crd.yaml"), crd).unwrap();
    let server = TestServer::builder()
        .crd_files([dir.path().join("crd.yaml")])
        .conversion_webhook("default/example-conversion-webhook-server", webhook.address)
        .start()
        .await
        .unwrap();
    (server, webhook, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_file_converted_through_a_webhook_service() {
    let (server, _webhook, _dir) = served_through_the_example_webhook().await;
    let client = server.client();
    crontabs(&client, "v1beta1")
        .create(&PostParams::default(), &object("v1beta1", "c", json!({"hostPort": "localhost:8080"})))
        .await
        .unwrap();
    let v1 = crontabs(&client, "v1").get("c").await.unwrap();
    assert_eq!((&v1.data["host"], &v1.data["port"]), (&json!("localhost"), &json!("8080")));
    let stored = server.stored_api_version("example.com", "crontabs", Some("default"), "c").await.unwrap();
    assert_eq!(stored.as_deref(), Some("example.com/v1"));
    assert_eq!(server.stored_api_version("example.com", "crontabs", Some("default"), "nope").await.unwrap(), None);

    let requests = server.requests();
    let crontab_versions: Vec<&str> =
        requests.iter().filter(|r| r.resource.as_deref() == Some("crontabs")).map(|r| r.version.as_str()).collect();
    assert_eq!(crontab_versions, ["v1beta1", "v1"]);
    assert_eq!((requests[0].method.as_str(), requests[0].name.as_deref()), ("POST", None));
}

/// What a webhook adds beyond the version's schema is pruned, as upstream prunes converted
/// objects: in a list, which stays the webhook's text on its way out, and in a single read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_webhook_adds_beyond_the_schema_are_pruned_from_lists_and_reads() {
    let (server, _webhook, _dir) = served_through_a_webhook(|object, desired: &str| {
        let mut object = convert::convert_crontab(object, desired)?;
        object["junk"] = json!({"added": "by the webhook"});
        Ok(object)
    })
    .await;
    let client = server.client();
    for (name, host_port) in [("a", "a.example.com:1"), ("b", "b.example.com:2")] {
        crontabs(&client, "v1beta1")
            .create(&PostParams::default(), &object("v1beta1", name, json!({"hostPort": host_port})))
            .await
            .unwrap();
    }
    let listed = crontabs(&client, "v1beta1").list(&Default::default()).await.unwrap();
    let read: Vec<(String, serde_json::Value)> =
        listed.items.iter().map(|item| (item.metadata.name.clone().unwrap(), item.data.clone())).collect();
    assert_eq!(
        read,
        [("a".into(), json!({"hostPort": "a.example.com:1"})), ("b".into(), json!({"hostPort": "b.example.com:2"}))]
    );
    assert!(listed.items.iter().all(|item| item.metadata.uid.is_some() && item.metadata.resource_version.is_some()));
    let one = crontabs(&client, "v1beta1").get("b").await.unwrap();
    assert_eq!(one.data, json!({"hostPort": "b.example.com:2"}));
    // At the storage version no webhook is called: stored as the webhook answered, pruned.
    let stored = crontabs(&client, "v1").get("b").await.unwrap();
    assert_eq!(stored.data, json!({"host": "b.example.com", "port": "2"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_streaming_watcher_over_the_in_process_client() {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    let server = TestServer::builder().crd(crd).start().await.unwrap();
    let client = server.client();
    let api = crontabs(&client, "v1");
    api.create(&PostParams::default(), &object("v1", "before", json!({"n": 1}))).await.unwrap();

    // A streaming list: initial events, the initial-events-end bookmark, then live events.
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.iter().any(|s: &String| s == "apply after") {
        let event = tokio::time::timeout_at(deadline, events.next()).await.unwrap().unwrap().unwrap();
        match event {
            watcher::Event::InitApply(o) => seen.push(format!("init {}", o.metadata.name.unwrap())),
            watcher::Event::InitDone => {
                seen.push("init done".into());
                api.create(&PostParams::default(), &object("v1", "after", json!({"n": 2}))).await.unwrap();
            }
            watcher::Event::Apply(o) => seen.push(format!("apply {}", o.metadata.name.unwrap())),
            _ => {}
        }
    }
    assert_eq!(seen, ["init before", "init done", "apply after"]);
    let watches = server.requests().into_iter().filter(|r| r.watch).count();
    assert_eq!(watches, 1, "a streaming list is one watch request, no list");
    assert!(
        server.requests().iter().all(|r| !(r.method == "GET" && r.resource.is_some() && !r.watch && r.name.is_none()))
    );
}

/// The managers of `name`, each with the top-level fields it owns, e.g. `alice@v1beta1: hostPort`.
async fn owners(api: &Api<DynamicObject>, name: &str) -> Vec<String> {
    let object = api.get(name).await.unwrap();
    let mut owners: Vec<String> = object
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|entry| {
            let fields = entry.fields_v1.map(|f| f.0).unwrap_or_default();
            let mut owned: Vec<&str> =
                fields.as_object().into_iter().flatten().filter_map(|(k, _)| k.strip_prefix("f:")).collect();
            owned.sort();
            let version = entry.api_version.unwrap_or_default().replace("example.com/", "");
            format!("{}@{version}: {}", entry.manager.unwrap_or_default(), owned.join(","))
        })
        .collect();
    owners.sort();
    owners
}

/// Upstream compares a write in each manager's own version (structured-merge-diff's
/// `Updater.update` converts to it): through a webhook, `host` at v1 is part of `hostPort` at
/// v1beta1, so changing it conflicts with the v1beta1 applier and takes the field from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managers_are_judged_in_their_own_version() {
    let (server, _webhook, _dir) = served_through_the_example_webhook().await;
    let client = server.client();
    let (v1beta1, v1) = (crontabs(&client, "v1beta1"), crontabs(&client, "v1"));
    let apply = |manager: &str| PatchParams::apply(manager);
    let config = |version: &str, fields| Patch::Apply(object(version, "c", fields));
    v1beta1.patch("c", &apply("alice"), &config("v1beta1", json!({"hostPort": "a:1"}))).await.unwrap();

    let refused = v1.patch("c", &apply("bob"), &config("v1", json!({"host": "b"}))).await.unwrap_err();
    let kube::Error::Api(status) = refused else { panic!("a Status: {refused:?}") };
    assert_eq!(status.code, 409);
    assert_eq!(status.message, "Apply failed with 1 conflict: conflict with \"alice\": .hostPort");
    // Applying what alice's field already says changes nothing in her version: no conflict.
    v1.patch("c", &apply("bob"), &config("v1", json!({"host": "a", "port": "1"}))).await.unwrap();
    assert_eq!(owners(&v1, "c").await, ["alice@v1beta1: hostPort", "bob@v1: host,port"]);

    // Forced, the change takes alice's only field: her entry goes.
    v1.patch("c", &apply("bob").force(), &config("v1", json!({"host": "b", "port": "1"}))).await.unwrap();
    assert_eq!(owners(&v1, "c").await, ["bob@v1: host,port"]);
    assert_eq!(v1beta1.get("c").await.unwrap().data["hostPort"], "b:1");

    // An update at v1beta1 changes `host` in bob's version, not `port`: only `host` leaves him.
    let merge = Patch::Merge(json!({"hostPort": "c:1"}));
    let carol = PatchParams { field_manager: Some("carol".into()), ..Default::default() };
    v1beta1.patch("c", &carol, &merge).await.unwrap();
    assert_eq!(owners(&v1, "c").await, ["bob@v1: port", "carol@v1beta1: hostPort"]);
}

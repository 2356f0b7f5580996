//! `testing::TestServer` as an operator author uses it: the builder (CRD files, a k8s-openapi
//! CRD, a conversion webhook Service), the in-process kube-rs client, kube-runtime's streaming
//! watcher, the stored version and the request log.

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;

use std::time::Duration;

use crdctl_server::testing::TestServer;
use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_file_converted_through_a_webhook_service() {
    // The example webhook on the framework, with a certificate for its Service name.
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
    let webhook = crdctl_conversion::framework::start(options, convert::convert_crontab).await.unwrap();
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

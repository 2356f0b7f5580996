//! Kubernetes protobuf, as client-go speaks it, through an independent client: prost types
//! kube-rs generated from upstream's protos (`k8s-pb`). Each object is written in protobuf and
//! read back in protobuf and in JSON, field by field; lists and watches too; bad bodies get a
//! `Status` and store nothing. On every store backend.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

mod backends;

use backends::Backend;
use k8s_pb::api::apps::v1::{Deployment, DeploymentList, DeploymentSpec};
use k8s_pb::api::core::v1::{ConfigMap, ConfigMapList, Container, PodSpec, PodTemplateSpec, Secret};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, WatchEvent};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// `k8s\0` and the `Unknown` that carries a message.
fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

/// The message an envelope carries, after checking its type.
fn open<M: Message + Default>(bytes: &[u8], api_version: &str, kind: &str) -> M {
    let unknown = Unknown::decode(bytes.strip_prefix(b"k8s\0").expect("the magic")).unwrap();
    let type_meta = unknown.type_meta.unwrap();
    assert_eq!((type_meta.api_version.as_deref(), type_meta.kind.as_deref()), (Some(api_version), Some(kind)));
    M::decode(unknown.raw.unwrap().as_slice()).unwrap()
}

struct Client {
    url: String,
    http: reqwest::Client,
}

impl Client {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
        accept: &str,
    ) -> (u16, String, Vec<u8>) {
        let mut request = self.http.request(method, format!("{}{path}", self.url)).header("Accept", accept);
        if let Some(body) = body {
            request = request.header("Content-Type", PROTOBUF).body(body);
        }
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        let content_type =
            response.headers().get("Content-Type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        (code, content_type, response.bytes().await.unwrap().to_vec())
    }

    async fn json(&self, path: &str) -> Value {
        let (code, _, body) = self.send(reqwest::Method::GET, path, None, "application/json").await;
        assert_eq!(code, 200);
        serde_json::from_slice(&body).unwrap()
    }
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

fn config_map() -> ConfigMap {
    ConfigMap {
        metadata: Some(ObjectMeta {
            name: Some("settings".into()),
            labels: [("app".to_string(), "web".to_string())].into(),
            ..Default::default()
        }),
        data: [("mode".to_string(), "fast".to_string())].into(),
        binary_data: [("blob".to_string(), vec![0, 159, 146, 150])].into(),
        immutable: Some(false),
    }
}

fn deployment() -> Deployment {
    let labels: std::collections::BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    Deployment {
        metadata: Some(ObjectMeta { name: Some("web".into()), ..Default::default() }),
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            selector: Some(LabelSelector { match_labels: labels.clone(), ..Default::default() }),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta { labels, ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: Some("web".into()),
                        image: Some("nginx:1.27".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: None,
    }
}

/// A server that leaves the namespace's ConfigMaps to the test: these tests list what they
/// made, and the root CA publisher would add `kube-root-ca.crt` at a time of its own.
async fn start(backend: Backend) -> (crdctl_server::testing::TestServer, backends::Keep) {
    let controllers = crdctl_server::controller::Controllers { root_ca_publisher: false, ..Default::default() };
    backend.start_with(crdctl_server::Config { controllers, ..Default::default() }).await
}

async fn objects_lists_and_watches_in_protobuf(backend: Backend) {
    let (server, _keep) = start(backend).await;
    let client = Client { url: server.url(), http: reqwest::Client::new() };
    // A watch from now, in protobuf frames.
    let list = client.json(CONFIG_MAPS).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut watch = client
        .http
        .get(format!("{}{CONFIG_MAPS}?watch=true&resourceVersion={rv}", client.url))
        .header("Accept", ACCEPT_PROTOBUF)
        .send()
        .await
        .unwrap();
    assert_eq!(watch.headers()["Content-Type"], "application/vnd.kubernetes.protobuf;stream=watch");

    // Create in protobuf; the answer is protobuf, and the JSON view has the same fields.
    let body = envelope("v1", "ConfigMap", &config_map());
    let (code, content_type, answer) =
        client.send(reqwest::Method::POST, CONFIG_MAPS, Some(body), ACCEPT_PROTOBUF).await;
    assert_eq!((code, content_type.as_str()), (201, PROTOBUF), "{}", String::from_utf8_lossy(&answer));
    let created: ConfigMap = open(&answer, "v1", "ConfigMap");
    let meta = created.metadata.clone().unwrap();
    assert!(meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(
        (created.data.clone(), created.binary_data.clone(), created.immutable),
        (config_map().data, config_map().binary_data, Some(false))
    );
    let json = client.json(&format!("{CONFIG_MAPS}/settings")).await;
    assert_eq!(json["data"], json!({"mode": "fast"}));
    assert_eq!(json["binaryData"], json!({"blob": "AJ+Slg=="}));
    assert_eq!((json["immutable"].clone(), json["metadata"]["labels"].clone()), (json!(false), json!({"app": "web"})));
    assert_eq!(json["metadata"]["uid"].as_str(), meta.uid.as_deref());
    assert_eq!(json["metadata"]["resourceVersion"].as_str(), meta.resource_version.as_deref());
    let (_, _, got) =
        client.send(reqwest::Method::GET, &format!("{CONFIG_MAPS}/settings"), None, ACCEPT_PROTOBUF).await;
    assert_eq!(open::<ConfigMap>(&got, "v1", "ConfigMap"), created);

    // A Deployment: a pointer field set to zero stays, value fields at zero go, as in Go's JSON.
    let body = envelope("apps/v1", "Deployment", &deployment());
    let (code, _, answer) = client.send(reqwest::Method::POST, DEPLOYMENTS, Some(body), ACCEPT_PROTOBUF).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let created: Deployment = open(&answer, "apps/v1", "Deployment");
    let spec = created.spec.clone().unwrap();
    assert_eq!(
        (spec.replicas, spec.revision_history_limit, spec.progress_deadline_seconds),
        (Some(0), Some(10), Some(600))
    );
    let json = client.json(&format!("{DEPLOYMENTS}/web")).await;
    assert_eq!(json["spec"]["replicas"], 0);
    assert!(json["spec"].get("minReadySeconds").is_none() && json["spec"].get("paused").is_none(), "{json}");
    let container = &json["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        (container["image"].as_str(), container["imagePullPolicy"].as_str()),
        (Some("nginx:1.27"), Some("IfNotPresent"))
    );
    assert!(container.get("stdin").is_none(), "{container}");
    assert_eq!(
        json["metadata"]["creationTimestamp"].as_str(),
        created.metadata.unwrap().creation_timestamp.map(|_| json["metadata"]["creationTimestamp"].as_str().unwrap())
    );

    // Lists.
    let (_, _, listed) = client.send(reqwest::Method::GET, CONFIG_MAPS, None, ACCEPT_PROTOBUF).await;
    let listed: ConfigMapList = open(&listed, "v1", "ConfigMapList");
    assert_eq!(
        listed.items.iter().map(|c| c.metadata.clone().unwrap().name.unwrap()).collect::<Vec<_>>(),
        ["settings"]
    );
    assert!(listed.metadata.unwrap().resource_version.is_some());
    let (_, _, listed) = client.send(reqwest::Method::GET, DEPLOYMENTS, None, ACCEPT_PROTOBUF).await;
    assert_eq!(open::<DeploymentList>(&listed, "apps/v1", "DeploymentList").items.len(), 1);

    // The watch saw the create: a length-prefixed WatchEvent whose object is an envelope.
    let mut buffer = Vec::new();
    while buffer.len() < 4 || buffer.len() < 4 + u32::from_be_bytes(buffer[..4].try_into().unwrap()) as usize {
        let chunk =
            tokio::time::timeout(std::time::Duration::from_secs(5), watch.chunk()).await.unwrap().unwrap().unwrap();
        buffer.extend_from_slice(&chunk);
    }
    let length = u32::from_be_bytes(buffer[..4].try_into().unwrap()) as usize;
    let event = WatchEvent::decode(&buffer[4..4 + length]).unwrap();
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    let watched: ConfigMap = open(&event.object.unwrap().raw.unwrap(), "v1", "ConfigMap");
    assert_eq!(watched, created_config_map(&client).await);
}

async fn created_config_map(client: &Client) -> ConfigMap {
    let (_, _, got) =
        client.send(reqwest::Method::GET, &format!("{CONFIG_MAPS}/settings"), None, ACCEPT_PROTOBUF).await;
    open(&got, "v1", "ConfigMap")
}

async fn bad_protobuf_is_refused_and_nothing_is_stored(backend: Backend) {
    let (server, _keep) = start(backend).await;
    let client = Client { url: server.url(), http: reqwest::Client::new() };
    let whole = envelope("v1", "ConfigMap", &config_map());
    let status = |body: &[u8]| -> Value { serde_json::from_slice(body).unwrap() };
    for (body, code, message) in [
        (whole[..whole.len() - 5].to_vec(), 400, "unexpected EOF"),
        (
            [b"k9s\0".as_slice(), &whole[4..]].concat(),
            400,
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
        ),
        (
            envelope("v1", "Secret", &Secret { metadata: config_map().metadata, ..Default::default() }),
            400,
            "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion",
        ),
        (envelope("v1", "Secret", &config_map()), 400, "field \"type\": a string is not valid UTF-8"),
        (
            envelope("v1", "Secret", &ConfigMap { binary_data: Default::default(), ..config_map() }),
            400,
            "wire type Varint does not fit the message field \"stringData\"",
        ),
        (envelope("v1", "NoSuchKind", &config_map()), 400, "no kind \"NoSuchKind\" is registered for version \"v1\""),
    ] {
        let (answered, _, answer) = client.send(reqwest::Method::POST, CONFIG_MAPS, Some(body), ACCEPT_PROTOBUF).await;
        let status = status(&answer);
        assert_eq!(answered, code, "{status}");
        assert!(status["message"].as_str().unwrap().contains(message), "{message}: {status}");
    }
    assert_eq!(client.json(CONFIG_MAPS).await["items"], json!([]));
    // Unknown field numbers are skipped, as upstream's decoders skip them.
    let mut extra = config_map().encode_to_vec();
    extra.extend([0xf8, 0x06, 0x01]); // field 111, varint 1
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some("v1".into()), kind: Some("ConfigMap".into()) }),
        raw: Some(extra),
        ..Default::default()
    };
    let body = [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat();
    assert_eq!(client.send(reqwest::Method::POST, CONFIG_MAPS, Some(body), ACCEPT_PROTOBUF).await.0, 201);

    // Custom resources speak JSON only, as upstream: a protobuf body is 415, and a client that
    // prefers protobuf gets JSON.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "blobs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "blobs", "kind": "Blob"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let created = client
        .http
        .post(format!("{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", client.url))
        .json(&crd)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let blobs = "/apis/example.com/v1/namespaces/default/blobs";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while client.send(reqwest::Method::GET, blobs, None, "application/json").await.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "the CRD is served");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (code, _, answer) = client
        .send(reqwest::Method::POST, blobs, Some(envelope("example.com/v1", "Blob", &config_map())), ACCEPT_PROTOBUF)
        .await;
    assert_eq!(code, 415);
    assert_eq!(
        status(&answer)["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    let (code, content_type, _) = client.send(reqwest::Method::GET, blobs, None, ACCEPT_PROTOBUF).await;
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
}

/// client-go (Helm's purge among its users) sends `DeleteOptions` in protobuf: a dry run in
/// them deletes nothing, and without one the object goes.
async fn delete_options_in_protobuf(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let client = Client { url: server.url(), http: reqwest::Client::new() };
    let created = client
        .send(reqwest::Method::POST, CONFIG_MAPS, Some(envelope("v1", "ConfigMap", &config_map())), ACCEPT_PROTOBUF)
        .await;
    assert_eq!(created.0, 201);
    let path = format!("{CONFIG_MAPS}/settings");
    let options = |dry_run: Vec<String>| {
        let options = k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions { dry_run, ..Default::default() };
        envelope("meta.k8s.io/v1", "DeleteOptions", &options)
    };
    let (code, _, _) =
        client.send(reqwest::Method::DELETE, &path, Some(options(vec!["All".into()])), ACCEPT_PROTOBUF).await;
    assert_eq!(code, 200);
    assert_eq!(client.json(&path).await["metadata"]["name"], "settings", "a dry run deleted");
    let (code, _, _) = client.send(reqwest::Method::DELETE, &path, Some(options(Vec::new())), ACCEPT_PROTOBUF).await;
    assert_eq!(code, 200);
    let (code, _, _) = client.send(reqwest::Method::GET, &path, None, "application/json").await;
    assert_eq!(code, 404);
}

on_each_backend!(
    objects_lists_and_watches_in_protobuf,
    bad_protobuf_is_refused_and_nothing_is_stored,
    delete_options_in_protobuf
);

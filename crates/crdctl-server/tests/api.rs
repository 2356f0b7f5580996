//! The API over HTTP, as clients see it: discovery, CRD lifecycle, custom-resource verbs,
//! concurrency, subresources, watches, paging, and bad input — each answered with the upstream
//! code and `Status`, with nothing stored. One suite, run on every store backend.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

mod backends;

use backends::{Backend, Keep};
use crdctl_server::testing::TestServer;
use crdctl_server::{Config, UpgradeSafety};
use serde_json::{Value, json};

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "crontabs.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
    "versions": [
      {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
       "schema": {"openAPIV3Schema": {"type": "object", "properties": {
         "spec": {"type": "object", "properties": {"cronSpec": {"type": "string"}, "replicas": {"type": "integer", "default": 1}}},
         "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}},
       "subresources": {"status": {}}},
      {"name": "v1", "served": true, "storage": true,
       "schema": {"openAPIV3Schema": {"type": "object", "properties": {
         "spec": {"type": "object", "required": ["cronSpec"], "properties": {
           "cronSpec": {"type": "string"}, "replicas": {"type": "integer", "default": 1},
           "mode": {"type": "string", "enum": ["a", "b"]}}},
         "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}},
       "subresources": {"status": {}},
       "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}]}
    ]}
}"#;

struct Api {
    server: TestServer,
    http: reqwest::Client,
    _keep: Keep,
}

impl Api {
    async fn on(backend: Backend) -> Api {
        let (server, keep) = backend.start().await;
        Api { server, http: reqwest::Client::new(), _keep: keep }
    }
}

/// A response: code, `Warning` headers, body.
#[derive(Debug)]
struct Answer {
    code: u16,
    warnings: Vec<String>,
    content_type: String,
    body: Value,
}

impl Api {
    async fn send(&self, method: &str, path: &str, content_type: &str, body: Option<Vec<u8>>) -> Answer {
        let url = format!("{}{path}", self.server.url());
        let mut request = self.http.request(method.parse().unwrap(), url).header("Content-Type", content_type);
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        let warnings = response.headers().get_all("Warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
        let content_type =
            response.headers().get("Content-Type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let bytes = response.bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { code, warnings, content_type, body }
    }

    async fn get(&self, path: &str) -> Answer {
        self.send("GET", path, "application/json", None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send("POST", path, "application/json", Some(body.to_string().into_bytes())).await
    }

    async fn put(&self, path: &str, body: &Value) -> Answer {
        self.send("PUT", path, "application/json", Some(body.to_string().into_bytes())).await
    }

    async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Answer {
        self.send("PATCH", path, content_type, Some(body.to_string().into_bytes())).await
    }

    async fn delete(&self, path: &str) -> Answer {
        self.send("DELETE", path, "application/json", None).await
    }

    /// With a CRD whose objects (`Blob`) keep any fields, at [`BLOBS`].
    async fn with_blobs(self) -> Api {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "blobs.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "blobs", "kind": "Blob"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        assert_eq!(self.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await.code, 201);
        self
    }

    async fn with_crd(self) -> Api {
        let created = self
            .post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &serde_json::from_str(CRD).unwrap())
            .await;
        assert_eq!(created.code, 201, "{created:?}");
        self
    }
}

/// Objects of any shape (`Blob`, schema preserving unknown fields).
const BLOBS: &str = "/apis/example.com/v1/namespaces/default/blobs";

const CRONTABS_V1: &str = "/apis/example.com/v1/namespaces/default/crontabs";
const CRONTABS_V1BETA1: &str = "/apis/example.com/v1beta1/namespaces/default/crontabs";

/// The names of a list's items, in order; the list must have been answered.
fn item_names(answer: &Answer) -> Vec<String> {
    assert_eq!(answer.code, 200, "{answer:?}");
    answer.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn crontab(name: &str, version: &str) -> Value {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "CronTab", "metadata": {"name": name}, "spec": {"cronSpec": "* * * * */5"}})
}

async fn crd_lifecycle(backend: Backend) {
    let api = Api::on(backend).await;
    let crd = api.with_crd().await;
    let got = crd.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com").await;
    let conditions = got.body["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
    assert!(conditions.iter().any(|c| c["type"] == "NamesAccepted" && c["reason"] == "NoConflicts"));
    assert_eq!(got.body["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(got.body["status"]["acceptedNames"]["listKind"], "CronTabList");
    assert_eq!(got.body["metadata"]["generation"], 1);

    // status on the main resource is ignored; a spec change bumps generation.
    let mut changed = got.body.clone();
    changed["status"]["storedVersions"] = json!(["bogus"]);
    changed["spec"]["names"]["shortNames"] = json!(["ct", "cts"]);
    let updated =
        crd.put("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com", &changed).await;
    assert_eq!(updated.code, 200, "{updated:?}");
    assert_eq!(updated.body["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(updated.body["metadata"]["generation"], 2);

    // Invalid CRDs get 422 with upstream causes.
    let mut invalid: Value = serde_json::from_str(CRD).unwrap();
    invalid["metadata"]["name"] = json!("wrong.example.com");
    let refused = crd.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &invalid).await;
    assert_eq!(refused.code, 422);
    assert_eq!(refused.body["reason"], "Invalid");
    assert_eq!(refused.body["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(
        refused.body["message"],
        r#"CustomResourceDefinition.apiextensions.k8s.io "wrong.example.com" is invalid: metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group"#
    );
    let again =
        crd.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &serde_json::from_str(CRD).unwrap()).await;
    assert_eq!((again.code, again.body["reason"].as_str()), (409, Some("AlreadyExists")));

    // Deleting the CRD deletes its objects, then the CRD.
    assert_eq!(crd.post(CRONTABS_V1, &crontab("a", "v1")).await.code, 201);
    let deleting = crd.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com").await;
    assert_eq!(deleting.code, 200);
    assert!(deleting.body["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Terminating"));
    for _ in 0..100 {
        if crd.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com").await.code == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(crd.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com").await.code, 404);
    let left = crd
        .server
        .server()
        .state()
        .store
        .list(crdctl_storage::ListOptions { prefix: "/registry/example.com/", ..Default::default() })
        .await;
    assert!(left.unwrap().entries.is_empty(), "the objects went with the CRD");
}

/// CRDs whose schemas upstream refuses: not structural, a rule that does not compile, a rule
/// over budget (until its list is bounded).
async fn crd_schema_refusals(backend: Backend) {
    let api = Api::on(backend).await;
    let crd = api.with_crd().await;
    // A schema that is not structural, or a rule that does not compile, is refused as upstream;
    // rules are compiled only in a structural schema.
    let mut unstructural: Value = serde_json::from_str(CRD).unwrap();
    unstructural["metadata"]["name"] = json!("others.example.com");
    unstructural["spec"]["names"] = json!({"plural": "others", "kind": "Other"});
    let rule = |rule: &str| json!({"type": "string", "x-kubernetes-validations": [{"rule": rule}]});
    let schema = |spec: Value| json!({"type": "object", "properties": {"spec": spec}});
    let refusals = [
        (
            schema(json!({"properties": {"a": rule("self.size( > 1")}})),
            "properties[spec].type",
            "Required value: must not be empty for specified object fields",
        ),
        (
            schema(json!({"type": "object", "properties": {"a": rule("self.size( > 1")}})),
            "properties[spec].properties[a].x-kubernetes-validations[0].rule",
            "compilation failed: ERROR: <input>:1:12: Syntax error:",
        ),
        (
            schema(
                json!({"type": "object", "properties": {"a": rule("self.size() > 1")}, "x-kubernetes-validations": [{"rule": "self.b == 'x'"}]}),
            ),
            "properties[spec].x-kubernetes-validations[0].rule",
            "compilation failed: ERROR: <input>:1:5: undefined field 'b'\n | self.b == 'x'\n | ....^",
        ),
    ];
    for (openapi, field, detail) in refusals {
        unstructural["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = openapi;
        let refused = crd.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &unstructural).await;
        assert_eq!(refused.code, 422, "{refused:?}");
        let causes = refused.body["details"]["causes"].as_array().unwrap();
        let fields: Vec<&str> = causes.iter().map(|c| c["field"].as_str().unwrap()).collect();
        assert_eq!(fields, [format!("spec.versions[0].schema.openAPIV3Schema.{field}")]);
        assert!(causes[0]["message"].as_str().unwrap().contains(detail), "{causes:?}");
    }
    // A rule that could cost more than the budget on an unbounded list is refused; bounding
    // the list admits it.
    let mut costly = unstructural.clone();
    let list = json!({"type": "array", "items": {"type": "string", "maxLength": 64},
        "x-kubernetes-validations": [{"rule": "self.all(a, self.exists_one(b, a == b))"}]});
    costly["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"names": list}}}});
    let refused = crd.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &costly).await;
    assert_eq!(refused.code, 422, "{refused:?}");
    let causes: Vec<(&str, &str)> = refused.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["field"].as_str().unwrap(), c["message"].as_str().unwrap().split(" (try").next().unwrap()))
        .collect();
    let rule =
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0].rule";
    assert_eq!(
        causes,
        [
            (rule, "Forbidden: estimated rule cost exceeds budget by factor of more than 100x"),
            (
                rule,
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            (
                "spec.versions[0].schema.openAPIV3Schema",
                "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"
            ),
        ]
    );
    costly["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["names"]["maxItems"] =
        json!(100);
    let admitted = crd.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &costly).await;
    assert_eq!(admitted.code, 201, "{admitted:?}");
}

async fn discovery(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    let group = api.get("/apis/example.com").await;
    assert_eq!(group.body["preferredVersion"]["version"], "v1");
    assert_eq!(group.body["versions"].as_array().unwrap().len(), 2);
    let resources = api.get("/apis/example.com/v1").await;
    let names: Vec<&str> =
        resources.body["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["crontabs", "crontabs/status"]);
    assert_eq!(resources.body["resources"][0]["shortNames"], json!(["ct"]));
    assert_eq!(resources.body["resources"][0]["storageVersionHash"].as_str().unwrap().len(), 12);
    // Events, in both of their APIs, for controllers' event recorders.
    for (path, kind_group) in [("/api/v1", None), ("/apis/events.k8s.io/v1", Some("events.k8s.io"))] {
        let listed = api.get(path).await.body;
        let events = listed["resources"].as_array().unwrap().iter().find(|r| r["name"] == "events");
        assert_eq!(events.unwrap()["namespaced"], true, "{path}: {listed}");
        assert!(kind_group.is_none() || api.get("/apis").await.body.to_string().contains("events.k8s.io/v1"));
    }

    let aggregated_accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let response =
        api.http.get(format!("{}/apis", api.server.url())).header("Accept", aggregated_accept).send().await.unwrap();
    assert_eq!(
        response.headers()["Content-Type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let etag = response.headers()["ETag"].to_str().unwrap().to_string();
    let document: Value = response.json().await.unwrap();
    let group = document["items"].as_array().unwrap().iter().find(|g| g["metadata"]["name"] == "example.com").unwrap();
    assert_eq!(group["versions"][0]["version"], "v1", "preferred first");
    assert_eq!(group["versions"][0]["resources"][0]["responseKind"]["kind"], "CronTab");
    assert_eq!(group["versions"][0]["resources"][0]["subresources"][0]["subresource"], "status");
    let cached = api
        .http
        .get(format!("{}/apis", api.server.url()))
        .header("Accept", aggregated_accept)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status().as_u16(), 304);
    let legacy = api.get("/apis").await;
    assert_eq!(legacy.body["kind"], "APIGroupList");

    let index = api.get("/openapi/v3").await;
    assert!(index.body["paths"]["apis/example.com/v1"]["serverRelativeURL"].as_str().unwrap().contains("?hash="));
    let document = api.get("/openapi/v3/apis/example.com/v1").await;
    let patch = &document.body["paths"]["/apis/example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "example.com", "kind": "CronTab", "version": "v1"})
    );
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    assert!(api.get("/openapi/v3/api/v1").await.body["paths"]["/api/v1/namespaces/{name}"]["patch"].is_object());
    assert!(api.get("/openapi/v2").await.body["definitions"]["com.example.v1.CronTab"].is_object());
    assert_eq!(api.get("/apis/example.com/v2").await.code, 404);
    let not_acceptable = api
        .http
        .get(format!("{}/apis/example.com/v1/crontabs", api.server.url()))
        .header("Accept", "application/vnd.kubernetes.unknown")
        .send()
        .await
        .unwrap();
    assert_eq!(not_acceptable.status().as_u16(), 406);
}

async fn custom_resources(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    // Create with generateName; defaults applied; uid, timestamps, generation.
    let mut generated = crontab("", "v1");
    generated["metadata"] = json!({"generateName": "job-"});
    let created = api.post(CRONTABS_V1, &generated).await;
    assert_eq!(created.code, 201, "{created:?}");
    let name = created.body["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    assert_eq!(created.body["spec"]["replicas"], 1);
    assert_eq!(created.body["metadata"]["generation"], 1);
    assert_eq!(created.body["metadata"]["namespace"], "default");
    let rv = created.body["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    // The same object at the deprecated version, with its warning.
    let old = api.get(&format!("{CRONTABS_V1BETA1}/{name}")).await;
    assert_eq!(old.body["apiVersion"], "example.com/v1beta1");
    assert_eq!(old.warnings, [r#"299 - "example.com/v1beta1 CronTab is deprecated; use example.com/v1 CronTab""#]);

    // Optimistic concurrency: a stale resourceVersion is 409 Conflict.
    let mut update = created.body.clone();
    update["spec"]["cronSpec"] = json!("1 * * * *");
    let first = api.put(&format!("{CRONTABS_V1}/{name}"), &update).await;
    assert_eq!(first.code, 200);
    assert_eq!(first.body["metadata"]["generation"], 2);
    update["metadata"]["resourceVersion"] = json!(rv);
    let stale = api.put(&format!("{CRONTABS_V1}/{name}"), &update).await;
    assert_eq!(stale.code, 409);
    assert_eq!(
        stale.body["message"],
        format!(
            "Operation cannot be fulfilled on crontabs.example.com \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );

    // status: ignored on the main resource, the only thing /status takes.
    let with_status = api
        .patch(&format!("{CRONTABS_V1}/{name}"), "application/merge-patch+json", &json!({"status": {"ready": true}}))
        .await;
    assert!(with_status.body.get("status").is_none(), "{with_status:?}");
    let status = api
        .patch(
            &format!("{CRONTABS_V1}/{name}/status"),
            "application/merge-patch+json",
            &json!({"status": {"ready": true}, "spec": {"cronSpec": "ignored"}}),
        )
        .await;
    assert_eq!(status.body["status"]["ready"], true);
    assert_eq!(status.body["spec"]["cronSpec"], "1 * * * *");
    assert_eq!(status.body["metadata"]["generation"], 2, "status writes keep generation");

    // JSON patch; strategic merge patch is 415 with the upstream text.
    let json_patch = api
        .patch(
            &format!("{CRONTABS_V1}/{name}"),
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
        )
        .await;
    assert_eq!(json_patch.body["spec"]["replicas"], 3);
    let strategic =
        api.patch(&format!("{CRONTABS_V1}/{name}"), "application/strategic-merge-patch+json", &json!({})).await;
    assert_eq!(strategic.code, 415);
    assert_eq!(
        strategic.body["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );

    // fieldValidation: Strict refuses unknown fields, Warn drops them with a warning.
    let mut unknown = crontab("unknown", "v1");
    unknown["spec"]["x"] = json!(1);
    let strict = api.post(&format!("{CRONTABS_V1}?fieldValidation=Strict"), &unknown).await;
    assert_eq!(strict.code, 400);
    assert_eq!(
        strict.body["message"],
        r#"CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.x""#
    );
    let warned = api.post(&format!("{CRONTABS_V1}?fieldValidation=Warn"), &unknown).await;
    assert_eq!(warned.code, 201);
    assert_eq!(warned.warnings, [r#"299 - "unknown field \"spec.x\"""#]);
    assert!(warned.body["spec"].get("x").is_none());
    // A patch is decoded after patching, and refused as an invalid patch showing the result.
    let patched = api
        .patch(
            &format!("{CRONTABS_V1}/unknown?fieldValidation=Strict"),
            "application/merge-patch+json",
            &json!({"spec": {"x": 2}}),
        )
        .await;
    assert_eq!(patched.code, 422, "{patched:?}");
    let message = patched.body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":\"example.com/v1\","#)
            && message.ends_with(r#"}": strict decoding error: unknown field "spec.x""#),
        "{message}"
    );
    assert_eq!(patched.body["details"]["causes"][0]["field"], "patch");

    assert_eq!(
        api.get("/apis/example.com/v1/crontabs").await.body["items"].as_array().unwrap().len(),
        2,
        "list across namespaces"
    );
    assert_eq!(api.get(&format!("{CRONTABS_V1}/{name}/scale")).await.code, 404);
}

/// What custom resources are refused for, with upstream's messages, and finalizers holding a
/// deleted one.
async fn custom_resource_rules(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    // Schema validation with upstream messages.
    let mut bad = crontab("bad", "v1");
    bad["spec"] = json!({"replicas": "three", "mode": "c"});
    let invalid = api.post(CRONTABS_V1, &bad).await;
    assert_eq!(invalid.code, 422);
    assert_eq!(
        invalid.body["message"],
        r#"CronTab.example.com "bad" is invalid: [spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string", spec.mode: Unsupported value: "c": supported values: "a", "b", spec.cronSpec: Required value]"#
    );

    // Finalizers: delete marks; removing the last finalizer deletes.
    let mut held = crontab("held", "v1");
    held["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    assert_eq!(api.post(CRONTABS_V1, &held).await.code, 201);
    let marked = api.delete(&format!("{CRONTABS_V1}/held")).await;
    assert!(marked.body["metadata"]["deletionTimestamp"].is_string(), "{marked:?}");
    let released = api
        .patch(
            &format!("{CRONTABS_V1}/held"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(released.code, 200, "{released:?}");
    assert_eq!(api.get(&format!("{CRONTABS_V1}/held")).await.code, 404);

    // Namespaces must exist; unserved or unknown versions are 404; wrong apiVersion is 400.
    let missing = api.post("/apis/example.com/v1/namespaces/nope/crontabs", &crontab("a", "v1")).await;
    assert_eq!((missing.code, missing.body["message"].as_str()), (404, Some(r#"namespaces "nope" not found"#)));
    assert_eq!(api.get("/apis/example.com/v2/namespaces/default/crontabs").await.code, 404);
    let mismatch = api.post(CRONTABS_V1, &crontab("a", "v1beta1")).await;
    assert_eq!(mismatch.code, 400);
    assert_eq!(
        mismatch.body["message"],
        "the API version in the data (example.com/v1beta1) does not match the expected API version (example.com/v1)"
    );
}

async fn lists_and_watches(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    for idx in 0..7 {
        let mut object = crontab(&format!("item-{idx}"), "v1");
        object["metadata"]["labels"] = json!({"parity": if idx % 2 == 0 { "even" } else { "odd" }});
        assert_eq!(api.post(CRONTABS_V1, &object).await.code, 201);
    }
    // Pages of 3 at one revision, even while writes happen between them.
    let first = api.get(&format!("{CRONTABS_V1}?limit=3")).await;
    assert_eq!(first.body["items"].as_array().unwrap().len(), 3);
    assert_eq!(first.body["metadata"]["remainingItemCount"], 4);
    let selected = api.get(&format!("{CRONTABS_V1}?limit=1&labelSelector=parity%3Dodd")).await;
    assert!(selected.body["metadata"].get("remainingItemCount").is_none(), "unknown with a selector");
    let token = first.body["metadata"]["continue"].as_str().unwrap().to_string();
    api.delete(&format!("{CRONTABS_V1}/item-5")).await;
    let second = api.get(&format!("{CRONTABS_V1}?limit=10&continue={token}")).await;
    let names: Vec<&str> =
        second.body["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["item-3", "item-4", "item-5", "item-6"]);
    assert!(second.body["metadata"].get("continue").is_none());
    let bad_token = api.get(&format!("{CRONTABS_V1}?limit=1&continue=garbage")).await;
    assert_eq!(bad_token.code, 400);

    let odd = api.get(&format!("{CRONTABS_V1}?labelSelector=parity%3Dodd")).await;
    assert_eq!(odd.body["items"].as_array().unwrap().len(), 2);
    let named = api.get(&format!("{CRONTABS_V1}?fieldSelector=metadata.name%3Ditem-2")).await;
    assert_eq!(named.body["items"][0]["metadata"]["name"], "item-2");
    assert_eq!(api.get(&format!("{CRONTABS_V1}?fieldSelector=spec.x%3D1")).await.code, 400);
    let future = api.get(&format!("{CRONTABS_V1}?resourceVersion=999999")).await;
    assert_eq!(future.code, 504);

    // Tables carry the version's printer columns.
    let table = api
        .http
        .get(format!("{}{CRONTABS_V1}", api.server.url()))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Spec"]);
    assert_eq!(table["rows"][0]["cells"], json!(["item-0", "* * * * */5"]));

    // A watch from a revision delivers later events, in the watch's version.
    let rv = api.get(CRONTABS_V1).await.body["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut watch = api
        .http
        .get(format!("{}{CRONTABS_V1BETA1}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true", api.server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        watch.headers()["Warning"],
        r#"299 - "example.com/v1beta1 CronTab is deprecated; use example.com/v1 CronTab""#
    );
    api.post(CRONTABS_V1, &crontab("late", "v1")).await;
    api.delete(&format!("{CRONTABS_V1}/late")).await;
    let mut buffer = String::new();
    while buffer.lines().count() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(5), watch.chunk()).await.unwrap().unwrap().unwrap();
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let events: Vec<Value> = buffer.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["apiVersion"], "example.com/v1beta1");
    assert_eq!(events[1]["type"], "DELETED");
    assert_eq!(events[1]["object"]["metadata"]["name"], "late");

    // Every request is counted under upstream's metric names; the deprecated version is flagged.
    let metrics = api.http.get(format!("{}/metrics", api.server.url())).send().await.unwrap().text().await.unwrap();
    let lines: Vec<&str> = metrics.lines().collect();
    let find = |fragments: &[&str]| lines.iter().find(|l| fragments.iter().all(|f| l.contains(f))).copied();
    let lists = find(&[
        "apiserver_request_total{",
        r#"verb="LIST""#,
        r#"version="v1""#,
        r#"resource="crontabs""#,
        r#"code="200""#,
    ]);
    let count: u64 = lists.unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 5, "{metrics}");
    assert!(find(&["apiserver_request_total{", r#"verb="WATCH""#, r#"version="v1beta1""#]).is_some(), "{metrics}");
    assert!(find(&["apiserver_request_total{", r#"verb="LIST""#, r#"code="400""#]).is_some(), "{metrics}");
    let deprecated = find(&["apiserver_requested_deprecated_apis{", r#"version="v1beta1""#, r#"resource="crontabs""#]);
    assert!(deprecated.unwrap().ends_with(" 1"), "{metrics}");
    assert!(find(&["apiserver_requested_deprecated_apis{", r#"version="v1""#]).is_none(), "v1 is not deprecated");
    assert!(find(&["crdctl_request_last_timestamp_seconds{", r#"version="v1beta1""#]).is_some(), "{metrics}");
}

/// Objects as the value path reads them: the rows of a `Table` that includes whole objects.
async fn read_as_values(api: &Api, collection: &str) -> Vec<Value> {
    let url = format!("{}{collection}?includeObject=Object", api.server.url());
    let table = api.http.get(url).header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").send().await;
    let table: Value = table.unwrap().json().await.unwrap();
    table["rows"].as_array().unwrap().iter().map(|row| row["object"].clone()).collect()
}

/// Lists, gets and write responses read stored objects as text; a `Table` reads them as values.
/// Both prune and default what is stored as a decoder does, and give the same object, byte for
/// byte.
async fn stored_objects_read_as_text_and_as_values_alike(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    let mut labelled = crontab("made", "v1");
    labelled["metadata"]["labels"] = json!({"kept": "yes"});
    let made = api.post(CRONTABS_V1, &labelled).await;
    assert_eq!(made.code, 201);
    // As an older schema left it: a default missing, a null the schema refuses, unknown fields.
    let stored = json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": "old", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"cronSpec": "* * * * *", "mode": null, "gone": true}, "extra": {"x": 1}});
    let store = &api.server.server().state().store;
    let key = "/registry/example.com/crontabs/default/old";
    let written = store.create(key, serde_json::to_vec(&stored).unwrap()).await.unwrap();
    let text = |value: &Value| serde_json::to_string(value).unwrap();
    let by_name =
        |objects: &[Value], name: &str| objects.iter().find(|o| o["metadata"]["name"] == name).unwrap().clone();
    let list = api.get(CRONTABS_V1).await;
    let items = list.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let old = by_name(items, "old");
    assert_eq!(old["spec"], json!({"cronSpec": "* * * * *", "replicas": 1}));
    assert!(old.get("extra").is_none(), "{old}");
    assert_eq!(old["metadata"]["resourceVersion"], written.mod_revision.to_string());
    assert_eq!(text(&made.body), text(&by_name(items, "made")), "a create answers what a read finds");
    let values = read_as_values(&api, CRONTABS_V1).await;
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap();
        let got = api.get(&format!("{CRONTABS_V1}/{name}")).await;
        assert_eq!(text(item), text(&got.body));
        assert_eq!(text(item), text(&by_name(&values, name)));
    }
    let selected = api.get(&format!("{CRONTABS_V1}?labelSelector=kept%3Dyes")).await;
    assert_eq!(selected.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(selected.body["items"][0], by_name(items, "made"));
    // Read at another version (the None strategy, on text as well), the same objects but for
    // `apiVersion` and what v1beta1's schema prunes (`mode`), and the same as gets there.
    let converted = api.get(CRONTABS_V1BETA1).await;
    let converted = converted.body["items"].as_array().unwrap();
    assert_eq!(converted.len(), items.len());
    let values = read_as_values(&api, CRONTABS_V1BETA1).await;
    for (item, other) in items.iter().zip(converted) {
        assert_eq!(other["apiVersion"], "example.com/v1beta1");
        assert_eq!(item["metadata"], other["metadata"]);
        let name = other["metadata"]["name"].as_str().unwrap();
        let got = api.get(&format!("{CRONTABS_V1BETA1}/{name}")).await;
        assert_eq!(text(other), text(&got.body));
        assert_eq!(text(other), text(&by_name(&values, name)));
    }
    let mut moded = crontab("moded", "v1");
    moded["spec"]["mode"] = json!("a");
    assert_eq!(api.post(CRONTABS_V1, &moded).await.code, 201);
    let listed = api.get(&format!("{CRONTABS_V1BETA1}?fieldSelector=metadata.name%3Dmoded")).await;
    assert_eq!(listed.body["items"][0]["spec"], json!({"cronSpec": "* * * * */5", "replicas": 1}), "pruned at v1beta1");
    let got = api.get(&format!("{CRONTABS_V1BETA1}/moded")).await;
    assert_eq!(text(&got.body), text(&by_name(&read_as_values(&api, CRONTABS_V1BETA1).await, "moded")));
}

async fn bad_input(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    let before = api.server.server().state().store.revision().await.unwrap();
    let cases: Vec<(&str, Vec<u8>, &str, u16)> = vec![
        ("malformed JSON", b"{\"apiVersion\": ".to_vec(), "application/json", 400),
        ("malformed YAML", b"a: [b\n".to_vec(), "application/yaml", 400),
        ("invalid UTF-8", b"{\"a\": \"\xff\"}".to_vec(), "application/json", 400),
        ("deep nesting", format!("{}{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(), "application/json", 400),
        ("too large", vec![b' '; 3 * 1024 * 1024 + 10], "application/json", 413),
        ("wrong kind", json!({"apiVersion": "example.com/v1", "kind": "Other", "metadata": {"name": "x"}}).to_string().into_bytes(), "application/json", 400),
        ("bad name", json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "Not_DNS"}, "spec": {"cronSpec": "x"}}).to_string().into_bytes(), "application/json", 422),
        ("unknown content type", b"x".to_vec(), "text/plain", 415),
    ];
    for (what, body, content_type, code) in cases {
        let answer = api.send("POST", CRONTABS_V1, content_type, Some(body)).await;
        assert_eq!(answer.code, code, "{what}: {answer:?}");
        assert_eq!(answer.body["kind"], "Status", "{what}");
        assert_eq!(answer.body["code"], code, "{what}");
        assert_eq!(answer.content_type, "application/json", "{what}");
    }
    let bad_name = api.post(CRONTABS_V1, &json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "Not_DNS"}, "spec": {"cronSpec": "x"}})).await;
    assert!(
        bad_name.body["message"]
            .as_str()
            .unwrap()
            .contains("metadata.name: Invalid value: \"Not_DNS\": a lowercase RFC 1123 subdomain"),
        "{bad_name:?}"
    );
    let not_an_object = api.send("PUT", "/api/v1/namespaces/default", "application/json", Some(b"[1]".to_vec())).await;
    assert_eq!((not_an_object.code, not_an_object.body["kind"].as_str()), (400, Some("Status")));
    let bad_status = api
        .patch(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com/status",
            "application/merge-patch+json",
            &json!({"status": 5}),
        )
        .await;
    assert_eq!(bad_status.code, 400, "{bad_status:?}");
    // A schema keyword of the wrong JSON type: Go's decoder refuses the CRD before validation.
    let mut crd: Value = serde_json::from_str(CRD).unwrap();
    crd["metadata"]["name"] = json!("others.example.com");
    crd["spec"]["names"] = json!({"plural": "others", "kind": "Other"});
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]["maximum"] =
        json!("10");
    let mistyped = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
    assert_eq!(mistyped.code, 400, "{mistyped:?}");
    assert_eq!(
        mistyped.body["message"],
        "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: json: cannot unmarshal string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.properties.maximum of type float64"
    );
    assert_eq!(api.server.server().state().store.revision().await.unwrap(), before, "nothing was stored");
}

async fn upgrade_safety_gate(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";
    let mut crd = api.get(path).await.body;
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["cronSpec"]["type"] =
        json!("integer");
    let refused = api.put(path, &crd).await;
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(refused.body["message"].as_str().unwrap().contains("CRD upgrade safety"), "{refused:?}");
}

/// Namespaces as upstream guards them, and names generated from any `generateName`.
async fn namespaces_and_generated_names(backend: Backend) {
    let api = Api::on(backend).await.with_crd().await;
    assert_eq!(
        api.post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        )
        .await
        .code,
        201
    );

    // Namespaces have no deletecollection: nothing is deleted.
    let everything = api.delete("/api/v1/namespaces").await;
    assert_eq!(everything.code, 405, "{everything:?}");
    assert_eq!(everything.body["reason"], "MethodNotAllowed");
    assert_eq!(everything.body["message"], "the server does not allow this method on the requested resource");
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let refused = api.delete(&format!("/api/v1/namespaces/{namespace}")).await;
        assert_eq!(refused.code, 403, "{refused:?}");
        assert_eq!(refused.body["reason"], "Forbidden");
        let message = format!("namespaces {namespace:?} is forbidden: this namespace may not be deleted");
        assert_eq!(refused.body["message"], message);
        assert_eq!(api.get(&format!("/api/v1/namespaces/{namespace}")).await.code, 200);
    }
    assert_eq!(api.get("/api/v1/namespaces/team-a").await.code, 200);
    assert_eq!(api.delete("/api/v1/namespaces/team-a").await.code, 200);

    // A prefix of multi-byte characters longer than the 58 bytes a generated name keeps is cut
    // on a character boundary, then refused as any such name is.
    let mut object = crontab("", "v1");
    object["metadata"] = json!({"generateName": format!("a{}", "é".repeat(40))});
    let refused = api.post(CRONTABS_V1, &object).await;
    assert_eq!(refused.code, 422, "{refused:?}");
    let name = refused.body["details"]["name"].as_str().unwrap();
    assert!(name.starts_with(&format!("a{}", "é".repeat(28))) && name.chars().count() == 34, "{name}");

    // Every kind takes its name from generateName (Events included).
    object["metadata"] = json!({"generateName": "nightly-"});
    let created = api.post(CRONTABS_V1, &object).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert!(created.body["metadata"]["name"].as_str().unwrap().starts_with("nightly-"));
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "nightly."},
        "involvedObject": {"kind": "CronTab", "name": "nightly", "namespace": "default"}, "reason": "Tested"});
    let created = api.post("/api/v1/namespaces/default/events", &event).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert!(created.body["metadata"]["name"].as_str().unwrap().starts_with("nightly."));
}

/// A namespace's own parts, as upstream's namespace strategies write them: the name label, the
/// `kubernetes` spec finalizer, `spec.finalizers` written only through `finalize`, `status`
/// through `/status`; a spec finalizer holds a terminating namespace until `finalize` drops it.
async fn namespace_finalizers_and_subresources(backend: Backend) {
    let api = Api::on(backend).await;
    const TEAM: &str = "/api/v1/namespaces/team-f";
    let namespace = json!({"metadata": {"name": "team-f"}, "spec": {"finalizers": ["example.com/vault"]}});
    let created = api.post("/api/v1/namespaces", &namespace).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert_eq!(created.body["spec"]["finalizers"], json!(["example.com/vault", "kubernetes"]));
    assert_eq!(created.body["status"], json!({"phase": "Active"}));
    assert_eq!(created.body["metadata"]["labels"], json!({"kubernetes.io/metadata.name": "team-f"}));

    // The main resource keeps `spec.finalizers` and `status`; `/status` writes only status.
    let mut changed = created.body.clone();
    changed["spec"]["finalizers"] = json!([]);
    changed["status"]["phase"] = json!("Terminating");
    changed["metadata"]["labels"]["tier"] = json!("gold");
    let updated = api.put(TEAM, &changed).await;
    assert_eq!(updated.code, 200, "{updated:?}");
    assert_eq!(updated.body["spec"]["finalizers"], created.body["spec"]["finalizers"]);
    assert_eq!(updated.body["status"]["phase"], "Active");
    assert_eq!(updated.body["metadata"]["labels"]["tier"], "gold");
    let condition =
        json!({"status": {"conditions": [{"type": "NamespaceDeletionDiscoveryFailure", "status": "False"}]}});
    let status = api.patch(&format!("{TEAM}/status"), "application/merge-patch+json", &condition).await;
    assert_eq!(status.code, 200, "{status:?}");
    assert_eq!(status.body["status"]["conditions"][0]["status"], "False");
    assert_eq!(api.get(&format!("{TEAM}/status")).await.body["metadata"]["name"], "team-f");
    let read = api.get(&format!("{TEAM}/finalize")).await;
    assert_eq!(read.code, 405, "{read:?}");

    // Deleting empties it and drops `kubernetes`; the other spec finalizer holds it.
    let deleted = api.delete(TEAM).await;
    assert_eq!((deleted.code, deleted.body["status"]["phase"].as_str()), (200, Some("Terminating")), "{deleted:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let held = loop {
        let current = api.get(TEAM).await;
        assert_eq!(current.code, 200, "held by example.com/vault: {current:?}");
        if current.body["spec"]["finalizers"] == json!(["example.com/vault"]) {
            break current.body;
        }
        assert!(std::time::Instant::now() < deadline, "the lifecycle drops the kubernetes finalizer: {current:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut finalized = held.clone();
    finalized["spec"]["finalizers"] = json!([]);
    let written = api.put(&format!("{TEAM}/finalize"), &finalized).await;
    assert_eq!(written.code, 200, "{written:?}");
    assert_eq!(written.body["spec"]["finalizers"], json!([]));
    assert_eq!(written.body["status"]["phase"], "Terminating");
    while api.get(TEAM).await.code != 404 {
        assert!(std::time::Instant::now() < deadline, "the namespace goes once no finalizer holds it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Events and namespaces as upstream serves them: the type taken from the URL when the body has
/// none, and the field selectors of each kind (upstream's event `GetAttrs` and
/// `NamespaceToSelectableFields`), on lists and watches, in both event shapes.
async fn built_in_types_and_their_field_selectors(backend: Backend) {
    let api = Api::on(backend).await;
    const EVENTS: &str = "/api/v1/namespaces/default/events";
    // No apiVersion or kind, as kopf sends Events: the URL's; a wrong one is refused.
    let event = |name: &str, kind: &str, object: &str, source: Value| {
        json!({"metadata": {"name": name}, "involvedObject": {"kind": kind, "name": object, "namespace": "default",
            "uid": format!("uid-{object}"), "apiVersion": "example.com/v1"},
            "reason": "Reconciled", "type": "Normal", "message": "done", "source": source})
    };
    let created = api.post(EVENTS, &event("a.1", "CronTab", "a", json!({"component": "crontab-controller"}))).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert_eq!((created.body["apiVersion"].as_str(), created.body["kind"].as_str()), (Some("v1"), Some("Event")));
    let mut warning = event("b.1", "CronTab", "b", json!({}));
    warning["type"] = json!("Warning");
    warning["reportingComponent"] = json!("kubelet");
    assert_eq!(api.post(EVENTS, &warning).await.code, 201);
    assert_eq!(
        api.post(EVENTS, &event("d.1", "Deployment", "a", json!({"component": "deployment-controller"}))).await.code,
        201
    );
    let mut wrong = event("c.1", "CronTab", "c", json!({}));
    wrong["kind"] = json!("Pod");
    let refused = api.post(EVENTS, &wrong).await;
    assert_eq!(refused.code, 400);
    assert_eq!(
        refused.body["message"],
        "Pod in version \"v1\" cannot be handled as a Event: converting (v1.Pod) to (core.Event): unknown conversion"
    );
    let namespace = api.post("/api/v1/namespaces", &json!({"metadata": {"name": "team-b"}})).await;
    assert_eq!((namespace.code, namespace.body["kind"].as_str()), (201, Some("Namespace")), "{namespace:?}");

    // What `kubectl describe crontab a` asks for.
    let describe =
        "involvedObject.name=a,involvedObject.namespace=default,involvedObject.kind=CronTab,involvedObject.uid=uid-a";
    for (selector, expected) in [
        (describe, vec!["a.1"]),
        ("involvedObject.name=a", vec!["a.1", "d.1"]),
        ("involvedObject.kind!=CronTab", vec!["d.1"]),
        ("type=Warning", vec!["b.1"]),
        ("source=kubelet", vec!["b.1"]),
        ("source=crontab-controller,reason=Reconciled", vec!["a.1"]),
        ("reportingComponent=kubelet", vec!["b.1"]),
        ("involvedObject.apiVersion=example.com/v1,metadata.name=d.1", vec!["d.1"]),
    ] {
        assert_eq!(item_names(&api.get(&format!("{EVENTS}?fieldSelector={selector}")).await), expected, "{selector}");
        let events_k8s_io = format!("/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector={selector}");
        assert_eq!(item_names(&api.get(&events_k8s_io).await), expected, "events.k8s.io: {selector}");
    }
    let unsupported = api.get(&format!("{EVENTS}?fieldSelector=regarding.name=a")).await;
    assert_eq!(
        (unsupported.code, unsupported.body["message"].as_str()),
        (400, Some("field label not supported: regarding.name"))
    );
    assert_eq!(
        item_names(&api.get("/api/v1/namespaces?fieldSelector=status.phase=Active,metadata.name=team-b").await),
        ["team-b"]
    );
    assert_eq!(item_names(&api.get("/api/v1/namespaces?fieldSelector=name=team-b").await), ["team-b"]);
    assert!(item_names(&api.get("/api/v1/namespaces?fieldSelector=status.phase=Terminating").await).is_empty());

    // A watch selects the same way.
    let rv = api.get(EVENTS).await.body["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let url = format!(
        "{}{EVENTS}?watch=true&resourceVersion={rv}&fieldSelector=involvedObject.kind=Deployment",
        api.server.url()
    );
    let mut watch = api.http.get(url).send().await.unwrap();
    assert_eq!(api.post(EVENTS, &event("a.2", "CronTab", "a", json!({}))).await.code, 201);
    assert_eq!(api.post(EVENTS, &event("d.2", "Deployment", "a", json!({}))).await.code, 201);
    let chunk = tokio::time::timeout(Duration::from_secs(5), watch.chunk()).await.unwrap().unwrap().unwrap();
    let line: Value = serde_json::from_slice(chunk.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!((line["type"].as_str(), line["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("d.2")));
}

/// The built-in table: ConfigMaps, Secrets, ServiceAccounts, Leases and RBAC objects served as
/// upstream serves them (discovery, scope, the type from the URL, Secret `stringData`,
/// `immutable`, selectors, and a namespace's deletion taking them along).
async fn built_in_resources(backend: Backend) {
    let api = Api::on(backend).await;
    assert_eq!(api.post("/api/v1/namespaces", &json!({"metadata": {"name": "team-c"}})).await.code, 201);
    const CONFIG_MAPS: &str = "/api/v1/namespaces/team-c/configmaps";

    // Discovery lists them as upstream does.
    let core = api.get("/api/v1").await.body;
    let find =
        |list: &Value, name: &str| list["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).cloned();
    let config_maps = find(&core, "configmaps").unwrap();
    assert_eq!((config_maps["kind"].as_str(), config_maps["shortNames"].clone()), (Some("ConfigMap"), json!(["cm"])));
    assert_eq!(
        config_maps["verbs"],
        json!(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
    );
    assert_eq!(find(&core, "serviceaccounts").unwrap()["shortNames"], json!(["sa"]));
    let rbac = api.get("/apis/rbac.authorization.k8s.io/v1").await.body;
    assert_eq!(find(&rbac, "clusterroles").unwrap()["namespaced"], false);
    assert_eq!(find(&rbac, "roles").unwrap()["namespaced"], true);
    let groups = api.get("/apis").await.body.to_string();
    assert!(groups.contains("coordination.k8s.io/v1") && groups.contains("rbac.authorization.k8s.io/v1"), "{groups}");

    // A ConfigMap without apiVersion and kind, as a typed client may send it.
    let created = api
        .post(CONFIG_MAPS, &json!({"metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"a": "1"}}))
        .await;
    assert_eq!(created.code, 201, "{created:?}");
    assert_eq!((created.body["apiVersion"].as_str(), created.body["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
    assert!(created.body["metadata"]["uid"].is_string() && created.body["metadata"].get("generation").is_none());
    assert_eq!(created.body["metadata"]["managedFields"][0]["operation"], "Update");
    let mut updated = created.body.clone();
    updated["data"]["b"] = json!("2");
    assert_eq!(api.put(&format!("{CONFIG_MAPS}/settings"), &updated).await.code, 200);
    let patched = api
        .patch(&format!("{CONFIG_MAPS}/settings"), "application/merge-patch+json", &json!({"data": {"a": null}}))
        .await;
    assert_eq!(patched.body["data"], json!({"b": "2"}), "{patched:?}");
    let stale = api.put(&format!("{CONFIG_MAPS}/settings"), &updated).await;
    assert_eq!(stale.code, 409, "an update from an old resourceVersion conflicts");
    let selected = api.get("/api/v1/configmaps?labelSelector=app=web").await.body;
    assert_eq!(selected["items"].as_array().unwrap().len(), 1);
    assert_eq!(selected["kind"], "ConfigMapList");
    let refused = api.post("/api/v1/namespaces/missing/configmaps", &json!({"metadata": {"name": "x"}})).await;
    assert_eq!((refused.code, refused.body["message"].as_str()), (404, Some(r#"namespaces "missing" not found"#)));
    let generated = api.post(CONFIG_MAPS, &json!({"metadata": {"generateName": "run-"}})).await;
    assert!(generated.body["metadata"]["name"].as_str().unwrap().starts_with("run-"), "{generated:?}");

    // Deleting the namespace marks it Terminating and deletes what is in it, custom resources
    // included (cluster-scoped objects stay); an object held by a finalizer keeps it until the
    // finalizer is removed.
    let role = json!({"metadata": {"name": "system:crontab-reader"}, "rules": []});
    assert_eq!(api.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", &role).await.code, 201);
    let api = api.with_crd().await;
    let mut held = crontab("held", "v1");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let crontabs = "/apis/example.com/v1/namespaces/team-c/crontabs";
    assert_eq!(api.post(crontabs, &held).await.code, 201);
    assert_eq!(api.post(crontabs, &crontab("free", "v1")).await.code, 201);
    let deleted = api.delete("/api/v1/namespaces/team-c").await;
    assert_eq!((deleted.code, deleted.body["status"]["phase"].as_str()), (200, Some("Terminating")), "{deleted:?}");
    assert!(deleted.body["metadata"]["deletionTimestamp"].is_string());
    // Creates are checked against the namespace as the watch cache has it (as upstream's
    // informer): once it has seen the deletion, they are refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let cached_phase = || async {
        let listed = api.get("/api/v1/namespaces?resourceVersion=0&fieldSelector=metadata.name=team-c").await;
        listed.body["items"][0]["status"]["phase"].as_str().map(str::to_string)
    };
    while cached_phase().await.as_deref() != Some("Terminating") {
        assert!(std::time::Instant::now() < deadline, "the watch cache sees the namespace terminating");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = api.post(CONFIG_MAPS, &json!({"metadata": {"name": "late"}})).await;
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.body["message"],
        r#"configmaps "late" is forbidden: unable to create new content in namespace team-c because it is being terminated"#
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let emptied =
        [CONFIG_MAPS, "/api/v1/namespaces/team-c/secrets", "/apis/coordination.k8s.io/v1/namespaces/team-c/leases"];
    loop {
        let mut left = item_names(&api.get(crontabs).await);
        for path in emptied {
            left.extend(item_names(&api.get(path).await));
        }
        if left == ["held"] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "everything in the namespace goes but the held object: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(api.get(&format!("{crontabs}/held")).await.body["metadata"]["deletionTimestamp"].is_string());
    let namespace = api.get("/api/v1/namespaces/team-c").await;
    assert_eq!((namespace.code, namespace.body["status"]["phase"].as_str()), (200, Some("Terminating")));
    let released = api
        .patch(&format!("{crontabs}/held"), "application/merge-patch+json", &json!({"metadata": {"finalizers": null}}))
        .await;
    assert_eq!(released.code, 200, "{released:?}");
    while api.get("/api/v1/namespaces/team-c").await.code != 404 {
        assert!(std::time::Instant::now() < deadline, "the namespace goes once its last object is gone");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(api.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:crontab-reader").await.code, 200);
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
}

/// Workloads as upstream's registry writes them: defaults, `generation`, the selector check,
/// `status` and `scale` as subresources, unknown fields pruned or refused.
/// Built-in kinds with rules of their own: a Secret's `stringData` and immutability, a Node's
/// typed field selector, cluster-scoped RBAC, reviews (answered, never stored) and a Lease
/// taken and renewed.
async fn other_built_in_kinds(backend: Backend) {
    let api = Api::on(backend).await;
    // Secrets: stringData written into data, type defaulted, keys and immutability checked.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "stringData": {"token": "s3cr3t"}, "immutable": true});
    let created = api.post("/api/v1/namespaces/default/secrets", &secret).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert_eq!(
        (created.body["data"]["token"].as_str(), created.body["type"].as_str()),
        (Some("czNjcjN0"), Some("Opaque"))
    );
    assert!(created.body.get("stringData").is_none());
    let changed = api
        .patch(
            "/api/v1/namespaces/default/secrets/token",
            "application/merge-patch+json",
            &json!({"data": {"token": "eA=="}}),
        )
        .await;
    assert_eq!(changed.code, 422, "{changed:?}");
    assert_eq!(
        changed.body["message"],
        "Secret \"token\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    assert_eq!(
        api.get("/api/v1/namespaces/default/secrets?fieldSelector=type=Opaque").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A typed field the object lacks selects as its zero value, as upstream's typed objects read.
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-z"}});
    assert_eq!(api.post("/api/v1/nodes", &node).await.code, 201);
    assert_eq!(item_names(&api.get("/api/v1/nodes?fieldSelector=spec.unschedulable=false").await), ["node-z"]);
    assert!(item_names(&api.get("/api/v1/nodes?fieldSelector=spec.unschedulable=true").await).is_empty());

    // Cluster-scoped RBAC objects have no namespaced path; their names may hold colons.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:crontab-reader"},
        "rules": [{"apiGroups": ["example.com"], "resources": ["crontabs"], "verbs": ["get", "list"]}]});
    assert_eq!(api.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", &role).await.code, 201);
    assert_eq!(api.get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-c/clusterroles").await.code, 404);
    // Reviews answer as an authorizer that allows everything, and are not stored.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}}});
    let answered = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", &review).await;
    assert_eq!((answered.code, answered.body["status"]["allowed"].as_bool()), (201, Some(true)), "{answered:?}");
    let listed = api.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").await;
    assert_eq!((listed.code, listed.body["reason"].as_str()), (405, Some("MethodNotAllowed")), "{listed:?}");
    let whoami = api.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", &json!({})).await;
    assert_eq!(whoami.body["status"]["userInfo"]["username"], "system:admin", "{whoami:?}");
    assert_eq!(whoami.body["kind"], "SelfSubjectReview");
    // A Lease, as leader election takes and renews it.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "crontab-controller"},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15}});
    let taken = api.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", &lease).await;
    assert_eq!(taken.code, 201, "{taken:?}");
    let mut renewed = taken.body.clone();
    renewed["spec"]["holderIdentity"] = json!("pod-b");
    assert_eq!(
        api.put("/apis/coordination.k8s.io/v1/namespaces/default/leases/crontab-controller", &renewed).await.code,
        200
    );
    assert_eq!(
        api.put("/apis/coordination.k8s.io/v1/namespaces/default/leases/crontab-controller", &renewed).await.code,
        409
    );
}

async fn workloads(backend: Backend) {
    let api = Api::on(backend).await;
    let created = api.post(DEPLOYMENTS, &deployment("web", json!({"app": "web"}))).await;
    assert_eq!(created.code, 201, "{created:?}");
    let spec = &created.body["spec"];
    assert_eq!((spec["replicas"].clone(), spec["strategy"]["type"].clone()), (json!(1), json!("RollingUpdate")));
    assert_eq!(spec["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(created.body["metadata"]["generation"], 1);
    assert!(created.body.get("status").is_none(), "status is the subresource's");

    let mismatched = api.post(DEPLOYMENTS, &deployment("other", json!({"app": "else"}))).await;
    assert_eq!(mismatched.code, 422);
    assert_eq!(
        mismatched.body["message"],
        "Deployment.apps \"other\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"else\"}: `selector` does not match template `labels`"
    );
    let mut unknown = deployment("strict", json!({"app": "strict"}));
    unknown["spec"]["replica"] = json!(2);
    let refused = api.post(&format!("{DEPLOYMENTS}?fieldValidation=Strict"), &unknown).await;
    assert_eq!(
        (refused.code, refused.body["message"].as_str()),
        (
            400,
            Some(
                "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.replica\""
            )
        )
    );
    let warned = api.post(DEPLOYMENTS, &unknown).await;
    assert_eq!(
        (warned.code, warned.warnings.as_slice()),
        (201, &["299 - \"unknown field \\\"spec.replica\\\"\"".to_string()][..]),
        "{warned:?}"
    );
    assert!(warned.body["spec"].get("replica").is_none());
    let patched = api
        .patch(
            &format!("{DEPLOYMENTS}/strict?fieldValidation=Strict"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"replica": 3, "paused": true}}),
        )
        .await;
    assert_eq!(
        (patched.code, patched.body["message"].as_str()),
        (
            422,
            Some(
                r#" "" is invalid: patch: Invalid value: "map[spec:map[paused:true replica:3]]": strict decoding error: unknown field "spec.replica""#
            )
        )
    );
    let mut wrong_type = deployment("typed", json!({"app": "typed"}));
    wrong_type["spec"]["replicas"] = json!("two");
    // Go's decoder refuses it before anything else, as upstream's typed decoding does.
    let refused = api.post(DEPLOYMENTS, &wrong_type).await;
    assert_eq!(
        (refused.code, refused.body["reason"].as_str(), refused.body["message"].as_str()),
        (
            400,
            Some("BadRequest"),
            Some(
                r#"Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"#
            )
        )
    );

    // Writes to the resource leave status alone and count generations; /status only status.
    let web = format!("{DEPLOYMENTS}/web");
    let status = api
        .patch(
            &format!("{web}/status"),
            "application/merge-patch+json",
            &json!({"status": {"readyReplicas": 1}, "spec": {"replicas": 5}}),
        )
        .await;
    assert_eq!(
        (status.code, status.body["status"]["readyReplicas"].clone(), status.body["spec"]["replicas"].clone()),
        (200, json!(1), json!(1)),
        "{status:?}"
    );
    let scaled_up = api
        .patch(&web, "application/merge-patch+json", &json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 9}}))
        .await;
    assert_eq!(
        (scaled_up.body["status"]["readyReplicas"].clone(), scaled_up.body["metadata"]["generation"].clone()),
        (json!(1), json!(2))
    );
    // The scale subresource, as `kubectl scale` and the HPA use it.
    let scale = api.get(&format!("{web}/scale")).await;
    assert_eq!(
        (
            scale.body["kind"].as_str(),
            scale.body["spec"]["replicas"].clone(),
            scale.body["status"]["selector"].as_str()
        ),
        (Some("Scale"), json!(2), Some("app=web")),
        "{scale:?}"
    );
    let rescaled =
        api.patch(&format!("{web}/scale"), "application/merge-patch+json", &json!({"spec": {"replicas": 4}})).await;
    assert_eq!(rescaled.body["spec"]["replicas"], 4, "{rescaled:?}");
    assert_eq!(api.get(&web).await.body["spec"]["replicas"], 4);
}

/// Pods are stored with their defaults; what needs a kubelet says there is none.
async fn pods(backend: Backend) {
    let api = Api::on(backend).await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = api.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(
        (created.code, created.body["spec"]["serviceAccountName"].as_str()),
        (201, Some("default")),
        "{created:?}"
    );
    assert_eq!(created.body["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    let limited = json!({"metadata": {"name": "limited"}, "spec": {"containers": [{"name": "c", "image": "busybox",
        "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]}});
    let limited = api.post("/api/v1/namespaces/default/pods", &limited).await;
    assert_eq!(
        (
            limited.body["spec"]["containers"][0]["resources"]["requests"].clone(),
            limited.body["status"]["qosClass"].clone()
        ),
        (json!({"cpu": "500m", "memory": "64Mi"}), json!("Guaranteed")),
        "requests default to limits: {limited:?}"
    );
    let log = api.get("/api/v1/namespaces/default/pods/p/log").await;
    assert_eq!(log.code, 400);
    assert_eq!(log.body["message"], "pods \"p\" has no node to log: crdctl serve runs no kubelet, so no pod runs");
    assert_eq!(
        item_names(
            &api.get("/api/v1/pods?fieldSelector=spec.schedulerName=default-scheduler,status.phase=Pending").await
        ),
        ["limited", "p"]
    );
    // `Pending` is where a Pod starts; its status writes say what they say (as a kubelet's).
    let status = "/api/v1/namespaces/default/pods/p/status";
    let running = api.patch(status, "application/merge-patch+json", &json!({"status": {"phase": "Running"}})).await;
    assert_eq!(running.body["status"]["phase"], "Running", "{running:?}");
    let mut cleared = running.body.clone();
    cleared["status"] = json!({"message": "evicted"});
    let cleared = api.put(status, &cleared).await;
    assert_eq!(
        (cleared.code, cleared.body["status"].clone()),
        (200, json!({"message": "evicted", "qosClass": "BestEffort"})),
        "the QoS class stays: {cleared:?}"
    );
}

/// ClusterIPs and node ports handed out from their ranges, once each, and given back.
async fn services(backend: Backend) {
    let api = Api::on(backend).await;
    const SERVICES: &str = "/api/v1/namespaces/default/services";
    let kubernetes = api.get(&format!("{SERVICES}/kubernetes")).await;
    assert_eq!(kubernetes.body["spec"]["clusterIP"], "10.96.0.1", "{kubernetes:?}");
    let service = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
    let web = api.post(SERVICES, &service("web", json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}))).await;
    assert_eq!(web.code, 201, "{web:?}");
    let ip = web.body["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10.") && ip != "10.96.0.1", "{ip}");
    assert_eq!(web.body["spec"]["clusterIPs"], json!([ip]));
    assert_eq!(web.body["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
    let address = api.get(&format!("/apis/networking.k8s.io/v1/ipaddresses/{ip}")).await;
    assert_eq!(address.body["spec"]["parentRef"]["name"], "web", "{address:?}");
    // Server-side apply keys a port left without `protocol` by its default, as upstream (Helm
    // applies its charts so): the stored port, not a second one.
    let applied = api
        .patch(
            &format!("{SERVICES}/web?fieldManager=helm"),
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
        )
        .await;
    assert_eq!((applied.code, applied.body["spec"]["ports"].as_array().map(Vec::len)), (200, Some(1)), "{applied:?}");
    let taken = api.post(SERVICES, &service("copy", json!({"clusterIP": ip, "ports": [{"port": 80}]}))).await;
    assert_eq!(taken.code, 422);
    assert_eq!(
        taken.body["message"],
        format!(
            "Service \"copy\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
        )
    );
    let outside =
        api.post(SERVICES, &service("outside", json!({"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}))).await;
    assert!(
        outside.body["message"]
            .as_str()
            .unwrap()
            .ends_with("is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
        "{outside:?}"
    );
    let headless =
        api.post(SERVICES, &service("headless", json!({"clusterIP": "None", "ports": [{"port": 80}]}))).await;
    assert_eq!(headless.body["spec"]["clusterIP"], "None");
    let changed = api
        .patch(
            &format!("{SERVICES}/web"),
            "application/merge-patch+json",
            &json!({"spec": {"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]}}),
        )
        .await;
    assert_eq!(changed.code, 422, "{changed:?}");
    assert!(changed.body["message"].as_str().unwrap().ends_with(": may not change once set"), "{changed:?}");

    let node_port = api
        .post(
            SERVICES,
            &service("np", json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]})),
        )
        .await;
    assert_eq!(node_port.code, 201, "{node_port:?}");
    let first = node_port.body["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!(
        (30000..=32767).contains(&first) && node_port.body["spec"]["ports"][1]["nodePort"] == 30443,
        "{node_port:?}"
    );
    let clash = api
        .post(SERVICES, &service("np2", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30443}]})))
        .await;
    assert_eq!(
        clash.body["message"],
        "Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: 30443: provided port is already allocated"
    );
    // An update keeps what was allocated.
    let relabelled = api
        .patch(&format!("{SERVICES}/np"), "application/merge-patch+json", &json!({"metadata": {"labels": {"a": "b"}}}))
        .await;
    assert_eq!(relabelled.body["spec"]["ports"][0]["nodePort"].as_u64(), Some(first), "{relabelled:?}");
    // Deleting gives addresses back: the same ones can be asked for again.
    assert_eq!(api.delete(&format!("{SERVICES}/np")).await.code, 200);
    assert_eq!(api.delete(&format!("{SERVICES}/web")).await.code, 200);
    assert_eq!(api.get(&format!("/apis/networking.k8s.io/v1/ipaddresses/{ip}")).await.code, 404);
    let again = api
        .post(
            SERVICES,
            &service("again", json!({"clusterIP": ip, "type": "NodePort", "ports": [{"port": 80, "nodePort": 30443}]})),
        )
        .await;
    assert_eq!(again.code, 201, "{again:?}");
}

/// Strategic merge patches of built-in kinds, as kube-apiserver applies them: lists merged by
/// their merge keys, directives, upstream's errors with nothing stored.
async fn strategic_merge_patches(backend: Backend) {
    const SMP: &str = "application/strategic-merge-patch+json";
    let api = Api::on(backend).await;
    let mut web = deployment("web", json!({"app": "web"}));
    web["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "ports": [{"containerPort": 80}]},
        {"name": "sidecar", "image": "envoy:1"},
    ]);
    assert_eq!(api.post(DEPLOYMENTS, &web).await.code, 201);
    let path = format!("{DEPLOYMENTS}/web");
    let containers = |body: &Value| body["spec"]["template"]["spec"]["containers"].clone();

    // A container named in the patch is merged into, the other stays; env by name, the
    // patch's new items first (as upstream orders them without `$setElementOrder`).
    let patched = api
        .patch(
            &path,
            SMP,
            &json!({"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.28", "env": [{"name": "A", "$patch": "delete"}, {"name": "C", "value": "3"}]}
            ]}}}}),
        )
        .await;
    assert_eq!(patched.code, 200, "{patched:?}");
    let merged = containers(&patched.body);
    assert_eq!(
        (merged[0]["image"].clone(), merged[0]["env"].clone(), merged[0]["ports"][0]["containerPort"].clone()),
        (json!("nginx:1.28"), json!([{"name": "C", "value": "3"}, {"name": "B", "value": "2"}]), json!(80))
    );
    assert_eq!((merged[1]["name"].clone(), merged[1]["image"].clone()), (json!("sidecar"), json!("envoy:1")));
    assert_eq!(patched.body["metadata"]["generation"], 2);

    // `$setElementOrder` orders the list; `$retainKeys` drops the rolling update with its type.
    let reordered = api
        .patch(
            &path,
            SMP,
            &json!({"spec": {
                "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
                "template": {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}]}}}}),
        )
        .await;
    assert_eq!(reordered.code, 200, "{reordered:?}");
    let names: Vec<Value> = containers(&reordered.body).as_array().unwrap().iter().map(|c| c["name"].clone()).collect();
    assert_eq!(names, [json!("sidecar"), json!("web")]);
    assert_eq!(reordered.body["spec"]["strategy"], json!({"type": "Recreate"}));

    // A map merges; a list of scalars with the merge strategy gains items once; a null
    // removes a field.
    let relabelled = api
        .patch(&path, SMP, &json!({"metadata": {"labels": {"tier": "front"}, "finalizers": ["example.com/keep"]}}))
        .await;
    assert_eq!(relabelled.body["metadata"]["labels"], json!({"tier": "front"}), "{relabelled:?}");
    let unlabelled = api
        .patch(&path, SMP, &json!({"metadata": {"labels": {"tier": null}, "finalizers": ["example.com/keep"]}}))
        .await;
    assert!(unlabelled.body["metadata"]["labels"].get("tier").is_none(), "{unlabelled:?}");
    assert_eq!(unlabelled.body["metadata"]["finalizers"], json!(["example.com/keep"]));

    // The scale subresource takes one too.
    let scaled = api.patch(&format!("{path}/scale"), SMP, &json!({"spec": {"replicas": 3}})).await;
    assert_eq!((scaled.code, scaled.body["spec"]["replicas"].clone()), (200, json!(3)), "{scaled:?}");

    // Bad patches: upstream's status and text, and nothing stored.
    let before = api.get(&path).await.body["metadata"]["resourceVersion"].clone();
    let bad = [
        (
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            500,
            "map: map[image:x] does not contain declared merge key: name",
        ),
        (
            json!({"metadata": {"labels": {"$patch": "explode"}}}),
            500,
            "unknown patch type: explode in map: map[$patch:explode]",
        ),
        (json!({"spec": {"$retainKeys": "replicas"}}), 400, "invalid patch format of retainKeys"),
        (
            json!({"metadata": {"finalizers": [["a"]]}}),
            500,
            "list element types are not identical: [[example.com/keep] [[a]]]",
        ),
        (
            json!(["not", "an", "object"]),
            400,
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ];
    for (patch, code, message) in bad {
        let refused = api.patch(&path, SMP, &patch).await;
        assert_eq!((refused.code, refused.body["message"].as_str()), (code, Some(message)), "{patch}");
    }
    assert_eq!(api.get(&path).await.body["metadata"]["resourceVersion"], before);

    // Namespaces (served apart from the table) take them too; custom resources do not.
    let namespace = api.patch("/api/v1/namespaces/default", SMP, &json!({"metadata": {"labels": {"team": "a"}}})).await;
    assert_eq!(namespace.body["metadata"]["labels"]["team"], "a", "{namespace:?}");
}

/// `/openapi/v3` and `/openapi/v2` serve upstream's documents for built-in group versions.
async fn built_in_openapi(backend: Backend) {
    let api = Api::on(backend).await.with_crd().await;
    let index = api.get("/openapi/v3").await.body;
    let apps = index["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    assert!(index["paths"]["apis/example.com/v1"].is_object(), "{index}");
    let document = api.get(&apps).await.body;
    let strategy = &document["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
    assert_eq!(strategy["allOf"][0]["$ref"], "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy");
    // Strategic merge patch is offered, so kubectl's client-side apply uses it.
    let patch = &document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]["requestBody"]["content"];
    let offered: Vec<&String> = patch.as_object().unwrap().keys().collect();
    assert!(offered.iter().any(|t| *t == "application/strategic-merge-patch+json"), "{offered:?}");
    let swagger = api.get("/openapi/v2").await.body;
    let definitions = swagger["definitions"].as_object().unwrap();
    assert!(
        definitions.contains_key("io.k8s.api.core.v1.ConfigMap") && definitions.contains_key("com.example.v1.CronTab")
    );
    assert_eq!(
        definitions["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"]["allOf"][0]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy"
    );
}

/// HorizontalPodAutoscalers in both served versions, one stored object: `autoscaling/v1`'s CPU
/// target is v2's CPU metric (80% when v1 names none), and v2's other metrics reach a v1 reader
/// in upstream's annotation and come back whole.
async fn horizontal_pod_autoscalers(backend: Backend) {
    let api = Api::on(backend).await;
    let (v1, v2) = (
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
    );
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let by_v1 = json!({"metadata": {"name": "cpu"}, "spec": {"scaleTargetRef": target, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}});
    let created = api.post(v1, &by_v1).await;
    assert_eq!((created.code, created.body["apiVersion"].as_str()), (201, Some("autoscaling/v1")), "{created:?}");
    assert_eq!(created.body["spec"]["minReplicas"], 1);
    let read = api.get(&format!("{v2}/cpu")).await;
    assert_eq!(
        read.body["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]),
        "{read:?}"
    );
    let defaulted = api
        .post(v1, &json!({"metadata": {"name": "bare"}, "spec": {"scaleTargetRef": target, "maxReplicas": 2}}))
        .await;
    assert_eq!(defaulted.body["spec"]["targetCPUUtilizationPercentage"], 80, "{defaulted:?}");

    let memory = json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}});
    let by_v2 = json!({"metadata": {"name": "memory"}, "spec": {"scaleTargetRef": target, "maxReplicas": 5, "metrics": [memory]}});
    assert_eq!(api.post(v2, &by_v2).await.code, 201);
    let as_v1 = api.get(&format!("{v1}/memory")).await;
    assert_eq!(
        as_v1.body["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#,
        "{as_v1:?}"
    );
    assert!(as_v1.body["spec"].get("targetCPUUtilizationPercentage").is_none());
    // A v1 client writing back what it read keeps the metric it cannot see.
    let mut relabelled = as_v1.body.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(api.put(&format!("{v1}/memory"), &relabelled).await.code, 200);
    let again = api.get(&format!("{v2}/memory")).await;
    assert_eq!(again.body["spec"]["metrics"], json!([memory]), "{again:?}");
    assert!(again.body["metadata"].get("annotations").is_none(), "{again:?}");
    assert_eq!(item_names(&api.get(v1).await), ["bare", "cpu", "memory"]);
}

/// A PUT without a `resourceVersion` (or with `0`, which upstream reads as none) replaces the
/// object where the kind's strategy allows unconditional updates — Nodes, ConfigMaps, nearly
/// every built-in — and is 422 for custom resources, CRDs and APIServices; only a stale one
/// conflicts.
async fn unconditional_updates(backend: Backend) {
    let api = Api::on(backend).await.with_crd().await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    assert_eq!(api.post("/api/v1/nodes", &node).await.code, 201);
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    assert_eq!(api.post("/api/v1/namespaces/default/configmaps", &configmap).await.code, 201);
    for (path, mut object) in [("/api/v1/nodes/n1", node), ("/api/v1/namespaces/default/configmaps/c", configmap)] {
        for (at, rv) in [None, Some(""), Some("0")].into_iter().enumerate() {
            object["metadata"]["labels"] = json!({"at": at.to_string()});
            if let Some(rv) = rv {
                object["metadata"]["resourceVersion"] = json!(rv);
            }
            let replaced = api.put(path, &object).await;
            assert_eq!(replaced.code, 200, "{path} with {rv:?}: {replaced:?}");
            assert_eq!(replaced.body["metadata"]["labels"]["at"], at.to_string());
        }
        object["metadata"]["resourceVersion"] = json!("1");
        assert_eq!(api.put(path, &object).await.code, 409, "{path} with a stale resourceVersion");
    }
    assert_eq!(api.post(CRONTABS_V1, &crontab("x", "v1")).await.code, 201);
    for rv in [None, Some("0")] {
        let mut object = crontab("x", "v1");
        if let Some(rv) = rv {
            object["metadata"]["resourceVersion"] = json!(rv);
        }
        let refused = api.put(&format!("{CRONTABS_V1}/x"), &object).await;
        assert_eq!(refused.code, 422, "{refused:?}");
        assert_eq!(
            refused.body["message"],
            "crontabs.example.com \"x\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
        );
    }
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";
    let mut crd = api.get(crd_path).await.body;
    crd["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let refused = api.put(crd_path, &crd).await;
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(refused.body["message"].as_str().unwrap().starts_with(
        "customresourcedefinitions.apiextensions.k8s.io \"crontabs.example.com\" is invalid: metadata.resourceVersion"
    ));
}

/// A body that does not decode to a Namespace is 400 with upstream's words: the typed
/// decoder's `transformDecodeError` (what it could not read, and the body's start), or, for an
/// object of another kind, why it cannot be handled as one.
async fn undecodable_bodies(backend: Backend) {
    let api = Api::on(backend).await;
    let unreadable = "the object provided is unrecognized (must be of type Namespace)";
    let gvk_struct = r#"Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;
    let cases = [
        ("application/json", "{", format!("{unreadable}: couldn't get version/kind; json parse error: unexpected end of JSON input ({{)")),
        ("application/json", "", format!("{unreadable}: couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)")),
        ("application/json", "{\"kind\" \"Namespace\"}", format!("{unreadable}: couldn't get version/kind; json parse error: invalid character '\"' after object key ({{\"kind\" \"Namespace\"}})")),
        ("application/json", "[1]", format!("{unreadable}: json: cannot unmarshal array into {gvk_struct} (5b315d)")),
        ("application/yaml", "hello", format!("{unreadable}: json: cannot unmarshal string into {gvk_struct} (68656c6c6f)")),
        ("application/json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"q"}}"#,
            r#"ConfigMap in version "v1" cannot be handled as a Namespace: converting (v1.ConfigMap) to (core.Namespace): unknown conversion"#.into()),
        ("application/json", r#"{"apiVersion":"v1","kind":"namespace","metadata":{"name":"q"}}"#,
            r#"namespace in version "v1" cannot be handled as a Namespace: no kind "namespace" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30""#.into()),
    ];
    for (content_type, body, message) in cases {
        let answer = api.send("POST", "/api/v1/namespaces", content_type, Some(body.as_bytes().to_vec())).await;
        assert_eq!((answer.code, answer.body["reason"].as_str()), (400, Some("BadRequest")), "{body}: {answer:?}");
        assert_eq!(answer.body["message"], message, "{body}");
    }
}

/// What kube-apiserver makes itself when it starts and tools look for, each made through the
/// create path (defaulted, owned by `kube-apiserver`).
async fn objects_the_server_makes_itself(backend: Backend) {
    let api = Api::on(backend).await;
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(api.get(&format!("/api/v1/namespaces/{namespace}")).await.code, 200, "{namespace}");
    }
    let service = api.get("/api/v1/namespaces/default/services/kubernetes").await.body;
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.1", "{service}");
    assert_eq!(api.get("/api/v1/namespaces/default/endpoints/kubernetes").await.code, 200);
    let slice = api.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes").await.body;
    assert_eq!(slice["metadata"]["labels"]["kubernetes.io/service-name"], "kubernetes", "{slice}");
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true, "{slice}");
    assert_eq!(slice["metadata"]["managedFields"][0]["manager"], "kube-apiserver", "{slice}");
    let authentication = api.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication").await;
    assert_eq!(authentication.code, 200, "{authentication:?}");
    for (name, value) in [("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)] {
        let class = api.get(&format!("/apis/scheduling.k8s.io/v1/priorityclasses/{name}")).await.body;
        assert_eq!(
            (class["value"].as_i64(), class["preemptionPolicy"].as_str()),
            (Some(value), Some("PreemptLowerPriority")),
            "{class}"
        );
    }
}

on_each_backend!(
    objects_the_server_makes_itself,
    undecodable_bodies,
    unconditional_updates,
    horizontal_pod_autoscalers,
    workloads,
    pods,
    strategic_merge_patches,
    services,
    built_in_openapi,
    namespaces_and_generated_names,
    namespace_finalizers_and_subresources,
    built_in_resources,
    other_built_in_kinds,
    built_in_types_and_their_field_selectors,
    crd_lifecycle,
    crd_schema_refusals,
    discovery,
    custom_resources,
    custom_resource_rules,
    lists_and_watches,
    stored_objects_read_as_text_and_as_values_alike,
    bad_input,
    upgrade_safety_gate,
    collections_and_conflicts,
);

/// A server whose generated names come from a script, counting the names drawn.
async fn scripted_names(suffixes: &'static [&'static str]) -> (Api, Arc<std::sync::atomic::AtomicUsize>) {
    let drawn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&drawn);
    let names = crdctl_server::object::NameGenerator::new(move |prefix| {
        let at = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        format!("{prefix}{}", suffixes[at.min(suffixes.len() - 1)])
    });
    let config = Config { names, ..Config::default() };
    let server = TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap();
    (Api { server, http: reqwest::Client::new(), _keep: None }.with_crd().await, drawn)
}

/// As kube-apiserver since 1.32 (`RetryGenerateName`): a generated name that exists is drawn
/// again, up to 8 names in all, and only then is the create refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_name_that_exists_is_drawn_again_up_to_eight_times() {
    let (api, drawn) = scripted_names(&["b", "b", "b", "c"]).await;
    assert_eq!(api.post(CRONTABS_V1, &crontab("web-b", "v1")).await.code, 201);
    let drawn_before = drawn.load(std::sync::atomic::Ordering::SeqCst);
    let mut object = crontab("", "v1");
    object["metadata"] = json!({"generateName": "web-"});
    let created = api.post(CRONTABS_V1, &object).await;
    assert_eq!(created.code, 201, "{created:?}");
    assert_eq!(created.body["metadata"]["name"], "web-c");
    assert_eq!(drawn.load(std::sync::atomic::Ordering::SeqCst) - drawn_before, 4);

    let (api, drawn) = scripted_names(&["b"]).await;
    assert_eq!(api.post(CRONTABS_V1, &crontab("web-b", "v1")).await.code, 201);
    let refused = api.post(CRONTABS_V1, &object).await;
    assert_eq!(drawn.load(std::sync::atomic::Ordering::SeqCst), 8);
    assert_eq!((refused.code, refused.body["reason"].as_str()), (409, Some("AlreadyExists")), "{refused:?}");
    assert_eq!(
        refused.body["message"],
        r#"crontabs.example.com "web-b" already exists, the server was not able to generate a unique name for the object"#
    );
    assert_eq!(refused.body["details"]["retryAfterSeconds"], 1);
    // A name the client chose is refused at once, as before.
    let taken = api.post(CRONTABS_V1, &crontab("web-b", "v1")).await;
    assert_eq!(taken.body["message"], r#"crontabs.example.com "web-b" already exists"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_kubernetes_mode_skips_the_safety_gate() {
    let config = Config { upgrade_safety: UpgradeSafety::None, ..Config::default() };
    let server = TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap();
    let api = Api { server, http: reqwest::Client::new(), _keep: None }.with_crd().await;
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";
    let mut crd = api.get(path).await.body;
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["cronSpec"]["type"] =
        json!("integer");
    assert_eq!(api.put(path, &crd).await.code, 200);
}

/// The gate judges the stored objects too: 100 CronTabs, 2 with more replicas than a new rule
/// allows and 3 in an enum value the update removes. `Strict` refuses, each cause with the
/// objects it affects; `None` accepts, warning of what the stored objects would meet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_updates_are_judged_against_the_stored_objects() {
    for safety in [UpgradeSafety::Strict, UpgradeSafety::None] {
        let config = Config { upgrade_safety: safety, ..Config::default() };
        let server = TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap();
        let api = Api { server, http: reqwest::Client::new(), _keep: None }.with_crd().await;
        for n in 0..100 {
            let mut object = crontab(&format!("ct-{n:02}"), "v1");
            object["spec"]["replicas"] = json!(if n == 7 || n == 42 { 20 } else { 1 });
            object["spec"]["mode"] = json!(if n % 40 == 10 { "b" } else { "a" });
            assert_eq!(api.post(CRONTABS_V1, &object).await.code, 201);
        }
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";
        let mut crd = api.get(path).await.body;
        let spec = &mut crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["x-kubernetes-validations"] = json!([{"rule": "self.replicas <= 10", "message": "at most 10 replicas"}]);
        spec["properties"]["mode"]["enum"] = json!(["a"]);
        let answer = api.put(path, &crd).await;
        match safety {
            UpgradeSafety::Strict => {
                assert_eq!(answer.code, 422, "{answer:?}");
                let causes: Vec<&str> = answer.body["details"]["causes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["message"].as_str().unwrap())
                    .collect();
                assert!(
                    causes.iter().any(|c| c.contains(r#"enum"#)
                        && c.ends_with("— 3 of 100 objects use it: default/ct-10, default/ct-50, default/ct-90")),
                    "{causes:#?}"
                );
                let unknown = "version \"v1\", field \"^.spec\" has unknown change, refusing to determine that change is safe — 5 of 100 objects use it: default/ct-07, default/ct-10, default/ct-42, default/ct-50, default/ct-90";
                assert!(causes.iter().any(|c| c.ends_with(unknown)), "{causes:#?}");
                assert!(answer.warnings.is_empty(), "{answer:?}");
            }
            UpgradeSafety::None => {
                assert_eq!(answer.code, 200, "{answer:?}");
                assert_eq!(
                    answer.warnings,
                    [
                        r#"299 - "CRD upgrade: 2 stored CronTabs fail the new schema at v1: spec: Invalid value: \"object\": at most 10 replicas (updates that leave it unchanged pass) (default/ct-07, default/ct-42)""#,
                        r#"299 - "CRD upgrade: 3 stored CronTabs fail the new schema at v1: spec.mode: Unsupported value: \"b\": supported values: \"a\" (updates that leave it unchanged pass) (default/ct-10, default/ct-50, default/ct-90)""#,
                    ]
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_configured() {
    let config = Config { token: Some("s3cret".into()), ..Config::default() };
    let server = TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap();
    let http = reqwest::Client::new();
    let anonymous = http.get(format!("{}/apis", server.url())).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let status: Value = anonymous.json().await.unwrap();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("Unauthorized")));
    let authorized = http.get(format!("{}/apis", server.url())).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(authorized.status().as_u16(), 200);

    // A ServiceAccount's token (the `token` subresource) authenticates too, and a TokenReview
    // names its account; a token altered by one byte does neither.
    let url = |path: &str| format!("{}{path}", server.url());
    let requested = http
        .post(url("/api/v1/namespaces/default/serviceaccounts/default/token"))
        .bearer_auth("s3cret")
        .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}))
        .send()
        .await
        .unwrap();
    assert_eq!(requested.status().as_u16(), 201);
    let requested: Value = requested.json().await.unwrap();
    let token = requested["status"]["token"].as_str().unwrap().to_string();
    assert!(requested["status"]["expirationTimestamp"].as_str().unwrap().ends_with('Z'), "{requested}");
    let as_account = http.get(url("/api/v1/namespaces/default/configmaps")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(as_account.status().as_u16(), 200);
    let review = |token: String| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let reviewed = http
        .post(url("/apis/authentication.k8s.io/v1/tokenreviews"))
        .bearer_auth(&token)
        .json(&review(token.clone()))
        .send()
        .await
        .unwrap();
    let reviewed: Value = reviewed.json().await.unwrap();
    assert_eq!(reviewed["status"]["user"]["username"], "system:serviceaccount:default:default", "{reviewed}");
    let mut altered = token.clone().into_bytes();
    let last = altered.len() - 5;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let refused = http.get(url("/api/v1/namespaces/default/configmaps")).bearer_auth(&altered).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let reviewed = http
        .post(url("/apis/authentication.k8s.io/v1/tokenreviews"))
        .bearer_auth("s3cret")
        .json(&review(altered))
        .send()
        .await
        .unwrap();
    let reviewed: Value = reviewed.json().await.unwrap();
    assert_eq!(reviewed["status"]["authenticated"], false, "{reviewed}");
    let missing = http
        .post(url("/api/v1/namespaces/default/serviceaccounts/nobody/token"))
        .bearer_auth("s3cret")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

async fn collections_and_conflicts(backend: Backend) {
    let api = Api::on(backend).await;
    let api = api.with_crd().await;
    for name in ["x1", "x2", "x3"] {
        let mut object = crontab(name, "v1");
        object["metadata"]["labels"] = json!({"batch": if name == "x3" { "keep" } else { "drop" }});
        assert_eq!(api.post(CRONTABS_V1, &object).await.code, 201);
    }
    let deleted = api.delete(&format!("{CRONTABS_V1}?labelSelector=batch%3Ddrop")).await;
    assert_eq!(deleted.code, 200, "{deleted:?}");
    let left = api.get(CRONTABS_V1).await;
    let names: Vec<&str> =
        left.body["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["x3"]);

    // An update that changes nothing stores nothing: the resourceVersion stays.
    let x3 = api.get(&format!("{CRONTABS_V1}/x3")).await.body;
    let unchanged = api.put(&format!("{CRONTABS_V1}/x3"), &x3).await;
    assert_eq!(unchanged.code, 200);
    assert_eq!(unchanged.body["metadata"]["resourceVersion"], x3["metadata"]["resourceVersion"]);
    let mut changed = x3.clone();
    changed["spec"]["replicas"] = json!(3);
    let written = api.put(&format!("{CRONTABS_V1}/x3"), &changed).await;
    assert_ne!(written.body["metadata"]["resourceVersion"], x3["metadata"]["resourceVersion"]);

    // JSON patch as upstream's library: testing a missing path for null succeeds (how
    // kube-runtime adds a first finalizer); once the path exists the same test fails.
    let add_finalizer = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}]);
    let x3 = format!("{CRONTABS_V1}/x3");
    let added = api.patch(&x3, "application/json-patch+json", &add_finalizer).await;
    assert_eq!(added.code, 200, "{added:?}");
    assert_eq!(added.body["metadata"]["finalizers"], json!(["example.com/keep"]));
    let again = api.patch(&x3, "application/json-patch+json", &add_finalizer).await;
    assert_eq!(again.code, 422, "{again:?}");
    assert!(again.body["message"].as_str().unwrap().contains("operation '/0' failed"), "{again:?}");
    let removed =
        api.patch(&x3, "application/json-patch+json", &json!([{"op": "remove", "path": "/metadata/finalizers"}])).await;
    assert_eq!(removed.code, 200);

    // A second CRD in the group with the same kind: names not accepted, not established, not served.
    let mut rival: Value = serde_json::from_str(CRD).unwrap();
    rival["metadata"]["name"] = json!("rivals.example.com");
    rival["spec"]["names"] = json!({"plural": "rivals", "kind": "CronTab"});
    let created = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &rival).await;
    assert_eq!(created.code, 201);
    let conditions = created.body["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "NamesAccepted" && c["status"] == "False" && c["reason"] == "KindConflict")
    );
    assert!(conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "False"));
    assert_eq!(api.get("/apis/example.com/v1/namespaces/default/rivals").await.code, 404);
    let resources = api.get("/apis/example.com/v1").await;
    assert!(!resources.body["resources"].as_array().unwrap().iter().any(|r| r["name"] == "rivals"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_older_than_the_history_window_is_410_expired_and_timeouts_end_watches() {
    let server =
        TestServer::start_with(Config::default(), Arc::new(crdctl_storage::memory::open_with_window(5))).await.unwrap();
    let api = Api { server, http: reqwest::Client::new(), _keep: None }.with_crd().await;
    for idx in 0..10 {
        assert_eq!(api.post(CRONTABS_V1, &crontab(&format!("w{idx}"), "v1")).await.code, 201);
    }
    let url = format!("{}{CRONTABS_V1}?watch=true&resourceVersion=2", api.server.url());
    let body = api.http.get(url).send().await.unwrap().text().await.unwrap();
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!((event["object"]["code"].as_u64(), event["object"]["reason"].as_str()), (Some(410), Some("Expired")));
    // A continue token from before the window is 410 as well.
    let page = api.get(&format!("{CRONTABS_V1}?limit=2")).await;
    let token = page.body["metadata"]["continue"].as_str().unwrap().to_string();
    for idx in 10..20 {
        api.post(CRONTABS_V1, &crontab(&format!("w{idx}"), "v1")).await;
    }
    let expired = api.get(&format!("{CRONTABS_V1}?limit=2&continue={token}")).await;
    assert_eq!((expired.code, expired.body["reason"].as_str()), (410, Some("Expired")));
    // timeoutSeconds ends the stream by itself, after the initial events.
    let started = std::time::Instant::now();
    let url = format!("{}{CRONTABS_V1}?watch=true&timeoutSeconds=1", api.server.url());
    let body = tokio::time::timeout(Duration::from_secs(10), async {
        api.http.get(url).send().await.unwrap().text().await.unwrap()
    })
    .await
    .expect("the watch ended");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(body.lines().count(), 20, "one ADDED per object");
}

/// etcd refuses values over its request limit (1.5 MiB): as upstream, the write is tried once
/// more without `managedFields`, and what still does not fit is a 500 `InternalError` with
/// etcd's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_too_large_for_etcd_shed_managed_fields_then_fail_as_upstream() {
    let api = Api::on(Backend::Etcd).await.with_blobs().await;
    // ~0.8 MB of fields, and about as much again in managedFields: too large together.
    let fields: serde_json::Map<String, Value> = (0..60_000).map(|i| (format!("k{i:05}"), json!("v"))).collect();
    let many = json!({"apiVersion": "example.com/v1", "kind": "Blob", "metadata": {"name": "many"}, "spec": fields});
    let created = api.post(BLOBS, &many).await;
    assert_eq!(created.code, 201, "{:?}", created.body["message"]);
    assert!(created.body["metadata"].get("managedFields").is_none(), "managedFields gave way");
    assert_eq!(created.body["spec"].as_object().unwrap().len(), 60_000);
    let huge = json!({"apiVersion": "example.com/v1", "kind": "Blob", "metadata": {"name": "huge"},
        "spec": {"blob": "x".repeat(1_800_000)}});
    let refused = api.post(BLOBS, &huge).await;
    assert_eq!(refused.code, 500);
    assert_eq!(refused.body["reason"], "InternalError");
    assert_eq!(refused.body["message"], "Internal error occurred: etcdserver: request is too large");
    assert_eq!(api.get(&format!("{BLOBS}/huge")).await.code, 404, "nothing was written");
}

/// Reads a watch's lines until `want` events have come or the stream ends; the names of the
/// objects added, and the last `resourceVersion`.
async fn read_watch(response: &mut reqwest::Response, want: usize) -> (Vec<String>, String) {
    let (mut names, mut last, mut pending) = (Vec::new(), String::new(), Vec::new());
    while names.len() < want {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk()).await.unwrap().unwrap();
        let Some(chunk) = chunk else { break };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(event["type"], "ADDED", "{event}");
            names.push(event["object"]["metadata"]["name"].as_str().unwrap().to_string());
            last = event["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        }
    }
    (names, last)
}

/// A watcher whose client stops reading is closed once its buffer stays full for the stall
/// timeout, as kube-apiserver closes a watcher that falls behind, while another watcher gets
/// every event; watching again from its last `resourceVersion`, it misses nothing and sees
/// nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_closed_and_resumes_where_it_left_off() {
    const OBJECTS: usize = 400;
    let config = Config { watch_stall_timeout: Duration::from_millis(300), ..Config::default() };
    let server = TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap();
    let api = Api { server, http: reqwest::Client::new(), _keep: None }.with_blobs().await;
    let rv = api.get(BLOBS).await.body["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = |rv: String| {
        let url = format!("{}{BLOBS}?watch=true&resourceVersion={rv}&timeoutSeconds=60", api.server.url());
        api.http.get(url).send()
    };
    let mut slow = watch(rv.clone()).await.unwrap();
    let mut fast = watch(rv).await.unwrap();
    let reader = tokio::spawn(async move { read_watch(&mut fast, OBJECTS).await.0 });

    // 64 KiB each: far more than the buffers of the connection that nobody reads.
    let expected: Vec<String> = (0..OBJECTS).map(|i| format!("blob-{i:04}")).collect();
    for name in &expected {
        let blob = json!({"apiVersion": "example.com/v1", "kind": "Blob", "metadata": {"name": name},
            "data": "x".repeat(64 * 1024)});
        assert_eq!(api.post(BLOBS, &blob).await.code, 201);
    }
    assert_eq!(reader.await.unwrap(), expected, "the reading watcher got every event once, in order");

    let (before, last) = read_watch(&mut slow, OBJECTS).await;
    assert!(before.len() < OBJECTS, "the stalled watch was closed after {} events", before.len());
    assert_eq!(before, expected[..before.len()], "what it got before it was closed is in order");
    let mut resumed = watch(last).await.unwrap();
    let (after, _) = read_watch(&mut resumed, OBJECTS - before.len()).await;
    assert_eq!([before, after].concat(), expected, "resumed from its last resourceVersion");
}

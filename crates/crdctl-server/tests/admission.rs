//! Admission webhooks on every write, against a webhook served over TLS in the test (certificates
//! made here): a mutating webhook that defaults a field with a `JSONPatch`, validating webhooks
//! that deny by label, on update and on delete, and the answers upstream refuses — each with
//! upstream's status and text, and nothing stored when refused.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::Path;
use axum::routing::post;
use base64::Engine;
use crdctl_conversion::{certs, framework};
use crdctl_server::testing::TestServer;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRONTABS: &str = "/apis/example.com/v1/namespaces/default/crontabs";
const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

/// The test's webhook: what each path answers to an `AdmissionReview`.
async fn answer(Path(behaviour): Path<String>, Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let labels = request["object"]["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    let old_labels = request["oldObject"]["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    let response = match behaviour.as_str() {
        "deny-label" if labels.contains_key("forbidden") => json!({"uid": uid, "allowed": false,
            "status": {"code": 403, "message": "label forbidden is not allowed"}}),
        "deny-label" => json!({"uid": uid, "allowed": true, "warnings": ["checked by deny-label"]}),
        "protect" if old_labels.contains_key("protected") => json!({"uid": uid, "allowed": false,
            "status": {"message": format!("{} of a protected CronTab", request["operation"].as_str().unwrap())}}),
        "default-replicas" if request["object"]["spec"]["replicas"].is_null() => {
            let patch = json!([{"op": "add", "path": "/spec/replicas", "value": 3}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "too-many-replicas" => {
            let patch = json!([{"op": "add", "path": "/spec/replicas", "value": 9}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "patch-type" => json!({"uid": uid, "allowed": true, "patchType": "MergePatch", "patch": "e30="}),
        "patch-unusable" => {
            let patch = json!([{"op": "remove", "path": "/spec/nothing"}]);
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "allowed-missing" => json!({"uid": uid}),
        "wrong-uid" => json!({"uid": "not-the-uid", "allowed": true}),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json!({"uid": uid, "allowed": true})
        }
        "request" => {
            // Echo what the request carried, as a denial, for the test to read.
            json!({"uid": uid, "allowed": false, "status": {"message": serde_json::to_string(&json!({
                "kind": request["kind"], "resource": request["resource"], "name": request["name"],
                "requestKind": request["requestKind"], "seen": request["object"]["apiVersion"],
                "namespace": request["namespace"], "operation": request["operation"], "dryRun": request["dryRun"],
                "options": request["options"]["kind"], "user": request["userInfo"]["username"],
            })).unwrap()}})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    match behaviour.as_str() {
        "no-response" => Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})),
        _ => Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})),
    }
}

struct Setup {
    server: TestServer,
    http: reqwest::Client,
    webhook: String,
    ca_bundle: String,
    _tls: tempfile::TempDir,
    _webhook: framework::Server,
}

impl Setup {
    /// POSTs `body` to `path`, which must create it.
    async fn created(&self, path: &str, body: Value) {
        let (code, answer, _) = self.send(reqwest::Method::POST, path, Some(&body)).await;
        assert_eq!(code, 201, "{answer}");
    }

    async fn new() -> Setup {
        let bundle = certs::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = framework::Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, dir.path()).unwrap();
        let app = axum::Router::new().route("/{behaviour}", post(answer));
        let webhook = framework::start_app(options, app).await.unwrap();
        let server =
            TestServer::start_with(Default::default(), Arc::new(crdctl_storage::memory::open())).await.unwrap();
        let setup = Setup {
            server,
            http: reqwest::Client::new(),
            webhook: format!("https://127.0.0.1:{}", webhook.address.port()),
            ca_bundle: bundle.ca_bundle(),
            _tls: dir,
            _webhook: webhook,
        };
        let version = |name: &str| {
            json!({"name": name, "served": true, "storage": name == "v1",
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "cronSpec": {"type": "string"}, "replicas": {"type": "integer", "maximum": 5}}}}}}})
        };
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                "versions": [version("v1beta1"), version("v1")]}});
        assert_eq!(setup.send(reqwest::Method::POST, CRDS, Some(&crd)).await.0, 201);
        setup
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value, Vec<String>) {
        let mut request = self.http.request(method, format!("{}{path}", self.server.url()));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        let warnings = response.headers().get_all("Warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
        (code, response.json().await.unwrap_or(Value::Null), warnings)
    }

    /// A webhook configuration (`kind` is `validating` or `mutating`) with one webhook per entry.
    async fn configure(&self, kind: &str, name: &str, webhooks: Vec<Value>) {
        let (path, kind_name) = match kind {
            "mutating" => (MUTATING, "MutatingWebhookConfiguration"),
            _ => (VALIDATING, "ValidatingWebhookConfiguration"),
        };
        let configuration = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind_name,
            "metadata": {"name": name}, "webhooks": webhooks});
        let (code, body, _) = self.send(reqwest::Method::POST, path, Some(&configuration)).await;
        assert_eq!(code, 201, "{body}");
    }

    /// A webhook on CronTabs answering as `behaviour`, with `extra` fields.
    fn webhook(&self, name: &str, behaviour: &str, operations: &[&str], extra: Value) -> Value {
        let mut webhook = json!({"name": name,
            "clientConfig": {"url": format!("{}/{behaviour}", self.webhook), "caBundle": self.ca_bundle},
            "rules": [{"operations": operations, "apiGroups": ["example.com"], "apiVersions": ["*"], "resources": ["crontabs"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        for (key, value) in extra.as_object().unwrap() {
            webhook[key] = value.clone();
        }
        webhook
    }

    async fn stored(&self, name: &str) -> Option<Value> {
        let (code, body, _) = self.send(reqwest::Method::GET, &format!("{CRONTABS}/{name}"), None).await;
        (code == 200).then_some(body)
    }
}

fn crontab(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": name, "labels": labels}, "spec": {"cronSpec": "* * * * */5"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_then_validating_webhooks_on_create_update_and_delete() {
    let setup = Setup::new().await;
    setup
        .configure(
            "mutating",
            "defaults",
            vec![setup.webhook("replicas.example.com", "default-replicas", &["CREATE"], json!({}))],
        )
        .await;
    setup
        .configure(
            "validating",
            "labels",
            vec![
                setup.webhook("deny.example.com", "deny-label", &["CREATE", "UPDATE"], json!({})),
                setup.webhook("protect.example.com", "protect", &["UPDATE", "DELETE"], json!({})),
            ],
        )
        .await;

    // The mutating webhook's patch is stored; the validating webhook's warning is sent on.
    let (code, created, warnings) = setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("a", json!({})))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["replicas"], 3);
    assert_eq!(warnings, [r#"299 - "checked by deny-label""#]);

    // A denial: upstream's status and text, and nothing stored.
    let (code, refused, _) =
        setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("b", json!({"forbidden": "yes"})))).await;
    assert_eq!(code, 403, "{refused}");
    assert_eq!(refused["reason"], "Forbidden");
    assert_eq!(
        refused["message"],
        r#"crontabs.example.com "b" is forbidden: admission webhook "deny.example.com" denied the request: label forbidden is not allowed"#
    );
    assert_eq!(refused["details"], json!({"name": "b", "group": "example.com", "kind": "crontabs"}));
    assert!(setup.stored("b").await.is_none());

    // Updates and deletes of a protected object are refused; the object is as it was.
    let (code, mut protected, _) =
        setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("p", json!({"protected": "yes"})))).await;
    assert_eq!(code, 201);
    protected["spec"]["cronSpec"] = json!("0 * * * *");
    let (code, refused, _) = setup.send(reqwest::Method::PUT, &format!("{CRONTABS}/p"), Some(&protected)).await;
    assert_eq!(
        (code, refused["message"].as_str()),
        (
            403,
            Some(
                r#"crontabs.example.com "p" is forbidden: admission webhook "protect.example.com" denied the request: UPDATE of a protected CronTab"#
            )
        )
    );
    let (code, refused, _) = setup.send(reqwest::Method::DELETE, &format!("{CRONTABS}/p"), None).await;
    assert_eq!(
        (code, refused["message"].as_str()),
        (
            403,
            Some(
                r#"crontabs.example.com "p" is forbidden: admission webhook "protect.example.com" denied the request: DELETE of a protected CronTab"#
            )
        )
    );
    assert_eq!(setup.stored("p").await.unwrap()["spec"]["cronSpec"], "* * * * */5");

    // The mutated object is validated against the schema afterwards: a patch past the maximum
    // is the schema's refusal.
    assert_eq!(setup.send(reqwest::Method::DELETE, &format!("{MUTATING}/defaults"), None).await.0, 200);
    setup
        .configure(
            "mutating",
            "excess",
            vec![setup.webhook("excess.example.com", "too-many-replicas", &["CREATE"], json!({}))],
        )
        .await;
    let (code, invalid, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("x", json!({})))).await;
    assert_eq!((code, invalid["reason"].as_str()), (422, Some("Invalid")), "{invalid}");
    assert_eq!(
        invalid["message"],
        r#"CronTab.example.com "x" is invalid: spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_carries_upstreams_attributes() {
    let setup = Setup::new().await;
    setup
        .configure("validating", "echo", vec![setup.webhook("echo.example.com", "request", &["CREATE"], json!({}))])
        .await;
    let (code, refused, _) = setup
        .send(
            reqwest::Method::POST,
            &format!("{CRONTABS}?dryRun=All&fieldManager=tester"),
            Some(&crontab("e", json!({}))),
        )
        .await;
    assert_eq!(code, 403);
    let message = refused["message"].as_str().unwrap();
    let echoed: Value = serde_json::from_str(message.split_once("denied the request: ").unwrap().1).unwrap();
    assert_eq!(
        echoed,
        json!({"kind": {"group": "example.com", "version": "v1", "kind": "CronTab"},
            "requestKind": {"group": "example.com", "version": "v1", "kind": "CronTab"}, "seen": "example.com/v1",
            "resource": {"group": "example.com", "version": "v1", "resource": "crontabs"},
            "name": "e", "namespace": "default", "operation": "CREATE", "dryRun": true,
            "options": "CreateOptions", "user": "system:admin"})
    );
}

/// Each failure as upstream reports it: under `Fail` a 500 naming the webhook, under `Ignore`
/// the write goes on; a dry run refused by a webhook with side effects; an answer with the
/// wrong uid; a timeout; and selectors and match conditions that leave a webhook out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_policies_and_matching() {
    let setup = Setup::new().await;
    let down = json!({"url": "https://127.0.0.1:1/down", "caBundle": setup.ca_bundle});
    setup
        .configure("validating", "down", vec![
            json!({"name": "down.example.com", "clientConfig": down, "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "objectSelector": {"matchLabels": {"case": "fail"}},
                "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["crontabs"]}]}),
            json!({"name": "ignored.example.com", "clientConfig": down, "failurePolicy": "Ignore", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "objectSelector": {"matchLabels": {"case": "ignore"}},
                "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["crontabs"]}]}),
            setup.webhook("liar.example.com", "wrong-uid", &["CREATE"], json!({"objectSelector": {"matchLabels": {"case": "lie"}}})),
            setup.webhook("slow.example.com", "slow", &["CREATE"], json!({"timeoutSeconds": 1, "objectSelector": {"matchLabels": {"case": "slow"}}})),
            setup.webhook("effects.example.com", "allow", &["CREATE"], json!({"sideEffects": "Some", "objectSelector": {"matchLabels": {"case": "dry"}}})),
            setup.webhook("named.example.com", "deny-label", &["CREATE"], json!({
                "matchConditions": [{"name": "not-skipped", "expression": "object.metadata.name != 'skip'"}],
                "objectSelector": {"matchLabels": {"forbidden": "yes"}}})),
        ])
        .await;
    let create = |name: &str, labels: Value| {
        let object = crontab(name, labels);
        let setup = &setup;
        async move { setup.send(reqwest::Method::POST, CRONTABS, Some(&object)).await }
    };

    let (code, failed, _) = create("f", json!({"case": "fail"})).await;
    assert_eq!((code, failed["reason"].as_str()), (500, Some("InternalError")), "{failed}");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:1/down?timeout=10s": "#),
        "{message}"
    );
    assert!(setup.stored("f").await.is_none());
    assert_eq!(create("i", json!({"case": "ignore"})).await.0, 201, "Ignore lets the write through");

    let (code, lied, _) = create("l", json!({"case": "lie"})).await;
    assert_eq!(code, 500);
    let message = lied["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"Internal error occurred: failed calling webhook "liar.example.com": expected response.uid="#
        ),
        "{message}"
    );
    assert!(message.ends_with(r#", got "not-the-uid""#), "{message}");

    let (code, slow, _) = create("s", json!({"case": "slow"})).await;
    assert_eq!(code, 500);
    assert!(slow["message"].as_str().unwrap().contains("timeout=1s"), "{slow}");
    assert!(slow["message"].as_str().unwrap().contains("context deadline exceeded"), "{slow}");

    let dry = crontab("d", json!({"case": "dry"}));
    let (code, refused, _) = setup.send(reqwest::Method::POST, &format!("{CRONTABS}?dryRun=All"), Some(&dry)).await;
    assert_eq!((code, refused["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(refused["message"], r#"admission webhook "effects.example.com" does not support dry run"#);
    assert_eq!(create("d", json!({"case": "dry"})).await.0, 201, "without dry run the webhook is called");

    // The match condition leaves `skip` out; the object selector everything unlabelled.
    assert_eq!(create("skip", json!({"forbidden": "yes"})).await.0, 201);
    assert_eq!(create("other", json!({"forbidden": "yes"})).await.0, 403);
    assert_eq!(create("plain", json!({})).await.0, 201);

    // No webhook sees the admission configurations themselves: the broken one can be removed.
    assert_eq!(setup.send(reqwest::Method::DELETE, &format!("{VALIDATING}/down"), None).await.0, 200);
    assert_eq!(create("f", json!({"case": "fail"})).await.0, 201);
}

fn policy(name: &str, rules: Value, spec: Value) -> Value {
    let mut policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": rules}}});
    for (key, value) in spec.as_object().unwrap() {
        policy["spec"][key] = value.clone();
    }
    policy
}

fn binding(name: &str, policy: &str, actions: &[&str], extra: Value) -> Value {
    let mut binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": actions}});
    for (key, value) in extra.as_object().unwrap() {
        binding["spec"][key] = value.clone();
    }
    binding
}

const CRONTAB_RULES: &str = r#"[{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"], "apiVersions": ["*"], "resources": ["crontabs"]}]"#;

/// ValidatingAdmissionPolicies with parameters from a ConfigMap, variables, a message
/// expression, `Deny` and `Warn` bindings, and a missing parameter under `Deny`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_policies() {
    let setup = Setup::new().await;
    setup
        .created(
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "limits"}, "data": {"maxReplicas": "3"}}),
        )
        .await;
    let rules: Value = serde_json::from_str(CRONTAB_RULES).unwrap();
    setup
        .created(
            POLICIES,
            policy(
                "replicas",
                rules.clone(),
                json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [{"name": "replicas", "expression": "has(object.spec.replicas) ? object.spec.replicas : 1"}],
        "validations": [{"expression": "variables.replicas <= int(params.data.maxReplicas)",
            "messageExpression": "'replicas ' + string(variables.replicas) + ' > ' + params.data.maxReplicas"}]}),
            ),
        )
        .await;
    setup
        .created(
            BINDINGS,
            binding(
                "replicas-limit",
                "replicas",
                &["Deny"],
                json!({
        "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}),
            ),
        )
        .await;
    setup
        .created(
            POLICIES,
            policy(
                "names",
                rules,
                json!({
        "validations": [{"expression": "object.metadata.name.startsWith('ct-')"}]}),
            ),
        )
        .await;
    setup.created(BINDINGS, binding("names-warn", "names", &["Warn"], json!({}))).await;

    let mut big = crontab("ct-big", json!({}));
    big["spec"]["replicas"] = json!(4);
    let (code, refused, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&big)).await;
    assert_eq!((code, refused["reason"].as_str()), (422, Some("Invalid")), "{refused}");
    let cause = "ValidatingAdmissionPolicy 'replicas' with binding 'replicas-limit' denied request: replicas 4 > 3";
    assert_eq!(refused["message"], format!(r#"crontabs.example.com "ct-big" is forbidden: {cause}"#));
    assert_eq!(refused["details"]["causes"], json!([{"message": cause}]));
    assert!(setup.stored("ct-big").await.is_none());
    // A refusal carries the warnings the request earned before it, as upstream's.
    big["metadata"]["name"] = json!("big");
    let (code, _, warnings) = setup.send(reqwest::Method::POST, CRONTABS, Some(&big)).await;
    assert_eq!(code, 422);
    assert_eq!(
        warnings,
        [
            r#"299 - "Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names-warn': failed expression: object.metadata.name.startsWith('ct-')""#
        ]
    );

    let (code, created, warnings) =
        setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("small", json!({})))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names-warn': failed expression: object.metadata.name.startsWith('ct-')""#
        ]
    );

    // Without its parameter object, the `Deny` parameterNotFoundAction refuses.
    let (code, _, _) = setup.send(reqwest::Method::DELETE, "/api/v1/namespaces/default/configmaps/limits", None).await;
    assert_eq!(code, 200);
    let (code, refused, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("ct-two", json!({})))).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "crontabs.example.com \"ct-two\" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'replicas-limit' denied request: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
}

/// A policy that refuses a CRD update: a standard-channel CRD replaced by an experimental one,
/// as gateway-api's `safe-upgrades` policy does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_refuses_a_crd_update() {
    let setup = Setup::new().await;
    let crd_rules = json!([{"operations": ["UPDATE"], "apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["v1"], "resources": ["customresourcedefinitions"]}]);
    let standard = "has(oldObject.metadata.labels) && 'channel' in oldObject.metadata.labels && oldObject.metadata.labels['channel'] == 'standard'";
    let still = "has(object.metadata.labels) && 'channel' in object.metadata.labels && object.metadata.labels['channel'] == 'standard'";
    setup
        .created(
            POLICIES,
            policy(
                "safe-upgrades",
                crd_rules,
                json!({"validations": [{
        "expression": format!("!({standard}) || ({still})"), "reason": "Forbidden",
        "message": "experimental CRDs may not replace standard ones"}]}),
            ),
        )
        .await;
    setup.created(BINDINGS, binding("safe-upgrades", "safe-upgrades", &["Deny"], json!({}))).await;
    let path = format!("{CRDS}/crontabs.example.com");
    let (_, mut crd, _) = setup.send(reqwest::Method::GET, &path, None).await;
    crd["metadata"]["labels"] = json!({"channel": "standard"});
    let (code, labelled, _) = setup.send(reqwest::Method::PUT, &path, Some(&crd)).await;
    assert_eq!(code, 200, "{labelled}");
    let mut experimental = labelled.clone();
    experimental["metadata"]["labels"] = json!({"channel": "experimental"});
    let (code, refused, _) = setup.send(reqwest::Method::PUT, &path, Some(&experimental)).await;
    assert_eq!((code, refused["reason"].as_str()), (403, Some("Forbidden")), "{refused}");
    assert_eq!(
        refused["message"],
        r#"customresourcedefinitions.apiextensions.k8s.io "crontabs.example.com" is forbidden: ValidatingAdmissionPolicy 'safe-upgrades' with binding 'safe-upgrades' denied request: experimental CRDs may not replace standard ones"#
    );
}

/// Answers upstream refuses, each one webhook's answer to a create: the status and text
/// upstream gives, and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_upstream_refuses() {
    let cases: [(&str, &str, u16, &str); 6] = [
        (
            "mutating",
            "wrong-uid",
            500,
            r#"Internal error occurred: failed calling webhook "case.example.com": expected response.uid="#,
        ),
        (
            "mutating",
            "patch-type",
            500,
            r#"Internal error occurred: failed calling webhook "case.example.com": unsupported patch type "MergePatch""#,
        ),
        ("mutating", "patch-unusable", 500, "Internal error occurred: "),
        (
            "mutating",
            "too-many-replicas",
            422,
            r#"CronTab.example.com "x" is invalid: spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5"#,
        ),
        (
            "validating",
            "allowed-missing",
            403,
            r#"crontabs.example.com "x" is forbidden: admission webhook "case.example.com" denied the request without explanation"#,
        ),
        (
            "validating",
            "no-response",
            500,
            r#"Internal error occurred: failed calling webhook "case.example.com": webhook response was absent"#,
        ),
    ];
    let setup = Setup::new().await;
    for (kind, behaviour, code, message) in cases {
        setup.configure(kind, "case", vec![setup.webhook("case.example.com", behaviour, &["CREATE"], json!({}))]).await;
        let (answered, status, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("x", json!({})))).await;
        assert_eq!(answered, code, "{behaviour}: {status}");
        let text = status["message"].as_str().unwrap();
        assert!(text.starts_with(message), "{behaviour}: {status}");
        // A patch that does not apply is the server's own error, not a failed call.
        if behaviour == "patch-unusable" {
            assert!(!text.contains("failed calling webhook") && text.contains("/spec/nothing"), "{status}");
        }
        assert!(setup.stored("x").await.is_none(), "{behaviour}: nothing stored");
        let path = if kind == "mutating" { MUTATING } else { VALIDATING };
        assert_eq!(setup.send(reqwest::Method::DELETE, &format!("{path}/case"), None).await.0, 200);
    }
}

/// `matchPolicy: Equivalent` (the default): a webhook whose rules name only v1beta1 sees a v1
/// request's object converted to v1beta1, `requestKind` saying what was asked; its patch is
/// applied there and the result converted back. Under `Exact` it is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equivalent_versions_are_converted_for_the_webhook() {
    let setup = Setup::new().await;
    let at_v1beta1 = |name: &str, behaviour: &str, extra: Value| {
        let mut webhook = setup.webhook(name, behaviour, &["CREATE"], extra);
        webhook["rules"][0]["apiVersions"] = json!(["v1beta1"]);
        webhook
    };
    setup
        .configure("mutating", "defaults", vec![at_v1beta1("replicas.example.com", "default-replicas", json!({}))])
        .await;
    setup
        .configure(
            "validating",
            "echo",
            vec![
                at_v1beta1("echo.example.com", "request", json!({"objectSelector": {"matchLabels": {"echo": "yes"}}})),
                at_v1beta1(
                    "exact.example.com",
                    "request",
                    json!({"matchPolicy": "Exact", "objectSelector": {"matchLabels": {"exact": "yes"}}}),
                ),
            ],
        )
        .await;
    let (code, created, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("plain", json!({})))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!((created["apiVersion"].as_str(), &created["spec"]["replicas"]), (Some("example.com/v1"), &json!(3)));

    let (code, refused, _) =
        setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("e", json!({"echo": "yes"})))).await;
    assert_eq!(code, 403);
    let message = refused["message"].as_str().unwrap();
    let echoed: Value = serde_json::from_str(message.split_once("denied the request: ").unwrap().1).unwrap();
    assert_eq!(echoed["kind"], json!({"group": "example.com", "version": "v1beta1", "kind": "CronTab"}));
    assert_eq!(echoed["requestKind"], json!({"group": "example.com", "version": "v1", "kind": "CronTab"}));
    assert_eq!(echoed["seen"], "example.com/v1beta1");
    assert_eq!(setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("x", json!({"exact": "yes"})))).await.0, 201);
}

/// `namespaceSelector`: a webhook for namespaces labelled `admission: strict` sees the CronTabs
/// written there and no others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_selectors_read_the_namespaces_labels() {
    let setup = Setup::new().await;
    for (name, labels) in [("strict", json!({"admission": "strict"})), ("relaxed", json!({}))] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
        assert_eq!(setup.send(reqwest::Method::POST, "/api/v1/namespaces", Some(&namespace)).await.0, 201);
    }
    let selector = json!({"namespaceSelector": {"matchExpressions": [{"key": "admission", "operator": "In", "values": ["strict"]}]}});
    setup
        .configure(
            "validating",
            "strict",
            vec![setup.webhook("strict.example.com", "allowed-missing", &["CREATE"], selector)],
        )
        .await;
    let create = |namespace: &str| {
        let path = format!("/apis/example.com/v1/namespaces/{namespace}/crontabs");
        let setup = &setup;
        async move { setup.send(reqwest::Method::POST, &path, Some(&crontab("c", json!({})))).await.0 }
    };
    assert_eq!(create("strict").await, 403);
    assert_eq!(create("relaxed").await, 201);
    assert_eq!(create("default").await, 201);
}

/// A policy's `status.typeChecking`: each expression checked against the schema of every kind
/// its rules name (a CRD's version and a built-in kind), `params` typed by its `paramKind`, the
/// variables by their expressions — upstream's warnings, recorded as the policy is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_status_carries_the_type_checkers_warnings() {
    let setup = Setup::new().await;
    let rules = json!([
        {"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["crontabs"]},
        {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "*"]},
        {"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["pods"]}]);
    let checked = policy(
        "checked",
        rules,
        json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
        "validations": [
            {"expression": "object.spec.cronSpec == 'x'"},
            {"expression": "object.metadata.labels['a'] == params.datta"},
            {"expression": "variables.replicas > 1", "messageExpression": "object.spec.nope"},
            {"expression": "authorizer.group('').resource('endpoints').check('create').allowed()"},
            {"expression": "variables.replicas == 'three'"}]}),
    );
    let (code, created, _) = setup.send(reqwest::Method::POST, POLICIES, Some(&checked)).await;
    assert_eq!(code, 201, "{created}");
    let (_, read, _) = setup.send(reqwest::Method::GET, &format!("{POLICIES}/checked"), None).await;
    assert_eq!(read["status"]["observedGeneration"], 1);
    let warnings = &read["status"]["typeChecking"]["expressionWarnings"];
    let deployment = "apps/v1, Kind=Deployment";
    let crontab = "example.com/v1, Kind=CronTab";
    let undefined = |column: usize, field: &str, source: &str| {
        format!("ERROR: <input>:1:{column}: undefined field '{field}'\n | {source}\n | {}^", ".".repeat(column - 1))
    };
    assert_eq!(
        warnings,
        &json!([
            {"fieldRef": "spec.validations[0].expression",
             "warning": format!("{deployment}: {}\n", undefined(12, "cronSpec", "object.spec.cronSpec == 'x'"))},
            {"fieldRef": "spec.validations[1].expression",
             "warning": format!("{deployment}: {e}\n\n{crontab}: {e}\n",
                e = undefined(38, "datta", "object.metadata.labels['a'] == params.datta"))},
            {"fieldRef": "spec.validations[2].messageExpression",
             "warning": format!("{deployment}: {e}\n\n{crontab}: {e}\n", e = undefined(12, "nope", "object.spec.nope"))},
            {"fieldRef": "spec.validations[4].expression",
             "warning": format!("{deployment}: {e}\n\n{crontab}: {e}\n",
                e = "ERROR: <input>:1:20: found no matching overload for '_==_' applied to '(int, string)'\n | variables.replicas == 'three'\n | ...................^")},
        ]),
        "{warnings:#}"
    );

    // A change is checked again; the warnings go when the expressions are fixed.
    let mut fixed = read.clone();
    fixed["spec"]["validations"] = json!([{"expression": "object.spec.replicas > 0"}]);
    let (code, updated, _) = setup.send(reqwest::Method::PUT, &format!("{POLICIES}/checked"), Some(&fixed)).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["status"], json!({"observedGeneration": 2, "typeChecking": {}}));
    assert_eq!(
        (updated["spec"]["failurePolicy"].as_str(), updated["spec"]["matchConstraints"]["matchPolicy"].as_str()),
        (Some("Fail"), Some("Equivalent")),
        "upstream's defaults"
    );

    // What does not compile is refused, as upstream's validation refuses it.
    let rules: Value = serde_json::from_str(CRONTAB_RULES).unwrap();
    let unbound = policy("unbound", rules, json!({"validations": [{"expression": "params.max > 1"}]}));
    let (code, refused, _) = setup.send(reqwest::Method::POST, POLICIES, Some(&unbound)).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"unbound\" is invalid: spec.validations[0].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'\n | params.max > 1\n | ^"
    );
    let both = binding("both", "checked", &["Deny", "Warn"], json!({}));
    let (code, refused, _) = setup.send(reqwest::Method::POST, BINDINGS, Some(&both)).await;
    assert_eq!(code, 422, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("must not contain both Deny and Warn"), "{refused}");
}

/// `Audit` bindings and `auditAnnotations` admit the write (their record is the server's log),
/// an annotation that cannot be made refuses it under `failurePolicy: Fail`, the `authorizer`
/// allows every check, and `/metrics` counts each action as upstream's
/// `apiserver_validating_admission_policy_check_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_actions_annotations_and_the_authorizer() {
    let setup = Setup::new().await;
    let rules: Value = serde_json::from_str(CRONTAB_RULES).unwrap();
    let create = |path: &'static str, body: Value| {
        let setup = &setup;
        async move {
            let (code, answer, _) = setup.send(reqwest::Method::POST, path, Some(&body)).await;
            assert_eq!(code, 201, "{answer}");
        }
    };
    let may_read_secrets =
        "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()";
    create(
        POLICIES,
        policy(
            "audited",
            rules.clone(),
            json!({
        "validations": [{"expression": may_read_secrets}, {"expression": "object.metadata.name.startsWith('ct-')"},
            {"expression": "namespaceObject.metadata.name == object.metadata.namespace && request.operation == 'CREATE'"}],
        "auditAnnotations": [{"key": "schedule", "valueExpression": "object.spec.cronSpec"}]}),
        ),
    )
    .await;
    create(BINDINGS, binding("audited", "audited", &["Audit"], json!({}))).await;
    let (code, created, warnings) =
        setup.send(reqwest::Method::POST, CRONTABS, Some(&crontab("plain", json!({})))).await;
    assert_eq!((code, warnings.len()), (201, 0), "{created}");

    // An annotation whose value is neither a string nor null refuses the write.
    create(
        POLICIES,
        policy(
            "annotated",
            rules,
            json!({"auditAnnotations": [{"key": "replicas", "valueExpression": "object.spec.replicas"}]}),
        ),
    )
    .await;
    create(BINDINGS, binding("annotated", "annotated", &["Deny"], json!({}))).await;
    let mut counted = crontab("ct-counted", json!({}));
    counted["spec"]["replicas"] = json!(2);
    let (code, refused, _) = setup.send(reqwest::Method::POST, CRONTABS, Some(&counted)).await;
    assert_eq!((code, refused["reason"].as_str()), (422, Some("InternalError")), "{refused}");
    assert_eq!(
        refused["details"]["causes"][0]["message"],
        "ValidatingAdmissionPolicy 'annotated' with binding 'annotated' denied request: valueExpression 'object.spec.replicas' resulted in unsupported return type: int. Return type must be either string or null."
    );
    assert!(setup.stored("ct-counted").await.is_none());

    let metrics = setup.http.get(format!("{}/metrics", setup.server.url())).send().await.unwrap().text().await.unwrap();
    let audited = metrics.lines().filter(|l| l.contains(r#"policy="audited""#)).count();
    assert_eq!(audited, 1, "only the name check fails:\n{metrics}");
    for line in [
        r#"apiserver_validating_admission_policy_check_total{policy="audited",policy_binding="audited",error_type="no_error",enforcement_action="audit"} 1"#,
        r#"apiserver_validating_admission_policy_check_total{policy="annotated",policy_binding="annotated",error_type="invalid_error",enforcement_action="deny"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

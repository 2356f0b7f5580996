//! Authentication and authorization as kube-apiserver's filters: static tokens, ServiceAccount
//! tokens that die with their account, anonymous requests, impersonation checked against the
//! `impersonate` verb, RBAC decisions (bindings, aggregation, missing roles) with upstream's
//! 403 text, and the review APIs answering as the filters decide.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

mod http;

use std::time::Duration;

use crdctl_server::Config;
use crdctl_server::auth::Mode;
use crdctl_server::testing::TestServer;
use http::Http;
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret";
const JANE_TOKEN: &str = "jane-secret";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A server deciding by RBAC, with an administrator's token and jane's in a token file.
async fn server(anonymous: bool) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{JANE_TOKEN},jane,u-jane,\"dev\"\n")).unwrap();
    let config = Config {
        token: Some(ADMIN_TOKEN.into()),
        token_auth_file: Some(tokens),
        anonymous_auth: anonymous,
        authorization: Mode::Rbac,
        ..Config::default()
    };
    (TestServer::builder().config(config).start().await.unwrap(), dir)
}

/// A client presenting `token` (none when `None`) and any extra headers.
fn client(server: &TestServer, token: Option<&str>, headers: &[(&str, &str)]) -> Http {
    let Some(token) = token else { return Http::to(server) };
    let bearer = format!("Bearer {token}");
    let mut all = vec![("authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    Http::with_headers(server, &all)
}

async fn post(http: &Http, path: &str, body: Value) -> (u16, Value) {
    http.send("POST", path, "application/json", Some(&body)).await
}

async fn get(http: &Http, path: &str) -> (u16, Value) {
    http.send("GET", path, "application/json", None).await
}

fn role_binding(name: &str, role: (&str, &str), subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1}, "subjects": [subject]})
}

const ROLE_BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";

#[tokio::test]
async fn rbac_refuses_in_upstreams_words_until_a_binding_allows() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    let jane = client(&server, Some(JANE_TOKEN), &[]);
    let (code, status) = get(&jane, CONFIGMAPS).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "jane" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    assert_eq!(
        (status["reason"].as_str(), status["details"]["kind"].as_str()),
        (Some("Forbidden"), Some("configmaps"))
    );
    assert_eq!(get(&jane, "/apis").await.0, 200, "discovery is everyone's");

    // `kubectl create rolebinding --clusterrole=edit --user=jane`: the next request may.
    let edit = role_binding("jane-edits", ("ClusterRole", "edit"), json!({"kind": "User", "name": "jane"}));
    assert_eq!(post(&admin, ROLE_BINDINGS, edit).await.0, 201);
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}});
    assert_eq!(post(&jane, CONFIGMAPS, config_map).await.0, 201);
    assert_eq!(get(&jane, CONFIGMAPS).await.0, 200);
    let (code, status) =
        get(&jane, "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication").await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"configmaps "extension-apiserver-authentication" is forbidden: User "jane" cannot get resource "configmaps" in API group "" in the namespace "kube-system""#
    );
    // edit holds no leases until a role aggregated into it does.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"}});
    assert_eq!(post(&jane, leases, lease.clone()).await.0, 403);
    let aggregated = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "lease-editor", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]});
    assert_eq!(post(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles", aggregated).await.0, 201);
    assert_eq!(post(&jane, leases, lease).await.0, 201);
    // The aggregation controller writes what edit grants into edit, for kubectl to show.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, edit) = get(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles/edit").await;
        let rules = edit["rules"].as_array().cloned().unwrap_or_default();
        let shows = |group: &str, resource: &str| {
            rules.iter().any(|r| {
                r["apiGroups"] == json!([group]) && r["resources"].as_array().unwrap().contains(&json!(resource))
            })
        };
        if shows("coordination.k8s.io", "leases") && shows("", "secrets") && shows("", "configmaps") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "edit's rules were not aggregated: {edit}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A binding to a role that is not there denies, and says so.
    let dangling = role_binding("jane-secrets", ("Role", "secret-reader"), json!({"kind": "User", "name": "jane"}));
    assert_eq!(post(&admin, ROLE_BINDINGS, dangling).await.0, 201);
    let (_, status) = jane.send("DELETE", "/api/v1/namespaces/default/resourcequotas/q", "", None).await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with(r#": RBAC: role.rbac.authorization.k8s.io "secret-reader" not found"#),
        "{status}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_service_account_token_is_that_account_until_the_account_goes() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    create_bot(&admin).await;
    let (code, answered) = token_for(&admin, "bot", json!({})).await;
    assert_eq!(code, 201, "{answered}");
    let token = answered["status"]["token"].as_str().unwrap().to_string();
    let bot = client(&server, Some(&token), &[]);
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, whoami) = post(&bot, "/apis/authentication.k8s.io/v1/selfsubjectreviews", review.clone()).await;
    assert_eq!(code, 201, "{whoami}");
    assert_eq!(whoami["status"]["userInfo"]["username"], "system:serviceaccount:default:bot");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
    );
    let (code, status) = get(&bot, CONFIGMAPS).await;
    assert_eq!(code, 403);
    assert!(status["message"].as_str().unwrap().contains(r#"User "system:serviceaccount:default:bot" cannot list"#));
    let reviewed = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let (_, reviewed) = post(&admin, "/apis/authentication.k8s.io/v1/tokenreviews", reviewed).await;
    assert_eq!(reviewed["status"]["user"]["username"], "system:serviceaccount:default:bot");

    assert_eq!(admin.send("DELETE", "/api/v1/namespaces/default/serviceaccounts/bot", "", None).await.0, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while post(&bot, "/apis/authentication.k8s.io/v1/selfsubjectreviews", review.clone()).await.0 != 401 {
        assert!(std::time::Instant::now() < deadline, "the token outlived its account");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get(&client(&server, Some("made-up"), &[]), "/version").await.0, 401);
    server.shutdown().await;
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let (server, _dir) = server(false).await;
    let jane_as_bob = client(&server, Some(JANE_TOKEN), &[("Impersonate-User", "bob")]);
    let (code, status) = get(&jane_as_bob, "/version").await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"users "bob" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    let admin_as_jane =
        client(&server, Some(ADMIN_TOKEN), &[("Impersonate-User", "jane"), ("Impersonate-Group", "dev")]);
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (_, whoami) = post(&admin_as_jane, "/apis/authentication.k8s.io/v1/selfsubjectreviews", review).await;
    assert_eq!(whoami["status"]["userInfo"], json!({"username": "jane", "groups": ["dev", "system:authenticated"]}));
    assert_eq!(get(&admin_as_jane, CONFIGMAPS).await.0, 403, "the impersonated user's rights, not the admin's");
    server.shutdown().await;
}

#[tokio::test]
async fn the_access_reviews_answer_as_the_authorizer_decides() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    let view = role_binding("dev-views", ("ClusterRole", "view"), json!({"kind": "Group", "name": "dev"}));
    assert_eq!(post(&admin, ROLE_BINDINGS, view).await.0, 201);
    let access = |user: &str, verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": user, "groups": ["dev"],
            "resourceAttributes": {"namespace": "default", "verb": verb, "resource": "configmaps"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (_, allowed) = post(&admin, path, access("jane", "list")).await;
    assert_eq!(
        allowed["status"],
        json!({"allowed": true, "reason": r#"RBAC: allowed by RoleBinding "dev-views/default" of ClusterRole "view" to Group "dev""#})
    );
    let (_, denied) = post(&admin, path, access("jane", "delete")).await;
    assert_eq!(denied["status"], json!({"allowed": false}));

    let jane = client(&server, Some(JANE_TOKEN), &[]);
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let (code, rules) = post(&jane, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", rules).await;
    assert_eq!(code, 201, "{rules}");
    let resource_rules = rules["status"]["resourceRules"].as_array().unwrap();
    assert!(resource_rules.iter().any(|rule| rule["resources"].as_array().unwrap().contains(&json!("configmaps"))));
    let self_access = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "secrets"}}});
    let (_, answer) = post(&jane, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", self_access).await;
    assert_eq!(answer["status"]["allowed"], false);
    let (code, _) = post(&jane, path, access("jane", "list")).await;
    assert_eq!(code, 403, "asking about others takes system:auth-delegator");
    server.shutdown().await;
}

#[tokio::test]
async fn anonymous_requests_are_refused_or_public_info_only() {
    let (closed, _dir) = server(false).await;
    assert_eq!(get(&client(&closed, None, &[]), "/version").await.0, 401);
    closed.shutdown().await;
    let (open, _dir) = server(true).await;
    let anonymous = client(&open, None, &[]);
    assert_eq!(get(&anonymous, "/version").await.0, 200);
    let (code, status) = get(&anonymous, "/api/v1/namespaces").await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#
    );
    let (code, status) = get(&anonymous, "/apis").await;
    assert_eq!(
        (code, status["message"].as_str()),
        (403, Some(r#"forbidden: User "system:anonymous" cannot get path "/apis""#))
    );
    open.shutdown().await;
}

#[tokio::test]
async fn roles_and_bindings_grant_only_what_their_writer_holds() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    let jane = client(&server, Some(JANE_TOKEN), &[]);
    let admin_of_default =
        role_binding("jane-admin", ("ClusterRole", "admin"), json!({"kind": "User", "name": "jane"}));
    assert_eq!(post(&admin, ROLE_BINDINGS, admin_of_default).await.0, 201);
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let role = |name: &str, resource: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get", "list"]}]})
    };
    assert_eq!(post(&jane, roles, role("reader", "configmaps")).await.0, 201);
    let (code, status) = post(&jane, roles, role("node-reader", "nodes")).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "roles.rbac.authorization.k8s.io \"node-reader\" is forbidden: user \"jane\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}"
    );
    let bob = json!({"kind": "User", "name": "bob"});
    assert_eq!(
        post(&jane, ROLE_BINDINGS, role_binding("bob-edits", ("ClusterRole", "edit"), bob.clone())).await.0,
        201
    );
    let (code, status) =
        post(&jane, ROLE_BINDINGS, role_binding("bob-rules", ("ClusterRole", "cluster-admin"), bob)).await;
    assert_eq!(code, 403);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"rolebindings.rbac.authorization.k8s.io "bob-rules" is forbidden: user "jane""#),
        "{status}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_test_server_client_runs_as_the_user_it_names() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use kube::api::{Api, ListParams, PostParams};

    let server = TestServer::builder().authorization(Mode::Rbac).start().await.unwrap();
    let operator = server.client_as("system:serviceaccount:default:operator", &[]);
    let config_maps: Api<ConfigMap> = Api::namespaced(operator, "default");
    let Err(kube::Error::Api(refused)) = config_maps.list(&ListParams::default()).await else {
        panic!("a ServiceAccount with no binding listed ConfigMaps")
    };
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        r#"configmaps is forbidden: User "system:serviceaccount:default:operator" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    let binding: RoleBinding = serde_json::from_value(role_binding(
        "operator-views",
        ("ClusterRole", "view"),
        json!({"kind": "ServiceAccount", "name": "operator", "namespace": "default"}),
    ))
    .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(server.client(), "default");
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    config_maps.list(&ListParams::default()).await.expect("the binding lets the account list");
    let create = config_maps.create(&PostParams::default(), &ConfigMap::default()).await;
    assert!(matches!(create, Err(kube::Error::Api(status)) if status.code == 403), "view creates nothing");
    server.shutdown().await;
}

#[tokio::test]
async fn the_bootstrap_policy_is_put_back_on_start_unless_its_owner_said_not_to() {
    let store: std::sync::Arc<dyn crdctl_storage::Store> = std::sync::Arc::new(crdctl_storage::memory::open());
    let first = TestServer::builder().store(std::sync::Arc::clone(&store)).start().await.unwrap();
    let admin = Http::to(&first);
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let narrowed = |autoupdate: &str| {
        json!({"metadata": {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": autoupdate}},
            "rules": [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]})
    };
    for (name, autoupdate) in [("system:discovery", "true"), ("system:public-info-viewer", "false")] {
        let patch = narrowed(autoupdate);
        let (code, _) =
            admin.send("PATCH", &format!("{roles}/{name}"), "application/merge-patch+json", Some(&patch)).await;
        assert_eq!(code, 200);
    }
    first.shutdown().await;
    let second = TestServer::builder().store(store).start().await.unwrap();
    let admin = Http::to(&second);
    let urls = |role: Value| {
        role["rules"].as_array().unwrap().iter().flat_map(|r| r["nonResourceURLs"].as_array().unwrap().clone()).count()
    };
    let (_, discovery) = get(&admin, &format!("{roles}/system:discovery")).await;
    assert!(urls(discovery) > 1, "an autoupdated role gets its rules back");
    let (_, public) = get(&admin, &format!("{roles}/system:public-info-viewer")).await;
    assert_eq!(urls(public), 1, "autoupdate: \"false\" keeps the owner's change");
    second.shutdown().await;
}

/// Creates the ServiceAccount `default/bot`.
async fn create_bot(admin: &Http) {
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}});
    assert_eq!(post(admin, "/api/v1/namespaces/default/serviceaccounts", account).await.0, 201);
}

/// A TokenRequest for `account` in `default` with `spec`, answered.
async fn token_for(admin: &Http, account: &str, spec: Value) -> (u16, Value) {
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    post(admin, &format!("/api/v1/namespaces/default/serviceaccounts/{account}/token"), request).await
}

async fn token_review(admin: &Http, token: &str, audiences: &[&str]) -> Value {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences}});
    let (code, reviewed) = post(admin, "/apis/authentication.k8s.io/v1/tokenreviews", review).await;
    assert_eq!(code, 201, "{reviewed}");
    reviewed["status"].clone()
}

#[tokio::test]
async fn a_bound_token_verifies_from_the_published_keys_and_dies_with_its_object() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    create_bot(&admin).await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "anchor"}});
    let (_, secret) = post(&admin, "/api/v1/namespaces/default/secrets", secret).await;
    let bound = json!({"apiVersion": "v1", "kind": "Secret", "name": "anchor", "uid": secret["metadata"]["uid"]});
    let (code, answered) = token_for(&admin, "bot", json!({"boundObjectRef": bound, "audiences": ["vault"]})).await;
    assert_eq!(code, 201, "{answered}");
    let token = answered["status"]["token"].as_str().unwrap().to_string();

    // Anyone in system:serviceaccounts may read the issuer's documents (as the bootstrap
    // policy says); an independent JWT library verifies the token with the published key.
    let (_, plain) = token_for(&admin, "bot", json!({})).await;
    let bot = client(&server, plain["status"]["token"].as_str(), &[]);
    let (code, discovery) = get(&bot, "/.well-known/openid-configuration").await;
    assert_eq!(code, 200, "{discovery}");
    assert_eq!(discovery["issuer"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(discovery["jwks_uri"], "https://kubernetes.default.svc.cluster.local/openid/v1/jwks");
    let (code, keys) = get(&bot, "/openid/v1/jwks").await;
    assert_eq!(code, 200, "{keys}");
    let keys: jsonwebtoken::jwk::JwkSet = serde_json::from_value(keys).unwrap();
    let header = jsonwebtoken::decode_header(&token).unwrap();
    let key = keys.find(header.kid.as_deref().unwrap()).expect("the token's key is published");
    let mut validation = jsonwebtoken::Validation::new(header.alg);
    validation.set_audience(&["vault"]);
    validation.set_issuer(&["https://kubernetes.default.svc.cluster.local"]);
    let decoding = jsonwebtoken::DecodingKey::from_jwk(key).unwrap();
    let claims = jsonwebtoken::decode::<Value>(&token, &decoding, &validation).unwrap().claims;
    assert_eq!(claims["sub"], "system:serviceaccount:default:bot");
    assert_eq!(claims["kubernetes.io"]["secret"], json!({"name": "anchor", "uid": secret["metadata"]["uid"]}));
    let jane = client(&server, Some(JANE_TOKEN), &[]);
    assert_eq!(get(&jane, "/openid/v1/jwks").await.0, 403, "jane is no ServiceAccount");

    // The token is for "vault", not for the API server; a review for "vault" accepts it.
    assert_eq!(get(&client(&server, Some(&token), &[]), "/version").await.0, 401);
    let reviewed = token_review(&admin, &token, &[]).await;
    assert_eq!(reviewed["authenticated"], false);
    assert_eq!(
        reviewed["error"],
        r#"token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]"#
    );
    let reviewed = token_review(&admin, &token, &["vault", "other"]).await;
    assert_eq!((reviewed["authenticated"].clone(), reviewed["audiences"].clone()), (json!(true), json!(["vault"])));

    assert_eq!(admin.send("DELETE", "/api/v1/namespaces/default/secrets/anchor", "", None).await.0, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while token_review(&admin, &token, &["vault"]).await["authenticated"] == true {
        assert!(std::time::Instant::now() < deadline, "the token outlived the Secret it is bound to");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(token_review(&admin, &token, &["vault"]).await["error"], "service account token has been invalidated");

    // Upstream's refusals: a kind a token cannot be bound to, an object that is not there, a
    // uid that is not the object's.
    let config_map = json!({"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}});
    let (code, status) = token_for(&admin, "bot", config_map).await;
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (400, "cannot bind token to object of type /v1, Kind=ConfigMap")
    );
    let (code, status) = token_for(&admin, "bot", json!({"boundObjectRef": bound})).await;
    assert_eq!((code, status["message"].as_str().unwrap()), (404, r#"secrets "anchor" not found"#));
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "anchor"}});
    assert_eq!(post(&admin, "/api/v1/namespaces/default/secrets", secret).await.0, 201);
    let (code, status) = token_for(&admin, "bot", json!({"boundObjectRef": bound})).await;
    assert_eq!(code, 409, "{status}");
    assert!(
        status["message"].as_str().unwrap().starts_with(
            r#"Operation cannot be fulfilled on Secret "anchor": the UID in the bound object reference ("#
        )
    );
    server.shutdown().await;
}

/// A server on HTTPS trusting its own client CA and `extra_ca` (PEM), and a client that
/// trusts its serving certificate and presents `identity` (certificate and key, PEM), if any.
struct Tls {
    server: TestServer,
    serving_ca: String,
    _dir: tempfile::TempDir,
}

impl Tls {
    async fn start(extra_ca: &str) -> Tls {
        let bundle = crdctl_conversion::certs::generate(&["localhost".to_string()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("tls.crt"), &bundle.cert_pem).unwrap();
        std::fs::write(path("tls.key"), &bundle.key_pem).unwrap();
        std::fs::write(path("client-ca.crt"), extra_ca).unwrap();
        let config = Config {
            tls: Some((path("tls.crt"), path("tls.key"))),
            token: Some(ADMIN_TOKEN.into()),
            client_ca_file: Some(path("client-ca.crt")),
            authorization: Mode::Rbac,
            ..Config::default()
        };
        let server = TestServer::builder().config(config).start().await.unwrap();
        Tls { server, serving_ca: bundle.ca_pem, _dir: dir }
    }

    fn client(&self, identity: Option<&crdctl_server::auth::x509::Issued>, token: Option<&str>) -> Http {
        let ca = reqwest::Certificate::from_pem(self.serving_ca.as_bytes()).unwrap();
        let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
        if let Some(issued) = identity {
            let pem = format!("{}{}", issued.cert_pem, issued.key_pem);
            builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
        }
        if let Some(token) = token {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
            builder = builder.default_headers(headers);
        }
        Http { url: self.server.url().replace("127.0.0.1", "localhost"), client: builder.build().unwrap() }
    }
}

async fn whoami(http: &Http) -> (u16, Value) {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, answered) = post(http, "/apis/authentication.k8s.io/v1/selfsubjectreviews", review).await;
    (code, answered["status"]["userInfo"].clone())
}

#[tokio::test]
async fn a_client_certificate_is_the_user_its_subject_names() {
    let other_ca = crdctl_server::auth::x509::ClientCa::generate().unwrap();
    let tls = Tls::start(&other_ca.cert_pem).await;
    let jane = tls.server.server().client_certificate("jane", Some("dev")).unwrap().unwrap();
    let (code, user) = whoami(&tls.client(Some(&jane), None)).await;
    assert_eq!(code, 201, "{user}");
    assert_eq!(user, json!({"username": "jane", "groups": ["dev", "system:authenticated"]}));
    // RBAC decides for her as for anyone.
    let (code, status) = get(&tls.client(Some(&jane), None), CONFIGMAPS).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "jane" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    // A certificate from --client-ca-file's CA is as good; the certificate comes before a bearer
    // token, as upstream's x509 authenticator comes before the token ones.
    let from_file = other_ca.issue("robot", Some("system:masters")).unwrap();
    let (_, user) = whoami(&tls.client(Some(&from_file), Some(ADMIN_TOKEN))).await;
    assert_eq!(user["username"], "robot");
    assert_eq!(get(&tls.client(Some(&from_file), None), CONFIGMAPS).await.0, 200);
    // The kubeconfig's certificate is the administrator's.
    let kubeconfig = tls.server.kubeconfig();
    assert!(kubeconfig.contains("client-certificate-data: ") && !kubeconfig.contains("token:"), "{kubeconfig}");
    // No certificate: the bearer token decides; neither: 401.
    assert_eq!(whoami(&tls.client(None, Some(ADMIN_TOKEN))).await.1["username"], "system:admin");
    assert_eq!(get(&tls.client(None, None), "/version").await.0, 401);
    // A certificate no trusted CA signed fails the TLS handshake.
    let stranger =
        crdctl_server::auth::x509::ClientCa::generate().unwrap().issue("mallory", Some("system:masters")).unwrap();
    let refused =
        tls.client(Some(&stranger), None).client.get(format!("{}/version", tls.client(None, None).url)).send().await;
    assert!(refused.is_err(), "{refused:?}");
    tls.server.shutdown().await;
}

#[tokio::test]
async fn a_policys_authorizer_asks_rbac_about_the_requesting_user() {
    let (server, _dir) = server(false).await;
    let admin = client(&server, Some(ADMIN_TOKEN), &[]);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "secret-readers"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{
                "expression": "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()",
                "message": "only those who may read secrets"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "secret-readers"}, "spec": {"policyName": "secret-readers", "validationActions": ["Deny"]}});
    let admission = "/apis/admissionregistration.k8s.io/v1";
    assert_eq!(post(&admin, &format!("{admission}/validatingadmissionpolicies"), policy).await.0, 201);
    assert_eq!(post(&admin, &format!("{admission}/validatingadmissionpolicybindings"), binding).await.0, 201);
    let role = |name: &str, resource: &str, verb: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": [verb]}]})
    };
    let jane = json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"});
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    for (name, resource, verb) in [("configmap-writer", "configmaps", "create"), ("secret-reader", "secrets", "get")] {
        assert_eq!(post(&admin, roles, role(name, resource, verb)).await.0, 201);
    }
    let binding = role_binding("jane-writes", ("Role", "configmap-writer"), jane.clone());
    assert_eq!(post(&admin, ROLE_BINDINGS, binding).await.0, 201);

    // jane may create ConfigMaps, but the policy asks whether she may read Secrets: no.
    let jane_client = client(&server, Some(JANE_TOKEN), &[]);
    let config_map = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (code, status) = loop {
        let (code, status) = post(&jane_client, CONFIGMAPS, config_map("first")).await;
        if code != 201 || std::time::Instant::now() > deadline {
            break (code, status);
        }
        // The policy was not in force yet: try again with another name.
        admin.send("DELETE", &format!("{CONFIGMAPS}/first"), "", None).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A validation without a `reason` refuses as Invalid, as upstream's.
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        r#"configmaps "first" is forbidden: ValidatingAdmissionPolicy 'secret-readers' with binding 'secret-readers' denied request: only those who may read secrets"#
    );
    // Once she may read Secrets in the namespace, the policy lets her write.
    let binding = role_binding("jane-reads", ("Role", "secret-reader"), jane);
    assert_eq!(post(&admin, ROLE_BINDINGS, binding).await.0, 201);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while post(&jane_client, CONFIGMAPS, config_map("second")).await.0 != 201 {
        assert!(std::time::Instant::now() < deadline, "the policy never saw jane's new role");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The administrator is in system:masters: always allowed.
    assert_eq!(post(&admin, CONFIGMAPS, config_map("third")).await.0, 201);
    server.shutdown().await;
}

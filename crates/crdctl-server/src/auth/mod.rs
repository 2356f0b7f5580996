//! Who is asking, and whether they may: kube-apiserver's authentication and authorization
//! filters, in front of every route.
//!
//! [`Authenticator`] finds the user a request's credentials name, as upstream's union of
//! authenticators: a client certificate that TLS verified against a client CA ([`x509`]), then
//! the bearer token: the server's own (its administrator, in `system:masters`), the static
//! token file (`--token-auth-file`, upstream's CSV), and ServiceAccount tokens this server
//! signed ([`token`]; while the account, and the object the token is bound to, exist with the
//! uids the token names). A request with no credentials is `system:anonymous` when anonymous
//! requests are enabled, and refused when they are not; a server that authenticates nobody (no
//! token, no token file, no client CA: loopback only) treats it as its administrator, as it
//! always has. [`impersonate`] then applies the `Impersonate-*` headers,
//! each checked against the `impersonate` verb.
//!
//! [`Authorizer`] decides on the request's [`Attributes`]: `AlwaysAllow`, or `RBAC` over the
//! [`rbac::Policy`] with `system:masters` allowed everything first (upstream's
//! privileged-groups authorizer). The reviews (`SubjectAccessReview`, `SelfSubjectRulesReview`,
//! `TokenReview`, `SelfSubjectReview`) ask the same two.

pub mod attributes;
pub mod escalation;
pub mod policy;
pub mod rbac;
pub mod token;
pub mod token_file;
pub mod x509;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

pub use self::attributes::Attributes;
use self::token::{TokenError, TokenSigner};
use crate::error::{ApiError, ApiResult};

/// The group whose members may do anything, whatever RBAC says.
pub const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";

/// An authenticated user, as upstream's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid, if the authenticator knows one.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (impersonation's `Impersonate-Extra-*`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// A user in `groups` and `system:authenticated`.
    pub fn named(name: &str, groups: &[&str]) -> User {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        User { name: name.to_string(), groups, ..User::default() }
    }

    /// The server's administrator: its token's holder, and the server itself writing in the
    /// background (upstream's loopback client).
    pub fn administrator() -> User {
        User::named("system:admin", &[MASTERS])
    }

    /// The administrator, borrowed for as long as the server runs.
    pub fn administrator_ref() -> &'static User {
        static ADMINISTRATOR: std::sync::LazyLock<User> = std::sync::LazyLock::new(User::administrator);
        &ADMINISTRATOR
    }

    /// Who an unauthenticated request is, when anonymous requests are enabled.
    pub fn anonymous() -> User {
        User { name: "system:anonymous".into(), groups: vec!["system:unauthenticated".into()], ..User::default() }
    }

    /// A ServiceAccount, with the groups upstream gives it.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> User {
        let namespaced = format!("system:serviceaccounts:{namespace}");
        let mut user = User::named(&service_account_user(namespace, name), &["system:serviceaccounts", &namespaced]);
        user.uid = uid.to_string();
        user
    }

    /// As a review's `userInfo` (and admission's) carries it.
    pub fn info(&self) -> Value {
        let mut info = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            crate::object::set(&mut info, "uid", json!(self.uid));
        }
        if !self.extra.is_empty() {
            crate::object::set(&mut info, "extra", json!(self.extra));
        }
        info
    }

    /// A user as a review's `spec` names one (`user`, `groups`, `uid`, `extra`).
    pub fn from_spec(spec: &Value) -> User {
        let strings = crate::object::strings;
        let extra = spec.get("extra").and_then(Value::as_object).into_iter().flatten();
        User {
            name: spec.get("user").and_then(Value::as_str).unwrap_or_default().to_string(),
            uid: spec.get("uid").and_then(Value::as_str).unwrap_or_default().to_string(),
            groups: strings(spec.get("groups")),
            extra: extra.map(|(key, values)| (key.clone(), strings(Some(values)))).collect(),
        }
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// How requests are authorized (`--authorization-mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every authenticated request is allowed.
    #[default]
    AlwaysAllow,
    /// Roles and bindings decide.
    Rbac,
}

/// The objects tokens hold on to that exist (ServiceAccounts, and the Pods, Secrets and Nodes
/// tokens can be bound to): store key → uid.
pub type Holders = Arc<RwLock<HashMap<String, String>>>;

/// Finds the user a request's credentials name.
pub struct Authenticator {
    /// Signs and checks ServiceAccount tokens.
    pub signer: TokenSigner,
    server_token: Option<String>,
    static_tokens: HashMap<String, User>,
    anonymous: bool,
    /// Whether a client CA was given, so clients are expected to authenticate.
    client_ca: bool,
    /// The objects tokens hold on to, kept from the store's feed and from each object a token
    /// is issued for, so a token dies with its account or bound object.
    holders: Holders,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a token.
        f.debug_struct("Authenticator").field("anonymous", &self.anonymous).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator for the server's token, a token file's users, anonymous requests, and
    /// whether a client CA was given.
    pub fn new(
        signer: TokenSigner,
        server_token: Option<String>,
        token_file: Option<&std::path::Path>,
        anonymous: bool,
        client_ca: bool,
    ) -> Result<Authenticator, String> {
        let static_tokens = match token_file {
            Some(path) => token_file::read(path)?,
            None => HashMap::new(),
        };
        Ok(Authenticator { signer, server_token, static_tokens, anonymous, client_ca, holders: Arc::default() })
    }

    fn authenticates_anyone(&self) -> bool {
        self.server_token.is_some() || !self.static_tokens.is_empty() || self.client_ca
    }

    /// The user a bearer token names, as the API server authenticates it (for its own
    /// audience, the issuer).
    pub fn token_user(&self, token: &str) -> Result<User, TokenError> {
        self.review_token(token, &[]).map(|(user, _)| user)
    }

    /// The user a token names and the audiences it is good for, among `audiences` (the API
    /// server's own when empty), as a TokenReview answers.
    pub fn review_token(&self, token: &str, audiences: &[String]) -> Result<(User, Vec<String>), TokenError> {
        if self.server_token.as_deref() == Some(token) {
            return Ok((User::administrator(), audiences.to_vec()));
        }
        if let Some(user) = self.static_tokens.get(token) {
            return Ok((user.clone(), audiences.to_vec()));
        }
        let own = [token::ISSUER.to_string()];
        let wanted = if audiences.is_empty() { &own[..] } else { audiences };
        let account = token::account(&self.signer, token, wanted)?;
        let holders = self.holders.read().unwrap_or_else(|p| p.into_inner());
        for holder in account.holders() {
            holder.check(holders.get(&holder.key).map(String::as_str))?;
        }
        let good_for = account.audiences.iter().filter(|audience| wanted.contains(audience)).cloned().collect();
        Ok((User::service_account(&account.namespace, &account.name, &account.uid), good_for))
    }

    /// Records that an object a token holds on to exists (a token was just issued for it).
    pub fn saw(&self, key: String, uid: &str) {
        let mut holders = self.holders.write().unwrap_or_else(|p| p.into_inner());
        holders.insert(key, uid.to_string());
    }

    /// Who a request is: the client certificate TLS verified (its DER), else the
    /// `Authorization` header.
    pub fn authenticate(&self, certificate: Option<&[u8]>, headers: &HeaderMap) -> ApiResult<User> {
        if let Some(user) = certificate.and_then(x509::user) {
            return Ok(user);
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match bearer {
            Some(token) => self.token_user(token).map_err(|_| ApiError::unauthorized()),
            None if !self.authenticates_anyone() => Ok(User::administrator()),
            None if self.anonymous => Ok(User::anonymous()),
            None => Err(ApiError::unauthorized()),
        }
    }

    /// Keeps the objects tokens hold on to current with the store until dropped.
    pub async fn follow_holders(store: Arc<dyn crdctl_storage::Store>, holders: Holders) {
        let prefixes = std::iter::once("/registry/serviceaccounts/").chain(token::BINDABLE.iter().map(|b| b.prefix));
        let follows = prefixes.map(|prefix| {
            let (store, holders) = (Arc::clone(&store), Arc::clone(&holders));
            async move { follow_uids(&*store, prefix, &holders).await }
        });
        futures_util::future::join_all(follows).await;
    }

    /// The holders [`Authenticator::follow_holders`] keeps.
    pub fn holders(&self) -> Holders {
        Arc::clone(&self.holders)
    }
}

/// Keeps the uid of every object under `prefix` in `holders`.
async fn follow_uids(store: &dyn crdctl_storage::Store, prefix: &str, holders: &Holders) {
    let mut listed = std::collections::HashSet::new();
    crate::informer::follow::<token::Uid>(store, prefix, |change| {
        use crate::informer::Change;
        let mut holders = holders.write().unwrap_or_else(|p| p.into_inner());
        match change {
            Change::Listing => listed.clear(),
            Change::Put { key, object, .. } => {
                listed.insert(key.clone());
                holders.insert(key, object.0);
            }
            Change::Delete { key, .. } => drop(holders.remove(&key)),
            Change::Synced => holders.retain(|key, _| !key.starts_with(prefix) || listed.contains(key)),
        }
    })
    .await
}

/// Decides whether a request is allowed (a clone decides on the same policy).
#[derive(Debug, Default, Clone)]
pub struct Authorizer {
    mode: Mode,
    /// The roles and bindings, for `RBAC`.
    pub policy: rbac::Shared,
}

impl Authorizer {
    /// An authorizer in `mode`.
    pub fn new(mode: Mode) -> Authorizer {
        Authorizer { mode, policy: rbac::Shared::default() }
    }

    /// Whether RBAC decides (so its policy must be followed).
    pub fn uses_rbac(&self) -> bool {
        self.mode == Mode::Rbac
    }

    pub(crate) fn allows_everything(&self, user: &User) -> bool {
        self.mode == Mode::AlwaysAllow || user.groups.iter().any(|group| group == MASTERS)
    }

    /// Decides on a request.
    pub fn decide(&self, request: &Attributes) -> rbac::Decision {
        if self.allows_everything(&request.user) {
            return rbac::Decision { allowed: true, reason: String::new() };
        }
        self.policy.read().unwrap_or_else(|p| p.into_inner()).decide(request)
    }

    /// Decides on a request; a denial is decided again on the policy as the store holds it
    /// now, so a role or binding just written through any replica counts at once, as a client
    /// that wrote it expects (the kept policy follows the change feed, a moment behind).
    pub async fn decide_now(&self, store: &dyn crdctl_storage::Store, request: &Attributes) -> rbac::Decision {
        let decision = self.decide(request);
        if decision.allowed || !self.uses_rbac() {
            return decision;
        }
        match rbac::Policy::load(store).await {
            Ok(policy) => policy.decide(request),
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the RBAC policy; deciding on the kept one");
                decision
            }
        }
    }

    /// Everything `user` may do in `namespace`, as a `SelfSubjectRulesReview`'s status.
    pub fn rules_review(&self, user: &User, namespace: &str) -> Value {
        if self.allows_everything(user) {
            return json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            });
        }
        let (rules, errors) = self.policy.read().unwrap_or_else(|p| p.into_inner()).rules_for(user, namespace);
        let (resource, non_resource): (Vec<_>, Vec<_>) =
            rules.iter().partition(|rule| rule.non_resource_urls.is_empty());
        let resource: Vec<Value> = resource
            .iter()
            .map(|r| json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources, "resourceNames": r.resource_names}))
            .collect();
        let non_resource: Vec<Value> =
            non_resource.iter().map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})).collect();
        let mut status =
            json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": !errors.is_empty()});
        if !errors.is_empty() {
            crate::object::set(&mut status, "evaluationError", json!(errors.join(", ")));
        }
        status
    }
}

/// The authorizer deciding for one user: what CEL's `authorizer` asks in admission
/// (`authorizer.serviceAccount(...)` asks about that account instead).
#[derive(Debug)]
pub struct ForUser {
    /// The authorizer.
    pub authorizer: Authorizer,
    /// The requesting user.
    pub user: User,
}

impl crdctl_schema::cel::authorizer::Authorize for ForUser {
    fn authorize(&self, check: &crdctl_schema::cel::authorizer::Check) -> crdctl_schema::cel::authorizer::Decision {
        let user = match &check.service_account {
            Some((namespace, name)) => User::service_account(namespace, name, ""),
            None => self.user.clone(),
        };
        let resource = check.path.is_none().then(|| attributes::Resource {
            group: check.group.clone(),
            resource: check.resource.clone(),
            subresource: Some(check.subresource.clone()).filter(|s| !s.is_empty()),
            namespace: check.namespace.clone(),
            name: check.name.clone(),
            ..attributes::Resource::default()
        });
        let path = check.path.clone().unwrap_or_default();
        let decision = self.authorizer.decide(&Attributes { user, verb: check.verb.clone(), path, resource });
        crdctl_schema::cel::authorizer::Decision {
            allowed: decision.allowed,
            reason: decision.reason,
            error: String::new(),
        }
    }
}

/// The `Impersonate-*` headers' user, each part allowed by the `impersonate` verb for the
/// requester, as upstream's impersonation filter; `user` when there are none.
pub fn impersonate(authorizer: &Authorizer, user: User, headers: &HeaderMap) -> ApiResult<User> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let name = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let extra: BTreeMap<String, Vec<String>> = headers
        .keys()
        .filter_map(|key| key.as_str().strip_prefix("impersonate-extra-"))
        .map(|key| {
            let decoded = form_urlencoded::parse(format!("k={key}").as_bytes()).next().map(|(_, v)| v.into_owned());
            (decoded.unwrap_or_else(|| key.to_string()), values(&format!("impersonate-extra-{key}")))
        })
        .collect();
    let Some(name) = name else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::internal_error(
            "requested impersonation of groups, a uid or extras without impersonating a user",
        ));
    };
    let check = |group: &str, resource: &str, subresource: Option<&str>, namespace: &str, object: &str| {
        let request = Attributes {
            user: user.clone(),
            verb: "impersonate".into(),
            path: String::new(),
            resource: Some(attributes::Resource {
                group: group.into(),
                resource: resource.into(),
                subresource: subresource.map(str::to_string),
                namespace: namespace.into(),
                name: object.into(),
                ..attributes::Resource::default()
            }),
        };
        let decision = authorizer.decide(&request);
        if decision.allowed { Ok(()) } else { Err(request.forbidden(&decision.reason)) }
    };
    let account = name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'));
    match account {
        Some((namespace, account)) => check("", "serviceaccounts", None, namespace, account)?,
        None => check("", "users", None, "", &name)?,
    }
    for group in &groups {
        check("", "groups", None, "", group)?;
    }
    if let Some(uid) = &uid {
        check("authentication.k8s.io", "uids", None, "", uid)?;
    }
    for (key, values) in &extra {
        for value in values {
            check("authentication.k8s.io", "userextras", Some(key), "", value)?;
        }
    }
    let mut impersonated = match (account, groups.is_empty()) {
        (Some((namespace, account)), true) => User::service_account(namespace, account, ""),
        _ => User { name: name.clone(), groups, ..User::default() },
    };
    if name != "system:anonymous" && !impersonated.groups.iter().any(|g| g == AUTHENTICATED) {
        impersonated.groups.push(AUTHENTICATED.into());
    }
    impersonated.uid = uid.unwrap_or_default();
    impersonated.extra = extra;
    Ok(impersonated)
}

/// A key the server keeps in the store as the Secret `kube-system/<name>`, so every replica
/// and restart uses the same: `fresh` (the key, and its Secret's `data`) is stored when there
/// is none, and replaces what is there when `read` cannot use it (emptied, broken, or an older
/// server's); otherwise the stored key is read.
pub async fn kept_secret<T>(
    store: &dyn crdctl_storage::Store,
    name: &str,
    fresh: (T, Value),
    read: impl Fn(&Value) -> Option<T>,
) -> Result<T, String> {
    use crdctl_storage::StoreError;
    let (made, data) = fresh;
    let key = format!("/registry/secrets/kube-system/{name}");
    let mut secret =
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name}, "data": data});
    crate::object::prepare_create(&mut secret, Some("kube-system"));
    loop {
        match store.create(&key, crate::object::to_stored(&secret)).await {
            Ok(_) => return Ok(made),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(err) => return Err(err.to_string()),
        }
        // Deleted since: create it again.
        let Some(stored) = store.get(&key).await.map_err(|err| err.to_string())? else { continue };
        let kept = serde_json::from_slice::<Value>(&stored.value).ok();
        if let Some(kept) = kept.as_ref().and_then(|secret| read(secret.get("data")?)) {
            return Ok(kept);
        }
        // Tokens or certificates the unreadable key signed stop working, as when a cluster's
        // key is rotated.
        tracing::warn!(secret = %key, "the stored key cannot be read; replacing it");
        match store.update(&key, crate::object::to_stored(&secret), stored.mod_revision).await {
            Ok(_) => return Ok(made),
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(err.to_string()),
        }
    }
}

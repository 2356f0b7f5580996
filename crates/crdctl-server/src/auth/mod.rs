//! Who is asking, and whether they may: kube-apiserver's authentication and authorization
//! filters, in front of every route.
//!
//! [`Authenticator`] finds the user a request's bearer token names, as upstream's union of
//! authenticators: the server's own token (its administrator, in `system:masters`), the static
//! token file (`--token-auth-file`, upstream's CSV), and ServiceAccount tokens this server signed
//! (while the account exists with the uid the token names). A request with no credentials is
//! `system:anonymous` when anonymous requests are enabled, and refused when they are not; a
//! server that authenticates nobody (no token, no token file: loopback only) treats it as its
//! administrator, as it always has. [`impersonate`] then applies the `Impersonate-*` headers,
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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

pub use self::attributes::Attributes;
use self::token::TokenSigner;
use crate::error::{ApiError, ApiResult};

/// The group whose members may do anything, whatever RBAC says.
const MASTERS: &str = "system:masters";
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
        let strings = |value: Option<&Value>| -> Vec<String> {
            value
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
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

/// The ServiceAccounts that exist: store key → uid.
pub type Accounts = Arc<RwLock<HashMap<String, String>>>;

/// Where a ServiceAccount is stored.
fn account_key(namespace: &str, name: &str) -> String {
    format!("/registry/serviceaccounts/{namespace}/{name}")
}

/// Finds the user a request's credentials name.
pub struct Authenticator {
    /// Signs and checks ServiceAccount tokens.
    pub signer: TokenSigner,
    server_token: Option<String>,
    static_tokens: HashMap<String, User>,
    anonymous: bool,
    /// The ServiceAccounts that exist (their store key → uid), kept from the store's feed and
    /// from each account a token is issued for, so a token dies with its account.
    accounts: Accounts,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a token.
        f.debug_struct("Authenticator").field("anonymous", &self.anonymous).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator for the server's token, a token file's users, and anonymous requests.
    pub fn new(
        signer: TokenSigner,
        server_token: Option<String>,
        token_file: Option<&std::path::Path>,
        anonymous: bool,
    ) -> Result<Authenticator, String> {
        let static_tokens = match token_file {
            Some(path) => token_file::read(path)?,
            None => HashMap::new(),
        };
        Ok(Authenticator { signer, server_token, static_tokens, anonymous, accounts: Arc::default() })
    }

    fn authenticates_anyone(&self) -> bool {
        self.server_token.is_some() || !self.static_tokens.is_empty()
    }

    /// The user a bearer token names, if any.
    pub fn token_user(&self, token: &str) -> Option<User> {
        if self.server_token.as_deref() == Some(token) {
            return Some(User::administrator());
        }
        if let Some(user) = self.static_tokens.get(token) {
            return Some(user.clone());
        }
        let account = self::token::account(&self.signer, token)?;
        let accounts = self.accounts.read().unwrap_or_else(|p| p.into_inner());
        let exists = accounts.get(&account_key(&account.namespace, &account.name)) == Some(&account.uid);
        exists.then(|| User::service_account(&account.namespace, &account.name, &account.uid))
    }

    /// Records that a ServiceAccount exists (a token was just issued for it).
    pub fn saw_account(&self, namespace: &str, name: &str, uid: &str) {
        let mut accounts = self.accounts.write().unwrap_or_else(|p| p.into_inner());
        accounts.insert(account_key(namespace, name), uid.to_string());
    }

    /// Who a request is, from its `Authorization` header.
    pub fn authenticate(&self, headers: &HeaderMap) -> ApiResult<User> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match bearer {
            Some(token) => self.token_user(token).ok_or_else(ApiError::unauthorized),
            None if !self.authenticates_anyone() => Ok(User::administrator()),
            None if self.anonymous => Ok(User::anonymous()),
            None => Err(ApiError::unauthorized()),
        }
    }

    /// Keeps the ServiceAccounts current with the store until dropped.
    pub async fn follow_accounts(store: Arc<dyn crdctl_storage::Store>, accounts: Accounts) {
        let mut listed = std::collections::HashSet::new();
        crate::informer::follow::<Value>(&*store, "/registry/serviceaccounts/", |change| {
            use crate::informer::Change;
            let mut accounts = accounts.write().unwrap_or_else(|p| p.into_inner());
            match change {
                Change::Listing => listed.clear(),
                Change::Put { key, object, .. } => {
                    let uid = crate::object::meta_str(&object, "uid").unwrap_or_default().to_string();
                    listed.insert(key.clone());
                    accounts.insert(key, uid);
                }
                Change::Delete { key, .. } => drop(accounts.remove(&key)),
                Change::Synced => accounts.retain(|key, _| listed.contains(key)),
            }
        })
        .await
    }

    /// The accounts [`Authenticator::follow_accounts`] keeps.
    pub fn accounts(&self) -> Accounts {
        Arc::clone(&self.accounts)
    }
}

/// Decides whether a request is allowed.
#[derive(Debug, Default)]
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

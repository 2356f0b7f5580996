//! The RBAC authorizer, as upstream's `plugin/pkg/auth/authorizer/rbac` decides: the rules of
//! every ClusterRoleBinding, then every RoleBinding in the request's namespace, whose subjects
//! name the user; the first rule that covers the request allows it. A binding to a role that
//! does not exist denies with the reason upstream gives (`RBAC: clusterrole… "x" not found`).
//!
//! The authorizer reads a [`Policy`] kept in memory from the store's change feed (as upstream
//! reads informers), so deciding costs no store read; a ClusterRole with an `aggregationRule`
//! holds the rules of every ClusterRole its selectors match, as the aggregation controller
//! would have written them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::User;
use super::attributes::Attributes;
use crate::informer::{self, Change};

/// One `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`, `resource/subresource`, `*` or `*/subresource`.
    pub resources: Vec<String>,
    /// `resourceNames`: empty for every name.
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`: paths, `*`, or prefixes ending in `*`.
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// Whether a rule's non-resource URL (`*`, a path, or a prefix ending in `*`) covers `path`.
pub fn url_covers(rule: &str, path: &str) -> bool {
    rule == "*" || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

fn covers(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

impl Rule {
    /// Whether the rule allows the request (upstream's `RuleAllows`).
    pub fn allows(&self, request: &Attributes) -> bool {
        if !covers(&self.verbs, &request.verb) {
            return false;
        }
        match &request.resource {
            Some(resource) => {
                covers(&self.api_groups, &resource.group)
                    && self.resources.iter().any(|rule| {
                        rule == "*"
                            || resource.is(rule)
                            || resource.subresource.as_deref().is_some_and(|sub| rule.strip_prefix("*/") == Some(sub))
                    })
                    && (self.resource_names.is_empty() || self.resource_names.contains(&resource.name))
            }
            None => self.non_resource_urls.iter().any(|rule| url_covers(rule, &request.path)),
        }
    }
}

/// `roleRef`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// One of a binding's `subjects`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The user, group or account name.
    pub name: String,
    /// A ServiceAccount's namespace (the binding's when empty).
    pub namespace: String,
}

impl Subject {
    /// Whether the subject names `user` (upstream's `appliesToUser`).
    fn names(&self, user: &User, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.name == self.name,
            "Group" => user.groups.contains(&self.name),
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                user.name == super::service_account_user(namespace, &self.name)
            }
            _ => false,
        }
    }

    /// As upstream's `describeSubject` prints it.
    fn describe(&self, binding_namespace: &str) -> String {
        match self.kind.as_str() {
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                format!("{} {:?}", self.kind, format!("{}/{namespace}", self.name))
            }
            _ => format!("{} {:?}", self.kind, self.name),
        }
    }
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Binding {
    /// Its metadata's name and namespace (empty for a ClusterRoleBinding).
    metadata: Metadata,
    /// The role it grants.
    pub role_ref: RoleRef,
    /// Who it grants it to.
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// Each subject as [`Policy::by_subject`] keys it (a ServiceAccount as `namespace:name`,
    /// the binding's namespace when the subject names none).
    fn subject_keys(&self) -> Vec<String> {
        let key = |subject: &Subject| match subject.kind.as_str() {
            "ServiceAccount" => {
                let namespace =
                    if subject.namespace.is_empty() { &self.metadata.namespace } else { &subject.namespace };
                subject_key("ServiceAccount", &format!("{namespace}:{}", subject.name))
            }
            kind => subject_key(kind, &subject.name),
        };
        self.subjects.iter().map(key).collect()
    }

    fn describe(&self, subject: &Subject) -> String {
        let (kind, name) = match self.metadata.namespace.is_empty() {
            true => ("ClusterRoleBinding", self.metadata.name.clone()),
            false => ("RoleBinding", format!("{}/{}", self.metadata.name, self.metadata.namespace)),
        };
        let role = (&self.role_ref.kind, &self.role_ref.name);
        format!("{kind} {name:?} of {} {:?} to {}", role.0, role.1, subject.describe(&self.metadata.namespace))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Metadata {
    name: String,
    namespace: String,
    labels: Map<String, Value>,
}

/// A Role or ClusterRole.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Role {
    metadata: Metadata,
    /// Its own rules.
    #[serde(deserialize_with = "null_as_empty")]
    pub rules: Vec<Rule>,
    /// A ClusterRole's `aggregationRule.clusterRoleSelectors`.
    aggregation_rule: Option<Aggregation>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Aggregation {
    cluster_role_selectors: Vec<Value>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Rule>, D::Error> {
    Ok(Option::<Vec<Rule>>::deserialize(d)?.unwrap_or_default())
}

/// Every Role and ClusterRole, and every binding, keyed by store key (so one range reads a
/// kind, or one namespace's); with what deciding reads kept ready: the bindings naming each
/// subject, and each aggregated ClusterRole's rules (recomputed when a ClusterRole changes,
/// as the aggregation controller would write them).
#[derive(Debug, Default)]
pub struct Policy {
    roles: BTreeMap<String, Role>,
    bindings: BTreeMap<String, Binding>,
    /// `subject_key` → the store keys of the bindings that name it.
    by_subject: HashMap<String, BTreeSet<String>>,
    /// An aggregated ClusterRole's name → its rules and those of every role it selects.
    aggregated: HashMap<String, Vec<Rule>>,
}

/// One subject, as [`Policy::by_subject`] keys it.
fn subject_key(kind: &str, name: &str) -> String {
    format!("{kind}\u{0}{name}")
}

/// Every object under `prefix`.
fn under<T>(map: &BTreeMap<String, T>, prefix: String) -> impl Iterator<Item = &T> {
    map.range(prefix.clone()..).take_while(move |(key, _)| key.starts_with(&prefix)).map(|(_, value)| value)
}

/// The store prefixes the policy follows.
const PREFIXES: [&str; 4] =
    ["/registry/clusterroles/", "/registry/roles/", "/registry/clusterrolebindings/", "/registry/rolebindings/"];

/// What deciding one request found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether a rule allows the request.
    pub allowed: bool,
    /// Upstream's reason: `RBAC: allowed by …`, or the missing roles a denial met.
    pub reason: String,
}

impl Policy {
    /// Each aggregated ClusterRole's rules: its own, then those of every ClusterRole its
    /// selectors match, followed through roles that are aggregated themselves.
    fn aggregate(&mut self) {
        let cluster_roles: Vec<&Role> = under(&self.roles, "/registry/clusterroles/".into()).collect();
        let mut aggregated = HashMap::new();
        for role in cluster_roles.iter().filter(|role| role.aggregation_rule.is_some()) {
            let mut rules = role.rules.clone();
            let mut seen = HashSet::from([role.metadata.name.as_str()]);
            let mut pending = vec![*role];
            while let Some(role) = pending.pop() {
                let Some(aggregation) = &role.aggregation_rule else { continue };
                for other in &cluster_roles {
                    let selected = aggregation
                        .cluster_role_selectors
                        .iter()
                        .any(|selector| crate::selector::selects(selector, &other.metadata.labels));
                    if selected && seen.insert(other.metadata.name.as_str()) {
                        let new: Vec<Rule> = other.rules.iter().filter(|r| !rules.contains(r)).cloned().collect();
                        rules.extend(new);
                        pending.push(other);
                    }
                }
            }
            aggregated.insert(role.metadata.name.clone(), rules);
        }
        self.aggregated = aggregated;
    }

    /// The rules of the role a `roleRef` in `namespace` names, if it exists.
    pub fn role_rules(&self, kind: &str, name: &str, namespace: &str) -> Option<&[Rule]> {
        match kind {
            "Role" => self.roles.get(&format!("/registry/roles/{namespace}/{name}")).map(|role| role.rules.as_slice()),
            _ => match self.aggregated.get(name) {
                Some(rules) => Some(rules),
                None => self.roles.get(&format!("/registry/clusterroles/{name}")).map(|role| role.rules.as_slice()),
            },
        }
    }

    /// The rules a binding grants, or upstream's error for a role that is not there.
    fn granted(&self, binding: &Binding) -> Result<&[Rule], String> {
        let (kind, name) = (&binding.role_ref.kind, &binding.role_ref.name);
        self.role_rules(kind, name, &binding.metadata.namespace).ok_or_else(|| {
            let singular = if kind == "Role" { "role" } else { "clusterrole" };
            format!("{singular}.rbac.authorization.k8s.io {name:?} not found")
        })
    }

    /// Every binding that applies in `namespace` (cluster-wide first, each kind by name),
    /// with the subject that names `user`, as upstream's `VisitRulesFor` walks them.
    fn bindings_for<'a>(&'a self, user: &'a User, namespace: &str) -> impl Iterator<Item = (&'a Binding, &'a Subject)> {
        let mut subjects = vec![subject_key("User", &user.name)];
        subjects.extend(user.groups.iter().map(|group| subject_key("Group", group)));
        if let Some(account) = user.name.strip_prefix("system:serviceaccount:") {
            subjects.push(subject_key("ServiceAccount", account));
        }
        let namespaced = format!("/registry/rolebindings/{namespace}/");
        let mut keys: Vec<&String> = subjects
            .iter()
            .filter_map(|subject| self.by_subject.get(subject))
            .flatten()
            .filter(|key| {
                key.starts_with("/registry/clusterrolebindings/")
                    || (!namespace.is_empty() && key.starts_with(&namespaced))
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys.into_iter().filter_map(move |key| {
            let binding = self.bindings.get(key)?;
            let subject = binding.subjects.iter().find(|s| s.names(user, &binding.metadata.namespace))?;
            Some((binding, subject))
        })
    }

    /// Decides a request as upstream's `RBACAuthorizer.Authorize`.
    pub fn decide(&self, request: &Attributes) -> Decision {
        let namespace = request.resource.as_ref().map(|r| r.namespace.as_str()).unwrap_or_default();
        let mut errors = Vec::new();
        for (binding, subject) in self.bindings_for(&request.user, namespace) {
            match self.granted(binding) {
                Ok(rules) if rules.iter().any(|rule| rule.allows(request)) => {
                    return Decision {
                        allowed: true,
                        reason: format!("RBAC: allowed by {}", binding.describe(subject)),
                    };
                }
                Ok(_) => {}
                Err(error) => errors.push(error),
            }
        }
        let reason = match errors.as_slice() {
            [] => String::new(),
            [one] => format!("RBAC: {one}"),
            many => format!("RBAC: [{}]", many.join(", ")),
        };
        Decision { allowed: false, reason }
    }

    /// Every rule `user` holds in `namespace` (`SelfSubjectRulesReview`), and whether a
    /// missing role left the list incomplete.
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for (binding, _) in self.bindings_for(user, namespace) {
            match self.granted(binding) {
                Ok(granted) => rules.extend_from_slice(granted),
                Err(error) => errors.push(error),
            }
        }
        (rules, errors)
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Put { key, object, .. } => {
                let _ = self.insert(key, object);
            }
            Change::Delete { key, .. } => self.remove(&key),
            Change::Listing | Change::Synced => {}
        }
    }

    /// Keeps an object stored at `key`; one that does not decode as its kind grants nothing.
    fn insert(&mut self, key: String, object: Value) -> Result<(), serde_json::Error> {
        self.remove(&key);
        if key.contains("bindings/") {
            let binding: Binding = serde_json::from_value(object)?;
            for subject in binding.subject_keys() {
                self.by_subject.entry(subject).or_default().insert(key.clone());
            }
            self.bindings.insert(key, binding);
        } else {
            let cluster_role = key.starts_with("/registry/clusterroles/");
            self.roles.insert(key, serde_json::from_value(object)?);
            if cluster_role {
                self.aggregate();
            }
        }
        Ok(())
    }

    fn remove(&mut self, key: &str) {
        if self.roles.remove(key).is_some() && key.starts_with("/registry/clusterroles/") {
            self.aggregate();
        }
        for subject in self.bindings.remove(key).iter().flat_map(Binding::subject_keys) {
            if let Some(keys) = self.by_subject.get_mut(&subject) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_subject.remove(&subject);
                }
            }
        }
    }

    /// Inserts an object as stored under `key` (tests and the bootstrap policy's check).
    #[cfg(test)]
    pub fn with(mut self, key: &str, object: Value) -> Policy {
        self.insert(key.to_string(), object).expect("an RBAC object");
        self
    }
}

impl Policy {
    /// The policy as the store holds it at this moment (read in full, for a decision that
    /// must not lag behind the change feed).
    pub async fn load(store: &dyn crdctl_storage::Store) -> Result<Policy, crdctl_storage::StoreError> {
        let mut policy = Policy::default();
        for prefix in PREFIXES {
            informer::list::<Value>(store, prefix, &mut |change| policy.apply(change)).await?;
        }
        Ok(policy)
    }
}

/// What the aggregation controller writes as the `rules` of `role`, a ClusterRole with an
/// `aggregationRule`, among `roles` (every ClusterRole, in name order): the rules of each other
/// role its selectors match, each once. `None` for a role that aggregates nothing.
pub fn aggregated_rules(role: &Value, roles: &[Value]) -> Option<Vec<Value>> {
    let selectors = role.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array)?;
    let name = crate::object::name(role);
    let empty = Map::new();
    let mut rules: Vec<Value> = Vec::new();
    for other in roles.iter().filter(|other| crate::object::name(other) != name) {
        let labels = crate::object::meta_field(other, "labels").and_then(Value::as_object).unwrap_or(&empty);
        if !selectors.iter().any(|selector| crate::selector::selects(selector, labels)) {
            continue;
        }
        for rule in other.get("rules").and_then(Value::as_array).into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    Some(rules)
}

/// The policy as the store holds it now, kept current by [`follow`].
pub type Shared = Arc<RwLock<Policy>>;

/// Keeps `policy` current with the store until dropped: one informer per kind.
pub async fn follow(store: Arc<dyn crdctl_storage::Store>, policy: Shared) {
    let informers = PREFIXES.map(|prefix| {
        let (store, policy) = (Arc::clone(&store), Arc::clone(&policy));
        async move {
            // A listing hands every object over again: what was not listed is gone.
            let mut listed: Option<Vec<String>> = None;
            informer::follow::<Value>(&*store, prefix, |change| {
                let mut policy = policy.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                match &change {
                    Change::Listing => listed = Some(Vec::new()),
                    Change::Put { key, .. } => listed.iter_mut().for_each(|keys| keys.push(key.clone())),
                    Change::Synced => policy.forget_unlisted(prefix, &listed.take().unwrap_or_default()),
                    Change::Delete { .. } => {}
                }
                policy.apply(change);
            })
            .await
        }
    });
    futures_util::future::join_all(informers).await;
}

impl Policy {
    fn forget_unlisted(&mut self, prefix: &str, listed: &[String]) {
        let listed: HashSet<&str> = listed.iter().map(String::as_str).collect();
        let gone: Vec<String> = (self.roles.keys().chain(self.bindings.keys()))
            .filter(|key| key.starts_with(prefix) && !listed.contains(key.as_str()))
            .cloned()
            .collect();
        gone.iter().for_each(|key| self.remove(key));
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Method;
    use serde_json::json;

    use super::*;

    fn metadata(name: &str, namespace: Option<&str>) -> Value {
        match namespace {
            Some(namespace) => json!({"name": name, "namespace": namespace}),
            None => json!({"name": name}),
        }
    }

    fn role(name: &str, namespace: Option<&str>, rules: Value) -> Value {
        json!({"metadata": metadata(name, namespace), "rules": rules})
    }

    fn binding(name: &str, namespace: Option<&str>, role: (&str, &str), subjects: Value) -> Value {
        json!({"metadata": metadata(name, namespace), "roleRef": {"kind": role.0, "name": role.1}, "subjects": subjects})
    }

    fn ask(policy: &Policy, user: &User, method: Method, path: &str, query: Option<&str>) -> Decision {
        policy.decide(&Attributes::of(user.clone(), &method, path, query))
    }

    #[test]
    fn each_rule_shape_covers_what_upstream_covers() {
        let rules = json!([
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get", "watch", "list"]},
            {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]},
            {"apiGroups": ["*"], "resources": ["secrets"], "verbs": ["*"]},
            {"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]},
        ]);
        let policy = Policy::default()
            .with("/registry/roles/ns/reader", role("reader", Some("ns"), rules.clone()))
            .with("/registry/clusterroles/paths", role("paths", None, rules))
            .with(
                "/registry/rolebindings/ns/sa-reads",
                binding("sa-reads", Some("ns"), ("Role", "reader"), json!([{"kind": "ServiceAccount", "name": "bot"}])),
            )
            .with(
                "/registry/clusterrolebindings/ops-paths",
                binding("ops-paths", None, ("ClusterRole", "paths"), json!([{"kind": "Group", "name": "ops"}])),
            );
        let bot = User::service_account("ns", "bot", "u");
        let get = |path: &str| ask(&policy, &bot, Method::GET, path, None).allowed;
        assert!(get("/api/v1/namespaces/ns/configmaps/settings"), "a named resource");
        assert!(!get("/api/v1/namespaces/ns/configmaps/other"), "another name");
        assert!(!get("/api/v1/namespaces/other/configmaps/settings"), "another namespace");
        assert!(!get("/api/v1/namespaces/ns/configmaps"), "a list is of every name");
        let one = Some("fieldSelector=metadata.name%3Dsettings&watch=true");
        assert!(
            ask(&policy, &bot, Method::GET, "/api/v1/namespaces/ns/configmaps", one).allowed,
            "a watch of the name"
        );
        assert!(ask(&policy, &bot, Method::PUT, "/apis/apps/v1/namespaces/ns/deployments/web/scale", None).allowed);
        assert!(!ask(&policy, &bot, Method::PUT, "/apis/apps/v1/namespaces/ns/deployments/web", None).allowed);
        assert!(get("/apis/example.com/v1/namespaces/ns/secrets/x"), "any group");
        assert!(!get("/healthz/etcd"), "a Role grants no paths");
        let ops = User::named("olga", &["ops"]);
        assert!(ask(&policy, &ops, Method::GET, "/healthz/etcd", None).allowed, "a path prefix");
        assert!(!ask(&policy, &ops, Method::GET, "/healthz", None).allowed);
        assert!(ask(&policy, &ops, Method::DELETE, "/api/v1/namespaces/any/secrets/x", None).allowed, "cluster-wide");
    }

    #[test]
    fn aggregation_and_missing_roles() {
        let policy = Policy::default()
            .with(
                "/registry/clusterroles/edit",
                json!({"metadata": {"name": "edit"}, "rules": null,
                    "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-edit": "true"}}]}}),
            )
            .with(
                "/registry/clusterroles/crontab-editor",
                json!({"metadata": {"name": "crontab-editor", "labels": {"aggregate-to-edit": "true"}},
                    "rules": [{"apiGroups": ["stable.example.com"], "resources": ["crontabs"], "verbs": ["create"]}]}),
            )
            .with(
                "/registry/rolebindings/team/edit",
                binding("edit", Some("team"), ("ClusterRole", "edit"), json!([{"kind": "User", "name": "jane"}])),
            )
            .with(
                "/registry/rolebindings/team/gone",
                binding("gone", Some("team"), ("Role", "gone"), json!([{"kind": "User", "name": "jane"}])),
            );
        let jane = User::named("jane", &[]);
        let create = ask(&policy, &jane, Method::POST, "/apis/stable.example.com/v1/namespaces/team/crontabs", None);
        assert_eq!(
            create,
            Decision {
                allowed: true,
                reason: r#"RBAC: allowed by RoleBinding "edit/team" of ClusterRole "edit" to User "jane""#.into()
            }
        );
        let delete =
            ask(&policy, &jane, Method::DELETE, "/apis/stable.example.com/v1/namespaces/team/crontabs/a", None);
        assert_eq!(delete.reason, r#"RBAC: role.rbac.authorization.k8s.io "gone" not found"#);
        let (rules, errors) = policy.rules_for(&jane, "team");
        assert_eq!((rules.len(), errors.len()), (1, 1));
    }
}

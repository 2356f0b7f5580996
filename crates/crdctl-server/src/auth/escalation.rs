//! RBAC's escalation prevention, as upstream's policy-based role and binding storage: a user
//! may write a Role or ClusterRole only with rules it holds itself (or the `escalate` verb on
//! it), and a binding only to a role whose rules it holds (or the `bind` verb on that role);
//! an `aggregationRule` takes every right there is. Refusals are 403s in upstream's words,
//! listing the missing rights compacted and sorted as `rbacv1helpers.CompactString` prints them.

use serde_json::Value;

use super::attributes::{Attributes, Resource};
use super::rbac::{Policy, Rule};
use super::{Authorizer, User};
use crate::error::{ApiError, ApiResult, Subject};

const GROUP: &str = "rbac.authorization.k8s.io";

/// Whether `user` may write `object`, a `kind` (Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding), without escalating. A refusal is decided again on the policy as the
/// store holds it now, as the authorizer decides a denial.
pub async fn confirm(
    (authorizer, store): (&Authorizer, &dyn crdctl_storage::Store),
    user: &User,
    kind: &str,
    object: &Value,
) -> ApiResult<()> {
    let cached = check(authorizer, &authorizer.policy.read().unwrap_or_else(|p| p.into_inner()), user, kind, object);
    if cached.is_ok() || !authorizer.uses_rbac() {
        return cached;
    }
    match Policy::load(store).await {
        Ok(now) => check(authorizer, &now, user, kind, object),
        Err(_) => cached,
    }
}

/// [`confirm`] on `policy`.
fn check(authorizer: &Authorizer, policy: &Policy, user: &User, kind: &str, object: &Value) -> ApiResult<()> {
    let name = crate::object::name(object);
    let namespace = crate::object::meta_str(object, "namespace").unwrap_or_default();
    let plural = match kind {
        "Role" => "roles",
        "ClusterRole" => "clusterroles",
        "RoleBinding" => "rolebindings",
        _ => "clusterrolebindings",
    };
    let forbidden = |detail: &str| ApiError::forbidden(Subject { group: GROUP, resource: plural, name }, detail);
    let may = |verb: &str, resource: &str, name: &str| {
        let resource = Resource {
            group: GROUP.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Resource::default()
        };
        let request =
            Attributes { user: user.clone(), verb: verb.into(), path: String::new(), resource: Some(resource) };
        authorizer.decide(&request).allowed
    };
    if !kind.ends_with("Binding") {
        if may("escalate", plural, name) {
            return Ok(());
        }
        let rules: Vec<Rule> =
            serde_json::from_value(object.get("rules").cloned().unwrap_or_default()).unwrap_or_default();
        missing_rights((authorizer, policy), user, namespace, &rules).map_err(|detail| forbidden(&detail))?;
        if object.get("aggregationRule").is_some_and(|rule| !rule.is_null()) {
            let everything = Rule {
                verbs: vec!["*".into()],
                api_groups: vec!["*".into()],
                resources: vec!["*".into()],
                ..Rule::default()
            };
            let urls = Rule { verbs: vec!["*".into()], non_resource_urls: vec!["*".into()], ..Rule::default() };
            missing_rights((authorizer, policy), user, namespace, &[everything, urls])
                .map_err(|_| forbidden("must have cluster-admin privileges to use the aggregationRule"))?;
        }
        return Ok(());
    }
    let role_kind = object.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
    let role = object.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
    let role_plural = if role_kind == "Role" { "roles" } else { "clusterroles" };
    if may("bind", role_plural, role) {
        return Ok(());
    }
    let rules = policy.role_rules(role_kind, role, namespace).ok_or_else(|| {
        let singular = if role_kind == "Role" { "role" } else { "clusterrole" };
        ApiError::not_found(Subject { group: GROUP, resource: singular, name: role })
    })?;
    missing_rights((authorizer, policy), user, namespace, rules).map_err(|detail| forbidden(&detail))
}

/// Upstream's `ConfirmNoEscalation`: the rights of `rules` that `user` does not hold in
/// `namespace`, as its message.
fn missing_rights(
    (authorizer, policy): (&Authorizer, &Policy),
    user: &User,
    namespace: &str,
    rules: &[Rule],
) -> Result<(), String> {
    if authorizer.allows_everything(user) {
        return Ok(());
    }
    let (held, errors) = policy.rules_for(user, namespace);
    let missing: Vec<Rule> =
        rules.iter().flat_map(breakdown).filter(|right| !held.iter().any(|rule| covers(rule, right))).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    let groups = quoted(&user.groups);
    let mut message = format!(
        "user {:?} (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        lines.join("\n")
    );
    if !errors.is_empty() {
        message.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(message)
}

/// One rule per group, resource, verb and name (or path and verb): upstream's `BreakdownRule`.
fn breakdown(rule: &Rule) -> Vec<Rule> {
    let one = |s: &String| vec![s.clone()];
    let mut rights = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let right =
                    Rule { api_groups: one(group), resources: one(resource), verbs: one(verb), ..Rule::default() };
                match rule.resource_names.is_empty() {
                    true => rights.push(right),
                    false => rights.extend(
                        rule.resource_names.iter().map(|name| Rule { resource_names: one(name), ..right.clone() }),
                    ),
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        rights.extend(rule.verbs.iter().map(|verb| Rule {
            non_resource_urls: one(url),
            verbs: one(verb),
            ..Rule::default()
        }));
    }
    rights
}

/// Whether `owner` covers every right of `right` (upstream's `ruleCovers`).
fn covers(owner: &Rule, right: &Rule) -> bool {
    let all =
        |set: &[String], wanted: &[String]| set.iter().any(|s| s == "*") || wanted.iter().all(|w| set.contains(w));
    let resources = owner.resources.iter().any(|r| r == "*")
        || right.resources.iter().all(|resource| {
            owner.resources.contains(resource)
                || resource.split_once('/').is_some_and(|(_, sub)| owner.resources.contains(&format!("*/{sub}")))
        });
    let urls = right
        .non_resource_urls
        .iter()
        .all(|url| owner.non_resource_urls.iter().any(|rule| super::rbac::url_covers(rule, url)));
    let names =
        owner.resource_names.is_empty() || right.resource_names.iter().all(|n| owner.resource_names.contains(n));
    all(&owner.verbs, &right.verbs) && all(&owner.api_groups, &right.api_groups) && resources && urls && names
}

/// Upstream's `CompactRules`: rights on one resource (and name) in one group merge their verbs.
fn compact(rights: Vec<Rule>) -> Vec<Rule> {
    let mut compacted: Vec<Rule> = Vec::new();
    for right in rights {
        let simple = right.non_resource_urls.is_empty() && right.api_groups.len() == 1 && right.resources.len() == 1;
        let same = |rule: &&mut Rule| {
            rule.non_resource_urls.is_empty()
                && (&rule.api_groups, &rule.resources, &rule.resource_names)
                    == (&right.api_groups, &right.resources, &right.resource_names)
        };
        match compacted.iter_mut().find(|rule| simple && same(rule)) {
            Some(rule) => rule.verbs.extend(right.verbs),
            None => compacted.push(right),
        }
    }
    compacted
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|item| crdctl_model::go::quote(item)).collect();
    format!("[{}]", items.join(" "))
}

/// `rbacv1helpers.CompactString`.
fn compact_string(rule: &Rule) -> String {
    let parts = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ];
    let shown: Vec<String> = parts
        .iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(name, list)| format!("{name}:{}", quoted(list)))
        .collect();
    format!("{{{}}}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::Mode;

    fn confirm(authorizer: &Authorizer, user: &User, kind: &str, object: &Value) -> ApiResult<()> {
        check(authorizer, &authorizer.policy.read().unwrap(), user, kind, object)
    }

    fn authorizer() -> Authorizer {
        let authorizer = Authorizer::new(Mode::Rbac);
        let reader = json!({"metadata": {"name": "reader", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps", "*/log"], "verbs": ["get", "list"]}]});
        let bound = json!({"metadata": {"name": "jane-reads", "namespace": "team"},
            "roleRef": {"kind": "Role", "name": "reader"}, "subjects": [{"kind": "User", "name": "jane"}]});
        let mut policy = authorizer.policy.write().unwrap();
        *policy = std::mem::take(&mut *policy)
            .with("/registry/roles/team/reader", reader)
            .with("/registry/rolebindings/team/jane-reads", bound);
        drop(policy);
        authorizer
    }

    #[test]
    fn a_role_may_grant_only_what_its_writer_holds() {
        let authorizer = authorizer();
        let jane = User::named("jane", &["dev"]);
        let subset = json!({"metadata": {"name": "r", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        assert!(confirm(&authorizer, &jane, "Role", &subset).is_ok());
        let more = json!({"metadata": {"name": "r", "namespace": "team"},
            "rules": [{"apiGroups": ["", "apps"], "resources": ["configmaps", "secrets"], "verbs": ["get", "delete"]}]});
        let refused = confirm(&authorizer, &jane, "Role", &more).unwrap_err();
        assert_eq!(refused.code, 403);
        assert_eq!(
            refused.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"jane\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}\n\
             {APIGroups:[\"apps\"], Resources:[\"configmaps\"], Verbs:[\"get\" \"delete\"]}\n\
             {APIGroups:[\"apps\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
        );
        let logs = json!({"metadata": {"name": "r", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["pods/log"], "resourceNames": ["web"], "verbs": ["get"]}]});
        assert!(confirm(&authorizer, &jane, "Role", &logs).is_ok(), "*/log covers pods/log");
        let aggregated = json!({"metadata": {"name": "all"}, "aggregationRule": {"clusterRoleSelectors": []}});
        let refused = confirm(&authorizer, &jane, "ClusterRole", &aggregated).unwrap_err();
        assert!(refused.message.ends_with("must have cluster-admin privileges to use the aggregationRule"));
        assert!(confirm(&authorizer, &User::administrator(), "ClusterRole", &aggregated).is_ok());
    }

    #[test]
    fn a_binding_may_grant_only_a_role_its_writer_holds() {
        let authorizer = authorizer();
        let jane = User::named("jane", &[]);
        let binding = |kind: &str, role: &str| json!({"metadata": {"name": "b", "namespace": "team"}, "roleRef": {"kind": kind, "name": role}, "subjects": []});
        assert!(confirm(&authorizer, &jane, "RoleBinding", &binding("Role", "reader")).is_ok());
        let missing = confirm(&authorizer, &jane, "RoleBinding", &binding("ClusterRole", "ghost")).unwrap_err();
        assert_eq!(
            (missing.code.as_u16(), missing.message.as_str()),
            (404, r#"clusterrole.rbac.authorization.k8s.io "ghost" not found"#)
        );
        assert!(confirm(&authorizer, &User::named("bob", &[]), "RoleBinding", &binding("Role", "reader")).is_err());
    }
}

//! The bootstrap policy: the ClusterRoles and ClusterRoleBindings every cluster has
//! (`cluster-admin`, `admin`/`edit`/`view` and their aggregation, discovery and public-info),
//! kept as data in `bootstrap-policy.yaml`, created on start where missing and reconciled where
//! not ([`crate::bootstrap`]), as upstream's RBAC post-start hook does.

use serde::Deserialize;
use serde_json::{Map, Value, json};

const POLICY: &str = include_str!("bootstrap-policy.yaml");

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bootstrap {
    cluster_roles: Vec<Map<String, Value>>,
    cluster_role_bindings: Vec<Map<String, Value>>,
}

/// Every bootstrap object, `ClusterRole`s first, as created: an aggregated role already holds
/// the rules the aggregation controller would write, so a fresh server has nothing to write.
pub fn objects() -> Vec<Value> {
    let mut objects = defined();
    let roles = objects.iter().take_while(|object| object.get("kind").and_then(Value::as_str) == Some("ClusterRole"));
    let mut roles: Vec<Value> = roles.cloned().collect();
    roles.sort_by(|a, b| crate::object::name(a).cmp(crate::object::name(b)));
    // Roles aggregate roles that aggregate others (admin ← edit ← view): until nothing changes.
    loop {
        let mut changed = false;
        for at in 0..roles.len() {
            let Some(rules) = roles.get(at).and_then(|role| super::rbac::aggregated_rules(role, &roles)) else {
                continue;
            };
            if let Some(role) =
                roles.get_mut(at).filter(|role| role.get("rules").and_then(Value::as_array) != Some(&rules))
            {
                crate::object::set(role, "rules", Value::Array(rules));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for object in &mut objects {
        if let Some(role) = roles.iter().find(|role| {
            crate::object::name(role) == crate::object::name(object) && object.get("kind") == role.get("kind")
        }) {
            *object = role.clone();
        }
    }
    objects
}

/// The objects as `bootstrap-policy.yaml` defines them.
fn defined() -> Vec<Value> {
    // The file is part of the build and its test reads it: it always parses.
    let Ok(policy) = serde_saphyr::from_str::<Bootstrap>(POLICY) else { return Vec::new() };
    let roles = policy.cluster_roles.into_iter().map(|object| (object, "ClusterRole"));
    let bindings = policy.cluster_role_bindings.into_iter().map(|object| (object, "ClusterRoleBinding"));
    roles
        .chain(bindings)
        .map(|(mut object, kind)| {
            object.insert("apiVersion".into(), json!("rbac.authorization.k8s.io/v1"));
            object.insert("kind".into(), json!(kind));
            let mut object = Value::Object(object);
            let meta = crate::object::meta_mut(&mut object);
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            crate::object::set(labels, "kubernetes.io/bootstrapping", json!("rbac-defaults"));
            meta.insert("annotations".into(), json!({"rbac.authorization.kubernetes.io/autoupdate": "true"}));
            object
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::super::rbac::Policy;
    use super::super::{Attributes, User};
    use super::*;

    fn policy() -> Policy {
        assert_eq!(objects().len(), 19, "13 ClusterRoles and 6 bindings");
        objects().into_iter().fold(Policy::default(), |policy, object| {
            let plural = if object["kind"] == "ClusterRole" { "clusterroles" } else { "clusterrolebindings" };
            let key = format!("/registry/{plural}/{}", object["metadata"]["name"].as_str().unwrap());
            policy.with(&key, object)
        })
    }

    #[test]
    fn aggregated_roles_start_as_the_aggregation_controller_would_write_them() {
        let mut roles: Vec<Value> = objects().into_iter().filter(|o| o["kind"] == "ClusterRole").collect();
        roles.sort_by(|a, b| crate::object::name(a).cmp(crate::object::name(b)));
        let edit = roles.iter().find(|r| crate::object::name(r) == "edit").unwrap();
        assert!(edit["rules"].as_array().unwrap().len() > 10, "edit holds view's and its own rules");
        for role in &roles {
            if let Some(rules) = super::super::rbac::aggregated_rules(role, &roles) {
                assert_eq!(
                    Some(&rules),
                    role["rules"].as_array(),
                    "{}: the controller would rewrite it",
                    role["metadata"]["name"]
                );
            }
        }
    }

    #[test]
    fn every_user_may_discover_and_ask_about_itself_and_nothing_more() {
        let policy = policy();
        let jane = User::named("jane", &[]);
        let ask =
            |method: axum::http::Method, path: &str| policy.decide(&Attributes::of(jane.clone(), &method, path, None));
        let discovery = ask(axum::http::Method::GET, "/apis/apps/v1");
        assert!(discovery.allowed);
        assert_eq!(
            discovery.reason,
            r#"RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated""#
        );
        assert!(ask(axum::http::Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").allowed);
        assert!(!ask(axum::http::Method::GET, "/api/v1/namespaces/ns/configmaps").allowed);
        assert!(!ask(axum::http::Method::GET, "/metrics").allowed);
        let anonymous = Attributes::of(User::anonymous(), &axum::http::Method::GET, "/version", None);
        assert!(policy.decide(&anonymous).allowed, "public info");
    }
}

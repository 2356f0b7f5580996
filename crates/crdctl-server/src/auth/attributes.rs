//! What a request asks to do, as upstream's `authorizer.Attributes` carry it: the user, the
//! verb, and either the resource (group, resource, subresource, namespace, name) or the path;
//! and the 403 that refuses it, in `responsewriters.Forbidden`'s words.

use axum::http::Method;

use super::User;
use crate::error::{ApiError, Subject};
use crate::request::{Verb, parse_path};

/// What an authorizer decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: User,
    /// `get`, `list`, `watch`, `create`, …; a non-resource request's lower-case method.
    pub verb: String,
    /// The request path (what non-resource rules match).
    pub path: String,
    /// The resource, for a resource request.
    pub resource: Option<Resource>,
}

/// The resource a request acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// The API group (`""` for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, if any.
    pub subresource: Option<String>,
    /// The namespace (a namespace's own name for the namespace itself); empty if cluster-wide.
    pub namespace: String,
    /// The object's name; empty for collections.
    pub name: String,
}

impl Resource {
    /// Whether `named` is this resource (and subresource) as a rule names it, without
    /// building the combined name.
    pub fn is(&self, named: &str) -> bool {
        match (&self.subresource, named.strip_prefix(self.resource.as_str())) {
            (None, Some(rest)) => rest.is_empty(),
            (Some(sub), Some(rest)) => rest.strip_prefix('/') == Some(sub.as_str()),
            (_, None) => false,
        }
    }

    /// `resource` or `resource/subresource`, as rules name them.
    pub fn combined(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }
}

/// Go's `strconv.ParseBool` truth.
fn truthy(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

impl Attributes {
    /// The attributes of a request, as upstream's `RequestInfoFactory` derives them.
    pub fn of(user: User, method: &Method, path: &str, query: Option<&str>) -> Attributes {
        let info = parse_path(path).filter(|info| info.resource.is_some());
        let Some(info) = info else {
            let verb = method.as_str().to_ascii_lowercase();
            return Attributes { user, verb, path: path.to_string(), resource: None };
        };
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
        let param = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let watch = param("watch").is_some_and(truthy);
        let resource_name = info.resource.clone().unwrap_or_default();
        let mut name = info.name.clone().unwrap_or_default();
        let verb = Verb::of(method, !name.is_empty(), watch).map(Verb::name);
        // A list or watch of one name (`fieldSelector=metadata.name=x`) is about that name.
        if matches!(verb, Some("list" | "watch"))
            && let Some(selected) = param("fieldSelector").and_then(|s| s.strip_prefix("metadata.name="))
            && !selected.contains(',')
        {
            name = selected.to_string();
        }
        let namespace = match (&info.namespace, resource_name.as_str()) {
            (Some(namespace), _) => namespace.clone(),
            (None, "namespaces") => name.clone(),
            (None, _) => String::new(),
        };
        Attributes {
            user,
            verb: verb.map(str::to_string).unwrap_or_else(|| method.as_str().to_ascii_lowercase()),
            path: path.to_string(),
            resource: Some(Resource {
                group: info.group,
                version: info.version,
                resource: resource_name,
                subresource: info.subresource,
                namespace,
                name,
            }),
        }
    }

    /// The 403 refusing the request, as upstream's `responsewriters.Forbidden` words it, with
    /// the authorizer's `reason` after it when there is one.
    pub fn forbidden(&self, reason: &str) -> ApiError {
        let user = &self.user.name;
        let mut detail = match &self.resource {
            None => format!("User {user:?} cannot {} path {:?}", self.verb, self.path),
            Some(resource) => {
                let scope = match resource.namespace.as_str() {
                    "" => "at the cluster scope".to_string(),
                    namespace => format!("in the namespace {namespace:?}"),
                };
                format!(
                    "User {user:?} cannot {} resource {:?} in API group {:?} {scope}",
                    self.verb,
                    resource.combined(),
                    resource.group
                )
            }
        };
        if !reason.is_empty() {
            detail = format!("{detail}: {reason}");
        }
        match &self.resource {
            None => ApiError::forbidden_path(&detail),
            Some(resource) => ApiError::forbidden(
                Subject { group: &resource.group, resource: &resource.resource, name: &resource.name },
                &detail,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(method: Method, path: &str, query: Option<&str>) -> Attributes {
        Attributes::of(User::named("jane", &["dev"]), &method, path, query)
    }

    #[test]
    fn verbs_names_and_namespaces_are_derived_as_upstream() {
        let watch = attributes(
            Method::GET,
            "/api/v1/namespaces/ns/configmaps",
            Some("watch=1&fieldSelector=metadata.name%3Dcm"),
        );
        let resource = watch.resource.as_ref().unwrap();
        assert_eq!((watch.verb.as_str(), resource.name.as_str(), resource.namespace.as_str()), ("watch", "cm", "ns"));
        let namespace = attributes(Method::GET, "/api/v1/namespaces/team", None);
        assert_eq!(namespace.resource.unwrap().namespace, "team", "a namespace is in itself");
        let collection = attributes(Method::DELETE, "/apis/apps/v1/namespaces/ns/deployments", None);
        assert_eq!(collection.verb, "deletecollection");
        let path = attributes(Method::GET, "/apis/apps", None);
        assert_eq!((path.verb.as_str(), path.resource.is_none()), ("get", true));
    }

    #[test]
    fn forbidden_messages_are_upstreams() {
        let list = attributes(Method::GET, "/api/v1/namespaces/ns/configmaps", None);
        assert_eq!(
            list.forbidden("").message,
            r#"configmaps is forbidden: User "jane" cannot list resource "configmaps" in API group "" in the namespace "ns""#
        );
        let scale = attributes(Method::PUT, "/apis/apps/v1/namespaces/ns/deployments/web/scale", None);
        assert_eq!(
            scale.forbidden("RBAC: role.rbac.authorization.k8s.io \"gone\" not found").message,
            r#"deployments.apps "web" is forbidden: User "jane" cannot update resource "deployments/scale" in API group "apps" in the namespace "ns": RBAC: role.rbac.authorization.k8s.io "gone" not found"#
        );
        let nodes = attributes(Method::GET, "/api/v1/nodes", None);
        assert!(nodes.forbidden("").message.ends_with(r#"in API group "" at the cluster scope"#));
        let path = attributes(Method::GET, "/metrics", None);
        assert_eq!(path.forbidden("").message, r#"forbidden: User "jane" cannot get path "/metrics""#);
    }
}

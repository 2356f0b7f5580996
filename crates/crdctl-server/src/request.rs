//! The parsed path of an API request, as kube-apiserver's `RequestInfoFactory` splits it, and
//! its [`Verb`]: what routing, metrics and the test server's request log read.

use axum::http::Method;

/// What a request does, as upstream's `RequestInfo.Verb`: computed once per request from the
/// method, whether the path names an object, and `watch`; routing's verb check and the
/// metrics' labels read the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of an object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of an object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb of a request with `method` on an object (`named`) or a collection; `None` for
    /// methods no resource serves.
    pub fn of(method: &Method, named: bool, watch: bool) -> Option<Verb> {
        Some(match *method {
            Method::GET if named => Verb::Get,
            Method::GET if watch => Verb::Watch,
            Method::GET => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if named => Verb::Delete,
            Method::DELETE => Verb::DeleteCollection,
            _ => return None,
        })
    }

    /// The verb as discovery and RBAC name it (`deletecollection`).
    pub fn name(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// The parsed path of an API request (kube-apiserver's `RequestInfo`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The API group (`""` for the core group under `/api`).
    pub group: String,
    /// The version; empty for group discovery.
    pub version: String,
    /// The namespace of a namespaced request.
    pub namespace: Option<String>,
    /// The resource (plural); `None` for discovery.
    pub resource: Option<String>,
    /// The object's name.
    pub name: Option<String>,
    /// The subresource (`status`).
    pub subresource: Option<String>,
}

/// Splits `/api/v1/...` and `/apis/<g>/<v>/...` as kube-apiserver's RequestInfoFactory does.
pub(crate) fn parse_path(path: &str) -> Option<RequestInfo> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.split_first()? {
        (&"api", rest) => ("", rest),
        (&"apis", [group, rest @ ..]) => (*group, rest),
        (&"apis", []) => return Some(RequestInfo::default()),
        _ => return None,
    };
    let mut parsed = RequestInfo { group: group.to_string(), ..RequestInfo::default() };
    let Some((version, rest)) = rest.split_first() else { return Some(parsed) };
    parsed.version = version.to_string();
    // `namespaces/<name>/status` and `…/finalize` are a namespace's subresources, not
    // resources in it (upstream's `namespaceSubresources`).
    let rest = match rest {
        ["namespaces", _, "status" | "finalize"] => rest,
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
            parsed.namespace = Some(namespace.to_string());
            rest
        }
        other => other,
    };
    parsed.resource = rest.first().map(|s| s.to_string());
    parsed.name = rest.get(1).map(|s| s.to_string());
    parsed.subresource = rest.get(2).map(|s| s.to_string());
    if rest.len() > 3 {
        return None;
    }
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_like_request_info() {
        let path = parse_path("/apis/example.com/v1/namespaces/ns/crontabs/a/status").unwrap();
        assert_eq!(
            path,
            RequestInfo {
                group: "example.com".into(),
                version: "v1".into(),
                namespace: Some("ns".into()),
                resource: Some("crontabs".into()),
                name: Some("a".into()),
                subresource: Some("status".into()),
            }
        );
        let status = parse_path("/api/v1/namespaces/team-a/finalize").unwrap();
        let parsed = (status.namespace.as_deref(), status.resource.as_deref(), status.name.as_deref());
        assert_eq!(
            (parsed, status.subresource.as_deref()),
            ((None, Some("namespaces"), Some("team-a")), Some("finalize"))
        );
        let namespace = parse_path("/api/v1/namespaces/default").unwrap();
        assert_eq!((namespace.resource.as_deref(), namespace.name.as_deref()), (Some("namespaces"), Some("default")));
        assert_eq!(parse_path("/apis/example.com").unwrap().version, "");
        assert!(parse_path("/apis/g/v/r/n/s/extra").is_none());
        assert!(parse_path("/other").is_none());
    }
}

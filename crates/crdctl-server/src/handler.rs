//! Routing: a request path becomes discovery, or a verb on an [`Endpoint`], after the checks
//! apiextensions' `crdHandler.ServeHTTP` makes (served version, scope, names accepted), with
//! the deprecation warning of the version and the response in the negotiated representation.

use axum::body::Bytes;
use axum::extract::{Extension, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::auth::User;
use crate::error::{ApiError, ApiResult};
use crate::negotiate::{self, BodyType, Representation};
use crate::registry::builtin;
use crate::registry::resource;
use crate::request::{RequestInfo, Verb, parse_path};
use crate::rest::{self, Body, Change, Endpoint, Params, Reply, Subresource};
use crate::state::AppState;

/// Every `/api` and `/apis` request.
pub async fn api(
    State(state): State<AppState>,
    Extension(user): Extension<User>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let Ok(Query(mut params)) = params else {
        return ApiError::bad_request(format!("invalid query parameters: {}", uri.query().unwrap_or_default()))
            .into_response();
    };
    params.user_agent = headers.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let path = parse_path(uri.path());
    let content_type = headers.get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    // What the request does, once, for the verb check and the metrics alike.
    let verb = path.as_ref().and_then(|path| Verb::of(&method, path.name.is_some(), params.is_watch()));
    let request =
        path.as_ref().and_then(|path| crate::metrics::Request::new(verb, path, params.dry_run.is_some(), content_type));
    // The only way reading a body fails is the size limit (or a client that went away).
    let response = match body {
        Ok(body) => match route((&state, &user), (&method, verb), path, &uri, &headers, params, &body).await {
            Ok(response) => response,
            Err(err) => err.into_response(),
        },
        Err(_) => ApiError::too_large().into_response(),
    };
    if let Some(request) = request {
        state.metrics.record(request, response.status());
    }
    response
}

/// The subresource a request addresses, of those `endpoint` has.
fn subresource_of(endpoint: &Endpoint, path: &RequestInfo, method: &Method) -> ApiResult<Subresource> {
    Ok(match path.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if endpoint.has_status() => Subresource::Status,
        Some("scale") if endpoint.scale_paths().is_some() => Subresource::Scale,
        Some("token") if endpoint.has(resource::Subresource::Token) => Subresource::Token,
        Some("finalize") if endpoint.has(resource::Subresource::Finalize) && *method == Method::PUT => {
            Subresource::Finalize
        }
        Some("finalize") if endpoint.has(resource::Subresource::Finalize) => {
            return Err(ApiError::method_not_allowed());
        }
        Some(sub) if endpoint.runs_on_a_node(sub) => {
            return Err(ApiError::bad_request(format!(
                "{} {:?} has no node to {sub}: crdctl serve runs no kubelet, so no pod runs",
                endpoint.resource,
                path.name.as_deref().unwrap_or_default()
            )));
        }
        Some(_) => return Err(ApiError::not_found(endpoint.subject(path.name.as_deref().unwrap_or_default()))),
    })
}

async fn route(
    (state, user): (&AppState, &User),
    (method, verb): (&Method, Option<Verb>),
    path: Option<RequestInfo>,
    uri: &Uri,
    headers: &HeaderMap,
    params: Params,
    body: &Bytes,
) -> ApiResult<Response> {
    let path = path.ok_or_else(ApiError::no_route)?;
    let Some(resource) = path.resource.clone() else {
        return discovery(state, &path, uri.path().starts_with("/apis"), headers);
    };
    let (endpoint, warnings) = endpoint(state, &path, &resource, method)?;
    let cx = state.verbs_as(user);
    let representation = match negotiate::representation(headers)? {
        Representation::Protobuf if !endpoint.speaks_protobuf() => Representation::Object,
        representation => representation,
    };
    if !warnings.is_empty() {
        state.metrics.record_deprecated(&path);
    }
    let name = path.name.as_deref();
    let subresource = subresource_of(&endpoint, &path, method)?;
    let main = subresource == Subresource::Main;
    // A verb the resource lacks (discovery does not list it) is 405, as go-restful answers a
    // route that is not registered.
    let verb = verb.ok_or_else(ApiError::method_not_allowed)?;
    if main && !endpoint.served.allows(verb.name()) {
        return Err(ApiError::method_not_allowed());
    }
    let decode = || -> ApiResult<(BodyType, Value)> {
        let body_type = negotiate::body_type(headers)?;
        if body_type == BodyType::Protobuf && !endpoint.speaks_protobuf() {
            return Err(ApiError::unsupported_media_type(&["application/json", "application/yaml"]));
        }
        let object = match endpoint.served.typed() {
            true => negotiate::decode_object(body, body_type, &endpoint.type_kind)?,
            false => negotiate::decode_body(body, body_type)?,
        };
        Ok((body_type, object))
    };
    let reply = match (method.clone(), name) {
        (Method::GET, None) if params.is_watch() => {
            return crate::watch::watch(state.watching(), endpoint, params, representation, warnings).await;
        }
        (Method::GET, Some(_)) if params.is_watch() => {
            return Err(ApiError::bad_request("watch of a single object: use a fieldSelector on metadata.name"));
        }
        (Method::GET, None) => rest::list(cx, &endpoint, &params, representation).await?,
        (Method::GET, Some(name)) => rest::get(cx, &endpoint, name).await?,
        (Method::POST, None) if main => {
            let (body_type, object) = decode()?;
            if matches!(body_type, BodyType::Json | BodyType::Yaml | BodyType::Protobuf) {
                rest::create(cx, &endpoint, object, &params, rest::Managed::Record).await?
            } else {
                return Err(ApiError::unsupported_media_type(&["application/json", "application/yaml"]));
            }
        }
        (Method::POST, Some(name)) if subresource == Subresource::Token => {
            let (_, request) = decode()?;
            rest::request_token(cx, &endpoint, name, request).await?
        }
        (Method::PUT, Some(name)) => {
            let (_, object) = decode()?;
            rest::update(cx, &endpoint, name, Change::Replace(object), subresource, &params).await?
        }
        (Method::PATCH, Some(name)) => {
            let body_type = negotiate::body_type(headers)?;
            let patch = negotiate::decode_body(body, body_type)?;
            rest::update(cx, &endpoint, name, Change::Patch(body_type, patch), subresource, &params).await?
        }
        (Method::DELETE, Some(name)) if main => {
            let options = rest::DeleteOptions::read(body, negotiate::body_type(headers)?, &params)?;
            rest::delete(cx, &endpoint, name, &options).await?
        }
        (Method::DELETE, None) if main => {
            let options = rest::DeleteOptions::read(body, negotiate::body_type(headers)?, &params)?;
            rest::delete_collection(cx, &endpoint, &params, &options).await?
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    let reply = match subresource {
        Subresource::Scale if !reply.body.is_status() => {
            let paths = endpoint.scale_paths().ok_or_else(|| ApiError::internal("the resource has no scale"))?;
            let scale = crate::registry::scale::of(&reply.body.into_value()?, paths);
            Reply { body: Body::Value(scale), ..reply }
        }
        _ => reply,
    };
    crate::render::reply(&endpoint, reply, representation, &params, warnings)
}

/// Finds what a resource path addresses — a row of the built-in table, or a served version of
/// a CRD — with the version's deprecation warning.
fn endpoint(
    state: &AppState,
    path: &RequestInfo,
    resource: &str,
    method: &Method,
) -> ApiResult<(Endpoint, Vec<String>)> {
    let (endpoint, warnings) = match builtin::find(&path.group, &path.version, resource) {
        Some(built_in) => (Endpoint::built_in(built_in, path.namespace.clone()), Vec::new()),
        None => {
            let served = state.registry.by_resource(&path.group, resource).filter(|crd| crd.serving());
            let served = served.ok_or_else(ApiError::no_route)?;
            let version = served.served_version(&path.version).ok_or_else(ApiError::no_route)?;
            let warnings = crate::warnings::deprecation_warning(&served.crd.definition, &version.name);
            let warnings = warnings.into_iter().collect();
            (Endpoint::custom(served, &path.version, path.namespace.clone()), warnings)
        }
    };
    // Scope: cluster-scoped objects have no namespace; namespaced ones need one, except for
    // lists and watches across all namespaces.
    let collection_read = *method == Method::GET && path.name.is_none();
    match (endpoint.namespaced, path.namespace.is_some()) {
        (false, true) => Err(ApiError::no_route()),
        (true, false) if !collection_read => Err(ApiError::no_route()),
        _ => Ok((endpoint, warnings)),
    }
}

fn discovery(state: &AppState, path: &RequestInfo, apis: bool, headers: &HeaderMap) -> ApiResult<Response> {
    let groups = if apis { crate::discovery::groups(&state.registry) } else { crate::discovery::core_groups() };
    let ranges = negotiate::accept_ranges(headers);
    if path.group.is_empty() && path.version.is_empty() {
        if crate::discovery::wants_aggregated(&ranges) {
            let document = crate::discovery::aggregated(&groups);
            let etag = crate::discovery::etag(&document);
            if headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
                let mut response = StatusCode::NOT_MODIFIED.into_response();
                response
                    .headers_mut()
                    .insert(ETAG, HeaderValue::from_str(&etag).map_err(|e| ApiError::internal(e.to_string()))?);
                return Ok(response);
            }
            let mut response = crate::render::json(StatusCode::OK, &document);
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(crate::discovery::AGGREGATED_CONTENT_TYPE));
            headers.insert(ETAG, HeaderValue::from_str(&etag).map_err(|e| ApiError::internal(e.to_string()))?);
            headers.insert(VARY, HeaderValue::from_static("Accept"));
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("public"));
            return Ok(response);
        }
        let _ = negotiate::representation(headers)?;
        let document = if apis { crate::discovery::api_group_list(&groups) } else { crate::discovery::api_versions() };
        return Ok(crate::render::json(StatusCode::OK, &document));
    }
    let _ = negotiate::representation(headers)?;
    let group = groups.iter().find(|g| g.name == path.group).ok_or_else(ApiError::no_route)?;
    if path.version.is_empty() {
        return Ok(crate::render::json(StatusCode::OK, &crate::discovery::api_group_document(group)));
    }
    let version = group.versions.iter().find(|v| v.version == path.version).ok_or_else(ApiError::no_route)?;
    Ok(crate::render::json(StatusCode::OK, &crate::discovery::api_resource_list(&group.name, version)))
}

//! delete and deletecollection: preconditions, finalizers (an object they hold is marked, not
//! removed), the namespace and CRD lifecycles, and what a deleted object gives back.

use axum::http::StatusCode;
use crdctl_conversion::Shape;
use crdctl_storage::StoreError;
use serde_json::{Value, json};

use crate::AppState;
use crate::admission::{self, Operation};
use crate::error::{ApiError, ApiResult};
use crate::registry::OnDelete;
use crate::registry::builtin::Written;

use super::read::read_list;
use super::{Endpoint, Kind, Params, Reply, UPDATE_RETRY_FOR, check_preconditions, decode_entry, encode, store_error};

/// DELETE one object: finalizers first mark it; otherwise it is removed.
pub async fn delete(state: &AppState, endpoint: &Endpoint, name: &str, options: Option<&Value>) -> ApiResult<Reply> {
    let deadline = std::time::Instant::now() + UPDATE_RETRY_FOR;
    while std::time::Instant::now() < deadline {
        let key = endpoint.key(name);
        let current = state.store.get(&key).await.map_err(store_error(endpoint, name))?;
        let current = current.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?;
        let mut object = decode_entry(&current)?;
        check_preconditions(endpoint, name, &object, options)?;
        let admission = endpoint.admission(Operation::Delete, name, "", None);
        let seen = async { Ok(endpoint.present(vec![object.clone()], Shape::Object).await?.pop()) };
        admission::validate_delete(state, &admission, seen).await?;
        let result = match endpoint.on_delete(&mut object)? {
            OnDelete::AlreadyMarked => return Ok(Reply::ok(endpoint.present_entry(&current).await?)),
            OnDelete::Mark => state.store.update(&key, encode(&object)?, current.mod_revision).await.map(Some),
            OnDelete::Remove => {
                let deleted = state.store.delete(&key, Some(current.mod_revision)).await;
                if deleted.is_ok() {
                    endpoint.release(state, &object, None).await;
                }
                deleted.map(|_| None)
            }
        };
        match result {
            Ok(Some(entry)) => {
                if let Kind::BuiltIn(resource) = endpoint.kind {
                    resource.after_write(state, Written::Marked(name), entry.mod_revision).await;
                }
                return Ok(Reply::ok(endpoint.present_entry(&entry).await?));
            }
            Ok(None) => {
                let uid = crate::object::meta_str(&object, "uid").unwrap_or_default();
                let mut details = json!({"name": name, "group": endpoint.group, "kind": endpoint.resource, "uid": uid});
                if endpoint.group.is_empty() {
                    details.as_object_mut().map(|d| d.remove("group"));
                }
                return Ok(Reply::ok(json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details,
                })));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(ApiError::from_store(err, endpoint.subject(name))),
        }
    }
    Err(ApiError::conflict(endpoint.subject(name)))
}

/// DELETE a collection: every object the selectors match.
pub async fn delete_collection(
    state: &AppState,
    endpoint: &Endpoint,
    params: &Params,
    options: Option<&Value>,
) -> ApiResult<Reply> {
    let read = read_list(state, endpoint, &Params { limit: None, continue_: None, ..params.clone() }).await?;
    let revision = read.revision;
    let mut deleted = Vec::new();
    for object in read.objects()? {
        let name = crate::object::name(&object).to_string();
        let mut scoped = endpoint.clone();
        if endpoint.namespaced && scoped.namespace.is_none() {
            scoped.namespace = crate::object::meta_str(&object, "namespace").map(str::to_string);
        }
        match delete(state, &scoped, &name, options).await {
            Ok(_) => deleted.push(object),
            Err(err) if err.code == StatusCode::NOT_FOUND => {}
            Err(err) => return Err(err),
        }
    }
    let items = endpoint.present(deleted, Shape::List).await?;
    Ok(Reply::ok(json!({
        "apiVersion": endpoint.api_version(),
        "kind": endpoint.list_kind,
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    })))
}

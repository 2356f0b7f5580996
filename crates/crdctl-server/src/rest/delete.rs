//! delete and deletecollection: preconditions, finalizers (an object they hold is marked, not
//! removed), the namespace and CRD lifecycles, and what a deleted object gives back.

use axum::http::StatusCode;
use crdctl_conversion::Shape;
use crdctl_model::field::{ErrorType, Path};
use crdctl_storage::StoreError;
use serde_json::{Value, json};

use crate::admission::{self, Operation};
use crate::error::{ApiError, ApiResult};
use crate::negotiate::{self, BodyType};
use crate::registry::{OnDelete, Propagation};

use super::read::read_list;
use super::{
    Context, DryRun, Endpoint, Params, Reply, UPDATE_RETRY_FOR, Writes, check_preconditions, decode_entry, store_error,
};

/// A DELETE's options, from its body when it has one, else from the query, as upstream's
/// delete handlers read them.
#[derive(Debug, Default)]
pub struct DeleteOptions {
    /// The `DeleteOptions` body, if one was sent (its `preconditions`).
    pub sent: Option<Value>,
    /// `dryRun`.
    pub dry_run: DryRun,
    /// `propagationPolicy`, or the deprecated `orphanDependents`, if either was given.
    pub propagation: Option<Propagation>,
}

impl DeleteOptions {
    /// Reads the options of a DELETE with `body` (of `body_type`: client-go sends protobuf
    /// when it speaks it) and the query `params`.
    pub fn read(body: &[u8], body_type: BodyType, params: &Params) -> ApiResult<DeleteOptions> {
        const KIND: &str = "DeleteOptions";
        if body.is_empty() {
            let orphan = params.orphan_dependents.map(Value::Bool);
            let policy = params.propagation_policy.clone().map(Value::String);
            let propagation = propagation(policy.as_ref(), orphan.as_ref())?;
            return Ok(DeleteOptions { sent: None, dry_run: params.dry_run_of(KIND)?, propagation });
        }
        let sent = negotiate::decode_body(body, body_type)?;
        let not_a_list = |value: &Value| {
            ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field {KIND}.dryRun of type []string",
                crdctl_conversion::response::json_type(value)
            ))
        };
        let directives: Vec<&str> = match sent.get("dryRun") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                items.iter().map(|item| item.as_str().ok_or_else(|| not_a_list(item))).collect::<ApiResult<_>>()?
            }
            Some(other) => return Err(not_a_list(other)),
        };
        let dry_run = DryRun::parse(&directives, KIND)?;
        let propagation = propagation(sent.get("propagationPolicy"), sent.get("orphanDependents"))?;
        Ok(DeleteOptions { sent: Some(sent), dry_run, propagation })
    }
}

/// `propagationPolicy` and `orphanDependents`, decoded and checked as upstream's
/// `ValidateDeleteOptions`.
fn propagation(policy: Option<&Value>, orphan: Option<&Value>) -> ApiResult<Option<Propagation>> {
    let not_a = |value: &Value, field: &str, go_type: &str| {
        ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go struct field DeleteOptions.{field} of type {go_type}",
            crdctl_conversion::response::json_type(value)
        ))
    };
    let policy = match policy {
        None | Some(Value::Null) => None,
        Some(Value::String(policy)) => Some(policy.as_str()),
        Some(other) => return Err(not_a(other, "propagationPolicy", "v1.DeletionPropagation")),
    };
    let orphan = match orphan {
        None | Some(Value::Null) => None,
        Some(Value::Bool(orphan)) => Some(*orphan),
        Some(other) => return Err(not_a(other, "orphanDependents", "bool")),
    };
    let invalid = |error| ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &[error]);
    let path = Path::new("propagationPolicy");
    match (policy, orphan) {
        (Some(policy), Some(_)) => {
            Err(invalid(path.invalid(policy, "orphanDependents and deletionPropagation cannot be both set")))
        }
        (None, Some(true)) => Ok(Some(Propagation::Orphan)),
        (None, Some(false)) => Ok(Some(Propagation::Background)),
        (None, None) => Ok(None),
        (Some("Foreground"), None) => Ok(Some(Propagation::Foreground)),
        (Some("Background"), None) => Ok(Some(Propagation::Background)),
        (Some("Orphan"), None) => Ok(Some(Propagation::Orphan)),
        (Some(other), None) => {
            let supported = ["Foreground", "Background", "Orphan", "nil"].map(str::to_string).to_vec();
            let value = crdctl_model::go::quote(other);
            Err(invalid(path.error(ErrorType::NotSupported(value, supported), "")))
        }
    }
}

/// DELETE one object: finalizers first mark it; otherwise it is removed.
pub async fn delete(cx: Context<'_>, endpoint: &Endpoint, name: &str, options: &DeleteOptions) -> ApiResult<Reply> {
    let writes = Writes::new(cx, options.dry_run);
    let deadline = std::time::Instant::now() + UPDATE_RETRY_FOR;
    while std::time::Instant::now() < deadline {
        let key = endpoint.key(name);
        let current = cx.store.get(&key).await.map_err(store_error(endpoint, name))?;
        let current = current.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?;
        let mut object = decode_entry(&current)?;
        check_preconditions(endpoint, name, &object, options.sent.as_ref())?;
        let admission = endpoint.admission(Operation::Delete, (name, ""), writes.dry_run(), None, cx.admission.user);
        let seen = async { Ok(endpoint.present(vec![object.clone()], Shape::Object).await?.pop()) };
        admission::validate_delete(cx.admission, &admission, seen).await?;
        let finalizers_changed = match endpoint.served.garbage_collection().filter(|_| cx.garbage_collector) {
            Some(default) => crate::registry::set_gc_finalizers(&mut object, options.propagation, default),
            None => false,
        };
        let result = match endpoint.served.on_delete(&mut object)? {
            OnDelete::AlreadyMarked if !finalizers_changed => {
                return Ok(Reply::ok(endpoint.present_entry(&current).await?));
            }
            OnDelete::Mark | OnDelete::AlreadyMarked => {
                writes.store().update(&key, crate::object::to_stored(&object), current.mod_revision).await.map(Some)
            }
            OnDelete::Remove => {
                let deleted = writes.store().delete(&key, Some(current.mod_revision)).await;
                if deleted.is_ok() {
                    endpoint.served.release(writes.store(), &object, None).await;
                }
                deleted.map(|_| None)
            }
        };
        match result {
            Ok(Some(entry)) => {
                writes.after_write(cx, endpoint, entry.mod_revision).await;
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
    cx: Context<'_>,
    endpoint: &Endpoint,
    params: &Params,
    options: &DeleteOptions,
) -> ApiResult<Reply> {
    let read = read_list(&**cx.store, endpoint, &Params { limit: None, continue_: None, ..params.clone() }).await?;
    let revision = read.revision;
    let mut deleted = Vec::new();
    for object in read.objects()? {
        let name = crate::object::name(&object).to_string();
        let mut scoped = endpoint.clone();
        if endpoint.namespaced && scoped.namespace.is_none() {
            scoped.namespace = crate::object::meta_str(&object, "namespace").map(str::to_string);
        }
        match delete(cx, &scoped, &name, options).await {
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

//! update, patch and apply: read, compute the new object (replace, merge or JSON patch,
//! server-side apply, `/status`, `/scale`), admit it through the kind's strategy, then
//! compare-and-swap, retried on conflicts the client did not ask to detect.

use axum::http::StatusCode;
use crdctl_model::field::{self, Path};
use crdctl_schema::{Schema, strategic_merge};
use crdctl_storage::StoreError;
use serde_json::{Value, json};

use crate::admission::{self, Operation};
use crate::error::{ApiError, ApiResult};
use crate::fieldmanager;
use crate::negotiate::{BodyType, PATCH_TYPES};
use crate::registry::builtin::Part;
use crate::registry::builtin::documents::compiled_in;
use crate::registry::builtin::go_decode;
use crate::registry::ranges::Reserved;
use crate::registry::scale;
use crate::registry::unknown_fields::{Decoded, FieldValidation};

use super::create::{Managed, create};
use super::{
    Context, Endpoint, Params, Reply, Subresource, UPDATE_RETRY_FOR, Writes, store_error, without_managed_fields,
};

/// How an update computes the new object from the current one (both in the request version).
pub enum Change {
    /// PUT: the body replaces the object.
    Replace(Value),
    /// PATCH with a body of this type.
    Patch(BodyType, Value),
}

/// PUT or PATCH of the main resource, `/status` or `/scale`: read, compute, admit,
/// compare-and-swap, retried on conflicts the client did not ask to detect.
pub async fn update(
    cx: Context<'_>,
    endpoint: &Endpoint,
    name: &str,
    change: Change,
    subresource: Subresource,
    params: &Params,
) -> ApiResult<Reply> {
    let options = if matches!(change, Change::Replace(_)) { "UpdateOptions" } else { "PatchOptions" };
    let writes = Writes::new(cx, params.dry_run_of(options)?);
    let deadline = std::time::Instant::now() + UPDATE_RETRY_FOR;
    while std::time::Instant::now() < deadline {
        let key = endpoint.key(name);
        let current = cx.store.get(&key).await.map_err(store_error(endpoint, name))?;
        let Some(current) = current else {
            if let Change::Patch(BodyType::ApplyPatch, body) = &change
                && subresource == Subresource::Main
            {
                let applied = server_side_apply(endpoint, None, body, subresource, params).await?;
                return create(cx, endpoint, applied, params, Managed::Applied).await;
            }
            return Err(ApiError::not_found(endpoint.subject(name)));
        };
        let old = endpoint.present_entry(&current).await?;
        let (new, precondition) = changed(endpoint, name, &old, (&change, subresource), params).await?;
        if let Some(rv) = &precondition
            && *rv != current.mod_revision.to_string()
        {
            return Err(ApiError::conflict(endpoint.subject(name)));
        }
        if crate::object::name(&new) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                crate::object::name(&new)
            )));
        }
        let decoded = match &change {
            Change::Patch(BodyType::StrategicMergePatch, Value::Object(patch)) => Decoded::StrategicMerge(patch),
            Change::Patch(BodyType::MergePatch | BodyType::JsonPatch, _) => Decoded::Patched,
            _ => Decoded::Body,
        };
        let admission = endpoint.admission(
            Operation::Update,
            (name, subresource.name()),
            writes.dry_run(),
            params.field_manager.as_deref(),
            cx.admission.user,
        );
        let mut new = new;
        let mut warnings = admission::mutate(cx.admission, &admission, &mut new, Some(&old)).await?;
        let (mut stored, admitted) =
            admit_update(cx, endpoint, new, &old, subresource.part(), (params, decoded), &admission).await?;
        warnings.extend(admitted);
        let deleting = crate::object::meta_field(&stored, "deletionTimestamp").is_some()
            && crate::object::finalizers(&stored).is_empty()
            && endpoint.served.removed_when_finalized();
        let reserved = if deleting {
            Reserved::default()
        } else {
            endpoint.served.reserve(cx.resources, writes.store(), &mut stored, Some(&old)).await?
        };
        let kept = (!deleting).then(|| stored.clone());
        let result = if deleting {
            writes.store().delete(&key, Some(current.mod_revision)).await.map(|event| event.prev)
        } else {
            let value = crate::object::to_stored(&stored);
            // As upstream: an update that would store the same object writes nothing and keeps
            // the resourceVersion. An object in an older storage version differs, so a no-op
            // update is how storage migration rewrites an object.
            if stores_the_same(&value, &current.value) {
                return Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&current).await?, warnings));
            }
            let mut stored = stored;
            let applying = matches!(change, Change::Patch(BodyType::ApplyPatch, _));
            match writes.store().update(&key, value, current.mod_revision).await {
                Err(StoreError::TooLarge(_)) if !applying && without_managed_fields(&mut stored) => {
                    writes.store().update(&key, crate::object::to_stored(&stored), current.mod_revision).await
                }
                written => written,
            }
            .map(Some)
        };
        if result.is_err() {
            reserved.release(writes.store()).await;
        } else {
            endpoint.served.release(writes.store(), &old, kept.as_ref()).await;
        }
        match result {
            Ok(entry) => {
                let entry = entry.ok_or_else(|| ApiError::internal("the store returned no object"))?;
                writes.after_write(cx, endpoint, entry.mod_revision).await;
                return Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&entry).await?, warnings));
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(err) => return Err(ApiError::from_store(err, endpoint.subject(name))),
        }
    }
    Err(ApiError::conflict(endpoint.subject(name)))
}

/// Whether `new` encodes the object `held` holds. Go's encoder writes an object's fields in one
/// order, so upstream compares bytes; a patch here may order keys differently, so bytes of the
/// same length that differ are compared as JSON (the same value always encodes to the same
/// length).
fn stores_the_same(new: &[u8], held: &[u8]) -> bool {
    new == held
        || (new.len() == held.len()
            && serde_json::from_slice::<Value>(new).ok() == serde_json::from_slice::<Value>(held).ok())
}

/// Server-side apply of `config` onto `live` (None: the object does not exist yet).
async fn server_side_apply(
    endpoint: &Endpoint,
    live: Option<&Value>,
    config: &Value,
    subresource: Subresource,
    params: &Params,
) -> ApiResult<Value> {
    let Some(manager) = params.field_manager.as_deref().filter(|m| !m.is_empty()) else {
        let error = Path::new("fieldManager").required("is required for apply patch");
        return Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", &[error]));
    };
    if crate::object::meta_field(config, "managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let Some(scope) = endpoint.field_scope(subresource) else {
        let live = live.cloned().unwrap_or_else(|| json!({}));
        return Ok(fieldmanager::typed::merge(&live, config, None));
    };
    let force = params.force.unwrap_or(false);
    let merged = fieldmanager::apply_merge(live, config, &scope, manager, &crate::object::now_timestamp());
    let others = match live {
        Some(live) => {
            let (live_object, merged_object) = merged.objects();
            endpoint.in_manager_versions(live, live_object, merged_object).await?
        }
        None => fieldmanager::OtherVersions::default(),
    };
    fieldmanager::apply_finish(merged, &scope, force, &others).map_err(fieldmanager::Conflicts::into_error)
}

/// The object a PUT or PATCH of the main resource or `/status` asks for, and the
/// `resourceVersion` it must replace.
fn change_object(endpoint: &Endpoint, name: &str, old: &Value, change: &Change) -> ApiResult<(Value, Option<String>)> {
    Ok(match change {
        Change::Replace(body) if !body.is_object() => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                crdctl_conversion::response::json_type(body)
            )));
        }
        Change::Replace(body) => {
            // `0` is no resourceVersion, as upstream parses it.
            let rv = crate::object::meta_str(body, "resourceVersion").filter(|rv| !rv.is_empty() && *rv != "0");
            if rv.is_none() && !endpoint.served.allows_unconditional_update() {
                // Upstream names the resource where the kind belongs (its TODO #18526), and
                // prints the uint64 0 as Go's `%#v` does.
                return Err(ApiError::invalid(
                    &endpoint.group,
                    &endpoint.resource,
                    name,
                    &[Path::new("metadata")
                        .child("resourceVersion")
                        .invalid(field::Raw("0x0".into()), "must be specified for an update")],
                ));
            }
            let rv = rv.map(str::to_string);
            (body.clone(), rv)
        }
        Change::Patch(body_type, patch) => {
            let rv = crate::object::meta_str(patch, "resourceVersion").map(str::to_string);
            (apply_patch(endpoint.served.patch_schema(), old, *body_type, patch)?, rv)
        }
    })
}

/// The object `change` makes of `old` at `subresource`, and the `resourceVersion` it was made
/// against, if it names one (a precondition).
async fn changed(
    endpoint: &Endpoint,
    name: &str,
    old: &Value,
    (change, subresource): (&Change, Subresource),
    params: &Params,
) -> ApiResult<(Value, Option<String>)> {
    Ok(match change {
        _ if subresource == Subresource::Scale => {
            let paths = endpoint.scale_paths().ok_or_else(|| ApiError::internal("the resource has no scale"))?;
            let current_scale = scale::of(old, paths);
            let desired = match change {
                Change::Replace(body) => body.clone(),
                Change::Patch(body_type, patch) => {
                    // The Scale of a built-in kind is patched with its group version's schema.
                    let scale_schema = endpoint.served.patch_schema().and_then(|_| {
                        crate::registry::builtin::find(&endpoint.group, &endpoint.version, &endpoint.resource)
                            .and_then(|row| compiled_in((row.group, row.version), ("autoscaling", "v1", "Scale")))
                    });
                    apply_patch(scale_schema, &current_scale, *body_type, patch)?
                }
            };
            let rv = crate::object::meta_str(&desired, "resourceVersion").map(str::to_string);
            let mut new = old.clone();
            scale::apply(&mut new, &desired, paths)?;
            (new, rv)
        }
        Change::Patch(BodyType::ApplyPatch, config) => {
            let rv = crate::object::meta_str(config, "resourceVersion").map(str::to_string);
            (server_side_apply(endpoint, Some(old), config, subresource, params).await?, rv)
        }
        _ => {
            let (mut new, rv) = change_object(endpoint, name, old, change)?;
            if let Some(scope) = endpoint.field_scope(subresource) {
                let now = crate::object::now_timestamp();
                match endpoint.in_manager_versions(old, old, &new).await {
                    Ok(others) => {
                        fieldmanager::record_update(Some(old), &mut new, &scope, &params.manager(), &now, &others)
                    }
                    // As upstream's `UpdateNoErrors`: the write goes on, without managedFields.
                    Err(err) => {
                        tracing::warn!(error = %err.message, "managedFields dropped: the write could not be converted");
                        crate::object::meta_mut(&mut new).remove("managedFields");
                    }
                }
            }
            (new, rv)
        }
    })
}

/// Runs the strategy for an update, then the validating admission webhooks; returns the object
/// to store (in the storage version for custom resources) and warnings.
async fn admit_update(
    cx: Context<'_>,
    endpoint: &Endpoint,
    mut new: Value,
    old: &Value,
    part: Part,
    (params, decoded): (&Params, Decoded<'_>),
    admission: &admission::Request<'_>,
) -> ApiResult<(Value, Vec<String>)> {
    let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
    let mut warnings = endpoint
        .served
        .admit_update(cx.resources, (&mut new, old), (&endpoint.version, part), (field_validation, decoded))
        .await?;
    let validated = admission::validate(cx.admission, admission, Some(&new), Some(old)).await;
    warnings.extend(validated.map_err(|err| err.after_warnings(&warnings))?);
    let new = endpoint.served.to_storage(new).await?;
    Ok((new, warnings))
}

/// Applies a patch to the current object (in the request version); strategic merge patches
/// need the built-in kind's `schema`.
fn apply_patch(schema: Option<&Schema>, current: &Value, body_type: BodyType, patch: &Value) -> ApiResult<Value> {
    let mut patched = current.clone();
    match body_type {
        BodyType::StrategicMergePatch => {
            let schema = schema.ok_or_else(|| ApiError::unsupported_media_type(&PATCH_TYPES))?;
            let (Value::Object(current), Value::Object(patch)) = (patched, patch.clone()) else {
                return Err(ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    crdctl_conversion::response::json_type(patch)
                )));
            };
            let merged = strategic_merge::apply(current, patch.clone(), schema).map_err(strategic_merge_error)?;
            patched = Value::Object(merged);
            // As upstream's handler reading the result back into its type (`applyPatchToObject`):
            // a value its field cannot hold is an invalid `patch`, shown as Go prints the patch.
            if let Some(err) = go_decode::restore_error(&patched, schema) {
                let shown = field::Raw(crdctl_model::go::quote(&crdctl_model::go::display_map(&patch)));
                return Err(ApiError::invalid("", "", "", &[Path::new("patch").invalid(shown, err)]));
            }
        }
        BodyType::MergePatch => json_patch::merge(&mut patched, patch),
        BodyType::ApplyPatch => return Err(ApiError::bad_request("apply patches are not applied as merge patches")),
        BodyType::JsonPatch => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|err| {
                ApiError::bad_request(format!("the server rejected our request due to an error in our request: {err}"))
            })?;
            for (index, operation) in operations.0.iter().enumerate() {
                // As upstream's JSON patch library: testing a missing path for null succeeds
                // (kube-runtime's finalizer helper adds the first finalizer that way).
                if let json_patch::PatchOperation::Test(test) = operation
                    && test.value.is_null()
                    && patched.pointer(test.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut patched, std::slice::from_ref(operation)).map_err(|mut err| {
                    err.operation = index;
                    ApiError::unprocessable_patch(&err.to_string())
                })?;
            }
        }
        BodyType::Json | BodyType::Yaml | BodyType::Protobuf => {
            return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
        }
    }
    if !patched.is_object() {
        return Err(ApiError::bad_request("the patch did not produce an object"));
    }
    Ok(patched)
}

/// A strategic merge patch's error as upstream's patch handler answers it
/// (`interpretStrategicMergePatchError`): 400 for a directive in the wrong shape, 422 without
/// detail for lists of lists, and the bare message with 500 for the rest.
fn strategic_merge_error(err: strategic_merge::Error) -> ApiError {
    match err.status {
        strategic_merge::Status::BadRequest => ApiError::bad_request(err.message),
        strategic_merge::Status::Unprocessable => ApiError::rejected(),
        strategic_merge::Status::Internal => ApiError::internal(err.message),
    }
}

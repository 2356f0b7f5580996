//! create: names (`generateName`), the namespace's existence and lifecycle, the kind's
//! strategy, then a write that fails if the object exists.

use axum::http::StatusCode;
use crdctl_storage::{Entry, ListOptions, StoreError};
use serde_json::Value;

use crate::admission::{self, Operation};
use crate::error::{ApiError, ApiResult, Subject};
use crate::fieldmanager;
use crate::registry::builtin::namespace;
use crate::registry::unknown_fields::FieldValidation;

use super::{
    Body, Context, Endpoint, Params, Reply, Subresource, Writes, decode_entry, store_error, without_managed_fields,
};

/// Who owns the fields of a created object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// The request's manager, as an `Update`.
    Record,
    /// Already set: a server-side apply created it.
    Applied,
}

/// How many names a create with `generateName` tries (upstream's
/// `maxNameGenerationCreateAttempts`).
const GENERATE_NAME_ATTEMPTS: u32 = 8;

/// POST: create an object.
pub async fn create(
    cx: Context<'_>,
    endpoint: &Endpoint,
    mut object: Value,
    params: &Params,
    managed: Managed,
) -> ApiResult<Reply> {
    let writes = Writes::new(cx, params.dry_run_of("CreateOptions")?);
    if let Some(answered) = endpoint.served.review(cx.resources, &mut object)? {
        return Ok(Reply::of(StatusCode::CREATED, Body::Value(answered), Vec::new()));
    }
    let mut warnings = Vec::new();
    let generate_from = crate::object::name_to_generate(&object);
    if let Some(prefix) = &generate_from {
        crate::object::set_name(&mut object, cx.names.generate(prefix));
    }
    if let Some(namespace) = &endpoint.namespace {
        let body_namespace = crate::object::meta_str(&object, "namespace").unwrap_or(namespace);
        if body_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        require_namespace(cx, namespace, endpoint.subject(crate::object::name(&object))).await?;
    }
    let admitted_name = crate::object::name(&object).to_string();
    let admission = endpoint.admission(
        Operation::Create,
        (&admitted_name, ""),
        writes.dry_run(),
        params.field_manager.as_deref(),
        cx.admission.user,
    );
    warnings.extend(admission::mutate(cx.admission, &admission, &mut object, None).await?);
    let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
    let at = (endpoint.version.as_str(), endpoint.namespace.as_deref());
    warnings.extend(endpoint.served.admit_create(cx.resources, &mut object, at, field_validation).await?);
    let validated = admission::validate(cx.admission, &admission, Some(&object), None).await;
    warnings.extend(validated.map_err(|err| err.after_warnings(&warnings))?);
    if managed == Managed::Record
        && let Some(scope) = endpoint.field_scope(Subresource::Main)
    {
        let now = crate::object::now_timestamp();
        let none = fieldmanager::OtherVersions::default();
        fieldmanager::record_update(None, &mut object, &scope, &params.manager(), &now, &none);
    }
    let mut name = crate::object::name(&object).to_string();
    endpoint.served.refuse_create(endpoint.subject(&name))?;
    let mut stored = endpoint.served.to_storage(object).await?;
    let reserved = endpoint.served.reserve(cx.resources, writes.store(), &mut stored, None).await?;
    // A generated name that exists already is drawn again, as kube-apiserver does since 1.32
    // (`RetryGenerateName`): the whole create is tried with a new name up to 8 times.
    let mut attempts = 1;
    let entry = loop {
        let key = endpoint.key(&name);
        let written = match writes.store().create(&key, crate::object::to_stored(&stored)).await {
            Err(StoreError::TooLarge(_)) if without_managed_fields(&mut stored) => {
                writes.store().create(&key, crate::object::to_stored(&stored)).await
            }
            written => written,
        };
        match (written, &generate_from) {
            (Err(StoreError::AlreadyExists { .. }), Some(prefix)) if attempts < GENERATE_NAME_ATTEMPTS => {
                attempts += 1;
                name = cx.names.generate(prefix);
                crate::object::set_name(&mut stored, name.clone());
            }
            (Err(StoreError::AlreadyExists { .. }), Some(_)) => {
                reserved.release(writes.store()).await;
                return Err(ApiError::generate_name_conflict(endpoint.subject(&name)));
            }
            (Err(err), _) => {
                reserved.release(writes.store()).await;
                return Err(store_error(endpoint, &name)(err));
            }
            (Ok(entry), _) => break entry,
        }
    };
    writes.after_write(cx, endpoint, entry.mod_revision).await;
    let body = endpoint.present_created(stored, &entry).await?;
    Ok(Reply::with_warnings(StatusCode::CREATED, body, warnings))
}

/// As the NamespaceLifecycle admission plugin (a create in a terminating namespace is refused
/// about the object `creating`): the namespace from the watch cache if it is
/// there (a stale answer errs only towards a recently deleted namespace, as upstream's informer
/// does), else a current read, so a namespace created a moment ago is found.
async fn require_namespace(cx: Context<'_>, name: &str, creating: Subject<'_>) -> ApiResult<()> {
    let key = namespace::key(name);
    let unavailable = |err: StoreError| ApiError::unavailable(err.to_string());
    // The namespace's own key sorts first under it: one entry is enough.
    let cached = ListOptions { prefix: &key, limit: 1, min_revision: Some(0), ..Default::default() };
    let cached = cx.store.list(cached).await.map_err(unavailable)?.entries.into_iter().find(|e| e.key == key);
    let found = match cached {
        Some(entry) => Some(entry),
        None => cx.store.get(&key).await.map_err(unavailable)?,
    };
    match found {
        Some(entry) if being_deleted(&entry)? => Err(ApiError::forbidden(
            creating,
            &format!("unable to create new content in namespace {name} because it is being terminated"),
        )),
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(namespace::subject(name))),
    }
}

/// Whether a stored object has a `deletionTimestamp`, reading nothing else of it.
fn being_deleted(entry: &Entry) -> ApiResult<bool> {
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(serde::Deserialize, Default)]
    struct Metadata {
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: Option<serde::de::IgnoredAny>,
    }
    let object: Object = serde_json::from_slice(&entry.value)
        .map_err(|_| ApiError::internal(format!("stored object {} is not JSON", entry.key)))?;
    Ok(object.metadata.deletion_timestamp.is_some())
}

/// POST `serviceaccounts/<name>/token`: a signed token for the account, in the `TokenRequest`,
/// bound to the object the request names, if any.
pub async fn request_token(cx: Context<'_>, endpoint: &Endpoint, name: &str, request: Value) -> ApiResult<Reply> {
    let entry = cx.store.get(&endpoint.key(name)).await.map_err(store_error(endpoint, name))?;
    let account = decode_entry(&entry.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?)?;
    let namespace = crate::object::meta_str(&account, "namespace").unwrap_or_default();
    let bound = match crate::registry::token::bound_ref(&request)? {
        Some((bindable, object_name)) => {
            let key = bindable.key(namespace, &object_name);
            let subject = Subject { group: "", resource: bindable.resource, name: &object_name };
            let entry = cx.store.get(&key).await.map_err(|err| ApiError::from_store(err, subject))?;
            let object = decode_entry(&entry.ok_or_else(|| ApiError::not_found(subject))?)?;
            crate::registry::token::check_bound(&request, bindable, &object, name)?;
            Some((bindable, key, object))
        }
        None => None,
    };
    let authenticator = cx.resources.authenticator;
    let bound_object = bound.as_ref().map(|(bindable, _, object)| (*bindable, object));
    let answered = crate::registry::token::request(&authenticator.signer, &account, bound_object, request)?;
    // The token works at once, before the change feed brings these objects.
    authenticator.saw(endpoint.key(name), crate::object::meta_str(&account, "uid").unwrap_or_default());
    if let Some((_, key, object)) = &bound {
        authenticator.saw(key.clone(), crate::object::meta_str(object, "uid").unwrap_or_default());
    }
    Ok(Reply::of(StatusCode::CREATED, Body::Value(answered), Vec::new()))
}

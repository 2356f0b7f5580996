//! Core `v1` Namespaces and their lifecycle, as kube-apiserver's NamespaceLifecycle admission
//! and controller-manager's namespace controller: `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` always exist and cannot be deleted; objects need an existing namespace that
//! is not terminating; deleting a namespace marks it `Terminating`, then [`finalize`] deletes
//! every namespaced object in it — custom resources, events, built-ins — honouring their
//! finalizers, and removes the namespace once nothing is left and no spec finalizer (written
//! through the `finalize` subresource) holds it. Every namespace has a `default`
//! ServiceAccount, as controller-manager makes it.

use std::sync::Arc;
use std::time::Duration;

use crdctl_storage::{ListOptions, Store, StoreError};
use serde_json::{Value, json};

use crate::error::{ApiError, Subject};
use crate::registry::builtin::Part;
use crate::registry::resource::Resource;
use crate::registry::{OnDelete, Registry};
use crate::selector::{SelectableFields, field_value};

/// Where namespaces are stored.
pub const PREFIX: &str = "/registry/namespaces/";

/// The fields a namespace list can select on (upstream's `NamespaceToSelectableFields`; `name`
/// is kept there for compatibility).
pub const SELECTABLE_FIELDS: SelectableFields = SelectableFields {
    labels: &["status.phase", "name"],
    value: |namespace, label| match label {
        "name" => field_value(namespace, "metadata.name"),
        label => field_value(namespace, label),
    },
};

/// Namespaces every cluster has; none of them can be deleted.
pub const BUILT_IN: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// What errors about namespace `name` name.
pub fn subject(name: &str) -> Subject<'_> {
    Subject { group: "", resource: "namespaces", name }
}

/// The store key of a namespace.
pub fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// The label upstream's defaulting gives every namespace, its name as value, so selectors can
/// pick namespaces by name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The spec finalizer of the namespace lifecycle, removed once the namespace is empty.
const KUBERNETES_FINALIZER: &str = "kubernetes";

/// A namespace the server makes at start-up, as a create would store it.
pub fn initial(name: &str) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    default(&mut object, None, Part::Main);
    crate::object::prepare_create(&mut object, None);
    object
}

/// The namespace strategy's part of a write: the name label always; on create `Active` and the
/// `kubernetes` spec finalizer (upstream's `PrepareForCreate`); an update of the main resource
/// keeps `spec.finalizers`, which only `finalize` writes.
pub fn default(object: &mut Value, old: Option<&Value>, part: Part) {
    let name = crate::object::name(object).to_string();
    let labels = crate::object::meta_mut(object).entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(NAME_LABEL.into(), Value::String(name));
    }
    match (old, part) {
        (None, _) => {
            let finalizers = crate::object::object_mut(object, "spec").entry("finalizers").or_insert_with(|| json!([]));
            if let Some(finalizers) = finalizers.as_array_mut()
                && !finalizers.iter().any(|f| f == KUBERNETES_FINALIZER)
            {
                finalizers.push(json!(KUBERNETES_FINALIZER));
            }
            crate::object::set(object, "status", json!({"phase": "Active"}));
        }
        (Some(old), Part::Main) => set_finalizers(object, old.pointer("/spec/finalizers").cloned()),
        (Some(_), Part::Status | Part::Finalizers) => {}
    }
}

/// Makes `new` `old` with `new`'s `spec.finalizers`: an update through `finalize`.
pub fn keep_all_but_finalizers(new: &mut Value, old: &Value) {
    let mut updated = old.clone();
    set_finalizers(&mut updated, new.pointer("/spec/finalizers").cloned());
    crate::object::meta_mut(&mut updated).remove("resourceVersion");
    *new = updated;
}

/// `spec.finalizers` set to `finalizers`, or removed.
fn set_finalizers(namespace: &mut Value, finalizers: Option<Value>) {
    let spec = crate::object::object_mut(namespace, "spec");
    match finalizers {
        Some(finalizers) => spec.insert("finalizers".into(), finalizers),
        None => spec.remove("finalizers"),
    };
}

/// A DELETE: refused for the built-in four; otherwise the namespace is marked `Terminating`,
/// and [`finalize`] empties it.
pub fn on_delete(object: &mut Value) -> Result<OnDelete, ApiError> {
    let name = crate::object::name(object);
    if BUILT_IN.contains(&name) {
        return Err(ApiError::forbidden(subject(name), "this namespace may not be deleted"));
    }
    if crate::object::meta_field(object, "deletionTimestamp").is_some() {
        return Ok(OnDelete::AlreadyMarked);
    }
    crate::object::meta_mut(object).insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
    crate::object::set(object, "status", json!({"phase": "Terminating"}));
    Ok(OnDelete::Mark)
}

/// The `default` ServiceAccount every namespace gets, as controller-manager's serviceaccounts
/// controller makes it. A failure is logged, not returned: the namespace exists either way.
pub async fn create_default_service_account(store: &dyn Store, namespace: &str) {
    let Some(accounts) = crate::registry::builtin::find("", "v1", "serviceaccounts") else { return };
    let mut account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    crate::object::prepare_create(&mut account, Some(namespace));
    let key = format!("{}default", accounts.namespace_prefix(Some(namespace)));
    match store.create(&key, crate::object::to_stored(&account)).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(err) => tracing::warn!(namespace, error = %err, "cannot create the default ServiceAccount"),
    }
}

/// How soon a terminating namespace looks again at what is left in it; the wait doubles, up to
/// [`RECHECK_AT_MOST`], while objects held by finalizers stay.
const RECHECK: Duration = Duration::from_millis(100);
const RECHECK_AT_MOST: Duration = Duration::from_secs(2);

/// Empties the terminating namespace `name`, then deletes it: objects without finalizers are
/// deleted, objects with finalizers are marked for deletion and waited for (their controllers
/// remove the finalizers); then the `kubernetes` spec finalizer goes, and the namespace once
/// no other finalizer holds it. Safe to run more than once, and resumed at start-up.
pub async fn finalize(store: Arc<dyn Store>, registry: Registry, name: String) {
    let mut wait = RECHECK;
    loop {
        match finalized(&*store, &registry, &name).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(namespace = %name, error = %err, "cannot empty a terminating namespace; retrying")
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RECHECK_AT_MOST);
    }
}

/// One pass of [`finalize`]; whether the namespace is gone.
async fn finalized(store: &dyn Store, registry: &Registry, name: &str) -> Result<bool, StoreError> {
    if remaining(store, registry, name).await? > 0 {
        return Ok(false);
    }
    let Some(entry) = store.get(&key(name)).await? else { return Ok(true) };
    let Some(mut namespace) = crate::registry::decode(&entry.value, entry.mod_revision) else { return Ok(false) };
    let mut revision = entry.mod_revision;
    let finalizers = namespace.pointer_mut("/spec/finalizers").and_then(Value::as_array_mut);
    if let Some(finalizers) = finalizers.filter(|f| f.iter().any(|f| f == KUBERNETES_FINALIZER)) {
        finalizers.retain(|f| f != KUBERNETES_FINALIZER);
        match store.update(&key(name), crate::object::to_stored(&namespace), revision).await {
            Ok(entry) => revision = entry.mod_revision,
            Err(StoreError::NotFound { .. }) => return Ok(true),
            Err(StoreError::Conflict { .. }) => return Ok(false),
            Err(err) => return Err(err),
        }
    }
    let held_by_spec = namespace.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if held_by_spec || !crate::object::finalizers(&namespace).is_empty() {
        return Ok(false);
    }
    match store.delete(&key(name), Some(revision)).await {
        Ok(_) | Err(StoreError::NotFound { .. }) => {
            tracing::info!(namespace = %name, "namespace deleted");
            Ok(true)
        }
        Err(StoreError::Conflict { .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// One pass over the namespace's objects; how many are left.
async fn remaining(store: &dyn Store, registry: &Registry, namespace: &str) -> Result<usize, StoreError> {
    let crds = registry.all();
    let custom = crds.values().filter(|crd| crd.namespaced()).map(|crd| Arc::clone(crd) as Arc<dyn Resource>);
    let built_in = crate::registry::builtin::RESOURCES.iter().filter(|r| r.namespaced && r.owns_storage());
    let resources = custom.chain(built_in.map(|resource| Arc::new(resource) as Arc<dyn Resource>));
    let mut left = 0;
    for resource in resources {
        let prefix = resource.prefix(Some(namespace));
        let page = store.list(ListOptions { prefix: &prefix, ..Default::default() }).await?;
        for entry in page.entries {
            let Some(mut object) = crate::registry::decode(&entry.value, entry.mod_revision) else { continue };
            if crate::object::finalizers(&object).is_empty() {
                match store.delete(&entry.key, Some(entry.mod_revision)).await {
                    Ok(_) => resource.release(store, &object, None).await,
                    Err(StoreError::NotFound { .. }) => {}
                    Err(StoreError::Conflict { .. }) => left += 1,
                    Err(err) => return Err(err),
                }
                continue;
            }
            left += 1;
            if crate::registry::on_delete(&mut object) == OnDelete::Mark {
                let bytes = crate::object::to_stored(&object);
                match store.update(&entry.key, bytes, entry.mod_revision).await {
                    Ok(_) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Ok(left)
}

//! Core `v1` Namespaces and their lifecycle, as kube-apiserver's NamespaceLifecycle admission
//! and controller-manager's namespace controller: `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` always exist and cannot be deleted; objects need an existing namespace that
//! is not terminating; deleting a namespace marks it `Terminating`, then [`finalize`] deletes
//! every namespaced object in it — custom resources, events, built-ins — honouring their
//! finalizers, and removes the namespace once nothing is left. Every namespace has a `default`
//! ServiceAccount, as controller-manager makes it.

use std::sync::Arc;
use std::time::Duration;

use crate::registry::builtin::BuiltIn;
use crdctl_storage::{ListOptions, Store, StoreError};
use serde_json::{Value, json};

use crate::error::{ApiError, Subject};
use crate::registry::Registry;
use crate::selector::{SelectableFields, field_value};

/// Where namespaces are stored.
pub const PREFIX: &str = "/registry/namespaces/";

/// The verbs of `namespaces`: no `deletecollection`.
pub const VERBS: [&str; 7] = ["create", "delete", "get", "list", "patch", "update", "watch"];

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

/// A new namespace object.
pub fn new(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Checks and fills a namespace on create.
pub fn prepare_create(object: &mut Value) -> Result<(), ApiError> {
    crate::object::check_type(object, "v1", "Namespace")?;
    // A namespace's name is a DNS label (`ValidateNamespaceName`), not a subdomain.
    let errors = crate::object::name_errors(object, crdctl_model::names::dns1123_label_errors);
    if !errors.is_empty() {
        let name = crate::object::name(object).to_string();
        return Err(ApiError::invalid("", "Namespace", &name, &errors));
    }
    crate::object::prepare_create(object, None);
    object["spec"] = json!({"finalizers": ["kubernetes"]});
    object["status"] = json!({"phase": "Active"});
    Ok(())
}

/// The `default` ServiceAccount every namespace gets, as controller-manager's serviceaccounts
/// controller makes it. A failure is logged, not returned: the namespace exists either way.
pub async fn create_default_service_account(store: &dyn Store, namespace: &str) {
    let Some(accounts) = crate::registry::builtin::find("", "v1", "serviceaccounts") else { return };
    let mut account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    crate::object::prepare_create(&mut account, Some(namespace));
    let key = format!("{}default", accounts.namespace_prefix(Some(namespace)));
    match store.create(&key, serde_json::to_vec(&account).unwrap_or_default()).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(err) => tracing::warn!(namespace, error = %err, "cannot create the default ServiceAccount"),
    }
}

/// Marks a namespace as terminating: `deletionTimestamp`, `status.phase: Terminating`.
pub fn mark_terminating(object: &mut Value) {
    crate::object::meta_mut(object).insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
    crate::object::meta_mut(object).remove("resourceVersion");
    crate::object::set(object, "status", json!({"phase": "Terminating"}));
}

/// How soon a terminating namespace looks again at what is left in it; the wait doubles, up to
/// [`RECHECK_AT_MOST`], while objects held by finalizers stay.
const RECHECK: Duration = Duration::from_millis(100);
const RECHECK_AT_MOST: Duration = Duration::from_secs(2);

/// Empties the terminating namespace `name`, then deletes it: objects without finalizers are
/// deleted, objects with finalizers are marked for deletion and waited for (their controllers
/// remove the finalizers). Safe to run more than once, and resumed at start-up.
pub async fn finalize(store: Arc<dyn Store>, registry: Registry, name: String) {
    let mut wait = RECHECK;
    loop {
        match remaining(&*store, &registry, &name).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(namespace = %name, error = %err, "cannot empty a terminating namespace; retrying")
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RECHECK_AT_MOST);
    }
    match store.delete(&key(&name), None).await {
        Ok(_) | Err(StoreError::NotFound { .. }) => tracing::info!(namespace = %name, "namespace deleted"),
        Err(err) => tracing::warn!(namespace = %name, error = %err, "cannot delete the namespace"),
    }
}

/// One pass over the namespace's objects; how many are left.
async fn remaining(store: &dyn Store, registry: &Registry, namespace: &str) -> Result<usize, StoreError> {
    let crds = registry.all();
    let mut prefixes: Vec<(String, Option<&BuiltIn>)> =
        crds.values().filter(|crd| crd.namespaced()).map(|crd| (crd.prefix(Some(namespace)), None)).collect();
    prefixes.push((crate::registry::event::prefix(Some(namespace)), None));
    let built_in =
        crate::registry::builtin::RESOURCES.iter().filter(|resource| resource.namespaced && resource.stored());
    prefixes.extend(built_in.map(|resource| (resource.namespace_prefix(Some(namespace)), Some(resource))));
    let mut left = 0;
    for (prefix, built_in) in prefixes {
        let page = store.list(ListOptions { prefix: &prefix, ..Default::default() }).await?;
        for entry in page.entries {
            let Some(mut object) = crate::registry::decode(&entry.value, entry.mod_revision) else { continue };
            if crate::object::finalizers(&object).is_empty() {
                match store.delete(&entry.key, Some(entry.mod_revision)).await {
                    Ok(_) => {
                        if let Some(resource) = built_in {
                            resource.release(store, &object, None).await;
                        }
                    }
                    Err(StoreError::NotFound { .. }) => {}
                    Err(StoreError::Conflict { .. }) => left += 1,
                    Err(err) => return Err(err),
                }
                continue;
            }
            left += 1;
            if crate::object::meta_field(&object, "deletionTimestamp").is_none() {
                let meta = crate::object::meta_mut(&mut object);
                meta.insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                meta.remove("resourceVersion");
                let bytes = serde_json::to_vec(&object).unwrap_or_default();
                match store.update(&entry.key, bytes, entry.mod_revision).await {
                    Ok(_) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Ok(left)
}

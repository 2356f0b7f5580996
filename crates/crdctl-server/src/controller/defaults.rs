//! What every namespace has, as kube-controller-manager's `serviceaccount-controller` and
//! `root-ca-certificate-publisher-controller` keep it: the `default` ServiceAccount and the
//! `kube-root-ca.crt` ConfigMap with the server's CA. Each is made in every active namespace,
//! made again when it is deleted, and (the ConfigMap) put back when its data is changed.

use std::time::Duration;

use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::Context;
use super::queue::{Next, Queue};
use crate::error::{ApiError, ApiResult};
use crate::informer::{self, Change};
use crate::registry::builtin::namespace;

/// One object every namespace has.
pub struct Wanted {
    /// The controller's name, as upstream's.
    pub controller: &'static str,
    /// Its resource (core `v1`).
    pub resource: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its name.
    pub name: &'static str,
    /// What it holds beside its metadata, kept as it is when `Some` (the ConfigMap's `data`).
    pub kept: Option<(&'static str, Value)>,
    /// Its `kubernetes.io/description` annotation, put back when removed.
    pub description: Option<&'static str>,
}

/// The annotation that says what a published object is for.
const DESCRIPTION: &str = "kubernetes.io/description";

/// The `default` ServiceAccount.
pub fn service_account() -> Wanted {
    Wanted {
        controller: "serviceaccount-controller",
        resource: "serviceaccounts",
        kind: "ServiceAccount",
        name: "default",
        kept: None,
        description: None,
    }
}

/// The `kube-root-ca.crt` ConfigMap holding `ca` (PEM; empty for a server without TLS, as
/// upstream publishes a client configuration without CA data: Pods that mount the ConfigMap
/// still find it).
pub fn root_ca(ca: &str) -> Wanted {
    Wanted {
        controller: "root-ca-certificate-publisher",
        resource: "configmaps",
        kind: "ConfigMap",
        name: "kube-root-ca.crt",
        kept: Some(("data", json!({"ca.crt": ca}))),
        description: Some(
            "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.",
        ),
    }
}

/// Runs the controller keeping `wanted` until the returned future is dropped.
pub async fn run(cx: &Context, wanted: Wanted) {
    let queue = Queue::new();
    let namespaces = informer::follow(&*cx.store, namespace::PREFIX, |change| {
        if let Change::Put { object, .. } = change {
            queue.add(crate::object::name(&object).to_string());
        }
    });
    let prefix = format!("/registry/{}/", wanted.resource);
    let objects = informer::follow(&*cx.store, &prefix, |change: Change<IgnoredAny>| {
        let (Change::Put { key, .. } | Change::Delete { key, .. }) = change else { return };
        let Some((namespace, name)) = key.strip_prefix(prefix.as_str()).and_then(|rest| rest.split_once('/')) else {
            return;
        };
        if name == wanted.name {
            queue.add(namespace.to_string());
        }
    });
    let work = queue.run(wanted.controller, 2, |name| sync(cx, &wanted, name));
    tokio::join!(namespaces, objects, work);
}

/// Makes `wanted` in namespace `name` if it is active and lacks it, or puts its data back.
async fn sync(cx: &Context, wanted: &Wanted, name: String) -> ApiResult<Next> {
    let client = cx.client();
    let entry = cx.store.get(&namespace::key(&name)).await.map_err(|err| ApiError::unavailable(err.to_string()))?;
    let Some(namespace) = entry.map(|entry| crate::object::decode_entry(&entry)).transpose()? else {
        return Ok(Next::Done);
    };
    if crate::object::meta_field(&namespace, "deletionTimestamp").is_some() {
        return Ok(Next::Done);
    }
    let Some(endpoint) = client.endpoint("v1", wanted.kind, Some(&name)) else { return Ok(Next::Done) };
    let mut object = json!({"apiVersion": "v1", "kind": wanted.kind, "metadata": {"name": wanted.name}});
    restore(wanted, &mut object);
    match client.get(&endpoint, wanted.name).await? {
        None => match client.create(&endpoint, object).await {
            Err(err) if err.code == axum::http::StatusCode::CONFLICT => Ok(Next::After(Duration::ZERO)),
            // A namespace deleted meanwhile refuses it: nothing to keep there.
            Err(err) if err.code == axum::http::StatusCode::FORBIDDEN => Ok(Next::Done),
            done => done.map(|()| Next::Done),
        },
        Some(current) => {
            let mut restored = current.clone();
            if !restore(wanted, &mut restored) {
                return Ok(Next::Done);
            }
            match client.replace(&endpoint, wanted.name, restored).await? {
                true => Ok(Next::Done),
                false => Ok(Next::After(Duration::ZERO)),
            }
        }
    }
}

/// Puts what `wanted` keeps into `object`; whether anything changed. As upstream, a
/// description annotation that is there (with any text) is left alone.
fn restore(wanted: &Wanted, object: &mut Value) -> bool {
    let mut changed = false;
    if let Some((field, value)) = wanted.kept.as_ref().filter(|(field, value)| object.get(*field) != Some(value)) {
        crate::object::set(object, field, value.clone());
        changed = true;
    }
    let annotations = crate::object::meta_field(object, "annotations");
    let described = annotations.and_then(|a| a.get(DESCRIPTION)).and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    if let Some(description) = wanted.description.filter(|_| !described) {
        let annotations = crate::object::meta_mut(object).entry("annotations").or_insert_with(|| json!({}));
        crate::object::set(annotations, DESCRIPTION, Value::String(description.into()));
        changed = true;
    }
    changed
}

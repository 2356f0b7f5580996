//! kube-controller-manager's `clusterrole-aggregation-controller`: a ClusterRole with an
//! `aggregationRule` gets, as its `rules`, the rules of every ClusterRole its selectors match
//! (in name order, each rule once), written back whenever one of them changes, so `kubectl get
//! clusterrole edit -o yaml` shows what `edit` grants. (The authorizer aggregates for itself
//! and does not wait for this.)

use serde_json::Value;

use super::Context;
use super::queue::{Next, Queue};
use crate::error::{ApiError, ApiResult};
use crate::informer::{self, Change};

const PREFIX: &str = "/registry/clusterroles/";

/// Runs the controller until the returned future is dropped.
pub async fn run(cx: &Context) {
    let queue = Queue::new();
    // Any ClusterRole's change may change what each aggregated one selects.
    let roles = informer::follow(&*cx.store, PREFIX, |change: Change<serde::de::IgnoredAny>| {
        let (Change::Put { .. } | Change::Delete { .. }) = change else { return };
        queue.add(String::new());
    });
    let work = queue.run("clusterrole-aggregation", 1, |_| sync(cx));
    tokio::join!(roles, work);
}

/// Writes every aggregated ClusterRole's rules.
async fn sync(cx: &Context) -> ApiResult<Next> {
    let mut roles: Vec<Value> = Vec::new();
    let mut keep = |change| {
        if let Change::Put { object, .. } = change {
            roles.push(object);
        }
    };
    let listed = informer::list::<Value>(&*cx.store, PREFIX, &mut keep).await;
    listed.map_err(|err| ApiError::unavailable(err.to_string()))?;
    let client = cx.client();
    let Some(endpoint) = client.endpoint("rbac.authorization.k8s.io/v1", "ClusterRole", None) else {
        return Ok(Next::Done);
    };
    for role in &roles {
        let Some(rules) = crate::auth::rbac::aggregated_rules(role, &roles) else { continue };
        let name = crate::object::name(role);
        if role.get("rules").and_then(Value::as_array) == Some(&rules) {
            continue;
        }
        let mut aggregated = role.clone();
        crate::object::set(&mut aggregated, "rules", Value::Array(rules));
        if !client.replace(&endpoint, name, aggregated).await? {
            return Ok(Next::After(std::time::Duration::ZERO));
        }
    }
    Ok(Next::Done)
}

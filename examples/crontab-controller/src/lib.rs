//! A small kube-runtime controller, the kind an operator starts from: for every CronTab it
//! keeps a finalizer, sets `status.observedGeneration` and a `Ready` condition, and records an
//! Event; on deletion it records another and lets the object go.
//!
//! Its tests (`tests/controller.rs`) run it against `crdctl_server::testing::TestServer` — a
//! real CRD-aware API server in the test process — including a CRD upgrade that moves the
//! storage version from v1beta1 to v1 while the controller runs.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::watcher;
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The finalizer the controller keeps on every CronTab.
pub const FINALIZER: &str = "crontabs.stable.example.com/cleanup";

/// The controller's name in Events.
pub const CONTROLLER: &str = "crontab-controller";

/// `stable.example.com/v1` CronTab.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "stable.example.com", version = "v1", kind = "CronTab", namespaced, status = "CronTabStatus")]
#[serde(rename_all = "camelCase")]
pub struct CronTabSpec {
    /// When it runs.
    pub cron_spec: String,
    /// What it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// How many copies (the CRD defaults it to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// What the controller reports.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronTabStatus {
    /// The generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`.
    #[serde(default)]
    #[schemars(skip)]
    pub conditions: Vec<Condition>,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Adding or removing the finalizer failed.
    #[error(transparent)]
    Finalizer(#[from] Box<finalizer::Error<kube::Error>>),
}

struct Context {
    client: kube::Client,
    recorder: Recorder,
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: kube::Client, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    let crontabs: Api<CronTab> = Api::all(client.clone());
    let reporter = Reporter { controller: CONTROLLER.into(), instance: None };
    let context = Arc::new(Context { client: client.clone(), recorder: Recorder::new(client, reporter) });
    Controller::new(crontabs, watcher::Config::default())
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::warn!(error = %err, "reconcile failed");
            }
        })
        .await;
}

async fn reconcile(crontab: Arc<CronTab>, context: Arc<Context>) -> Result<Action, Error> {
    let namespace = crontab.namespace().unwrap_or_default();
    let api: Api<CronTab> = Api::namespaced(context.client.clone(), &namespace);
    finalizer(&api, FINALIZER, crontab, |event| async {
        match event {
            finalizer::Event::Apply(crontab) => apply(&api, &crontab, &context).await,
            finalizer::Event::Cleanup(crontab) => cleanup(&crontab, &context).await,
        }
    })
    .await
    .map_err(|err| Error::Finalizer(Box::new(err)))
}

/// Marks the CronTab Ready at its generation.
async fn apply(api: &Api<CronTab>, crontab: &CronTab, context: &Context) -> Result<Action, kube::Error> {
    let generation = crontab.metadata.generation;
    let status = crontab.status.clone().unwrap_or_default();
    if status.observed_generation == generation && generation.is_some() {
        return Ok(Action::requeue(Duration::from_secs(300)));
    }
    let ready = Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Reconciled".into(),
        message: format!("schedule {} accepted", crontab.spec.cron_spec),
        observed_generation: generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    };
    let patch = json!({"status": {"observedGeneration": generation, "conditions": [ready]}});
    api.patch_status(&crontab.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some(format!("generation {} is ready", generation.unwrap_or_default())),
        action: "Reconcile".into(),
        secondary: None,
    };
    context.recorder.publish(&event, &crontab.object_ref(&())).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Lets a deleted CronTab go, with an Event.
async fn cleanup(crontab: &CronTab, context: &Context) -> Result<Action, kube::Error> {
    let event = Event {
        type_: EventType::Normal,
        reason: "Deleted".into(),
        note: Some("finalizer removed".into()),
        action: "Cleanup".into(),
        secondary: None,
    };
    context.recorder.publish(&event, &crontab.object_ref(&())).await?;
    Ok(Action::await_change())
}

fn error_policy(_crontab: Arc<CronTab>, _error: &Error, _context: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

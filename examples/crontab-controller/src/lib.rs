//! A small kube-runtime controller, the kind an operator starts from: for every CronTab it
//! keeps a finalizer, owns a ConfigMap with the schedule (server-side applied, with a controller
//! owner reference), sets `status.observedGeneration` and a `Ready` condition, and records an
//! Event; on deletion it records another and lets the object go. Several replicas may run: only
//! the one holding the `coordination.k8s.io/v1` Lease reconciles ([`lead`]).
//!
//! Its admission webhooks ([`webhook`]) default and validate CronTabs.
//!
//! Its tests (`tests/controller.rs`) run it against `crdctl_server::testing::TestServer` — a
//! real CRD-aware API server in the test process — including a CRD upgrade that moves the
//! storage version from v1beta1 to v1 while the controller runs, and its own webhooks called
//! over TLS.

pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
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

/// Who this replica is and where the replicas elect their leader.
#[derive(Debug, Clone)]
pub struct Election {
    /// This replica's identity (a pod name, say).
    pub identity: String,
    /// The namespace of the Lease named [`CONTROLLER`].
    pub namespace: String,
    /// How long a Lease holds without renewal; it is renewed at a third of that.
    pub lease_duration: Duration,
}

/// Runs the controller until `shutdown` resolves, reconciling only while this replica leads.
pub async fn run(
    client: kube::Client,
    election: Election,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let mut shutdown = Box::pin(shutdown);
    tokio::select! {
        () = lead(&leases, &election) => {}
        () = &mut shutdown => return,
    }
    // A leader that cannot renew its Lease stops reconciling, as client-go's `OnStoppedLeading`.
    let (lost, lost_lease) = tokio::sync::oneshot::channel::<()>();
    let renewing = tokio::spawn(async move {
        loop {
            tokio::time::sleep(election.lease_duration / 3).await;
            match try_lead(&leases, &election).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => tracing::warn!(error = %err, "renewing the lease failed"),
            }
        }
        tracing::warn!("lost the lease");
        let _ = lost.send(());
    });
    let stop = async move {
        tokio::select! {
            () = shutdown => {}
            _ = lost_lease => {}
        }
    };
    let crontabs: Api<CronTab> = Api::all(client.clone());
    let config_maps: Api<ConfigMap> = Api::all(client.clone());
    let reporter = Reporter { controller: CONTROLLER.into(), instance: None };
    let context = Arc::new(Context { client: client.clone(), recorder: Recorder::new(client, reporter) });
    Controller::new(crontabs, watcher::Config::default())
        .owns(config_maps, watcher::Config::default())
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::warn!(error = %err, "reconcile failed");
            }
        })
        .await;
    renewing.abort();
}

/// Waits until this replica holds the Lease, as client-go's `leaderelection` does: the Lease is
/// taken when nobody holds it or its holder stopped renewing it for `lease_duration`.
pub async fn lead(leases: &Api<Lease>, election: &Election) {
    loop {
        match try_lead(leases, election).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(err) => tracing::warn!(error = %err, "taking the lease failed"),
        }
        tokio::time::sleep(election.lease_duration / 3).await;
    }
}

/// Takes or renews the Lease; `false` while another replica holds it. A write that loses a race
/// is a 409 Conflict, since it carries the `resourceVersion` it read.
async fn try_lead(leases: &Api<Lease>, election: &Election) -> Result<bool, kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let seconds = i32::try_from(election.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let mut lease = leases.get_opt(CONTROLLER).await?.unwrap_or_default();
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone();
    let renewed = spec.renew_time.as_ref().map(|t| t.0).or(spec.acquire_time.as_ref().map(|t| t.0));
    let lasts = k8s_openapi::jiff::SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(seconds).into());
    let expired = renewed.is_none_or(|renewed| renewed.checked_add(lasts).is_ok_and(|until| until < now));
    if holder.as_deref().is_some_and(|h| h != election.identity) && !expired {
        return Ok(false);
    }
    if holder.as_deref() != Some(election.identity.as_str()) {
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(holder.is_some()));
    }
    spec.holder_identity = Some(election.identity.clone());
    spec.lease_duration_seconds = Some(seconds);
    spec.renew_time = Some(MicroTime(now));
    let written = match lease.metadata.resource_version {
        Some(_) => leases.replace(CONTROLLER, &PostParams::default(), &lease).await,
        None => {
            lease.metadata.name = Some(CONTROLLER.into());
            leases.create(&PostParams::default(), &lease).await
        }
    };
    match written {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
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

/// Applies the CronTab's ConfigMap and marks the CronTab Ready at its generation.
async fn apply(api: &Api<CronTab>, crontab: &CronTab, context: &Context) -> Result<Action, kube::Error> {
    let generation = crontab.metadata.generation;
    let status = crontab.status.clone().unwrap_or_default();
    if status.observed_generation == generation && generation.is_some() {
        return Ok(Action::requeue(Duration::from_secs(300)));
    }
    let namespace = crontab.namespace().unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::namespaced(context.client.clone(), &namespace);
    let schedule = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": crontab.name_any(), "ownerReferences": [crontab.controller_owner_ref(&())]},
        "data": {"cronSpec": crontab.spec.cron_spec, "image": crontab.spec.image.clone().unwrap_or_default()},
    });
    let owned = PatchParams::apply(CONTROLLER).force();
    config_maps.patch(&crontab.name_any(), &owned, &Patch::Apply(schedule)).await?;
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

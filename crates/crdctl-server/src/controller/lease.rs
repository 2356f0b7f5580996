//! Leader election through a `coordination.k8s.io/v1` Lease in `kube-system`, as client-go's
//! `leaderelection` runs it for kube-controller-manager: a replica takes the Lease when nobody
//! holds it or when its record has not changed for a whole lease duration (measured on this
//! replica's clock, so replicas need not agree on the time), renews it every retry period, and
//! gives up leading when it could not renew within the renew deadline. Every read and write
//! compares revisions in the store, so two replicas never both take it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_storage::{Revision, Store, StoreError};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How long a Lease lasts and how often it is renewed: client-go's defaults, which
/// kube-controller-manager uses.
#[derive(Debug, Clone)]
pub struct Timings {
    /// How long others wait, after its record last changed, before taking the Lease over.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How often the holder renews and the others try to take it.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// One replica's side of an election for the Lease `kube-system/<name>`.
pub struct Elector {
    store: Arc<dyn Store>,
    name: &'static str,
    key: String,
    /// `<host>_<uuid>`, as kube-controller-manager names itself.
    identity: String,
    timings: Timings,
    /// The holder's record as last read, and when it last changed.
    observed: std::sync::Mutex<Option<(Value, Instant)>>,
}

/// Where Leases are stored (the `leases` row of the built-in table).
const PREFIX: &str = "/registry/leases/kube-system/";

impl Elector {
    /// An elector for the Lease `kube-system/<name>`.
    pub fn new(store: Arc<dyn Store>, name: &'static str, timings: Timings) -> Elector {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "crdctl".into());
        Elector {
            store,
            name,
            key: format!("{PREFIX}{name}"),
            identity: format!("{host}_{}", crate::object::new_uid()),
            timings,
            observed: std::sync::Mutex::new(None),
        }
    }

    /// This replica's identity in `spec.holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this replica holds the Lease; false if `stop` came first.
    pub async fn acquire(&self, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
        loop {
            if *stop.borrow() {
                return false;
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(err) => tracing::debug!(lease = self.name, error = %err, "cannot read or write the lease"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.timings.retry_period) => {}
                _ = stop.wait_for(|stopped| *stopped) => return false,
            }
        }
    }

    /// Renews the Lease every retry period; returns once a renewal has not succeeded within the
    /// renew deadline (the Lease is lost).
    pub async fn keep(&self) {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => return,
                Err(err) => tracing::debug!(lease = self.name, error = %err, "cannot renew the lease"),
            }
            if renewed.elapsed() > self.timings.renew_deadline {
                return;
            }
        }
    }

    /// Gives the Lease up (on shutdown), so another replica, or this one restarted, takes it at once.
    pub async fn release(&self) {
        let Ok(Some(entry)) = self.store.get(&self.key).await else { return };
        let Ok(mut lease) = serde_json::from_slice::<Value>(&entry.value) else { return };
        if lease.pointer("/spec/holderIdentity").and_then(Value::as_str) != Some(self.identity.as_str()) {
            return;
        }
        let spec = crate::object::object_mut(&mut lease, "spec");
        spec.remove("holderIdentity");
        spec.insert("leaseDurationSeconds".into(), json!(1));
        spec.insert("renewTime".into(), json!(micro_time_now()));
        let _ = self.store.update(&self.key, crate::object::to_stored(&lease), entry.mod_revision).await;
    }

    /// Takes the Lease if it is free or expired, renews it if held; whether this replica holds it.
    async fn try_acquire_or_renew(&self) -> Result<bool, StoreError> {
        let now = micro_time_now();
        let Some(entry) = self.store.get(&self.key).await? else {
            let lease = self.new_lease(&now);
            return match self.store.create(&self.key, serde_json::to_vec(&lease).unwrap_or_default()).await {
                Ok(_) => Ok(true),
                Err(StoreError::AlreadyExists { .. }) => Ok(false),
                Err(err) => Err(err),
            };
        };
        let mut lease: Value = serde_json::from_slice(&entry.value).unwrap_or_else(|_| json!({}));
        let spec = lease.get("spec").cloned().unwrap_or_else(|| json!({}));
        let holder = spec.get("holderIdentity").and_then(Value::as_str).unwrap_or_default();
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && !self.expired(&spec) {
            return Ok(false);
        }
        let fields = crate::object::object_mut(&mut lease, "spec");
        if !mine {
            let transitions = spec.get("leaseTransitions").and_then(Value::as_i64).unwrap_or(0);
            fields.insert("holderIdentity".into(), json!(self.identity));
            fields.insert("acquireTime".into(), json!(now));
            fields.insert(
                "leaseTransitions".into(),
                json!(if holder.is_empty() { transitions } else { transitions + 1 }),
            );
        }
        fields.insert("leaseDurationSeconds".into(), json!(self.timings.lease_duration.as_secs().max(1)));
        fields.insert("renewTime".into(), json!(now));
        self.write(entry.mod_revision, &lease).await
    }

    async fn write(&self, expected: Revision, lease: &Value) -> Result<bool, StoreError> {
        match self.store.update(&self.key, crate::object::to_stored(lease), expected).await {
            Ok(_) => {
                self.observe(lease.get("spec").cloned().unwrap_or_default());
                Ok(true)
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Whether the holder's record has stayed the same for a lease duration on this clock.
    fn expired(&self, spec: &Value) -> bool {
        let mut observed = self.observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*observed {
            Some((record, since)) if record == spec => {
                let duration = spec.get("leaseDurationSeconds").and_then(Value::as_u64).map(Duration::from_secs);
                since.elapsed() > duration.unwrap_or(self.timings.lease_duration)
            }
            _ => {
                *observed = Some((spec.clone(), Instant::now()));
                false
            }
        }
    }

    fn observe(&self, spec: Value) {
        *self.observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((spec, Instant::now()));
    }

    fn new_lease(&self, now: &str) -> Value {
        let mut lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.timings.lease_duration.as_secs().max(1),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        });
        crate::object::prepare_create(&mut lease, Some("kube-system"));
        lease
    }
}

/// Now as a `MicroTime` (`2026-12-01T10:00:00.000000Z`).
fn micro_time_now() -> String {
    let now = OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(now.nanosecond() / 1000 * 1000).unwrap_or(now);
    let text = now.format(&Rfc3339).unwrap_or_default();
    // RFC 3339 as `time` writes it drops trailing zeros; MicroTime always has six digits.
    match text.strip_suffix('Z').map(|t| t.split_once('.')) {
        Some(Some((seconds, fraction))) => format!("{seconds}.{fraction:0<6}Z"),
        Some(None) => format!("{}.000000Z", text.trim_end_matches('Z')),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timings() -> Timings {
        Timings {
            lease_duration: Duration::from_secs(1),
            renew_deadline: Duration::from_millis(500),
            retry_period: Duration::from_millis(50),
        }
    }

    #[tokio::test]
    async fn one_replica_holds_the_lease_until_it_stops_renewing_or_releases_it() {
        let store: Arc<dyn Store> = Arc::new(crdctl_storage::memory::open());
        let first = Elector::new(Arc::clone(&store), "controllers", timings());
        let second = Elector::new(Arc::clone(&store), "controllers", timings());
        assert!(first.try_acquire_or_renew().await.unwrap());
        assert!(!second.try_acquire_or_renew().await.unwrap(), "held and fresh");
        assert!(first.try_acquire_or_renew().await.unwrap(), "renewed");
        // The holder stops renewing: the other takes over once the record is a lease duration old.
        assert!(!second.try_acquire_or_renew().await.unwrap());
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(second.try_acquire_or_renew().await.unwrap());
        let lease: Value = serde_json::from_slice(&store.get(&first.key).await.unwrap().unwrap().value).unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], second.identity());
        assert_eq!(lease["spec"]["leaseTransitions"], 1);
        assert_eq!(lease["metadata"]["namespace"], "kube-system");
        assert!(!first.try_acquire_or_renew().await.unwrap(), "the old holder has lost it");
        // A released Lease is free at once.
        second.release().await;
        assert!(first.try_acquire_or_renew().await.unwrap());
    }

    #[test]
    fn micro_time_has_six_fraction_digits() {
        let now = micro_time_now();
        let fraction = now.split_once('.').map(|(_, f)| f).unwrap_or_default();
        assert_eq!(fraction.len(), 7, "{now}");
        assert!(OffsetDateTime::parse(&now, &Rfc3339).is_ok());
    }
}

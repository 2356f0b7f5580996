//! `crdctl retire-version`: the Kubernetes documentation's procedure for removing an old
//! version, checked step by step and, with `apply`, carried out.
//!
//! The procedure ("Remove an old version" on the CRD versioning page):
//! 1. make sure no client still uses the old version;
//! 2. set `served: false` on it (clients still using it now get 404s; if they do, serve it
//!    again and move them first);
//! 3. make sure existing objects were migrated: the new version has `storage: true`, and the
//!    old one is no longer in `status.storedVersions` (here: by running [`migrate`]);
//! 4. remove the old version from `spec.versions`;
//! 5. drop its conversion from the conversion webhook (the webhook's code, not the cluster's).
//!
//! Every step first looks at the CRD as it is now, so a run after any failure goes on from
//! where the last one stopped, and a run over a retired version changes nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use crate::api::Crd;
use crate::api::{CallError, Cluster, crd_path};
use crate::error::Error;
use crate::migrate::{self, Options, Summary};
use crate::progress::Progress;
use crate::usage;

/// How many times an update of the CRD is retried when it changes under it.
const UPDATE_ATTEMPTS: usize = 5;

/// How to retire a version.
#[derive(Debug, Clone)]
pub struct RetireOptions {
    /// Carry out the steps (otherwise only check them).
    pub apply: bool,
    /// The version must have had no request for this long (from the server's metrics).
    pub unused_for: Duration,
    /// How to migrate, when objects may still be stored in the version.
    pub migrate: Options,
}

/// The state of one step of the procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StepState {
    /// Nothing left to do.
    Done,
    /// Done by this run.
    Applied,
    /// To do (run with `--apply`).
    Pending,
    /// Cannot be done: a precondition failed.
    Blocked,
}

/// One step of the procedure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What the step does.
    pub action: String,
    /// Where it stands.
    pub state: StepState,
}

/// A precondition and what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What must hold.
    pub condition: String,
    /// Whether it holds; a failed check refuses the retirement.
    pub ok: bool,
    /// What was found.
    pub detail: String,
}

/// The procedure for one version, as checked (and applied).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retirement {
    /// The CRD.
    pub crd: String,
    /// The version retired.
    pub version: String,
    /// The storage version objects end up in.
    pub storage_version: String,
    /// The preconditions.
    pub checks: Vec<Check>,
    /// Warnings that do not refuse (e.g. metrics that say nothing about time).
    pub warnings: Vec<String>,
    /// The steps.
    pub steps: Vec<Step>,
    /// The migration, when this run did one.
    pub migration: Option<Summary>,
}

impl Retirement {
    /// Whether a precondition failed.
    pub fn refused(&self) -> bool {
        self.checks.iter().any(|check| !check.ok)
    }

    /// Whether the version is gone from the CRD.
    pub fn retired(&self) -> bool {
        self.steps.iter().all(|step| matches!(step.state, StepState::Done | StepState::Applied))
    }
}

/// Checks, and with `apply` performs, the retirement of `version` from the CRD `name`.
pub async fn retire(
    cluster: &Cluster,
    name: &str,
    version: &str,
    options: &RetireOptions,
    progress: &dyn Progress,
) -> Result<Retirement, Error> {
    let mut crd = read(cluster, name).await?;
    let storage = crd.storage_version().unwrap_or_default().to_string();
    let mut retirement = Retirement {
        crd: name.to_string(),
        version: version.to_string(),
        storage_version: storage.clone(),
        checks: Vec::new(),
        warnings: Vec::new(),
        steps: Vec::new(),
        migration: None,
    };
    let listed = crd.definition.spec.versions.iter().find(|v| v.name == version).cloned();
    let in_stored = crd.stored_versions().iter().any(|v| v == version);
    if listed.is_none() && !in_stored {
        retirement.steps = States::all(StepState::Done).steps();
        retirement.warnings.push(format!("{version} is not a version of {name} (already retired?)"));
        return Ok(retirement);
    }
    retirement.checks.push(Check {
        condition: format!("{version} is not the storage version"),
        ok: storage != version,
        detail: if storage == version {
            format!("{version} is the storage version: set storage: true on the version that replaces it first")
        } else {
            format!("the storage version is {storage}")
        },
    });
    retirement.checks.push(usage_check(cluster, &crd, version, options.unused_for, &mut retirement.warnings).await);
    let served = listed.as_ref().is_some_and(|v| v.served);
    let pending = |needed: bool| if needed { StepState::Pending } else { StepState::Done };
    let mut states =
        States { stop_serving: pending(served), migrate: pending(in_stored), remove: pending(listed.is_some()) };
    if retirement.refused() {
        states.block_pending();
    }
    if options.apply && !retirement.refused() {
        if states.stop_serving == StepState::Pending {
            crd = update_versions(cluster, name, version, |versions| {
                for entry in versions.iter_mut().filter(|v| v["name"] == version) {
                    entry["served"] = Value::Bool(false);
                }
            })
            .await?;
            states.stop_serving = StepState::Applied;
            progress.note(&format!("{version}: served: false"));
        }
        if states.migrate == StepState::Pending {
            let summary = migrate::migrate(cluster, name, &options.migrate, progress).await?;
            let finished = summary.finished;
            let incomplete = summary.incomplete.clone();
            retirement.migration = Some(summary);
            if !finished {
                retirement.checks.push(Check {
                    condition: format!("no object is stored as {version}"),
                    ok: false,
                    detail: incomplete.unwrap_or_else(|| "the migration did not finish".into()),
                });
                states.block_pending();
                retirement.steps = states.steps();
                return Ok(retirement);
            }
            states.migrate = StepState::Applied;
            crd = read(cluster, name).await?;
        }
        if states.remove == StepState::Pending {
            let still_stored = crd.stored_versions().iter().any(|v| v == version);
            if still_stored {
                return Err(Error::Refused(format!("{version} is still in status.storedVersions of {name}")));
            }
            update_versions(cluster, name, version, |versions| versions.retain(|v| v["name"] != version)).await?;
            states.remove = StepState::Applied;
            progress.note(&format!("{version}: removed from spec.versions"));
        }
    }
    retirement.steps = states.steps();
    Ok(retirement)
}

/// Where each step of the procedure stands.
struct States {
    stop_serving: StepState,
    migrate: StepState,
    remove: StepState,
}

impl States {
    fn all(state: StepState) -> States {
        States { stop_serving: state, migrate: state, remove: state }
    }

    /// A failed precondition blocks every step not done yet.
    fn block_pending(&mut self) {
        for state in [&mut self.stop_serving, &mut self.migrate, &mut self.remove] {
            if *state == StepState::Pending {
                *state = StepState::Blocked;
            }
        }
    }

    fn steps(&self) -> Vec<Step> {
        let step = |action: &str, state| Step { action: action.to_string(), state };
        vec![
            step("set served: false on the version (clients still using it get 404)", self.stop_serving),
            step(
                "migrate stored objects to the storage version and drop the version from status.storedVersions",
                self.migrate,
            ),
            step("remove the version from spec.versions", self.remove),
        ]
    }
}

async fn read(cluster: &Cluster, name: &str) -> Result<Crd, Error> {
    cluster.crd(name).await.map_err(Error::call(format!("reading CustomResourceDefinition {name}")))
}

/// Whether clients requested the version within `unused_for`, from `/metrics`.
async fn usage_check(
    cluster: &Cluster,
    crd: &Crd,
    version: &str,
    unused_for: Duration,
    warnings: &mut Vec<String>,
) -> Check {
    let spec = &crd.definition.spec;
    let condition = format!("no client requested {version} in the last {}", human(unused_for));
    let ok = |detail: String| Check { condition: condition.clone(), ok: true, detail };
    if unused_for.is_zero() {
        return ok("not checked (--unused-for 0s)".into());
    }
    let metrics = match cluster.text("/metrics").await {
        Ok(metrics) => metrics,
        Err(err) => {
            warnings.push(format!(
                "cannot read the server's /metrics ({err}): whether clients still use {version} is unknown"
            ));
            return ok("unknown: no metrics".into());
        }
    };
    let used = usage::of(&metrics, &spec.group, version, &spec.names.plural);
    match used.last_request {
        Some(last) => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |elapsed| elapsed.as_secs_f64());
            let ago = Duration::from_secs_f64((now - last).max(0.0));
            if ago < unused_for {
                Check {
                    condition,
                    ok: false,
                    detail: format!(
                        "clients requested {version} {} ago ({} requests since the server started); move them to \
                         {} first, or wait",
                        human(ago),
                        used.requests,
                        crd.storage_version().unwrap_or_default()
                    ),
                }
            } else {
                ok(format!("last requested {} ago", human(ago)))
            }
        }
        None if used.requests > 0.0 => {
            warnings.push(format!(
                "the server counted {} requests to {version} since it started, but its metrics do not say when",
                used.requests
            ));
            ok("unknown: the server does not record when".into())
        }
        None => ok(format!("no request to {version} since the server started")),
    }
}

/// A duration as `90s`, `10m`, `1h5m`.
fn human(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0..120 => format!("{seconds}s"),
        120..7200 => format!("{}m", seconds / 60),
        _ => format!("{}h{}m", seconds / 3600, seconds % 3600 / 60),
    }
}

/// Changes `spec.versions` with a PUT of the whole CRD carrying its `resourceVersion`; on a
/// conflict, reads it again and reapplies the change.
async fn update_versions(
    cluster: &Cluster,
    name: &str,
    version: &str,
    change: impl Fn(&mut Vec<Value>),
) -> Result<Crd, Error> {
    let what = || format!("updating {version} in CustomResourceDefinition {name}");
    for _ in 0..UPDATE_ATTEMPTS {
        let mut raw = read(cluster, name).await?.raw;
        if let Some(Value::Array(versions)) = raw.pointer_mut("/spec/versions") {
            change(versions);
        }
        match cluster.put(&crd_path(name), &raw, false).await {
            Ok(updated) => return Crd::from_raw(updated).map_err(Error::call(what())),
            Err(CallError::Status { code: 409, .. }) => continue,
            Err(err) => return Err(Error::call(what())(err)),
        }
    }
    Err(Error::Refused(format!("{}: the CRD kept changing", what())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human(Duration::from_secs(42)), "42s");
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(3900 * 2)), "2h10m");
    }
}

//! `/metrics`: what clients asked for, in Prometheus form, under kube-apiserver's metric names,
//! so dashboards and `crdctl retire-version` read crdctl as they read a cluster.
//!
//! - `apiserver_request_total{verb,group,version,resource,subresource,scope,component,code,dry_run}`
//!   counts every API request, with upstream's verb names (`LIST`, `WATCH`, `APPLY`, …).
//! - `apiserver_requested_deprecated_apis{group,version,resource,subresource,removed_release}`
//!   is 1 for every deprecated version a client has requested since the server started.
//! - `crdctl_request_last_timestamp_seconds{group,version,resource}` is when a version was last
//!   requested (Unix time): upstream has no such gauge, and without it nobody can tell whether
//!   a version is still in use *now*, which is what retiring a version needs to know.
//! - `apiserver_validating_admission_policy_check_total{policy,policy_binding,error_type,enforcement_action}`
//!   counts what each policy binding did to a request (`deny`, `warn`, `audit`; `allow` when an
//!   error was ignored), as upstream.
//! - `leader_election_master_status{name}` (client-go's) is 1 on the replica that runs the
//!   controllers; `crdctl_storage_version_migrations_total{resource,result}` and
//!   `crdctl_storage_version_migrated_objects_total{resource,result}` count what its storage
//!   version migrator did.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::request::{RequestInfo, Verb};

/// The metric of the last-request timestamps, as `retire-version` looks it up.
pub const LAST_REQUEST: &str = "crdctl_request_last_timestamp_seconds";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    dry_run: &'static str,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeprecatedLabels {
    group: String,
    version: String,
    resource: String,
    subresource: String,
    removed_release: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MigrationLabels {
    resource: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyCheckLabels {
    policy: String,
    policy_binding: String,
    error_type: &'static str,
    enforcement_action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    group: String,
    version: String,
    resource: String,
}

/// The server's metrics. Cheap to clone (the families are shared).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    deprecated: Family<DeprecatedLabels, Gauge>,
    last_request: Family<VersionLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    migrations: Family<MigrationLabels, Counter>,
    migrated_objects: Family<MigrationLabels, Counter>,
    leading: Family<LeaseLabels, Gauge>,
    policy_checks: Family<PolicyCheckLabels, Counter>,
}

/// One request's labels, taken before it is answered.
#[derive(Debug)]
pub struct Request(RequestLabels);

impl Request {
    /// The labels of a request to a resource path; `None` for discovery.
    pub fn new(verb: Option<Verb>, path: &RequestInfo, dry_run: bool, content_type: &str) -> Option<Request> {
        let resource = path.resource.clone()?;
        let scope = match (&path.name, &path.namespace) {
            (Some(_), _) => "resource",
            (None, Some(_)) => "namespace",
            (None, None) => "cluster",
        };
        Some(Request(RequestLabels {
            verb: verb_label(verb, content_type),
            dry_run: if dry_run { "All" } else { "" },
            group: path.group.clone(),
            version: path.version.clone(),
            resource,
            subresource: path.subresource.clone().unwrap_or_default(),
            scope,
            component: "apiserver",
            code: 0,
        }))
    }
}

impl Metrics {
    /// Counts one answered request.
    pub fn record(&self, request: Request, code: StatusCode) {
        let mut labels = request.0;
        labels.code = code.as_u16();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |elapsed| elapsed.as_secs_f64());
        let version = VersionLabels {
            group: labels.group.clone(),
            version: labels.version.clone(),
            resource: labels.resource.clone(),
        };
        self.last_request.get_or_create(&version).set(now);
        self.requests.get_or_create(&labels).inc();
    }

    /// Notes that a deprecated version was requested.
    pub fn record_deprecated(&self, path: &RequestInfo) {
        let Some(resource) = &path.resource else { return };
        self.deprecated
            .get_or_create(&DeprecatedLabels {
                group: path.group.clone(),
                version: path.version.clone(),
                resource: resource.clone(),
                subresource: path.subresource.clone().unwrap_or_default(),
                removed_release: "",
            })
            .set(1);
    }

    /// Counts a storage version migration of `resource` that ended with `result`, and the
    /// objects it rewrote.
    pub fn record_migration(&self, resource: &str, result: &'static str, rewritten: u64) {
        let labels = MigrationLabels { resource: resource.to_string(), result };
        self.migrations.get_or_create(&labels).inc();
        self.migrated_objects.get_or_create(&labels).inc_by(rewritten);
    }

    /// Counts what a policy binding did to a request: `enforcement_action` is `deny`, `warn`,
    /// `audit` or `allow`; `error_type` is `no_error` for a failed validation, else why the
    /// expression could not be evaluated (`invalid_error`, `compile_error`).
    pub fn record_policy_check(
        &self,
        (policy, policy_binding): (&str, &str),
        error_type: &'static str,
        enforcement_action: &'static str,
    ) {
        let labels = PolicyCheckLabels {
            policy: policy.to_string(),
            policy_binding: policy_binding.to_string(),
            error_type,
            enforcement_action,
        };
        self.policy_checks.get_or_create(&labels).inc();
    }

    /// Whether this replica leads the controllers of the Lease `name`.
    pub fn set_leading(&self, name: &'static str, leading: bool) {
        self.leading.get_or_create(&LeaseLabels { name }).set(i64::from(leading));
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        registry.register("apiserver_request", "Counter of apiserver requests", self.requests.clone());
        registry.register(
            "apiserver_requested_deprecated_apis",
            "Gauge of deprecated APIs that have been requested",
            self.deprecated.clone(),
        );
        registry.register(
            LAST_REQUEST,
            "When a group, version and resource was last requested, in seconds since the Unix epoch",
            self.last_request.clone(),
        );
        registry.register(
            "crdctl_storage_version_migrations",
            "Storage version migrations this replica carried out, by resource and result",
            self.migrations.clone(),
        );
        registry.register(
            "crdctl_storage_version_migrated_objects",
            "Objects storage version migrations rewrote in the storage version",
            self.migrated_objects.clone(),
        );
        registry.register(
            "apiserver_validating_admission_policy_check",
            "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.",
            self.policy_checks.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Whether this replica leads (1) or not (0), by lease",
            self.leading.clone(),
        );
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        text
    }
}

/// Upstream's verb label: `LIST` and `WATCH` for collection reads, `APPLY` for server-side
/// apply, `DELETECOLLECTION`, otherwise the HTTP method.
fn verb_label(verb: Option<Verb>, content_type: &str) -> &'static str {
    match verb {
        Some(Verb::Watch) => "WATCH",
        Some(Verb::List) => "LIST",
        Some(Verb::Get) => "GET",
        Some(Verb::Create) => "POST",
        Some(Verb::Update) => "PUT",
        Some(Verb::Patch) if content_type.starts_with("application/apply-patch") => "APPLY",
        Some(Verb::Patch) => "PATCH",
        Some(Verb::DeleteCollection) => "DELETECOLLECTION",
        Some(Verb::Delete) => "DELETE",
        None => "CONNECT",
    }
}

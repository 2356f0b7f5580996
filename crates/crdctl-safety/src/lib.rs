//! CRD upgrade safety: OLM v1's preflight as a library.
//!
//! [`check`] compares an installed CRD with the one that would replace it and returns every
//! change that could break stored objects or clients, as data ([`Report`]); [`dialect`] writes
//! the findings the way OLM does. The rules follow OLM's current engine (crdify):
//!
//! - CRD-wide: scope changes, versions in `status.storedVersions` that leave `spec.versions`,
//!   and schema fields that disappear from an existing version.
//! - Per version present in both CRDs, per schema node present in the old one: each keyword
//!   check ([`checks`]) judges its own keyword; any other difference is an unknown change and
//!   blocks. New fields are never compared: adding optional fields is safe.
//! - Between every pair of served versions of the new CRD (unless it converts with a webhook
//!   and the configuration says to trust it), with problems the installed CRD already had
//!   not reported again.
//!
//! This crate does no I/O.
//!
//! ```
//! use crdctl_model::load::load_str;
//!
//! let old = &load_str("old.yaml", include_str!("../../../examples/crontab/3-v1-storage.yaml")).unwrap()[0];
//! let new = &load_str("new.yaml", include_str!("../../../examples/crontab/4-webhook.yaml")).unwrap()[0];
//! let report = crdctl_safety::check(old, new, &crdctl_safety::Config::default());
//! assert!(!report.is_safe()); // v1beta1 lost host and port
//! for line in crdctl_safety::dialect::lines(&report, Default::default(), crdctl_safety::Severity::Error) {
//!     println!("{line}");
//! }
//! ```
//!
//! CRDs generated in code, such as kube-rs' `CustomResourceExt::crd()` (a `k8s_openapi`
//! `CustomResourceDefinition`), go through [`crdctl_model::Crd::from_value`]:
//!
//! ```
//! use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
//!
//! fn crd(schema: serde_json::Value) -> crdctl_model::Crd {
//!     let crd = apiext::CustomResourceDefinition {
//!         metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//!             name: Some("widgets.example.com".into()),
//!             ..Default::default()
//!         },
//!         spec: apiext::CustomResourceDefinitionSpec {
//!             group: "example.com".into(),
//!             scope: "Namespaced".into(),
//!             names: apiext::CustomResourceDefinitionNames {
//!                 plural: "widgets".into(),
//!                 kind: "Widget".into(),
//!                 ..Default::default()
//!             },
//!             versions: vec![apiext::CustomResourceDefinitionVersion {
//!                 name: "v1".into(),
//!                 served: true,
//!                 storage: true,
//!                 schema: Some(apiext::CustomResourceValidation {
//!                     open_api_v3_schema: Some(serde_json::from_value(schema).unwrap()),
//!                 }),
//!                 ..Default::default()
//!             }],
//!             ..Default::default()
//!         },
//!         status: None,
//!     };
//!     let mut value = serde_json::to_value(&crd).unwrap();
//!     value["apiVersion"] = "apiextensions.k8s.io/v1".into();
//!     value["kind"] = "CustomResourceDefinition".into();
//!     crdctl_model::Crd::from_value("generated", value).unwrap()
//! }
//!
//! let old = crd(serde_json::json!({"type": "object", "properties": {"size": {"type": "integer"}}}));
//! let new = crd(serde_json::json!({"type": "object", "properties": {"size": {"type": "string"}}}));
//! let report = crdctl_safety::check(&old, &new, &Default::default());
//! assert_eq!(
//!     crdctl_safety::dialect::message(&report.findings[0], Default::default()).unwrap(),
//!     r#"version "v1", field "^.size": type changed from "integer" to "string""#
//! );
//! ```

pub mod checks;
pub mod config;
pub mod data;
pub mod dialect;
pub mod finding;
pub mod schema;

use std::collections::HashMap;

use crdctl_model::Crd;
use serde_json::Map;

pub use config::{Config, Enforcement};
pub use dialect::Dialect;
pub use finding::{Change, Finding, KeywordChange, Location, Note, Report, Scope, Severity};

use crate::config::ConversionPolicy;
use crate::schema::{FlatSchema, SchemaPath};

/// Compares an installed CRD (`old`) with its replacement (`new`).
pub fn check(old: &Crd, new: &Crd, config: &Config) -> Report {
    let mut report = Report::default();
    let mut out = Findings { crd: new.name(), config, findings: Vec::new(), located: true };

    if let Some(change) = checks::scope::compare(old, new) {
        out.push(Scope::Crd, None, change, false, locate(new, "/spec/scope"));
    }
    let (removed, notes) = checks::stored_versions::compare(old, new);
    report.notes.extend(notes);
    for change in removed {
        let Change::StoredVersionRemoved { version } = &change else {
            continue;
        };
        let location = stored_version_location(old, version);
        out.push(Scope::Crd, None, change, false, location);
    }

    let old_schemas = flatten_versions(old);
    let new_schemas = flatten_versions(new);
    for (old_idx, version) in old.definition.spec.versions.iter().enumerate() {
        let Some(new_idx) = new.definition.spec.versions.iter().position(|v| v.name == version.name) else {
            continue;
        };
        if old.schema(old_idx) == new.schema(new_idx) {
            continue;
        }
        let (Some(old_schema), Some(new_schema)) = (old_schemas.get(old_idx), new_schemas.get(new_idx)) else {
            continue;
        };
        let pair = VersionPair { old, old_idx, new, new_idx };
        compare_versions(&pair, old_schema, new_schema, Scope::Version(version.name.clone()), &mut out);
    }

    let webhook_trusted =
        config.conversion == ConversionPolicy::Ignore && new.definition.conversion_strategy() == "Webhook";
    if !webhook_trusted {
        let mut fresh = Vec::new();
        for (older, newer) in served_pairs(new) {
            let in_old =
                |version: &str| old.definition.spec.versions.iter().position(|v| v.name == version && v.served);
            let unchanged = |version: &str, new_idx: usize| {
                in_old(version).is_some_and(|old_idx| old.schema(old_idx) == new.schema(new_idx))
            };
            // Identical schemas give identical findings, which ratcheting would subtract anyway.
            if unchanged(older.1, older.0) && unchanged(newer.1, newer.0) {
                continue;
            }
            let findings = pair_findings(new, &new_schemas, older, newer, config, true);
            let existing = match (in_old(older.1), in_old(newer.1)) {
                (Some(a), Some(b)) => pair_findings(old, &old_schemas, (a, older.1), (b, newer.1), config, false),
                _ => Vec::new(),
            };
            // Ratcheting: what the installed CRD already had is not this upgrade's fault.
            let mut by_path: HashMap<&Option<SchemaPath>, Vec<&Change>> = HashMap::new();
            for finding in &existing {
                by_path.entry(&finding.path).or_default().push(&finding.change);
            }
            let had = |f: &Finding| by_path.get(&f.path).is_some_and(|changes| changes.contains(&&f.change));
            fresh.extend(findings.into_iter().filter(|f| !had(f)));
        }
        reroot_removals(&mut fresh);
        out.findings.extend(fresh);
    }
    report.findings = out.findings;
    report
}

/// Checks every CRD in `new` against the CRD of the same name in `old`. A CRD only in `new` is
/// a fresh install and passes.
///
/// Schemas the API server would refuse (not structural, rules that do not compile or are over
/// the cost budget) are reported too, in the API server's words: OLM's preflight never sees
/// them, because applying the CRD fails first.
pub fn check_all(old: &[Crd], new: &[Crd], config: &Config) -> Report {
    let mut report = Report::default();
    for crd in new {
        if let Some(installed) = old.iter().find(|o| o.name() == crd.name()) {
            report.extend(check(installed, crd, config));
        }
        report.findings.extend(schema_refusals(crd, &crdctl_schema::definition::validate(crd)));
    }
    for crd in old.iter().filter(|o| !new.iter().any(|n| n.name() == o.name())) {
        report.notes.push(Note::CrdDropped { crd: crd.name().to_string() });
    }
    report
}

/// The violations of a CRD's version schemas, as API-server refusals.
fn schema_refusals(crd: &Crd, violations: &[crdctl_model::field::Error]) -> Vec<Finding> {
    violations
        .iter()
        .filter(|v| v.field.starts_with("spec.versions[") && v.field.contains(".schema.openAPIV3Schema"))
        .map(|violation| refusal(crd, violation))
        .collect()
}

fn refusal(crd: &Crd, violation: &crdctl_model::field::Error) -> Finding {
    Finding {
        crd: crd.name().to_string(),
        scope: Scope::Crd,
        path: None,
        location: locate(crd, &violation.pointer),
        change: Change::ApiServerRefusal { field: violation.field.clone(), message: violation.body() },
        severity: Severity::Error,
        implied_by_removal: false,
    }
}

/// What the API server itself refuses when the new CRDs replace the installed ones, with the
/// preflight off (OLM's `--enforcement None`): a changed scope, a removed stored version and a
/// schema it does not accept, in the API server's words. An installed CRD is taken to be Established, and a file without
/// `status.storedVersions` to have stored its storage version.
pub fn api_server_check_all(old: &[Crd], new: &[Crd]) -> Report {
    let mut report = Report::default();
    for crd in new {
        let Some(installed) = old.iter().find(|o| o.name() == crd.name()) else { continue };
        let mut installed = installed.clone();
        let storage: Vec<String> = installed.definition.storage_version().map(|v| v.name.clone()).into_iter().collect();
        let status = &mut installed.definition.status;
        status.conditions.push(crdctl_model::crd::Condition { type_: "Established".into(), status: "True".into() });
        if status.stored_versions.is_empty() {
            status.stored_versions = storage;
        }
        let violations = crdctl_schema::definition::validate_update(crd, &installed);
        for violation in &violations {
            if violation.field == "spec.scope" || violation.field.starts_with("status.storedVersions") {
                report.findings.push(refusal(crd, violation));
            }
        }
        report.findings.extend(schema_refusals(crd, &violations));
    }
    report
}

/// Findings being collected for one CRD, with enforcement applied.
struct Findings<'a> {
    crd: &'a str,
    config: &'a Config,
    findings: Vec<Finding>,
    /// Whether findings are located in the source; not for those that are only subtracted.
    located: bool,
}

impl Findings<'_> {
    fn push(
        &mut self,
        scope: Scope,
        path: Option<SchemaPath>,
        change: Change,
        implied_by_removal: bool,
        location: Option<Location>,
    ) {
        let severity = match self.config.enforcement(change.check()) {
            Enforcement::Error => Severity::Error,
            Enforcement::Warn => Severity::Warning,
            Enforcement::None => return,
        };
        self.findings.push(Finding {
            crd: self.crd.to_string(),
            scope,
            path,
            change,
            severity,
            implied_by_removal,
            location,
        });
    }
}

/// Two versions being compared: where each lives, for locations.
struct VersionPair<'a> {
    old: &'a Crd,
    old_idx: usize,
    new: &'a Crd,
    new_idx: usize,
}

/// Compares two flattened versions node by node, in the old schema's document order.
fn compare_versions(
    pair: &VersionPair<'_>,
    old: &FlatSchema<'_>,
    new: &FlatSchema<'_>,
    scope: Scope,
    out: &mut Findings<'_>,
) {
    let empty = Map::new();
    let mut removed_root: Option<&str> = None;
    for (pointer, old_node) in old.nodes() {
        let path = || SchemaPath::from_pointer(pointer);
        match new.get(pointer) {
            Some(new_node) => {
                for change in checks::compare_nodes(old_node, new_node, out.config) {
                    let location = out
                        .located
                        .then(|| schema_location(pair.new, pair.new_idx, &format!("{pointer}/{}", change.check())))
                        .flatten();
                    out.push(scope.clone(), Some(path()), change, false, location);
                }
            }
            None => {
                // Pre-order traversal: a removed node's descendants follow it directly.
                let implied = removed_root.is_some_and(|root| crdctl_model::yaml::is_within(pointer, root));
                if !implied {
                    removed_root = Some(pointer);
                }
                let location = out.located.then(|| schema_location(pair.old, pair.old_idx, pointer)).flatten();
                out.push(scope.clone(), Some(path()), Change::FieldRemoved, implied, location.clone());
                for change in checks::compare_nodes(old_node, &empty, out.config) {
                    out.push(scope.clone(), Some(path()), change, true, location.clone());
                }
            }
        }
    }
}

/// After ratcheting, a finding implied by a removal whose own finding was subtracted (the field
/// was already missing) stands for itself again, so that no blocking finding is hidden.
fn reroot_removals(findings: &mut [Finding]) {
    let mut removals: Vec<(Scope, SchemaPath)> = Vec::new();
    for finding in findings.iter_mut() {
        let path = finding.path.clone().unwrap_or_default();
        let is_removal = finding.change == Change::FieldRemoved;
        let covered = removals.iter().any(|(scope, root)| {
            *scope == finding.scope && path.0.starts_with(&root.0) && (!is_removal || root.0.len() < path.0.len())
        });
        if finding.implied_by_removal && !covered {
            finding.implied_by_removal = false;
        }
        if is_removal {
            removals.push((finding.scope.clone(), path));
        }
    }
}

/// A version of one CRD: its index in `spec.versions` and its name.
type VersionRef<'a> = (usize, &'a str);

/// Pairs of served versions, older (lower priority) first, in priority order.
fn served_pairs(crd: &Crd) -> Vec<(VersionRef<'_>, VersionRef<'_>)> {
    let mut served: Vec<(usize, &str)> = crd
        .definition
        .spec
        .versions
        .iter()
        .enumerate()
        .filter(|(_, v)| v.served)
        .map(|(idx, v)| (idx, v.name.as_str()))
        .collect();
    // Lowest priority first: each pair is (older, newer).
    crdctl_model::version::sort_by_priority_of(&mut served, |(_, name)| name);
    served.reverse();
    let mut pairs = Vec::new();
    for (i, &older) in served.iter().enumerate() {
        for &newer in served.iter().skip(i + 1) {
            pairs.push((older, newer));
        }
    }
    pairs
}

/// Findings between two served versions of one CRD.
fn pair_findings(
    crd: &Crd,
    schemas: &Schemas<'_>,
    older: (usize, &str),
    newer: (usize, &str),
    config: &Config,
    located: bool,
) -> Vec<Finding> {
    let mut out = Findings { crd: crd.name(), config, findings: Vec::new(), located };
    let pair = VersionPair { old: crd, old_idx: older.0, new: crd, new_idx: newer.0 };
    let scope = Scope::ServedPair(older.1.to_string(), newer.1.to_string());
    if let (Some(old_schema), Some(new_schema)) = (schemas.get(older.0), schemas.get(newer.0)) {
        compare_versions(&pair, old_schema, new_schema, scope, &mut out);
    }
    out.findings
}

/// Each version's schema of one CRD, flattened once, indexed like `spec.versions`.
type Schemas<'a> = Vec<FlatSchema<'a>>;

fn flatten_versions(crd: &Crd) -> Schemas<'_> {
    (0..crd.definition.spec.versions.len()).map(|idx| FlatSchema::new(crd.schema(idx))).collect()
}

fn locate(crd: &Crd, pointer: &str) -> Option<Location> {
    crd.position(pointer).map(|p| Location { file: crd.origin.file.to_string(), line: p.line, column: p.column })
}

fn schema_location(crd: &Crd, version_idx: usize, schema_pointer: &str) -> Option<Location> {
    locate(crd, &format!("/spec/versions/{version_idx}/schema/openAPIV3Schema{schema_pointer}"))
}

fn stored_version_location(old: &Crd, version: &str) -> Option<Location> {
    match old.definition.status.stored_versions.iter().position(|v| v == version) {
        Some(idx) => locate(old, &format!("/status/storedVersions/{idx}")),
        None => {
            let idx = old.definition.spec.versions.iter().position(|v| v.name == version)?;
            locate(old, &format!("/spec/versions/{idx}"))
        }
    }
}

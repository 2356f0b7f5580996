//! The upgrade gate on CRD updates: OLM v1's preflight (`--crd-upgrade-safety Strict`), and
//! the stored objects judged against the new CRD as `crdctl check --live` judges them
//! ([`crdctl_safety::data`]). A refusal says how many stored objects each finding affects; an
//! update that goes through — under `Strict` because the static rules pass, or under `None` —
//! answers with a `Warning` for each problem the stored objects would meet.

use crdctl_conversion::{ConversionError, Converter, Shape};
use crdctl_model::field::Path;
use crdctl_model::load::Crd;
use crdctl_safety::data::{self, Conversion, DataFinding, StoredObject};
use crdctl_safety::{Config, Severity, dialect};
use crdctl_storage::{ListOptions, Store};
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::{Registry, ServedCrd};

/// What `--crd-upgrade-safety` asks for on CRD updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpgradeSafety {
    /// Refuse updates OLM v1's preflight refuses.
    #[default]
    Strict,
    /// Behave like plain Kubernetes.
    None,
}

/// Stored objects judged at once: the store is read a page at a time, never all held.
const PAGE: usize = 500;

/// How the objects are converted to the new CRD's versions: locally (`None`), through its
/// webhook (checked as the API server checks an answer), or not at all (why).
pub enum Converting {
    /// `None`, or a webhook that cannot be called.
    Local(Conversion),
    /// The new CRD's webhook.
    Webhook(Converter),
}

impl Converting {
    /// The converter for the new CRD (`converter`, as [`Converter::for_crd`] builds it); a
    /// webhook it cannot build converts nothing, and says why.
    pub fn new(converter: Result<Converter, ConversionError>) -> Converting {
        match converter {
            Ok(Converter::None) => Converting::Local(Conversion::None),
            Ok(webhook) => Converting::Webhook(webhook),
            Err(err) => Converting::Local(Conversion::Unavailable(err.to_string())),
        }
    }
}

impl data::Convert for Converting {
    async fn convert(&mut self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>, String> {
        match self {
            Converting::Local(local) => local.convert(objects, api_version).await,
            Converting::Webhook(converter) => {
                converter.convert(objects, api_version, Shape::List).await.map_err(|err| err.to_string())
            }
        }
    }

    fn lossless(&self) -> bool {
        matches!(self, Converting::Local(_))
    }

    fn sets_api_version_only(&self) -> bool {
        matches!(self, Converting::Local(local) if local.sets_api_version_only())
    }
}

/// Judges the objects `served` (the installed CRD) stores against `new`, a page at a time;
/// the findings and how many objects were judged.
pub async fn judge_stored(
    store: &dyn Store,
    served: &ServedCrd,
    new: &Crd,
    converting: &mut Converting,
) -> Result<(Vec<DataFinding>, usize), ApiError> {
    let prefix = served.prefix(None);
    let judge = data::Judge::new(new, Some(&served.crd));
    let (mut findings, mut judged) = (Vec::new(), 0);
    let mut after: Option<String> = None;
    loop {
        let options = ListOptions { prefix: &prefix, start_after: after.as_deref(), limit: PAGE, ..Default::default() };
        let page = store.list(options).await.map_err(|err| ApiError::unavailable(err.to_string()))?;
        after = page.entries.last().map(|entry| entry.key.clone());
        let mut objects = page
            .entries
            .iter()
            .map(|entry| Ok(StoredObject { value: crate::object::decode_entry(entry)?, location: None }))
            .collect::<Result<Vec<_>, ApiError>>()?;
        let (found, count) = judge.judge(&mut objects, converting).await;
        findings.extend(found);
        judged += count;
        if !page.more {
            return Ok((findings, judged));
        }
    }
}

/// Runs the gate on an update of the CRD `old` to `new`; the warnings of an update that goes
/// through, or the refusal.
pub async fn gate(
    store: &dyn Store,
    registry: &Registry,
    safety: UpgradeSafety,
    old: &Crd,
    new: &Crd,
) -> Result<Vec<String>, ApiError> {
    let report = match safety {
        UpgradeSafety::Strict => crdctl_safety::check(old, new, &Config::default()),
        UpgradeSafety::None => crdctl_safety::Report::default(),
    };
    let (findings, judged) = match registry.get(old.name()) {
        Some(served) => {
            let mut converting = Converting::new(registry.converter_for(&new.definition));
            judge_stored(store, &served, new, &mut converting).await?
        }
        None => (Vec::new(), 0),
    };
    let joined = data::join(&report, &findings, [(new.name().to_string(), judged)].into());
    let refusals = dialect::data::counted_lines(&report, &joined, Severity::Error);
    if !refusals.is_empty() {
        let spec = Path::new("spec");
        let causes: Vec<_> =
            refusals.into_iter().map(|line| spec.forbidden(format!("CRD upgrade safety: {line}"))).collect();
        return Err(ApiError::invalid(crdctl_model::crd::GROUP, crdctl_model::crd::KIND, new.name(), &causes));
    }
    Ok(dialect::data::warnings(&new.definition.spec.names.kind, &findings))
}

//! Message dialects: the same findings written the way each OLM generation writes them.
//!
//! - [`Dialect::Olm`] (the default) is the format of the OLM v1 documentation: one line per
//!   finding, `validating upgrade for CRD "<name>" failed: CustomResourceDefinition <name> failed
//!   upgrade safety validation. "<Validation>" validation failed: <detail>`, with `[*]` for array
//!   items. A removed field is one finding; what follows from its removal is not repeated.
//! - [`Dialect::Crdify`] is what OLM prints today (crdify engine): one block per CRD,
//!   `validating upgrade for CRD "<name>": ` then `<version>: <path>: <check>: <message>` lines.
//!
//! Every message text lives in this module and its two submodules, nowhere else.

mod crdify;
pub mod data;
pub mod go;
mod olm;

use crate::finding::{Change, Finding, Note, Report, Severity};

/// How findings are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The OLM v1 documentation's format (one line per finding).
    #[default]
    Olm,
    /// Today's OLM preflight text (crdify engine).
    Crdify,
}

/// The text for one finding, without the CRD prefix; `None` when the dialect folds the finding
/// into another one.
pub fn message(finding: &Finding, dialect: Dialect) -> Option<String> {
    if let Change::ApiServerRefusal { field, message } = &finding.change {
        return Some(format!("{field}: {message}"));
    }
    match dialect {
        Dialect::Olm => olm::message(finding),
        Dialect::Crdify => crdify::message(finding),
    }
}

/// The text of a note (the same in both dialects: neither OLM nor crdify has these).
pub fn note(note: &Note) -> String {
    match note {
        Note::StoredVersionsUnknown { crd, version } => format!(
            "{crd}: version {version} was removed, and the installed CRD's status.storedVersions is unknown: objects may still be stored in {version}; pass --stored-versions to check"
        ),
        Note::CrdDropped { crd } => {
            format!("{crd}: not in the new set of CRDs; deleting a CRD deletes all of its objects")
        }
    }
}

/// The report as the dialect prints it, for findings of the given severity; one string per
/// line, in report order.
pub fn lines(report: &Report, dialect: Dialect, severity: Severity) -> Vec<String> {
    let findings: Vec<&Finding> = report.findings.iter().filter(|f| f.severity == severity).collect();
    // The API server's refusals read as the API server writes them, in either dialect.
    let (refusals, findings): (Vec<&Finding>, Vec<&Finding>) =
        findings.into_iter().partition(|f| matches!(f.change, Change::ApiServerRefusal { .. }));
    let refused = refusals.into_iter().filter_map(|finding| refusal_line(finding, dialect));
    refused.chain(lines_of(findings, dialect)).collect()
}

/// One finding's line in the OLM documentation's format, the API server's refusals as it
/// writes them.
pub fn olm_line(finding: &Finding) -> Option<String> {
    match finding.change {
        Change::ApiServerRefusal { .. } => refusal_line(finding, Dialect::Olm),
        _ => olm::line(finding),
    }
}

fn refusal_line(finding: &Finding, dialect: Dialect) -> Option<String> {
    let detail = message(finding, dialect)?;
    Some(format!("CustomResourceDefinition.apiextensions.k8s.io {:?} is invalid: {detail}", finding.crd))
}

fn lines_of(findings: Vec<&Finding>, dialect: Dialect) -> Vec<String> {
    match dialect {
        Dialect::Olm => findings.into_iter().filter_map(olm::line).collect(),
        Dialect::Crdify => crdify::lines(&findings),
    }
}

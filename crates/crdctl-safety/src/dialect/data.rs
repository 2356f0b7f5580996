//! The texts of data-aware findings ([`crate::data`]): the same in both dialects, since neither
//! OLM nor crdify judges stored objects.

use crate::data::{DataFinding, Joined, Problem};
use crate::dialect::{Dialect, message};
use crate::finding::Report;

/// How many objects a listing names before it says how many more there are.
const NAMED: usize = 5;

/// One data finding: the object, where it was read, the version, and what happens.
pub fn line(finding: &DataFinding) -> String {
    let place = finding.location.as_ref().map(|l| format!(" ({}:{})", l.file, l.line)).unwrap_or_default();
    let at = finding.version.as_ref().map(|v| format!(" at {v}")).unwrap_or_default();
    let what = match &finding.problem {
        Problem::UnlistedVersion(version) => {
            format!("stored as {version}, which the new CRD no longer lists: it cannot be read after the upgrade")
        }
        Problem::Pruned(path) => format!("{path}: set here, unknown to the new schema: the next write drops it"),
        Problem::Invalid { message, ratcheted: true } => {
            format!("{message} (ratcheting lets updates that leave it unchanged through; a create or a change fails)")
        }
        Problem::Invalid { message, ratcheted: false } => message.clone(),
        Problem::NotJudged(why) => format!("not judged: {why}"),
        Problem::Lossy(stored) => format!(
            "{}: differs after converting to {} and back to {stored}: the conversion loses data",
            finding.pointer,
            finding.version.as_deref().unwrap_or_default()
        ),
    };
    format!("{}: {}{place}{at}: {what}", finding.crd, finding.object)
}

/// `— 3 of 1,204 objects use it: default/a, …` or `— no stored object uses it`.
pub fn affected(objects: &[String], judged: usize) -> String {
    if objects.is_empty() {
        return "— no stored object uses it".into();
    }
    let mut named = objects.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if objects.len() > NAMED {
        named.push_str(&format!(", and {} more", thousands(objects.len() - NAMED)));
    }
    format!("— {} of {} objects use it: {named}", thousands(objects.len()), thousands(judged))
}

/// The data-aware part of a report: each static finding with a schema path and the stored
/// objects it affects, then the data findings no static finding names.
pub fn lines(report: &Report, data: &[DataFinding], joined: &Joined, dialect: Dialect) -> Vec<String> {
    let mut lines: Vec<String> = joined
        .judged
        .iter()
        .map(|(crd, judged)| {
            let objects = if *judged == 1 { "object" } else { "objects" };
            format!("{crd}: {} stored {objects} judged against the new CRD", thousands(*judged))
        })
        .collect();
    for (index, objects) in &joined.affected {
        let Some(finding) = report.findings.get(*index) else { continue };
        let Some(text) = message(finding, dialect) else { continue };
        let judged = joined.judged.get(&finding.crd).copied().unwrap_or(0);
        lines.push(format!("{}: {text} {}", finding.crd, affected(objects, judged)));
    }
    lines.extend(joined.unmatched.iter().filter_map(|at| data.get(*at)).map(line));
    lines
}

/// `1,204`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_people_write_them() {
        assert_eq!(thousands(1204), "1,204");
        assert_eq!(thousands(12), "12");
        let objects: Vec<String> = (0..7).map(|n| format!("default/c{n}")).collect();
        assert_eq!(
            affected(&objects, 1204),
            "— 7 of 1,204 objects use it: default/c0, default/c1, default/c2, default/c3, default/c4, and 2 more"
        );
        assert_eq!(affected(&[], 10), "— no stored object uses it");
    }
}

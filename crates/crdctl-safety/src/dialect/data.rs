//! The texts of data-aware findings ([`crate::data`]): the same in both dialects, since neither
//! OLM nor crdify judges stored objects.

use std::collections::BTreeMap;

use crate::data::{DataFinding, Joined, Problem};
use crate::dialect::{Dialect, message, olm_line};
use crate::finding::{Change, Finding, Report, Severity};

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

/// The static findings of `severity`, one line each as [`Dialect::Olm`] writes them (the API
/// server's refusals first), each with a schema path followed by how many stored objects it
/// affects: what the API server's `--crd-upgrade-safety Strict` refusal says.
pub fn counted_lines(report: &Report, joined: &Joined, severity: Severity) -> Vec<String> {
    let mut findings: Vec<(usize, &Finding)> =
        report.findings.iter().enumerate().filter(|(_, f)| f.severity == severity).collect();
    findings.sort_by_key(|(_, f)| !matches!(f.change, Change::ApiServerRefusal { .. }));
    findings
        .into_iter()
        .filter_map(|(at, finding)| {
            let line = olm_line(finding)?;
            Some(match joined.affected.get(&at) {
                Some(objects) => {
                    let judged = joined.judged.get(&finding.crd).copied().unwrap_or(0);
                    format!("{line} {}", affected(objects, judged))
                }
                None => line,
            })
        })
        .collect()
}

/// What a CRD update does to the stored objects of `kind`, as the API server's `Warning`
/// headers say it: one line per distinct problem, with how many objects have it and which
/// (`CRD upgrade: 2 stored CronTabs fail the new schema: … (default/a, default/b)`).
pub fn warnings(kind: &str, data: &[DataFinding]) -> Vec<String> {
    // Problems in the order first met, each with its objects once.
    let mut problems: BTreeMap<String, (usize, Vec<&str>)> = BTreeMap::new();
    for finding in data {
        let first = problems.len();
        let (_, objects) = problems.entry(problem(finding)).or_insert_with(|| (first, Vec::new()));
        if !objects.contains(&finding.object.as_str()) {
            objects.push(&finding.object);
        }
    }
    let mut problems: Vec<(String, (usize, Vec<&str>))> = problems.into_iter().collect();
    problems.sort_by_key(|(_, (first, _))| *first);
    problems
        .into_iter()
        .map(|(what, (_, objects))| {
            let mut named = objects.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ");
            if objects.len() > NAMED {
                named.push_str(&format!(", and {} more", thousands(objects.len() - NAMED)));
            }
            let one = objects.len() == 1;
            let kinds = if one { kind.to_string() } else { plural(kind) };
            let what = what.replace("{s}", if one { "s" } else { "" }).replace("{are}", if one { "is" } else { "are" });
            format!("CRD upgrade: {} stored {kinds} {what} ({named})", thousands(objects.len()))
        })
        .collect()
}

/// A data finding's problem without its object, in [`warnings`]' words; `{s}` and `{are}`
/// agree with the count.
fn problem(finding: &DataFinding) -> String {
    let version = finding.version.as_deref().unwrap_or_default();
    match &finding.problem {
        Problem::UnlistedVersion(stored) => {
            format!("{{are}} stored as {stored}, which the new CRD no longer lists: unreadable after the upgrade")
        }
        Problem::Pruned(path) => format!("set{{s}} {path}, unknown to the new schema: the next write drops it"),
        Problem::Invalid { message, ratcheted: true } => {
            format!("fail{{s}} the new schema at {version}: {message} (updates that leave it unchanged pass)")
        }
        Problem::Invalid { message, ratcheted: false } => format!("fail{{s}} the new schema at {version}: {message}"),
        Problem::NotJudged(why) => format!("{{are}} not judged at {version}: {why}"),
        Problem::Lossy(stored) => {
            format!("lose{{s}} {} converting to {version} and back to {stored}", finding.pointer)
        }
    }
}

/// `CronTabs`, `Policies`, `Classes`: a kind's English plural.
fn plural(kind: &str) -> String {
    let mut letters = kind.chars().rev();
    let (last, before) = (letters.next(), letters.next());
    let vowel = |c: Option<char>| c.is_some_and(|c| "aeiouAEIOU".contains(c));
    match kind.strip_suffix('y') {
        Some(stem) if !vowel(before) => format!("{stem}ies"),
        _ if matches!(last, Some('s' | 'x' | 'z')) || kind.ends_with("ch") || kind.ends_with("sh") => {
            format!("{kind}es")
        }
        _ => format!("{kind}s"),
    }
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
        assert_eq!(
            [plural("CronTab"), plural("Policy"), plural("Gateway"), plural("IngressClass")],
            ["CronTabs", "Policies", "Gateways", "IngressClasses"]
        );
    }

    #[test]
    fn warnings_group_objects_by_problem_and_agree_with_the_count() {
        let invalid = |object: &str| DataFinding {
            crd: "crontabs.example.com".into(),
            object: object.into(),
            location: None,
            version: Some("v1".into()),
            pointer: "/spec".into(),
            problem: Problem::Invalid {
                message: "spec: Invalid value: \"object\": replicas must be at most 10".into(),
                ratcheted: false,
            },
        };
        let pruned = DataFinding { problem: Problem::Pruned("spec.color".into()), ..invalid("default/c") };
        assert_eq!(
            warnings("CronTab", &[invalid("default/a"), invalid("default/b"), pruned]),
            [
                "CRD upgrade: 2 stored CronTabs fail the new schema at v1: spec: Invalid value: \"object\": replicas must be at most 10 (default/a, default/b)",
                "CRD upgrade: 1 stored CronTab sets spec.color, unknown to the new schema: the next write drops it (default/c)",
            ]
        );
    }
}

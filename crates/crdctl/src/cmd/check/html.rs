//! `crdctl check --output html`: the check as one page a reviewer opens offline. Styles and
//! script are inline and nothing is fetched. The page holds the verdict and counts (by severity,
//! by version), each CRD's version table, then every finding beside a side-by-side diff of the
//! two sides' source at its schema path (the lines that differ marked, the finding's own line
//! highlighted), with the stored objects it affects when `--objects`/`--live` judged some.
//! Filters by version and severity run in the page; printing shows every finding.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write;

use crdctl_model::load::Crd;
use crdctl_safety::{Dialect, Finding, Report, Scope, Severity, dialect};
use similar::{DiffOp, DiffTag, TextDiff};

/// What the page shows.
pub struct Page<'a> {
    pub report: &'a Report,
    pub dialect: Dialect,
    pub old: &'a [Crd],
    pub new: &'a [Crd],
    /// With stored objects judged: the objects each finding (by index) affects.
    pub affected: Option<&'a BTreeMap<usize, Vec<String>>>,
    /// With stored objects judged: what they show, a line each.
    pub data_lines: &'a [String],
}

/// The most source lines of a side a diff compares.
const MAX_BLOCK_LINES: usize = 5_000;
/// Unchanged lines shown around each change.
const CONTEXT_LINES: usize = 3;

/// Writes the page.
pub fn write(out: &mut dyn Write, page: &Page<'_>) -> std::io::Result<()> {
    let findings: Vec<(usize, &Finding, String)> = super::visible(page.report, page.dialect).collect();
    let errors = findings.iter().filter(|(_, f, _)| f.severity == Severity::Error).count();
    let warnings = findings.len() - errors;
    let verdict = match (errors, warnings) {
        (0, 0) => "passed",
        (0, _) => "passed with warnings",
        _ => "blocked",
    };
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>CRD upgrade safety: {verdict}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <header><h1>CRD upgrade safety: <span id=\"verdict\" class=\"{}\">{verdict}</span></h1>\n",
        if errors > 0 { "error" } else { "passed" }
    );
    summary(&mut html, page, &findings, errors, warnings);
    html.push_str("</header>\n<main>\n");
    for crd in page.new {
        versions_table(&mut html, crd, page.old.iter().find(|old| old.name() == crd.name()));
    }
    html.push_str("<h2>Findings</h2>\n");
    for (index, finding, message) in &findings {
        finding_section(&mut html, page, *index, finding, message);
    }
    if findings.is_empty() {
        html.push_str("<p class=\"none\">No finding: every upgrade is safe.</p>\n");
    }
    for note in &page.report.notes {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&dialect::note(note)));
    }
    if !page.data_lines.is_empty() {
        html.push_str("<h2>Stored objects</h2>\n<ul id=\"stored\">\n");
        for line in page.data_lines {
            let _ = writeln!(html, "<li>{}</li>", escape(line));
        }
        html.push_str("</ul>\n");
    }
    let _ = write!(html, "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out.write_all(html.as_bytes())
}

/// The counts and the filters.
fn summary(html: &mut String, page: &Page<'_>, findings: &[(usize, &Finding, String)], errors: usize, warnings: usize) {
    let _ = writeln!(
        html,
        "<p class=\"counts\"><span class=\"error\">{errors} error{}</span> · <span class=\"warning\">{warnings} warning{}</span> · {} CRD{} checked</p>",
        plural(errors),
        plural(warnings),
        page.new.len(),
        plural(page.new.len())
    );
    let mut by_version: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (_, finding, _) in findings {
        for version in versions_of(finding) {
            let counts = by_version.entry(version).or_default();
            match finding.severity {
                Severity::Error => counts.0 += 1,
                Severity::Warning => counts.1 += 1,
            }
        }
    }
    if !by_version.is_empty() {
        html.push_str("<table class=\"by-version\"><thead><tr><th>version</th><th>errors</th><th>warnings</th></tr></thead><tbody>\n");
        for (version, (errors, warnings)) in &by_version {
            let _ = writeln!(html, "<tr><td>{}</td><td>{errors}</td><td>{warnings}</td></tr>", escape(version));
        }
        html.push_str("</tbody></table>\n");
    }
    let versions: BTreeSet<&str> =
        page.new.iter().flat_map(|crd| crd.definition.spec.versions.iter()).map(|v| v.name.as_str()).collect();
    html.push_str("<form id=\"filters\"><label>Version <select id=\"version\"><option value=\"\">all</option>");
    for version in versions {
        let _ = write!(html, "<option>{}</option>", escape(version));
    }
    let _ = writeln!(
        html,
        "</select></label> <label><input type=\"checkbox\" name=\"severity\" value=\"error\" checked> errors</label> \
         <label><input type=\"checkbox\" name=\"severity\" value=\"warning\" checked> warnings</label> \
         <output id=\"shown\">{}</output> shown</form>",
        findings.len()
    );
}

/// One CRD's versions, before and after.
fn versions_table(html: &mut String, new: &Crd, old: Option<&Crd>) {
    let _ = writeln!(
        html,
        "<h2>{}</h2>\n<table class=\"versions\"><thead><tr><th>version</th><th>served</th><th>storage</th><th>deprecated</th><th>in storedVersions</th></tr></thead><tbody>",
        escape(new.name())
    );
    let mut names: Vec<&str> =
        old.into_iter().flat_map(|o| o.definition.spec.versions.iter()).map(|v| v.name.as_str()).collect();
    for version in &new.definition.spec.versions {
        if !names.contains(&version.name.as_str()) {
            names.push(&version.name);
        }
    }
    let stored = old.map(|o| o.definition.status.stored_versions.as_slice());
    for name in names {
        let before = old.and_then(|o| o.definition.spec.versions.iter().find(|v| v.name == name));
        let after = new.definition.spec.versions.iter().find(|v| v.name == name);
        let cell = |pick: fn(&crdctl_model::crd::Version) -> bool| {
            let word = |v: Option<&crdctl_model::crd::Version>| match v {
                Some(v) if pick(v) => "yes",
                Some(_) => "no",
                None => "—",
            };
            let (was, is) = (word(before), word(after));
            if was == is { is.to_string() } else { format!("<del>{was}</del> → <ins>{is}</ins>") }
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(name),
            cell(|v| v.served),
            cell(|v| v.storage),
            cell(|v| v.deprecated),
            match stored {
                None => "—",
                Some([]) => "unknown",
                Some(stored) if stored.iter().any(|s| s == name) => "yes",
                Some(_) => "no",
            }
        );
    }
    html.push_str("</tbody></table>\n");
}

/// One finding: what it says, where, and the two sides at its path.
fn finding_section(html: &mut String, page: &Page<'_>, index: usize, finding: &Finding, message: &str) {
    let severity = super::severity_name(finding.severity);
    let versions = versions_of(finding).join(" ");
    let _ = writeln!(
        html,
        "<section class=\"finding\" data-severity=\"{severity}\" data-versions=\"{}\">\n\
         <h3><span class=\"mark {severity}\">{severity}</span> <code>{}</code> {}</h3>\n<p class=\"message\">{}</p>",
        escape(&versions),
        escape(&finding.crd),
        escape(finding.change.validation(&finding.scope)),
        escape(message)
    );
    if let Some(location) = &finding.location {
        let _ = writeln!(html, "<p class=\"where\">{}:{}</p>", escape(&location.file), location.line);
    }
    if let Some((before, after)) = sides(page, finding) {
        diff_table(html, &before, &after, finding.location.as_ref());
    }
    if let Some(objects) = page.affected.and_then(|affected| affected.get(&index)) {
        html.push_str("<details class=\"objects\"><summary>");
        let _ = write!(html, "{} stored object{} affected</summary><ul>", objects.len(), plural(objects.len()));
        for object in objects {
            let _ = write!(html, "<li>{}</li>", escape(object));
        }
        html.push_str("</ul></details>\n");
    }
    html.push_str("</section>\n");
}

/// The versions a finding is about; none for one about the whole CRD.
fn versions_of(finding: &Finding) -> Vec<&str> {
    match &finding.scope {
        Scope::Crd => Vec::new(),
        Scope::Version(version) => vec![version.as_str()],
        Scope::ServedPair(older, newer) => vec![older.as_str(), newer.as_str()],
    }
}

/// Source lines of one side: the file, and each line with its 1-based number.
struct Side<'a> {
    file: &'a str,
    lines: Vec<(u32, &'a str)>,
}

/// The two sides of a schema finding: the installed CRD's version against the new one's, or
/// for a served pair the older version against the newer, both in the new CRD.
fn sides<'a>(page: &Page<'a>, finding: &Finding) -> Option<(Side<'a>, Side<'a>)> {
    let pointer = finding.path.as_ref()?.pointer();
    let new = page.new.iter().find(|crd| crd.name() == finding.crd)?;
    let (before, after) = match &finding.scope {
        Scope::Version(version) => {
            let old = page.old.iter().find(|crd| crd.name() == finding.crd)?;
            (schema_block(old, version, &pointer)?, schema_block(new, version, &pointer)?)
        }
        Scope::ServedPair(older, newer) => (schema_block(new, older, &pointer)?, schema_block(new, newer, &pointer)?),
        Scope::Crd => return None,
    };
    Some((before, after))
}

/// The source of the schema node at `pointer` in `version` of `crd` (or of its nearest written
/// ancestor, where the node is not there): its first line and the lines indented under it.
fn schema_block<'a>(crd: &'a Crd, version: &str, pointer: &str) -> Option<Side<'a>> {
    let index = crd.definition.spec.versions.iter().position(|v| v.name == version)?;
    let position = crd.position(&format!("/spec/versions/{index}/schema/openAPIV3Schema{pointer}"))?;
    let first = usize::try_from(position.line).ok()?.checked_sub(1)?;
    let mut lines = crd.text.lines().skip(first);
    let head = lines.next()?;
    let depth = indentation(head);
    let under = lines.take_while(|line| line.trim().is_empty() || indentation(line) > depth);
    let mut block: Vec<&str> = std::iter::once(head).chain(under).take(MAX_BLOCK_LINES).collect();
    while block.last().is_some_and(|line| line.trim().is_empty()) {
        block.pop();
    }
    Some(Side { file: &crd.origin.file, lines: (position.line..).zip(block).collect() })
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The two sides next to each other, line by line; lines compared without their block's
/// indentation, so a node that moved deeper still matches.
fn diff_table(html: &mut String, before: &Side<'_>, after: &Side<'_>, at: Option<&crdctl_safety::Location>) {
    let dedent = |side: &Side<'_>| -> Vec<String> {
        let depth = side.lines.first().map_or(0, |(_, line)| indentation(line));
        side.lines
            .iter()
            .map(|(_, line)| line.get(depth.min(indentation(line))..).unwrap_or(line).to_string())
            .collect()
    };
    let (old_text, new_text) = (dedent(before), dedent(after));
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (old_text.iter().map(String::as_str).collect(), new_text.iter().map(String::as_str).collect());
    let diff = TextDiff::from_slices(&old_lines, &new_lines);
    let _ = writeln!(
        html,
        "<div class=\"scroll\"><table class=\"diff\"><thead><tr><th colspan=\"2\">{}</th><th colspan=\"2\">{}</th></tr></thead><tbody>",
        escape(before.file),
        escape(after.file)
    );
    let groups = diff.grouped_ops(CONTEXT_LINES);
    // The change at the finding's own line, where one holds it; else every change under the path.
    let (holding, others): (Vec<&Vec<DiffOp>>, Vec<&Vec<DiffOp>>) =
        groups.iter().partition(|ops| at.is_some_and(|at| holds(ops, before, after, at)));
    let (shown, left_out) = if holding.is_empty() { (others, 0) } else { (holding, others.len()) };
    for (group, ops) in shown.iter().enumerate() {
        if group > 0 {
            html.push_str("<tr class=\"gap\"><td colspan=\"4\">⋯</td></tr>\n");
        }
        rows(html, ops, before, after, &old_text, &new_text, at);
    }
    if left_out > 0 {
        let _ = writeln!(
            html,
            "<tr class=\"gap\"><td colspan=\"4\">{left_out} other change{} under this path</td></tr>",
            plural(left_out)
        );
    }
    html.push_str("</tbody></table></div>\n");
}

/// Whether a group of changes shows the line `at` points to.
fn holds(ops: &[DiffOp], before: &Side<'_>, after: &Side<'_>, at: &crdctl_safety::Location) -> bool {
    ops.iter().any(|op| {
        let (_, old_range, new_range) = op.as_tag_tuple();
        [(before, old_range), (after, new_range)].into_iter().any(|(side, range)| {
            side.file == at.file && side.lines.get(range).is_some_and(|lines| lines.iter().any(|(n, _)| *n == at.line))
        })
    })
}

/// The rows of one group of changes: each side's lines next to each other.
fn rows(
    html: &mut String,
    ops: &[DiffOp],
    before: &Side<'_>,
    after: &Side<'_>,
    old_text: &[String],
    new_text: &[String],
    at: Option<&crdctl_safety::Location>,
) {
    let cell =
        |html: &mut String, side: &Side<'_>, text: &[String], at_index: Option<usize>, class: &str| match at_index
            .and_then(|i| side.lines.get(i).zip(text.get(i)))
        {
            Some(((number, _), line)) => {
                let here = at.is_some_and(|l| l.file == side.file && l.line == *number);
                let class = if here { format!("{class} at") } else { class.to_string() };
                let _ = write!(html, "<td class=\"n\">{number}</td><td class=\"{class}\">{}</td>", escape(line));
            }
            None => html.push_str("<td class=\"n\"></td><td class=\"empty\"></td>"),
        };
    for op in ops {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        let (old_class, new_class) = if tag == DiffTag::Equal { ("eq", "eq") } else { ("del", "ins") };
        for row in 0..old_range.len().max(new_range.len()) {
            html.push_str("<tr>");
            cell(html, before, old_text, (row < old_range.len()).then(|| old_range.start + row), old_class);
            cell(html, after, new_text, (row < new_range.len()).then(|| new_range.start + row), new_class);
            html.push_str("</tr>\n");
        }
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Text made safe for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root { --bg: #fff; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --error: #cf222e; --warning: #9a6700;
  --del: #ffebe9; --ins: #dafbe1; --at: #fff8c5; --code: #f6f8fa; color-scheme: light dark; }
@media (prefers-color-scheme: dark) { :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #3d444d;
  --error: #ff7b72; --warning: #d29922; --del: #4b1d1f; --ins: #1b4721; --at: #4d3d00; --code: #151b23; } }
body { background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; } h2 { border-bottom: 1px solid var(--line); margin-top: 2rem; }
.error { color: var(--error); } .warning { color: var(--warning); } #verdict.passed { color: #1a7f37; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { border: 1px solid var(--line); padding: .2rem .6rem; text-align: left; }
del { color: var(--error); } ins { color: #1a7f37; text-decoration: none; }
#filters { background: var(--code); border: 1px solid var(--line); border-radius: 6px; padding: .5rem 1rem; }
.finding { border: 1px solid var(--line); border-left: 4px solid var(--warning); border-radius: 6px; margin: 1rem 0; padding: .5rem 1rem; }
.finding[data-severity=error] { border-left-color: var(--error); } .finding h3 { font-size: 1rem; margin: .3rem 0; }
.mark { font-size: .75rem; font-weight: 700; text-transform: uppercase; }
.where { color: var(--muted); font-family: ui-monospace, monospace; margin: 0; }
div.scroll { overflow-x: auto; }
table.diff { font: 13px/1.4 ui-monospace, monospace; min-width: 100%; }
table.diff th { font-weight: 400; width: 50%; } table.diff td { border: none; white-space: pre; }
table.diff td.n { color: var(--muted); text-align: right; user-select: none; width: 1%; }
td.del { background: var(--del); } td.ins { background: var(--ins); } td.at { background: var(--at); outline: 2px solid var(--warning); }
td.empty { background: var(--code); } tr.gap td { color: var(--muted); text-align: center; }
@media print { #filters { display: none; } .finding[hidden] { display: block; } details.objects > * { display: block; }
  table.diff td { white-space: pre-wrap; } }
"#;

/// The filters; their state lives in the address (`#version=v1&severity=error`), so a filtered
/// view can be linked to.
const SCRIPT: &str = r#"
const form = document.getElementById('filters');
const boxes = [...form.querySelectorAll('input[name=severity]')];
const load = () => {
  const wanted = new URLSearchParams(location.hash.slice(1));
  document.getElementById('version').value = wanted.get('version') || '';
  const severities = (wanted.get('severity') || 'error,warning').split(',');
  for (const box of boxes) box.checked = severities.includes(box.value);
  apply();
};
const apply = () => {
  const version = document.getElementById('version').value;
  const severities = boxes.filter(box => box.checked).map(box => box.value);
  let shown = 0;
  for (const finding of document.querySelectorAll('.finding')) {
    const versions = finding.dataset.versions.split(' ').filter(Boolean);
    const visible = (version === '' || versions.length === 0 || versions.includes(version))
      && severities.includes(finding.dataset.severity);
    finding.hidden = !visible;
    if (visible) shown++;
  }
  document.getElementById('shown').textContent = shown;
  const state = new URLSearchParams();
  if (version) state.set('version', version);
  if (severities.length < boxes.length) state.set('severity', severities.join(','));
  history.replaceState(null, '', state.size ? '#' + state : location.pathname + location.search);
};
form.addEventListener('change', apply);
window.addEventListener('hashchange', load);
load();
"#;

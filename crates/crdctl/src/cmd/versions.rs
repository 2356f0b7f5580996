//! `crdctl versions`: a CRD's versions in Kubernetes priority order, or `versions sort V...`.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::Outcome;
use crate::output::{self, Format, Report};

/// Show CRD versions in Kubernetes priority order, or sort version strings.
///
/// For each CRD, prints a table of its versions, highest priority first, with served, storage
/// and deprecated columns. The preferred version, the one kubectl uses when none is given, is
/// the highest-priority served version.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sort: Option<SortCommand>,
    /// CRD files or directories, or - for standard input.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, clap::Subcommand)]
enum SortCommand {
    /// Print version strings one per line, highest priority first.
    Sort {
        /// Version strings, e.g. v1 v2beta1 v10.
        #[arg(value_name = "VERSION", required = true)]
        versions: Vec<String>,
    },
}

/// Runs `crdctl versions`.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if let Some(SortCommand::Sort { mut versions }) = args.sort {
        crdctl_model::version::sort_by_priority(&mut versions);
        let mut out = std::io::stdout().lock();
        for version in versions {
            writeln!(out, "{version}")?;
        }
        return Ok(Outcome::Clean);
    }
    let crds = super::load(&args.files)?;
    let report = VersionsReport(crds.iter().map(CrdVersions::from).collect());
    output::print(&report, args.output)?;
    Ok(Outcome::Clean)
}

/// Every CRD's versions; the JSON shape is `[{name, file, preferredVersion, ...}]`.
#[derive(Debug, Serialize)]
struct VersionsReport(Vec<CrdVersions>);

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CrdVersions {
    name: String,
    file: String,
    preferred_version: Option<String>,
    storage_version: Option<String>,
    stored_versions: Vec<String>,
    versions: Vec<VersionRow>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct VersionRow {
    name: String,
    served: bool,
    storage: bool,
    deprecated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    deprecation_warning: Option<String>,
    preferred: bool,
}

impl From<&crdctl_model::Crd> for CrdVersions {
    fn from(crd: &crdctl_model::Crd) -> Self {
        let definition = &crd.definition;
        let preferred = definition.preferred_version().map(|v| v.name.clone());
        let mut versions: Vec<VersionRow> = definition
            .spec
            .versions
            .iter()
            .map(|v| VersionRow {
                name: v.name.clone(),
                served: v.served,
                storage: v.storage,
                deprecated: v.deprecated,
                deprecation_warning: v.deprecation_warning.clone(),
                preferred: preferred.as_deref() == Some(v.name.as_str()),
            })
            .collect();
        crdctl_model::version::sort_by_priority_of(&mut versions, |row| &row.name);
        CrdVersions {
            name: crd.name().to_string(),
            file: crd.origin.file.to_string(),
            preferred_version: preferred,
            storage_version: definition.storage_version().map(|v| v.name.clone()),
            stored_versions: definition.status.stored_versions.clone(),
            versions,
        }
    }
}

impl Report for VersionsReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for (idx, crd) in self.0.iter().enumerate() {
            if idx > 0 {
                writeln!(out)?;
            }
            writeln!(out, "{} ({})", crd.name, crd.file)?;
            let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
            let mut rows = vec![["VERSION", "SERVED", "STORAGE", "DEPRECATED", ""].map(String::from).to_vec()];
            for v in &crd.versions {
                let note = if v.preferred { "preferred (kubectl default)" } else { "" };
                rows.push(vec![
                    v.name.clone(),
                    yes_no(v.served),
                    yes_no(v.storage),
                    yes_no(v.deprecated),
                    note.to_string(),
                ]);
            }
            output::write_table(out, "  ", &rows)?;
            if crd.preferred_version.is_none() {
                writeln!(out, "  no served version: kubectl cannot reach this resource")?;
            }
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for crd in &self.0 {
            writeln!(out, "### `{}`\n", crd.name)?;
            writeln!(out, "| version | served | storage | deprecated | preferred |")?;
            writeln!(out, "|---|---|---|---|---|")?;
            let mark = |b: bool| if b { "✓" } else { "" };
            for v in &crd.versions {
                writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} |",
                    v.name,
                    mark(v.served),
                    mark(v.storage),
                    mark(v.deprecated),
                    mark(v.preferred)
                )?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

//! `crdctl validate`: the API server's create-time checks, one line per problem.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::Outcome;
use crate::output::{self, Format, Report};

/// Check CRDs the way the API server does when they are created.
///
/// Prints one line per problem, `<file>:<line>:<column>: <crd name>: <field path>: <message>`
/// (the form editors and CI annotators jump to), with the API server's field paths and messages, and exits 1 if any CRD is invalid. With --old, NEW is
/// checked as an update of the installed OLD (immutable fields, stored versions).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CRD files or directories, or - for standard input.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Validate as an update of the CRDs in this file (paired by name).
    #[arg(long, value_name = "OLD")]
    old: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// Runs `crdctl validate`.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let crds = super::load(&args.files)?;
    let old = match &args.old {
        Some(path) => super::load(std::slice::from_ref(path))?,
        None => Vec::new(),
    };
    let mut problems = Vec::new();
    for crd in &crds {
        if crd.source_api_version == crdctl_model::SourceApiVersion::V1beta1 {
            output::warning(&format!(
                "{}: {}: apiextensions.k8s.io/v1beta1 is not served since Kubernetes 1.22; `crdctl convert-crd` prints the v1 form",
                crd.origin.file,
                crd.name()
            ));
        }
        let violations = match old.iter().find(|o| o.name() == crd.name()) {
            Some(old) => crdctl_schema::definition::validate_update(crd, old),
            None => crdctl_schema::definition::validate(crd),
        };
        problems.extend(violations.iter().map(|violation| {
            let position = crd.position(&violation.pointer).unwrap_or_default();
            Problem {
                file: crd.origin.file.to_string(),
                line: position.line,
                column: position.column,
                crd: crd.name().to_string(),
                field: violation.field.clone(),
                reason: violation.error_type.reason(),
                message: violation.body(),
            }
        }));
    }
    let report = ValidateReport { valid: problems.is_empty(), crds: crds.len(), problems };
    output::print(&report, args.output)?;
    Ok(if report.valid { Outcome::Clean } else { Outcome::Findings })
}

#[derive(Debug, Serialize)]
struct ValidateReport {
    valid: bool,
    crds: usize,
    problems: Vec<Problem>,
}

#[derive(Debug, Serialize)]
struct Problem {
    file: String,
    line: u32,
    column: u32,
    crd: String,
    field: String,
    reason: &'static str,
    message: String,
}

impl Report for ValidateReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for p in &self.problems {
            let at = if p.line > 0 { format!("{}:{}:{}", p.file, p.line, p.column) } else { p.file.clone() };
            writeln!(out, "{at}: {}: {}: {}", p.crd, p.field, p.message)?;
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if self.valid {
            return writeln!(out, "All {} CRDs are valid.", self.crds);
        }
        writeln!(out, "| file | CRD | field | problem |\n|---|---|---|---|")?;
        for p in &self.problems {
            writeln!(
                out,
                "| `{}:{}` | `{}` | `{}` | {} |",
                p.file,
                p.line,
                p.crd,
                p.field,
                p.message.replace('|', "\\|")
            )?;
        }
        Ok(())
    }
}

//! `crdctl convert-crd`: print CRDs as `apiextensions.k8s.io/v1`.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::Outcome;
use crate::output;

/// Print a CRD as apiextensions.k8s.io/v1 (upgrading v1beta1 files).
///
/// Moves top-level validation, subresources and printer columns into each version, renames
/// JSONPath to jsonPath, moves webhookClientConfig under conversion.webhook, and writes out the
/// v1beta1 defaults that v1 does not share (scope, conversionReviewVersions). What v1 refuses
/// on create (preserveUnknownFields: true, versions without a schema) is replaced, and each such
/// change is reported on standard error.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CRD file or directory, or - for standard input.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = DocumentFormat::Yaml)]
    output: DocumentFormat,
}

/// How manifests are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DocumentFormat {
    /// YAML documents separated by `---`.
    Yaml,
    /// JSON: one object, or a `List` of several.
    Json,
}

/// Runs `crdctl convert-crd`.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let crds = super::load(&args.files)?;
    let mut documents = Vec::with_capacity(crds.len());
    for crd in &crds {
        let mut document = crd.value.clone();
        for change in crdctl_model::normalize::prepare_for_v1_create(&mut document) {
            output::warning(&format!("{}: {}: {change}", crd.origin.file, crd.name()));
        }
        documents.push(document);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        DocumentFormat::Yaml => {
            for (idx, document) in documents.iter().enumerate() {
                if idx > 0 {
                    writeln!(out, "---")?;
                }
                output::write_yaml(&mut out, document)?;
            }
        }
        DocumentFormat::Json => match documents.as_slice() {
            [single] => output::write_json(&mut out, single)?,
            _ => output::write_json(
                &mut out,
                &json!({"apiVersion": "v1", "kind": "List", "items": Value::Array(documents)}),
            )?,
        },
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

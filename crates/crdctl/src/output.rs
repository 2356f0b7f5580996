//! Rendering for people and machines: text, JSON, YAML and Markdown on standard output, and
//! one-line diagnostics prefixed `crdctl:` on standard error.
#![allow(clippy::print_stderr)]

use std::io::Write;

use serde::Serialize;

/// How a report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Plain text for people.
    Text,
    /// JSON for programs.
    Json,
    /// YAML for programs and people.
    Yaml,
    /// Markdown, e.g. for a pull-request comment.
    Markdown,
}

/// A report that can be printed in every [`Format`].
pub trait Report: Serialize {
    /// Writes the report as plain text.
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()>;
    /// Writes the report as Markdown.
    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()>;
}

/// Prints `report` to standard output in `format`.
pub fn print(report: &impl Report, format: Format) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match format {
        Format::Text => report.write_text(&mut out)?,
        Format::Markdown => report.write_markdown(&mut out)?,
        Format::Json => write_json(&mut out, report)?,
        Format::Yaml => write_yaml(&mut out, report)?,
    }
    out.flush()?;
    Ok(())
}

/// Writes pretty JSON and a newline.
pub fn write_json(out: &mut dyn Write, value: &impl Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes one YAML document.
pub fn write_yaml(out: &mut dyn Write, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_saphyr::to_string(value)?;
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

/// Writes rows as a left-aligned table with two spaces between columns.
pub fn write_table(out: &mut dyn Write, indent: &str, rows: &[Vec<String>]) -> std::io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let mut line = indent.to_string();
        for (idx, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if idx + 1 < row.len() {
                line.push_str(&format!("{cell:<width$}  "));
            } else {
                line.push_str(cell);
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Prints an error and its causes on one line: `crdctl: <what>: <why>`. A cause the message
/// before it already ends with is not repeated (library errors both show and chain their
/// source, so that either way of printing them is complete).
pub fn error(err: &anyhow::Error) {
    eprintln!("crdctl: {}", error_line(err));
}

fn error_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain().map(|cause| cause.to_string()) {
        if line.is_empty() {
            line = cause;
        } else if !line.ends_with(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

/// Prints a warning that is not a finding.
pub fn warning(message: &str) {
    eprintln!("crdctl: warning: {message}");
}

/// Prints a line of progress or information on standard error.
pub fn note(message: &str) {
    eprintln!("crdctl: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let load = crdctl_model::LoadError::Io { path: "nonexist.yaml".into(), source: io };
        assert_eq!(error_line(&anyhow::Error::new(load)), "nonexist.yaml: No such file or directory (os error 2)");
        let context = anyhow::Error::msg("disk full").context("cannot write report.json");
        assert_eq!(error_line(&context), "cannot write report.json: disk full");
    }
}

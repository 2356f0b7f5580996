//! `crdctl retire-version`: check, and with `--apply` carry out, the documented procedure for
//! removing an old version of a CRD.

use std::io::Write;
use std::time::Duration;

use crdctl_migrate::retire::{RetireOptions, Retirement, StepState};
use serde::Serialize;

use super::Outcome;
use super::migrate::{Bar, ClusterArgs, MigrationReport, RewriteArgs};
use crate::output::{self, Format, Report};

/// The flags of `crdctl retire-version`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The CustomResourceDefinition, e.g. crontabs.example.com.
    crd: String,
    /// The version to retire, e.g. v1beta1.
    version: String,
    /// Carry the steps out (without it, only check and print them).
    #[arg(long)]
    apply: bool,
    /// Refuse while clients requested the version this recently (from the server's /metrics);
    /// e.g. 10m, 1h, 0s to skip the check.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    unused_for: Duration,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    rewrite: RewriteArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// `90s`, `10m`, `2h`: a number and a unit.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text}: expected a number and s, m or h, e.g. 10m"))?;
    let seconds = match unit {
        "s" | "" => number,
        "m" => number * 60,
        "h" => number * 3600,
        _ => return Err(format!("{text}: the unit must be s, m or h")),
    };
    Ok(Duration::from_secs(seconds))
}

/// Runs the retirement.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let (cluster, server) = args.cluster.connect().await?;
        let options = RetireOptions {
            apply: args.apply,
            unused_for: args.unused_for,
            migrate: args.rewrite.options(server, false),
        };
        let progress = Bar::new(&args.crd);
        let retirement = crdctl_migrate::retire::retire(&cluster, &args.crd, &args.version, &options, &progress).await;
        progress.finish();
        let retirement = retirement?;
        let done = if args.apply { retirement.retired() } else { !retirement.refused() };
        output::print(&RetirementReport { retirement, applied: args.apply }, args.output)?;
        Ok(if done { Outcome::Clean } else { Outcome::Findings })
    })
}

#[derive(Serialize)]
struct RetirementReport {
    #[serde(flatten)]
    retirement: Retirement,
    applied: bool,
}

impl Report for RetirementReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let r = &self.retirement;
        writeln!(out, "Retire {} from {} (storage version {}):", r.version, r.crd, r.storage_version)?;
        if !r.checks.is_empty() {
            writeln!(out, "preconditions:")?;
            for check in &r.checks {
                let mark = if check.ok { "ok" } else { "REFUSED" };
                writeln!(out, "  [{mark}] {}: {}", check.condition, check.detail)?;
            }
        }
        writeln!(out, "steps:")?;
        for (number, step) in r.steps.iter().enumerate() {
            let state = match step.state {
                StepState::Done => "done",
                StepState::Applied => "applied",
                StepState::Pending => "to do",
                StepState::Blocked => "blocked",
            };
            writeln!(out, "  {}. [{state}] {}", number + 1, step.action)?;
        }
        writeln!(
            out,
            "  {}. drop the conversion from and to {} in the conversion webhook, if the CRD has one (your code)",
            r.steps.len() + 1,
            r.version
        )?;
        for warning in &r.warnings {
            writeln!(out, "warning: {warning}")?;
        }
        if let Some(migration) = &r.migration {
            MigrationReport(migration.clone()).write_text(out)?;
        }
        if !self.applied && !r.refused() && !r.retired() {
            writeln!(out, "run again with --apply to carry it out")?;
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "```")?;
        self.write_text(out)?;
        writeln!(out, "```")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").unwrap_err().contains("unit"));
    }
}

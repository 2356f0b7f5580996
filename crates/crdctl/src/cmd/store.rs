//! `crdctl store`: look inside the data directory of `crdctl serve`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use crdctl_server::stats::{StoredVersions, Tally};
use crdctl_storage::{ListOptions, Store as _};
use serde::Serialize;

use super::Outcome;
use crate::output::{self, Format, Report};

/// Subcommands of `crdctl store`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// For each resource, how many objects are stored in each apiVersion (read-only; with the
    /// on-disk store the server must be stopped, with --etcd it may run). The API converts
    /// every read, so only this shows what a storage migration has left to do, or that it is
    /// done.
    Stats(StatsArgs),
}

/// The flags of `crdctl store stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// The data directory of `crdctl serve`.
    #[arg(long, default_value = ".crdctl", conflicts_with = "etcd")]
    data: PathBuf,
    #[command(flatten)]
    etcd: super::etcd::EtcdArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// Runs a `store` subcommand.
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Stats(args) => stats(args),
    }
}

fn stats(args: StatsArgs) -> anyhow::Result<Outcome> {
    let mut tally = Tally::default();
    let revision = if args.etcd.enabled() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            let store = args.etcd.open().await?;
            let page = store.list(ListOptions { prefix: "/registry/", ..Default::default() }).await?;
            page.entries.iter().for_each(|entry| tally.add(&entry.key, &entry.value));
            anyhow::Ok(page.revision)
        })?
    } else {
        let store = crdctl_storage::redb::ReadOnlyStore::open(&args.data).context("cannot read the store")?;
        store.for_each("/registry/", |entry| tally.add(&entry.key, &entry.value))?
    };
    output::print(&StatsReport(tally.finish(revision)), args.output)?;
    Ok(Outcome::Clean)
}

#[derive(Serialize)]
#[serde(transparent)]
struct StatsReport(StoredVersions);

impl StatsReport {
    fn rows(&self) -> Vec<Vec<String>> {
        let mut rows = vec![vec!["RESOURCE".to_string(), "APIVERSION".into(), "OBJECTS".into()]];
        for resource in &self.0.resources {
            for (api_version, count) in &resource.api_versions {
                rows.push(vec![resource.resource.clone(), api_version.clone(), count.to_string()]);
            }
        }
        rows
    }
}

impl Report for StatsReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        output::write_table(out, "", &self.rows())?;
        writeln!(out, "(at revision {})", self.0.revision)
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for (index, row) in self.rows().iter().enumerate() {
            writeln!(out, "| {} |", row.join(" | "))?;
            if index == 0 {
                writeln!(out, "|---|---|---|")?;
            }
        }
        Ok(())
    }
}

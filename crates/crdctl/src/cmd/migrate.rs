//! `crdctl migrate`: rewrite every object of a CRD in its storage version, then trim
//! `status.storedVersions`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crdctl_migrate::{Cluster, Options, Progress, Summary};
use serde::Serialize;

use super::Outcome;
use crate::output::{self, Format, Report};

/// Which cluster to talk to, as kubectl has it.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long)]
    context: Option<String>,
}

impl ClusterArgs {
    /// Connects; also returns the server's URL.
    pub async fn connect(&self) -> anyhow::Result<(Cluster, String)> {
        Ok(Cluster::connect(self.kubeconfig.as_deref(), self.context.as_deref()).await?)
    }
}

/// How objects are rewritten.
#[derive(Debug, clap::Args)]
pub struct RewriteArgs {
    /// Objects rewritten at the same time.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// Objects per list page.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    page_size: u32,
    /// Where the progress record of an unfinished migration is kept
    /// (default: $XDG_STATE_HOME/crdctl/migrations, or ~/.local/state/crdctl/migrations).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Rewrite the objects from here even where the cluster serves StorageVersionMigrations
    /// (by default the server rewrites them, and this command follows it).
    #[arg(long)]
    client_side: bool,
}

impl RewriteArgs {
    /// The migration options for a server.
    pub fn options(&self, server: String, dry_run: bool) -> Options {
        Options {
            concurrency: usize::from(self.concurrency),
            page_size: self.page_size,
            dry_run,
            record_dir: self.state_dir.clone().or_else(crdctl_migrate::record::default_dir),
            server,
            client_side: self.client_side,
        }
    }
}

/// The flags of `crdctl migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The CustomResourceDefinition, e.g. crontabs.example.com.
    crd: String,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    rewrite: RewriteArgs,
    /// Send every update with dryRun=All: check that each object would be accepted, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Output format of the summary.
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// Runs the migration.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let (cluster, server) = args.cluster.connect().await?;
        let options = args.rewrite.options(server, args.dry_run);
        let progress = Bar::new(&args.crd);
        let summary = crdctl_migrate::migrate(&cluster, &args.crd, &options, &progress).await;
        progress.finish();
        let summary = summary?;
        output::print(&MigrationReport(summary.clone()), args.output)?;
        Ok(if summary.finished || (summary.dry_run && summary.failed.is_empty()) {
            Outcome::Clean
        } else {
            Outcome::Findings
        })
    })
}

/// Progress on standard error once the work has run a second: a bar on a terminal, a line per
/// few seconds otherwise.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    label: String,
    last_line: Mutex<Option<Instant>>,
    started: Instant,
}

/// How often plain progress lines are written.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// Work that ends sooner shows no progress.
const QUIET_FOR: Duration = Duration::from_secs(1);

impl Bar {
    /// A progress display for the objects of `label`.
    pub fn new(label: &str) -> Bar {
        let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
            // Drawn once the work has run for `QUIET_FOR`.
            let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {human_pos}/{human_len} objects, {per_sec}, ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(label.to_string());
            bar
        });
        Bar { bar, label: label.to_string(), last_line: Mutex::new(None), started: Instant::now() }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn advance(&self, done: u64, total: Option<u64>) {
        let quiet = self.started.elapsed() < QUIET_FOR;
        if let Some(bar) = &self.bar {
            if let Some(total) = total {
                bar.set_length(total);
            }
            bar.set_position(done);
            if !quiet && bar.is_hidden() {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            return;
        }
        let Ok(mut last) = self.last_line.lock() else { return };
        if quiet {
            return;
        }
        if last.is_some_and(|at| at.elapsed() < LINE_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        let of = total.map(|total| format!("/{total}")).unwrap_or_default();
        output::note(&format!("{}: {done}{of} objects ({rate:.0}/s)", self.label));
    }

    fn note(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("crdctl: {message}")),
            None => output::note(message),
        }
    }
}

/// The summary, printed.
#[derive(Serialize)]
#[serde(transparent)]
pub struct MigrationReport(pub Summary);

impl Report for MigrationReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let summary = &self.0;
        let versions = |list: &[String]| format!("[{}]", list.join(", "));
        if summary.finished {
            writeln!(
                out,
                "{}: every object is stored as {}; storedVersions {} -> {}",
                summary.crd,
                summary.storage_version,
                versions(&summary.stored_versions_before),
                versions(&summary.stored_versions_after)
            )?;
        } else {
            let why = summary.incomplete.as_deref().unwrap_or("unfinished");
            writeln!(out, "{}: not finished: {why}", summary.crd)?;
        }
        if let Some(migration) = &summary.migration {
            writeln!(out, "  rewritten by the server: StorageVersionMigration {migration}; {:.1} s", summary.seconds)?;
            return Ok(());
        }
        let rate = summary.handled() as f64 / summary.seconds.max(1e-3);
        writeln!(
            out,
            "  rewritten {}, unchanged {}, resumed {}, gone {}, conflicts retried {}, list restarts {}; {:.1} s ({rate:.0} objects/s)",
            summary.rewritten,
            summary.unchanged,
            summary.resumed,
            summary.gone,
            summary.conflicts,
            summary.restarts,
            summary.seconds
        )?;
        for failure in &summary.failed {
            writeln!(out, "  failed {}: {}", failure.object, failure.error)?;
        }
        if let Some(record) = &summary.record {
            writeln!(out, "  progress is recorded in {}; run again to go on", record.display())?;
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "```")?;
        self.write_text(out)?;
        writeln!(out, "```")
    }
}

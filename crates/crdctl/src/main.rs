//! `crdctl`: evolve Kubernetes CustomResourceDefinitions safely.
//!
//! This crate is the only one that knows about clap, terminals, output formats and exit codes.
//! Each subcommand lives in `cmd/<name>.rs` as an `Args` struct and a thin `run` that calls the
//! libraries and renders what they return: `check` ([`crdctl_safety`]), `validate`
//! ([`crdctl_schema::definition`]), `convert` ([`crdctl_conversion`]), `serve`
//! ([`crdctl_server`] on [`crdctl_storage`]), `migrate` and `retire-version` ([`crdctl_migrate`]).
//!
//! ```text
//! $ crdctl check examples/crontab/3-v1-storage.yaml examples/crontab/4-webhook.yaml
//! $ crdctl serve &
//! $ KUBECONFIG=.crdctl/kubeconfig crdctl migrate crontabs.example.com
//! ```

mod cmd;
mod output;

use std::process::ExitCode;

use clap::Parser;

// The server and the webhook client are JSON-heavy and multi-threaded: objects parsed on one
// thread are freed on another, which glibc's malloc handles poorly (half the rate measured by
// `cargo bench -p crdctl-bench --bench conversion`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Evolve Kubernetes CustomResourceDefinitions safely.
///
/// Exit status: 0 on success, 1 when the check found problems (the report is on standard
/// output), 2 for usage errors and unreadable or invalid input.
#[derive(Debug, Parser)]
#[command(name = "crdctl", version, about, long_about)]
struct Cli {
    /// Log more (-v: debug, -vv: trace); logs go to standard error.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Log only errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: cmd::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    match cmd::run(cli.command) {
        Ok(outcome) => outcome.exit_code(),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            output::error(&err);
            ExitCode::from(2)
        }
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

/// A closed pipe (`crdctl versions x.yaml | head -1`) is not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

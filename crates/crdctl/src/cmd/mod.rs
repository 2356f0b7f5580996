//! Subcommands: one module each, an `Args` struct and a `run` function.

pub mod convert_crd;
pub mod validate;
pub mod versions;

use std::process::ExitCode;

/// What a command found, mapped to the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0: valid, safe, done.
    Clean,
    /// Exit 1: the answer is no; the report is on standard output.
    Findings,
}

impl Outcome {
    /// The process exit code.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Clean => ExitCode::SUCCESS,
            Outcome::Findings => ExitCode::from(1),
        }
    }
}

/// Every subcommand.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Show CRD versions in Kubernetes priority order, or sort version strings.
    Versions(versions::Args),
    /// Check CRDs the way the API server does when they are created.
    Validate(validate::Args),
    /// Print a CRD as apiextensions.k8s.io/v1 (upgrading v1beta1 files).
    ConvertCrd(convert_crd::Args),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Versions(args) => versions::run(args),
        Command::Validate(args) => validate::run(args),
        Command::ConvertCrd(args) => convert_crd::run(args),
    }
}

/// Loads CRDs from the paths a user gave, with the loader's error as the message.
pub fn load(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<crdctl_model::Crd>> {
    Ok(crdctl_model::load::load_paths(paths)?)
}

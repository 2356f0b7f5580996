//! Subcommands: one module each, an `Args` struct and a `run` function.

pub mod admission;
pub mod check;
pub mod convert_crd;
pub mod etcd;
pub mod migrate;
pub mod retire_version;
pub mod serve;
pub mod store;
pub mod validate;
pub mod versions;
pub mod webhook;

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
    /// Compare installed CRDs with new ones and report unsafe changes (OLM's preflight).
    Check(check::Args),
    /// Print a CRD as apiextensions.k8s.io/v1 (upgrading v1beta1 files).
    ConvertCrd(convert_crd::Args),
    /// Serve CRDs and custom resources to kubectl (a Kubernetes-compatible API server).
    ///
    /// Data is kept on disk in --data (an embedded redb database; every acknowledged write is
    /// durable), only in memory with --in-memory, or in etcd with --etcd, where several servers
    /// share one state as kube-apiserver replicas do (watches and resourceVersion="0" lists are
    /// then served from a watch cache). On start it prints the address and the KUBECONFIG line
    /// that points kubectl at it. Listening beyond loopback requires --tls-cert,
    /// --tls-key and --token-file. SIGTERM or Ctrl-C stops it gracefully.
    ///
    /// --crd-upgrade-safety Strict (the default) refuses CRD updates that OLM v1's preflight
    /// refuses (the checks of `crdctl check`, with the live status.storedVersions): HTTP 422 with
    /// one cause per finding. None behaves like plain Kubernetes.
    Serve(serve::Args),
    /// Rewrite every object of a CRD in its storage version, then set status.storedVersions to it.
    ///
    /// Works against crdctl serve and any Kubernetes API server (kubeconfig and --context as
    /// kubectl has them). Each object is written back unchanged with its resourceVersion as
    /// precondition, so updates by other clients during the run are never lost; storedVersions
    /// is trimmed only when every object was rewritten and the storage version did not change.
    /// An interrupted run leaves a progress record and the next run goes on from it.
    ///
    /// Exit status: 0 when done, 1 when objects could not be rewritten or the run could not
    /// finish (the summary says why), 2 for errors.
    Migrate(migrate::Args),
    /// Check, and with --apply carry out, the removal of an old version: stop serving it,
    /// migrate what is stored in it, drop it from status.storedVersions and spec.versions.
    ///
    /// Refuses, with reasons, while the version is the storage version or clients requested it
    /// recently (from the server's /metrics). Safe to run again after any failure.
    RetireVersion(retire_version::Args),
    /// Look inside the data directory of crdctl serve.
    #[command(subcommand)]
    Store(store::Command),
    /// Tools for conversion webhook authors: send reviews, find lossy round trips, make certificates.
    #[command(subcommand)]
    Webhook(webhook::Command),
    /// Admission webhooks for real clusters: the CRD upgrade-safety preflight on every CRD update.
    #[command(subcommand)]
    Admission(admission::Command),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Versions(args) => versions::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Check(args) => check::run(args),
        Command::ConvertCrd(args) => convert_crd::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::RetireVersion(args) => retire_version::run(args),
        Command::Store(command) => store::run(command),
        Command::Webhook(command) => webhook::run(command),
        Command::Admission(command) => admission::run(command),
    }
}

/// Loads CRDs from the paths a user gave, with the loader's error as the message.
pub fn load(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<crdctl_model::Crd>> {
    Ok(crdctl_model::load::load_paths(paths)?)
}

/// Loads CRDs from a path, `-`, or `git:REF:PATH`: a file or a directory at a revision of the
/// current repository, read from git's objects without a checkout.
pub fn load_source(source: &str) -> anyhow::Result<Vec<crdctl_model::Crd>> {
    let Some(revision_and_path) = source.strip_prefix("git:") else {
        return load(&[std::path::PathBuf::from(source)]);
    };
    let Some((revision, path)) = revision_and_path.split_once(':') else {
        anyhow::bail!("{source}: expected git:REF:PATH, e.g. git:main:config/crd.yaml");
    };
    let object = format!("{revision}:{path}");
    let files: Vec<String> = if git(source, &["cat-file", "-t", &object])?.trim_ascii() == b"tree" {
        let listing = git(source, &["ls-tree", "-r", "--name-only", "--full-name", revision, "--", path])?;
        String::from_utf8_lossy(&listing)
            .lines()
            .filter(|f| [".yaml", ".yml", ".json"].iter().any(|ext| f.ends_with(ext)))
            .map(|f| format!("{revision}:{f}"))
            .collect()
    } else {
        vec![object]
    };
    let mut crds = Vec::new();
    for file in files {
        crds.extend(git_show(source, &file)?);
    }
    if crds.is_empty() {
        anyhow::bail!("{source}: no CustomResourceDefinition found");
    }
    Ok(crds)
}

/// The CRDs in a file at a revision, read from `git show` through the loader's input gate (the
/// output is not read past the size limit).
fn git_show(source: &str, object: &str) -> anyhow::Result<Vec<crdctl_model::Crd>> {
    let mut child = std::process::Command::new("git")
        .args(["show", object])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|err| anyhow::anyhow!("{source}: cannot run git: {err}"))?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("{source}: git has no output"))?;
    let loaded = crdctl_model::load::load_reader(&format!("git:{object}"), stdout);
    if loaded.is_err() {
        // Stop git rather than wait for output nobody reads.
        let _ = child.kill();
    }
    let output = child.wait_with_output().map_err(|err| anyhow::anyhow!("{source}: cannot run git: {err}"))?;
    let crds = loaded?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!("{source}: {}", stderr.trim().trim_start_matches("fatal: "));
    }
    Ok(crds)
}

/// Runs git in the current directory and returns its standard output.
fn git(source: &str, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = std::process::Command::new("git")
        .args(args)
        .output()
        .map_err(|err| anyhow::anyhow!("{source}: cannot run git: {err}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!("{source}: {}", stderr.trim().trim_start_matches("fatal: "));
    }
    Ok(output.stdout)
}

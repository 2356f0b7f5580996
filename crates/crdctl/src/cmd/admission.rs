//! `crdctl admission serve`: OLM v1's CRD upgrade-safety preflight as a validating admission
//! webhook for `customresourcedefinitions` UPDATE, so every CRD update of a cluster gets the
//! check, not only OLM-managed ones.
//!
//! The webhook judges the update as `crdctl check OLD NEW` judges two files, with the same
//! options (dialect, crdify configuration, enforcement): OLD is the review's `oldObject` (with
//! its live `status.storedVersions`), NEW its `object`. A refusal lists every finding in the
//! words `check` prints, one per line; warnings go back as `Warning`s. Anything but a CRD
//! update is allowed. Certificates are reloaded when their files change (cert-manager).

use std::net::SocketAddr;
use std::path::PathBuf;

use crdctl_conversion::admission::{self, AdmissionRequest, Verdict};
use crdctl_conversion::framework::{Options, start_app};
use crdctl_safety::{Severity, dialect};

use super::Outcome;
use super::check::{Judgement, Policy};

/// Admission webhook subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Serve the CRD upgrade-safety preflight as a validating admission webhook (HTTPS).
    ///
    /// Register it for customresourcedefinitions UPDATE with a ValidatingWebhookConfiguration
    /// (deploy/admission/ has the manifests). It prints the address it listens on.
    Serve(ServeArgs),
}

/// Arguments of `admission serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// PEM certificate chain (reloaded when the file changes).
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// PEM private key.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// The path the ValidatingWebhookConfiguration calls.
    #[arg(long, default_value = "/validate-crd-upgrade")]
    path: String,
    #[command(flatten)]
    policy: Policy,
}

/// Runs an admission subcommand.
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<Outcome> {
    let judgement = args.policy.load()?;
    let app = admission::router().validating(&args.path, move |request: &AdmissionRequest| judge(&judgement, request));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let options = Options::new(args.listen, &args.tls_cert, &args.tls_key);
        let server = start_app(options, app.build()).await?;
        // Nobody may read standard output: the banner is best effort.
        let banner = format!("crdctl admission: listening on https://{}{}\n", server.address, args.path);
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), banner.as_bytes());
        crdctl_conversion::framework::shutdown_signal().await;
        server.shutdown().await?;
        Ok(Outcome::Clean)
    })
}

/// The verdict on one review: a CRD update is judged as `crdctl check` judges it.
fn judge(judgement: &Judgement, request: &AdmissionRequest) -> Verdict {
    let is_crd = request.kind.group == "apiextensions.k8s.io" && request.kind.kind == "CustomResourceDefinition";
    let (Some(old), Some(new), true, "UPDATE") =
        (&request.old_object, &request.object, is_crd, request.operation.as_str())
    else {
        return Verdict::allow();
    };
    let load = |object: &serde_json::Value| crdctl_model::Crd::from_value(&request.name, object.clone());
    let (old, new) = match (load(old), load(new)) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(err), _) | (_, Err(err)) => {
            return Verdict::deny(format!("cannot read the CustomResourceDefinition: {err}"));
        }
    };
    let report = judgement.report(&[old], &[new]);
    let refusals = dialect::lines(&report, judgement.dialect, Severity::Error);
    let warnings = dialect::lines(&report, judgement.dialect, Severity::Warning);
    let verdict = match refusals.is_empty() {
        true => Verdict::allow(),
        false => Verdict::deny(refusals.join("\n")),
    };
    warnings.into_iter().fold(verdict, Verdict::warn)
}

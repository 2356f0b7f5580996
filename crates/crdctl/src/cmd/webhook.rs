//! `crdctl webhook`: tools for conversion webhook authors.
//!
//! - `review` sends one ConversionReview to a webhook and checks the answer as the API server would.
//! - `roundtrip` converts objects through every served version and back, and reports what a
//!   round trip lost or changed: the most common conversion bug, found here without a cluster.
//! - `fuzz` makes objects from each served version's schema and does the same with them, so the
//!   losses hiding in objects nobody has written yet show up, each shrunk to the smallest object.
//! - `certs` writes a CA, a serving certificate for a Service, and the caBundle for the CRD.

use std::io::Write;
use std::path::{Path, PathBuf};

use crdctl_conversion::webhook::{DnsResolver, WebhookClient};
use crdctl_conversion::{ConversionError, ReviewVersion, Shape};
use crdctl_model::crd::WebhookClientConfig;
use serde::Serialize;
use serde_json::Value;

use super::Outcome;
use crate::output;

/// Webhook subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Send a ConversionReview to a webhook and check the answer as the API server would.
    Review(ReviewArgs),
    /// Convert objects through every served version and back; report lossy round trips.
    Roundtrip(RoundtripArgs),
    /// Fuzz the webhook with objects made from the CRD's schemas; report what it loses.
    Fuzz(FuzzArgs),
    /// Write a CA, a serving certificate for a Service, and the caBundle for the CRD.
    Certs(CertsArgs),
}

/// Where the webhook is.
#[derive(Debug, clap::Args)]
pub struct Endpoint {
    /// The webhook URL, e.g. https://localhost:9443/crdconvert.
    #[arg(long)]
    url: String,
    /// PEM file with the CA that signed the webhook's certificate (system roots if omitted).
    #[arg(long, value_name = "FILE")]
    ca_bundle: Option<PathBuf>,
}

/// Arguments of `webhook review`.
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The apiVersion to convert to, GROUP/VERSION.
    #[arg(long, value_name = "GROUP/VERSION")]
    to: String,
    /// The ConversionReview version to send.
    #[arg(long, value_enum, default_value_t = ReviewVersionArg::V1)]
    review_version: ReviewVersionArg,
    /// Files with the objects to convert (YAML or JSON, - for standard input).
    #[arg(value_name = "OBJECTS", required = true)]
    objects: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReviewVersionArg {
    V1,
    V1beta1,
}

/// Arguments of `webhook roundtrip`.
#[derive(Debug, clap::Args)]
pub struct RoundtripArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The CRD: its served versions are the round trip's stops.
    #[arg(long, value_name = "CRD")]
    crd: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = output::Format::Text)]
    output: output::Format,
    /// Files with objects in any served version (YAML or JSON, - for standard input).
    #[arg(value_name = "OBJECTS", required = true)]
    objects: Vec<PathBuf>,
}

/// Arguments of `webhook fuzz`.
#[derive(Debug, clap::Args)]
pub struct FuzzArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The CRD: objects are made from its served versions' schemas.
    #[arg(long, value_name = "CRD")]
    crd: PathBuf,
    /// The seed the objects are made from: the same seed makes the same objects.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Objects made per served version.
    #[arg(long, default_value_t = 50)]
    count: usize,
    /// The most items a made list or map holds.
    #[arg(long, default_value_t = 3)]
    size: usize,
    /// Objects to fuzz besides the made ones, e.g. `kubectl get <crd> -A -o yaml` output.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    objects: Vec<PathBuf>,
    /// Also fuzz the objects a cluster stores of the CRD (read-only, paged, at its storage
    /// version).
    #[arg(long)]
    live: bool,
    #[command(flatten)]
    cluster: super::migrate::ClusterArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = output::Format::Text)]
    output: output::Format,
}

/// Arguments of `webhook certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// The webhook's Service name.
    #[arg(long)]
    service: String,
    /// The webhook's Service namespace.
    #[arg(long)]
    namespace: String,
    /// More names or IP addresses the certificate must be valid for (repeatable).
    #[arg(long = "host", value_name = "HOST")]
    hosts: Vec<String>,
    /// Directory to write ca.crt, tls.crt, tls.key and ca-bundle.txt to.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Runs a webhook subcommand.
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Review(args) => runtime()?.block_on(review(args)),
        Command::Roundtrip(args) => runtime()?.block_on(roundtrip(args)),
        Command::Fuzz(args) => runtime()?.block_on(fuzz(args)),
        Command::Certs(args) => certs(args),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

fn client(endpoint: &Endpoint, review_versions: &[String]) -> anyhow::Result<WebhookClient> {
    let ca_bundle = match &endpoint.ca_bundle {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?),
        None => None,
    };
    let config = WebhookClientConfig { url: Some(endpoint.url.clone()), service: None, ca_bundle };
    Ok(WebhookClient::new(&config, review_versions, &DnsResolver)?)
}

/// A webhook's wrong answer is the command's finding (exit 1); no answer is an error (exit 2).
fn finding_or_error(err: ConversionError) -> anyhow::Result<Outcome> {
    if !err.answered {
        return Err(err.into());
    }
    writeln!(std::io::stdout(), "{}", err.message)?;
    Ok(Outcome::Findings)
}

async fn review(args: ReviewArgs) -> anyhow::Result<Outcome> {
    let version = match args.review_version {
        ReviewVersionArg::V1 => ReviewVersion::V1,
        ReviewVersionArg::V1beta1 => ReviewVersion::V1beta1,
    };
    let client = client(&args.endpoint, &[version.name().to_string()])?;
    let objects = crdctl_model::load::load_objects(&args.objects)?;
    if objects.is_empty() {
        anyhow::bail!("no objects to convert");
    }
    let converted = match client.convert(objects, &args.to, Shape::List).await {
        Ok(converted) => converted,
        Err(err) => return finding_or_error(err),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (idx, object) in converted.iter().enumerate() {
        if idx > 0 {
            writeln!(out, "---")?;
        }
        output::write_yaml(&mut out, object)?;
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// One object whose round trip through a version did not come back the same.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LossyRoundTrip {
    object: String,
    from: String,
    through: String,
    differences: Vec<Difference>,
}

#[derive(Debug, Serialize)]
struct Difference {
    path: String,
    before: Option<Value>,
    after: Option<Value>,
}

#[derive(Debug, Serialize)]
struct RoundtripReport {
    objects: usize,
    round_trips: usize,
    lossy: Vec<LossyRoundTrip>,
}

async fn roundtrip(args: RoundtripArgs) -> anyhow::Result<Outcome> {
    let crds = super::load(std::slice::from_ref(&args.crd))?;
    if crds.is_empty() {
        anyhow::bail!("{}: no CustomResourceDefinition found", args.crd.display());
    }
    let objects = crdctl_model::load::load_objects(&args.objects)?;
    let mut report = RoundtripReport { objects: objects.len(), round_trips: 0, lossy: Vec::new() };
    let mut clients = std::collections::HashMap::new();
    for object in &objects {
        let crd = crd_of(&crds, object, &args.crd)?;
        let group = &crd.definition.spec.group;
        let served: Vec<String> =
            crd.definition.served_versions_by_priority().into_iter().map(|v| format!("{group}/{}", v.name)).collect();
        let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if !served.contains(&from) {
            anyhow::bail!("{}: apiVersion {from:?} is not a served version of {}", object_name(object), crd.name());
        }
        let client = match clients.entry(crd.name().to_string()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(client(&args.endpoint, &review_versions(crd))?)
            }
        };
        for through in served.iter().filter(|v| **v != from) {
            let there = match client.convert(vec![object.clone()], through, Shape::Object).await {
                Ok(converted) => only(converted)?,
                Err(err) => return finding_or_error(err),
            };
            let back = match client.convert(vec![there], &from, Shape::Object).await {
                Ok(converted) => only(converted)?,
                Err(err) => return finding_or_error(err),
            };
            report.round_trips += 1;
            let differences: Vec<Difference> = crdctl_conversion::difference::differences(object, &back)
                .into_iter()
                .map(|d| Difference { path: d.path, before: d.before, after: d.after })
                .collect();
            if !differences.is_empty() {
                report.lossy.push(LossyRoundTrip {
                    object: object_name(object),
                    from: from.clone(),
                    through: through.clone(),
                    differences,
                });
            }
        }
    }
    output::print(&report, args.output)?;
    Ok(if report.lossy.is_empty() { Outcome::Clean } else { Outcome::Findings })
}

/// The CRD an object belongs to, by its group and kind.
fn crd_of<'a>(
    crds: &'a [crdctl_model::Crd],
    object: &Value,
    source: &std::path::Path,
) -> anyhow::Result<&'a crdctl_model::Crd> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let spec = |crd: &crdctl_model::Crd| (crd.definition.spec.group.clone(), crd.definition.spec.names.kind.clone());
    crds.iter().find(|crd| spec(crd) == (group.to_string(), kind.to_string())).ok_or_else(|| {
        let known: Vec<String> =
            crds.iter().map(|crd| format!("{} ({})", crd.name(), crd.definition.spec.names.kind)).collect();
        anyhow::anyhow!(
            "{}: no CRD in {} defines kind {kind:?} in group {group:?} (it has {})",
            object_name(object),
            source.display(),
            known.join(", ")
        )
    })
}

/// The review versions the CRD's webhook accepts (`v1` when it does not say).
fn review_versions(crd: &crdctl_model::Crd) -> Vec<String> {
    crd.definition
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .map(|w| w.conversion_review_versions.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec!["v1".into()])
}

/// The one object a one-object review returned (the client checks the count).
fn only(converted: Vec<Value>) -> anyhow::Result<Value> {
    converted.into_iter().next().ok_or_else(|| anyhow::anyhow!("the webhook returned no object"))
}

impl RoundtripReport {
    /// One row per lost or changed field: object, route, path, before, after.
    fn rows(&self) -> impl Iterator<Item = [String; 5]> + '_ {
        self.lossy.iter().flat_map(|lossy| {
            let route = format!("{} -> {} -> {}", lossy.from, lossy.through, lossy.from);
            lossy
                .differences
                .iter()
                .map(move |d| [lossy.object.clone(), route.clone(), d.path.clone(), shown(&d.before), shown(&d.after)])
        })
    }
}

impl output::Report for RoundtripReport {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for [object, route, path, before, after] in self.rows() {
            writeln!(out, "{object}: {route}: {path}: {before} -> {after}")?;
        }
        if self.lossy.is_empty() {
            writeln!(out, "{} objects, {} round trips, all lossless", self.objects, self.round_trips)?;
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "| object | round trip | field | before | after |\n|---|---|---|---|---|")?;
        for [object, route, path, before, after] in self.rows() {
            writeln!(out, "| `{object}` | {route} | `{path}` | `{before}` | `{after}` |")?;
        }
        Ok(())
    }
}

fn shown(value: &Option<Value>) -> String {
    value.as_ref().map_or_else(|| "(absent)".into(), Value::to_string)
}

fn object_name(object: &Value) -> String {
    let meta =
        |key: &str| object.pointer(&format!("/metadata/{key}")).and_then(Value::as_str).unwrap_or_default().to_string();
    match (meta("namespace"), meta("name")) {
        (ns, name) if ns.is_empty() => name,
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// What `webhook fuzz` found, one report per CRD.
#[derive(Debug, Serialize)]
struct FuzzReports(Vec<crdctl_conversion::fuzz::Report>);

async fn fuzz(args: FuzzArgs) -> anyhow::Result<Outcome> {
    let crds = super::load(std::slice::from_ref(&args.crd))?;
    if crds.is_empty() {
        anyhow::bail!("{}: no CustomResourceDefinition found", args.crd.display());
    }
    let mut seeds = crdctl_model::load::load_objects(&args.objects)?;
    let cluster = match args.live {
        true => Some(args.cluster.connect().await?.0),
        false => None,
    };
    let options = crdctl_conversion::fuzz::Options { seed: args.seed, objects: args.count, size: args.size };
    let mut reports = Vec::with_capacity(crds.len());
    for crd in &crds {
        if let Some(cluster) = &cluster {
            seeds.extend(stored(cluster, crd).await?);
        }
        let client = client(&args.endpoint, &review_versions(crd))?;
        let report = crdctl_conversion::fuzz::run(crd, &client, options, &seeds).await.map_err(anyhow::Error::msg)?;
        reports.push(report);
    }
    let reports = FuzzReports(reports);
    output::print(&reports, args.output)?;
    Ok(if reports.0.iter().all(|r| r.findings.is_empty()) { Outcome::Clean } else { Outcome::Findings })
}

/// Every object `cluster` stores of `crd`, listed in pages at its storage version.
async fn stored(cluster: &crdctl_migrate::Cluster, crd: &crdctl_model::Crd) -> anyhow::Result<Vec<Value>> {
    let spec = &crd.definition.spec;
    let Some(storage) = crd.definition.storage_version() else { return Ok(Vec::new()) };
    let collection = format!("/apis/{}/{}/{}", spec.group, storage.name, spec.names.plural);
    let (mut objects, mut token) = (Vec::new(), None);
    loop {
        let page = cluster.list_page(&collection, LIVE_PAGE, token.as_deref()).await;
        let page = page.map_err(|err| anyhow::anyhow!("listing {collection}: {err}"))?;
        objects.extend(page.items);
        token = page.next;
        if token.is_none() {
            return Ok(objects);
        }
    }
}

/// Objects per list page of `--live`.
const LIVE_PAGE: u32 = 500;

impl FuzzReports {
    /// One row per finding: route, field, verdict, before, after, the smallest object.
    fn rows(&self) -> impl Iterator<Item = [String; 6]> + '_ {
        self.0.iter().flat_map(|report| &report.findings).map(|finding| {
            [
                finding.route.join(" -> "),
                finding.path.clone(),
                finding.verdict.name().to_string(),
                shown(&finding.before),
                shown(&finding.after),
                smallest(&finding.object),
            ]
        })
    }
}

/// An object's fields outside its type and metadata, as one line of JSON.
fn smallest(object: &Value) -> String {
    let mut object = object.clone();
    if let Some(fields) = object.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            fields.remove(key);
        }
    }
    object.to_string()
}

impl output::Report for FuzzReports {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for [route, path, verdict, before, after, object] in self.rows() {
            match verdict.as_str() {
                "refused" => writeln!(out, "{route}: refused: {after}\n  smallest object: {object}")?,
                _ => writeln!(out, "{route}: {path}: {verdict}: {before} -> {after}\n  smallest object: {object}")?,
            }
        }
        for report in &self.0 {
            for missing in &report.unrepresentable {
                writeln!(out, "{} cannot represent {}'s {}", missing.to, missing.from, missing.path)?;
            }
            let made: Vec<String> = report
                .versions
                .iter()
                .map(|v| format!("{} {} kept, {} rejected", v.version, v.kept, v.rejected))
                .collect();
            let found = report.findings.len();
            writeln!(
                out,
                "{}: {}; {} round trips, {}",
                report.crd,
                made.join(", "),
                report.round_trips,
                if found == 0 { "all lossless".to_string() } else { format!("{found} findings") }
            )?;
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "| round trip | field | verdict | before | after | smallest object |\n|---|---|---|---|---|---|"
        )?;
        for [route, path, verdict, before, after, object] in self.rows() {
            writeln!(out, "| {route} | `{path}` | {verdict} | `{before}` | `{after}` | `{object}` |")?;
        }
        for report in &self.0 {
            for missing in &report.unrepresentable {
                writeln!(out, "\n> `{}` cannot represent `{}`'s `{}`", missing.to, missing.from, missing.path)?;
            }
        }
        Ok(())
    }
}

fn certs(args: CertsArgs) -> anyhow::Result<Outcome> {
    let mut names = crdctl_conversion::certs::service_names(&args.service, &args.namespace);
    names.extend(args.hosts);
    let bundle = crdctl_conversion::certs::generate(&names).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&args.out).map_err(|err| anyhow::anyhow!("{}: {err}", args.out.display()))?;
    let write = |name: &str, content: &str| -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let path: PathBuf = Path::new(&args.out).join(name);
        // The private key is for the webhook's eyes only.
        let mode = if name.ends_with(".key") { 0o600 } else { 0o644 };
        let failed = |err: std::io::Error| anyhow::anyhow!("{}: {err}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&path)
            .map_err(failed)?;
        // `mode` applies only to a new file: an existing one keeps its mode unless set, and is
        // set before the new key is in it.
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode)).map_err(failed)?;
        file.write_all(content.as_bytes()).map_err(failed)
    };
    write("ca.crt", &bundle.ca_pem)?;
    write("tls.crt", &bundle.cert_pem)?;
    write("tls.key", &bundle.key_pem)?;
    write("ca-bundle.txt", &format!("{}\n", bundle.ca_bundle()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "wrote ca.crt, tls.crt, tls.key and ca-bundle.txt to {}", args.out.display())?;
    writeln!(out, "certificate names: {}", names.join(", "))?;
    writeln!(out, "caBundle for spec.conversion.webhook.clientConfig:\n{}", bundle.ca_bundle())?;
    Ok(Outcome::Clean)
}

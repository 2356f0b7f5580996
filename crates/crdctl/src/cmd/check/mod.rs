//! `crdctl check OLD NEW`: OLM v1's CRD upgrade-safety preflight.

use std::io::Write;

use anyhow::Context;

use crdctl_migrate::Progress;
use crdctl_safety::data::{self, DataFinding, Joined, Problem, StoredObject};
use crdctl_safety::{Change, Config, Dialect, Finding, Report, Scope, Severity, dialect};
use crdctl_server::registry::upgrade::Converting;
use serde::Serialize;
use serde_json::{Value, json};

mod html;

use super::Outcome;
use super::migrate::Bar;
use crate::output;

/// Compare installed CRDs with new ones and report unsafe changes (OLM's preflight).
///
/// OLD and NEW are files, directories or bundles of CRDs (paired by metadata.name), - for
/// standard input, or git:REF:PATH for a file at a revision of the current repository. A CRD
/// only in NEW is a fresh install and passes. Exits 1 when an upgrade is unsafe.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The installed CRDs.
    #[arg(value_name = "OLD")]
    old: String,
    /// The CRDs that would replace them.
    #[arg(value_name = "NEW")]
    new: String,
    #[command(flatten)]
    policy: Policy,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = CheckFormat::Text)]
    output: CheckFormat,
    /// Versions objects are stored in, when OLD has no status.storedVersions (comma-separated).
    #[arg(long, value_name = "V1,V2", value_delimiter = ',')]
    stored_versions: Vec<String>,
    /// Stored objects to judge against NEW as the API server would once it is installed
    /// (files, directories, -; `kubectl get <crd> -A -o yaml` output works as is).
    #[arg(long, value_name = "PATH", num_args = 1..)]
    objects: Vec<std::path::PathBuf>,
    /// Judge the objects a cluster stores (read-only, paged); with OLD `-`, the installed CRDs
    /// are OLD.
    #[arg(long, conflicts_with = "objects")]
    live: bool,
    /// The new CRD's conversion webhook, for judging objects it must convert
    /// (https, as in clientConfig.url; default: the CRD's own clientConfig.url).
    #[arg(long, value_name = "URL")]
    webhook_url: Option<String>,
    /// The PEM CA bundle that signs the webhook's certificate (default: the CRD's caBundle).
    #[arg(long, value_name = "FILE", requires = "webhook_url")]
    ca_bundle: Option<std::path::PathBuf>,
    #[command(flatten)]
    cluster: super::migrate::ClusterArgs,
    /// What fails the check: OLM's static verdict, or only what the stored objects show.
    #[arg(long, value_enum, default_value_t = FailOn::Static)]
    fail_on: FailOn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailOn {
    Static,
    Data,
}

/// The data-aware part of a check: the stored objects' findings and their join with the static ones.
#[derive(Default)]
struct Data {
    findings: Vec<DataFinding>,
    joined: Joined,
}

/// How the objects of one new CRD are converted: `None`, its webhook (at `--webhook-url` with
/// `--ca-bundle` when given), or not at all when it is a Service no URL reaches.
fn converting_for(crd: &crdctl_model::load::Crd, webhook: &WebhookArgs) -> anyhow::Result<Converting> {
    let mut definition = crd.definition.clone();
    let Some(conversion) = definition.spec.conversion.as_mut().filter(|c| c.strategy == "Webhook") else {
        return Ok(Converting::Local(data::Conversion::None));
    };
    let client_config =
        conversion.webhook.get_or_insert_with(Default::default).client_config.get_or_insert_with(Default::default);
    if let Some(url) = &webhook.url {
        client_config.url = Some(url.clone());
        client_config.service = None;
    }
    if let Some(bundle) = &webhook.ca_bundle {
        // PEM, or base64 as in the CRD: the client reads both.
        client_config.ca_bundle = Some(bundle.clone());
    }
    if client_config.url.is_none() {
        let why = "the new CRD converts through a webhook Service; pass --webhook-url (and --ca-bundle) to judge the objects it must convert";
        return Ok(Converting::Local(data::Conversion::Unavailable(why.into())));
    }
    let converter = crdctl_conversion::Converter::for_crd(&definition, &crdctl_conversion::webhook::DnsResolver)
        .map_err(|err| anyhow::anyhow!("{}: {err}", crd.name()))?;
    Ok(Converting::new(Ok(converter)))
}

/// `--webhook-url` and `--ca-bundle`, read.
struct WebhookArgs {
    url: Option<String>,
    ca_bundle: Option<String>,
}

/// One new CRD to judge objects against (replacing the installed one), and its conversion.
struct Judging<'a> {
    judge: data::Judge<'a>,
    converting: Converting,
}

impl Data {
    /// Judges `objects` against every CRD of `new` they belong to.
    async fn add(&mut self, new: &mut [Judging<'_>], objects: &mut [StoredObject]) {
        for judging in new {
            let (found, count) = judging.judge.judge(objects, &mut judging.converting).await;
            self.findings.extend(found);
            *self.joined.judged.entry(judging.judge.crd().name().to_string()).or_default() += count;
        }
    }

    /// The objects in files.
    async fn from_files(new: &mut [Judging<'_>], paths: &[std::path::PathBuf]) -> anyhow::Result<Data> {
        let mut objects: Vec<StoredObject> = crdctl_model::load::load_located_objects(paths)?
            .into_iter()
            .map(|located| StoredObject {
                location: located.position.map(|p| crdctl_safety::Location {
                    file: located.file.to_string(),
                    line: p.line,
                    column: p.column,
                }),
                value: located.value,
            })
            .collect();
        let mut data = Data::default();
        let progress = Bar::new("judging stored objects");
        let total = Some(objects.len() as u64);
        for (at, page) in objects.chunks_mut(LIVE_PAGE as usize).enumerate() {
            data.add(new, page).await;
            progress.advance((at * LIVE_PAGE as usize + page.len()) as u64, total);
        }
        progress.finish();
        Ok(data)
    }

    /// The objects a cluster holds of each CRD of `new` that is `installed`, read in pages at
    /// the installed storage version (what a write stores), judged a page at a time.
    async fn from_cluster(
        cluster: &crdctl_migrate::Cluster,
        installed: &[crdctl_model::load::Crd],
        new: &mut [Judging<'_>],
    ) -> anyhow::Result<Data> {
        let mut data = Data::default();
        for judged in new.iter_mut() {
            let name = judged.judge.crd().name();
            let Some(current) = installed.iter().find(|c| c.name() == name) else { continue };
            let Some(storage) = current.definition.storage_version() else { continue };
            let spec = &current.definition.spec;
            let collection = format!("/apis/{}/{}/{}", spec.group, storage.name, spec.names.plural);
            let progress = Bar::new(name);
            let mut token: Option<String> = None;
            let mut done = 0;
            loop {
                let page = cluster.list_page(&collection, LIVE_PAGE, token.as_deref()).await;
                let page = page.with_context(|| format!("listing {collection}"))?;
                let mut objects: Vec<StoredObject> =
                    page.items.into_iter().map(|value| StoredObject { value, location: None }).collect();
                data.add(std::slice::from_mut(judged), &mut objects).await;
                done += objects.len() as u64;
                progress.advance(done, page.remaining.map(|rest| done + rest));
                token = page.next;
                if token.is_none() {
                    break;
                }
            }
            progress.finish();
        }
        Ok(data)
    }
}

/// The SARIF rule of what a stored object shows.
const STORED_OBJECT_RULE: &str = "StoredObject";

/// Objects per list page of `--live`.
const LIVE_PAGE: u32 = 500;

/// The installed CRDs named in `new`, read from the cluster.
async fn installed(
    cluster: &crdctl_migrate::Cluster,
    new: &[crdctl_model::load::Crd],
) -> anyhow::Result<Vec<crdctl_model::load::Crd>> {
    let mut installed = Vec::new();
    for crd in new {
        match cluster.crd(crd.name()).await {
            Ok(found) => installed.push(crdctl_model::load::Crd::from_value(crd.name(), found.raw)?),
            Err(crdctl_migrate::CallError::Status { code: 404, .. }) => {}
            Err(err) => return Err(anyhow::anyhow!("reading CustomResourceDefinition {}: {err}", crd.name())),
        }
    }
    Ok(installed)
}

/// How an upgrade is judged and written: the options `crdctl check` and `crdctl admission
/// serve` share.
#[derive(Debug, Clone, clap::Args)]
pub struct Policy {
    /// Message format of text output: the OLM docs' (olm) or today's OLM preflight (crdify).
    #[arg(long, value_enum, default_value_t = DialectArg::Olm)]
    dialect: DialectArg,
    /// A crdify configuration file (per-validation enforcement, policies, conversion).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Strict runs the preflight; None turns it off, leaving the API server's own checks.
    #[arg(long, value_enum, default_value_t = EnforcementArg::Strict)]
    enforcement: EnforcementArg,
}

/// A [`Policy`] with its configuration read.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// How findings are written.
    pub dialect: Dialect,
    config: Config,
    enforcement: EnforcementArg,
}

impl Policy {
    /// Reads the crdify configuration, if any.
    pub fn load(&self) -> anyhow::Result<Judgement> {
        let config = match &self.config {
            Some(path) => {
                let text = crdctl_model::load::read_text(path)?;
                Config::from_yaml(&text).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?
            }
            None => Config::default(),
        };
        let dialect = match self.dialect {
            DialectArg::Olm => Dialect::Olm,
            DialectArg::Crdify => Dialect::Crdify,
        };
        Ok(Judgement { dialect, config, enforcement: self.enforcement })
    }
}

impl Judgement {
    /// The report on replacing `old` with `new`.
    pub fn report(&self, old: &[crdctl_model::Crd], new: &[crdctl_model::Crd]) -> Report {
        match self.enforcement {
            EnforcementArg::Strict => crdctl_safety::check_all(old, new, &self.config),
            EnforcementArg::None => crdctl_safety::api_server_check_all(old, new),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DialectArg {
    Olm,
    Crdify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CheckFormat {
    Text,
    Json,
    Markdown,
    Sarif,
    /// One self-contained page: `--output html > report.html`.
    Html,
}

/// OLM's `spec.install.preflight.crdUpgradeSafety.enforcement`, spelled as there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EnforcementArg {
    #[value(name = "Strict", alias = "strict")]
    Strict,
    #[value(name = "None", alias = "none")]
    None,
}

/// Runs `crdctl check`.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let judgement = args.policy.load()?;
    let new = super::load_source(&args.new)?;
    // Stored objects are judged with a runtime for the cluster and the conversion webhook.
    let runtime = match args.live || !args.objects.is_empty() {
        true => Some(tokio::runtime::Builder::new_current_thread().enable_all().build()?),
        false => None,
    };
    let live = match (&runtime, args.live) {
        (Some(runtime), true) => {
            let (cluster, _) = runtime.block_on(args.cluster.connect())?;
            let installed = runtime.block_on(installed(&cluster, &new))?;
            Some((cluster, installed))
        }
        _ => None,
    };
    let mut old = match &live {
        Some((_, installed)) if args.old == "-" => installed.clone(),
        _ => super::load_source(&args.old)?,
    };
    if !args.stored_versions.is_empty() {
        for crd in &mut old {
            crd.definition.status.stored_versions.clone_from(&args.stored_versions);
        }
    }
    let dialect = judgement.dialect;
    let report = judgement.report(&old, &new);
    for note in &report.notes {
        output::warning(&dialect::note(note));
    }
    let data = match &runtime {
        Some(runtime) => {
            let webhook = WebhookArgs {
                url: args.webhook_url.clone(),
                ca_bundle: args.ca_bundle.as_ref().map(|path| crdctl_model::load::read_text(path)).transpose()?,
            };
            let mut judging = new
                .iter()
                .map(|crd| {
                    let installed = old.iter().find(|o| o.name() == crd.name());
                    Ok(Judging { judge: data::Judge::new(crd, installed), converting: converting_for(crd, &webhook)? })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Some(match &live {
                Some((cluster, installed)) => runtime.block_on(Data::from_cluster(cluster, installed, &mut judging))?,
                None => runtime.block_on(Data::from_files(&mut judging, &args.objects))?,
            })
        }
        None => None,
    };
    let data = data.map(|mut data| {
        data.joined = data::join(&report, &data.findings, std::mem::take(&mut data.joined.judged));
        data
    });
    let data_lines =
        data.as_ref().map(|d| dialect::data::lines(&report, &d.findings, &d.joined, dialect)).unwrap_or_default();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        CheckFormat::Text => {
            for line in dialect::lines(&report, dialect, Severity::Error) {
                writeln!(out, "{line}")?;
            }
            for line in dialect::lines(&report, dialect, Severity::Warning) {
                output::warning(&line);
            }
            for line in &data_lines {
                writeln!(out, "{line}")?;
            }
        }
        CheckFormat::Json => output::write_json(&mut out, &json_report(&report, dialect, data.as_ref()))?,
        CheckFormat::Markdown => write_markdown(&mut out, &report, dialect, new.len(), &data_lines)?,
        CheckFormat::Sarif => output::write_json(&mut out, &sarif(&report, dialect, data.as_ref()))?,
        CheckFormat::Html => {
            let affected = data.as_ref().map(|d| &d.joined.affected);
            let page = html::Page { report: &report, dialect, old: &old, new: &new, affected, data_lines: &data_lines };
            html::write(&mut out, &page)?;
        }
    }
    out.flush()?;
    let failed = match args.fail_on {
        FailOn::Static => !report.is_safe(),
        FailOn::Data => data.is_some_and(|d| !d.findings.is_empty()),
    };
    Ok(if failed { Outcome::Findings } else { Outcome::Clean })
}

/// The JSON report: one object per finding. Field names are a stable interface.
#[derive(Debug, Serialize)]
struct JsonReport {
    safe: bool,
    findings: Vec<JsonFinding>,
    notes: Vec<String>,
    /// With `--objects`: objects judged per CRD and what the upgrade does to them.
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<JsonData>,
}

#[derive(Debug, Serialize)]
struct JsonData {
    judged: std::collections::BTreeMap<String, usize>,
    findings: Vec<JsonDataFinding>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonDataFinding {
    crd: String,
    object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<JsonLocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    pointer: String,
    /// `unlistedVersion`, `pruned`, `invalid` or `notJudged`.
    problem: &'static str,
    ratcheted: bool,
    /// Whether a static finding names it.
    named_by_static_finding: bool,
    message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonFinding {
    crd: String,
    validation: &'static str,
    check: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    versions: Option<[String; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    old: Value,
    new: Value,
    message: Option<String>,
    messages: JsonMessages,
    severity: &'static str,
    implied_by_removal: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<JsonLocation>,
    /// With `--objects`, for a finding with a schema path: the stored objects it affects.
    #[serde(skip_serializing_if = "Option::is_none")]
    affected_objects: Option<Vec<String>>,
}

/// A finding's text in each dialect (`None` where that dialect folds it into another finding).
#[derive(Debug, Serialize)]
struct JsonMessages {
    olm: Option<String>,
    crdify: Option<String>,
}

#[derive(Debug, Serialize)]
struct JsonLocation {
    file: String,
    line: u32,
    column: u32,
}

fn json_report(report: &Report, dialect: Dialect, data: Option<&Data>) -> JsonReport {
    let findings = report
        .findings
        .iter()
        .enumerate()
        .filter_map(|(index, finding)| {
            // Every finding either dialect reports is listed, with both texts; `message` is the
            // text of the dialect asked for, null where it folds the finding into another one.
            let messages = JsonMessages {
                olm: dialect::message(finding, Dialect::Olm),
                crdify: dialect::message(finding, Dialect::Crdify),
            };
            if messages.olm.is_none() && messages.crdify.is_none() {
                return None;
            }
            let message = dialect::message(finding, dialect);
            let (old, new) = change_values(&finding.change);
            Some(JsonFinding {
                crd: finding.crd.clone(),
                validation: finding.change.validation(&finding.scope),
                check: finding.change.check(),
                version: match &finding.scope {
                    Scope::Version(v) => Some(v.clone()),
                    _ => None,
                },
                versions: match &finding.scope {
                    Scope::ServedPair(a, b) => Some([a.clone(), b.clone()]),
                    _ => None,
                },
                path: finding.path.as_ref().map(|p| p.render(path_style(dialect))),
                old,
                new,
                message,
                messages,
                severity: severity_name(finding.severity),
                implied_by_removal: finding.implied_by_removal,
                location: finding.location.as_ref().map(json_location),
                affected_objects: data.and_then(|d| d.joined.affected.get(&index).cloned()),
            })
        })
        .collect();
    let data = data.map(|d| JsonData {
        judged: d.joined.judged.clone(),
        findings: d
            .findings
            .iter()
            .enumerate()
            .map(|(at, f)| JsonDataFinding {
                crd: f.crd.clone(),
                object: f.object.clone(),
                location: f.location.as_ref().map(json_location),
                version: f.version.clone(),
                pointer: f.pointer.clone(),
                problem: match f.problem {
                    Problem::UnlistedVersion(_) => "unlistedVersion",
                    Problem::Pruned(_) => "pruned",
                    Problem::Invalid { .. } => "invalid",
                    Problem::NotJudged(_) => "notJudged",
                    Problem::Lossy(_) => "lossy",
                },
                ratcheted: matches!(f.problem, Problem::Invalid { ratcheted: true, .. }),
                named_by_static_finding: !d.joined.unmatched.contains(&at),
                message: dialect::data::line(f),
            })
            .collect(),
    });
    JsonReport { safe: report.is_safe(), findings, notes: report.notes.iter().map(dialect::note).collect(), data }
}

fn json_location(location: &crdctl_safety::Location) -> JsonLocation {
    JsonLocation { file: location.file.clone(), line: location.line, column: location.column }
}

fn path_style(dialect: Dialect) -> crdctl_safety::schema::PathStyle {
    match dialect {
        Dialect::Olm => crdctl_safety::schema::PathStyle::Wildcard,
        Dialect::Crdify => crdctl_safety::schema::PathStyle::Verbose,
    }
}

fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The old and new values a change is about, as JSON.
fn change_values(change: &Change) -> (Value, Value) {
    match change {
        Change::ScopeChanged { old, new }
        | Change::TypeChanged { old, new }
        | Change::DescriptionChanged { old, new }
        | Change::PatternChanged { old, new } => (json!(old), json!(new)),
        Change::StoredVersionRemoved { version } => (json!(version), Value::Null),
        Change::FieldRemoved => (Value::Null, Value::Null),
        Change::EnumRestricted { values } | Change::EnumValuesAdded { values } => (Value::Null, json!(values)),
        Change::EnumValuesRemoved { values } => (json!(values), Value::Null),
        Change::DefaultAdded { value } => (Value::Null, value.clone()),
        Change::DefaultRemoved { value } => (value.clone(), Value::Null),
        Change::DefaultChanged { old, new } | Change::BoundTightened { old, new, .. } => (old.clone(), new.clone()),
        Change::BoundAdded { value, .. } => (Value::Null, value.clone()),
        Change::RequiredAdded { fields } => (Value::Null, json!(fields)),
        Change::PatternAdded { new } => (Value::Null, json!(new)),
        Change::PatternRemoved { old } => (json!(old), Value::Null),
        Change::NullableChanged { now_nullable } => (json!(!now_nullable), json!(now_nullable)),
        Change::OneOfAdded { schemas, .. } | Change::OneOfSchemasAdded { schemas } => (Value::Null, json!(schemas)),
        Change::OneOfSchemasRemoved { schemas } => (json!(schemas), Value::Null),
        Change::ApiServerRefusal { .. } => (Value::Null, Value::Null),
        Change::Unknown { keywords } => {
            let old = keywords.iter().map(|k| (k.keyword.clone(), k.old.clone().unwrap_or(Value::Null))).collect();
            let new = keywords.iter().map(|k| (k.keyword.clone(), k.new.clone().unwrap_or(Value::Null))).collect();
            (Value::Object(old), Value::Object(new))
        }
    }
}

/// The findings `dialect` reports, with their index in the report and their message.
fn visible(report: &Report, dialect: Dialect) -> impl Iterator<Item = (usize, &Finding, String)> {
    report.findings.iter().enumerate().filter_map(move |(at, f)| dialect::message(f, dialect).map(|m| (at, f, m)))
}

fn write_markdown(
    out: &mut dyn Write,
    report: &Report,
    dialect: Dialect,
    n_crds: usize,
    data_lines: &[String],
) -> std::io::Result<()> {
    let findings: Vec<(&Finding, String)> = visible(report, dialect).map(|(_, f, m)| (f, m)).collect();
    if findings.is_empty() {
        writeln!(out, "### CRD upgrade safety: passed\n\nAll {n_crds} CRD upgrades are safe.")?;
    } else {
        let errors = findings.iter().filter(|(f, _)| f.severity == Severity::Error).count();
        let verdict = if errors > 0 { "blocked" } else { "passed with warnings" };
        writeln!(out, "### CRD upgrade safety: {verdict}\n")?;
        writeln!(out, "| | CRD | validation | change | where |\n|---|---|---|---|---|")?;
        for (finding, message) in findings {
            let mark = if finding.severity == Severity::Error { "❌" } else { "⚠️" };
            let place = finding.location.as_ref().map(|l| format!("`{}:{}`", l.file, l.line)).unwrap_or_default();
            let message = message.replace('|', "\\|");
            writeln!(
                out,
                "| {mark} | `{}` | {} | {message} | {place} |",
                finding.crd,
                finding.change.validation(&finding.scope)
            )?;
        }
    }
    for note in &report.notes {
        writeln!(out, "\n> {}", dialect::note(note))?;
    }
    if !data_lines.is_empty() {
        writeln!(out, "\n#### Stored objects\n")?;
        for line in data_lines {
            writeln!(out, "- {}", line.replace('|', "\\|"))?;
        }
    }
    Ok(())
}

/// SARIF 2.1.0 for code-scanning tools, with one rule per check.
fn sarif(report: &Report, dialect: Dialect, data: Option<&Data>) -> Value {
    let mut rules: Vec<&'static str> = report.findings.iter().map(|f| f.change.check()).collect();
    if data.is_some_and(|d| !d.findings.is_empty()) {
        rules.push(STORED_OBJECT_RULE);
    }
    rules.sort_unstable();
    rules.dedup();
    let result = |rule: &str, level: &str, text: String, location: Option<&crdctl_safety::Location>| {
        let mut result = json!({"ruleId": rule, "level": level, "message": {"text": text}});
        if let Some(location) = location {
            let locations = json!([{"physicalLocation": {
                "artifactLocation": {"uri": location.file},
                "region": {"startLine": location.line, "startColumn": location.column},
            }}]);
            result.as_object_mut().map(|fields| fields.insert("locations".into(), locations));
        }
        result
    };
    let statics = report.findings.iter().enumerate().filter_map(|(index, finding)| {
        let message = dialect::message(finding, dialect)?;
        let affected = data.and_then(|d| {
            let judged = d.joined.judged.get(&finding.crd).copied().unwrap_or(0);
            d.joined.affected.get(&index).map(|objects| format!(" {}", dialect::data::affected(objects, judged)))
        });
        let level = if finding.severity == Severity::Error { "error" } else { "warning" };
        let text = format!("{}: {message}{}", finding.crd, affected.unwrap_or_default());
        Some(result(finding.change.check(), level, text, finding.location.as_ref()))
    });
    let stored = data
        .into_iter()
        .flat_map(|d| &d.findings)
        .map(|finding| result(STORED_OBJECT_RULE, "warning", dialect::data::line(finding), finding.location.as_ref()));
    let results: Vec<Value> = statics.chain(stored).collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "crdctl",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules.iter().map(|id| json!({"id": id, "shortDescription": {"text": format!("CRD upgrade safety: {id}")}})).collect::<Vec<_>>(),
            }},
            "results": results,
        }],
    })
}

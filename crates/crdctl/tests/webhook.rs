//! `crdctl webhook` against real HTTPS webhooks on loopback: the CronTab example binary, and a
//! deliberately lossy webhook built with the framework.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

const OBJECTS: &str = "apiVersion: example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: local-crontab\n  namespace: default\nhostPort: localhost:1234\n---\napiVersion: example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: remote-crontab\nhostPort: example.com:2345\n";

/// Certificates made by `crdctl webhook certs` for the conversion example's Service, valid for
/// localhost too.
pub(crate) fn certs(dir: &Path) -> PathBuf {
    certs_for(dir, "default/example-conversion-webhook-server")
}

/// Certificates made by `crdctl webhook certs` for Service `namespace/name`, valid for
/// localhost too.
pub(crate) fn certs_for(dir: &Path, service: &str) -> PathBuf {
    let (namespace, name) = service.split_once('/').unwrap();
    let out = dir.join("certs");
    let run = crdctl_in(
        dir,
        &["webhook", "certs", "--service", name, "--namespace", namespace, "--host", "localhost", "--out", "certs"],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    out
}

/// The example webhook, as a real process.
pub(crate) struct ExampleWebhook {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for ExampleWebhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_example(certs: &Path) -> ExampleWebhook {
    start_example_with(certs, &[])
}

/// The example webhook started with extra `args`.
pub(crate) fn start_example_with(certs: &Path, args: &[&str]) -> ExampleWebhook {
    start_named("crontab-conversion-webhook", certs, args)
}

/// The example webhook `example` (a binary under `examples/`), serving `certs`.
pub(crate) fn start_named(example: &str, certs: &Path, args: &[&str]) -> ExampleWebhook {
    // Examples are built next to the test binaries: target/<profile>/examples.
    let exe = std::env::current_exe().unwrap();
    let binary = exe.parent().unwrap().parent().unwrap().join("examples").join(example);
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo test --workspace` (or `cargo build --example {example}`)",
        binary.display()
    );
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(binary)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--tls-cert"])
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .args(args)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the example webhook did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    ExampleWebhook { child, port }
}

fn yaml_documents(text: &str) -> Vec<Value> {
    text.split("---\n").map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap()).collect()
}

#[test]
fn certs_writes_a_ca_a_serving_pair_and_the_ca_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(certs.join("tls.key")).unwrap().permissions().mode() & 0o777, 0o600);
    // Issue 11, defect 7: over an existing, readable key the mode is 0600 again.
    std::fs::set_permissions(certs.join("tls.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let again = self::certs(dir.path());
    assert_eq!(std::fs::metadata(again.join("tls.key")).unwrap().permissions().mode() & 0o777, 0o600);
    let ca = std::fs::read_to_string(certs.join("ca.crt")).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    let bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
    // The caBundle is the CA's PEM in base64: check by decoding with the standard tool.
    let decoded = Command::new("base64")
        .arg("-d")
        .stdin(std::fs::File::open(certs.join("ca-bundle.txt")).unwrap())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(decoded.stdout).unwrap(), ca, "{bundle}");
}

#[test]
fn review_converts_through_the_example_webhook_in_both_review_versions() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).unwrap();
    let webhook = start_example(&certs);
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    for version in ["v1", "v1beta1"] {
        let out = crdctl_in(
            dir.path(),
            &[
                "webhook",
                "review",
                "--url",
                &url,
                "--ca-bundle",
                "certs/ca.crt",
                "--to",
                "example.com/v1",
                "--review-version",
                version,
                "objects.yaml",
            ],
            None,
        );
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(
            yaml_documents(&out.stdout),
            [
                json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "local-crontab", "namespace": "default"}, "host": "localhost", "port": "1234"}),
                json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "remote-crontab"}, "host": "example.com", "port": "2345"}),
            ]
        );
    }
    // A Failed review: exit 1 with the API server's text.
    std::fs::write(dir.path().join("bad.yaml"), OBJECTS.replace("example.com:2345", "no-port")).unwrap();
    let out = crdctl_in(
        dir.path(),
        &["webhook", "review", "--url", &url, "--ca-bundle", "certs/ca.crt", "--to", "example.com/v1", "bad.yaml"],
        None,
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stdout,
        "conversion webhook for example.com/v1beta1, Kind=CronTab failed: hostPort could not be parsed into a separate host and port\n"
    );
    // No trusted CA: the webhook is not reached, exit 2.
    let out =
        crdctl_in(dir.path(), &["webhook", "review", "--url", &url, "--to", "example.com/v1", "objects.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("invalid peer certificate: UnknownIssuer"), "{}", out.stderr);
}

#[test]
fn roundtrip_passes_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).unwrap();
    let webhook = start_example(&certs);
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let out = roundtrip(dir.path(), &url, &[]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "2 objects, 2 round trips, all lossless\n"), "{out:?}");
}

/// `webhook fuzz` finds, from the CRD alone, what the example webhook cannot bring back — each
/// shrunk to the smallest object — in every output format, the same for the same seed.
#[test]
fn fuzz_finds_what_the_example_webhook_loses() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    std::fs::copy(repo_root().join("examples/crontab/4-webhook.yaml"), dir.path().join("crd.yaml")).unwrap();
    let webhook = start_example(&certs);
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let fuzz = |extra: &[&str]| {
        let mut args = vec!["webhook", "fuzz", "--url", &url, "--ca-bundle", "certs/ca.crt", "--crd", "crd.yaml"];
        args.extend(extra);
        crdctl_in(dir.path(), &args, None)
    };
    let out = fuzz(&["--seed", "1", "--count", "20", "-o", "json"]);
    assert_eq!(out.code, 1, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let report = &report[0];
    assert_eq!(report["roundTrips"], 40, "{report}");
    let findings = report["findings"].as_array().unwrap();
    let port = findings
        .iter()
        .find(|f| f["path"] == ".port" && f["verdict"] == "defaulted")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(port["route"], serde_json::json!(["example.com/v1", "example.com/v1beta1", "example.com/v1"]));
    assert_eq!((port["before"].clone(), port["after"].clone()), (serde_json::Value::Null, serde_json::json!("")));
    let refused = findings.iter().find(|f| f["verdict"] == "refused").unwrap_or_else(|| panic!("{report:#}"));
    assert!(refused["after"].as_str().unwrap().ends_with("hostPort could not be parsed into a separate host and port"));
    assert_eq!(fuzz(&["--seed", "1", "--count", "20", "-o", "json"]).stdout, out.stdout, "the seed decides");

    let text = fuzz(&["--seed", "1", "--count", "20"]);
    assert!(
        text.stdout.contains("example.com/v1 -> example.com/v1beta1 -> example.com/v1: .port: defaulted: (absent) -> \"\"\n  smallest object: {\"host\":"),
        "{text:?}"
    );
    assert!(text.stdout.contains("example.com/v1beta1 cannot represent example.com/v1's .host\n"), "{text:?}");
    assert!(text.stdout.contains("crontabs.example.com: example.com/v1 20 kept, 0 rejected, example.com/v1beta1 20 kept, 0 rejected; 40 round trips, "), "{text:?}");
    let markdown = fuzz(&["--seed", "1", "--count", "20", "-o", "markdown"]);
    assert!(markdown.stdout.starts_with("| round trip | field | verdict |"), "{markdown:?}");
}

/// `webhook fuzz --live` fuzzes the objects a cluster stores: with nothing made (`--count 0`),
/// a stored CronTab with a host and no port is the finding, shrunk from the stored object.
#[test]
fn fuzz_seeds_from_the_objects_a_cluster_stores() {
    use crate::serve::{Backend, Kubectl, Served};
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let webhook = start_example(&certs);
    let served = Served::start_on(Backend::Redb, &[]);
    let k = Kubectl::new("1.33", &served);
    k.apply(&std::fs::read_to_string(repo_root().join("examples/crontab/3-v1-storage.yaml")).unwrap());
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    k.apply("apiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: hostonly, namespace: default}\nhost: db.internal\n");
    std::fs::copy(repo_root().join("examples/crontab/4-webhook.yaml"), dir.path().join("crd.yaml")).unwrap();
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let kubeconfig = served.kubeconfig.to_str().unwrap();
    let args = ["webhook", "fuzz", "--url", &url, "--ca-bundle", "certs/ca.crt", "--crd", "crd.yaml", "--count", "0"];
    let out = crdctl_in(dir.path(), &[&args[..], &["--live", "--kubeconfig", kubeconfig, "-o", "json"]].concat(), None);
    assert_eq!(out.code, 1, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let versions = &report[0]["versions"];
    assert_eq!(versions[0], serde_json::json!({"version": "example.com/v1", "kept": 1, "rejected": 0}), "{report:#}");
    let findings = report[0]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report:#}");
    assert_eq!((findings[0]["path"].as_str(), findings[0]["verdict"].as_str()), (Some(".port"), Some("defaulted")));
    assert_eq!(findings[0]["object"]["metadata"]["name"], "hostonly");
    assert_eq!(findings[0]["object"]["host"], "db.internal");
}

/// Issue 11, defect 3: `--crd DIR` picks each object's CRD by group and kind, and says why when
/// there is none (it used to panic on an empty directory and take the first of several).
#[test]
fn roundtrip_finds_each_objects_crd_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).unwrap();
    std::fs::create_dir_all(dir.path().join("crds/empty")).unwrap();
    let other = std::fs::read_to_string(repo_root().join("examples/crontab/1-v1beta1.yaml")).unwrap();
    let other = other
        .replace("crontabs.example.com", "crontabs.other.example.com")
        .replace("group: example.com", "group: other.example.com");
    std::fs::write(dir.path().join("crds/a-other.yaml"), other).unwrap();
    std::fs::copy(repo_root().join("examples/crontab/4-webhook.yaml"), dir.path().join("crds/b-crontab.yaml")).unwrap();
    let webhook = start_example(&certs);
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let args = |crd: &str| -> Vec<String> {
        ["webhook", "roundtrip", "--url", &url, "--ca-bundle", "certs/ca.crt", "--crd", crd, "objects.yaml"]
            .map(String::from)
            .to_vec()
    };
    let run = |crd: &str| {
        let args = args(crd);
        crdctl_in(dir.path(), &args.iter().map(String::as_str).collect::<Vec<_>>(), None)
    };
    let out = run("crds");
    assert_eq!((out.code, out.stdout.as_str()), (0, "2 objects, 2 round trips, all lossless\n"), "{out:?}");
    let out = run("crds/empty");
    assert_eq!((out.code, out.stderr.as_str()), (2, "crdctl: crds/empty: no CustomResourceDefinition found\n"));
    std::fs::remove_file(dir.path().join("crds/b-crontab.yaml")).unwrap();
    let out = run("crds");
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr,
        "crdctl: default/local-crontab: no CRD in crds defines kind \"CronTab\" in group \"example.com\" (it has crontabs.other.example.com (CronTab))\n"
    );
}

/// `crdctl webhook roundtrip` of `objects.yaml` in `dir` against the CronTab CRD, trusting `certs/ca.crt`.
fn roundtrip(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let crd = repo_root().join("examples/crontab/4-webhook.yaml");
    let mut args =
        vec!["webhook", "roundtrip", "--url", url, "--ca-bundle", "certs/ca.crt", "--crd", crd.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("objects.yaml");
    crdctl_in(dir, &args, None)
}

/// Drops `port` on the way to v1beta1: a classic lossy conversion.
fn lossy(mut object: Value, desired: &str) -> Result<Value, String> {
    let fields = object.as_object_mut().unwrap();
    if desired == "example.com/v1beta1" {
        let host = fields.remove("host").and_then(|h| h.as_str().map(str::to_owned)).unwrap_or_default();
        fields.remove("port");
        fields.insert("hostPort".into(), json!(host));
    } else if let Some(host_port) = fields.remove("hostPort") {
        let text = host_port.as_str().unwrap_or_default().to_string();
        let (host, port) = text.split_once(':').unwrap_or((text.as_str(), ""));
        fields.insert("host".into(), json!(host));
        fields.insert("port".into(), json!(port));
    }
    Ok(object)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roundtrip_catches_a_lossy_converter() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    std::fs::write(
        dir.path().join("objects.yaml"),
        "apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: web\n  namespace: prod\nhost: example.com\nport: \"8443\"\n",
    )
    .unwrap();
    let options = crdctl_conversion::framework::Options::new(
        "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        certs.join("tls.crt"),
        certs.join("tls.key"),
    );
    let server = crdctl_conversion::framework::start(options, lossy).await.unwrap();
    let url = format!("https://localhost:{}/crdconvert", server.address.port());
    let dir_path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || roundtrip(&dir_path, &url, &["-o", "json"])).await.unwrap();
    assert_eq!(out.code, 1, "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        report["lossy"],
        json!([{
            "object": "prod/web",
            "from": "example.com/v1",
            "through": "example.com/v1beta1",
            "differences": [{"path": ".port", "before": "8443", "after": ""}]
        }])
    );
    // Every other format, whole (issue 11: outputs are checked by snapshot, not by prefix).
    for format in ["text", "yaml", "markdown"] {
        let (dir_path, url) =
            (dir.path().to_path_buf(), format!("https://localhost:{}/crdconvert", server.address.port()));
        let out = tokio::task::spawn_blocking(move || roundtrip(&dir_path, &url, &["-o", format])).await.unwrap();
        assert_eq!(out.code, 1, "{format}: {out:?}");
        insta::assert_snapshot!(format!("roundtrip-lossy-{format}"), out.stdout);
    }
    server.shutdown().await.unwrap();
}

//! Conversion fuzzing throughput on corpus CRDs: objects made per second from a version's
//! schema (the baseline, measured in the same run), then objects made, validated and taken
//! around every route through an in-process conversion (as a share of making alone), and
//! through a webhook over loopback HTTPS (as a share of in process: every route of an object
//! over n versions costs n−1 + (n−1)(n−2) round trips, each conversion one request).
//!
//! The conversion only sets `apiVersion` (nothing is lost, so no time goes to shrinking): the
//! rates are the fuzzer's own costs — generation, the version's validation with its CEL rules,
//! the round trips and the comparison.
//!
//! Run: `cargo bench -p crdctl-bench --bench fuzz`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use crdctl_conversion::framework::{self, Options};
use crdctl_conversion::fuzz::{self, InProcess};
use crdctl_conversion::webhook::{DnsResolver, WebhookClient};
use crdctl_model::crd::WebhookClientConfig;
use crdctl_schema::Schema;
use crdctl_schema::generate::Generator;
use serde_json::Value;

/// Objects per version in each measured run.
const OBJECTS: usize = 200;

const CRDS: &[&str] = &[
    "gatekeeper/constrainttemplate-customresourcedefinition.v3.23.0.yaml",
    "cert-manager/certificates.cert-manager.io.v1.5.0.yaml",
    "gateway-api/gateway.networking.k8s.io_httproutes.standard.v1.6.0.yaml",
];

fn retag(mut object: Value, to: &str) -> Result<Value, String> {
    object["apiVersion"] = Value::String(to.into());
    Ok(object)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let bundle = crdctl_conversion::certs::generate(&["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &bundle.cert_pem).unwrap();
    std::fs::write(&key, &bundle.key_pem).unwrap();
    let server = framework::start(Options::new("127.0.0.1:0".parse().unwrap(), cert, key), retag).await.unwrap();
    let config = WebhookClientConfig {
        url: Some(format!("https://localhost:{}/crdconvert", server.address.port())),
        service: None,
        ca_bundle: Some(bundle.ca_bundle()),
    };
    let webhook = WebhookClient::new(&config, &["v1".into()], &DnsResolver).unwrap();
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");

    println!(
        "{:<46} {:>8} {:>9} {:>13} {:>7} {:>10} {:>12}",
        "CRD", "versions", "made/s", "in-process/s", "÷made", "webhook/s", "÷in-process"
    );
    for file in CRDS {
        let crd = crdctl_model::load::load_file(&corpus.join(file)).unwrap().remove(0);
        let versions = crd.definition.served_versions_by_priority().len();
        let made = making(&crd);
        let options = fuzz::Options { seed: 1, objects: OBJECTS, size: 3 };
        let timed = |started: Instant, report: fuzz::Report| {
            assert!(report.findings.is_empty(), "{:?}", report.findings.first());
            (OBJECTS * versions) as f64 / started.elapsed().as_secs_f64()
        };
        let started = Instant::now();
        let in_process = timed(started, fuzz::run(&crd, &InProcess(retag), options, &[]).await.unwrap());
        let started = Instant::now();
        let through_webhook = timed(started, fuzz::run(&crd, &webhook, options, &[]).await.unwrap());
        println!(
            "{:<46} {versions:>8} {made:>9.0} {in_process:>13.0} {:>6.2}× {through_webhook:>10.0} {:>11.3}×",
            crd.name(),
            in_process / made,
            through_webhook / in_process
        );
    }
}

/// Objects made per second from the CRD's served versions' schemas, nothing else.
fn making(crd: &crdctl_model::Crd) -> f64 {
    let schemas: Vec<Schema> =
        (0..crd.definition.spec.versions.len()).filter_map(|i| crd.schema(i)).map(Schema::new).collect();
    let started = Instant::now();
    let mut made = 0;
    for (at, schema) in schemas.iter().enumerate() {
        let mut generator = Generator::new(at as u64, 3);
        for n in 0..OBJECTS {
            std::hint::black_box(generator.resource(schema, "example.com/v1", "Kind", &format!("o-{n}"), None));
            made += 1;
        }
    }
    f64::from(made) / started.elapsed().as_secs_f64()
}

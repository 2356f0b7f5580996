//! The webhook client against real HTTPS servers on loopback, with certificates made here: the
//! framework running the CronTab example, and a deliberately misbehaving webhook.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use crdctl_conversion::certs::{self, Bundle};
use crdctl_conversion::framework::{self, Options};
use crdctl_conversion::webhook::WebhookClient;
use crdctl_conversion::{ConversionReview, Converter, ReviewVersion, Shape};
use crdctl_model::crd::{ServiceReference, WebhookClientConfig};
use serde_json::{Value, json};

const SERVICE: &str = "crontab-webhook";
const NAMESPACE: &str = "default";

fn bundle() -> Bundle {
    let mut names = certs::service_names(SERVICE, NAMESPACE);
    names.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
    certs::generate(&names).unwrap()
}

struct Webhook {
    address: SocketAddr,
    bundle: Bundle,
    _dir: tempfile::TempDir,
    server: framework::Server,
}

async fn start_example() -> Webhook {
    let bundle = bundle();
    let dir = tempfile::tempdir().unwrap();
    let options = Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, dir.path()).unwrap();
    let server = framework::start(options, convert::convert_crontab).await.unwrap();
    Webhook { address: server.address, bundle, _dir: dir, server }
}

fn url_client(address: SocketAddr, ca_bundle: &str, versions: &[&str]) -> WebhookClient {
    let config = WebhookClientConfig {
        url: Some(format!("https://localhost:{}/crdconvert", address.port())),
        ca_bundle: Some(ca_bundle.into()),
        service: None,
    };
    let versions: Vec<String> = versions.iter().map(|s| s.to_string()).collect();
    WebhookClient::new(&config, &versions, &crdctl_conversion::webhook::DnsResolver).unwrap()
}

fn service_client(address: SocketAddr, name: &str, ca_bundle: &str) -> WebhookClient {
    let service = ServiceReference {
        namespace: NAMESPACE.into(),
        name: name.into(),
        path: Some("/crdconvert".into()),
        port: Some(i64::from(address.port())),
    };
    let config = WebhookClientConfig { url: None, service: Some(service), ca_bundle: Some(ca_bundle.into()) };
    let resolver = move |_: &ServiceReference, port: u16| Ok(SocketAddr::new(address.ip(), port));
    WebhookClient::new(&config, &["v1".into()], &resolver).unwrap()
}

/// Calls reuse one connection; one the webhook's side closed while it was idle is replaced.
#[tokio::test]
async fn calls_share_a_connection_and_replace_one_the_webhook_closed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let webhook = start_example().await;
    // A proxy in front of the webhook, counting connections and able to drop them.
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_address = proxy.local_addr().unwrap();
    let (accepted, pipes) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let (counted, kept) = (Arc::clone(&accepted), Arc::clone(&pipes));
    let target = webhook.address;
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = proxy.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let pipe = tokio::spawn(async move {
                let mut outbound = tokio::net::TcpStream::connect(target).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
            kept.lock().unwrap().push(pipe);
        }
    });
    let client = url_client(proxy_address, &webhook.bundle.ca_bundle(), &["v1"]);
    for _ in 0..3 {
        assert_eq!(client.convert(seed_objects(), "example.com/v1", Shape::List).await.unwrap(), seed_converted());
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for three calls");
    for pipe in pipes.lock().unwrap().drain(..) {
        pipe.abort();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(client.convert(seed_objects(), "example.com/v1", Shape::List).await.unwrap(), seed_converted());
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "a new connection for the one closed");
    webhook.server.shutdown().await.unwrap();
}

fn seed_objects() -> Vec<Value> {
    vec![
        json!({"kind": "CronTab", "apiVersion": "example.com/v1beta1", "metadata": {"creationTimestamp": "2019-09-04T14:03:02Z", "name": "local-crontab", "namespace": "default", "resourceVersion": "143", "uid": "3415a7fc-162b-4300-b5da-fd6083580d66"}, "hostPort": "localhost:1234"}),
        json!({"kind": "CronTab", "apiVersion": "example.com/v1beta1", "metadata": {"creationTimestamp": "2019-09-03T13:02:01Z", "name": "remote-crontab", "resourceVersion": "12893", "uid": "359a83ec-b575-460d-b553-d859cedde8a0"}, "hostPort": "example.com:2345"}),
    ]
}

fn seed_converted() -> Vec<Value> {
    vec![
        json!({"kind": "CronTab", "apiVersion": "example.com/v1", "metadata": {"creationTimestamp": "2019-09-04T14:03:02Z", "name": "local-crontab", "namespace": "default", "resourceVersion": "143", "uid": "3415a7fc-162b-4300-b5da-fd6083580d66"}, "host": "localhost", "port": "1234"}),
        json!({"kind": "CronTab", "apiVersion": "example.com/v1", "metadata": {"creationTimestamp": "2019-09-03T13:02:01Z", "name": "remote-crontab", "resourceVersion": "12893", "uid": "359a83ec-b575-460d-b553-d859cedde8a0"}, "host": "example.com", "port": "2345"}),
    ]
}

/// A reqwest client that trusts the test CA, for raw requests.
fn raw_client(bundle: &Bundle) -> reqwest::Client {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(bundle.ca_pem.as_bytes()).unwrap()).unwrap();
    let tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().unwrap()
}

#[tokio::test]
async fn the_seed_review_converts_in_both_review_versions() {
    let webhook = start_example().await;
    let http = raw_client(&webhook.bundle);
    for version in [ReviewVersion::V1, ReviewVersion::V1beta1] {
        let review = ConversionReview::request(
            version,
            "705ab4f5-6393-11e8-b7cc-42010a800002",
            "example.com/v1",
            seed_objects(),
        );
        let reply = http
            .post(format!("https://localhost:{}/crdconvert?timeout=30s", webhook.address.port()))
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&review).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        let answer: Value = serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap();
        assert_eq!(
            answer,
            json!({
                "apiVersion": version.api_version(),
                "kind": "ConversionReview",
                "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "convertedObjects": seed_converted(), "result": {"status": "Success"}}
            })
        );
    }
    let health = http.get(format!("https://localhost:{}/healthz", webhook.address.port())).send().await.unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    webhook.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_client_converts_through_url_and_service_references() {
    let webhook = start_example().await;
    let ca = webhook.bundle.ca_bundle();
    for client in [
        url_client(webhook.address, &ca, &["v1", "v1beta1"]),
        url_client(webhook.address, &ca, &["v1beta1"]),
        service_client(webhook.address, SERVICE, &ca),
    ] {
        let converted = client.convert(seed_objects(), "example.com/v1", Shape::List).await.unwrap();
        assert_eq!(converted, seed_converted(), "{:?}", client.review_version());
        // And back: v1 → v1beta1 restores hostPort.
        let back = client.convert(converted, "example.com/v1beta1", Shape::List).await.unwrap();
        assert_eq!(back, seed_objects());
    }
    webhook.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn objects_already_in_the_desired_version_are_not_sent() {
    let webhook = start_example().await;
    let client = url_client(webhook.address, &webhook.bundle.ca_bundle(), &["v1"]);
    let mut mixed = seed_objects();
    mixed.insert(1, seed_converted()[0].clone());
    let converted = client.convert(mixed, "example.com/v1", Shape::List).await.unwrap();
    assert_eq!(converted, [seed_converted()[0].clone(), seed_converted()[0].clone(), seed_converted()[1].clone()]);
    // Nothing to convert means no request at all: a stopped webhook is not needed.
    webhook.server.shutdown().await.unwrap();
    assert_eq!(client.convert(seed_converted(), "example.com/v1", Shape::List).await.unwrap(), seed_converted());
}

#[tokio::test]
async fn a_bad_host_port_is_a_failed_review() {
    let webhook = start_example().await;
    let client = url_client(webhook.address, &webhook.bundle.ca_bundle(), &["v1"]);
    let mut bad = seed_objects();
    bad[1]["hostPort"] = json!("no-port-here");
    let err = client.convert(bad, "example.com/v1", Shape::List).await.unwrap_err();
    assert_eq!(
        err.message,
        "conversion webhook for example.com/v1beta1, Kind=CronTab failed: hostPort could not be parsed into a separate host and port"
    );
    let converter = Converter::Webhook(Box::new(client));
    let err = converter.convert(vec![json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": "x"}, "hostPort": "a:b:c"})], "example.com/v1", Shape::Object).await.unwrap_err();
    assert!(err.message.ends_with("hostPort could not be parsed into a separate host and port"));
    webhook.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn tls_is_verified_against_the_ca_bundle_and_the_service_name() {
    let webhook = start_example().await;
    let other_ca = bundle().ca_bundle();
    let err = url_client(webhook.address, &other_ca, &["v1"])
        .convert(seed_objects(), "example.com/v1", Shape::List)
        .await
        .unwrap_err();
    assert!(err.message.starts_with(&format!("conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post \"https://localhost:{}/crdconvert?timeout=30s\": ", webhook.address.port())), "{}", err.message);
    assert!(
        err.message.ends_with(": invalid peer certificate: BadSignature")
            || err.message.ends_with(": invalid peer certificate: UnknownIssuer"),
        "{}",
        err.message
    );
    let err = service_client(webhook.address, "another-service", &webhook.bundle.ca_bundle())
        .convert(seed_objects(), "example.com/v1", Shape::List)
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("invalid peer certificate: certificate not valid for name \"another-service.default.svc\""),
        "{}",
        err.message
    );
    webhook.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn certificates_are_reloaded_when_the_files_change() {
    let first = bundle();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &first.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &first.key_pem).unwrap();
    let mut options =
        Options::new("127.0.0.1:0".parse().unwrap(), dir.path().join("tls.crt"), dir.path().join("tls.key"));
    options.reload_interval = Duration::from_millis(100);
    let server = framework::start(options, convert::convert_crontab).await.unwrap();
    let second = bundle();
    assert!(
        url_client(server.address, &second.ca_bundle(), &["v1"])
            .convert(seed_objects(), "example.com/v1", Shape::List)
            .await
            .is_err()
    );
    // Rotate: new files in place, as cert-manager does.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    std::fs::write(dir.path().join("tls.key"), &second.key_pem).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &second.cert_pem).unwrap();
    let client = url_client(server.address, &second.ca_bundle(), &["v1"]);
    let mut converted = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(objects) = client.convert(seed_objects(), "example.com/v1", Shape::List).await {
            converted = Some(objects);
            break;
        }
    }
    assert_eq!(converted, Some(seed_converted()), "the new certificate was never served");
    server.shutdown().await.unwrap();
}

/// How the misbehaving webhook lies.
#[derive(Debug, Clone, Copy)]
enum Lie {
    Http500,
    InvalidJson,
    WrongUid,
    WrongCount,
    ChangedName,
    ChangedNamespace,
    ChangedUid,
    WrongApiVersion,
    WrongReviewKind,
    Slow,
    Huge,
}

async fn lie(State(lie): State<Lie>, body: Bytes) -> Response {
    let review: ConversionReview = serde_json::from_slice(&body).unwrap();
    let request = review.request.unwrap();
    let version = ReviewVersion::from_api_version(&review.api_version).unwrap();
    let mut objects: Vec<Value> = request
        .objects
        .into_iter()
        .map(|o| convert::convert_crontab(o, &request.desired_api_version).unwrap())
        .collect();
    for object in &mut objects {
        object["apiVersion"] = json!(request.desired_api_version);
    }
    let mut uid = request.uid.clone();
    match lie {
        Lie::Http500 => return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        Lie::InvalidJson => return "this is not json".into_response(),
        Lie::WrongUid => uid = "not-the-uid".into(),
        Lie::WrongCount => {
            objects.pop();
        }
        Lie::ChangedName => objects[0]["metadata"]["name"] = json!("renamed"),
        Lie::ChangedNamespace => objects[0]["metadata"]["namespace"] = json!("elsewhere"),
        Lie::ChangedUid => objects[0]["metadata"]["uid"] = json!("other-uid"),
        Lie::WrongApiVersion => objects[0]["apiVersion"] = json!("example.com/v1beta1"),
        Lie::WrongReviewKind => {
            let mut answer = ConversionReview::success(version, &uid, objects);
            answer.kind = "AdmissionReview".into();
            return axum::Json(answer).into_response();
        }
        Lie::Slow => tokio::time::sleep(Duration::from_secs(5)).await,
        Lie::Huge => {
            // 65 MiB of valid JSON: the client stops reading at its limit.
            let mut answer = serde_json::to_vec(&ConversionReview::success(version, &uid, objects)).unwrap();
            answer.truncate(answer.len() - 1);
            answer.extend_from_slice(b",\"padding\":\"");
            answer.resize(answer.len() + (65 << 20), b'x');
            answer.extend_from_slice(b"\"}");
            return ([("Content-Type", "application/json")], answer).into_response();
        }
    }
    axum::Json(ConversionReview::success(version, &uid, objects)).into_response()
}

async fn start_liar(lie_mode: Lie, bundle: &Bundle) -> (SocketAddr, axum_server::Handle<SocketAddr>) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
        bundle.cert_pem.clone().into_bytes(),
        bundle.key_pem.clone().into_bytes(),
    )
    .await
    .unwrap();
    let app = axum::Router::new().route("/crdconvert", axum::routing::post(lie)).with_state(lie_mode);
    let handle = axum_server::Handle::new();
    let server = axum_server::bind_rustls("127.0.0.1:0".parse::<SocketAddr>().unwrap(), tls).handle(handle.clone());
    tokio::spawn(server.serve(app.into_make_service()));
    (handle.listening().await.unwrap(), handle)
}

#[tokio::test]
async fn lies_are_caught_with_the_api_servers_messages() {
    let bundle = bundle();
    let prefix = "conversion webhook for example.com/v1beta1, Kind=CronTab";
    let cases: Vec<(Lie, Shape, String)> = vec![
        (
            Lie::Http500,
            Shape::List,
            format!("{prefix} failed: an error on the server (\"boom\") has prevented the request from succeeding"),
        ),
        (
            Lie::InvalidJson,
            Shape::List,
            format!("{prefix} failed: couldn't get version/kind; json parse error: expected ident at line 1 column 2"),
        ),
        (Lie::WrongCount, Shape::List, format!("{prefix} returned 1 objects, expected 2")),
        (
            Lie::ChangedName,
            Shape::List,
            format!(
                "{prefix} returned invalid converted object at index 0: must have the same name: local-crontab != renamed"
            ),
        ),
        (
            Lie::ChangedNamespace,
            Shape::Object,
            format!("{prefix} returned invalid object: must have the same namespace: default != elsewhere"),
        ),
        (
            Lie::ChangedUid,
            Shape::Object,
            format!(
                "{prefix} returned invalid object: must have the same UID: 3415a7fc-162b-4300-b5da-fd6083580d66 != other-uid"
            ),
        ),
        (
            Lie::WrongApiVersion,
            Shape::List,
            format!(
                "{prefix} returned invalid converted object at index 0: invalid groupVersion (expected example.com/v1, received example.com/v1beta1)"
            ),
        ),
        (
            Lie::WrongReviewKind,
            Shape::List,
            format!(
                "{prefix} failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, Kind=AdmissionReview"
            ),
        ),
        // Issue 11, defect 6: said as such, not as the parse error of a cut body.
        (Lie::Huge, Shape::List, format!("{prefix} failed: response too large (limit 64 MiB)")),
    ];
    for (lie_mode, shape, expected) in cases {
        let (address, handle) = start_liar(lie_mode, &bundle).await;
        let client = url_client(address, &bundle.ca_bundle(), &["v1"]);
        let err = client.convert(seed_objects(), "example.com/v1", shape).await.unwrap_err();
        assert_eq!(err.message, expected, "{lie_mode:?}");
        handle.shutdown();
    }
    // The uid is checked in v1 and, for backward compatibility, not in v1beta1.
    let (address, handle) = start_liar(Lie::WrongUid, &bundle).await;
    let v1 = url_client(address, &bundle.ca_bundle(), &["v1"])
        .convert(seed_objects(), "example.com/v1", Shape::List)
        .await
        .unwrap_err();
    assert!(
        v1.message.starts_with(&format!("{prefix} failed: expected response.uid=\""))
            && v1.message.ends_with("\", got \"not-the-uid\""),
        "{}",
        v1.message
    );
    let v1beta1 = url_client(address, &bundle.ca_bundle(), &["v1beta1"])
        .convert(seed_objects(), "example.com/v1", Shape::List)
        .await
        .unwrap();
    assert_eq!(v1beta1, seed_converted());
    handle.shutdown();
}

#[tokio::test]
async fn a_slow_webhook_times_out() {
    let bundle = bundle();
    let (address, handle) = start_liar(Lie::Slow, &bundle).await;
    let client = url_client(address, &bundle.ca_bundle(), &["v1"]).with_timeout(Duration::from_secs(1));
    let started = std::time::Instant::now();
    let err = client.convert(seed_objects(), "example.com/v1", Shape::List).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(
        err.message,
        format!(
            "conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post \"https://localhost:{}/crdconvert?timeout=1s\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            address.port()
        )
    );
    handle.shutdown();
}

#[tokio::test]
async fn plain_http_is_refused() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/crdconvert", axum::routing::post(|| async { "{}" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let ca = bundle().ca_bundle();
    let err =
        url_client(address, &ca, &["v1"]).convert(seed_objects(), "example.com/v1", Shape::List).await.unwrap_err();
    assert!(
        err.message
            .starts_with("conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post \"https://localhost:"),
        "{}",
        err.message
    );
    // And an http:// URL is refused before any request.
    let config = WebhookClientConfig {
        url: Some(format!("http://localhost:{}/crdconvert", address.port())),
        ..Default::default()
    };
    let err = WebhookClient::new(&config, &["v1".into()], &crdctl_conversion::webhook::DnsResolver).unwrap_err();
    assert!(err.message.contains("'https' is the only allowed URL scheme"), "{}", err.message);
}

#[tokio::test]
async fn oversized_and_malformed_reviews_are_rejected_by_the_framework() {
    let webhook = start_example().await;
    let http = raw_client(&webhook.bundle);
    let url = format!("https://localhost:{}/crdconvert", webhook.address.port());
    let big = vec![b' '; 9 << 20];
    assert_eq!(http.post(&url).body(big).send().await.unwrap().status(), 413);
    let reply = http.post(&url).body("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}").send().await.unwrap();
    assert_eq!(reply.status(), 400);
    assert_eq!(reply.text().await.unwrap(), "Unsupported group version kind: v1, Kind=Pod");
    webhook.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_requests_in_flight_finish() {
    let bundle = bundle();
    let dir = tempfile::tempdir().unwrap();
    let options = Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, dir.path()).unwrap();
    let slow = |object: Value, desired: &str| {
        std::thread::sleep(Duration::from_millis(500));
        convert::convert_crontab(object, desired)
    };
    let server = framework::start(options, slow).await.unwrap();
    let client = url_client(server.address, &bundle.ca_bundle(), &["v1"]);
    let in_flight =
        tokio::spawn(async move { client.convert(seed_objects()[..1].to_vec(), "example.com/v1", Shape::List).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let address = server.address;
    server.shutdown().await.unwrap();
    assert_eq!(in_flight.await.unwrap().unwrap(), seed_converted()[..1].to_vec(), "the request in flight completed");
    assert!(tokio::net::TcpStream::connect(address).await.is_err(), "no new connections after shutdown");
}

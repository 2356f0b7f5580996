//! The CronTab admission webhooks, served by crdctl's webhook framework: `/mutate` defaults a
//! missing `port` to `"80"`; `/validate` refuses a `host` that is not a DNS name, and refuses
//! changing a CronTab labelled `example.com/frozen: "true"`.
//!
//! ```sh
//! crdctl webhook certs --service crontab-admission --namespace default --host 127.0.0.1 --out certs
//! cargo run --release --example crontab-admission-webhook -- \
//!     --listen 127.0.0.1:9444 --tls-cert certs/tls.crt --tls-key certs/tls.key
//! ```
//!
//! Then register it with `examples/crontab/admission-webhooks.yaml`, the `caBundle` filled in.
#![allow(clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use crdctl_conversion::admission::{self, AdmissionRequest, Verdict};
use crdctl_conversion::framework::{Options, shutdown_signal, start_app};

/// Serve the CronTab admission webhooks over HTTPS.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9444")]
    listen: SocketAddr,
    /// PEM certificate chain.
    #[arg(long)]
    tls_cert: PathBuf,
    /// PEM private key.
    #[arg(long)]
    tls_key: PathBuf,
}

/// Defaults `port` to `"80"`.
fn mutate(request: &AdmissionRequest) -> Verdict {
    match request.object_field("/port") {
        None => Verdict::allow().add("/port", "80".into()),
        Some(_) => Verdict::allow(),
    }
}

/// Refuses hosts that are not DNS names, and any change to a frozen CronTab.
fn validate(request: &AdmissionRequest) -> Verdict {
    let frozen = |object: Option<&serde_json::Value>| {
        object.and_then(|o| o.pointer("/metadata/labels/example.com~1frozen")).and_then(|v| v.as_str()) == Some("true")
    };
    if request.operation != "CREATE" && frozen(request.old_object.as_ref()) {
        return Verdict::deny(format!("CronTab {} is frozen", request.name));
    }
    let host = request.object_field("/host").and_then(|h| h.as_str()).unwrap_or_default();
    let dns_name = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    });
    match (host, dns_name) {
        ("", _) | (_, true) => Verdict::allow(),
        (host, false) => Verdict::deny(format!("host {host:?} is not a DNS name")),
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let app = admission::router().mutating("/mutate", mutate).validating("/validate", validate).build();
    let server = match start_app(Options::new(args.listen, args.tls_cert, args.tls_key), app).await {
        Ok(server) => server,
        Err(err) => {
            eprintln!("crontab-admission-webhook: {err}");
            std::process::exit(1);
        }
    };
    shutdown_signal().await;
    if let Err(err) = server.shutdown().await {
        eprintln!("crontab-admission-webhook: {err}");
        std::process::exit(1);
    }
}

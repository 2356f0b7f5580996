//! The CronTab conversion webhook: `example.com/v1beta1` (`hostPort`) ↔ `example.com/v1`
//! (`host`, `port`), served on `/crdconvert` by crdctl's webhook framework.
//!
//! ```sh
//! crdctl webhook certs --service example-conversion-webhook-server --namespace default --host 127.0.0.1 --out certs
//! cargo run --release --example crontab-conversion-webhook -- \
//!     --listen 127.0.0.1:9443 --tls-cert certs/tls.crt --tls-key certs/tls.key
//! ```
#![allow(clippy::print_stderr)]

mod convert;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use crdctl_conversion::framework::{Options, serve, shutdown_signal};

/// Serve the CronTab conversion webhook over HTTPS.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9443")]
    listen: SocketAddr,
    /// PEM certificate chain.
    #[arg(long)]
    tls_cert: PathBuf,
    /// PEM private key.
    #[arg(long)]
    tls_key: PathBuf,
    /// Drop the port when converting back to v1beta1, as a buggy webhook would: what
    /// `crdctl check --objects` catches by converting each object there and back.
    #[arg(long)]
    lose_port: bool,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let options = Options::new(args.listen, args.tls_cert, args.tls_key);
    let lose_port = args.lose_port;
    let convert = move |object, desired: &str| {
        let mut converted = convert::convert_crontab(object, desired)?;
        if lose_port && let Some(host_port) = converted.get_mut("hostPort") {
            let host = host_port.as_str().unwrap_or_default().split(':').next().unwrap_or_default();
            *host_port = format!("{host}:").into();
        }
        Ok(converted)
    };
    if let Err(err) = serve(options, convert, shutdown_signal()).await {
        eprintln!("crontab-conversion-webhook: {err}");
        std::process::exit(1);
    }
}

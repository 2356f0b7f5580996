//! `crdctl serve`: a Kubernetes-compatible API server for CRDs and custom resources.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use crdctl_server::controller::Controllers;
use crdctl_server::registry::ranges::{Cidr, ServiceRanges};
use crdctl_server::{Config, Server, UpgradeSafety};

use super::Outcome;

/// The flags of `crdctl serve` (its help text is on `Command::Serve`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Directory of the on-disk store (and of the kubeconfig).
    #[arg(long, default_value = ".crdctl", conflicts_with = "in_memory")]
    data: PathBuf,
    /// Keep everything in memory; nothing survives a restart.
    #[arg(long, conflicts_with = "etcd")]
    in_memory: bool,
    #[command(flatten)]
    etcd: super::etcd::EtcdArgs,
    /// With --etcd: serve watches and resourceVersion="0" lists from a watch cache per
    /// resource, as kube-apiserver does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    watch_cache: bool,
    /// PEM certificate for HTTPS.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// More CAs (PEM) whose client certificates authenticate: the subject's common name is the
    /// user, its organizations the groups, as kube-apiserver's flag. The server's own client
    /// CA (kept in the store; the kubeconfig's certificate is one of its) is always trusted.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    client_ca_file: Option<PathBuf>,
    /// File holding the bearer token every request must carry.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// More users, by bearer token: a CSV file of `token,user,uid,"group1,group2"` rows, as
    /// kube-apiserver's flag.
    #[arg(long, value_name = "FILE")]
    token_auth_file: Option<PathBuf>,
    /// Serve requests that carry no credentials as `system:anonymous` (in
    /// `system:unauthenticated`) instead of refusing them; only with a token or token file.
    #[arg(long)]
    anonymous_auth: bool,
    /// How requests are authorized: AlwaysAllow (every authenticated request), or RBAC (the
    /// Roles, ClusterRoles and bindings in the server; `system:masters` may do anything).
    #[arg(long, value_enum, default_value_t = AuthorizationArg::AlwaysAllow, value_name = "MODE")]
    authorization_mode: AuthorizationArg,
    /// Where to write the kubeconfig (default: `kubeconfig` in the data directory).
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// Refuse CRD updates OLM v1 would refuse (Strict) or behave like Kubernetes (None).
    #[arg(long, value_enum, default_value_t = SafetyArg::Strict)]
    crd_upgrade_safety: SafetyArg,
    /// Reach a conversion webhook Service at a local address: NAMESPACE/NAME=HOST:PORT
    /// (TLS is still verified for NAME.NAMESPACE.svc against the CRD's caBundle).
    #[arg(long = "webhook-service", value_parser = parse_service)]
    webhook_services: Vec<(String, SocketAddr)>,
    /// The IPv4 CIDR Services' ClusterIPs come from (its first address is the `kubernetes`
    /// Service's), as kube-apiserver's flag.
    #[arg(long, default_value = "10.96.0.0/12", value_name = "CIDR")]
    service_cluster_ip_range: Cidr,
    /// The node ports `NodePort` and `LoadBalancer` Services get: FIRST-LAST.
    #[arg(long, default_value = "30000-32767", value_name = "FIRST-LAST", value_parser = parse_port_range)]
    service_node_port_range: (u16, u16),
    /// Create a StorageVersionMigration whenever a CRD's storage version changes, so stored
    /// objects are rewritten in the new one (the server carries migrations out either way).
    #[arg(long)]
    auto_migrate: bool,
    /// The controllers to run, as kube-controller-manager's flag: `*` for all, `-NAME` for all
    /// but NAME (garbage-collector-controller, namespace-controller, serviceaccount-controller,
    /// root-ca-certificate-publisher-controller, storage-version-migrator-controller,
    /// clusterrole-aggregation-controller).
    #[arg(long, default_value = "*", value_parser = Controllers::parse, value_name = "LIST")]
    controllers: Controllers,
}

/// `--service-node-port-range`: `FIRST-LAST`, FIRST not above LAST.
fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let parse = |port: &str| port.trim().parse::<u16>().map_err(|_| format!("{port:?} is not a port"));
    let (first, last) = text.split_once('-').ok_or_else(|| format!("{text:?} is not FIRST-LAST"))?;
    let (first, last) = (parse(first)?, parse(last)?);
    if first > last {
        return Err(format!("{text:?}: {first} is above {last}"));
    }
    Ok((first, last))
}

/// `--crd-upgrade-safety`, spelled as OLM's enforcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SafetyArg {
    #[value(name = "Strict")]
    Strict,
    #[value(name = "None")]
    None,
}

/// `--authorization-mode`, spelled as kube-apiserver's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthorizationArg {
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    #[value(name = "RBAC")]
    Rbac,
}

fn parse_service(text: &str) -> Result<(String, SocketAddr), String> {
    let (service, address) = text.split_once('=').ok_or("expected NAMESPACE/NAME=HOST:PORT")?;
    if service.split('/').count() != 2 {
        return Err("expected NAMESPACE/NAME=HOST:PORT".into());
    }
    use std::net::ToSocketAddrs;
    let address = address
        .to_socket_addrs()
        .map_err(|err| format!("{address}: {err}"))?
        .next()
        .ok_or_else(|| format!("{address}: no address"))?;
    Ok((service.to_string(), address))
}

/// Runs the server until SIGTERM or Ctrl-C.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<Outcome> {
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read the token file", path.display()))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let config = Config {
        listen: args.listen,
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        token,
        upgrade_safety: match args.crd_upgrade_safety {
            SafetyArg::Strict => UpgradeSafety::Strict,
            SafetyArg::None => UpgradeSafety::None,
        },
        webhook_services: args.webhook_services.iter().cloned().collect::<HashMap<_, _>>(),
        watch_cache: args.etcd.enabled() && args.watch_cache,
        service_ranges: ServiceRanges {
            cluster_ips: args.service_cluster_ip_range,
            node_ports: args.service_node_port_range.0..=args.service_node_port_range.1,
        },
        auto_migrate: args.auto_migrate,
        controllers: args.controllers.clone(),
        token_auth_file: args.token_auth_file.clone(),
        anonymous_auth: args.anonymous_auth,
        client_ca_file: args.client_ca_file.clone(),
        authorization: match args.authorization_mode {
            AuthorizationArg::AlwaysAllow => crdctl_server::auth::Mode::AlwaysAllow,
            AuthorizationArg::Rbac => crdctl_server::auth::Mode::Rbac,
        },
        ..Config::default()
    };
    let (store, where_): (Arc<dyn crdctl_storage::Store>, String) = if args.in_memory {
        (Arc::new(crdctl_storage::memory::open()), "in memory".into())
    } else if args.etcd.enabled() {
        let store = args.etcd.open().await?;
        (Arc::new(store), format!("data in etcd {} under {}", args.etcd.etcd.join(","), args.etcd.etcd_prefix))
    } else {
        let store = crdctl_storage::redb::open(&args.data)
            .with_context(|| format!("{}: cannot open the store", args.data.display()))?;
        (Arc::new(store), format!("data in {}", args.data.display()))
    };
    let server = Server::start(config, store).await?;
    let kubeconfig_path = match (&args.write_kubeconfig, args.in_memory || args.etcd.enabled()) {
        (Some(path), _) => path.clone(),
        (None, false) => args.data.join("kubeconfig"),
        (None, true) => std::env::temp_dir().join(format!("crdctl-{}.kubeconfig", server.address().port())),
    };
    let ca = args.tls_cert.as_deref().map(std::path::absolute).transpose()?;
    std::fs::write(&kubeconfig_path, server.kubeconfig(ca.as_deref()))
        .with_context(|| format!("{}: cannot write the kubeconfig", kubeconfig_path.display()))?;
    let kubeconfig_path = std::path::absolute(&kubeconfig_path)?;
    // Nobody reading standard output is no reason to stop serving.
    let banner = format!(
        "crdctl serve: listening on {} ({where_})\nexport KUBECONFIG={}\nkubectl get crds\n",
        server.url(),
        kubeconfig_path.display()
    );
    let mut out = std::io::stdout().lock();
    if let Err(err) = out.write_all(banner.as_bytes()).and_then(|()| out.flush()) {
        tracing::warn!(error = %err, "cannot print the address on standard output");
    }
    drop(out);
    crdctl_conversion::framework::shutdown_signal().await;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(Outcome::Clean)
}

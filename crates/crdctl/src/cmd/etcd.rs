//! The `--etcd` flags `crdctl serve` and `crdctl store stats` share.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use crdctl_storage::etcd::{EtcdConfig, EtcdStore};

/// Where the etcd backend is.
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdArgs {
    /// Store everything in etcd instead: comma-separated client URLs
    /// (http://127.0.0.1:2379,...). Several servers on one etcd share one state.
    #[arg(long, value_delimiter = ',', value_name = "URLS")]
    pub etcd: Vec<String>,
    /// The key prefix in etcd.
    #[arg(long, default_value = "/crdctl", requires = "etcd")]
    pub etcd_prefix: String,
    /// PEM CA bundle that signs the etcd servers' certificates.
    #[arg(long, requires = "etcd")]
    pub etcd_ca: Option<PathBuf>,
    /// PEM client certificate for etcd.
    #[arg(long, requires_all = ["etcd", "etcd_key"])]
    pub etcd_cert: Option<PathBuf>,
    /// PEM client key for etcd.
    #[arg(long, requires_all = ["etcd", "etcd_cert"])]
    pub etcd_key: Option<PathBuf>,
    /// How often to compact etcd's history to the store's window, as kube-apiserver's
    /// --etcd-compaction-interval (seconds).
    #[arg(long, default_value_t = 60, requires = "etcd", value_name = "SECONDS")]
    pub etcd_compaction_interval: u64,
}

impl EtcdArgs {
    /// Whether `--etcd` was given.
    pub fn enabled(&self) -> bool {
        !self.etcd.is_empty()
    }

    /// Connects (lazily: etcd may come up later).
    pub async fn open(&self) -> anyhow::Result<EtcdStore> {
        let read = |path: &PathBuf| std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()));
        let mut config = EtcdConfig::new(self.etcd.clone());
        config.prefix = self.etcd_prefix.clone();
        config.ca = self.etcd_ca.as_ref().map(read).transpose()?;
        config.identity = match (&self.etcd_cert, &self.etcd_key) {
            (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
            _ => None,
        };
        config.compaction_interval = Duration::from_secs(self.etcd_compaction_interval.max(1));
        crdctl_storage::etcd::open(config).await.context("cannot use etcd")
    }
}

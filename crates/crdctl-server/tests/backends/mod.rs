//! The stores the server suites run on: memory, redb, and a real etcd behind the watch cache,
//! as `crdctl serve --etcd` runs it. `on_each_backend!(a, b)` makes `memory::a`, `redb::a`,
//! `etcd::a`, … from `async fn a(backend: Backend)`.

use std::sync::Arc;

use crdctl_server::Config;
use crdctl_server::testing::TestServer;

/// Whatever keeps a store alive: its directory, its etcd.
pub type Keep = Option<Box<dyn Send>>;

/// Which store a suite runs on.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Memory,
    Redb,
    Etcd,
}

impl Backend {
    /// Starts a server on a fresh store of this kind.
    pub async fn start(self) -> (TestServer, Keep) {
        self.start_with(Config::default()).await
    }

    /// [`Backend::start`] with `config` (etcd's server also runs the watch cache, as
    /// `crdctl serve --etcd` does).
    pub async fn start_with(self, config: Config) -> (TestServer, Keep) {
        let (store, keep, config) = self.open(config).await;
        (TestServer::start_with(config, store).await.unwrap(), keep)
    }

    /// A fresh store of this kind, and `config` as a server on it runs: what
    /// [`Backend::start_with`] starts, for a test that starts servers on it one after another.
    pub async fn open(self, config: Config) -> (Arc<dyn crdctl_storage::Store>, Keep, Config) {
        match self {
            Backend::Memory => (Arc::new(crdctl_storage::memory::open()), None, config),
            Backend::Redb => {
                let dir = tempfile::tempdir().unwrap();
                let store = crdctl_storage::redb::open(dir.path()).unwrap();
                (Arc::new(store), Some(Box::new(dir)), config)
            }
            Backend::Etcd => {
                let cluster = crdctl_storage::etcd::cluster::LocalCluster::start(1).expect("etcd starts");
                let etcd = crdctl_storage::etcd::EtcdConfig::new(cluster.endpoints());
                let store = crdctl_storage::etcd::open(etcd).await.unwrap();
                (Arc::new(store), Some(Box::new(cluster)), Config { watch_cache: true, ..config })
            }
        }
    }
}

/// One test per backend for each `async fn name(backend: Backend)` named.
#[macro_export]
macro_rules! on_each_backend {
    ($($test:ident),* $(,)?) => {
        $crate::on_each_backend!(@one memory, Memory, $($test),*);
        $crate::on_each_backend!(@one redb, Redb, $($test),*);
        $crate::on_each_backend!(@one etcd, Etcd, $($test),*);
    };
    (@one $module:ident, $backend:ident, $($test:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() { super::$test($crate::backends::Backend::$backend).await }
            )*
        }
    };
}

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
        let (store, keep, config): (Arc<dyn crdctl_storage::Store>, Keep, Config) = match self {
            Backend::Memory => (Arc::new(crdctl_storage::memory::open()), None, Config::default()),
            Backend::Redb => {
                let dir = tempfile::tempdir().unwrap();
                let store = crdctl_storage::redb::open(dir.path()).unwrap();
                (Arc::new(store), Some(Box::new(dir)), Config::default())
            }
            Backend::Etcd => {
                let cluster = crdctl_storage::etcd::cluster::LocalCluster::start(1).expect("etcd starts");
                let config = crdctl_storage::etcd::EtcdConfig::new(cluster.endpoints());
                let store = crdctl_storage::etcd::open(config).await.unwrap();
                (Arc::new(store), Some(Box::new(cluster)), Config { watch_cache: true, ..Config::default() })
            }
        };
        (TestServer::start_with(config, store).await.unwrap(), keep)
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

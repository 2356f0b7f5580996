//! What the server shares between requests ([`AppState`]: the store, the CRDs, the
//! configuration, metrics, what admission and watches keep) and how it starts. Handlers hold
//! it; everything below them gets a narrow view of it — the verbs a [`rest::Context`], a watch
//! a [`watch::Watching`], strategies a [`crate::registry::resource::Context`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crdctl_model::crd::ServiceReference;
use crdctl_storage::Store;

use crate::registry::Registry;
use crate::registry::upgrade::UpgradeSafety;
use crate::{admission, auth, bootstrap, controller, metrics, object, registry, rest, watch};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// PEM certificate and key for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The bearer token every request must carry, if set.
    pub token: Option<String>,
    /// The upgrade-safety gate on CRD updates.
    pub upgrade_safety: UpgradeSafety,
    /// Service references of conversion webhooks mapped to local addresses
    /// (`<namespace>/<name>` → address).
    pub webhook_services: HashMap<String, SocketAddr>,
    /// Serve watches and `resourceVersion="0"` lists from a watch cache per resource
    /// ([`crdctl_storage::cache`]), as kube-apiserver does in front of etcd.
    pub watch_cache: bool,
    /// How names are drawn for `generateName`.
    pub names: object::NameGenerator,
    /// How long a watch may find its client not reading before it is closed, as kube-apiserver
    /// closes a watcher that falls behind; the client watches again from its last
    /// `resourceVersion`. Its buffer (and the store's, which catches up from history) stays
    /// bounded meanwhile.
    pub watch_stall_timeout: std::time::Duration,
    /// Where Services' ClusterIPs and node ports come from.
    pub service_ranges: registry::ranges::ServiceRanges,
    /// Which controllers run.
    pub controllers: controller::Controllers,
    /// How replicas on a shared store elect the one that runs the controllers.
    pub leader_election: controller::lease::Timings,
    /// Create a `StorageVersionMigration` whenever a CRD's storage version changes.
    pub auto_migrate: bool,
    /// Static bearer tokens (`--token-auth-file`, upstream's CSV).
    pub token_auth_file: Option<PathBuf>,
    /// Serve requests without credentials as `system:anonymous` (when the server authenticates
    /// anyone; one that does not treats them as its administrator).
    pub anonymous_auth: bool,
    /// How requests are authorized (`--authorization-mode`).
    pub authorization: auth::Mode,
    /// More CAs whose client certificates authenticate their subject (`--client-ca-file`,
    /// PEM), beside the server's own; with TLS only.
    pub client_ca_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: None,
            token: None,
            upgrade_safety: UpgradeSafety::Strict,
            webhook_services: HashMap::new(),
            watch_cache: false,
            names: object::NameGenerator::default(),
            watch_stall_timeout: std::time::Duration::from_secs(2),
            service_ranges: registry::ranges::ServiceRanges::default(),
            controllers: controller::Controllers::default(),
            leader_election: controller::lease::Timings::default(),
            auto_migrate: false,
            token_auth_file: None,
            anonymous_auth: false,
            client_ca_file: None,
            authorization: auth::Mode::default(),
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Listening beyond loopback needs TLS and a token.
    #[error(
        "refusing to listen on {0} without TLS and token authentication: pass --tls-cert, --tls-key and --token-file, or listen on a loopback address"
    )]
    Insecure(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS files could not be used.
    #[error("cannot use the TLS certificate and key: {0}")]
    Tls(String),
    /// The authentication configuration could not be used.
    #[error("{0}")]
    Authentication(String),
    /// The store could not be read.
    #[error("cannot read the store: {0}")]
    Store(String),
    /// A test server could not be set up (its CRDs).
    #[error("{0}")]
    Setup(String),
}

/// What every handler shares: one [`Shared`], cloned by reference for every request.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The CRDs.
    pub registry: Registry,
    /// The configuration.
    pub config: Arc<Config>,
    /// Set on shutdown: watches end.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    /// Request counts for `/metrics`.
    pub metrics: metrics::Metrics,
    /// Watch events rendered once and shared by every watcher that sends them.
    pub watch_lines: Arc<watch::RenderedLines>,
    /// Who a request is.
    pub authenticator: auth::Authenticator,
    /// What a user may do.
    pub authorizer: auth::Authorizer,
    /// What admission keeps between requests (webhook clients, parsed configurations).
    pub admission: admission::Kept,
}

/// Resolves `--webhook-service` mappings; unknown services fall back to DNS.
struct MappedServices(HashMap<String, SocketAddr>);

impl crdctl_conversion::webhook::ServiceResolver for MappedServices {
    fn resolve(&self, service: &ServiceReference, port: u16) -> Result<SocketAddr, String> {
        match self.0.get(&format!("{}/{}", service.namespace, service.name)) {
            Some(address) => Ok(*address),
            None => crdctl_conversion::webhook::DnsResolver.resolve(service, port),
        }
    }
}

impl AppState {
    /// What the verbs use of the server, for a request by `user`.
    pub fn verbs_as<'a>(&'a self, user: &'a auth::User) -> rest::Context<'a> {
        let mut cx = self.verbs();
        cx.resources.user = user;
        cx.admission.user = user;
        cx
    }

    /// Keeps what authentication and authorization read of the store (the objects tokens hold
    /// on to; the RBAC policy when RBAC decides) current, until shutdown.
    fn follow_policy(&self) {
        let mut shutdown = self.shutdown.subscribe();
        let store = Arc::clone(&self.store);
        let holders = auth::Authenticator::follow_holders(Arc::clone(&store), self.authenticator.holders());
        let policy =
            self.authorizer.uses_rbac().then(|| auth::rbac::follow(store, Arc::clone(&self.authorizer.policy)));
        tokio::spawn(async move {
            let following = futures_util::future::join(holders, async move {
                if let Some(policy) = policy {
                    policy.await
                }
            });
            tokio::select! {
                _ = following => {}
                _ = shutdown.wait_for(|stopped| *stopped) => {}
            }
        });
    }

    /// What the verbs use of the server.
    pub fn verbs(&self) -> rest::Context<'_> {
        rest::Context {
            store: &self.store,
            registry: &self.registry,
            names: &self.config.names,
            admission: admission::Context {
                store: &self.store,
                registry: &self.registry,
                kept: &self.admission,
                metrics: &self.metrics,
                user: auth::User::administrator_ref(),
                authorizer: &self.authorizer,
            },
            resources: self.context(),
            garbage_collector: self.config.controllers.garbage_collector,
        }
    }

    /// What the controllers use of the server.
    pub fn controllers(&self) -> controller::Context {
        controller::Context {
            api: Arc::new(self.clone()),
            store: Arc::clone(&self.store),
            registry: self.registry.clone(),
            metrics: self.metrics.clone(),
            shutdown: Arc::clone(&self.shutdown),
            names: self.config.names.clone(),
            controllers: self.config.controllers.clone(),
            leader_election: self.config.leader_election.clone(),
            auto_migrate: self.config.auto_migrate,
            root_ca: self
                .config
                .tls
                .as_ref()
                .and_then(|(cert, _)| std::fs::read_to_string(cert).ok())
                .unwrap_or_default(),
        }
    }

    /// What a watch uses of the server.
    pub fn watching(&self) -> watch::Watching {
        watch::Watching {
            store: Arc::clone(&self.store),
            shutdown: Arc::clone(&self.shutdown),
            lines: Arc::clone(&self.watch_lines),
            stall_timeout: self.config.watch_stall_timeout,
        }
    }

    /// What strategies may use of the server.
    pub fn context(&self) -> registry::resource::Context<'_> {
        registry::resource::Context {
            store: &self.store,
            registry: &self.registry,
            upgrade_safety: self.config.upgrade_safety,
            service_ranges: &self.config.service_ranges,
            authenticator: &self.authenticator,
            authorizer: &self.authorizer,
            user: auth::User::administrator_ref(),
            type_check: admission::type_checking::record,
        }
    }

    /// Loads the CRDs, makes sure the built-in namespaces exist, and starts the registry.
    pub async fn new(config: Config, store: Arc<dyn Store>) -> Result<AppState, StartError> {
        let store: Arc<dyn Store> = match config.watch_cache {
            true => Arc::new(crdctl_storage::cache::CachedStore::new(store, registry::resource_prefix)),
            false => store,
        };
        for name in registry::builtin::namespace::BUILT_IN {
            let object = registry::builtin::namespace::initial(name);
            let bytes = crate::object::to_stored(&object);
            match store.create(&registry::builtin::namespace::key(name), bytes).await {
                Ok(_) | Err(crdctl_storage::StoreError::AlreadyExists { .. }) => {}
                Err(err) => return Err(StartError::Store(err.to_string())),
            }
        }
        let signer = auth::token::TokenSigner::load_or_create(&*store).await.map_err(StartError::Store)?;
        let authenticator = auth::Authenticator::new(
            signer,
            config.token.clone(),
            config.token_auth_file.as_deref(),
            config.anonymous_auth,
            config.client_ca_file.is_some(),
        )
        .map_err(StartError::Authentication)?;
        let authorizer = auth::Authorizer::new(config.authorization);
        let resolver = Arc::new(MappedServices(config.webhook_services.clone()));
        let registry = Registry::start(Arc::clone(&store), resolver).await.map_err(|e| StartError::Store(e.message))?;
        let state = AppState(Arc::new(Shared {
            store,
            registry,
            config: Arc::new(config),
            shutdown: Arc::new(tokio::sync::watch::Sender::new(false)),
            metrics: metrics::Metrics::default(),
            watch_lines: Arc::default(),
            authenticator,
            authorizer,
            admission: admission::Kept::default(),
        }));
        state.follow_policy();
        bootstrap::ensure(state.verbs(), state.config.listen.port()).await;
        Ok(state)
    }
}

impl controller::Api for AppState {
    fn verbs(&self) -> rest::Context<'_> {
        AppState::verbs(self)
    }
}

//! The etcd backend: the store kube-apiserver itself runs on, so several `crdctl serve`
//! replicas can share one state.
//!
//! The mapping is the one kube-apiserver's etcd3 store makes (`apiserver/pkg/storage/etcd3`):
//! keys live under a prefix, values are the stored bytes, an [`Entry`]'s revisions are etcd's
//! `create_revision` and `mod_revision`, every write is one transaction that compares the key's
//! revision and on failure reads the key back to say why, lists are ranges at a revision, and
//! watches are etcd watches from a revision with the previous value.
//!
//! The history window is enforced by compaction, coordinated between replicas as
//! kube-apiserver coordinates it (`etcd3/compact.go`): a replica that wants to compact first
//! swaps the `compact_rev_key` key with a transaction comparing its revision, so of several
//! replicas only one compacts each time. Compacted revisions answer [`StoreError::Compacted`].
//!
//! Every call has a deadline. A call that cannot reach etcd fails with
//! [`StoreError::Unavailable`]; a write whose answer did not arrive in time fails with
//! [`StoreError::Timeout`], since it may or may not have been applied — a transaction is never
//! half applied either way.

pub mod api;
pub mod cluster;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use crate::{Entry, Event, EventKind, ListOptions, ListPage, Revision, Stats, Store, StoreError, Watch, Write};
use api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use api::etcdserverpb::kv_client::KvClient;
use api::etcdserverpb::request_op::Request;
use api::etcdserverpb::response_op::Response;
use api::etcdserverpb::watch_client::WatchClient;
use api::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse, RequestOp, TxnRequest,
    TxnResponse, WatchCreateRequest, WatchRequest, watch_request,
};
use api::mvccpb::KeyValue;
use api::mvccpb::event::EventType;

/// The key kube-apiserver's compactor coordinates through; shared by every replica on the
/// cluster whatever its prefix, because compaction is cluster-wide.
const COMPACT_KEY: &str = "compact_rev_key";
/// Keys read per range when a caller asks for a whole list.
const RANGE_PAGE: i64 = 1000;
/// Events a watcher holds for its consumer before the reader waits.
const WATCH_BUFFER: usize = 256;
/// The pause before a call is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Whether a failed call may be tried again: a read when etcd (this member) was unavailable, a
/// write only when no connection was made, so it cannot have been applied.
fn retryable(status: &Status, write: bool) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    let message = status.message().to_ascii_lowercase();
    !write || message.contains("connect") || message.contains("connection refused")
}

fn error(status: Status, write: bool) -> StoreError {
    // The two ways etcd refuses a value too large (apiserver's `isTooLargeError`).
    let too_large = (status.code() == Code::InvalidArgument && status.message() == "etcdserver: request is too large")
        || (status.code() == Code::ResourceExhausted
            && status.message().contains("trying to send message larger than max"));
    if too_large {
        return StoreError::TooLarge(status.message().to_string());
    }
    let uncertain = matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled);
    if write && uncertain {
        return StoreError::Timeout(status.message().to_string());
    }
    StoreError::Unavailable(format!("etcd: {:?}: {}", status.code(), status.message()))
}

/// How to reach etcd and how much history to keep.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// Client URLs, `http://127.0.0.1:2379` or https.
    pub endpoints: Vec<String>,
    /// Every key is stored under this prefix (`/crdctl`).
    pub prefix: String,
    /// PEM CA bundle that signs the etcd servers' certificates.
    pub ca: Option<Vec<u8>>,
    /// PEM client certificate and key.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// How many revisions stay readable.
    pub window: Revision,
    /// How often the compactor looks at the window.
    pub compaction_interval: Duration,
    /// The deadline of each call.
    pub timeout: Duration,
}

impl EtcdConfig {
    /// A configuration for `endpoints` with kube-apiserver-like defaults.
    pub fn new(endpoints: Vec<String>) -> EtcdConfig {
        EtcdConfig {
            endpoints,
            prefix: "/crdctl".into(),
            ca: None,
            identity: None,
            window: crate::local::DEFAULT_HISTORY_WINDOW,
            compaction_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
        }
    }
}

/// A [`Store`] on etcd.
pub struct EtcdStore {
    shared: Arc<Shared>,
    compactor: tokio::task::JoinHandle<()>,
}

struct Shared {
    channel: Channel,
    prefix: String,
    timeout: Duration,
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        self.compactor.abort();
    }
}

/// Connects to etcd. The connection is lazy: a store opened while etcd is down answers
/// `Unavailable` until etcd is reachable, then recovers by itself. Calls are balanced over the
/// endpoints, as etcd's own client balances them.
pub async fn open(config: EtcdConfig) -> Result<EtcdStore, StoreError> {
    let unusable =
        |err: &dyn std::fmt::Display| StoreError::Unavailable(format!("etcd {}: {err}", config.endpoints.join(",")));
    // An https endpoint is verified against the given CA only (none: nothing is trusted).
    let https = config.endpoints.iter().any(|url| url.starts_with("https://"));
    let tls = (https || config.ca.is_some() || config.identity.is_some()).then(|| {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &config.ca {
            tls = tls.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &config.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        tls
    });
    let mut endpoints = Vec::with_capacity(config.endpoints.len());
    for url in &config.endpoints {
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|err| unusable(&err))?
            .connect_timeout(config.timeout)
            .http2_keep_alive_interval(Duration::from_secs(2))
            .keep_alive_timeout(config.timeout)
            .keep_alive_while_idle(true);
        if let Some(tls) = &tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|err| unusable(&err))?;
        }
        endpoints.push(endpoint);
    }
    if endpoints.is_empty() {
        return Err(unusable(&"no endpoints"));
    }
    let channel = Channel::balance_list(endpoints.into_iter());
    let shared =
        Arc::new(Shared { channel, prefix: config.prefix.trim_end_matches('/').to_string(), timeout: config.timeout });
    let compactor = tokio::spawn(Arc::clone(&shared).compact_forever(config.window, config.compaction_interval));
    Ok(EtcdStore { shared, compactor })
}

/// The key after every key that starts with `prefix` (etcd's `GetPrefixRangeEnd`).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last.saturating_add(1));
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace, which etcd spells "\0".
    vec![b'\0']
}

fn revision_of(value: i64) -> Revision {
    Revision::try_from(value).unwrap_or_default()
}

fn signed(revision: Revision) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

impl Shared {
    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone())
    }

    fn etcd_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn entry(&self, kv: &KeyValue) -> Result<Entry, StoreError> {
        let key = std::str::from_utf8(&kv.key).map_err(|_| StoreError::Corrupt("a key is not UTF-8".into()))?;
        let key = key
            .strip_prefix(&self.prefix)
            .ok_or_else(|| StoreError::Corrupt(format!("{key} is outside the prefix")))?;
        Ok(Entry {
            key: key.to_string(),
            value: kv.value.clone(),
            create_revision: revision_of(kv.create_revision),
            mod_revision: revision_of(kv.mod_revision),
        })
    }

    /// Runs one etcd call until it succeeds or the deadline passes; `write` says whether a
    /// failure may have been applied. As etcd's own client (`clientv3/retry.go`): reads are
    /// retried while etcd is unavailable (another member may answer), writes only when they
    /// never left this process (no connection could be made).
    async fn call<T, Call>(&self, write: bool, mut attempt: impl FnMut() -> Call) -> Result<T, StoreError>
    where
        Call: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(self.timeout).unwrap_or(now);
        loop {
            let err = match tokio::time::timeout_at(deadline, attempt()).await {
                Ok(Ok(value)) => return Ok(value.into_inner()),
                Ok(Err(err)) => err,
                Err(_) if write => {
                    return Err(StoreError::Timeout(format!("etcd did not answer within {:?}", self.timeout)));
                }
                Err(_) => {
                    return Err(StoreError::Unavailable(format!("etcd did not answer within {:?}", self.timeout)));
                }
            };
            if !retryable(&err, write) || deadline.saturating_duration_since(tokio::time::Instant::now()) <= RETRY_PAUSE
            {
                return Err(error(err, write));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn range_request(&self, request: RangeRequest) -> Result<RangeResponse, StoreError> {
        self.call(false, || {
            let (mut kv, request) = (self.kv(), request.clone());
            async move { kv.range(request).await }
        })
        .await
    }

    /// The key `key` (with the fields of `request` other than the key).
    async fn get(&self, key: &str, request: RangeRequest) -> Result<RangeResponse, StoreError> {
        self.range_request(RangeRequest { key: key.as_bytes().to_vec(), ..request }).await
    }

    async fn txn(&self, txn: TxnRequest) -> Result<TxnResponse, StoreError> {
        self.call(true, || {
            let (mut kv, txn) = (self.kv(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let response = self.get(COMPACT_KEY, RangeRequest { count_only: true, ..Default::default() }).await?;
        Ok(header_revision(response.header.as_ref()))
    }

    /// The compaction recorded in `compact_rev_key`, if any, with the key's `mod_revision`.
    async fn recorded_compaction(&self) -> Result<(Revision, i64), StoreError> {
        let response = self.get(COMPACT_KEY, RangeRequest::default()).await?;
        let Some(kv) = response.kvs.first() else { return Ok((0, 0)) };
        let compacted = std::str::from_utf8(&kv.value).ok().and_then(|v| v.parse().ok()).unwrap_or_default();
        Ok((compacted, kv.mod_revision))
    }

    /// Why a read at `requested` failed: compacted, in the future, or etcd unreachable.
    async fn read_error(&self, requested: Revision, err: StoreError) -> StoreError {
        let StoreError::Unavailable(text) = &err else { return err };
        if text.contains("required revision has been compacted") {
            let compacted = self.recorded_compaction().await.map(|(c, _)| c).unwrap_or_default();
            return StoreError::Compacted { requested, compacted };
        }
        if text.contains("required revision is a future revision") {
            let current = self.revision().await.unwrap_or_default();
            return StoreError::FutureRevision { requested, current };
        }
        err
    }

    async fn range(
        &self,
        options: &ListOptions<'_>,
        limit: i64,
        revision: Option<Revision>,
    ) -> Result<ListPage, StoreError> {
        let prefix = self.etcd_key(options.prefix);
        let start = match options.start_after {
            Some(after) => format!("{}\0", self.etcd_key(after)),
            None => prefix.clone(),
        };
        let request = RangeRequest {
            range_end: range_end(prefix.as_bytes()),
            limit,
            revision: revision.map_or(0, signed),
            ..Default::default()
        };
        let response = match self.get(&start, request).await {
            Ok(response) => response,
            Err(err) => return Err(self.read_error(revision.unwrap_or_default(), err).await),
        };
        let entries = response.kvs.iter().map(|kv| self.entry(kv)).collect::<Result<Vec<_>, _>>()?;
        let count = u64::try_from(response.count).unwrap_or_default();
        let remaining = count.saturating_sub(entries.len() as u64);
        let at = revision.unwrap_or_else(|| header_revision(response.header.as_ref()));
        Ok(ListPage { entries, revision: at, more: response.more, remaining })
    }

    /// Keeps the last `window` revisions: each `interval`, if the store moved past the window
    /// since the last compaction, records the new compaction in `compact_rev_key` (a
    /// transaction on its revision, so only one replica wins) and compacts.
    async fn compact_forever(self: Arc<Self>, window: Revision, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            if let Err(err) = self.compact_once(window).await {
                tracing::debug!(error = %err, "etcd compaction skipped");
            }
        }
    }

    async fn compact_once(&self, window: Revision) -> Result<(), StoreError> {
        let (compacted, key_revision) = self.recorded_compaction().await?;
        let current = self.revision().await?;
        // The compactor's own write is the newest revision: nothing else happened since.
        if signed(current) == key_revision {
            return Ok(());
        }
        let target = current.saturating_sub(window);
        if target <= compacted {
            return Ok(());
        }
        let txn = TxnRequest {
            compare: vec![compare(COMPACT_KEY, CompareResult::Equal, TargetUnion::ModRevision(key_revision))],
            success: vec![put(COMPACT_KEY, target.to_string().into_bytes())],
            failure: Vec::new(),
        };
        if !self.txn(txn).await?.succeeded {
            return Ok(()); // another replica compacts this time
        }
        // Revisions after `target` stay readable; etcd keeps the revision it compacts at.
        self.call(true, || {
            let mut kv = self.kv();
            async move {
                kv.compact(CompactionRequest { revision: signed(target.saturating_add(1)), physical: false }).await
            }
        })
        .await?;
        Ok(())
    }
}

fn header_revision(header: Option<&api::etcdserverpb::ResponseHeader>) -> Revision {
    header.map(|h| revision_of(h.revision)).unwrap_or_default()
}

/// A transaction's comparison of `key`'s revision (or version) with `target`.
fn compare(key: &str, result: CompareResult, target: TargetUnion) -> Compare {
    let kind = match target {
        TargetUnion::Version(_) => CompareTarget::Version,
        TargetUnion::CreateRevision(_) => CompareTarget::Create,
        TargetUnion::ModRevision(_) => CompareTarget::Mod,
        TargetUnion::Value(_) => CompareTarget::Value,
        TargetUnion::Lease(_) => CompareTarget::Lease,
    };
    Compare {
        result: result.into(),
        target: kind.into(),
        key: key.as_bytes().to_vec(),
        range_end: Vec::new(),
        target_union: Some(target),
    }
}

/// A put of `value` under `key` that answers with the previous entry.
fn put(key: &str, value: Vec<u8>) -> RequestOp {
    let put = PutRequest { key: key.as_bytes().to_vec(), value, prev_kv: true, ..Default::default() };
    RequestOp { request: Some(Request::RequestPut(put)) }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let shared = &self.shared;
        let response = shared.get(&shared.etcd_key(key), RangeRequest::default()).await?;
        response.kvs.first().map(|kv| shared.entry(kv)).transpose()
    }

    async fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError> {
        if options.limit > 0 {
            return self
                .shared
                .range(&options, i64::try_from(options.limit).unwrap_or(i64::MAX), options.revision)
                .await;
        }
        // A whole list, read in pages at the first page's revision so it stays one snapshot.
        let mut page = self.shared.range(&options, RANGE_PAGE, options.revision).await?;
        let mut after = page.entries.last().map(|e| e.key.clone());
        while page.more {
            let next_options = ListOptions { start_after: after.as_deref(), ..options };
            let next = self.shared.range(&next_options, RANGE_PAGE, Some(page.revision)).await?;
            after = next.entries.last().map(|e| e.key.clone());
            page.entries.extend(next.entries);
            page.more = next.more;
        }
        page.remaining = 0;
        Ok(page)
    }

    async fn write(&self, write: Write) -> Result<Event, StoreError> {
        let shared = &self.shared;
        let key = shared.etcd_key(write.key());
        let (condition, operation, value) = match &write {
            Write::Create { value, .. } => (
                compare(&key, CompareResult::Equal, TargetUnion::CreateRevision(0)),
                put(&key, value.clone()),
                Some(value.clone()),
            ),
            Write::Update { value, expected, .. } => (
                compare(&key, CompareResult::Equal, TargetUnion::ModRevision(signed(*expected))),
                put(&key, value.clone()),
                Some(value.clone()),
            ),
            Write::Delete { expected, .. } => {
                let delete = DeleteRangeRequest { key: key.as_bytes().to_vec(), prev_kv: true, ..Default::default() };
                (
                    match expected {
                        Some(expected) => {
                            compare(&key, CompareResult::Equal, TargetUnion::ModRevision(signed(*expected)))
                        }
                        None => compare(&key, CompareResult::Greater, TargetUnion::CreateRevision(0)),
                    },
                    RequestOp { request: Some(Request::RequestDeleteRange(delete)) },
                    None,
                )
            }
        };
        let read_back = RangeRequest { key: key.as_bytes().to_vec(), ..Default::default() };
        let txn = TxnRequest {
            compare: vec![condition],
            success: vec![operation],
            failure: vec![RequestOp { request: Some(Request::RequestRange(read_back)) }],
        };
        let response = shared.txn(txn).await?;
        let revision = header_revision(response.header.as_ref());
        let first = response.responses.first().and_then(|r| r.response.as_ref());
        let name = write.key().to_string();
        if !response.succeeded {
            let current = match first {
                Some(Response::ResponseRange(range)) => range.kvs.first().map(|kv| revision_of(kv.mod_revision)),
                _ => None,
            };
            return Err(match (&write, current) {
                (Write::Create { .. }, _) => StoreError::AlreadyExists { key: name },
                (_, None) => StoreError::NotFound { key: name },
                (Write::Update { expected, .. }, Some(current)) => {
                    StoreError::Conflict { key: name, expected: *expected, current }
                }
                (Write::Delete { expected, .. }, Some(current)) => {
                    StoreError::Conflict { key: name, expected: expected.unwrap_or_default(), current }
                }
            });
        }
        let prev = match first {
            Some(Response::ResponsePut(put)) => put.prev_kv.as_ref().map(|kv| shared.entry(kv)).transpose()?,
            Some(Response::ResponseDeleteRange(delete)) => {
                delete.prev_kvs.first().map(|kv| shared.entry(kv)).transpose()?
            }
            _ => None,
        };
        let entry = value.map(|value| Entry {
            key: name.clone(),
            value,
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
        });
        let kind = if entry.is_some() { EventKind::Put } else { EventKind::Delete };
        Ok(Event { revision, kind, key: name, entry, prev })
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch, StoreError> {
        let shared = Arc::clone(&self.shared);
        let etcd_prefix = shared.etcd_key(prefix);
        let create = WatchCreateRequest {
            key: etcd_prefix.as_bytes().to_vec(),
            range_end: range_end(etcd_prefix.as_bytes()),
            start_revision: signed(after.saturating_add(1)),
            prev_kv: true,
            ..Default::default()
        };
        // etcd reports a compacted start only after the watch is created; a read at the start
        // revision says so at once, and a future one is fine to watch from.
        let probe = RangeRequest { count_only: true, revision: signed(after.saturating_add(1)), ..Default::default() };
        if let Err(err) = shared.get(COMPACT_KEY, probe).await {
            match shared.read_error(after, err).await {
                StoreError::FutureRevision { .. } => {}
                err => return Err(err),
            }
        }
        // The request stream stays open for the watch's life: closing it ends the watch.
        let (requests, request_stream) = tokio::sync::mpsc::channel(1);
        let request = WatchRequest { request_union: Some(watch_request::RequestUnion::CreateRequest(create)) };
        requests.send(request).await.map_err(|_| StoreError::Unavailable("etcd watch: request not sent".into()))?;
        let request_stream = tokio_stream::wrappers::ReceiverStream::new(request_stream);
        let mut stream =
            match tokio::time::timeout(shared.timeout, WatchClient::new(shared.channel.clone()).watch(request_stream))
                .await
            {
                Ok(Ok(stream)) => stream.into_inner(),
                Ok(Err(status)) => return Err(error(status, false)),
                Err(_) => return Err(StoreError::Unavailable("etcd did not start the watch in time".into())),
            };
        let (tx, rx) = tokio::sync::mpsc::channel(WATCH_BUFFER);
        let compacted = move |compact_revision: i64| StoreError::Compacted {
            requested: after,
            compacted: revision_of(compact_revision).saturating_sub(1),
        };
        // etcd answers a watch at a compacted revision right away; say so before returning.
        let first = match tokio::time::timeout(shared.timeout, stream.message()).await {
            Ok(first) => first.map_err(|status| error(status, false))?,
            Err(_) => return Err(StoreError::Unavailable("etcd did not start the watch in time".into())),
        };
        let mut pending = Vec::new();
        match first {
            Some(response) if response.compact_revision > 0 => return Err(compacted(response.compact_revision)),
            Some(response) => pending.push(response),
            None => return Err(StoreError::Unavailable("etcd closed the watch".into())),
        }
        tokio::spawn(async move {
            let _requests = requests;
            let mut next = pending.pop();
            loop {
                let response = match next.take() {
                    Some(response) => response,
                    None => match stream.message().await {
                        Ok(Some(response)) => response,
                        Ok(None) => {
                            let _ = tx.send(Err(StoreError::Unavailable("etcd closed the watch".into()))).await;
                            return;
                        }
                        Err(err) => {
                            let _ = tx.send(Err(StoreError::Unavailable(format!("etcd watch: {err}")))).await;
                            return;
                        }
                    },
                };
                if response.compact_revision > 0 {
                    let _ = tx.send(Err(compacted(response.compact_revision))).await;
                    return;
                }
                if response.canceled {
                    let reason = response.cancel_reason.clone();
                    let _ = tx.send(Err(StoreError::Unavailable(format!("etcd canceled the watch: {reason}")))).await;
                    return;
                }
                for event in &response.events {
                    let converted = shared.event(event);
                    let failed = converted.is_err();
                    if tx.send(converted).await.is_err() || failed {
                        return; // the consumer is gone, or the event was unreadable
                    }
                }
            }
        });
        Ok(Watch::new(rx))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        self.shared.revision().await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let page = self.list(ListOptions { prefix: "", ..Default::default() }).await?;
        let (compacted, _) = self.shared.recorded_compaction().await?;
        Ok(Stats {
            revision: page.revision,
            compacted,
            keys: page.entries.len() as u64,
            value_bytes: page.entries.iter().map(|e| e.value.len() as u64).sum(),
        })
    }

    fn shared(&self) -> bool {
        true
    }
}

impl Shared {
    fn event(&self, event: &api::mvccpb::Event) -> Result<Event, StoreError> {
        let kv = event.kv.as_ref().ok_or_else(|| StoreError::Corrupt("a watch event without a key".into()))?;
        let prev = event.prev_kv.as_ref().map(|kv| self.entry(kv)).transpose()?;
        let current = self.entry(kv)?;
        let (kind, entry) = match EventType::try_from(event.r#type) {
            Ok(EventType::Put) => (EventKind::Put, Some(current.clone())),
            Ok(EventType::Delete) => (EventKind::Delete, None),
            Err(_) => return Err(StoreError::Corrupt(format!("a watch event of unknown type {}", event.r#type))),
        };
        Ok(Event { revision: current.mod_revision, kind, key: current.key, entry, prev })
    }
}

//! The HTTP load generator the server benchmarks share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long each rate is measured.
pub const RUN_FOR: Duration = Duration::from_secs(2);

/// Runs `operation(task, i)` again and again from `tasks` concurrent tasks for `RUN_FOR`;
/// returns operations per second.
pub async fn rate<Operation, Done>(tasks: usize, operation: Operation) -> f64
where
    Operation: Fn(usize, usize) -> Done + Clone + Send + 'static,
    Done: std::future::Future<Output = ()> + Send,
{
    let count = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let (operation, count) = (operation.clone(), Arc::clone(&count));
            tokio::spawn(async move {
                let mut i = 0;
                while started.elapsed() < RUN_FOR {
                    operation(task, i).await;
                    count.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for task in running {
        task.await.unwrap();
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// A runtime apart from the load generator's, for what it drives (the server, its replicas, a
/// webhook), as each is a process of its own beside its clients. On one shared runtime every
/// request was a wake-up between the same two workers, and the scheduler's latency rather than
/// the server's set the one-client rate.
pub struct Peer {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Peer {
    /// A runtime with `workers` threads.
    pub fn new(workers: usize) -> Peer {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
        Peer { runtime: Some(runtime) }
    }

    /// Runs `future` on this runtime (what it spawns stays there) and waits for its output.
    pub async fn run<T: Send + 'static>(&self, future: impl std::future::Future<Output = T> + Send + 'static) -> T {
        self.runtime.as_ref().unwrap().spawn(future).await.unwrap()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One HTTP/1.1 connection a client task keeps, its requests one after another: the load
/// generator's own cost per request kept small (no URL parsing, pool or retry policy per
/// request), so the rates measure the server.
pub struct Connection {
    sender: hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>,
    host: hyper::header::HeaderValue,
    authorization: Option<hyper::header::HeaderValue>,
}

impl Connection {
    /// Connects to `base` (`http://host:port`).
    pub async fn open(base: &str) -> Connection {
        let authority = base.strip_prefix("http://").unwrap().to_string();
        let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        Connection { sender, host: authority.parse().unwrap(), authorization: None }
    }

    /// Connects to `base`, every request carrying the bearer `token`.
    pub async fn open_as(base: &str, token: &str) -> Connection {
        let mut connection = Connection::open(base).await;
        connection.authorization = Some(format!("Bearer {token}").parse().unwrap());
        connection
    }

    /// One request; the status and the body.
    pub async fn send(&mut self, method: reqwest::Method, path: &str, body: Option<String>) -> (u16, bytes::Bytes) {
        use http_body_util::BodyExt;
        let response = self.request(method, path, body.map(|body| ("application/json", body.into()))).await;
        let code = response.status().as_u16();
        (code, response.into_body().collect().await.unwrap().to_bytes())
    }

    /// One request with a body of its content type; the response, its body still to read.
    pub async fn request(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, bytes::Bytes)>,
    ) -> hyper::Response<hyper::body::Incoming> {
        self.request_accepting(method, path, body, "application/json").await
    }

    /// [`Connection::request`], with an `Accept` header.
    pub async fn request_accepting(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, bytes::Bytes)>,
        accept: &str,
    ) -> hyper::Response<hyper::body::Incoming> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.host)
            .header(hyper::header::ACCEPT, accept);
        if let Some((content_type, _)) = &body {
            request = request.header(hyper::header::CONTENT_TYPE, *content_type);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(hyper::header::AUTHORIZATION, authorization);
        }
        let body = body.map(|(_, body)| body).unwrap_or_default();
        let request = request.body(http_body_util::Full::new(body)).unwrap();
        self.sender.ready().await.unwrap();
        self.sender.send_request(request).await.unwrap()
    }
}

/// An HTTP load generator over one server or several replicas (client `i` talks to replica
/// `i mod n`): the measured loops on a [`Connection`] per client, the one-off requests
/// (setup, lists) through reqwest.
pub struct Load {
    http: reqwest::Client,
    bases: Vec<String>,
}

impl Load {
    /// A load generator for the servers at `bases`.
    pub fn new(bases: Vec<String>) -> Load {
        Load { http: reqwest::Client::new(), bases }
    }

    /// The base URL of replica `replica mod n`.
    pub fn base(&self, replica: usize) -> &str {
        &self.bases[replica % self.bases.len()]
    }

    /// One request to the first server.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<String>) -> (u16, bytes::Bytes) {
        self.send_to(0, method, path, body).await
    }

    /// One request to replica `replica mod n`.
    pub async fn send_to(
        &self,
        replica: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
    ) -> (u16, bytes::Bytes) {
        let mut request = self.http.request(method, format!("{}{path}", self.base(replica)));
        if let Some(body) = body {
            request = request.header("Content-Type", "application/json").body(body);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.bytes().await.unwrap())
    }

    /// Creates objects from `clients` tasks for `RUN_FOR`, or until `until` objects exist.
    pub async fn creates(
        self: &Arc<Self>,
        post: Post,
        clients: usize,
        until: Option<usize>,
        prefix: &str,
    ) -> (f64, usize) {
        self.creates_for(RUN_FOR, post, clients, until, prefix).await
    }

    /// Creates objects from `clients` tasks for `run_for`, or until `until` objects exist;
    /// returns the rate and the count.
    pub async fn creates_for(
        self: &Arc<Self>,
        run_for: Duration,
        post: Post,
        clients: usize,
        until: Option<usize>,
        prefix: &str,
    ) -> (f64, usize) {
        let count = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|client| {
                let (load, count, prefix) = (Arc::clone(self), Arc::clone(&count), prefix.to_string());
                tokio::spawn(async move {
                    let mut connection = Connection::open(load.base(client)).await;
                    let mut i = 0;
                    loop {
                        let done = count.load(Ordering::Relaxed);
                        match until {
                            Some(limit) if done >= limit => break,
                            None if started.elapsed() >= run_for => break,
                            _ => {}
                        }
                        let name = format!("{prefix}-{client:02}-{i:06}");
                        let (code, answer) = connection
                            .send(reqwest::Method::POST, &post.collection(), Some((post.body)(&name, post.version)))
                            .await;
                        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
                        count.fetch_add(1, Ordering::Relaxed);
                        i += 1;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let n = count.load(Ordering::Relaxed);
        (n as f64 / started.elapsed().as_secs_f64(), n)
    }

    /// Gets of `names` from `clients` tasks for `RUN_FOR`.
    pub async fn gets(self: &Arc<Self>, names: Arc<Vec<String>>, clients: usize) -> f64 {
        let count = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|client| {
                let (load, count, names) = (Arc::clone(self), Arc::clone(&count), Arc::clone(&names));
                tokio::spawn(async move {
                    let mut connection = Connection::open(load.base(0)).await;
                    let mut i = client;
                    while started.elapsed() < RUN_FOR {
                        let path =
                            format!("/apis/example.com/v1/namespaces/default/crontabs/{}", names[i % names.len()]);
                        assert_eq!(connection.send(reqwest::Method::GET, &path, None).await.0, 200);
                        count.fetch_add(1, Ordering::Relaxed);
                        i += clients;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
    }

    /// The median time of three full lists at `version` with `query` (`resourceVersion=0`, …),
    /// checking the item count.
    pub async fn list(&self, version: &str, query: &str, expected: usize) -> Duration {
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let (code, body) = self
                .send(
                    reqwest::Method::GET,
                    &format!("/apis/example.com/{version}/namespaces/default/crontabs?{query}"),
                    None,
                )
                .await;
            let elapsed = t.elapsed();
            assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
            let list: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(list["items"].as_array().unwrap().len(), expected);
            assert_eq!(list["items"][0]["apiVersion"], format!("example.com/{version}"));
            times.push(elapsed);
        }
        times.sort();
        times[1]
    }
}

/// A CronTab at `version` in the v1 shape.
/// What a create posts: CronTabs at a version (a body for that version), or ConfigMaps.
#[derive(Debug, Clone, Copy)]
pub struct Post {
    /// The CronTab version; empty for ConfigMaps.
    pub version: &'static str,
    /// The body for a name at `version`.
    pub body: fn(&str, &str) -> String,
}

impl Post {
    /// CronTabs at `version`, written as `body` makes them.
    pub fn crontabs(version: &'static str, body: fn(&str, &str) -> String) -> Post {
        Post { version, body }
    }

    /// ConfigMaps with as much data as [`v1_body`]'s CronTab.
    pub fn config_maps() -> Post {
        Post { version: "", body: config_map_body }
    }

    fn collection(&self) -> String {
        match self.version {
            "" => "/api/v1/namespaces/default/configmaps".to_string(),
            version => format!("/apis/example.com/{version}/namespaces/default/crontabs"),
        }
    }
}

fn config_map_body(name: &str, _: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"host":"localhost","port":"1234"}}}}"#
    )
}

pub fn v1_body(name: &str, version: &str) -> String {
    format!(
        r#"{{"apiVersion":"example.com/{version}","kind":"CronTab","metadata":{{"name":"{name}"}},"host":"localhost","port":"1234"}}"#
    )
}

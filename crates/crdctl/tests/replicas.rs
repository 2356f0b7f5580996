//! Several `crdctl serve` replicas on one etcd, as kube-apiserver replicas run: they agree on
//! CRDs and objects, watches on any replica deliver every write in revision order, and losing a
//! replica, an etcd restart or an etcd member loses no acknowledged write.

use std::collections::HashSet;
use std::io::BufReader;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crdctl_storage::etcd::cluster::LocalCluster;
use serde_json::{Value, json};

use crate::serve::{Backend, Data, Kubectl, Served, example};

const CRONTABS: &str = "/apis/example.com/v1/namespaces/default/crontabs";

/// A blocking HTTP client for one replica's API.
struct Api {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
}

/// A response: status code and JSON body.
#[derive(Debug)]
struct Answer {
    code: u16,
    body: Value,
}

impl Api {
    fn new(served: &Served) -> Api {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
        Api { runtime: tokio::runtime::Runtime::new().unwrap(), http, base: served.url() }
    }

    /// `None` when the server could not be reached at all.
    fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Option<Answer> {
        self.runtime.block_on(async {
            let mut request = self.http.request(method, format!("{}{path}", self.base));
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.ok()?;
            let code = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            Some(Answer { code, body })
        })
    }

    fn create(&self, name: &str) -> Option<Answer> {
        let object =
            json!({"apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "host": name});
        self.send(reqwest::Method::POST, CRONTABS, Some(&object))
    }

    fn names(&self) -> Vec<String> {
        let list = self.send(reqwest::Method::GET, CRONTABS, None).expect("the replica answers");
        assert_eq!(list.code, 200, "{list:?}");
        list.body["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().into()).collect()
    }

    fn ready(&self) -> Option<u16> {
        self.runtime.block_on(async {
            Some(self.http.get(format!("{}/readyz", self.base)).send().await.ok()?.status().as_u16())
        })
    }
}

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

#[track_caller]
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out after {limit:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The CronTab CRD, applied through `served` and Established.
fn install_crd(served: &Served) {
    let k = Kubectl::new("1.33", served);
    k.apply(&example("3-v1-storage.yaml"));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
}

/// `kubectl get crontabs -w --output-watch-events -o json` on a replica: its events, as parsed.
fn kubectl_watch(served: &Served) -> (std::process::Child, mpsc::Receiver<Value>, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new(crate::serve::kubectl_binary("1.33"))
        .env("KUBECONFIG", &served.kubeconfig)
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["get", "crontabs", "--watch", "--output-watch-events", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for event in serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>() {
            let Ok(event) = event else { return };
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (child, rx, cache)
}

#[test]
fn three_replicas_agree_on_crds_objects_and_the_order_of_events() {
    let a = Served::start_on(Backend::Etcd, &[]);
    let (b, c) = (a.replica(&[]), a.replica(&[]));
    let apis: Vec<Api> = [&a, &b, &c].into_iter().map(Api::new).collect();

    // A CRD applied through A is served by B and C, from their watch on the CRD keys.
    install_crd(&a);
    wait_until("B and C serve the CRD", Duration::from_secs(5), || {
        apis[1..].iter().all(|api| api.send(reqwest::Method::GET, CRONTABS, None).is_some_and(|r| r.code == 200))
    });
    let counter = apis[0].create("counter").unwrap();
    assert_eq!(counter.code, 201, "{counter:?}");
    let (mut watch, events, _cache) = kubectl_watch(&c);
    assert_eq!(
        events.recv_timeout(Duration::from_secs(20)).expect("the initial ADDED")["object"]["metadata"]["name"],
        "counter"
    );

    // Every replica creates 60 objects and bumps the shared counter 20 times by read, modify,
    // write with its resourceVersion: optimistic-concurrency conflicts between replicas.
    let writes: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let writers: Vec<_> = apis
            .iter()
            .enumerate()
            .map(|(replica, api)| {
                scope.spawn(move || {
                    let mut revisions = Vec::new();
                    for i in 0..60 {
                        let created = api.create(&format!("r{replica}-{i:02}")).unwrap();
                        assert_eq!(created.code, 201, "{created:?}");
                        revisions.push(resource_version(&created.body));
                        if i % 3 != 0 {
                            continue;
                        }
                        let path = format!("{CRONTABS}/counter");
                        let mut conflicts = 0;
                        let updated = loop {
                            let mut current = api.send(reqwest::Method::GET, &path, None).unwrap().body;
                            let count = current["port"].as_str().unwrap_or("0").parse::<u64>().unwrap();
                            current["port"] = json!((count + 1).to_string());
                            let answer = api.send(reqwest::Method::PUT, &path, Some(&current)).unwrap();
                            match answer.code {
                                200 => break answer,
                                409 => conflicts += 1,
                                other => panic!("{other}: {answer:?}"),
                            }
                            assert!(conflicts < 100);
                        };
                        revisions.push(resource_version(&updated.body));
                    }
                    revisions
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for revisions in &writes {
        assert!(revisions.windows(2).all(|w| w[0] < w[1]), "each client sees increasing resourceVersions");
    }
    let mut all: Vec<u64> = writes.concat();
    all.sort_unstable();
    let distinct: HashSet<u64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "every write has its own resourceVersion");

    // Every replica lists every object exactly once; no increment was lost.
    for api in &apis {
        let names = api.names();
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!((names.len(), unique.len()), (181, 181));
        let counter = api.send(reqwest::Method::GET, &format!("{CRONTABS}/counter"), None).unwrap();
        assert_eq!(counter.body["port"], "60", "3 replicas × 20 increments");
    }

    // The watch on C saw every write made through A, B and C, in revision order.
    let mut seen = Vec::new();
    while seen.len() < all.len() {
        let event = events.recv_timeout(Duration::from_secs(20)).expect("every event reaches the watch on C");
        seen.push(resource_version(&event["object"]));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(seen, all, "the watch on C delivers every event, in revision order, without gaps");
}

/// Creates objects named `<prefix>-<n>` through the first replica that answers, retrying the
/// same name on the next when one is gone; returns the names acknowledged (201, or 409 after a
/// retry, which means the unanswered first attempt was applied).
fn write_through(apis: &[Api], prefix: &str, count: usize, between: impl Fn(usize)) -> Vec<String> {
    let mut acknowledged = Vec::new();
    let mut replica = 0;
    for i in 0..count {
        between(i);
        let name = format!("{prefix}-{i:04}");
        let mut retried = false;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match apis[replica % apis.len()].create(&name) {
                Some(Answer { code: 201, .. }) => break,
                Some(Answer { code: 409, .. }) if retried => break,
                Some(Answer { code: 503 | 504, body }) => assert_eq!(body["kind"], "Status", "{body}"),
                Some(other) => panic!("{name}: {other:?}"),
                None => replica += 1, // this replica is gone; the next one takes the write
            }
            retried = true;
            assert!(Instant::now() < deadline, "{name} was never acknowledged");
            std::thread::sleep(Duration::from_millis(20));
        }
        acknowledged.push(name);
    }
    acknowledged
}

/// Events of an HTTP watch from `after` until it ends or `count` arrived: (revision, name).
fn watch_events(api: &Api, after: u64, count: usize) -> Vec<(u64, String)> {
    api.runtime.block_on(async {
        let url = format!("{}{CRONTABS}?watch=1&resourceVersion={after}", api.base);
        let Ok(mut response) = api.http.get(url).timeout(Duration::from_secs(60)).send().await else { return vec![] };
        let (mut events, mut buffer) = (Vec::new(), Vec::new());
        while events.len() < count {
            let Ok(Some(chunk)) = response.chunk().await else { break };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                let object = &event["object"];
                events.push((resource_version(object), object["metadata"]["name"].as_str().unwrap().to_string()));
            }
        }
        events
    })
}

#[test]
fn a_replica_killed_mid_stream_loses_no_acknowledged_write_and_its_watchers_resume_elsewhere() {
    let a = Served::start_on(Backend::Etcd, &[]);
    let b = a.replica(&[]);
    install_crd(&a);
    let apis = [Api::new(&a), Api::new(&b)];
    let start = resource_version(&apis[0].send(reqwest::Method::GET, CRONTABS, None).unwrap().body);

    // A watcher on A while the writes go on; A is killed halfway.
    let watcher = std::thread::spawn({
        let api = Api::new(&a);
        move || watch_events(&api, start, usize::MAX)
    });
    let a = std::cell::RefCell::new(Some(a));
    let acknowledged = write_through(&apis, "w", 400, |i| {
        if i == 200 {
            let data: Data = a.borrow_mut().take().unwrap().kill();
            drop(data);
        }
    });
    let on_a = watcher.join().unwrap();
    assert!(!on_a.is_empty() && on_a.len() < 400, "the watch on A ended with A: {} events", on_a.len());

    // The watcher resumes on B from the last resourceVersion it saw, and misses nothing.
    let last = on_a.last().unwrap().0;
    let on_b = watch_events(&apis[1], last, 400 - on_a.len());
    let all: Vec<&(u64, String)> = on_a.iter().chain(&on_b).collect();
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "in revision order, nothing twice");
    let watched: Vec<&str> = all.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(watched, acknowledged, "every acknowledged write reaches the watcher, across the replica's death");
    let listed: HashSet<String> = apis[1].names().into_iter().collect();
    assert!(acknowledged.iter().all(|name| listed.contains(name)), "no acknowledged write was lost");
    assert_eq!(listed.len(), 400);
}

#[test]
fn the_servers_ride_out_an_etcd_restart() {
    let a = Served::start_on(Backend::Etcd, &[]);
    let b = a.replica(&[]);
    install_crd(&a);
    let etcd = a.data().etcd.clone().unwrap();
    let probe = Api::new(&a);
    assert_eq!(probe.ready(), Some(200));

    // A client writes through A all along, retrying what fails; etcd goes away under it.
    let (down, up) = (mpsc::channel::<()>(), mpsc::channel::<()>());
    let writer = std::thread::spawn({
        let apis = [Api::new(&a)];
        move || {
            write_through(&apis, "w", 120, |i| {
                if i == 40 {
                    down.0.send(()).unwrap();
                    up.1.recv().unwrap();
                }
            })
        }
    });
    down.1.recv().unwrap();
    etcd.lock().unwrap().kill(0);
    wait_until("/readyz fails without etcd", Duration::from_secs(15), || probe.ready() == Some(503));
    let refused = probe.create("refused").unwrap();
    assert!(matches!(refused.code, 503 | 504), "{refused:?}");
    assert_eq!(
        (refused.body["kind"].as_str(), refused.body["code"].as_u64()),
        (Some("Status"), Some(refused.code.into()))
    );
    up.0.send(()).unwrap(); // the writer's next write meets the outage and retries
    std::thread::sleep(Duration::from_secs(1));
    etcd.lock().unwrap().restart(0).unwrap();
    wait_until("/readyz recovers with etcd", Duration::from_secs(30), || probe.ready() == Some(200));
    let acknowledged = writer.join().unwrap();
    let names: HashSet<String> = Api::new(&b).names().into_iter().collect();
    assert!(acknowledged.iter().all(|n| names.contains(n)), "every acknowledged write is there");
    assert_eq!(names.len(), 120);

    // B's registry follows the CRD keys again: a CRD created through A after the restart is
    // served by B without restarting it.
    let k = Kubectl::new("1.33", &a);
    let backups = example("1-v1beta1.yaml").replace("crontab", "backup").replace("CronTab", "Backup");
    k.apply(&backups.replace("\n    - ct\n", "\n    - bk\n"));
    let path = "/apis/example.com/v1beta1/namespaces/default/backups";
    let b_api = Api::new(&b);
    wait_until("B serves a CRD made after the restart", Duration::from_secs(15), || {
        b_api.send(reqwest::Method::GET, path, None).is_some_and(|r| r.code == 200)
    });
}

#[test]
fn a_three_member_etcd_cluster_keeps_serving_with_one_member_down() {
    let data = Data::on_cluster(3);
    let etcd = data.etcd.clone().unwrap();
    let a = data.serve(&[]);
    install_crd(&a);
    let apis = [Api::new(&a)];
    let before = write_through(&apis, "before", 30, |_| {});
    etcd.lock().unwrap().kill(0);
    let after = write_through(&apis, "after", 30, |_| {});
    let names: HashSet<String> = apis[0].names().into_iter().collect();
    assert!(before.iter().chain(&after).all(|n| names.contains(n)));
    assert_eq!(names.len(), 60);
    assert_eq!(apis[0].ready(), Some(200));
}

#[test]
fn replicas_racing_on_one_crd_keep_its_stored_versions() {
    let a = Served::start_on(Backend::Etcd, &[]);
    let b = a.replica(&[]);
    let k = Kubectl::new("1.33", &a);
    k.apply(&example("2-v1-added.yaml"));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com";
    let b_api = Api::new(&b);

    // While A moves the storage version to v1, B's clients patch labels as fast as they can
    // from the CRD they last read: each write compares on its revision and retries.
    std::thread::scope(|scope| {
        let patchers: Vec<_> = (0..4)
            .map(|client| {
                let api = &b_api;
                scope.spawn(move || {
                    for round in 0..10 {
                        let patch = json!({"metadata": {"labels": {format!("client-{client}"): round.to_string()}}});
                        let answer = api.runtime.block_on(async {
                            let url = format!("{}{crd_path}", api.base);
                            let request = api.http.patch(url).header("Content-Type", "application/merge-patch+json");
                            request.body(patch.to_string()).send().await.unwrap().status().as_u16()
                        });
                        assert_eq!(answer, 200);
                    }
                })
            })
            .collect();
        k.apply(&example("3-v1-storage.yaml"));
        for patcher in patchers {
            patcher.join().unwrap();
        }
    });
    for api in [Api::new(&a), b_api] {
        let crd = api.send(reqwest::Method::GET, crd_path, None).unwrap().body;
        assert_eq!(crd["status"]["storedVersions"], json!(["v1beta1", "v1"]), "{crd}");
        let labels = &crd["metadata"]["labels"];
        assert!((0..4).all(|c| labels[format!("client-{c}")] == "9"), "every patch landed: {labels}");
        let established = crd["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Established");
        assert_eq!(established.unwrap()["status"], "True");
        // A write from a stale read is refused, as upstream.
        let mut stale = crd.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        let refused = api.send(reqwest::Method::PUT, crd_path, Some(&stale)).unwrap();
        assert_eq!(refused.code, 409, "{refused:?}");
    }
}

#[test]
fn etcd_over_https_is_verified_against_the_given_ca() {
    let work = tempfile::tempdir().unwrap();
    let args =
        ["webhook", "certs", "--service", "etcd", "--namespace", "default", "--host", "127.0.0.1", "--out", "certs"];
    let made = crate::util::crdctl_in(work.path(), &args, None);
    assert_eq!(made.code, 0, "{made:?}");
    let certs = work.path().join("certs");
    let etcd = LocalCluster::start_tls(1, certs.join("tls.crt"), certs.join("tls.key")).expect("etcd starts");
    assert!(etcd.endpoints()[0].starts_with("https://127.0.0.1:"));
    let etcd = Some(Arc::new(Mutex::new(etcd)));

    let trusted = Data { dir: tempfile::tempdir().unwrap(), etcd: etcd.clone() };
    let served = trusted.serve(&["--etcd-ca", certs.join("ca.crt").to_str().unwrap()]);
    install_crd(&served);
    let api = Api::new(&served);
    assert_eq!(api.create("over-tls").unwrap().code, 201);
    assert_eq!(api.names(), ["over-tls"]);

    // Without the CA, etcd's certificate is not trusted: the server does not start on it.
    let endpoint = etcd.as_ref().unwrap().lock().unwrap().endpoints().join(",");
    let kubeconfig = work.path().join("kubeconfig");
    let refused = crate::util::crdctl(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--etcd",
        &endpoint,
        "--write-kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("invalid peer certificate: UnknownIssuer"), "{}", refused.stderr);
}

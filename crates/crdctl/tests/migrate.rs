//! `crdctl migrate`, `crdctl store stats` and `crdctl retire-version` against `crdctl serve` on
//! disk: the seed's storage upgrade procedure, with the None strategy and through the example
//! conversion webhook over TLS, with another client writing during the run (the server's
//! StorageVersionMigration doing the rewrite), and a client-side migration killed with SIGKILL
//! and restarted.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{Backend, Data, Kubectl, Served, example, without_version};
use crate::util::crdctl;

const CRD: &str = "crontabs.example.com";

/// `crdctl store stats` of a stopped server's data: objects per stored apiVersion of CronTabs.
fn stored(data: &Data) -> HashMap<String, u64> {
    let mut args = vec!["store".to_string(), "stats".into(), "--output".into(), "json".into()];
    args.extend(data.store_args());
    let out = crdctl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 0, "{out:?}");
    let stats: Value = serde_json::from_str(&out.stdout).unwrap();
    let crontabs = stats["resources"].as_array().unwrap().iter().find(|r| r["resource"] == CRD);
    crontabs.map_or_else(HashMap::new, |r| serde_json::from_value(r["apiVersions"].clone()).unwrap())
}

/// The CRD with v1beta1 as the storage version.
fn v1beta1_storage(crd: &str) -> String {
    crd.replacen("storage: false", "storage: STORAGE", 1)
        .replacen("storage: true", "storage: false", 1)
        .replace("STORAGE", "true")
}

/// Creates `count` CronTabs at v1beta1 from 16 concurrent clients.
fn create(served: &Served, count: usize, body: fn(usize) -> Value) {
    let url = format!("{}/apis/example.com/v1beta1/namespaces/default/crontabs", served.url());
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = reqwest::Client::new();
        let tasks: Vec<_> = (0..16)
            .map(|client| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    for i in (client..count).step_by(16) {
                        let request =
                            http.post(&url).header("Content-Type", "application/json").body(body(i).to_string());
                        let response = request.send().await.unwrap();
                        assert_eq!(response.status().as_u16(), 201, "{}", response.text().await.unwrap());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

pub(crate) fn host_and_port(i: usize) -> Value {
    json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": format!("ct-{i:05}")},
        "host": format!("host-{i}"), "port": "80"})
}

fn host_port(i: usize) -> Value {
    json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": format!("ct-{i:05}")},
        "hostPort": format!("host-{i}:80")})
}

/// Another client: merge-patches a label on objects at v1 until stopped; returns what was acknowledged.
struct Writer {
    stop: Arc<AtomicBool>,
    acknowledged: Arc<Mutex<HashMap<String, u64>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    fn start(served: &Served, count: usize) -> Writer {
        let base = format!("{}/apis/example.com/v1/namespaces/default/crontabs", served.url());
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(HashMap::new()));
        let (stop_flag, acks) = (Arc::clone(&stop), Arc::clone(&acknowledged));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            let http = reqwest::Client::new();
            let mut round = 0u64;
            while !stop_flag.load(Ordering::Relaxed) {
                round += 1;
                let name = format!("ct-{:05}", (round * 7919) as usize % count);
                let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
                let answer = runtime.block_on(
                    http.patch(format!("{base}/{name}"))
                        .header("Content-Type", "application/merge-patch+json")
                        .body(patch.to_string())
                        .send(),
                );
                if answer.is_ok_and(|a| a.status().as_u16() == 200) {
                    acks.lock().unwrap().insert(name, round);
                }
            }
        });
        Writer { stop, acknowledged, thread }
    }

    fn stop(self) -> HashMap<String, u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.acknowledged.lock().unwrap().clone()
    }
}

fn migrate(served: &Served, state: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["migrate", CRD, "--kubeconfig", served.kubeconfig.to_str().unwrap()];
    args.extend(["--state-dir", state.to_str().unwrap(), "--output", "json"]);
    args.extend(extra);
    let out = crdctl(&args);
    let summary = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    (out.code, summary, out.stderr)
}

/// A server whose `count` objects were written while v1beta1 was the storage version, after
/// `crd_v1_storage` made v1 the storage version.
pub(crate) fn stored_as_v1beta1(
    backend: Backend,
    served_args: &[&str],
    crd_v1_storage: &str,
    count: usize,
    body: fn(usize) -> Value,
) -> Served {
    let served = Served::start_on(backend, served_args);
    let k = Kubectl::new("1.33", &served);
    k.apply(&v1beta1_storage(crd_v1_storage));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", &format!("crd/{CRD}")]);
    create(&served, count, body);
    k.apply(crd_v1_storage);
    served
}

/// The seed's storage upgrade: objects stored as v1beta1, storage moved to v1, `store stats`
/// showing what is left, `migrate` while another client writes, then v1beta1 can go.
fn storage_upgrade(
    backend: Backend,
    served_args: &[&str],
    crd_v1_storage: &str,
    count: usize,
    body: fn(usize) -> Value,
) {
    let served = stored_as_v1beta1(backend, served_args, crd_v1_storage, count, body);
    let (code, data) = served.terminate();
    assert_eq!(code, 0);
    assert_eq!(stored(&data), HashMap::from([("example.com/v1beta1".into(), count as u64)]));

    let served = data.serve(served_args);
    let k = Kubectl::new("1.33", &served);
    let refused = k.run_with(&["apply", "-f", "-"], Some(&without_version(crd_v1_storage, "v1beta1")));
    assert!(refused.stderr.contains("must remain in spec.versions until a storage migration"), "{refused:?}");
    let writer = Writer::start(&served, count);
    let state = tempfile::tempdir().unwrap();
    let (code, summary, stderr) = migrate(&served, state.path(), &[]);
    let acknowledged = writer.stop();
    assert_eq!(code, 0, "{summary}\n{stderr}");
    assert_eq!(summary["finished"], true);
    assert_eq!(summary["storedVersionsAfter"], json!(["v1"]));
    // The server serves StorageVersionMigrations: it rewrote the objects, migrate followed it.
    assert!(summary["migration"].as_str().is_some_and(|name| name.starts_with("crontabs.example.com-")), "{summary}");
    assert!(!acknowledged.is_empty(), "the other client wrote during the migration");
    let listed = k.json(&["get", "crontabs.v1.example.com"]);
    let labels: HashMap<&str, &str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| Some((i["metadata"]["name"].as_str()?, i["metadata"]["labels"]["round"].as_str()?)))
        .collect();
    for (name, round) in &acknowledged {
        assert_eq!(labels.get(name.as_str()), Some(&round.to_string().as_str()), "{name} lost an update");
    }
    let crd = k.json(&["get", "crd", CRD]);
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    k.apply(&without_version(crd_v1_storage, "v1beta1"));

    let (code, data) = served.terminate();
    assert_eq!(code, 0);
    assert_eq!(stored(&data), HashMap::from([("example.com/v1".into(), count as u64)]));
}

on_each_backend!(
    migrate_moves_every_object_to_the_storage_version_while_another_client_writes,
    kubectl_creates_a_storage_version_migration_the_server_carries_out,
);

fn migrate_moves_every_object_to_the_storage_version_while_another_client_writes(backend: Backend) {
    storage_upgrade(backend, &[], &example("3-v1-storage.yaml"), 10_000, host_and_port);
}

/// The seed's migration step as an API: `kubectl create -f` a StorageVersionMigration, the
/// server stopped while it runs and started again (with, on etcd, a second replica), and the
/// migration finished by exactly one of them.
fn kubectl_creates_a_storage_version_migration_the_server_carries_out(backend: Backend) {
    let served = stored_as_v1beta1(backend, &[], &example("3-v1-storage.yaml"), 10_000, host_and_port);
    let migration = "apiVersion: storagemigration.k8s.io/v1beta1\nkind: StorageVersionMigration\nmetadata:\n  name: crontabs\nspec:\n  resource:\n    group: example.com\n    resource: crontabs\n";
    let created = Kubectl::new("1.33", &served).run_with(&["create", "-f", "-"], Some(migration));
    assert!(created.stdout.contains("storageversionmigration.storagemigration.k8s.io/crontabs created"), "{created:?}");
    let (code, data) = served.terminate();
    assert_eq!(code, 0);

    let served = data.serve(&[]);
    let replica = (backend == Backend::Etcd).then(|| served.replica(&[]));
    for version in crate::serve::kubectl_versions() {
        let k = Kubectl::new(&version, &served);
        k.ok(&["wait", "--for=condition=Succeeded", "--timeout=60s", "storageversionmigration/crontabs"]);
        let done = k.json(&["get", "storageversionmigration", "crontabs"]);
        let conditions = done["status"]["conditions"].as_array().unwrap();
        let succeeded = conditions.iter().find(|c| c["type"] == "Succeeded").unwrap();
        assert_eq!(succeeded["reason"], "StorageVersionMigrationSucceeded", "{}: {done}", k.name());
    }
    let replicas: Vec<&Served> = std::iter::once(&served).chain(replica.as_ref()).collect();
    let runs: Vec<String> = replicas.iter().map(|r| metrics(r)).collect();
    let ran = |text: &String| {
        text.contains(
            r#"crdctl_storage_version_migrations_total{resource="crontabs.example.com",result="succeeded"} 1"#,
        )
    };
    assert_eq!(runs.iter().filter(|text| ran(text)).count(), 1, "one replica ran it once");
    drop(replica);
    let (_, data) = served.terminate();
    assert_eq!(stored(&data), HashMap::from([("example.com/v1".into(), 10_000)]));
}

#[test]
fn migrate_through_the_conversion_webhook_over_tls() {
    let work = tempfile::tempdir().unwrap();
    let certs = crate::webhook::certs(work.path());
    let webhook = crate::webhook::start_example(&certs);
    let mapping = format!("default/example-conversion-webhook-server=127.0.0.1:{}", webhook.port);
    let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
    let crd = example("4-webhook.yaml").replace("caBundle: \"Cg==\"", &format!("caBundle: \"{}\"", ca_bundle.trim()));
    storage_upgrade(Backend::Redb, &["--webhook-service", &mapping], &crd, 10_000, host_port);
}

#[test]
fn a_migration_killed_halfway_finishes_without_rewriting_finished_pages() {
    let served = stored_as_v1beta1(Backend::Redb, &[], &example("3-v1-storage.yaml"), 10_000, host_and_port);
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .args(["migrate", CRD, "--kubeconfig", served.kubeconfig.to_str().unwrap(), "--page-size", "200"])
        .args(["--concurrency", "2", "--client-side", "--state-dir", state.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let record = loop {
        let record = std::fs::read_dir(state.path())
            .unwrap()
            .filter_map(Result::ok)
            .find(|e| e.path().extension().is_some_and(|x| x == "json"))
            .and_then(|e| serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok());
        if let Some(record) = record.filter(|r| r["done"].as_u64().unwrap_or(0) >= 2_000) {
            break record;
        }
        assert!(Instant::now() < deadline, "the migration made no progress");
        assert!(child.try_wait().unwrap().is_none(), "the migration ended before it could be killed");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let record_file = std::fs::read_dir(state.path()).unwrap().next().unwrap().unwrap().path();
    let done =
        serde_json::from_slice::<Value>(&std::fs::read(&record_file).unwrap()).unwrap()["done"].as_u64().unwrap();
    assert!(done >= record["done"].as_u64().unwrap() && done < 10_000, "killed halfway: {done}");

    let puts_before = puts(&served);
    let (code, summary, stderr) = migrate(&served, state.path(), &["--page-size", "200", "--client-side"]);
    assert_eq!(code, 0, "{summary}\n{stderr}");
    assert_eq!(summary["resumed"], done);
    let handled = summary["rewritten"].as_u64().unwrap() + summary["unchanged"].as_u64().unwrap();
    assert_eq!(handled, 10_000 - done, "{summary}");
    assert_eq!(puts(&served) - puts_before, handled, "one PUT per object left, none for finished pages");
    assert!(!record_file.exists());
    let (_, data) = served.terminate();
    assert_eq!(stored(&data), HashMap::from([("example.com/v1".into(), 10_000)]));
}

/// The server's /metrics.
fn metrics(served: &Served) -> String {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async { reqwest::get(format!("{}/metrics", served.url())).await.unwrap().text().await.unwrap() })
}

/// PUTs of CronTabs the server has answered, from its /metrics.
fn puts(served: &Served) -> u64 {
    metrics(served)
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains(r#"verb="PUT""#)
                && l.contains(r#"resource="crontabs""#)
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn retire_version_walks_the_seed_procedure_and_refuses_with_reasons() {
    let served = stored_as_v1beta1(Backend::Redb, &[], &example("3-v1-storage.yaml"), 300, host_and_port);
    let k = Kubectl::new("1.33", &served);
    let kubeconfig = served.kubeconfig.to_str().unwrap().to_string();
    let state = tempfile::tempdir().unwrap();
    let retire = |extra: &[&str]| {
        let mut args = vec!["retire-version", CRD];
        args.extend(extra);
        args.extend(["--kubeconfig", &kubeconfig, "--state-dir", state.path().to_str().unwrap()]);
        crdctl(&args)
    };

    let storage = retire(&["v1"]);
    assert_eq!(storage.code, 1, "{storage:?}");
    assert!(
        storage.stdout.contains("[REFUSED] v1 is not the storage version: v1 is the storage version"),
        "{}",
        storage.stdout
    );

    // The objects were just created through v1beta1.
    let in_use = retire(&["v1beta1", "--apply"]);
    assert_eq!(in_use.code, 1, "{in_use:?}");
    assert!(
        in_use.stdout.contains("[REFUSED] no client requested v1beta1 in the last 10m: clients requested v1beta1 "),
        "{}",
        in_use.stdout
    );
    assert_eq!(k.json(&["get", "crd", CRD])["spec"]["versions"].as_array().unwrap().len(), 2, "nothing changed");

    let plan = retire(&["v1beta1", "--unused-for", "0s"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(plan.stdout.contains("1. [to do] set served: false"), "{}", plan.stdout);
    assert!(plan.stdout.contains("run again with --apply"), "{}", plan.stdout);

    let applied = retire(&["v1beta1", "--unused-for", "0s", "--apply"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    for step in ["1. [applied]", "2. [applied]", "3. [applied]"] {
        assert!(applied.stdout.contains(step), "{}", applied.stdout);
    }
    let crd = k.json(&["get", "crd", CRD]);
    assert_eq!(crd["spec"]["versions"].as_array().unwrap().iter().map(|v| &v["name"]).collect::<Vec<_>>(), ["v1"]);
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let gone = k.run(&["get", "crontabs.v1beta1.example.com"]);
    assert_ne!(gone.code, 0);

    let again = retire(&["v1beta1", "--unused-for", "0s", "--apply"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("1. [done]") && again.stdout.contains("3. [done]"), "{}", again.stdout);
    let (_, data) = served.terminate();
    assert_eq!(stored(&data), HashMap::from([("example.com/v1".into(), 300)]));
}

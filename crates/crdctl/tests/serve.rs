//! `crdctl serve` driven by the real kubectl through the whole story of the Kubernetes page on
//! CRD versions, with the oldest and newest kubectl by default; `CRDCTL_KUBECTL_VERSIONS`
//! (e.g. `1.28,1.29,...,1.35`, as `scripts/kubectl-matrix` sets it) picks others.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crdctl_storage::etcd::cluster::LocalCluster;
use serde_json::{Value, json};

use crate::util::repo_root;

/// Where a `crdctl serve` process keeps its state; it outlives the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default, a redb database in a directory.
    Redb,
    /// A real etcd (one member, on free ports), which several servers may share.
    Etcd,
}

/// The state behind one server: a directory (its kubeconfig, and the redb data) and, on etcd,
/// the cluster, shared with replicas.
pub struct Data {
    pub dir: tempfile::TempDir,
    pub etcd: Option<Arc<Mutex<LocalCluster>>>,
}

impl Data {
    pub fn new(backend: Backend) -> Data {
        let etcd =
            (backend == Backend::Etcd).then(|| Arc::new(Mutex::new(LocalCluster::start(1).expect("etcd starts"))));
        Data { dir: tempfile::tempdir().unwrap(), etcd }
    }

    /// State on a new etcd cluster of `members` members.
    pub fn on_cluster(members: usize) -> Data {
        let etcd = LocalCluster::start(members).expect("etcd starts");
        Data { dir: tempfile::tempdir().unwrap(), etcd: Some(Arc::new(Mutex::new(etcd))) }
    }

    /// Another server's state on the same etcd (its own directory for its kubeconfig).
    pub fn replica(&self) -> Data {
        assert!(self.etcd.is_some(), "replicas share an etcd");
        Data { dir: tempfile::tempdir().unwrap(), etcd: self.etcd.clone() }
    }

    /// The flags that point `crdctl serve` or `crdctl store stats` at this state.
    pub fn store_args(&self) -> Vec<String> {
        match &self.etcd {
            Some(etcd) => vec!["--etcd".into(), etcd.lock().unwrap().endpoints().join(",")],
            None => vec!["--data".into(), self.dir.path().join("data").display().to_string()],
        }
    }

    /// Starts the real binary on this state with `args` after `serve --listen 127.0.0.1:0`.
    pub fn serve(self, args: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(self.store_args())
            .arg("--write-kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("crdctl serve starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("crdctl serve prints its address").unwrap();
        assert!(
            first.contains("listening on http://127.0.0.1:") || first.contains("listening on https://127.0.0.1:"),
            "{first}"
        );
        let export = lines.next().unwrap().unwrap();
        let kubeconfig = PathBuf::from(export.strip_prefix("export KUBECONFIG=").expect("the export line"));
        assert_eq!(lines.next().unwrap().unwrap(), "kubectl get crds");
        Served { child, data: Some(self), kubeconfig }
    }
}

/// A `crdctl serve` process on a free loopback port.
pub struct Served {
    child: Child,
    data: Option<Data>,
    pub kubeconfig: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// A server on fresh state of `backend`.
    pub fn start_on(backend: Backend, args: &[&str]) -> Served {
        Data::new(backend).serve(args)
    }

    /// Its state.
    pub fn data(&self) -> &Data {
        self.data.as_ref().expect("a running server has its data")
    }

    /// Another server on the same etcd.
    pub fn replica(&self, args: &[&str]) -> Served {
        self.data().replica().serve(args)
    }

    /// The server's base URL, read from its kubeconfig.
    pub fn url(&self) -> String {
        let kubeconfig = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let line = kubeconfig.lines().find(|l| l.trim_start().starts_with("server: ")).unwrap();
        line.trim_start().trim_start_matches("server: ").to_string()
    }

    /// Kills the process with SIGKILL, keeping the data.
    pub fn kill(mut self) -> Data {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.data.take().expect("the data")
    }

    /// Sends SIGTERM and returns the exit code.
    pub fn terminate(mut self) -> (i32, Data) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = self.child.wait().unwrap();
        (status.code().unwrap_or(-1), self.data.take().expect("the data"))
    }
}

/// Defines, for each `fn name(backend: Backend)` named, one test per storage backend:
/// `on_redb::name` and `on_etcd::name`.
macro_rules! on_each_backend {
    ($($test:ident),* $(,)?) => {
        mod on_redb {
            $( #[test] fn $test() { super::$test(crate::serve::Backend::Redb) } )*
        }
        mod on_etcd {
            $( #[test] fn $test() { super::$test(crate::serve::Backend::Etcd) } )*
        }
    };
}

/// The kubectl versions the end-to-end tests run (`CRDCTL_KUBECTL_VERSIONS`, default the
/// oldest and newest that ship).
pub fn kubectl_versions() -> Vec<String> {
    std::env::var("CRDCTL_KUBECTL_VERSIONS")
        .unwrap_or_else(|_| "1.28,1.35".to_string())
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// `kubectl.<version>` from the test peers (`scripts/peers`).
pub fn kubectl_binary(version: &str) -> PathBuf {
    crdctl_storage::peers::binary(&format!("kubectl.{version}")).unwrap_or_else(|err| panic!("{err}"))
}

/// One kubectl, pinned to a version, with its own cache directory.
pub struct Kubectl {
    binary: PathBuf,
    /// The minor release: 33 for kubectl 1.33.
    minor: u32,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn new(version: &str, served: &Served) -> Kubectl {
        Kubectl::with_kubeconfig(version, served.kubeconfig.clone())
    }

    pub fn with_kubeconfig(version: &str, kubeconfig: PathBuf) -> Kubectl {
        Kubectl {
            binary: kubectl_binary(version),
            minor: version.strip_prefix("1.").and_then(|minor| minor.parse().ok()).expect("a version 1.N"),
            kubeconfig,
            cache: tempfile::tempdir().unwrap(),
        }
    }

    /// The same kubectl with the kubeconfig's credentials left out, to run with `--token`
    /// (given `--token`, kubectl would send the client certificate too, and the server believes
    /// the certificate first, as kube-apiserver's x509 authenticator comes before the token ones).
    pub fn without_credentials(&self) -> Kubectl {
        let kubeconfig = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let credential = |line: &&str| {
            let line = line.trim_start();
            ["client-certificate-data:", "client-key-data:", "token:"].iter().any(|field| line.starts_with(field))
        };
        let lines: Vec<&str> = kubeconfig.lines().filter(|line| !credential(line)).collect();
        let cache = tempfile::tempdir().unwrap();
        let path = cache.path().join("kubeconfig");
        std::fs::write(&path, lines.join("\n").replace("  user:\n", "  user: {}\n")).unwrap();
        Kubectl { binary: self.binary.clone(), minor: self.minor, kubeconfig: path, cache }
    }

    /// What `kubectl delete` prints for a namespaced object: from 1.34 on it names the namespace.
    pub fn deleted(&self, object: &str, namespace: &str) -> String {
        if self.minor >= 34 {
            format!("{object} deleted from {namespace} namespace")
        } else {
            format!("{object} deleted")
        }
    }

    /// Whether this kubectl is release 1.`minor` or newer.
    pub fn at_least(&self, minor: u32) -> bool {
        self.minor >= minor
    }

    /// The binary's name, `kubectl.1.33`, for messages.
    pub fn name(&self) -> String {
        self.binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command.env("KUBECONFIG", &self.kubeconfig).arg("--cache-dir").arg(self.cache.path()).args(args);
        command
    }

    #[track_caller]
    pub fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Run {
        Self::execute(self.command(args), stdin)
    }

    /// `kubectl edit ARGS` with `editor`, a shell command, as the editor it runs on the file.
    #[track_caller]
    pub fn edit(&self, args: &[&str], editor: &str) -> Run {
        let mut command = self.command(&[&["edit"], args].concat());
        command.env("KUBE_EDITOR", editor);
        Self::execute(command, None)
    }

    #[track_caller]
    fn execute(mut command: Command, stdin: Option<&str>) -> Run {
        let mut child = command
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, None)
    }

    /// Runs and requires success.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert_eq!(run.code, 0, "kubectl {args:?}: {run:?}");
        run
    }

    /// Applies YAML from standard input and requires success.
    #[track_caller]
    pub fn apply(&self, yaml: &str) -> Run {
        let run = self.run_with(&["apply", "-f", "-"], Some(yaml));
        assert_eq!(run.code, 0, "kubectl apply of\n{yaml}\n{run:?}");
        run
    }

    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&full).stdout).unwrap()
    }
}

pub fn example(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("examples/crontab").join(name)).unwrap()
}

/// The CRD at a stage, with printer columns on v1 so `kubectl get` shows them.
fn with_columns(crd: &str) -> String {
    crd.replace(
        "  - name: v1\n    served: true\n    storage: true\n",
        "  - name: v1\n    served: true\n    storage: true\n    additionalPrinterColumns:\n    - {name: Host, type: string, jsonPath: .host}\n    - {name: Port, type: string, jsonPath: .port}\n",
    )
}

/// Drops a version's entry from `spec.versions` (what the seed's last step does).
pub fn without_version(crd: &str, version: &str) -> String {
    let start = crd.find(&format!("  - name: {version}\n")).unwrap();
    let end = crd[start + 1..].find("  - name: ").map_or_else(|| crd.find("  conversion:").unwrap(), |e| e + start + 1);
    format!("{}{}", &crd[..start], &crd[end..])
}

const OBJECT_V1BETA1: &str = "apiVersion: example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: my-new-cron-object\nhost: localhost\nport: \"1234\"\n";
const DEPRECATED: &str = "Warning: example.com/v1beta1 CronTab is deprecated; use example.com/v1 CronTab";

fn without_api_version(mut object: Value) -> Value {
    object.as_object_mut().unwrap().remove("apiVersion");
    object
}

#[track_caller]
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The seed's whole story with the None strategy, for one kubectl version.
fn seed_story(backend: Backend, version: &str) {
    let served = Served::start_on(backend, &[]);
    let k = Kubectl::new(version, &served);

    // A CRD with v1beta1 only; kubectl waits for Established.
    let created = k.apply(&example("1-v1beta1.yaml"));
    assert_eq!(created.stdout.trim(), "customresourcedefinition.apiextensions.k8s.io/crontabs.example.com created");
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    let crds = k.ok(&["get", "crd"]);
    assert!(crds.stdout.starts_with("NAME                   CREATED AT\ncrontabs.example.com   20"), "{}", crds.stdout);
    assert_eq!(k.apply(OBJECT_V1BETA1).stdout.trim(), "crontab.example.com/my-new-cron-object created");
    assert_eq!(k.apply(OBJECT_V1BETA1).stdout.trim(), "crontab.example.com/my-new-cron-object unchanged");

    // v1 is added, then becomes the storage version; v1beta1 is deprecated.
    k.apply(&with_columns(&example("2-v1-added.yaml")));
    k.apply(&with_columns(&example("3-v1-storage.yaml")));
    let stored = k.ok(&["get", "crd", "crontabs.example.com", "-o", "jsonpath={.status.storedVersions}"]);
    assert_eq!(stored.stdout, r#"["v1beta1","v1"]"#);

    // The same object at both versions: identical but apiVersion; v1beta1 warns.
    let old = k.run(&["get", "crontabs.v1beta1.example.com", "my-new-cron-object", "-o", "json"]);
    assert_eq!(old.code, 0, "{old:?}");
    assert!(old.stderr.contains(DEPRECATED), "{}", old.stderr);
    let old: Value = serde_json::from_str(&old.stdout).unwrap();
    let new = k.json(&["get", "crontabs.v1.example.com", "my-new-cron-object"]);
    assert_eq!(old["apiVersion"], "example.com/v1beta1");
    assert_eq!(new["apiVersion"], "example.com/v1");
    assert_eq!(without_api_version(old), without_api_version(new.clone()));
    assert_eq!(new["host"], "localhost");

    // Printer columns of the preferred version (v1).
    let table = k.ok(&["get", "crontabs"]);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["NAME", "HOST", "PORT"], "{}", table.stdout);
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["my-new-cron-object", "localhost", "1234"]);

    // explain reads the served schema.
    let explain = k.ok(&["explain", "crontab.host"]);
    assert!(explain.stdout.contains("FIELD: host <string>"), "{}", explain.stdout);

    // Removing a stored version from spec.versions is refused with the upstream message.
    let v1_only = without_version(&with_columns(&example("3-v1-storage.yaml")), "v1beta1");
    let refused = k.run_with(&["apply", "-f", "-"], Some(&v1_only));
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains(r#"The CustomResourceDefinition "crontabs.example.com" is invalid: status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"#),
        "{}",
        refused.stderr
    );

    // Stop serving v1beta1: its requests are 404.
    k.apply(&with_columns(&example("3-v1-storage.yaml")).replacen(
        "    served: true\n    storage: false",
        "    served: false\n    storage: false",
        1,
    ));
    wait_until("v1beta1 to stop being served", || {
        let run = k.run(&["get", "crontabs.v1beta1.example.com", "my-new-cron-object"]);
        run.code != 0 && run.stderr.contains("the server could not find the requested resource")
    });

    // Migrate: rewrite every object in the storage version, then trim storedVersions.
    let objects = k.ok(&["get", "crontabs", "-o", "json"]).stdout;
    k.run_with(&["replace", "-f", "-"], Some(&objects));
    k.ok(&[
        "patch",
        "customresourcedefinitions",
        "crontabs.example.com",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"storedVersions":["v1"]}}"#,
    ]);
    let stored = k.ok(&["get", "crd", "crontabs.example.com", "-o", "jsonpath={.status.storedVersions}"]);
    assert_eq!(stored.stdout, r#"["v1"]"#);

    // Now v1beta1 can go, and the migrated object is still readable.
    let removed = k.run_with(&["apply", "-f", "-"], Some(&v1_only));
    assert_eq!(removed.code, 0, "{removed:?}");
    assert_eq!(k.json(&["get", "crontab", "my-new-cron-object"])["port"], "1234");

    // get -w streams a new object; delete waits until it is gone.
    let mut watch = k
        .command(&["get", "crontabs", "-w", "--request-timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut watched = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert!(watched.next().unwrap().unwrap().starts_with("NAME"));
    assert!(watched.next().unwrap().unwrap().starts_with("my-new-cron-object"));
    k.apply("apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: watched\nhost: h\nport: \"9\"\n");
    let line = watched.next().unwrap().unwrap();
    assert_eq!(line.split_whitespace().collect::<Vec<_>>(), ["watched", "h", "9"]);
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        k.ok(&["delete", "crontab", "watched"]).stdout.trim(),
        k.deleted(r#"crontab.example.com "watched""#, "default")
    );
    let gone = k.run(&["get", "crontab", "watched"]);
    assert!(gone.stderr.contains(r#"crontabs.example.com "watched" not found"#), "{gone:?}");

    // Deleting the CRD deletes its objects; kubectl waits for it.
    k.ok(&["delete", "crd", "crontabs.example.com"]);
    assert_eq!(k.ok(&["get", "crd"]).stderr.trim(), "No resources found");
}

fn kubectl_drives_the_seed_story(backend: Backend) {
    for version in kubectl_versions() {
        seed_story(backend, &version);
    }
}

/// The CronTab CRD, a namespace, two CronTabs (one held by a finalizer) and built-in objects,
/// in one file.
fn mixed_manifest() -> String {
    format!(
        "{crd}---
apiVersion: v1
kind: Namespace
metadata: {{name: team-d}}
---
apiVersion: example.com/v1
kind: CronTab
metadata: {{name: nightly, namespace: team-d}}
host: h
port: \"1\"
---
apiVersion: example.com/v1
kind: CronTab
metadata: {{name: held, namespace: team-d, finalizers: [example.com/hold]}}
host: h
port: \"2\"
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: team-d}}
data: {{schedule: '@nightly'}}
---
apiVersion: v1
kind: Secret
metadata: {{name: credentials, namespace: team-d}}
stringData: {{password: hunter2}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: crontab-controller, namespace: team-d}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: crontab-controller, namespace: team-d}}
spec: {{holderIdentity: pod-a, leaseDurationSeconds: 15}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: crontab-editor, namespace: team-d}}
rules: [{{apiGroups: [example.com], resources: [crontabs], verbs: ['*']}}]
",
        crd = example("3-v1-storage.yaml")
    )
}

/// One file mixing a CRD, its objects and built-in objects (a ConfigMap, a Secret with
/// `stringData`, a ServiceAccount, a Lease, RBAC), applied server-side twice: the second apply
/// changes nothing. Then the built-ins as kubectl reads them, and a namespace's deletion, held
/// `Terminating` by a CronTab's finalizer until it is removed.
fn kubectl_applies_crds_and_built_in_objects_together(backend: Backend) {
    let manifest = mixed_manifest();
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        let first = k.run_with(&["apply", "--server-side", "-f", "-"], Some(&manifest));
        // The CRD may not be served yet when its objects arrive: apply again until it is.
        if first.code != 0 {
            assert!(first.stderr.contains("crontab") || first.stderr.contains("CronTab"), "{}: {first:?}", k.name());
            k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
            let again = k.run_with(&["apply", "--server-side", "-f", "-"], Some(&manifest));
            assert_eq!(again.code, 0, "{}: {again:?}", k.name());
        }
        let before = k.json(&["get", "configmaps,secrets,serviceaccounts,leases,roles,crontabs", "-n", "team-d"]);
        let second = k.run_with(&["apply", "--server-side", "-f", "-"], Some(&manifest));
        assert_eq!(second.code, 0, "{}: {second:?}", k.name());
        assert!(second.stdout.lines().all(|line| line.ends_with("serverside-applied")), "{}: {second:?}", k.name());
        let after = k.json(&["get", "configmaps,secrets,serviceaccounts,leases,roles,crontabs", "-n", "team-d"]);
        // The manifest's objects: the namespace's `default` ServiceAccount and `kube-root-ca.crt`
        // come from controllers, in their own time.
        let versions = |list: &Value| -> Vec<String> {
            let items = list["items"].as_array().unwrap().iter();
            let applied =
                items.filter(|i| !matches!(i["metadata"]["name"].as_str(), Some("default" | "kube-root-ca.crt")));
            applied.map(|i| i["metadata"]["resourceVersion"].to_string()).collect()
        };
        assert_eq!(versions(&after).len(), 7, "{}: {after}", k.name());
        assert_eq!(versions(&before), versions(&after), "{}: the second apply changed nothing", k.name());
        let secret = k.json(&["get", "secret", "credentials", "-n", "team-d"]);
        assert_eq!(
            (secret["data"]["password"].as_str(), secret["type"].as_str()),
            (Some("aHVudGVyMg=="), Some("Opaque"))
        );
        // Upstream's printer columns.
        let printed = k.ok(&["get", "cm,secrets,leases,roles", "-n", "team-d"]).stdout;
        let words = |line: &str| line.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let lines: Vec<Vec<String>> = printed.lines().map(words).collect();
        for expected in [
            vec!["NAME", "DATA", "AGE"],
            vec!["NAME", "TYPE", "DATA", "AGE"],
            vec!["NAME", "HOLDER", "AGE"],
            vec!["NAME", "CREATED", "AT"],
        ] {
            assert!(lines.iter().any(|l| *l == expected), "{}: {expected:?} in\n{printed}", k.name());
        }
        assert!(
            lines.iter().any(|l| l.get(..2) == Some(&["configmap/settings".to_string(), "1".to_string()])),
            "{printed}"
        );
        assert!(
            lines.iter().any(|l| l.get(..3) == Some(&["secret/credentials".into(), "Opaque".into(), "1".into()])),
            "{printed}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.get(..2) == Some(&["lease.coordination.k8s.io/crontab-controller".into(), "pod-a".into()])),
            "{printed}"
        );
        let names = k.ok(&["get", "cm", "settings", "-n", "team-d", "-o", "name"]).stdout;
        assert_eq!(names.trim(), "configmap/settings", "{}", k.name());
        // The held CronTab keeps the namespace Terminating until its finalizer goes.
        k.ok(&["delete", "namespace", "team-d", "--wait=false"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = k.ok(&["get", "crontabs", "-n", "team-d", "-o", "name"]).stdout;
            if left.trim() == "crontab.example.com/held" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}: only the held CronTab stays: {left}", k.name());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let terminating = k.ok(&["get", "namespace", "team-d", "--no-headers"]).stdout;
        assert_eq!(words(&terminating).get(..2), Some(&["team-d".to_string(), "Terminating".to_string()][..]));
        k.ok(&[
            "patch",
            "crontab",
            "held",
            "-n",
            "team-d",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
        k.ok(&["wait", "--for=delete", "namespace/team-d", "--timeout=20s"]);
        // (kube-system keeps the server's own Lease, as a cluster's keeps its controllers'.)
        let listed = r#"jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}"#;
        let left = k.ok(&["get", "configmaps,leases,crontabs", "-A", "-o", listed]).stdout;
        assert!(
            !left.lines().any(|l| l.starts_with("team-d/")),
            "{}: the namespace took its objects along: {left}",
            k.name()
        );
    }
}

/// Workloads and Services as kubectl drives them: create, scale, expose, `get all`, `describe`
/// with the object's Events, `explain` from upstream's schema, strict validation.
fn kubectl_runs_workloads_and_services(backend: Backend) {
    let deployment = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: 'nginx:1.27', ports: [{containerPort: 80}]}]}
";
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.run_with(&["create", "-f", "-"], Some(deployment));
        let created = k.json(&["get", "deployment", "web"]);
        assert_eq!(created["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%", "{}", k.name());
        k.ok(&["scale", "deployment", "web", "--replicas=3"]);
        assert_eq!(k.json(&["get", "deployment", "web"])["spec"]["replicas"], 3, "{}", k.name());
        k.ok(&["expose", "deployment", "web", "--port=80"]);
        let service = k.json(&["get", "service", "web"]);
        let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert!(cluster_ip.starts_with("10."), "{}: {service}", k.name());
        assert_eq!(service["spec"]["selector"], json!({"app": "web"}));
        // kubectl autoscale writes an autoscaling/v1 object; v2 readers see its CPU metric.
        k.ok(&["autoscale", "deployment", "web", "--max=5", "--cpu-percent=70"]);
        let hpa = k.json(&["get", "horizontalpodautoscalers.v2.autoscaling", "web"]);
        assert_eq!(
            (
                hpa["spec"]["maxReplicas"].clone(),
                hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"].clone()
            ),
            (json!(5), json!(70)),
            "{}: {hpa}",
            k.name()
        );
        let listed = k.ok(&["get", "hpa", "web", "--no-headers"]).stdout;
        let row: Vec<&str> = listed.split_whitespace().collect();
        let expected = ["web", "Deployment/web", "cpu:", "<unknown>/70%", "1", "5", "0"];
        assert_eq!(row.get(..7), Some(&expected[..]), "{}: {listed}", k.name());

        let all = k.ok(&["get", "all"]).stdout;
        let rows: Vec<Vec<&str>> = all.lines().map(|line| line.split_whitespace().collect()).collect();
        assert!(
            rows.iter().any(|r| r.get(..4) == Some(&["deployment.apps/web", "0/3", "0", "0"])),
            "{}: {all}",
            k.name()
        );
        let service_row = ["service/web", "ClusterIP", cluster_ip.as_str(), "<none>", "80/TCP"];
        assert!(rows.iter().any(|r| r.get(..5) == Some(&service_row)), "{}: {all}", k.name());

        let uid = created["metadata"]["uid"].as_str().unwrap();
        let event = format!(
            "apiVersion: v1\nkind: Event\nmetadata: {{name: web.1}}\ntype: Normal\nreason: ScalingReplicaSet\nmessage: Scaled up replica set web-1 to 3\ninvolvedObject: {{apiVersion: apps/v1, kind: Deployment, name: web, namespace: default, uid: {uid}}}\nsource: {{component: deployment-controller}}\n"
        );
        k.apply(&event);
        let described = k.ok(&["describe", "deployment", "web"]).stdout;
        assert!(described.contains("Scaled up replica set web-1 to 3"), "{}: {described}", k.name());
        // Upstream's event printer; the event has no timestamps of its own.
        let events = k.ok(&["get", "events"]).stdout;
        let lines: Vec<Vec<&str>> = events.lines().map(|line| line.split_whitespace().collect()).collect();
        let expected = [
            vec!["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "<unknown> Normal ScalingReplicaSet deployment/web Scaled up replica set web-1 to 3".split(' ').collect(),
        ];
        assert_eq!(lines, expected, "{}: {events}", k.name());
        assert!(described.contains("25% max unavailable, 25% max surge"), "{}: {described}", k.name());

        let explained = k.ok(&["explain", "deployment.spec.strategy"]).stdout;
        assert!(
            explained.contains("rollingUpdate") && explained.contains("DeploymentStrategy"),
            "{}: {explained}",
            k.name()
        );
        let unknown = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndata: {a: b}\ndatta: {a: b}\n";
        let strict = k.run_with(&["apply", "--validate=strict", "-f", "-"], Some(unknown));
        assert_ne!(strict.code, 0, "{}", k.name());
        assert!(strict.stderr.contains(r#"unknown field "datta""#), "{}: {strict:?}", k.name());
        k.ok(&["delete", "service", "web"]);
        let addresses = k.ok(&["get", "ipaddresses", "-o", "name"]).stdout;
        assert!(
            !addresses.contains(&cluster_ip),
            "{}: deleting the Service gave its address back: {addresses}",
            k.name()
        );
    }
}

/// kubectl's generators build typed objects and send them (newer releases in protobuf, older in JSON):
/// namespaces, ConfigMaps, Secrets, ServiceAccounts, Deployments, tokens, and `auth can-i`.
fn kubectl_generators_create_built_in_objects(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.ok(&["create", "namespace", "team-a"]);
        k.ok(&["-n", "team-a", "create", "configmap", "settings", "--from-literal=mode=fast"]);
        k.ok(&["-n", "team-a", "create", "secret", "generic", "credentials", "--from-literal=password=hunter2"]);
        k.ok(&["-n", "team-a", "create", "serviceaccount", "builder"]);
        k.ok(&["-n", "team-a", "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"]);
        assert_eq!(
            k.json(&["-n", "team-a", "get", "configmap", "settings"])["data"],
            json!({"mode": "fast"}),
            "{}",
            k.name()
        );
        let secret = k.json(&["-n", "team-a", "get", "secret", "credentials"]);
        assert_eq!(
            (secret["data"]["password"].as_str(), secret["type"].as_str()),
            (Some("aHVudGVyMg=="), Some("Opaque"))
        );
        let deployment = k.json(&["-n", "team-a", "get", "deployment", "web"]);
        let spec = &deployment["spec"];
        assert_eq!(
            (spec["replicas"].clone(), spec["template"]["spec"]["containers"][0]["image"].clone()),
            (json!(2), json!("nginx:1.27"))
        );
        // What Go's protobuf encoder writes for value fields at zero is not kept, as in JSON.
        assert!(spec.get("minReadySeconds").is_none() && spec.get("paused").is_none(), "{}: {deployment}", k.name());
        let token = k.ok(&["-n", "team-a", "create", "token", "builder"]).stdout;
        assert_eq!(token.trim().split('.').count(), 3, "{}: a JWT", k.name());
        assert_eq!(k.ok(&["auth", "can-i", "*", "*"]).stdout.trim(), "yes", "{}", k.name());
        assert_eq!(k.ok(&["auth", "can-i", "delete", "deployments", "-n", "team-a"]).stdout.trim(), "yes");
    }
}

/// kubectl patches built-in objects with strategic merge patches: client-side `apply` (the
/// three-way merge with `last-applied-configuration`) changes exactly what the file changed,
/// and `set image`, `label` and `rollout restart` do what they say.
fn kubectl_patches_built_in_objects_strategically(backend: Backend) {
    let deployment = |image: &str, env: &str| {
        format!(
            "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: web, image: '{image}', env: [{env}], ports: [{{containerPort: 80}}]}}
      - {{name: side, image: 'envoy:1'}}
"
        )
    };
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        let first = deployment("nginx:1.27", "{name: A, value: '1'}, {name: B, value: '2'}");
        k.apply(&first);
        let applied = k.json(&["get", "deployment", "web"]);
        let again = k.apply(&first).stdout;
        assert!(again.contains("deployment.apps/web unchanged"), "{}: {again}", k.name());
        let unchanged = k.json(&["get", "deployment", "web"]);
        assert_eq!(unchanged["metadata"]["resourceVersion"], applied["metadata"]["resourceVersion"], "{}", k.name());

        k.apply(&deployment("nginx:1.28", "{name: A, value: '1'}"));
        let changed = k.json(&["get", "deployment", "web"]);
        let mut expected = applied["spec"].clone();
        expected["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
        expected["template"]["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        assert_eq!(changed["spec"], expected, "{}: exactly the file's changes", k.name());
        assert_eq!(changed["metadata"]["generation"], 2, "{}", k.name());

        k.ok(&["set", "image", "deployment/web", "side=envoy:2"]);
        k.ok(&["label", "deployment", "web", "tier=front"]);
        k.ok(&["rollout", "restart", "deployment", "web"]);
        let patched = k.json(&["get", "deployment", "web"]);
        let containers = &patched["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            (
                containers[0]["image"].as_str(),
                containers[1]["image"].as_str(),
                patched["metadata"]["labels"]["tier"].as_str()
            ),
            (Some("nginx:1.28"), Some("envoy:2"), Some("front")),
            "{}: {patched}",
            k.name()
        );
        let annotations = &patched["spec"]["template"]["metadata"]["annotations"];
        assert!(annotations["kubectl.kubernetes.io/restartedAt"].is_string(), "{}: {patched}", k.name());

        // `kubectl edit` sends the difference as a strategic merge patch, strictly validated.
        let edited = k.edit(&["deployment", "web"], "sed -i -e 's/image: envoy:2/image: envoy:3/'");
        assert_eq!(edited.code, 0, "{}: {edited:?}", k.name());
        let containers = k.json(&["get", "deployment", "web"])["spec"]["template"]["spec"]["containers"].clone();
        assert_eq!(
            (containers[0]["image"].as_str(), containers[1]["image"].as_str()),
            (Some("nginx:1.28"), Some("envoy:3")),
            "{}: {containers}",
            k.name()
        );
        let refused = k.edit(&["deployment", "web"], "sed -i -e 's/^spec:$/spec:\\n  replica: 5/'");
        // kubectl reopens the file with the server's causes on top, then keeps a copy.
        let copy = refused.stderr.split_once("has been stored to \"").and_then(|(_, rest)| rest.split_once('"'));
        let copy = copy.map(|(path, _)| path.to_string()).unwrap_or_else(|| panic!("{}: {refused:?}", k.name()));
        let reopened = std::fs::read_to_string(&copy).unwrap_or_default();
        std::fs::remove_file(&copy).ok();
        assert!(
            refused.code != 0
                && reopened.contains(r#"# * patch: Invalid value: "map[spec:map[replica:5]]": strict decoding error: unknown field "spec.replica""#),
            "{}: {refused:?}\n{reopened}",
            k.name()
        );
    }
}

/// A ConfigMap in `team` owned by the object `owner` (its kind and uid).
fn owned_configmap(name: &str, owner: &Value) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: team\n  ownerReferences:\n  - {{apiVersion: {}, kind: {}, name: {}, uid: {}, blockOwnerDeletion: true}}\n",
        owner["apiVersion"].as_str().unwrap(),
        owner["kind"].as_str().unwrap(),
        owner["metadata"]["name"].as_str().unwrap(),
        owner["metadata"]["uid"].as_str().unwrap(),
    )
}

/// `kubectl delete --cascade` behaves as on a cluster (the garbage collector deletes or orphans
/// the dependents), and a deleted namespace with custom resources and finalizers in it goes
/// once the finalizers do.
fn kubectl_cascades_deletions_and_namespaces_finish(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.ok(&["create", "namespace", "team"]);
        k.apply(&example("3-v1-storage.yaml"));
        k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
        for cascade in ["background", "foreground", "orphan"] {
            let owner = format!("owner-{cascade}");
            k.ok(&["create", "configmap", &owner, "-n", "team"]);
            let owner_object = k.json(&["get", "configmap", &owner, "-n", "team"]);
            k.apply(&owned_configmap(&format!("dependent-{cascade}"), &owner_object));
            k.ok(&["delete", "configmap", &owner, "-n", "team", &format!("--cascade={cascade}")]);
        }
        let exists = |name: &str| k.run(&["get", "configmap", name, "-n", "team"]).code == 0;
        wait_until("background dependents to go", || !exists("dependent-background"));
        assert!(!exists("dependent-foreground"), "{}: foreground deletion returns after its dependents", k.name());
        assert!(!exists("owner-foreground"), "{}", k.name());
        let orphan = k.json(&["get", "configmap", "dependent-orphan", "-n", "team"]);
        assert!(orphan["metadata"]["ownerReferences"].is_null(), "{}: {orphan}", k.name());

        let held = "apiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: held, namespace: team, finalizers: [example.com/hold]}\nhost: localhost\nport: '8080'\n";
        k.apply(held);
        k.ok(&["delete", "namespace", "team", "--wait=false"]);
        wait_until("the namespace to say what holds it", || {
            let namespace = k.json(&["get", "namespace", "team"]);
            namespace["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
                c["type"] == "NamespaceFinalizersRemaining"
                    && c["message"] == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
            })
        });
        k.ok(&["patch", "crontab", "held", "-n", "team", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
        wait_until("the namespace to go", || k.run(&["get", "namespace", "team"]).code != 0);
    }
}

/// A foreground deletion the server was killed in (SIGKILL) finishes after a restart: the
/// owner still waits for its blocking dependent, and goes once the dependent's finalizer does.
fn a_foreground_deletion_finishes_after_sigkill(backend: Backend) {
    let served = Served::start_on(backend, &[]);
    let k = Kubectl::new("1.33", &served);
    k.ok(&["create", "namespace", "team"]);
    k.ok(&["create", "configmap", "owner", "-n", "team"]);
    let owner = k.json(&["get", "configmap", "owner", "-n", "team"]);
    let held = owned_configmap("held", &owner)
        .replace("  ownerReferences:", "  finalizers: [example.com/hold]\n  ownerReferences:");
    k.apply(&held);
    k.ok(&["delete", "configmap", "owner", "-n", "team", "--cascade=foreground", "--wait=false"]);
    let marked = || k.json(&["get", "configmap", "held", "-n", "team"])["metadata"]["deletionTimestamp"].is_string();
    wait_until("the dependent to be marked for deletion", marked);

    let served = served.kill().serve(&[]);
    let k = Kubectl::new("1.33", &served);
    let waiting = k.json(&["get", "configmap", "owner", "-n", "team"]);
    assert_eq!(waiting["metadata"]["finalizers"], json!(["foregroundDeletion"]), "{waiting}");
    k.ok(&["patch", "configmap", "held", "-n", "team", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    wait_until("the owner to go", || k.run(&["get", "configmap", "owner", "-n", "team"]).code != 0);
}

on_each_backend!(
    a_foreground_deletion_finishes_after_sigkill,
    kubectl_cascades_deletions_and_namespaces_finish,
    kubectl_patches_built_in_objects_strategically,
    kubectl_generators_create_built_in_objects,
    kubectl_drives_the_seed_story,
    kubectl_applies_crds_and_built_in_objects_together,
    kubectl_runs_workloads_and_services,
    data_survives_a_restart_and_sigterm_exits_cleanly,
    webhook_conversion_through_the_example_over_tls,
    acknowledged_writes_survive_sigkill,
);

fn data_survives_a_restart_and_sigterm_exits_cleanly(backend: Backend) {
    let served = Served::start_on(backend, &[]);
    let k = Kubectl::new("1.33", &served);
    k.apply(&example("3-v1-storage.yaml"));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    k.apply("apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: kept\nhost: h\nport: \"1\"\n");
    let (code, data) = served.terminate();
    assert_eq!(code, 0, "SIGTERM is a clean stop");
    let served = data.serve(&[]);
    let k = Kubectl::new("1.33", &served);
    assert_eq!(k.json(&["get", "crontab", "kept"])["host"], "h");
}

#[test]
fn refuses_to_listen_beyond_loopback_without_tls_and_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .args(["serve", "--in-memory", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("refusing to listen on 0.0.0.0:0 without TLS and token authentication"), "{stderr}");
}

/// Where the webhook example's certificates and the data live for the webhook story.
pub fn webhook_crd(ca_bundle: &str) -> String {
    example("4-webhook.yaml").replace("caBundle: \"Cg==\"", &format!("caBundle: \"{ca_bundle}\""))
}

fn webhook_conversion_through_the_example_over_tls(backend: Backend) {
    let work = tempfile::tempdir().unwrap();
    let certs = crate::webhook::certs(work.path());
    let webhook = crate::webhook::start_example(&certs);
    let mapping = format!("default/example-conversion-webhook-server=127.0.0.1:{}", webhook.port);
    let served = Served::start_on(backend, &["--webhook-service", &mapping]);
    let k = Kubectl::new("1.33", &served);
    let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
    k.apply(&webhook_crd(ca_bundle.trim()));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    // Written at v1beta1 with hostPort, stored in v1 as host and port by the webhook.
    let written = k.run_with(
        &["apply", "-f", "-"],
        Some("apiVersion: example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: converted\nhostPort: \"localhost:8080\"\n"),
    );
    assert_eq!(written.code, 0, "{written:?}");
    let v1 = k.json(&["get", "crontabs.v1.example.com", "converted"]);
    assert_eq!((v1["host"].as_str(), v1["port"].as_str(), v1.get("hostPort")), (Some("localhost"), Some("8080"), None));
    let v1beta1 = k.json(&["get", "crontabs.v1beta1.example.com", "converted"]);
    assert_eq!(v1beta1["hostPort"], "localhost:8080");
    assert!(v1beta1.get("host").is_none());
    let list = k.json(&["get", "crontabs.v1beta1.example.com"]);
    assert_eq!(list["items"][0]["hostPort"], "localhost:8080");
    drop(webhook);
    // Without the webhook, reads fail with the API server's wording.
    let failed = k.run(&["get", "crontabs.v1beta1.example.com", "converted"]);
    assert!(failed.stderr.contains("conversion webhook for example.com/v1, Kind=CronTab failed:"), "{failed:?}");
}

fn acknowledged_writes_survive_sigkill(backend: Backend) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut served = Served::start_on(backend, &[]);
    let k = Kubectl::new("1.33", &served);
    k.apply(&example("3-v1-storage.yaml"));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..2 {
        let url = format!("{}/apis/example.com/v1/namespaces/default/crontabs", served.url());
        let acked = runtime.block_on(async {
            let http = reqwest::Client::new();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let writers: Vec<_> = (0..8)
                .map(|writer| {
                    let (http, url, tx) = (http.clone(), url.clone(), tx.clone());
                    tokio::spawn(async move {
                        for i in 0.. {
                            let name = format!("r{round}-w{writer}-{i}");
                            let body = format!(r#"{{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{{"name":"{name}"}},"host":"h"}}"#);
                            let Ok(response) = http.post(&url).header("Content-Type", "application/json").body(body).send().await
                            else {
                                return;
                            };
                            if response.status().as_u16() == 201 && tx.send(name).is_err() {
                                return;
                            }
                        }
                    })
                })
                .collect();
            drop(tx);
            let mut acked = Vec::new();
            while acked.len() < 400 {
                match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
                    Ok(Some(name)) => acked.push(name),
                    _ => break,
                }
            }
            (writers, acked)
        });
        let (writers, acked) = acked;
        // Kill while the writers are still sending.
        let data = served.kill();
        runtime.block_on(async {
            for writer in writers {
                let _ = writer.await;
            }
        });
        assert!(acked.len() >= 400, "only {} writes were acknowledged", acked.len());
        acknowledged.extend(acked);
        served = data.serve(&[]);
        let listed = Kubectl::new("1.33", &served).json(&["get", "crontabs"]);
        let names: std::collections::HashSet<&str> =
            listed["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
        for name in &acknowledged {
            assert!(names.contains(name.as_str()), "round {round}: acknowledged {name} was lost");
        }
    }
}

/// A certificate for 127.0.0.1 made in `dir` by `crdctl webhook certs`, and the `serve` flags
/// that use it (the certificate file holds the chain, so the kubeconfig trusts the CA in it).
pub fn tls_args(dir: &std::path::Path) -> Vec<String> {
    let args =
        ["webhook", "certs", "--service", "crdctl", "--namespace", "default", "--host", "127.0.0.1", "--out", "certs"];
    let run = crate::util::crdctl_in(dir, &args, None);
    assert_eq!(run.code, 0, "{run:?}");
    let certs = dir.join("certs");
    let read = |name: &str| std::fs::read_to_string(certs.join(name)).unwrap();
    std::fs::write(dir.join("chain.pem"), [read("tls.crt"), read("ca.crt")].concat()).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    vec!["--tls-cert".into(), path("chain.pem"), "--tls-key".into(), path("certs/tls.key")]
}

#[test]
fn tls_token_kubeconfig_and_plain_kubernetes_mode() {
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_args(dir.path());
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .current_dir(dir.path())
        .args(["serve", "--in-memory", "--listen", "127.0.0.1:0"])
        .args(&tls)
        .args(["--token-file", "token", "--write-kubeconfig", "kubeconfig", "--crd-upgrade-safety", "None"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let banner: Vec<String> =
        BufReader::new(child.stdout.take().unwrap()).lines().take(3).map(Result::unwrap).collect();
    let first = &banner[0];
    let kubeconfig = dir.path().join("kubeconfig");
    assert_eq!(banner[1], format!("export KUBECONFIG={}", kubeconfig.display()));
    let served = Served { child, data: Some(Data { dir, etcd: None }), kubeconfig };
    assert!(first.contains("listening on https://127.0.0.1:") && first.ends_with("(in memory)"), "{first}");
    let k = Kubectl::new("1.33", &served);
    assert!(k.ok(&["get", "namespaces"]).stdout.contains("default"));
    // The kubeconfig's client certificate is the administrator's; the token file's token is too.
    let whoami = k.ok(&["auth", "whoami", "-o", "json"]).stdout;
    assert!(whoami.contains(r#""username": "kubernetes-admin""#) && whoami.contains("system:masters"), "{whoami}");
    let by_token = k.without_credentials().ok(&["--token", "s3cret", "auth", "whoami", "-o", "json"]).stdout;
    assert!(by_token.contains(r#""username": "system:admin""#), "{by_token}");
    // A wrong token is refused (401).
    let refused = k.without_credentials().run(&["--token", "wrong", "get", "namespaces"]);
    assert!(refused.stderr.contains("You must be logged in to the server"), "{refused:?}");
    // --crd-upgrade-safety None: a type change OLM refuses is accepted, as by plain Kubernetes.
    k.apply(&example("3-v1-storage.yaml"));
    let changed = example("3-v1-storage.yaml").replace(
        "          port:\n            type: string\n  conversion:",
        "          port:\n            type: integer\n  conversion:",
    );
    assert_ne!(changed, example("3-v1-storage.yaml"));
    assert!(k.apply(&changed).stdout.contains("configured"));
}

/// A CRD update with a new rule that 2 of 100 stored CronTabs fail, as kubectl shows it: under
/// `--crd-upgrade-safety None` applied with a warning naming them; under `Strict` refused,
/// each cause counting the stored objects it affects.
#[test]
fn kubectl_shows_what_a_crd_update_does_to_stored_objects() {
    let crontabs: Vec<String> = (0..100)
        .map(|n| {
            let port = if n == 7 || n == 42 { "http" } else { "80" };
            format!("apiVersion: example.com/v1\nkind: CronTab\nmetadata: {{name: ct-{n:02}, namespace: default}}\nport: \"{port}\"\n")
        })
        .collect();
    let rule = "        x-kubernetes-validations:\n        - {rule: \"self.port.matches('^[0-9]+$')\", message: port must be a number}\n";
    let stage = example("3-v1-storage.yaml");
    let (v1, _) = stage.split_once("  conversion:").unwrap();
    let ruled = stage.replacen(v1, &format!("{v1}{rule}"), 1);
    assert_ne!(ruled, stage);
    let named = "(default/ct-07, default/ct-42)";
    for (safety, version) in [("None", "1.28"), ("Strict", "1.33")] {
        let served = Served::start_on(Backend::Redb, &["--crd-upgrade-safety", safety]);
        let k = Kubectl::new(version, &served);
        k.apply(&stage);
        k.apply(&crontabs.join("---\n"));
        let update = k.run_with(&["apply", "-f", "-"], Some(&ruled));
        if safety == "None" {
            assert_eq!(update.code, 0, "{update:?}");
            let warning = format!(
                "Warning: CRD upgrade: 2 stored CronTabs fail the new schema at v1: <nil>: Invalid value: \"object\": port must be a number (updates that leave it unchanged pass) {named}"
            );
            assert!(update.stderr.lines().any(|l| l == warning), "{warning}\n{update:?}");
        } else {
            assert_eq!(update.code, 1, "{update:?}");
            let counted = "has unknown change, refusing to determine that change is safe — 2 of 100 objects use it: default/ct-07, default/ct-42";
            assert!(update.stderr.contains(counted), "{counted}\n{update:?}");
        }
    }
}

#[test]
fn serving_goes_on_when_nobody_reads_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path().join("data"))
        .stdout(writer)
        .spawn()
        .unwrap();
    let kubeconfig = dir.path().join("data/kubeconfig");
    wait_until("the kubeconfig", || kubeconfig.exists());
    let served = Served { child, data: Some(Data { dir, etcd: None }), kubeconfig };
    std::thread::sleep(Duration::from_millis(300));
    let k = Kubectl::new("1.33", &served);
    assert!(k.ok(&["get", "namespaces"]).stdout.contains("default"));
}

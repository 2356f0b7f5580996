//! What upstream's own command-line tests (`test/cmd/*.sh`) expect of kube-apiserver, run
//! with the oldest and newest kubectl against the real `crdctl serve`: the answers, messages
//! and stored state they check.

use serde_json::Value;

use crate::serve::{Backend, Kubectl, Served, kubectl_versions};

/// Every `--dry-run=server` write kubectl makes (create, apply both ways, replace, the patch
/// types, label, scale, set, delete of one object, of a selection and of all) answers as the
/// write would and leaves the objects and their `resourceVersion`s as they were.
fn server_dry_runs_change_nothing(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.ok(&["create", "configmap", "x", "--from-literal=a=1"]);
        k.ok(&["create", "configmap", "y", "--from-literal=a=1"]);
        k.ok(&["label", "configmap", "y", "keep=me"]);
        k.ok(&["create", "deployment", "web", "--image=nginx:1.27"]);
        let before = state(&k);

        let deleted = k.ok(&["delete", "configmap", "x", "--dry-run=server"]);
        assert_eq!(deleted.stdout.trim(), "configmap \"x\" deleted (server dry run)", "{}", k.name());
        let all = k.ok(&["delete", "configmaps", "--all", "--dry-run=server"]);
        assert!(all.stdout.contains("configmap \"y\" deleted (server dry run)"), "{}: {all:?}", k.name());
        k.ok(&["delete", "configmaps", "-l", "keep=me", "--dry-run=server"]);
        k.ok(&["delete", "deployment", "web", "--dry-run=server"]);
        let created = k.ok(&["create", "configmap", "z", "--from-literal=a=1", "--dry-run=server", "-o", "json"]);
        let created: Value = serde_json::from_str(&created.stdout).unwrap();
        assert!(created["metadata"]["uid"].is_string(), "{}: {created}", k.name());
        let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: '2'}\n";
        let applied = k.run_with(&["apply", "--dry-run=server", "-f", "-"], Some(manifest));
        assert_eq!(applied.code, 0, "{}: {applied:?}", k.name());
        let applied = k.run_with(
            &["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(manifest),
        );
        assert_eq!(applied.code, 0, "{}: {applied:?}", k.name());
        let applied: Value = serde_json::from_str(&applied.stdout).unwrap();
        assert_eq!(applied["data"]["a"], "2", "{}: {applied}", k.name());
        assert_eq!(
            applied["metadata"]["resourceVersion"],
            before["configmaps"]["x"],
            "{}: a dry-run apply answers at the stored resourceVersion",
            k.name()
        );
        let replaced = k.run_with(&["replace", "--dry-run=server", "-f", "-"], Some(manifest));
        assert_eq!(replaced.code, 0, "{}: {replaced:?}", k.name());
        k.ok(&["patch", "configmap", "x", "--dry-run=server", "-p", r#"{"data":{"b":"3"}}"#]);
        k.ok(&["patch", "configmap", "x", "--dry-run=server", "--type=merge", "-p", r#"{"data":{"b":"3"}}"#]);
        k.ok(&[
            "patch",
            "configmap",
            "x",
            "--dry-run=server",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/data/b","value":"3"}]"#,
        ]);
        k.ok(&["label", "configmap", "x", "dry=run", "--dry-run=server"]);
        k.ok(&["annotate", "configmap", "x", "dry=run", "--dry-run=server"]);
        k.ok(&["scale", "deployment", "web", "--replicas=5", "--dry-run=server"]);
        k.ok(&["set", "image", "deployment/web", "nginx=nginx:1.28", "--dry-run=server"]);

        assert_eq!(state(&k), before, "{}: a dry run changed what is stored", k.name());
    }
}

/// The ConfigMaps' and the Deployment's names and `resourceVersion`s.
fn state(k: &Kubectl) -> Value {
    let mut state = serde_json::json!({});
    for kind in ["configmaps", "deployments"] {
        for item in k.json(&["get", kind])["items"].as_array().unwrap() {
            let name = item["metadata"]["name"].as_str().unwrap().to_string();
            state[kind][name] = item["metadata"]["resourceVersion"].clone();
        }
    }
    state
}

on_each_backend!(server_dry_runs_change_nothing);

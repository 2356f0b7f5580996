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

/// A patch, replace or apply that changes nothing writes nothing: kubectl says so and the
/// `resourceVersion` stays (upstream compares the object it would store with the stored one).
fn writes_that_change_nothing_write_nothing(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {l: '1'}}\ndata: {a: '1'}\n";
        k.apply(manifest);
        let rv = || k.json(&["get", "configmap", "x"])["metadata"]["resourceVersion"].clone();
        let stored = rv();
        for patch_type in ["strategic", "merge"] {
            let patched = k.ok(&["patch", "configmap", "x", "--type", patch_type, "-p", r#"{"data":{"a":"1"}}"#]);
            assert_eq!(patched.stdout.trim(), "configmap/x patched (no change)", "{}: {patch_type}", k.name());
        }
        k.ok(&["patch", "configmap", "x", "--type=json", "-p", r#"[{"op":"replace","path":"/data/a","value":"1"}]"#]);
        assert!(k.apply(manifest).stdout.contains("configmap/x unchanged"), "{}", k.name());
        k.ok(&["label", "configmap", "x", "l=1", "--overwrite"]);
        assert_eq!(rv(), stored, "{}: a write that changed nothing was stored", k.name());
        // `kubectl replace` rewrites a client-side apply annotation, so replace an object
        // without one.
        k.ok(&["create", "configmap", "plain", "--from-literal=a=1"]);
        let current = k.ok(&["get", "configmap", "plain", "-o", "json"]).stdout;
        let replaced = k.run_with(&["replace", "-f", "-"], Some(&current));
        assert_eq!(replaced.code, 0, "{}: {replaced:?}", k.name());
        let after = k.json(&["get", "configmap", "plain"]);
        let before: Value = serde_json::from_str(&current).unwrap();
        assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "{}", k.name());
        let server_side = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
        k.run_with(&server_side, Some(manifest));
        let applied = rv();
        k.run_with(&server_side, Some(manifest));
        assert_eq!(rv(), applied, "{}: a repeated server-side apply was stored", k.name());
    }
}

/// An object `kubectl apply` created is taken over by `kubectl apply --server-side` without
/// conflicts for the fields the client-side apply set (upstream's last-applied manager), and
/// the client-side annotation follows the server-side configuration (its updater); a field
/// someone else changed since is still a conflict.
fn server_side_apply_takes_over_from_client_side_apply(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: '1', b: '1'}\n");
        let taken = k.run_with(
            &["apply", "--server-side", "-f", "-"],
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: '2'}\n"),
        );
        assert_eq!(taken.code, 0, "{}: {taken:?}", k.name());
        let object = k.json(&["get", "configmap", "x"]);
        assert_eq!(object["data"]["a"], "2", "{}: {object}", k.name());
        let annotation = object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str();
        assert_eq!(
            annotation,
            Some(
                "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"namespace\":\"default\"}}\n"
            ),
            "{}",
            k.name()
        );
        k.ok(&["patch", "configmap", "x", "--type=merge", "-p", r#"{"data":{"b":"3"}}"#, "--field-manager=other"]);
        let refused = k.run_with(
            &["apply", "--server-side", "-f", "-"],
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: '2', b: '4'}\n"),
        );
        assert!(
            refused.code != 0 && refused.stderr.contains(r#"conflict with "other" using v1: .data.b"#),
            "{}: {refused:?}",
            k.name()
        );
    }
}

/// A strategic merge patch whose result its type cannot hold is refused with the unstructured
/// converter's words, as upstream's `test/cmd/core.sh` expects (`cannot restore map from
/// string`), and the object stays as it was.
fn strategic_merge_patches_of_the_wrong_type_are_refused(backend: Backend) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.ok(&["run", "valid-pod", "--image=nginx", "--labels=name=valid-pod"]);
        let before = k.json(&["get", "pod", "valid-pod"]);
        for (patch, message) in [
            (r#"{"metadata":{"labels":"invalid"}}"#, "cannot restore map from string"),
            (r#"{"spec":{"containers":"x"}}"#, "cannot restore slice from string"),
            (r#"{"spec":{"activeDeadlineSeconds":"x"}}"#, "unrecognized type: int64"),
        ] {
            let refused = k.run(&["patch", "pod", "valid-pod", "-p", patch]);
            assert!(refused.code != 0 && refused.stderr.contains(message), "{}: {patch}: {refused:?}", k.name());
        }
        let refused = k.run(&["patch", "pod", "valid-pod", "-p", r#"{"metadata":{"labels":"invalid"}}"#]);
        assert_eq!(
            refused.stderr.trim(),
            r#"The request is invalid: patch: Invalid value: "map[metadata:map[labels:invalid]]": cannot restore map from string"#,
            "{}",
            k.name()
        );
        assert_eq!(k.json(&["get", "pod", "valid-pod"]), before, "{}", k.name());
    }
}

on_each_backend!(
    server_dry_runs_change_nothing,
    writes_that_change_nothing_write_nothing,
    server_side_apply_takes_over_from_client_side_apply,
    strategic_merge_patches_of_the_wrong_type_are_refused,
);

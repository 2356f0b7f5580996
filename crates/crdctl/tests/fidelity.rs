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
        assert_eq!(
            deleted.stdout.trim(),
            format!("{} (server dry run)", k.deleted("configmap \"x\"", "default")),
            "{}",
            k.name()
        );
        let all = k.ok(&["delete", "configmaps", "--all", "--dry-run=server"]);
        let y = format!("{} (server dry run)", k.deleted("configmap \"y\"", "default"));
        assert!(all.stdout.contains(&y), "{}: {all:?}", k.name());
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

/// What an update may not change is refused as upstream's `test/cmd` expects, and `apply
/// --force` recreates the object instead; what a write leaves out is defaulted as upstream's
/// `SetDefaults_*` do.
fn immutable_fields_and_defaults(backend: Backend) {
    for version in kubectl_versions() {
        // Upstream's command-line tests run with this range, which the test data's address is in.
        let served = Served::start_on(backend, &["--service-cluster-ip-range", "10.0.0.0/24"]);
        let k = Kubectl::new(&version, &served);
        let service = |ip: &str| {
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: a}}\nspec:\n  selector: {{app: test}}\n  clusterIP: {ip}\n  ports: [{{port: 80}}]\n"
            )
        };
        k.apply(&service("None"));
        let refused = k.run_with(&["apply", "-f", "-"], Some(&service("10.0.0.12")));
        assert!(
            refused.code != 0
                && refused.stderr.contains(
                    r#"The Service "a" is invalid: spec.clusterIP: Invalid value: "10.0.0.12": field is immutable"#
                ),
            "{}: {refused:?}",
            k.name()
        );
        let forced = k.run_with(&["apply", "--force", "-f", "-"], Some(&service("10.0.0.12")));
        assert_eq!(forced.code, 0, "{}: {forced:?}", k.name());
        assert_eq!(k.json(&["get", "service", "a"])["spec"]["clusterIP"], "10.0.0.12", "{}", k.name());

        let deployment = |app: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  selector: {{matchLabels: {{app: {app}}}}}\n  template:\n    metadata: {{labels: {{app: {app}}}}}\n    spec: {{containers: [{{name: web, image: nginx}}]}}\n"
            )
        };
        k.apply(&deployment("a"));
        let refused = k.run_with(&["apply", "-f", "-"], Some(&deployment("b")));
        assert!(
            refused.code != 0 && refused.stderr.contains(r#"spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string{"app":"b"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#),
            "{}: {refused:?}",
            k.name()
        );

        k.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: nginx}]\n  volumes: [{name: scratch}]\n");
        let pod = k.json(&["get", "pod", "p"]);
        assert_eq!(pod["spec"]["volumes"], serde_json::json!([{"name": "scratch", "emptyDir": {}}]), "{}", k.name());
        let refused = k.run(&["patch", "pod", "p", "-p", r#"{"spec":{"restartPolicy":"Never"}}"#]);
        assert!(
            refused.code != 0 && refused.stderr.contains("pod updates may not change fields other than"),
            "{}: {refused:?}",
            k.name()
        );
        k.ok(&["set", "image", "pod/p", "c=nginx:1.28"]);

        k.apply("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n");
        assert_eq!(
            k.json(&["get", "priorityclass", "high"])["preemptionPolicy"],
            "PreemptLowerPriority",
            "{}",
            k.name()
        );
        let refused = k.run_with(
            &["apply", "-f", "-"],
            Some("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 2000\n"),
        );
        assert!(
            refused.code != 0 && refused.stderr.contains("value: Forbidden: may not be changed in an update."),
            "{}: {refused:?}",
            k.name()
        );
    }
}

/// `kubectl get` of built-in kinds prints upstream's columns, and `-o wide` the wide ones.
fn built_in_kinds_print_upstreams_columns(backend: Backend) {
    let header = |k: &Kubectl, args: &[&str]| -> Vec<String> {
        let out = k.ok(args).stdout;
        let first = out.lines().next().unwrap_or_default().to_string();
        first.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect()
    };
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        let k = Kubectl::new(&version, &served);
        k.ok(&["run", "p", "--image=nginx"]);
        k.ok(&["create", "deployment", "web", "--image=nginx"]);
        k.ok(&["create", "job", "once", "--image=busybox"]);
        k.apply("apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {node-role.kubernetes.io/worker: ''}}\n");
        let cases: [(&[&str], &[&str]); 6] = [
            (&["get", "pods"], &["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
            (
                &["get", "pods", "-o", "wide"],
                &["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
            ),
            (
                &["get", "deployments", "-o", "wide"],
                &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
            ),
            (&["get", "jobs"], &["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]),
            (&["get", "nodes"], &["NAME", "STATUS", "ROLES", "AGE", "VERSION"]),
            (
                &["get", "services", "-o", "wide"],
                &["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"],
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(header(&k, args), expected, "{}: kubectl {args:?}", k.name());
        }
        let pods = k.ok(&["get", "pods", "--no-headers"]).stdout;
        assert!(pods.starts_with("p ") && pods.contains("0/1") && pods.contains("Pending"), "{}: {pods}", k.name());
        let nodes = k.ok(&["get", "nodes", "--no-headers"]).stdout;
        assert!(nodes.contains("Unknown") && nodes.contains("worker"), "{}: {nodes}", k.name());
    }
}

on_each_backend!(
    built_in_kinds_print_upstreams_columns,
    immutable_fields_and_defaults,
    server_dry_runs_change_nothing,
    writes_that_change_nothing_write_nothing,
    server_side_apply_takes_over_from_client_side_apply,
    strategic_merge_patches_of_the_wrong_type_are_refused,
);

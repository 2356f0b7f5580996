//! Admission webhooks end to end: `crdctl serve`, the example CronTab admission webhook and
//! `crdctl admission serve` as real processes over TLS (certificates from `crdctl webhook
//! certs`), registered with the repository's manifests, driven by the real kubectl (1.27 and
//! 1.33).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::serve::{Backend, Kubectl, Served, example, kubectl_versions};
use crate::util::repo_root;

/// The example CronTab CRD (v1beta1 and v1, stored in v1), applied and established.
fn establish_crontabs(k: &Kubectl) {
    k.apply(&example("3-v1-storage.yaml"));
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
}

fn crontab(name: &str, host: &str, extra: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\n{extra}host: {host}\n")
}

#[test]
fn kubectl_meets_the_example_admission_webhooks() {
    for version in kubectl_versions() {
        let work = tempfile::tempdir().unwrap();
        let certs = crate::webhook::certs_for(work.path(), "default/crontab-admission");
        let webhook = crate::webhook::start_named("crontab-admission-webhook", &certs, &[]);
        let mapping = format!("default/crontab-admission=127.0.0.1:{}", webhook.port);
        let served = Served::start_on(Backend::Redb, &["--webhook-service", &mapping]);
        let k = Kubectl::new(&version, &served);
        let name = k.name();
        establish_crontabs(&k);
        let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
        let manifest = std::fs::read_to_string(repo_root().join("examples/crontab/admission-webhooks.yaml"))
            .unwrap()
            .replace("caBundle: \"Cg==\"", &format!("caBundle: \"{}\"", ca_bundle.trim()));
        k.apply(&manifest);

        // The mutating webhook defaults the port.
        k.apply(&crontab("web", "web.example.com", ""));
        assert_eq!(k.ok(&["get", "crontab", "web", "-o", "jsonpath={.port}"]).stdout, "80", "{name}");

        // The validating webhook refuses a host that is not a DNS name: nothing is stored.
        let refused = k.run_with(&["apply", "-f", "-"], Some(&crontab("bad", "a_b", "")));
        assert_eq!(refused.code, 1, "{name}: {refused:?}");
        assert!(
            refused.stderr.contains(
                r#"admission webhook "validate.crontab.example.com" denied the request: host "a_b" is not a DNS name"#
            ),
            "{name}: {refused:?}"
        );
        assert_eq!(k.run(&["get", "crontab", "bad"]).code, 1, "{name}");

        // A frozen CronTab cannot be changed, and can be deleted (DELETE is not in the rules).
        k.apply(&crontab("frozen", "f.example.com", "  labels:\n    example.com/frozen: \"true\"\n"));
        let changed = k.run(&["label", "crontab", "frozen", "team=a"]);
        assert!(changed.stderr.contains(r#"denied the request: CronTab frozen is frozen"#), "{name}: {changed:?}");
        k.ok(&["delete", "crontab", "frozen"]);

        // With the webhook down, `Fail` refuses every CronTab write with the call's error;
        // `Ignore` lets writes through.
        drop(webhook);
        let failed = k.run_with(&["apply", "-f", "-"], Some(&crontab("down", "d.example.com", "")));
        assert_eq!(failed.code, 1, "{name}: {failed:?}");
        assert!(
            failed.stderr.contains(r#"Internal error occurred: failed calling webhook "default.crontab.example.com": failed to call webhook: Post "https://crontab-admission.default.svc:443/mutate?timeout=10s""#),
            "{name}: {failed:?}"
        );
        let ignoring = manifest.replace("failurePolicy: Fail", "failurePolicy: Ignore");
        k.apply(&ignoring);
        k.apply(&crontab("down", "d.example.com", ""));
        assert_eq!(k.ok(&["get", "crontab", "down", "-o", "jsonpath={.port}"]).stdout, "", "{name}: not defaulted");
    }
}

/// `crdctl admission serve` as a process, and the port it printed.
struct AdmissionServer(Child, u16);

impl Drop for AdmissionServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn admission_serve(certs: &std::path::Path) -> AdmissionServer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crdctl"))
        .args(["admission", "serve", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    let address =
        banner.trim().strip_prefix("crdctl admission: listening on https://").unwrap_or_else(|| panic!("{banner}"));
    let port = address.split_once('/').unwrap().0.rsplit_once(':').unwrap().1.parse().unwrap();
    AdmissionServer(child, port)
}

/// `crdctl admission serve`, deployed with the repository's manifests into `crdctl serve` run as
/// plain Kubernetes (`--crd-upgrade-safety None`): the webhook, not the server, refuses an
/// unsafe CRD upgrade, in `crdctl check`'s words; a safe one goes through.
#[test]
fn admission_serve_refuses_unsafe_crd_upgrades() {
    let work = tempfile::tempdir().unwrap();
    let certs = crate::webhook::certs_for(work.path(), "crdctl-system/crdctl-admission");
    let webhook = admission_serve(&certs);
    let mapping = format!("crdctl-system/crdctl-admission=127.0.0.1:{}", webhook.1);
    let served = Served::start_on(Backend::Redb, &["--crd-upgrade-safety", "None", "--webhook-service", &mapping]);
    let deploy = repo_root().join("deploy/admission");
    let read = |file: &str| std::fs::read_to_string(deploy.join(file)).unwrap();
    let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
    for version in kubectl_versions() {
        let k = Kubectl::new(&version, &served);
        let name = k.name();
        for file in ["namespace.yaml", "rbac.yaml", "deployment.yaml", "service.yaml"] {
            k.apply(&read(file));
        }
        k.apply(&read("webhook.yaml").replace("caBundle: \"Cg==\"", &format!("caBundle: \"{}\"", ca_bundle.trim())));
        k.apply(&example("3-v1-storage.yaml"));
        let unsafe_change = example("3-v1-storage.yaml").replace(
            "          port:\n            type: string\n  conversion:",
            "          port:\n            type: integer\n  conversion:",
        );
        let refused = k.run_with(&["apply", "-f", "-"], Some(&unsafe_change));
        assert_eq!(refused.code, 1, "{name}: {refused:?}");
        let expected = r#"admission webhook "crd-upgrade-safety.crdctl.dev" denied the request: validating upgrade for CRD "crontabs.example.com" failed: CustomResourceDefinition crontabs.example.com failed upgrade safety validation. "ChangeValidator" validation failed: version "v1", field "^.port": type changed from "string" to "integer""#;
        assert!(refused.stderr.contains(expected), "{name}: {refused:?}");
        let safe_change = example("3-v1-storage.yaml").replace(
            "          port:\n            type: string\n  conversion:",
            "          port:\n            type: string\n            description: the port\n  conversion:",
        );
        assert_ne!(safe_change, example("3-v1-storage.yaml"));
        assert!(k.apply(&safe_change).stdout.contains("configured"), "{name}");
        k.apply(&example("3-v1-storage.yaml"));
    }
}

const POLICY: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: port-policy, namespace: default}
data: {blockedPort: "23"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-blocked-port}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {operations: [CREATE, UPDATE], apiGroups: [example.com], apiVersions: ["*"], resources: [crontabs]}
  validations:
  - expression: "!has(object.port) || object.port != params.data.blockedPort"
    messageExpression: "'port ' + object.port + ' is blocked'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-blocked-port-deny}
spec:
  policyName: no-blocked-port
  validationActions: [Deny]
  paramRef: {name: port-policy, namespace: default, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: host-expected}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE, UPDATE], apiGroups: [example.com], apiVersions: ["*"], resources: [crontabs]}
  validations:
  - expression: "has(object.host)"
    message: a host is expected
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: host-expected-warn}
spec:
  policyName: host-expected
  validationActions: [Warn]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: misspelt}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE], apiGroups: [example.com], apiVersions: [v1], resources: [crontabs]}
  validations:
  - expression: "object.hots != 'localhost'"
"#;

/// ValidatingAdmissionPolicy through kubectl: a policy with parameters from a ConfigMap whose
/// binding denies, and one whose binding warns; kubectl prints upstream's texts, and shows the
/// type checker's warning on a misspelt field in the policy's status.
#[test]
fn kubectl_meets_validating_admission_policies() {
    for version in kubectl_versions() {
        let served = Served::start_on(Backend::Redb, &[]);
        let k = Kubectl::new(&version, &served);
        let name = k.name();
        establish_crontabs(&k);
        k.apply(POLICY);
        let checked = k.ok(&["get", "validatingadmissionpolicy", "misspelt", "-o",
            "jsonpath={.status.observedGeneration} {.status.typeChecking.expressionWarnings[0].fieldRef} {.status.typeChecking.expressionWarnings[0].warning}"]);
        assert!(
            checked.stdout.starts_with("1 spec.validations[0].expression example.com/v1, Kind=CronTab: ERROR: <input>:1:7: undefined field 'hots'"),
            "{name}: {checked:?}"
        );
        let blocked = k.run_with(&["apply", "-f", "-"], Some(&crontab("telnet", "t.example.com", "port: \"23\"\n")));
        assert_eq!(blocked.code, 1, "{name}: {blocked:?}");
        // kubectl prints a 422 by its causes, as it does for kube-apiserver's policies.
        let denial = r#"The crontabs "telnet" is invalid: : ValidatingAdmissionPolicy 'no-blocked-port' with binding 'no-blocked-port-deny' denied request: port 23 is blocked"#;
        assert!(blocked.stderr.contains(denial), "{name}: {blocked:?}");
        assert_eq!(k.run(&["get", "crontab", "telnet"]).code, 1, "{name}: nothing stored");
        let hostless = k.run_with(
            &["apply", "-f", "-"],
            Some("apiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: hostless}\nport: \"80\"\n"),
        );
        assert_eq!(hostless.code, 0, "{name}: {hostless:?}");
        let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'host-expected' with binding 'host-expected-warn': a host is expected";
        assert!(hostless.stderr.contains(warning), "{name}: {hostless:?}");
    }
}

/// A webhook served in the test (crdctl's framework, HTTPS with certificates made here): `/echo`
/// denies every review it sees, saying what it saw; `/slow` answers after three seconds.
struct TestWebhook {
    url: String,
    ca_bundle: String,
    _server: crdctl_conversion::framework::Server,
    _tls: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

impl TestWebhook {
    fn start() -> TestWebhook {
        use crdctl_conversion::admission::{AdmissionRequest, Verdict, router};
        use crdctl_conversion::{certs, framework};
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let bundle = certs::generate(&["127.0.0.1".into()]).unwrap();
        let tls = tempfile::tempdir().unwrap();
        let options = framework::Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, tls.path()).unwrap();
        let echo = |request: &AdmissionRequest| {
            let seen = request.object.as_ref().and_then(|o| o["apiVersion"].as_str()).unwrap_or_default().to_string();
            Verdict::deny(format!("saw {seen} dryRun={}", request.dry_run))
        };
        let slow = |_: &AdmissionRequest| {
            std::thread::sleep(std::time::Duration::from_secs(3));
            Verdict::allow()
        };
        let routes = router().validating("/echo", echo).validating("/slow", slow).build();
        let server = runtime.block_on(framework::start_app(options, routes)).unwrap();
        TestWebhook {
            url: format!("https://127.0.0.1:{}", server.address.port()),
            ca_bundle: bundle.ca_bundle(),
            _server: server,
            _tls: tls,
            _runtime: runtime,
        }
    }

    /// One webhook of a `ValidatingWebhookConfiguration` on CronTab creates at `versions`,
    /// calling `path`, selecting objects labelled `case: <case>`, with `extra` fields.
    /// `sideEffects` is `None` unless `extra` says otherwise.
    fn webhook(&self, name: &str, path: &str, versions: &str, case: &str, extra: &str) -> String {
        let side_effects = if extra.contains("sideEffects:") { "" } else { "  sideEffects: None\n" };
        format!(
            "- name: {name}\n  clientConfig: {{url: \"{}{path}\", caBundle: \"{}\"}}\n  rules: [{{operations: [CREATE], apiGroups: [example.com], apiVersions: [{versions}], resources: [crontabs]}}]\n  objectSelector: {{matchLabels: {{case: {case}}}}}\n  admissionReviewVersions: [v1]\n{side_effects}{extra}",
            self.url, self.ca_bundle
        )
    }
}

/// Webhook matching through kubectl: `matchPolicy: Equivalent` calls a webhook registered for
/// v1beta1 with the v1 object converted (`Exact` does not call it), `objectSelector`,
/// `namespaceSelector`, CEL `matchConditions`, a timeout, a dry run (the webhook sees it), and a
/// ValidatingAdmissionPolicy on CRDs refusing a CRD update.
#[test]
fn kubectl_meets_webhook_matching_and_a_policy_on_crds() {
    let webhook = TestWebhook::start();
    let hooks = [
        webhook.webhook("equivalent.example.com", "/echo", "v1beta1", "equivalent", ""),
        webhook.webhook("exact.example.com", "/echo", "v1beta1", "exact", "  matchPolicy: Exact\n"),
        webhook.webhook(
            "namespaced.example.com",
            "/echo",
            "v1",
            "namespaced",
            "  namespaceSelector: {matchLabels: {guarded: \"true\"}}\n",
        ),
        webhook.webhook(
            "conditions.example.com",
            "/echo",
            "v1",
            "conditions",
            "  matchConditions: [{name: red-only, expression: \"object.metadata.name.startsWith('red')\"}]\n",
        ),
        webhook.webhook("slow.example.com", "/slow", "v1", "slow", "  timeoutSeconds: 1\n"),
        webhook.webhook("dryrun.example.com", "/echo", "v1", "dryrun", "  sideEffects: NoneOnDryRun\n"),
    ];
    let configuration = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: matching}}\nwebhooks:\n{}",
        hooks.concat()
    );
    let labelled = |name: &str, case: &str, namespace: &str| {
        crontab(name, "h.example.com", &format!("  namespace: {namespace}\n  labels: {{case: {case}}}\n"))
    };
    for version in kubectl_versions() {
        let served = Served::start_on(Backend::Redb, &[]);
        let k = Kubectl::new(&version, &served);
        let name = k.name();
        establish_crontabs(&k);
        k.ok(&["create", "namespace", "guarded"]);
        k.ok(&["label", "namespace", "guarded", "guarded=true"]);
        k.apply(&configuration);
        let refused = |manifest: &str, args: &[&str]| {
            let mut command = vec!["create", "-f", "-"];
            command.extend(args);
            let run = k.run_with(&command, Some(manifest));
            assert_eq!(run.code, 1, "{name}: {manifest} {run:?}");
            run.stderr
        };
        let created = |manifest: &str| {
            assert_eq!(k.run_with(&["create", "-f", "-"], Some(manifest)).code, 0, "{name}: {manifest}")
        };

        let equivalent = refused(&labelled("eq", "equivalent", "default"), &[]);
        assert!(
            equivalent.contains(
                r#"admission webhook "equivalent.example.com" denied the request: saw example.com/v1beta1 dryRun=false"#
            ),
            "{name}: {equivalent}"
        );
        created(&labelled("exact", "exact", "default"));

        created(&labelled("outside", "namespaced", "default"));
        let guarded = refused(&labelled("inside", "namespaced", "guarded"), &[]);
        assert!(
            guarded.contains(r#"admission webhook "namespaced.example.com" denied the request"#),
            "{name}: {guarded}"
        );

        created(&labelled("blue", "conditions", "default"));
        let red = refused(&labelled("red", "conditions", "default"), &[]);
        assert!(red.contains(r#"admission webhook "conditions.example.com" denied the request"#), "{name}: {red}");

        let slow = refused(&labelled("slow", "slow", "default"), &[]);
        let timeout = format!(
            r#"Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "{}/slow?timeout=1s""#,
            webhook.url
        );
        assert!(slow.contains(&timeout), "{name}: {slow}");
        assert_eq!(k.run(&["get", "crontab", "slow"]).code, 1, "{name}: nothing stored");

        let dry = refused(&labelled("dry", "dryrun", "default"), &["--dry-run=server"]);
        assert!(dry.contains("saw example.com/v1 dryRun=true"), "{name}: {dry}");

        // A policy on CRDs: a standard-channel CRD may not become an experimental one.
        k.apply(CRD_POLICY);
        k.ok(&["label", "crd", "crontabs.example.com", "channel=standard"]);
        let relabel = k.run(&["label", "crd", "crontabs.example.com", "channel=experimental", "--overwrite"]);
        assert_eq!(relabel.code, 1, "{name}: {relabel:?}");
        assert!(
            relabel.stderr.contains("ValidatingAdmissionPolicy 'safe-upgrades' with binding 'safe-upgrades' denied request: experimental CRDs may not replace standard ones"),
            "{name}: {relabel:?}"
        );
    }
}

const CRD_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: safe-upgrades}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [UPDATE], apiGroups: [apiextensions.k8s.io], apiVersions: [v1], resources: [customresourcedefinitions]}
  validations:
  - expression: "!(has(oldObject.metadata.labels) && 'channel' in oldObject.metadata.labels && oldObject.metadata.labels['channel'] == 'standard') || (has(object.metadata.labels) && 'channel' in object.metadata.labels && object.metadata.labels['channel'] == 'standard')"
    message: experimental CRDs may not replace standard ones
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: safe-upgrades}
spec:
  policyName: safe-upgrades
  validationActions: [Deny]
"#;

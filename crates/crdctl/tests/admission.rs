//! Admission webhooks end to end: `crdctl serve`, the example CronTab admission webhook as a
//! real process over TLS (certificates from `crdctl webhook certs`), registered with the
//! repository's manifest, driven by the real kubectl (1.27 and 1.33).

use crate::serve::{Backend, Kubectl, Served, example, kubectl_versions};

fn crontab(name: &str, host: &str, extra: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\n{extra}host: {host}\n")
}

#[test]
fn kubectl_meets_the_example_admission_webhooks() {
    for version in kubectl_versions() {
        let work = tempfile::tempdir().unwrap();
        let certs = crate::webhook::certs_for(work.path(), "crontab-admission");
        let webhook = crate::webhook::start_named("crontab-admission-webhook", &certs, &[]);
        let mapping = format!("default/crontab-admission=127.0.0.1:{}", webhook.port);
        let served = Served::start_on(Backend::Redb, &["--webhook-service", &mapping]);
        let k = Kubectl::new(&version, &served);
        let name = k.name();
        k.apply(&example("3-v1-storage.yaml"));
        k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
        let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
        let manifest =
            std::fs::read_to_string(crate::util::repo_root().join("examples/crontab/admission-webhooks.yaml"))
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

//! Who may do what, through the real kubectl against `crdctl serve --authorization-mode RBAC`:
//! `kubectl auth whoami`, `auth can-i --as` (and `--list`), `create rolebinding
//! --clusterrole=edit`, `create token` (also bound to a Secret) and `--token`, and a forbidden
//! request's message.

use crate::serve::{Backend, Kubectl, kubectl_versions};

#[test]
fn kubectl_runs_as_a_service_account_that_rbac_restricts() {
    for version in kubectl_versions() {
        // kubectl sends a token only over HTTPS.
        let secrets = tempfile::tempdir().unwrap();
        let token_file = secrets.path().join("token");
        std::fs::write(&token_file, "admin-secret\n").unwrap();
        let mut args = crate::serve::tls_args(secrets.path());
        args.extend([
            "--authorization-mode".into(),
            "RBAC".into(),
            "--token-file".into(),
            token_file.display().to_string(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let served = crate::serve::Data::new(Backend::Redb).serve(&args);
        let k = Kubectl::new(&version, &served);
        // `auth whoami` asks authentication.k8s.io/v1 from kubectl 1.28 on (v1beta1 before,
        // which a 1.33 server no longer serves).
        let whoami = k.at_least(28);
        if whoami {
            let run = k.ok(&["auth", "whoami", "-o", "json"]);
            assert!(run.stdout.contains(r#""username": "kubernetes-admin""#), "{}: {run:?}", k.name());
        }
        k.ok(&["create", "namespace", "team"]);
        k.ok(&["create", "serviceaccount", "bot", "-n", "team"]);

        let as_bot = "--as=system:serviceaccount:team:bot";
        let can_list = |k: &Kubectl| k.run(&["auth", "can-i", "list", "configmaps", "-n", "team", as_bot]);
        let before = can_list(&k);
        assert_eq!((before.code, before.stdout.trim()), (1, "no"), "{}: {before:?}", k.name());
        k.ok(&["create", "rolebinding", "bot-edits", "--clusterrole=edit", "--serviceaccount=team:bot", "-n", "team"]);
        let after = can_list(&k);
        assert_eq!((after.code, after.stdout.trim()), (0, "yes"), "{}: {after:?}", k.name());
        let rules = k.ok(&["auth", "can-i", "--list", "-n", "team", as_bot]);
        assert!(rules.stdout.lines().any(|line| line.starts_with("configmaps ")), "{}: {rules:?}", k.name());

        let token = k.ok(&["create", "token", "bot", "-n", "team"]).stdout.trim().to_string();
        let bot = k.without_credentials();
        if whoami {
            let run = bot.ok(&["--token", &token, "auth", "whoami", "-o", "json"]);
            assert!(run.stdout.contains("system:serviceaccount:team:bot"), "{}: {run:?}", k.name());
        }
        bot.ok(&["--token", &token, "create", "configmap", "settings", "-n", "team"]);
        let refused = bot.run(&["--token", &token, "get", "configmaps", "-n", "default"]);
        assert_eq!(refused.code, 1, "{}: {refused:?}", k.name());
        assert!(
            refused.stderr.contains(r#"Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:team:bot" cannot list resource "configmaps" in API group "" in the namespace "default""#),
            "{}: {refused:?}",
            k.name()
        );

        // A token bound to a Secret works until the Secret goes.
        k.ok(&["create", "secret", "generic", "anchor", "-n", "team"]);
        let bound = ["create", "token", "bot", "-n", "team", "--bound-object-kind", "Secret", "--bound-object-name"];
        let bound = k.ok(&[&bound[..], &["anchor"]].concat()).stdout.trim().to_string();
        bot.ok(&["--token", &bound, "get", "configmaps", "-n", "team"]);
        k.ok(&["delete", "secret", "anchor", "-n", "team"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let run = bot.run(&["--token", &bound, "get", "configmaps", "-n", "team"]);
            if run.stderr.contains("You must be logged in to the server") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}: the token outlived its Secret: {run:?}", k.name());
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

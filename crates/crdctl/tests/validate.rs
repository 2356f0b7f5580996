use crate::util::*;

/// Files that are Helm templates with both `url` and `service` set (see the corpus README).
const BOTH_URL_AND_SERVICE: &[&str] = &[
    "pairs/cert-manager-certificates-v1.5.4-v1.6.0/new.yaml",
    "pairs/cert-manager-certificates-v1.5.4-v1.6.0/old.yaml",
    "pairs/cert-manager-clusterissuers-v1.6.1-v1.7.0/old.yaml",
];

#[test]
fn every_corpus_file_validates_except_the_broken_helm_templates() {
    for file in corpus_files() {
        let name = short(&file);
        let out = crdctl(&["validate", file.to_str().unwrap()]);
        if BOTH_URL_AND_SERVICE.contains(&name.as_str()) {
            assert_eq!(out.code, 1, "{name}: {out:?}");
            let crd = if name.contains("clusterissuers") {
                "clusterissuers.cert-manager.io"
            } else {
                "certificates.cert-manager.io"
            };
            // `<file>:<line>:<column>:` points at the clientConfig the message is about.
            let (at, rest) = out.stdout.split_once(": ").unwrap();
            assert_eq!(
                rest,
                format!(
                    "{crd}: spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required\n"
                ),
                "{name}"
            );
            let mut parts = at.rsplitn(3, ':');
            let (column, line) = (parts.next().unwrap(), parts.next().unwrap());
            assert_eq!(parts.next().unwrap(), file.display().to_string());
            let text = std::fs::read_to_string(&file).unwrap();
            let written = text.lines().nth(line.parse::<usize>().unwrap() - 1).unwrap();
            assert_eq!(&written[column.parse::<usize>().unwrap() - 1..], "clientConfig:", "{name}");
        } else {
            assert_eq!(out.code, 0, "{name}: {out:?}");
            assert_eq!(out.stdout, "", "{name}");
        }
    }
}

#[test]
fn json_output_points_at_the_yaml_line() {
    let file = corpus().join(BOTH_URL_AND_SERVICE[0]);
    let out = crdctl(&["validate", "-o", "json", file.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let problem = &report["problems"][0];
    assert_eq!(problem["reason"], "FieldValueRequired");
    assert_eq!(problem["field"], "spec.conversion.webhookClientConfig");
    let text = std::fs::read_to_string(&file).unwrap();
    let line = text.lines().nth(problem["line"].as_u64().unwrap() as usize - 1).unwrap();
    assert_eq!(line.trim(), "clientConfig:");
}

/// A directory with `crd.yaml`: the seed's CRD with a wrong name and two storage versions.
pub fn invalid_crd() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo_root().join("examples/crontab/2-v1-added.yaml"))
        .unwrap()
        .replace("    storage: false\n", "    storage: true\n")
        .replace("  name: crontabs.example.com", "  name: crontab.example.com");
    std::fs::write(dir.path().join("crd.yaml"), text).unwrap();
    dir
}

#[test]
fn invalid_crds_exit_1_with_one_line_per_problem() {
    let dir = invalid_crd();
    let out = crdctl_in(dir.path(), &["validate", "crd.yaml"], None);
    assert_eq!(out.code, 1, "{out:?}");
    insta::assert_snapshot!(out.stdout, @r#"
    crd.yaml:6:3: crontab.example.com: metadata.name: Invalid value: "crontab.example.com": must be spec.names.plural+"."+spec.group
    crd.yaml:16:3: crontab.example.com: spec.versions: Invalid value: [{"Name":"v1beta1","Served":true,"Storage":true,"Deprecated":false},{"Name":"v1","Served":true,"Storage":true,"Deprecated":false}]: must have exactly one version marked as storage version
    crd.yaml:3:1: crontab.example.com: status.storedVersions: Invalid value: ["v1beta1"]: must have the storage version v1
    "#);
}

#[test]
fn update_validation_catches_a_removed_stored_version() {
    let dir = tempfile::tempdir().unwrap();
    let installed = std::fs::read_to_string(repo_root().join("examples/crontab/3-v1-storage.yaml")).unwrap()
        + "status:\n  storedVersions: [v1beta1, v1]\n";
    std::fs::write(dir.path().join("installed.yaml"), installed).unwrap();
    let only_v1 = std::fs::read_to_string(repo_root().join("examples/crontab/3-v1-storage.yaml")).unwrap();
    let start = only_v1.find("  - name: v1beta1").unwrap();
    let end = only_v1.find("  - name: v1\n").unwrap();
    std::fs::write(dir.path().join("new.yaml"), format!("{}{}", &only_v1[..start], &only_v1[end..])).unwrap();
    let out = crdctl_in(dir.path(), &["validate", "--old", "installed.yaml", "new.yaml"], None);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stdout,
        "new.yaml:4:1: crontabs.example.com: status.storedVersions[0]: Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions\n"
    );
}

#[test]
fn markdown_output() {
    let out =
        crdctl(&["validate", "-o", "markdown", "examples/crontab/1-v1beta1.yaml", "examples/crontab/4-webhook.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "All 2 CRDs are valid.\n");
}

use std::path::Path;

use crate::util::*;

fn pair(name: &str) -> [String; 2] {
    let dir = repo_root().join("fixtures/pairs").join(name);
    ["old.yaml", "new.yaml"].map(|f| dir.join(f).to_str().unwrap().to_string())
}

#[test]
fn the_seeds_four_examples_come_out_byte_for_byte() {
    for case in ["seed-scope-changed", "seed-stored-version-removed", "seed-field-removed", "seed-required-field-added"]
    {
        let [old, new] = pair(case);
        let out = crdctl(&["check", &old, &new]);
        assert_eq!(out.code, 1, "{case}: {out:?}");
        let expected =
            std::fs::read_to_string(repo_root().join("fixtures/pairs").join(case).join("expected.txt")).unwrap();
        let expected_line = expected.lines().find(|l| !l.starts_with('#')).unwrap();
        assert_eq!(out.stdout, format!("{expected_line}\n"), "{case}");
    }
}

#[test]
fn a_safe_upgrade_exits_0_with_no_output() {
    let [old, new] = pair("olm-valid-upgrade");
    let out = crdctl(&["check", &old, &new]);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{out:?}");
}

#[test]
fn crdify_dialect_prints_todays_olm_text() {
    let [old, new] = pair("crdify-defaultvalueremoved");
    let out = crdctl(&["check", "--dialect", "crdify", &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stdout,
        "validating upgrade for CRD \"memcacheds.cache.example.com\": v1alpha1: ^.spec.mode: default: default value removed : \"\\\"Managed\\\"\"\n"
    );
}

#[test]
fn config_files_change_what_blocks() {
    let [old, new] = pair("crdify-enumvalueadded");
    let out = crdctl(&["check", &old, &new]);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "OLM allows enum additions: {out:?}");
    let crdify_defaults = repo_root().join("fixtures/pairs/crdify-enumvalueadded/config.yaml");
    let out = crdctl(&["check", "--dialect", "crdify", "--config", crdify_defaults.to_str().unwrap(), &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stdout,
        "validating upgrade for CRD \"memcacheds.cache.example.com\": v1alpha1: ^.spec.mode: enum: allowed enum values added : [\"Unmanaged\"]\n"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("warn.yaml"), "validations:\n- name: enum\n  enforcement: Warn\n").unwrap();
    let out = crdctl_in(dir.path(), &["check", "--config", "warn.yaml", &old, &new], None);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{out:?}");
    assert!(out.stderr.starts_with("crdctl: warning: validating upgrade for CRD"), "{}", out.stderr);
}

#[test]
fn enforcement_none_reports_only_what_the_api_server_refuses() {
    let [old, new] = pair("seed-scope-changed");
    let out = crdctl(&["check", "--enforcement", "None", &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stdout,
        "CustomResourceDefinition.apiextensions.k8s.io \"example.test.example.com\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable\n"
    );
    let [old, new] = pair("seed-stored-version-removed");
    let out = crdctl(&["check", "--enforcement", "None", &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("status.storedVersions[0]: Invalid value: \"v1alpha1\": missing from spec.versions; v1alpha1 was previously a storage version"), "{out:?}");
    let [old, new] = pair("seed-required-field-added");
    let out = crdctl(&["check", "--enforcement", "None", &old, &new]);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "the API server allows a new required field: {out:?}");
}

/// Issue 8: what the API server refuses in a new schema is reported in either enforcement: a
/// rule that does not compile, and one whose estimated cost is over the API server's budget.
#[test]
fn rules_the_api_server_refuses_are_reported_as_it_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let crd = |spec: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: crontabs.example.com}}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: crontabs, kind: CronTab}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {spec}\n"
        )
    };
    std::fs::write(dir.path().join("old.yaml"), crd("{type: object, x-kubernetes-validations: [{rule: \"true\"}]}"))
        .unwrap();
    let refused = [
        (
            "{type: object, x-kubernetes-validations: [{rule: \"self.size( > 1\", message: bad}]}",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size( > 1\", Message:\"bad\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:12: Syntax error:",
        ),
        (
            "{type: array, items: {type: string}, x-kubernetes-validations: [{rule: \"self.all(a, self.all(b, a != b))\"}]}",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
        ),
    ];
    for (spec, refusal) in refused {
        std::fs::write(dir.path().join("new.yaml"), crd(spec)).unwrap();
        let expected =
            format!("CustomResourceDefinition.apiextensions.k8s.io \"crontabs.example.com\" is invalid: {refusal}");
        for enforcement in ["Strict", "None"] {
            let out = crdctl_in(dir.path(), &["check", "--enforcement", enforcement, "old.yaml", "new.yaml"], None);
            assert_eq!(out.code, 1, "{out:?}");
            assert!(out.stdout.starts_with(&expected), "{enforcement}: {}", out.stdout);
        }
    }
}

/// Issue 11, defect 4: `--enforcement None` goes through the same output formats.
#[test]
fn enforcement_none_honours_the_output_format() {
    let [old, new] = pair("seed-scope-changed");
    let out = crdctl(&["check", "--enforcement", "None", "--output", "json", &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["safe"], false);
    let finding = &report["findings"][0];
    assert_eq!(
        (finding["check"].as_str(), finding["validation"].as_str()),
        (Some("apiServer"), Some("APIServerValidation"))
    );
    assert_eq!(finding["message"], "spec.scope: Invalid value: \"Cluster\": field is immutable");
    assert!(finding["location"]["line"].as_u64().is_some(), "{finding}");
    let markdown = crdctl(&["check", "--enforcement", "None", "--output", "markdown", &old, &new]);
    assert!(markdown.stdout.contains("spec.scope: Invalid value"), "{markdown:?}");
    let sarif = crdctl(&["check", "--enforcement", "None", "--output", "sarif", &old, &new]);
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    assert_eq!(sarif["runs"][0]["results"][0]["ruleId"], "apiServer", "{sarif}");
}

/// The page holds every finding the JSON report has, each schema finding beside its diff with
/// the finding's own line marked, the version table and the filters, and fetches nothing.
#[test]
fn html_report_is_one_page_with_every_finding_and_its_diff() {
    let corpus = corpus().join("pairs/kubermatic-applicationinstallations-v2.20.6-v2.21.0");
    let [old, new] = ["old.yaml", "new.yaml"].map(|file| corpus.join(file).display().to_string());
    let page = crdctl(&["check", "-o", "html", &old, &new]);
    assert_eq!(page.code, 1, "{page:?}");
    let page = page.stdout;
    assert!(page.starts_with("<!doctype html>") && page.trim_end().ends_with("</html>"), "{page}");
    for fetching in [" src=", " href=", "<link", "@import", "url("] {
        assert!(!page.contains(fetching), "the page fetches something: {fetching}");
    }
    let report: serde_json::Value = serde_json::from_str(&crdctl(&["check", "-o", "json", &old, &new]).stdout).unwrap();
    let findings: Vec<&serde_json::Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["message"].is_string()).collect();
    let sections: Vec<&str> = page.split("<section class=\"finding\"").skip(1).collect();
    assert_eq!(sections.len(), findings.len());
    for (section, finding) in sections.iter().zip(&findings) {
        let message = finding["message"].as_str().unwrap().replace('&', "&amp;").replace('"', "&quot;");
        assert!(section.contains(&message), "{message} in {section}");
        let severity = finding["severity"].as_str().unwrap();
        assert!(section.starts_with(&format!(" data-severity=\"{severity}\"")), "{section}");
        if finding["path"].is_string() {
            assert!(section.contains("<table class=\"diff\">"), "no diff for {finding}");
        }
    }
    let max_length = findings.iter().find(|f| f["check"] == "maxLength").unwrap();
    let line = max_length["location"]["line"].as_u64().unwrap();
    assert!(
        page.contains(&format!("<td class=\"n\">{line}</td><td class=\"ins at\">  maxLength: 63</td>")),
        "the added maxLength is marked on line {line}"
    );
    assert!(page.contains("<tr><td>v1</td><td>yes</td><td>yes</td><td>no</td><td>unknown</td></tr>"));
    assert!(page.contains("<title>CRD upgrade safety: blocked</title>"));
    assert!(page.contains("<select id=\"version\"><option value=\"\">all</option><option>v1</option></select>"));
}

/// The page as a browser shows it: every finding with its diff, and the filters (whose state
/// is in the address) hiding exactly the findings of other versions and severities.
#[test]
fn html_report_renders_and_filters_in_chromium() {
    let corpus = corpus().join("pairs/flux-helm-controller-helmreleases-v1.0.1-v1.1.0");
    let [old, new] = ["old.yaml", "new.yaml"].map(|file| corpus.join(file).display().to_string());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, crdctl(&["check", "-o", "html", &old, &new]).stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(&crdctl(&["check", "-o", "json", &old, &new]).stdout).unwrap();
    let findings: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["message"].is_string())
        .map(|f| (f["severity"].as_str().unwrap(), f["version"].as_str().unwrap_or_default()))
        .collect();
    assert!(findings.len() > 2, "{report}");
    let chromium = Chromium::new();
    let url = format!("file://{}", page.display());
    // Which findings the browser shows, and the count the page says it shows.
    let shown = |address: &str| -> (Vec<bool>, String) {
        let Opened { dom, console } = chromium.open(address);
        assert!(console.is_empty(), "{address}: {console:?}");
        let sections: Vec<&str> = dom.split("<section class=\"finding\"").skip(1).collect();
        assert_eq!(sections.len(), findings.len(), "{dom}");
        for section in &sections {
            assert!(section.contains("<table class=\"diff\">"), "a finding without its diff: {section}");
        }
        let visible = sections.iter().map(|s| !s.split('>').next().unwrap().contains("hidden")).collect();
        let count = dom.split("<output id=\"shown\">").nth(1).unwrap().split('<').next().unwrap().to_string();
        (visible, count)
    };
    assert_eq!(shown(&url), (vec![true; findings.len()], findings.len().to_string()));
    for version in ["v2", "v2beta1", "v2beta2"] {
        let expected: Vec<bool> = findings.iter().map(|(_, v)| *v == version).collect();
        let count = expected.iter().filter(|visible| **visible).count().to_string();
        assert_eq!(shown(&format!("{url}#version={version}")), (expected, count), "{version}");
    }
    let errors = findings.iter().map(|(severity, _)| *severity == "error").collect::<Vec<_>>();
    let count = errors.iter().filter(|e| **e).count().to_string();
    assert_eq!(shown(&format!("{url}#severity=error")), (errors.clone(), count));
    let warnings = errors.iter().map(|e| !e).collect::<Vec<_>>();
    let count = warnings.iter().filter(|w| **w).count().to_string();
    assert_eq!(shown(&format!("{url}#severity=warning")), (warnings, count));

    // It renders: a PNG as wide as the window.
    let png = dir.path().join("report.png");
    chromium.screenshot(&url, &png, 1280, 2000);
    let png = std::fs::read(&png).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
    assert_eq!(png.get(16..20), Some(&1280u32.to_be_bytes()[..]), "the image's width");
}

/// Every corpus pair's page loads in the browser without a console message, with every finding.
#[test]
fn html_report_of_every_corpus_pair_renders_without_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let chromium = Chromium::new();
    let mut pairs: Vec<_> = std::fs::read_dir(corpus().join("pairs")).unwrap().map(|e| e.unwrap().path()).collect();
    pairs.retain(|pair| pair.is_dir());
    pairs.sort();
    assert!(pairs.len() >= 20, "{pairs:?}");
    for pair in pairs {
        let [old, new] = ["old.yaml", "new.yaml"].map(|file| pair.join(file).display().to_string());
        let report: serde_json::Value =
            serde_json::from_str(&crdctl(&["check", "-o", "json", &old, &new]).stdout).unwrap();
        let findings = report["findings"].as_array().unwrap().iter().filter(|f| f["message"].is_string()).count();
        let page = dir.path().join(format!("{}.html", pair.file_name().unwrap().to_str().unwrap()));
        std::fs::write(&page, crdctl(&["check", "-o", "html", &old, &new]).stdout).unwrap();
        let Opened { dom, console } = chromium.open(&format!("file://{}", page.display()));
        assert!(console.is_empty(), "{}: {console:?}", pair.display());
        assert_eq!(dom.matches("<section class=\"finding\"").count(), findings, "{}", pair.display());
        assert!(dom.contains(&format!("<output id=\"shown\">{findings}</output>")), "{}", pair.display());
    }
}

/// `--output sarif` is valid SARIF 2.1.0 (the OASIS schema, installed by scripts/peers) on
/// every corpus pair, and with stored objects' findings.
#[test]
fn sarif_output_validates_against_the_sarif_schema() {
    let schema = std::fs::read_to_string(crdctl_storage::peers::file("schemas/sarif-2.1.0.json").unwrap()).unwrap();
    // rtm.5's `language` patterns have a stray `]`, which the meta-schema's regex format
    // refuses; crdctl writes no `language`, so each is set to what it means.
    let schema = schema.replace(r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#, r#""^[a-zA-Z]{2}(-[a-zA-Z]{2})?$""#);
    let validator = jsonschema::validator_for(&serde_json::from_str(&schema).unwrap()).unwrap();
    let valid = |sarif: &str, what: &str| {
        let sarif: serde_json::Value = serde_json::from_str(sarif).unwrap();
        let errors: Vec<String> =
            validator.iter_errors(&sarif).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{what}: {errors:#?}");
        sarif["runs"][0]["results"].as_array().unwrap().len()
    };
    let broken = serde_json::json!({"version": "2.1.0", "runs": [{"tool": {}, "results": []}]});
    assert!(!validator.is_valid(&broken), "a run's tool needs its driver");
    let mut results = 0;
    for pair in std::fs::read_dir(corpus().join("pairs")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let [old, new] = ["old.yaml", "new.yaml"].map(|file| pair.join(file).display().to_string());
        results += valid(&crdctl(&["check", "-o", "sarif", &old, &new]).stdout, &pair.display().to_string());
    }
    assert!(results > 100, "{results} results");
    let dir = repo_root().join("fixtures/pairs/data-enum-rule-removal");
    let with_data =
        crdctl_in(&dir, &["check", "old.yaml", "new.yaml", "--objects", "objects.yaml", "-o", "sarif"], None);
    assert!(valid(&with_data.stdout, "with stored objects") > 3);
}

#[test]
fn stored_versions_flag_and_unknown_status() {
    let [old, new] = pair("crdify-stored-version-kept");
    // The old file records [v1alpha1]; claiming v1alpha0 was stored too makes no difference to
    // versions that stay, but a removed one is reported.
    let out = crdctl(&["check", "--stored-versions", "v1alpha1,v0", &old, &new]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains(r#""NoStoredVersionRemoved" validation failed: stored version "v0" removed"#),
        "{out:?}"
    );
    let corpus = corpus().join("pairs/cluster-api-clusters-v1.12.4-v1.13.0");
    let out = crdctl(&["check", corpus.join("old.yaml").to_str().unwrap(), corpus.join("new.yaml").to_str().unwrap()]);
    assert!(
        out.stderr.contains("version v1alpha3 was removed, and the installed CRD's status.storedVersions is unknown"),
        "{}",
        out.stderr
    );
}

#[test]
fn json_sarif_and_markdown_outputs() {
    let [old, new] = pair("olm-all-except-field-removal");
    let out = crdctl(&["check", "-o", "json", &old, &new]);
    assert_eq!(out.code, 1);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["safe"], false);
    let scope = &report["findings"][0];
    assert_eq!(
        (scope["validation"].as_str(), scope["check"].as_str(), scope["old"].as_str(), scope["new"].as_str()),
        (Some("NoScopeChange"), Some("scope"), Some("Cluster"), Some("Namespaced"))
    );
    assert_eq!(scope["severity"], "error");
    let default = report["findings"].as_array().unwrap().iter().find(|f| f["check"] == "default").unwrap();
    assert_eq!(default["new"], "foo");
    assert_eq!(default["path"], "^.spec.defaultVal");
    assert_eq!(default["version"], "v2");

    let out = crdctl(&["check", "-o", "sarif", &old, &new]);
    let sarif: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), report["findings"].as_array().unwrap().len());
    assert!(
        results.iter().all(|r| { r["locations"][0]["physicalLocation"]["region"]["startLine"].as_u64().unwrap() > 0 })
    );

    let out = crdctl(&["check", "-o", "markdown", &old, &new]);
    assert!(out.stdout.starts_with("### CRD upgrade safety: blocked\n"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("| ❌ |")).count(), 13);
}

#[test]
fn directories_pair_crds_by_name_and_new_crds_pass() {
    let dir = tempfile::tempdir().unwrap();
    let [old, new] = pair("seed-scope-changed");
    std::fs::create_dir_all(dir.path().join("old")).unwrap();
    std::fs::create_dir_all(dir.path().join("new")).unwrap();
    std::fs::copy(&old, dir.path().join("old/crd.yaml")).unwrap();
    let fresh = std::fs::read_to_string(repo_root().join("examples/crontab/1-v1beta1.yaml")).unwrap();
    std::fs::write(
        dir.path().join("new/bundle.yaml"),
        format!("{fresh}---\n{}", std::fs::read_to_string(&new).unwrap()),
    )
    .unwrap();
    let out = crdctl_in(dir.path(), &["check", "old", "new"], None);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout.lines().count(), 1, "only the changed CRD is reported: {out:?}");
}

#[test]
fn git_revisions_are_read_without_a_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git").args(args).current_dir(dir.path()).output().unwrap();
        assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
    };
    let [old, new] = pair("seed-required-field-added");
    git(&["init", "-q", "-b", "main"]);
    std::fs::copy(&old, dir.path().join("crd.yaml")).unwrap();
    git(&["add", "crd.yaml"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "v1"]);
    std::fs::copy(&new, dir.path().join("crd.yaml")).unwrap();
    let out = crdctl_in(dir.path(), &["check", "git:main:crd.yaml", "crd.yaml"], None);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("new required fields added: [pollInterval]"), "{out:?}");
    // A directory at a revision: every manifest below it.
    std::fs::create_dir_all(dir.path().join("config/crds")).unwrap();
    std::fs::copy(&old, dir.path().join("config/crds/sample.yaml")).unwrap();
    git(&["add", "config"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "dir"]);
    std::fs::copy(&new, dir.path().join("config/crds/sample.yaml")).unwrap();
    let out = crdctl_in(dir.path(), &["check", "git:HEAD:config", "config"], None);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("new required fields added: [pollInterval]"), "{out:?}");
    let out = crdctl_in(dir.path(), &["check", "git:nope:crd.yaml", "crd.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("crdctl: git:nope:crd.yaml: "), "{}", out.stderr);
    // Issue 11, defect 5: a revision's file goes through the same 32 MiB gate as a file.
    std::fs::write(dir.path().join("big.yaml"), vec![b'#'; 33 << 20]).unwrap();
    git(&["add", "big.yaml"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "big"]);
    let out = crdctl_in(dir.path(), &["check", "git:HEAD:big.yaml", "crd.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stderr, "crdctl: git:HEAD:big.yaml: file is larger than the 32 MiB input limit\n");
}

/// Issue 11, defect 5: `--config` goes through the loader's gate and budget too.
#[test]
fn a_config_file_gets_the_loaders_limits() {
    let dir = tempfile::tempdir().unwrap();
    let [old, new] = pair("seed-required-field-added");
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        bomb.push_str(&format!("a{level}: &a{level} [{}]\n", vec![format!("*a{}", level - 1); 10].join(", ")));
    }
    std::fs::write(dir.path().join("bomb.yaml"), bomb).unwrap();
    std::fs::write(dir.path().join("dup.yaml"), "unhandledEnforcement: Warn\nunhandledEnforcement: Error\n").unwrap();
    std::fs::write(dir.path().join("bad.yaml"), b"validations: \xff\n").unwrap();
    let check = |config: &str| crdctl_in(dir.path(), &["check", "--config", config, &old, &new], None);
    let out = check("bomb.yaml");
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("crdctl: bomb.yaml: parsing config: 5:"), "{}", out.stderr);
    assert!(out.stderr.ends_with("alias bombs are refused\n"), "{}", out.stderr);
    let out = check("dup.yaml");
    assert_eq!(out.code, 2);
    assert_eq!(out.stderr, "crdctl: dup.yaml: parsing config: 2:1: duplicate key \"unhandledEnforcement\"\n");
    let out = check("bad.yaml");
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("crdctl: bad.yaml:1:"), "{}", out.stderr);
}

#[test]
fn bad_input_and_bad_config_exit_2() {
    let [old, new] = pair("seed-scope-changed");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "validations:\n- name: format\n").unwrap();
    let out = crdctl_in(dir.path(), &["check", "--config", "config.yaml", &old, &new], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stderr, "crdctl: config.yaml: configuring validation \"format\": unknown validation : \"format\"\n");
    std::fs::write(dir.path().join("bad.yaml"), "kind: [\n").unwrap();
    let out = crdctl_in(dir.path(), &["check", "bad.yaml", &new], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("crdctl: bad.yaml:1:"), "{}", out.stderr);
}

#[test]
fn schema_less_versions_and_deep_nesting_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let v1beta1 = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  version: v1\n  names:\n    plural: crontabs\n    kind: CronTab\n";
    std::fs::write(dir.path().join("old.yaml"), v1beta1).unwrap();
    let mut deep = String::from(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names:\n    plural: crontabs\n    kind: CronTab\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n",
    );
    let mut indent = " ".repeat(8);
    for level in 0..40 {
        deep.push_str(&format!("{indent}type: object\n{indent}properties:\n{indent}  f{level}:\n"));
        indent.push_str("    ");
    }
    deep.push_str(&format!("{indent}type: string\n"));
    std::fs::write(dir.path().join("new.yaml"), &deep).unwrap();
    let out = crdctl_in(dir.path(), &["check", "old.yaml", "new.yaml"], None);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "a schema added to a schema-less version is fine: {out:?}");
    let out = crdctl_in(dir.path(), &["check", "new.yaml", "old.yaml"], None);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout.lines().count(), 1, "removing the whole schema is one finding: {out:?}");
    assert!(out.stdout.contains("field/^ may not be removed"), "{out:?}");
    // 500 levels of nesting: refused at load with a position, never a crash.
    let mut deeper = deep.clone();
    for level in 40..500 {
        deeper.push_str(&format!("{indent}properties:\n{indent}  g{level}:\n"));
        indent.push_str("    ");
    }
    std::fs::write(dir.path().join("deeper.yaml"), deeper).unwrap();
    let out = crdctl_in(dir.path(), &["check", "old.yaml", "deeper.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("deeper.yaml:") && out.stderr.contains("nesting is deeper than 100 levels"),
        "{}",
        out.stderr
    );
    // Recursive anchors are not valid YAML for a CRD and are refused at load.
    std::fs::write(dir.path().join("recursive.yaml"), "a: &a\n  b: *a\n").unwrap();
    let out = crdctl_in(dir.path(), &["check", "recursive.yaml", "new.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("crdctl: recursive.yaml:2:"), "{}", out.stderr);
}

/// Every corpus pair: a reviewed snapshot of its JSON report, and each finding points at a
/// line that names the field or keyword it is about.
#[test]
fn corpus_pairs_json_reports() {
    let mut pairs: Vec<_> =
        std::fs::read_dir(corpus().join("pairs")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    pairs.sort();
    assert_eq!(pairs.len(), 27);
    for pair in pairs {
        let name = pair.file_name().unwrap().to_string_lossy().to_string();
        let out = crdctl_in(&pair, &["check", "-o", "json", "old.yaml", "new.yaml"], None);
        assert!(out.code == 0 || out.code == 1, "{name}: {out:?}");
        let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(out.code == 0, report["safe"] == true, "{name}");
        for finding in report["findings"].as_array().unwrap() {
            assert_location_names_the_finding(&pair, finding);
        }
        insta::assert_json_snapshot!(format!("corpus-{name}"), report);
    }
}

#[track_caller]
fn assert_location_names_the_finding(dir: &Path, finding: &serde_json::Value) {
    let location = &finding["location"];
    let file = location["file"].as_str().unwrap();
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let raw = text.lines().nth(location["line"].as_u64().unwrap() as usize - 1).unwrap().trim_start();
    let is_list_item = raw.starts_with("- ");
    let line = raw.trim_start_matches("- ");
    let check = finding["check"].as_str().unwrap();
    let path = finding["path"].as_str().unwrap_or("");
    let leaf = path.rsplit(['.', '[']).next().unwrap_or("").trim_end_matches(']').trim_end_matches('*');
    let keys: Vec<String> = match check {
        "unhandled" => finding["old"].as_object().unwrap().keys().cloned().collect(),
        "scope" => vec!["scope".into()],
        "storedVersionRemoval" => vec!["name".into(), finding["old"].as_str().unwrap().into()],
        other => vec![other.into()],
    };
    let names =
        |key: &str| line.starts_with(&format!("{key}:")) || line.starts_with(&format!("\"{key}\":")) || line == key;
    let ends_in_index = path.ends_with(']') && !path.ends_with("[*]");
    let ok = keys.iter().any(|k| names(k))
        || names(leaf)
        || names("items")
        || names("openAPIV3Schema")
        || names("additionalProperties")
        || (ends_in_index && is_list_item);
    assert!(ok, "{}: {check} at {path} points at {file}:{}: {line:?}", dir.display(), location["line"]);
}

/// Issue 11, defects 11 and 12: one dialect per report. JSON lists every finding with both
/// dialects' texts (`message` is the asked dialect's, null where it folds the finding into
/// the removal it follows from); text and SARIF report what the asked dialect reports.
#[test]
fn findings_implied_by_a_removal_are_in_json_with_both_texts_and_not_in_sarif() {
    let [old, new] = pair("olm-existing-field-removal");
    let json = crdctl(&["check", "-o", "json", &old, &new]);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let implied: Vec<&serde_json::Value> = findings.iter().filter(|f| f["impliedByRemoval"] == true).collect();
    assert!(!implied.is_empty());
    for finding in &implied {
        assert!(finding["message"].is_null() && finding["messages"]["olm"].is_null(), "{finding}");
        assert!(finding["messages"]["crdify"].is_string(), "{finding}");
    }
    for finding in findings.iter().filter(|f| f["impliedByRemoval"] == false) {
        assert_eq!(finding["message"], finding["messages"]["olm"], "{finding}");
    }
    let reported = findings.iter().filter(|f| f["message"].is_string()).count();
    let sarif = crdctl(&["check", "-o", "sarif", &old, &new]);
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), reported);
    let text = crdctl(&["check", &old, &new]);
    assert_eq!(text.stdout.lines().count(), reported, "{}", text.stdout);
    // Asked for crdify, the implied findings carry its text as the message.
    let crdify = crdctl(&["check", "-o", "json", "--dialect", "crdify", &old, &new]);
    let crdify: serde_json::Value = serde_json::from_str(&crdify.stdout).unwrap();
    assert!(crdify["findings"].as_array().unwrap().iter().all(|f| f["message"] == f["messages"]["crdify"]));
}

/// `--objects`: each static finding says which stored objects it affects, the data findings no
/// static finding names follow, and the exit status stays the static verdict unless
/// `--fail-on data`.
#[test]
fn stored_objects_confirm_or_clear_static_findings() {
    let dir = repo_root().join("fixtures/pairs/data-enum-rule-removal");
    let run = |objects: &str, extra: &[&str]| {
        let mut args = vec!["check", "old.yaml", "new.yaml", "--objects", objects];
        args.extend(extra);
        crdctl_in(&dir, &args, None)
    };
    let out = run("objects.yaml", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let data: Vec<&str> = out.stdout.lines().skip(3).collect();
    assert_eq!(
        data,
        [
            "crontabs.example.com: 3 stored objects judged against the new CRD",
            r#"crontabs.example.com: version "v1", field "^.spec" has unknown change, refusing to determine that change is safe — 2 of 3 objects use it: default/a, default/b"#,
            r#"crontabs.example.com: version "v1", field "^.spec.mode": enums ["Unmanaged"] removed from the set of previously allowed values — 1 of 3 objects use it: default/a"#,
            "crontabs.example.com: crd/crontabs.example.com version/v1 field/^.spec.legacy may not be removed — 1 of 3 objects use it: default/b",
            "crontabs.example.com: default/c (objects.yaml:14): stored as v1beta1, which the new CRD no longer lists: it cannot be read after the upgrade",
        ],
        "{}",
        out.stdout
    );
    // The page lists each finding's affected objects, then what the objects show.
    let page = run("objects.yaml", &["-o", "html"]).stdout;
    let enum_finding =
        page.split("<section class=\"finding\"").find(|s| s.contains("enums [&quot;Unmanaged&quot;] removed"));
    let enum_finding = enum_finding.unwrap_or_else(|| panic!("{page}"));
    assert!(
        enum_finding.contains("<summary>1 stored object affected</summary><ul><li>default/a</li></ul>"),
        "{enum_finding}"
    );
    let stored = page.split("<h2>Stored objects</h2>").nth(1).unwrap_or_else(|| panic!("{page}"));
    assert!(
        stored.contains("default/c (objects.yaml:14): stored as v1beta1, which the new CRD no longer lists"),
        "{stored}"
    );
    // The JSON carries every data finding with upstream's message, and which are ratcheted.
    let json: serde_json::Value = serde_json::from_str(&run("objects.yaml", &["-o", "json"]).stdout).unwrap();
    let messages: Vec<(&str, &str, bool)> = json["data"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["object"].as_str().unwrap(), f["problem"].as_str().unwrap(), f["ratcheted"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        messages,
        [
            ("default/a", "invalid", true),
            ("default/b", "pruned", false),
            ("default/b", "invalid", true),
            ("default/c", "unlistedVersion", false),
        ]
    );
    let rule = &json["data"]["findings"][2]["message"];
    assert!(
        rule.as_str()
            .unwrap()
            .contains("spec: Invalid value: \"object\": failed rule: !has(self.replicas) || self.replicas <= 10"),
        "{rule}"
    );
    assert_eq!(json["findings"][1]["affectedObjects"], serde_json::json!(["default/a"]));

    // SARIF: the static results say whom they affect; each data finding is a result at its line.
    let sarif: serde_json::Value = serde_json::from_str(&run("objects.yaml", &["-o", "sarif"]).stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results[1]["message"]["text"].as_str().unwrap().ends_with("— 1 of 3 objects use it: default/a"), "{sarif}");
    let stored: Vec<u64> = results
        .iter()
        .filter(|r| r["ruleId"] == "StoredObject")
        .map(|r| r["locations"][0]["physicalLocation"]["region"]["startLine"].as_u64().unwrap())
        .collect();
    assert_eq!(stored, [6, 10, 10, 14], "every data finding, at its object");

    // Nothing stored is affected: the static verdict still fails; --fail-on data passes.
    let clear = run("objects-unaffected.yaml", &[]);
    assert_eq!(clear.code, 1);
    assert!(clear.stdout.contains("may not be removed — no stored object uses it"), "{}", clear.stdout);
    assert_eq!(run("objects-unaffected.yaml", &["--fail-on", "data"]).code, 0);
    assert_eq!(run("objects.yaml", &["--fail-on", "data"]).code, 1);
}

/// `--live` against `crdctl serve` holding 10,000 CronTabs: OLD is the installed CRD (`-`), the
/// objects are read in pages at its storage version.
#[test]
fn live_check_judges_what_a_running_server_stores() {
    use crate::serve::{Backend, example};
    let served = crate::migrate::stored_as_v1beta1(
        Backend::Redb,
        &[],
        &example("3-v1-storage.yaml"),
        10_000,
        crate::migrate::host_and_port,
    );
    // The new CRD drops `host` from both versions.
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.yaml");
    std::fs::write(&new, example("3-v1-storage.yaml").replace("          host:\n            type: string\n", ""))
        .unwrap();
    let kubeconfig = served.kubeconfig.to_str().unwrap();
    let out = crdctl(&["check", "-", new.to_str().unwrap(), "--live", "--kubeconfig", kubeconfig]);
    assert_eq!(out.code, 1, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.contains(&"crontabs.example.com: 10,000 stored objects judged against the new CRD"),
        "{}",
        out.stdout
    );
    for version in ["v1beta1", "v1"] {
        let removal = format!(
            "crontabs.example.com: crd/crontabs.example.com version/{version} field/^.host may not be removed — 10,000 of 10,000 objects use it: default/ct-00000, default/ct-00001, default/ct-00002, default/ct-00003, default/ct-00004, and 9,995 more"
        );
        assert!(lines.contains(&removal.as_str()), "{removal}\n{}", out.stdout);
    }
}

/// The README's side-by-side: prometheus-operator's v0.80.1 → v0.81.0 ScrapeConfig CRD, refused
/// from the schemas, and judged against the example's stored objects: one uses a removed role.
/// With that one fixed, `--fail-on data` passes.
#[test]
fn the_readme_pair_names_the_object_that_uses_a_removed_enum_value() {
    let pair = corpus().join("pairs/prometheus-operator-scrapeconfigs-v0.80.1-v0.81.0");
    let (old, new) = (pair.join("old.yaml"), pair.join("new.yaml"));
    let objects = repo_root().join("examples/upgrade-safety/scrapeconfigs.yaml");
    let check = |extra: &[&str]| crdctl(&[&["check", old.to_str().unwrap(), new.to_str().unwrap()], extra].concat());
    let refused = r#"validating upgrade for CRD "scrapeconfigs.monitoring.coreos.com" failed: CustomResourceDefinition scrapeconfigs.monitoring.coreos.com failed upgrade safety validation. "ChangeValidator" validation failed: version "v1alpha1", field "^.spec.openstackSDConfigs[*].role": enums ["hypervisor" "instance"] removed from the set of previously allowed values"#;
    let static_only = check(&[]);
    assert_eq!((static_only.code, static_only.stdout.lines().collect::<Vec<_>>()), (1, vec![refused]));
    let with_data = check(&["--objects", objects.to_str().unwrap()]);
    assert_eq!(
        (with_data.code, with_data.stdout.lines().collect::<Vec<_>>()),
        (
            1,
            vec![
                refused,
                "scrapeconfigs.monitoring.coreos.com: 3 stored objects judged against the new CRD",
                r#"scrapeconfigs.monitoring.coreos.com: version "v1alpha1", field "^.spec.openstackSDConfigs[*].role": enums ["hypervisor" "instance"] removed from the set of previously allowed values — 1 of 3 objects use it: monitoring/legacy-nova"#,
            ]
        )
    );
    assert_eq!(check(&["--objects", objects.to_str().unwrap(), "--fail-on", "data"]).code, 1);
    let dir = tempfile::tempdir().unwrap();
    let fixed = dir.path().join("fixed.yaml");
    std::fs::write(&fixed, std::fs::read_to_string(&objects).unwrap().replace("role: instance", "role: Instance"))
        .unwrap();
    let cleared = check(&["--objects", fixed.to_str().unwrap(), "--fail-on", "data"]);
    assert_eq!(cleared.code, 0, "{cleared:?}");
    assert!(cleared.stdout.contains("— no stored object uses it"), "{}", cleared.stdout);
}

/// `--live` against `crdctl serve` running the webhook stage of the seed story: objects stored
/// in v1 are judged at v1beta1 as the webhook converts them; without `--webhook-url` the
/// webhook Service is out of reach and they are not judged there.
#[test]
fn live_check_converts_through_the_webhook_the_server_uses() {
    use crate::serve::{Backend, Kubectl, Served};
    let work = tempfile::tempdir().unwrap();
    let certs = crate::webhook::certs(work.path());
    let webhook = crate::webhook::start_example(&certs);
    let mapping = format!("default/example-conversion-webhook-server=127.0.0.1:{}", webhook.port);
    let served = Served::start_on(Backend::Redb, &["--webhook-service", &mapping]);
    let k = Kubectl::new("1.33", &served);
    let ca_bundle = std::fs::read_to_string(certs.join("ca-bundle.txt")).unwrap();
    let crd = crate::serve::webhook_crd(ca_bundle.trim());
    k.apply(&crd);
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", "crd/crontabs.example.com"]);
    k.apply("apiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: local, namespace: default}\nhost: localhost\nport: \"1234\"\n---\napiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: web, namespace: default}\nhost: example.com\nport: \"80\"\n");
    // The new CRD wants v1beta1's hostPort without dots.
    let tightened = crd.replacen(
        "          hostPort:\n            type: string\n",
        "          hostPort:\n            type: string\n            pattern: '^[a-z]+:[0-9]+$'\n",
        1,
    );
    assert_ne!(tightened, crd);
    std::fs::write(work.path().join("new.yaml"), tightened).unwrap();
    let kubeconfig = served.kubeconfig.to_str().unwrap();
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let ca = certs.join("ca-bundle.txt");
    let live = ["check", "-", "new.yaml", "--live", "--kubeconfig", kubeconfig];
    let out = crdctl_in(
        work.path(),
        &[&live[..], &["--webhook-url", &url, "--ca-bundle", ca.to_str().unwrap()]].concat(),
        None,
    );
    assert_eq!(out.code, 1, "{out:?}");
    let data: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("crontabs.example.com: ")).collect();
    assert_eq!(
        data,
        [
            "crontabs.example.com: 2 stored objects judged against the new CRD",
            r#"crontabs.example.com: version "v1beta1", field "^.hostPort": pattern "^[a-z]+:[0-9]+$" added when there was no pattern previously — 1 of 2 objects use it: default/web"#,
        ],
        "{}",
        out.stdout
    );
    let blind = crdctl_in(work.path(), &live, None);
    assert!(
        blind.stdout.contains("crontabs.example.com: default/web at v1beta1: not judged: converting it to v1beta1: the new CRD converts through a webhook Service"),
        "{}",
        blind.stdout
    );
}

/// `--objects` through the example conversion webhook over TLS: objects stored at v1beta1 are
/// judged at v1 as the webhook converts them, and converted back without loss.
#[test]
fn stored_objects_are_converted_through_the_webhook() {
    let work = tempfile::tempdir().unwrap();
    let certs = crate::webhook::certs(work.path());
    let webhook = crate::webhook::start_example(&certs);
    let crd = crate::serve::example("4-webhook.yaml");
    std::fs::write(work.path().join("old.yaml"), &crd).unwrap();
    // The new CRD limits v1's port to 3 characters.
    let tightened = crd.replacen(
        "          port:\n            type: string\n",
        "          port:\n            type: string\n            maxLength: 3\n",
        1,
    );
    assert_ne!(tightened, crd);
    std::fs::write(work.path().join("new.yaml"), tightened).unwrap();
    let objects = "apiVersion: example.com/v1beta1\nkind: CronTab\nmetadata: {name: local, namespace: default}\nhostPort: localhost:1234\n---\napiVersion: example.com/v1beta1\nkind: CronTab\nmetadata: {name: web, namespace: default}\nhostPort: example.com:80\n";
    std::fs::write(work.path().join("objects.yaml"), objects).unwrap();
    let url = format!("https://localhost:{}/crdconvert", webhook.port);
    let ca = certs.join("ca-bundle.txt");
    let args = [
        "check",
        "old.yaml",
        "new.yaml",
        "--objects",
        "objects.yaml",
        "--webhook-url",
        &url,
        "--ca-bundle",
        ca.to_str().unwrap(),
    ];
    let out = crdctl_in(work.path(), &args, None);
    assert_eq!(out.code, 1, "{out:?}");
    let data: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("crontabs.example.com: ")).collect();
    // The port is too long only once converted; the conversion back loses nothing.
    assert_eq!(
        data,
        [
            "crontabs.example.com: 2 stored objects judged against the new CRD",
            r#"crontabs.example.com: version "v1", field "^.port": maxLength: constraint 3 added when there were no restrictions previously — 1 of 2 objects use it: default/local"#,
        ],
        "{}",
        out.stdout
    );
    let json = crdctl_in(work.path(), &[&args[..], &["-o", "json"]].concat(), None);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let problems: Vec<&str> =
        json["data"]["findings"].as_array().unwrap().iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert_eq!(
        problems,
        [
            "crontabs.example.com: default/local (objects.yaml:1) at v1: port: Too long: may not be more than 3 bytes (ratcheting lets updates that leave it unchanged through; a create or a change fails)"
        ]
    );
    // Without the webhook, the objects that need it are not judged, and say so.
    let blind = crdctl_in(work.path(), &["check", "old.yaml", "new.yaml", "--objects", "objects.yaml"], None);
    assert!(
        blind.stdout.contains("crontabs.example.com: default/local (objects.yaml:1) at v1: not judged: converting it to v1: the new CRD converts through a webhook Service; pass --webhook-url"),
        "{}",
        blind.stdout
    );
    // The same webhook with a deliberate bug, losing the port on the way back: both objects
    // change in the round trip, and say where.
    let lossy = crate::webhook::start_example_with(&certs, &["--lose-port"]);
    let url = format!("https://localhost:{}/crdconvert", lossy.port);
    let lossy_args = [&args[..5], &["--webhook-url", &url], &args[7..]].concat();
    let out = crdctl_in(work.path(), &lossy_args, None);
    let lost: Vec<&str> = out.stdout.lines().filter(|l| l.contains("the conversion loses data")).collect();
    assert_eq!(
        lost,
        [
            "crontabs.example.com: default/local (objects.yaml:1) at v1: /hostPort: differs after converting to v1 and back to v1beta1: the conversion loses data",
            "crontabs.example.com: default/web (objects.yaml:6) at v1: /hostPort: differs after converting to v1 and back to v1beta1: the conversion loses data",
        ],
        "{}",
        out.stdout
    );
}

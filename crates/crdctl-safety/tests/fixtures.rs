//! Every case under `fixtures/pairs/`: the seed's four examples and the upstream OLM and crdify
//! test cases, each as `old.yaml`, `new.yaml`, an optional crdify `config.yaml`, and
//! `expected.txt`, whose lines must appear in the output (`!` lines must not). The seed's
//! examples must be the only line of output, byte for byte. Full outputs are snapshots.

#![cfg(test)]

use std::path::{Path, PathBuf};

use crdctl_safety::{Config, Dialect, Severity, dialect};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pairs");
    let mut cases: Vec<PathBuf> =
        std::fs::read_dir(&root).expect("fixtures/pairs exists").map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 40, "found {} cases", cases.len());
    cases
}

fn load(path: &Path) -> crdctl_model::Crd {
    crdctl_model::load::load_file(path).unwrap_or_else(|e| panic!("{e}")).remove(0)
}

/// Runs one case and renders everything a user could see.
fn run(case: &Path) -> (crdctl_safety::Report, String, String) {
    let config = match std::fs::read_to_string(case.join("config.yaml")) {
        Ok(text) => Config::from_yaml(&text).unwrap(),
        Err(_) => Config::default(),
    };
    let report = crdctl_safety::check(&load(&case.join("old.yaml")), &load(&case.join("new.yaml")), &config);
    let render = |dialect| {
        let mut lines = dialect::lines(&report, dialect, Severity::Error);
        lines.extend(dialect::lines(&report, dialect, Severity::Warning).into_iter().map(|l| format!("warning: {l}")));
        lines.join("\n")
    };
    let olm = render(Dialect::Olm);
    let crdify = render(Dialect::Crdify);
    (report, olm, crdify)
}

#[test]
fn every_fixture_matches_its_expectations() {
    let mut failures = Vec::new();
    for case in fixtures() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let (report, olm, crdify) = run(&case);
        let expected: Vec<String> = std::fs::read_to_string(case.join("expected.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_owned)
            .collect();
        let both = format!("{olm}\n{crdify}");
        if expected.is_empty() && (!report.is_safe() || !olm.is_empty()) {
            failures.push(format!("{name}: expected a safe upgrade, got:\n{olm}\n{crdify}"));
        }
        if name.starts_with("seed-") && olm != expected.join("\n") {
            failures.push(format!("{name}: expected exactly\n{}\ngot\n{olm}", expected.join("\n")));
        }
        for line in &expected {
            match line.strip_prefix('!') {
                Some(absent) if both.contains(absent) => {
                    failures.push(format!("{name}: must not contain {absent:?}:\n{both}"))
                }
                None if !both.contains(line.as_str()) => failures.push(format!("{name}: missing {line:?} in:\n{both}")),
                _ => {}
            }
        }
        insta::assert_snapshot!(
            name.clone(),
            format!(
                "--- olm\n{olm}\n--- crdify\n{crdify}\n--- notes\n{}",
                report.notes.iter().map(crdctl_safety::dialect::note).collect::<Vec<_>>().join("\n")
            )
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn findings_point_at_the_changed_lines() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pairs/crdify-defaultvaluechanged");
    let (report, _, _) = run(&case);
    let location = report.findings[0].location.clone().unwrap();
    let text = std::fs::read_to_string(&location.file).unwrap();
    assert_eq!(text.lines().nth(location.line as usize - 1).unwrap().trim(), "default: Unmanaged");

    let removed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pairs/seed-field-removed");
    let (report, _, _) = run(&removed);
    let location = report.findings[0].location.clone().unwrap();
    assert!(location.file.ends_with("old.yaml"), "removals point into the old file");
    let text = std::fs::read_to_string(&location.file).unwrap();
    assert_eq!(text.lines().nth(location.line as usize - 1).unwrap().trim(), "pollInterval:");
}

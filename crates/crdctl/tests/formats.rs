//! Every output format of `check`, `validate` and `versions` on fixtures, as insta snapshots
//! (the whole text, not counts or prefixes), and the exact standard error of bad input.

use crate::util::*;

fn fixture(pair: &str, file: &str) -> String {
    format!("fixtures/pairs/{pair}/{file}")
}

#[test]
fn check_in_every_format() {
    // Findings at every scope: a removed field with implied findings, and a new required field.
    for pair in ["olm-existing-field-removal", "seed-required-field-added"] {
        let (old, new) = (fixture(pair, "old.yaml"), fixture(pair, "new.yaml"));
        for (format, dialect) in
            [("text", "olm"), ("text", "crdify"), ("json", "olm"), ("markdown", "olm"), ("sarif", "crdify")]
        {
            let out = crdctl(&["check", "--output", format, "--dialect", dialect, &old, &new]);
            assert_eq!(out.code, 1, "{pair} {format}: {out:?}");
            insta::assert_snapshot!(format!("check-{pair}-{format}-{dialect}"), out.stdout);
        }
    }
}

#[test]
fn validate_in_every_format() {
    let dir = crate::validate::invalid_crd();
    for format in ["text", "json", "yaml", "markdown"] {
        let out = crdctl_in(dir.path(), &["validate", "--output", format, "crd.yaml"], None);
        assert_eq!(out.code, 1, "{format}: {out:?}");
        insta::assert_snapshot!(format!("validate-{format}"), out.stdout);
    }
}

#[test]
fn versions_in_every_format() {
    for format in ["text", "json", "yaml", "markdown"] {
        let out = crdctl(&["versions", "--output", format, "examples/crontab/3-v1-storage.yaml"]);
        assert_eq!(out.code, 0, "{format}: {out:?}");
        insta::assert_snapshot!(format!("versions-{format}"), out.stdout);
    }
}

#[test]
fn bad_input_stderr_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 6] = [
        ("empty.yaml", b""),
        ("syntax.yaml", b"apiVersion: [\n"),
        ("utf8.yaml", b"apiVersion: apiextensions.k8s.io/v1\nkind: \xff\n"),
        ("tab.yaml", b"a:\n\tb: 1\n"),
        ("dup.yaml", b"a: 1\na: 2\n"),
        ("notcrd.yaml", b"apiVersion: v1\nkind: ConfigMap\n"),
    ];
    let mut transcript = String::new();
    for (name, content) in cases {
        std::fs::write(dir.path().join(name), content).unwrap();
        let out = crdctl_in(dir.path(), &["validate", name], None);
        assert_eq!((out.code, out.stdout.as_str()), (2, ""), "{name}");
        transcript.push_str(&out.stderr);
    }
    insta::assert_snapshot!("bad-input-stderr", transcript);
}

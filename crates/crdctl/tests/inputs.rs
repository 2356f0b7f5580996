//! Bad input gets exit 2 and one line naming the file and line, never a panic.

use crate::util::*;

#[track_caller]
fn rejects(name: &str, content: &[u8], expected_stderr: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), content).unwrap();
    for command in ["validate", "versions", "convert-crd"] {
        let out = crdctl_in(dir.path(), &[command, name], None);
        assert_eq!(out.code, 2, "{command} {name}: {out:?}");
        assert_eq!(out.stdout, "", "{command} {name}");
        assert_eq!(out.stderr, format!("crdctl: {expected_stderr}\n"), "{command} {name}");
    }
}

const HEADER: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n";

#[test]
fn invalid_yaml() {
    rejects(
        "bad.yaml",
        format!("{HEADER}metadata:\n  name: [unclosed\n").as_bytes(),
        "bad.yaml:4:9: unclosed bracket '['",
    );
}

#[test]
fn duplicate_keys() {
    rejects(
        "dup.yaml",
        format!("{HEADER}metadata:\n  name: a\n  name: b\n").as_bytes(),
        "dup.yaml:5:3: duplicate key \"name\"",
    );
}

#[test]
fn alias_bomb() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let items = vec![format!("*a{}", level - 1); 10].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bomb.yaml"), text).unwrap();
    let out = crdctl_in(dir.path(), &["validate", "bomb.yaml"], None);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("crdctl: bomb.yaml:5:"), "{}", out.stderr);
    assert!(out.stderr.ends_with("alias bombs are refused\n"), "{}", out.stderr);
}

#[test]
fn a_200_level_nested_schema() {
    let mut text = format!(
        "{HEADER}metadata:\n  name: x.example.com\nspec:\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n"
    );
    let mut indent = " ".repeat(8);
    for level in 0..200 {
        text.push_str(&format!("{indent}type: object\n{indent}properties:\n{indent}  f{level}:\n"));
        indent.push_str("    ");
    }
    text.push_str(&format!("{indent}type: string\n"));
    rejects("deep.yaml", text.as_bytes(), "deep.yaml:153:199: nesting is deeper than 100 levels");
}

#[test]
fn a_50_mb_file() {
    let mut text = format!("{HEADER}metadata:\n  name: x\n  annotations:\n    big: ").into_bytes();
    text.resize(50 << 20, b'x');
    rejects("big.yaml", &text, "big.yaml: file is larger than the 32 MiB input limit");
}

#[test]
fn invalid_utf8() {
    rejects(
        "latin1.yaml",
        b"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: caf\xe9\n",
        "latin1.yaml:4:12: invalid UTF-8 (byte offset 88)",
    );
}

#[test]
fn an_empty_file() {
    rejects("empty.yaml", b"", "empty.yaml:1:1: no CustomResourceDefinition found (the file is empty)");
}

#[test]
fn a_file_without_crds() {
    rejects(
        "ns.yaml",
        b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
        "ns.yaml:1:1: no CustomResourceDefinition found",
    );
}

#[test]
fn a_field_of_the_wrong_type() {
    rejects(
        "typed.yaml",
        format!("{HEADER}metadata:\n  name: x\nspec:\n  versions:\n  - name: v1\n    served: maybe\n").as_bytes(),
        "typed.yaml:8:5: spec.versions[0].served: invalid type: string \"maybe\", expected a boolean",
    );
}

#[test]
fn a_missing_file() {
    let out = crdctl(&["validate", "does-not-exist.yaml"]);
    assert_eq!(out.code, 2, "{out:?}");
    // The reason once, not twice (issue 11, defect 1).
    assert_eq!(out.stderr, "crdctl: does-not-exist.yaml: No such file or directory (os error 2)\n");
}

#[test]
fn non_crd_documents_are_skipped_in_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    let crd = std::fs::read_to_string(repo_root().join("examples/crontab/1-v1beta1.yaml")).unwrap();
    std::fs::write(
        dir.path().join("all.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\n{crd}---\n"),
    )
    .unwrap();
    let out = crdctl_in(dir.path(), &["validate", "all.yaml"], None);
    assert_eq!(out.code, 0, "{out:?}");
}

/// Issue 11, defect 2: kustomize and Helm output folders hold empty files next to the CRDs.
#[test]
fn empty_files_found_in_a_directory_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("crds")).unwrap();
    let crd = std::fs::read_to_string(repo_root().join("examples/crontab/3-v1-storage.yaml")).unwrap();
    std::fs::write(dir.path().join("crds/crontab.yaml"), crd).unwrap();
    std::fs::write(dir.path().join("crds/blank.yaml"), "  \n\n").unwrap();
    std::fs::write(dir.path().join("crds/namespace.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
        .unwrap();
    let out = crdctl_in(dir.path(), &["-v", "versions", "crds"], None);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("crontabs.example.com"), "{}", out.stdout);
    assert!(out.stderr.contains("crds/blank.yaml: skipped: the file is empty"), "{}", out.stderr);
    assert!(out.stderr.contains("crds/namespace.yaml: skipped: no CustomResourceDefinition in it"), "{}", out.stderr);
    // Named explicitly, the empty file is still an error.
    let named = crdctl_in(dir.path(), &["versions", "crds/blank.yaml"], None);
    assert_eq!(named.code, 2);
    assert_eq!(named.stderr, "crdctl: crds/blank.yaml:1:1: no CustomResourceDefinition found (the file is empty)\n");
}

/// The peak resident memory of one `crdctl` run, in MiB, measured by GNU time.
fn peak_rss_mib(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (i32, u64) {
    let stdin = match stdin {
        Some(file) => std::process::Stdio::from(std::fs::File::open(dir.join(file)).unwrap()),
        None => std::process::Stdio::null(),
    };
    let time = crdctl_storage::peers::binary("time").unwrap_or_else(|err| panic!("{err}"));
    let out = std::process::Command::new(time)
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_crdctl"))
        .args(args)
        .current_dir(dir)
        .stdin(stdin)
        .output()
        .expect("GNU time runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib: u64 = stderr.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or_else(|| panic!("{stderr}"));
    (out.status.code().unwrap_or(-1), kib / 1024)
}

/// Issue 11: hostile inputs stay within a stated memory bound — they are refused or handled
/// without the memory growing with what they would expand to.
#[test]
fn hostile_inputs_stay_under_a_stated_peak_memory() {
    const BOUND_MIB: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    // 50 MB: refused at the 32 MiB input limit, never parsed.
    std::fs::write(dir.path().join("huge.yaml"), vec![b'#'; 50_000_000]).unwrap();
    // An alias bomb: 10^12 nodes if expanded.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        bomb.push_str(&format!("a{level}: &a{level} [{}]\n", vec![format!("*a{}", level - 1); 10].join(", ")));
    }
    std::fs::write(dir.path().join("bomb.yaml"), bomb).unwrap();
    // A valid CRD with a 100,000-value enum: parsed, located and validated.
    let values: Vec<String> = (0..100_000).map(|i| format!("v{i}")).collect();
    let crd = format!(
        "{HEADER}metadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: widgets, kind: Widget}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          mode:\n            type: string\n            enum: [{}]\n",
        values.join(", ")
    );
    std::fs::write(dir.path().join("list.yaml"), crd).unwrap();
    for (file, expected_code) in [("huge.yaml", 2), ("bomb.yaml", 2), ("list.yaml", 0)] {
        for from_stdin in [false, true] {
            let (code, peak) = if from_stdin {
                peak_rss_mib(dir.path(), &["validate", "-"], Some(file))
            } else {
                peak_rss_mib(dir.path(), &["validate", file], None)
            };
            assert_eq!(code, expected_code, "{file} (stdin: {from_stdin})");
            assert!(peak < BOUND_MIB, "{file} (stdin: {from_stdin}): peak {peak} MiB, bound {BOUND_MIB} MiB");
        }
    }
}

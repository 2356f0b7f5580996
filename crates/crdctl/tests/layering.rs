//! The crate graph points one way (model ← safety, conversion, storage ← server ← migrate ← crdctl), as
//! ARCHITECTURE.md says;
//! this plays the part of apiextensions' `.import-restrictions`.

use crate::util::repo_root;

/// Each crate and the crdctl crates it may depend on (normal dependencies, not dev ones).
const ALLOWED: &[(&str, &[&str])] = &[
    ("crdctl-model", &[]),
    ("crdctl-safety", &["crdctl-model"]),
    ("crdctl-conversion", &["crdctl-model"]),
    ("crdctl-storage", &["crdctl-model"]),
    ("crdctl-server", &["crdctl-model", "crdctl-safety", "crdctl-conversion", "crdctl-storage"]),
    ("crdctl-migrate", &["crdctl-model"]),
    (
        "crdctl",
        &["crdctl-model", "crdctl-safety", "crdctl-conversion", "crdctl-storage", "crdctl-server", "crdctl-migrate"],
    ),
    ("crdctl-bench", &[]),
];

#[test]
fn dependencies_point_one_way() {
    let crates = std::fs::read_dir(repo_root().join("crates")).unwrap();
    let mut seen = Vec::new();
    for entry in crates {
        let dir = entry.unwrap().path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let allowed = ALLOWED
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .unwrap_or_else(|| panic!("{name} is not in the layering table"))
            .1;
        for dependency in normal_dependencies(&manifest).into_iter().filter(|d| d.starts_with("crdctl")) {
            assert!(allowed.contains(&dependency.as_str()), "{name} must not depend on {dependency}");
        }
        seen.push(name);
    }
    assert_eq!(seen.len(), ALLOWED.len(), "every crate in the table exists");
}

/// Dependency names in `[dependencies]`, the only section that shapes the library graph.
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut section = "";
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]"
            && let Some((name, _)) = line.split_once('=')
        {
            // `crdctl-model.workspace = true` names crdctl-model.
            names.push(name.trim().trim_end_matches(".workspace").to_string());
        }
    }
    names
}

//! The crate graph points one way (model ← schema ← safety, conversion, storage ← server ←
//! migrate ← crdctl), as ARCHITECTURE.md says, and inside each crate the modules do too: no two
//! top-level modules import each other, directly or through others. This plays the part of
//! apiextensions' `.import-restrictions`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::util::{files_under, repo_root};

/// Each crate and the crdctl crates it may depend on (normal dependencies, not dev ones).
const ALLOWED: &[(&str, &[&str])] = &[
    ("crdctl-model", &[]),
    ("crdctl-schema", &["crdctl-model"]),
    ("crdctl-safety", &["crdctl-model", "crdctl-schema"]),
    ("crdctl-conversion", &["crdctl-model"]),
    ("crdctl-storage", &["crdctl-model"]),
    ("crdctl-server", &["crdctl-model", "crdctl-schema", "crdctl-safety", "crdctl-conversion", "crdctl-storage"]),
    ("crdctl-migrate", &["crdctl-model"]),
    (
        "crdctl",
        &[
            "crdctl-model",
            "crdctl-schema",
            "crdctl-safety",
            "crdctl-conversion",
            "crdctl-storage",
            "crdctl-server",
            "crdctl-migrate",
        ],
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

#[test]
fn modules_inside_each_crate_point_one_way() {
    let mut circles = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue; // benchmarks only
        }
        let graph = module_graph(&src);
        if let Some(circle) = find_circle(&graph) {
            circles.push(format!("{}: {}", src.display(), circle.join(" → ")));
        }
    }
    assert!(circles.is_empty(), "modules import each other in a circle:\n{}", circles.join("\n"));
}

#[test]
fn a_circle_is_found() {
    let graph = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(find_circle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let text = "use crate::{\n    error::ApiError,\n    object::{self, set},\n};\n// crate::watch in a comment\nlet x = crate::rest::get();";
    assert_eq!(imported_modules(text), BTreeSet::from(["error".into(), "object".into(), "rest".into()]));
}

/// Each top-level module of the crate at `src` and the top-level modules its non-test code names
/// through `crate::`. The crate root (`lib.rs`, `main.rs`) declares and re-exports, so it is no node.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files_under(src, "rs") {
        let relative = file.strip_prefix(src).unwrap();
        let top = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let imports: Vec<String> = imported_modules(code).into_iter().filter(|module| *module != top).collect();
        graph.entry(top).or_default().extend(imports);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|imports| imports.retain(|module| modules.contains(module)));
    graph
}

/// The first segment after every `crate::` in code (comments left out), `use crate::{a, b::c}`
/// groups included.
fn imported_modules(code: &str) -> BTreeSet<String> {
    let code: String =
        code.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    let mut modules = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut entry_start = true;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if entry_start && (c.is_ascii_lowercase() || c == '_') => {
                        entry_start = false;
                        modules.insert(identifier(&group[offset..]));
                    }
                    c if !c.is_whitespace() => entry_start = false,
                    _ => {}
                }
            }
        } else if rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
            modules.insert(identifier(rest));
        }
    }
    modules
}

fn identifier(text: &str) -> String {
    text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// A path that comes back to where it started, if the graph has one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut circle = path[start..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

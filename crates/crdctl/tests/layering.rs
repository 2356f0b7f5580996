//! The crate graph points one way (model ← schema ← safety, conversion, storage ← server ←
//! migrate ← crdctl), as ARCHITECTURE.md says, and inside each crate the modules do too: no two
//! modules of one parent import each other, directly or through others — at every depth, the
//! crate root's own items (`lib.rs`) included. This plays the part of apiextensions'
//! `.import-restrictions`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::util::{files_under, repo_root};

/// Each crate and the crdctl crates it may depend on (normal dependencies, not dev ones).
const ALLOWED: &[(&str, &[&str])] = &[
    ("crdctl-model", &[]),
    ("crdctl-schema", &["crdctl-model"]),
    ("crdctl-safety", &["crdctl-model", "crdctl-schema"]),
    ("crdctl-conversion", &["crdctl-model", "crdctl-schema"]),
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
        for (parent, graph) in sibling_graphs(&src) {
            if let Some(circle) = find_circle(&graph) {
                let parent = if parent.is_empty() { "crate" } else { parent.as_str() };
                circles.push(format!("{} ({parent}): {}", src.display(), circle.join(" → ")));
            }
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
    let text = "use crate::{\n    error::ApiError,\n    object::{self, set},\n};\n// crate::watch in a comment\nlet x = crate::rest::get();\nuse super::{Endpoint, create::Managed};";
    assert_eq!(
        module_paths(text),
        BTreeSet::from([
            "crate::error::ApiError".into(),
            "crate::object".into(),
            "crate::object::set".into(),
            "crate::rest::get".into(),
            "super::Endpoint".into(),
            "super::create::Managed".into(),
        ])
    );
}

#[test]
fn sibling_circles_are_seen_at_every_depth() {
    let modules = BTreeSet::from(["".to_string(), "a".into(), "a::b".into(), "a::c".into(), "d".into()]);
    // a::b and a::c import each other: a circle under `a`.
    assert_eq!(resolve("a::b", "super::c::f", &modules), Some("a::c".into()));
    assert_eq!(resolve("a::c", "crate::a::b::Item", &modules), Some("a::b".into()));
    assert_eq!(resolve("a::b", "super::Item", &modules), Some("a".into()));
    assert_eq!(resolve("d", "crate::State", &modules), Some(String::new()));
    // Between siblings, not between a parent and its child (the crate root included).
    assert_eq!(sibling_edge("a::b", "a::c"), Some(("a".into(), "b".into(), "c".into())));
    assert_eq!(sibling_edge("a::b::x", "d"), Some((String::new(), "a".into(), "d".into())));
    assert_eq!(sibling_edge("a", "a::b"), None);
    assert_eq!(sibling_edge("a::b", "a"), None);
    assert_eq!(sibling_edge("d", ""), None);
}

/// The server's shared state is the handler layer's: below it, the verbs, watches, admission,
/// strategies and controllers get narrow contexts, never the whole [`AppState`].
#[test]
fn only_the_handler_layer_holds_the_server_state() {
    let src = repo_root().join("crates/crdctl-server/src");
    let holders = ["lib.rs", "state.rs", "handler.rs"];
    let mut named = Vec::new();
    for file in files_under(&src, "rs") {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let code: String =
            text.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        if !holders.contains(&relative.as_str()) && code.contains("AppState") {
            named.push(relative);
        }
    }
    assert!(named.is_empty(), "below the handler layer, modules name AppState: {named:?}");
}

/// For each module with children (the crate root included), the graph among its children:
/// `a → b` when code in `a` (or below it) names `b` (or something below it), through `crate::`
/// or `super::` paths. A parent and its children may name each other (a parent re-exports and
/// builds on its children, children share the parent's types); siblings may not, in a circle.
fn sibling_graphs(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let files: Vec<(String, String)> = files_under(src, "rs")
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
            (module_of(file.strip_prefix(src).unwrap()), code)
        })
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|(module, _)| module.clone()).collect();
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, code) in &files {
        for path in module_paths(code) {
            let Some(to) = resolve(module, &path, &modules) else { continue };
            if let Some((parent, a, b)) = sibling_edge(module, &to) {
                graphs.entry(parent).or_default().entry(a).or_default().insert(b);
            }
        }
    }
    graphs
}

/// `registry::builtin` for `registry/builtin/mod.rs` or `registry/builtin.rs`; `""` for the root.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> =
        relative.components().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

/// Every `crate::…` and `super::…` path in code (comments left out), `use` groups expanded
/// one level deep at a time: `use crate::{a::b, c::{self, d}}` names `crate::a::b`, `crate::c`
/// and `crate::c::d`.
fn module_paths(code: &str) -> BTreeSet<String> {
    let code: String =
        code.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    let mut paths = BTreeSet::new();
    for start in ["crate::", "super::"] {
        for (at, _) in code.match_indices(start) {
            if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // `super::super::x` is read from its first `super`
            }
            expand(&code[at..], &mut paths);
        }
    }
    paths
}

/// The paths a path or `use` tree at the start of `text` names.
fn expand(text: &str, paths: &mut BTreeSet<String>) {
    let head: String = text.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    let head = head.trim_end_matches(':').to_string();
    let rest = &text[head.len()..];
    let Some(group) = rest.strip_prefix("::{") else {
        paths.insert(head);
        return;
    };
    let mut depth = 0;
    let mut entry = String::new();
    let mut entries = Vec::new();
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(std::mem::take(&mut entry));
                continue;
            }
            _ => {}
        }
        entry.push(c);
    }
    entries.push(entry);
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        if entry == "self" {
            paths.insert(head.clone());
        } else {
            expand(&format!("{head}::{entry}"), paths);
        }
    }
}

/// The module a path in `module` names: the longest known module it starts with, `super`
/// resolved (`""` for an item of the crate root). `None` for paths outside the crate.
fn resolve(module: &str, path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if module.is_empty() { Vec::new() } else { module.split("::").collect() };
    match segments.first() {
        Some(&"crate") => {
            segments.remove(0);
            base.clear();
        }
        Some(&"super") => {
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop()?;
            }
        }
        _ => return None,
    }
    let full: Vec<&str> = base.iter().chain(&segments).copied().collect();
    (0..=full.len()).rev().map(|n| full[..n].join("::")).find(|candidate| modules.contains(candidate))
}

/// The parent and the two children of it that an import from module `from` to module `to`
/// connects, when it is not between a module and its own ancestor.
fn sibling_edge(from: &str, to: &str) -> Option<(String, String, String)> {
    let path = |module: &str| -> Vec<String> {
        if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_string).collect() }
    };
    let (from, to) = (path(from), path(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let (a, b) = (from.get(common)?, to.get(common)?);
    Some((from[..common].join("::"), a.clone(), b.clone()))
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

//! Source rules a grep can keep (issue 11): outside tests, nothing panics on what came from
//! outside. No `.unwrap()`, `panic!`, `unreachable!`, `todo!` or `unimplemented!`; an
//! `.expect("…")` must state the invariant it relies on; taking the first element by index
//! (`[0]`, `.remove(0)`) needs a length check on that line or the two before it.

use std::path::Path;

use crate::util::repo_root;

/// The non-test part of a source file: everything before its `#[cfg(test)]` module.
fn non_test_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The line with its string literals blanked, so message texts (`"segment[0] may not be
/// empty"`) are not taken for code.
fn without_strings(line: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for c in line.chars() {
        match (in_string, escaped, c) {
            (true, false, '\\') => escaped = true,
            (true, true, _) => escaped = false,
            (_, _, '"') => {
                in_string = !in_string;
                out.push('"');
            }
            (true, _, _) => {}
            (false, _, c) => out.push(c),
        }
    }
    out
}

#[test]
fn no_panics_on_input_outside_tests() {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "the crates' sources were found");
    let mut offences = Vec::new();
    for file in &files {
        let text = non_test_source(file);
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let code = without_strings(line.split("//").next().unwrap_or_default());
            let at = format!("{}:{}: {}", file.strip_prefix(repo_root()).unwrap().display(), index + 1, line.trim());
            for banned in [".unwrap()", "panic!(", "unreachable!(", "todo!(", "unimplemented!("] {
                if code.contains(banned) {
                    offences.push(format!("{at}  ({banned})"));
                }
            }
            if code.contains(".expect(") && !code.contains(".expect(\"") {
                offences.push(format!("{at}  (expect without a stated invariant)"));
            }
            if code.contains("[0]") || code.contains(".remove(0)") {
                let checked = lines[index.saturating_sub(2)..=index]
                    .iter()
                    .any(|l| l.contains("len()") || l.contains("is_empty()"));
                if !checked {
                    offences.push(format!("{at}  (first element without a length check)"));
                }
            }
        }
    }
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

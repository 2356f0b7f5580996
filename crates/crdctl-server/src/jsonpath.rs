//! The JSONPath subset printer columns use: `.a.b`, `[0]`, `['key.with.dots']`, `[*]` and
//! filters `[?(@.type=="Ready")]`; the first match wins, as the table convertor takes it.

use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter { path: Vec<String>, value: String },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (field, after) = after.split_at_checked(end)?;
            if !field.is_empty() {
                steps.push(Step::Field(field.to_string()));
            }
            rest = after;
        } else if let Some(after) = rest.strip_prefix('[') {
            let (inner, after) = after.split_once(']')?;
            let inner = inner.trim();
            rest = after;
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(idx) = inner.parse() {
                steps.push(Step::Index(idx));
            } else if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, value) = filter.split_once("==")?;
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Filter {
                    path: field.trim().split('.').map(str::to_string).collect(),
                    value: value.to_string(),
                });
            } else {
                steps.push(Step::Field(inner.trim_matches(|c| c == '"' || c == '\'').to_string()));
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The first value `path` selects in `object`.
pub fn first<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let steps = parse(path)?;
    walk(object, &steps)
}

fn walk<'a>(value: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    let Some((step, rest)) = steps.split_first() else { return Some(value) };
    match step {
        Step::Field(name) => walk(value.get(name)?, rest),
        Step::Index(idx) => walk(value.get(*idx)?, rest),
        Step::All => value.as_array()?.iter().find_map(|item| walk(item, rest)),
        Step::Filter { path, value: expected } => value.as_array()?.iter().find_map(|item| {
            let actual = path.iter().try_fold(item, |v, key| v.get(key))?;
            let text = actual.as_str().map_or_else(|| actual.to_string(), str::to_string);
            if &text == expected { walk(item, rest) } else { None }
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::first;

    #[test]
    fn selects_what_printer_columns_ask_for() {
        let object = json!({"spec": {"a.b": 1, "list": [{"n": 1}, {"n": 2}]},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(first(&object, ".spec.list[1].n"), Some(&json!(2)));
        assert_eq!(first(&object, ".spec['a.b']"), Some(&json!(1)));
        assert_eq!(first(&object, ".spec.list[*].n"), Some(&json!(1)));
        assert_eq!(first(&object, ".status.conditions[?(@.type==\"Ready\")].status"), Some(&json!("True")));
        assert_eq!(first(&object, ".spec.missing"), None);
    }
}

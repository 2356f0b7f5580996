//! What a round trip did to an object: each place where it came back otherwise than it went,
//! judged `lost`, `defaulted`, `reordered` or `changed` (`refused` is the fuzzer's, for a
//! conversion that failed). `webhook roundtrip` and the fuzzer both judge with it.

use serde::Serialize;
use serde_json::Value;

/// What happened to a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// It was there and is gone.
    Lost,
    /// It was not there and is now.
    Defaulted,
    /// A list holds the same items in another order.
    Reordered,
    /// Its value changed.
    Changed,
    /// A conversion on the way refused the object (`after` holds its error).
    Refused,
}

impl Verdict {
    /// The word for it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Lost => "lost",
            Verdict::Defaulted => "defaulted",
            Verdict::Reordered => "reordered",
            Verdict::Changed => "changed",
            Verdict::Refused => "refused",
        }
    }
}

/// One place where an object came back otherwise than it went.
#[derive(Debug, Clone)]
pub struct Difference {
    /// Where, `.spec.items[0].name` (`.` for the whole object).
    pub path: String,
    /// What happened there.
    pub verdict: Verdict,
    /// The value before (absent: `None`).
    pub before: Option<Value>,
    /// The value after.
    pub after: Option<Value>,
}

/// Every place `after` differs from `before`, `apiVersion` aside (the round trip sets it back).
pub fn differences(before: &Value, after: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    compare("", Some(before), Some(after), &mut out);
    out.retain(|d| d.path != ".apiVersion");
    out
}

fn compare(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<Difference>) {
    let verdict = match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                compare(&format!("{path}.{key}"), a.get(key), b.get(key), out);
            }
            return;
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            if a != b && a.iter().all(|item| b.contains(item)) && b.iter().all(|item| a.contains(item)) {
                Verdict::Reordered
            } else {
                for (at, (x, y)) in a.iter().zip(b).enumerate() {
                    compare(&format!("{path}[{at}]"), Some(x), Some(y), out);
                }
                return;
            }
        }
        (a, b) if a == b => return,
        (Some(_), None) => Verdict::Lost,
        (None, Some(_)) => Verdict::Defaulted,
        _ => Verdict::Changed,
    };
    out.push(Difference {
        path: if path.is_empty() { ".".into() } else { path.into() },
        verdict,
        before: before.cloned(),
        after: after.cloned(),
    });
}

/// A path with its list indexes generalised (`[0]` → `[*]`), so one finding stands for every
/// item.
pub fn generic(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*]");
            }
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

//! YAML and JSON documents with a source position for every node.
//!
//! The parser is serde-saphyr: it rejects duplicate keys and enforces a budget on aliases,
//! nodes and nesting, so an alias bomb or a pathological document fails fast with a location
//! instead of exhausting memory. JSON is parsed by the same code path, since YAML 1.2 is a
//! superset of JSON.
//!
//! Each document becomes a plain [`serde_json::Value`] (the form every later stage works on)
//! plus a [`Positions`] index from JSON pointer to line and column. Keeping the index apart
//! from the value keeps the value cheap to clone, compare and serialise.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::{DuplicateKeyPolicy, Spanned};

/// Deepest nesting of mappings and sequences accepted in one document.
///
/// The deepest real CRD in the corpus nests 38 levels; 100 leaves room for generated schemas
/// while keeping recursion in every later stage shallow.
pub const MAX_DEPTH: usize = 100;

/// Most nodes accepted in one input: about ten times the largest real CRD (1.6 MB of YAML),
/// and small enough that an alias bomb stops after a few hundred megabytes of work at most.
pub const MAX_NODES: usize = 1_000_000;

/// A line and column in a source file, both starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number in characters, starting at 1.
    pub column: u32,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Where each node of a document starts, keyed by JSON pointer (`/spec/versions/0/name`).
///
/// A mapping entry is located at its key, which is the line a reader looks for.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    by_pointer: HashMap<Box<str>, Position>,
}

impl Positions {
    /// The position of the node at `pointer`, if the document has it.
    pub fn get(&self, pointer: &str) -> Option<Position> {
        self.by_pointer.get(pointer).copied()
    }

    /// The position of the node at `pointer`, or of its nearest ancestor that exists.
    ///
    /// Used for things that are absent by nature, such as a removed field or a missing key.
    pub fn nearest(&self, pointer: &str) -> Option<Position> {
        let mut pointer = pointer;
        loop {
            if let Some(position) = self.get(pointer) {
                return Some(position);
            }
            match pointer.rsplit_once('/') {
                Some((parent, _)) => pointer = parent,
                None => return None,
            }
        }
    }
}

/// One document of a YAML stream.
#[derive(Debug, Clone)]
pub struct Document {
    /// Zero-based index of the document in its stream.
    pub index: usize,
    /// The document's content.
    pub value: Value,
    /// Where each node starts.
    pub positions: Positions,
}

/// Why a YAML or JSON text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// Where the problem was found, when the parser knows.
    pub position: Option<Position>,
    /// One line describing the problem.
    pub message: String,
}

/// Stack for the parsing thread. Deserialising nested nodes recurses; at [`MAX_DEPTH`] an
/// unoptimised build needs more than a default 2 MiB thread stack. Untouched pages cost nothing.
const PARSER_STACK_BYTES: usize = 256 << 20;

/// Parses a stream of YAML (or JSON) documents. Empty documents are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Document>, SyntaxError> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("yaml-parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse_documents_on_this_thread(text))
            .map_err(|err| SyntaxError { position: None, message: format!("cannot start the parser thread: {err}") })?
            .join()
            .unwrap_or_else(|_| Err(SyntaxError { position: None, message: "the YAML parser crashed".into() }))
    })
}

fn parse_documents_on_this_thread(text: &str) -> Result<Vec<Document>, SyntaxError> {
    let budget = serde_saphyr::budget! {
        max_depth: MAX_DEPTH,
        max_nodes: MAX_NODES,
        max_events: MAX_NODES * 3,
        // Real CRDs hardly use anchors; a small replay budget stops alias bombs early.
        max_recorded_anchor_events: 100_000,
        max_recorded_anchor_bytes: 8 << 20,
    };
    let options = serde_saphyr::options! {
        budget: budget,
        duplicate_keys: DuplicateKeyPolicy::Error,
        // YAML 1.2 booleans only: `n` and `no` stay strings, as in YAML 1.2 and gopkg.in/yaml.v3.
        strict_booleans: true,
    };
    let trees: Vec<Option<Spanned<Tree>>> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(syntax_error)?;
    let mut documents = Vec::with_capacity(trees.len());
    for (index, tree) in trees.into_iter().enumerate() {
        let Some(tree) = tree else { continue };
        if matches!(tree.value, Tree::Null) {
            continue;
        }
        let mut positions = Positions::default();
        let mut pointer = String::new();
        let value = into_value(tree, &mut pointer, &mut positions.by_pointer)?;
        documents.push(Document { index, value, positions });
    }
    Ok(documents)
}

/// Whether the JSON pointer `pointer` is `ancestor` or below it.
pub fn is_within(pointer: &str, ancestor: &str) -> bool {
    pointer.starts_with(ancestor) && matches!(pointer.as_bytes().get(ancestor.len()), None | Some(b'/'))
}

fn syntax_error(err: serde_saphyr::Error) -> SyntaxError {
    use serde_saphyr::{Error, budget::BudgetBreach};
    let position = err.location().map(|at| Position { line: at.line() as u32, column: at.column() as u32 });
    // Errors met while replaying an alias come wrapped; the original says what went wrong.
    let mut original = &err;
    while let Error::AliasError { error, .. } | Error::WithSnippet { error, .. } = original {
        original = error;
    }
    let message = match original {
        Error::DuplicateMappingKey { key: Some(key), .. } => format!("duplicate key {key:?}"),
        Error::DuplicateMappingKey { key: None, .. } => "duplicate key".to_string(),
        Error::Budget { breach: BudgetBreach::Depth { .. }, .. } => {
            format!("nesting is deeper than {MAX_DEPTH} levels")
        }
        Error::Budget { breach: BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. }, .. } => {
            format!("more than {MAX_NODES} YAML nodes")
        }
        Error::Budget { breach, .. } => {
            format!("aliases expand beyond the YAML budget ({breach:?}); alias bombs are refused")
        }
        other => {
            // The parser's Display leads with "error: line L column C: "; we print the position ourselves.
            let text = other.to_string();
            let first_line = text.lines().find(|line| !line.trim().is_empty()).unwrap_or("invalid YAML").trim();
            strip_location_suffix(strip_location_prefix(first_line)).to_string()
        }
    };
    SyntaxError { position, message }
}

/// Drops a leading "error: line L column C: " that repeats the position we report ourselves.
fn strip_location_prefix(message: &str) -> &str {
    let message = message.strip_prefix("error: ").unwrap_or(message);
    match message.strip_prefix("line ").and_then(|rest| rest.split_once(": ")) {
        Some((location, rest)) if location.contains("column") => rest,
        _ => message,
    }
}

/// Drops a trailing " at line L, column C" for the same reason.
fn strip_location_suffix(message: &str) -> &str {
    match message.rsplit_once(" at line ") {
        Some((head, location)) if location.contains("column") => head,
        _ => message,
    }
}

/// Converts the spanned tree into a JSON value, recording every node's position.
fn into_value(
    node: Spanned<Tree>,
    pointer: &mut String,
    positions: &mut HashMap<Box<str>, Position>,
) -> Result<Value, SyntaxError> {
    let at = position_of(&node);
    positions.entry(pointer.as_str().into()).or_insert(at);
    Ok(match node.value {
        Tree::Null => Value::Null,
        Tree::Bool(b) => Value::Bool(b),
        Tree::Int(n) => Value::Number(n.into()),
        Tree::UInt(n) => Value::Number(n.into()),
        Tree::Float(f) => Value::Number(Number::from_f64(f).ok_or_else(|| SyntaxError {
            position: Some(at),
            message: format!("the number {f} cannot be represented in JSON"),
        })?),
        Tree::Str(s) => Value::String(s),
        Tree::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (idx, item) in items.into_iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&idx.to_string());
                out.push(into_value(item, pointer, positions)?);
                pointer.truncate(len);
            }
            Value::Array(out)
        }
        Tree::Map(entries) => {
            let mut out = Map::with_capacity(entries.len());
            for (key, item) in entries {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&crate::field::escape_pointer_segment(&key.value.0));
                // A mapping entry is located at its key.
                positions.insert(pointer.as_str().into(), position_of(&key));
                let value = into_value(item, pointer, positions)?;
                pointer.truncate(len);
                out.insert(key.value.0, value);
            }
            Value::Object(out)
        }
    })
}

fn position_of<T>(node: &Spanned<T>) -> Position {
    Position { line: node.referenced.line() as u32, column: node.referenced.column() as u32 }
}

/// A YAML node before conversion to JSON, with spans on every child.
enum Tree {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Tree>>),
    Map(Vec<(Spanned<Key>, Spanned<Tree>)>),
}

/// A mapping key. YAML allows non-string keys; like sigs.k8s.io/yaml we turn scalars into strings.
struct Key(String);

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Tree, D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Ok(Tree::UInt(v))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Tree, E> {
        i64::try_from(v).map(Tree::Int).map_err(|_| E::custom(format!("integer {v} is out of range")))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Tree, E> {
        u64::try_from(v).map(Tree::UInt).map_err(|_| E::custom(format!("integer {v} is out of range")))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Ok(Tree::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Tree, E> {
        String::from_utf8(v.to_vec()).map(Tree::Str).map_err(|_| E::custom("binary value is not valid UTF-8"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Tree::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Key, E> {
                Ok(Key(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Key, E> {
                Ok(Key("null".to_owned()))
            }
        }
        // Keys keep their literal text: `y:` names a field `y`, not the YAML 1.1 boolean.
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn parse_err(text: &str) -> SyntaxError {
        parse_documents(text).expect_err("expected a syntax error")
    }

    #[test]
    fn positions_point_at_keys_and_items() {
        let docs = parse_documents("a:\n  b: 1\n  list:\n    - x\n    - y: 2\n").unwrap();
        assert_eq!(docs[0].value, serde_json::json!({"a": {"b": 1, "list": ["x", {"y": 2}]}}));
        let p = &docs[0].positions;
        assert_eq!(p.get("/a/b"), Some(Position { line: 2, column: 3 }));
        assert_eq!(p.get("/a/list/1/y"), Some(Position { line: 5, column: 7 }));
        assert_eq!(p.nearest("/a/list/1/missing"), Some(Position { line: 5, column: 7 }));
    }

    #[test]
    fn multi_document_streams_skip_empty_documents() {
        let docs = parse_documents("---\n---\na: 1\n---\n# only a comment\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].value, serde_json::json!({"b": 2}));
    }

    #[test]
    fn json_is_yaml() {
        let docs = parse_documents("{\"a\": [1, 2.5, \"x\", null, true]}").unwrap();
        assert_eq!(docs[0].value, serde_json::json!({"a": [1, 2.5, "x", null, true]}));
    }

    #[test]
    fn duplicate_keys_are_rejected_with_a_line() {
        let err = parse_err("a: 1\nb: 2\na: 3\n");
        assert_eq!(
            err,
            SyntaxError { position: Some(Position { line: 3, column: 1 }), message: "duplicate key \"a\"".into() }
        );
    }

    #[test]
    fn alias_bombs_are_rejected() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..12 {
            let prev = level - 1;
            text.push_str(&format!("a{level}: &a{level} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"));
        }
        let err = parse_err(&text);
        assert!(err.position.is_some(), "{err:?}");
        assert!(err.message.contains("alias bombs are refused"), "{err:?}");
    }

    #[test]
    fn deep_nesting_is_rejected() {
        let text = "[".repeat(MAX_DEPTH + 10) + &"]".repeat(MAX_DEPTH + 10);
        assert_eq!(parse_err(&text).message, "nesting is deeper than 100 levels");
        let mut block = String::new();
        for depth in 0..MAX_DEPTH + 10 {
            block.push_str(&" ".repeat(depth));
            block.push_str("k:\n");
        }
        assert_eq!(parse_err(&block).position.map(|p| p.line), Some(MAX_DEPTH as u32 + 1));
    }

    #[test]
    fn syntax_errors_are_one_line_with_a_position() {
        let err = parse_err("a:\n  b: [unclosed\n");
        assert_eq!(err.position, Some(Position { line: 2, column: 6 }));
        assert_eq!(err.message, "unclosed bracket '['");
    }

    #[test]
    fn pointer_segments_are_escaped() {
        let docs = parse_documents("\"a/b\":\n  \"c~d\": 1\n").unwrap();
        assert_eq!(docs[0].positions.get("/a~1b/c~0d"), Some(Position { line: 2, column: 3 }));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let docs = parse_documents("a: n\nb: yes\nc: true\nd: off\n").unwrap();
        assert_eq!(docs[0].value, serde_json::json!({"a": "n", "b": "yes", "c": true, "d": "off"}));
    }

    #[test]
    fn bare_equals_sign_is_a_string() {
        let docs = parse_documents("enum:\n- =\n- '!='\n").unwrap();
        assert_eq!(docs[0].value, serde_json::json!({"enum": ["=", "!="]}));
    }
}

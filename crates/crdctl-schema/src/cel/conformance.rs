//! The CEL specification's conformance tests (`src/testdata/cel-spec`) that need no
//! protocol-buffer types, run on the parser and the evaluator rules run on: every expression
//! parses to the `cel` crate parser's AST (or, where the two knowingly differ, to one that gives
//! the specified result), and the cases the evaluator gets right stay right.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{self, Value};

/// A text-format protocol-buffer message: its fields in order, scalars as their text.
#[derive(Debug, Clone)]
enum Node {
    Scalar(Vec<u8>),
    Message(Vec<(String, Node)>),
}

impl Node {
    fn fields(&self) -> &[(String, Node)] {
        match self {
            Node::Message(fields) => fields,
            Node::Scalar(_) => &[],
        }
    }

    fn get(&self, name: &str) -> Option<&Node> {
        self.fields().iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> {
        self.fields().iter().filter(move |(n, _)| n == name).map(|(_, v)| v)
    }

    fn text(&self) -> String {
        match self {
            Node::Scalar(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Node::Message(_) => String::new(),
        }
    }
}

/// Reads the text format: `name: scalar`, `name { … }`, `name: { … }`, `#` comments, quoted
/// strings with C escapes (adjacent ones joined).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn skip(&mut self) {
        while let Some(&b) = self.bytes.get(self.at) {
            if b == b'#' {
                while self.bytes.get(self.at).is_some_and(|b| *b != b'\n') {
                    self.at += 1;
                }
            } else if b.is_ascii_whitespace() || b == b',' || b == b';' {
                self.at += 1;
            } else {
                return;
            }
        }
    }

    fn message(&mut self, close: Option<u8>) -> Vec<(String, Node)> {
        let mut fields = Vec::new();
        loop {
            self.skip();
            match self.bytes.get(self.at) {
                None => return fields,
                Some(b) if Some(*b) == close => {
                    self.at += 1;
                    return fields;
                }
                _ => {}
            }
            let start = self.at;
            while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.') {
                self.at += 1;
            }
            let name = String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned();
            self.skip();
            if self.bytes.get(self.at) == Some(&b':') {
                self.at += 1;
                self.skip();
            }
            let value = match self.bytes.get(self.at) {
                Some(b'{') => {
                    self.at += 1;
                    Node::Message(self.message(Some(b'}')))
                }
                Some(b'"' | b'\'') => Node::Scalar(self.strings()),
                _ => {
                    let start = self.at;
                    while self.bytes.get(self.at).is_some_and(|b| !b.is_ascii_whitespace() && !b"}#,".contains(b)) {
                        self.at += 1;
                    }
                    Node::Scalar(self.bytes[start..self.at].to_vec())
                }
            };
            fields.push((name, value));
        }
    }

    /// Quoted strings, adjacent ones joined, escapes decoded to bytes.
    fn strings(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(&quote) = self.bytes.get(self.at).filter(|b| matches!(b, b'"' | b'\'')) {
            self.at += 1;
            while let Some(&b) = self.bytes.get(self.at) {
                self.at += 1;
                match b {
                    b if b == quote => break,
                    b'\\' => self.escape(&mut out),
                    b => out.push(b),
                }
            }
            self.skip();
        }
        out
    }

    fn escape(&mut self, out: &mut Vec<u8>) {
        let digits = |reader: &mut Self, max: usize, radix: u32| {
            let start = reader.at;
            while reader.at - start < max && reader.bytes.get(reader.at).is_some_and(|b| (*b as char).is_digit(radix)) {
                reader.at += 1;
            }
            u32::from_str_radix(std::str::from_utf8(&reader.bytes[start..reader.at]).unwrap(), radix).unwrap()
        };
        let b = self.bytes[self.at];
        self.at += 1;
        let simple = match b {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'v' => Some(0x0B),
            b'"' | b'\'' | b'\\' | b'?' => Some(b),
            _ => None,
        };
        if let Some(simple) = simple {
            out.push(simple);
        } else if b.is_ascii_digit() {
            self.at -= 1;
            out.push(u8::try_from(digits(self, 3, 8)).unwrap());
        } else if b == b'x' {
            out.push(u8::try_from(digits(self, 2, 16)).unwrap());
        } else {
            let code = digits(self, if b == b'u' { 4 } else { 8 }, 16);
            let mut buffer = [0; 4];
            out.extend_from_slice(char::from_u32(code).unwrap().encode_utf8(&mut buffer).as_bytes());
        }
    }
}

/// A `cel.expr.Value` as the `cel` crate's value, when it has one (not a type or a message).
fn value(node: &Node) -> Option<Value> {
    let (kind, inner) = node.fields().first()?;
    Some(match kind.as_str() {
        "int64_value" => Value::Int(inner.text().parse().ok()?),
        "uint64_value" => Value::UInt(inner.text().parse().ok()?),
        "double_value" => Value::Float(match inner.text().to_ascii_lowercase().as_str() {
            "inf" | "infinity" => f64::INFINITY,
            "-inf" | "-infinity" => f64::NEG_INFINITY,
            "nan" => f64::NAN,
            number => number.parse().ok()?,
        }),
        "string_value" => Value::String(Arc::new(inner.text())),
        "bytes_value" => match inner {
            Node::Scalar(bytes) => Value::Bytes(Arc::new(bytes.clone())),
            Node::Message(_) => return None,
        },
        "bool_value" => Value::Bool(inner.text() == "true"),
        "null_value" => Value::Null,
        "list_value" => Value::List(Arc::new(inner.all("values").map(value).collect::<Option<Vec<_>>>()?)),
        "map_value" => {
            let mut map = HashMap::new();
            for entry in inner.all("entries") {
                let key = match value(entry.get("key")?)? {
                    Value::Int(i) => Key::Int(i),
                    Value::UInt(u) => Key::Uint(u),
                    Value::Bool(b) => Key::Bool(b),
                    Value::String(s) => Key::String(s),
                    _ => return None,
                };
                map.insert(key, value(entry.get("value")?)?);
            }
            Value::Map(Map { map: Arc::new(map) })
        }
        _ => return None,
    })
}

fn same(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Float(a), Value::Float(b)) if a.is_nan() => b.is_nan(),
        (a, b) => a == b,
    }
}

/// One case: what it expects, or `None` for a case that needs what Kubernetes' CEL lacks.
enum Expected {
    Value(Value),
    Error,
}

fn expected(test: &Node) -> Option<Expected> {
    if test.get("container").is_some() || test.get("type_env").is_some() {
        return None;
    }
    match (test.get("value"), test.get("eval_error")) {
        (Some(node), _) => value(node).map(Expected::Value),
        (None, Some(_)) => Some(Expected::Error),
        // A bare test expects `true`.
        (None, None) => Some(Expected::Value(Value::Bool(true))),
    }
}

#[test]
fn conformance_cases_parse_and_evaluate_as_before() {
    // The `cel` crate's ANTLR parser, unoptimised, needs a deep stack for the nesting cases.
    let run = std::thread::Builder::new().stack_size(256 << 20).spawn(run_conformance_cases).unwrap();
    run.join().unwrap();
}

fn run_conformance_cases() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/testdata/cel-spec");
    let (mut parsed, mut run, mut right) = (0, 0, 0);
    let mut panicked = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "textproto")) {
        let text = std::fs::read(path).unwrap();
        let file = Node::Message(Reader { bytes: &text, at: 0 }.message(None));
        for test in file.all("section").flat_map(|section| section.all("test")) {
            let source = test.get("expr").unwrap().text();
            let name = format!("{}/{}", path.file_stem().unwrap().to_string_lossy(), test.get("name").unwrap().text());
            super::parser::tests::assert_same(&source);
            parsed += 1;
            let (Some(expected), Ok(ours)) = (expected(test), super::parser::parse(&source)) else {
                continue;
            };
            let bindings: Option<Vec<(String, Value)>> = test
                .all("bindings")
                .map(|binding| Some((binding.get("key")?.text(), value(binding.get("value")?.get("value")?)?)))
                .collect();
            let Some(bindings) = bindings else { continue };
            // The `cel` crate's evaluator panics on a few of these (arithmetic overflow in a
            // debug build): such a case counts as wrong.
            let mut evaluate = |expression| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    super::LIBRARIES.with(|libraries| {
                        let mut context = libraries.new_inner_scope();
                        for (name, value) in &bindings {
                            context.add_variable_from_value(name.as_str(), value.clone());
                        }
                        Value::resolve(expression, &context)
                    })
                }))
                .map_err(|_| panicked.push(name.clone()))
                .unwrap_or_else(|()| Err(cel::ExecutionError::function_error("evaluation", "panicked")))
            };
            let outcome = evaluate(&ours);
            let is_right = match (&expected, &outcome) {
                (Expected::Value(expected), Ok(actual)) => same(expected, actual),
                (Expected::Error, Err(_)) => true,
                _ => false,
            };
            // Where ours departs from the `cel` crate's AST, it is to give the specified
            // result; everywhere else the ASTs are equal, so the results are too.
            if super::parser::tests::knowingly_differs(&source) {
                assert!(is_right, "{name}: {source}: {outcome:?}");
            }
            run += 1;
            right += usize::from(is_right);
        }
    }
    assert!(parsed > 1_400 && run > 1_000, "{parsed} parsed, {run} evaluated");
    // The `cel` crate's evaluator gets these right; fewer is a regression.
    assert!(
        right >= RIGHT,
        "{right} of {run} evaluated cases give the specified result (was {RIGHT}); panicked: {panicked:?}"
    );
}

/// How many cases the evaluator gets right (of 1,399 run): the rest are the `cel` crate's gaps
/// (uint/int/double comparisons, overflow errors, some string functions), one of which is a panic
/// on `-(-9223372036854775808)` in a debug build.
const RIGHT: usize = 1_074;

//! What compiling shares. CEL rules and regular expressions repeat across the nodes and
//! versions of a CRD (a duration pattern may appear a hundred times), and parsing a rule or
//! compiling a pattern costs far more than using it. Within [`scope`] — one schema's or one
//! CRD's compilation — each is compiled once, and the sharing ends with the scope, so a second
//! compilation of the same CRD does the same work as the first. Outside any scope (CEL's
//! `matches` while validating objects), patterns are kept per thread instead.
//!
//! A schema's `pattern` is only parsed when the schema is compiled, which finds every error the
//! API server reports; the matcher, which costs tens of times more to build, is built the
//! first time a value is matched ([`Pattern`]), so checking a definition builds none.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many patterns are kept per thread outside a scope; then the cache starts over.
const PATTERN_CACHE: usize = 512;

/// A compiled pattern is shared, not cloned: a `Regex` clone starts its own pool of match
/// caches, which the next match would fill again.
type Compiled = Result<Arc<regex::Regex>, String>;

#[derive(Default)]
struct Shared {
    /// Compiled rules by their text; the type is the CEL module's, kept opaque here.
    rules: HashMap<String, Box<dyn Any>>,
    patterns: HashMap<String, Compiled>,
    /// Patterns parsed to check them, and what that found.
    checked: HashMap<String, Result<(), String>>,
}

thread_local! {
    static SCOPE: RefCell<Option<Shared>> = const { RefCell::new(None) };
    static PATTERNS: RefCell<HashMap<String, Compiled>> = RefCell::default();
}

/// Runs `compile` with what it compiles shared; the sharing ends with the outermost scope.
pub(crate) fn scope<T>(compile: impl FnOnce() -> T) -> T {
    let outermost = SCOPE.with(|scope| {
        let mut scope = scope.borrow_mut();
        let outermost = scope.is_none();
        scope.get_or_insert_with(Shared::default);
        outermost
    });
    let compiled = compile();
    if outermost {
        SCOPE.with(|scope| scope.borrow_mut().take());
    }
    compiled
}

/// The rule `key` compiled by `compile`, once per scope.
pub(crate) fn rule<T: Clone + 'static>(key: String, compile: impl FnOnce() -> T) -> T {
    let shared = SCOPE
        .with(|scope| scope.borrow().as_ref().and_then(|shared| shared.rules.get(&key)?.downcast_ref::<T>().cloned()));
    shared.unwrap_or_else(|| {
        let compiled = compile();
        let insert = |shared: &mut Shared| shared.rules.insert(key, Box::new(compiled.clone()));
        SCOPE.with(|scope| scope.borrow_mut().as_mut().map(insert));
        compiled
    })
}

/// A `pattern` keyword, its matcher built on first use.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The pattern as written.
    pub source: String,
    matcher: std::sync::OnceLock<Compiled>,
}

impl Pattern {
    pub(crate) fn new(source: String) -> Pattern {
        Pattern { source, matcher: std::sync::OnceLock::new() }
    }

    /// The matcher, or the compiler's error text.
    pub fn matcher(&self) -> &Result<Arc<regex::Regex>, String> {
        self.matcher.get_or_init(|| pattern(&self.source))
    }
}

/// Whether `pattern` is a regular expression, without building its matcher: the syntax error,
/// in the words compiling it would give.
/// Once per scope. The common shapes of `pattern` are recognised by hand (literals, classes,
/// groups, alternation, repetition); anything else is `regex_syntax`'s to parse and word.
pub(crate) fn syntax(pattern: &str) -> Result<(), String> {
    if simple_pattern(pattern) {
        return Ok(());
    }
    let parse = || regex_syntax::Parser::new().parse(pattern).map(drop).map_err(|err| err.to_string());
    SCOPE.with(|scope| match scope.borrow_mut().as_mut() {
        Some(shared) => shared.checked.entry(pattern.to_string()).or_insert_with(parse).clone(),
        None => parse(),
    })
}

/// Whether `pattern` is surely a regular expression the `regex` crate accepts, read by a small
/// grammar of the shapes schemas use: literals, `.`, `^`, `$`, escaped punctuation, `\d \s \w`
/// and their negations, classes of characters and ranges, plain groups, alternation and
/// repetition. `false` says nothing: the pattern may still be valid.
fn simple_pattern(pattern: &str) -> bool {
    let mut chars = pattern.chars().peekable();
    let mut depth = 0usize;
    // Whether the last item can be repeated (not the start of a group or branch, not a repetition).
    let mut repeatable = false;
    while let Some(c) = chars.next() {
        repeatable = match c {
            '(' => {
                // A plain or non-capturing group; flags and names are `regex_syntax`'s.
                if chars.next_if_eq(&'?').is_some() && chars.next_if_eq(&':').is_none() || depth >= 64 {
                    return false;
                }
                depth += 1;
                false
            }
            ')' => {
                let Some(outer) = depth.checked_sub(1) else { return false };
                depth = outer;
                true
            }
            '|' => false,
            '*' | '+' | '?' | '{' => {
                if !repeatable || (c == '{' && !counted(&mut chars)) {
                    return false;
                }
                chars.next_if_eq(&'?');
                false
            }
            '\\' => match chars.next() {
                Some(e) if SIMPLE_ESCAPES.contains(e) => true,
                _ => return false,
            },
            '[' => {
                if !class(&mut chars) {
                    return false;
                }
                true
            }
            ']' | '}' => return false,
            _ => true,
        };
    }
    depth == 0
}

/// What may follow a backslash in a simple pattern, in a class or out: `\d \s \w` and their
/// negations, and the punctuation every regex dialect lets one escape.
const SIMPLE_ESCAPES: &str = "dDsSwW.+*?()|[]{}^$\\-/";

/// `{n}`, `{n,}` or `{n,m}` with `n ≤ m ≤ 1000`, after its `{`.
fn counted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let number = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        let mut digits = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        digits.parse::<u32>().ok().filter(|n| *n <= 1000)
    };
    let Some(min) = number(chars) else { return false };
    let max = if chars.next_if_eq(&',').is_some() {
        if chars.peek() == Some(&'}') { Some(min) } else { number(chars) }
    } else {
        Some(min)
    };
    max.is_some_and(|max| min <= max) && chars.next_if_eq(&'}').is_some()
}

/// A class after its `[`: an optional `^`, then characters, ranges of two characters in order,
/// and escaped punctuation or `\d \s \w` (no nested classes or set operations such as `&&`),
/// up to `]`.
fn class(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    chars.next_if_eq(&'^');
    let mut empty = true;
    let mut previous: Option<char> = None;
    while let Some(c) = chars.next() {
        match c {
            ']' => return !empty,
            '[' => return false,
            '&' | '~' if chars.peek() == Some(&c) => return false,
            '\\' => match chars.next() {
                Some(e) if SIMPLE_ESCAPES.contains(e) => previous = None,
                _ => return false,
            },
            '-' if previous.is_some() && chars.peek().is_some_and(|n| *n != ']') => {
                let (Some(start), Some(end)) = (previous, chars.next()) else { return false };
                if end == '\\' || end == '[' || start > end {
                    return false;
                }
                previous = None;
            }
            '-' if chars.peek() == Some(&'-') => return false,
            c => previous = Some(c),
        }
        empty = false;
    }
    false
}

/// `pattern` compiled, or the compiler's error text; once per scope, or per thread outside
/// one.
pub(crate) fn pattern(pattern: &str) -> Compiled {
    let scoped = SCOPE.with(|scope| scope.borrow().as_ref().map(|shared| shared.patterns.get(pattern).cloned()));
    match scoped {
        Some(Some(found)) => found,
        Some(None) => {
            let compiled = regex::Regex::new(pattern).map(Arc::new).map_err(|err| err.to_string());
            let insert = |shared: &mut Shared| shared.patterns.insert(pattern.to_string(), compiled.clone());
            SCOPE.with(|scope| scope.borrow_mut().as_mut().map(insert));
            compiled
        }
        None => PATTERNS.with(|cache| {
            if let Some(found) = cache.borrow().get(pattern) {
                return found.clone();
            }
            let compiled = regex::Regex::new(pattern).map(Arc::new).map_err(|err| err.to_string());
            let mut cache = cache.borrow_mut();
            if cache.len() >= PATTERN_CACHE {
                cache.clear();
            }
            cache.insert(pattern.to_string(), compiled.clone());
            compiled
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the hand-read grammar accepts, `regex_syntax` accepts: on every schema pattern of the
    /// corpus (which it must recognise, most of them) and on patterns made at random.
    #[test]
    fn simple_patterns_are_patterns() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");
        let mut patterns = std::collections::BTreeSet::new();
        for project in std::fs::read_dir(corpus).unwrap() {
            for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
                let crd: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
                collect_patterns(&crd, &mut patterns);
            }
        }
        let recognised = patterns.iter().filter(|p| simple_pattern(p)).count();
        for pattern in &patterns {
            assert!(!simple_pattern(pattern) || regex_syntax::Parser::new().parse(pattern).is_ok(), "{pattern}");
        }
        let unrecognised: Vec<_> = patterns.iter().filter(|p| !simple_pattern(p)).collect();
        assert!(
            recognised * 10 >= patterns.len() * 8,
            "{recognised} of {} recognised: {unrecognised:?}",
            patterns.len()
        );
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let pieces = [
            "a",
            "0",
            "é",
            ".",
            "^",
            "$",
            "(",
            ")",
            "|",
            "*",
            "+",
            "?",
            "{2}",
            "{1,3}",
            "{3,1}",
            "{2,}",
            "{",
            "}",
            "[",
            "]",
            "[a-z]",
            "[z-a]",
            "[^0-9_]",
            "[a-]",
            "[-a]",
            "[\\d.]",
            "[]",
            "\\",
            "\\d",
            "\\.",
            "\\/",
            "\\-",
            "\\q",
            "\\1",
            "(?i)",
            "(?:",
            "(?",
            "-",
            "[a-\\d]",
            "[[:alpha:]]",
            "[a&&b]",
            "[a&b~c]",
            "[a~~b]",
            "[a--b]",
            "*?",
            "+?",
            " ",
        ];
        let mut accepted = 0;
        for _ in 0..50_000 {
            let length = rng.random_range(1..12);
            let pattern: String = (0..length).map(|_| pieces[rng.random_range(0..pieces.len())]).collect();
            if simple_pattern(&pattern) {
                accepted += 1;
                assert!(regex_syntax::Parser::new().parse(&pattern).is_ok(), "{pattern}");
            }
        }
        assert!(accepted > 2_000, "{accepted} made patterns accepted");
    }

    fn collect_patterns(value: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(fields) => {
                if let Some(pattern) = fields.get("pattern").and_then(serde_json::Value::as_str) {
                    out.insert(pattern.to_string());
                }
                fields.values().for_each(|v| collect_patterns(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect_patterns(v, out)),
            _ => {}
        }
    }

    #[test]
    fn syntax_errors_are_worded_as_compiling_words_them() {
        for broken in ["(", "[a-", "a{2,1}", "(?P<>a)", "\\"] {
            assert_eq!(syntax(broken).unwrap_err(), regex::Regex::new(broken).unwrap_err().to_string(), "{broken}");
        }
        assert_eq!(syntax("^[a-z]+$"), Ok(()));
        let lazy = Pattern::new("^[a-z]+$".into());
        assert!(lazy.matcher.get().is_none(), "nothing is built until a value is matched");
        assert!(lazy.matcher().as_ref().unwrap().is_match("abc"));
    }

    #[test]
    fn patterns_compile_once_and_errors_are_kept() {
        let first = pattern("^[a-z]+$").unwrap();
        assert!(first.is_match("abc") && !first.is_match("ABC"));
        assert!(pattern("^[a-z]+$").unwrap().is_match("xyz"));
        let error = pattern("(").unwrap_err();
        assert!(error.contains("unclosed group"), "{error}");
        assert_eq!(pattern("(").unwrap_err(), error);
        scope(|| assert_eq!(pattern("(").unwrap_err(), error));
    }

    #[test]
    fn a_scope_shares_until_its_outermost_call_ends() {
        let shared = || SCOPE.with(|scope| scope.borrow().as_ref().map(|s| s.patterns.len()));
        assert_eq!(shared(), None);
        scope(|| {
            pattern("^a$").unwrap();
            scope(|| pattern("^b$").unwrap());
            assert_eq!(shared(), Some(2), "an inner scope keeps the outer one's sharing");
        });
        assert_eq!(shared(), None, "nothing outlives the outermost scope");
    }
}

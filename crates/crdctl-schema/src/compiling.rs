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
/// Once per scope.
pub(crate) fn syntax(pattern: &str) -> Result<(), String> {
    let parse = || regex_syntax::Parser::new().parse(pattern).map(drop).map_err(|err| err.to_string());
    SCOPE.with(|scope| match scope.borrow_mut().as_mut() {
        Some(shared) => shared.checked.entry(pattern.to_string()).or_insert_with(parse).clone(),
        None => parse(),
    })
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

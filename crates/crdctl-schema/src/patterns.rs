//! Regular expressions compiled once per thread: a schema's `pattern`s and CEL's `matches`
//! patterns repeat across the nodes and versions of a CRD (a duration pattern may appear a
//! hundred times), and compiling one costs far more than validating a string with it.

use std::cell::RefCell;
use std::collections::HashMap;

/// At most this many patterns are kept per thread; then the cache starts over.
const CACHE: usize = 512;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Result<regex::Regex, String>>> = RefCell::default();
}

/// `pattern` compiled, or the compiler's error text. A `Regex` clone shares the compiled program.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, String> {
    COMPILED.with(|cache| {
        if let Some(found) = cache.borrow().get(pattern) {
            return found.clone();
        }
        let compiled = regex::Regex::new(pattern).map_err(|err| err.to_string());
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE {
            cache.clear();
        }
        cache.insert(pattern.to_string(), compiled.clone());
        compiled
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pattern_compiles_once_and_errors_are_kept() {
        let first = super::compile("^[a-z]+$").unwrap();
        assert!(first.is_match("abc") && !first.is_match("ABC"));
        assert!(super::compile("^[a-z]+$").unwrap().is_match("xyz"));
        let error = super::compile("(").unwrap_err();
        assert!(error.contains("unclosed group"), "{error}");
        assert_eq!(super::compile("(").unwrap_err(), error);
    }
}

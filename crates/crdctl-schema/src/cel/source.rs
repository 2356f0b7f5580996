//! Where things are in a rule's source, and compile errors printed as cel-go prints them:
//!
//! ```text
//! ERROR: <input>:1:11: undefined field 'z'
//!  | has(self.a.z)
//!  | ..........^
//! ```
//!
//! The `cel` crate's parser keeps no positions in the expressions it returns, so a node is
//! found again in the source by its place among the nodes of the same name: the second
//! selection of `.name` in the expression is the second `.name` in the source. cel-go places a
//! selection at its `.`, an identifier at its first character, and what a macro builds, such as
//! the presence test of `has(self.x)`, at the macro's `(`; a literal at its first character.

use std::collections::HashMap;

/// What to find: the `.` of a selection of `field`, or the identifier `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor<'a> {
    /// `operand.field` (not a method call).
    Select(&'a str),
    /// A variable or namespace.
    Ident(&'a str),
    /// The presence test of a `has(…)`.
    Has,
    /// A string or bytes literal.
    Text,
    /// An operator: `==`, `-` (negation too), `[` (an index), `?`, `in`, ….
    Operator(&'a str),
    /// The `(` of a call of the function.
    Call(&'a str),
}

/// The macros whose first argument declares a variable rather than reading one.
const MACROS: [&str; 6] = ["all", "exists", "exists_one", "existsOne", "map", "filter"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'s> {
    Ident(&'s str),
    Text,
    Operator(&'static str),
    Number,
    /// `)`, `]` or `}`.
    Close,
    Dot,
    Open,
    Comma,
    Other,
}

/// The tokens of `source` with the character offset of each; string and number literals are
/// single tokens, comments are skipped.
fn tokens(source: &str) -> Vec<(usize, Token<'_>)> {
    let chars: Vec<(usize, char)> = source.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&(byte, c)) = chars.get(i) {
        let next = chars.get(i + 1).map(|&(_, c)| c);
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while chars.get(i).is_some_and(|&(_, c)| c != '\n') {
                i += 1;
            }
        } else if let Some(end) = string_end(&chars, i) {
            out.push((i, Token::Text));
            i = end;
        } else if c.is_ascii_digit()
            || c == '.' && next.is_some_and(|n| n.is_ascii_digit())
            // A minus where no operand ends is a negative number's sign, part of the literal.
            || c == '-' && next.is_some_and(|n| n.is_ascii_digit() || n == '.') && !ends_operand(out.last())
        {
            out.push((i, Token::Number));
            i += 1;
            while let Some(&(_, c)) = chars.get(i) {
                let signed_exponent = matches!(c, '+' | '-')
                    && matches!(chars.get(i.wrapping_sub(1)), Some(&(_, 'e' | 'E')))
                    && !matches!(chars.get(i.wrapping_sub(2)), Some(&(_, 'x' | 'X')));
                if !(c.is_ascii_alphanumeric() || c == '.' || signed_exponent) {
                    break;
                }
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while chars.get(i).is_some_and(|&(_, c)| c.is_ascii_alphanumeric() || c == '_') {
                i += 1;
            }
            let end = chars.get(i).map_or(source.len(), |&(b, _)| b);
            let word = source.get(byte..end).unwrap_or_default();
            out.push((start, if word == "in" { Token::Operator("in") } else { Token::Ident(word) }));
        } else if let Some(operator) = OPERATORS
            .iter()
            .find(|op| op.chars().enumerate().all(|(k, o)| chars.get(i + k).is_some_and(|&(_, c)| c == o)))
        {
            // `[` is an index only after an operand; otherwise it opens a list.
            if *operator != "[" || ends_operand(out.last()) {
                out.push((i, Token::Operator(operator)));
            } else {
                out.push((i, Token::Other));
            }
            i += operator.chars().count();
        } else {
            out.push((
                i,
                match c {
                    '.' => Token::Dot,
                    '(' => Token::Open,
                    ',' => Token::Comma,
                    ')' | ']' | '}' => Token::Close,
                    _ => Token::Other,
                },
            ));
            i += 1;
        }
    }
    out
}

/// Operators, longest first so `<=` is not read as `<`.
const OPERATORS: [&str; 16] = ["==", "!=", "<=", ">=", "&&", "||", "<", ">", "+", "-", "*", "/", "%", "!", "?", "["];

/// Whether a token ends an operand, so what follows is a binary operator or an index.
fn ends_operand(token: Option<&(usize, Token)>) -> bool {
    matches!(token, Some((_, Token::Ident(_) | Token::Text | Token::Number | Token::Close)))
}

/// Where the string or bytes literal starting at `i` ends (prefixes `r`, `b`, quotes single,
/// double or tripled), if one starts there.
fn string_end(chars: &[(usize, char)], i: usize) -> Option<usize> {
    let at = |k: usize| chars.get(k).map(|&(_, c)| c);
    let mut k = i;
    let mut raw = false;
    while let Some(c) = at(k).filter(|c| matches!(c, 'r' | 'R' | 'b' | 'B')) {
        raw |= matches!(c, 'r' | 'R');
        k += 1;
        if k - i > 2 {
            return None;
        }
    }
    let quote = at(k).filter(|c| matches!(c, '\'' | '"'))?;
    let triple = at(k + 1) == Some(quote) && at(k + 2) == Some(quote);
    let mut k = k + if triple { 3 } else { 1 };
    loop {
        let c = at(k)?;
        if c == '\\' && !raw {
            k += 2;
        } else if c == quote && (!triple || (at(k + 1) == Some(quote) && at(k + 2) == Some(quote))) {
            return Some(k + if triple { 3 } else { 1 });
        } else {
            k += 1;
        }
    }
}

/// Every anchor's occurrences in one source, in order, found in one pass over its tokens (a
/// rule with thousands of errors is placed in linear time).
pub struct Positions {
    found: HashMap<Key, Vec<usize>>,
}

/// An [`Anchor`] that owns its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Select(String),
    Ident(String),
    Has,
    Text,
    Operator(String),
    Call(String),
}

impl Positions {
    /// The anchors of `source`.
    pub fn of(source: &str) -> Positions {
        let tokens = tokens(source);
        let token = |k: usize| tokens.get(k).map(|&(_, t)| t);
        let mut found: HashMap<Key, Vec<usize>> = HashMap::new();
        for (k, &(offset, t)) in tokens.iter().enumerate() {
            let after_dot = k >= 1 && token(k - 1) == Some(Token::Dot);
            let key = match t {
                Token::Dot => match (token(k + 1), token(k + 2)) {
                    (Some(Token::Ident(field)), next) if next != Some(Token::Open) => Some(Key::Select(field.into())),
                    _ => None,
                },
                Token::Text => Some(Key::Text),
                Token::Operator(op) => Some(Key::Operator(op.into())),
                Token::Open => match token(k.wrapping_sub(1)) {
                    Some(Token::Ident("has")) if !(k >= 2 && token(k - 2) == Some(Token::Dot)) => Some(Key::Has),
                    Some(Token::Ident(name)) if k >= 1 => Some(Key::Call(name.into())),
                    _ => None,
                },
                Token::Ident(name) => {
                    let declares = k >= 3
                        && token(k - 1) == Some(Token::Open)
                        && matches!(token(k - 2), Some(Token::Ident(m)) if MACROS.contains(&m))
                        && token(k - 3) == Some(Token::Dot)
                        && token(k + 1) == Some(Token::Comma);
                    (!after_dot && token(k + 1) != Some(Token::Open) && !declares).then(|| Key::Ident(name.into()))
                }
                _ => None,
            };
            if let Some(key) = key {
                found.entry(key).or_default().push(offset);
            }
        }
        Positions { found }
    }

    /// The character offset of the `ordinal`-th (from 0) `anchor`.
    pub fn find(&self, anchor: Anchor, ordinal: usize) -> Option<usize> {
        let key = match anchor {
            Anchor::Select(field) => Key::Select(field.into()),
            Anchor::Ident(name) => Key::Ident(name.into()),
            Anchor::Has => Key::Has,
            Anchor::Text => Key::Text,
            Anchor::Operator(op) => Key::Operator(op.into()),
            Anchor::Call(name) => Key::Call(name.into()),
        };
        self.found.get(&key)?.get(ordinal).copied()
    }
}

/// One error as cel-go displays it, at character `offset` of `source` (1-based line and column,
/// then the line and a caret under the column).
pub fn display(source: &str, offset: usize, message: &str) -> String {
    let before: String = source.chars().take(offset).collect();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count());
    at_line(source, line, column, message)
}

/// As [`display`], at a 1-based `line` and 0-based `column`.
pub fn at_line(source: &str, line: usize, column: usize, message: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    if let Some(snippet) = source.split('\n').nth(line.saturating_sub(1)) {
        let snippet = snippet.replace('\t', " ");
        let mut indicator = String::new();
        let mut chars = snippet.chars();
        for _ in 0..column {
            let Some(c) = chars.next() else { break };
            indicator.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
        }
        indicator.push(if chars.next().is_some_and(|c| c.len_utf8() > 1) { '\u{ff3e}' } else { '^' });
        out.push_str(&format!("\n | {snippet}\n | {indicator}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(source: &str, anchor: Anchor, ordinal: usize) -> Option<usize> {
        Positions::of(source).find(anchor, ordinal)
    }

    #[test]
    fn selections_and_identifiers_are_found_by_their_place_among_their_namesakes() {
        let source = "self.a.z == 'x.z' && self.items.all(z, z.z == self.a.z) // .z";
        let selects: Vec<_> = (0..4).map(|n| find(source, Anchor::Select("z"), n)).collect();
        assert_eq!(selects, [Some(6), Some(40), Some(52), None]);
        // The macro's first `z` declares the variable; the one read follows.
        let idents: Vec<_> = (0..2).map(|n| find(source, Anchor::Ident("z"), n)).collect();
        assert_eq!(idents, [Some(39), None]);
        assert_eq!(find("has(self.a) && x.has(y) && has(self.b)", Anchor::Has, 1), Some(30));
        assert_eq!(find("self.matches('a') || duration(r'1d')", Anchor::Text, 1), Some(30));
        // A minus after an operand is an operator; before a number where none ends, a sign.
        let minus = "1e-5 - -2 - (-x) - a[-1]";
        let at: Vec<_> = (0..4).map(|n| find(minus, Anchor::Operator("-"), n)).collect();
        assert_eq!(at, [Some(5), Some(10), Some(13), Some(17)]);
        assert_eq!(find(minus, Anchor::Operator("["), 0), Some(20));
        assert_eq!(find("[1] + [2][0] + size(x)", Anchor::Operator("["), 0), Some(9));
        assert_eq!(find("x in y && self.size() == size(z)", Anchor::Call("size"), 1), Some(29));
        assert_eq!(find(r#"b"a.z" + r'\.z' + """.z""" == self.z"#, Anchor::Select("z"), 0), Some(34));
    }

    #[test]
    fn errors_display_as_cel_go_displays_them() {
        assert_eq!(
            display("has(self.a.z)", 10, "undefined field 'z'"),
            "ERROR: <input>:1:11: undefined field 'z'\n | has(self.a.z)\n | ..........^"
        );
        // Tabs print as spaces; a wide character is marked with a wide dot.
        assert_eq!(display("a &&\n\tb\u{1f451}.c", 8, "m"), "ERROR: <input>:2:4: m\n |  b\u{1f451}.c\n | ..\u{ff0e}^");
    }
}

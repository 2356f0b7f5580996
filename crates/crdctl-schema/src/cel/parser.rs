//! CEL's grammar (cel-spec `CEL.g4`) parsed by hand, into the `cel` crate's AST with the ids,
//! operator names and macro expansions its ANTLR parser gives: the evaluator and the checker
//! run what they ran before, and a rule parses in a few microseconds rather than tens.
//!
//! This parser only ever accepts. Whatever it does not take — a syntax error, a construct the
//! `cel` crate's parser treats in a way of its own (escaped field names, leading-dot names,
//! bytes with escapes, the optional syntax it refuses) — goes to that parser, which decides and
//! words the error as cel-go does. So an expression's AST and its errors are the `cel` crate's,
//! but where cel-go and the CEL spec differ from it, and this parser follows them: an even run of
//! `!` or `-` before an operand cancels out (`!!x` is `x`); in a quoted string `\"` and `\'` are
//! the quote whatever the delimiter, a quote inside triple quotes is a character, and `\X` is
//! `\x`. And an expression of more than a thousand operators and selections is refused with an
//! error of its own, before anything walks its tree (`MAX_LINKS`).

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, ListExpr, LiteralValue, MapEntryExpr,
    MapExpr, SelectExpr, StructExpr, StructFieldExpr, operators,
};
use kube_cel::cel::{self, ParseErrors};

/// `source` parsed, or the `cel` crate parser's errors.
///
/// A message literal (`Name{…}`) is refused here as cel-go's checker refuses it in Kubernetes'
/// environment, which declares no message types: the `cel` crate's evaluator would panic on one.
pub fn parse(source: &str) -> Result<IdedExpr, ParseErrors> {
    let mut parser = Parser::new(source);
    let expression = match parser.as_mut().and_then(Parser::whole) {
        Some(expression) => expression,
        None if parser.is_some_and(|p| p.links > MAX_LINKS) => {
            // Every later walk of the tree (the checker, the evaluator, dropping it) recurses
            // once per link: refused here rather than overflowing a stack there.
            let message = format!("expression too long: more than {MAX_LINKS} operators and selections");
            return Err(ParseErrors { errors: vec![error_at(source, 0, message)] });
        }
        None => cel::parser::Parser::new().parse(source)?,
    };
    match message_literal(&expression) {
        None => Ok(expression),
        Some(name) => {
            let offset = source.find(name.trim_start_matches('.')).unwrap_or(0);
            Err(ParseErrors { errors: vec![error_at(source, offset, format!("undeclared reference to '{name}'"))] })
        }
    }
}

/// An error at byte `offset` of `source`, placed by line and column as cel-go places them.
fn error_at(source: &str, offset: usize, msg: String) -> cel::ParseError {
    let line = source.get(..offset).map_or(0, |before| before.matches('\n').count());
    let column = source.get(..offset).map_or(0, |before| before.len() - before.rfind('\n').map_or(0, |n| n + 1));
    cel::ParseError {
        source: None,
        pos: (isize::try_from(line + 1).unwrap_or(1), isize::try_from(column + 1).unwrap_or(1)),
        msg,
        expr_id: 0,
        source_info: None,
    }
}

/// The type name of the first message literal in `expression`.
fn message_literal(expression: &IdedExpr) -> Option<&str> {
    match &expression.expr {
        Expr::Struct(message) => Some(&message.type_name),
        Expr::Call(call) => {
            call.target.as_deref().and_then(message_literal).or_else(|| call.args.iter().find_map(message_literal))
        }
        Expr::Select(select) => message_literal(&select.operand),
        Expr::List(list) => list.elements.iter().find_map(message_literal),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::StructField(field) => message_literal(&field.value),
            EntryExpr::MapEntry(entry) => message_literal(&entry.key).or_else(|| message_literal(&entry.value)),
        }),
        Expr::Comprehension(c) => {
            [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result].into_iter().find_map(message_literal)
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
}

/// The `cel` crate's parser gives up past this many nested expressions (its default recursion
/// limit is 96); nearer that line it decides.
const MAX_DEPTH: u32 = 90;

/// At most this many binary operators, selections, calls on a value and indexes in one
/// expression: each is a level of the tree that no nesting limit counts.
const MAX_LINKS: u32 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    Int,
    Uint,
    Float,
    String,
    Bytes,
    True,
    False,
    Null,
    In,
    Punct(&'static str),
}

#[derive(Debug, Clone, Copy)]
struct Token<'s> {
    kind: Kind,
    text: &'s str,
}

/// The punctuation, two-character operators first so that the longest one matches.
const PUNCTUATION: [&str; 24] = [
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "[", "]", "{", "}", "(", ")", ".", ",", "-", "!", "?", ":", "+", "*",
    "/", "%",
];

/// The tokens of `source` without whitespace and comments, or `None` where the lexer would
/// report an error (or the token is one this parser leaves to the `cel` crate).
fn tokens(source: &str) -> Option<Vec<Token<'_>>> {
    let bytes = source.as_bytes();
    let mut out = Vec::with_capacity(source.len() / 3);
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let rest = source.get(at..)?;
        let (kind, length) = match byte {
            b'\t' | b' ' | b'\r' | b'\n' | 0x0C => {
                at += 1;
                continue;
            }
            b'/' if rest.starts_with("//") => {
                at += rest.find('\n').unwrap_or(rest.len());
                continue;
            }
            b'0'..=b'9' => number(rest),
            b'.' if rest.as_bytes().get(1).is_some_and(u8::is_ascii_digit) => number(rest),
            b'"' | b'\'' => (Kind::String, quoted(rest, false)?),
            b'r' | b'R' if matches!(rest.as_bytes().get(1), Some(b'"' | b'\'')) => {
                (Kind::String, 1 + quoted(rest.get(1..)?, true)?)
            }
            b'b' | b'B' => match rest.as_bytes().get(1) {
                Some(b'"' | b'\'') => (Kind::Bytes, 1 + quoted(rest.get(1..)?, false)?),
                Some(b'r' | b'R') if matches!(rest.as_bytes().get(2), Some(b'"' | b'\'')) => {
                    (Kind::Bytes, 2 + quoted(rest.get(2..)?, true)?)
                }
                _ => identifier(rest),
            },
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => identifier(rest),
            _ => {
                let punct = PUNCTUATION.iter().find(|p| rest.starts_with(**p))?;
                (Kind::Punct(punct), punct.len())
            }
        };
        out.push(Token { kind, text: rest.get(..length)? });
        at += length;
    }
    Some(out)
}

fn identifier(rest: &str) -> (Kind, usize) {
    let length = rest.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
    let kind = match rest.get(..length) {
        Some("true") => Kind::True,
        Some("false") => Kind::False,
        Some("null") => Kind::Null,
        Some("in") => Kind::In,
        _ => Kind::Ident,
    };
    (kind, length)
}

/// `NUM_INT`, `NUM_UINT` or `NUM_FLOAT` at the start of `rest`, the longest that matches.
fn number(rest: &str) -> (Kind, usize) {
    let bytes = rest.as_bytes();
    let digits = |from: usize| bytes.iter().skip(from).take_while(|b| b.is_ascii_digit()).count();
    let unsigned = |at: usize, kind: Kind| match bytes.get(at) {
        Some(b'u' | b'U') => (Kind::Uint, at + 1),
        _ => (kind, at),
    };
    if rest.starts_with("0x") {
        let hex = bytes.iter().skip(2).take_while(|b| b.is_ascii_hexdigit()).count();
        if hex > 0 {
            return unsigned(2 + hex, Kind::Int);
        }
    }
    let whole = digits(0);
    let mut end = whole;
    let mut float = false;
    if bytes.get(end) == Some(&b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
        float = true;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exponent = digits(end + 1 + sign);
        if exponent > 0 {
            end += 1 + sign + exponent;
            float = true;
        }
    }
    if float { (Kind::Float, end) } else { unsigned(end, Kind::Int) }
}

/// The length of the string literal that opens `rest` (its quote first), escapes checked
/// unless `raw`.
fn quoted(rest: &str, raw: bool) -> Option<usize> {
    let bytes = rest.as_bytes();
    let quote = *bytes.first()?;
    let triple = bytes.get(..3).is_some_and(|b| b.iter().all(|c| *c == quote));
    let open = if triple { 3 } else { 1 };
    let mut at = open;
    loop {
        match *bytes.get(at)? {
            b'\\' if !raw => at += escape_length(bytes.get(at + 1..)?)? + 1,
            b'\n' | b'\r' if !triple => return None,
            c if c == quote && (!triple || bytes.get(at..at + 3).is_some_and(|b| b.iter().all(|c| *c == quote))) => {
                return Some(at + open);
            }
            _ => at += 1,
        }
    }
}

/// The length of the escape sequence after a backslash (`ESC_SEQ`), without the backslash.
fn escape_length(after: &[u8]) -> Option<usize> {
    let hex = |n: usize| after.get(1..=n).is_some_and(|d| d.iter().all(u8::is_ascii_hexdigit)).then_some(n + 1);
    match *after.first()? {
        b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'"' | b'\'' | b'\\' | b'?' | b'`' => Some(1),
        b'x' | b'X' => hex(2),
        b'u' => hex(4),
        b'U' => hex(8),
        b'0'..=b'3' => after.get(1..3).is_some_and(|d| d.iter().all(|c| (b'0'..=b'7').contains(c))).then_some(3),
        _ => None,
    }
}

/// A string literal's value. Escapes are CEL's; a code point that is not a character
/// (a surrogate) is left to the `cel` crate.
fn string_value(text: &str) -> Option<String> {
    let (raw, body) = match text.strip_prefix(['r', 'R']) {
        Some(body) => (true, body),
        None => (false, text),
    };
    let quote = body.get(..1)?;
    let delimiter = if body.len() >= 6 && body.starts_with(&quote.repeat(3)) { 3 } else { 1 };
    let inner = body.get(delimiter..body.len().checked_sub(delimiter)?)?;
    if raw || !inner.contains('\\') {
        return Some(inner.to_string());
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next()?;
        let code = |chars: &mut std::str::Chars<'_>, n: usize, radix: u32, first: Option<char>| {
            let digits: String = first.into_iter().chain(chars.by_ref().take(n)).collect();
            u32::from_str_radix(&digits, radix).ok().and_then(char::from_u32)
        };
        out.push(match escaped {
            'a' => '\u{07}',
            'b' => '\u{08}',
            'f' => '\u{0C}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{0B}',
            'x' | 'X' => code(&mut chars, 2, 16, None)?,
            'u' => code(&mut chars, 4, 16, None)?,
            'U' => code(&mut chars, 8, 16, None)?,
            '0'..='3' => code(&mut chars, 2, 8, Some(escaped))?,
            other => other,
        });
    }
    Some(out)
}

struct Parser<'s> {
    tokens: Vec<Token<'s>>,
    at: usize,
    next_id: u64,
    depth: u32,
    /// The links read so far (`MAX_LINKS`).
    links: u32,
}

impl<'s> Parser<'s> {
    fn new(source: &'s str) -> Option<Parser<'s>> {
        Some(Parser { tokens: tokens(source)?, at: 0, next_id: 1, depth: 0, links: 0 })
    }

    /// The whole input as one expression.
    fn whole(&mut self) -> Option<IdedExpr> {
        let expression = self.expr()?;
        (self.at == self.tokens.len()).then_some(expression)
    }

    fn peek(&self) -> Option<Kind> {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Option<Kind> {
        self.tokens.get(self.at + ahead).map(|t| t.kind)
    }

    fn next(&mut self) -> Option<Token<'s>> {
        let token = *self.tokens.get(self.at)?;
        self.at += 1;
        Some(token)
    }

    /// Takes the punctuation `p` if it comes next.
    fn eat(&mut self, p: &str) -> bool {
        let found = matches!(self.peek(), Some(Kind::Punct(q)) if q == p);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, p: &str) -> Option<()> {
        self.eat(p).then_some(())
    }

    /// Counts one more link; `None` past `MAX_LINKS`.
    fn link(&mut self) -> Option<()> {
        self.links += 1;
        (self.links <= MAX_LINKS).then_some(())
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn node(&mut self, expr: Expr) -> IdedExpr {
        IdedExpr { id: self.id(), expr }
    }

    /// `expr : conditionalOr ('?' conditionalOr ':' expr)?`
    fn expr(&mut self) -> Option<IdedExpr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let condition = self.logical(operators::LOGICAL_OR)?;
        let expression = if self.eat("?") {
            let id = self.id();
            let if_true = self.logical(operators::LOGICAL_OR)?;
            self.expect(":")?;
            let if_false = self.expr()?;
            call(id, operators::CONDITIONAL, vec![condition, if_true, if_false])
        } else {
            condition
        };
        self.depth -= 1;
        Some(expression)
    }

    /// `conditionalOr` and `conditionalAnd`: a run of terms joined by one operator, as a
    /// balanced tree (cel-go's `logicManager`).
    fn logical(&mut self, function: &'static str) -> Option<IdedExpr> {
        let (operator, term): (&str, fn(&mut Self) -> Option<IdedExpr>) = if function == operators::LOGICAL_OR {
            ("||", |p| p.logical(operators::LOGICAL_AND))
        } else {
            ("&&", Self::relation)
        };
        let mut terms = vec![Some(term(self)?)];
        let mut ids = Vec::new();
        while self.eat(operator) {
            self.link()?;
            terms.push(Some(term(self)?));
            ids.push(self.id());
        }
        match ids.len().checked_sub(1) {
            Some(last) => Some(balanced(function, &mut terms, &ids, 0, last)),
            None => terms.pop().flatten(),
        }
    }

    /// `relation`, `calc` (`* / %` above `+ -`): left-associative binary operators.
    fn binary(&mut self, level: u8) -> Option<IdedExpr> {
        let operand = |p: &mut Self| {
            if level == 0 {
                p.binary(1)
            } else if level == 1 {
                p.binary(2)
            } else {
                p.unary()
            }
        };
        let mut left = operand(self)?;
        loop {
            let function = match (level, self.peek()) {
                (0, Some(Kind::In)) => operators::IN,
                (0, Some(Kind::Punct("<"))) => operators::LESS,
                (0, Some(Kind::Punct("<="))) => operators::LESS_EQUALS,
                (0, Some(Kind::Punct(">="))) => operators::GREATER_EQUALS,
                (0, Some(Kind::Punct(">"))) => operators::GREATER,
                (0, Some(Kind::Punct("=="))) => operators::EQUALS,
                (0, Some(Kind::Punct("!="))) => operators::NOT_EQUALS,
                (1, Some(Kind::Punct("+"))) => operators::ADD,
                (1, Some(Kind::Punct("-"))) => operators::SUBSTRACT,
                (2, Some(Kind::Punct("*"))) => operators::MULTIPLY,
                (2, Some(Kind::Punct("/"))) => operators::DIVIDE,
                (2, Some(Kind::Punct("%"))) => operators::MODULO,
                _ => return Some(left),
            };
            self.at += 1;
            self.link()?;
            let id = self.id();
            let right = operand(self)?;
            left = call(id, function, vec![left, right]);
        }
    }

    fn relation(&mut self) -> Option<IdedExpr> {
        self.binary(0)
    }

    /// `unary`: a member, or a run of `!` or of `-` before one (`-` before a number is the
    /// number's sign).
    fn unary(&mut self) -> Option<IdedExpr> {
        let (operator, function) = match self.peek() {
            Some(Kind::Punct("!")) => ("!", operators::LOGICAL_NOT),
            Some(Kind::Punct("-")) if !matches!(self.peek_at(1), Some(Kind::Int | Kind::Float)) => {
                ("-", operators::NEGATE)
            }
            _ => return self.member(),
        };
        let mut count = 0;
        while self.eat(operator) {
            count += 1;
        }
        if count % 2 == 0 {
            return self.member();
        }
        let id = self.id();
        let operand = self.member()?;
        Some(call(id, function, vec![operand]))
    }

    /// `member`: a primary, then selections, method calls and indexes.
    fn member(&mut self) -> Option<IdedExpr> {
        let mut operand = self.primary()?;
        loop {
            if matches!(self.peek(), Some(Kind::Punct("." | "["))) {
                self.link()?;
            }
            if self.eat(".") {
                let name = self.next().filter(|t| t.kind == Kind::Ident)?.text;
                if self.eat("(") {
                    let id = self.id();
                    let args = self.arguments()?;
                    operand = self.method(id, name, operand, args)?;
                } else {
                    let select = SelectExpr { operand: Box::new(operand), field: name.to_string(), test: false };
                    operand = self.node(Expr::Select(select));
                }
            } else if self.eat("[") {
                let id = self.id();
                let index = self.expr()?;
                self.expect("]")?;
                operand = call(id, operators::INDEX, vec![operand, index]);
            } else {
                return Some(operand);
            }
        }
    }

    fn primary(&mut self) -> Option<IdedExpr> {
        let token = self.next()?;
        let literal = match token.kind {
            Kind::Ident => return self.named(token.text),
            Kind::Punct("-") => return self.signed(),
            Kind::Punct("(") => {
                let nested = self.expr()?;
                return self.expect(")").map(|()| nested);
            }
            Kind::Punct("[") => return self.list(),
            Kind::Punct("{") => return self.map(),
            Kind::Int => LiteralValue::Int(int(token.text)?.into()),
            Kind::Uint => LiteralValue::UInt(uint(token.text)?.into()),
            Kind::Float => LiteralValue::Double(float(token.text)?.into()),
            Kind::String => LiteralValue::String(string_value(token.text)?.into()),
            Kind::Bytes => {
                let inner = token.text.get(2..token.text.len().checked_sub(1)?)?;
                // Only plain bytes; escapes and other quotings are the `cel` crate's.
                if inner.contains(['\\', '"', '\'']) {
                    return None;
                }
                LiteralValue::Bytes(inner.as_bytes().to_vec().into())
            }
            Kind::True => LiteralValue::Boolean(true.into()),
            Kind::False => LiteralValue::Boolean(false.into()),
            Kind::Null => LiteralValue::Null,
            Kind::In | Kind::Punct(_) => return None,
        };
        Some(self.node(Expr::Literal(literal)))
    }

    /// A negative number: `-` was taken and a number comes next.
    fn signed(&mut self) -> Option<IdedExpr> {
        let token = self.next()?;
        let text = format!("-{}", token.text);
        let literal = match token.kind {
            Kind::Int => LiteralValue::Int(int(&text)?.into()),
            Kind::Float => LiteralValue::Double(float(&text)?.into()),
            _ => return None,
        };
        Some(self.node(Expr::Literal(literal)))
    }

    /// An identifier, a global call, or a message: `name`, `name(…)`, `a.b.Name{…}`.
    fn named(&mut self, name: &'s str) -> Option<IdedExpr> {
        if self.eat("(") {
            let id = self.id();
            let args = self.arguments()?;
            return self.global(id, name, args);
        }
        let mut ahead = 0;
        while self.peek_at(ahead) == Some(Kind::Punct(".")) && self.peek_at(ahead + 1) == Some(Kind::Ident) {
            ahead += 2;
        }
        if self.peek_at(ahead) == Some(Kind::Punct("{")) {
            let mut type_name = name.to_string();
            for _ in 0..ahead / 2 {
                self.at += 1;
                type_name.push('.');
                type_name.push_str(self.next()?.text);
            }
            return self.message(type_name);
        }
        Some(self.node(Expr::Ident(name.to_string())))
    }

    /// `exprList? ')'`, after the `(`.
    fn arguments(&mut self) -> Option<Vec<IdedExpr>> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Some(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(")") {
                return Some(args);
            }
            self.expect(",")?;
        }
    }

    /// Items up to `close`, each read by `item`, with an optional trailing comma (a lone
    /// comma too: `[,]`).
    fn items<T>(&mut self, close: &str, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut items = Vec::new();
        if self.eat(",") {
            return self.expect(close).map(|()| items);
        }
        while !self.eat(close) {
            items.push(item(self)?);
            if !self.eat(",") {
                self.expect(close)?;
                return Some(items);
            }
        }
        Some(items)
    }

    /// `[…]`, after the `[`.
    fn list(&mut self) -> Option<IdedExpr> {
        let id = self.id();
        let elements = self.items("]", Self::expr)?;
        Some(IdedExpr { id, expr: Expr::List(ListExpr::new(elements)) })
    }

    /// `{key: value, …}`, after the `{`.
    fn map(&mut self) -> Option<IdedExpr> {
        let id = self.id();
        let entries = self.items("}", |p| {
            let id = p.id();
            let key = p.expr()?;
            p.expect(":")?;
            let value = p.expr()?;
            Some(IdedEntryExpr { id, expr: EntryExpr::MapEntry(MapEntryExpr { key, value, optional: false }) })
        })?;
        Some(IdedExpr { id, expr: Expr::Map(MapExpr { entries }) })
    }

    /// `Name{field: value, …}`, at the `{`.
    fn message(&mut self, type_name: String) -> Option<IdedExpr> {
        self.expect("{")?;
        let id = self.id();
        let entries = self.items("}", |p| {
            let field = p.next().filter(|t| t.kind == Kind::Ident)?.text.to_string();
            p.expect(":")?;
            let id = p.id();
            let value = p.expr()?;
            Some(IdedEntryExpr { id, expr: EntryExpr::StructField(StructFieldExpr { field, value, optional: false }) })
        })?;
        Some(IdedExpr { id, expr: Expr::Struct(StructExpr { type_name, entries }) })
    }

    /// A global call, or the `has` macro.
    fn global(&mut self, id: u64, name: &str, mut args: Vec<IdedExpr>) -> Option<IdedExpr> {
        if name != operators::HAS || args.len() != 1 {
            return Some(call(id, name, args));
        }
        match args.pop()?.expr {
            Expr::Select(select) => Some(self.node(Expr::Select(SelectExpr { test: true, ..select }))),
            _ => None,
        }
    }

    /// A method call, or one of the comprehension macros, expanded as the `cel` crate expands
    /// them (its ids in its order).
    fn method(&mut self, id: u64, name: &str, target: IdedExpr, args: Vec<IdedExpr>) -> Option<IdedExpr> {
        let macro_arity = match name {
            operators::EXISTS | operators::ALL | operators::EXISTS_ONE | "existsOne" | operators::FILTER => {
                args.len() == 2
            }
            operators::MAP => args.len() == 2 || args.len() == 3,
            _ => false,
        };
        if !macro_arity {
            return Some(IdedExpr {
                id,
                expr: Expr::Call(CallExpr { func_name: name.to_string(), target: Some(Box::new(target)), args }),
            });
        }
        let Some(Expr::Ident(variable)) = args.first().map(|a| &a.expr) else {
            return None;
        };
        let variable = variable.clone();
        let mut args = args.into_iter();
        let declared = args.next()?;
        let body = args.next()?;
        let (init, condition, step, result) = match name {
            operators::EXISTS | operators::ALL => self.quantifier(name == operators::ALL, body),
            operators::MAP => match args.next() {
                Some(transform) => self.map_macro(transform, Some(body)),
                None => self.map_macro(body, None),
            },
            operators::FILTER => self.map_macro(declared, Some(body)),
            _ => self.exists_one(body),
        };
        let comprehension = ComprehensionExpr {
            iter_range: target,
            iter_var: variable,
            iter_var2: None,
            accu_var: RESULT.to_string(),
            accu_init: init,
            loop_cond: condition,
            loop_step: step,
            result,
        };
        Some(self.node(Expr::Comprehension(Box::new(comprehension))))
    }

    fn accumulator(&mut self) -> IdedExpr {
        self.node(Expr::Ident(RESULT.to_string()))
    }

    fn literal(&mut self, value: LiteralValue) -> IdedExpr {
        self.node(Expr::Literal(value))
    }

    /// `all` and `exists`: init, condition, step and result.
    fn quantifier(&mut self, all: bool, predicate: IdedExpr) -> Parts {
        let init = self.literal(LiteralValue::Boolean((all).into()));
        let accumulator = self.accumulator();
        let condition = if all {
            self.call(operators::NOT_STRICTLY_FALSE, vec![accumulator])
        } else {
            let not = self.call(operators::LOGICAL_NOT, vec![accumulator]);
            self.call(operators::NOT_STRICTLY_FALSE, vec![not])
        };
        let accumulator = self.accumulator();
        let function = if all { operators::LOGICAL_AND } else { operators::LOGICAL_OR };
        let step = self.call(function, vec![accumulator, predicate]);
        (init, condition, step, self.accumulator())
    }

    /// `exists_one`.
    fn exists_one(&mut self, predicate: IdedExpr) -> Parts {
        let init = self.literal(LiteralValue::Int(0.into()));
        let condition = self.literal(LiteralValue::Boolean(true.into()));
        let accumulator = self.accumulator();
        let one = self.literal(LiteralValue::Int(1.into()));
        let counted = self.call(operators::ADD, vec![accumulator, one]);
        let accumulator = self.accumulator();
        let step = self.call(operators::CONDITIONAL, vec![predicate, counted, accumulator]);
        let accumulator = self.accumulator();
        let one = self.literal(LiteralValue::Int(1.into()));
        (init, condition, step, self.call(operators::EQUALS, vec![accumulator, one]))
    }

    /// `map` (with an optional filter) and `filter` (the element itself, kept by the filter).
    fn map_macro(&mut self, element: IdedExpr, filter: Option<IdedExpr>) -> Parts {
        let init = self.node(Expr::List(ListExpr::new(Vec::new())));
        let condition = self.literal(LiteralValue::Boolean(true.into()));
        let accumulator = self.accumulator();
        let appended = self.node(Expr::List(ListExpr::new(vec![element])));
        let mut step = self.call(operators::ADD, vec![accumulator, appended]);
        if let Some(filter) = filter {
            let accumulator = self.accumulator();
            step = self.call(operators::CONDITIONAL, vec![filter, step, accumulator]);
        }
        (init, condition, step, self.accumulator())
    }

    fn call(&mut self, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
        let id = self.id();
        call(id, function, args)
    }
}

/// A comprehension's accumulator init, loop condition, loop step and result.
type Parts = (IdedExpr, IdedExpr, IdedExpr, IdedExpr);

/// The accumulator variable of the macros.
const RESULT: &str = "@result";

fn call(id: u64, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr { id, expr: Expr::Call(CallExpr { func_name: function.to_string(), target: None, args }) }
}

/// Terms `lo..=hi + 1` joined by the operators `lo..=hi` (`ids`), the middle one at the root.
fn balanced(function: &str, terms: &mut [Option<IdedExpr>], ids: &[u64], lo: usize, hi: usize) -> IdedExpr {
    let mid = (lo + hi).div_ceil(2);
    let left = if mid == lo {
        terms.get_mut(mid).and_then(Option::take).unwrap_or_default()
    } else {
        balanced(function, terms, ids, lo, mid - 1)
    };
    let right = if mid == hi {
        terms.get_mut(mid + 1).and_then(Option::take).unwrap_or_default()
    } else {
        balanced(function, terms, ids, mid + 1, hi)
    };
    call(ids.get(mid).copied().unwrap_or_default(), function, vec![left, right])
}

fn int(text: &str) -> Option<i64> {
    match text.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn uint(text: &str) -> Option<u64> {
    let digits = text.get(..text.len().checked_sub(1)?)?;
    match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => digits.parse().ok(),
    }
}

fn float(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use serde_json::Value;

    /// The `cel` crate's parser, the reference.
    fn reference(source: &str) -> Result<IdedExpr, ParseErrors> {
        cel::parser::Parser::new().parse(source)
    }

    fn ours(source: &str) -> Option<IdedExpr> {
        Parser::new(source).and_then(|mut parser| parser.whole())
    }

    /// Ours accepts exactly what the reference accepts, with the same AST, but for what it
    /// leaves to the reference.
    pub(in crate::cel) fn assert_same(source: &str) {
        if knowingly_differs(source) {
            return;
        }
        match (ours(source), reference(source)) {
            (Some(ours), Ok(theirs)) => assert_eq!(ours, theirs, "{source}"),
            (None, Err(_)) => {}
            (None, Ok(_)) if left_to_reference(source) => {}
            (ours, theirs) => panic!("{source}: ours {ours:?}, the cel crate's {theirs:?}"),
        }
    }

    /// Whether `source` has a run of `!` or `-`, or a string with quotes inside, where ours
    /// follows cel-go rather than the `cel` crate.
    pub(in crate::cel) fn knowingly_differs(source: &str) -> bool {
        tokens(source).is_some_and(|tokens| {
            // The `cel` crate reads a string by toggling on every quote: an escaped quote of
            // the other kind keeps its backslash, a quote inside triple quotes breaks it. It
            // knows no `\X` escape.
            let other_quote = |t: &Token<'_>| {
                let text = t.text.trim_start_matches(['r', 'R']);
                let triple = text.len() >= 6 && (text.starts_with("'''") || text.starts_with("\"\"\""));
                let inner = text.get(3..text.len().saturating_sub(3)).unwrap_or_default();
                t.kind == Kind::String
                    && ((text.starts_with('"') && text.contains("\\'"))
                        || (text.starts_with('\'') && text.contains("\\\""))
                        || (triple && inner.contains(['"', '\'']))
                        || text.contains("\\X"))
            };
            tokens.iter().any(other_quote)
                || tokens.windows(2).any(|pair| {
                    matches!(
                        (pair[0].kind, pair[1].kind),
                        (Kind::Punct("!"), Kind::Punct("!")) | (Kind::Punct("-"), Kind::Punct("-"))
                    )
                })
        })
    }

    /// Whether `source` has what ours leaves to the reference: an escaped field name, a name
    /// with a leading dot, the optional syntax, bytes other than plain ones.
    fn left_to_reference(source: &str) -> bool {
        let Some(tokens) = tokens(source) else { return source.contains('`') };
        let mut previous: Option<Kind> = None;
        tokens.iter().any(|token| {
            let after_operand = matches!(previous, Some(Kind::Punct(")" | "]" | "}")) | Some(Kind::Ident))
                || matches!(previous, Some(k) if !matches!(k, Kind::Punct(_) | Kind::In));
            let left = match token.kind {
                Kind::Punct(".") => !after_operand,
                Kind::Punct("?") => matches!(previous, Some(Kind::Punct("." | "[" | "{" | ","))),
                Kind::Bytes => token.text.get(2..).is_some_and(|t| t.contains(['\\', '"', '\''])),
                _ => false,
            };
            previous = Some(token.kind);
            left
        })
    }

    /// Every rule and message expression of every CRD in the corpus.
    fn corpus_expressions() -> Vec<String> {
        fn collect(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::Object(fields) => {
                    for entry in fields.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten()
                    {
                        for key in ["rule", "messageExpression"] {
                            out.extend(entry.get(key).and_then(Value::as_str).map(str::to_string));
                        }
                    }
                    fields.values().for_each(|v| collect(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        let mut folders = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for document in serde_saphyr::from_multiple::<Value>(&text).unwrap() {
                        collect(&document, &mut out);
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn every_corpus_expression_parses_to_the_cel_crates_ast() {
        let expressions = corpus_expressions();
        assert!(expressions.len() > 100, "{} expressions", expressions.len());
        for source in &expressions {
            let ours = ours(source).unwrap_or_else(|| panic!("refused: {source}"));
            assert_eq!(ours, reference(source).unwrap(), "{source}");
        }
    }

    /// One of each construct, and of each way to get one wrong.
    const CONSTRUCTS: &[&str] = &[
        "1",
        "-1",
        "0x1F",
        "-9223372036854775808",
        "9223372036854775808",
        "1u",
        "0xFFu",
        "1.5",
        "-1.5",
        ".5",
        "1e3",
        "1.5E-3",
        "1e",
        "true",
        "false",
        "null",
        "'a'",
        "\"a\"",
        "'''a\nb'''",
        "\"\"\"x\"\"\"",
        "r'\\d+'",
        "R\"\\n\"",
        "'\\n\\t\\\\\\x41\\101\\u00e9\\U0001F600'",
        "'é'",
        "b'abc'",
        "B\"x\"",
        "x",
        "_a1",
        "a.b.c",
        "a[0]",
        "a['k'].b",
        "f()",
        "f(1, 2)",
        "a.f(1)",
        "a.b.f(x)[0].c",
        "1 + 2 * 3",
        "(1 + 2) * 3",
        "a - b - c",
        "a / b % c",
        "a < b",
        "a <= b == c",
        "x in [1, 2]",
        "a && b && c && d && e",
        "a || b || c",
        "a && b || c && d",
        "a ? b : c",
        "a ? b : c ? d : e",
        "a ? b ? c : d : e",
        "!a",
        "!!!a",
        "-a",
        "---a",
        "-5.f()",
        "!-5",
        "a - -5",
        "1 - 2",
        "[]",
        "[1, 2,]",
        "{}",
        "{'a': 1, 'b': [2]}",
        "{'a': 1,}",
        "Msg{}",
        "a.b.Msg{f: 1, g: 'x'}",
        "Msg{f: 1,}",
        "has(a.b)",
        "has(a.b.c)",
        "l.all(x, x > 0)",
        "l.exists(x, x == 1)",
        "l.exists_one(x, x)",
        "l.existsOne(x, x)",
        "l.map(x, x * 2)",
        "l.map(x, x > 0, x * 2)",
        "l.filter(x, x > 0)",
        "l.all(x, l.exists(y, y == x))",
        "m.has(x)",
        "has(x)",
        "l.all(1, x)",
        "l.map(x)",
        "x // comment\n + 1",
        "size(self.items) <= 10",
        "self.all(k, self[k].size() > 0)",
        "a.?b",
        "a[?0]",
        "[?a]",
        "{?a: b}",
        ".x",
        ".f()",
        "a.`b-c`",
        "1 +",
        "(",
        "a.",
        "f(1,)",
        "[1 2]",
        "a b",
        "'unterminated",
        "'\\q'",
        "@",
        "a = b",
        "a & b",
        "in",
        "a.in",
        "a.true",
        "0xg",
        "1..2",
        "'\\uD800'",
        "b'\\x00'",
        "-0x10",
        "1e999",
        "\u{1F600}",
    ];

    #[test]
    fn each_construct_parses_as_the_cel_crate_parses_it() {
        for source in CONSTRUCTS {
            assert_same(source);
        }
    }

    /// Where cel-go and the spec differ from the `cel` crate, ours follows them.
    #[test]
    fn even_runs_of_negation_cancel_and_escaped_quotes_are_quotes() {
        assert_eq!(ours("!!a").unwrap(), ours("a").unwrap());
        assert_eq!(ours("--a").unwrap(), ours("a").unwrap());
        assert_eq!(ours("--5").unwrap(), ours("5").unwrap());
        let quote = |source| match ours(source).unwrap().expr {
            Expr::Literal(LiteralValue::String(s)) => s.inner().to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(quote(r#"'a\"b'"#), "a\"b");
        assert_eq!(quote(r#""a\'b""#), "a'b");
    }

    /// The `cel` crate's evaluator panics on a message literal; Kubernetes declares no message
    /// types, so cel-go refuses one when it checks the rule.
    #[test]
    fn message_literals_are_undeclared_references() {
        for (source, error) in [
            ("Msg{}", "ERROR: <input>:1:1: undeclared reference to 'Msg'"),
            ("self.x == a.b.Msg{f: 1}", "ERROR: <input>:1:11: undeclared reference to 'a.b.Msg'"),
            ("[1].all(x,\n  {'k': M{}}.size() > 0)", "ERROR: <input>:2:9: undeclared reference to 'M'"),
            (".Msg{}", "ERROR: <input>:1:2: undeclared reference to '.Msg'"),
        ] {
            assert_eq!(parse(source).unwrap_err().errors[0].to_string(), error, "{source}");
        }
    }

    /// A chain no nesting limit counts is refused before anything walks it: a long one would
    /// overflow a stack in every walk of the tree (the `cel` crate's parser included).
    #[test]
    fn a_chain_of_a_thousand_links_is_the_longest() {
        let chain = |n: usize| format!("{}1", "1 + ".repeat(n));
        assert!(parse(&chain(1_000)).is_ok());
        let error = parse(&chain(20_000)).unwrap_err().to_string();
        assert!(error.contains("expression too long: more than 1000 operators and selections"), "{error}");
        let selections = format!("self{}", ".a".repeat(5_000));
        assert!(parse(&selections).unwrap_err().to_string().contains("expression too long"));
        assert!(parse(&format!("x{}", "[0]".repeat(1_001))).is_err());
    }

    /// What ours refuses, the `cel` crate's parser words as cel-go does.
    #[test]
    fn refused_input_gets_the_cel_crates_errors() {
        let errors = parse("1 +").unwrap_err();
        assert_eq!(errors.to_string(), reference("1 +").unwrap_err().to_string());
        assert!(errors.to_string().contains("Syntax error"), "{errors}");
        // Nesting past the limit is the reference's to refuse (on a stack large enough for it).
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(ours(&deep).is_none());
        let refused = std::thread::Builder::new().stack_size(256 << 20).spawn(move || parse(&deep).is_err());
        assert!(refused.unwrap().join().unwrap());
    }

    /// Expressions made at random from CEL's grammar (and broken at random): ours accepts
    /// exactly what the reference accepts, with the same AST.
    #[test]
    fn random_expressions_parse_as_the_cel_crate_parses_them() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let mut source = String::new();
            expression(&mut rng, 0, &mut source);
            if rng.random_ratio(1, 5) {
                let at = rng.random_range(0..=source.len());
                let pieces = ["(", ")", ",", ".", "!", "-", "?", "[", "}", "'", " in ", "1", "`"];
                if source.is_char_boundary(at) {
                    source.insert_str(at, pieces[rng.random_range(0..pieces.len())]);
                }
            }
            assert_same(&source);
            if reference(&source).is_ok() { accepted += 1 } else { refused += 1 }
        }
        assert!(accepted > 5_000 && refused > 1_000, "{accepted} accepted, {refused} refused");
    }

    fn expression(rng: &mut impl RngExt, depth: u32, out: &mut String) {
        let leaf = depth > 4 || rng.random_ratio(1, 3);
        if leaf {
            let leaves = ["x", "self.a", "1", "-2", "3u", "1.5", "'s'", "r'\\d'", "true", "null", "[]", "{}", "b'b'"];
            out.push_str(leaves[rng.random_range(0..leaves.len())]);
            return;
        }
        match rng.random_range(0..10) {
            0..=2 => {
                let ops = [" + ", " - ", " * ", " / ", " % ", " == ", " != ", " < ", " <= ", " in ", " && ", " || "];
                expression(rng, depth + 1, out);
                out.push_str(ops[rng.random_range(0..ops.len())]);
                expression(rng, depth + 1, out);
            }
            3 => {
                expression(rng, depth + 1, out);
                out.push_str(" ? ");
                expression(rng, depth + 1, out);
                out.push_str(" : ");
                expression(rng, depth + 1, out);
            }
            4 => {
                out.push_str(["!", "-", "("][rng.random_range(0..3)]);
                let open = out.ends_with('(');
                expression(rng, depth + 1, out);
                if open {
                    out.push(')');
                }
            }
            5 => {
                out.push_str("self");
                let macros = [".all(e, ", ".exists(e, ", ".exists_one(e, ", ".map(e, ", ".filter(e, ", ".size(", ".f("];
                out.push_str(macros[rng.random_range(0..macros.len())]);
                expression(rng, depth + 1, out);
                out.push(')');
            }
            6 => {
                out.push_str(if rng.random() { "has(self." } else { "size(" });
                out.push_str(if out.ends_with('.') { "b)" } else { "x)" });
            }
            7 => {
                out.push('[');
                expression(rng, depth + 1, out);
                out.push_str(", ");
                expression(rng, depth + 1, out);
                out.push(']');
            }
            8 => {
                out.push_str("{'k': ");
                expression(rng, depth + 1, out);
                out.push('}');
            }
            _ => {
                out.push('(');
                expression(rng, depth + 1, out);
                out.push_str(")[0].c");
            }
        }
    }
}

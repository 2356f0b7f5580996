//! Rules that pass, found without converting the object: an evaluator over the decoded JSON in
//! place, typed by its schema as [`super::to_cel`] types it (or, for admission expressions,
//! untyped as [`super::untyped`] sees it), for the core of CEL most rules are
//! made of (selections, `has`, comparisons, logic, arithmetic, `size`, `in`, the string tests,
//! `matches`, `find`, `int` of a decimal string, `duration` of whole units and the comprehension
//! macros).
//!
//! It only ever answers `true`. Anything else — a rule that fails, an error, a function or a
//! value it does not know (timestamps, quantities, maps built in the rule, mixed numeric types)
//! — is left to the `cel` crate's evaluator, which decides and words the failure. So a rule's
//! outcome is the `cel` crate's; what this saves is converting the node's value for every rule
//! that holds, which is nearly every rule of nearly every write.

use std::borrow::Cow;
use std::rc::Rc;

use kube_cel::cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

use super::Schema;
use crate::{Additional, Format, StringFormat};

/// Whether `rule` surely holds with `self` (and `oldSelf`) bound to these values; `false` when
/// it does not or this evaluator cannot tell.
pub(super) fn holds(rule: &IdedExpr, this: (&Value, &Schema), old: Option<(&Value, &Schema)>) -> bool {
    let mut bound = Vec::with_capacity(4);
    bound.push(("self", Val::of(this.0, this.1)));
    if let Some((value, schema)) = old {
        bound.push(("oldSelf", Val::of(value, schema)));
    }
    matches!(Scope { bound }.eval(rule), Some(Val::Bool(true)))
}

/// Whether an admission `expression` surely holds with `variables` bound as untyped JSON;
/// `false` when it does not or this evaluator cannot tell (it reads no other variable).
pub(super) fn holds_untyped<'a>(expression: &'a IdedExpr, variables: &[(&'a str, &'a Value)]) -> bool {
    let bound = variables.iter().map(|(name, value)| (*name, Val::untyped(value))).collect();
    matches!(Scope { bound }.eval(expression), Some(Val::Bool(true)))
}

/// A value: a scalar, a node of the object (a list or an object, typed by its schema), or a
/// list the rule built.
#[derive(Debug, Clone)]
enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(Cow<'a, str>),
    /// Nanoseconds.
    Duration(i64),
    Node(&'a Value, &'a Schema),
    /// A list or an object without a schema: an object is a map.
    Json(&'a Value),
    List(Rc<Vec<Val<'a>>>),
    /// A value this evaluator does not model: present (for `has`), but no operation takes it.
    Unknown,
}

impl<'a> Val<'a> {
    /// A value of the object as `to_cel` types it.
    fn of(value: &'a Value, schema: &'a Schema) -> Val<'a> {
        match value {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => match (n.as_i64(), schema.has_type("number")) {
                (Some(i), false) if !n.is_f64() => Val::Int(i),
                _ => n.as_f64().map_or(Val::Unknown, Val::Double),
            },
            Value::String(s) => match schema.format {
                Some(Format::String(
                    StringFormat::DateTime | StringFormat::Date | StringFormat::Duration | StringFormat::Byte,
                )) => Val::Unknown,
                _ => Val::Str(Cow::Borrowed(s)),
            },
            Value::Array(_) => Val::Node(value, schema),
            Value::Object(_) if schema.embedded_resource => Val::Unknown,
            Value::Object(_) => Val::Node(value, schema),
        }
    }

    /// A value as admission expressions see JSON: integers as `int`, other numbers as
    /// `double`.
    fn untyped(value: &'a Value) -> Val<'a> {
        match value {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) if !n.is_f64() => Val::Int(i),
                _ => n.as_f64().map_or(Val::Unknown, Val::Double),
            },
            Value::String(s) => Val::Str(Cow::Borrowed(s)),
            Value::Array(_) | Value::Object(_) => Val::Json(value),
        }
    }

    /// The elements of a list, or the keys of a map, one at a time.
    fn elements(&self) -> Option<Elements<'a>> {
        Some(match self {
            Val::Node(Value::Array(items), schema) => Elements::Items(items.iter(), schema.items.as_deref()?),
            Val::Node(Value::Object(fields), schema) if is_map(schema) => Elements::Keys(fields.keys()),
            Val::Json(Value::Array(items)) => Elements::Untyped(items.iter()),
            Val::Json(Value::Object(fields)) => Elements::Keys(fields.keys()),
            Val::List(items) => Elements::Built(Rc::clone(items), 0),
            _ => return None,
        })
    }

    /// `self.field`: a property of an object by its CEL name (`foo__dash__bar` is `foo-bar`), or
    /// a map's key; `None` when absent.
    fn field(&self, name: &str) -> Option<Option<Val<'a>>> {
        if let Val::Json(Value::Object(fields)) = self {
            return Some(fields.get(name).map(Val::untyped));
        }
        let Val::Node(Value::Object(fields), schema) = self else { return None };
        if is_map(schema) {
            let child = schema.property(name)?;
            return Some(fields.get(name).map(|value| Val::of(value, child)));
        }
        let escaped = name.as_bytes().windows(2).any(|pair| pair == b"__");
        let key = if escaped { Cow::Owned(super::unescape(name)) } else { Cow::Borrowed(name) };
        // Whether `key` is the property CEL calls `name`: an escaped name must escape back to
        // itself, a plain one must be a property CEL does not rename.
        let names = |renamed: bool| if escaped { super::escape(&key).as_deref() == Some(name) } else { !renamed };
        match schema.property(&key) {
            Some(child) if names(child.renamed_in_cel) => Some(fields.get(&*key).map(|value| Val::of(value, child))),
            // A renamed property is not there under its name as written.
            Some(_) => (!escaped).then_some(None),
            // Not in the schema: absent, unless the object holds it anyway (the `cel` crate
            // reads such a field untyped).
            None => ((!escaped || names(true)) && !fields.contains_key(&*key)).then_some(None),
        }
    }
}

/// What a comprehension or `in` goes through.
enum Elements<'a> {
    Items(std::slice::Iter<'a, Value>, &'a Schema),
    Untyped(std::slice::Iter<'a, Value>),
    Keys(serde_json::map::Keys<'a>),
    Built(Rc<Vec<Val<'a>>>, usize),
}

impl<'a> Iterator for Elements<'a> {
    type Item = Val<'a>;

    fn next(&mut self) -> Option<Val<'a>> {
        match self {
            Elements::Items(items, schema) => items.next().map(|item| Val::of(item, schema)),
            Elements::Untyped(items) => items.next().map(Val::untyped),
            Elements::Keys(keys) => keys.next().map(|key| Val::Str(Cow::Borrowed(key))),
            Elements::Built(items, at) => {
                let item = items.get(*at).cloned();
                *at += 1;
                item
            }
        }
    }
}

/// The longest list a rule builds here (`map`, `filter`), each step copying it.
const LONGEST_BUILT: usize = 256;

/// String equality for the short names of variables, compared in place (a call to `memcmp`
/// costs more than these few bytes).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

fn is_map(schema: &Schema) -> bool {
    matches!(schema.additional_properties, Some(Additional::Schema(_)))
}

/// Scalar equality of two values of the same type; `None` where the `cel` crate decides.
fn equal(a: &Val<'_>, b: &Val<'_>) -> Option<bool> {
    Some(match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(a), Val::Bool(b)) => a == b,
        (Val::Int(a), Val::Int(b)) => a == b,
        (Val::Double(a), Val::Double(b)) => a == b,
        (Val::Str(a), Val::Str(b)) => a == b,
        (Val::Duration(a), Val::Duration(b)) => a == b,
        _ => return None,
    })
}

struct Scope<'a> {
    bound: Vec<(&'a str, Val<'a>)>,
}

impl<'a> Scope<'a> {
    fn eval(&mut self, e: &'a IdedExpr) -> Option<Val<'a>> {
        match &e.expr {
            Expr::Literal(literal) => Some(match literal {
                LiteralValue::Boolean(b) => Val::Bool(*b.inner()),
                LiteralValue::Int(i) => Val::Int(*i.inner()),
                LiteralValue::Double(d) => Val::Double(*d.inner()),
                LiteralValue::String(s) => Val::Str(Cow::Borrowed(s.inner())),
                LiteralValue::Null => Val::Null,
                LiteralValue::UInt(_) | LiteralValue::Bytes(_) => return None,
            }),
            Expr::Ident(name) => self.bound.iter().rev().find(|(n, _)| same(n, name)).map(|(_, v)| v.clone()),
            Expr::Select(select) => {
                let operand = self.eval(&select.operand)?;
                let found = operand.field(&select.field)?;
                if select.test { Some(Val::Bool(found.is_some())) } else { found }
            }
            Expr::List(list) if list.optional_indices.is_empty() => {
                let items = list.elements.iter().map(|item| self.eval(item)).collect::<Option<Vec<_>>>()?;
                Some(Val::List(Rc::new(items)))
            }
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            _ => None,
        }
    }

    fn bool(&mut self, e: &'a IdedExpr) -> Option<bool> {
        match self.eval(e)? {
            Val::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn call(&mut self, call: &'a CallExpr) -> Option<Val<'a>> {
        let op = Op::of(&call.func_name);
        match (op, call.target.as_deref(), call.args.as_slice()) {
            (Op::And, None, [a, b]) => Some(Val::Bool(self.bool(a)? && self.bool(b)?)),
            (Op::Or, None, [a, b]) => Some(Val::Bool(self.bool(a)? || self.bool(b)?)),
            (Op::Not, None, [a]) => Some(Val::Bool(!self.bool(a)?)),
            (Op::NotStrictlyFalse, None, [a]) => Some(Val::Bool(self.bool(a)?)),
            (Op::Conditional, None, [c, a, b]) => {
                if self.bool(c)? {
                    self.eval(a)
                } else {
                    self.eval(b)
                }
            }
            (Op::Size, None, [a]) | (Op::Size, Some(a), []) => size(&self.eval(a)?),
            (Op::Index, None, [a, i]) => {
                let (target, index) = (self.eval(a)?, self.eval(i)?);
                index_of(&target, &index)
            }
            (Op::In, None, [a, b]) => {
                let (item, range) = (self.eval(a)?, self.eval(b)?);
                let mut found = false;
                for element in range.elements()? {
                    found |= equal(&item, &element)?;
                }
                Some(Val::Bool(found))
            }
            (Op::Negate, None, [a]) => match self.eval(a)? {
                Val::Int(i) => i.checked_neg().map(Val::Int),
                Val::Double(d) => Some(Val::Double(-d)),
                _ => None,
            },
            (Op::Find, Some(target), [pattern]) => {
                let (Val::Str(text), Val::Str(pattern)) = (self.eval(target)?, self.eval(pattern)?) else {
                    return None;
                };
                let found = crate::compiling::pattern(&pattern).ok()?.find(&text).map(|m| m.as_str().to_string());
                Some(Val::Str(Cow::Owned(found.unwrap_or_default())))
            }
            (Op::Duration, None, [a]) => match self.eval(a)? {
                Val::Str(text) => duration(&text).map(Val::Duration),
                _ => None,
            },
            // `int(<string>)` of plain decimal digits; other conversions are the `cel` crate's.
            (Op::Int, None, [a]) => match self.eval(a)? {
                Val::Int(i) => Some(Val::Int(i)),
                Val::Str(text) => {
                    let digits = text.strip_prefix('-').unwrap_or(&text);
                    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                    plain.then(|| text.parse().ok().map(Val::Int)).flatten()
                }
                _ => None,
            },
            (Op::StartsWith | Op::EndsWith | Op::Contains | Op::Matches, Some(target), [arg]) => {
                let (Val::Str(text), Val::Str(arg)) = (self.eval(target)?, self.eval(arg)?) else { return None };
                Some(Val::Bool(match op {
                    Op::StartsWith => text.starts_with(&*arg),
                    Op::EndsWith => text.ends_with(&*arg),
                    Op::Contains => text.contains(&*arg),
                    _ => crate::compiling::pattern(&arg).ok()?.is_match(&text),
                }))
            }
            (Op::Binary(binary), None, [a, b]) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                binary.apply(&a, &b)
            }
            _ => None,
        }
    }

    fn comprehension(&mut self, c: &'a ComprehensionExpr) -> Option<Val<'a>> {
        if c.iter_var2.is_some() {
            return None;
        }
        let range = self.eval(&c.iter_range)?.elements()?;
        let init = self.eval(&c.accu_init)?;
        let depth = self.bound.len();
        self.bound.push((c.accu_var.as_str(), init));
        self.bound.push((c.iter_var.as_str(), Val::Null));
        let mut result = Some(());
        for item in range {
            if let Some(slot) = self.bound.last_mut() {
                slot.1 = item;
            }
            match self.bool(&c.loop_cond) {
                Some(true) => {}
                Some(false) => break,
                None => {
                    result = None;
                    break;
                }
            }
            let Some(step) = self.eval(&c.loop_step) else {
                result = None;
                break;
            };
            if let Some(accumulator) = self.bound.get_mut(depth) {
                accumulator.1 = step;
            }
        }
        self.bound.pop();
        let outcome = result.and_then(|()| self.eval(&c.result));
        self.bound.truncate(depth);
        outcome
    }
}

/// A duration of whole hours, minutes, seconds and milliseconds (`1h30m`, `250ms`), in
/// nanoseconds: the shapes Go's parser and the `cel` crate's read alike. Fractions, signs and
/// finer units are the `cel` crate's.
fn duration(text: &str) -> Option<i64> {
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let after = rest.get(digits..)?;
        let unit = [b"ms".as_slice(), b"h", b"m", b"s"].into_iter().find(|unit| after.starts_with(unit))?;
        rest = after.get(unit.len()..).filter(|_| digits > 0)?;
    }
    crdctl_model::go::parse_duration(text)
}

fn size(value: &Val<'_>) -> Option<Val<'static>> {
    let n = match value {
        Val::Str(s) => s.chars().count(),
        Val::Node(Value::Array(items), _) => items.len(),
        Val::Node(Value::Object(fields), schema) if is_map(schema) => fields.len(),
        Val::Json(Value::Array(items)) => items.len(),
        Val::Json(Value::Object(fields)) => fields.len(),
        Val::List(items) => items.len(),
        _ => return None,
    };
    i64::try_from(n).ok().map(Val::Int)
}

fn index_of<'a>(target: &Val<'a>, index: &Val<'a>) -> Option<Val<'a>> {
    match (target, index) {
        (Val::Node(Value::Array(items), schema), Val::Int(i)) => {
            let item = items.get(usize::try_from(*i).ok()?)?;
            Some(Val::of(item, schema.items.as_deref()?))
        }
        (Val::Node(Value::Object(fields), schema), Val::Str(key)) if is_map(schema) => {
            Some(Val::of(fields.get(&**key)?, schema.property(key)?))
        }
        (Val::Json(Value::Array(items)), Val::Int(i)) => items.get(usize::try_from(*i).ok()?).map(Val::untyped),
        (Val::Json(Value::Object(fields)), Val::Str(key)) => fields.get(&**key).map(Val::untyped),
        (Val::List(items), Val::Int(i)) => items.get(usize::try_from(*i).ok()?).cloned(),
        _ => None,
    }
}

/// The functions evaluated here. Operator names are matched byte by byte: this runs for every
/// call of every rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Not,
    NotStrictlyFalse,
    Conditional,
    Negate,
    Index,
    In,
    Size,
    StartsWith,
    EndsWith,
    Contains,
    Matches,
    Find,
    Int,
    Duration,
    Binary(Binary),
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binary {
    Equals,
    NotEquals,
    Less,
    LessEquals,
    Greater,
    GreaterEquals,
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

impl Op {
    fn of(name: &str) -> Op {
        match name.as_bytes() {
            [b'_', b'&', b'&', b'_'] => Op::And,
            [b'_', b'|', b'|', b'_'] => Op::Or,
            [b'!', b'_'] => Op::Not,
            [b'-', b'_'] => Op::Negate,
            [b'_', b'?', b'_', b':', b'_'] => Op::Conditional,
            [b'_', b'[', b'_', b']'] => Op::Index,
            [b'@', b'i', b'n'] => Op::In,
            [b'_', b'=', b'=', b'_'] => Op::Binary(Binary::Equals),
            [b'_', b'!', b'=', b'_'] => Op::Binary(Binary::NotEquals),
            [b'_', b'<', b'_'] => Op::Binary(Binary::Less),
            [b'_', b'<', b'=', b'_'] => Op::Binary(Binary::LessEquals),
            [b'_', b'>', b'_'] => Op::Binary(Binary::Greater),
            [b'_', b'>', b'=', b'_'] => Op::Binary(Binary::GreaterEquals),
            [b'_', b'+', b'_'] => Op::Binary(Binary::Add),
            [b'_', b'-', b'_'] => Op::Binary(Binary::Subtract),
            [b'_', b'*', b'_'] => Op::Binary(Binary::Multiply),
            [b'_', b'/', b'_'] => Op::Binary(Binary::Divide),
            [b'_', b'%', b'_'] => Op::Binary(Binary::Modulo),
            _ => match name {
                operators::NOT_STRICTLY_FALSE => Op::NotStrictlyFalse,
                "size" => Op::Size,
                "startsWith" => Op::StartsWith,
                "endsWith" => Op::EndsWith,
                "contains" => Op::Contains,
                "matches" => Op::Matches,
                "find" => Op::Find,
                "int" => Op::Int,
                "duration" => Op::Duration,
                _ => Op::Other,
            },
        }
    }
}

impl Binary {
    /// Comparisons and arithmetic on two values of one type.
    fn apply<'a>(self, a: &Val<'a>, b: &Val<'a>) -> Option<Val<'a>> {
        use std::cmp::Ordering;
        let ordering = match (a, b) {
            (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
            (Val::Double(x), Val::Double(y)) => x.partial_cmp(y),
            (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
            (Val::Duration(x), Val::Duration(y)) => Some(x.cmp(y)),
            _ => None,
        };
        let compared = |wanted: fn(Ordering) -> bool| Some(Val::Bool(wanted(ordering?)));
        match self {
            Binary::Equals => equal(a, b).map(Val::Bool),
            Binary::NotEquals => equal(a, b).map(|e| Val::Bool(!e)),
            Binary::Less => compared(Ordering::is_lt),
            Binary::LessEquals => compared(Ordering::is_le),
            Binary::Greater => compared(Ordering::is_gt),
            Binary::GreaterEquals => compared(Ordering::is_ge),
            arithmetic => arithmetic.compute(a, b),
        }
    }

    fn compute<'a>(self, a: &Val<'a>, b: &Val<'a>) -> Option<Val<'a>> {
        Some(match (self, a, b) {
            (Binary::Add, Val::Int(x), Val::Int(y)) => Val::Int(x.checked_add(*y)?),
            (Binary::Subtract, Val::Int(x), Val::Int(y)) => Val::Int(x.checked_sub(*y)?),
            (Binary::Multiply, Val::Int(x), Val::Int(y)) => Val::Int(x.checked_mul(*y)?),
            (Binary::Divide, Val::Int(x), Val::Int(y)) => Val::Int(x.checked_div(*y)?),
            (Binary::Modulo, Val::Int(x), Val::Int(y)) => Val::Int(x.checked_rem(*y)?),
            (Binary::Add, Val::Double(x), Val::Double(y)) => Val::Double(x + y),
            (Binary::Subtract, Val::Double(x), Val::Double(y)) => Val::Double(x - y),
            (Binary::Multiply, Val::Double(x), Val::Double(y)) => Val::Double(x * y),
            (Binary::Add, Val::Str(x), Val::Str(y)) => Val::Str(Cow::Owned(format!("{x}{y}"))),
            // Appending copies: past a long list the `cel` crate's evaluator builds it instead.
            (Binary::Add, Val::List(x), Val::List(y)) if x.len() < LONGEST_BUILT => {
                Val::List(Rc::new(x.iter().chain(y.iter()).cloned().collect()))
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::Generator;

    /// What ours says and what the `cel` crate gives for one rule, typed by the schema and
    /// untyped (as an admission expression reads the same JSON).
    struct Outcome {
        rule: String,
        ours: bool,
        theirs: String,
        ours_untyped: bool,
        theirs_untyped: String,
    }

    /// Every rule at every node of `value`, evaluated both ways. Transition rules see the same
    /// value as `oldSelf`.
    fn each_rule(value: &Value, schema: &Schema, out: &mut Vec<Outcome>) {
        for rule in &schema.rules {
            let Ok(compiled) = &rule.compiled else { continue };
            let old = compiled.uses_old_self.then_some((value, schema));
            let names: &[&str] = if old.is_some() { &["self", "oldSelf"] } else { &["self"] };
            let theirs = |convert: &dyn Fn() -> kube_cel::cel::Value| {
                super::super::LIBRARIES.with(|libraries| {
                    let mut scope = libraries.new_inner_scope();
                    for name in names {
                        scope.add_variable_from_value(*name, convert());
                    }
                    format!("{:?}", kube_cel::cel::Value::resolve(&compiled.program, &scope))
                })
            };
            let untyped: Vec<(&str, &Value)> = names.iter().map(|name| (*name, value)).collect();
            out.push(Outcome {
                rule: rule.source.rule.clone(),
                ours: holds(&compiled.program, (value, schema), old),
                theirs: theirs(&|| super::super::to_cel(value, schema)),
                ours_untyped: holds_untyped(&compiled.program, &untyped),
                theirs_untyped: theirs(&|| super::super::untyped(value)),
            });
        }
        match value {
            Value::Object(fields) => {
                for (name, child) in fields {
                    if let Some(child_schema) = schema.property(name) {
                        each_rule(child, child_schema, out);
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    if let Some(item_schema) = schema.items.as_deref() {
                        each_rule(item, item_schema, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// On objects made from every corpus schema, a rule ours says holds is one the `cel` crate's
    /// evaluator finds true, and ours decides most of them; the same with the object untyped.
    #[test]
    fn what_holds_here_holds_in_the_cel_crate() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");
        let (mut evaluated, mut decided, mut decided_untyped) = (0, 0, 0);
        for project in std::fs::read_dir(&root).unwrap() {
            for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
                let crd: Value = serde_saphyr::from_str(&text).unwrap();
                for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
                    let schema = Schema::new(&version["schema"]["openAPIV3Schema"]);
                    for seed in 0..20 {
                        let object = Generator::new(seed, 3).value(&schema, 0);
                        let mut rules = Vec::new();
                        each_rule(&object, &schema, &mut rules);
                        for outcome in rules {
                            evaluated += 1;
                            if outcome.ours {
                                decided += 1;
                                assert_eq!(outcome.theirs, "Ok(Bool(true))", "{} on {object}", outcome.rule);
                            }
                            if outcome.ours_untyped {
                                decided_untyped += 1;
                                let rule = &outcome.rule;
                                assert_eq!(outcome.theirs_untyped, "Ok(Bool(true))", "{rule} on {object}, untyped");
                            }
                        }
                    }
                }
            }
        }
        assert!(evaluated > 3_000 && decided * 2 > evaluated, "{decided} of {evaluated} decided here");
        assert!(decided_untyped * 2 > evaluated, "{decided_untyped} of {evaluated} decided here untyped");
    }

    #[test]
    fn the_core_of_cel_is_decided_here() {
        let schema = Schema::new(&serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string"}, "n": {"type": "integer"}, "ratio": {"type": "number"},
            "at": {"type": "string", "format": "date-time"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "dashed-name": {"type": "string"}, "if": {"type": "string"}}}));
        let object = serde_json::json!({"name": "web-1", "n": 3, "ratio": 0.5, "at": "2026-01-01T00:00:00Z",
            "items": [{"k": "a", "v": 1}, {"k": "b", "v": 2}], "labels": {"app": "web"}, "dashed-name": "d", "if": "i"});
        let decide = |rule: &str| holds(&crate::cel::parser::parse(rule).unwrap(), (&object, &schema), None);
        for rule in [
            "self.name.startsWith('web-') && self.name.endsWith('1') && self.name.contains('b-')",
            "self.name.matches('^[a-z]+-[0-9]$')",
            "self.n * 2 - 1 == 5 && self.n / 2 == 1 && self.n % 2 == 1 && -self.n < 0",
            "self.ratio + 0.5 == 1.0 && self.ratio < 1.0",
            "size(self.items) == 2 && self.items.size() == 2 && size(self.name) == 5",
            "self.items.all(i, i.v > 0) && self.items.exists(i, i.k == 'b') && self.items.exists_one(i, i.v == 2)",
            "size(self.items.map(i, i.v).filter(v, v > 1)) == 1 && self.items[1].k == 'b'",
            "has(self.labels) && !has(self.missing) && 'app' in self.labels && self.labels['app'] == 'web'",
            "self.n > 2 ? true : false",
            "'b' in self.items.map(i, i.k)",
            "self.name.find('[0-9]+') == '1' && self.name.find('z') == '' && int('-42') < int(self.n)",
            "self.dashed__dash__name == 'd' && !has(self.other__dash__name) && !has(self.__namespace__)",
            "self.__if__ == 'i' && !has(self.if)",
            "duration('1h30m') > duration('90s') && duration('250ms') == duration('250ms') && duration('0s') != duration('1m')",
        ] {
            assert!(decide(rule), "{rule}");
        }
        // Left to the `cel` crate: failures, errors, timestamps, mixed types, unknown functions.
        for rule in [
            "self.n == 4",
            "self.missing == 1",
            "self.at < timestamp('2030-01-01T00:00:00Z')",
            "self.n == 3.0",
            "isURL(self.name)",
            "self.n / 0 == 1",
            "self.items[5].k == 'a'",
            "int('+3') == 3",
            "int('x') == 0",
            "duration('1.5h') > duration('1h')",
            "duration('-1s') < duration('0s')",
            "duration('1h') > duration('1us')",
        ] {
            assert!(!decide(rule), "{rule}");
        }
    }
}

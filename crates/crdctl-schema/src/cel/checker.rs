//! What the API server's CEL checker finds in a rule before it accepts a CRD: references to
//! variables and fields the schema does not declare, and the rule's static cost — the most
//! work it can do on any object the schema admits, in cel-go's cost units. The cost is cel-go's
//! estimator (`checker/cost.go`) with the Kubernetes libraries' function costs
//! (`k8s.io/apiserver/pkg/cel/library/cost.go`) and the `sets` extension's.
//!
//! cel-go checks and estimates over a type-checked expression. The `cel` crate only parses, so
//! this module infers what it needs as it walks: each node's type (to tell `+` on strings from
//! `+` on lists, a list index from a map index, a declared field from an undefined one), its
//! path through the schema (`self.spec.rules.@items`, to look up `maxLength`/`maxItems`
//! bounds), and the sizes of the lists and maps the expression builds. Only what the inference
//! is sure of is an error: calls it does not model return `dyn`, which fits everything, and
//! cost what an unknown O(1) call costs upstream. `found no matching overload` is reported for
//! the operators, `size`, the string functions, index and `in`, when every operand's type is
//! known in full; other functions' argument types are not checked.
//!
//! Errors are placed as cel-go places them ([`super::source`]), so their text is upstream's.

use std::collections::HashMap;

use kube_cel::cel::common::ast::{
    ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, SelectExpr, operators,
};

use serde_json::Value;

use super::decl::{Decl, DeclKind};
use super::library::{self, Cost, result_type};
use super::source::{self, Anchor};
use super::types::{Kind, Library, TYPE_NAMES, Type, no_matching_overload};
use super::unescape;

/// A range of sizes or costs, as cel-go's `SizeEstimate` and `CostEstimate`; arithmetic
/// saturates at `u64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The least.
    pub min: u64,
    /// The most.
    pub max: u64,
}

/// `common.StringTraversalCostFactor`: visiting one byte of a string.
const STRING_TRAVERSAL: f64 = 0.1;
/// `common.RegexStringLengthCostFactor`: one byte of a pattern applied to one byte.
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
/// The longest pattern of a named format (`format.dns1123Label()`, …).
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
/// The longest format string.
const MAX_FORMAT_SIZE: u64 = 64;

impl Estimate {
    /// Exactly `n`.
    pub const fn fixed(n: u64) -> Estimate {
        Estimate { min: n, max: n }
    }

    /// Anything.
    pub const UNKNOWN: Estimate = Estimate { min: 0, max: u64::MAX };

    const fn between(min: u64, max: u64) -> Estimate {
        Estimate { min, max }
    }

    fn add(self, other: Estimate) -> Estimate {
        Estimate { min: self.min.saturating_add(other.min), max: self.max.saturating_add(other.max) }
    }

    fn multiply(self, other: Estimate) -> Estimate {
        Estimate { min: self.min.saturating_mul(other.min), max: self.max.saturating_mul(other.max) }
    }

    /// Times a cost per unit, rounded up (cel-go's `MultiplyByCostFactor`).
    fn times(self, factor: f64) -> Estimate {
        Estimate { min: times(self.min, factor), max: times(self.max, factor) }
    }

    fn union(self, other: Estimate) -> Estimate {
        Estimate { min: self.min.min(other.min), max: self.max.max(other.max) }
    }

    /// The empty union: what `union` starts from.
    const NOTHING: Estimate = Estimate { min: u64::MAX, max: 0 };
}

fn times(x: u64, factor: f64) -> u64 {
    const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;
    let x = x as f64;
    if x > 0.0 && factor > 0.0 && x > u64::MAX as f64 / factor {
        return u64::MAX;
    }
    let product = (x * factor).ceil();
    if product >= TWO_TO_64 { u64::MAX } else { product as u64 }
}

/// cel-go's `maxErrorsToReport`.
const MAX_ERRORS: usize = 100;

/// What the checker found in one expression.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The most one evaluation can cost.
    pub cost: Estimate,
    /// What the expression evaluates to: `Some(true)` a bool, `Some(false)` something else,
    /// `None` not known.
    pub is_bool: Option<bool>,
    /// The same for a string.
    pub is_string: Option<bool>,
    /// Errors, as cel-go displays them, in source order; empty when the expression checks.
    pub errors: Vec<String>,
    /// The type it evaluates to, as a schema would declare it (`dyn` when not known).
    pub output: Decl,
}

/// A variable an expression may read, and its type.
#[derive(Debug, Clone, Copy)]
pub struct Variable<'d> {
    /// Its name (`self`, `object`, …).
    pub name: &'d str,
    /// Its type; `None` for `dyn`, which fits everything.
    pub decl: Option<&'d Decl>,
    /// Whether it is an optional of that type (`oldSelf` with `optionalOldSelf`).
    pub optional: bool,
}

impl<'d> Variable<'d> {
    /// A variable of type `decl`.
    pub fn typed(name: &'d str, decl: &'d Decl) -> Variable<'d> {
        Variable { name, decl: Some(decl), optional: false }
    }

    /// A variable of type `dyn`.
    pub fn dynamic(name: &'d str) -> Variable<'d> {
        Variable { name, decl: None, optional: false }
    }
}

/// A schema rule's variables: `self` of type `root`, and `oldSelf`.
fn rule_variables(root: &Decl, old_self_optional: bool) -> [Variable<'_>; 2] {
    [Variable::typed("self", root), Variable { optional: old_self_optional, ..Variable::typed("oldSelf", root) }]
}

/// Checks `expression` (parsed from `source`) with `self` (and `oldSelf`) of type `root`.
pub fn check(expression: &IdedExpr, source: &str, root: &Decl, old_self_optional: bool) -> Checked {
    check_with(expression, source, &rule_variables(root, old_self_optional))
}

/// Checks `expression` (parsed from `source`) with `variables` declared.
pub fn check_with(expression: &IdedExpr, source: &str, variables: &[Variable<'_>]) -> Checked {
    let mut checker = Checker::new(variables, None);
    let node = checker.cost(expression);
    let reported = checker.problems.len();
    // Tokenizing the source to place problems is skipped when there are none.
    let positions = (reported > 0).then(|| source::Positions::of(source));
    // cel-go keeps the first 100 errors it finds, and shows them in source order.
    let mut located: Vec<(usize, String)> = checker
        .problems
        .into_iter()
        .take(MAX_ERRORS)
        .map(|problem| {
            let anchor = match &problem.place {
                Place::Select(field) => Anchor::Select(field),
                Place::Has => Anchor::Has,
                Place::Text => Anchor::Text,
                Place::Operator(op) => Anchor::Operator(op),
                Place::Call(name) => Anchor::Call(name),
                Place::Ident(name) => Anchor::Ident(name),
            };
            let offset = positions.as_ref().and_then(|p| p.find(anchor, problem.ordinal)).unwrap_or(0);
            (offset, source::display(source, offset, &problem.message))
        })
        .collect();
    located.sort_by_key(|(offset, _)| *offset);
    if reported > MAX_ERRORS {
        located.push((usize::MAX, format!("{} more errors were truncated", reported - MAX_ERRORS)));
    }
    let known = |kind: Kind| (node.ty != Type::Dyn).then_some(node.ty.kind() == kind);
    Checked {
        cost: node.cost,
        is_bool: known(Kind::Bool),
        is_string: known(Kind::String),
        errors: located.into_iter().map(|(_, text)| text).collect(),
        output: node.ty.decl(),
    }
}

/// The most one evaluation of `expression` can cost with `self` being `value`: the estimate with
/// the sizes of this value's strings, lists and maps in place of the schema's bounds. cel-go
/// counts the steps its evaluation takes, which can be fewer (`exists` stops at the first
/// match); this is the bound the estimate guarantees.
pub fn cost_for(
    expression: &IdedExpr,
    root: &Decl,
    old_self_optional: bool,
    value: &Value,
    old: Option<&Value>,
) -> u64 {
    Checker::new(&rule_variables(root, old_self_optional), Some((value, old))).cost(expression).cost.max
}

/// The values sizes are taken from: `self`, and `oldSelf` on updates.
type Actual<'v> = (&'v Value, Option<&'v Value>);

/// The largest `size()` of the values at `steps` below `value` (field names as CEL spells them,
/// `@items`, `@keys`, `@values`); absent fields have none.
fn largest(value: &Value, steps: &[String]) -> Option<u64> {
    let Some((step, rest)) = steps.split_first() else {
        return Some(match value {
            Value::String(s) => s.chars().count() as u64,
            Value::Array(items) => items.len() as u64,
            Value::Object(fields) => fields.len() as u64,
            _ => 0,
        });
    };
    let most = |values: &mut dyn Iterator<Item = &Value>| values.filter_map(|v| largest(v, rest)).max().unwrap_or(0);
    match (step.as_str(), value) {
        ("@items" | "@values", Value::Array(items)) => Some(most(&mut items.iter())),
        ("@items" | "@values", Value::Object(fields)) => Some(most(&mut fields.values())),
        ("@keys", Value::Object(fields)) if rest.is_empty() => {
            Some(fields.keys().map(|k| k.chars().count() as u64).max().unwrap_or(0))
        }
        ("@indices", Value::Array(_)) if rest.is_empty() => Some(0),
        (field, Value::Object(fields)) => fields.get(&unescape(field)).map_or(Some(0), |v| largest(v, rest)),
        _ => None,
    }
}

/// A node the checker refused, by its place among the nodes of the same name.
struct Problem {
    place: Place,
    ordinal: usize,
    message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Place {
    Select(String),
    /// The presence test `has()` builds, which cel-go places at the macro.
    Has,
    /// A string or bytes literal.
    Text,
    Ident(String),
    /// An operator, by its symbol.
    Operator(&'static str),
    /// A call, by the function's name (its last part for `sets.contains`).
    Call(String),
}

/// The sizes of a list's or map's entries, where the expression built it.
#[derive(Debug, Clone, Copy)]
struct Entries {
    list: bool,
    key: Estimate,
    value: Estimate,
}

impl Entries {
    fn union(a: Option<Entries>, b: Option<Entries>) -> Option<Entries> {
        let (a, b) = (a?, b?);
        Some(Entries { list: a.list, key: a.key.union(b.key), value: a.value.union(b.value) })
    }
}

/// A constant argument.
#[derive(Debug, Clone)]
enum Literal {
    /// An integer (`split`'s limit bounds its result).
    Int(i64),
    /// A string, and its place among the expression's string literals.
    Text(String, usize),
}

/// One estimated node: what it costs and what later nodes need to know of its value.
#[derive(Debug, Clone)]
struct Node<'d> {
    cost: Estimate,
    ty: Type<'d>,
    /// Where in the schema the value comes from: a variable, then field names, `@items`,
    /// `@keys`, `@values`. Empty when it is computed.
    path: Vec<String>,
    /// Its `size()`, when known.
    size: Option<Estimate>,
    entries: Option<Entries>,
    /// What a literal is, for the calls that look at constant arguments.
    literal: Option<Literal>,
}

impl<'d> Node<'d> {
    fn size_or_unknown(&self) -> Estimate {
        self.size.unwrap_or(Estimate::UNKNOWN)
    }
}

#[derive(Debug, Clone)]
struct Local<'d> {
    name: String,
    ty: Type<'d>,
    path: Vec<String>,
    size: Option<Estimate>,
    entries: Option<Entries>,
}

/// The overloads whose costs differ; every other overload is an O(1) call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overload {
    IndexList,
    IndexMap,
    AddString,
    AddBytes,
    AddList,
    /// `<`, `<=`, `>`, `>=` on strings or bytes.
    CompareText,
    Equals,
    InList,
    Matches,
    ContainsString,
    StartsOrEndsWith,
    Logical,
    Conditional,
    StringToBytes,
    BytesToString,
    Format,
    Quote,
    /// `<cidr>.ip()`.
    CidrIp,
    /// `containsIP` / `containsCIDR` given a string rather than a parsed value.
    ContainsParsedFromString,
    Constant,
}

struct Checker<'d> {
    variables: &'d [Variable<'d>],
    /// The values sizes are taken from, instead of the schema's bounds.
    actual: Option<Actual<'d>>,
    locals: Vec<Local<'d>>,
    /// How many selections and identifiers of each name have been visited, in source order.
    seen: HashMap<Place, usize>,
    problems: Vec<Problem>,
}

impl<'d> Checker<'d> {
    fn new(variables: &'d [Variable<'d>], actual: Option<Actual<'d>>) -> Checker<'d> {
        Checker { variables, actual, locals: Vec::new(), seen: HashMap::new(), problems: Vec::new() }
    }

    fn variable(&self, name: &str) -> Option<&Variable<'d>> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// Counts a visit of `place`; a `message` makes it an error.
    fn visit(&mut self, place: Place, message: Option<String>) {
        let ordinal = self.count(place.clone());
        if let Some(message) = message {
            self.problems.push(Problem { place, ordinal, message });
        }
    }

    /// Counts a visit of `place`, returning its place among its namesakes.
    fn count(&mut self, place: Place) -> usize {
        let count = self.seen.entry(place).or_default();
        *count += 1;
        *count - 1
    }

    fn local(&self, name: &str) -> Option<&Local<'d>> {
        self.locals.iter().rev().find(|l| l.name == name)
    }

    fn push(&mut self, name: &str, ty: Type<'d>, path: Vec<String>, size: Option<Estimate>, entries: Option<Entries>) {
        self.locals.push(Local { name: name.to_string(), ty, path, size, entries });
    }

    fn pop(&mut self) {
        self.locals.pop();
    }

    /// The declared bound of the value at `path` (the `sizeEstimator` over the rule's root
    /// type), or the size in the actual value: the variable is the root, whatever its name.
    fn declared_size(&self, path: &[String]) -> Option<Estimate> {
        let (variable, steps) = path.split_first()?;
        if let Some((value, old)) = self.actual {
            let most = largest(value, steps).max(old.and_then(|old| largest(old, steps)));
            return most.map(|most| Estimate::between(0, most));
        }
        let mut node = self.variable(variable)?.decl?;
        for step in steps {
            node = match (step.as_str(), &node.kind) {
                ("@items" | "@values", _) => node.element()?,
                // Map keys are strings of no declared bound.
                ("@keys", DeclKind::Map(_)) => return Some(Estimate::fixed(0)),
                (field, DeclKind::Object(fields)) => fields.get(field)?,
                _ => return None,
            };
        }
        Some(Estimate::between(0, node.max_elements))
    }

    /// cel-go's `computeSize` for a value it did not compute: the schema's bound, one for
    /// scalars, else what the local variable was bound to.
    fn size(&self, path: &[String], ty: &Type<'d>, local: Option<Estimate>) -> Option<Estimate> {
        self.declared_size(path).or_else(|| ty.is_scalar().then_some(Estimate::fixed(1))).or(local)
    }

    fn leaf(&self, cost: Estimate, ty: Type<'d>, path: Vec<String>) -> Node<'d> {
        let size = self.size(&path, &ty, None);
        Node { cost, ty, path, size, entries: None, literal: None }
    }

    fn cost(&mut self, e: &IdedExpr) -> Node<'d> {
        match &e.expr {
            Expr::Literal(literal) => self.literal(literal),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => self.select(select),
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args),
            Expr::List(list) => self.list(&list.elements),
            Expr::Map(map) => self.map(&map.entries),
            Expr::Struct(fields) => {
                let mut cost = Estimate::fixed(STRUCT_CREATE);
                for entry in &fields.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.add(self.cost(&field.value).cost);
                    }
                }
                Node { cost, ty: Type::Dyn, path: Vec::new(), size: None, entries: None, literal: None }
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Unspecified => Node {
                cost: Estimate::fixed(0),
                ty: Type::Dyn,
                path: Vec::new(),
                size: None,
                entries: None,
                literal: None,
            },
        }
    }

    fn literal(&mut self, literal: &LiteralValue) -> Node<'d> {
        let mut node = literal_node(literal);
        if matches!(literal, LiteralValue::String(_) | LiteralValue::Bytes(_)) {
            let ordinal = self.seen.get(&Place::Text).copied().unwrap_or(0);
            self.visit(Place::Text, None);
            if let LiteralValue::String(text) = literal {
                node.literal = Some(Literal::Text(text.inner().to_string(), ordinal));
            }
        }
        node
    }

    fn select(&mut self, select: &SelectExpr) -> Node<'d> {
        let operand = self.cost(&select.operand);
        let undefined = match &operand.ty {
            Type::Object(fields) if !fields.contains_key(&select.field) => {
                Some(format!("undefined field '{}'", select.field))
            }
            _ => None,
        };
        // The `.field` of `has(x.field)` is in the source too, but cel-go reports the presence
        // test at the macro.
        if select.test {
            self.visit(Place::Select(select.field.clone()), None);
            self.visit(Place::Has, undefined);
            // `has()`: Kubernetes counts presence tests as free.
            return Node {
                cost: operand.cost,
                ty: Type::Bool,
                path: Vec::new(),
                size: Some(Estimate::fixed(1)),
                entries: None,
                literal: None,
            };
        }
        self.visit(Place::Select(select.field.clone()), undefined);
        let mut cost = operand.cost;
        if matches!(operand.ty, Type::Map(..) | Type::Object(_)) {
            cost = cost.add(Estimate::fixed(1));
        }
        let ty = match &operand.ty {
            Type::Object(fields) => fields.get(&select.field).map_or(Type::Dyn, Type::of),
            Type::Map(_, value) => (**value).clone(),
            _ => Type::Dyn,
        };
        let mut path = operand.path;
        path.push(select.field.clone());
        self.leaf(cost, ty, path)
    }

    fn list(&mut self, elements: &[IdedExpr]) -> Node<'d> {
        let mut cost = Estimate::fixed(LIST_CREATE);
        let mut item_size = if elements.is_empty() { Estimate::fixed(0) } else { Estimate::NOTHING };
        let mut item_type = Type::Dyn;
        for element in elements {
            let node = self.cost(element);
            cost = cost.add(node.cost);
            item_size = item_size.union(node.size_or_unknown());
            item_type = item_type.join(node.ty);
        }
        let entries = Entries { list: true, key: Estimate::fixed(1), value: item_size };
        let size = Some(Estimate::fixed(elements.len() as u64));
        Node {
            cost,
            ty: Type::List(Box::new(item_type)),
            path: Vec::new(),
            size,
            entries: Some(entries),
            literal: None,
        }
    }

    fn map(&mut self, map_entries: &[IdedEntryExpr]) -> Node<'d> {
        let empty = map_entries.is_empty();
        let start = if empty { Estimate::fixed(0) } else { Estimate::NOTHING };
        let (mut key_size, mut value_size, mut cost) = (start, start, Estimate::fixed(MAP_CREATE));
        let (mut key_type, mut value_type) = (Type::Dyn, Type::Dyn);
        for entry in map_entries {
            if let EntryExpr::MapEntry(entry) = &entry.expr {
                let key = self.cost(&entry.key);
                let value = self.cost(&entry.value);
                cost = cost.add(key.cost).add(value.cost);
                key_size = key_size.union(key.size_or_unknown());
                value_size = value_size.union(value.size_or_unknown());
                key_type = key_type.join(key.ty);
                value_type = value_type.join(value.ty);
            }
        }
        let entries = Entries { list: false, key: key_size, value: value_size };
        let ty = Type::Map(Box::new(key_type), Box::new(value_type));
        let size = Some(Estimate::fixed(map_entries.len() as u64));
        Node { cost, ty, path: Vec::new(), size, entries: Some(entries), literal: None }
    }

    /// cel-go's literal validators: a constant pattern, duration or timestamp must be valid.
    fn check_literal_argument(&mut self, function: &str, first: Option<&Node<'d>>) {
        let Some(Literal::Text(text, ordinal)) = first.and_then(|arg| arg.literal.as_ref()) else { return };
        let valid = match function {
            "matches" => crate::compiling::syntax(text).is_ok(),
            "duration" => super::duration(text).is_some(),
            "timestamp" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
            _ => return,
        };
        if !valid {
            let message = format!("invalid {function} argument");
            self.problems.push(Problem { place: Place::Text, ordinal: *ordinal, message });
        }
    }

    /// The namespace a call's target names, when it is not a variable (`sets`, `strings`, …).
    fn namespace<'e>(&self, target: &'e IdedExpr) -> Option<&'e str> {
        match &target.expr {
            Expr::Ident(name) if self.local(name).is_none() && !matches!(name.as_str(), "self" | "oldSelf") => {
                Some(name)
            }
            _ => None,
        }
    }

    fn ident(&mut self, name: &str) -> Node<'d> {
        let one = Estimate::fixed(1);
        let declared = self.local(name).is_some() || self.variable(name).is_some() || TYPE_NAMES.contains(&name);
        let undeclared = (!declared).then(|| format!("undeclared reference to '{name}'"));
        self.visit(Place::Ident(name.to_string()), undeclared);
        if let Some(local) = self.local(name) {
            let size = self.size(&local.path, &local.ty, local.size);
            return Node {
                cost: one,
                ty: local.ty.clone(),
                path: local.path.clone(),
                size,
                entries: local.entries,
                literal: None,
            };
        }
        let ty = match self.variable(name) {
            Some(Variable { decl: Some(decl), optional: true, .. }) => Type::Optional(Box::new(Type::of(decl))),
            Some(Variable { decl: Some(decl), .. }) => Type::of(decl),
            _ => Type::Dyn,
        };
        self.leaf(one, ty, vec![name.to_string()])
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Node<'d> {
        let range = self.cost(&c.iter_range);
        let init = self.cost(&c.accu_init);
        let is_bind = matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
            && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
            && !matches!(c.accu_var.as_str(), "__result__" | "@result");
        let mut cost = range.cost.add(init.cost);
        self.push(&c.accu_var, init.ty.clone(), init.path.clone(), init.size, init.entries);
        if is_bind {
            // `cel.bind(name, value, body)`: the body once, with the name bound to the value.
            let result = self.cost(&c.result);
            self.pop();
            return Node { cost: cost.add(result.cost), ..result };
        }
        let container_is_list = range.entries.map_or(matches!(range.ty, Type::List(_)), |e| e.list);
        let (key_step, value_step) = if container_is_list { ("@indices", "@items") } else { ("@keys", "@values") };
        let with = |step: &str| {
            let mut path = range.path.clone();
            path.push(step.to_string());
            path
        };
        let iteration_variables = if c.iter_var2.is_some() { 2 } else { 1 };
        match &c.iter_var2 {
            Some(second) => {
                let key_type = if container_is_list { Type::Int } else { range.ty.element() };
                let value_type = match &range.ty {
                    Type::List(item) | Type::Map(_, item) => (**item).clone(),
                    _ => Type::Dyn,
                };
                self.push(&c.iter_var, key_type, with(key_step), range.entries.map(|e| e.key), None);
                self.push(second, value_type, with(value_step), range.entries.map(|e| e.value), None);
            }
            None => {
                let size = range.entries.map(|e| if container_is_list { e.value } else { e.key });
                let step = if container_is_list { "@items" } else { "@keys" };
                self.push(&c.iter_var, range.ty.element(), with(step), size, None);
            }
        }
        let condition = self.cost(&c.loop_cond);
        let step = self.cost(&c.loop_step);
        // The iteration variables go out of scope; the accumulator stays for the result.
        for _ in 0..iteration_variables {
            self.pop();
        }
        let mut result = self.cost(&c.result);
        self.pop();
        let count = range.size_or_unknown();
        cost = cost.add(result.cost).add(count.multiply(step.cost.add(condition.cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => result.size = init.size,
            Expr::List(_) | Expr::Map(_) => {
                result.size = Some(count);
                if step.entries.is_some() {
                    result.entries = step.entries;
                }
                result.ty = step.ty.join(result.ty);
            }
            _ => result.size = result.ty.is_scalar().then_some(Estimate::fixed(1)),
        }
        Node { cost, path: Vec::new(), ..result }
    }

    fn call(&mut self, function: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Node<'d> {
        // The parser reads `sets.contains(a, b)` as a method of a variable `sets`; the checker
        // resolves it to the function `sets.contains`.
        if let Some(namespace) = target.and_then(|t| self.namespace(t)) {
            self.visit(Place::Ident(namespace.to_string()), None);
            return self.call(&format!("{namespace}.{function}"), None, args);
        }
        // Nodes are visited in source order: the target, the operator or the call's `(`, then
        // the arguments (an infix operator between its first two). What a macro built has no
        // place in the source.
        let anchor = (!built_by_macro(args)).then(|| anchor(function));
        let target = target.map(|target| self.cost(target));
        let mut place = None;
        let mut nodes = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            if let Some((at, before)) = &anchor
                && *before == i
            {
                place = Some((at.clone(), self.count(at.clone())));
            }
            nodes.push(self.cost(arg));
        }
        if let (Some((at, _)), None) = (&anchor, &place) {
            place = Some((at.clone(), self.count(at.clone())));
        }
        let args = nodes;
        if let Some((place, ordinal)) = place
            && let Some(message) = no_matching_overload(function, target.as_ref().map(|t| &t.ty), &types(&args))
        {
            self.problems.push(Problem { place, ordinal, message });
        }
        if function == "dyn"
            && let [arg] = args.as_slice()
        {
            return Node { cost: arg.cost.add(Estimate::fixed(1)), ty: Type::Dyn, ..arg.clone() };
        }
        self.check_literal_argument(function, args.first());
        let mut cost = target.as_ref().map_or(Estimate::fixed(0), |t| t.cost);
        let ty = result_type(function, target.as_ref().map(|t| &t.ty), &types(&args));
        let mut function_cost = Estimate::NOTHING;
        let mut result_size: Option<Estimate> = None;
        let mut path = Vec::new();
        let mut entries = None;
        for overload in overloads(function, target.as_ref(), &args) {
            let (estimate, size, built) = self.function_cost(function, overload, target.as_ref(), &args);
            function_cost = function_cost.union(estimate);
            if let Some(size) = size {
                result_size = Some(result_size.map_or(size, |r| r.union(size)));
            }
            if built.is_some() {
                entries = built;
            }
            if let (Overload::IndexList | Overload::IndexMap, Some(list)) = (overload, args.first()) {
                result_size = list.entries.map(|e| e.value);
                path = list.path.clone();
                path.push(if overload == Overload::IndexList { "@items" } else { "@values" }.to_string());
            }
            if result_size.is_none() {
                result_size = self.size(&path, &ty, None);
            }
        }
        cost = cost.add(function_cost);
        Node { cost, ty, path, size: result_size, entries, literal: None }
    }

    /// One overload's cost (arguments included, target not), result size, and entry sizes of
    /// the list or map it builds.
    fn function_cost(
        &self,
        function: &str,
        overload: Overload,
        target: Option<&Node<'d>>,
        args: &[Node<'d>],
    ) -> (Estimate, Option<Estimate>, Option<Entries>) {
        let arguments = args.iter().fold(Estimate::fixed(0), |sum, a| sum.add(a.cost));
        let with_arguments = |(cost, size): (Estimate, Option<Estimate>)| (cost.add(arguments), size, None);
        if let Some(estimate) = self.library_cost(function, overload, target, args) {
            return with_arguments(estimate);
        }
        let size = |i: usize| args.get(i).map_or(Estimate::UNKNOWN, Node::size_or_unknown);
        let one = Estimate::fixed(1);
        match (overload, target, args) {
            (Overload::Format, Some(target), _) => {
                with_arguments((target.size_or_unknown().times(STRING_TRAVERSAL), None))
            }
            (Overload::StringToBytes, _, [arg]) => {
                let sz = arg.size_or_unknown();
                let result = Estimate::between(sz.min, sz.max.saturating_mul(4));
                with_arguments((sz.times(STRING_TRAVERSAL), Some(result)))
            }
            (Overload::BytesToString, _, [arg]) => {
                let sz = arg.size_or_unknown();
                with_arguments((sz.times(STRING_TRAVERSAL), Some(Estimate::between(sz.min / 4, sz.max))))
            }
            (Overload::Quote, _, [arg]) => {
                let sz = arg.size_or_unknown();
                let result = Estimate::between(sz.min + 2, sz.max.saturating_mul(2).saturating_add(2));
                with_arguments((sz.times(STRING_TRAVERSAL), Some(result)))
            }
            (Overload::StartsOrEndsWith, _, [arg]) => {
                with_arguments((arg.size_or_unknown().times(STRING_TRAVERSAL), None))
            }
            (Overload::InList, _, [_, list]) => with_arguments((list.size_or_unknown().times(1.0), None)),
            (Overload::Matches, Some(target), [_]) => {
                let text = target.size_or_unknown().add(one).times(STRING_TRAVERSAL);
                let pattern = size(0).times(REGEX_LENGTH);
                with_arguments((text.multiply(pattern), None))
            }
            (Overload::ContainsString, Some(target), [_]) => {
                let text = target.size_or_unknown().times(STRING_TRAVERSAL);
                with_arguments((text.multiply(size(0).times(STRING_TRAVERSAL)), None))
            }
            (Overload::Logical, _, [lhs, rhs]) => {
                (Estimate::between(lhs.cost.min, lhs.cost.add(rhs.cost).max), None, None)
            }
            (Overload::Conditional, _, [condition, yes, no]) => {
                let size = yes.size_or_unknown().union(no.size_or_unknown());
                let cost = condition.cost.add(yes.cost.union(no.cost));
                (cost, Some(size), Entries::union(yes.entries, no.entries))
            }
            (Overload::AddString | Overload::AddBytes | Overload::AddList, _, [lhs, rhs]) => {
                let result = lhs.size_or_unknown().add(rhs.size_or_unknown());
                let entries = Entries::union(lhs.entries, rhs.entries);
                let cost = if overload == Overload::AddList { one } else { result.times(STRING_TRAVERSAL) };
                (cost.add(arguments), Some(result), entries)
            }
            (Overload::CompareText | Overload::Equals, _, [lhs, rhs]) => {
                let smallest = lhs.size_or_unknown().max.min(rhs.size_or_unknown().max);
                let cost = Estimate::between(u64::from(smallest > 0), smallest).times(STRING_TRAVERSAL);
                with_arguments((cost, None))
            }
            _ => with_arguments((one, None)),
        }
    }

    /// The estimate of the function's row in [`super::library`] (the Kubernetes libraries' and
    /// the `sets` extension's), and of equality between library values; `None` leaves the call
    /// to cel-go's own rules.
    fn library_cost(
        &self,
        function: &str,
        overload: Overload,
        target: Option<&Node<'d>>,
        args: &[Node<'d>],
    ) -> Option<(Estimate, Option<Estimate>)> {
        let one = Estimate::fixed(1);
        let first = args.first().map(Node::size_or_unknown);
        let scan = |size: Estimate| size.times(STRING_TRAVERSAL);
        if function == operators::EQUALS {
            return library_equality(args);
        }
        Some(match library::function(function)?.cost {
            Cost::Standard => return None,
            Cost::One => (one, None),
            Cost::ScanFirst => (scan(first?), None),
            Cost::ScanFirstSized => (scan(first?), first),
            Cost::ScanTargetSized => {
                let size = target?.size_or_unknown();
                (scan(size), Some(size))
            }
            Cost::ScanFirstTwice => (first?.times(2.0 * STRING_TRAVERSAL), None),
            Cost::Ip if overload == Overload::CidrIp => (one, None),
            Cost::Ip => (scan(first?), None),
            Cost::Sets(factor) => {
                let [a, b] = args else { return None };
                (a.size_or_unknown().multiply(b.size_or_unknown()).times(factor).add(one), None)
            }
            cost @ (Cost::Elements | Cost::Includes) => {
                let target = target?;
                match &target.ty {
                    Type::List(item) => {
                        let mut element = one;
                        if matches!(**item, Type::String | Type::Bytes) {
                            element = element.add(scan(self.element_size(target)));
                        }
                        (target.size_or_unknown().multiply(element), None)
                    }
                    _ if cost == Cost::Includes => (target.size_or_unknown(), None),
                    _ => (scan(target.size_or_unknown()), None),
                }
            }
            Cost::Join => {
                let target = target?;
                let count = target.size_or_unknown();
                let mut size = match target.ty {
                    Type::List(_) => count.multiply(self.element_size(target)),
                    _ => Estimate::fixed(0),
                };
                if let Some(separator) = args.first() {
                    let separators = Estimate::between(count.min.saturating_sub(1), count.max.saturating_sub(1));
                    size = size.add(separator.size_or_unknown().multiply(separators));
                }
                (scan(size), Some(size))
            }
            Cost::Split => {
                let size = target?.size_or_unknown();
                let most = match args.get(1).and_then(|limit| limit.literal.as_ref()) {
                    Some(Literal::Int(limit)) => u64::try_from(*limit).unwrap_or(0),
                    _ => size.max,
                };
                (size.times(2.0 * STRING_TRAVERSAL), Some(Estimate::between(0, most)))
            }
            Cost::Replace => {
                let ([from, to, ..], Some(target)) = (args, target) else { return None };
                replace(target.size_or_unknown(), from.size_or_unknown(), to.size_or_unknown())
            }
            Cost::Find => {
                let (Some(target), Some(pattern)) = (target, first) else { return None };
                let size = target.size_or_unknown();
                let cost = scan(size.add(one)).multiply(pattern.times(REGEX_LENGTH));
                (cost, Some(Estimate::between(0, size.max)))
            }
            cost @ (Cost::ContainsIp | Cost::ContainsCidr) => {
                first?;
                let address = Estimate::between(4, 16);
                let mut estimate = scan(address.add(address));
                if cost == Cost::ContainsCidr {
                    estimate = estimate.add(scan(address)).add(one);
                }
                if overload == Overload::ContainsParsedFromString {
                    estimate = estimate.add(scan(first?));
                }
                (estimate, None)
            }
            Cost::NameFormat => (scan(first?).times(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH), None),
        })
    }

    /// The declared size of a list's elements (the library's `listElementNode`).
    fn element_size(&self, list: &Node<'d>) -> Estimate {
        let mut path = list.path.clone();
        path.push("@items".into());
        if list.path.is_empty() {
            return Estimate::UNKNOWN;
        }
        self.declared_size(&path).unwrap_or(Estimate::UNKNOWN)
    }
}

/// `replace`'s result: every occurrence of `from` replaced by `to`.
/// Equality of two values of one Kubernetes library type: formats and URLs compare as text,
/// the others in O(1); `None` for other operands.
fn library_equality(args: &[Node]) -> Option<(Estimate, Option<Estimate>)> {
    let one = Estimate::fixed(1);
    let [lhs, rhs] = args else { return None };
    match (&lhs.ty, &rhs.ty) {
        (Type::Library(a), Type::Library(b)) if a == b => Some(match a {
            Library::Format => (Estimate::between(1, MAX_FORMAT_SIZE).times(STRING_TRAVERSAL), None),
            Library::Url => {
                let size = rhs.size.map_or(one, |r| r.union(r));
                (Estimate::between(1, size.max).times(STRING_TRAVERSAL), None)
            }
            _ => (one, None),
        }),
        _ => None,
    }
}

fn replace(size: Estimate, from: Estimate, to: Estimate) -> (Estimate, Option<Estimate>) {
    let (mut count, mut retained) = (Estimate::fixed(0), Estimate::fixed(0));
    if from.min == 0 {
        count.max = if size.max < u64::MAX { size.max + 1 } else { size.max };
        retained.max = size.max;
    } else if to.max <= from.min {
        retained.max = size.max;
    } else {
        count.max = (size.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = if size.min < u64::MAX { size.min + 1 } else { size.min };
        retained.min = size.min;
    } else if from.max <= to.min {
        retained.min = size.min;
    } else {
        count.min = (size.min as f64 / from.max as f64).ceil() as u64;
    }
    let result = count.multiply(to).add(retained);
    (size.times(2.0 * STRING_TRAVERSAL), Some(result))
}

fn literal_node<'d>(literal: &LiteralValue) -> Node<'d> {
    let constant = match literal {
        LiteralValue::Int(i) => Some(Literal::Int(*i.inner())),
        _ => None,
    };
    let (ty, size) = match literal {
        LiteralValue::Boolean(_) => (Type::Bool, 1),
        LiteralValue::Bytes(b) => (Type::Bytes, b.inner().len() as u64),
        LiteralValue::Double(_) => (Type::Double, 1),
        LiteralValue::Int(_) => (Type::Int, 1),
        LiteralValue::Null => (Type::Null, 1),
        LiteralValue::String(s) => (Type::String, s.inner().chars().count() as u64),
        LiteralValue::UInt(_) => (Type::Uint, 1),
    };
    Node {
        cost: Estimate::fixed(0),
        ty,
        path: Vec::new(),
        size: Some(Estimate::fixed(size)),
        entries: None,
        literal: constant,
    }
}

/// The types of a call's arguments.
fn types<'a, 'd>(args: &'a [Node<'d>]) -> Vec<&'a Type<'d>> {
    args.iter().map(|a| &a.ty).collect()
}

/// Whether a call is one a macro built: an argument is the accumulator (which no source can
/// name) or another such call.
fn built_by_macro(args: &[IdedExpr]) -> bool {
    args.iter().any(|arg| match &arg.expr {
        Expr::Ident(name) => name.starts_with('@'),
        Expr::Call(call) => built_by_macro(&call.args),
        _ => false,
    })
}

/// Where cel-go places a call, and before which argument it comes in the source: an operator
/// at its symbol, a function at its `(`.
fn anchor(function: &str) -> (Place, usize) {
    let infix = |symbol: &'static str| (Place::Operator(symbol), 1);
    match function {
        operators::EQUALS => infix("=="),
        operators::NOT_EQUALS => infix("!="),
        operators::LESS => infix("<"),
        operators::LESS_EQUALS => infix("<="),
        operators::GREATER => infix(">"),
        operators::GREATER_EQUALS => infix(">="),
        operators::ADD => infix("+"),
        operators::SUBSTRACT => infix("-"),
        operators::MULTIPLY => infix("*"),
        operators::DIVIDE => infix("/"),
        operators::MODULO => infix("%"),
        operators::LOGICAL_AND => infix("&&"),
        operators::LOGICAL_OR => infix("||"),
        operators::CONDITIONAL => infix("?"),
        operators::INDEX => infix("["),
        operators::IN => infix("in"),
        operators::LOGICAL_NOT => (Place::Operator("!"), 0),
        operators::NEGATE => (Place::Operator("-"), 0),
        name => (Place::Call(name.rsplit('.').next().unwrap_or(name).to_string()), 0),
    }
}

/// The overloads a call may dispatch to, given what is known of its operands' types: more
/// than one where an operand is `dyn`, as the checker records.
fn overloads(function: &str, target: Option<&Node>, args: &[Node]) -> Vec<Overload> {
    let arg = |i: usize| args.get(i).map_or(Type::Dyn, |a| a.ty.clone());
    let binary = |candidates: &[(Kind, Overload)]| -> Vec<Overload> {
        let (a, b) = (arg(0), arg(1));
        let mut matching: Vec<Overload> =
            candidates.iter().filter(|(kind, _)| a.fits(kind) && b.fits(kind)).map(|(_, o)| *o).collect();
        // The numeric and time overloads, all O(1), fit unless an operand is known to be text
        // or a list.
        let textual = |t: &Type| candidates.iter().any(|(kind, _)| t.kind() == *kind);
        if !textual(&a) && !textual(&b) || matching.is_empty() {
            matching.insert(0, Overload::Constant);
        }
        matching
    };
    match function {
        operators::INDEX => match arg(0) {
            Type::List(_) => vec![Overload::IndexList],
            Type::Map(..) => vec![Overload::IndexMap],
            Type::Dyn => vec![Overload::IndexList, Overload::IndexMap],
            _ => vec![Overload::Constant],
        },
        operators::ADD => binary(&[
            (Kind::String, Overload::AddString),
            (Kind::Bytes, Overload::AddBytes),
            (Kind::List, Overload::AddList),
        ]),
        operators::LESS | operators::LESS_EQUALS | operators::GREATER | operators::GREATER_EQUALS => {
            binary(&[(Kind::String, Overload::CompareText), (Kind::Bytes, Overload::CompareText)])
        }
        operators::EQUALS | operators::NOT_EQUALS => vec![Overload::Equals],
        operators::IN => match arg(1) {
            Type::List(_) => vec![Overload::InList],
            Type::Dyn => vec![Overload::InList, Overload::Constant],
            _ => vec![Overload::Constant],
        },
        operators::LOGICAL_AND | operators::LOGICAL_OR => vec![Overload::Logical],
        operators::CONDITIONAL => vec![Overload::Conditional],
        "matches" if target.is_some() => vec![Overload::Matches],
        "contains" if target.is_some() => vec![Overload::ContainsString],
        "startsWith" | "endsWith" if target.is_some() => vec![Overload::StartsOrEndsWith],
        "bytes" if arg(0).fits(&Kind::String) => vec![Overload::StringToBytes],
        "string" if arg(0).fits(&Kind::Bytes) => vec![Overload::BytesToString],
        "format" if target.is_some() => vec![Overload::Format],
        "strings.quote" => vec![Overload::Quote],
        "ip" if target.is_some_and(|t| t.ty == Type::Library(Library::Cidr)) => vec![Overload::CidrIp],
        "containsIP" | "containsCIDR" if arg(0).fits(&Kind::String) => vec![Overload::ContainsParsedFromString],
        _ => vec![Overload::Constant],
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::Value;

    use super::*;
    use crate::Schema;

    #[derive(Deserialize)]
    struct Case {
        name: String,
        schema: Value,
        #[serde(default)]
        calc_cost: u64,
        #[serde(default)]
        calc_cost_exceeds: u64,
        max_elements: i64,
        #[serde(default)]
        set_cost: u64,
    }

    /// The schema with every `"$max"` bound set to `max`, or removed.
    fn bounded(schema: &Value, max: Option<i64>) -> Value {
        match schema {
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .filter_map(|(k, v)| match v {
                        Value::String(s) if s == "$max" => max.map(|m| (k.clone(), Value::from(m))),
                        v => Some((k.clone(), bounded(v, max))),
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| bounded(v, max)).collect()),
            other => other.clone(),
        }
    }

    fn cost_of(schema: &Value) -> u64 {
        let schema = Schema::new(schema);
        let decl = Decl::of(&schema, false).expect("a CEL type");
        let [rule] = schema.rules.as_slice() else { panic!("one rule") };
        let compiled = rule.compiled.as_ref().expect("the rule compiles");
        let checked = compiled.check(&rule.source, &decl);
        assert_eq!(checked.errors, Vec::<String>::new(), "{}", rule.source.rule);
        checked.cost.max
    }

    /// As cel-go: the first 100 errors, then how many more there were.
    #[test]
    fn errors_past_a_hundred_are_counted_not_shown() {
        let names: Vec<String> = (0..150).map(|i| format!("a{i}")).collect();
        let rule = format!("[{}].size() > 0", names.join(", "));
        let schema = Schema::new(&serde_json::json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
        let ([rule], Some(decl)) = (schema.rules.as_slice(), &schema.rule_type) else { panic!("one typed rule") };
        let errors = rule.compiled.as_ref().expect("the rule parses").check(&rule.source, decl).errors;
        assert_eq!(errors.len(), 101);
        assert!(errors[0].starts_with("ERROR: <input>:1:2: undeclared reference to 'a0'"), "{}", errors[0]);
        assert!(errors[99].starts_with("ERROR: <input>:1:"), "{}", errors[99]);
        assert!(errors[99].contains("undeclared reference to 'a99'"), "{}", errors[99]);
        assert_eq!(errors[100], "50 more errors were truncated");
    }

    #[test]
    fn upstream_cost_estimation_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/cel_cost_estimation.yaml");
        let cases: Vec<Case> =
            serde_saphyr::from_str(&std::fs::read_to_string(path).expect("the table")).expect("YAML");
        assert!(cases.len() >= 68, "the table lost cases");
        let mut problems = Vec::new();
        for case in &cases {
            let checks = [
                ("calc maxLength", None, case.calc_cost, case.calc_cost_exceeds),
                ("set maxLength", Some(case.max_elements), case.set_cost, 0),
            ];
            for (variant, max, expected, at_least) in checks {
                let cost = cost_of(&bounded(&case.schema, max));
                if expected > 0 && cost != expected {
                    problems.push(format!("{}/{variant}: cost {cost}, expected {expected}", case.name));
                }
                if at_least > 0 && cost < at_least {
                    problems.push(format!("{}/{variant}: cost {cost}, expected more than {at_least}", case.name));
                }
            }
        }
        assert!(problems.is_empty(), "{} of {} cases:\n{}", problems.len(), cases.len() * 2, problems.join("\n"));
    }
}

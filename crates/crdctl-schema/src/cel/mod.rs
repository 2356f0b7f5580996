//! `x-kubernetes-validations`: CEL rules compiled once per schema node, evaluated with `self`
//! (and `oldSelf` on updates) bound to the node's value, with the Kubernetes CEL libraries.
//!
//! Parsing and the libraries (lists, sets, regex, urls, quantity, ip/cidr, format, …) are the
//! `cel` and `kube-cel` crates; this module does what the API server's
//! `pkg/apiserver/schema/cel/validation.go` does around them: which nodes see an old value
//! (properties, and items of `x-kubernetes-list-type: map` lists by key; other list items are
//! not correlatable), when transition rules run, how values are typed (`number` is a double,
//! `date-time` a timestamp, `duration` a duration, `byte` bytes), and how a failed rule
//! becomes a field error (`message`, `messageExpression`, `reason`, `fieldPath`).
//!
//! Before a CRD is accepted, [`checker`] finds what the API server's type checker finds
//! (undeclared variables, undefined fields) and estimates the most a rule can cost on any object
//! the schema admits, with the types and bounds of [`decl`]. Not modelled:
//! cel-go's runtime cost tracking. Rules that pass the estimate run to completion; there is no
//! per-call or per-request runtime budget.

pub mod authorizer;
pub mod checker;
#[cfg(test)]
mod conformance;
pub mod decl;
mod fast;
mod library;
pub mod parser;
pub mod source;
mod types;

pub use self::authorizer::Requester;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::extractors::This;
use kube_cel::cel::parser::Expression;
use kube_cel::cel::{self, Context};
use serde::Deserialize;
use serde_json::Value;

use super::{Additional, Format, Schema, StringFormat, correlate};
use crdctl_model::field::Path;
use crdctl_model::field::{self, ErrorType};

/// One `x-kubernetes-validations` entry, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The entry as written.
    pub source: RuleSource,
    /// The compiled rule and message expression, or why they do not parse.
    pub compiled: Result<Arc<CompiledRule>, CompileError>,
    /// What checking the rule against its node's type found, once the node is typed.
    pub checked: Option<Checks>,
}

/// An `x-kubernetes-validations` entry's fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct RuleSource {
    pub rule: String,
    pub message: String,
    pub message_expression: String,
    pub reason: Option<String>,
    pub field_path: String,
    /// As written: upstream tells `false` from absent in messages.
    pub optional_old_self: Option<bool>,
}

impl RuleSource {
    /// Whether `oldSelf` is an optional, bound on creates too.
    pub fn optional_old_self(&self) -> bool {
        self.optional_old_self == Some(true)
    }
}

/// The checker's findings for a rule and its message expression.
#[derive(Debug, Clone)]
pub struct Checks {
    /// The rule's.
    pub rule: checker::Checked,
    /// The message expression's, if there is one.
    pub message: Option<checker::Checked>,
}

/// A rule or message expression that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// The rule: upstream's detail, `compilation failed: ERROR: <input>:…`.
    Rule(String),
    /// The message expression: `messageExpression compilation failed: …`.
    MessageExpression(String),
}

impl CompileError {
    /// Upstream's detail.
    pub fn detail(&self) -> &str {
        match self {
            CompileError::Rule(detail) | CompileError::MessageExpression(detail) => detail,
        }
    }
}

/// Parse errors as cel-go prints them (the `cel` crate's own display differs in the snippet).
fn parse_errors(source: &str, errors: &cel::ParseErrors) -> String {
    errors
        .errors
        .iter()
        .map(|e| {
            let (line, column) = e.pos;
            let line = usize::try_from(line).unwrap_or(1);
            let column = usize::try_from(column.saturating_sub(1)).unwrap_or(0);
            source::at_line(source, line, column, &e.msg)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A rule's programs: the parsed rule and message expression, which the `cel` crate evaluates.
pub struct CompiledRule {
    program: Expression,
    message: Option<Expression>,
    /// Whether the rule reads `oldSelf` (a transition rule).
    pub uses_old_self: bool,
}

impl CompiledRule {
    /// Checks the rule against the type of the node it is on (`decl`).
    pub fn check(&self, source: &RuleSource, decl: &decl::Decl) -> checker::Checked {
        checker::check(&self.program, &source.rule, decl, source.optional_old_self())
    }

    /// Checks the message expression, if there is one, as [`CompiledRule::check`].
    pub fn check_message(&self, source: &RuleSource, decl: &decl::Decl) -> Option<checker::Checked> {
        let program = self.message.as_ref()?;
        Some(checker::check(program, &source.message_expression, decl, source.optional_old_self()))
    }
}

impl std::fmt::Debug for CompiledRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledRule").field("uses_old_self", &self.uses_old_self).finish_non_exhaustive()
    }
}

/// A rule's programs, or why they do not parse: what [`crate::compiling`] shares.
pub(crate) type CompiledOnce = Result<Arc<CompiledRule>, CompileError>;

impl Rule {
    /// Compiles one entry of a node's `x-kubernetes-validations`.
    pub fn new(entry: &Value) -> Rule {
        let source = RuleSource::deserialize(entry).unwrap_or_default();
        let key = format!("{}\0{}", source.rule, source.message_expression);
        let compiled = crate::compiling::rule(key, || Rule::compile(entry));
        Rule { source, compiled, checked: None }
    }

    fn compile(entry: &Value) -> CompiledOnce {
        let text = |key: &str| entry.get(key).and_then(Value::as_str);
        let rule = text("rule").unwrap_or_default();
        let program = parser::parse(rule)
            .map_err(|errors| CompileError::Rule(format!("compilation failed: {}", parse_errors(rule, &errors))))?;
        let message = match text("messageExpression") {
            Some(expression) => Some(parser::parse(expression).map_err(|errors| {
                let detail = parse_errors(expression, &errors);
                CompileError::MessageExpression(format!("messageExpression compilation failed: {detail}"))
            })?),
            None => None,
        };
        let uses_old_self = program.references().has_variable("oldSelf");
        Ok(Arc::new(CompiledRule { program, message, uses_old_self }))
    }

    /// The most one evaluation can cost under the schema's bounds, when the rule checks.
    pub fn max_cost(&self) -> Option<u64> {
        let checked = &self.checked.as_ref()?.rule;
        (checked.errors.is_empty() && checked.is_bool != Some(false)).then_some(checked.cost.max)
    }

    /// The detail of a failed rule without a usable `messageExpression`.
    fn message_or_default(&self) -> String {
        if self.source.message.trim().is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.source.message.trim().to_string()
        }
    }

    /// How upstream names a rule in errors: its message, else its expression.
    fn error_string(&self) -> String {
        if self.source.message.trim().is_empty() {
            self.source.rule.trim().to_string()
        } else {
            self.source.message.trim().to_string()
        }
    }
}

thread_local! {
    /// The function libraries, registered once per thread (a `Context` is not `Sync`), with
    /// the regex functions compiling each pattern once (cel-go compiles constant patterns when
    /// it compiles the rule; the `cel` crate would compile them on every call).
    static LIBRARIES: Context<'static> = libraries();
    /// The same, and the `authorizer`'s functions, for admission expressions.
    static ADMISSION_LIBRARIES: Context<'static> = {
        let mut context = libraries();
        authorizer::register(&mut context);
        context
    };
    static PROGRAMS: std::cell::RefCell<HashMap<String, Arc<Admission>, foldhash::fast::RandomState>> = std::cell::RefCell::default();
}

fn libraries() -> Context<'static> {
    let mut context = Context::default().with_all();
    context.add_function("matches", matches);
    context.add_function("find", find);
    context.add_function("size", size);
    context
}

/// Evaluates `expression` — an admission `matchConditions` entry — with `variables` bound as
/// untyped JSON and the `authorizer` of `requester`: the boolean it yields, or why not.
pub fn evaluate_condition(
    expression: &str,
    variables: &[(&str, &Value)],
    requester: Option<&Requester>,
) -> Result<bool, String> {
    with_admission_scope(variables, requester, |scope| scope.check(expression))
}

/// Runs `body` with a scope for admission expressions (webhook `matchConditions`, policies):
/// `variables` bound as untyped JSON (`object`, `oldObject`, `request`, `params`, …), the
/// `authorizer` deciding as `requester`'s does (every check allowed without one), and the same
/// function libraries as the schema rules.
pub fn with_admission_scope<R>(
    variables: &[(&str, &Value)],
    requester: Option<&Requester>,
    body: impl FnOnce(&mut AdmissionScope<'_>) -> R,
) -> R {
    ADMISSION_LIBRARIES.with(|libraries| {
        let converted = Converted::new(variables, Some(requester));
        let mut context = libraries.new_inner_scope();
        context.set_variable_resolver(&converted);
        let mut scope = AdmissionScope { context, json: variables.to_vec(), locals: HashMap::new() };
        body(&mut scope)
    })
}

/// Variables bound as JSON (and the `authorizer`), each converted for the `cel` crate the first
/// time an expression it evaluates reads it: most expressions that hold are decided on the JSON
/// ([`fast`]), and most read neither every variable nor the `authorizer`.
struct Converted<'a> {
    variables: Vec<(&'a str, Bound<'a>, std::sync::OnceLock<cel::Value>)>,
}

/// What a variable is made from.
#[derive(Clone, Copy)]
enum Bound<'a> {
    Json(&'a Value),
    /// The `authorizer` of a requester (every check allowed without one).
    Authorizer(Option<&'a Requester>),
}

impl<'a> Converted<'a> {
    /// `variables`, and the `authorizer` when `authorizer` is given.
    fn new(variables: &[(&'a str, &'a Value)], authorizer: Option<Option<&'a Requester>>) -> Converted<'a> {
        let json = variables.iter().map(|(name, value)| (*name, Bound::Json(value)));
        let authorizer = authorizer.map(|requester| ("authorizer", Bound::Authorizer(requester)));
        let variables = json.chain(authorizer).map(|(name, bound)| (name, bound, std::sync::OnceLock::new())).collect();
        Converted { variables }
    }
}

impl cel::context::VariableResolver for Converted<'_> {
    fn resolve(&self, variable: &str) -> Option<cel::Value> {
        let (_, bound, converted) = self.variables.iter().find(|(name, ..)| *name == variable)?;
        let value = converted.get_or_init(|| match bound {
            Bound::Json(value) => untyped(value),
            Bound::Authorizer(requester) => authorizer::variable(*requester),
        });
        Some(value.clone())
    }
}

/// A scope of [`with_admission_scope`]: named `variables` defined in order, then expressions
/// evaluated against everything bound.
pub struct AdmissionScope<'a> {
    context: Context<'a>,
    /// Every variable bound as JSON, outer scopes' first.
    json: Vec<(&'a str, &'a Value)>,
    locals: HashMap<cel::objects::Key, cel::Value>,
}

impl AdmissionScope<'_> {
    /// Evaluates `expression` and binds it as `variables.<name>` for the expressions after it.
    pub fn define(&mut self, name: &str, expression: &str) -> Result<(), String> {
        let value = self.evaluate(expression)?;
        self.locals.insert(cel::objects::Key::String(Arc::new(name.to_string())), value);
        let map = cel::objects::Map { map: Arc::new(self.locals.clone()) };
        self.context.add_variable_from_value("variables", cel::Value::Map(map));
        Ok(())
    }

    /// Runs `body` in a scope inside this one with `variables` bound too (a policy's
    /// parameters), and no `variables.<name>` of its own yet.
    pub fn inner<R>(&self, variables: &[(&str, &Value)], body: impl FnOnce(&mut AdmissionScope<'_>) -> R) -> R {
        let converted = Converted::new(variables, None);
        let mut context = self.context.new_inner_scope();
        context.set_variable_resolver(&converted);
        let json = self.json.iter().chain(variables).copied().collect();
        body(&mut AdmissionScope { context, json, locals: HashMap::new() })
    }

    /// The boolean `expression` yields.
    pub fn check(&self, expression: &str) -> Result<bool, String> {
        let compiled = compiled(expression)?;
        if fast::holds_untyped(&compiled.program, &self.json) {
            return Ok(true);
        }
        match self.resolve(&compiled.program)? {
            cel::Value::Bool(result) => Ok(result),
            other => Err(format!("expression must evaluate to bool, got {}", other.type_of())),
        }
    }

    /// The string `expression` yields (a `messageExpression`, an audit annotation).
    pub fn string(&self, expression: &str) -> Result<String, String> {
        match self.evaluate(expression)? {
            cel::Value::String(text) => Ok(text.to_string()),
            other => Err(format!("must evaluate to string, got {}", other.type_of())),
        }
    }

    /// What `expression` yields when it should be a string or `null` (an audit annotation's
    /// value): the string, `None` for `null`, or the name of the type it has instead.
    pub fn string_or_null(&self, expression: &str) -> Result<Result<Option<String>, String>, String> {
        Ok(match self.evaluate(expression)? {
            cel::Value::String(text) => Ok(Some(text.to_string())),
            cel::Value::Null => Ok(None),
            other => Err(other.type_of().to_string()),
        })
    }

    fn evaluate(&self, expression: &str) -> Result<cel::Value, String> {
        self.resolve(&compiled(expression)?.program)
    }

    fn resolve(&self, program: &Expression) -> Result<cel::Value, String> {
        cel::Value::resolve(program, &self.context).map_err(|err| err.to_string())
    }
}

/// Checks an admission expression (a policy's validation, message expression or variable)
/// with `variables` declared, as upstream's policy type checker does: cel-go's issues, a
/// parse error's included, in its words.
pub fn check_admission(expression: &str, variables: &[checker::Variable<'_>]) -> checker::Checked {
    match parser::parse(expression) {
        Ok(program) => checker::check_with(&program, expression, variables),
        Err(errors) => checker::Checked {
            cost: checker::Estimate::UNKNOWN,
            is_bool: None,
            is_string: None,
            errors: vec![parse_errors(expression, &errors)],
            output: decl::Decl { kind: decl::DeclKind::Dyn, max_elements: 0, min_serialized_size: 0 },
        },
    }
}

/// JSON without a schema, as upstream's admission CEL sees an unstructured object: integers
/// as `int`, other numbers as `double`, objects as maps with their keys as written.
fn untyped(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) if !n.is_f64() => cel::Value::Int(i),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel_string(s),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(untyped).collect())),
        Value::Object(fields) => {
            let map =
                fields.iter().map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), untyped(v))).collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// An admission expression, compiled, and the variables it reads.
struct Admission {
    program: Expression,
    variables: Vec<String>,
}

/// `expression` compiled, once per thread: admission expressions run on every write.
fn compiled(expression: &str) -> Result<Arc<Admission>, String> {
    PROGRAMS.with(|cache| {
        if let Some(compiled) = cache.borrow().get(expression) {
            return Ok(Arc::clone(compiled));
        }
        let program = parser::parse(expression).map_err(|err| format!("compilation failed: {err}"))?;
        let variables = program.references().variables().into_iter().map(str::to_string).collect();
        let compiled = Arc::new(Admission { program, variables });
        let mut cache = cache.borrow_mut();
        if cache.len() >= PROGRAM_CACHE {
            cache.clear();
        }
        cache.insert(expression.to_string(), Arc::clone(&compiled));
        Ok(compiled)
    })
}

/// Which of `variables` any of `expressions` reads: what an admission scope needs bound (the
/// values are converted for CEL on every request, and some cost a read to produce).
pub fn reads<'e, const N: usize>(expressions: impl Iterator<Item = &'e str>, variables: [&str; N]) -> [bool; N] {
    let mut read = [false; N];
    for compiled in expressions.filter_map(|expression| compiled(expression).ok()) {
        for (read, variable) in read.iter_mut().zip(variables) {
            *read |= compiled.variables.iter().any(|v| v == variable);
        }
    }
    read
}

/// At most this many compiled admission expressions are kept per thread.
const PROGRAM_CACHE: usize = 1024;

fn regex(function: &str, pattern: &str) -> Result<Arc<regex::Regex>, cel::ExecutionError> {
    crate::compiling::pattern(pattern)
        .map_err(|err| cel::ExecutionError::function_error(function, format!("invalid regex: {err}")))
}

/// `size(x)` and `x.size()`: a string's size counts code points, as cel-go counts them (the `cel`
/// crate's counts bytes).
fn size(ftx: &cel::FunctionContext, This(this): This<cel::Value>) -> Result<i64, cel::ExecutionError> {
    let size = match &this {
        cel::Value::String(s) => s.chars().count(),
        cel::Value::List(l) => l.len(),
        cel::Value::Map(m) => m.map.len(),
        cel::Value::Bytes(b) => b.len(),
        value => return Err(ftx.error(format!("cannot determine the size of {value:?}"))),
    };
    i64::try_from(size).map_err(|_| ftx.error("size out of range"))
}

/// `<string>.matches(<pattern>)`.
fn matches(This(this): This<Arc<String>>, pattern: Arc<String>) -> Result<bool, cel::ExecutionError> {
    Ok(regex("matches", &pattern)?.is_match(&this))
}

/// `<string>.find(<pattern>)`: the first match, or `""`.
fn find(This(this): This<Arc<String>>, pattern: Arc<String>) -> Result<cel::Value, cel::ExecutionError> {
    let found = regex("find", &pattern)?.find(&this).map(|m| m.as_str().to_string()).unwrap_or_default();
    Ok(cel::Value::String(Arc::new(found)))
}

/// What a rule check found: errors, and the errors ratcheting turned into warnings.
#[derive(Debug, Default)]
pub struct RuleOutcome {
    /// Failed rules.
    pub errors: field::ErrorList,
    /// Failed rules on values the update did not change (ratcheted).
    pub warnings: Vec<String>,
}

/// What rules may cost at run time (`k8s.io/apiserver/pkg/apis/cel/config.go`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// One evaluation of one rule (`PerCallLimit`).
    pub per_call: u64,
    /// All evaluations for one object (`RuntimeCELCostBudget`).
    pub per_object: u64,
}

impl Limits {
    /// The API server's.
    pub const UPSTREAM: Limits = Limits { per_call: 1_000_000, per_object: 10_000_000 };
}

/// Rules whose most costly evaluation under the schema's bounds is at most this are charged
/// that even when charges are worked out precisely.
const CHEAP: u64 = 1_000;

/// A bound this large comes from a size nothing bounds (a list the rule builds, whose
/// elements the estimate cannot size): it bounds nothing, and such an evaluation is not
/// charged. The API server refuses such rules when the CRD is created, so only schemas built
/// outside a CRD (tests) run them.
const UNBOUNDED: u64 = 1 << 60;

/// Evaluates every rule of `schema` on `object`; `old` is the stored object on updates.
pub fn validate_rules(object: &Value, old: Option<&Value>, schema: &Schema) -> RuleOutcome {
    validate_rules_within(object, old, schema, Limits::UPSTREAM)
}

/// [`validate_rules`] with other cost limits. Each evaluation is charged an upper bound of
/// cel-go's cost; one over `per_call`, or the charges together over `per_object`, ends
/// validation with upstream's error, and no further rule runs.
///
/// The first pass charges each rule its bound under the schema's limits, which the CRD's own
/// validation kept small. Only when those could break a limit does a second pass charge the
/// costly rules the lower of that and their bound at this object's sizes
/// ([`checker::cost_for`]), which takes an estimate per evaluation.
pub fn validate_rules_within(object: &Value, old: Option<&Value>, schema: &Schema, limits: Limits) -> RuleOutcome {
    if !schema.has_rules {
        return RuleOutcome::default();
    }
    LIBRARIES.with(|libraries| {
        let mut precise = false;
        loop {
            let mut run = Run { libraries, limits, precise, spent: 0, over: false, out: RuleOutcome::default() };
            run.walk(schema, object, old, &Path::Root);
            if !run.over || precise {
                return run.out;
            }
            precise = true;
        }
    })
}

/// One object's rule evaluation: the libraries, and what it has cost so far.
struct Run<'a> {
    libraries: &'a Context<'static>,
    limits: Limits,
    /// Whether charges are worked out from the object's sizes.
    precise: bool,
    spent: u64,
    /// Set when a limit is reached: nothing more runs (or, in the first pass, the pass is
    /// redone precisely).
    over: bool,
    out: RuleOutcome,
}

impl Run<'_> {
    /// Charges one evaluation of `rule`; `false` when over a limit (recording upstream's error
    /// if the charge is precise).
    fn charge(
        &mut self,
        schema: &Schema,
        rule: &Rule,
        compiled: &CompiledRule,
        value: &Value,
        old: Option<&Value>,
        loc: &Path,
    ) -> bool {
        let (Some(decl), Some(most)) = (&schema.rule_type, rule.max_cost()) else { return true };
        let cost = if !self.precise || most <= CHEAP {
            most
        } else {
            let optional = rule.source.optional_old_self();
            most.min(checker::cost_for(&compiled.program, decl, optional, value, old))
        };
        if self.precise && cost >= UNBOUNDED {
            return true;
        }
        let detail = if cost > self.limits.per_call {
            format!(
                "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                rule.error_string()
            )
        } else if self.spent.saturating_add(cost) > self.limits.per_object {
            "validation failed due to running out of cost budget, no further validation rules will be run".to_string()
        } else {
            self.spent += cost;
            return true;
        };
        self.over = true;
        if self.precise {
            self.out.errors.push(type_error(loc, schema, detail));
        }
        false
    }

    fn walk(&mut self, schema: &Schema, value: &Value, old: Option<&Value>, loc: &Path) {
        if self.over {
            return;
        }
        if !schema.rules.is_empty() {
            self.evaluate(schema, value, old, loc);
        }
        if !schema.has_rules_below {
            return;
        }
        match value {
            Value::Object(fields) => {
                let old_fields = old.and_then(Value::as_object);
                for (name, child) in fields {
                    let child_schema = match (schema.properties.get(name), &schema.additional_properties) {
                        (Some(property), _) => property,
                        (None, Some(Additional::Schema(additional))) => additional,
                        _ => continue,
                    };
                    if child_schema.has_rules {
                        let old_child = old_fields.and_then(|f| f.get(name));
                        self.walk(child_schema, child, old_child, &loc.child(name));
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.items.as_deref().filter(|s| s.has_rules) else { return };
                let old_items = old.and_then(Value::as_array);
                for (idx, item) in items.iter().enumerate() {
                    // Transition rules see old items only through `map` list keys.
                    let old_item = old_items
                        .filter(|_| schema.list_type.as_deref() == Some("map"))
                        .and_then(|old_items| correlate(schema, item, old_items));
                    self.walk(item_schema, item, old_item, &loc.index(idx));
                }
            }
            _ => {}
        }
    }

    fn evaluate(&mut self, schema: &Schema, value: &Value, old: Option<&Value>, loc: &Path) {
        let unchanged = old.is_some_and(|o| o == value);
        // The node's values as CEL values, converted only for a rule the object is not
        // surely valid under.
        let mut converted: Option<(Context<'_>, Option<cel::Value>)> = None;
        for rule in &schema.rules {
            let compiled = match &rule.compiled {
                Ok(compiled) => compiled,
                Err(err) => {
                    self.out.errors.push(type_error(loc, schema, format!("rule compile error: {}", err.detail())));
                    continue;
                }
            };
            let old_self = match (compiled.uses_old_self, old) {
                (false, _) => None,
                (true, Some(old)) => Some(old),
                (true, None) if rule.source.optional_old_self() => None,
                (true, None) => continue,
            };
            if !self.charge(schema, rule, compiled, value, old, loc) {
                return;
            }
            if fast::holds(&compiled.program, (value, schema), old_self.map(|o| (o, schema))) {
                continue;
            }
            let (scope, previous) = converted.get_or_insert_with(|| {
                let mut scope = self.libraries.new_inner_scope();
                scope.add_variable_from_value("self", to_cel(value, schema));
                (scope, old.map(|o| to_cel(o, schema)))
            });
            let mut rule_scope = scope.new_inner_scope();
            if compiled.uses_old_self {
                let previous = previous.clone().unwrap_or(cel::Value::Null);
                rule_scope.add_variable_from_value("oldSelf", previous);
            }
            let failed = match cel::Value::resolve(&compiled.program, &rule_scope) {
                Ok(cel::Value::Bool(true)) => continue,
                Ok(cel::Value::Bool(false)) => failure(schema, loc, rule, compiled, &rule_scope),
                Ok(other) => type_error(
                    loc,
                    schema,
                    format!("rule did not evaluate to a bool: {other:?} evaluating rule: {}", rule.error_string()),
                ),
                Err(err) => type_error(loc, schema, format!("{err} evaluating rule: {}", rule.error_string())),
            };
            if !compiled.uses_old_self && unchanged {
                self.out.warnings.push(failed.to_string());
            } else {
                self.out.errors.push(failed);
            }
        }
    }
}

/// `field.Invalid(path, <schema type>, detail)`: how upstream reports a rule that could not run.
fn type_error(loc: &Path, schema: &Schema, detail: String) -> field::Error {
    loc.invalid(schema.types.first().map_or("", String::as_str), detail)
}

fn failure(schema: &Schema, loc: &Path, rule: &Rule, compiled: &CompiledRule, scope: &Context) -> field::Error {
    let detail = compiled
        .message
        .as_ref()
        .and_then(|program| match cel::Value::resolve(program, scope) {
            Ok(cel::Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => Some(s.trim().to_string()),
            _ => None,
        })
        .unwrap_or_else(|| rule.message_or_default());
    let field_path = rule.source.field_path.trim_start_matches('.');
    let (field, pointer) = if field_path.is_empty() {
        (loc.error_field(), loc.pointer())
    } else {
        let child = loc.child(field_path);
        (child.path(), child.pointer())
    };
    // Kubernetes 1.33 names the node's schema type where later versions print the value.
    let shown = crdctl_model::go::quote(schema.types.first().map_or("", String::as_str));
    let error_type = match rule.source.reason.as_deref() {
        Some("FieldValueForbidden") => ErrorType::Forbidden,
        Some("FieldValueRequired") => ErrorType::Required,
        Some("FieldValueDuplicate") => {
            return field::Error { field, pointer, error_type: ErrorType::Duplicate(shown), detail: String::new() };
        }
        _ => ErrorType::Invalid(shown),
    };
    field::Error { field, pointer, error_type, detail }
}

/// Whether `name` is one of CEL's reserved words, which field names are escaped around
/// (`__namespace__`).
fn is_reserved(name: &str) -> bool {
    matches!(
        name,
        "true"
            | "false"
            | "null"
            | "in"
            | "as"
            | "break"
            | "const"
            | "continue"
            | "else"
            | "for"
            | "function"
            | "if"
            | "import"
            | "let"
            | "loop"
            | "package"
            | "namespace"
            | "return"
            | "var"
            | "void"
            | "while"
    )
}

/// A property name as CEL rules spell it (upstream's `Escape`): `foo-bar` is `foo__dash__bar`,
/// `a__b` is `a__underscores__b`, `namespace` is `__namespace__`. Names with other characters,
/// or starting with a digit, have no CEL name: rules cannot see those properties.
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if is_reserved(name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = after;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = rest.get(c.len_utf8()..).unwrap_or_default();
    }
    Some(out)
}

/// A property's name from its CEL name, undoing [`escape`].
fn unescape(name: &str) -> String {
    if let Some(word) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__"))
        && is_reserved(word)
    {
        return word.to_string();
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        let escapes = [("__underscores__", "__"), ("__dot__", "."), ("__dash__", "-"), ("__slash__", "/")];
        if let Some((after, plain)) = escapes.iter().find_map(|(e, plain)| Some((rest.strip_prefix(e)?, plain))) {
            out.push_str(plain);
            rest = after;
        } else {
            out.push(c);
            rest = rest.get(c.len_utf8()..).unwrap_or_default();
        }
    }
    out
}

fn cel_string(s: &str) -> cel::Value {
    cel::Value::String(Arc::new(s.to_string()))
}

/// The CEL value of a JSON value under its schema, typed as upstream's `UnstructuredToVal`.
fn to_cel(value: &Value, schema: &Schema) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), schema.has_type("number")) {
            (Some(i), false) if !n.is_f64() => cel::Value::Int(i),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => match schema.format {
            Some(Format::String(StringFormat::DateTime)) => {
                chrono::DateTime::parse_from_rfc3339(s).map(cel::Value::Timestamp).unwrap_or_else(|_| cel_string(s))
            }
            Some(Format::String(StringFormat::Date)) => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|date| date.and_hms_opt(0, 0, 0))
                .map(|midnight| cel::Value::Timestamp(midnight.and_utc().fixed_offset()))
                .unwrap_or_else(|| cel_string(s)),
            Some(Format::String(StringFormat::Duration)) => {
                duration(s).map(cel::Value::Duration).unwrap_or_else(|| cel_string(s))
            }
            Some(Format::String(StringFormat::Byte)) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map(|bytes| cel::Value::Bytes(Arc::new(bytes)))
                    .unwrap_or_else(|_| cel_string(s))
            }
            _ => cel_string(s),
        },
        Value::Array(items) => {
            let item_schema = schema.items.as_deref();
            let empty = Schema::default();
            cel::Value::List(Arc::new(items.iter().map(|item| to_cel(item, item_schema.unwrap_or(&empty))).collect()))
        }
        Value::Object(fields) => {
            let is_map = matches!(schema.additional_properties, Some(Additional::Schema(_)));
            let empty = Schema::default();
            let mut map: HashMap<cel::objects::Key, cel::Value> = fields
                .iter()
                .filter_map(|(name, child)| {
                    let child_schema = schema.property(name).unwrap_or(&empty);
                    let key = if is_map { name.clone() } else { escape(name)? };
                    Some((cel::objects::Key::String(Arc::new(key)), to_cel(child, child_schema)))
                })
                .collect();
            if schema.embedded_resource {
                for (name, default) in [("apiVersion", cel_string("")), ("kind", cel_string(""))] {
                    map.entry(cel::objects::Key::String(Arc::new(name.into()))).or_insert(default);
                }
                map.entry(cel::objects::Key::String(Arc::new("metadata".into())))
                    .or_insert_with(|| cel::Value::Map(cel::objects::Map { map: Arc::new(HashMap::new()) }));
            }
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// A Go duration (`1h30m`, `-1.5s`) as chrono's.
fn duration(s: &str) -> Option<chrono::Duration> {
    crdctl_model::go::parse_duration(s).map(chrono::Duration::nanoseconds)
}

#[cfg(test)]
mod admission_scope_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn admission_expressions_see_untyped_json_and_variables() {
        let object = json!({"spec": {"replicas": 4}, "metadata": {"labels": {"example.com/tier": "web"}}});
        let params = json!({"data": {"maxReplicas": "3"}});
        with_admission_scope(&[("object", &object), ("params", &params)], None, |scope| {
            assert_eq!(scope.check("object.spec.replicas == 4"), Ok(true));
            assert_eq!(scope.check("object.metadata.labels['example.com/tier'] == 'web'"), Ok(true));
            scope.define("replicas", "has(object.spec.replicas) ? object.spec.replicas : 1").unwrap();
            assert_eq!(scope.check("variables.replicas == 4"), Ok(true));
            assert_eq!(scope.check("variables.replicas <= int(params.data.maxReplicas)"), Ok(false));
            assert_eq!(scope.string("'replicas ' + string(variables.replicas)"), Ok("replicas 4".into()));
        });
    }
}

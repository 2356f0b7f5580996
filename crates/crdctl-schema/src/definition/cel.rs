//! `x-kubernetes-validations` compiled as the API server compiles them on CRD create and
//! update (apiextensions' `pkg/apis/apiextensions/validation`): each rule and message
//! expression must parse and check against the type of its node
//! ([`crate::cel::checker`]), a rule must evaluate to a bool and a message to a string,
//! and both must fit the budget. A rule, run on every value the schema lets one request hold,
//! may cost at most 10 million units, and all of a schema's expressions together 100 million.
//! A rule's cost is its estimate for one value times how many such values a request can hold:
//! the product of the enclosing lists' `maxItems` and maps' `maxProperties`, or, where one is
//! missing, as many as fit in 3 MiB.
//!
//! As upstream, rules are compiled only where the schema is structural and the node and
//! everything below it has no other error: an invalid schema cannot be typed.

use crate::cel::{CompileError, Rule};
use crate::{Additional, Schema};
use crdctl_model::field::{self, Path};

/// Per expression (`StaticEstimatedCostLimit`).
const EXPRESSION_LIMIT: u64 = 10_000_000;
/// Per schema (`StaticEstimatedCRDCostLimit`).
const SCHEMA_LIMIT: u64 = 100_000_000;

/// The schema-wide total, and the expressions that weigh most in it.
#[derive(Default)]
struct Total {
    cost: u64,
    /// At most four, costliest first; expressions under 1% of the limit are not named.
    most_expensive: Vec<(field::Error, u64)>,
}

impl Total {
    fn observe(&mut self, path: &Path, cost: u64) {
        self.cost = self.cost.saturating_add(cost);
        if cost < SCHEMA_LIMIT / 100 {
            return;
        }
        let error =
            path.forbidden("contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema");
        self.most_expensive.push((error, cost));
        self.most_expensive.sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
        self.most_expensive.truncate(4);
    }
}

/// Every rule of `schema` (a version's `openAPIV3Schema`, at `path`) that the API server would
/// not compile or that is over budget; `schema_errors` are the schema's other errors.
pub(crate) fn validate(schema: &Schema, path: &Path, schema_errors: &[field::Error]) -> field::ErrorList {
    let mut out = Vec::new();
    if !schema.has_rules {
        return out;
    }
    let mut total = Total::default();
    let mut walk = Walk { schema_errors, total: &mut total, out: &mut out };
    walk.node(schema, Some(1), path);
    if total.cost > SCHEMA_LIMIT {
        out.extend(total.most_expensive.into_iter().map(|(error, _)| error));
        let name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
        out.push(path.forbidden(over_budget(name, total.cost, SCHEMA_LIMIT)));
    }
    out
}

struct Walk<'a> {
    schema_errors: &'a [field::Error],
    total: &'a mut Total,
    out: &'a mut field::ErrorList,
}

impl Walk<'_> {
    /// `cardinality`: how many times one request can hold this node, `None` when unbounded.
    fn node(&mut self, schema: &Schema, cardinality: Option<u64>, path: &Path) {
        if !schema.has_rules {
            return;
        }
        let here = path.path();
        let invalid_here =
            self.schema_errors.iter().any(|e| e.field == here || e.field.starts_with(&format!("{here}.")));
        if !invalid_here && let Some(decl) = &schema.rule_type {
            let times = cardinality.unwrap_or_else(|| decl.max_cardinality());
            for (i, rule) in schema.rules.iter().enumerate() {
                self.rule(rule, times, &path.child("x-kubernetes-validations").index(i));
            }
        }
        let children = cardinality.and_then(|c| Some(c.saturating_mul(max_elements(schema)?)));
        for (name, property) in &schema.properties {
            self.node(property, children, &path.child("properties").key(name));
        }
        if let Some(items) = &schema.items {
            self.node(items, children, &path.child("items"));
        }
        if let Some(Additional::Schema(values)) = &schema.additional_properties {
            self.node(values, children, &path.child("additionalProperties"));
        }
    }

    /// One entry at `at`, on a node that a request can hold `times` times.
    fn rule(&mut self, rule: &Rule, times: u64, at: &Path) {
        let written = go_rule(&rule.source);
        let checks = match (&rule.compiled, &rule.checked) {
            (Ok(_), Some(checks)) => checks,
            (Ok(_), None) => return,
            (Err(CompileError::Rule(detail)), _) => {
                self.out.push(at.child("rule").invalid(written, detail));
                return;
            }
            (Err(CompileError::MessageExpression(detail)), _) => {
                self.out.push(at.child("messageExpression").invalid(written, detail));
                return;
            }
        };
        let checked = &checks.rule;
        // A rule that does not compile costs nothing: only its error is reported.
        let failed = if !checked.errors.is_empty() {
            Some(format!("compilation failed: {}", checked.errors.join("\n")))
        } else if checked.is_bool == Some(false) {
            Some("cel expression must evaluate to a bool".to_string())
        } else {
            None
        };
        let cost = if failed.is_some() { 0 } else { checked.cost.max.saturating_mul(times) };
        if cost > EXPRESSION_LIMIT {
            self.out.push(at.child("rule").forbidden(over_budget("estimated rule cost", cost, EXPRESSION_LIMIT)));
        }
        self.total.observe(&at.child("rule"), cost);
        if let Some(detail) = failed {
            self.out.push(at.child("rule").invalid(written.clone(), &detail));
        }
        let Some(message) = &checks.message else { return };
        if !message.errors.is_empty() {
            let detail = format!("messageExpression compilation failed: {}", message.errors.join("\n"));
            self.out.push(at.child("messageExpression").invalid(written, &detail));
        } else if message.is_string == Some(false) {
            self.out
                .push(at.child("messageExpression").invalid(written, "messageExpression must evaluate to a string"));
        } else {
            // A message is built once per failure, so its cost is not multiplied.
            if message.cost.max > EXPRESSION_LIMIT {
                let detail = over_budget("estimated messageExpression cost", message.cost.max, EXPRESSION_LIMIT);
                self.out.push(at.child("messageExpression").forbidden(&detail));
            }
            self.total.observe(&at.child("messageExpression"), message.cost.max);
        }
    }
}

/// How many children one value of `schema` has at most: a list's `maxItems`, a map's
/// `maxProperties`, one for anything else; `None` when unbounded.
fn max_elements(schema: &Schema) -> Option<u64> {
    let bound = |max: Option<i64>| max.map(|m| u64::try_from(m).unwrap_or(0));
    match schema.types.first().map(String::as_str) {
        Some("object") if schema.additional_properties.is_some() => bound(schema.max_properties),
        Some("array") => bound(schema.max_items),
        _ => Some(1),
    }
}

/// Upstream's `getCostErrorMessage`.
fn over_budget(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The entry as upstream prints the invalid value: `apiextensions.ValidationRule{Rule:"…", …}`.
fn go_rule(source: &crate::cel::RuleSource) -> crdctl_model::field::Raw {
    let quoted = crdctl_model::go::quote;
    let reason = match &source.reason {
        Some(reason) => format!("&\"{reason}\""),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".into(),
    };
    let optional = match source.optional_old_self {
        Some(value) => format!("&{value}"),
        None => "(*bool)(nil)".into(),
    };
    crdctl_model::field::Raw(format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        quoted(&source.rule),
        quoted(&source.message),
        quoted(&source.message_expression),
        quoted(&source.field_path)
    ))
}

//! The API server's budget for `x-kubernetes-validations` (apiextensions'
//! `pkg/apis/apiextensions/validation`): each rule, run on every value the schema lets one
//! request hold, may cost at most 10 million units, and all of a schema's rules together 100
//! million. A rule's cost is its estimate for one value ([`crate::schema::cel::cost`]) times how
//! many such values a request can hold: the product of the enclosing lists' `maxItems` and
//! maps' `maxProperties`, or, where one is missing, as many as fit in 3 MiB.

use super::{Path, Violation};
use crate::schema::cel::decl::Decl;
use crate::schema::{Additional, Schema};

/// Per expression (`StaticEstimatedCostLimit`).
const EXPRESSION_LIMIT: u64 = 10_000_000;
/// Per schema (`StaticEstimatedCRDCostLimit`).
const SCHEMA_LIMIT: u64 = 100_000_000;

/// The schema-wide total, and the expressions that weigh most in it.
#[derive(Default)]
struct Total {
    cost: u64,
    /// At most four, costliest first; expressions under 1% of the limit are not named.
    most_expensive: Vec<(Path, u64)>,
}

impl Total {
    fn observe(&mut self, path: Path, cost: u64) {
        self.cost = self.cost.saturating_add(cost);
        if cost < SCHEMA_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by(|a, b| b.1.cmp(&a.1));
        self.most_expensive.truncate(4);
    }
}

/// Every rule of `schema` (a version's `openAPIV3Schema`, at `path`) over budget.
pub(crate) fn validate(schema: &Schema, path: &Path) -> Vec<Violation> {
    let mut out = Vec::new();
    if !schema.has_rules {
        return out;
    }
    let mut total = Total::default();
    walk(schema, true, Some(1), path, &mut total, &mut out);
    if total.cost > SCHEMA_LIMIT {
        for (rule, _) in &total.most_expensive {
            out.push(
                rule.forbidden("contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
            );
        }
        let name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
        out.push(path.forbidden(&over_budget(name, total.cost, SCHEMA_LIMIT)));
    }
    out
}

/// `cardinality`: how many times one request can hold this node, `None` when unbounded.
fn walk(schema: &Schema, root: bool, cardinality: Option<u64>, path: &Path, total: &mut Total, out: &mut Vec<Violation>) {
    if !schema.has_rules {
        return;
    }
    if !schema.rules.is_empty()
        && let Some(decl) = Decl::of(schema, root || schema.embedded_resource)
    {
        let times = cardinality.unwrap_or_else(|| decl.max_cardinality());
        for (i, rule) in schema.rules.iter().enumerate() {
            let Ok(compiled) = &rule.compiled else { continue };
            let at = path.child("x-kubernetes-validations").index(i);
            let (cost, message_cost) = compiled.max_costs(&decl, rule.source.optional_old_self);
            let cost = cost.saturating_mul(times);
            if cost > EXPRESSION_LIMIT {
                out.push(at.child("rule").forbidden(&over_budget("estimated rule cost", cost, EXPRESSION_LIMIT)));
            }
            total.observe(at.child("rule"), cost);
            if let Some(message_cost) = message_cost {
                // A message is built once per failure, so its cost is not multiplied.
                if message_cost > EXPRESSION_LIMIT {
                    let detail = over_budget("estimated messageExpression cost", message_cost, EXPRESSION_LIMIT);
                    out.push(at.child("messageExpression").forbidden(&detail));
                }
                total.observe(at.child("messageExpression"), message_cost);
            }
        }
    }
    let children = cardinality.and_then(|c| Some(c.saturating_mul(max_elements(schema)?)));
    for (name, property) in &schema.properties {
        walk(property, false, children, &path.child("properties").key(name), total, out);
    }
    if let Some(items) = &schema.items {
        walk(items, false, children, &path.child("items"), total, out);
    }
    if let Some(Additional::Schema(values)) = &schema.additional_properties {
        walk(values, false, children, &path.child("additionalProperties"), total, out);
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

//! Strategic merge patch (`application/strategic-merge-patch+json`), applied as kube-apiserver
//! applies it to built-in kinds: upstream's `apimachinery/pkg/util/strategicpatch` on the server
//! side, where parallel lists (`$setElementOrder/…`, `$deleteFromPrimitiveList/…`) are merged
//! and a `null` for a field the object lacks is ignored.
//!
//! Like a JSON merge patch, except for lists and directives. A list whose schema says
//! `x-kubernetes-patch-strategy: merge` is merged: items of a list of objects are matched by
//! `x-kubernetes-patch-merge-key` and merged, scalars are added once. `retainKeys` on an object
//! (or a list's items) drops the fields a `$retainKeys` directive does not name; `replace`
//! replaces. Upstream reads the strategies from Go struct tags, which the OpenAPI documents
//! publish as those two extensions; this reads them from the [`Schema`] compiled from the
//! documents. Fields no schema describes merge as maps and replace as lists.
//!
//! The directives: `$patch: replace` (this object or list as given), `$patch: delete` (this
//! object, or the list item with this merge key, goes), `$setElementOrder/<list>` (the order of
//! the merged list), `$deleteFromPrimitiveList/<list>` (scalars to take out) and `$retainKeys`.
//! Errors carry upstream's texts and the HTTP status its patch handler gives them.
//!
//! Lists keep upstream's order: items the patch names come in the patch's (or
//! `$setElementOrder`'s) order, the object's other items keep their places relative to them.

use serde_json::{Map, Value};

use crdctl_model::go;

use crate::Schema;

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Why a patch could not be applied, with the status upstream's handler answers
/// (`interpretStrategicMergePatchError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// 400, 422 or 500.
    pub status: Status,
    /// Upstream's text.
    pub message: String,
}

/// The HTTP status of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 400: a directive in the wrong shape.
    BadRequest,
    /// 422: lists of lists, or a patch that does not match its `$retainKeys`.
    Unprocessable,
    /// 500: everything else (a missing merge key, an unknown directive), as upstream, which
    /// does not map these to a status.
    Internal,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn internal(message: impl Into<String>) -> Error {
        Error { status: Status::Internal, message: message.into() }
    }

    fn bad_primitive_list() -> Error {
        Error { status: Status::BadRequest, message: "invalid patch format of primitive list".into() }
    }

    fn bad_retain_keys() -> Error {
        Error { status: Status::BadRequest, message: "invalid patch format of retainKeys".into() }
    }

    fn bad_set_element_order() -> Error {
        Error { status: Status::BadRequest, message: "invalid patch format of setElementOrder list".into() }
    }

    fn list_of_lists() -> Error {
        Error { status: Status::Unprocessable, message: "lists of lists are not supported".into() }
    }

    fn no_merge_key(item: &Map<String, Value>, key: &str) -> Error {
        Error::internal(format!("map: {} does not contain declared merge key: {key}", go::display_map(item)))
    }

    fn bad_arg_type(expected: GoType, actual: &Value) -> Error {
        Error::internal(format!("expected a {}, but received a {}", expected.name(), GoType::of(actual).name()))
    }

    fn bad_patch_type(directive: &Value, item: &Map<String, Value>) -> Error {
        Error::internal(format!("unknown patch type: {} in map: {}", go::display(directive), go::display_map(item)))
    }
}

/// Applies `patch` to `original` with the merge strategies of `schema` (the kind's root).
pub fn apply(
    original: Map<String, Value>,
    patch: Map<String, Value>,
    schema: &Schema,
) -> Result<Map<String, Value>, Error> {
    merge_map(original, patch, Some(schema))
}

/// What the schema says about one field.
struct Field<'s> {
    /// The field's schema (for a list: its items'), if it has one.
    schema: Option<&'s Schema>,
    /// `merge`, `replace` or empty: the strategy besides `retainKeys`.
    strategy: &'s str,
    merge_key: &'s str,
}

impl<'s> Field<'s> {
    /// The field `key` of an object with schema `parent`.
    fn of(parent: Option<&'s Schema>, key: &str) -> Result<Field<'s>, Error> {
        let schema = parent.and_then(|p| {
            p.properties.get(key).or(match &p.additional_properties {
                Some(crate::Additional::Schema(values)) => Some(values),
                _ => None,
            })
        });
        let strategies = schema.map(|s| s.patch_strategies.as_slice()).unwrap_or_default();
        let strategy = match strategies {
            [] => "",
            [single] if single == RETAIN_KEYS_STRATEGY => "",
            [single] => single,
            [first, second] if first == RETAIN_KEYS_STRATEGY => second,
            [first, second] if second == RETAIN_KEYS_STRATEGY => first,
            _ => return Err(Error::internal(format!("unexpected patch strategy: [{}]", strategies.join(" ")))),
        };
        let merge_key = schema.and_then(|s| s.patch_merge_key.as_deref()).unwrap_or_default();
        Ok(Field { schema, strategy, merge_key })
    }

    /// The same field seen as a list: the schema of its items (upstream takes the field's own
    /// schema when it has no `items`).
    fn items(self) -> Field<'s> {
        Field { schema: self.schema.map(|s| s.items.as_deref().unwrap_or(s)), ..self }
    }
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Option<&Schema>,
) -> Result<Map<String, Value>, Error> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some(REPLACE) => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some(DELETE) => Ok(Map::new()),
            _ => Err(Error::bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_element_orders(&mut original, &mut patch, schema)?;
    for (key, patch_value) in patch {
        let (key, delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => (rest.strip_prefix('/').ok_or_else(Error::bad_primitive_list)?.to_string(), true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let merged = match (original.remove(&key), patch_value) {
            (Some(Value::Object(current)), Value::Object(patch_value)) => {
                let field = Field::of(schema, &key)?;
                if field.strategy == REPLACE {
                    Some(Value::Object(patch_value))
                } else {
                    Some(Value::Object(merge_map(current, patch_value, field.schema)?))
                }
            }
            (Some(Value::Array(current)), Value::Array(patch_value)) => {
                let field = Field::of(schema, &key)?.items();
                Some(Value::Array(merge_list_field(current, patch_value, &field, delete_list)?))
            }
            // A delete list for a field the object lacks (or holds as another type) deletes nothing.
            (current, _) if delete_list => current,
            (_, mut patch_value) => {
                discard_nulls(&mut patch_value);
                remove_directives(patch_value)
            }
        };
        if let Some(merged) = merged {
            original.insert(key, merged);
        }
    }
    Ok(original)
}

/// A list field of both the object and the patch, as its strategy says (delete lists are
/// merged whatever the strategy).
fn merge_list_field(
    current: Vec<Value>,
    patch: Vec<Value>,
    field: &Field,
    delete_list: bool,
) -> Result<Vec<Value>, Error> {
    if field.strategy == MERGE || delete_list { merge_list(current, patch, field, delete_list) } else { Ok(patch) }
}

/// `$retainKeys`: fields of `original` the list does not name go; every field the patch sets
/// must be named.
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), Error> {
    let Some(retained) = patch.remove(RETAIN_KEYS) else { return Ok(()) };
    let Value::Array(retained) = retained else { return Err(Error::bad_retain_keys()) };
    let named = |key: &str| retained.iter().any(|r| r.as_str() == Some(key));
    let unnamed = patch.iter().any(|(key, value)| {
        !value.is_null()
            && !key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !key.starts_with(SET_ELEMENT_ORDER)
            && !named(key)
    });
    if unnamed {
        return Err(Error::bad_retain_keys());
    }
    original.retain(|key, _| named(key));
    Ok(())
}

/// `$setElementOrder/<list>`: merges the list the directive names now, and orders the result
/// by the directive, then by the object's order for items the directive does not name.
fn merge_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Option<&Schema>,
) -> Result<(), Error> {
    let directives: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER)).cloned().collect();
    for directive in directives {
        let Some(order) = patch.remove(&directive) else { continue };
        let Value::Array(order) = order else { return Err(Error::bad_arg_type(GoType::List, &order)) };
        let key = directive.strip_prefix(SET_ELEMENT_ORDER).and_then(|k| k.strip_prefix('/'));
        let key = key.ok_or_else(Error::bad_set_element_order)?.to_string();
        let current = match original.get(&key) {
            Some(Value::Array(list)) => Some(list.clone()),
            Some(other) => return Err(Error::bad_arg_type(GoType::List, other)),
            None => None,
        };
        let patch_list = match patch.get(&key) {
            Some(Value::Array(list)) => Some(list.clone()),
            Some(other) => return Err(Error::bad_arg_type(GoType::List, other)),
            None => None,
        };
        let field = Field::of(schema, &key)?.items();
        check_element_order(patch_list.as_deref().unwrap_or_default(), &order, field.merge_key)?;
        let merged = match (&current, &patch_list) {
            (Some(current), None) => current.clone(),
            (None, Some(patch_list)) => {
                let Some(Value::Array(list)) = remove_directives(Value::Array(patch_list.clone())) else { continue };
                list
            }
            (Some(current), Some(patch_list)) => merge_list_field(current.clone(), patch_list.clone(), &field, false)?,
            (None, None) => continue,
        };
        let current = current.unwrap_or_default();
        let patch_list = patch_list.unwrap_or_default();
        let kind = element_type(&[&current, &patch_list])?;
        let server_order = if kind == GoType::Map && field.strategy == MERGE {
            order_after_merge(&current, &patch_list, &merged, field.merge_key)
        } else {
            current
        };
        let (in_order, server_only) = partition(merged, &order, field.merge_key)?;
        let ordered = normalize_element_order(in_order, server_only, &order, &server_order, field.merge_key, kind)?;
        original.insert(key.clone(), Value::Array(ordered));
        patch.remove(&key);
    }
    Ok(())
}

/// The object's list as upstream's in-place merge leaves it, which is the order upstream then
/// sorts the items `$setElementOrder` does not name by (and its tables record): the items the
/// patch deletes gone, the items it adds in the freed places, as long as the list was.
fn order_after_merge(current: &[Value], patch: &[Value], merged: &[Value], merge_key: &str) -> Vec<Value> {
    let key = |item: &Value| item.get(merge_key).cloned();
    let deleted = |item: &Value| {
        patch.iter().any(|p| p.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) && key(p) == key(item))
    };
    if patch.iter().any(|p| p.get(DIRECTIVE).and_then(Value::as_str) == Some(REPLACE)) {
        return current.to_vec();
    }
    let mut order: Vec<Value> = current.iter().filter(|item| !deleted(item)).cloned().collect();
    order.extend(merged.iter().filter(|item| !current.iter().any(|c| key(c) == key(item))).cloned());
    order.truncate(current.len());
    order
}

/// Upstream's `validatePatchWithSetOrderList`: the patch's items appear in the directive, in
/// its order.
fn check_element_order(patch: &[Value], order_list: &[Value], merge_key: &str) -> Result<(), Error> {
    if order_list.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        let mut kept = Vec::new();
        for item in patch {
            let Value::Object(fields) = item else { return Err(Error::bad_arg_type(GoType::Map, item)) };
            if fields.get(DIRECTIVE).and_then(Value::as_str) != Some(DELETE) {
                kept.push(item);
            }
        }
        kept
    };
    // Walk both lists: each patch item must be found at or after the previous one's place.
    let mut kept = kept.into_iter().peekable();
    let mut order = order_list.iter();
    while let Some(item) = kept.peek() {
        if is_directive(item) {
            kept.next();
            continue;
        }
        let Some(ordered) = order.next() else { break };
        if merge_key_equal(item, ordered, merge_key)? {
            kept.next();
        }
    }
    if kept.peek().is_some() {
        return Err(Error::internal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go::display_list(patch),
            go::display_list(order_list)
        )));
    }
    Ok(())
}

fn is_directive(item: &Value) -> bool {
    item.as_object().is_some_and(|fields| fields.contains_key(DIRECTIVE))
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, Error> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let key_of = |item: &Value| -> Result<Value, Error> {
        let Value::Object(fields) = item else { return Err(Error::bad_arg_type(GoType::Map, item)) };
        fields.get(merge_key).cloned().ok_or_else(|| Error::no_merge_key(fields, merge_key))
    };
    Ok(key_of(left)? == key_of(right)?)
}

/// Merges two lists under the `merge` strategy (or a delete list): scalars are unioned (or
/// taken out), objects merged by merge key, with the directives of list items.
fn merge_list(current: Vec<Value>, patch: Vec<Value>, field: &Field, delete_list: bool) -> Result<Vec<Value>, Error> {
    if current.is_empty() && patch.is_empty() {
        return Ok(current);
    }
    let kind = element_type(&[&current, &patch])?;
    let merge_key = field.merge_key;
    let (current, patch, merged) = if kind != GoType::Map {
        if delete_list {
            return Ok(current.into_iter().filter(|item| !patch.contains(item)).collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(current.len() + patch.len());
        for item in current.iter().chain(&patch) {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        (current, patch, merged)
    } else {
        if merge_key.is_empty() {
            let name = field.schema.and_then(|s| s.types.first()).map_or("Struct", String::as_str);
            return Err(Error::internal(format!("cannot merge lists without merge key for {name}")));
        }
        let (current, patch) = apply_item_directives(current, patch, merge_key)?;
        let merged = merge_items(current.clone(), &patch, merge_key, field.schema)?;
        (current, patch, merged)
    };
    let (in_patch, server_only) = partition(merged, &patch, merge_key)?;
    normalize_element_order(in_patch, server_only, &patch, &current, merge_key, kind)
}

/// `$patch` in list items: `delete` removes the object's items with that merge key, `replace`
/// makes the list the patch's items. Returns the object's list and the patch without them.
fn apply_item_directives(
    mut current: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Value::Object(fields) = &item else { return Err(Error::bad_arg_type(GoType::Map, &item)) };
        let Some(directive) = fields.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE) => {
                let key = fields.get(merge_key).ok_or_else(|| Error::no_merge_key(fields, merge_key))?;
                for (index, entry) in current.iter().enumerate() {
                    if !entry.is_object() {
                        return Err(Error::internal(format!("value for key {index} is not a map")));
                    }
                }
                current.retain(|entry| entry.get(merge_key) != Some(key));
            }
            Some(REPLACE) => replace = true,
            Some(MERGE) => return Err(Error::internal("merging lists cannot yet be specified in the patch")),
            _ => return Err(Error::bad_patch_type(directive, fields)),
        }
    }
    Ok(if replace { (plain, Vec::new()) } else { (current, plain) })
}

/// Merges each patch item into the object's item with its merge key, or appends it.
fn merge_items(
    mut current: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    schema: Option<&Schema>,
) -> Result<Vec<Value>, Error> {
    for item in patch {
        let Value::Object(fields) = item else { return Err(Error::bad_arg_type(GoType::Map, item)) };
        let key = fields.get(merge_key).ok_or_else(|| Error::no_merge_key(fields, merge_key))?;
        let found = find_by_key(&current, merge_key, key)?.and_then(|index| current.get_mut(index));
        match found {
            Some(Value::Object(existing)) => {
                *existing = merge_map(std::mem::take(existing), fields.clone(), schema)?;
            }
            _ => current.push(item.clone()),
        }
    }
    Ok(current)
}

/// The index of the item of `list` whose `merge_key` is `key`; every item must be an object.
fn find_by_key(list: &[Value], merge_key: &str, key: &Value) -> Result<Option<usize>, Error> {
    for (index, item) in list.iter().enumerate() {
        let Value::Object(fields) = item else {
            return Err(Error::internal(format!("value for key {index} is not a map")));
        };
        if fields.get(merge_key) == Some(key) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Splits `merged` into the items `by` names (by merge key for objects) and the others.
fn partition(merged: Vec<Value>, by: &[Value], merge_key: &str) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut named = Vec::with_capacity(merged.len());
    let mut others = Vec::new();
    for item in merged {
        let found = if merge_key.is_empty() {
            by.contains(&item)
        } else {
            let Value::Object(fields) = &item else { return Err(Error::bad_arg_type(GoType::Map, &item)) };
            let key = fields.get(merge_key).ok_or_else(|| Error::no_merge_key(fields, merge_key))?;
            find_by_key(by, merge_key, key)?.is_some()
        };
        if found { named.push(item) } else { others.push(item) }
    }
    Ok((named, others))
}

/// Upstream's `normalizeElementOrder`: the patch's items in `patch_order`, the object's other
/// items in `server_order`, interleaved so each keeps its place relative to the object's.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, Error> {
    let patch = sort_by_order(patch, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, server_order, merge_key, kind)?;
    let position = |item: &Value| index(server_order, item, merge_key, kind);
    let mut merged = Vec::with_capacity(patch.len() + server_only.len());
    let mut patch = patch.into_iter().peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), patch.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(left), Some(right)) => matches!((position(left), position(right)), (Some(l), Some(r)) if l < r),
        };
        let next = if take_server { server_only.next() } else { patch.next() };
        merged.extend(next);
    }
    Ok(merged)
}

/// Upstream's `normalizeSliceOrder`: sorted (stably) by position in `order`, items with
/// `$patch: delete` last.
fn sort_by_order(items: Vec<Value>, order: &[Value], merge_key: &str, kind: GoType) -> Result<Vec<Value>, Error> {
    let (mut items, deleted) = if kind == GoType::Map {
        for item in items.iter().chain(order) {
            let Value::Object(fields) = item else { return Err(Error::bad_arg_type(GoType::Map, item)) };
            if !fields.contains_key(merge_key) {
                return Err(Error::no_merge_key(fields, merge_key));
            }
        }
        items.into_iter().partition(|item| item.get(DIRECTIVE).and_then(Value::as_str) != Some(DELETE))
    } else {
        (items, Vec::new())
    };
    items.sort_by_key(|item| index(order, item, merge_key, kind).unwrap_or(usize::MAX));
    items.extend(deleted);
    Ok(items)
}

/// The position of `item` in `list`, by merge key for objects.
fn index(list: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Option<usize> {
    let identity = |v: &'_ Value| if kind == GoType::Map { v.get(merge_key).cloned() } else { Some(v.clone()) };
    let wanted = identity(item);
    list.iter().position(|v| identity(v) == wanted)
}

/// The one type of the items of `lists` (upstream's `sliceElementType`).
fn element_type(lists: &[&[Value]]) -> Result<GoType, Error> {
    let mut found: Option<GoType> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let kind = GoType::of(item);
        match found {
            None if kind == GoType::List => return Err(Error::list_of_lists()),
            None => found = Some(kind),
            Some(previous) if previous != kind => {
                let lists: Vec<String> = lists.iter().map(|l| go::display_list(l)).collect();
                return Err(Error::internal(format!("list element types are not identical: [{}]", lists.join(" "))));
            }
            Some(_) => {}
        }
    }
    found.ok_or_else(|| Error::internal("no elements in any of the given slices"))
}

/// Drops `null` fields from a value the patch adds whole.
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, v| !v.is_null());
            fields.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// A value the patch adds whole, without directives: an object with `$patch` is dropped
/// (`None`), as are such objects inside it.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(fields) if fields.contains_key(DIRECTIVE) => None,
        Value::Object(fields) => {
            Some(Value::Object(fields.into_iter().filter_map(|(k, v)| Some((k, remove_directives(v)?))).collect()))
        }
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(remove_directives).collect())),
        other => Some(other),
    }
}

/// The Go type a JSON value decodes to (upstream compares them with `reflect`): integers and
/// other numbers are different types, as upstream decodes integers as `int64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoType {
    Nil,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

impl GoType {
    fn of(value: &Value) -> GoType {
        match value {
            Value::Null => GoType::Nil,
            Value::Bool(_) => GoType::Bool,
            Value::Number(n) if n.is_i64() => GoType::Int,
            Value::Number(_) => GoType::Float,
            Value::String(_) => GoType::String,
            Value::Array(_) => GoType::List,
            Value::Object(_) => GoType::Map,
        }
    }

    fn name(self) -> &'static str {
        match self {
            GoType::Nil => "%!s(<nil>)",
            GoType::Bool => "bool",
            GoType::Int => "int64",
            GoType::Float => "float64",
            GoType::String => "string",
            GoType::List => "[]interface {}",
            GoType::Map => "map[string]interface {}",
        }
    }
}

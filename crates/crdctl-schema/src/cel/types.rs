//! What the checker knows of types: the CEL type of a value (from its schema node; what a call
//! returns is [`super::library`]'s), how cel-go names types in messages, and which operand types
//! the operators and core functions take (cel-go's standard declarations, with Kubernetes'
//! cross-type numeric comparisons).

use std::collections::HashMap;

use kube_cel::cel::common::ast::operators;

use super::decl::{Decl, DeclKind};

/// What the checker knows of a value's type; enough to choose overloads and find elements.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Type<'d> {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    Dyn,
    /// A type, as `type(x)` returns.
    Meta,
    List(Box<Type<'d>>),
    Map(Box<Type<'d>>, Box<Type<'d>>),
    /// A schema object: fields by their CEL names.
    Object(&'d HashMap<String, Decl>),
    Optional(Box<Type<'d>>),
    /// The Kubernetes libraries' types.
    Library(Library),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Library {
    Quantity,
    Ip,
    Cidr,
    Url,
    Semver,
    Format,
    Selector,
}

impl<'d> Type<'d> {
    pub(super) fn of(decl: &'d Decl) -> Type<'d> {
        match &decl.kind {
            DeclKind::Bool => Type::Bool,
            DeclKind::Int => Type::Int,
            DeclKind::Double => Type::Double,
            DeclKind::String => Type::String,
            DeclKind::Bytes => Type::Bytes,
            DeclKind::Duration => Type::Duration,
            DeclKind::Timestamp => Type::Timestamp,
            DeclKind::Dyn => Type::Dyn,
            DeclKind::List(items) => Type::List(Box::new(Type::of(items))),
            DeclKind::Map(values) => Type::Map(Box::new(Type::String), Box::new(Type::of(values))),
            DeclKind::Object(fields) => Type::Object(fields),
        }
    }

    /// The schema type a value of this type could have been declared with (`dyn` where none
    /// fits): what a policy variable's expression declares `variables.<name>` to be.
    pub(super) fn decl(&self) -> Decl {
        let kind = match self {
            Type::Bool => DeclKind::Bool,
            Type::Int => DeclKind::Int,
            Type::Double => DeclKind::Double,
            Type::String => DeclKind::String,
            Type::Bytes => DeclKind::Bytes,
            Type::Duration => DeclKind::Duration,
            Type::Timestamp => DeclKind::Timestamp,
            Type::List(items) => DeclKind::List(Box::new(items.decl())),
            Type::Map(key, values) if **key == Type::String => DeclKind::Map(Box::new(values.decl())),
            Type::Object(fields) => DeclKind::Object((*fields).clone()),
            _ => DeclKind::Dyn,
        };
        Decl { kind, max_elements: super::decl::MAX_REQUEST_SIZE_BYTES, min_serialized_size: 0 }
    }

    /// Values of a fixed size (`isScalar`): `size` is 1.
    pub(super) fn is_scalar(&self) -> bool {
        match self {
            Type::Bool | Type::Double | Type::Duration | Type::Int | Type::Timestamp | Type::Uint => true,
            Type::Optional(inner) => inner.is_scalar(),
            _ => false,
        }
    }

    /// Whether a value of this type may be passed where `wanted` is declared.
    pub(super) fn fits(&self, wanted: &Kind) -> bool {
        *self == Type::Dyn || self.kind() == *wanted
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            Type::Bool => Kind::Bool,
            Type::Int => Kind::Int,
            Type::Uint => Kind::Uint,
            Type::Double => Kind::Double,
            Type::String => Kind::String,
            Type::Bytes => Kind::Bytes,
            Type::Duration => Kind::Duration,
            Type::Timestamp => Kind::Timestamp,
            Type::List(_) => Kind::List,
            Type::Map(..) => Kind::Map,
            Type::Object(_) => Kind::Object,
            _ => Kind::Other,
        }
    }

    pub(super) fn element(&self) -> Type<'d> {
        match self {
            Type::List(item) => (**item).clone(),
            Type::Map(key, _) => (**key).clone(),
            _ => Type::Dyn,
        }
    }

    /// The type of both branches of a conditional, or of a list's elements: the more specific
    /// where one is a placeholder (`dyn`, a list of `dyn`), else `dyn`.
    pub(super) fn join(self, other: Type<'d>) -> Type<'d> {
        match (self, other) {
            (a, b) if a == b => a,
            (Type::Dyn, b) => b,
            (a, Type::Dyn) => a,
            (Type::List(a), Type::List(b)) => Type::List(Box::new(a.join(*b))),
            _ => Type::Dyn,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List,
    Map,
    Object,
    Other,
}

/// The identifiers every rule may use besides `self` and `oldSelf`: the type names.
pub(super) const TYPE_NAMES: [&str; 11] =
    ["bool", "bytes", "double", "int", "list", "map", "null_type", "optional_type", "string", "type", "uint"];

/// How cel-go names a type in messages; `None` for the types whose names it makes up (schema
/// objects) or this checker does not model.
pub(super) fn describe(ty: &Type) -> Option<String> {
    Some(match ty {
        Type::Bool => "bool".into(),
        Type::Int => "int".into(),
        Type::Uint => "uint".into(),
        Type::Double => "double".into(),
        Type::String => "string".into(),
        Type::Bytes => "bytes".into(),
        Type::Duration => "google.protobuf.Duration".into(),
        Type::Timestamp => "google.protobuf.Timestamp".into(),
        Type::Null => "null".into(),
        Type::Dyn => "dyn".into(),
        Type::List(item) => format!("list({})", describe(item)?),
        Type::Map(key, value) => format!("map({}, {})", describe(key)?, describe(value)?),
        _ => return None,
    })
}

/// `found no matching overload …` when no overload of `function` takes these types. Only
/// types known in full are judged: a `dyn` anywhere could be anything.
pub(super) fn no_matching_overload(function: &str, target: Option<&Type>, types: &[&Type]) -> Option<String> {
    let names: Vec<String> = types.iter().map(|t| describe(t)).collect::<Option<_>>()?;
    let target_name = match target {
        Some(target) => Some(describe(target)?),
        None => None,
    };
    if names.iter().chain(&target_name).any(|n| n.contains("dyn")) {
        return None;
    }
    let numeric = |t: &Type| matches!(t, Type::Int | Type::Uint | Type::Double);
    let ordered = |t: &Type| {
        numeric(t) || matches!(t, Type::String | Type::Bytes | Type::Bool | Type::Timestamp | Type::Duration)
    };
    let sized = |t: &Type| matches!(t, Type::String | Type::Bytes | Type::List(_) | Type::Map(..));
    let matches = match (function, target, types) {
        (operators::EQUALS | operators::NOT_EQUALS, None, [a, b]) => a == b,
        (operators::LESS | operators::LESS_EQUALS | operators::GREATER | operators::GREATER_EQUALS, None, [a, b]) => {
            ordered(a) && a == b || numeric(a) && numeric(b)
        }
        (operators::ADD, None, [a, b]) => {
            a == b && (numeric(a) || matches!(a, Type::String | Type::Bytes | Type::List(_) | Type::Duration))
                || matches!((a, b), (Type::Timestamp, Type::Duration) | (Type::Duration, Type::Timestamp))
        }
        (operators::SUBSTRACT, None, [a, b]) => {
            a == b && (numeric(a) || matches!(a, Type::Timestamp | Type::Duration))
                || matches!((a, b), (Type::Timestamp, Type::Duration))
        }
        (operators::MULTIPLY | operators::DIVIDE, None, [a, b]) => a == b && numeric(a),
        (operators::MODULO, None, [a, b]) => a == b && matches!(a, Type::Int | Type::Uint),
        (operators::LOGICAL_AND | operators::LOGICAL_OR, None, [a, b]) => **a == Type::Bool && **b == Type::Bool,
        (operators::LOGICAL_NOT, None, [a]) => **a == Type::Bool,
        (operators::NEGATE, None, [a]) => matches!(a, Type::Int | Type::Double),
        (operators::CONDITIONAL, None, [c, a, b]) => **c == Type::Bool && a == b,
        (operators::INDEX, None, [Type::List(_), index]) => **index == Type::Int,
        (operators::INDEX, None, [Type::Map(key, _), index]) => **key == **index,
        (operators::INDEX, None, [_, _]) => false,
        (operators::IN, None, [item, Type::List(items)]) => **item == **items,
        (operators::IN, None, [key, Type::Map(keys, _)]) => **key == **keys,
        (operators::IN, None, [_, _]) => false,
        ("size", None, [a]) => sized(a),
        ("size", Some(a), []) => sized(a),
        ("contains" | "startsWith" | "endsWith" | "matches", Some(a), [b]) => *a == Type::String && **b == Type::String,
        ("matches", None, [a, b]) => **a == Type::String && **b == Type::String,
        _ => true,
    };
    if matches {
        return None;
    }
    let applied = match target_name {
        Some(target) => format!("{target}.({})", names.join(", ")),
        None => format!("({})", names.join(", ")),
    };
    Some(format!("found no matching overload for '{function}' applied to '{applied}'"))
}

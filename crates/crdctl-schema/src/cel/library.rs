//! The functions a CEL rule may call, one row each: the type of the result (what later costs
//! depend on) and how a call's cost is estimated — cel-go's own rules for the standard
//! functions, or the estimator of the Kubernetes library that declares the function
//! (`apiserver/pkg/cel/library/cost.go`) and of the `sets` extension. The checker's typing
//! ([`result_type`]) and its cost estimator read this table; operators are
//! typed and costed by the checker itself.

use kube_cel::cel::common::ast::operators;

use super::types::{Library, Type};

/// One function.
pub(super) struct Function {
    /// Its name, as the checker resolves it (`sets.contains`, `ip.isCanonical`); a name ending
    /// in `.` is a namespace every function of which the row describes (`format.`).
    pub(super) name: &'static str,
    /// The type of its result.
    pub(super) returns: Returns,
    /// How a call is costed.
    pub(super) cost: Cost,
}

/// The type of a function's result.
#[derive(Debug, Clone)]
pub(super) enum Returns {
    /// A type that depends on nothing else (a scalar, a library type, `dyn`).
    Fixed(Type<'static>),
    /// `list(string)`.
    Strings,
    /// An element of the target list (`sum`, `min`, `max`).
    Element,
    /// The target list reversed, else a string (`reverse` on lists and on strings).
    Reversed,
    /// What the target optional holds (`value`, `orValue`).
    Unwrapped,
}

/// How a call is costed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cost {
    /// cel-go's rules, by overload (the standard functions).
    Standard,
    /// O(1).
    One,
    /// The first argument traversed as a string.
    ScanFirst,
    /// The first argument traversed; the result as long as it.
    ScanFirstSized,
    /// The target traversed; the result as long as it.
    ScanTargetSized,
    /// The first argument traversed twice (`ip.isCanonical`).
    ScanFirstTwice,
    /// `ip`: O(1) on a parsed CIDR, else its string traversed.
    Ip,
    /// A set comparison: the sizes multiplied, by this factor.
    Sets(f64),
    /// Each element of the target list visited (strings and bytes traversed).
    Elements,
    /// As [`Cost::Elements`], and the target's size when it is no list (`includes`).
    Includes,
    /// `join`: the joined string traversed.
    Join,
    /// `split`: the target traversed twice.
    Split,
    /// `replace`: the target traversed, the result sized by the replacement.
    Replace,
    /// `find`, `findAll`: a regular expression over the target.
    Find,
    /// `containsIP`: two addresses compared (a string argument parsed first).
    ContainsIp,
    /// `containsCIDR`: as [`Cost::ContainsIp`], and the prefix compared.
    ContainsCidr,
    /// `validate` of a named format: the name matched against the format's expression.
    NameFormat,
}

use Cost::*;
use Returns::*;

const fn row(name: &'static str, returns: Returns, cost: Cost) -> Function {
    Function { name, returns, cost }
}

/// Every function the checker types or costs other than by default (`Dyn`, cel-go's rules).
static FUNCTIONS: &[Function] = &[
    // cel-go's standard library.
    row("size", Fixed(Type::Int), Standard),
    row("int", Fixed(Type::Int), Standard),
    row("uint", Fixed(Type::Uint), Standard),
    row("double", Fixed(Type::Double), Standard),
    row("string", Fixed(Type::String), Standard),
    row("bytes", Fixed(Type::Bytes), Standard),
    row("bool", Fixed(Type::Bool), Standard),
    row("duration", Fixed(Type::Duration), Standard),
    row("timestamp", Fixed(Type::Timestamp), Standard),
    row("type", Fixed(Type::Meta), Standard),
    row("matches", Fixed(Type::Bool), Standard),
    row("contains", Fixed(Type::Bool), Standard),
    row("startsWith", Fixed(Type::Bool), Standard),
    row("endsWith", Fixed(Type::Bool), Standard),
    row("getFullYear", Fixed(Type::Int), Standard),
    row("getMonth", Fixed(Type::Int), Standard),
    row("getDayOfYear", Fixed(Type::Int), Standard),
    row("getDayOfMonth", Fixed(Type::Int), Standard),
    row("getDate", Fixed(Type::Int), Standard),
    row("getDayOfWeek", Fixed(Type::Int), Standard),
    row("getHours", Fixed(Type::Int), Standard),
    row("getMinutes", Fixed(Type::Int), Standard),
    row("getSeconds", Fixed(Type::Int), Standard),
    row("getMilliseconds", Fixed(Type::Int), Standard),
    // The optional types.
    row("hasValue", Fixed(Type::Bool), Standard),
    row("value", Unwrapped, Standard),
    row("orValue", Unwrapped, Standard),
    // cel-go's strings extension, as Kubernetes installs it.
    row("charAt", Fixed(Type::String), Standard),
    row("format", Fixed(Type::String), Standard),
    row("strings.quote", Fixed(Type::String), Standard),
    row("reverse", Reversed, Standard),
    row("lowerAscii", Fixed(Type::String), ScanTargetSized),
    row("upperAscii", Fixed(Type::String), ScanTargetSized),
    row("substring", Fixed(Type::String), ScanTargetSized),
    row("trim", Fixed(Type::String), ScanTargetSized),
    row("replace", Fixed(Type::String), Replace),
    row("split", Strings, Split),
    row("join", Fixed(Type::String), Join),
    row("indexOf", Fixed(Type::Int), Elements),
    row("lastIndexOf", Fixed(Type::Int), Elements),
    // The `sets` extension.
    row("sets.contains", Fixed(Type::Bool), Sets(1.0)),
    row("sets.intersects", Fixed(Type::Bool), Sets(1.0)),
    row("sets.equivalent", Fixed(Type::Bool), Sets(2.0)),
    // Kubernetes' lists library.
    row("isSorted", Fixed(Type::Bool), Elements),
    row("sum", Element, Elements),
    row("min", Element, Elements),
    row("max", Element, Elements),
    row("includes", Fixed(Type::Dyn), Includes),
    // Kubernetes' regex library.
    row("find", Fixed(Type::String), Find),
    row("findAll", Strings, Find),
    // Kubernetes' URLs library.
    row("url", Fixed(Type::Library(Library::Url)), ScanFirstSized),
    row("isURL", Fixed(Type::Bool), Standard),
    row("getScheme", Fixed(Type::String), One),
    row("getHostname", Fixed(Type::String), One),
    row("getHost", Fixed(Type::String), One),
    row("getPort", Fixed(Type::String), One),
    row("getEscapedPath", Fixed(Type::String), One),
    row("getQuery", Fixed(Type::Dyn), One),
    // Kubernetes' JSON patch library.
    row("jsonpatch.escapeKey", Fixed(Type::String), ScanFirstSized),
    // Kubernetes' IP and CIDR libraries.
    row("ip", Fixed(Type::Library(Library::Ip)), Ip),
    row("isIP", Fixed(Type::Bool), ScanFirst),
    row("ip.isCanonical", Fixed(Type::Bool), ScanFirstTwice),
    row("family", Fixed(Type::Int), One),
    row("isUnspecified", Fixed(Type::Bool), One),
    row("isLoopback", Fixed(Type::Bool), One),
    row("isLinkLocalMulticast", Fixed(Type::Bool), One),
    row("isLinkLocalUnicast", Fixed(Type::Bool), One),
    row("isGlobalUnicast", Fixed(Type::Bool), One),
    row("cidr", Fixed(Type::Library(Library::Cidr)), ScanFirst),
    row("isCIDR", Fixed(Type::Bool), ScanFirst),
    row("masked", Fixed(Type::Library(Library::Cidr)), One),
    row("prefixLength", Fixed(Type::Int), One),
    row("containsIP", Fixed(Type::Bool), ContainsIp),
    row("containsCIDR", Fixed(Type::Bool), ContainsCidr),
    // Kubernetes' quantity library.
    row("quantity", Fixed(Type::Library(Library::Quantity)), ScanFirst),
    row("isQuantity", Fixed(Type::Bool), ScanFirst),
    row("sign", Fixed(Type::Int), One),
    row("asInteger", Fixed(Type::Int), One),
    row("isInteger", Fixed(Type::Bool), One),
    row("asApproximateFloat", Fixed(Type::Double), One),
    row("isGreaterThan", Fixed(Type::Bool), One),
    row("isLessThan", Fixed(Type::Bool), One),
    row("compareTo", Fixed(Type::Int), One),
    row("add", Fixed(Type::Library(Library::Quantity)), One),
    row("sub", Fixed(Type::Library(Library::Quantity)), One),
    // Kubernetes' semver library.
    row("semver", Fixed(Type::Library(Library::Semver)), ScanFirst),
    row("isSemver", Fixed(Type::Bool), ScanFirst),
    row("major", Fixed(Type::Int), One),
    row("minor", Fixed(Type::Int), One),
    row("patch", Fixed(Type::Int), One),
    // Kubernetes' selector library.
    row("labelSelector", Fixed(Type::Library(Library::Selector)), Standard),
    row("fieldSelector", Fixed(Type::Library(Library::Selector)), Standard),
    // Kubernetes' format library.
    row("format.named", Fixed(Type::Library(Library::Format)), One),
    row("format.", Fixed(Type::Library(Library::Format)), Standard),
    row("validate", Fixed(Type::Dyn), NameFormat),
];

/// The row of the function `name`, if the table has one.
pub(super) fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name).or_else(|| {
        let (namespace, _) = name.split_once('.')?;
        FUNCTIONS.iter().find(|f| f.name.strip_suffix('.') == Some(namespace))
    })
}

/// The type of a call's result, for the calls whose result later costs depend on: operators'
/// here, functions' from their row.
pub(super) fn result_type<'d>(function: &str, target: Option<&Type<'d>>, args: &[&Type<'d>]) -> Type<'d> {
    let arg = |i: usize| args.get(i).map_or(Type::Dyn, |t| (*t).clone());
    match function {
        operators::INDEX => match arg(0) {
            Type::List(item) => *item,
            Type::Map(_, value) => *value,
            _ => Type::Dyn,
        },
        operators::ADD | operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO => {
            match (arg(0), arg(1)) {
                (Type::Timestamp, Type::Timestamp) => Type::Duration,
                (Type::Timestamp, _) | (_, Type::Timestamp) => Type::Timestamp,
                (a, b) => a.join(b),
            }
        }
        operators::NEGATE => arg(0),
        operators::CONDITIONAL => arg(1).join(arg(2)),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::NOT_STRICTLY_FALSE
        | operators::IN => Type::Bool,
        name => self::function(name).map_or(Type::Dyn, |f| f.returns.of(target)),
    }
}

impl Returns {
    /// The type a call returns, given its target's type.
    pub(super) fn of<'d>(&self, target: Option<&Type<'d>>) -> Type<'d> {
        match self {
            Fixed(ty) => ty.clone(),
            Strings => Type::List(Box::new(Type::String)),
            Element => target.map_or(Type::Dyn, Type::element),
            Reversed => match target {
                Some(Type::List(item)) => Type::List(item.clone()),
                _ => Type::String,
            },
            Unwrapped => match target {
                Some(Type::Optional(inner)) => (**inner).clone(),
                _ => Type::Dyn,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_has_one_row() {
        let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a function is declared twice");
    }

    #[test]
    fn namespaces_cover_their_functions() {
        assert_eq!(function("format.dns1123Label").map(|f| f.cost), Some(Standard));
        assert_eq!(function("format.named").map(|f| f.cost), Some(One));
        assert!(function("unknown").is_none() && function("sets.unknown").is_none());
    }
}

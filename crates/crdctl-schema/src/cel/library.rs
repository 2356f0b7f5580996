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
#[derive(Debug, Clone, Copy)]
pub(super) enum Returns {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// A type (`type(x)`).
    Meta,
    /// `list(string)`.
    Strings,
    /// A value of a Kubernetes library type.
    Library(Library),
    /// An element of the target list (`sum`, `min`, `max`).
    Element,
    /// The target list reversed, else a string (`reverse` on lists and on strings).
    Reversed,
    /// What the target optional holds (`value`, `orValue`).
    Unwrapped,
    /// Anything: later costs take no size from it.
    Dyn,
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
    row("size", Int, Standard),
    row("int", Int, Standard),
    row("uint", Uint, Standard),
    row("double", Double, Standard),
    row("string", String, Standard),
    row("bytes", Bytes, Standard),
    row("bool", Bool, Standard),
    row("duration", Duration, Standard),
    row("timestamp", Timestamp, Standard),
    row("type", Meta, Standard),
    row("matches", Bool, Standard),
    row("contains", Bool, Standard),
    row("startsWith", Bool, Standard),
    row("endsWith", Bool, Standard),
    row("getFullYear", Int, Standard),
    row("getMonth", Int, Standard),
    row("getDayOfYear", Int, Standard),
    row("getDayOfMonth", Int, Standard),
    row("getDate", Int, Standard),
    row("getDayOfWeek", Int, Standard),
    row("getHours", Int, Standard),
    row("getMinutes", Int, Standard),
    row("getSeconds", Int, Standard),
    row("getMilliseconds", Int, Standard),
    // The optional types.
    row("hasValue", Bool, Standard),
    row("value", Unwrapped, Standard),
    row("orValue", Unwrapped, Standard),
    // cel-go's strings extension, as Kubernetes installs it.
    row("charAt", String, Standard),
    row("format", String, Standard),
    row("strings.quote", String, Standard),
    row("reverse", Reversed, Standard),
    row("lowerAscii", String, ScanTargetSized),
    row("upperAscii", String, ScanTargetSized),
    row("substring", String, ScanTargetSized),
    row("trim", String, ScanTargetSized),
    row("replace", String, Replace),
    row("split", Strings, Split),
    row("join", String, Join),
    row("indexOf", Int, Elements),
    row("lastIndexOf", Int, Elements),
    // The `sets` extension.
    row("sets.contains", Bool, Sets(1.0)),
    row("sets.intersects", Bool, Sets(1.0)),
    row("sets.equivalent", Bool, Sets(2.0)),
    // Kubernetes' lists library.
    row("isSorted", Bool, Elements),
    row("sum", Element, Elements),
    row("min", Element, Elements),
    row("max", Element, Elements),
    row("includes", Dyn, Includes),
    // Kubernetes' regex library.
    row("find", String, Find),
    row("findAll", Strings, Find),
    // Kubernetes' URLs library.
    row("url", Library(Library::Url), ScanFirstSized),
    row("isURL", Bool, Standard),
    row("getScheme", String, One),
    row("getHostname", String, One),
    row("getHost", String, One),
    row("getPort", String, One),
    row("getEscapedPath", String, One),
    row("getQuery", Dyn, One),
    // Kubernetes' JSON patch library.
    row("jsonpatch.escapeKey", String, ScanFirstSized),
    // Kubernetes' IP and CIDR libraries.
    row("ip", Library(Library::Ip), Ip),
    row("isIP", Bool, ScanFirst),
    row("ip.isCanonical", Bool, ScanFirstTwice),
    row("family", Int, One),
    row("isUnspecified", Bool, One),
    row("isLoopback", Bool, One),
    row("isLinkLocalMulticast", Bool, One),
    row("isLinkLocalUnicast", Bool, One),
    row("isGlobalUnicast", Bool, One),
    row("cidr", Library(Library::Cidr), ScanFirst),
    row("isCIDR", Bool, ScanFirst),
    row("masked", Library(Library::Cidr), One),
    row("prefixLength", Int, One),
    row("containsIP", Bool, ContainsIp),
    row("containsCIDR", Bool, ContainsCidr),
    // Kubernetes' quantity library.
    row("quantity", Library(Library::Quantity), ScanFirst),
    row("isQuantity", Bool, ScanFirst),
    row("sign", Int, One),
    row("asInteger", Int, One),
    row("isInteger", Bool, One),
    row("asApproximateFloat", Double, One),
    row("isGreaterThan", Bool, One),
    row("isLessThan", Bool, One),
    row("compareTo", Int, One),
    row("add", Library(Library::Quantity), One),
    row("sub", Library(Library::Quantity), One),
    // Kubernetes' semver library.
    row("semver", Library(Library::Semver), ScanFirst),
    row("isSemver", Bool, ScanFirst),
    row("major", Int, One),
    row("minor", Int, One),
    row("patch", Int, One),
    // Kubernetes' selector library.
    row("labelSelector", Library(Library::Selector), Standard),
    row("fieldSelector", Library(Library::Selector), Standard),
    // Kubernetes' format library.
    row("format.named", Library(Library::Format), One),
    row("format.", Library(Library::Format), Standard),
    row("validate", Dyn, NameFormat),
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
    pub(super) fn of<'d>(self, target: Option<&Type<'d>>) -> Type<'d> {
        match self {
            Bool => Type::Bool,
            Int => Type::Int,
            Uint => Type::Uint,
            Double => Type::Double,
            String => Type::String,
            Bytes => Type::Bytes,
            Duration => Type::Duration,
            Timestamp => Type::Timestamp,
            Meta => Type::Meta,
            Strings => Type::List(Box::new(Type::String)),
            Library(library) => Type::Library(library),
            Element => target.map_or(Type::Dyn, Type::element),
            Reversed => match target {
                Some(Type::List(item)) => Type::List(item.clone()),
                _ => Type::String,
            },
            Unwrapped => match target {
                Some(Type::Optional(inner)) => (**inner).clone(),
                _ => Type::Dyn,
            },
            Dyn => Type::Dyn,
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

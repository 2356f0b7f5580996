//! Kubernetes version priority.
//!
//! GA before beta before alpha before anything not shaped `v<N>[alpha|beta<M>]`; higher numbers
//! first within a class; the rest in reverse lexical order. This is apimachinery's
//! `CompareKubeAwareVersionStrings`, which discovery and kubectl use to pick the default version.
//!
//! ```
//! let mut versions = vec!["foo10", "v1", "v2beta1", "foo1", "v10"];
//! crdctl_model::version::sort_by_priority(&mut versions);
//! assert_eq!(versions, ["v10", "v1", "v2beta1", "foo1", "foo10"]);
//! ```

use std::cmp::Ordering;

/// Stability class of a kube-like version, ordered from least to most stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stability {
    /// `v<N>alpha<M>`.
    Alpha,
    /// `v<N>beta<M>`.
    Beta,
    /// `v<N>`.
    Ga,
}

/// A version string that matches `^v(\d+)(?:(alpha|beta)(\d+))?$`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeVersion {
    /// The number after `v`.
    pub major: u64,
    /// Alpha, beta or GA.
    pub stability: Stability,
    /// The number after `alpha`/`beta`; 0 for GA.
    pub minor: u64,
}

/// Parses a kube-like version; `None` for anything else (`v1.1`, `foo1`, `v1alpha`).
pub fn parse(version: &str) -> Option<KubeVersion> {
    let rest = version.strip_prefix('v')?;
    let major_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (major, rest) = rest.split_at(major_len);
    let major = parse_number(major)?;
    if rest.is_empty() {
        return Some(KubeVersion { major, stability: Stability::Ga, minor: 0 });
    }
    let (stability, minor) = if let Some(minor) = rest.strip_prefix("alpha") {
        (Stability::Alpha, minor)
    } else if let Some(minor) = rest.strip_prefix("beta") {
        (Stability::Beta, minor)
    } else {
        return None;
    };
    if !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(KubeVersion { major, stability, minor: parse_number(minor)? })
}

/// Compares two version strings by priority: `Greater` means `a` has the higher priority.
///
/// Equal strings compare `Equal`, and so do strings that differ only in leading zeros (`v1`, `v01`),
/// exactly as upstream.
pub fn compare(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (parse(a), parse(b)) {
        // Swapped on purpose: the lexically smaller non-kube-like string has the higher priority.
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.stability.cmp(&b.stability).then(a.major.cmp(&b.major)).then(a.minor.cmp(&b.minor)),
    }
}

/// Sorts versions in place, highest priority first (the order of discovery and kubectl).
pub fn sort_by_priority<S: AsRef<str>>(versions: &mut [S]) {
    sort_by_priority_of(versions, |version| version.as_ref());
}

/// Sorts items in place by the priority of the version `name` gives, highest first.
pub fn sort_by_priority_of<T>(items: &mut [T], name: impl Fn(&T) -> &str) {
    items.sort_by(|a, b| compare(name(b), name(a)));
}

/// Parses a run of ASCII digits like Go's `strconv.Atoi`: non-empty, and it must fit.
fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream `TestCompareKubeAwareVersionStrings`: (a, b, a has the higher priority).
    const COMPARE_TABLE: &[(&str, &str, bool)] = &[
        ("v1", "v2", false),
        ("v2", "v1", true),
        ("v10", "v2", true),
        ("v1", "v2alpha1", true),
        ("v1", "v2beta1", true),
        ("v1alpha2", "v1alpha1", true),
        ("v1beta1", "v2alpha3", true),
        ("v1alpha10", "v1alpha2", true),
        ("v1beta10", "v1beta2", true),
        ("foo", "v1beta2", false),
        ("bar", "foo", true),
        ("version1", "version2", true),
        ("version1", "version10", true),
    ];

    #[test]
    fn upstream_compare_table() {
        for &(a, b, greater) in COMPARE_TABLE {
            assert_eq!(compare(a, b) == Ordering::Greater, greater, "compare({a}, {b})");
            // Antisymmetry: the reverse comparison must agree.
            assert_eq!(compare(b, a) == Ordering::Less, greater, "compare({b}, {a})");
        }
    }

    #[test]
    fn upstream_parse_table() {
        assert_eq!(parse("v1.1"), None);
        assert_eq!(parse("v1alpha1.1"), None);
        assert_eq!(parse("v1alpha1"), Some(KubeVersion { major: 1, stability: Stability::Alpha, minor: 1 }));
        assert_eq!(parse("v2beta10"), Some(KubeVersion { major: 2, stability: Stability::Beta, minor: 10 }));
        assert_eq!(parse("v3"), Some(KubeVersion { major: 3, stability: Stability::Ga, minor: 0 }));
    }

    #[test]
    fn malformed_versions_are_not_kube_like() {
        for version in ["", "v", "valpha1", "v1alpha", "v1gamma1", "1", "V1", "v-1", "v99999999999999999999999"] {
            assert_eq!(parse(version), None, "{version:?}");
        }
    }

    #[test]
    fn seed_list_sorts_exactly() {
        let expected =
            ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"];
        let mut shuffled = expected;
        shuffled.reverse();
        shuffled.swap(1, 7);
        sort_by_priority(&mut shuffled);
        assert_eq!(shuffled, expected);
    }

    #[test]
    fn leading_zeros_tie() {
        assert_eq!(compare("v1", "v01"), Ordering::Equal);
    }
}

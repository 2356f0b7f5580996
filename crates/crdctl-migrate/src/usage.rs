//! Whether clients still use a version, from the server's `/metrics`.
//!
//! `crdctl serve` exports when each group/version/resource was last requested
//! (`crdctl_request_last_timestamp_seconds`). A kube-apiserver has only counters since it
//! started (`apiserver_request_total`) and `apiserver_requested_deprecated_apis`, which say that
//! a version was used but not when; that is reported, and the decision left to the user.
//!
//! Only the lines of those metrics are read, so a small parser of the text format does; the
//! general-purpose parsers bring a regex engine and a date library for it.

use std::collections::BTreeMap;

/// What the metrics say about one group/version/resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Requests since the server started, over every verb and code.
    pub requests: f64,
    /// When it was last requested (seconds since the Unix epoch), if the server says.
    pub last_request: Option<f64>,
    /// Whether `apiserver_requested_deprecated_apis` lists it.
    pub flagged_deprecated: bool,
}

/// One sample line: `name{label="value",…} value`.
fn sample(line: &str) -> Option<(&str, BTreeMap<&str, String>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, labels)) = series.split_once('{') else { return Some((series, BTreeMap::new(), value)) };
    let labels = labels.strip_suffix('}')?;
    let mut parsed = BTreeMap::new();
    let mut rest = labels;
    while let Some((key, after)) = rest.split_once("=\"") {
        // Values escape `\` and `"` with a backslash.
        let (mut text, mut chars, mut end) = (String::new(), after.char_indices(), None);
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    text.push(chars.next().map_or('\\', |(_, escaped)| if escaped == 'n' { '\n' } else { escaped }))
                }
                '"' => {
                    end = Some(at);
                    break;
                }
                other => text.push(other),
            }
        }
        parsed.insert(key.trim_start_matches(',').trim(), text);
        // The closing quote is one byte.
        rest = after.get(end?.saturating_add(1)..)?;
    }
    Some((name, parsed, value))
}

/// The usage of `group/version/resource` in a `/metrics` text.
pub fn of(metrics: &str, group: &str, version: &str, resource: &str) -> Usage {
    let mut usage = Usage::default();
    for (name, labels, value) in metrics.lines().filter_map(sample) {
        let matches = labels.get("group").is_some_and(|g| g == group)
            && labels.get("version").is_some_and(|v| v == version)
            && labels.get("resource").is_some_and(|r| r == resource);
        if !matches {
            continue;
        }
        match name {
            "apiserver_request_total" => usage.requests += value,
            "apiserver_requested_deprecated_apis" => usage.flagged_deprecated |= value > 0.0,
            "crdctl_request_last_timestamp_seconds" => {
                usage.last_request = Some(usage.last_request.map_or(value, |seen: f64| seen.max(value)));
            }
            _ => {}
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = r#"# HELP apiserver_request Counter of apiserver requests.
# TYPE apiserver_request counter
apiserver_request_total{verb="LIST",dry_run="",group="example.com",version="v1beta1",resource="crontabs",subresource="",scope="namespace",component="apiserver",code="200"} 3
apiserver_request_total{verb="GET",dry_run="",group="example.com",version="v1beta1",resource="crontabs",subresource="",scope="resource",component="apiserver",code="404"} 2
apiserver_request_total{verb="GET",dry_run="",group="example.com",version="v1",resource="crontabs",subresource="",scope="resource",component="apiserver",code="200"} 40
apiserver_requested_deprecated_apis{group="example.com",version="v1beta1",resource="crontabs",subresource="",removed_release=""} 1
crdctl_request_last_timestamp_seconds{group="example.com",version="v1beta1",resource="crontabs"} 1764581234.5
odd_metric{note="a \"quoted\", comma"} 7
# EOF
"#;

    #[test]
    fn sums_requests_and_reads_the_last_request_time() {
        let usage = of(METRICS, "example.com", "v1beta1", "crontabs");
        assert_eq!(usage.requests, 5.0);
        assert_eq!(usage.last_request, Some(1764581234.5));
        assert!(usage.flagged_deprecated);
        let v1 = of(METRICS, "example.com", "v1", "crontabs");
        assert_eq!((v1.requests, v1.last_request, v1.flagged_deprecated), (40.0, None, false));
        assert_eq!(of(METRICS, "other.io", "v1beta1", "crontabs"), Usage::default());
    }

    #[test]
    fn label_values_may_hold_escaped_quotes_and_commas() {
        let (name, labels, value) = sample(r#"odd_metric{note="a \"quoted\", comma",x="y"} 7"#).unwrap();
        assert_eq!((name, value), ("odd_metric", 7.0));
        assert_eq!(labels["note"], r#"a "quoted", comma"#);
        assert_eq!(labels["x"], "y");
        assert_eq!(sample("# TYPE x counter"), None);
        assert_eq!(sample("broken{a=\"1\" 2"), None);
    }
}

//! `spec.conversion`: the strategy, the webhook's URL or Service, and the review versions.
//!
//! Field paths use the API server's internal names (`webhookClientConfig`,
//! `conversionReviewVersions` directly under `spec.conversion`), because that is what it prints.

use super::Options;
use crdctl_model::crd::{ServiceReference, Spec};
use crdctl_model::field::{self, Path};
use crdctl_model::names::{dns1035_label_errors, dns1123_subdomain_errors};

/// ConversionReview versions the API server can send.
const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
pub(super) fn validate(spec: &Spec, options: Options, spec_path: &Path) -> field::ErrorList {
    let Some(conversion) = &spec.conversion else {
        return Vec::new();
    };
    let path = spec_path.child("conversion");
    let mut violations = Vec::new();
    let webhook = conversion.webhook.as_ref();
    let client_config = webhook.and_then(|w| w.client_config.as_ref());
    let review_versions = webhook.map_or(&[][..], |w| w.conversion_review_versions.as_slice());
    let client_config_path = path.child_at("webhookClientConfig", "webhook/clientConfig");
    let review_versions_path = path.child_at("conversionReviewVersions", "webhook/conversionReviewVersions");

    if conversion.strategy != "None" && spec.preserve_unknown_fields == Some(true) {
        violations.push(
            path.child("strategy").invalid(&conversion.strategy, "must be None if spec.preserveUnknownFields is true"),
        );
    }
    match conversion.strategy.as_str() {
        "" => violations.push(path.child("strategy").required("")),
        "None" | "Webhook" => {}
        other => violations.push(path.child("strategy").not_supported(other, &["None", "Webhook"])),
    }
    if conversion.strategy == "Webhook" {
        match client_config {
            None => violations.push(client_config_path.required("required when strategy is set to Webhook")),
            Some(config) => match (&config.url, &config.service) {
                (Some(url), None) => violations.extend(
                    crdctl_model::webhook::validate_url(url)
                        .into_iter()
                        .map(|e| e.at(&client_config_path.child("url"))),
                ),
                (None, Some(service)) => {
                    violations.extend(validate_service(service, &client_config_path.child("service")))
                }
                _ => violations.push(client_config_path.required("exactly one of url or service is required")),
            },
        }
        violations.extend(validate_review_versions(
            review_versions,
            options.require_recognized_review_version,
            &review_versions_path,
        ));
    } else {
        if client_config.is_some() {
            violations.push(client_config_path.forbidden("should not be set when strategy is not set to Webhook"));
        }
        if !review_versions.is_empty() {
            violations.push(review_versions_path.forbidden("should not be set when strategy is not set to Webhook"));
        }
    }
    violations
}

/// Whether the list holds a version the API server can send, or is empty.
pub(super) fn has_accepted_review_version_or_is_empty(versions: &[String]) -> bool {
    versions.is_empty() || versions.iter().any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str()))
}

fn validate_review_versions(versions: &[String], require_recognized: bool, path: &Path) -> field::ErrorList {
    if versions.is_empty() {
        return vec![path.required("")];
    }
    let mut violations = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (idx, version) in versions.iter().enumerate() {
        if !seen.insert(version.as_str()) {
            violations.push(path.index(idx).invalid(version, "duplicate version"));
            continue;
        }
        for error in dns1035_label_errors(version) {
            violations.push(path.index(idx).invalid(version, &error));
        }
    }
    if require_recognized && !versions.iter().any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str())) {
        violations.push(
            path.invalid(versions, format!("must include at least one of {}", ACCEPTED_REVIEW_VERSIONS.join(", "))),
        );
    }
    violations
}

/// `ValidateWebhookService`.
fn validate_service(service: &ServiceReference, path: &Path) -> field::ErrorList {
    let mut violations = Vec::new();
    if service.name.is_empty() {
        violations.push(path.child("name").required("service name is required"));
    }
    if service.namespace.is_empty() {
        violations.push(path.child("namespace").required("service namespace is required"));
    }
    let port = service.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        violations.push(path.child("port").invalid(port, "port is not valid: must be between 1 and 65535, inclusive"));
    }
    let Some(url_path) = service.path.as_deref() else {
        return violations;
    };
    let path = path.child("path");
    if url_path.is_empty() || url_path == "/" {
        return violations;
    }
    if url_path == "//" {
        violations.push(path.invalid(url_path, "segment[0] may not be empty"));
        return violations;
    }
    if !url_path.starts_with('/') {
        violations.push(path.invalid(url_path, "must start with a '/'"));
    }
    // Go slices off the first byte whatever it is, then one trailing slash.
    let rest = url_path.get(1..).unwrap_or("");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (idx, segment) in rest.split('/').enumerate() {
        if segment.is_empty() {
            violations.push(path.invalid(url_path, format!("segment[{idx}] may not be empty")));
            continue;
        }
        for error in dns1123_subdomain_errors(segment) {
            violations.push(path.invalid(url_path, format!("segment[{idx}]: {error}")));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;

    const WEBHOOK: &str = "  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1, v1beta1]\n      clientConfig:\n";

    #[track_caller]
    fn check_webhook(client_config: &str) -> Vec<String> {
        check(&format!("{VALID}{WEBHOOK}{client_config}"))
    }

    #[test]
    fn webhook_with_service_or_url_is_valid() {
        assert_eq!(
            check_webhook(
                "        service: {namespace: default, name: w, path: /crdconvert}\n        caBundle: Cg==\n"
            ),
            Vec::<String>::new()
        );
        assert_eq!(check_webhook("        url: https://w.example.com:9443/convert\n"), Vec::<String>::new());
    }

    #[test]
    fn exactly_one_of_url_or_service() {
        let both = "        url: https://w.example.com\n        service: {namespace: default, name: w}\n";
        assert_eq!(
            check_webhook(both),
            ["spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required"]
        );
        assert_eq!(
            check_webhook("        caBundle: Cg==\n"),
            ["spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required"]
        );
    }

    #[test]
    fn webhook_needs_a_client_config() {
        let text = format!(
            "{VALID}  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n"
        );
        assert_eq!(
            check(&text),
            ["spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook"]
        );
    }

    #[test]
    fn url_rules() {
        let cases: &[(&str, &[&str])] = &[
            (
                "http://w.example.com",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                ],
            ),
            (
                "https:///convert",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]",
                ],
            ),
            (
                "https://user:pw@w.example.com",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"user:pw\": user information is not permitted in the URL",
                ],
            ),
            (
                "https://w.example.com/c#frag",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"frag\": fragments are not permitted in the URL",
                ],
            ),
            (
                "https://w.example.com/c?x=1",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
                ],
            ),
            (
                "\"\"",
                &[
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                    "spec.conversion.webhookClientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]",
                ],
            ),
            (
                "\":foo\"",
                &[
                    "spec.conversion.webhookClientConfig.url: Required value: url must be a valid URL: parse \":foo\": missing protocol scheme; desired format: https://host[/path]",
                ],
            ),
        ];
        for &(url, expected) in cases {
            assert_eq!(check_webhook(&format!("        url: {url}\n")), expected, "{url}");
        }
    }

    #[test]
    fn service_rules() {
        assert_eq!(
            check_webhook("        service: {port: 0}\n"),
            [
                "spec.conversion.webhookClientConfig.service.name: Required value: service name is required",
                "spec.conversion.webhookClientConfig.service.namespace: Required value: service namespace is required",
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
            ]
        );
        assert_eq!(
            check_webhook("        service: {namespace: n, name: w, port: 65536}\n"),
            [
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 65536: port is not valid: must be between 1 and 65535, inclusive"
            ]
        );
        let path = |p: &str| check_webhook(&format!("        service: {{namespace: n, name: w, path: \"{p}\"}}\n"));
        assert_eq!(path("/"), Vec::<String>::new());
        assert_eq!(path("/a/b/"), Vec::<String>::new());
        assert_eq!(
            path("//"),
            ["spec.conversion.webhookClientConfig.service.path: Invalid value: \"//\": segment[0] may not be empty"]
        );
        assert_eq!(
            path("convert"),
            ["spec.conversion.webhookClientConfig.service.path: Invalid value: \"convert\": must start with a '/'"]
        );
        assert_eq!(
            path("/a//b"),
            ["spec.conversion.webhookClientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not be empty"]
        );
        assert_eq!(
            path("/convert_v1"),
            [
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"/convert_v1\": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
    }

    #[test]
    fn review_version_rules() {
        let with_versions = |versions: &str| {
            check(&format!(
                "{VALID}  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: {versions}\n      clientConfig:\n        url: https://w.example.com\n"
            ))
        };
        assert_eq!(with_versions("[]"), ["spec.conversion.conversionReviewVersions: Required value"]);
        assert_eq!(
            with_versions("[v1, v1]"),
            ["spec.conversion.conversionReviewVersions[1]: Invalid value: \"v1\": duplicate version"]
        );
        assert_eq!(
            with_versions("[vx]"),
            [
                r#"spec.conversion.conversionReviewVersions: Invalid value: ["vx"]: must include at least one of v1, v1beta1"#
            ]
        );
        assert_eq!(
            with_versions("[\"V2\", v1]"),
            [
                "spec.conversion.conversionReviewVersions[0]: Invalid value: \"V2\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
    }

    #[test]
    fn webhook_fields_are_forbidden_with_strategy_none() {
        let text = format!(
            "{VALID}  conversion:\n    strategy: None\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig:\n        url: https://w.example.com\n"
        );
        assert_eq!(
            check(&text),
            [
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]
        );
    }

    #[test]
    fn strategy_rules() {
        let text = format!("{VALID}  conversion:\n    strategy: Magic\n");
        assert_eq!(
            check(&text),
            [r#"spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook""#]
        );
        let text = format!("{VALID}  conversion:\n    strategy: \"\"\n");
        assert_eq!(check(&text), ["spec.conversion.strategy: Required value"]);
    }

    #[test]
    fn webhook_needs_pruning() {
        let v1beta1 = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  names:\n    plural: crontabs\n    kind: CronTab\n  version: v1\n  conversion:\n    strategy: Webhook\n    webhookClientConfig:\n      url: https://w.example.com\n";
        assert_eq!(
            check(v1beta1),
            [
                r#"spec.conversion.strategy: Invalid value: "Webhook": must be None if spec.preserveUnknownFields is true"#
            ]
        );
        let pruning = v1beta1.replace(
            "  version: v1\n",
            "  version: v1\n  preserveUnknownFields: false\n  validation:\n    openAPIV3Schema:\n      type: object\n",
        );
        assert_eq!(check(&pruning), Vec::<String>::new(), "conversionReviewVersions defaults to [v1beta1]");
    }
}

//! Webhook URLs, as apiserver's `pkg/util/webhook.ValidateWebhookURL` checks them: for a CRD's
//! conversion webhook when the definition is validated, and again by every webhook client before
//! it sends a request.
//!
//! ```
//! let errors = crdctl_model::webhook::validate_url("http://user@convert.example.com/x?a=b");
//! let details: Vec<String> = errors.iter().map(ToString::to_string).collect();
//! assert_eq!(details.len(), 3);
//! assert!(details[1].starts_with("user information is not permitted"));
//! ```

use crate::field::{self, Path};
use crate::go;

const URL_FORM: &str = "; desired format: https://host[/path]";

/// A problem with a webhook URL, before it is given a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError {
    /// `Some(value)` for `Invalid value: <value>`, `None` for `Required value`.
    pub invalid_value: Option<String>,
    /// The detail.
    pub detail: String,
}

impl UrlError {
    /// The error at the field that holds the URL.
    pub fn at(&self, path: &Path) -> field::Error {
        match &self.invalid_value {
            Some(value) => path.invalid(value, &self.detail),
            None => path.required(&self.detail),
        }
    }
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// `ValidateWebhookURL` with https forced: the scheme must be https, with a host, and without
/// user information, query or fragment. The webhook client calls this too, before any request.
pub fn validate_url(url: &str) -> Vec<UrlError> {
    let parsed = match GoUrl::parse(url) {
        Ok(parsed) => parsed,
        Err(reason) => {
            return vec![UrlError {
                invalid_value: None,
                detail: format!("url must be a valid URL: parse {}: {reason}{URL_FORM}", go::quote(url)),
            }];
        }
    };
    let mut errors = Vec::new();
    let mut invalid =
        |value: &str, detail: String| errors.push(UrlError { invalid_value: Some(value.to_string()), detail });
    if parsed.scheme != "https" {
        invalid(parsed.scheme, format!("'https' is the only allowed URL scheme{URL_FORM}"));
    }
    if parsed.host.is_empty() {
        invalid(parsed.host, format!("host must be specified{URL_FORM}"));
    }
    if let Some(user) = parsed.user {
        invalid(user, "user information is not permitted in the URL".into());
    }
    if !parsed.fragment.is_empty() {
        invalid(parsed.fragment, "fragments are not permitted in the URL".into());
    }
    if !parsed.query.is_empty() {
        invalid(parsed.query, "query parameters are not permitted in the URL".into());
    }
    errors
}

/// The parts of Go's `url.Parse` that webhook validation looks at.
struct GoUrl<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

impl<'a> GoUrl<'a> {
    fn parse(url: &'a str) -> Result<GoUrl<'a>, &'static str> {
        if url.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}') {
            return Err("net/url: invalid control character in URL");
        }
        let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
        let (scheme, rest) = match rest.split_once(':') {
            Some(("", _)) => return Err("missing protocol scheme"),
            Some((scheme, after)) if is_scheme(scheme) => (scheme, after),
            _ => ("", rest),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (mut user, mut host) = (None, "");
        if let Some(authority_and_path) = rest.strip_prefix("//") {
            let authority = authority_and_path.split('/').next().unwrap_or("");
            host = authority;
            if let Some((userinfo, after)) = authority.rsplit_once('@') {
                user = Some(userinfo);
                host = after;
            }
            if let Some((_, port)) = host.rsplit_once(':').filter(|_| !host.ends_with(']'))
                && !port.bytes().all(|b| b.is_ascii_digit())
            {
                return Err("invalid port after host");
            }
        }
        Ok(GoUrl { scheme, user, host, query, fragment })
    }
}

fn is_scheme(candidate: &str) -> bool {
    let mut bytes = candidate.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

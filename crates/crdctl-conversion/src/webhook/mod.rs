//! The conversion webhook client, as the API server calls a CRD's webhook, and the HTTPS
//! [`Endpoint`] it shares with the admission webhooks.
//!
//! - The review version is the first of the CRD's `conversionReviewVersions` that is supported.
//! - A `url` is used as written (it must be https with a host and no user info, query or
//!   fragment); a `service` becomes `https://<name>.<namespace>.svc:<port><path>`, reached through a
//!   [`ServiceResolver`] while TLS still verifies the name `<name>.<namespace>.svc`.
//! - TLS is verified against the `caBundle`, or the system roots when it is empty.
//! - Requests carry `?timeout=30s` and `Content-Type: application/json`, and time out after 30 s;
//!   HTTP/1.1 is used, as the API server does for remote webhooks.
//! - Objects already in the desired version are never sent. The answer is checked by
//!   [`crate::response`], and every failure reads like the API server's.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use crdctl_model::crd::{ServiceReference, WebhookClientConfig};
use crdctl_model::json::write_key;
use serde_json::Value;

mod http;

use crate::response::{self, ConversionError, ObjectJson, Original, Sent, Shape};
use crate::review::ReviewVersion;

/// The API server's webhook timeout.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response body accepted.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Finds the address of a Service: in a cluster that is DNS; elsewhere (tests, a port-forward)
/// the caller decides.
pub trait ServiceResolver: Send + Sync {
    /// The address to connect to for `service` on `port`.
    fn resolve(&self, service: &ServiceReference, port: u16) -> Result<SocketAddr, String>;
}

impl<F> ServiceResolver for F
where
    F: Fn(&ServiceReference, u16) -> Result<SocketAddr, String> + Send + Sync,
{
    fn resolve(&self, service: &ServiceReference, port: u16) -> Result<SocketAddr, String> {
        self(service, port)
    }
}

/// Resolves `<name>.<namespace>.svc` with the system resolver, as inside a cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct DnsResolver;

impl ServiceResolver for DnsResolver {
    fn resolve(&self, service: &ServiceReference, port: u16) -> Result<SocketAddr, String> {
        use std::net::ToSocketAddrs;
        let host = format!("{}.{}.svc", service.name, service.namespace);
        (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|err| format!("dial tcp: lookup {host}: {err}"))?
            .next()
            .ok_or_else(|| format!("dial tcp: lookup {host}: no such host"))
    }
}

/// An HTTPS endpoint the API server calls, from a webhook's `clientConfig`: its URL, and a
/// client that verifies TLS against the `caBundle`. Conversion and admission webhooks share it.
#[derive(Clone)]
pub struct Endpoint {
    client: Arc<http::Client>,
    /// The URL without the query.
    base: String,
    /// The URL's path.
    path: String,
    /// The path and query of the last call's timeout, read: calls read it once.
    last: Arc<std::sync::Mutex<Option<(Duration, ::http::Uri)>>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("base", &self.base).finish_non_exhaustive()
    }
}

/// Why a call brought no answer to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Nothing came back: `Post "<url>": <the innermost cause>`.
    Unanswered(String),
    /// The answer passed the size limit (the rest was not read).
    TooLarge,
    /// A non-2xx answer, in client-go's words.
    Status(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unanswered(text) | CallError::Status(text) => f.write_str(text),
            CallError::TooLarge => write!(f, "response too large (limit {} MiB)", MAX_RESPONSE_BYTES >> 20),
        }
    }
}

impl Endpoint {
    /// The endpoint a `clientConfig` names: a `url` (https, with a host, no user info, query or
    /// fragment) as written, or a `service` reached through `resolver`; why not, otherwise.
    pub fn new(config: &WebhookClientConfig, resolver: &dyn ServiceResolver) -> Result<Endpoint, String> {
        let tls = tls_config(config.ca_bundle.as_deref().unwrap_or_default())?;
        let (base, authority, path, target) = match (&config.url, &config.service) {
            (Some(url), None) => {
                if let Some(problem) = crdctl_model::webhook::validate_url(url).into_iter().next() {
                    return Err(format!("invalid webhook url {url:?}: {problem}"));
                }
                let parsed: ::http::Uri = url.parse().map_err(|err| format!("invalid webhook url {url:?}: {err}"))?;
                let authority = parsed.authority().ok_or_else(|| format!("invalid webhook url {url:?}: no host"))?;
                let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
                let target = http::Target::Host(host, authority.port_u16().unwrap_or(443));
                (url.clone(), authority.to_string(), parsed.path().to_string(), target)
            }
            (None, Some(service)) => {
                let port = u16::try_from(service.port.unwrap_or(443))
                    .map_err(|_| format!("invalid service port {:?}", service.port))?;
                let authority = format!("{}.{}.svc:{port}", service.name, service.namespace);
                let path = service.path.clone().unwrap_or_default();
                let target = http::Target::Address(resolver.resolve(service, port)?);
                (format!("https://{authority}{path}"), authority, path, target)
            }
            _ => return Err("exactly one of url or service is required".into()),
        };
        let client = Arc::new(http::Client::new(tls, &authority, target)?);
        let path = if path.is_empty() { "/".to_string() } else { path };
        Ok(Endpoint { client, base, path, last: Arc::default() })
    }

    /// The URL a call with `timeout` goes to: the API server adds `?timeout=<seconds>s`.
    pub fn url(&self, timeout: Duration) -> String {
        format!("{}?timeout={}s", self.base, timeout.as_secs().max(1))
    }

    /// POSTs a JSON `body`, waiting at most `timeout` for the whole call; the answer's body.
    pub async fn post(&self, body: bytes::Bytes, timeout: Duration) -> Result<Vec<u8>, CallError> {
        let unanswered = |why: String| CallError::Unanswered(format!("Post {:?}: {why}", self.url(timeout)));
        let path = self.path_and_query(timeout).map_err(unanswered)?;
        let headers = [
            (::http::header::CONTENT_TYPE, ::http::HeaderValue::from_static("application/json")),
            (::http::header::ACCEPT, ::http::HeaderValue::from_static("application/json, */*")),
            (::http::header::USER_AGENT, ::http::HeaderValue::from_static("kube-apiserver-admission")),
        ];
        let call = self.client.post(&path, &headers, body, MAX_RESPONSE_BYTES);
        let (status, bytes) = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(failure)) => return Err(unanswered(innermost(&*failure))),
            Err(_) => {
                return Err(unanswered(
                    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
                ));
            }
        };
        let bytes = bytes.ok_or(CallError::TooLarge)?;
        if !(200..300).contains(&status) {
            return Err(CallError::Status(http_status_error(status, &bytes)));
        }
        Ok(bytes)
    }

    /// The path and query of a call with `timeout`, read once for each timeout in turn.
    fn path_and_query(&self, timeout: Duration) -> Result<::http::Uri, String> {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, path)) = last.as_ref().filter(|(last, _)| *last == timeout) {
            return Ok(path.clone());
        }
        let path: ::http::Uri =
            format!("{}?timeout={}s", self.path, timeout.as_secs().max(1)).parse().map_err(|err| format!("{err}"))?;
        *last = Some((timeout, path.clone()));
        Ok(path)
    }
}

/// A client for one CRD's conversion webhook.
#[derive(Debug, Clone)]
pub struct WebhookClient {
    endpoint: Endpoint,
    version: ReviewVersion,
    timeout: Duration,
}

impl WebhookClient {
    /// Builds a client from a CRD's `clientConfig` and `conversionReviewVersions`.
    pub fn new(
        config: &WebhookClientConfig,
        review_versions: &[String],
        resolver: &dyn ServiceResolver,
    ) -> Result<WebhookClient, ConversionError> {
        let version = ReviewVersion::negotiate(review_versions)
            .ok_or_else(|| ConversionError::setup("no supported conversion review versions"))?;
        let endpoint = Endpoint::new(config, resolver).map_err(ConversionError::setup)?;
        Ok(WebhookClient { endpoint, version, timeout: TIMEOUT })
    }

    /// Uses another deadline than the API server's 30 s (tests, slow links).
    pub fn with_timeout(mut self, timeout: Duration) -> WebhookClient {
        self.timeout = timeout;
        self
    }

    /// The URL requests go to, with the `timeout` query the API server adds.
    pub fn endpoint(&self) -> String {
        self.endpoint.url(self.timeout)
    }

    /// The ConversionReview version this client sends.
    pub fn review_version(&self) -> ReviewVersion {
        self.version
    }

    /// Converts `objects` to `desired_api_version`, in order. Objects already in that version are
    /// kept as they are and not sent.
    pub async fn convert(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
        shape: Shape,
    ) -> Result<Vec<Value>, ConversionError> {
        let Some(first) = objects.iter().find(|object| needs_conversion(object, desired_api_version)) else {
            return Ok(objects);
        };
        let gvk = response::gvk_of(first);
        let converted = self.convert_json(objects, desired_api_version, shape).await?;
        converted
            .iter()
            .map(|object| {
                object.to_value().map_err(|err| {
                    ConversionError::failed(&gvk, format!("couldn't get version/kind; json parse error: {err}"))
                })
            })
            .collect()
    }

    /// [`WebhookClient::convert`], with the objects as JSON text: the webhook's fields as it
    /// wrote them, never parsed, around the original metadata. A list read sends this on.
    pub async fn convert_json(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
        shape: Shape,
    ) -> Result<Vec<ObjectJson>, ConversionError> {
        let (mut kept, mut to_send) = (Vec::with_capacity(objects.len()), Vec::new());
        for object in objects {
            if needs_conversion(&object, desired_api_version) {
                to_send.push(object);
                kept.push(None);
            } else {
                kept.push(Some(ObjectJson::of(&object)));
            }
        }
        let mut converted =
            if to_send.is_empty() { Vec::new() } else { self.send(to_send, desired_api_version, shape).await? }
                .into_iter();
        // `send` checked that one object came back for each sent.
        let all = kept.into_iter().map(|kept| kept.or_else(|| converted.next())).collect::<Option<Vec<_>>>();
        all.ok_or_else(|| ConversionError::setup("conversion lost an object"))
    }

    async fn send(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
        shape: Shape,
    ) -> Result<Vec<ObjectJson>, ConversionError> {
        let gvk = objects.first().map(response::gvk_of).unwrap_or_default();
        let uid = uuid::Uuid::new_v4().to_string();
        let (body, metadata_spans) = request_body(self.version, &uid, desired_api_version, &objects);
        let body = bytes::Bytes::from(body);
        let bytes = self.endpoint.post(body.clone(), self.timeout).await.map_err(|err| match err {
            CallError::Unanswered(text) => ConversionError::unanswered(&gvk, text),
            answered => ConversionError::failed(&gvk, answered),
        })?;
        tracing::debug!(uid, n_objects = objects.len(), desired_api_version, "conversion webhook answered");
        let review = response::decode(&bytes, &gvk)?;
        let sent = Sent { version: self.version, uid: &uid, desired_api_version, shape, gvk: &gvk };
        let originals = objects
            .into_iter()
            .zip(metadata_spans)
            .map(|(object, span)| Original { object, metadata_text: span.and_then(|span| body.get(span)) })
            .collect();
        response::converted_objects(&sent, originals, review)
    }
}

/// A ConversionReview request for `objects`, and where in it each object's `metadata` is
/// written: an answer whose metadata comes back unchanged reuses that text.
fn request_body(
    version: ReviewVersion,
    uid: &str,
    desired_api_version: &str,
    objects: &[Value],
) -> (Vec<u8>, Vec<Option<Range<usize>>>) {
    let mut out = Vec::with_capacity(4096);
    out.push(b'{');
    for (key, value) in [("apiVersion", version.api_version()), ("kind", crate::review::KIND)] {
        write_key(&mut out, key);
        write_json(&mut out, value);
        out.push(b',');
    }
    write_key(&mut out, "request");
    out.push(b'{');
    write_key(&mut out, "uid");
    write_json(&mut out, uid);
    out.push(b',');
    write_key(&mut out, "desiredAPIVersion");
    write_json(&mut out, desired_api_version);
    out.push(b',');
    write_key(&mut out, "objects");
    out.push(b'[');
    let mut spans = Vec::with_capacity(objects.len());
    for (idx, object) in objects.iter().enumerate() {
        if idx > 0 {
            out.push(b',');
        }
        let Some(fields) = object.as_object() else {
            write_json(&mut out, object);
            spans.push(None);
            continue;
        };
        let mut span = None;
        out.push(b'{');
        for (at, (key, value)) in fields.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            write_key(&mut out, key);
            let start = out.len();
            write_json(&mut out, value);
            if key == "metadata" {
                span = Some(start..out.len());
            }
        }
        out.push(b'}');
        spans.push(span);
    }
    out.extend_from_slice(b"]}}");
    (out, spans)
}

/// Writes `value` as JSON into memory, which cannot fail for strings and values.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Whether an object must go to the webhook: it is in another version, and it is not an
/// "empty" object (only `apiVersion` and `kind`), which the API server converts without a call.
fn needs_conversion(object: &Value, desired_api_version: &str) -> bool {
    let in_desired = object.get("apiVersion").and_then(Value::as_str) == Some(desired_api_version);
    let empty =
        object.as_object().is_some_and(|m| m.len() == 2 && m.contains_key("apiVersion") && m.contains_key("kind"));
    !in_desired && !empty
}

/// client-go's message for a non-2xx answer. A `Status` body speaks for itself.
fn http_status_error(code: u16, body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<Value>(body)
        && status.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(message) = status.get("message").and_then(Value::as_str)
    {
        return message.to_string();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        406 => "the server was unable to respond with a content type that the client supports".into(),
        409 => "the server reported a conflict".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => {
            "the server was unable to return a response in the time allotted, but may still be processing the request"
                .into()
        }
        500.. => format!("an error on the server ({text:?}) has prevented the request from succeeding"),
        _ => format!("the server responded with the status code {code} but did not return more information"),
    }
}

/// The innermost cause of a transport error, which says what actually went wrong (the outer
/// ones repeat the URL).
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = err;
    while let Some(cause) = innermost.source() {
        innermost = cause;
    }
    innermost.to_string()
}

/// A rustls client configuration trusting the caBundle (base64 of PEM, as in the CRD, or PEM),
/// or the system roots when it is empty.
fn tls_config(ca_bundle: &str) -> Result<rustls::ClientConfig, String> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca_bundle = ca_bundle.trim();
    if ca_bundle.is_empty() {
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    } else {
        let pem = if ca_bundle.starts_with("-----BEGIN") {
            ca_bundle.as_bytes().to_vec()
        } else {
            let compact: String = ca_bundle.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|err| format!("invalid caBundle: not base64: {err}"))?
        };
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|err| format!("invalid caBundle: {err}"))?;
            roots.add(cert).map_err(|err| format!("invalid caBundle: {err}"))?;
        }
        if roots.is_empty() {
            return Err("invalid caBundle: no certificates found".into());
        }
    }
    Ok(rustls::ClientConfig::builder().with_root_certificates(Arc::new(roots)).with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_in_the_desired_version_are_not_sent() {
        assert!(!needs_conversion(&json!({"apiVersion": "foo/v1", "kind": "K", "spec": {}}), "foo/v1"));
        assert!(needs_conversion(&json!({"apiVersion": "foo/v2", "kind": "K", "spec": {}}), "foo/v1"));
        assert!(
            !needs_conversion(&json!({"apiVersion": "foo/v2", "kind": "K"}), "foo/v1"),
            "empty objects need no webhook"
        );
    }

    #[test]
    fn the_request_is_a_review_and_knows_where_each_metadata_is() {
        let objects = vec![
            json!({"apiVersion": "foo/v2", "kind": "K", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"s": "\u{1}"}}),
            json!({"apiVersion": "foo/v2", "kind": "K"}),
            json!("not an object"),
        ];
        let (body, spans) = request_body(ReviewVersion::V1beta1, "u\"id", "foo/v1", &objects);
        let expected = crate::ConversionReview::request(ReviewVersion::V1beta1, "u\"id", "foo/v1", objects.clone());
        assert_eq!(serde_json::from_slice::<crate::ConversionReview>(&body).unwrap(), expected);
        let metadata: Vec<Option<Value>> =
            spans.into_iter().map(|span| span.map(|span| serde_json::from_slice(&body[span]).unwrap())).collect();
        assert_eq!(metadata, [Some(objects[0]["metadata"].clone()), None, None]);
    }

    #[test]
    fn http_errors_read_like_client_go() {
        assert_eq!(http_status_error(422, b""), "the server rejected our request due to an error in our request");
        assert_eq!(
            http_status_error(500, b"boom\n"),
            "an error on the server (\"boom\") has prevented the request from succeeding"
        );
        assert_eq!(http_status_error(500, br#"{"kind":"Status","message":"custom"}"#), "custom");
        assert_eq!(
            http_status_error(418, b""),
            "the server responded with the status code 418 but did not return more information"
        );
    }

    #[test]
    fn review_versions_and_urls_are_checked_before_any_request() {
        let config = WebhookClientConfig { url: Some("https://w.example.com/convert".into()), ..Default::default() };
        let err = WebhookClient::new(&config, &["vx".into()], &DnsResolver).unwrap_err();
        assert_eq!(err.message, "no supported conversion review versions");
        let plain = WebhookClientConfig { url: Some("http://w.example.com".into()), ..Default::default() };
        let err = WebhookClient::new(&plain, &["v1".into()], &DnsResolver).unwrap_err();
        assert!(err.message.contains("'https' is the only allowed URL scheme"), "{}", err.message);
        let bad_ca = WebhookClientConfig {
            url: Some("https://w.example.com".into()),
            ca_bundle: Some("not base64!".into()),
            ..Default::default()
        };
        assert!(
            WebhookClient::new(&bad_ca, &["v1".into()], &DnsResolver)
                .unwrap_err()
                .message
                .starts_with("invalid caBundle")
        );
    }
}

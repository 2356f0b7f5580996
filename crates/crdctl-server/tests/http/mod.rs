//! Requests to a server under test, as a client sends them: a body as JSON text under the
//! content type given, the answer as its status code and its body (`null` when not JSON).

use crdctl_server::testing::TestServer;
use serde_json::Value;

/// A server's URL and a client for it.
pub struct Http {
    /// `http(s)://host:port`.
    pub url: String,
    /// The client requests go through (one that trusts a test's CA, say).
    pub client: reqwest::Client,
}

impl Http {
    /// Plain HTTP to `server`.
    pub fn to(server: &TestServer) -> Http {
        Http { url: server.url(), client: reqwest::Client::new() }
    }

    /// Plain HTTP to `server`, every request carrying `headers` (credentials, say).
    #[allow(dead_code, reason = "each suite compiles this module; not every suite sends credentials")]
    pub fn with_headers(server: &TestServer, headers: &[(&str, &str)]) -> Http {
        let mut default = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            default.append(reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        Http { url: server.url(), client: reqwest::Client::builder().default_headers(default).build().unwrap() }
    }

    /// Sends `body` (if any) as `content_type` with `method` to `path`.
    pub async fn send(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.url);
        let mut request = self.client.request(method.parse().unwrap(), url).header("Content-Type", content_type);
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        (code, serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null))
    }
}

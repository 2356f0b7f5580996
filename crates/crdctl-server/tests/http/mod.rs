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

//! The few API calls migration and retirement make, on a kube-rs client.
//!
//! Objects stay raw JSON from the wire to the wire: a no-op update must send back exactly what
//! the server returned, and typed structs (k8s-openapi's, or `DynamicObject`'s metadata) drop
//! fields they do not know.

use serde_json::Value;

/// A failed call: the server's `Status`, or no answer at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server answered with an error `Status`.
    #[error("{message} ({code} {reason})")]
    Status {
        /// The HTTP code.
        code: u16,
        /// The `Status` reason (`Conflict`, `NotFound`, `Expired`, …).
        reason: String,
        /// The `Status` message.
        message: String,
    },
    /// The request did not get an answer.
    #[error("{0}")]
    Transport(String),
}

impl CallError {
    /// The HTTP code of a `Status` answer.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Status { code, .. } => Some(*code),
            CallError::Transport(_) => None,
        }
    }
}

impl From<kube::Error> for CallError {
    fn from(err: kube::Error) -> CallError {
        match err {
            kube::Error::Api(status) => {
                CallError::Status { code: status.code, reason: status.reason.clone(), message: status.message.clone() }
            }
            other => CallError::Transport(other.to_string()),
        }
    }
}

/// A cluster (or `crdctl serve`) reached through a kube-rs client.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
}

/// Where the objects of a CRD live, at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// The API group.
    pub group: String,
    /// The version objects are read and written at.
    pub version: String,
    /// The plural name.
    pub plural: String,
    /// Whether objects have a namespace.
    pub namespaced: bool,
}

impl Resource {
    /// The resource of `crd` at `version`.
    pub fn of(crd: &Crd, version: &str) -> Resource {
        let spec = &crd.definition.spec;
        Resource {
            group: spec.group.clone(),
            version: version.to_string(),
            plural: spec.names.plural.clone(),
            namespaced: spec.scope == "Namespaced",
        }
    }

    /// The collection across all namespaces.
    pub fn collection(&self) -> String {
        format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
    }

    /// The path of an object read from a list.
    pub fn object_path(&self, object: &Value) -> String {
        let meta = &object["metadata"];
        let name = meta["name"].as_str().unwrap_or_default();
        match meta["namespace"].as_str().filter(|_| self.namespaced) {
            Some(namespace) => {
                format!("/apis/{}/{}/namespaces/{namespace}/{}/{name}", self.group, self.version, self.plural)
            }
            None => format!("{}/{name}", self.collection()),
        }
    }
}

/// The path of a CRD.
pub fn crd_path(name: &str) -> String {
    format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
}

impl Cluster {
    /// Wraps a client.
    pub fn new(client: kube::Client) -> Cluster {
        Cluster { client }
    }

    /// Connects with a kubeconfig file (or the default one: `$KUBECONFIG`, `~/.kube/config`)
    /// and a context in it (or its current one), as kubectl does; also returns the server URL.
    pub async fn connect(
        kubeconfig: Option<&std::path::Path>,
        context: Option<&str>,
    ) -> Result<(Cluster, String), CallError> {
        let options = kube::config::KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
        let config = match kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|err| CallError::Transport(format!("{}: {err}", path.display())))?;
                kube::Config::from_custom_kubeconfig(file, &options).await
            }
            None => kube::Config::from_kubeconfig(&options).await,
        }
        .map_err(|err| CallError::Transport(format!("kubeconfig: {err}")))?;
        let url = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(CallError::from)?;
        Ok((Cluster { client }, url))
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<Value, CallError> {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .map_err(|err| CallError::Transport(format!("{path}: {err}")))?;
        Ok(self.client.request::<Value>(request).await?)
    }

    /// GET an object or a list.
    pub async fn get(&self, path: &str) -> Result<Value, CallError> {
        self.send(http::Method::GET, path, "application/json", Vec::new()).await
    }

    /// One page of the list at `collection`, at most `limit` items, after `token`.
    pub async fn list_page(&self, collection: &str, limit: u32, token: Option<&str>) -> Result<ListPage, CallError> {
        let mut path = format!("{collection}?limit={limit}");
        if let Some(token) = token {
            path.push_str("&continue=");
            path.push_str(token);
        }
        let list = self.get(&path).await?;
        let next = list
            .pointer("/metadata/continue")
            .and_then(Value::as_str)
            .filter(|token| !token.is_empty())
            .map(str::to_string);
        let remaining = list.pointer("/metadata/remainingItemCount").and_then(Value::as_u64);
        let items = match list {
            Value::Object(mut list) => match list.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        Ok(ListPage { items, next, remaining })
    }

    /// GET a plain-text endpoint such as `/metrics`.
    pub async fn text(&self, path: &str) -> Result<String, CallError> {
        let request = http::Request::get(path).body(Vec::new()).map_err(|err| CallError::Transport(err.to_string()))?;
        Ok(self.client.request_text(request).await?)
    }

    /// PUT an object back (its `metadata.resourceVersion` is the precondition).
    pub async fn put(&self, path: &str, object: &Value, dry_run: bool) -> Result<Value, CallError> {
        let path = if dry_run { format!("{path}?dryRun=All") } else { path.to_string() };
        let body = serde_json::to_vec(object).map_err(|err| CallError::Transport(err.to_string()))?;
        self.send(http::Method::PUT, &path, "application/json", body).await
    }

    /// POST an object to a collection.
    pub async fn post(&self, path: &str, object: &Value) -> Result<Value, CallError> {
        let body = serde_json::to_vec(object).map_err(|err| CallError::Transport(err.to_string()))?;
        self.send(http::Method::POST, path, "application/json", body).await
    }

    /// A JSON merge patch.
    pub async fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, CallError> {
        let body = serde_json::to_vec(patch).map_err(|err| CallError::Transport(err.to_string()))?;
        self.send(http::Method::PATCH, path, "application/merge-patch+json", body).await
    }

    /// Reads a CRD: the model's view and the raw object.
    pub async fn crd(&self, name: &str) -> Result<Crd, CallError> {
        let raw = self.get(&crd_path(name)).await?;
        Crd::from_raw(raw)
    }
}

/// A CRD as read from the server: the model's view, with the fields it leaves out.
#[derive(Debug, Clone)]
pub struct Crd {
    /// The definition.
    pub definition: crdctl_model::crd::CustomResourceDefinition,
    /// The object as the server returned it.
    pub raw: Value,
}

impl Crd {
    /// Reads the model's view of a CRD object.
    pub fn from_raw(raw: Value) -> Result<Crd, CallError> {
        let definition = serde_json::from_value(raw.clone())
            .map_err(|err| CallError::Transport(format!("the server returned an unreadable CRD: {err}")))?;
        Ok(Crd { definition, raw })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.definition.metadata.name
    }

    /// `metadata.uid`: a CRD deleted and created again is another one.
    pub fn uid(&self) -> &str {
        self.raw.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.resourceVersion`, the precondition of an update.
    pub fn resource_version(&self) -> &str {
        self.raw.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default()
    }

    /// The storage version's name.
    pub fn storage_version(&self) -> Option<&str> {
        self.definition.storage_version().map(|version| version.name.as_str())
    }

    /// `status.storedVersions`.
    pub fn stored_versions(&self) -> &[String] {
        &self.definition.status.stored_versions
    }
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// Its items.
    pub items: Vec<Value>,
    /// The `continue` token of the next page; `None` on the last.
    pub next: Option<String>,
    /// `remainingItemCount`, when the server says.
    pub remaining: Option<u64>,
}

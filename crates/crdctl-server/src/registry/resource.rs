//! One served resource, built in or custom: the [`Resource`] trait is everything the verbs,
//! watches, admission and rendering ask of what a request addresses — its store layout, its
//! subresources, and the hooks of upstream's registry strategies (decode and default, validate
//! create and update, status and finalizer scope, delete, to storage, present). Custom
//! resources implement it once, driven by their CRD ([`super::ServedCrd`]); built-in resources
//! once, driven by upstream's OpenAPI documents and their table row ([`super::builtin`]). Code
//! outside the registry takes a `dyn Resource` and never asks which kind it holds.
//!
//! A strategy reaches the rest of the server only through a [`Context`]: the store, the CRDs,
//! the few settings strategies read, and the token signer.
//!
//! Upstream: apiserver's `pkg/registry/rest` (`RESTCreateStrategy`, `RESTUpdateStrategy`,
//! `RESTDeleteStrategy`) and `pkg/registry/generic/registry/store.go`.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use crdctl_conversion::Shape;
use crdctl_schema::Schema;
use crdctl_storage::{Entry, Revision, Store};
use serde_json::Value;

use crate::auth::{Authenticator, Authorizer, User};
use crate::error::{ApiResult, Subject};
use crate::fieldmanager::OtherVersions;
use crate::registry::ranges::{Reserved, ServiceRanges};
use crate::registry::unknown_fields::{Decoded, FieldValidation};
use crate::registry::upgrade::UpgradeSafety;
use crate::registry::{Items, OnDelete, Propagation, Registry, scale};
use crate::selector::SelectableFields;
use crate::table::Column;

/// What a strategy may use beyond the object it writes.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The store (not a dry run's: strategies that write write elsewhere than the object).
    pub store: &'a Arc<dyn Store>,
    /// The served CRDs.
    pub registry: &'a Registry,
    /// The upgrade-safety gate on CRD updates.
    pub upgrade_safety: UpgradeSafety,
    /// Where Services' ClusterIPs and node ports come from.
    pub service_ranges: &'a ServiceRanges,
    /// Who a token names (and signs ServiceAccount tokens).
    pub authenticator: &'a Authenticator,
    /// What a user may do.
    pub authorizer: &'a Authorizer,
    /// Who asks: the request's user, or the server's administrator writing in the background.
    pub user: &'a User,
    /// Records a ValidatingAdmissionPolicy's `status.typeChecking` (admission's type checker,
    /// which sits above the registry).
    pub type_check: fn(&Registry, &mut Value),
}

/// Which part of an object a write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything but what subresources own (`status`).
    Main,
    /// `status`, through `/status`.
    Status,
    /// `spec.finalizers` of a namespace, through `/finalize`.
    Finalizers,
}

/// A subresource of a resource, as the URL names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// `status`: writes there change only `status`, writes to the resource everything else.
    Status,
    /// `scale`: an `autoscaling/v1` `Scale` of the replicas.
    Scale,
    /// `serviceaccounts/<name>/token`: a `TokenRequest` answered with a signed token.
    Token,
    /// `namespaces/<name>/finalize`: writes there change only `spec.finalizers`.
    Finalize,
    /// What only a kubelet can answer (`pods/exec`, `log`, `attach`, `portforward`, `proxy`,
    /// `nodes/proxy`, `services/proxy`): refused with a `Status` that says no node runs pods.
    Node(&'static str),
}

impl Subresource {
    /// The name in the URL.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Token => "token",
            Subresource::Finalize => "finalize",
            Subresource::Node(name) => name,
        }
    }

    /// The verbs discovery lists.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status | Subresource::Scale => &["get", "patch", "update"],
            Subresource::Node("log") => &["get"],
            Subresource::Token => &["create"],
            Subresource::Finalize => &["update"],
            Subresource::Node(_) => &["create", "get"],
        }
    }

    /// The response kind discovery names, when it is not the resource's own.
    pub fn kind(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Subresource::Scale => Some(("autoscaling", "v1", "Scale")),
            Subresource::Token => Some(("authentication.k8s.io", "v1", "TokenRequest")),
            Subresource::Node("exec") => Some(("", "v1", "PodExecOptions")),
            Subresource::Node("attach") => Some(("", "v1", "PodAttachOptions")),
            Subresource::Node("portforward") => Some(("", "v1", "PodPortForwardOptions")),
            Subresource::Node("proxy") => Some(("", "v1", "PodProxyOptions")),
            Subresource::Status | Subresource::Finalize | Subresource::Node(_) => None,
        }
    }
}

/// A served resource: its store layout, its subresources, and its strategy. Methods that
/// depend on the version take the request's.
#[async_trait]
pub trait Resource: Send + Sync + std::fmt::Debug {
    /// The store prefix of one namespace's objects, or of all.
    fn prefix(&self, namespace: Option<&str>) -> String;

    /// Whether objects live in a namespace.
    fn namespaced(&self) -> bool;

    /// Whether an object admitted at `version` is stored as a read at `version` presents it
    /// (no conversion between them), so a create can answer with what it stored.
    fn stored_as_presented(&self, version: &str) -> bool;

    /// Whether the resource has `verb`, as discovery lists it.
    fn allows(&self, verb: &str) -> bool;

    /// Whether a PUT without a `resourceVersion` replaces the stored object (upstream's
    /// `AllowUnconditionalUpdate`).
    fn allows_unconditional_update(&self) -> bool;

    /// The subresource named `name` at `version`, if the resource has it there.
    fn subresource(&self, version: &str, name: &str) -> Option<Subresource>;

    /// Where the `Scale` of `version`'s objects comes from, if it has the scale subresource.
    fn scale_paths(&self, version: &str) -> Option<scale::Paths<'_>>;

    /// The fields a field selector can name.
    fn selectable_fields(&self) -> SelectableFields;

    /// The Table columns at `version`.
    fn columns(&self, version: &str) -> Vec<Column>;

    /// The schema a strategic merge patch is applied with (built-in kinds only: custom
    /// resources take none).
    fn patch_schema(&self) -> Option<&Schema>;

    /// What `managedFields` track at `version`: `None` when the resource keeps none (events),
    /// else the schema fields are tracked by (`None` inside: untyped).
    fn managed_schema(&self, version: &str) -> Option<Option<&Schema>>;

    /// The schema of a whole object at `version`, `apiVersion`, `kind` and `metadata` included,
    /// for the expressions that read it (a policy's type checking).
    fn object_schema(&self, version: &str) -> Option<Cow<'_, Schema>>;

    /// Whether objects are Go types, decoded as upstream's typed decoder does.
    fn typed(&self) -> bool;

    /// Whether objects travel in protobuf where upstream has a message for them.
    fn speaks_protobuf(&self) -> bool;

    /// Whether an object marked for deletion goes once its `metadata.finalizers` are gone
    /// (not namespaces and CRDs: their lifecycles remove them).
    fn removed_when_finalized(&self) -> bool;

    /// What a DELETE does to `object`; marks it when something holds it.
    fn on_delete(&self, object: &mut Value) -> ApiResult<OnDelete>;

    /// How a DELETE that names no `propagationPolicy` treats the object's dependents (upstream's
    /// `DefaultGarbageCollectionPolicy`); `None` where the garbage collector takes no part.
    fn garbage_collection(&self) -> Option<Propagation>;

    /// Refuses a create when the resource takes none now (a terminating CRD's objects).
    fn refuse_create(&self, subject: Subject<'_>) -> ApiResult<()>;

    /// A review's answer: the review with its `status` (`None` for resources that are stored).
    fn review(&self, context: Context<'_>, object: &mut Value) -> ApiResult<Option<Value>>;

    /// Decodes, defaults and validates an object created at `version` in `namespace`, and fills
    /// its system fields; returns the warnings to send.
    async fn admit_create(
        &self,
        context: Context<'_>,
        object: &mut Value,
        at: (&str, Option<&str>),
        validation: FieldValidation,
    ) -> ApiResult<Vec<String>>;

    /// Decodes, defaults and validates a replacement of `old` at `version` changing `part` of
    /// it, the rest kept from `old`; returns the warnings to send.
    async fn admit_update(
        &self,
        context: Context<'_>,
        (new, old): (&mut Value, &Value),
        (version, part): (&str, Part),
        decoding: (FieldValidation, Decoded<'_>),
    ) -> ApiResult<Vec<String>>;

    /// An admitted object as it is stored.
    async fn to_storage(&self, object: Value) -> ApiResult<Value>;

    /// Stored objects as the client sees them at `version`.
    async fn present(&self, objects: Vec<Value>, version: &str, shape: Shape) -> ApiResult<Items>;

    /// [`Resource::present`] for objects as the store holds them: where the stored text is what
    /// the client sees, it goes out unparsed.
    async fn present_stored(&self, entries: &[Entry], version: &str, shape: Shape) -> ApiResult<Items>;

    /// A write from `old` to `new` (at `api_version`) converted to each other version the
    /// managers of `managed` recorded fields in, as upstream's field manager converts a write to
    /// each manager's version.
    async fn in_manager_versions(
        &self,
        api_version: &str,
        managed: &Value,
        (old, new): (&Value, &Value),
    ) -> ApiResult<OtherVersions>;

    /// Reserves what a written object needs from shared ranges (a Service's ClusterIP and node
    /// ports) in `store`, given back with [`Reserved::release`] if the write fails.
    async fn reserve(
        &self,
        context: Context<'_>,
        store: &dyn Store,
        object: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<Reserved>;

    /// Gives back what `old` held and `new` (if the object is still there) does not.
    async fn release(&self, store: &dyn Store, old: &Value, new: Option<&Value>);

    /// What follows a write once it is stored at `revision` (a CRD served as written before the
    /// reply; what controllers do follows the store, not the request).
    async fn after_write(&self, context: Context<'_>, revision: Revision);
}

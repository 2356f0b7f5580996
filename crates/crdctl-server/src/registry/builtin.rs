//! Built-in resources served from one table: each row says what upstream's discovery and
//! registry say of a resource (group, version, names, scope, verbs, subresources, the fields a
//! field selector can name, where it is stored) and which [`Strategy`] writes it. Routing, the
//! verb check, discovery, field selectors and namespace cleanup read the table; adding a kind is
//! one row, plus a strategy when it has upstream behaviour of its own.
//!
//! These are stored as they are written (no schema prunes them yet) and get what every object
//! gets: names checked, `uid`, `creationTimestamp`, `resourceVersion`, `managedFields`,
//! `generateName`, optimistic concurrency, finalizers, selectors, watches. Nothing acts on them:
//! no controller runs, as in envtest.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::selector::SelectableFields;
use crate::table::{Column, Source};
use crdctl_model::field::{self, Path};
use crdctl_model::names;

/// One built-in resource at one version.
#[derive(Debug)]
pub struct BuiltIn {
    /// The API group; empty for core.
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The plural.
    pub resource: &'static str,
    /// The singular.
    pub singular: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// Short names, as upstream discovery lists them.
    pub short_names: &'static [&'static str],
    /// Categories (`all`, …).
    pub categories: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// The verbs, as upstream discovery lists them.
    pub verbs: &'static [&'static str],
    /// The fields a field selector can name beyond `metadata.name` and `metadata.namespace`.
    pub fields: SelectableFields,
    /// Where objects are stored: `/registry/<resource>/[<namespace>/]<name>`, as upstream.
    pub prefix: &'static str,
    /// The name rule (`ValidateNameFunc`).
    pub name_rule: fn(&str) -> Vec<String>,
    /// What writes do beyond the generic.
    pub strategy: Strategy,
    /// The `Table` columns of upstream's printer.
    pub columns: fn() -> Vec<Column>,
}

/// The verbs of most resources.
const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// What a kind's writes do beyond the generic (upstream's `RESTCreateStrategy` and
/// `RESTUpdateStrategy`).
#[derive(Debug, Clone, Copy)]
pub enum Strategy {
    /// Nothing beyond the generic.
    Plain,
    /// `data`/`binaryData` keys, the 1 MiB limit, `immutable`.
    ConfigMap,
    /// `stringData` merged into `data`, `type` defaulted and immutable, keys, size, `immutable`.
    Secret,
    /// A review: created, answered in `status`, never stored (the only verb is `create`).
    Review(fn(&Value, &crate::Config) -> Value),
}

/// The verbs of a review.
const CREATE_ONLY: &[&str] = &["create"];

/// Who every request is: the server has one user, its token's holder, who may do anything (the
/// reviews answer as an authorizer that allows everything, so `kubectl auth can-i` says yes).
fn user() -> Value {
    json!({"username": "system:admin", "groups": ["system:masters", "system:authenticated"]})
}

fn allowed(_: &Value, _: &crate::Config) -> Value {
    json!({"allowed": true, "reason": "crdctl serve allows every request of an authenticated user"})
}

fn every_rule(_: &Value, _: &crate::Config) -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": false,
    })
}

fn whoami(_: &Value, _: &crate::Config) -> Value {
    json!({"userInfo": user()})
}

/// A token is the server's own (or any, when the server has none).
fn token_review(review: &Value, config: &crate::Config) -> Value {
    let token = review.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default();
    match &config.token {
        Some(expected) if expected != token => json!({"authenticated": false, "error": "invalid bearer token"}),
        _ => json!({"authenticated": true, "user": user()}),
    }
}

/// A stored resource with every verb, named by DNS subdomains, with no behaviour of its own; rows
/// change what differs.
const fn resource(
    group: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    prefix: &'static str,
    namespaced: bool,
) -> BuiltIn {
    BuiltIn {
        group,
        version: "v1",
        resource,
        singular,
        kind,
        short_names: &[],
        categories: &[],
        namespaced,
        verbs: ALL_VERBS,
        fields: SelectableFields::METADATA,
        prefix,
        name_rule: names::dns1123_subdomain_errors,
        strategy: Strategy::Plain,
        columns: crate::table::created_at_columns,
    }
}

/// A review of `group`/v1: created, answered, not stored.
const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    answer: fn(&Value, &crate::Config) -> Value,
) -> BuiltIn {
    BuiltIn {
        verbs: CREATE_ONLY,
        strategy: Strategy::Review(answer),
        ..resource(group, plural, singular, kind, "", namespaced)
    }
}

/// An `rbac.authorization.k8s.io/v1` resource: RBAC names are path segments (`system:…`).
const fn rbac(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    prefix: &'static str,
    namespaced: bool,
    columns: fn() -> Vec<Column>,
) -> BuiltIn {
    BuiltIn {
        name_rule: names::path_segment_name_errors,
        columns,
        ..resource("rbac.authorization.k8s.io", plural, singular, kind, prefix, namespaced)
    }
}

/// Every built-in resource, besides namespaces, events and CRDs (which have their own modules).
pub static RESOURCES: &[BuiltIn] = &[
    BuiltIn {
        short_names: &["cm"],
        strategy: Strategy::ConfigMap,
        columns: || columns(vec![Column::new("Data", "string", 0, DATA, Source::Count(&["data", "binaryData"]))]),
        ..resource("", "configmaps", "configmap", "ConfigMap", "/registry/configmaps/", true)
    },
    BuiltIn {
        fields: SelectableFields { labels: &["type"], value: crate::selector::field_value },
        strategy: Strategy::Secret,
        columns: || {
            let type_ = "Used to facilitate programmatic handling of secret data.";
            columns(vec![
                Column::new("Type", "string", 0, type_, Source::Path(".type".into())),
                Column::new("Data", "string", 0, DATA, Source::Count(&["data"])),
            ])
        },
        ..resource("", "secrets", "secret", "Secret", "/registry/secrets/", true)
    },
    BuiltIn {
        short_names: &["sa"],
        columns: || {
            columns(vec![Column::new(
                "Secrets",
                "string",
                0,
                "Secrets of the ServiceAccount.",
                Source::Count(&["secrets"]),
            )])
        },
        ..resource("", "serviceaccounts", "serviceaccount", "ServiceAccount", "/registry/serviceaccounts/", true)
    },
    BuiltIn {
        columns: || {
            let holder = Source::Path(".spec.holderIdentity".into());
            columns(vec![Column::new("Holder", "string", 0, "The holder of the lease.", holder)])
        },
        ..resource("coordination.k8s.io", "leases", "lease", "Lease", "/registry/leases/", true)
    },
    rbac("roles", "role", "Role", "/registry/roles/", true, crate::table::created_at_columns),
    rbac("rolebindings", "rolebinding", "RoleBinding", "/registry/rolebindings/", true, binding_columns),
    rbac(
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        "/registry/clusterroles/",
        false,
        crate::table::created_at_columns,
    ),
    rbac(
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        "/registry/clusterrolebindings/",
        false,
        binding_columns,
    ),
    review(
        AUTHORIZATION,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        allowed,
    ),
    review(AUTHORIZATION, "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, allowed),
    review(
        AUTHORIZATION,
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
        allowed,
    ),
    review(
        AUTHORIZATION,
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
        every_rule,
    ),
    review(AUTHENTICATION, "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, whoami),
    review(AUTHENTICATION, "tokenreviews", "tokenreview", "TokenReview", false, token_review),
];

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// What the `Data` columns count.
const DATA: &str = "The number of keys the object holds.";

/// `Name`, a kind's own columns, then `Age`, as upstream's printers order them.
fn columns(own: Vec<Column>) -> Vec<Column> {
    let mut columns = vec![Column::name()];
    columns.extend(own);
    columns.push(Column::age());
    columns
}

/// A RoleBinding's or ClusterRoleBinding's: `Name`, `Role`, `Age`.
fn binding_columns() -> Vec<Column> {
    columns(vec![Column::new("Role", "string", 0, "The role bound.", Source::Pair(".roleRef.kind", ".roleRef.name"))])
}

/// The resource `resource` of `group`/`version`, if built in.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static BuiltIn> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.resource == resource)
}

impl BuiltIn {
    /// `<group>/<version>`, or `<version>` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The store prefix of one namespace's objects, or of all.
    pub fn namespace_prefix(&self, namespace: Option<&str>) -> String {
        match namespace.filter(|_| self.namespaced) {
            Some(namespace) => format!("{}{namespace}/", self.prefix),
            None => self.prefix.to_string(),
        }
    }

    /// Whether objects are stored (all but reviews).
    pub fn stored(&self) -> bool {
        !matches!(self.strategy, Strategy::Review(_))
    }

    /// A review's answer: the review with its `status` (`None` for kinds that are stored).
    pub fn review(&self, object: &mut Value, config: &crate::Config) -> ApiResult<Option<Value>> {
        let Strategy::Review(answer) = self.strategy else { return Ok(None) };
        crate::object::check_type(object, &self.api_version(), self.kind)?;
        let mut answered = object.clone();
        crate::object::set(&mut answered, "status", answer(object, config));
        Ok(Some(answered))
    }

    /// Checks a body's type and name and applies the kind's create strategy.
    pub fn prepare_create(&self, object: &mut Value) -> ApiResult<()> {
        crate::object::check_type(object, &self.api_version(), self.kind)?;
        let mut errors = crate::object::name_errors(object, self.name_rule);
        errors.extend(self.write(object, None)?);
        self.refuse(object, errors)
    }

    /// Checks a replacement and applies the kind's update strategy.
    pub fn prepare_update(&self, object: &mut Value, old: &Value) -> ApiResult<()> {
        crate::object::check_type(object, &self.api_version(), self.kind)?;
        let errors = self.write(object, Some(old))?;
        self.refuse(object, errors)
    }

    fn refuse(&self, object: &Value, errors: field::ErrorList) -> ApiResult<()> {
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(self.group, self.kind, crate::object::name(object), &errors))
    }

    /// The strategy's defaults and checks, for a create (`old` is `None`) or an update.
    fn write(&self, object: &mut Value, old: Option<&Value>) -> ApiResult<field::ErrorList> {
        Ok(match self.strategy {
            Strategy::Plain | Strategy::Review(_) => field::ErrorList::new(),
            Strategy::ConfigMap => config_map(object, old),
            Strategy::Secret => secret(object, old).map_err(|err| self.undecodable(&err))?,
        })
    }

    /// 400 for a body the typed decoder would refuse (a `data` value that is not base64).
    fn undecodable(&self, err: &str) -> ApiError {
        let kind = self.kind;
        ApiError::bad_request(format!("{kind} in version {:?} cannot be handled as a {kind}: {err}", self.version))
    }
}

/// Upstream's `MaxSecretSize`, which ConfigMaps share.
const MAX_DATA_BYTES: usize = 1024 * 1024;

fn object_field<'a>(object: &'a Value, name: &str) -> Option<&'a Map<String, Value>> {
    object.get(name).and_then(Value::as_object)
}

fn is_immutable(object: &Value) -> bool {
    object.get("immutable").and_then(Value::as_bool) == Some(true)
}

/// Every key of `data` must be a config key (`IsConfigMapKey`), reported at `path[key]`.
fn key_errors(data: Option<&Map<String, Value>>, path: &Path) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    for key in data.into_iter().flat_map(Map::keys) {
        errors.extend(names::config_map_key_errors(key).into_iter().map(|e| path.key(key).invalid(key, e)));
    }
    errors
}

/// Once `immutable` is set, the fields that hold data and `immutable` itself stay as they are
/// (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
fn immutable_errors(object: &Value, old: &Value, data_fields: &[&str]) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    if !is_immutable(old) {
        return errors;
    }
    if !is_immutable(object) {
        errors.push(Path::new("immutable").forbidden("field is immutable when `immutable` is set"));
    }
    for name in data_fields {
        if object.get(*name) != old.get(*name) {
            errors.push(Path::new(name).forbidden("field is immutable when `immutable` is set"));
        }
    }
    errors
}

/// `ValidateConfigMap` (keys, no key in both `data` and `binaryData`, 1 MiB of values in all)
/// and its update.
fn config_map(object: &mut Value, old: Option<&Value>) -> field::ErrorList {
    let data = object_field(object, "data");
    let binary = object_field(object, "binaryData");
    let mut errors = field::ErrorList::new();
    let mut size = 0;
    for (bag, this, other, other_name) in [("data", data, binary, "binaryData"), ("binaryData", binary, data, "data")] {
        let path = Path::new(bag);
        for (key, value) in this.into_iter().flatten() {
            let at = path.key(key);
            errors.extend(names::config_map_key_errors(key).into_iter().map(|e| at.invalid(key, e)));
            if other.is_some_and(|other| other.contains_key(key)) {
                errors.push(at.invalid(key, format!("duplicate of key present in {other_name}")));
            }
            let text = value.as_str().unwrap_or_default();
            size += if bag == "data" { text.len() } else { text.len() / 4 * 3 };
        }
    }
    if size > MAX_DATA_BYTES {
        errors.push(Path::new("").too_long(format!("may not be more than {MAX_DATA_BYTES} bytes")));
    }
    if let Some(old) = old {
        errors.extend(immutable_errors(object, old, &["data", "binaryData"]));
    }
    errors
}

/// The Secret strategy: `stringData` is written into `data` (base64) and dropped, as the v1
/// conversion does; `type` defaults to `Opaque` and never changes; `data` values must be base64
/// (an `Err` is the decoder's message); keys, the 1 MiB limit and `immutable` as `ValidateSecret`.
fn secret(object: &mut Value, old: Option<&Value>) -> Result<field::ErrorList, String> {
    let Some(fields) = object.as_object_mut() else { return Ok(field::ErrorList::new()) };
    let string_data = fields.remove("stringData");
    if let Some(Value::Object(string_data)) = string_data {
        let data = fields.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (key, value) in string_data {
                let text = value.as_str().unwrap_or_default();
                data.insert(key, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
            }
        }
    }
    if fields.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        fields.insert("type".into(), Value::String("Opaque".into()));
    }
    let data = object_field(object, "data");
    let mut size = 0;
    for value in data.into_iter().flat_map(Map::values) {
        let text = value.as_str().unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD.decode(text).map_err(|err| match err {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
                format!("illegal base64 data at input byte {at}")
            }
            _ => format!("illegal base64 data at input byte {}", text.len()),
        })?;
        size += decoded.len();
    }
    let mut errors = key_errors(data, &Path::new("data"));
    if size > MAX_DATA_BYTES {
        errors.push(Path::new("data").too_long(format!("may not be more than {MAX_DATA_BYTES} bytes")));
    }
    if let Some(old) = old {
        let (new_type, old_type) = (object.get("type"), old.get("type"));
        if new_type != old_type {
            let shown = new_type.and_then(Value::as_str).unwrap_or_default();
            errors.push(Path::new("type").invalid(shown, "field is immutable"));
        }
        errors.extend(immutable_errors(object, old, &["data"]));
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secrets() -> &'static BuiltIn {
        find("", "v1", "secrets").unwrap()
    }

    fn messages(err: ApiError) -> String {
        err.message
    }

    #[test]
    fn the_table_has_one_row_per_resource_and_prefix() {
        for (at, row) in RESOURCES.iter().enumerate() {
            let later = RESOURCES.get(at + 1..).unwrap_or_default();
            assert!(later.iter().all(|r| (r.group, r.resource) != (row.group, row.resource)), "{}", row.resource);
            if let Strategy::Review(_) = row.strategy {
                assert_eq!((row.prefix, row.verbs), ("", CREATE_ONLY), "reviews are not stored");
                continue;
            }
            assert!(later.iter().all(|r| r.prefix != row.prefix), "{}", row.prefix);
            assert_eq!(row.prefix, format!("/registry/{}/", row.resource));
        }
    }

    #[test]
    fn string_data_is_written_into_data_and_type_defaults_to_opaque() {
        let mut secret = json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"a": "y", "b": "zz"}});
        secrets().prepare_create(&mut secret).unwrap();
        assert_eq!(secret["data"], json!({"a": "eQ==", "b": "eno="}));
        assert_eq!((secret["type"].as_str(), secret.get("stringData")), (Some("Opaque"), None));
        assert_eq!((secret["apiVersion"].as_str(), secret["kind"].as_str()), (Some("v1"), Some("Secret")));
    }

    #[test]
    fn secrets_refuse_what_upstream_refuses() {
        let mut bad = json!({"metadata": {"name": "s"}, "data": {"a": "not base64!"}});
        assert_eq!(
            messages(secrets().prepare_create(&mut bad).unwrap_err()),
            r#"Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3"#
        );
        let mut keys = json!({"metadata": {"name": "s"}, "stringData": {"a b": "x"}});
        let message = messages(secrets().prepare_create(&mut keys).unwrap_err());
        assert!(
            message.starts_with(r#"Secret "s" is invalid: data[a b]: Invalid value: "a b": a valid config key"#),
            "{message}"
        );
        let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let mut changed = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"a": "eQ=="}});
        assert_eq!(
            messages(secrets().prepare_update(&mut changed, &old).unwrap_err()),
            "Secret \"s\" is invalid: [type: Invalid value: \"kubernetes.io/tls\": field is immutable, immutable: Forbidden: field is immutable when `immutable` is set, data: Forbidden: field is immutable when `immutable` is set]"
        );
        let mut large = json!({"metadata": {"name": "s"}, "stringData": {"a": "x".repeat(MAX_DATA_BYTES + 1)}});
        let message = messages(secrets().prepare_create(&mut large).unwrap_err());
        assert_eq!(message, r#"Secret "s" is invalid: data: Too long: may not be more than 1048576 bytes"#);
    }

    #[test]
    fn config_maps_check_keys_duplicates_and_immutability() {
        let config_maps = find("", "v1", "configmaps").unwrap();
        let mut map = json!({"metadata": {"name": "c"}, "data": {"k": "v", "..x": "v"}, "binaryData": {"k": "AA=="}});
        assert_eq!(
            messages(config_maps.prepare_create(&mut map).unwrap_err()),
            r#"ConfigMap "c" is invalid: [data[k]: Invalid value: "k": duplicate of key present in binaryData, data[..x]: Invalid value: "..x": must not start with '..', binaryData[k]: Invalid value: "k": duplicate of key present in data]"#
        );
        let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"k": "v"}});
        let mut same = old.clone();
        config_maps.prepare_update(&mut same, &old).unwrap();
        let mut changed = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"k": "w"}});
        assert_eq!(
            messages(config_maps.prepare_update(&mut changed, &old).unwrap_err()),
            "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        );
    }

    #[test]
    fn rbac_names_are_path_segments() {
        let roles = find("rbac.authorization.k8s.io", "v1", "clusterroles").unwrap();
        let mut role = json!({"metadata": {"name": "system:controller:crontab"}, "rules": []});
        roles.prepare_create(&mut role).unwrap();
        let mut bad = json!({"metadata": {"name": "a/b"}});
        assert_eq!(
            messages(roles.prepare_create(&mut bad).unwrap_err()),
            r#"ClusterRole.rbac.authorization.k8s.io "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'"#
        );
    }
}

//! The table: every resource of the group versions kube-apiserver 1.33 enables by default
//! (CustomResourceDefinitions, Namespaces and Events included, their lifecycles strategies of
//! their own), and StorageVersionMigrations, which the server carries out ([`crate::migrator`]), with upstream
//! discovery's names, short names, categories, verbs and subresources. A test checks each row
//! against upstream's OpenAPI document of its group version.

use crdctl_model::names;
use serde_json::{Value, json};

use super::namespace;
use super::printers::{self, columns, count};
use super::review::{rules, self_access, subject_access, token_review, whoami};
use super::{BuiltIn, StoredAs, Strategy, Subresource};
use crate::registry::resource::Context;
use crate::registry::{CRD_PREFIX, crd, event};
use crate::selector::SelectableFields;
use crate::table::{Column, Source};

/// The verbs of most resources.
const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The verbs of a review.
pub(super) const CREATE_ONLY: &[&str] = &["create"];

const STATUS: &[Subresource] = &[Subresource::Status];
const SCALE_AND_STATUS: &[Subresource] = &[Subresource::Scale, Subresource::Status];

/// Pod templates, where each workload keeps one.
const TEMPLATE: &[&str] = &["spec", "template", "spec"];

/// A stored resource of `group`/v1 with every verb, named by DNS subdomains, with no behaviour
/// of its own; rows change what differs.
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
        subresources: &[],
        generation: false,
        fields: SelectableFields::METADATA,
        prefix,
        name_rule: names::dns1123_subdomain_errors,
        strategy: Strategy::Plain,
        columns: crate::table::created_at_columns,
        stored_as: None,
        unconditional_update: true,
    }
}

/// A workload of `apps`/v1 (or another group): a pod template, `status`, `generation`, `all`.
const fn workload(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    prefix: &'static str,
    short_names: &'static [&'static str],
) -> BuiltIn {
    BuiltIn {
        short_names,
        categories: ALL,
        subresources: SCALE_AND_STATUS,
        generation: true,
        strategy: Strategy::Workload(TEMPLATE),
        ..resource(group, plural, singular, kind, prefix, true)
    }
}

/// A review of `group`/v1: created, answered, not stored.
const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    answer: fn(&Value, Context<'_>) -> Value,
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
        strategy: Strategy::Rbac,
        ..resource("rbac.authorization.k8s.io", plural, singular, kind, prefix, namespaced)
    }
}

/// HorizontalPodAutoscalers at `version`.
const fn horizontal_pod_autoscalers(version: &'static str, stored_as: Option<StoredAs>) -> BuiltIn {
    BuiltIn {
        version,
        short_names: &["hpa"],
        categories: ALL,
        subresources: STATUS,
        strategy: Strategy::HorizontalPodAutoscaler,
        stored_as,
        columns: horizontal_pod_autoscaler_columns,
        ..resource(
            "autoscaling",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            "HorizontalPodAutoscaler",
            "/registry/horizontalpodautoscalers/",
            true,
        )
    }
}

/// StorageVersionMigrations at `version`: cluster-scoped, with `status`, carried out by the
/// server's migrator.
const fn storage_version_migrations(version: &'static str, stored_as: Option<StoredAs>) -> BuiltIn {
    BuiltIn {
        version,
        subresources: STATUS,
        strategy: Strategy::StorageVersionMigration,
        stored_as,
        ..resource(
            STORAGE_MIGRATION,
            "storageversionmigrations",
            "storageversionmigration",
            "StorageVersionMigration",
            super::migration::PREFIX,
            false,
        )
    }
}

const ALL: &[&str] = &["all"];
const API_EXTENSIONS: &[&str] = &["api-extensions"];
const ADMISSION: &str = "admissionregistration.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";
const NETWORKING: &str = "networking.k8s.io";
const STORAGE: &str = "storage.k8s.io";
const FLOW_CONTROL: &str = "flowcontrol.apiserver.k8s.io";
const STORAGE_MIGRATION: &str = "storagemigration.k8s.io";

const fn selectable(labels: &'static [&'static str]) -> SelectableFields {
    SelectableFields { labels, value: field_value_or_zero }
}

/// The selectable fields upstream reads from typed fields that are not strings: missing, they
/// read as their type's zero value, as `strconv.FormatBool` and `strconv.Itoa` write it.
const ZERO_VALUES: [(&str, &str); 3] =
    [("spec.unschedulable", "false"), ("status.replicas", "0"), ("status.successful", "0")];

fn field_value_or_zero(object: &Value, label: &str) -> String {
    let value = crate::selector::field_value(object, label);
    match ZERO_VALUES.iter().find(|(typed, _)| *typed == label) {
        Some((_, zero)) if value.is_empty() => zero.to_string(),
        _ => value,
    }
}

/// CustomResourceDefinitions, the row the server itself reads and writes through.
pub const CUSTOM_RESOURCE_DEFINITIONS: BuiltIn = BuiltIn {
    short_names: &["crd", "crds"],
    categories: API_EXTENSIONS,
    subresources: STATUS,
    generation: true,
    strategy: Strategy::CustomResourceDefinition,
    unconditional_update: false,
    ..resource(
        crd::GROUP,
        "customresourcedefinitions",
        "customresourcedefinition",
        crdctl_model::crd::KIND,
        CRD_PREFIX,
        false,
    )
};

/// How many rows the table has.
pub const COUNT: usize = 61;

/// Every built-in resource.
pub static RESOURCES: [BuiltIn; COUNT] = [
    // core/v1
    BuiltIn {
        short_names: &["cm"],
        strategy: Strategy::ConfigMap,
        columns: || columns(vec![Column::new("Data", "string", 0, DATA, Source::Count(&["data", "binaryData"]))]),
        ..resource("", "configmaps", "configmap", "ConfigMap", "/registry/configmaps/", true)
    },
    BuiltIn {
        columns: printers::endpoints,
        short_names: &["ep"],
        ..resource("", "endpoints", "endpoints", "Endpoints", "/registry/services/endpoints/", true)
    },
    BuiltIn {
        short_names: &["ev"],
        fields: event::SELECTABLE_FIELDS,
        strategy: Strategy::Event,
        columns: event::columns,
        ..resource("", "events", "event", "Event", event::PREFIX, true)
    },
    BuiltIn {
        short_names: &["limits"],
        ..resource("", "limitranges", "limitrange", "LimitRange", "/registry/limitranges/", true)
    },
    BuiltIn {
        short_names: &["ns"],
        verbs: &["create", "delete", "get", "list", "patch", "update", "watch"],
        subresources: &[Subresource::Finalize, Subresource::Status],
        fields: namespace::SELECTABLE_FIELDS,
        name_rule: names::dns1123_label_errors,
        strategy: Strategy::Namespace,
        columns: || {
            let phase = "The phase of the namespace: Active or Terminating.";
            columns(vec![Column::new("Status", "string", 0, phase, Source::Path(".status.phase".into()))])
        },
        ..resource("", "namespaces", "namespace", "Namespace", namespace::PREFIX, false)
    },
    BuiltIn {
        columns: printers::node,
        short_names: &["no"],
        subresources: &[Subresource::Status, Subresource::Node("proxy")],
        fields: selectable(&["spec.unschedulable"]),
        ..resource("", "nodes", "node", "Node", "/registry/minions/", false)
    },
    BuiltIn {
        columns: printers::persistent_volume_claim,
        short_names: &["pvc"],
        subresources: STATUS,
        ..resource(
            "",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            "/registry/persistentvolumeclaims/",
            true,
        )
    },
    BuiltIn {
        columns: printers::persistent_volume,
        short_names: &["pv"],
        subresources: STATUS,
        ..resource(
            "",
            "persistentvolumes",
            "persistentvolume",
            "PersistentVolume",
            "/registry/persistentvolumes/",
            false,
        )
    },
    BuiltIn {
        columns: printers::pod,
        short_names: &["po"],
        categories: ALL,
        subresources: &[
            Subresource::Node("attach"),
            Subresource::Node("exec"),
            Subresource::Node("log"),
            Subresource::Node("portforward"),
            Subresource::Node("proxy"),
            Subresource::Status,
        ],
        fields: selectable(&[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        strategy: Strategy::Workload(&["spec"]),
        ..resource("", "pods", "pod", "Pod", "/registry/pods/", true)
    },
    BuiltIn {
        columns: printers::pod_template,
        strategy: Strategy::Workload(&["template", "spec"]),
        ..resource("", "podtemplates", "podtemplate", "PodTemplate", "/registry/podtemplates/", true)
    },
    BuiltIn {
        columns: printers::replication_controller,
        subresources: SCALE_AND_STATUS,
        fields: selectable(&["status.replicas"]),
        ..workload(
            "",
            "replicationcontrollers",
            "replicationcontroller",
            "ReplicationController",
            "/registry/controllers/",
            &["rc"],
        )
    },
    BuiltIn {
        columns: printers::resource_quota,
        short_names: &["quota"],
        subresources: STATUS,
        ..resource("", "resourcequotas", "resourcequota", "ResourceQuota", "/registry/resourcequotas/", true)
    },
    BuiltIn {
        fields: selectable(&["type"]),
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
        subresources: &[Subresource::Token],
        columns: || {
            let secrets = Source::Count(&["secrets"]);
            columns(vec![Column::new("Secrets", "string", 0, "Secrets of the ServiceAccount.", secrets)])
        },
        ..resource("", "serviceaccounts", "serviceaccount", "ServiceAccount", "/registry/serviceaccounts/", true)
    },
    BuiltIn {
        short_names: &["svc"],
        categories: ALL,
        subresources: &[Subresource::Node("proxy"), Subresource::Status],
        strategy: Strategy::Service,
        name_rule: names::dns1035_label_errors,
        columns: printers::service,
        ..resource("", "services", "service", "Service", "/registry/services/specs/", true)
    },
    // apiextensions.k8s.io/v1
    CUSTOM_RESOURCE_DEFINITIONS,
    // events.k8s.io/v1, stored as core v1 Events
    BuiltIn {
        fields: event::SELECTABLE_FIELDS,
        strategy: Strategy::Event,
        columns: event::columns,
        stored_as: Some(StoredAs {
            group: "",
            version: "v1",
            to_storage: event::to_core,
            from_storage: event::to_events,
        }),
        ..resource("events.k8s.io", "events", "event", "Event", event::PREFIX, true)
    },
    // admissionregistration.k8s.io/v1
    BuiltIn {
        columns: printers::webhook_configuration,
        categories: API_EXTENSIONS,
        strategy: Strategy::AdmissionRegistration,
        ..resource(
            ADMISSION,
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            "MutatingWebhookConfiguration",
            "/registry/mutatingwebhookconfigurations/",
            false,
        )
    },
    BuiltIn {
        columns: printers::validating_admission_policy,
        categories: API_EXTENSIONS,
        subresources: STATUS,
        generation: true,
        strategy: Strategy::AdmissionPolicy,
        ..resource(
            ADMISSION,
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            "ValidatingAdmissionPolicy",
            "/registry/validatingadmissionpolicies/",
            false,
        )
    },
    BuiltIn {
        columns: printers::validating_admission_policy_binding,
        categories: API_EXTENSIONS,
        strategy: Strategy::AdmissionRegistration,
        ..resource(
            ADMISSION,
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            "ValidatingAdmissionPolicyBinding",
            "/registry/validatingadmissionpolicybindings/",
            false,
        )
    },
    BuiltIn {
        columns: printers::webhook_configuration,
        categories: API_EXTENSIONS,
        strategy: Strategy::AdmissionRegistration,
        ..resource(
            ADMISSION,
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            "ValidatingWebhookConfiguration",
            "/registry/validatingwebhookconfigurations/",
            false,
        )
    },
    // apiregistration.k8s.io/v1
    BuiltIn {
        columns: printers::api_service,
        categories: API_EXTENSIONS,
        subresources: STATUS,
        unconditional_update: false,
        ..resource(
            "apiregistration.k8s.io",
            "apiservices",
            "apiservice",
            "APIService",
            "/registry/apiregistration.k8s.io/apiservices/",
            false,
        )
    },
    // apps/v1
    BuiltIn {
        columns: printers::controller_revision,
        ..resource(
            "apps",
            "controllerrevisions",
            "controllerrevision",
            "ControllerRevision",
            "/registry/controllerrevisions/",
            true,
        )
    },
    BuiltIn {
        columns: printers::daemon_set,
        subresources: STATUS,
        ..workload("apps", "daemonsets", "daemonset", "DaemonSet", "/registry/daemonsets/", &["ds"])
    },
    BuiltIn {
        columns: printers::deployment,
        ..workload("apps", "deployments", "deployment", "Deployment", "/registry/deployments/", &["deploy"])
    },
    BuiltIn {
        columns: printers::replica_set,
        fields: selectable(&["status.replicas"]),
        ..workload("apps", "replicasets", "replicaset", "ReplicaSet", "/registry/replicasets/", &["rs"])
    },
    BuiltIn {
        columns: printers::stateful_set,
        ..workload("apps", "statefulsets", "statefulset", "StatefulSet", "/registry/statefulsets/", &["sts"])
    },
    // authentication.k8s.io/v1, authorization.k8s.io/v1
    review(AUTHENTICATION, "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, whoami),
    review(AUTHENTICATION, "tokenreviews", "tokenreview", "TokenReview", false, token_review),
    review(
        AUTHORIZATION,
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
        subject_access,
    ),
    review(
        AUTHORIZATION,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        self_access,
    ),
    review(AUTHORIZATION, "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", false, rules),
    review(AUTHORIZATION, "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, subject_access),
    // autoscaling/v2, and v1 stored as v2
    horizontal_pod_autoscalers("v2", None),
    horizontal_pod_autoscalers(
        "v1",
        Some(StoredAs {
            group: "autoscaling",
            version: "v2",
            to_storage: super::autoscaling::from_v1,
            from_storage: super::autoscaling::to_v1,
        }),
    ),
    // batch/v1
    BuiltIn {
        columns: printers::cron_job,
        subresources: STATUS,
        strategy: Strategy::Workload(&["spec", "jobTemplate", "spec", "template", "spec"]),
        ..workload("batch", "cronjobs", "cronjob", "CronJob", "/registry/cronjobs/", &["cj"])
    },
    BuiltIn {
        columns: printers::job,
        subresources: STATUS,
        fields: selectable(&["status.successful"]),
        ..workload("batch", "jobs", "job", "Job", "/registry/jobs/", &[])
    },
    // certificates.k8s.io/v1
    BuiltIn {
        columns: printers::certificate_signing_request,
        short_names: &["csr"],
        subresources: &[Subresource::Status],
        fields: selectable(&["spec.signerName"]),
        ..resource(
            "certificates.k8s.io",
            "certificatesigningrequests",
            "certificatesigningrequest",
            "CertificateSigningRequest",
            "/registry/certificatesigningrequests/",
            false,
        )
    },
    // coordination.k8s.io/v1
    BuiltIn {
        columns: || {
            let holder = Source::Path(".spec.holderIdentity".into());
            columns(vec![Column::new("Holder", "string", 0, "The holder of the lease.", holder)])
        },
        ..resource("coordination.k8s.io", "leases", "lease", "Lease", "/registry/leases/", true)
    },
    // discovery.k8s.io/v1
    BuiltIn {
        columns: printers::endpoint_slice,
        ..resource(
            "discovery.k8s.io",
            "endpointslices",
            "endpointslice",
            "EndpointSlice",
            "/registry/endpointslices/",
            true,
        )
    },
    // flowcontrol.apiserver.k8s.io/v1
    BuiltIn {
        columns: printers::flow_schema,
        subresources: STATUS,
        ..resource(FLOW_CONTROL, "flowschemas", "flowschema", "FlowSchema", "/registry/flowschemas/", false)
    },
    BuiltIn {
        columns: printers::priority_level_configuration,
        subresources: STATUS,
        ..resource(
            FLOW_CONTROL,
            "prioritylevelconfigurations",
            "prioritylevelconfiguration",
            "PriorityLevelConfiguration",
            "/registry/prioritylevelconfigurations/",
            false,
        )
    },
    // networking.k8s.io/v1
    BuiltIn {
        columns: printers::ingress_class,
        ..resource(NETWORKING, "ingressclasses", "ingressclass", "IngressClass", "/registry/ingressclasses/", false)
    },
    BuiltIn {
        columns: printers::ingress,
        short_names: &["ing"],
        subresources: STATUS,
        ..resource(NETWORKING, "ingresses", "ingress", "Ingress", "/registry/ingress/", true)
    },
    BuiltIn {
        columns: printers::ip_address,
        short_names: &["ip"],
        ..resource(NETWORKING, "ipaddresses", "ipaddress", "IPAddress", super::service::IP_ADDRESSES, false)
    },
    BuiltIn {
        columns: printers::network_policy,
        short_names: &["netpol"],
        generation: true,
        ..resource(NETWORKING, "networkpolicies", "networkpolicy", "NetworkPolicy", "/registry/networkpolicies/", true)
    },
    BuiltIn {
        columns: printers::service_cidr,
        subresources: STATUS,
        ..resource(NETWORKING, "servicecidrs", "servicecidr", "ServiceCIDR", "/registry/servicecidrs/", false)
    },
    // node.k8s.io/v1
    BuiltIn {
        columns: printers::runtime_class,
        ..resource("node.k8s.io", "runtimeclasses", "runtimeclass", "RuntimeClass", "/registry/runtimeclasses/", false)
    },
    // policy/v1
    BuiltIn {
        columns: printers::pod_disruption_budget,
        short_names: &["pdb"],
        subresources: STATUS,
        generation: true,
        ..resource(
            "policy",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            "/registry/poddisruptionbudgets/",
            true,
        )
    },
    // rbac.authorization.k8s.io/v1
    rbac(
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        "/registry/clusterrolebindings/",
        false,
        printers::binding,
    ),
    rbac(
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        "/registry/clusterroles/",
        false,
        crate::table::created_at_columns,
    ),
    rbac("rolebindings", "rolebinding", "RoleBinding", "/registry/rolebindings/", true, printers::binding),
    rbac("roles", "role", "Role", "/registry/roles/", true, crate::table::created_at_columns),
    // scheduling.k8s.io/v1
    BuiltIn {
        columns: printers::priority_class,
        short_names: &["pc"],
        ..resource(
            "scheduling.k8s.io",
            "priorityclasses",
            "priorityclass",
            "PriorityClass",
            "/registry/priorityclasses/",
            false,
        )
    },
    // storage.k8s.io/v1
    BuiltIn {
        columns: printers::csi_driver,
        ..resource(STORAGE, "csidrivers", "csidriver", "CSIDriver", "/registry/csidrivers/", false)
    },
    BuiltIn {
        columns: printers::csi_node,
        ..resource(STORAGE, "csinodes", "csinode", "CSINode", "/registry/csinodes/", false)
    },
    BuiltIn {
        columns: printers::csi_storage_capacity,
        ..resource(
            STORAGE,
            "csistoragecapacities",
            "csistoragecapacity",
            "CSIStorageCapacity",
            "/registry/csistoragecapacities/",
            true,
        )
    },
    BuiltIn {
        columns: printers::storage_class,
        short_names: &["sc"],
        ..resource(STORAGE, "storageclasses", "storageclass", "StorageClass", "/registry/storageclasses/", false)
    },
    BuiltIn {
        columns: printers::volume_attachment,
        subresources: STATUS,
        ..resource(
            STORAGE,
            "volumeattachments",
            "volumeattachment",
            "VolumeAttachment",
            "/registry/volumeattachments/",
            false,
        )
    },
    // storagemigration.k8s.io: v1beta1, which kube-apiserver 1.35 serves (beta, off by default),
    // and v1alpha1, which 1.30–1.34 serve behind a feature gate, stored as v1beta1.
    storage_version_migrations("v1beta1", None),
    storage_version_migrations(
        "v1alpha1",
        Some(StoredAs {
            group: STORAGE_MIGRATION,
            version: "v1beta1",
            to_storage: super::migration::from_v1alpha1,
            from_storage: super::migration::to_v1alpha1,
        }),
    ),
];

/// What the `Data` columns count.
const DATA: &str = "The number of keys the object holds.";

/// A HorizontalPodAutoscaler's: `Reference`, `Targets`, `MinPods`, `MaxPods`, `Replicas`.
fn horizontal_pod_autoscaler_columns() -> Vec<Column> {
    let reference = |h: &Value| {
        let kind = h.pointer("/spec/scaleTargetRef/kind").and_then(Value::as_str).unwrap_or_default();
        let name = h.pointer("/spec/scaleTargetRef/name").and_then(Value::as_str).unwrap_or_default();
        json!(format!("{kind}/{name}"))
    };
    let min_pods = |h: &Value| match h.pointer("/spec/minReplicas").and_then(Value::as_i64) {
        Some(min) => json!(min.to_string()),
        None => json!("<unset>"),
    };
    columns(vec![
        Column::new("Reference", "string", 0, "The scaled resource.", Source::Computed(reference)),
        Column::new(
            "Targets",
            "string",
            0,
            "The metrics, current and target.",
            Source::Computed(super::autoscaling::targets),
        ),
        Column::new("MinPods", "string", 0, "The lower limit of replicas.", Source::Computed(min_pods)),
        Column::new(
            "MaxPods",
            "string",
            0,
            "The upper limit of replicas.",
            Source::Computed(|h| json!(count(h, "/spec/maxReplicas"))),
        ),
        Column::new(
            "Replicas",
            "string",
            0,
            "The current number of replicas.",
            Source::Computed(|h| json!(count(h, "/status/currentReplicas"))),
        ),
    ])
}

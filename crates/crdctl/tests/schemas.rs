//! The schema machinery on the server, driven by the real kubectl through real CRDs: every CRD
//! of the corpus is accepted, and five real operators' objects validate with upstream's
//! messages, CEL rules included.

use crate::serve::{Backend, Kubectl, Served, kubectl_versions};
use crate::util::{corpus, crdctl, files_under};

/// The corpus CRDs under `real/`, each as apiextensions.k8s.io/v1 (legacy v1beta1 files are
/// upgraded with `crdctl convert-crd`, since a Kubernetes 1.33 API no longer serves v1beta1).
fn real_crds() -> Vec<(String, String)> {
    files_under(&corpus().join("real"), "yaml")
        .into_iter()
        .map(|path| {
            let converted = crdctl(&["convert-crd", path.to_str().unwrap()]);
            assert_eq!(converted.code, 0, "{}: {}", path.display(), converted.stderr);
            (path.file_name().unwrap().to_string_lossy().into_owned(), converted.stdout)
        })
        .collect()
}

/// Runs `test` once per kubectl version, each against a fresh server on `backend`.
fn with_each_kubectl(backend: Backend, test: fn(&Kubectl)) {
    for version in kubectl_versions() {
        let served = Served::start_on(backend, &[]);
        test(&Kubectl::new(&version, &served));
    }
}

/// The newest kubectl the tests run.
fn newest() -> String {
    kubectl_versions().pop().expect("at least one kubectl version")
}

on_each_backend!(
    every_real_crd_is_accepted_with_server_side_apply,
    real_operators_objects_validate_with_upstream_messages,
    kubectl_scale_and_explain_work_on_a_real_crd,
    server_side_apply_is_idempotent_conflicts_and_forces,
);

fn every_real_crd_is_accepted_with_server_side_apply(backend: Backend) {
    let served = Served::start_on(backend, &[]);
    let k = Kubectl::new(&newest(), &served);
    let crds = real_crds();
    assert!(crds.len() >= 20, "the corpus lost files");
    for (file, yaml) in &crds {
        let applied = k.run_with(&["apply", "--server-side", "-f", "-"], Some(yaml));
        assert_eq!(applied.code, 0, "{file}: {applied:?}");
        assert!(applied.stdout.trim_end().ends_with("serverside-applied"), "{file}: {}", applied.stdout);
        let name = applied.stdout.split_whitespace().next().unwrap().to_string();
        k.ok(&["wait", "--for", "condition=established", "--timeout=20s", &name]);
        // Two files share a name at different releases; each is tried on its own.
        k.ok(&["delete", &name]);
    }
}

/// One real CRD, an object it accepts, and one it refuses with upstream's words.
struct Case {
    crd: &'static str,
    valid: &'static str,
    created: &'static str,
    invalid: &'static str,
    refusal: &'static str,
}

const CASES: &[Case] = &[
    Case {
        crd: "gateway-api/gateway.networking.k8s.io_httproutes.standard.v1.6.0.yaml",
        valid: "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  parentRefs: [{name: gateway}]\n  hostnames: [example.com]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: /}}]\n    backendRefs: [{name: web, port: 8080}]\n",
        created: "httproute.gateway.networking.k8s.io/web created",
        invalid: "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: broken, namespace: default}\nspec:\n  hostnames: [\"Not_A_Host\"]\n  rules:\n  - matches: [{path: {type: PathPrefix, value: no-slash}}]\n    filters: [{type: RequestRedirect}]\n    backendRefs: [{name: web, port: 70000}]\n",
        refusal: "The HTTPRoute \"broken\" is invalid: \n\
* spec.hostnames[0]: Invalid value: \"Not_A_Host\": spec.hostnames[0] in body should match '^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'\n\
* spec.rules[0].backendRefs[0].port: Invalid value: 70000: spec.rules[0].backendRefs[0].port in body should be less than or equal to 65535\n\
* spec.rules[0].filters[0]: Invalid value: \"object\": filter.requestRedirect must be specified for RequestRedirect filter.type\n\
* spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']\n",
    },
    Case {
        crd: "cluster-api/cluster.x-k8s.io_clusters.v1.12.4.yaml",
        valid: "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: workload, namespace: default}\nspec:\n  clusterNetwork:\n    pods: {cidrBlocks: [192.168.0.0/16]}\n",
        created: "cluster.cluster.x-k8s.io/workload created",
        invalid: "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: broken, namespace: default}\nspec:\n  topology:\n    classRef: {name: quick-start}\n    version: v1.33.0\n    controlPlane:\n      healthCheck:\n        checks:\n          unhealthyMachineConditions:\n          - {type: Ready, status: \"False\", timeoutSeconds: 300}\n",
        refusal: "The Cluster \"broken\" is invalid: spec.topology.controlPlane.healthCheck.checks.unhealthyMachineConditions[0].type: Invalid value: \"string\": type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated\n",
    },
    Case {
        crd: "cert-manager/certificates.cert-manager.io.v1.5.0.yaml",
        valid: "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: web, namespace: default}\nspec:\n  secretName: web-tls\n  issuerRef: {name: ca-issuer, kind: ClusterIssuer}\n  dnsNames: [example.com]\n",
        created: "certificate.cert-manager.io/web created",
        invalid: "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: broken, namespace: default}\nspec:\n  issuerRef: {name: ca-issuer}\n  privateKey: {algorithm: DSA}\n  dnsNames: example.com\n",
        refusal: "The Certificate \"broken\" is invalid: \n\
* spec.dnsNames: Invalid value: \"string\": spec.dnsNames in body must be of type array: \"string\"\n\
* spec.privateKey.algorithm: Unsupported value: \"DSA\": supported values: \"RSA\", \"ECDSA\", \"Ed25519\"\n\
* spec.secretName: Required value\n",
    },
    Case {
        crd: "prometheus-operator/monitoring.coreos.com_prometheuses.v0.93.0.yaml",
        valid: "apiVersion: monitoring.coreos.com/v1\nkind: Prometheus\nmetadata: {name: main, namespace: default}\nspec:\n  replicas: 2\n  serviceMonitorSelector: {}\n",
        created: "prometheus.monitoring.coreos.com/main created",
        invalid: "apiVersion: monitoring.coreos.com/v1\nkind: Prometheus\nmetadata: {name: broken, namespace: default}\nspec:\n  replicas: 2\n  shardingStrategy:\n    topology: {values: [zone-a]}\n",
        refusal: "The Prometheus \"broken\" is invalid: spec.shardingStrategy: Invalid value: \"object\": topology can only be defined when mode is set to 'Topology'\n",
    },
    Case {
        crd: "karpenter/karpenter.sh_nodeclaims.v1.14.1.yaml",
        valid: "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: worker}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements:\n  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n",
        created: "nodeclaim.karpenter.sh/worker created",
        invalid: "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: broken}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements:\n  - {key: karpenter.sh/custom, operator: In, values: []}\n",
        refusal: "The NodeClaim \"broken\" is invalid: \n\
* spec.requirements: Invalid value: \"array\": requirements with operator 'In' must have a value defined\n\
* spec.requirements[0].key: Invalid value: \"string\": label domain \"karpenter.sh\" is restricted\n",
    },
];

/// Applies a corpus CRD server-side and waits until it is served.
fn install(k: &Kubectl, file: &str) {
    let crd = corpus().join("real").join(file);
    let applied = k.run(&["apply", "--server-side", "-f", crd.to_str().unwrap()]);
    assert_eq!(applied.code, 0, "{file}: {applied:?}");
    let name = applied.stdout.split_whitespace().next().unwrap().to_string();
    k.ok(&["wait", "--for", "condition=established", "--timeout=20s", &name]);
}

fn real_operators_objects_validate_with_upstream_messages(backend: Backend) {
    with_each_kubectl(backend, real_operators_objects);
}

fn real_operators_objects(k: &Kubectl) {
    for case in CASES {
        install(k, case.crd);

        assert_eq!(k.apply(case.valid).stdout.trim(), case.created, "{}", case.crd);
        let refused = k.run_with(&["apply", "-f", "-"], Some(case.invalid));
        assert_eq!(refused.code, 1, "{}: {refused:?}", case.crd);
        assert_eq!(refused.stderr, case.refusal, "{}: {}", k.name(), case.crd);
    }
}

fn kubectl_scale_and_explain_work_on_a_real_crd(backend: Backend) {
    with_each_kubectl(backend, scale_and_explain);
}

fn scale_and_explain(k: &Kubectl) {
    install(k, "prometheus-operator/monitoring.coreos.com_prometheuses.v0.93.0.yaml");
    k.apply(CASES[3].valid);

    // Prometheus scales its shards: `subresources.scale.specReplicasPath` is `.spec.shards`.
    assert_eq!(
        k.ok(&["scale", "prometheus", "main", "--replicas=3"]).stdout.trim(),
        "prometheus.monitoring.coreos.com/main scaled"
    );
    assert_eq!(k.ok(&["get", "prometheus", "main", "-o", "jsonpath={.spec.shards} {.spec.replicas}"]).stdout, "3 2");
    let raw = k.ok(&["get", "--raw", "/apis/monitoring.coreos.com/v1/namespaces/default/prometheuses/main/scale"]);
    let scale: serde_json::Value = serde_json::from_str(&raw.stdout).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 3);
    // A precondition that does not hold is refused; one that holds applies.
    let stale = k.run(&["scale", "prometheus", "main", "--replicas=5", "--current-replicas=2"]);
    assert_eq!(stale.code, 1, "{stale:?}");
    k.ok(&["scale", "prometheus", "main", "--replicas=5", "--current-replicas=3"]);
    assert_eq!(k.ok(&["get", "prometheus", "main", "-o", "jsonpath={.spec.shards}"]).stdout, "5");

    // `kubectl explain` reads the published OpenAPI: nested fields with their descriptions.
    let explained = k.ok(&["explain", "prometheus.spec.shardingStrategy"]);
    assert!(explained.stdout.starts_with("GROUP:      monitoring.coreos.com\nKIND:       Prometheus\nVERSION:    v1\n\nFIELD: shardingStrategy <Object>"), "{}", explained.stdout);
    assert!(explained.stdout.contains("FIELDS:\n  mode\t<string>"), "{}", explained.stdout);
}

fn server_side_apply_is_idempotent_conflicts_and_forces(backend: Backend) {
    with_each_kubectl(backend, server_side_apply);
}

fn server_side_apply(k: &Kubectl) {
    install(k, "gateway-api/gateway.networking.k8s.io_httproutes.standard.v1.6.0.yaml");
    let apply = |manager: &str, extra: &[&str], yaml: &str| {
        let mut args = vec!["apply", "--server-side", "--field-manager", manager];
        args.extend(extra);
        args.extend(["-f", "-"]);
        k.run_with(&args, Some(yaml))
    };
    let route = CASES[0].valid;

    // Twice is idempotent: the second apply writes nothing.
    assert_eq!(apply("ops", &[], route).stdout.trim(), "httproute.gateway.networking.k8s.io/web serverside-applied");
    let version = || k.ok(&["get", "httproute", "web", "-o", "jsonpath={.metadata.resourceVersion}"]).stdout;
    let before = version();
    assert_eq!(apply("ops", &[], route).code, 0);
    assert_eq!(version(), before);
    let managed = k.json(&["get", "httproute", "web", "--show-managed-fields"]);
    let entries = managed["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["manager"], "ops");
    assert_eq!(entries[0]["operation"], "Apply");
    assert_eq!(
        entries[0]["fieldsV1"],
        serde_json::json!({"f:spec": {"f:hostnames": {}, "f:parentRefs": {}, "f:rules": {}}})
    );

    // Another manager that changes an owned field conflicts, in upstream's words.
    let hostnames = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\nspec:\n  hostnames: [other.example.com]\n";
    let refused = apply("dns", &[], hostnames);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.starts_with("error: Apply failed with 1 conflict: conflict with \"ops\": .spec.hostnames\nPlease review the fields above--they currently have other managers."),
        "{}",
        refused.stderr
    );
    // Forced, it takes the field over.
    assert_eq!(apply("dns", &["--force-conflicts"], hostnames).code, 0);
    let taken = k.json(&["get", "httproute", "web", "--show-managed-fields"]);
    assert_eq!(taken["spec"]["hostnames"], serde_json::json!(["other.example.com"]));
    let mut owners: Vec<(String, serde_json::Value)> = taken["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap().to_string(), e["fieldsV1"].clone()))
        .collect();
    owners.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        owners,
        [
            ("dns".to_string(), serde_json::json!({"f:spec": {"f:hostnames": {}}})),
            ("ops".to_string(), serde_json::json!({"f:spec": {"f:parentRefs": {}, "f:rules": {}}})),
        ]
    );

    // A field its only manager stops applying is removed.
    let nothing =
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: default}\n";
    assert_eq!(apply("dns", &[], nothing).code, 0);
    let pruned = k.json(&["get", "httproute", "web"]);
    assert!(pruned["spec"].get("hostnames").is_none(), "{pruned}");
    assert_eq!(pruned["spec"]["parentRefs"][0]["name"], "gateway");

    // A client-side edit takes the fields it changes as an `Update` manager.
    k.ok(&["label", "httproute", "web", "tier=edge"]);
    let labelled = k.json(&["get", "httproute", "web", "--show-managed-fields"]);
    let label_owner = labelled["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["fieldsV1"].pointer("/f:metadata/f:labels/f:tier").is_some())
        .cloned()
        .expect("someone owns the label");
    assert_eq!(label_owner["operation"], "Update");
    assert_eq!(label_owner["manager"], "kubectl-label");
}

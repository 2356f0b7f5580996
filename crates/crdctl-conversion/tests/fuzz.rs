//! Conversion fuzzing in process: the example's CronTab conversion, fuzzed from the CRD alone,
//! shows each way it fails to bring an object back, shrunk to the smallest object.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;

use crdctl_conversion::fuzz::{self, Finding, InProcess, Options, Verdict};
use serde_json::{Value, json};

fn crontab_crd() -> crdctl_model::Crd {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/crontab/4-webhook.yaml");
    crdctl_model::load::load_file(&path).unwrap().remove(0)
}

fn options(seed: u64) -> Options {
    Options { seed, objects: 40, size: 3 }
}

fn find<'a>(report: &'a fuzz::Report, route: &[&str], path: &str, verdict: Verdict) -> &'a Finding {
    let route: Vec<String> = route.iter().map(|v| format!("example.com/{v}")).collect();
    report
        .findings
        .iter()
        .find(|f| f.route == route && f.path == path && f.verdict == verdict)
        .unwrap_or_else(|| panic!("no {verdict:?} {path} on {route:?} in {:#?}", report.findings))
}

/// The fields of an object outside its type and metadata.
fn content(object: &Value) -> Value {
    let mut object = object.clone();
    for key in ["apiVersion", "kind", "metadata"] {
        object.as_object_mut().unwrap().remove(key);
    }
    object
}

#[tokio::test]
async fn the_example_conversion_loses_what_its_design_cannot_hold() {
    let crd = crontab_crd();
    let report = fuzz::run(&crd, &InProcess(convert::convert_crontab), options(1), &[]).await.unwrap();
    assert_eq!(
        report.versions.iter().map(|v| v.version.as_str()).collect::<Vec<_>>(),
        ["example.com/v1", "example.com/v1beta1"]
    );
    assert!(report.versions.iter().all(|v| v.kept == 40 && v.rejected == 0), "{:?}", report.versions);
    assert_eq!(report.round_trips, 80);

    // A v1 CronTab with a host and no port comes back with an empty port, shrunk to the host.
    let port = find(&report, &["v1", "v1beta1", "v1"], ".port", Verdict::Defaulted);
    assert_eq!((&port.before, &port.after), (&None, &Some(json!(""))));
    assert_eq!(content(&port.object).as_object().unwrap().keys().collect::<Vec<_>>(), ["host"], "{}", port.object);
    // A v1beta1 hostPort without a colon is refused on the way to v1.
    let refused = find(&report, &["v1beta1", "v1", "v1beta1"], ".", Verdict::Refused);
    assert_eq!(
        refused.after,
        Some(json!("converting to example.com/v1: hostPort could not be parsed into a separate host and port"))
    );
    assert_eq!(content(&refused.object).as_object().unwrap().keys().collect::<Vec<_>>(), ["hostPort"]);
    // What neither version can hold of the other.
    let unrepresentable: Vec<(&str, &str, &str)> =
        report.unrepresentable.iter().map(|u| (u.from.as_str(), u.to.as_str(), u.path.as_str())).collect();
    assert_eq!(
        unrepresentable,
        [
            ("example.com/v1", "example.com/v1beta1", ".host"),
            ("example.com/v1", "example.com/v1beta1", ".port"),
            ("example.com/v1beta1", "example.com/v1", ".hostPort"),
        ]
    );
}

#[tokio::test]
async fn a_seed_gives_the_same_findings_and_a_lossless_conversion_none() {
    let crd = crontab_crd();
    let convert = InProcess(convert::convert_crontab);
    let once = serde_json::to_value(fuzz::run(&crd, &convert, options(9), &[]).await.unwrap()).unwrap();
    let again = serde_json::to_value(fuzz::run(&crd, &convert, options(9), &[]).await.unwrap()).unwrap();
    assert_eq!(once, again);

    // Two versions with the same schema, converted by changing apiVersion alone: nothing found.
    let versions: Vec<Value> = ["v1", "v2"]
        .map(|name| {
            json!({"name": name, "served": true, "storage": name == "v2",
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"type": "string", "enum": ["a", "b"]}}}}}}})
        })
        .into();
    let same = crdctl_model::Crd::from_value(
        "same.yaml",
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": versions}
        }),
    )
    .unwrap();
    let retag = InProcess(|mut object: Value, to: &str| {
        object["apiVersion"] = json!(to);
        Ok(object)
    });
    let report = fuzz::run(&same, &retag, options(3), &[]).await.unwrap();
    assert!(report.findings.is_empty() && report.unrepresentable.is_empty(), "{report:#?}");
    assert_eq!(report.round_trips, 80);

    // A conversion that reverses lists on the way to v2 is caught reordering them.
    let reverse = InProcess(|mut object: Value, to: &str| {
        if let Some(tags) =
            object.pointer_mut("/spec/tags").and_then(Value::as_array_mut).filter(|_| to.ends_with("/v2"))
        {
            tags.reverse();
        }
        Ok(object)
    });
    let report = fuzz::run(&same, &reverse, options(3), &[]).await.unwrap();
    let reordered = report.findings.iter().find(|f| f.verdict == Verdict::Reordered && f.path == ".spec.tags");
    let reordered = reordered.unwrap_or_else(|| panic!("{:#?}", report.findings));
    assert_eq!(reordered.route.len(), 3);
    assert_eq!(content(&reordered.object)["spec"].as_object().unwrap().keys().collect::<Vec<_>>(), ["tags"]);
}

/// A CRD of the corpus.
fn corpus_crd(file: &str) -> crdctl_model::Crd {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real").join(file);
    crdctl_model::load::load_file(&path).unwrap().remove(0)
}

/// A conversion that only sets `apiVersion`, with `bug` applied to objects on their way to
/// `v1beta1`.
fn planted(bug: fn(&mut Value)) -> InProcess<impl Fn(Value, &str) -> Result<Value, String>> {
    InProcess(move |mut object: Value, to: &str| {
        if to.ends_with("/v1beta1") {
            bug(&mut object);
        }
        Ok(object)
    })
}

fn hostnames(object: &mut Value) -> Option<&mut Vec<Value>> {
    object.pointer_mut("/spec/hostnames").and_then(Value::as_array_mut)
}

/// On a real CRD (gateway-api's HTTPRoute, v1alpha2 and v1beta1), each kind of planted loss is
/// found with a counterexample shrunk to the field it is about.
#[tokio::test]
async fn planted_losses_of_each_kind_are_found_on_a_corpus_crd() {
    let crd = corpus_crd("gateway-api/gateway.networking.k8s.io_httproutes.standard.v0.5.1.yaml");
    let drop = planted(|object| {
        object["spec"].as_object_mut().map(|spec| spec.remove("hostnames"));
    });
    let reorder = planted(|object| hostnames(object).into_iter().for_each(|names| names.reverse()));
    let default = planted(|object| {
        if let Some(spec) = object["spec"].as_object_mut().filter(|spec| !spec.contains_key("hostnames")) {
            spec.insert("hostnames".into(), json!(["default.example.com"]));
        }
    });
    let reformat = planted(|object| {
        for name in hostnames(object).into_iter().flatten() {
            *name = json!(format!("{}.", name.as_str().unwrap()));
        }
    });
    for (kind, report, verdict, path) in [
        ("drop", fuzz::run(&crd, &drop, options(5), &[]).await.unwrap(), Verdict::Lost, ".spec.hostnames"),
        ("reorder", fuzz::run(&crd, &reorder, options(5), &[]).await.unwrap(), Verdict::Reordered, ".spec.hostnames"),
        ("default", fuzz::run(&crd, &default, options(5), &[]).await.unwrap(), Verdict::Defaulted, ".spec.hostnames"),
        (
            "reformat",
            fuzz::run(&crd, &reformat, options(5), &[]).await.unwrap(),
            Verdict::Changed,
            ".spec.hostnames[0]",
        ),
    ] {
        let found = report.findings.iter().find(|f| f.verdict == verdict && f.path == path);
        let found = found.unwrap_or_else(|| panic!("{kind}: no {verdict:?} at {path} in {:#?}", report.findings));
        assert_eq!(found.route.len(), 3, "{kind}");
        // Shrunk: the spec keeps the field the finding is about and what the schema requires.
        let spec: Vec<&String> = found.object["spec"].as_object().unwrap().keys().collect();
        let expected: &[&str] = if verdict == Verdict::Defaulted { &[] } else { &["hostnames"] };
        assert_eq!(spec, expected, "{kind}: {}", found.object);
        if verdict != Verdict::Defaulted {
            let items = found.object["spec"]["hostnames"].as_array().unwrap().len();
            let smallest = match verdict {
                Verdict::Lost => 0,
                Verdict::Reordered => 2,
                _ => 1,
            };
            assert_eq!(items, smallest, "{kind}: {}", found.object);
        }
    }
}

/// A lossless conversion shows nothing in 10,000 objects of a real CRD with three versions.
#[tokio::test]
async fn a_lossless_conversion_shows_nothing_in_ten_thousand_objects() {
    let crd = corpus_crd("gatekeeper/constrainttemplate-customresourcedefinition.v3.23.0.yaml");
    let retag = InProcess(|object: Value, _: &str| Ok(object));
    let options = Options { seed: 11, objects: 3_334, size: 3 };
    let report = fuzz::run(&crd, &retag, options, &[]).await.unwrap();
    let kept: usize = report.versions.iter().map(|v| v.kept).sum();
    assert!(kept >= 10_000, "{:?}", report.versions);
    assert!(report.findings.is_empty(), "{:#?}", report.findings.first());
    assert_eq!(report.round_trips, kept * 4);
}

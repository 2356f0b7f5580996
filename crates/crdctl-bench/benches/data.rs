//! Data-aware upgrade safety (`crdctl check --objects/--live`): stored CronTabs judged against a
//! new CRD, next to the server's own create-path validation of the same objects.
//!
//! - Baseline: what the API server's create path does to a custom resource's body at the storage
//!   version — prune, default, then `crdctl_schema::check` (OpenAPI, list types, CEL) — on each
//!   object, in this process.
//! - Judge: `crdctl_safety::data::Judge` over the same objects, a page of 500 at a time as
//!   `--live` reads them: at every version the new CRD serves (here two: v1beta1 and v1, None
//!   conversion, which cannot lose data, so no round trip), prune, default, validate. Target:
//!   objects/s ≥ 0.8× the baseline.
//! - Both in five alternating runs per collection size; the medians, and the median of the
//!   five runs' ratios.
//! - Peak memory: the growth of this process's peak RSS while judging 10,000 and then 100,000
//!   objects (generated page by page, as a paged read holds them; the largest of the runs).
//!   Target: flat (within +20%).
//!
//! Run: `cargo bench -p crdctl-bench --bench data`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

#[path = "common/memory.rs"]
mod memory;

use std::time::Instant;

use crdctl_safety::data::{self, Conversion, StoredObject};
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PAGE: usize = 500;

/// Runs of each side per collection size.
const RUNS: usize = 5;

/// The seed's CronTab CRD at stage 3, tightened: `port` must be digits, `host` at most 63
/// characters, and a CEL rule on the object.
const NEW: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {host: {type: string, maxLength: 63}, port: {type: string, pattern: '^[0-9]+$'}}}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations: [{rule: 'self.host != \"\"'}]
        properties: {host: {type: string, maxLength: 63}, port: {type: string, pattern: '^[0-9]+$'}}
";

fn crontab(i: usize) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "CronTab",
        "metadata": {"name": format!("ct-{i:06}"), "namespace": "default", "uid": format!("uid-{i}"), "resourceVersion": i.to_string(),
            "creationTimestamp": "2026-12-01T10:00:00Z", "labels": {"app": "crontab", "shard": (i % 16).to_string()}},
        "host": format!("host-{i}.example.com"), "port": if i.is_multiple_of(100) { "http".to_string() } else { "8080".to_string() }})
}

fn page(start: usize, count: usize) -> Vec<StoredObject> {
    (start..(start + PAGE).min(count)).map(|i| StoredObject { value: crontab(i), location: None }).collect()
}

/// The server's create-path validation of every object: objects per second.
fn baseline(crd: &crdctl_model::load::Crd, count: usize) -> f64 {
    let schema = crdctl_schema::Schema::new(crd.schema(1).unwrap());
    let started = Instant::now();
    let mut invalid = 0;
    for start in (0..count).step_by(PAGE) {
        for stored in page(start, count) {
            let mut object = stored.value;
            crdctl_schema::prune(&mut object, &schema);
            crdctl_schema::default(&mut object, &schema);
            invalid += usize::from(!crdctl_schema::check(&object, None, &schema).errors.is_empty());
        }
    }
    assert_eq!(invalid, count / 100);
    count as f64 / started.elapsed().as_secs_f64()
}

/// Judges `count` objects a page at a time: objects per second and the peak RSS growth.
fn judge(crd: &crdctl_model::load::Crd, count: usize) -> (f64, u64) {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = memory::resident_kib("self");
    let started = Instant::now();
    let judge = data::Judge::new(crd, None);
    let mut findings = 0;
    for start in (0..count).step_by(PAGE) {
        let (found, judged) = judge.judge_locally(&mut page(start, count), &mut Conversion::None);
        assert_eq!(judged, PAGE.min(count - start));
        findings += found.len();
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    assert_eq!(findings, count / 100 * 2, "one bad port per hundred, at each served version");
    (rate, memory::peak_kib("self").saturating_sub(before))
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    let crd = crdctl_model::load::load_str("new.yaml", NEW).unwrap().remove(0);
    println!("stored CronTabs judged against a new CRD (2 served versions, None conversion)   objects/s");
    let mut grew = Vec::new();
    let mut targets = targets::Targets::default();
    for count in [10_000, 100_000] {
        // Alternating runs, medians: one run of 10,000 objects is over in a few milliseconds.
        let (mut servers, mut judgements, mut ratios, mut peak) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..RUNS {
            let server = baseline(&crd, count);
            let (judged, grew) = judge(&crd, count);
            servers.push(server);
            judgements.push(judged);
            ratios.push(judged / server);
            peak = peak.max(grew);
        }
        let (server, judged, ratio) = (median(servers), median(judgements), median(ratios));
        println!("  server create-path validation, {count:>7} objects                      {server:>9.0}");
        println!(
            "  judged at both served versions, {count:>7} objects                     {judged:>9.0}   {ratio:.2}× (target ≥ 0.8)"
        );
        targets.expect(ratio >= 0.8, format!("{count} objects judged at {ratio:.2}× the server's rate (≥ 0.8)"));
        grew.push(peak);
    }
    let flat = grew[1] as f64 <= grew[0] as f64 * 1.2 + 1024.0;
    println!(
        "peak RSS growth while judging: 10,000 objects {:.1} MiB, 100,000 objects {:.1} MiB ({}, target: within +20%)",
        grew[0] as f64 / 1024.0,
        grew[1] as f64 / 1024.0,
        if flat { "flat" } else { "NOT flat" }
    );
    targets.expect(flat, "peak RSS growth flat from 10,000 to 100,000 objects (within +20%)");
    targets.finish();
}

//! What validating a custom resource costs on the server, next to decoding it.
//!
//! For real CRDs with CEL rules (gateway-api HTTPRoute, Gateway; karpenter NodePool), an
//! object that exercises their rules is decoded from JSON, then run through what the server does
//! to every write at its version: pruning and defaulting, the OpenAPI schema (kube-openapi's
//! rules), list-type uniqueness and the CEL rules. Each step's median time per object is
//! reported with its ratio to the decode of the same object, measured in the same run; the CEL
//! share is reported separately. Schemas and rules are compiled once per CRD version, outside
//! the timings, as the server does.
//!
//! Then, how CEL's cost grows with the object: one object of 20 to 20,000 list items (1 KiB to
//! 1 MiB) under the same rules, each size beside its decode.
//!
//! Targets: every check together within 10× the decode, the CEL rules within 5×, for each
//! object; the benchmark exits 1 when one is missed.
//!
//! Run: `cargo bench -p crdctl-bench --bench validation`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

use std::path::Path;
use std::time::{Duration, Instant};

use crdctl_schema::{self as schema, Schema};
use serde_json::{Value, json};

/// The allocator the `crdctl` binary uses, so the numbers are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MIN_RUNS: usize = 200;
const MIN_TIME: Duration = Duration::from_millis(500);

fn median<T>(mut f: impl FnMut() -> T) -> Duration {
    let mut times = Vec::new();
    let started = Instant::now();
    loop {
        let t = Instant::now();
        std::hint::black_box(f());
        times.push(t.elapsed());
        if times.len() >= MIN_RUNS && started.elapsed() >= MIN_TIME {
            break;
        }
    }
    times.sort();
    times[times.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn http_route() -> Value {
    let rule = |i: usize| {
        json!({
            "matches": [
                {"path": {"type": "PathPrefix", "value": format!("/api/v{i}")}, "method": "GET",
                 "headers": [{"name": "x-tenant", "value": "blue"}], "queryParams": [{"name": "debug", "value": "1"}]},
                {"path": {"type": "Exact", "value": format!("/health{i}")}}
            ],
            "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-route", "value": format!("r{i}")}]}},
                {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": ["server"]}}
            ],
            "backendRefs": [{"name": format!("svc-{i}"), "port": 8080, "weight": 90}, {"name": format!("canary-{i}"), "port": 8080, "weight": 10}],
            "timeouts": {"request": "10s", "backendRequest": "5s"}
        })
    };
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "parentRefs": [{"name": "gateway", "sectionName": "https"}],
            "hostnames": ["example.com", "www.example.com"],
            "rules": (0..8).map(rule).collect::<Vec<_>>()
        }
    })
}

fn gateway() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gateway", "namespace": "default"},
        "spec": {
            "gatewayClassName": "example",
            "listeners": (0..6).map(|i| json!({
                "name": format!("https-{i}"), "protocol": "HTTPS", "port": 443, "hostname": format!("h{i}.example.com"),
                "tls": {"mode": "Terminate", "certificateRefs": [{"name": format!("cert-{i}")}]},
                "allowedRoutes": {"namespaces": {"from": "Same"}}
            })).collect::<Vec<_>>()
        }
    })
}

fn node_pool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]}
                ],
                "expireAfter": "720h"
            }},
            "limits": {"cpu": "1000"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                           "budgets": [{"nodes": "10%"}]}
        }
    })
}

fn main() {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");
    let cases = [
        ("gateway-api/gateway.networking.k8s.io_httproutes.standard.v1.6.0.yaml", "v1", http_route()),
        ("gateway-api/gateway.networking.k8s.io_gateways.standard.v1.6.0.yaml", "v1", gateway()),
        ("karpenter/karpenter.sh_nodepools.v0.37.7.yaml", "v1", node_pool()),
    ];
    println!(
        "{:<14} {:>6} {:>6} {:>9} {:>11} {:>9} {:>9} {:>9} {:>12}",
        "object", "bytes", "rules", "decode", "prune+dflt", "openapi", "cel", "check", "check/decode"
    );
    let mut targets = targets::Targets::default();
    for (file, version, object) in cases {
        let crd = &crdctl_model::load::load_file(&real.join(file)).unwrap()[0];
        let versions = crd.value["spec"]["versions"].as_array().unwrap();
        let node = versions.iter().find(|v| v["name"] == version).unwrap().pointer("/schema/openAPIV3Schema").unwrap();
        let compiled = Schema::new(node);
        let bytes = serde_json::to_vec(&object).unwrap();

        // The object must be valid, so every rule runs to the end.
        let mut admitted = object.clone();
        schema::prune(&mut admitted, &compiled);
        schema::default(&mut admitted, &compiled);
        let checked = schema::check(&admitted, None, &compiled);
        assert!(
            checked.errors.is_empty(),
            "{file}: {:?}",
            checked.errors.iter().map(ToString::to_string).collect::<Vec<_>>()
        );

        let decode = median(|| serde_json::from_slice::<Value>(&bytes).unwrap());
        let prune_default = median(|| {
            let mut copy = object.clone();
            schema::prune(&mut copy, &compiled);
            schema::default(&mut copy, &compiled);
            copy
        }) - median(|| object.clone());
        let openapi = median(|| schema::validate(&admitted, &compiled));
        let cel = median(|| schema::validate_rules(&admitted, None, &compiled));
        let check = median(|| schema::check(&admitted, None, &compiled));
        println!(
            "{:<14} {:>6} {:>6} {:>7.1}µs {:>9.1}µs {:>7.1}µs {:>7.1}µs {:>7.1}µs {:>11.1}x",
            object["kind"].as_str().unwrap(),
            bytes.len(),
            rules(&compiled),
            us(decode),
            us(prune_default),
            us(openapi),
            us(cel),
            us(check),
            check.as_secs_f64() / decode.as_secs_f64()
        );
        let kind = object["kind"].as_str().unwrap();
        let all = (prune_default + check).as_secs_f64() / decode.as_secs_f64();
        targets.expect(all <= 10.0, format!("{kind}: every check {all:.1}× its decode (≤ 10)"));
        let rules = cel.as_secs_f64() / decode.as_secs_f64();
        targets.expect(rules <= 5.0, format!("{kind}: its CEL rules {rules:.1}× its decode (≤ 5)"));
    }
    sizes();
    targets.finish();
}

/// A list of `count` items, with rules on the list's owner and on each item.
fn listing(count: usize) -> Value {
    let items: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("item-{i:05}"), "weight": i % 100, "path": format!("/p/{}", i % 1000)}))
        .collect();
    json!({"apiVersion": "example.com/v1", "kind": "Listing", "metadata": {"name": "l"}, "spec": {"items": items}})
}

/// How the costs grow with the object: 1 KiB to 1 MiB of items under the same rules.
fn sizes() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.items.all(i, i.weight >= 0)"},
            {"rule": "size(self.items) <= 20000"}],
        "properties": {"items": {"type": "array", "maxItems": 20000, "items": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.name.startsWith('item-')"},
                {"rule": "!has(self.path) || self.path.startsWith('/')"}],
            "properties": {"name": {"type": "string", "maxLength": 16}, "weight": {"type": "integer"},
                "path": {"type": "string", "maxLength": 16}}}}}}}});
    let compiled = Schema::new(&schema);
    println!("\nscale: one object of n items, 2 rules on the list's owner and 2 on each item");
    println!("{:>7} {:>9} {:>10} {:>10} {:>10} {:>12}", "items", "bytes", "decode", "cel", "cel/decode", "cel per KiB");
    for count in [20, 200, 2_000, 20_000] {
        let object = listing(count);
        let bytes = serde_json::to_vec(&object).unwrap();
        assert!(schema::validate_rules(&object, None, &compiled).errors.is_empty());
        let decode = median(|| serde_json::from_slice::<Value>(&bytes).unwrap());
        let cel = median(|| schema::validate_rules(&object, None, &compiled));
        println!(
            "{count:>7} {:>9} {:>8.1}µs {:>8.1}µs {:>9.1}x {:>10.2}µs",
            bytes.len(),
            us(decode),
            us(cel),
            cel.as_secs_f64() / decode.as_secs_f64(),
            us(cel) / (bytes.len() as f64 / 1024.0)
        );
    }
}

fn rules(schema: &Schema) -> usize {
    let additional = match &schema.additional_properties {
        Some(schema::Additional::Schema(s)) => rules(s),
        _ => 0,
    };
    schema.rules.len()
        + schema.properties.values().map(rules).sum::<usize>()
        + schema.items.as_deref().map_or(0, rules)
        + additional
}

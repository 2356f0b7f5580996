//! Upgrade-safety check time against YAML load time, per corpus pair.
//!
//! For each pair, loading (parse, positions, v1beta1 normalisation, typed view) and checking
//! (same-version and served-version comparison, ratcheting) each run repeatedly; the median is
//! reported with their ratio. The budget is a check under 25% of the load time on every pair.
//! Peak memory is measured once per pair in a fresh child process: the growth of its resident
//! high-water mark (VmHWM) during loading, and again during the check.
//!
//! Then, how the check grows with rules: an upgrade adding 1 to 1,000 rules to a CRD.
//!
//! Run: `cargo bench -p crdctl-bench --bench check`. Exits 1 if a pair is over budget.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

#[path = "common/memory.rs"]
mod memory;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The allocator the `crdctl` binary runs on, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUDGET: f64 = 0.25;
const MIN_RUNS: usize = 5;
const MIN_TIME: Duration = Duration::from_millis(300);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(idx) = args.iter().position(|a| a == "--memory") {
        return measure_memory(Path::new(&args[idx + 1]));
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/pairs");
    let mut pairs: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|err| panic!("{}: {err}", corpus.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    pairs.sort();
    println!(
        "{:<56} {:>9} {:>10} {:>10} {:>7} {:>10} {:>10}",
        "pair", "KiB", "load", "check", "ratio", "load peak", "check peak"
    );
    let mut targets = targets::Targets::default();
    let config = crdctl_safety::Config::default();
    for pair in pairs {
        let name = pair.file_name().unwrap().to_string_lossy().to_string();
        let old_bytes = std::fs::read(pair.join("old.yaml")).unwrap();
        let new_bytes = std::fs::read(pair.join("new.yaml")).unwrap();
        let load = || {
            let old = crdctl_model::load::load_bytes("old.yaml", &old_bytes).unwrap();
            let new = crdctl_model::load::load_bytes("new.yaml", &new_bytes).unwrap();
            (old, new)
        };
        let (load_peak, check_peak) = memory_in_child(&pair);
        let (load_time, (old, new)) = median(load);
        let (check_time, report) = median(|| crdctl_safety::check_all(&old, &new, &config));
        std::hint::black_box(report);
        let ratio = check_time.as_secs_f64() / load_time.as_secs_f64();
        let kib = (old_bytes.len() + new_bytes.len()) / 1024;
        println!(
            "{name:<56} {kib:>9} {:>8.2}ms {:>8.3}ms {:>6.1}% {:>7} KiB {:>7} KiB",
            ms(load_time),
            ms(check_time),
            ratio * 100.0,
            load_peak,
            check_peak
        );
        targets
            .expect(ratio < BUDGET, format!("{name}: check {:.1}% of load (< {:.0}%)", ratio * 100.0, BUDGET * 100.0));
    }
    rule_counts();
    targets.finish();
}

/// A CRD whose version schema has `rules` string fields, each with one rule of four kinds (a
/// size bound, a prefix, a pattern, a transition rule), in YAML as a person writes it; without
/// rules when `rules` is 0 for the installed side.
fn with_rules(fields: usize, rules: bool) -> String {
    let mut yaml = String::from(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n",
    );
    for i in 0..fields {
        let rule = match i % 4 {
            0 => format!("self.size() <= {}", 10 + i % 50),
            1 => "self.startsWith('w-') || self == ''".to_string(),
            2 => "self.matches('^[a-z0-9-]+$')".to_string(),
            _ => "self == oldSelf".to_string(),
        };
        yaml.push_str(&format!("              f{i}:\n                type: string\n                maxLength: 64\n"));
        if rules {
            yaml.push_str(&format!("                x-kubernetes-validations:\n                - rule: \"{rule}\"\n"));
        }
    }
    yaml
}

/// How the check grows with the rules a CRD adds: 1 to 1,000 rules, each size beside its load.
fn rule_counts() {
    println!("\nscale: a CRD upgrade adding n rules (one per string field)");
    println!("{:>6} {:>9} {:>10} {:>10} {:>7} {:>12}", "rules", "KiB", "load", "check", "ratio", "per rule");
    for count in [1, 10, 100, 1_000] {
        let (old_text, new_text) = (with_rules(count, false), with_rules(count, true));
        let load = || {
            let old = crdctl_model::load::load_str("old.yaml", &old_text).unwrap();
            let new = crdctl_model::load::load_str("new.yaml", &new_text).unwrap();
            (old, new)
        };
        let (load_time, (old, new)) = median(load);
        let (check_time, report) = median(|| crdctl_safety::check_all(&old, &new, &crdctl_safety::Config::default()));
        assert!(
            report.findings.iter().all(|f| !matches!(f.change, crdctl_safety::Change::ApiServerRefusal { .. })),
            "the rules compile"
        );
        println!(
            "{count:>6} {:>9} {:>8.2}ms {:>8.3}ms {:>6.1}% {:>10.1}µs",
            (old_text.len() + new_text.len()) / 1024,
            ms(load_time),
            ms(check_time),
            check_time.as_secs_f64() / load_time.as_secs_f64() * 100.0,
            check_time.as_secs_f64() * 1e6 / count as f64
        );
    }
}

/// Runs `f` at least MIN_RUNS times and for at least MIN_TIME; returns the median and a result.
fn median<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let started = Instant::now();
    let mut last;
    loop {
        let t = Instant::now();
        last = f();
        times.push(t.elapsed());
        if times.len() >= MIN_RUNS && started.elapsed() >= MIN_TIME {
            break;
        }
    }
    times.sort();
    (times[times.len() / 2], last)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs this benchmark again as `--memory PAIR` and reads the two peaks it prints.
fn memory_in_child(pair: &Path) -> (u64, u64) {
    let output =
        std::process::Command::new(std::env::current_exe().unwrap()).arg("--memory").arg(pair).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let mut numbers = text.split_whitespace().filter_map(|n| n.parse().ok());
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// In a fresh process: the resident growth while loading a pair, then while checking it.
fn measure_memory(pair: &Path) {
    let old_bytes = std::fs::read(pair.join("old.yaml")).unwrap();
    let new_bytes = std::fs::read(pair.join("new.yaml")).unwrap();
    reset_peak();
    let base = memory::resident_kib("self");
    let old = crdctl_model::load::load_bytes("old.yaml", &old_bytes).unwrap();
    let new = crdctl_model::load::load_bytes("new.yaml", &new_bytes).unwrap();
    let load_peak = memory::peak_kib("self").saturating_sub(base);
    reset_peak();
    let base = memory::resident_kib("self");
    let report = crdctl_safety::check_all(&old, &new, &crdctl_safety::Config::default());
    let check_peak = memory::peak_kib("self").saturating_sub(base);
    std::hint::black_box(report);
    println!("{load_peak} {check_peak}");
}

/// Resets VmHWM to the current resident size (Linux: writing 5 to clear_refs).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

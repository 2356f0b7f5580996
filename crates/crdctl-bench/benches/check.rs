//! Upgrade-safety check time against YAML load time, per corpus pair.
//!
//! For each pair, loading (parse, positions, v1beta1 normalisation, typed view) and checking
//! (same-version and served-version comparison, ratcheting) each run repeatedly; the median is
//! reported with their ratio. The budget is a check under 25% of the load time on every pair.
//! Peak memory is measured once per pair in a fresh child process: the growth of its resident
//! high-water mark (VmHWM) during loading, and again during the check.
//!
//! Run: `cargo bench -p crdctl-bench --bench check`. Exits 1 if a pair is over budget.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

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
    let mut over = Vec::new();
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
        if ratio >= BUDGET {
            over.push(name);
        }
    }
    if !over.is_empty() {
        println!("over the {:.0}% budget: {}", BUDGET * 100.0, over.join(", "));
        std::process::exit(1);
    }
    println!("every pair: check under {:.0}% of load time", BUDGET * 100.0);
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

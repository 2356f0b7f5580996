//! Power loss at every operation of a scripted workload, and at random ones: the disk keeps
//! what was synced and none, a torn part, or a random choice of the rest; the store that boots
//! on it holds every acknowledged write (`crdctl_storage::redb::power_loss`). The workload's
//! small history window makes compaction run throughout.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]
#![allow(clippy::print_stdout, reason = "the number of crash points covered is part of the report")]

use crdctl_storage::redb::power_loss::{Disk, Survivors, Workload, check_recovery, run};

/// Random crash points tried besides every operation.
const RANDOM_CUTS: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_power_cut_at_any_operation() {
    let workload = Workload::scripted();
    let formatted = Disk::formatted().unwrap();
    let uncut = run(&workload, formatted.reboot(Survivors::None)).await;
    assert!(!uncut.disk.power_lost());
    assert!(uncut.writes >= 40, "the workload ran: {} writes", uncut.writes);
    let operations = uncut.disk.operations();

    let mut failures = Vec::new();
    let mut recoveries = 0u64;
    let mut cuts: Vec<(u64, u64)> = (1..=operations).map(|cut| (cut, cut)).collect();
    // Random cuts, each with its own reordering of the unsynced writes.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..RANDOM_CUTS {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        cuts.push(((seed >> 33) % operations + 1, seed));
    }
    for (cut, seed) in cuts {
        let trial = run(&workload, formatted.reboot(Survivors::None).with_power_cut_at(cut)).await;
        assert!(trial.disk.power_lost(), "the power went at operation {cut}");
        let unsynced = trial.disk.unsynced();
        let survivors = [
            Survivors::None,
            Survivors::Prefix { whole: unsynced.saturating_sub(1), torn: 2048 },
            Survivors::Prefix { whole: unsynced, torn: 0 },
            Survivors::Random(seed),
        ];
        for survivors in survivors {
            recoveries += 1;
            if let Err(err) = check_recovery(&trial, survivors, workload.window).await {
                failures.push(format!("power cut at operation {cut} ({survivors:?}): {err}"));
            }
        }
    }
    println!(
        "power loss: {operations} operations in the workload, {} crash points, {recoveries} recoveries checked",
        operations + RANDOM_CUTS
    );
    assert!(failures.is_empty(), "{} of {recoveries} recoveries failed:\n{}", failures.len(), failures.join("\n"));
}

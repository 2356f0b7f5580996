//! A workload read from the input, the power cut at an operation the input picks, the unsynced
//! writes kept as the input's seed reorders and tears them: the store that boots holds every
//! acknowledged write (`crdctl_storage::redb::power_loss`).
#![no_main]

use std::sync::LazyLock;

use crdctl_storage::redb::power_loss::{Disk, Survivors, Workload, check_recovery, run};

/// A disk holding a new store, as a data directory starts.
static FORMATTED: LazyLock<Disk> = LazyLock::new(|| Disk::formatted().expect("a new store opens"));

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((header, steps)) = data.split_first_chunk::<10>() else { return };
    let cut = u64::from(u16::from_le_bytes([header[0], header[1]])) + 1;
    let seed = u64::from_le_bytes([header[2], header[3], header[4], header[5], header[6], header[7], header[8], header[9]]);
    let workload = Workload::from_bytes(steps);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime starts");
    runtime.block_on(async {
        let trial = run(&workload, FORMATTED.reboot(Survivors::None).with_power_cut_at(cut)).await;
        let unsynced = trial.disk.unsynced();
        let torn = usize::try_from(seed % 8192).unwrap_or(0);
        for survivors in [Survivors::Random(seed), Survivors::Prefix { whole: unsynced.saturating_sub(1), torn }] {
            if let Err(err) = check_recovery(&trial, survivors, workload.window).await {
                panic!("power cut at operation {cut} of {} writes ({survivors:?}): {err}", workload.steps.len());
            }
        }
    });
});

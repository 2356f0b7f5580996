//! Two CRDs (the input split at its first NUL byte, or one mutated against itself) → the
//! upgrade-safety check in both dialects.
#![no_main]

use crdctl_safety::{Config, Dialect, Severity};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (old, new) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let (Ok(old), Ok(new)) =
        (crdctl_model::load::load_bytes("old.yaml", old), crdctl_model::load::load_bytes("new.yaml", new))
    else {
        return;
    };
    let report = crdctl_safety::check_all(&old, &new, &Config::default());
    for dialect in [Dialect::Olm, Dialect::Crdify] {
        for severity in [Severity::Warning, Severity::Error] {
            let _ = crdctl_safety::dialect::lines(&report, dialect, severity);
        }
    }
});

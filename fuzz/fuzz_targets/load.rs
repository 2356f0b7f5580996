//! YAML or JSON bytes → load (positions, normalisation) → the API server's validation.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(crds) = crdctl_model::load::load_bytes("fuzz.yaml", data) {
        for crd in &crds {
            for violation in crdctl_schema::definition::validate(crd) {
                // Every violation can be located.
                let _ = crd.position(&violation.pointer);
            }
            let _ = crdctl_model::normalize::prepare_for_v1_create(&mut crd.value.clone());
        }
    }
});

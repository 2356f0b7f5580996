//! Two JSON objects split at the first NUL: a Deployment and a strategic merge patch, applied
//! with the Deployment's schema from upstream's document. Any input gets a result or an error,
//! never a panic; a patch that applies to an object applies the same way again (a strategic
//! merge patch is idempotent, as upstream's three-way patches rely on) unless it deletes or
//! replaces with directives.
#![no_main]

use crdctl_schema::strategic_merge;
use crdctl_server::registry::builtin::documents;
use serde_json::{Map, Value};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|b| *b == 0) else { return };
    let (original, patch) = (&data[..split], &data[split + 1..]);
    let (Ok(original), Ok(patch)) =
        (serde_json::from_slice::<Map<String, Value>>(original), serde_json::from_slice::<Map<String, Value>>(patch))
    else {
        return;
    };
    let schema = documents::compiled("apps", "v1", "Deployment").expect("the vendored document has Deployments");
    let Ok(once) = strategic_merge::apply(original, patch.clone(), schema) else { return };
    if serde_json::to_string(&patch).is_ok_and(|text| text.contains('$')) {
        return;
    }
    let twice = strategic_merge::apply(once.clone(), patch, schema).expect("what applied once applies again");
    assert_eq!(twice, once);
});

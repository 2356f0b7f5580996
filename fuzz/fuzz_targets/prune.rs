//! A stored object → pruned and defaulted as text (what a list reads) and as values (what a
//! get reads): the same object, keys in the same order, and refused alike (but for scalars
//! text copies without decoding them); and whether reading changes it is told without reading it.
#![no_main]

use std::sync::LazyLock;

use crdctl_schema::{Schema, default, prune, prune_and_default_change, prune_and_default_json};
use serde_json::Value;

/// The schema of the unit test that checks the same on chosen documents.
static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    let schema = include_str!("../../crates/crdctl-schema/src/testdata/defaulting-schema.json");
    Schema::new(&serde_json::from_str(schema).expect("the schema is JSON"))
});

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = prune_and_default_json(data, &SCHEMA);
    let mut value = match serde_json::from_slice::<Value>(data) {
        Ok(value) => value,
        // Scalars are copied as text, not decoded: a number no decoder holds, or a string with a
        // lone surrogate escape, may pass (as in a converted list; the server never stores one,
        // and Go's decoder takes the second). Anything else values refuse, text refuses.
        Err(err) => {
            let message = err.to_string();
            let scalar = ["number out of range", "surrogate", "hex escape", "invalid unicode code point"];
            let copied = scalar.iter().any(|kind| message.contains(kind));
            assert!(text.is_err() || copied, "text read what values refuse ({err}): {:?}", String::from_utf8_lossy(data));
            return;
        }
    };
    let before = value.clone();
    prune(&mut value, &SCHEMA);
    default(&mut value, &SCHEMA);
    assert_eq!(prune_and_default_change(&before, &SCHEMA), value != before, "whether reading changes it");
    let text = text.expect("values read what text refuses");
    let read: Value = serde_json::from_slice(&text).expect("the text written is JSON");
    assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&value).unwrap());
});

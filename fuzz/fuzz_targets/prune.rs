//! A stored object → pruned and defaulted as text (what a list reads) and as values (what a
//! get reads): the same object, keys in the same order, and refused alike (but for scalars
//! text copies without decoding them).
#![no_main]

use std::sync::LazyLock;

use crdctl_model::schema::{Schema, default, prune, prune_and_default_json};
use serde_json::{Value, json};

static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    Schema::new(&json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"labels": {"type": "object", "default": {"tier": "web"}}}},
        "spec": {"type": "object", "default": {"replicas": null}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "label": {"type": "string", "nullable": true, "default": "x"},
            "ports": {"type": "array", "items": {"type": "object", "default": {"protocol": "UDP"},
                "properties": {"protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}}}},
            "env": {"type": "object", "additionalProperties": {"type": "object", "default": {"v": "d"},
                "properties": {"v": {"type": "string"}, "w": {"type": "string", "default": "w"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"known": {"type": "string", "default": "k"}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "t"}}},
                "spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }}))
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
    prune(&mut value, &SCHEMA);
    default(&mut value, &SCHEMA);
    let text = text.expect("values read what text refuses");
    let read: Value = serde_json::from_slice(&text).expect("the text written is JSON");
    assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&value).unwrap());
});

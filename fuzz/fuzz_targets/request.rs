//! What a client sends the server: a body as JSON and as YAML, and the text as label and field
//! selectors.
#![no_main]

use crdctl_server::negotiate::{BodyType, decode_body};
use crdctl_server::registry::builtin::namespace;
use crdctl_server::registry::event;
use crdctl_server::selector::{FieldSelector, LabelSelector};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = decode_body(data, BodyType::Json);
    let _ = decode_body(data, BodyType::Yaml);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(selector) = LabelSelector::parse(text) {
            let _ = selector.matches(&serde_json::json!({"metadata": {"labels": {"a": "b", "env": "prod"}}}));
        }
        let event = serde_json::json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "CronTab", "name": "a"},
            "source": {}, "reportingComponent": "c", "type": "Normal"});
        if let Ok(selector) = FieldSelector::parse(text, true, event::SELECTABLE_FIELDS) {
            let _ = selector.matches(&event);
        }
        let _ = FieldSelector::parse(text, false, namespace::SELECTABLE_FIELDS);
    }
});

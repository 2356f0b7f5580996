//! A webhook's answer → ConversionReview decoding → every check the API server makes on it.
#![no_main]

use crdctl_conversion::ReviewVersion;
use crdctl_conversion::response::{Sent, Shape, converted_objects, decode};
use serde_json::json;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let objects = [
        json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "default", "uid": "u-1", "labels": {"x": "y"}}, "hostPort": "h:1"}),
        json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": "b"}}),
    ];
    let gvk = "example.com/v1beta1, Kind=CronTab";
    for (version, shape) in [(ReviewVersion::V1, Shape::List), (ReviewVersion::V1beta1, Shape::Object)] {
        let Ok(review) = decode(data, gvk) else { return };
        let sent = Sent { version, uid: "uid-1", desired_api_version: "example.com/v1", shape, gvk };
        // What passes the checks is written out as JSON text: it must be a well-formed object.
        if let Ok(converted) = converted_objects(&sent, objects.iter().cloned().map(Into::into).collect(), review) {
            for object in converted {
                let text = serde_json::from_slice::<&serde_json::value::RawValue>(object.as_bytes());
                assert!(text.is_ok_and(|text| text.get().starts_with('{')), "{object:?}");
            }
        }
    }
});

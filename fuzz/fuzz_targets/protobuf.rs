//! A Kubernetes protobuf body → the envelope and the message, transcoded to JSON; what decodes
//! must encode back to bytes that decode to the same JSON.
#![no_main]

use crdctl_server::protobuf;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(object) = protobuf::decode(data) else { return };
    let encoded = protobuf::encode(&object).expect("a decoded object names a kind that has a message");
    let again = protobuf::decode(&encoded).expect("what the server encodes, it decodes");
    assert_eq!(again, object);
});

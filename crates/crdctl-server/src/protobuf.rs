//! The Kubernetes protobuf wire format (`application/vnd.kubernetes.protobuf`), which client-go,
//! kubectl's generators and Helm send for built-in kinds, transcoded to and from the JSON the
//! server stores.
//!
//! A body is upstream's envelope: the magic `k8s\0`, then a `runtime.Unknown` whose `typeMeta`
//! names the kind and whose `raw` is the object's message. Messages come from upstream's
//! `generated.proto` files of Kubernetes 1.33 (`upstream/proto`), compiled into descriptors at
//! build time by protox (pure Rust, so building needs no `protoc`) and read with prost-reflect;
//! one transcoder walks the wire format against those descriptors in each direction, without
//! generated types (JSON to protobuf in `write`, a serde visitor that reads a parsed value and
//! stored text alike). The few types whose JSON is not their message's fields are done once here:
//! `Time`/`MicroTime` (RFC 3339), `Duration` (Go's `1h2m3s`), `Quantity` (its string),
//! `IntOrString`, `RawExtension`/`FieldsV1`/apiextensions' `JSON` (embedded JSON bytes), and
//! `ExtraValue` (a list of strings).
//!
//! Go's protobuf encoder writes the zero value of every value field, where its JSON encoder
//! leaves optional (`omitempty`) ones out; only a pointer field (`replicas: 0`) or a required
//! one keeps a zero in JSON. Decoding drops the zero scalars and times the JSON side would not
//! have, reading which fields keep theirs from `upstream/proto/zero-fields.txt`. Unknown field numbers are skipped, as upstream's
//! generated decoders skip them.
//!
//! Embedded Go structs (`json:",inline"`, listed in `upstream/proto/inline-fields.txt`) are a
//! field of their own in the message and part of the parent's object in JSON: a
//! `SecretKeySelector`'s `name` is its field 1, a `LocalObjectReference`. A few fields are
//! named otherwise in JSON than in their message (`webhooks` is `Webhooks`; listed in
//! `renamed-fields.txt`). All three lists come from upstream's Go types (`go-fields.py`).
//!
//! Watch streams are frames of a 4-byte big-endian length and a `WatchEvent` message (no
//! envelope), whose `object.raw` is the object in the envelope.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost::bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint};
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use write::{write_bytes, write_nested, write_string};

mod write;

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

const MAGIC: &[u8; 4] = b"k8s\0";

const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const JSON: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON";

/// Whether a message is a Go `[]string` type of its own (a user's `extra` values), whose JSON
/// is the list and whose message holds it in `items`.
fn is_string_list(message: &str) -> bool {
    message.ends_with(".ExtraValue")
}

/// A list of fields, one `<message>.<field number>` a line (and, for renamed fields, a JSON
/// name after a space), read once into each message's fields (looked up without building a
/// key).
type FieldList = OnceLock<std::collections::HashMap<&'static str, Vec<(u32, &'static str)>>>;

fn fields_of(
    list: &'static FieldList,
    text: &'static str,
    message: &MessageDescriptor,
) -> &'static [(u32, &'static str)] {
    let fields = list.get_or_init(|| {
        let mut fields = std::collections::HashMap::<&'static str, Vec<(u32, &'static str)>>::new();
        for line in text.lines() {
            let (field, json_name) = line.split_once(' ').unwrap_or((line, ""));
            if let Some((message, number)) = field.rsplit_once('.')
                && let Ok(number) = number.parse()
            {
                fields.entry(message).or_default().push((number, json_name));
            }
        }
        fields
    });
    fields.get(message.full_name()).map_or(&[], Vec::as_slice)
}

fn listed(list: &'static FieldList, text: &'static str, message: &MessageDescriptor, field: &FieldDescriptor) -> bool {
    fields_of(list, text, message).iter().any(|(number, _)| *number == field.number())
}

/// The fields whose JSON name is not their protobuf name (`webhooks` is `Webhooks`).
fn renamed(message: &MessageDescriptor) -> &'static [(u32, &'static str)] {
    static RENAMED: FieldList = OnceLock::new();
    fields_of(&RENAMED, include_str!("../upstream/proto/renamed-fields.txt"), message)
}

/// A field's name in JSON.
fn json_name<'a>(message: &MessageDescriptor, field: &'a FieldDescriptor) -> &'a str {
    match renamed(message).iter().find(|(number, _)| *number == field.number()) {
        Some((_, json_name)) => json_name,
        None => field.name(),
    }
}

/// The field a JSON name names.
fn field_by_json_name(message: &MessageDescriptor, name: &str) -> Option<FieldDescriptor> {
    match renamed(message).iter().find(|(_, json_name)| *json_name == name) {
        Some((number, _)) => message.get_field(*number),
        None => message.get_field_by_name(name).filter(|field| json_name(message, field) == name),
    }
}

/// Whether JSON keeps the zero value of `message`'s `field`.
fn keeps_zero(message: &MessageDescriptor, field: &FieldDescriptor) -> bool {
    static KEPT: FieldList = OnceLock::new();
    listed(&KEPT, include_str!("../upstream/proto/zero-fields.txt"), message, field)
}

/// Whether `message`'s `field` is an embedded Go struct whose fields JSON holds in the
/// message's own object (`json:",inline"`: a `SecretKeySelector`'s `name` is its
/// `LocalObjectReference`'s).
fn inlined(message: &MessageDescriptor, field: &FieldDescriptor) -> bool {
    static INLINE: FieldList = OnceLock::new();
    listed(&INLINE, include_str!("../upstream/proto/inline-fields.txt"), message, field)
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(_) | Value::Object(_) => false,
    }
}

fn pool() -> Option<&'static DescriptorPool> {
    static POOL: OnceLock<Option<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.descriptors")).as_slice()).ok()
    })
    .as_ref()
}

/// The protobuf package of an API group.
fn package(group: &str) -> String {
    match group {
        "" => "k8s.io.api.core".into(),
        "meta.k8s.io" => "k8s.io.apimachinery.pkg.apis.meta".into(),
        "apiextensions.k8s.io" => "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions".into(),
        "apiregistration.k8s.io" => "k8s.io.kube_aggregator.pkg.apis.apiregistration".into(),
        _ => format!("k8s.io.api.{}", group.split('.').next().unwrap_or(group)),
    }
}

/// The message of `kind` in `apiVersion`, if upstream has one (custom resources have none);
/// `Status` and the other meta kinds any group version answers with are meta's.
pub fn message(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let pool = pool()?;
    pool.get_message_by_name(&format!("{}.{version}.{kind}", package(group)))
        .or_else(|| pool.get_message_by_name(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))
}

/// Why a protobuf body cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

fn error(message: impl Into<String>) -> DecodeError {
    DecodeError(message.into())
}

/// What an envelope holds: `typeMeta`, `raw`, `contentEncoding`.
#[derive(Default)]
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

/// Reads `runtime.Unknown` (fields: 1 `typeMeta` {1 `apiVersion`, 2 `kind`}, 2 `raw`,
/// 3 `contentEncoding`, 4 `contentType`) straight off the wire.
fn envelope(mut buf: &[u8]) -> Result<Envelope<'_>, DecodeError> {
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| error("a string is not valid UTF-8"));
    let mut envelope = Envelope::default();
    while buf.has_remaining() {
        match decode_key(&mut buf).map_err(wire_error)? {
            (1, WireType::LengthDelimited) => {
                let mut type_meta = length_delimited(&mut buf)?;
                while type_meta.has_remaining() {
                    match decode_key(&mut type_meta).map_err(wire_error)? {
                        (1, WireType::LengthDelimited) => {
                            envelope.api_version = text(length_delimited(&mut type_meta)?)?
                        }
                        (2, WireType::LengthDelimited) => envelope.kind = text(length_delimited(&mut type_meta)?)?,
                        (_, wire_type) => skip(wire_type, &mut type_meta)?,
                    }
                }
            }
            (2, WireType::LengthDelimited) => envelope.raw = length_delimited(&mut buf)?,
            (3, WireType::LengthDelimited) => envelope.content_encoding = text(length_delimited(&mut buf)?)?,
            (_, wire_type) => skip(wire_type, &mut buf)?,
        }
    }
    Ok(envelope)
}

/// Decodes a request body: the envelope, then its object as JSON with `apiVersion` and `kind`.
pub fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let raw = body.strip_prefix(MAGIC).ok_or_else(|| {
        error("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    })?;
    let Envelope { api_version, kind, raw, content_encoding } = envelope(raw)?;
    if !content_encoding.is_empty() {
        return Err(error(format!("unsupported content encoding {content_encoding:?}")));
    }
    let descriptor = message(&api_version, &kind)
        .ok_or_else(|| error(format!("no kind {kind:?} is registered for version {api_version:?}")))?;
    let mut object = to_json(&descriptor, raw)?;
    let fields = crate::object::fields_mut(&mut object);
    fields.insert("apiVersion".into(), json!(api_version));
    fields.insert("kind".into(), json!(kind));
    Ok(object)
}

/// The envelope of `object` (which names its `apiVersion` and `kind`); `None` when the kind has
/// no message.
pub fn encode(object: &Value) -> Option<Vec<u8>> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    envelope_of(api_version, kind, |descriptor, raw| write::message(descriptor, object, raw).is_ok())
}

/// [`encode`] of the JSON text of an object of `kind` in `api_version`, read once, without a
/// parsed copy.
pub fn encode_text(text: &[u8], api_version: &str, kind: &str) -> Option<Vec<u8>> {
    envelope_of(api_version, kind, |descriptor, raw| {
        write::message(descriptor, &mut serde_json::Deserializer::from_slice(text), raw).is_ok()
    })
}

/// [`encode_text`] of a stored object's text, as a get answers it in protobuf: the encoding of
/// the same text answered before is sent again rather than transcoded again, as kube-apiserver
/// keeps each object's serializations (its watch cache's `cachingObject`).
pub fn encode_stored(text: &[u8], api_version: &str, kind: &str) -> Option<bytes::Bytes> {
    let key = std::hash::BuildHasher::hash_one(&foldhash::fast::FixedState::default(), (api_version, kind, text));
    let encodings = ENCODINGS.get_or_init(Default::default);
    let same = |e: &&Encoding| e.text == text && e.kind == kind && e.api_version == api_version;
    if let Some(kept) = lock(encodings).by_key.get(&key).filter(same) {
        return Some(kept.encoded.clone());
    }
    let encoded = bytes::Bytes::from(encode_text(text, api_version, kind)?);
    let mut encodings = lock(encodings);
    if encodings.held > ENCODINGS_HELD {
        *encodings = Encodings::default();
    }
    encodings.held += text.len() + encoded.len();
    let kept = Encoding { api_version: api_version.into(), kind: kind.into(), text: text.to_vec(), encoded };
    let encoded = kept.encoded.clone();
    encodings.by_key.insert(key, kept);
    Some(encoded)
}

/// The encodings [`encode_stored`] keeps, by a hash of what they encode (checked whole on use,
/// so an entry is never another object's and never stale: a changed object is other text).
#[derive(Default)]
struct Encodings {
    by_key: std::collections::HashMap<u64, Encoding>,
    /// Bytes of text and encodings held.
    held: usize,
}

struct Encoding {
    api_version: String,
    kind: String,
    text: Vec<u8>,
    encoded: bytes::Bytes,
}

/// Past this many bytes held, [`encode_stored`] starts over.
const ENCODINGS_HELD: usize = 16 << 20;

static ENCODINGS: OnceLock<std::sync::Mutex<Encodings>> = OnceLock::new();

fn lock(encodings: &std::sync::Mutex<Encodings>) -> std::sync::MutexGuard<'_, Encodings> {
    encodings.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The envelope around the message `write` writes for `kind`, written in place.
fn envelope_of(
    api_version: &str,
    kind: &str,
    write: impl FnOnce(&MessageDescriptor, &mut Vec<u8>) -> bool,
) -> Option<Vec<u8>> {
    let descriptor = message(api_version, kind)?;
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(MAGIC);
    write_nested(1, &mut out, |type_meta| {
        write_string(1, api_version, type_meta);
        write_string(2, kind, type_meta);
        Ok::<_, ()>(true)
    })
    .ok()?;
    write_nested(2, &mut out, |raw| if write(&descriptor, raw) { Ok(true) } else { Err(()) }).ok()?;
    write_string(3, "", &mut out);
    write_string(4, "", &mut out);
    Some(out)
}

/// One watch frame: the length, then a `WatchEvent` of `type_` whose object is `object`'s
/// envelope; `None` when the object's kind has no message.
pub fn watch_frame(type_: &str, object: &Value) -> Option<Vec<u8>> {
    let enveloped = encode(object)?;
    let mut raw_extension = Vec::new();
    write_bytes(1, &enveloped, &mut raw_extension);
    let mut event = Vec::new();
    write_string(1, type_, &mut event);
    write_bytes(2, &raw_extension, &mut event);
    let mut frame = u32::try_from(event.len()).ok()?.to_be_bytes().to_vec();
    frame.extend(event);
    Some(frame)
}

// --- protobuf to JSON ---

fn wire_error(err: prost::DecodeError) -> DecodeError {
    error(format!("unable to decode protobuf: {err}"))
}

fn length_delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let len = usize::try_from(decode_varint(buf).map_err(wire_error)?).map_err(|_| error("length overflows"))?;
    let (bytes, rest) = buf.split_at_checked(len).ok_or_else(|| error("unexpected EOF"))?;
    *buf = rest;
    Ok(bytes)
}

fn skip(wire_type: WireType, buf: &mut &[u8]) -> Result<(), DecodeError> {
    let width = match wire_type {
        WireType::Varint => return decode_varint(buf).map(drop).map_err(wire_error),
        WireType::LengthDelimited => return length_delimited(buf).map(drop),
        WireType::SixtyFourBit => 8,
        WireType::ThirtyTwoBit => 4,
        WireType::StartGroup | WireType::EndGroup => return Err(error("groups are not supported")),
    };
    if buf.remaining() < width {
        return Err(error("unexpected EOF"));
    }
    buf.advance(width);
    Ok(())
}

/// One scalar's JSON, read from the wire.
fn scalar(kind: &Kind, wire_type: WireType, buf: &mut &[u8]) -> Result<Value, DecodeError> {
    let varint = |buf: &mut &[u8]| decode_varint(buf).map_err(wire_error);
    let fixed = |buf: &mut &[u8], width: usize| {
        if buf.remaining() < width {
            return Err(error("unexpected EOF"));
        }
        Ok(if width == 8 { buf.get_u64_le() } else { u64::from(buf.get_u32_le()) })
    };
    Ok(match (kind, wire_type) {
        (Kind::String, WireType::LengthDelimited) => {
            let bytes = length_delimited(buf)?;
            json!(std::str::from_utf8(bytes).map_err(|_| error("a string is not valid UTF-8"))?)
        }
        (Kind::Bytes, WireType::LengthDelimited) => json!(STANDARD.encode(length_delimited(buf)?)),
        (Kind::Bool, WireType::Varint) => json!(varint(buf)? != 0),
        (Kind::Int32 | Kind::Int64 | Kind::Enum(_), WireType::Varint) => {
            let value = varint(buf)? as i64;
            if matches!(kind, Kind::Int64) { json!(value) } else { json!(value as i32) }
        }
        (Kind::Uint32 | Kind::Uint64, WireType::Varint) => json!(varint(buf)?),
        (Kind::Sint32 | Kind::Sint64, WireType::Varint) => {
            let value = varint(buf)?;
            json!(((value >> 1) as i64) ^ -((value & 1) as i64))
        }
        (Kind::Double, WireType::SixtyFourBit) => json!(f64::from_bits(fixed(buf, 8)?)),
        (Kind::Float, WireType::ThirtyTwoBit) => json!(f64::from(f32::from_bits(fixed(buf, 4)? as u32))),
        (Kind::Fixed64 | Kind::Sfixed64, WireType::SixtyFourBit) => json!(fixed(buf, 8)?),
        (Kind::Fixed32 | Kind::Sfixed32, WireType::ThirtyTwoBit) => json!(fixed(buf, 4)?),
        _ => return Err(error(format!("wire type {wire_type:?} does not fit a {kind:?} field"))),
    })
}

/// A message's JSON.
fn to_json(descriptor: &MessageDescriptor, mut buf: &[u8]) -> Result<Value, DecodeError> {
    let mut fields = Map::new();
    while buf.has_remaining() {
        let (number, wire_type) = decode_key(&mut buf).map_err(wire_error)?;
        let Some(field) = descriptor.get_field(number) else {
            skip(wire_type, &mut buf)?;
            continue;
        };
        let name = json_name(descriptor, &field).to_string();
        if matches!(field.kind(), Kind::Message(_)) && wire_type != WireType::LengthDelimited {
            return Err(error(format!("wire type {wire_type:?} does not fit the message field {name:?}")));
        }
        match field.kind() {
            Kind::Message(entry) if field.is_map() => {
                let bytes = length_delimited(&mut buf)?;
                let (key, value) = map_entry(&entry, bytes)?;
                let map = fields.entry(name).or_insert_with(|| json!({}));
                crate::object::fields_mut(map).insert(key, value);
            }
            Kind::Message(message) if inlined(descriptor, &field) => {
                let bytes = length_delimited(&mut buf)?;
                if let Value::Object(inner) = to_json(&message, bytes)? {
                    fields.extend(inner);
                }
            }
            Kind::Message(message) => {
                let bytes = length_delimited(&mut buf)?;
                let value = special_to_json(&message, bytes)?;
                push(&mut fields, descriptor, &field, name, value);
            }
            kind if field.is_list()
                && wire_type == WireType::LengthDelimited
                && !matches!(kind, Kind::String | Kind::Bytes) =>
            {
                let mut packed = length_delimited(&mut buf)?;
                let element_wire = if matches!(kind, Kind::Double | Kind::Fixed64 | Kind::Sfixed64) {
                    WireType::SixtyFourBit
                } else if matches!(kind, Kind::Float | Kind::Fixed32 | Kind::Sfixed32) {
                    WireType::ThirtyTwoBit
                } else {
                    WireType::Varint
                };
                while packed.has_remaining() {
                    let value = scalar(&kind, element_wire, &mut packed)?;
                    push(&mut fields, descriptor, &field, name.clone(), value);
                }
            }
            kind => {
                let value =
                    scalar(&kind, wire_type, &mut buf).map_err(|err| error(format!("field {name:?}: {err}")))?;
                push(&mut fields, descriptor, &field, name, value);
            }
        }
    }
    Ok(Value::Object(fields))
}

/// Sets (or, for a list, appends) a field's value; a zero time, and a zero scalar JSON would
/// not have, are left out.
fn push(
    fields: &mut Map<String, Value>,
    message: &MessageDescriptor,
    field: &FieldDescriptor,
    name: String,
    value: Value,
) {
    if field.is_list() {
        if let Value::Array(items) = fields.entry(name).or_insert_with(|| json!([])) {
            items.push(value);
        }
        return;
    }
    if value.is_null() || (is_zero(&value) && !keeps_zero(message, field)) {
        fields.remove(&name);
        return;
    }
    fields.insert(name, value);
}

fn map_entry(entry: &MessageDescriptor, bytes: &[u8]) -> Result<(String, Value), DecodeError> {
    let decoded = to_json(entry, bytes)?;
    let key = match decoded.get("key") {
        Some(Value::String(key)) => key.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let value = decoded.get("value").cloned().unwrap_or_else(|| match entry.map_entry_value_field().kind() {
        Kind::String | Kind::Bytes => json!(""),
        Kind::Message(_) => json!({}),
        Kind::Bool => json!(false),
        _ => json!(0),
    });
    Ok((key, value))
}

/// A message's JSON, for the types whose JSON is not their fields; `Null` for a zero time.
fn special_to_json(message: &MessageDescriptor, bytes: &[u8]) -> Result<Value, DecodeError> {
    let name = message.full_name();
    let decoded = to_json(message, bytes)?;
    let embedded = |field: &str| -> Result<Value, DecodeError> {
        let Some(raw) = decoded.get(field).and_then(Value::as_str) else { return Ok(Value::Null) };
        let raw = STANDARD.decode(raw).map_err(|err| error(err.to_string()))?;
        if raw.starts_with(MAGIC) {
            return decode(&raw);
        }
        serde_json::from_slice(&raw).map_err(|err| error(format!("embedded JSON: {err}")))
    };
    Ok(match name {
        TIME | MICRO_TIME => {
            let seconds = decoded.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            let nanos = decoded.get("nanos").and_then(Value::as_i64).unwrap_or(0);
            if seconds == 0 && nanos == 0 {
                return Ok(Value::Null);
            }
            json!(format_time(seconds, nanos, name == MICRO_TIME))
        }
        DURATION => {
            json!(crdctl_model::go::format_duration(decoded.get("duration").and_then(Value::as_i64).unwrap_or(0)))
        }
        QUANTITY => decoded.get("string").cloned().unwrap_or(json!("0")),
        INT_OR_STRING => match decoded.get("type").and_then(Value::as_i64) {
            Some(1) => decoded.get("strVal").cloned().unwrap_or(json!("")),
            _ => decoded.get("intVal").cloned().unwrap_or(json!(0)),
        },
        name if is_string_list(name) => decoded.get("items").cloned().unwrap_or_else(|| json!([])),
        RAW_EXTENSION | JSON => embedded("raw")?,
        FIELDS_V1 => embedded("Raw")?,
        _ => decoded,
    })
}

fn format_time(seconds: i64, nanos: i64, micro: bool) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let (y, mo, d, h, mi, s) = (at.year(), u8::from(at.month()), at.day(), at.hour(), at.minute(), at.second());
    if micro {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z", nanos / 1000)
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(object: Value) -> Value {
        decode(&encode(&object).unwrap()).unwrap()
    }

    #[test]
    fn a_stored_objects_encoding_is_sent_again_until_its_text_changes() {
        let object = |value: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "resourceVersion": "7"},
                "data": {"a": value}})
        };
        let text = serde_json::to_vec(&object("one")).unwrap();
        let first = encode_stored(&text, "v1", "ConfigMap").unwrap();
        assert_eq!(first, encode(&object("one")).unwrap());
        let again = encode_stored(&text, "v1", "ConfigMap").unwrap();
        assert_eq!(again.as_ptr(), first.as_ptr(), "the same bytes, not encoded again");
        let changed = encode_stored(&serde_json::to_vec(&object("two")).unwrap(), "v1", "ConfigMap").unwrap();
        assert_eq!(changed, encode(&object("two")).unwrap());
        assert_eq!(encode_stored(&text, "v1", "NoSuchKind"), None, "a kind without a message");
    }

    #[test]
    fn objects_round_trip_with_their_special_types() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "generation": 2,
                "creationTimestamp": "2026-12-03T08:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}, "time": "2026-12-03T08:00:00Z"}]},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx",
                    "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}, "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
            "status": {}
        });
        assert_eq!(round_trip(deployment.clone()), deployment);
        let text = serde_json::to_vec(&deployment).unwrap();
        assert_eq!(encode_text(&text, "apps/v1", "Deployment"), encode(&deployment), "text and value transcode alike");
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "eA=="}, "immutable": false});
        assert_eq!(round_trip(secret.clone()), secret, "a pointer field keeps its zero");
        // What Go's encoder writes for value fields left at zero is not JSON's.
        let written = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": 0, "namespace": ""},
            "spec": {"minReadySeconds": 0, "paused": false, "revisionHistoryLimit": 0,
                "template": {"spec": {"containers": [{"name": "c", "stdin": false, "ports": [{"containerPort": 0, "hostPort": 0}]}]}}}});
        let read = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"revisionHistoryLimit": 0, "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 0}]}]}}}});
        assert_eq!(round_trip(written), read);
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "eventTime": "2026-12-03T08:00:00.123456Z", "reason": "Started", "regarding": {"kind": "Pod", "name": "p"}});
        assert_eq!(round_trip(event.clone()), event);
    }

    #[test]
    fn the_envelope_is_upstreams() {
        let bytes = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})).unwrap();
        // `k8s\0`, then Unknown.typeMeta (field 1) = {apiVersion: "v1", kind: "ConfigMap"}.
        assert_eq!(&bytes[..4], b"k8s\0");
        assert_eq!(&bytes[4..21], b"\x0a\x0f\x0a\x02v1\x12\x09ConfigMap");
        assert_eq!(
            decode(b"k9s\0").unwrap_err().to_string(),
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        );
        assert!(decode(&bytes[..bytes.len() - 3]).is_err(), "truncated");
        let custom = json!({"apiVersion": "example.com/v1", "kind": "CronTab"});
        assert!(encode(&custom).is_none(), "custom resources have no message");
    }

    /// The Pod (`kubectl describe` printed `in secret ''`), a webhook configuration whose
    /// JSON names its list otherwise than its message, and a binding's rules two embeddings deep.
    #[test]
    fn embedded_and_renamed_fields_round_trip() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}}}], "volumes": [{"name": "v", "configMap": {"name": "cm"}}]}});
        let webhooks = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "w"}, "webhooks": [{"name": "w.example.com", "rules": [{"operations": ["CREATE"], "apiGroups": [""], "resources": ["pods"]}]}]});
        let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b"}, "spec": {"matchResources": {"resourceRules": [{"resourceNames": ["x"], "operations": ["UPDATE"], "resources": ["deployments"]}]}}});
        for object in [pod, webhooks, binding] {
            assert_eq!(round_trip(object.clone()), object);
        }
    }

    /// A deterministic stream of numbers (xorshift), so every run generates the same objects.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// A value for `schema` as Go's JSON encoder could have written it: every scalar non-zero
    /// (zeros are a separate rule, tested above), every list and map non-empty, about half of
    /// an object's properties, nothing below `depth` 0.
    fn generate(schema: &crdctl_schema::Schema, rng: &mut Rng, depth: usize) -> Option<Value> {
        if schema.int_or_string {
            return Some(if rng.below(2) == 0 { json!(7) } else { json!("7%") });
        }
        if let Some(values) = &schema.enumeration {
            let values: Vec<&Value> = values.iter().filter(|v| !is_zero(v)).collect();
            if !values.is_empty() {
                return Some(values[rng.below(values.len())].clone());
            }
        }
        Some(match schema.types.first().map(String::as_str) {
            Some("string") => match schema.format_name.as_str() {
                "date-time" => json!("2026-12-03T08:00:00Z"),
                "byte" => json!("eA=="),
                _ => json!(format!("s{}", rng.below(100))),
            },
            Some("integer") => json!(1 + rng.below(100)),
            Some("number") => json!(1.5),
            Some("boolean") => json!(true),
            Some("array") if depth > 0 => {
                let items = schema.items.as_deref()?;
                let values: Vec<Value> =
                    (0..1 + rng.below(2)).filter_map(|_| generate(items, rng, depth - 1)).collect();
                if values.is_empty() {
                    return None;
                }
                Value::Array(values)
            }
            Some("object") if depth > 0 => {
                // An object of no known fields is embedded JSON (`RawExtension`, `FieldsV1`),
                // unless it is an empty struct.
                if schema.properties.is_empty() && schema.additional_properties.is_none() && schema.go_type.is_none() {
                    return Some(json!({"embedded": "json"}));
                }
                let mut fields = Map::new();
                // An object's type is its envelope's (or its list's); a nested one's is lost
                // in protobuf upstream too (`TypeMeta` has no field number).
                let whole_object = schema.properties.contains_key("metadata");
                for (name, property) in &schema.properties {
                    if whole_object && matches!(name.as_str(), "apiVersion" | "kind") {
                        continue;
                    }
                    if rng.below(2) == 0
                        && let Some(value) = generate(property, rng, depth - 1)
                    {
                        fields.insert(name.clone(), value);
                    }
                }
                if let Some(crdctl_schema::Additional::Schema(values)) = &schema.additional_properties {
                    for key in 0..1 + rng.below(2) {
                        if let Some(value) = generate(values, rng, depth - 1) {
                            fields.insert(format!("k{key}"), value);
                        }
                    }
                    // An empty map is no map to Go's encoder.
                    if fields.is_empty() {
                        return None;
                    }
                }
                Value::Object(fields)
            }
            _ => return None,
        })
    }

    /// Times compared as instants: a `MicroTime` comes back with its microseconds written out.
    fn instants(value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Ok(at) = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339) {
                    *text = at.unix_timestamp_nanos().to_string();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(instants),
            Value::Object(fields) => fields.values_mut().for_each(instants),
            _ => {}
        }
    }

    /// JSON to protobuf to JSON is the identity for every kind that has a message, over objects
    /// generated from the kind's OpenAPI schema: every field, embedded structs' fields
    /// (`SecretKeySelector.name`, `Volume`'s source, `Probe`'s handler) included.
    #[test]
    fn every_kind_round_trips_objects_generated_from_its_schema() {
        let mut kinds = 0;
        for resource in crate::registry::builtin::RESOURCES.iter() {
            let (api_version, kind) = (resource.api_version(), resource.kind);
            let (Some(schema), Some(_)) = (resource.schema(), message(&api_version, kind)) else { continue };
            // CRDs are served in JSON only.
            if kind == crdctl_model::crd::KIND {
                continue;
            }
            kinds += 1;
            for seed in 1..=12u64 {
                let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let Some(Value::Object(mut object)) = generate(schema, &mut rng, 12) else { continue };
                object.insert("apiVersion".into(), json!(api_version));
                object.insert("kind".into(), json!(kind));
                let mut expected = Value::Object(object);
                let encoded = encode(&expected).unwrap_or_else(|| panic!("{kind} does not encode"));
                let mut read = decode(&encoded).unwrap_or_else(|err| panic!("{kind}: {err}"));
                instants(&mut expected);
                instants(&mut read);
                assert_eq!(read, expected, "{api_version} {kind}, seed {seed}");
            }
        }
        assert!(kinds > 40, "only {kinds} kinds have a message");
    }
}
